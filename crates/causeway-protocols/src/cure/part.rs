//! One partition replica (Cure Alg. 2): snapshot reads that wait for `pvc[d] >= svc[d]`,
//! the participant side of 2PC, and the state replication needs (`pvc`, the replication
//! log, what each sibling acknowledged). The node drives it; time comes in as arguments.

use super::msg::{ReplTxn, Updates};
use crate::kit::mvstore::Store;
use crate::kit::repl::{Received, ReplLog, Siblings};
use crate::kit::time_order::TimeOrder;
use crate::kit::twopc::Retry;
use crate::kit::txn::ReadId;
use causeway_core::clock::Extra;
use causeway_core::crdt::{ArbTs, Effect, ObjType, Op, Update};
use causeway_core::{DcId, Error, Key, NodeId, OpId, TxnId, Vc};
use std::collections::{BTreeMap, BTreeSet};

/// A txn prepared here (Alg. 2 l.9-10), with the effects it computed at its snapshot.
#[derive(Clone, Debug)]
pub struct Prepared {
    pub coord: NodeId,
    pub prep_time: u64,
    /// Paces inquiries to the coordinator (due at once after a restart).
    pub inquiry: Retry,
    pub ops: Vec<(Key, OpId, Effect)>,
    pub phase: Phase,
}

/// How a prepared txn is decided (docs/ARCHITECTURE.md, the Cure section).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Two-phase commit: a coordinator decides it (Alg. 1 l.29-36); a participant holding
    /// it too long inquires.
    Two,
    /// A single-partition txn committed by this partition alone once its record is
    /// durable: no coordinator decides it, so it is never inquired about nor aborted.
    One,
    /// A multi-partition txn prepared on its coordinator's node without a record (all
    /// its partitions there, or this node's share of a 2PC): the coordinator's decision
    /// record (`NodeCommit`) holds these effects. It may be aborted until then, and is
    /// never inquired about (the coordinator is this node, and a restart forgets the txn
    /// with it).
    Node,
}

impl Prepared {
    /// A two-phase txn given back by a `Prepare` record or a checkpoint: it inquires at
    /// once after the restart.
    pub fn recovered(coord: NodeId, prep_time: u64, ops: Vec<(Key, OpId, Effect)>) -> Prepared {
        Prepared {
            coord,
            prep_time,
            inquiry: Retry::default(),
            ops,
            phase: Phase::Two,
        }
    }
}

/// The txns prepared at a partition, with their prepare times in order: `pvc[d]` is
/// just below the oldest (Cure Alg. 2 l.20), asked for on every read and prepare, and a
/// scan of every txn in flight (a group commit's worth) for it was 3% of an INCR's
/// instructions. A prepared txn's time and phase never change (asserted on removal).
#[derive(Clone, Debug, Default)]
pub struct PreparedTxns {
    txns: crate::kit::txn::TxnMap<Prepared>,
    /// `(prep_time, txn)` of every prepared txn.
    times: TimeOrder,
    /// The same of those a coordinator decides (not [`Phase::One`]).
    two_phase_times: TimeOrder,
}

impl PreparedTxns {
    /// Adds `txn` (replacing any earlier entry of it).
    pub fn insert(&mut self, txn: TxnId, p: Prepared) {
        let (time, two_phase) = (p.prep_time, p.phase != Phase::One);
        // One lookup: an earlier entry comes back from the map's insert.
        if let Some(old) = self.txns.insert(txn, p) {
            if old.prep_time == time {
                // Still live in `times`; only the two-phase index may change.
                match (old.phase != Phase::One, two_phase) {
                    (true, false) => self.unindex_two_phase(time, txn),
                    (false, true) => self.two_phase_times.insert(time, txn),
                    _ => {}
                }
                return;
            }
            self.unindex(&txn, &old);
        }
        self.times.insert(time, txn);
        if two_phase {
            self.two_phase_times.insert(time, txn);
        }
    }

