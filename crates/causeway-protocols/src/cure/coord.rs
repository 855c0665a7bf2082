//! The transaction coordinator (Cure Alg. 1): START with its wait for the GSS to cover
//! the session's past, reads through READ_KEY with the write-set overlay, and 2PC inside
//! the DC with the commit decision persisted before any COMMIT leaves (presumed abort).

use super::coord_state::{commit_answer, reply, PendingStart, Start, Step, Txn};
use super::ext::Extension;
use super::msg::{First, Msg, Updates};
use super::node::Node;
use super::part::{Phase, Waiting};
use super::record::Record;
use super::types::Deferred;
use crate::kit::twopc::{Answer, Votes};
use crate::kit::txn::{check_read, limit, read_value, ReadId, TxnBuffer};
use causeway_core::crdt::ObjType;
use causeway_core::limits::{COORD_TXNS_MAX, TXN_UPDATES_MAX};
use causeway_core::{Addr, Ctx, Error, Key, NodeId, Object, PartitionId, TxnId, TxnKind, Vc};
use std::collections::BTreeMap;

/// Why a txn whose votes did not all arrive in time ends.
const PREPARE_TIMED_OUT: &str = "prepare timed out";

impl<X: Extension> Node<X> {
    /// START (Alg. 1 l.1) with the txn's first request (`first`).
    pub(crate) fn on_start(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: Addr,
        start: Start,
        cvc: Vc,
        first: First,
    ) {
        let txn = start.txn;
        if start.kind == TxnKind::Strong && !self.ext.strong_txns() {
            let e = Error::Unsupported {
                protocol: self.ext.name(self.flavor).into(),
                capability: "strong transactions".into(),
            };
            return reply(ctx, from, refusal(txn, first, e));
        }
        if self.coord.txns.len() + self.coord.starts.len() >= COORD_TXNS_MAX {
            let e = limit("transactions per coordinator", COORD_TXNS_MAX);
            return reply(ctx, from, refusal(txn, first, e));
        }
        self.coord.starts.push(PendingStart {
            start,
            client: from,
            cvc,
            first,
        });
        self.try_starts(ctx);
    }

    /// Starts every txn whose session's past the GSS covers (Alg. 1 l.2-6). Under
    /// UniStore's rules (UniStore Alg. 1 l.2-7) every START goes on at once.
    pub(crate) fn try_starts(&mut self, ctx: &mut Ctx<Msg>) {
        if self.coord.starts.is_empty() {
            return;
        }
        let clock = self.time.last;
        let go = if self.flavor.ft_rules() {
            let starts = std::mem::take(&mut self.coord.starts);
            starts
                .into_iter()
                .map(|s| {
                    let svc = X::snapshot(self, &s.cvc);
                    (s, svc)
                })
                .collect()
        } else {
            self.cure_snapshots(clock)
        };
        for (s, svc) in go {
            let t = Txn {
                client: s.client,
                svc,
                buffer: TxnBuffer::new(s.start.txn, s.start.kind),
                step: Step::Idle,
                last_active: clock,
                started: clock,
                kind: s.start.kind,
                reads: Default::default(),
                label: s.start.label.clone(),
                then: None,
                observed: s.start.observed,
                held: None,
            };
            self.coord.txns.insert(s.start.txn, Box::new(t));
            self.go_on(ctx, s);
        }
    }

    /// A started txn: serve the request that came with its START.
    fn go_on(&mut self, ctx: &mut Ctx<Msg>, s: PendingStart) {
        let (txn, client) = (s.start.txn, s.client);
        match s.first {
            First::Read { req, keys, updates } => {
                self.on_read(ctx, client, txn, req, keys, updates)
            }
            First::Commit { req, updates } => self.on_commit(ctx, client, txn, req, updates),
            First::ReadCommit {
                req,
                keys,
                updates,
                then,
            } => {
                if let Some(t) = self.coord.txns.get_mut(&txn) {
                    t.then = Some(then);
                }
                self.on_read(ctx, client, txn, req, keys, updates)
            }
        }
    }

