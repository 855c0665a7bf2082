//! The PrompTCC server node: its partitions ([`Part`]), the node-level snapshot vector
//! `S`, the coordinator side of write-only txns (Alg. 2 l.10-19), recovery of txns whose
//! coordinator or client vanished (§VIII), stabilization (§IV-E), GC (§VII) and the
//! persist-before-acknowledge plumbing; under Eiger, the requests held until a txn open
//! at a partition resolves (round-three reads, writes that must observe it).

use super::config::{Config, Flavor, Mutation, Wire, PARKED_MAX};
use super::msg::{Checkpoint, Msg, PreparedTxn, ReadKind, Record, Updates};
use super::part::{may_observe_nothing, Part, Pending};
use crate::kit::durability::Durability;
use crate::kit::keys::ListAsk;
use crate::kit::timers::Timers;
use crate::kit::twopc::Retry;
use crate::params::{NodeConfig, Params};
use causeway_core::crdt::ObjType;
use causeway_core::limits::COORD_TXNS_MAX;
use causeway_core::{
    Addr, Ctx, DcId, Error, Key, Lsn, Nanos, NodeId, PartitionId, ServerNode, Topology, TxnId, Vc,
};
use std::collections::{BTreeMap, VecDeque};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Timer {
    /// Stabilization, recovery queries, GC.
    Stabilize,
}

#[derive(Debug)]
pub enum Deferred {
    /// Sequence numbers up to `seq` of `partition` are durably resolved: `S[i]` rises.
    Resolved { partition: PartitionId, seq: u64 },
}

/// Bytes of read traffic (requests and replies) and reads served, for §V's comparison.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counters {
    pub read_bytes: u64,
    pub reads: u64,
    pub reads_round_two: u64,
    /// Eiger's third rounds (§II l.82).
    pub reads_round_three: u64,
}

/// A coordinated txn: its participants, their sequence numbers so far, when it began.
type Votes = (Vec<PartitionId>, BTreeMap<PartitionId, u64>, Nanos);

pub struct Node {
    topo: Topology,
    params: Params,
    cfg: Config,
    me: NodeId,
    flavor: Flavor,
    mutation: Mutation,
    clock: Nanos,
    pub(super) parts: BTreeMap<PartitionId, Part>,
    /// `S`: what this node knows of every partition's durable committed prefix.
    pub(super) s: Vc,
    /// Coordinated txns: their participants and the votes so far.
    coord: BTreeMap<TxnId, Votes>,
    /// Recoveries run here: per txn, each participant's answer.
    recovering: BTreeMap<TxnId, BTreeMap<PartitionId, Option<u64>>>,
    pub(super) durability: Durability<Msg, Deferred>,
    timers: Timers<Timer>,
    pub(super) counters: Counters,
    work: u64,
    /// Eiger: requests held until a txn open at their partition resolves (a round-three
    /// read, a write whose effects must observe it), re-run when one may have.
    parked: VecDeque<(Addr, Msg)>,
    /// Something became visible (or a txn resolved) since the held requests last ran.
    recheck: bool,
    /// Eiger's logical clock (Lamport): one tick per message handled, raised to the
    /// logical time a client's read carries (node-to-node messages carry none).
    lamport: u64,
}

impl Node {
    pub fn recover(
        config: NodeConfig,
        cfg: Config,
        flavor: Flavor,
        records: &[Vec<u8>],
    ) -> Result<Node, String> {
        let topo = config.topology.clone();
        let parts = topo
            .partitions_of(config.node)
            .into_iter()
            .map(|p| (p, Part::new(p)))
            .collect();
        let mut node = Node {
            me: config.node,
            flavor,
            mutation: flavor.mutation(config.params.mutation.as_deref())?,
            clock: 0,
            parts,
            s: Vc::zero(topo.partitions as usize),
            coord: BTreeMap::new(),
            recovering: BTreeMap::new(),
            durability: Durability::starting_after(records.len() as Lsn),
            timers: Timers::default(),
            counters: Counters::default(),
            work: 0,
            parked: VecDeque::new(),
            recheck: false,
            lamport: 0,
            cfg,
            params: config.params,
            topo,
        };
        for (i, bytes) in records.iter().enumerate() {
            node.replay(Record::decode(i, bytes)?);
        }
        let ids: Vec<PartitionId> = node.parts.keys().copied().collect();
        for id in ids {
            node.resolve(None, id);
            let part = &node.parts[&id];
            let (i, upto) = (part.idx(), part.committed);
            node.s.set(i, node.s.get(i).max(upto));
        }
        // What the replay committed becomes visible once `S` holds our own prefixes (a
        // txn of our partitions alone needs nothing from the others).
        node.make_visible();
        Ok(node)
    }

