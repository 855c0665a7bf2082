//! The transaction coordinator of PaRiS (Alg. 2): START's snapshot, parallel reads at
//! each partition's preferred replica, and 2PC across replicas in any DC, with the kit's
//! presumed-abort decisions (`kit::twopc`).

use super::config::{target_dc, Flavor, Mutation};
use super::coord_state::{ReadCtx, Step, TxnCtx};
use super::msg::{Effects, Msg, Record, Start, Updates};
use super::node::Node;
use super::part::ops_at;
use super::types::Deferred;
use crate::kit::twopc::{Answer, Retry, Votes};
use crate::kit::txn::ReadId;
use causeway_core::crdt::{ObjType, Object, Op};
use causeway_core::limits::COORD_TXNS_MAX;
use causeway_core::{Addr, Ctx, Error, Key, NodeId, PartitionId, TxnId};
use std::collections::BTreeMap;

/// Why a txn whose votes did not all arrive in time ended.
const PREPARE_TIMED_OUT: &str = "prepare timed out";
/// Why a txn whose read's slices did not all arrive in time ended.
const READ_TIMED_OUT: &str = "read timed out";

/// The objects read, one per requested key in the request's order. A key asked twice
/// (a client may: `causeway load` merges consecutive reads into one request) gets its
/// object twice; the slices answered it once.
/// (The `forget-repeated-read` mutation counts each key once: its second mention finds
/// nothing and aborts the txn.)
fn in_request_order(
    keys: &[(Key, ObjType)],
    mut objects: BTreeMap<Key, Result<Object, Error>>,
    mutation: Mutation,
) -> Vec<(Key, Result<Object, Error>)> {
    let mut left: BTreeMap<&Key, usize> = BTreeMap::new();
    for (k, _) in keys {
        let n = left.entry(k).or_default();
        *n = if mutation.forget_repeated_read {
            1
        } else {
            *n + 1
        };
    }
    keys.iter()
        .map(|(k, _)| {
            let n = left.get_mut(k).expect("counted above");
            *n = n.saturating_sub(1);
            let o = if *n == 0 {
                objects.remove(k)
            } else {
                objects.get(k).cloned()
            };
            (k.clone(), o.unwrap_or_else(|| Err(unknown_txn())))
        })
        .collect()
}

fn unknown_txn() -> Error {
    Error::Aborted("transaction unknown at its coordinator (restarted or expired)".into())
}

impl Node {
    /// START (Alg. 2 l.1-5), or the context of a started txn.
    fn txn_ctx(
        &mut self,
        txn: TxnId,
        session: Addr,
        start: Option<Start>,
    ) -> Result<&mut TxnCtx, Error> {
        if let Some(s) = start {
            if !self.coord.txns.contains_key(&txn) {
                if self.coord.txns.len() >= COORD_TXNS_MAX {
                    return Err(Error::Unavailable("coordinator overloaded".into()));
                }
                // Cache size per client (measured): a running mean over STARTs.
                let n = f64::from(s.cache_len);
                self.cache_mean += (n - self.cache_mean) / 16.0;
                let snapshot = self.snapshot_for(s.ust);
                let t = TxnCtx {
                    session,
                    snapshot,
                    last_active: self.time.clock,
                    step: Step::Idle,
                };
                self.coord.txns.insert(txn, t);
            }
        }
        let clock = self.time.clock;
        let t = self.coord.txns.get_mut(&txn).ok_or_else(unknown_txn)?;
        t.last_active = clock;
        Ok(t)
    }

    /// The snapshot of a new txn. PaRiS (Alg. 2 l.2): `ust = max(ust, ust_c)`. BPR (§V):
    /// the client's highest seen time or the coordinator's HLC, whichever is higher.
    /// NoCC: none (reads return the latest versions).
    fn snapshot_for(&mut self, client: u64) -> u64 {
        match self.flavor {
            Flavor::Paris => {
                self.ust = self.ust.max(client);
                self.ust
            }
            Flavor::Bpr => client.max(self.time.claimable()),
            Flavor::Nocc => u64::MAX,
        }
    }

    /// The node of the replica a request for partition `p` goes to (§V-A).
    fn target(&self, p: PartitionId) -> NodeId {
        self.topo.node_of(target_dc(&self.topo, self.d, p), p)
    }

