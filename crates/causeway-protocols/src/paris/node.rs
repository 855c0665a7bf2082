//! The PaRiS server node: hosts the replicas of its partitions that its DC stores
//! ([`Part`]), coordinates transactions (`coord.rs`), replicates and stabilizes
//! (`ust.rs`). This file holds the node's state, recovery, dispatch, the partition side
//! of reads and 2PC (Alg. 3), applying committed txns (Alg. 4 l.5-19), timers and
//! invariants.

use super::config::{Config, Flavor, Mutation};
use super::coord_state::Coord;
use super::msg::{Effects, Msg, Record};
use super::part::{BlockedPrepare, BlockedRead, Part, Prepared};
use super::types::{root_of, Deferred};
use crate::kit::durability::Durability;
use crate::kit::gossip::Gossip;
use crate::kit::keys::ListAsk;
use crate::kit::timers::Timers;
use crate::kit::twopc::Retry;
use crate::kit::txn::ReadId;
use crate::params::{NodeConfig, Params};
use causeway_core::crdt::ObjType;
use causeway_core::limits::WAITING_REQUESTS_MAX;
use causeway_core::{
    Addr, Ctx, DcId, Error, Key, Lsn, Nanos, NodeId, PartitionId, ServerNode, Topology, TxnId,
};
use std::collections::{BTreeMap, BTreeSet};

/// Most measurement samples buffered between two `take_samples` calls.
pub const SAMPLES_MAX: usize = 4096;

pub use crate::kit::clock::Time;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Timer {
    /// Apply and replicate committed txns, or heartbeat (Alg. 4 l.5, every Δ_R).
    Replicate,
    /// UST and GC exchange, inquiries, coordinator expiry (Alg. 4 l.34-38).
    Stabilize,
}

/// Bytes sent, by purpose (PaRiS Fig. 6).
#[derive(Clone, Copy, Debug, Default)]
pub struct Traffic {
    pub ust_intra_dc: u64,
    pub ust_inter_dc: u64,
    pub replication: u64,
}

pub struct Node {
    pub(super) topo: Topology,
    pub(super) params: Params,
    pub(super) cfg: Config,
    pub(super) me: NodeId,
    pub(super) d: DcId,
    pub(super) flavor: Flavor,
    pub(super) mutation: Mutation,
    pub(super) time: Time,
    pub(super) parts: BTreeMap<PartitionId, Part>,
    pub(super) coord: Coord,
    /// `ust_n^m`: every partition of every DC installed every txn up to it.
    pub(super) ust: u64,
    /// The global oldest snapshot in use: versions at or below it may fold.
    pub(super) gc_point: u64,
    /// Inside the DC: each node's minimum `VV` entry (the GST is their meet).
    pub(super) dc_vv: Gossip<u64>,
    /// Inside the DC: each node's oldest snapshot in use.
    pub(super) dc_oldest: Gossip<u64>,
    /// At the DC's root: each DC's GST (the UST is their meet) and oldest snapshot.
    pub(super) dc_gst: Gossip<u64>,
    pub(super) dc_gc: Gossip<u64>,
    pub(super) stabilize_ticks: u64,
    pub(super) durability: Durability<Msg, Deferred>,
    timers: Timers<Timer>,
    /// (partition, sibling DC) still to be told that we restarted.
    pub(super) announce: BTreeSet<(PartitionId, DcId)>,
    pub(super) traffic: Traffic,
    /// Running mean of the cache sizes clients report with START (writes).
    pub(super) cache_mean: f64,
    samples: Vec<(&'static str, u64)>,
    pub(super) work: u64,
}

impl Node {
    /// Builds a node and replays its records (oldest first).
    pub fn recover(
        config: NodeConfig,
        cfg: Config,
        flavor: Flavor,
        records: &[Vec<u8>],
    ) -> Result<Node, String> {
        let topo = config.topology.clone();
        let d = topo.dc_of(config.node);
        let dcs = usize::from(topo.dcs);
        let parts = topo
            .partitions_of(config.node)
            .into_iter()
            .map(|p| (p, Part::new(dcs, d, topo.replicas_of(p))))
            .collect();
        let dc_nodes: Vec<NodeId> = topo.nodes_in_dc(d).collect();
        let roots: Vec<NodeId> = topo.all_dcs().map(|x| root_of(&topo, x)).collect();
        let mut node = Node {
            me: config.node,
            d,
            flavor,
            mutation: flavor.mutation(config.params.mutation.as_deref())?,
            time: Time::default(),
            parts,
            coord: Coord::default(),
            ust: 0,
            gc_point: 0,
            dc_vv: Gossip::new(dc_nodes.clone(), 0),
            dc_oldest: Gossip::new(dc_nodes, 0),
            dc_gst: Gossip::new(roots.clone(), 0),
            dc_gc: Gossip::new(roots, 0),
            stabilize_ticks: 0,
            durability: Durability::starting_after(records.len() as Lsn),
            timers: Timers::default(),
            announce: BTreeSet::new(),
            traffic: Traffic::default(),
            cache_mean: 0.0,
            samples: Vec::new(),
            work: 0,
            cfg,
            params: config.params,
            topo,
        };
        for (i, bytes) in records.iter().enumerate() {
            node.replay(Record::decode(i, bytes)?);
        }
        // A transfer whose chunks were persisted but not its end is dropped (the sender
        // sends a new one).
        for part in node.parts.values_mut() {
            part.transfers.incoming.clear();
        }
        node.time.last += 1; // never reissue a timestamp on disk
        if !records.is_empty() {
            node.announce = node
                .parts
                .iter()
                .flat_map(|(p, part)| part.sibs.ids().into_iter().map(move |s| (*p, s)))
                .collect();
        }
        Ok(node)
    }