    fn replay(&mut self, record: Record) {
        match record {
            Record::Prepare { partition, t } => {
                let part = self.part(partition);
                part.s = part.s.max(t.seq);
                part.remember(t.txn, t.seq);
                let p = Pending {
                    since: 0,
                    final_ts: None,
                    query: Retry::default(),
                    prepared_at: 0,
                    t: *t,
                };
                part.pending.insert(p.t.seq, p);
            }
            Record::Commit {
                partition,
                seq,
                final_ts,
            } => {
                if let Some(p) = self.part(partition).pending.get_mut(&seq) {
                    p.final_ts = Some(final_ts);
                }
            }
            Record::Abort { partition, seq } => {
                let part = self.part(partition);
                part.pending.remove(&seq);
                part.aborted.insert(seq);
            }
            Record::Fence { partition, txn } => self.part(partition).fence(txn),
            Record::Checkpoint(ck) => self.restore(*ck),
        }
    }

    /// Replays a checkpoint (`checkpoint.rs`).
    fn restore(&mut self, ck: Checkpoint) {
        for p in 0..ck.s.dcs.len().min(self.s.dcs.len()) {
            self.s.set(p, self.s.get(p).max(ck.s.get(p)));
        }
        for pc in ck.parts {
            self.part(pc.id).restore(pc);
        }
    }

    fn part(&mut self, p: PartitionId) -> &mut Part {
        self.parts.get_mut(&p).expect("a hosted partition")
    }

    fn node_of(&self, p: PartitionId) -> NodeId {
        self.topo.node_of(DcId(0), p)
    }

    fn persist(&mut self, ctx: &mut Ctx<Msg>, record: Record, then: Vec<(Addr, Msg)>) {
        self.durability.persist(ctx, record.encode(), then);
    }

    /// Merges a vector the client has seen into `S` (Alg. 2 l.37, l.46): its entries are
    /// committed prefixes (they come from visible versions or acknowledged commits).
    /// Our own partitions' entries are ours to set, so they are skipped. Not under Eiger:
    /// there a visible version's txn may not have committed at its other participants yet
    /// (§II l.82), so its entries are no committed prefixes.
    fn merge(&mut self, v: &Vc) {
        if self.flavor.local_visibility() {
            return;
        }
        let n = self.topo.partitions as usize;
        for p in 0..n {
            let x = v.get(p);
            if x > self.s.get(p) && !self.parts.contains_key(&PartitionId(p as u32)) {
                self.s.set(p, x);
            }
        }
        self.make_visible();
    }

    fn make_visible(&mut self) {
        let (broken, clock) = (self.mutation.visible_before_stable, self.clock);
        let local = self.flavor.local_visibility();
        let evt = self.flavor.validity_intervals().then_some(self.lamport);
        for part in self.parts.values_mut() {
            self.work += part.make_visible(&self.s, (broken, local), clock, evt) as u64;
        }
        self.recheck = true;
    }

    /// Eiger's logical clock sees `time`, a client's (Lamport's receive rule).
    fn tick(&mut self, time: u64) {
        self.lamport = self.lamport.max(time);
    }

    // ---- reads (Alg. 2 l.36-53) ----

    #[allow(clippy::too_many_arguments)]
    fn on_read(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: Addr,
        rid: u64,
        partition: PartitionId,
        keys: Vec<(Key, ObjType)>,
        kind: ReadKind,
        first: bool,
    ) {
        let n = self.topo.partitions as usize;
        let (bound, floor) = match &kind {
            ReadKind::Latest { deps } | ReadKind::Clocked { deps, .. } => {
                let d = deps.to_vc(n);
                self.merge(&d);
                (top(n), d.dcs.iter().copied().min().unwrap_or(0))
            }
            ReadKind::Bounded { bound } | ReadKind::Wait { bound } => {
                let b = bound.to_vc(n);
                self.merge(&b);
                (b, 0)
            }
            ReadKind::At { bound, .. } => (bound.to_vc(n), 0),
        };
        if let ReadKind::Clocked { time, .. } | ReadKind::At { time, .. } = &kind {
            self.tick(*time); // the client's logical time (Eiger)
        }
        self.count_read(&kind, first);
        let Some(part) = self.parts.get(&partition) else {
            let e = Error::Unavailable(format!("{partition:?} is not hosted here"));
            return refuse_read(ctx, from, (rid, partition), keys, e);
        };
        if self.read_waits(part, &bound, &keys, &kind) {
            return self.hold_read(ctx, from, (rid, partition), keys, kind);
        }
        self.work += keys.len() as u64;
        let (objects, per_key) = part.read(&bound, &keys);
        let vis = part.vis(self.s.get(part.idx()));
        let latest = kind.latest();
        let evt = keys.iter().filter_map(|(k, _)| part.evt.get(k)).max();
        let evt = evt.copied().unwrap_or(0);
        let m = self.read_reply(
            (rid, partition),
            objects,
            &per_key,
            (vis, evt),
            (floor, first, latest),
        );
        self.count_read_bytes(&kind, &m);
        ctx.send(from, m);
    }

