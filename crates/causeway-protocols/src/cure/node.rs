//! The Cure server node: hosts its partitions ([`Part`]), coordinates transactions
//! (`coord.rs`), replicates and stabilizes (`repl.rs`). This file holds the node's state,
//! recovery from persisted records, the dispatch of inputs, the partition side of reads
//! and 2PC, timers and the persist-before-release plumbing.

use super::config::{Config, Flavor, Mutation};
use super::coord_state::{Coord, Start};
use super::ext::{Extension, Plain};
use super::msg::Msg;
use super::part::{Direct, Part, Phase, Prepared, Waiting};
use super::record::Record;
use super::types::{ClientWait, Deferred, Participant, Timer};
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
    Addr, Ctx, DcId, Error, Key, Lsn, Nanos, NodeId, PartitionId, ServerNode, Topology, TxnId, Vc,
};
use std::collections::{BTreeMap, BTreeSet};

/// One effect of a prepared txn: its key, its op id, the effect.
type PreparedOp = (
    causeway_core::Key,
    causeway_core::OpId,
    causeway_core::crdt::Effect,
);

/// Most measurement samples buffered between two `take_samples` calls.
pub const SAMPLES_MAX: usize = 4096;

pub use crate::kit::clock::Time;

/// The engine's node; `X` is the protocol's extension ([`Extension`]), none for Cure.
pub struct Node<X: Extension = Plain> {
    pub(crate) topo: Topology,
    pub(crate) params: Params,
    pub(crate) cfg: Config,
    pub(crate) me: NodeId,
    pub(crate) d: usize,
    pub(crate) flavor: Flavor,
    pub(crate) mutation: Mutation,
    pub(crate) time: Time,
    pub(crate) parts: BTreeMap<PartitionId, Part>,
    /// How many requests wait in the partitions' `waiting` queues, all partitions
    /// together: kept, not summed, as every message asked for it (`park`, and
    /// `set_clock_wait` after each one: about 1k instructions of a GET's 26k).
    waiting_total: usize,
    pub(crate) coord: Coord<X::TxnStep>,
    /// The GSS: gossip of the partitions' min `pvc` inside the DC.
    pub(crate) gss: Gossip<Vc>,
    /// The DC's oldest snapshot in use (for GC): gossip of each node's oldest.
    pub(crate) oldest: Gossip<Vc>,
    /// UNIFORM_BARRIER and ATTACH requests waiting for their condition (UniStore Alg. 1
    /// l.49-52), at most `WAITING_REQUESTS_MAX`.
    pub(crate) client_waits: Vec<ClientWait>,
    /// The protocol's extension: its state (`Plain`: none).
    pub(crate) ext: X,
    pub(crate) durability: Durability<Msg, Deferred>,
    pub(crate) timers: Timers<Timer>,
    /// (partition, sibling DC) still to be told that we restarted.
    pub(crate) announce: BTreeSet<(PartitionId, DcId)>,
    samples: Vec<(&'static str, u64)>,
    /// Work since the last `take_work` (keys read, effects prepared or applied, vector
    /// entries merged), for the simulator's CPU model.
    pub(crate) work: u64,
}

impl Node {
    /// Builds a Cure or CureFt node and replays its records (oldest first).
    pub fn recover(
        config: NodeConfig,
        cfg: Config,
        flavor: Flavor,
        records: &[Vec<u8>],
    ) -> Result<Node, String> {
        Node::recover_with(config, cfg, flavor, Plain, records)
    }
}

impl<X: Extension> Node<X> {
    /// Builds a node with the extension `ext` and replays its records (oldest first).
    pub fn recover_with(
        config: NodeConfig,
        cfg: Config,
        flavor: Flavor,
        ext: X,
        records: &[Vec<u8>],
    ) -> Result<Node<X>, String> {
        let topo = config.topology.clone();
        let name = ext.name(flavor);
        if topo.replication_factor != topo.dcs {
            return Err(format!(
                "{name} needs full replication (replication factor = dcs)"
            ));
        }
        let mutation = Mutation::parse_among(
            config.params.mutation.as_deref(),
            ext.mutations(flavor),
            name,
        )?;
        let d = usize::from(topo.dc_of(config.node).0);
        let dcs = usize::from(topo.dcs);
        let dc_nodes: Vec<NodeId> = topo.nodes_in_dc(DcId(d as u16)).collect();
        let strong_entry = ext.strong_entry();
        let parts = topo
            .partitions_of(config.node)
            .into_iter()
            .map(|p| (p, Part::new(dcs, d, strong_entry)))
            .collect();
        let mut node = Node {
            me: config.node,
            d,
            flavor,
            client_waits: Vec::new(),
            ext,
            mutation,
            time: Time::default(),
            parts,
            waiting_total: 0,
            coord: Coord::default(),
            gss: Gossip::new(dc_nodes.clone(), Vc::zero(dcs)),
            oldest: Gossip::new(dc_nodes, Vc::zero(dcs)),
            durability: Durability::starting_after(records.len() as Lsn),
            timers: Timers::default(),
            cfg,
            announce: BTreeSet::new(),
            samples: Vec::new(),
            work: 0,
            params: config.params,
            topo,
        };
        for (i, bytes) in records.iter().enumerate() {
            node.replay(Record::decode(i, bytes)?);
        }
        node.finish_replay(!records.is_empty());
        Ok(node)
    }

