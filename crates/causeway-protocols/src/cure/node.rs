//! The Cure server node: hosts its partitions ([`Part`]), coordinates transactions
//! (`coord.rs`), replicates and stabilizes (`repl.rs`). This file holds the node's state,
//! recovery from persisted records, the dispatch of inputs, the partition side of reads
//! and 2PC, timers and the persist-before-release plumbing.

use super::coord::Coord;
use super::msg::Msg;
use super::part::{Part, Prepared, Waiting};
use super::record::Record;
use super::repl::Stable;
use super::{wrap, Mutation, INQUIRE_AFTER_NS, LEASE_NS};
use crate::common::PersistQueue;
use crate::{Msg as AnyMsg, NodeConfig, Params};
use causeway_core::limits::WAITING_REQUESTS_MAX;
use causeway_core::{
    Addr, Ctx, DcId, Error, Lsn, Nanos, NodeId, PartitionId, ServerNode, Topology, TxnId, Vc,
};
use std::collections::{BTreeMap, BTreeSet};

/// Most measurement samples buffered between two `take_samples` calls.
pub const SAMPLES_MAX: usize = 4096;

/// Shortest timer the node asks for: a clock can stall (a reading behind the last one),
/// and re-arming at nanosecond steps would spin.
pub const TIMER_MIN_NS: Nanos = 50_000;

/// A deadline overdue by this much is taken as having lost its timer. The node cannot
/// tell which request a firing answers: a stalled clock makes timers fire early (in clock
/// terms), and a driver may serve requests that fall due at the same instant with one
/// firing. So `armed` may hold a deadline no timer is in flight for; forgetting it once
/// it is long overdue makes `arm` request a fresh one. (Drift alone makes a timer late
/// by far less.)
pub const TIMER_LOST_NS: Nanos = 1_000_000;

/// The node's notion of time: its clock made strictly monotonic, and the durable lease.
#[derive(Debug, Default)]
pub struct Time {
    /// Highest raw clock reading (drives periodic work and timers).
    pub clock: u64,
    /// Highest clock reading or issued timestamp: `Clock` of the paper.
    pub last: u64,
    /// Claims (`pvc[d]`) never exceed this durable lease.
    pub lease: u64,
    pub lease_pending: bool,
}

impl Time {
    pub fn read(&mut self, clock: Nanos) -> u64 {
        self.clock = self.clock.max(clock);
        self.last = self.last.max(clock);
        self.last
    }

    /// A fresh timestamp above every reading and claim so far.
    pub fn issue(&mut self, clock: Nanos) -> u64 {
        self.last = self.last.max(clock) + 1;
        self.last
    }
}

/// Something to do once every record up to an lsn is durable.
#[derive(Debug)]
pub enum Deferred {
    Lease(u64),
    Remote {
        partition: PartitionId,
        origin: u16,
        upto: u64,
    },
    Decision(TxnId),
    Send(Addr, AnyMsg),
}

pub struct Node {
    pub(super) topo: Topology,
    pub(super) params: Params,
    pub(super) me: NodeId,
    pub(super) d: usize,
    pub(super) mutation: Mutation,
    pub(super) time: Time,
    pub(super) parts: BTreeMap<PartitionId, Part>,
    pub(super) coord: Coord,
    pub(super) stable: Stable,
    queue: PersistQueue,
    last_lsn: Lsn,
    durable_lsn: Lsn,
    deferred: BTreeMap<Lsn, Vec<Deferred>>,
    armed: BTreeSet<u64>,
    pub(super) next_repl: u64,
    pub(super) next_stable: u64,
    /// (partition, sibling DC) still to be told that we restarted.
    pub(super) announce: BTreeSet<(PartitionId, u16)>,
    samples: Vec<(&'static str, u64)>,
}

impl Node {
    /// Builds a node and replays its records (oldest first).
    pub fn recover(config: NodeConfig, records: &[Vec<u8>]) -> Result<Node, String> {
        let topo = config.topology.clone();
        if topo.replication_factor != topo.dcs {
            return Err("cure needs full replication (replication factor = dcs)".into());
        }
        let mutation = Mutation::parse(config.params.mutation.as_deref())?;
        let d = usize::from(topo.dc_of(config.node).0);
        let dcs = usize::from(topo.dcs);
        let parts = topo
            .partitions_of(config.node)
            .into_iter()
            .map(|p| (p, Part::new(dcs, d)))
            .collect();
        let mut node = Node {
            me: config.node,
            d,
            mutation,
            time: Time::default(),
            parts,
            coord: Coord::default(),
            stable: Stable::new(dcs),
            queue: PersistQueue::starting_after(records.len() as Lsn),
            last_lsn: records.len() as Lsn,
            durable_lsn: records.len() as Lsn,
            deferred: BTreeMap::new(),
            armed: BTreeSet::new(),
            next_repl: 0,
            next_stable: 0,
            announce: BTreeSet::new(),
            samples: Vec::new(),
            params: config.params,
            topo,
        };
        for (i, bytes) in records.iter().enumerate() {
            node.replay(Record::decode(i, bytes)?);
        }
        // Never reissue: start above every lease and prepare time on disk.
        node.time.last += 1;
        if !records.is_empty() {
            node.announce = node
                .parts
                .iter()
                .flat_map(|(p, part)| part.sibs.keys().map(move |s| (*p, *s)))
                .collect();
        }
        Ok(node)
    }

