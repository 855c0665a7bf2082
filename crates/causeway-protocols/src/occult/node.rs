//! An Occult server node (Fig. 4, Listing 2): the master of some shards and a slave of the
//! others, each shard with its shardstamp; writes at the master, asynchronous in-order
//! replication to the slaves, shard locks for transactions and their termination (§7).

mod checkpoint;
mod transfer;

use super::config::{Config, Flavor, Shards, FENCES_MAX, QUEUED_WRITES_MAX};
use super::cts::{Cts, Layout};
use super::msg::{
    Decision, Floor, Locked, Msg, ReadItem, Record, Refusal, ReplWrite, Version, Written,
};
use crate::kit::clock::Time;
use crate::kit::durability::Durability;
use crate::kit::keys::{KeyOrder, ListAsk};
use crate::kit::repl::{Received, ReplLog, Siblings};
use crate::kit::timers::Timers;
use crate::kit::twopc::{Answer, Decisions};
use crate::kit::txn::{effect_type, prepare_effects, typed};
use crate::params::NodeConfig;
use causeway_core::crdt::{ArbTs, Object, Op, Update};
use causeway_core::limits::REPLICATION_BATCH_MAX;
use causeway_core::{
    Addr, Ctx, DcId, Error, Key, Lsn, Nanos, NodeId, ObjType, OpId, PartitionId, ServerNode, TxnId,
    Vc,
};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Per-DC gauge names (the simulator averages a gauge over the nodes reporting it, so a
/// DC's own name gives that DC's figure).
const READS_AT: [&str; 8] = [
    "occult_reads_dc0",
    "occult_reads_dc1",
    "occult_reads_dc2",
    "occult_reads_dc3",
    "occult_reads_dc4",
    "occult_reads_dc5",
    "occult_reads_dc6",
    "occult_reads_dc7",
];
const STALE_AT: [&str; 8] = [
    "occult_stale_reads_dc0",
    "occult_stale_reads_dc1",
    "occult_stale_reads_dc2",
    "occult_stale_reads_dc3",
    "occult_stale_reads_dc4",
    "occult_stale_reads_dc5",
    "occult_stale_reads_dc6",
    "occult_stale_reads_dc7",
];
/// Most samples kept between two `take_samples` calls.
const SAMPLES_MAX: usize = 4_096;

/// How far ahead of the clock a persisted lease lets floors and shardstamps go.
const LEASE_SPAN_NS: Nanos = 1_000_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Timer {
    Replicate,
    Terminate,
    Resend,
}

/// A txn holding locks here (Listing 2 `prepKV`).
#[derive(Clone, Debug)]
struct Prepared {
    coord: NodeId,
    writes: Vec<(Key, Update, OpId)>,
    shards: Vec<u32>,
    since: Nanos,
    /// The lowest shardstamp promised to its writes (floors stay below it).
    ss_min: u64,
}

/// A single-key write waiting for its shard's lock.
type Queued = (Addr, u64, Key, Update, OpId, Option<Cts>, u64);

/// What waits for a durable record.
#[derive(Debug)]
pub enum After {
    Have {
        origin: DcId,
        upto: u64,
    },
    /// Our own stream is durable up to here (only durable writes replicate).
    Own(u64),
    Lease(u64),
    Decided(TxnId),
}

/// Counters for the stale-read rate and the metadata overhead (cumulative gauges).
#[derive(Clone, Debug, Default)]
struct Counters {
    reads: u64,
    stale: u64,
    retries: u64,
    fallbacks: u64,
    reply_meta_bytes: u64,
    reply_items: u64,
    object_meta_bytes: u64,
    objects_written: u64,
}

pub struct Node {
    cfg: NodeConfig,
    sect: Config,
    flavor: Flavor,
    shards: Shards,
    layout: Layout,
    me: NodeId,
    dc: DcId,
    store: BTreeMap<Key, Version>,
    /// The store's keys in listing order (`kit::keys`), a cache.
    listed: KeyOrder,
    stamps: BTreeMap<u32, u64>,
    locks: BTreeMap<u32, TxnId>,
    prepared: BTreeMap<TxnId, Prepared>,
    queued: VecDeque<Queued>,
    decisions: Decisions<Decision>,
    fences: BTreeSet<TxnId>,
    fence_order: VecDeque<TxnId>,
    seq: u64,
    durable_seq: u64,
    log: ReplLog<ReplWrite>,
    sibs: Siblings,
    received: Received,
    durable_have: Vec<u64>,
    announce: BTreeSet<DcId>,
    durability: Durability<Msg, After>,
    timers: Timers<Timer>,
    clock: Nanos,
    time: Time,
    /// Per master DC: every write of a shard at or below the floor's bound for it is
    /// applied here (the latest floor that holds, `on_repl`).
    floors: Vec<Floor>,
    /// Shards we master whose last write (its stream number here) is applied but not yet
    /// durable: a read of them waits (`on_read`).
    unsynced: BTreeMap<u32, u64>,
    counters: Counters,
    samples: Vec<(&'static str, u64)>,
    work: u64,
    /// State transfers to slaves and from masters (`transfer.rs`).
    transfers: transfer::Transfers,
    /// The `no-state-transfer` mutation.
    no_state_transfer: bool,
    /// The `floor-without-caps` mutation.
    floor_without_caps: bool,
}

impl Node {
    pub fn recover(
        cfg: NodeConfig,
        sect: Config,
        flavor: Flavor,
        records: &[Vec<u8>],
    ) -> Result<Node, String> {
        let topo = cfg.topology.clone();
        let me = cfg.node;
        let dc = topo.dc_of(me);
        let dcs = usize::from(topo.dcs);
        let mut node = Node {
            shards: Shards::new(&topo, sect.shards),
            layout: sect.layout(dcs),
            sect,
            flavor,
            me,
            dc,
            store: BTreeMap::new(),
            listed: KeyOrder::default(),
            stamps: BTreeMap::new(),
            locks: BTreeMap::new(),
            prepared: BTreeMap::new(),
            queued: VecDeque::new(),
            decisions: Decisions::default(),
            fences: BTreeSet::new(),
            fence_order: VecDeque::new(),
            seq: 0,
            durable_seq: 0,
            log: ReplLog::default(),
            sibs: Siblings::new(dc, topo.all_dcs()),
            received: Received::new(dc, dcs),
            durable_have: vec![0; dcs],
            announce: BTreeSet::new(),
            durability: Durability::starting_after(records.len() as Lsn),
            timers: Timers::default(),
            clock: 0,
            time: Time::default(),
            floors: vec![Floor::default(); dcs],
            unsynced: BTreeMap::new(),
            counters: Counters::default(),
            samples: Vec::new(),
            work: 0,
            transfers: transfer::Transfers::default(),
            no_state_transfer: flavor
                .mutation(cfg.params.mutation.as_deref())?
                .no_state_transfer,
            floor_without_caps: flavor
                .mutation(cfg.params.mutation.as_deref())?
                .floor_without_caps,
            cfg,
        };
        for (i, bytes) in records.iter().enumerate() {
            let record: Record = postcard::from_bytes(bytes)
                .map_err(|e| format!("{}: record {i} is corrupt: {e}", flavor.name()))?;
            node.replay(record);
        }
        // Chunks of a transfer whose end was never persisted: the master sends it again.
        node.transfers.incoming.clear();
        if !records.is_empty() {
            node.announce = node.sibs.ids().into_iter().collect();
        }
        Ok(node)
    }

    fn replay(&mut self, record: Record) {
        match record {
            Record::Write(w) => self.replay_write(w),
            Record::Remote {
                origin,
                upto,
                writes,
            } => {
                writes.iter().for_each(|w| self.apply(w));
                self.received.recovered(origin, upto);
                let have = &mut self.durable_have[usize::from(origin.0)];
                *have = (*have).max(upto);
            }
            Record::Prepared {
                txn,
                coord,
                writes,
                shards,
            } => self.recovered_prepared(txn, coord, writes, shards),
            Record::Decided {
                txn,
                decision,
                participants,
            } => self
                .decisions
                .recovered(txn, decision, Self::parts(&participants)),
            Record::Released { txn, fence } => {
                self.unlock(txn);
                if fence {
                    self.fence(txn);
                }
            }
            Record::Forgotten { txn } => self.decisions.forget(txn),
            Record::Lease(until) => self.time.recovered(until),
            Record::Checkpoint(ck) => self.restore(*ck),
            Record::TransferChunk { from, chunk } => self.transfers.replay_chunk(from, chunk),
            Record::TransferDone { from, id } => self.replay_transfer_done(from, id),
            Record::Committed { txn, writes } => {
                writes.into_iter().for_each(|w| self.replay_write(w));
                self.unlock(txn);
            }
        }
    }

    /// One of our own stream's writes, replayed.
    fn replay_write(&mut self, w: ReplWrite) {
        self.seq = self.seq.max(w.seq);
        self.durable_seq = self.seq;
        self.time.recovered(w.ss);
        self.apply(&w);
        self.log.add(self.dc, w);
    }

    /// A txn holding locks, as a `Prepared` record or a checkpoint gives it back.
    fn recovered_prepared(
        &mut self,
        txn: TxnId,
        coord: NodeId,
        writes: Vec<(Key, Update, OpId)>,
        shards: Vec<u32>,
    ) {
        for s in &shards {
            self.locks.insert(*s, txn);
        }
        let p = Prepared {
            coord,
            writes,
            shards,
            since: 0,
            ss_min: 0, // recovered: no floor above anything until it ends
        };
        self.prepared.insert(txn, p);
    }

    /// Participants keyed for `kit::twopc` (one "partition" per participant node).
    fn parts(nodes: &[NodeId]) -> BTreeMap<PartitionId, NodeId> {
        nodes.iter().map(|n| (PartitionId(n.0), *n)).collect()
    }

    fn is_master(&self, shard: u32) -> bool {
        self.shards.master_dc(shard) == self.dc
    }

    fn stamp(&self, shard: u32) -> u64 {
        self.stamps.get(&shard).copied().unwrap_or(0)
    }

    /// The shardstamp a read reports (Fig. 4 `read`): the shard's last write's, raised to
    /// the floor of the shard's master for this shard (every write at or below it is
    /// applied here; at the master itself, below the shardstamp promised to a prepared
    /// txn holding this shard).
    fn read_stamp(&self, shard: u32) -> u64 {
        let master = self.shards.master_dc(shard);
        let floor = if master == self.dc {
            let held = self.locks.get(&shard).and_then(|t| self.prepared.get(t));
            let mut cap = held.map_or(u64::MAX, |p| p.ss_min.saturating_sub(1));
            if self.floor_without_caps {
                cap = u64::MAX;
            }
            self.time.claimable().min(cap)
        } else {
            self.floors[usize::from(master.0)].get(shard)
        };
        self.stamp(shard).max(floor)
    }

    /// Per shard, the highest shardstamp below every write we may still issue or have
    /// issued past our stream's `upto`: the durable lease and clock bound every shard; a
    /// prepared txn's promised shardstamps bound its shards and a write not yet streamed
    /// its shard (shardstamps are per shard, §4.2: no other shard waits for them).
    fn own_floor(&self, upto: u64) -> Floor {
        if upto < self.log.dropped(self.dc) {
            // Writes after `upto` left the log (a slave presumed failed, maybe before
            // they were even durable): their shardstamps are unknown here, so no floor
            // until the slave's stream restarts past them (a state transfer).
            return Floor::default();
        }
        let prepared = self.prepared.values().flat_map(|p| {
            let cap = p.ss_min.saturating_sub(1);
            p.shards.iter().map(move |s| (*s, cap))
        });
        let unstreamed = self
            .log
            .entries_after(self.dc, upto)
            .map(|w| (w.shard, w.dep_ss.saturating_sub(1)));
        if self.floor_without_caps {
            return Floor::new(self.time.claimable(), []);
        }
        Floor::new(self.time.claimable(), prepared.chain(unstreamed))
    }

    fn persist(&mut self, ctx: &mut Ctx<Msg>, record: &Record, then: Vec<(Addr, Msg)>) {
        let bytes = postcard::to_allocvec(record).expect("record encodes");
        self.durability.persist(ctx, bytes, then);
    }

    /// Applies a shard's writes (master or slave): objects, versions, the shardstamp.
    fn apply(&mut self, w: &ReplWrite) {
        self.work += w.ops.len() as u64;
        for (key, op) in &w.ops {
            let t = effect_type(&op.effect);
            let v = self.store.entry(key.clone()).or_insert_with(|| Version {
                obj: Object::new(t),
                deps: None,
                last: None,
            });
            if v.obj.obj_type() == t {
                v.obj.apply(op);
                // Each shard's writes apply once and in its master's order (streams drop
                // duplicates, a transfer replaces the version whole), so the object's
                // applied-id set would only grow with history: keep it empty.
                v.obj.forget_seen(|_| false);
                v.deps = w.deps.clone();
                v.last = Some(op.id);
            }
            if let Some(d) = &w.deps {
                self.counters.object_meta_bytes += d.bytes() as u64;
            }
            self.counters.objects_written += 1;
        }
        let s = self.stamps.entry(w.shard).or_insert(0);
        *s = (*s).max(w.ss);
    }

    /// Fig. 4 `read`: the current version, its deps and the shard's shardstamp.
    fn on_read(&mut self, ctx: &mut Ctx<Msg>, from: Addr, req: u64, keys: Vec<(Key, ObjType)>) {
        self.work += keys.len() as u64;
        let mut items = Vec::with_capacity(keys.len());
        let mut unsynced = false;
        for (key, t) in keys {
            let shard = self.shards.of(&key);
            unsynced |= self.unsynced.contains_key(&shard);
            let v = self.store.get(&key);
            let deps = match self.flavor {
                Flavor::EventualMs => None,
                Flavor::Occult => Some(
                    v.and_then(|v| v.deps.clone())
                        .unwrap_or_else(|| self.layout.zero()),
                ),
            };
            if let Some(d) = &deps {
                self.counters.reply_meta_bytes += d.bytes() as u64 + 8;
            }
            self.counters.reply_items += 1;
            items.push(ReadItem {
                obj: typed(v.map(|v| &v.obj), t),
                key,
                deps,
                ss: self.read_stamp(shard),
                master: self.is_master(shard),
                held: self.is_master(shard) && self.locks.contains_key(&shard),
            });
        }
        let reply = Msg::ReadReply { req, items };
        // A master shows its own writes only once durable (decided here; the paper's §7
        // leaves master durability to local replication): a write read and then lost in
        // a crash would be an observed txn that never happened, and a txn whose client
        // never heard the outcome but that a read observed must survive whole.
        match unsynced {
            true => self.durability.send_after_durable(ctx, from, reply),
            false => ctx.send(from, reply),
        }
    }

    fn count_read(&mut self, attempt: u8, fallback: bool) {
        match (attempt, fallback) {
            (0, false) => self.counters.reads += 1,
            (1, false) => {
                self.counters.stale += 1;
                self.counters.retries += 1;
            }
            (0, true) => {
                self.counters.stale += 1;
                self.counters.fallbacks += 1;
            }
            (_, true) => self.counters.fallbacks += 1,
            _ => self.counters.retries += 1,
        }
    }

    /// Listing 2 `newShardstamp`: above the current one, the clock and the client's
    /// highest entry for this DC (§5, loosely synchronized shardstamps).
    fn new_shardstamp(&self, shard: u32, max_cli_ss: u64) -> u64 {
        let new_ss = self.time.last.max(max_cli_ss);
        let current = self.stamp(shard);
        if new_ss < current {
            current + 1
        } else {
            new_ss + 1
        }
    }

    /// Effects of `updates` against the current objects (in program order), with the
    /// arbitration stamp `ss` (writes of a shard are totally ordered by shardstamp).
    fn effects(&self, ss: u64, updates: &[(Key, Update, OpId)]) -> Result<Vec<(Key, Op)>, Error> {
        let ts = ArbTs {
            primary: ss,
            secondary: 0,
        };
        prepare_effects(|k| self.store.get(k).map(|v| &v.obj), ts, updates)
    }

    /// Fig. 4 `write` (on masters): a new shardstamp, deps[shard] = it, store, replicate.
    #[allow(clippy::too_many_arguments)]
    fn on_write(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: Addr,
        req: u64,
        key: Key,
        update: Update,
        id: OpId,
        deps: Option<Cts>,
        max_ss: u64,
    ) {
        let shard = self.shards.of(&key);
        if !self.is_master(shard) {
            let e = Error::Unavailable(format!(
                "node {} is not the master of shard {shard}",
                self.me.0
            ));
            return ctx.send(from, Node::write_refused(req, e));
        }
        if self.locks.contains_key(&shard) {
            if self.queued.len() >= QUEUED_WRITES_MAX {
                let e = Error::Unavailable("too many writes wait for locked shards".into());
                return ctx.send(from, Node::write_refused(req, e));
            }
            return self
                .queued
                .push_back((from, req, key, update, id, deps, max_ss));
        }
        let ss = self.new_shardstamp(shard, max_ss);
        let ops = match self.effects(ss, &[(key.clone(), update, id)]) {
            Ok(ops) => ops,
            Err(e) => return ctx.send(from, Node::write_refused(req, e)),
        };
        // The new version depends on the one it overwrites (a ww edge carries causality,
        // as for txns: see session.rs), then on the new shardstamp (Fig. 4).
        let prev = self.store.get(&key).and_then(|v| v.deps.clone());
        let deps = deps.as_ref().map(|d| {
            let mut d = d.clone();
            if let Some(p) = &prev {
                d.merge(&self.layout, p);
            }
            d.update(&self.layout, shard, usize::from(self.dc.0), ss);
            d
        });
        let overwrote = self.store.get(&key).and_then(|v| v.last);
        let reply = Msg::WriteReply {
            req,
            result: Ok(Written {
                ss,
                prev,
                overwrote,
            }),
        };
        self.write_local(ctx, id.txn, shard, (ss, ss), deps, ops, vec![(from, reply)]);
    }

    /// The answer to a `write` refused with `e`.
    fn write_refused(req: u64, e: Error) -> Msg {
        Msg::WriteReply {
            req,
            result: Err(e),
        }
    }

    /// Applies a single-key write at its master, logs it for the slaves and persists it.
    #[allow(clippy::too_many_arguments)]
    fn write_local(
        &mut self,
        ctx: &mut Ctx<Msg>,
        txn: TxnId,
        shard: u32,
        stamps: (u64, u64),
        deps: Option<Cts>,
        ops: Vec<(Key, Op)>,
        then: Vec<(Addr, Msg)>,
    ) {
        let w = self.stage_write(txn, shard, stamps, deps, ops);
        self.persist(ctx, &Record::Write(w), then);
        self.own_after_durable(ctx);
    }

    /// Numbers a shard's writes in our stream, applies them and logs them for the slaves;
    /// the caller persists them. Until they are durable, reads of the shard here wait
    /// (`on_read`): a crash may still lose them.
    fn stage_write(
        &mut self,
        txn: TxnId,
        shard: u32,
        (ss, dep_ss): (u64, u64),
        deps: Option<Cts>,
        ops: Vec<(Key, Op)>,
    ) -> ReplWrite {
        self.seq += 1;
        let w = ReplWrite {
            seq: self.seq,
            txn,
            shard,
            ss,
            dep_ss,
            deps,
            ops,
        };
        self.apply(&w);
        self.log.add(self.dc, w.clone());
        self.unsynced.insert(shard, self.seq);
        w
    }

    /// Our stream is durable up to `seq` once the records persisted so far are.
    fn own_after_durable(&mut self, ctx: &mut Ctx<Msg>) {
        if let Some(a) = self.durability.after_durable(After::Own(self.seq)) {
            self.run_after(ctx, a);
        }
    }

    /// Listing 2 `prepare`: lock every shard of these keys (all or none), answer each
    /// key's new shardstamp and current deps (the overwrite set, §6.2).
    #[allow(clippy::too_many_arguments)]
    fn on_prepare(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: Addr,
        req: u64,
        txn: TxnId,
        coord: NodeId,
        writes: Vec<(Key, Update, OpId)>,
        max_ss: u64,
    ) {
        let shards = match self.shards_to_lock(txn, &writes) {
            Ok(shards) => shards,
            Err(r) => {
                let m = Msg::PrepareReply {
                    req,
                    result: Err(r),
                };
                return ctx.send(from, m);
            }
        };
        let mut locked: Vec<Locked> = Vec::new();
        for (key, _, _) in &writes {
            let shard = self.shards.of(key);
            let v = self.store.get(key);
            locked.push(Locked {
                key: key.clone(),
                shard,
                ss: self.new_shardstamp(shard, max_ss),
                deps: v
                    .and_then(|v| v.deps.clone())
                    .unwrap_or_else(|| self.layout.zero()),
                overwrote: v.and_then(|v| v.last),
            });
        }
        for s in &shards {
            self.locks.insert(*s, txn);
        }
        let record = Record::Prepared {
            txn,
            coord,
            writes: writes.clone(),
            shards: shards.clone(),
        };
        let p = Prepared {
            coord,
            writes,
            shards,
            since: self.clock,
            ss_min: locked.iter().map(|l| l.ss).min().unwrap_or(u64::MAX),
        };
        self.prepared.insert(txn, p);
        let reply = Msg::PrepareReply {
            req,
            result: Ok(locked),
        };
        self.persist(ctx, &record, vec![(from, reply)]);
    }

    /// The shards that `txn`'s prepare of `writes` locks (sorted), or why it may not.
    fn shards_to_lock(
        &self,
        txn: TxnId,
        writes: &[(Key, Update, OpId)],
    ) -> Result<Vec<u32>, Refusal> {
        if self.fences.contains(&txn) {
            return Err(Refusal::Fenced);
        }
        let mut shards: Vec<u32> = writes.iter().map(|(k, _, _)| self.shards.of(k)).collect();
        shards.sort_unstable();
        shards.dedup();
        if let Some(s) = shards.iter().find(|s| !self.is_master(**s)) {
            let e =
                Error::Unavailable(format!("node {} is not the master of shard {s}", self.me.0));
            return Err(Refusal::Error(e));
        }
        if shards
            .iter()
            .any(|s| self.locks.get(s).is_some_and(|t| *t != txn))
        {
            return Err(Refusal::Locked);
        }
        if let Err(e) = self.effects(0, writes) {
            return Err(Refusal::Error(e));
        }
        Ok(shards)
    }

    /// Listing 2 `commit_server` at the coordinator participant: record the decision, apply
    /// our writes, forward the decision to the others (§7: the coordinator decides).
    fn on_commit(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: Addr,
        req: u64,
        txn: TxnId,
        ts: Cts,
        participants: Vec<NodeId>,
    ) {
        if !self.prepared.contains_key(&txn) {
            return ctx.send(from, Msg::Refused { req, txn });
        }
        let decision = Decision {
            ts,
            client: from,
            req,
        };
        let others: Vec<NodeId> = participants.into_iter().filter(|n| *n != self.me).collect();
        if !others.is_empty() {
            let record = Record::Decided {
                txn,
                decision: decision.clone(),
                participants: others.clone(),
            };
            let parts = Self::parts(&others);
            self.decisions
                .decide(txn, decision.clone(), parts, self.clock);
            let fwd = others.iter().map(|n| {
                let m = Msg::Forward {
                    txn,
                    decision: decision.clone(),
                };
                (Addr::Node(*n), m)
            });
            self.persist(ctx, &record, fwd.collect());
            if let Some(a) = self.durability.after_durable(After::Decided(txn)) {
                self.run_after(ctx, a);
            }
        }
        self.commit_local(ctx, txn, &decision);
    }

    /// Applies a prepared txn's writes with the commit timestamp (shard by shard, each
    /// shard's shardstamp raised to the ts's highest entry of its DC: Listing 2 l.28),
    /// releases its locks and tells the client once durable. The writes and the release
    /// are one record (`Record::Committed`): a crash keeps the txn's commit here whole or
    /// not at all, never some shards applied with the txn still prepared (which a
    /// re-sent decision would then apply twice).
    fn commit_local(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, d: &Decision) {
        let Some(p) = self.prepared.remove(&txn) else {
            return;
        };
        let mut staged = Vec::with_capacity(p.shards.len());
        for shard in &p.shards {
            let dc = usize::from(self.dc.0);
            let ss = self.stamp(*shard).max(d.ts.max_in(dc));
            let writes: Vec<_> = p
                .writes
                .iter()
                .filter(|(k, _, _)| self.shards.of(k) == *shard)
                .cloned()
                .collect();
            let ops = self
                .effects(ss, &writes)
                .expect("type-checked at prepare, and the shard stayed locked");
            let dep_ss = p.ss_min.min(ss);
            let deps = Some(d.ts.clone());
            staged.push(self.stage_write(txn, *shard, (ss, dep_ss), deps, ops));
        }
        self.unlock(txn);
        let mut then = vec![(d.client, Msg::Done { req: d.req, txn })];
        if p.coord != self.me {
            then.push((Addr::Node(p.coord), Msg::ForwardAck { txn }));
        }
        let record = Record::Committed {
            txn,
            writes: staged,
        };
        self.persist(ctx, &record, then);
        self.own_after_durable(ctx);
        self.drain_queued(ctx);
    }

    fn unlock(&mut self, txn: TxnId) {
        if let Some(p) = self.prepared.remove(&txn) {
            for s in p.shards {
                self.locks.remove(&s);
            }
        }
        self.locks.retain(|_, t| *t != txn);
    }

    /// Single-key writes that waited for locks now released, in arrival order.
    fn drain_queued(&mut self, ctx: &mut Ctx<Msg>) {
        let waiting = std::mem::take(&mut self.queued);
        for (from, req, key, update, id, deps, max_ss) in waiting {
            self.on_write(ctx, from, req, key, update, id, deps, max_ss);
        }
    }

    fn fence(&mut self, txn: TxnId) {
        if self.fences.insert(txn) {
            self.fence_order.push_back(txn);
        }
        while self.fence_order.len() > FENCES_MAX {
            let old = self.fence_order.pop_front().expect("non-empty");
            self.fences.remove(&old);
        }
    }

    /// Releases a txn's locks without applying (abort, or termination with `fence`).
    fn release(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, fence: bool) {
        let held = self.prepared.contains_key(&txn);
        self.unlock(txn);
        if fence {
            self.fence(txn);
        }
        if held || fence {
            self.persist(ctx, &Record::Released { txn, fence }, Vec::new());
        }
        self.drain_queued(ctx);
    }

    fn on_forward(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, txn: TxnId, d: Decision) {
        if self.prepared.contains_key(&txn) {
            return self.commit_local(ctx, txn, &d);
        }
        // Applied before (a re-sent decision): acknowledge again once durable.
        self.durability
            .send_after_durable(ctx, Addr::Node(from), Msg::ForwardAck { txn });
    }

    fn on_forward_ack(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, txn: TxnId) {
        if self.decisions.ack(txn, PartitionId(from.0)) {
            self.persist(ctx, &Record::Forgotten { txn }, Vec::new());
        }
    }

    /// §7, at the coordinator: the decision if any; otherwise the txn is terminated here
    /// (fenced, so a late COMMIT or PREPARE is refused) and the answer is abort.
    fn on_inquire(&mut self, ctx: &mut Ctx<Msg>, from: NodeId, txn: TxnId) {
        let decision = match self.decisions.answer(txn, false) {
            Answer::Commit(d) => Some(d),
            Answer::Wait => return,
            Answer::Abort => {
                self.release(ctx, txn, true);
                None
            }
        };
        self.durability
            .send_after_durable(ctx, Addr::Node(from), Msg::Resolved { txn, decision });
    }

    fn on_resolved(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, decision: Option<Decision>) {
        match decision {
            Some(d) => self.commit_local(ctx, txn, &d),
            None => self.release(ctx, txn, true),
        }
    }

    /// §7: txns holding locks past the timeout are terminated: by the coordinator itself
    /// (fence and release), or by asking the coordinator.
    fn terminate(&mut self, ctx: &mut Ctx<Msg>) {
        let timeout = self.sect.lock_timeout_ns;
        let old: Vec<(TxnId, NodeId)> = self
            .prepared
            .iter()
            .filter(|(_, p)| self.clock.saturating_sub(p.since) >= timeout)
            .map(|(t, p)| (*t, p.coord))
            .collect();
        for (txn, coord) in old {
            if coord != self.me {
                ctx.send(Addr::Node(coord), Msg::Inquire { txn });
                continue;
            }
            // Our own txn: the answer we give an inquiry (§7: a txn we decided commits;
            // otherwise abort and fence). A txn still prepared here once decided only
            // comes back from a crash, and `start` commits it at once
            // (`commit_recovered_decisions`), so this is the abort in practice.
            match self.decisions.answer(txn, false) {
                Answer::Commit(d) => self.commit_local(ctx, txn, &d),
                Answer::Wait => {}
                Answer::Abort => self.release(ctx, txn, true),
            }
        }
    }

    /// Coordinator recovery (§7 leaves master failures to "well-known techniques";
    /// decided here). `on_commit` persists `Decided`, then our own writes
    /// (`Record::Committed`): a crash between the two restarts us with the decision
    /// durable (its `Forward`s may have left, so other masters may have applied their
    /// writes) and the txn still prepared here. The decision is final (§7's termination
    /// commits a txn that some participant got the commit for), so we apply our writes
    /// from it now, as a 2PC coordinator redoes a logged commit. (Before, nothing did:
    /// the lock timeout then fenced and released the txn as if undecided, leaving it half
    /// applied: `s1.t2` of `causeway sim --protocol occult --dcs 2 --seeds 40 --faults
    /// all`.)
    fn commit_recovered_decisions(&mut self, ctx: &mut Ctx<Msg>) {
        let decided: Vec<(TxnId, Decision)> = self
            .decisions
            .iter()
            .filter(|(txn, ..)| self.prepared.contains_key(txn))
            .map(|(txn, d, _, _)| (txn, d.clone()))
            .collect();
        for (txn, d) in decided {
            self.commit_local(ctx, txn, &d);
        }
    }

    fn resend_decisions(&mut self, ctx: &mut Ctx<Msg>) {
        let every = self.sect.lock_timeout_ns / 2;
        for (txn, _, node, decision) in self.decisions.resends(self.clock, every) {
            ctx.send(Addr::Node(node), Msg::Forward { txn, decision });
        }
    }

    fn run_after(&mut self, _ctx: &mut Ctx<Msg>, a: After) {
        match a {
            After::Have { origin, upto } => {
                let h = &mut self.durable_have[usize::from(origin.0)];
                *h = (*h).max(upto);
            }
            After::Own(seq) => {
                self.durable_seq = self.durable_seq.max(seq);
                let durable = self.durable_seq;
                self.unsynced.retain(|_, s| *s > durable);
            }
            After::Lease(until) => self.time.lease_durable(until),
            After::Decided(txn) => self.decisions.durable(txn),
        }
    }

    fn acks(&self) -> Vc {
        let mut v = Vc::zero(self.durable_have.len());
        for (i, h) in self.durable_have.iter().enumerate() {
            v.set(i, *h);
        }
        v.set(usize::from(self.dc.0), self.durable_seq);
        v
    }

    /// Every replication interval: our stream (or a heartbeat) to each sibling, a rewind
    /// for a sibling that lags while it keeps talking, and GC of what all acknowledged.
    fn replicate(&mut self, ctx: &mut Ctx<Msg>) {
        if let Some(until) = self.time.lease_to_renew(LEASE_SPAN_NS) {
            self.persist(ctx, &Record::Lease(until), Vec::new());
            if let Some(a) = self.durability.after_durable(After::Lease(until)) {
                self.run_after(ctx, a);
            }
        }
        let (clock, grace) = (self.clock, self.sect.lag_grace_ns);
        let acks = self.acks();
        let mut made = None;
        for s in self.sibs.ids() {
            // Relays are not used: a slave takes a shard's writes from its master only.
            let _ = self.sibs.lagging(s, &acks, clock, grace);
            self.transfer_to(ctx, s);
            let (log, upto) = (&self.log, self.durable_seq);
            let stream = self
                .sibs
                .own_piece(s, log, upto, REPLICATION_BATCH_MAX, &mut made);
            let restarted = self.announce.remove(&s);
            let floor_upto = stream
                .as_ref()
                .map(|piece| piece.stream().upto)
                .or(self.sibs.get(s).and_then(|x| x.sent_upto))
                .unwrap_or(0);
            let msg = Msg::Repl {
                restarted,
                acks: acks.clone(),
                stream,
                floor: self.own_floor(floor_upto),
                floor_upto,
            };
            let to = self.sibling(s);
            ctx.send(Addr::Node(to), msg);
        }
        let sibs = &self.sibs;
        let (silent, kept) = (
            self.sect.silent_sibling_ns,
            self.sect.silent_sibling_log_max,
        );
        self.log.gc_acknowledged(sibs, clock, silent, kept);
    }

    fn sibling(&self, dc: DcId) -> NodeId {
        let n = self.cfg.topology.nodes_per_dc;
        NodeId(u32::from(dc.0) * n + self.me.0 % n)
    }

    #[allow(clippy::too_many_arguments)]
    fn on_repl(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: NodeId,
        restarted: bool,
        acks: Vc,
        stream: Option<crate::kit::wire::SharedStream<ReplWrite>>,
        floor: (Floor, u64),
    ) {
        let s = self.cfg.topology.dc_of(from);
        if !self.sibs.heard(s, acks, restarted, self.clock) {
            return;
        }
        if let Some(piece) = stream {
            self.accept(ctx, piece.into_stream());
        }
        // The floor holds once we have the sender's stream up to where it was computed.
        // Every floor that held still holds; a newer one replaces the last unless its base
        // fell (a log cut short, caps folded): then the last stays, as true as ever.
        let (floor, floor_upto) = floor;
        let last = &mut self.floors[usize::from(s.0)];
        if self.received.have(s) >= floor_upto && floor.base >= last.base {
            *last = floor;
        }
    }

    fn accept(&mut self, ctx: &mut Ctx<Msg>, st: crate::kit::repl::Stream<ReplWrite>) {
        let (origin, upto) = (st.origin, st.upto);
        let Some(writes) = self.received.accept(st) else {
            return;
        };
        writes.iter().for_each(|w| self.apply(w));
        // Update visibility: a replicated write is readable once applied (no waiting on
        // other shards: the point of Occult); its shardstamp is its master's clock.
        for w in &writes {
            if self.samples.len() < SAMPLES_MAX {
                let lag = self.clock.saturating_sub(w.ss);
                self.samples.push(("remote_visibility_ns", lag));
            }
        }
        let record = Record::Remote {
            origin,
            upto,
            writes,
        };
        self.persist(ctx, &record, Vec::new());
        if let Some(a) = self.durability.after_durable(After::Have { origin, upto }) {
            self.run_after(ctx, a);
        }
    }

    /// A message from server node `n`: a decision's forwarding (§7), an inquiry, or
    /// replication.
    fn on_peer_message(&mut self, ctx: &mut Ctx<Msg>, n: NodeId, msg: Msg) {
        match msg {
            Msg::Forward { txn, decision } => self.on_forward(ctx, n, txn, decision),
            Msg::ForwardAck { txn } => self.on_forward_ack(ctx, n, txn),
            Msg::Inquire { txn } => self.on_inquire(ctx, n, txn),
            Msg::Repl {
                restarted,
                acks,
                stream,
                floor,
                floor_upto,
            } => self.on_repl(ctx, n, restarted, acks, stream, (floor, floor_upto)),
            Msg::Transfer { chunk } => {
                let s = self.cfg.topology.dc_of(n);
                self.on_transfer(ctx, s, chunk)
            }
            _ => unreachable!("`handle_message` routes only peer messages here"),
        }
    }

    /// The shardstamp a read of `key` reports here (tests).
    pub fn read_stamp_of(&self, key: &Key) -> u64 {
        self.read_stamp(self.shards.of(key))
    }

    /// The stored version of `key` (tests).
    pub fn version(&self, key: &Key) -> Option<&Version> {
        self.store.get(key)
    }

    /// `Request::ListKeys` (`kit::keys`): a page of one of this node's partitions, from
    /// its store as it is (replicated writes applied so far).
    fn on_list_keys(&mut self, ctx: &mut Ctx<Msg>, from: Addr, ask: ListAsk) {
        let topo = &self.cfg.topology;
        let held = topo.node_of(self.dc, ask.partition) == self.me;
        let list = held.then(|| {
            let (store, shards, p) = (&self.store, &self.shards, ask.partition.0);
            // Keys live where their shard's partition does (`Shards`), not by the
            // topology's slots.
            let all = || {
                let part = |k: &Key| shards.partition(shards.of(k)).0;
                store.keys().map(|k| (part(k), k)).collect()
            };
            let shown = |k: &Key| store.get(k).and_then(|v| v.obj.shown_type());
            self.listed
                .list(store.len(), all, shown, (p, ask.from, ask.max))
        });
        let answer = crate::kit::keys::answer(&ask, topo.partitions, list);
        ctx.send(from, Msg::KeysListed(answer));
    }
}

impl ServerNode for Node {
    type Msg = Msg;

    fn start(&mut self, ctx: &mut Ctx<Msg>) {
        self.clock = ctx.clock;
        self.time.read(ctx.clock);
        for p in self.prepared.values_mut() {
            p.since = ctx.clock; // recovered locks get a full timeout
        }
        let first = ctx.clock + self.cfg.params.timer_phase_ns;
        self.timers.set(Timer::Replicate, first);
        self.timers
            .set(Timer::Terminate, ctx.clock + self.sect.lock_timeout_ns);
        self.timers
            .set(Timer::Resend, ctx.clock + self.sect.lock_timeout_ns);
        self.commit_recovered_decisions(ctx);
    }

    fn handle_message(&mut self, ctx: &mut Ctx<Msg>, from: Addr, msg: Msg) {
        self.clock = self.clock.max(ctx.clock);
        self.time.read(ctx.clock);
        let node = match from {
            Addr::Node(n) => Some(n),
            _ => None,
        };
        match msg {
            Msg::Read {
                req,
                keys,
                attempt,
                fallback,
            } => {
                self.count_read(attempt, fallback);
                self.on_read(ctx, from, req, keys)
            }
            Msg::Write {
                req,
                key,
                update,
                id,
                deps,
                max_ss,
            } => self.on_write(ctx, from, req, key, update, id, deps, max_ss),
            Msg::Prepare {
                req,
                txn,
                coord,
                writes,
                max_ss,
            } => self.on_prepare(ctx, from, req, txn, coord, writes, max_ss),
            Msg::Commit {
                req,
                txn,
                ts,
                participants,
            } => self.on_commit(ctx, from, req, txn, ts, participants),
            Msg::Release { txn } => self.release(ctx, txn, false),
            Msg::Resolved { txn, decision } => self.on_resolved(ctx, txn, decision),
            msg @ (Msg::Forward { .. }
            | Msg::ForwardAck { .. }
            | Msg::Inquire { .. }
            | Msg::Repl { .. }
            | Msg::Transfer { .. }) => {
                if let Some(n) = node {
                    self.on_peer_message(ctx, n, msg)
                }
            }
            Msg::ReadReply { .. }
            | Msg::WriteReply { .. }
            | Msg::PrepareReply { .. }
            | Msg::Done { .. }
            | Msg::Refused { .. }
            | Msg::KeysListed(_) => {}
            Msg::ListKeys(ask) => self.on_list_keys(ctx, from, ask),
        }
    }

    fn handle_timeout(&mut self, ctx: &mut Ctx<Msg>) {
        self.clock = self.clock.max(ctx.clock);
        self.time.read(ctx.clock);
        for t in self.timers.take_due(ctx.clock) {
            match t {
                Timer::Replicate => {
                    self.replicate(ctx);
                    let every = self.cfg.params.replication_interval_ns;
                    self.timers.set(Timer::Replicate, ctx.clock + every);
                }
                Timer::Terminate => {
                    self.terminate(ctx);
                    let every = self.sect.lock_timeout_ns / 2;
                    self.timers.set(Timer::Terminate, ctx.clock + every);
                }
                Timer::Resend => {
                    self.resend_decisions(ctx);
                    let every = self.sect.lock_timeout_ns / 2;
                    self.timers.set(Timer::Resend, ctx.clock + every);
                }
            }
        }
    }

    fn handle_persisted(&mut self, ctx: &mut Ctx<Msg>, lsn: Lsn) {
        for a in self.durability.persisted(ctx, lsn) {
            self.run_after(ctx, a);
        }
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        self.timers.next()
    }

    /// Locks and prepared txns agree; every lock is on a shard we master.
    fn checkpoint(&self) -> Option<Vec<u8>> {
        self.take_checkpoint()
    }

    fn can_checkpoint(&self) -> bool {
        true
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.durability.check_invariants()?;
        self.decisions.check_invariants()?;
        for (shard, txn) in &self.locks {
            let held = self
                .prepared
                .get(txn)
                .is_some_and(|p| p.shards.contains(shard));
            if !held || !self.is_master(*shard) {
                return Err(format!(
                    "shard {shard} locked by {txn:?} with no prepared txn here (or not ours)"
                ));
            }
        }
        if self.queued.len() > QUEUED_WRITES_MAX {
            return Err(format!("{} queued writes", self.queued.len()));
        }
        Ok(())
    }

    fn gauges(&self, _clock: Nanos) -> Vec<(&'static str, f64)> {
        let c = &self.counters;
        let per = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        vec![
            ("occult_reads", c.reads as f64),
            ("occult_stale_reads", c.stale as f64),
            ("occult_read_retries", c.retries as f64),
            ("occult_master_fallbacks", c.fallbacks as f64),
            (
                "occult_meta_bytes_per_reply_item",
                per(c.reply_meta_bytes, c.reply_items),
            ),
            (
                "occult_meta_bytes_per_object",
                per(c.object_meta_bytes, c.objects_written),
            ),
            ("occult_locks", self.locks.len() as f64),
            (
                READS_AT
                    .get(usize::from(self.dc.0))
                    .copied()
                    .unwrap_or("occult_reads_dcx"),
                c.reads as f64,
            ),
            (
                STALE_AT
                    .get(usize::from(self.dc.0))
                    .copied()
                    .unwrap_or("occult_stale_reads_dcx"),
                c.stale as f64,
            ),
            ("occult_repl_log", self.log.len() as f64),
        ]
    }

    fn take_samples(&mut self) -> Vec<(&'static str, u64)> {
        std::mem::take(&mut self.samples)
    }

    fn take_work(&mut self) -> u64 {
        std::mem::take(&mut self.work)
    }
}