    /// Ends recovery once every record is replayed; after a restart (`restarted`: there
    /// were records) the sibling DCs of every partition are to be told.
    fn finish_replay(&mut self, restarted: bool) {
        // A transfer whose chunks were persisted but not its end is dropped (the sender
        // sends a new one).
        for part in self.parts.values_mut() {
            part.transfers.incoming.clear();
        }
        // Never reissue: start above every lease and prepare time on disk.
        self.time.last += 1;
        if restarted {
            self.announce = self
                .parts
                .iter()
                .flat_map(|(p, part)| part.sibs.ids().into_iter().map(move |s| (*p, s)))
                .collect();
        }
    }

    fn replay(&mut self, record: Record) {
        let d = self.d;
        match record {
            Record::Lease { until } => self.time.recovered(until),
            Record::Prepare {
                partition,
                txn,
                coord,
                prep_time,
                ops,
                ..
            } => self.replay_prepare(partition, txn, coord, prep_time, ops),
            Record::OnePhase {
                partition,
                txn,
                coord,
                ct,
                ops,
            } => self.replay_committed(partition, (txn, coord), &ct, ops, Phase::One),
            Record::NodeCommit {
                txn,
                ct,
                parts,
                participants,
            } => self.replay_node_commit(txn, &ct, parts, participants),
            Record::Commit { partition, txn, ct } => {
                let broken = self.mutation.commit_time_min;
                self.part(partition).commit(d, txn, &ct, broken);
            }
            Record::Decision {
                txn,
                ct,
                participants,
            } => self.coord.recovered_decision(txn, ct, participants),
            Record::Ended { txns } => {
                for t in txns {
                    self.coord.decisions.forget(t);
                }
            }
            record @ (Record::Remote { .. }
            | Record::RemoteTxns { .. }
            | Record::RemotePiece { .. }
            | Record::Paxos { .. }
            | Record::TransferChunk { .. }
            | Record::TransferDone { .. }
            | Record::StrongImage { .. }
            | Record::TransferAdopted { .. }
            | Record::Checkpoint(_)) => self.replay_replicated(record),
        }
    }

    /// Replays a record of state from elsewhere: txns replicated from a sibling DC
    /// (repl.rs), a Paxos record (strong.rs), a state transfer (transfer.rs) or a
    /// checkpoint (checkpoint.rs).
    fn replay_replicated(&mut self, record: Record) {
        match record {
            Record::Remote {
                partition,
                origin,
                upto,
                txns,
            }
            | Record::RemoteTxns {
                partition,
                origin,
                upto,
                txns: super::wire::CompactTxns(txns),
            } => self.replay_remote(partition, origin, upto, txns),
            record @ (Record::Paxos { .. } | Record::StrongImage { .. }) => X::replay(self, record),
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
            Record::TransferAdopted {
                partition,
                from,
                id,
                dropped,
            } => self.replay_adopted_transfer(partition, from, id, &dropped),
            Record::Checkpoint(ck) => self.restore(*ck),
            Record::RemotePiece { .. } => {
                unreachable!("Record::decode gives a piece back as RemoteTxns")
            }
            _ => unreachable!("`replay` replays the records of txns prepared here"),
        }
    }

    /// Replays a PREPARE's record: the txn is prepared again, its time the clock's floor.
    fn replay_prepare(
        &mut self,
        partition: PartitionId,
        txn: TxnId,
        coord: NodeId,
        prep_time: u64,
        ops: super::record::Effects,
    ) {
        self.time.last = self.time.last.max(prep_time);
        let p = Prepared::recovered(coord, prep_time, ops);
        self.part(partition).prepared.insert(txn, p);
    }