    fn replay(&mut self, record: Record) {
        let d = self.d;
        match record {
            Record::Lease { until } => {
                self.time.lease = self.time.lease.max(until);
                self.time.last = self.time.last.max(until);
            }
            Record::Prepare {
                partition,
                txn,
                coord,
                prep_time,
                ops,
                ..
            } => {
                self.time.last = self.time.last.max(prep_time);
                let p = Prepared {
                    coord,
                    prep_time,
                    since: 0, // inquire at once after a restart
                    ops,
                };
                self.part(partition).prepared.insert(txn, p);
            }
            Record::Commit { partition, txn, ct } => {
                let broken = self.mutation.commit_time_min;
                self.part(partition).commit(d, txn, &ct, broken);
            }
            Record::Remote {
                partition,
                origin,
                upto,
                txns,
            } => {
                let part = self.part(partition);
                for t in txns {
                    part.add_committed(origin, t);
                }
                let o = usize::from(origin);
                part.have[o] = part.have[o].max(upto);
                part.pvc.set(o, part.pvc.get(o).max(upto));
            }
            Record::Decision {
                txn,
                ct,
                participants,
            } => self.coord.recovered_decision(txn, ct, participants),
            Record::Ended { txns } => {
                for t in txns {
                    self.coord.decisions.remove(&t);
                }
            }
        }
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

    pub(super) fn dc_nodes(&self) -> Vec<NodeId> {
        self.topo.nodes_in_dc(DcId(self.d as u16)).collect()
    }

    /// Persists `record`, then sends `then` (persist before release).
    pub(super) fn persist(
        &mut self,
        ctx: &mut Ctx<AnyMsg>,
        record: Record,
        then: Vec<(Addr, AnyMsg)>,
    ) -> Lsn {
        let lsn = self.queue.persist(ctx, record.encode(), then);
        assert!(lsn > self.last_lsn, "lsns grow");
        self.last_lsn = lsn;
        lsn
    }

    /// Runs `action` once everything persisted so far is durable.
    pub(super) fn after_durable(&mut self, ctx: &mut Ctx<AnyMsg>, action: Deferred) {
        if self.durable_lsn >= self.last_lsn {
            self.run_deferred(ctx, action);
        } else {
            self.deferred.entry(self.last_lsn).or_default().push(action);
        }
    }

    fn run_deferred(&mut self, ctx: &mut Ctx<AnyMsg>, action: Deferred) {
        match action {
            Deferred::Lease(until) => {
                self.time.lease = self.time.lease.max(until);
                self.time.lease_pending = false;
            }
            Deferred::Remote {
                partition,
                origin,
                upto,
            } => {
                let part = self.part(partition);
                let o = usize::from(origin);
                part.pvc.set(o, part.pvc.get(o).max(upto));
            }
            Deferred::Decision(txn) => self.coord.decision_durable(txn),
            Deferred::Send(to, msg) => ctx.send(to, msg),
        }
    }

    /// Renews the lease on claimable timestamps before the clock reaches it.
    fn renew_lease(&mut self, ctx: &mut Ctx<AnyMsg>) {
        if self.time.lease_pending || self.time.last + LEASE_NS / 2 < self.time.lease {
            return;
        }
        let until = self.time.last + LEASE_NS;
        self.time.lease_pending = true;
        self.persist(ctx, Record::Lease { until }, Vec::new());
        self.after_durable(ctx, Deferred::Lease(until));
    }

    // ---- partition side: reads and 2PC participant ----

    /// Parks a READ_KEY or PREPARE until its snapshot is stable here (Alg. 2 l.2, l.8).
    fn park(&mut self, ctx: &mut Ctx<AnyMsg>, partition: PartitionId, w: Waiting) {
        let total: usize = self.parts.values().map(|p| p.waiting.len()).sum();
        if total >= WAITING_REQUESTS_MAX || !self.parts.contains_key(&partition) {
            let e = Error::Unavailable("partition overloaded or not hosted here".into());
            return self.refuse(ctx, partition, w, e);
        }
        self.part(partition).waiting.push(w);
        self.serve_waiting(ctx);
    }

    fn refuse(&mut self, ctx: &mut Ctx<AnyMsg>, partition: PartitionId, w: Waiting, e: Error) {
        match w {
            Waiting::Read {
                coord, rid, keys, ..
            } => {
                let objects = keys.into_iter().map(|(k, _)| (k, Err(e.clone()))).collect();
                let m = Msg::ReadReply {
                    rid,
                    partition,
                    objects,
                };
                ctx.send(Addr::Node(coord), wrap(m));
            }
            Waiting::Prepare { coord, txn, .. } => {
                let m = Msg::Prepared {
                    txn,
                    partition,
                    result: Err(e),
                };
                ctx.send(Addr::Node(coord), wrap(m));
            }
        }
    }

    /// Serves every parked request whose wait condition now holds.
    pub(super) fn serve_waiting(&mut self, ctx: &mut Ctx<AnyMsg>) {
        fn reads_snapshot(updates: &super::msg::Updates) -> bool {
            use causeway_core::crdt::Update;
            updates
                .iter()
                .any(|(_, u, _)| matches!(u, Update::Remove(_) | Update::MvAssign(_)))
        }
        let (d, clock, lease) = (self.d, self.time.last, self.time.lease);
        let m = self.mutation;
        let mut ready = Vec::new();
        for (pid, part) in self.parts.iter_mut() {
            if part.waiting.is_empty() {
                continue;
            }
            let pvc_d = part.pvc_local(d, clock, lease, m.pvc_ignores_prepared);
            let (go, stay): (Vec<Waiting>, Vec<Waiting>) = std::mem::take(&mut part.waiting)
                .into_iter()
                .partition(|w| {
                    let s = w.svc_local(d);
                    match w {
                        // Cure Alg. 2 l.2: wait until pvc[d] >= svc[d].
                        Waiting::Read { .. } => m.no_read_wait || pvc_d >= s,
                        // Cure Alg. 2 l.8: wait until Clock > svc[d]. Effects generated
                        // from the observed state (a set remove, an mvreg assignment) need
                        // the snapshot stable too, like a read; the others do not wait.
                        Waiting::Prepare { updates, .. } => {
                            clock > s && (pvc_d >= s || !reads_snapshot(updates))
                        }
                    }
                });
            part.waiting = stay;
            ready.extend(go.into_iter().map(|w| (*pid, w)));
        }
        for (pid, w) in ready {
            match w {
                Waiting::Read {
                    coord,
                    rid,
                    svc,
                    keys,
                    arrived,
                } => {
                    let objects = self.parts[&pid].read(&svc, &keys);
                    let waited = self.time.clock.saturating_sub(arrived);
                    self.sample("read_wait_ns", waited);
                    let m = Msg::ReadReply {
                        rid,
                        partition: pid,
                        objects,
                    };
                    ctx.send(Addr::Node(coord), wrap(m));
                }
                Waiting::Prepare {
                    coord,
                    txn,
                    svc,
                    updates,
                } => self.prepare(ctx, pid, coord, txn, svc, updates),
            }
        }
    }

    /// PREPARE (Cure Alg. 2 l.6-12): effects at the snapshot, a prepare time above
    /// every claim, the record persisted before the vote leaves.
    fn prepare(
        &mut self,
        ctx: &mut Ctx<AnyMsg>,
        partition: PartitionId,
        coord: NodeId,
        txn: TxnId,
        svc: Vc,
        updates: super::msg::Updates,
    ) {
        if self.parts[&partition].prepared.contains_key(&txn) {
            return; // a duplicate PREPARE: the first one votes
        }
        let ops = match self.parts[&partition].effects(&svc, &updates) {
            Ok(ops) => ops,
            Err(e) => {
                let m = Msg::Prepared {
                    txn,
                    partition,
                    result: Err(e),
                };
                return ctx.send(Addr::Node(coord), wrap(m));
            }
        };
        let prep_time = self.time.issue(ctx.clock); // Alg. 2 l.9
        assert!(
            prep_time > svc.get(self.d),
            "prepare time must exceed svc[d]"
        );
        let p = Prepared {
            coord,
            prep_time,
            since: self.time.clock,
            ops: ops.clone(),
        };
        self.part(partition).prepared.insert(txn, p);
        let record = Record::Prepare {
            partition,
            txn,
            coord,
            svc,
            prep_time,
            ops,
        };
        let vote = Msg::Prepared {
            txn,
            partition,
            result: Ok(prep_time),
        };
        self.persist(ctx, record, vec![(Addr::Node(coord), wrap(vote))]);
    }

    /// COMMIT (Cure Alg. 2 l.13-16); the ack leaves once the commit is durable.
    fn commit_txn(
        &mut self,
        ctx: &mut Ctx<AnyMsg>,
        from: Addr,
        txn: TxnId,
        partition: PartitionId,
        ct: Vc,
    ) {
        let ack = wrap(Msg::CommitAck { txn, partition });
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
            self.after_durable(ctx, Deferred::Send(from, ack));
        }
    }