    pub fn remove(&mut self, txn: &TxnId) -> Option<Prepared> {
        let p = self.txns.remove(txn)?;
        self.unindex(txn, &p);
        Some(p)
    }

    /// Drops `p`'s entries of the time indexes; `txns` no longer holds `txn` at
    /// `p.prep_time`, so they are stale.
    fn unindex(&mut self, txn: &TxnId, p: &Prepared) {
        let txns = &self.txns;
        let live = |(t, id): &(u64, TxnId)| txns.get(id).is_some_and(|q| q.prep_time == *t);
        self.times.remove(p.prep_time, *txn, live);
        if p.phase != Phase::One {
            self.unindex_two_phase(p.prep_time, *txn);
        }
    }

    /// Drops `(time, txn)` from the two-phase index; `txns` no longer holds `txn` as a
    /// two-phase txn prepared at `time`.
    fn unindex_two_phase(&mut self, time: u64, txn: TxnId) {
        let txns = &self.txns;
        let live = |(t, id): &(u64, TxnId)| {
            txns.get(id)
                .is_some_and(|q| q.prep_time == *t && q.phase != Phase::One)
        };
        self.two_phase_times.remove(time, txn, live);
    }

    pub fn get(&self, txn: &TxnId) -> Option<&Prepared> {
        self.txns.get(txn)
    }

    pub fn contains_key(&self, txn: &TxnId) -> bool {
        self.txns.contains_key(txn)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.txns.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&TxnId, &Prepared)> {
        self.txns.iter()
    }

    /// Every prepared txn in txn id order (a checkpoint's list: the map's own order is
    /// its hasher's).
    pub fn in_txn_order(&self) -> Vec<(&TxnId, &Prepared)> {
        let mut txns: Vec<_> = self.txns.iter().collect();
        txns.sort_unstable_by_key(|(txn, _)| **txn);
        txns
    }

    /// For the inquiries' pacing and the effects set after the record: a caller must not
    /// change `prep_time` or `phase` (the index would lose the txn; `remove` asserts it).
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&TxnId, &mut Prepared)> {
        self.txns.iter_mut()
    }

    /// See [`PreparedTxns::iter_mut`].
    pub fn get_mut(&mut self, txn: &TxnId) -> Option<&mut Prepared> {
        self.txns.get_mut(txn)
    }

    /// The oldest prepare time.
    pub fn oldest(&self) -> Option<u64> {
        self.times.oldest()
    }

    /// The oldest prepare time of a txn a coordinator decides.
    pub fn oldest_two_phase(&self) -> Option<u64> {
        self.two_phase_times.oldest()
    }
}

/// A request parked until `pvc[d] >= svc[d]` (reads) or also `svc[d] <= Clock` (prepares).
#[derive(Clone, Debug)]
pub enum Waiting {
    Read {
        coord: NodeId,
        rid: ReadId,
        svc: Vc,
        keys: Vec<(Key, ObjType)>,
        arrived: u64,
        /// The read of a direct read-then-commit (`direct.rs`), coordinated on this
        /// node, whose commit is one phase here: served in place, its commit prepared
        /// (or, read-only, answered) in the same step (`Node::serve_waiting`).
        direct: Option<Direct>,
    },
    Prepare {
        coord: NodeId,
        txn: TxnId,
        svc: Vc,
        updates: Updates,
        phase: Phase,
    },
    /// A strong txn's effects at its snapshot (UniStore, strong.rs): waits like a read.
    Effects {
        coord: NodeId,
        txn: TxnId,
        svc: Vc,
        updates: Updates,
    },
}

/// A read served in place for the direct read-then-commit `txn` (`direct.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Direct {
    pub txn: TxnId,
    /// Whether its commit writes, prepared in the step that serves the read: then the
    /// read need not wait for one-phase txns (`Part::pvc_two_phase`). A read-only one
    /// (a GET) is answered at once, with no record after it, and waits as any read
    /// (Cure Alg. 2 l.2).
    pub writes: bool,
}