    /// Cure Alg. 1 l.2-6: the STARTs whose past the GSS covers, with their snapshots
    /// `svc = GSS`, `svc[d] = max(cvc[d], Clock)`; the others keep waiting.
    fn cure_snapshots(&mut self, clock: u64) -> Vec<(PendingStart, Vc)> {
        if !self.gss.complete() {
            return Vec::new();
        }
        let d = self.d;
        // Borrowed, not copied: the starts are another field (a copy was an allocation
        // per START).
        let gss = self.gss.stable();
        let covered = |cvc: &Vc| (0..gss.dcs.len()).all(|k| k == d || cvc.get(k) <= gss.get(k));
        // In place, as `serve_waiting` does (the rest keep their order).
        let go = self.coord.starts.extract_if(.., |s| covered(&s.cvc));
        go.map(|s| {
            let mut svc = gss.clone(); // Alg. 1 l.4
            svc.set(d, s.cvc.get(d).max(clock)); // Alg. 1 l.5
            (s, svc)
        })
        .collect()
    }

    /// Appends updates shipped with a request; None (after answering) if the txn is gone.
    pub(crate) fn take_updates(&mut self, txn: TxnId, updates: Updates) -> Result<(), Error> {
        let clock = self.time.clock;
        let Some(t) = self.coord.txns.get_mut(&txn) else {
            return Err(Error::Aborted(
                "unknown transaction (its coordinator restarted)".into(),
            ));
        };
        if t.buffer.updates.len() + updates.len() > TXN_UPDATES_MAX {
            return Err(limit("updates in one transaction", TXN_UPDATES_MAX));
        }
        // Alg. 1 l.8-14. The first shipment becomes the buffer (no copy).
        match t.buffer.updates.is_empty() {
            true => t.buffer.updates = updates,
            false => t.buffer.updates.extend(updates),
        }
        t.last_active = clock;
        Ok(())
    }

    pub(crate) fn on_read(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: Addr,
        txn: TxnId,
        req: u64,
        keys: Vec<(Key, ObjType)>,
        updates: Updates,
    ) {
        if let Err(e) = self
            .take_updates(txn, updates)
            .and_then(|_| check_read(&keys))
        {
            return reply(
                ctx,
                from,
                Msg::ReadResult {
                    txn,
                    req,
                    result: Err(e),
                },
            );
        }
        if let Some(partition) = self.direct_partition(txn, &keys) {
            return self.read_here(ctx, (txn, req), partition, keys);
        }
        let mut groups: BTreeMap<PartitionId, Vec<(Key, ObjType)>> = BTreeMap::new();
        for (k, t) in &keys {
            groups
                .entry(self.topo.partition_of(k))
                .or_default()
                .push((k.clone(), *t));
        }
        let rid = ReadId { txn, req };
        let t = self
            .coord
            .txns
            .get_mut(&txn)
            .expect("checked by take_updates");
        let svc = t.svc.clone();
        if t.kind == TxnKind::Strong {
            t.reads.extend(keys.iter().map(|(k, _)| k.clone())); // Alg. 1 l.14
        }
        t.step = Step::Reading {
            req,
            keys: keys.into_iter().map(|(k, _)| k).collect(),
            missing: groups.len(),
            got: BTreeMap::new(),
        };
        let dc = DcIdOf::dc(self.d);
        for (partition, keys) in groups {
            let to = Addr::Node(self.topo.node_of(dc, partition));
            let m = Msg::ReadKeys {
                rid,
                partition,
                svc: svc.clone(),
                keys,
            }; // Alg. 1 l.19
            ctx.send(to, m);
        }
        self.finish_read(ctx, txn);
    }

    pub(crate) fn on_read_reply(
        &mut self,
        ctx: &mut Ctx<Msg>,
        rid: ReadId,
        _partition: PartitionId,
        objects: Vec<(Key, Result<Object, Error>)>,
    ) {
        // A reply to a read that ended (the txn went on, or died) is stale.
        let Some(Txn {
            step: Step::Reading {
                req, missing, got, ..
            },
            ..
        }) = self.coord.txns.get_mut(&rid.txn).map(|t| &mut **t)
        else {
            return;
        };
        if *req != rid.req {
            return;
        }
        got.extend(objects);
        *missing = missing.saturating_sub(1);
        self.finish_read(ctx, rid.txn);
    }