    /// Eiger (§II l.82): whether a re-read may not answer with values now: a txn still
    /// open here may be in the snapshot and writes a key read (a partially committed
    /// version the snapshot needs), or, in round two (`At`), one prepared here at or
    /// before the read's effective time writes a key read (Eiger's pending check, which
    /// the third round stands for, so round three does not repeat it).
    /// [`Node::hold_read`] then answers "pending", or holds a round three.
    fn read_waits(
        &self,
        part: &Part,
        bound: &Vc,
        keys: &[(Key, ObjType)],
        kind: &ReadKind,
    ) -> bool {
        if !self.flavor.local_visibility() || kind.latest() {
            return false;
        }
        let touches = |k: &Key| keys.iter().any(|(r, _)| r == k);
        let prepared = match kind {
            ReadKind::At { time, .. } => part.prepared_before(*time, touches),
            _ => false,
        };
        prepared || part.in_doubt(bound, touches)
    }

    /// read_response (Alg. 2 l.43, l.52): the objects, their timestamps (one local max
    /// read timestamp above the client's `min(D_c)`, or every key's with full vectors),
    /// the visible frontier, and `S` where it goes; Eiger's round one adds the validity
    /// interval (EVT: the latest of the keys' EVTs; LVT: the node's logical clock).
    fn read_reply(
        &mut self,
        (rid, partition): (u64, PartitionId),
        objects: super::msg::Objects,
        per_key: &[Vc],
        (vis, evt): (u64, u64),
        (floor, first, latest): (u64, bool, bool),
    ) -> Msg {
        let n = self.topo.partitions as usize;
        let full = self.flavor.full_vectors();
        let ts = if full {
            per_key.iter().map(|v| Wire::of(v, n, true)).collect()
        } else {
            let mut local = Vc::default();
            for v in per_key {
                local.join(v);
            }
            vec![Wire::above(&local, n, floor, false)]
        };
        // The naive wire carries `S` in every reply. PrompTCC's round one carries it in
        // the first partition's reply (the client raises the txn's snapshot with it for
        // the partitions this read did not touch, so a later read of the txn is not stuck
        // at the versions the first one happened to see), and wherever a committed txn
        // waits here for another participant (`vis_i < S[i]`): the scalar then may fail
        // the client's round-two test where `S_i >= max-read-ts` (Alg. 1 l.27) passes.
        let waiting = vis < self.s.get(partition.0 as usize);
        let snapshot = (full || (latest && (first || waiting))).then(|| Wire::of(&self.s, n, full));
        if !(latest && self.flavor.validity_intervals()) {
            return Msg::ReadReply {
                rid,
                partition,
                objects,
                ts,
                vis,
                snapshot,
            };
        }
        Msg::EigerReadReply {
            rid,
            partition,
            objects,
            ts,
            vis,
            snapshot,
            evt,
            lvt: self.lamport,
        }
    }

    /// Counts a READ's rounds at its first request (reads, round two, round three).
    fn count_read(&mut self, kind: &ReadKind, first: bool) {
        let c = &mut self.counters;
        let n = u64::from(first);
        match kind {
            ReadKind::Latest { .. } | ReadKind::Clocked { .. } => c.reads += n,
            ReadKind::Bounded { .. } | ReadKind::At { .. } => c.reads_round_two += n,
            ReadKind::Wait { .. } => c.reads_round_three += n,
        }
    }