    /// Asks coordinators about txns prepared here for too long (or since a restart).
    fn inquire(&mut self, ctx: &mut Ctx<AnyMsg>) {
        let clock = self.time.clock;
        for (pid, part) in self.parts.iter_mut() {
            for (txn, p) in part.prepared.iter_mut() {
                if p.since == 0 || clock.saturating_sub(p.since) >= INQUIRE_AFTER_NS {
                    p.since = clock;
                    let m = Msg::Inquire {
                        txn: *txn,
                        partition: *pid,
                    };
                    ctx.send(Addr::Node(p.coord), wrap(m));
                }
            }
        }
    }

    // ---- dispatch and timers ----

    fn dispatch(&mut self, ctx: &mut Ctx<AnyMsg>, from: Addr, msg: Msg) {
        let from_node = match from {
            Addr::Node(n) => n,
            Addr::Client(_) => self.me,
        };
        match msg {
            Msg::Start { txn, cvc } => self.on_start(ctx, from, txn, cvc),
            Msg::Read {
                txn,
                req,
                keys,
                updates,
            } => self.on_read(ctx, from, txn, req, keys, updates),
            Msg::Commit { txn, req, updates } => self.on_commit(ctx, from, txn, req, updates),
            Msg::Abort { txn } => self.on_abort(txn),
            Msg::ReadKeys {
                rid,
                partition,
                svc,
                keys,
            } => {
                let arrived = self.time.clock;
                let w = Waiting::Read {
                    coord: from_node,
                    rid,
                    svc,
                    keys,
                    arrived,
                };
                self.park(ctx, partition, w);
            }
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
            } => {
                let w = Waiting::Prepare {
                    coord: from_node,
                    txn,
                    svc,
                    updates,
                };
                self.park(ctx, partition, w);
            }
            Msg::Prepared {
                txn,
                partition,
                result,
            } => self.on_prepared(ctx, txn, partition, result),
            Msg::CommitTxn { txn, partition, ct } => self.commit_txn(ctx, from, txn, partition, ct),
            Msg::CommitAck { txn, partition } => self.on_commit_ack(ctx, txn, partition),
            Msg::AbortTxn { txn, partition } => {
                if let Some(part) = self.parts.get_mut(&partition) {
                    part.prepared.remove(&txn);
                }
                self.serve_waiting(ctx);
            }
            Msg::Inquire { txn, partition } => self.on_inquire(ctx, from, txn, partition),
            Msg::Repl {
                partition,
                restarted,
                acks,
                stream,
            } => self.on_repl(ctx, from_node, partition, restarted, acks, stream),
            Msg::Stable { pvc, gss, oldest } => self.on_stable(ctx, from_node, pvc, gss, oldest),
            Msg::Started { .. } | Msg::ReadResult { .. } | Msg::CommitResult { .. } => {}
        }
    }