    fn replay(&mut self, record: Record) {
        match record {
            Record::Lease { until } => self.time.recovered(until),
            Record::Prepare {
                partition,
                txn,
                coord,
                pt,
                ops,
            } => self.replay_prepare(partition, txn, coord, pt, ops),
            Record::Commit { partition, txn, ct } => {
                self.time.last = self.time.last.max(ct);
                self.part(partition).commit(txn, ct);
            }
            Record::OnePhase {
                partition,
                txn,
                coord,
                pt,
                ops,
            } => {
                self.replay_prepare(partition, txn, coord, pt, ops);
                self.part(partition).commit(txn, pt);
            }
            Record::Abort { partition, txn } => {
                self.part(partition).prepared.remove(&txn);
            }
            Record::Remote {
                partition,
                origin,
                upto,
                txns,
            } => {
                let part = self.part(partition);
                for t in txns {
                    part.add_remote(origin, t, 0);
                }
                part.unseen.clear();
                part.received.recovered(origin, upto);
                let o = usize::from(origin.0);
                part.vv.set(o, part.vv.get(o).max(upto));
            }
            Record::Decision {
                txn,
                ct,
                participants,
            } => {
                let parts = participants.into_iter().collect();
                self.coord.decisions.recovered(txn, ct, parts);
            }
            Record::Ended { txn } => self.coord.decisions.forget(txn),
            Record::Checkpoint(ck) => self.restore(*ck),
            Record::TransferChunk {
                partition,
                from,
                chunk,
            } => self.part(partition).transfers.replay_chunk(from, chunk),
            Record::TransferDone {
                partition,
                from,
                id,
            } => self.replay_done(partition, from, id),
        }
    }

    /// A prepared txn given back by its record (a `Prepare`, or the first half of a
    /// `OnePhase`).
    fn replay_prepare(&mut self, p: PartitionId, txn: TxnId, coord: NodeId, pt: u64, ops: Effects) {
        self.time.last = self.time.last.max(pt);
        let recovered = Prepared::recovered(coord, pt, ops);
        self.part(p).prepared.insert(txn, recovered);
    }

    pub(super) fn part(&mut self, p: PartitionId) -> &mut Part {
        self.parts
            .get_mut(&p)
            .expect("a record or message for a hosted partition")
    }