/// What a partition's waiting requests are judged against at one moment
/// (`Node::serve_waiting`).
#[derive(Clone, Copy, Debug)]
pub struct Gate {
    /// `pvc[d]` (Cure Alg. 2 l.19-21).
    pub pvc_d: u64,
    /// `pvc[d]` as a read-then-commit served in place sees it (`Part::pvc_two_phase`).
    pub pvc_direct: u64,
    /// The strong entry this partition knows delivered (UniStore).
    pub known_strong: u64,
}

impl Gate {
    /// Whether `w` may be served now, at clock `clock` of DC `d`.
    pub fn admits(&self, w: &Waiting, d: usize, clock: u64, m: super::config::Mutation) -> bool {
        let s = w.svc_local(d);
        // UniStore Alg. 1 l.21: the snapshot's strong txns are delivered here.
        let strong = self.known_strong >= w.svc_strong();
        let stable = self.pvc_d >= s && strong;
        match w {
            // Cure Alg. 2 l.2: wait until pvc[d] >= svc[d].
            // Read-then-commit served in place, its prepare in this step: pvc_direct <=
            // Clock, so its prepare time (issued above Clock) exceeds svc[d] as Alg. 2
            // l.8 requires.
            Waiting::Read {
                direct: Some(Direct { writes: true, .. }),
                ..
            } => self.pvc_direct >= s && strong,
            Waiting::Read { .. } => m.no_read_wait || stable,
            // Cure Alg. 2 l.7: wait until svc[d] <= Clock; the prepare time is then
            // issued above Clock (l.8, `Time::issue`), so it exceeds svc[d]. Effects
            // generated from the observed state (a set remove, an mvreg assignment) need
            // the snapshot stable too, like a read; the others do not wait.
            Waiting::Prepare { updates, .. } => s <= clock && (stable || !reads_snapshot(updates)),
            Waiting::Effects { .. } => stable,
        }
    }
}

use crate::kit::txn::reads_state;

/// Whether some of `updates` are generated from the observed state.
fn reads_snapshot(updates: &super::msg::Updates) -> bool {
    updates.iter().any(|(_, u, _)| reads_state(u))
}

impl Waiting {
    pub fn svc_local(&self, d: usize) -> u64 {
        match self {
            Waiting::Read { svc, .. }
            | Waiting::Prepare { svc, .. }
            | Waiting::Effects { svc, .. } => svc.get(d),
        }
    }

    /// The snapshot's strong entry (0 outside UniStore).
    pub fn svc_strong(&self) -> u64 {
        match self {
            Waiting::Read { svc, .. }
            | Waiting::Prepare { svc, .. }
            | Waiting::Effects { svc, .. } => svc.get_extra(Extra::Strong),
        }
    }
}

/// One partition of this node.
/// One partition's transfers, both ways (`kit::transfer`).
pub type Transfers = crate::kit::transfer::Transfers<Vc>;

#[derive(Debug)]
pub struct Part {
    pub store: Store<Vc>,
    pub prepared: PreparedTxns,
    pub waiting: Vec<Waiting>,
    /// Remote entries: every txn of that origin with `ct <= pvc[k]` is durable here.
    /// The local entry is the last value computed by [`Part::pvc_local`].
    pub pvc: Vc,
    /// Per origin: the stream accepted so far (durable or being persisted).
    pub received: Received,
    /// Committed txns per origin by `(ct[origin], txn)`, kept until every live sibling
    /// acknowledged them (own ones to stream, others' to relay).
    pub log: ReplLog<ReplTxn>,
    pub sibs: Siblings,
    /// Commit vectors of remote txns received but not yet covered by the GSS.
    pub unseen: Vec<(DcId, Vc)>,
    /// UniStore: remote txns stable here but not yet uniform, with when they became
    /// stable (for the extra-delay samples of Fig. 6), at most `UNSEEN_MAX`.
    pub stable_unseen: Vec<(DcId, Vc, u64)>,
    /// State transfers to and from siblings (`transfer.rs`).
    pub transfers: Transfers,
}