    /// Replays a one-node commit: the decision (when other nodes took part) and each of
    /// this node's partitions, prepared and committed.
    fn replay_node_commit(
        &mut self,
        txn: TxnId,
        ct: &Vc,
        parts: Vec<(PartitionId, super::record::Effects)>,
        participants: Vec<(PartitionId, NodeId)>,
    ) {
        if !participants.is_empty() {
            self.coord.recovered_decision(txn, ct.clone(), participants);
        }
        for (partition, ops) in parts {
            self.replay_committed(partition, (txn, self.me), ct, ops, Phase::Node);
        }
    }

    /// Replays txns replicated from `origin`, received up to `upto`.
    fn replay_remote(
        &mut self,
        partition: PartitionId,
        origin: DcId,
        upto: u64,
        txns: Vec<super::msg::ReplTxn>,
    ) {
        let part = self.part(partition);
        for t in txns {
            part.add_committed(origin, t);
        }
        part.received.recovered(origin, upto);
        let o = usize::from(origin.0);
        part.pvc.set(o, part.pvc.get(o).max(upto));
    }

    pub(crate) fn part(&mut self, p: PartitionId) -> &mut Part {
        self.parts
            .get_mut(&p)
            .expect("a record or message for a hosted partition")
    }

    pub(crate) fn sample(&mut self, name: &'static str, value: u64) {
        if self.samples.len() < SAMPLES_MAX {
            self.samples.push((name, value));
        }
    }

    pub(crate) fn dc_nodes(&self) -> Vec<NodeId> {
        self.topo.nodes_in_dc(DcId(self.d as u16)).collect()
    }

    /// Persists `record`, then sends `then` (persist before release).
    pub(crate) fn persist(
        &mut self,
        ctx: &mut Ctx<Msg>,
        record: Record,
        then: Vec<(Addr, Msg)>,
    ) -> Lsn {
        self.durability.persist(ctx, record.encode(), then)
    }

    /// Runs `action` once everything persisted so far is durable.
    pub(crate) fn after_durable(&mut self, action: Deferred) {
        if let Some(now) = self.durability.after_durable(action) {
            let done = self.run_deferred(now);
            assert!(done.is_none(), "a one-phase commit waits for its record");
        }
    }

    /// Runs `action`; a one-phase txn coordinated here is returned, to be answered.
    #[must_use]
    pub(crate) fn run_deferred(&mut self, action: Deferred) -> Option<(TxnId, Vc)> {
        match action {
            Deferred::Lease(until) => {
                self.time.lease_durable(until);
            }
            Deferred::Remote {
                partition,
                origin,
                upto,
            } => {
                let part = self.part(partition);
                let o = usize::from(origin.0);
                part.pvc.set(o, part.pvc.get(o).max(upto));
            }
            Deferred::Decision(txn) => self.coord.decision_durable(txn),
            Deferred::Paxos { partition, seq } => X::persisted(self, partition, seq),
            Deferred::OnePhase {
                partition,
                txn,
                ct,
                here,
            } => {
                let d = self.d;
                self.part(partition).commit(d, txn, &ct, false);
                return here.then_some((txn, ct));
            }
            Deferred::NodeCommit {
                partitions,
                txn,
                ct,
            } => {
                let (d, broken) = (self.d, self.mutation.commit_time_min);
                for partition in partitions {
                    self.part(partition).commit(d, txn, &ct, broken);
                }
            }
            Deferred::Transfer { partition, claims } => self.transfer_durable(partition, &claims),
        }
        None
    }

    /// Replays a txn prepared and committed by one record (`OnePhase`, `NodeCommit`) at
    /// `partition`: its prepare time is `ct[d]` (its commit time), the clock's floor.
    fn replay_committed(
        &mut self,
        partition: PartitionId,
        (txn, coord): (TxnId, NodeId),
        ct: &Vc,
        ops: super::record::Effects,
        phase: Phase,
    ) {
        let d = self.d;
        let prep_time = ct.get(d);
        self.time.last = self.time.last.max(prep_time);
        let p = Prepared {
            coord,
            prep_time,
            inquiry: Retry::default(),
            ops,
            phase,
        };
        let part = self.part(partition);
        part.prepared.insert(txn, p);
        part.commit(d, txn, ct, false);
    }