    /// Eiger (§II l.82): a round-two read that may need a version still partially
    /// committed here says so, and the client runs round three; a round-three read is
    /// held until it can be exact (Eiger's check with the txn's coordinator: here the
    /// commit is on its way, or recovery finishes the txn, §VIII).
    fn hold_read(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: Addr,
        (rid, partition): (u64, PartitionId),
        keys: Vec<(Key, ObjType)>,
        kind: ReadKind,
    ) {
        if !matches!(kind, ReadKind::Wait { .. }) {
            let m = Msg::ReadPending { rid, partition };
            self.count_read_bytes(&kind, &m);
            return ctx.send(from, m);
        }
        if self.parked.len() >= PARKED_MAX {
            let e = Error::Unavailable("too many reads wait for txns to resolve".into());
            return refuse_read(ctx, from, (rid, partition), keys, e);
        }
        let m = Msg::Read {
            rid,
            partition,
            keys,
            kind,
            first: false, // counted on arrival
        };
        self.parked.push_back((from, m));
    }

    fn count_read_bytes(&mut self, kind: &ReadKind, reply: &Msg) {
        let req = postcard::to_allocvec(kind).map_or(0, |b| b.len());
        let rep = postcard::to_allocvec(reply).map_or(0, |b| b.len());
        self.counters.read_bytes += (req + rep) as u64;
    }

    // ---- write-only txns, participant side (Alg. 2 l.2-9, l.20-31) ----

    #[allow(clippy::too_many_arguments)]
    fn on_write(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: Addr,
        (txn, req, partition): (TxnId, u64, PartitionId),
        updates: Updates,
        parts: Vec<PartitionId>,
        coord: PartitionId,
        deps: Wire,
        snapshot: Option<Wire>,
    ) {
        let n = self.topo.partitions as usize;
        let fail = |error| Msg::WriteFailed {
            txn,
            req,
            partition,
            error,
        };
        let Some(part) = self.parts.get(&partition) else {
            let e = Error::Unavailable(format!("{partition:?} is not hosted here"));
            return ctx.send(from, fail(e));
        };
        if part.seqs.contains_key(&txn) {
            return; // a duplicate write_request: the first one counts
        }
        if part.fences.contains(&txn) {
            let e = Error::Aborted("aborted by recovery".into());
            return ctx.send(from, fail(e));
        }
        let deps = deps.to_vc(n);
        self.merge(&deps);
        // Effects observe the txn's snapshot, or for a blind write the client's past
        // (`D_c`, made visible by the merge): observing anything newer would make the
        // txn depend on versions its timestamp does not cover.
        let at = snapshot.map_or_else(|| deps.clone(), |w| w.to_vc(n));
        let part = &self.parts[&partition];
        let ops = match part.effects(&at, &updates, &top(n)) {
            Ok(ops) => ops,
            Err(e) => {
                let coord_node = self.node_of(coord);
                ctx.send(Addr::Node(coord_node), Msg::Refused { txn });
                return ctx.send(from, fail(e));
            }
        };
        self.work += ops.len() as u64;
        let part = self.part(partition);
        part.s += 1; // Alg. 2 l.3
        let seq = part.s;
        let mut tentative = deps; // Alg. 2 l.4
        tentative.set(part.idx(), seq);
        let t = PreparedTxn {
            txn,
            seq,
            parts,
            coord,
            tentative,
            ops,
            session: from,
            req,
        };
        self.hold_and_vote(ctx, partition, t);
    }

    /// Holds `t`, just numbered at `partition`, until its final timestamp arrives; its
    /// vote goes to the coordinator once its record is durable.
    fn hold_and_vote(&mut self, ctx: &mut Ctx<Msg>, partition: PartitionId, t: PreparedTxn) {
        let (clock, prepared_at) = (self.clock, self.lamport);
        let part = self.part(partition);
        part.remember(t.txn, t.seq);
        let p = Pending {
            t: t.clone(),
            since: clock,
            final_ts: None,
            query: Retry::sent_at(clock),
            prepared_at,
        };
        part.pending.insert(t.seq, p);
        let vote = Msg::Prepared {
            txn: t.txn,
            partition,
            seq: t.seq,
            parts: t.parts.clone(),
        };
        let to = Addr::Node(self.node_of(t.coord));
        let record = Record::Prepare {
            partition,
            t: Box::new(t),
        };
        self.persist(ctx, record, vec![(to, vote)]);
    }