/// Most remote txns tracked for the visibility-latency measurement.
pub const UNSEEN_MAX: usize = 4096;

impl Part {
    /// A partition of DC `d` of `dcs`; `strong`: its `pvc` has UniStore's strong entry
    /// (`knownVec[strong]`).
    pub fn new(dcs: usize, d: usize, strong: bool) -> Part {
        let me = DcId(d as u16);
        let all = (0..dcs as u16).map(DcId);
        let mut pvc = Vc::zero(dcs);
        if strong {
            pvc.set_extra(Extra::Strong, 0);
        }
        Part {
            store: Store::default(),
            prepared: PreparedTxns::default(),
            waiting: Vec::new(),
            pvc,
            received: Received::new(me, dcs),
            log: ReplLog::default(),
            sibs: Siblings::new(me, all),
            unseen: Vec::new(),
            stable_unseen: Vec::new(),
            transfers: Default::default(),
        }
    }

    /// `pvc[d]` now (Cure Alg. 2 l.19-21): just below the oldest prepared txn, else the
    /// clock, and never above the durable lease (so a restart never reissues it).
    pub fn pvc_local(&mut self, d: usize, clock: u64, lease: u64, ignore_prepared: bool) -> u64 {
        let mut v = clock.min(lease);
        if !ignore_prepared {
            if let Some(min) = self.prepared.oldest() {
                v = v.min(min - 1); // Cure Alg. 2 l.20
            }
        }
        self.pvc.set(d, v);
        v
    }

    /// What a waiting request is judged against now, with `pvc[d]` brought up to date
    /// (Alg. 2 l.19-21).
    pub fn gate(&mut self, d: usize, clock: u64, lease: u64, m: super::config::Mutation) -> Gate {
        Gate {
            pvc_d: self.pvc_local(d, clock, lease, m.pvc_ignores_prepared),
            pvc_direct: match m.read_commit_no_wait {
                true => clock.min(lease),
                false => self.pvc_two_phase(clock, lease),
            },
            known_strong: self.pvc.get_extra(Extra::Strong),
        }
    }

    /// `pvc[d]` as if no one-phase txn were prepared: just below the oldest two-phase
    /// one, else the clock (and the lease). A read that commits one phase here in the same
    /// step may be served at it (docs/ARCHITECTURE.md, "Read-then-commit"): a one-phase
    /// txn still being persisted is visible nowhere, so nothing read can depend on it.
    pub fn pvc_two_phase(&self, clock: u64, lease: u64) -> u64 {
        match self.prepared.oldest_two_phase() {
            Some(min) => clock.min(lease).min(min - 1),
            None => clock.min(lease),
        }
    }

    /// Materializes `keys` at `svc` (Cure Alg. 2 l.3-4).
    pub fn read(
        &self,
        svc: &Vc,
        keys: Vec<(Key, ObjType)>,
    ) -> Vec<(Key, Result<causeway_core::Object, Error>)> {
        keys.into_iter()
            .map(|(k, t)| {
                let obj = self.store.read_state(&k, svc, t);
                (k, obj)
            })
            .collect()
    }