    /// Renews the lease on claimable timestamps before the clock reaches it.
    fn renew_lease(&mut self, ctx: &mut Ctx<Msg>) {
        let Some(until) = self.time.lease_to_renew(self.cfg.lease_ns) else {
            return;
        };
        self.persist(ctx, Record::Lease { until }, Vec::new());
        self.after_durable(Deferred::Lease(until));
    }

    // ---- invariants ----

    /// The clock never runs behind a reading, and no claim (`pvc[d]`) passes the lease.
    pub(crate) fn check_clock_invariants(&self) -> Result<(), String> {
        if self.time.clock > self.time.last {
            return Err(format!(
                "clock {} above Clock {}",
                self.time.clock, self.time.last
            ));
        }
        for (pid, part) in &self.parts {
            let claim = part.pvc.get(self.d);
            if claim > self.time.lease.max(self.time.last) {
                return Err(format!("{pid:?}: pvc[d] = {claim} above the lease"));
            }
        }
        Ok(())
    }

    /// Per partition: `pvc[d]` below every prepared txn's time (Alg. 2 l.20) and the GSS
    /// at or below `pvc` on every remote entry (Alg. 2 l.43-46: the GSS is a minimum).
    pub(crate) fn check_partition_invariants(&self) -> Result<(), String> {
        let d = self.d;
        let waiting: usize = self.parts.values().map(|p| p.waiting.len()).sum();
        if waiting != self.waiting_total {
            return Err(format!(
                "{waiting} requests wait, counted {}",
                self.waiting_total
            ));
        }
        for (pid, part) in &self.parts {
            let pvc_d = part.pvc.get(d);
            if let Some((txn, p)) = part.prepared.iter().min_by_key(|(_, p)| p.prep_time) {
                if pvc_d >= p.prep_time {
                    return Err(format!(
                        "{pid:?}: pvc[d] = {pvc_d} >= prepare time {} of {txn:?}",
                        p.prep_time
                    ));
                }
            }
            let gss = self.gss.stable();
            for k in (0..gss.dcs.len()).filter(|k| *k != d) {
                if gss.get(k) > part.pvc.get(k) {
                    return Err(format!(
                        "{pid:?}: gss[{k}] = {} above pvc[{k}] = {}",
                        gss.get(k),
                        part.pvc.get(k)
                    ));
                }
            }
        }
        Ok(())
    }

    // ---- partition side: reads and 2PC participant ----

    /// Parks a READ_KEY or PREPARE until its snapshot is stable here (Alg. 2 l.2, l.8).
    pub(crate) fn park(&mut self, ctx: &mut Ctx<Msg>, partition: PartitionId, w: Waiting) {
        let total = self.waiting_total;
        if total >= WAITING_REQUESTS_MAX || !self.parts.contains_key(&partition) {
            let e = Error::Unavailable("partition overloaded or not hosted here".into());
            return self.refuse(ctx, partition, w, e);
        }
        if total > 0 {
            self.part(partition).waiting.push(w);
            self.waiting_total += 1;
            return self.serve_waiting(ctx);
        }
        // Nothing else waits: `serve_waiting` would judge `w` alone, so judge it here
        // without the queue (a vector and two moves of `w` per read or prepare).
        let (d, clock, lease, m) = (self.d, self.time.last, self.time.lease, self.mutation);
        let gate = self.part(partition).gate(d, clock, lease, m);
        if gate.admits(&w, d, clock, m) {
            return self.serve(ctx, partition, w);
        }
        self.part(partition).waiting.push(w);
        self.waiting_total += 1;
    }

    fn refuse(&mut self, ctx: &mut Ctx<Msg>, partition: PartitionId, w: Waiting, e: Error) {
        match w {
            Waiting::Read {
                coord,
                rid,
                keys,
                direct,
                ..
            } => {
                let objects = keys.into_iter().map(|(k, _)| (k, Err(e.clone()))).collect();
                if let Some(Direct { txn, .. }) = direct {
                    return self.read_here_served(ctx, txn, partition, objects);
                }
                let m = Msg::ReadReply {
                    rid,
                    partition,
                    objects,
                };
                ctx.send(Addr::Node(coord), m);
            }
            Waiting::Prepare { coord, txn, .. } => {
                let m = Msg::Prepared {
                    txn,
                    partition,
                    result: Err(e),
                };
                ctx.send(Addr::Node(coord), m);
            }
            Waiting::Effects { coord, txn, .. } => {
                let m = Msg::Effects {
                    txn,
                    partition,
                    result: Err(e),
                };
                ctx.send(Addr::Node(coord), m);
            }
        }
    }