    pub(super) fn sample(&mut self, name: &'static str, value: u64) {
        if self.samples.len() < SAMPLES_MAX {
            self.samples.push((name, value));
        }
    }

    /// Persists `record`, then sends `then` (persist before release).
    pub(super) fn persist(&mut self, ctx: &mut Ctx<Msg>, record: Record, then: Vec<(Addr, Msg)>) {
        self.durability.persist(ctx, record.encode(), then);
    }

    pub(super) fn after_durable(&mut self, ctx: &mut Ctx<Msg>, action: Deferred) {
        if let Some(now) = self.durability.after_durable(action) {
            self.run_deferred(ctx, now);
        }
    }

    fn run_deferred(&mut self, ctx: &mut Ctx<Msg>, action: Deferred) {
        match action {
            Deferred::Lease(until) => self.time.lease_durable(until),
            Deferred::Remote {
                partition,
                origin,
                upto,
            } => {
                let part = self.part(partition);
                let o = usize::from(origin.0);
                part.vv.set(o, part.vv.get(o).max(upto));
            }
            Deferred::Commit { partition, txn, ct } => {
                self.part(partition).commit(txn, ct);
            }
            Deferred::Decision(txn) => self.coord.decisions.durable(txn),
            Deferred::Abort { partition, txn } => {
                let part = self.part(partition);
                if part
                    .prepared
                    .get(&txn)
                    .is_some_and(|p| p.committing.is_none())
                {
                    part.prepared.remove(&txn);
                }
            }
            Deferred::Transfer { partition, claims } => self.transfer_durable(partition, &claims),
        }
        self.advance(ctx);
    }

    /// Renews the lease on claimable timestamps before the clock reaches it.
    fn renew_lease(&mut self, ctx: &mut Ctx<Msg>) {
        let Some(until) = self.time.lease_to_renew(self.cfg.lease_ns) else {
            return;
        };
        self.persist(ctx, Record::Lease { until }, Vec::new());
        self.after_durable(ctx, Deferred::Lease(until));
    }

    /// Applies what every partition may apply now (Alg. 4 l.6-19) and serves the BPR
    /// reads whose snapshot is now installed.
    pub(super) fn advance(&mut self, ctx: &mut Ctx<Msg>) {
        self.raise_to_ust();
        let (claimable, clock) = (self.time.claimable(), self.time.clock);
        for part in self.parts.values_mut() {
            let ub = part.upper_bound(claimable);
            self.work += part.apply_upto(ub, clock) as u64;
        }
        self.serve_blocked(ctx);
    }

    // ---- partition side: reads (Alg. 3 l.1-8) ----