    /// READ (Alg. 2 l.6-16): each partition's keys, in parallel, to its replica.
    pub(super) fn on_read(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: Addr,
        txn: TxnId,
        req: u64,
        start: Option<Start>,
        keys: Vec<(Key, ObjType)>,
    ) {
        let rid = ReadId { txn, req };
        let snapshot = match self.txn_ctx(txn, from, start) {
            Ok(t) if matches!(t.step, Step::Idle) => {
                t.step = Step::Reading { req };
                t.snapshot
            }
            Ok(_) => return, // a request while another runs: stale, ignore
            Err(e) => {
                let m = Msg::ReadResult {
                    txn,
                    req,
                    result: Err(e),
                };
                return ctx.send(from, m);
            }
        };
        let mut slices: BTreeMap<PartitionId, Vec<(Key, ObjType)>> = BTreeMap::new();
        for (k, t) in &keys {
            let p = self.topo.partition_of(k);
            slices.entry(p).or_default().push((k.clone(), *t));
        }
        let r = ReadCtx {
            txn,
            keys,
            waiting: slices.len(),
            objects: BTreeMap::new(),
        };
        self.coord.reads.insert(rid, r);
        for (partition, keys) in slices {
            let m = Msg::ReadSlice {
                rid,
                partition,
                snapshot,
                keys,
            };
            ctx.send(Addr::Node(self.target(partition)), m);
        }
    }

    pub(super) fn on_slice_reply(
        &mut self,
        ctx: &mut Ctx<Msg>,
        rid: ReadId,
        _partition: PartitionId,
        objects: Vec<(Key, Result<Object, Error>)>,
    ) {
        let Some(r) = self.coord.reads.get_mut(&rid) else {
            return;
        };
        r.objects.extend(objects);
        r.waiting -= 1;
        if r.waiting > 0 {
            return;
        }
        let r = self.coord.reads.remove(&rid).expect("present");
        let Some(t) = self.coord.txns.get_mut(&r.txn) else {
            return;
        };
        let Step::Reading { req, .. } = t.step else {
            return;
        };
        t.step = Step::Idle;
        let ordered = in_request_order(&r.keys, r.objects, self.mutation);
        let (session, snapshot) = (t.session, t.snapshot);
        // The session ends a txn whose read aborted ("snapshot too old") without telling
        // us: drop its context now, or its snapshot would hold GC back (`oldest`) until
        // `txn_idle_ns` passed.
        if ordered
            .iter()
            .any(|(_, o)| matches!(o, Err(Error::Aborted(_))))
        {
            self.coord.txns.remove(&r.txn);
        }
        let m = Msg::ReadResult {
            txn: r.txn,
            req,
            result: Ok((snapshot, ordered)),
        };
        ctx.send(session, m);
    }