    /// commit (Alg. 2 l.20-22): the final timestamp arrives; commits follow in order.
    fn on_commit(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, final_ts: Vec<(PartitionId, u64)>) {
        let mine: Vec<PartitionId> = final_ts
            .iter()
            .map(|(p, _)| *p)
            .filter(|p| self.parts.contains_key(p))
            .collect();
        for p in mine {
            let part = self.part(p);
            let Some(seq) = part.pending_of(txn) else {
                continue;
            };
            let pend = part.pending.get_mut(&seq).expect("pending");
            if pend.final_ts.is_some() {
                continue;
            }
            pend.final_ts = Some(final_ts.clone());
            let record = Record::Commit {
                partition: p,
                seq,
                final_ts: final_ts.clone(),
            };
            self.persist(ctx, record, Vec::new());
            self.resolve(Some(ctx), p);
        }
    }

    /// Resolves, in sequence order, every txn that may be now (Alg. 2 l.23-31): commits
    /// (acknowledged once durable) and aborts; `S[i]` follows once they are durable.
    fn resolve(&mut self, mut ctx: Option<&mut Ctx<Msg>>, p: PartitionId) {
        loop {
            let part = self.part(p);
            let Some(seq) = part.next_resolvable() else {
                break;
            };
            if part.aborted.remove(&seq) {
                part.committed = seq;
            } else {
                let (t, _) = part.commit(seq).expect("resolvable");
                if let Some(c) = ctx.as_deref_mut() {
                    let ack = Msg::Committed {
                        txn: t.txn,
                        req: t.req,
                        partition: p,
                        seq,
                    };
                    self.durability.send_after_durable(c, t.session, ack);
                }
            }
            if ctx.is_some() {
                let d = Deferred::Resolved { partition: p, seq };
                if let Some(now) = self.durability.after_durable(d) {
                    self.run_deferred(now);
                }
            }
        }
    }

    fn run_deferred(&mut self, d: Deferred) {
        let Deferred::Resolved { partition, seq } = d;
        let i = partition.0 as usize;
        self.s.set(i, self.s.get(i).max(seq)); // Alg. 2 l.27
        self.make_visible();
    }

    // ---- Eiger's held requests ----

    /// Eiger: whether a write must wait (module doc, choice 3): an update that observes
    /// state, on a key a txn still open at the partition writes, with a snapshot (or, for
    /// a blind write, a past) that may include that txn. PrompTCC's merge makes such a txn
    /// visible before the effects are computed; Eiger has no merge, so the write waits.
    fn write_waits(&self, m: &Msg) -> bool {
        let Msg::Write {
            txn,
            partition,
            updates,
            deps,
            snapshot,
            ..
        } = m
        else {
            return false;
        };
        let Some(part) = self.parts.get(partition) else {
            return false;
        };
        // on_write answers a duplicate or a fenced txn at once.
        if !self.flavor.local_visibility()
            || part.seqs.contains_key(txn)
            || part.fences.contains(txn)
        {
            return false;
        }
        let at = snapshot
            .as_ref()
            .unwrap_or(deps)
            .to_vc(self.topo.partitions as usize);
        let observes = |k: &Key| {
            updates
                .iter()
                .any(|(u, up, _)| u == k && !may_observe_nothing(up))
        };
        part.in_doubt(&at, observes)
    }

    /// Holds a write [`Node::write_waits`] named, or refuses it when too many wait.
    fn park_write(&mut self, ctx: &mut Ctx<Msg>, from: Addr, m: Msg) {
        if self.parked.len() < PARKED_MAX {
            return self.parked.push_back((from, m));
        }
        let Msg::Write {
            txn,
            req,
            partition,
            coord,
            ..
        } = m
        else {
            return;
        };
        let coord_node = self.node_of(coord);
        ctx.send(Addr::Node(coord_node), Msg::Refused { txn });
        let error = Error::Unavailable("too many writes wait for txns to resolve".into());
        let m = Msg::WriteFailed {
            txn,
            req,
            partition,
            error,
        };
        ctx.send(from, m);
    }

    /// Re-runs the held requests once something became visible or resolved; those still
    /// in doubt are held again.
    fn serve_parked(&mut self, ctx: &mut Ctx<Msg>) {
        if !std::mem::take(&mut self.recheck) || self.parked.is_empty() {
            return;
        }
        for (from, m) in std::mem::take(&mut self.parked) {
            self.dispatch(ctx, from, m);
        }
    }