    /// Answers the session once every partition replied, overlaying the write set
    /// (Alg. 1 l.20-21).
    fn finish_read(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        let Some(t) = self.coord.txns.get_mut(&txn) else {
            return;
        };
        let Step::Reading { missing: 0, .. } = t.step else {
            return;
        };
        let Step::Reading { req, keys, got, .. } = std::mem::replace(&mut t.step, Step::Idle)
        else {
            unreachable!("matched above")
        };
        let mut values = Vec::with_capacity(keys.len());
        let mut result = Ok(());
        // A read of one key (every standalone command's) takes its object; a read of
        // several copies each, as a key may be read twice. A hot set's copy cost a SADD
        // a clone of its tags.
        let (single, mut got) = (keys.len() == 1, got);
        for key in keys {
            let obj = match single {
                true => got.remove(&key),
                false => got.get(&key).cloned(),
            };
            let obj = obj.unwrap_or_else(|| Err(Error::Unavailable("no reply".into())));
            match obj.and_then(|o| read_value(&t.buffer, key, o, t.observed)) {
                Ok(v) => values.push(v),
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        let result = result.map(|_| (values, t.svc.clone()));
        let client = t.client;
        // A read-then-commit whose read failed commits nothing: the session may go on
        // with the txn (another read, its own commit), which is then an ordinary one.
        let then = t.then.take().filter(|_| result.is_ok());
        if matches!(result, Err(Error::Aborted(_))) {
            self.coord.txns.remove(&txn); // the session ends it too (session.rs)
        }
        reply(ctx, client, Msg::ReadResult { txn, req, result });
        if let Some(then) = then {
            self.on_commit(ctx, client, txn, req, then); // read-then-commit
        }
    }

    pub(crate) fn on_commit(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: Addr,
        txn: TxnId,
        req: u64,
        updates: Updates,
    ) {
        if let Err(e) = self.take_updates(txn, updates) {
            let result = Err(e);
            return reply(ctx, from, Msg::CommitResult { txn, req, result });
        }
        let dc = DcIdOf::dc(self.d);
        let t = self
            .coord
            .txns
            .get_mut(&txn)
            .expect("checked by take_updates");
        if t.kind == TxnKind::Strong {
            return X::commit_other(self, ctx, txn, req); // UniStore Alg. 3
        }
        if t.buffer.updates.is_empty() {
            // Read-only: the snapshot is the txn's place in causality.
            let t = self.coord.txns.remove(&txn).expect("present");
            let result = Ok(t.svc);
            return reply(ctx, t.client, Msg::CommitResult { txn, req, result });
        }
        let topo = &self.topo;
        // Taken: nothing reads a committing txn's buffer (strong txns returned above).
        let groups = t.buffer.take_by(|k| topo.partition_of(k));
        let deadline = self.time.clock + self.cfg.prepare_timeout_ns;
        let here = |p: &PartitionId| topo.node_of(dc, *p) == self.me;
        let phase = match groups.len() {
            _ if !self.cfg.one_phase => Phase::Two,
            1 => Phase::One,
            _ if groups.iter().all(|(p, _)| here(p)) => Phase::Node,
            _ => Phase::Two,
        };
        t.step = Step::Preparing {
            req,
            votes: Votes::new(groups.iter().map(|(p, _)| *p), deadline),
            phase,
        };
        let svc = t.svc.clone();
        self.send_prepares(ctx, txn, svc, groups, phase);
    }

    /// PREPARE to each partition of `groups` (Alg. 1 l.29) at snapshot `svc`: parked
    /// directly at a partition of this node, sent to the others.
    fn send_prepares(
        &mut self,
        ctx: &mut Ctx<Msg>,
        txn: TxnId,
        svc: Vc,
        groups: Vec<(PartitionId, Updates)>,
        phase: Phase,
    ) {
        let dc = DcIdOf::dc(self.d);
        let one_phase = phase == Phase::One;
        let mut svc = Some(svc);
        let last = groups.len() - 1;
        for (i, (partition, updates)) in groups.into_iter().enumerate() {
            // The last group takes the snapshot, the others a copy (one clone for a
            // single-partition commit, as every single-key command is).
            let svc = match i == last {
                true => svc.take().expect("taken by the last group only"),
                false => svc.clone().expect("kept until the last group"),
            };
            let node = self.topo.node_of(dc, partition);
            if self.prepares_without_record(phase, node) {
                // A partition of this node prepares as for a PREPARE (Alg. 2 l.6-12) but
                // votes without a record: the decision's record holds its effects.
                let w = Waiting::Prepare {
                    coord: self.me,
                    txn,
                    svc,
                    updates,
                    phase: Phase::Node,
                };
                self.park(ctx, partition, w);
                continue;
            }
            if node == self.me {
                // A partition of this node (a one-phase txn's, or any with one-phase
                // commit off) gets its PREPARE (Alg. 2 l.6) without a message to itself.
                let w = Waiting::Prepare {
                    coord: self.me,
                    txn,
                    svc,
                    updates,
                    phase: if one_phase { Phase::One } else { Phase::Two },
                };
                self.park(ctx, partition, w);
                continue;
            }
            let m = Msg::Prepare {
                txn,
                partition,
                svc,
                updates,
                one_phase,
            }; // Alg. 1 l.29
            ctx.send(Addr::Node(node), m);
        }
    }

    pub(crate) fn on_abort(&mut self, txn: TxnId) {
        if let Some(t) = self.coord.txns.get(&txn) {
            if matches!(t.step, Step::Idle) {
                self.coord.txns.remove(&txn);
            }
        }
    }

    pub(crate) fn on_prepared(
        &mut self,
        ctx: &mut Ctx<Msg>,
        txn: TxnId,
        partition: PartitionId,
        result: Result<u64, Error>,
    ) {
        let Some(Txn {
            step: Step::Preparing { votes, .. },
            ..
        }) = self.coord.txns.get_mut(&txn).map(|t| &mut **t)
        else {
            // A vote for a txn we no longer run (aborted, or we restarted): release it.
            let to = Addr::Node(self.topo.node_of(DcIdOf::dc(self.d), partition));
            return ctx.send(to, Msg::AbortTxn { txn, partition });
        };
        match result {
            Err(e) => self.abort_txn(ctx, txn, &e.to_string()),
            Ok(t) => {
                if votes.record(partition, t) {
                    self.decide(ctx, txn);
                }
            }
        }
    }

    /// A single-partition txn's partition committed it (one-phase commit): answer.
    pub(crate) fn on_one_phase_done(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, ct: Vc) {
        let Some(Txn {
            step: Step::Preparing {
                phase: Phase::One, ..
            },
            ..
        }) = self.coord.txns.get(&txn).map(|t| &**t)
        else {
            return; // answered already (timed out as unknown)
        };
        let t = self.coord.txns.remove(&txn).expect("present");
        let Step::Preparing { req, .. } = t.step else {
            unreachable!("matched above")
        };
        let answer = commit_answer((txn, req), t.held, Ok(ct));
        reply(ctx, t.client, answer);
    }

    /// Commit time and commit vector (Alg. 1 l.31-36); the decision is persisted before
    /// COMMIT and the answer to the session leave.
    fn decide(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        let t = self.coord.txns.remove(&txn).expect("deciding a live txn");
        let Step::Preparing { req, votes, phase } = t.step else {
            unreachable!("decide is called in the prepare step")
        };
        let times = votes.all().expect("all voted").into_iter();
        let commit_time = if self.mutation.commit_time_min {
            times.min()
        } else {
            times.max() // Alg. 1 l.31
        }
        .expect("at least one participant");
        let mut ct = t.svc.clone();
        ct.set(self.d, commit_time); // Alg. 1 l.32-33
        let dc = DcIdOf::dc(self.d);
        let (mine, elsewhere): (Vec<_>, Vec<_>) = votes
            .participants()
            .map(|p| (p, self.topo.node_of(dc, p)))
            .partition(|(_, n)| self.prepares_without_record(phase, *n));
        let participants: BTreeMap<PartitionId, NodeId> = elsewhere.into_iter().collect();
        assert_eq!(
            phase == Phase::Node,
            participants.is_empty(),
            "a one-node txn has no participant elsewhere"
        );
        // A direct read-then-commit (the only holder of a read) commits in one phase.
        assert!(t.held.is_none(), "a decided txn holds no read");
        let then = Self::commit_messages((txn, req), t.client, &ct, &participants);
        let mine: Vec<PartitionId> = mine.into_iter().map(|(p, _)| p).collect();
        let record = if mine.is_empty() {
            Record::Decision {
                txn,
                ct: ct.clone(),
                participants: participants.clone().into_iter().collect(),
            }
        } else {
            self.node_commit_record(txn, &ct, &mine, &participants)
        };
        self.persist(ctx, record, then);
        if !participants.is_empty() {
            let clock = self.time.clock;
            self.coord
                .decisions
                .decide(txn, ct.clone(), participants, clock);
            self.after_durable(Deferred::Decision(txn));
        }
        if !mine.is_empty() {
            let commit = Deferred::NodeCommit {
                partitions: mine,
                txn,
                ct,
            };
            if self.mutation.node_commit_early {
                let done = self.run_deferred(commit); // visible before it is durable
                assert!(done.is_none(), "a node commit answers with its decision");
            } else {
                self.after_durable(commit);
            }
        }
    }

    /// Whether a participant on `node` of a txn committing in `phase` prepares without a
    /// record, its effects going into the decision's (`NodeCommit`): a partition of the
    /// coordinator's node, with one-phase commit on, unless the txn has one partition.
    fn prepares_without_record(&self, phase: Phase, node: NodeId) -> bool {
        phase != Phase::One && self.cfg.one_phase && node == self.me
    }

    /// What leaves once a commit decision is durable: COMMIT to each participant
    /// elsewhere (Alg. 1 l.34-35) and the answer to the session (l.36).
    fn commit_messages(
        (txn, req): (TxnId, u64),
        client: Addr,
        ct: &Vc,
        participants: &BTreeMap<PartitionId, NodeId>,
    ) -> Vec<(Addr, Msg)> {
        let commit = |(p, n): (&PartitionId, &NodeId)| {
            let m = Msg::CommitTxn {
                txn,
                partition: *p,
                ct: ct.clone(),
            };
            (Addr::Node(*n), m)
        };
        let mut then: Vec<(Addr, Msg)> = participants.iter().map(commit).collect();
        let result = Ok(ct.clone());
        then.push((client, Msg::CommitResult { txn, req, result }));
        then
    }

    /// The record of a commit decided with partitions of this node among the
    /// participants (one-node commit, and the coordinator's own share of a 2PC): their
    /// effects, prepared here without a record, the commit vector (Alg. 1 l.31-33) and the
    /// participants elsewhere. It is the prepare of `mine` and the decision at once (a
    /// node's records are replayed whole or not at all); until it is durable the txn stays
    /// prepared at `mine`, holding each `pvc[d]` below its prepare time (Alg. 2 l.20), and
    /// a crash before then loses it on this node, where no one was answered, while the
    /// participants elsewhere find no decision here and abort it (presumed abort).
    fn node_commit_record(
        &self,
        txn: TxnId,
        ct: &Vc,
        mine: &[PartitionId],
        participants: &BTreeMap<PartitionId, NodeId>,
    ) -> Record {
        let parts = mine
            .iter()
            .map(|p| {
                let prepared = self.parts[p].prepared.get(&txn);
                let prepared = prepared.expect("a participant of this node voted: prepared");
                assert_eq!(
                    prepared.phase,
                    Phase::Node,
                    "prepared for a one-node commit"
                );
                (*p, prepared.ops.clone())
            })
            .collect();
        Record::NodeCommit {
            txn,
            ct: ct.clone(),
            parts,
            participants: participants.iter().map(|(p, n)| (*p, *n)).collect(),
        }
    }

    fn abort_txn(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, why: &str) {
        let Some(t) = self.coord.txns.remove(&txn) else {
            return;
        };
        let dc = DcIdOf::dc(self.d);
        if let Step::Preparing { req, votes, phase } = t.step {
            for p in votes.participants() {
                let to = Addr::Node(self.topo.node_of(dc, p));
                ctx.send(to, Msg::AbortTxn { txn, partition: p });
            }
            // A one-phase txn may commit at its partition whatever we do here.
            let result = if phase == Phase::One && why == PREPARE_TIMED_OUT {
                Err(Error::Unavailable(
                    "commit outcome unknown (timed out)".into(),
                ))
            } else {
                Err(Error::Aborted(why.to_string()))
            };
            let answer = commit_answer((txn, req), t.held, result);
            reply(ctx, t.client, answer);
        }
    }

    pub(crate) fn on_commit_ack(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, partition: PartitionId) {
        if self.coord.decisions.ack(txn, partition) {
            self.persist(ctx, Record::Ended { txns: vec![txn] }, Vec::new());
        }
    }

    /// A participant asks about a txn it holds prepared: commit if decided, nothing if
    /// still running, else abort (presumed abort: decisions are durable before use).
    pub(crate) fn on_inquire(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: Addr,
        txn: TxnId,
        partition: PartitionId,
    ) {
        let running = self.coord.txns.contains_key(&txn);
        match self.coord.decisions.answer(txn, running) {
            Answer::Commit(ct) => ctx.send(from, Msg::CommitTxn { txn, partition, ct }),
            Answer::Wait => {}
            Answer::Abort => ctx.send(from, Msg::AbortTxn { txn, partition }),
        }
    }

    /// Re-sends unacknowledged COMMITs, aborts txns whose votes do not come, drops idle ones.
    pub(crate) fn coord_tick(&mut self, ctx: &mut Ctx<Msg>) {
        let clock = self.time.clock;
        let every = self.cfg.inquire_after_ns;
        for (txn, partition, node, ct) in self.coord.decisions.resends(clock, every) {
            ctx.send(Addr::Node(node), Msg::CommitTxn { txn, partition, ct });
        }
        let expired: Vec<TxnId> = self
            .coord
            .txns
            .iter()
            .filter(|(_, t)| match t.step {
                Step::Preparing { ref votes, .. } => votes.expired(clock),
                Step::Ext(_) => false, // the extension times these out (UniStore: strong.rs)
                _ => clock.saturating_sub(t.last_active) > self.cfg.txn_idle_ns,
            })
            .map(|(id, _)| *id)
            .collect();
        for txn in expired {
            self.abort_txn(ctx, txn, PREPARE_TIMED_OUT);
            self.coord.txns.remove(&txn);
        }
    }

    /// The oldest snapshot this coordinator may still use: its open txns' and a lower
    /// bound on future ones (GSS, with the clock as local entry).
    pub(crate) fn oldest_snapshot(&self) -> Vc {
        let mut oldest = X::visible_vec(self).clone();
        X::oldest_bound(self, &mut oldest);
        if !self.flavor.ft_rules() {
            oldest.set(self.d, self.time.last); // Cure: svc[d] >= Clock (Alg. 1 l.5)
        } // UniStore: a future snapshot is at or above the visible vector (Alg. 1 l.5-6)
        for t in self.coord.txns.values() {
            oldest.meet(&t.svc);
        }
        oldest
    }
}

/// The answer to a START that cannot be served, in the shape its session waits for.
fn refusal(txn: TxnId, first: First, e: Error) -> Msg {
    match first {
        First::Read { req, .. } | First::ReadCommit { req, .. } => Msg::ReadResult {
            txn,
            req,
            result: Err(e),
        },
        First::Commit { req, .. } => Msg::CommitResult {
            txn,
            req,
            result: Err(e),
        },
    }
}

/// Shorthand for this node's DC id.
struct DcIdOf;

impl DcIdOf {
    fn dc(d: usize) -> causeway_core::DcId {
        causeway_core::DcId(d as u16)
    }
}