    fn periodic(&mut self, ctx: &mut Ctx<AnyMsg>) {
        let clock = self.time.clock;
        self.renew_lease(ctx);
        if clock >= self.next_repl {
            self.next_repl = clock + self.params.replication_interval_ns;
            self.replicate(ctx);
        }
        if clock >= self.next_stable {
            self.next_stable = clock + self.params.stabilization_interval_ns;
            self.stabilize(ctx);
            self.inquire(ctx);
            self.coord_tick(ctx);
        }
        self.serve_waiting(ctx);
    }

    /// Arms a timer for the next deadline (periodic work or a parked request's clock wait)
    /// unless one at or before it is armed already.
    fn arm(&mut self, ctx: &mut Ctx<AnyMsg>) {
        let (clock, last) = (self.time.clock, self.time.last);
        self.armed = self.armed.split_off(&clock.saturating_sub(TIMER_LOST_NS));
        let d = self.d;
        let mut next = self.next_repl.min(self.next_stable);
        for part in self.parts.values() {
            for w in &part.waiting {
                let s = w.svc_local(d);
                if s >= last {
                    next = next.min(s + 1); // waiting for Clock > s
                }
            }
        }
        let next = next.max(clock + TIMER_MIN_NS);
        if self.armed.first().is_none_or(|first| next < *first) {
            self.armed.insert(next);
            ctx.timer(next - clock);
        }
    }
}