    /// COMMIT (Alg. 2 l.17-25): PREPARE to each written partition's replica with
    /// `ht = max(snapshot, hwt_c)`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_commit(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: Addr,
        (txn, req): (TxnId, u64),
        start: Option<Start>,
        hwt: u64,
        updates: Updates,
        cached: Vec<(Key, Op)>,
    ) {
        let deadline = self.time.clock + self.cfg.prepare_timeout_ns;
        let mut groups: BTreeMap<PartitionId, (Updates, Vec<(Key, Op)>)> = BTreeMap::new();
        for u in updates {
            groups
                .entry(self.topo.partition_of(&u.0))
                .or_default()
                .0
                .push(u);
        }
        for c in cached {
            let p = self.topo.partition_of(&c.0);
            if let Some(g) = groups.get_mut(&p) {
                g.1.push(c);
            }
        }
        let targets: BTreeMap<PartitionId, NodeId> =
            groups.keys().map(|p| (*p, self.target(*p))).collect();
        let one_phase = self.cfg.one_phase && groups.len() == 1;
        let sent = Retry::sent_at(self.time.clock);
        let snapshot = match self.txn_ctx(txn, from, start) {
            Ok(t) if matches!(t.step, Step::Idle) => {
                t.step = Step::Preparing {
                    req,
                    votes: Votes::new(groups.keys().copied(), deadline),
                    targets: targets.clone(),
                    one_phase,
                    prepares: BTreeMap::new(),
                    resend: sent,
                };
                t.snapshot
            }
            Ok(_) => return,
            Err(e) => {
                let m = Msg::CommitResult {
                    txn,
                    req,
                    result: Err(e),
                };
                return ctx.send(from, m);
            }
        };
        let ht = snapshot.max(hwt); // Alg. 2 l.19
        let mut kept = BTreeMap::new();
        for (partition, (updates, cached)) in groups {
            let m = Msg::Prepare {
                txn,
                partition,
                snapshot,
                ht,
                updates,
                cached,
                one_phase,
            };
            if !one_phase {
                kept.insert(partition, m.clone());
            }
            ctx.send(Addr::Node(targets[&partition]), m);
        }
        self.coord.keep_prepares(txn, kept);
    }

    pub(super) fn on_prepared(
        &mut self,
        ctx: &mut Ctx<Msg>,
        txn: TxnId,
        partition: PartitionId,
        result: Result<(u64, Effects), Error>,
    ) {
        let Some(t) = self.coord.txns.get_mut(&txn) else {
            return;
        };
        let Step::Preparing { votes, .. } = &mut t.step else {
            return;
        };
        match result {
            Ok(vote) => {
                if votes.record(partition, vote) {
                    self.decide(ctx, txn);
                }
            }
            Err(e) => self.abort(ctx, txn, format!("{partition:?} refused: {e}")),
        }
    }

    /// Every participant voted (Alg. 2 l.26-32): commit at the highest proposed time;
    /// the decision is durable before COMMIT or the answer leaves.
    fn decide(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        let t = self
            .coord
            .txns
            .remove(&txn)
            .expect("deciding a running txn");
        let Step::Preparing {
            req,
            votes,
            targets,
            one_phase,
            ..
        } = t.step
        else {
            unreachable!("decide runs only while preparing");
        };
        let votes = votes.all().expect("every vote in");
        let ct = votes
            .iter()
            .map(|(pt, _)| *pt)
            .max()
            .expect("a participant");
        let ops: Vec<(Key, Op)> = votes
            .into_iter()
            .flat_map(|(_, effects)| ops_at(ct, effects))
            .collect();
        let answer = Msg::CommitResult {
            txn,
            req,
            result: Ok((ct, t.snapshot, ops)),
        };
        if one_phase {
            // Its participant committed it at `ct` and voted once that was durable.
            return ctx.send(t.session, answer);
        }
        let clock = self.time.clock;
        self.coord.decisions.decide(txn, ct, targets.clone(), clock);
        let mut then: Vec<(Addr, Msg)> = targets
            .iter()
            .map(|(p, n)| {
                let m = Msg::CommitTxn {
                    txn,
                    partition: *p,
                    ct,
                };
                (Addr::Node(*n), m)
            })
            .collect();
        then.push((t.session, answer));
        let participants = targets.into_iter().collect();
        let record = Record::Decision {
            txn,
            ct,
            participants,
        };
        self.persist(ctx, record, then);
        self.after_durable(ctx, Deferred::Decision(txn));
    }

    /// Aborts a preparing txn: participants drop it, the session hears why.
    fn abort(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, reason: String) {
        let Some(t) = self.coord.txns.remove(&txn) else {
            return;
        };
        let Step::Preparing {
            req,
            targets,
            one_phase,
            ..
        } = t.step
        else {
            return;
        };
        for (partition, n) in targets {
            ctx.send(Addr::Node(n), Msg::AbortTxn { txn, partition });
        }
        // A one-phase txn may commit at its partition whatever we do here (it ignores
        // the abort once prepared); only a refusal is a sure abort.
        let result = match one_phase && reason == PREPARE_TIMED_OUT {
            true => Err(Error::Unavailable(
                "commit outcome unknown (timed out)".into(),
            )),
            false => Err(Error::Aborted(reason)),
        };
        let m = Msg::CommitResult { txn, req, result };
        ctx.send(t.session, m);
    }

    pub(super) fn on_commit_ack(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, partition: PartitionId) {
        if self.coord.decisions.ack(txn, partition) {
            self.persist(ctx, Record::Ended { txn }, Vec::new());
        }
    }

    /// A participant asks about a txn it holds prepared (presumed abort).
    pub(super) fn on_inquire(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: Addr,
        txn: TxnId,
        partition: PartitionId,
    ) {
        let running = self.coord.txns.contains_key(&txn);
        match self.coord.decisions.answer(txn, running) {
            Answer::Commit(ct) => ctx.send(from, Msg::CommitTxn { txn, partition, ct }),
            Answer::Abort => ctx.send(from, Msg::AbortTxn { txn, partition }),
            Answer::Wait => {}
        }
    }

    /// Re-sends PREPARE to the participants whose vote has not come within
    /// `inquire_after_ns`. A participant that crashed before its prepare record was durable
    /// lost the txn and never votes; without this its coordinator waited the whole
    /// `prepare_timeout_ns` (3 s) to abort, and the txn's other participants held their
    /// `VV[own]`, and so the UST of every DC, back that long. One that has the txn prepared
    /// votes again (`Node::prepare`). A re-sent PREPARE never reaches a participant after
    /// the txn's COMMIT: it leaves before the decision, on the same FIFO link.
    fn resend_prepares(&mut self, ctx: &mut Ctx<Msg>) {
        let (clock, every) = (self.time.clock, self.cfg.inquire_after_ns);
        let mut out = Vec::new();
        for t in self.coord.txns.values_mut() {
            let Step::Preparing {
                votes,
                targets,
                prepares,
                resend,
                ..
            } = &mut t.step
            else {
                continue;
            };
            if prepares.is_empty() || !resend.due(clock, every) {
                continue;
            }
            for p in votes.missing() {
                out.push((targets[&p], prepares[&p].clone()));
            }
        }
        for (node, m) in out {
            ctx.send(Addr::Node(node), m);
        }
    }

    /// Ends the txns whose read did not complete within `prepare_timeout_ns` (a slice's
    /// replica crashed, or its reply was lost): the session hears "read timed out" (an
    /// abort: it ends the txn and may retry it). Kept until `txn_idle_ns`, such a context
    /// held GC back at its snapshot (`Coord::oldest`) for 30 s: found under crashes, where
    /// a read sent to a crashing node at UST 0 pinned every DC's GC point at 0.
    fn end_stuck_reads(&mut self, ctx: &mut Ctx<Msg>) {
        let (clock, after) = (self.time.clock, self.cfg.prepare_timeout_ns);
        let stuck: Vec<TxnId> = self
            .coord
            .txns
            .iter()
            .filter(|(_, t)| matches!(t.step, Step::Reading { .. }))
            .filter(|(_, t)| clock.saturating_sub(t.last_active) >= after)
            .map(|(txn, _)| *txn)
            .collect();
        for txn in stuck {
            let t = self.coord.txns.remove(&txn).expect("listed");
            let Step::Reading { req } = t.step else {
                unreachable!("filtered on Reading");
            };
            let result = Err(Error::Aborted(READ_TIMED_OUT.into()));
            ctx.send(t.session, Msg::ReadResult { txn, req, result });
        }
    }

    /// Re-sends unacknowledged decisions, aborts txns whose votes are late, drops idle
    /// contexts (§III-C: failed clients' contexts are cleaned up after a timeout).
    pub(super) fn coord_tick(&mut self, ctx: &mut Ctx<Msg>) {
        let clock = self.time.clock;
        let every = self.cfg.inquire_after_ns;
        for (txn, partition, node, ct) in self.coord.decisions.resends(clock, every) {
            ctx.send(Addr::Node(node), Msg::CommitTxn { txn, partition, ct });
        }
        let late: Vec<TxnId> = self
            .coord
            .txns
            .iter()
            .filter(
                |(_, t)| matches!(&t.step, Step::Preparing { votes, .. } if votes.expired(clock)),
            )
            .map(|(txn, _)| *txn)
            .collect();
        for txn in late {
            self.abort(ctx, txn, PREPARE_TIMED_OUT.into());
        }
        self.end_stuck_reads(ctx);
        self.resend_prepares(ctx);
        let idle = self.cfg.txn_idle_ns;
        self.coord.txns.retain(|_, t| {
            matches!(t.step, Step::Preparing { .. }) || clock.saturating_sub(t.last_active) < idle
        });
        let txns = &self.coord.txns;
        self.coord.reads.retain(|_, r| txns.contains_key(&r.txn));
    }
}