    /// Serves every parked request whose wait condition now holds.
    pub(crate) fn serve_waiting(&mut self, ctx: &mut Ctx<Msg>) {
        if self.waiting_total == 0 {
            return;
        }
        let (d, clock, lease, m) = (self.d, self.time.last, self.time.lease, self.mutation);
        let mut ready = Vec::new();
        for (pid, part) in self.parts.iter_mut() {
            if part.waiting.is_empty() {
                continue;
            }
            let gate = part.gate(d, clock, lease, m);
            // In place (`extract_if` keeps the rest in order): two new vectors for every
            // call were two of a SET's 50-odd allocations (callgrind: -2.2% of its
            // instructions).
            let go = part.waiting.extract_if(.., |w| gate.admits(w, d, clock, m));
            ready.extend(go.map(|w| (*pid, w)));
        }
        assert!(ready.len() <= self.waiting_total, "served more than waited");
        self.waiting_total -= ready.len();
        for (pid, w) in ready {
            self.serve(ctx, pid, w);
        }
    }

    /// Serves a request `serve_waiting` found ready.
    fn serve(&mut self, ctx: &mut Ctx<Msg>, pid: PartitionId, w: Waiting) {
        match w {
            Waiting::Read {
                coord,
                rid,
                svc,
                keys,
                arrived,
                direct,
            } => {
                self.work += keys.len() as u64;
                let objects = self.parts[&pid].read(&svc, keys);
                let waited = self.time.clock.saturating_sub(arrived);
                self.sample("read_wait_ns", waited);
                if let Some(Direct { txn, .. }) = direct {
                    // The coordinator is here: it prepares the commit now, on the
                    // state just read.
                    self.read_here_served(ctx, txn, pid, objects);
                    return;
                }
                let m = Msg::ReadReply {
                    rid,
                    partition: pid,
                    objects,
                };
                ctx.send(Addr::Node(coord), m);
            }
            Waiting::Prepare {
                coord,
                txn,
                svc,
                updates,
                phase,
            } => {
                let to = Participant {
                    partition: pid,
                    coord,
                    txn,
                    phase,
                };
                self.prepare(ctx, to, svc, updates)
            }
            Waiting::Effects {
                coord,
                txn,
                svc,
                updates,
            } => {
                self.work += updates.len() as u64;
                let result = self.parts[&pid].effects(&svc, updates);
                let m = Msg::Effects {
                    txn,
                    partition: pid,
                    result,
                };
                ctx.send(Addr::Node(coord), m);
            }
        }
    }

    /// PREPARE (Cure Alg. 2 l.6-12): effects at the snapshot, a prepare time above
    /// every claim, the record persisted before the vote leaves.
    pub(crate) fn prepare(
        &mut self,
        ctx: &mut Ctx<Msg>,
        to: Participant,
        svc: Vc,
        updates: super::msg::Updates,
    ) {
        let Participant {
            partition,
            coord,
            txn,
            phase,
        } = to;
        if self.parts[&partition].prepared.contains_key(&txn) {
            return; // a duplicate PREPARE: the first one votes
        }
        let mut ops = match self.parts[&partition].effects(&svc, updates) {
            Ok(ops) => ops,
            Err(e) => {
                let m = Msg::Prepared {
                    txn,
                    partition,
                    result: Err(e),
                };
                return ctx.send(Addr::Node(coord), m);
            }
        };
        let broken = self.mutation.keeps_overwritten_assign;
        crate::kit::txn::coalesce_txn_ops(&mut ops, broken);
        self.work += ops.len() as u64;
        let prep_time = self.time.issue(ctx.clock); // Alg. 2 l.9
        assert!(
            prep_time > svc.get(self.d),
            "prepare time must exceed svc[d]"
        );
        // The effects go into the record and come back to the prepared txn once it is
        // encoded (`persist_ops`): one copy, not two.
        let p = Prepared {
            coord,
            prep_time,
            inquiry: Retry::sent_at(self.time.clock),
            ops: Vec::new(),
            phase,
        };
        self.part(partition).prepared.insert(txn, p);
        self.vote_prepared(ctx, to, svc, prep_time, ops);
    }

