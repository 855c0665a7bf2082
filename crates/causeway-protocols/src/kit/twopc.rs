//! Two-phase commit bookkeeping with presumed abort, shared by every protocol that commits
//! across partitions (Cure inside a DC, UniStore's strong certification, PaRiS across
//! replicas). The coordinator collects [`Votes`] until all are in or a deadline passes, and
//! keeps each commit decision in [`Decisions`] from the moment it is decided until every
//! participant acknowledged it; the decision record is persisted before any COMMIT leaves,
//! so a coordinator with no record of a txn it is not running answers an inquiry with
//! abort (presumed abort). [`Retry`] paces re-sends and inquiries. The protocol owns the
//! messages and records; this module owns the state and its rules.

use causeway_core::{Nanos, NodeId, PartitionId, TxnId};
use std::collections::BTreeMap;

/// When something was last (re)sent; `None` = never, so it is due at once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Retry {
    last: Option<Nanos>,
}

impl Retry {
    /// Sent at `clock` (not due again for a period).
    pub fn sent_at(clock: Nanos) -> Retry {
        Retry { last: Some(clock) }
    }

    /// Whether a (re)send is due at `clock` with period `every`; if so, marks it sent.
    pub fn due(&mut self, clock: Nanos, every: Nanos) -> bool {
        let due = self.last.is_none_or(|t| clock.saturating_sub(t) >= every);
        if due {
            self.last = Some(clock);
        }
        due
    }
}

/// A coordinator's votes for one txn: one per participant, `None` until it arrives.
/// Kept as a vector sorted by partition: a txn has few participants (one for every
/// single-key command), and a B-tree built per commit was two allocations and a sort.
#[derive(Clone, Debug)]
pub struct Votes<V> {
    votes: Vec<(PartitionId, Option<V>)>,
    /// Past this clock reading with votes missing, the txn aborts.
    pub deadline: Nanos,
}

impl<V: Clone> Votes<V> {
    pub fn new(participants: impl IntoIterator<Item = PartitionId>, deadline: Nanos) -> Self {
        let mut votes: Vec<_> = participants.into_iter().map(|p| (p, None)).collect();
        votes.sort_unstable_by_key(|(p, _)| *p);
        votes.dedup_by_key(|(p, _)| *p);
        assert!(!votes.is_empty(), "2PC needs at least one participant");
        Votes { votes, deadline }
    }

    /// Records `p`'s yes vote (a non-participant's is ignored); true once all are in.
    pub fn record(&mut self, p: PartitionId, vote: V) -> bool {
        if let Ok(i) = self.votes.binary_search_by_key(&p, |(q, _)| *q) {
            self.votes[i].1 = Some(vote);
        }
        self.complete()
    }

    pub fn complete(&self) -> bool {
        self.votes.iter().all(|(_, v)| v.is_some())
    }

    /// Every vote, once all are in.
    pub fn all(&self) -> Option<Vec<V>> {
        self.votes.iter().map(|(_, v)| v.clone()).collect()
    }

    pub fn participants(&self) -> impl Iterator<Item = PartitionId> + '_ {
        self.votes.iter().map(|(p, _)| *p)
    }

    pub fn expired(&self, clock: Nanos) -> bool {
        clock > self.deadline && !self.complete()
    }

    /// The participants whose vote has not arrived.
    pub fn missing(&self) -> impl Iterator<Item = PartitionId> + '_ {
        self.votes
            .iter()
            .filter(|(_, v)| v.is_none())
            .map(|(p, _)| *p)
    }
}

/// A commit decision not yet acknowledged by every participant.
#[derive(Clone, Debug)]
pub struct Decision<D> {
    pub outcome: D,
    /// Participants still to acknowledge, with the node hosting each.
    pub participants: BTreeMap<PartitionId, NodeId>,
    /// The decision record is durable (COMMIT may be (re)sent).
    pub durable: bool,
    resend: Retry,
}

/// What a coordinator answers a participant asking about a txn it holds prepared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer<D> {
    /// Decided and durable: commit with this outcome.
    Commit(D),
    /// Still running, or decided but not yet durable: say nothing, it will hear.
    Wait,
    /// No decision and not running: presumed abort.
    Abort,
}

#[derive(Clone, Debug)]
pub struct Decisions<D> {
    map: BTreeMap<TxnId, Decision<D>>,
}

impl<D> Default for Decisions<D> {
    fn default() -> Self {
        Decisions {
            map: BTreeMap::new(),
        }
    }
}

impl<D: Clone> Decisions<D> {
    /// A fresh decision whose record is being persisted; COMMIT leaves with it at `clock`.
    pub fn decide(
        &mut self,
        txn: TxnId,
        outcome: D,
        participants: BTreeMap<PartitionId, NodeId>,
        clock: Nanos,
    ) {
        let d = Decision {
            outcome,
            participants,
            durable: false,
            resend: Retry::sent_at(clock),
        };
        assert!(self.map.insert(txn, d).is_none(), "{txn:?} decided twice");
    }

    /// Every decision kept: txn, outcome, participants still to acknowledge, durable.
    pub fn iter(&self) -> impl Iterator<Item = (TxnId, &D, &BTreeMap<PartitionId, NodeId>, bool)> {
        self.map
            .iter()
            .map(|(t, d)| (*t, &d.outcome, &d.participants, d.durable))
    }