    fn on_read_slice(
        &mut self,
        ctx: &mut Ctx<Msg>,
        coord: NodeId,
        rid: ReadId,
        partition: PartitionId,
        snapshot: u64,
        keys: Vec<(Key, ObjType)>,
    ) {
        let Some(part) = self.parts.get(&partition) else {
            let e = Error::Unavailable(format!("{partition:?} is not stored here"));
            return reply_slice(ctx, coord, rid, partition, &keys, Err(e));
        };
        let installed = part.vv_min();
        match self.flavor {
            Flavor::Paris => {
                self.ust = self.ust.max(snapshot); // Alg. 3 l.2
                if snapshot > installed {
                    // Only a broken UST gets here: the read goes on, the checker judges.
                    self.sample("read_above_installed", snapshot - installed);
                }
                self.serve_read(ctx, coord, rid, partition, snapshot, keys, None);
            }
            Flavor::Bpr => {
                // The HLC follows the snapshot (our own entry never blocks on it); the
                // read waits until every replica's txns up to it are applied here.
                self.time.last = self.time.last.max(snapshot);
                let now = self.time.clock;
                let b = BlockedRead {
                    coord,
                    rid,
                    snapshot,
                    keys,
                    arrived: now,
                };
                self.block(ctx, partition, b);
            }
            Flavor::Nocc => self.serve_read(ctx, coord, rid, partition, u64::MAX, keys, None),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn serve_read(
        &mut self,
        ctx: &mut Ctx<Msg>,
        coord: NodeId,
        rid: ReadId,
        partition: PartitionId,
        snapshot: u64,
        keys: Vec<(Key, ObjType)>,
        arrived: Option<Nanos>,
    ) {
        self.work += keys.len() as u64;
        let objects = self.parts[&partition].read(snapshot, &keys);
        if let Some(at) = arrived {
            let blocked = self.time.clock.saturating_sub(at);
            self.sample("read_block_ns", blocked);
        }
        let m = Msg::ReadSliceReply {
            rid,
            partition,
            objects,
        };
        ctx.send(Addr::Node(coord), m);
    }

    fn block(&mut self, ctx: &mut Ctx<Msg>, partition: PartitionId, b: BlockedRead) {
        let total: usize = self.parts.values().map(|p| p.blocked.len()).sum();
        if total >= WAITING_REQUESTS_MAX {
            let e = Error::Unavailable("partition overloaded".into());
            return reply_slice(ctx, b.coord, b.rid, partition, &b.keys, Err(e));
        }
        self.part(partition).blocked.push(b);
        self.serve_blocked(ctx);
    }

    /// BPR (§V): serves the blocked reads whose snapshot every replica's txns reached.
    fn serve_blocked(&mut self, ctx: &mut Ctx<Msg>) {
        let no_block = self.mutation.no_read_block;
        let mut ready = Vec::new();
        for (pid, part) in self.parts.iter_mut() {
            if part.blocked.is_empty() {
                continue;
            }
            let installed = part.vv_min();
            let (go, stay) = std::mem::take(&mut part.blocked)
                .into_iter()
                .partition(|b| no_block || b.snapshot <= installed);
            part.blocked = stay;
            ready.extend(go.into_iter().map(|b: BlockedRead| (*pid, b)));
        }
        for (pid, b) in ready {
            let at = Some(b.arrived);
            self.serve_read(ctx, b.coord, b.rid, pid, b.snapshot, b.keys, at);
        }
        let mut prepares = Vec::new();
        for (pid, part) in self.parts.iter_mut() {
            let installed = part.vv_min();
            let (go, stay) = std::mem::take(&mut part.blocked_prepares)
                .into_iter()
                .partition(|b| b.snapshot <= installed);
            part.blocked_prepares = stay;
            prepares.extend(go.into_iter().map(|b: BlockedPrepare| (*pid, b)));
        }
        for (pid, b) in prepares {
            self.prepare(ctx, pid, b);
        }
    }

    // ---- partition side: 2PC participant (Alg. 3 l.9-19) ----

    /// PrepareReq (Alg. 3 l.9). BPR parks one whose effects read the snapshot (a set
    /// remove, an mvreg assignment) until the snapshot is installed, like a read.
    fn on_prepare(&mut self, ctx: &mut Ctx<Msg>, partition: PartitionId, b: BlockedPrepare) {
        let Some(part) = self.parts.get(&partition) else {
            let e = Error::Unavailable(format!("{partition:?} is not stored here"));
            let m = Msg::Prepared {
                txn: b.txn,
                partition,
                result: Err(e),
            };
            return ctx.send(Addr::Node(b.coord), m);
        };
        let reads = b
            .updates
            .iter()
            .any(|(_, u, _)| crate::kit::txn::reads_state(u));
        let parked: usize = self.parts.values().map(|p| p.blocked_prepares.len()).sum();
        let wait = self.flavor == Flavor::Bpr && reads && b.snapshot > part.vv_min();
        if wait && parked < WAITING_REQUESTS_MAX {
            self.time.last = self.time.last.max(b.snapshot);
            return self.part(partition).blocked_prepares.push(b);
        }
        self.prepare(ctx, partition, b);
    }

    /// Alg. 3 l.10-14: effects at the snapshot, a proposed time, the record persisted
    /// before the vote leaves.
    ///
    /// One-phase commit (issue 14), for a txn that writes this partition only: the
    /// coordinator would commit it at the highest proposed time (Alg. 2 l.26-27), which
    /// with one participant is ours, so we commit it at `pt` ourselves. One record stands
    /// for the prepare, the commit and the coordinator's decision. Until it is durable the
    /// txn stays prepared, holding `VV[own]` below `pt` (Alg. 3 l.20-24), exactly as a
    /// 2PC txn does while its decision and commit record are persisted; then it joins
    /// `Committed` and the vote leaves, the coordinator answering the client without a
    /// decision record. It never inquires and is never aborted (`committing` is set): a
    /// coordinator whose vote timed out tells its client the outcome is unknown. A crash
    /// before the record is durable forgets it, and nobody was answered.
    fn prepare(&mut self, ctx: &mut Ctx<Msg>, partition: PartitionId, b: BlockedPrepare) {
        let BlockedPrepare {
            coord,
            txn,
            snapshot,
            ht,
            updates,
            cached,
            one_phase,
        } = b;
        let vote = |result| Msg::Prepared {
            txn,
            partition,
            result,
        };
        let part = &self.parts[&partition];
        if let Some(p) = part.prepared.get(&txn) {
            // A re-sent PREPARE (`Coord::resend_prepares`): the first vote was lost, or
            // its record was replayed after a crash. Vote again, with the same time and
            // effects, once the record is durable; a decided txn's coordinator has its vote.
            if p.committing.is_none() && !p.aborting {
                let m = vote(Ok((p.pt, p.ops.clone())));
                self.durability
                    .send_after_durable(ctx, Addr::Node(coord), m);
            }
            return;
        }
        let at = match self.flavor {
            Flavor::Nocc => u64::MAX,
            _ => snapshot,
        };
        let ops = match part.effects(at, &updates, &cached) {
            Ok(ops) => ops,
            Err(e) => return ctx.send(Addr::Node(coord), vote(Err(e))),
        };
        self.work += ops.len() as u64;
        let pt = self.propose(snapshot, ht);
        let p = Prepared {
            coord,
            pt,
            ops: ops.clone(),
            inquiry: Retry::sent_at(self.time.clock),
            committing: one_phase.then_some(pt),
            aborting: false,
        };
        self.part(partition).prepared.insert(txn, p);
        let (txn_ops, then) = (ops.clone(), vec![(Addr::Node(coord), vote(Ok((pt, ops))))]);
        if one_phase {
            return self.commit_one_phase(ctx, (partition, txn, coord, pt), txn_ops, then);
        }
        let record = Record::Prepare {
            partition,
            txn,
            coord,
            pt,
            ops: txn_ops,
        };
        self.persist(ctx, record, then);
    }

    /// A one-phase txn's record; once it is durable, the commit at `pt` and the vote
    /// (`then`).
    fn commit_one_phase(
        &mut self,
        ctx: &mut Ctx<Msg>,
        (partition, txn, coord, pt): (PartitionId, TxnId, NodeId, u64),
        ops: Effects,
        then: Vec<(Addr, Msg)>,
    ) {
        let record = Record::OnePhase {
            partition,
            txn,
            coord,
            pt,
            ops,
        };
        if self.mutation.one_phase_early {
            then.into_iter().for_each(|(to, m)| ctx.send(to, m));
            self.persist(ctx, record, Vec::new());
        } else {
            self.persist(ctx, record, then);
        }
        self.after_durable(
            ctx,
            Deferred::Commit {
                partition,
                txn,
                ct: pt,
            },
        );
    }

    /// The proposed commit time (Alg. 3 l.10-12): `HLC = max(Clock, ht + 1, HLC + 1)`,
    /// `ust = max(ust, snapshot)`, a fresh time above both. NoCC: the clock + 1 (§V).
    fn propose(&mut self, snapshot: u64, ht: u64) -> u64 {
        match self.flavor {
            Flavor::Paris => {
                self.ust = self.ust.max(snapshot);
                self.time.last = self.time.last.max(ht).max(self.ust);
            }
            Flavor::Bpr => self.time.last = self.time.last.max(ht).max(snapshot),
            Flavor::Nocc => {}
        }
        let pt = self.time.issue(self.time.clock);
        assert!(
            self.flavor == Flavor::Nocc || (pt > ht && pt > snapshot),
            "Lemma 1: a proposed time above the snapshot and the client's writes"
        );
        pt
    }

    /// COMMIT (Alg. 3 l.15-19): the HLC catches up with `ct`; the txn stays prepared
    /// (holding `VV[own]` below it) until the commit record is durable, then joins
    /// `Committed`, and the ack leaves.
    fn on_commit_txn(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: Addr,
        txn: TxnId,
        partition: PartitionId,
        ct: u64,
    ) {
        let ack = Msg::CommitAck { txn, partition };
        let fresh = self.parts.get_mut(&partition).and_then(|part| {
            let p = part.prepared.get_mut(&txn)?;
            let first = p.committing.is_none();
            p.committing = Some(ct);
            first.then_some(())
        });
        if fresh.is_none() {
            // Committed before, or being made durable: ack once it is.
            return self.durability.send_after_durable(ctx, from, ack);
        }
        if self.flavor != Flavor::Nocc {
            self.time.last = self.time.last.max(ct); // Alg. 3 l.16
        }
        self.persist(
            ctx,
            Record::Commit { partition, txn, ct },
            vec![(from, ack)],
        );
        self.after_durable(ctx, Deferred::Commit { partition, txn, ct });
    }

    /// ABORT of a prepared txn: it leaves `Prepared` once the abort record is durable,
    /// so `VV[own]` never passes a txn that a restart would bring back as prepared.
    fn on_abort_txn(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, partition: PartitionId) {
        let open = self
            .parts
            .get(&partition)
            .and_then(|part| part.prepared.get(&txn));
        if open.is_some_and(|p| p.committing.is_none() && !p.aborting) {
            self.part(partition)
                .prepared
                .get_mut(&txn)
                .expect("open")
                .aborting = true;
            self.persist(ctx, Record::Abort { partition, txn }, Vec::new());
            self.after_durable(ctx, Deferred::Abort { partition, txn });
        }
    }

    /// Asks coordinators about txns prepared here for long (or since a restart).
    fn inquire(&mut self, ctx: &mut Ctx<Msg>) {
        let clock = self.time.clock;
        for (pid, part) in self.parts.iter_mut() {
            let open = part
                .prepared
                .iter_mut()
                .filter(|(_, p)| p.committing.is_none() && !p.aborting);
            for (txn, p) in open {
                if p.inquiry.due(clock, self.cfg.inquire_after_ns) {
                    let m = Msg::Inquire {
                        txn: *txn,
                        partition: *pid,
                    };
                    ctx.send(Addr::Node(p.coord), m);
                }
            }
        }
    }

    // ---- dispatch and timers ----

    /// Routes a message: the coordinator's here, the partitions' and replication's to
    /// their own routers.
    fn dispatch(&mut self, ctx: &mut Ctx<Msg>, from: Addr, msg: Msg) {
        let from_node = match from {
            Addr::Node(n) => n,
            Addr::Client(_) => self.me,
        };
        match msg {
            Msg::Read {
                txn,
                req,
                start,
                keys,
            } => self.on_read(ctx, from, txn, req, start, keys),
            Msg::Commit {
                txn,
                req,
                start,
                hwt,
                updates,
                cached,
            } => self.on_commit(ctx, from, (txn, req), start, hwt, updates, cached),
            Msg::Abort { txn } => self.coord.forget(txn),
            Msg::ListKeys(ask) => self.on_list_keys(ctx, from, ask),
            Msg::ReadSliceReply {
                rid,
                partition,
                objects,
            } => self.on_slice_reply(ctx, rid, partition, objects),
            Msg::Prepared {
                txn,
                partition,
                result,
            } => self.on_prepared(ctx, txn, partition, result),
            Msg::CommitAck { txn, partition } => self.on_commit_ack(ctx, txn, partition),
            Msg::Inquire { txn, partition } => self.on_inquire(ctx, from, txn, partition),
            Msg::ReadResult { .. } | Msg::CommitResult { .. } | Msg::KeysListed(_) => {}
            msg @ (Msg::ReadSlice { .. }
            | Msg::Prepare { .. }
            | Msg::CommitTxn { .. }
            | Msg::AbortTxn { .. }) => self.dispatch_partition(ctx, from, from_node, msg),
            msg @ (Msg::Repl { .. }
            | Msg::Transfer { .. }
            | Msg::Stable { .. }
            | Msg::Gst { .. }
            | Msg::Ust { .. }) => self.dispatch_replication(ctx, from_node, msg),
        }
    }

    /// `Request::ListKeys` (`kit::keys`): a page of one of this node's partitions, from
    /// its store as it is (versions not yet visible included).
    fn on_list_keys(&mut self, ctx: &mut Ctx<Msg>, from: Addr, ask: ListAsk) {
        let part = self.parts.get_mut(&ask.partition);
        let list = part.map(|p| p.store.list_keys(ask.from, ask.max));
        let answer = crate::kit::keys::answer(&ask, self.topo.partitions, list);
        ctx.send(from, Msg::KeysListed(answer));
    }

    /// Routes a message to a partition of this node: a read slice or 2PC.
    fn dispatch_partition(&mut self, ctx: &mut Ctx<Msg>, from: Addr, from_node: NodeId, msg: Msg) {
        match msg {
            Msg::ReadSlice {
                rid,
                partition,
                snapshot,
                keys,
            } => self.on_read_slice(ctx, from_node, rid, partition, snapshot, keys),
            Msg::Prepare {
                txn,
                partition,
                snapshot,
                ht,
                updates,
                cached,
                one_phase,
            } => {
                let b = BlockedPrepare {
                    coord: from_node,
                    txn,
                    snapshot,
                    ht,
                    updates,
                    cached,
                    one_phase,
                };
                self.on_prepare(ctx, partition, b)
            }
            Msg::CommitTxn { txn, partition, ct } => {
                self.on_commit_txn(ctx, from, txn, partition, ct)
            }
            Msg::AbortTxn { txn, partition } => self.on_abort_txn(ctx, txn, partition),
            _ => unreachable!("`dispatch` routes only messages to partitions here"),
        }
    }

    /// Routes a replication or stabilization message.
    fn dispatch_replication(&mut self, ctx: &mut Ctx<Msg>, from_node: NodeId, msg: Msg) {
        match msg {
            Msg::Repl {
                partition,
                restarted,
                acks,
                stream,
            } => self.on_repl(ctx, from_node, partition, restarted, acks, stream),
            Msg::Transfer { partition, chunk } => {
                let s = self.topo.dc_of(from_node);
                self.on_transfer(ctx, s, partition, chunk)
            }
            Msg::Stable { vv_min, oldest } => self.on_stable(from_node, vv_min, oldest),
            Msg::Gst { gst, oldest } => self.on_gst(from_node, gst, oldest),
            Msg::Ust { ust, gc } => self.on_ust(ust, gc),
            _ => unreachable!("`dispatch` routes only replication messages here"),
        }
    }

    fn run_timers(&mut self, ctx: &mut Ctx<Msg>) {
        let clock = self.time.clock;
        for timer in self.timers.take_due(clock) {
            match timer {
                Timer::Replicate => {
                    let every = self.params.replication_interval_ns;
                    self.timers.set(Timer::Replicate, clock + every);
                    self.advance(ctx);
                    self.replicate(ctx);
                }
                Timer::Stabilize => {
                    let every = self.params.stabilization_interval_ns;
                    self.timers.set(Timer::Stabilize, clock + every);
                    self.renew_lease(ctx);
                    self.stabilize(ctx);
                    self.inquire(ctx);
                    self.coord_tick(ctx);
                }
            }
        }
    }

    // ---- invariants ----

    /// `VV[own]` stays below every prepared txn (Proposition 2) and never passes the
    /// clock's lease; PaRiS's `ust` never passes what a partition here installed
    /// (unless a mutation breaks the UST on purpose).
    fn check_parts(&self) -> Result<(), String> {
        let own = usize::from(self.d.0);
        for (pid, part) in &self.parts {
            let vv = part.vv.get(own);
            if let Some((txn, p)) = part.prepared.iter().min_by_key(|(_, p)| p.pt) {
                if vv >= p.pt {
                    return Err(format!(
                        "{pid:?}: VV[own] = {vv} >= prepare time {} of {txn:?}",
                        p.pt
                    ));
                }
            }
            if vv > self.time.lease.max(self.time.last) {
                return Err(format!("{pid:?}: VV[own] = {vv} above the lease"));
            }
            let sound = !self.mutation.ust_ignores_remote_dc && self.flavor == Flavor::Paris;
            if sound && self.ust > part.vv_min() {
                return Err(format!(
                    "{pid:?}: ust = {} above the installed {}",
                    self.ust,
                    part.vv_min()
                ));
            }
        }
        Ok(())
    }
}

fn reply_slice(
    ctx: &mut Ctx<Msg>,
    coord: NodeId,
    rid: ReadId,
    partition: PartitionId,
    keys: &[(Key, ObjType)],
    e: Result<(), Error>,
) {
    let e = e.expect_err("only errors are replied this way");
    let objects = keys
        .iter()
        .map(|(k, _)| (k.clone(), Err(e.clone())))
        .collect();
    let m = Msg::ReadSliceReply {
        rid,
        partition,
        objects,
    };
    ctx.send(Addr::Node(coord), m);
}

impl ServerNode for Node {
    type Msg = Msg;

    fn start(&mut self, ctx: &mut Ctx<Msg>) {
        // Timers run on the raw clock: after a restart `Clock` (read's answer) starts
        // above the persisted lease, up to `lease_ns` ahead of it.
        self.time.read(ctx.clock);
        let first = self.time.clock + self.params.timer_phase_ns;
        self.timers.set(Timer::Replicate, first);
        self.timers.set(Timer::Stabilize, first);
        self.run_timers(ctx);
    }

    fn handle_message(&mut self, ctx: &mut Ctx<Msg>, from: Addr, msg: Msg) {
        self.time.read(ctx.clock);
        self.dispatch(ctx, from, msg);
        self.advance(ctx);
    }

    fn handle_timeout(&mut self, ctx: &mut Ctx<Msg>) {
        self.time.read(ctx.clock);
        self.run_timers(ctx);
        self.advance(ctx);
    }

    fn handle_persisted(&mut self, ctx: &mut Ctx<Msg>, lsn: Lsn) {
        self.time.read(ctx.clock);
        for action in self.durability.persisted(ctx, lsn) {
            self.run_deferred(ctx, action);
        }
        self.advance(ctx);
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
        self.coord.decisions.check_invariants()?;
        if self.time.clock > self.time.last {
            return Err(format!(
                "clock {} above HLC {}",
                self.time.clock, self.time.last
            ));
        }
        self.check_parts()
    }

    fn gauges(&self, clock: Nanos) -> Vec<(&'static str, f64)> {
        let versions: usize = self.parts.values().map(|p| p.store.versions()).sum();
        let log: usize = self.parts.values().map(|p| p.log.len()).sum();
        let prepared: usize = self.parts.values().map(|p| p.prepared.len()).sum();
        let lag = if self.flavor == Flavor::Paris && self.ust > 0 {
            clock.saturating_sub(self.ust) as f64
        } else {
            0.0
        };
        vec![
            ("store_versions", versions as f64),
            ("repl_log_txns", log as f64),
            ("prepared_txns", prepared as f64),
            ("ust_lag_ns", lag),
            ("bytes_ust_intra_dc", self.traffic.ust_intra_dc as f64),
            ("bytes_ust_inter_dc", self.traffic.ust_inter_dc as f64),
            ("bytes_replication", self.traffic.replication as f64),
            ("client_cache_writes", self.cache_mean),
        ]
    }

    fn take_samples(&mut self) -> Vec<(&'static str, u64)> {
        std::mem::take(&mut self.samples)
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