    /// Votes for `to`'s txn, just prepared here at `prep_time`: a one-phase txn commits,
    /// the coordinator here takes a one-node commit's vote, and a 2PC vote leaves once
    /// the PREPARE's record is durable.
    fn vote_prepared(
        &mut self,
        ctx: &mut Ctx<Msg>,
        to: Participant,
        svc: Vc,
        prep_time: u64,
        ops: Vec<PreparedOp>,
    ) {
        let Participant {
            partition,
            coord,
            txn,
            phase,
        } = to;
        match phase {
            Phase::One => return self.commit_one_phase(ctx, to, svc, prep_time, ops),
            // The coordinator is this node: the record of its decision holds these
            // effects (`Node::node_commit_record`), and it takes the vote without a
            // message to itself.
            Phase::Node => {
                assert_eq!(coord, self.me, "a one-node commit is coordinated here");
                self.prepared_ops(partition, txn, ops);
                return self.on_prepared(ctx, txn, partition, Ok(prep_time));
            }
            Phase::Two => {}
        }
        let vote = Msg::Prepared {
            txn,
            partition,
            result: Ok(prep_time),
        };
        let record = Record::Prepare {
            partition,
            txn,
            coord,
            svc,
            prep_time,
            ops,
        };
        self.persist_ops(
            ctx,
            (partition, txn),
            record,
            vec![(Addr::Node(coord), vote)],
        );
    }

    /// Sets the effects of the prepared txn `txn` at `partition`.
    fn prepared_ops(&mut self, partition: PartitionId, txn: TxnId, ops: Vec<PreparedOp>) {
        let p = self.part(partition).prepared.get_mut(&txn);
        p.expect("prepared before its effects are set").ops = ops;
    }

    /// Persists a record holding the effects of the prepared txn `txn` (`Prepare` or
    /// `OnePhase`), then gives them back to it: encoded from the record, not copied.
    fn persist_ops(
        &mut self,
        ctx: &mut Ctx<Msg>,
        (partition, txn): (PartitionId, TxnId),
        record: Record,
        then: Vec<(Addr, Msg)>,
    ) {
        let bytes = record.encode();
        let (Record::Prepare { ops, .. } | Record::OnePhase { ops, .. }) = record else {
            unreachable!("a record of a prepared txn's effects");
        };
        self.prepared_ops(partition, txn, ops);
        self.durability.persist(ctx, bytes, then);
    }

    /// One-phase commit of a single-partition txn: the partition is its own coordinator.
    /// The commit time is the prepare time (Alg. 1 l.31 over one participant), the commit
    /// vector `svc` with it as local entry (l.32-33). One record holds prepare and commit;
    /// the txn stays prepared (holding `pvc[d]` below its time, Alg. 2 l.20) until the
    /// record is durable, then commits, and only then does the answer leave.
    fn commit_one_phase(
        &mut self,
        ctx: &mut Ctx<Msg>,
        to: Participant,
        svc: Vc,
        prep_time: u64,
        ops: Vec<PreparedOp>,
    ) {
        let mut ct = svc;
        ct.set(self.d, prep_time);
        let (partition, txn) = (to.partition, to.txn);
        let record = Record::OnePhase {
            partition,
            txn,
            coord: to.coord,
            ct: ct.clone(),
            ops,
        };
        // The coordinator learns it once the record is durable: by a message, or, when
        // it is this node, from the deferred commit itself (`handle_persisted`).
        let here = to.coord == self.me;
        let mut then = Vec::new();
        if !here {
            let ct = ct.clone();
            then.push((
                Addr::Node(to.coord),
                Msg::OnePhaseDone { txn, partition, ct },
            ));
        }
        self.persist_ops(ctx, (partition, txn), record, then);
        self.after_durable(Deferred::OnePhase {
            partition,
            txn,
            ct,
            here,
        });
    }

    /// COMMIT (Cure Alg. 2 l.13-16); the ack leaves once the commit is durable.
    fn commit_txn(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: Addr,
        txn: TxnId,
        partition: PartitionId,
        ct: Vc,
    ) {
        let ack = Msg::CommitAck { txn, partition };
        let d = self.d;
        let broken = self.mutation.commit_time_min;
        if self.part(partition).commit(d, txn, &ct, broken) {
            self.persist(
                ctx,
                Record::Commit { partition, txn, ct },
                vec![(from, ack)],
            );
            self.serve_waiting(ctx);
        } else {
            // Committed before (maybe not durable yet): ack once it is.
            self.durability.send_after_durable(ctx, from, ack);
        }
    }