impl ServerNode for Node {
    type Msg = AnyMsg;

    fn start(&mut self, ctx: &mut Ctx<AnyMsg>) {
        self.time.read(ctx.clock);
        self.periodic(ctx);
        self.arm(ctx);
    }

    fn handle_message(&mut self, ctx: &mut Ctx<AnyMsg>, from: Addr, msg: AnyMsg) {
        let AnyMsg::Cure(msg) = msg else {
            return; // another protocol's message: not ours to answer
        };
        self.time.read(ctx.clock);
        self.dispatch(ctx, from, msg);
        if self.time.clock >= self.next_repl.min(self.next_stable) {
            self.periodic(ctx); // overdue: do not wait for a timer to catch up
        }
        self.arm(ctx);
    }

    fn handle_timeout(&mut self, ctx: &mut Ctx<AnyMsg>) {
        self.time.read(ctx.clock);
        // Forget every deadline that is due; if none is (a stalled clock can reorder
        // timers), the smallest. Each firing forgets at least one entry, so `armed` never
        // holds more entries than timers in flight and the node is never left without one.
        let later = self.armed.split_off(&(self.time.clock + 1));
        if std::mem::replace(&mut self.armed, later).is_empty() {
            self.armed.pop_first();
        }
        self.periodic(ctx);
        self.arm(ctx);
    }

    fn handle_persisted(&mut self, ctx: &mut Ctx<AnyMsg>, lsn: Lsn) {
        self.time.read(ctx.clock);
        self.durable_lsn = self.durable_lsn.max(lsn);
        self.queue.persisted(ctx, lsn);
        let later = self.deferred.split_off(&(lsn + 1));
        let ready = std::mem::replace(&mut self.deferred, later);
        for action in ready.into_values().flatten() {
            self.run_deferred(ctx, action);
        }
        self.serve_waiting(ctx);
        self.arm(ctx);
    }

    fn gauges(&self, _clock: Nanos) -> Vec<(&'static str, f64)> {
        let versions: usize = self.parts.values().map(|p| p.store.versions()).sum();
        let log: usize = self
            .parts
            .values()
            .flat_map(|p| p.log.values())
            .map(|l| l.len())
            .sum();
        vec![
            ("store_versions", versions as f64),
            ("repl_log_txns", log as f64),
        ]
    }

    fn take_samples(&mut self) -> Vec<(&'static str, u64)> {
        std::mem::take(&mut self.samples)
    }
}