    /// A decision replayed from disk: durable, and COMMIT is re-sent at once.
    pub fn recovered(
        &mut self,
        txn: TxnId,
        outcome: D,
        participants: BTreeMap<PartitionId, NodeId>,
    ) {
        let d = Decision {
            outcome,
            participants,
            durable: true,
            resend: Retry::default(),
        };
        self.map.insert(txn, d);
    }

    pub fn durable(&mut self, txn: TxnId) {
        if let Some(d) = self.map.get_mut(&txn) {
            d.durable = true;
        }
    }

    /// `p` acknowledged; true when that was the last one (the decision is forgotten).
    pub fn ack(&mut self, txn: TxnId, p: PartitionId) -> bool {
        let Some(d) = self.map.get_mut(&txn) else {
            return false;
        };
        d.participants.remove(&p);
        if !d.participants.is_empty() {
            return false;
        }
        self.map.remove(&txn);
        true
    }

    /// The answer to an inquiry about `txn`; `running` says whether the coordinator still
    /// runs it (undecided).
    pub fn answer(&self, txn: TxnId, running: bool) -> Answer<D> {
        match self.map.get(&txn) {
            Some(d) if d.durable => Answer::Commit(d.outcome.clone()),
            Some(_) => Answer::Wait,
            None if running => Answer::Wait,
            None => Answer::Abort,
        }
    }

    /// COMMITs to re-send at `clock` (durable decisions unacknowledged for `every`):
    /// (txn, partition, node, outcome).
    pub fn resends(&mut self, clock: Nanos, every: Nanos) -> Vec<(TxnId, PartitionId, NodeId, D)> {
        let mut out = Vec::new();
        for (txn, d) in self.map.iter_mut() {
            if d.durable && d.resend.due(clock, every) {
                let each = d
                    .participants
                    .iter()
                    .map(|(p, n)| (*txn, *p, *n, d.outcome.clone()));
                out.extend(each);
            }
        }
        out
    }

    /// Forgets a decision every participant acknowledged before a restart.
    pub fn forget(&mut self, txn: TxnId) {
        self.map.remove(&txn);
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Every decision still has a participant to hear from.
    pub fn check_invariants(&self) -> Result<(), String> {
        match self.map.iter().find(|(_, d)| d.participants.is_empty()) {
            Some((txn, _)) => Err(format!("decision of {txn:?} kept with no participant left")),
            None => Ok(()),
        }
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

    fn parts() -> BTreeMap<PartitionId, NodeId> {
        [(PartitionId(0), NodeId(0)), (PartitionId(1), NodeId(1))].into()
    }

    #[test]
    fn votes_complete_only_with_every_participant() {
        let mut v = Votes::new([PartitionId(0), PartitionId(1)], 100);
        assert!(!v.record(PartitionId(0), 5));
        assert!(!v.record(PartitionId(7), 9), "not a participant");
        assert!(v.expired(101));
        assert!(v.record(PartitionId(1), 8));
        assert_eq!(v.all(), Some(vec![5, 8]));
        assert!(!v.expired(1_000), "complete votes never expire");
    }

    #[test]
    fn votes_keep_each_participant_once_in_partition_order() {
        let (p0, p1, p2) = (PartitionId(0), PartitionId(1), PartitionId(2));
        let mut v = Votes::new([p2, p0, p2, p1], 100);
        assert_eq!(v.participants().collect::<Vec<_>>(), vec![p0, p1, p2]);
        assert!(!v.record(p2, 20));
        assert_eq!(v.missing().collect::<Vec<_>>(), vec![p0, p1]);
        assert!(!v.record(p0, 0));
        assert!(v.record(p1, 10), "three participants, three votes");
        assert_eq!(v.all(), Some(vec![0, 10, 20]), "in partition order");
    }

    #[test]
    fn presumed_abort_answers() {
        let mut d: Decisions<u64> = Decisions::default();
        assert_eq!(d.answer(txn(1), true), Answer::Wait, "still running");
        assert_eq!(d.answer(txn(1), false), Answer::Abort, "no record: abort");
        d.decide(txn(1), 42, parts(), 0);
        assert_eq!(d.answer(txn(1), false), Answer::Wait, "not durable yet");
        d.durable(txn(1));
        assert_eq!(d.answer(txn(1), false), Answer::Commit(42));
    }

    #[test]
    fn commits_are_resent_until_every_participant_acks() {
        let mut d: Decisions<u64> = Decisions::default();
        d.decide(txn(1), 7, parts(), 1_000);
        d.durable(txn(1));
        assert!(d.resends(1_500, 1_000).is_empty(), "sent at 1000");
        assert_eq!(d.resends(2_000, 1_000).len(), 2);
        assert!(!d.ack(txn(1), PartitionId(0)));
        let again = d.resends(3_000, 1_000);
        assert_eq!(again, vec![(txn(1), PartitionId(1), NodeId(1), 7)]);
        assert!(d.ack(txn(1), PartitionId(1)), "last ack ends it");
        assert!(d.is_empty());
        d.check_invariants().unwrap();
    }

    #[test]
    fn recovered_decisions_are_resent_at_once() {
        let mut d: Decisions<u64> = Decisions::default();
        d.recovered(txn(2), 9, parts());
        assert_eq!(d.resends(0, 1_000_000).len(), 2);
    }

    #[test]
    fn retry_is_due_at_once_then_every_period() {
        let mut r = Retry::default();
        assert!(r.due(10, 100));
        assert!(!r.due(50, 100));
        assert!(r.due(110, 100));
    }
}