    /// Asks coordinators about txns prepared here for too long (or since a restart).
    fn inquire(&mut self, ctx: &mut Ctx<Msg>) {
        let clock = self.time.clock;
        for (pid, part) in self.parts.iter_mut() {
            for (txn, p) in part
                .prepared
                .iter_mut()
                .filter(|(_, p)| p.phase == Phase::Two)
            {
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

    /// Routes a message: txns (coordinator and partition side) here, the rest below.
    fn dispatch(&mut self, ctx: &mut Ctx<Msg>, from: Addr, msg: Msg) {
        let from_node = match from {
            Addr::Node(n) => n,
            Addr::Client(_) => self.me,
        };
        match msg {
            Msg::StartWith {
                txn,
                kind,
                label,
                cvc,
                first,
                observed,
            } => {
                let start = Start {
                    txn,
                    kind,
                    label,
                    observed,
                };
                self.on_start(ctx, from, start, cvc, first)
            }
            Msg::Read {
                txn,
                req,
                keys,
                updates,
            } => self.on_read(ctx, from, txn, req, keys, updates),
            Msg::Commit { txn, req, updates } => self.on_commit(ctx, from, txn, req, updates),
            Msg::Abort { txn } => self.on_abort(txn),
            Msg::ListKeys(ask) => self.on_list_keys(ctx, from, ask),
            Msg::ReadKeys {
                rid,
                partition,
                svc,
                keys,
            } => self.on_read_keys(ctx, from_node, rid, partition, svc, keys),
            Msg::ReadReply {
                rid,
                partition,
                objects,
            } => self.on_read_reply(ctx, rid, partition, objects),
            Msg::Prepare {
                txn,
                partition,
                svc,
                updates,
                one_phase,
            } => self.on_prepare(ctx, from_node, (txn, partition), svc, updates, one_phase),
            Msg::Prepared {
                txn,
                partition,
                result,
            } => self.on_prepared(ctx, txn, partition, result),
            Msg::CommitTxn { txn, partition, ct } => self.commit_txn(ctx, from, txn, partition, ct),
            Msg::CommitAck { txn, partition } => self.on_commit_ack(ctx, txn, partition),
            Msg::OnePhaseDone { txn, ct, .. } => self.on_one_phase_done(ctx, txn, ct),
            Msg::AbortTxn { txn, partition } => self.on_abort_txn(ctx, txn, partition),
            Msg::Inquire { txn, partition } => self.on_inquire(ctx, from, txn, partition),
            Msg::ReadResult { .. }
            | Msg::CommitResult { .. }
            | Msg::ReadCommitResult { .. }
            | Msg::KeysListed(_)
            | Msg::WaitDone { .. } => {}
            msg => self.dispatch_replication(ctx, from, from_node, msg),
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

    /// Replication, stabilization and the client waits on them (repl.rs, transfer.rs,
    /// uniform.rs); UniStore's strong txns below.
    fn dispatch_replication(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: Addr,
        from_node: NodeId,
        msg: Msg,
    ) {
        match msg {
            Msg::Repl {
                partition,
                restarted,
                acks,
                stream,
            } => self.on_repl(ctx, from_node, partition, restarted, acks, stream),
            Msg::Transfer {
                partition,
                chunk,
                strong,
            } => self.on_transfer(ctx, self.topo.dc_of(from_node), partition, chunk, strong),
            Msg::TransferAsk { partition } => {
                X::on_transfer_ask(self, partition, self.topo.dc_of(from_node))
            }
            Msg::Stable { pvc, gss, oldest } => self.on_stable(ctx, from_node, pvc, gss, oldest),
            Msg::Barrier { req, past } => {
                self.on_client_wait(ctx, ClientWait::new(from, req, past, false))
            }
            Msg::Attach { req, past } => {
                self.on_client_wait(ctx, ClientWait::new(from, req, past, true))
            }
            msg => X::on_message(self, ctx, from, msg),
        }
    }

    /// READ_KEY from coordinator `coord`, parked until it can be served (`park`).
    fn on_read_keys(
        &mut self,
        ctx: &mut Ctx<Msg>,
        coord: NodeId,
        rid: ReadId,
        partition: PartitionId,
        svc: Vc,
        keys: Vec<(Key, ObjType)>,
    ) {
        self.adopt_remote(&svc); // UniStore Alg. 1 l.19-20
        let arrived = self.time.clock;
        let w = Waiting::Read {
            coord,
            rid,
            svc,
            keys,
            arrived,
            direct: None,
        };
        self.park(ctx, partition, w);
    }

    /// PREPARE from coordinator `coord`, parked until it can be served (`park`).
    fn on_prepare(
        &mut self,
        ctx: &mut Ctx<Msg>,
        coord: NodeId,
        (txn, partition): (TxnId, PartitionId),
        svc: Vc,
        updates: super::msg::Updates,
        one_phase: bool,
    ) {
        self.adopt_remote(&svc); // UniStore Alg. 1 l.37-38
        let w = Waiting::Prepare {
            coord,
            txn,
            svc,
            updates,
            phase: if one_phase { Phase::One } else { Phase::Two },
        };
        self.park(ctx, partition, w);
    }

    /// ABORT of a txn prepared here in 2PC.
    fn on_abort_txn(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, partition: PartitionId) {
        if let Some(part) = self.parts.get_mut(&partition) {
            // A one-phase txn is the partition's own decision: not abortable.
            if part
                .prepared
                .get(&txn)
                .is_some_and(|p| p.phase != Phase::One)
            {
                part.prepared.remove(&txn);
            }
        }
        self.serve_waiting(ctx);
    }

    /// Runs the timers that are due (the driver calls this once the earliest is).
    fn run_timers(&mut self, ctx: &mut Ctx<Msg>) {
        let clock = self.time.clock;
        for timer in self.timers.take_due(clock) {
            match timer {
                Timer::Replicate => {
                    let every = self.params.replication_interval_ns;
                    self.timers.set(Timer::Replicate, clock + every);
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
                Timer::ClockWait => {}
                Timer::Ext => X::tick(self, ctx),
            }
        }
        self.serve_waiting(ctx);
    }

    /// Sets the clock-wait timer to the earliest `svc[d]` a parked PREPARE waits for
    /// (`svc[d] <= Clock`, Alg. 2 l.7), or cancels it.
    fn set_clock_wait(&mut self) {
        if self.waiting_total == 0 {
            return self.timers.cancel(Timer::ClockWait);
        }
        let (d, last) = (self.d, self.time.last);
        let waits = self.parts.values().flat_map(|p| p.waiting.iter());
        let next = waits
            .filter(|w| matches!(w, Waiting::Prepare { .. }))
            .map(|w| w.svc_local(d))
            .filter(|s| *s > last)
            .min();
        match next {
            Some(s) => self.timers.set(Timer::ClockWait, s),
            None => self.timers.cancel(Timer::ClockWait),
        }
    }
}

impl<X: Extension> ServerNode for Node<X> {
    type Msg = Msg;

    fn start(&mut self, ctx: &mut Ctx<Msg>) {
        // Timers run on the raw clock: after a restart `Clock` (read's answer) starts
        // above the persisted lease, up to `lease_ns` ahead of it.
        self.time.read(ctx.clock);
        let first = self.time.clock + self.params.timer_phase_ns;
        self.timers.set(Timer::Replicate, first);
        self.timers.set(Timer::Stabilize, first);
        X::start(self, ctx);
        self.run_timers(ctx);
        X::pump(self, ctx);
        self.set_clock_wait();
    }

    fn handle_message(&mut self, ctx: &mut Ctx<Msg>, from: Addr, msg: Msg) {
        self.time.read(ctx.clock);
        self.dispatch(ctx, from, msg);
        X::pump(self, ctx);
        self.set_clock_wait();
    }

    fn handle_timeout(&mut self, ctx: &mut Ctx<Msg>) {
        self.time.read(ctx.clock);
        X::timeouts(self);
        self.run_timers(ctx);
        X::pump(self, ctx);
        self.set_clock_wait();
    }

    fn handle_persisted(&mut self, ctx: &mut Ctx<Msg>, lsn: Lsn) {
        self.time.read(ctx.clock);
        for action in self.durability.persisted(ctx, lsn) {
            if let Some((txn, ct)) = self.run_deferred(action) {
                self.on_one_phase_done(ctx, txn, ct);
            }
        }
        self.serve_waiting(ctx);
        X::pump(self, ctx);
        self.set_clock_wait();
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        match (self.timers.next(), X::deadline(self)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
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
        self.check_clock_invariants()?;
        self.check_partition_invariants()?;
        X::check_invariants(self)
    }

    fn gauges(&self, _clock: Nanos) -> Vec<(&'static str, f64)> {
        let versions: usize = self.parts.values().map(|p| p.store.versions()).sum();
        let log: usize = self.parts.values().map(|p| p.log.len()).sum();
        let mut out = vec![
            ("store_versions", versions as f64),
            ("repl_log_txns", log as f64),
        ];
        X::gauges(self, &mut out);
        out
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