    /// Aborts `txn` at our partitions that hold it prepared without a final timestamp,
    /// and fences it where it was never seen (§VIII).
    fn abort_here(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, fence_unseen: bool) {
        let ids: Vec<PartitionId> = self.parts.keys().copied().collect();
        for p in ids {
            let part = self.part(p);
            match part.pending_of(txn) {
                Some(seq) if part.pending[&seq].final_ts.is_none() => {
                    part.pending.remove(&seq);
                    part.aborted.insert(seq);
                    self.persist(ctx, Record::Abort { partition: p, seq }, Vec::new());
                    self.resolve(Some(ctx), p);
                }
                None if fence_unseen && !part.seqs.contains_key(&txn) => {
                    part.fence(txn);
                    let record = Record::Fence { partition: p, txn };
                    self.persist(ctx, record, Vec::new());
                }
                _ => {}
            }
        }
    }

    // ---- coordinator side (Alg. 2 l.10-19) ----

    fn on_prepared(
        &mut self,
        ctx: &mut Ctx<Msg>,
        txn: TxnId,
        (partition, seq): (PartitionId, u64),
        parts: Vec<PartitionId>,
    ) {
        let clock = self.clock;
        if !self.coord.contains_key(&txn) {
            if self.coord.len() >= COORD_TXNS_MAX {
                return; // the txn's recovery will finish it
            }
            self.coord.insert(txn, (parts, BTreeMap::new(), clock));
        }
        let entry = self.coord.get_mut(&txn).expect("inserted");
        entry.1.insert(partition, seq);
        if entry.0.iter().all(|p| entry.1.contains_key(p)) {
            let (parts, votes, _) = self.coord.remove(&txn).expect("present");
            let final_ts: Vec<(PartitionId, u64)> = votes.into_iter().collect(); // l.14
            for n in self.nodes_of(&parts) {
                let m = Msg::Commit {
                    txn,
                    final_ts: final_ts.clone(),
                };
                ctx.send(Addr::Node(n), m);
            }
        }
    }

    fn parts_of_txn(&self, txn: TxnId) -> Vec<PartitionId> {
        self.parts
            .values()
            .find_map(|part| {
                let seq = part.seqs.get(&txn)?;
                part.pending.get(seq).map(|p| p.t.parts.clone())
            })
            .unwrap_or_default()
    }

    fn nodes_of(&self, parts: &[PartitionId]) -> Vec<NodeId> {
        let mut nodes: Vec<NodeId> = parts.iter().map(|p| self.node_of(*p)).collect();
        nodes.sort();
        nodes.dedup();
        nodes
    }

    fn on_refused(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        let parts = self
            .coord
            .remove(&txn)
            .map(|(p, _, _)| p)
            .unwrap_or_else(|| self.parts_of_txn(txn));
        for n in self.nodes_of(&parts) {
            ctx.send(Addr::Node(n), Msg::Abort { txn });
        }
    }

    // ---- recovery (§VIII) ----

    /// Queries the participants of txns prepared here for long with no final timestamp.
    fn query_stuck(&mut self, ctx: &mut Ctx<Msg>) {
        let (clock, after) = (self.clock, self.cfg.recover_after_ns);
        let mut asks = Vec::new();
        for part in self.parts.values_mut() {
            for p in part.pending.values_mut().filter(|p| p.final_ts.is_none()) {
                if clock.saturating_sub(p.since) >= after && p.query.due(clock, after) {
                    asks.push((p.t.txn, p.t.parts.clone()));
                }
            }
        }
        for (txn, parts) in asks {
            if self.recovering.len() < COORD_TXNS_MAX {
                self.recovering.entry(txn).or_default();
            }
            for n in self.nodes_of(&parts) {
                ctx.send(Addr::Node(n), Msg::Query { txn });
            }
        }
    }

    fn on_query(&mut self, ctx: &mut Ctx<Msg>, from: Addr, txn: TxnId) {
        let ids: Vec<PartitionId> = self.parts.keys().copied().collect();
        for p in ids {
            let known = self.parts[&p].seqs.get(&txn).copied();
            if known.is_none() && !self.parts[&p].fences.contains(&txn) {
                // Never seen here: it never will be (a late write_request is refused).
                self.part(p).fence(txn);
                let record = Record::Fence { partition: p, txn };
                let m = Msg::Status {
                    txn,
                    partition: p,
                    seq: None,
                };
                self.persist(ctx, record, vec![(from, m)]);
            } else {
                let m = Msg::Status {
                    txn,
                    partition: p,
                    seq: known,
                };
                self.durability.send_after_durable(ctx, from, m);
            }
        }
    }