    /// The effects of a txn's updates, each prepared against the snapshot at `svc` plus the
    /// txn's earlier updates of the key: exactly what the coordinator's overlay showed.
    /// Takes the updates: their keys and assigned values move into the effects (a SET's key
    /// and value were copied once more here, two allocations of about thirty per SET).
    pub fn effects(&self, svc: &Vc, updates: Updates) -> Result<Vec<(Key, OpId, Effect)>, Error> {
        if updates.len() == 1 {
            let (key, update, id) = updates.into_iter().next().expect("one update");
            return Ok(vec![self.effect_of_one(svc, key, update, id)?]);
        }
        let mut objs: BTreeMap<Key, causeway_core::Object> = BTreeMap::new();
        let mut out = Vec::with_capacity(updates.len());
        let mut blind: BTreeSet<&Key> = BTreeSet::new();
        // Keys whose assignments are not blind: a register that counts, or one this txn
        // increments (the increment must observe the txn's own assignment).
        let counted: BTreeSet<&Key> = updates
            .iter()
            .filter(|(k, u, _)| matches!(u, Update::RegisterIncrement(_)) || self.store.counts(k))
            .map(|(k, _, _)| k)
            .collect();
        // Each key's last update in the txn (a later entry overwrites an earlier one).
        let last: BTreeMap<&Key, usize> = updates
            .iter()
            .enumerate()
            .map(|(i, (key, _, _))| (key, i))
            .collect();
        for (i, (key, update, id)) in updates.iter().enumerate() {
            // An assignment's effect is the assignment whatever it observes: only the
            // type is checked, and no object is built (the common SET). A later update
            // of the key in this txn builds it from the store as a register: an earlier
            // assignment changes nothing a later one needs, and any other update is
            // refused by type, as it was against the assigned object.
            let seen = objs.contains_key(key) || counted.contains(key);
            if let (Update::Assign(v), false) = (update, seen) {
                self.store.check(key, svc, ObjType::Lww)?;
                blind.insert(key);
                out.push((key.clone(), *id, Effect::Assign(v.clone())));
                continue;
            }
            if !objs.contains_key(key) {
                let read_as = match blind.contains(key) {
                    true => ObjType::Lww,
                    false => update.obj_type(),
                };
                let o = self.store.read_state(key, svc, read_as)?;
                objs.insert(key.clone(), o);
            }
            let obj = objs.get_mut(key).expect("inserted above");
            let effect = obj.prepare(update)?;
            // Only a later update of the key in this txn looks at the copy: applying the
            // effect for none (the common single-update txn) was a third of the cost of a
            // SADD's add, which replaces every tag it observed. (`last`, not a scan of the
            // rest: a txn holds up to `TXN_UPDATES_MAX` updates.)
            if last.get(key).is_some_and(|&j| j > i) {
                obj.apply_effect(&Op {
                    id: *id,
                    ts: ArbTs::PENDING,
                    effect: effect.clone(),
                });
            }
            out.push((key.clone(), *id, effect));
        }
        Ok(out)
    }

    /// The effect of a txn's only update: an assignment (SET) has its type checked and is its
    /// own effect, one that reads its object (INCR, SADD) is prepared against it; nothing is
    /// kept for later updates (the general path's map of objects and set of assigned keys
    /// were a sixth of an INCR's prepare, and half of a SET's effects: 739 -> 393
    /// instructions).
    fn effect_of_one(
        &self,
        svc: &Vc,
        key: Key,
        update: Update,
        id: OpId,
    ) -> Result<(Key, OpId, Effect), Error> {
        if matches!(update, Update::Assign(_)) && !self.store.counts(&key) {
            self.store.check(&key, svc, ObjType::Lww)?;
            let Update::Assign(v) = update else {
                unreachable!("matched above")
            };
            return Ok((key, id, Effect::Assign(v)));
        }
        let obj = self.store.read_state(&key, svc, update.obj_type())?;
        let effect = obj.prepare(&update)?;
        Ok((key, id, effect))
    }