    fn on_status(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, p: PartitionId, seq: Option<u64>) {
        let parts = self.parts_of_txn(txn);
        let Some(answers) = self.recovering.get_mut(&txn) else {
            return;
        };
        answers.insert(p, seq);
        let relevant = parts.iter().any(|q| answers.get(q) == Some(&None));
        let complete = !parts.is_empty() && parts.iter().all(|q| answers.contains_key(q));
        if !relevant && !complete {
            return;
        }
        let answers = self.recovering.remove(&txn).expect("present");
        let msg = if relevant {
            Msg::Abort { txn }
        } else {
            let final_ts = parts
                .iter()
                .map(|q| (*q, answers[q].expect("every participant holds it")))
                .collect();
            Msg::Commit { txn, final_ts }
        };
        for n in self.nodes_of(&parts) {
            ctx.send(Addr::Node(n), msg.clone());
        }
    }

    // ---- stabilization and GC ----

    fn stabilize(&mut self, ctx: &mut Ctx<Msg>) {
        let entries: Vec<(PartitionId, u64)> = self
            .parts
            .keys()
            .map(|p| (*p, self.s.get(p.0 as usize)))
            .collect();
        let others: Vec<NodeId> = self
            .topo
            .nodes_in_dc(DcId(0))
            .filter(|n| *n != self.me)
            .collect();
        for n in others {
            let m = Msg::Stable {
                entries: entries.clone(),
            };
            ctx.send(Addr::Node(n), m);
        }
        let (clock, horizon) = (self.clock, self.cfg.txn_timeout_ns);
        for part in self.parts.values_mut() {
            part.gc(clock, horizon);
        }
        self.query_stuck(ctx);
        let stale = self.cfg.txn_timeout_ns * 2;
        self.coord
            .retain(|_, (_, _, since)| clock.saturating_sub(*since) < stale);
    }

    fn on_stable(&mut self, entries: Vec<(PartitionId, u64)>) {
        self.work += entries.len() as u64;
        for (p, v) in entries {
            let i = p.0 as usize;
            if !self.parts.contains_key(&p) {
                self.s.set(i, self.s.get(i).max(v));
            }
        }
        self.make_visible();
    }

    fn on_snapshot(&mut self, ctx: &mut Ctx<Msg>, from: Addr, rid: u64) {
        self.counters.reads += 1; // Wren's first round
        let n = self.topo.partitions as usize;
        let snapshot = Wire::of(&self.s, n, self.flavor.full_vectors());
        ctx.send(from, Msg::SnapshotReply { rid, snapshot });
    }

    /// `Request::ListKeys` (`kit::keys`): a page of one of this node's partitions, from
    /// its store as it is (versions not yet visible included).
    fn on_list_keys(&mut self, ctx: &mut Ctx<Msg>, from: Addr, ask: ListAsk) {
        let part = self.parts.get_mut(&ask.partition);
        let list = part.map(|p| p.store.list_keys(ask.from, ask.max));
        let answer = crate::kit::keys::answer(&ask, self.topo.partitions, list);
        ctx.send(from, Msg::KeysListed(answer));
    }

    fn dispatch(&mut self, ctx: &mut Ctx<Msg>, from: Addr, msg: Msg) {
        match msg {
            Msg::Read {
                rid,
                partition,
                keys,
                kind,
                first,
            } => self.on_read(ctx, from, rid, partition, keys, kind, first),
            Msg::Snapshot { rid } => self.on_snapshot(ctx, from, rid),
            Msg::ListKeys(ask) => self.on_list_keys(ctx, from, ask),
            Msg::KeysListed(_) => {}
            m @ Msg::Write { .. } if self.write_waits(&m) => self.park_write(ctx, from, m),
            Msg::Write {
                txn,
                req,
                partition,
                updates,
                parts,
                coord,
                deps,
                snapshot,
            } => self.on_write(
                ctx,
                from,
                (txn, req, partition),
                updates,
                parts,
                coord,
                deps,
                snapshot,
            ),
            Msg::Prepared {
                txn,
                partition,
                seq,
                parts,
            } => self.on_prepared(ctx, txn, (partition, seq), parts),
            Msg::Refused { txn } => self.on_refused(ctx, txn),
            Msg::Commit { txn, final_ts } => self.on_commit(ctx, txn, final_ts),
            Msg::Abort { txn } => self.abort_here(ctx, txn, true),
            Msg::Query { txn } => self.on_query(ctx, from, txn),
            Msg::Status {
                txn,
                partition,
                seq,
            } => self.on_status(ctx, txn, partition, seq),
            Msg::Stable { entries } => self.on_stable(entries),
            Msg::ReadReply { .. }
            | Msg::EigerReadReply { .. }
            | Msg::ReadPending { .. }
            | Msg::SnapshotReply { .. }
            | Msg::Committed { .. }
            | Msg::WriteFailed { .. } => {}
        }
    }
}

/// Answers a read with `e` for every key.
fn refuse_read(
    ctx: &mut Ctx<Msg>,
    from: Addr,
    (rid, partition): (u64, PartitionId),
    keys: Vec<(Key, ObjType)>,
    e: Error,
) {
    let objects = keys.into_iter().map(|(k, _)| (k, Err(e.clone()))).collect();
    let m = Msg::ReadReply {
        rid,
        partition,
        objects,
        ts: Vec::new(),
        vis: 0,
        snapshot: None,
    };
    ctx.send(from, m);
}

/// The vector above every timestamp: "every visible version".
fn top(n: usize) -> Vc {
    Vc {
        dcs: vec![u64::MAX; n],
        extra: Vec::new(),
    }
}

impl ServerNode for Node {
    type Msg = Msg;

    fn start(&mut self, ctx: &mut Ctx<Msg>) {
        self.clock = self.clock.max(ctx.clock);
        for part in self.parts.values_mut() {
            part.restamp_recent(self.clock);
        }
        let first = self.clock + self.params.timer_phase_ns;
        self.timers.set(Timer::Stabilize, first);
        self.handle_timeout(ctx);
    }

    fn handle_message(&mut self, ctx: &mut Ctx<Msg>, from: Addr, msg: Msg) {
        self.clock = self.clock.max(ctx.clock);
        self.lamport += u64::from(self.flavor.validity_intervals()); // Eiger's tick
        self.dispatch(ctx, from, msg);
        self.serve_parked(ctx);
    }

    fn handle_timeout(&mut self, ctx: &mut Ctx<Msg>) {
        self.clock = self.clock.max(ctx.clock);
        for t in self.timers.take_due(self.clock) {
            match t {
                Timer::Stabilize => {
                    let every = self.params.stabilization_interval_ns;
                    self.timers.set(Timer::Stabilize, self.clock + every);
                    self.stabilize(ctx);
                }
            }
        }
        self.serve_parked(ctx);
    }

    fn handle_persisted(&mut self, ctx: &mut Ctx<Msg>, lsn: Lsn) {
        self.clock = self.clock.max(ctx.clock);
        for d in self.durability.persisted(ctx, lsn) {
            self.run_deferred(d);
        }
        self.serve_parked(ctx);
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        self.timers.next()
    }

    fn checkpoint(&self) -> Option<Vec<u8>> {
        self.take_checkpoint()
    }

    fn can_checkpoint(&self) -> bool {
        true
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.durability.check_invariants()?;
        for (id, part) in &self.parts {
            let durable = self.s.get(part.idx());
            if durable > part.committed {
                return Err(format!(
                    "{id:?}: S[i] = {durable} above the resolved prefix {}",
                    part.committed
                ));
            }
            if part.committed > part.s {
                return Err(format!(
                    "{id:?}: resolved {} past s_i {}",
                    part.committed, part.s
                ));
            }
            if let Some(seq) = part.pending.keys().next() {
                if *seq <= part.committed {
                    return Err(format!(
                        "{id:?}: {seq} pending at or below the resolved prefix"
                    ));
                }
            }
        }
        Ok(())
    }

    fn gauges(&self, _clock: Nanos) -> Vec<(&'static str, f64)> {
        let versions: usize = self.parts.values().map(|p| p.store.versions()).sum();
        let invisible: usize = self.parts.values().map(|p| p.invisible.len()).sum();
        let c = self.counters;
        let mut gauges = vec![
            ("store_versions", versions as f64),
            ("invisible_txns", invisible as f64),
            ("reads_total", c.reads as f64),
            ("reads_round_two", c.reads_round_two as f64),
            ("read_bytes_total", c.read_bytes as f64),
        ];
        if self.flavor.local_visibility() {
            gauges.push(("reads_round_three", c.reads_round_three as f64));
            gauges.push(("parked_requests", self.parked.len() as f64));
        }
        gauges
    }

    /// The node's own work and the versions its stores' reads visited.
    fn take_work(&mut self) -> u64 {
        let traversed: u64 = self
            .parts
            .values()
            .map(|p| p.store.take_traversed_work())
            .sum();
        std::mem::take(&mut self.work) + traversed
    }
}