    /// Commits a prepared txn at `ct` (Cure Alg. 2 l.13-16): a new version of each key and
    /// an entry of the replication log. Returns false if it was not prepared here.
    /// `broken` is the `commit-time-min` mutation, which violates the invariant on purpose.
    pub fn commit(&mut self, d: usize, txn: TxnId, ct: &Vc, broken: bool) -> bool {
        let Some(p) = self.prepared.remove(&txn) else {
            return false;
        };
        assert!(
            broken || ct.get(d) >= p.prep_time,
            "commit time below a prepare time"
        );
        let ts = super::wire::commit_ts(ct);
        let ops: Vec<(Key, Op)> = p
            .ops
            .into_iter()
            .map(|(k, id, effect)| (k, Op { id, ts, effect }))
            .collect();
        self.add_committed(
            DcId(d as u16),
            ReplTxn {
                txn,
                ct: ct.clone(),
                ops: ops.into(),
            },
        );
        true
    }

    /// Adds a committed txn of `origin` to the store and the replication log.
    pub fn add_committed(&mut self, origin: DcId, t: ReplTxn) {
        self.store.insert(t.txn, &t.ct, &t.ops);
        self.log.add(origin, t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_core::SessionId;

    fn txn(seq: u64) -> TxnId {
        TxnId {
            session: SessionId(1),
            seq,
        }
    }

    fn op(txn: TxnId, index: u32) -> OpId {
        OpId { txn, index }
    }

    fn at(ts: u64) -> Vc {
        let mut vc = Vc::zero(1);
        vc.set(0, ts);
        vc
    }

    fn prepared_at(prep_time: u64, phase: Phase) -> Prepared {
        Prepared {
            phase,
            ..Prepared::recovered(NodeId(0), prep_time, Vec::new())
        }
    }

    /// The oldest prepare times follow every insertion and removal, the two-phase one
    /// skipping one-phase txns, as a scan of every prepared txn finds them.
    #[test]
    fn prepared_txns_know_their_oldest_prepare_times() {
        let mut p = PreparedTxns::default();
        assert_eq!((p.oldest(), p.oldest_two_phase()), (None, None));
        p.insert(txn(1), prepared_at(30, Phase::Two));
        p.insert(txn(2), prepared_at(10, Phase::One));
        p.insert(txn(3), prepared_at(20, Phase::Node));
        p.insert(txn(4), prepared_at(10, Phase::Two));
        assert_eq!((p.oldest(), p.oldest_two_phase()), (Some(10), Some(10)));
        assert_eq!(p.remove(&txn(4)).map(|t| t.prep_time), Some(10));
        assert_eq!((p.oldest(), p.oldest_two_phase()), (Some(10), Some(20)));
        // A txn prepared again replaces its entry, time and all.
        p.insert(txn(2), prepared_at(40, Phase::Two));
        assert_eq!((p.oldest(), p.oldest_two_phase()), (Some(20), Some(20)));
        assert!(p.remove(&txn(5)).is_none());
        p.remove(&txn(3));
        assert_eq!((p.oldest(), p.oldest_two_phase()), (Some(30), Some(30)));
        // Prepared again at the same time in another phase: only the two-phase index
        // changes, either way.
        p.insert(txn(1), prepared_at(30, Phase::One));
        assert_eq!((p.oldest(), p.oldest_two_phase()), (Some(30), Some(40)));
        p.insert(txn(1), prepared_at(30, Phase::Node));
        assert_eq!((p.oldest(), p.oldest_two_phase()), (Some(30), Some(30)));
        p.remove(&txn(1));
        p.remove(&txn(2));
        assert_eq!((p.oldest(), p.oldest_two_phase(), p.len()), (None, None, 0));
    }

    #[test]
    #[should_panic(expected = "prepare time or phase changed")]
    fn prepared_txns_refuse_a_prepare_time_changed_in_place() {
        let mut p = PreparedTxns::default();
        p.insert(txn(1), prepared_at(30, Phase::Two));
        p.get_mut(&txn(1)).expect("inserted").prep_time = 31;
        p.remove(&txn(1));
    }

    /// A part holding a counter at `key`, committed at time 10.
    fn part_with_counter(key: &Key) -> Part {
        let mut part = Part::new(1, 0, false);
        let ops = vec![(
            key.clone(),
            Op {
                id: op(txn(1), 0),
                ts: ArbTs {
                    primary: 10,
                    secondary: 10,
                },
                effect: Effect::Increment(5),
            },
        )];
        let t = ReplTxn {
            txn: txn(1),
            ct: at(10),
            ops: ops.into(),
        };
        part.add_committed(DcId(0), t);
        part
    }

    #[test]
    fn an_assignment_is_its_effect_and_still_checks_the_type() {
        let (counter, fresh) = (Key(b"c".to_vec()), Key(b"f".to_vec()));
        let part = part_with_counter(&counter);
        let set = |k: &Key, i| (k.clone(), Update::Assign(b"v".to_vec()), op(txn(2), i));
        let effects = part
            .effects(&at(20), vec![set(&fresh, 0)])
            .expect("a new key");
        assert_eq!(effects.len(), 1);
        assert!(matches!(&effects[0].2, Effect::Assign(v) if v == b"v"));
        // The counter is visible at 20, not at 5 (before its commit).
        let wrong = part.effects(&at(20), vec![set(&counter, 0)]);
        assert!(matches!(wrong, Err(Error::WrongType { .. })), "{wrong:?}");
        assert!(part.effects(&at(5), vec![set(&counter, 0)]).is_ok());
    }

    #[test]
    fn an_update_after_an_assignment_in_one_txn_sees_a_register() {
        let fresh = Key(b"f".to_vec());
        let part = Part::new(1, 0, false);
        let updates = vec![
            (fresh.clone(), Update::Assign(b"v".to_vec()), op(txn(2), 0)),
            (fresh.clone(), Update::Increment(1), op(txn(2), 1)),
        ];
        let refused = part.effects(&at(20), updates);
        assert!(
            matches!(refused, Err(Error::WrongType { .. })),
            "{refused:?}"
        );
        let twice = vec![
            (fresh.clone(), Update::Assign(b"a".to_vec()), op(txn(2), 0)),
            (fresh.clone(), Update::Assign(b"b".to_vec()), op(txn(2), 1)),
        ];
        let effects = part.effects(&at(20), twice).expect("two assignments");
        assert!(matches!(&effects[1].2, Effect::Assign(v) if v == b"b"));
    }

    /// The copy is updated only for a later update of the same key, and then it is: a
    /// remove after an add in one txn removes the add's tag, a re-add replaces it, and an
    /// add to another key between them changes neither.
    #[test]
    fn a_later_update_of_a_key_in_one_txn_sees_the_earlier_effects() {
        let (s, other) = (Key(b"s".to_vec()), Key(b"o".to_vec()));
        let part = Part::new(1, 0, false);
        let add = |k: &Key, i| (k.clone(), Update::Add(b"x".to_vec()), op(txn(2), i));
        let remove = (s.clone(), Update::Remove(b"x".to_vec()), op(txn(2), 2));
        let updates = vec![add(&s, 0), add(&other, 1), remove, add(&s, 3)];
        let effects = part.effects(&at(20), updates).expect("set updates");
        let tags = |e: &Effect| match e {
            Effect::Add { replaces, .. } => replaces.clone(),
            Effect::Remove { tags, .. } => tags.clone(),
            other => panic!("{other:?}"),
        };
        assert!(tags(&effects[0].2).is_empty(), "nothing to replace yet");
        assert!(
            tags(&effects[1].2).is_empty(),
            "another key's add saw nothing"
        );
        assert_eq!(
            tags(&effects[2].2),
            vec![op(txn(2), 0)],
            "remove sees the add"
        );
        assert!(tags(&effects[3].2).is_empty(), "the remove left no tag");
        let readd = vec![add(&s, 0), add(&s, 1)];
        let effects = part.effects(&at(20), readd).expect("re-add");
        assert_eq!(tags(&effects[1].2), vec![op(txn(2), 0)], "re-add replaces");
    }
}
