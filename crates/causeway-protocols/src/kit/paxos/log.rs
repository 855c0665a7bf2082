//! An acceptor's durable state: the promised ballot, the accepted values of undecided
//! slots, and the decided log from the truncation point to the decided prefix. The
//! machine changes it and writes a [`Record`] for each change; [`Log::apply`] replays the
//! records, so recovery rebuilds exactly what was durable.

use super::types::{Ballot, Checkpoint, Entry, Record, Slot};
use std::collections::{BTreeMap, VecDeque};

#[derive(Clone, Debug)]
pub(super) struct Log<V> {
    pub promised: Ballot,
    /// Undecided slots (at or above the decided prefix): the ballot and value accepted.
    pub accepted: BTreeMap<Slot, (Ballot, Entry<V>)>,
    /// Decided values of the slots `truncated_below..decided_upto()`.
    decided: VecDeque<Entry<V>>,
    truncated_below: Slot,
}

impl<V: Clone> Log<V> {
    pub fn new() -> Log<V> {
        Log {
            promised: Ballot::ZERO,
            accepted: BTreeMap::new(),
            decided: VecDeque::new(),
            truncated_below: 0,
        }
    }

    /// Every slot below this is decided (the decided prefix).
    pub fn decided_upto(&self) -> Slot {
        self.truncated_below + self.decided.len() as u64
    }

    pub fn truncated_below(&self) -> Slot {
        self.truncated_below
    }

    /// The decided value of `slot`, if decided and not truncated.
    pub fn decided(&self, slot: Slot) -> Option<&Entry<V>> {
        let i = slot.checked_sub(self.truncated_below)?;
        self.decided.get(usize::try_from(i).ok()?)
    }

    /// Decides the next slot (`decided_upto()`) with `value`.
    pub fn push_decided(&mut self, value: Entry<V>) {
        let slot = self.decided_upto();
        self.accepted.remove(&slot);
        self.decided.push_back(value);
    }

    /// Accepts `value` for `slot` in `ballot` (promising it too).
    pub fn accept(&mut self, ballot: Ballot, slot: Slot, value: Entry<V>) {
        assert!(slot >= self.decided_upto(), "accepting decided slot {slot}");
        self.promised = self.promised.max(ballot);
        self.accepted.insert(slot, (ballot, value));
    }

    /// Forgets every slot below `below`; past the decided prefix (a snapshot installed),
    /// the prefix jumps to `below`.
    pub fn truncate(&mut self, below: Slot) {
        if below <= self.truncated_below {
            return;
        }
        if below >= self.decided_upto() {
            self.decided.clear();
        } else {
            self.decided
                .drain(..(below - self.truncated_below) as usize);
        }
        self.truncated_below = below;
        self.accepted = self.accepted.split_off(&below);
    }

    /// Replays one record.
    pub fn apply(&mut self, record: &Record<V>) -> Result<(), String> {
        match record {
            Record::Promised { ballot } => self.promised = self.promised.max(*ballot),
            Record::Accepted { ballot, entries } => {
                self.promised = self.promised.max(*ballot);
                let d = self.decided_upto();
                for (slot, value) in entries.iter().filter(|(s, _)| *s >= d) {
                    self.accepted.insert(*slot, (*ballot, value.clone()));
                }
            }
            Record::Decided { upto, learned } => self.apply_decided(*upto, learned)?,
            Record::Truncated { below } => self.truncate(*below),
            Record::Checkpoint(c) => *self = Log::from_checkpoint(c),
        }
        Ok(())
    }

    fn apply_decided(&mut self, upto: Slot, learned: &[(Slot, Entry<V>)]) -> Result<(), String> {
        let learned: BTreeMap<Slot, &Entry<V>> = learned.iter().map(|(s, v)| (*s, v)).collect();
        while self.decided_upto() < upto {
            let slot = self.decided_upto();
            let value = match learned.get(&slot) {
                Some(v) => (*v).clone(),
                None => match self.accepted.get(&slot) {
                    Some((_, v)) => v.clone(),
                    None => return Err(format!("slot {slot} decided with no value on record")),
                },
            };
            self.push_decided(value);
        }
        Ok(())
    }

    pub fn checkpoint(&self) -> Checkpoint<V> {
        Checkpoint {
            promised: self.promised,
            truncated_below: self.truncated_below,
            decided: self.decided.iter().cloned().collect(),
            accepted: (self.accepted.iter())
                .map(|(s, (b, v))| (*s, *b, v.clone()))
                .collect(),
        }
    }

    fn from_checkpoint(c: &Checkpoint<V>) -> Log<V> {
        Log {
            promised: c.promised,
            accepted: (c.accepted.iter())
                .map(|(s, b, v)| (*s, (*b, v.clone())))
                .collect(),
            decided: c.decided.iter().cloned().collect(),
            truncated_below: c.truncated_below,
        }
    }

    /// Promised >= every accepted ballot; accepted slots are undecided and within
    /// `window` of the decided prefix.
    pub fn check(&self, window: u64) -> Result<(), String> {
        if let Some((s, (b, _))) = self.accepted.iter().find(|(_, (b, _))| *b > self.promised) {
            return Err(format!(
                "slot {s} accepted in {b:?} above promised {:?}",
                self.promised
            ));
        }
        let upto = self.decided_upto();
        match (
            self.accepted.keys().next(),
            self.accepted.keys().next_back(),
        ) {
            (Some(lo), _) if *lo < upto => Err(format!("slot {lo} accepted below prefix {upto}")),
            (_, Some(hi)) if *hi >= upto + window => Err(format!(
                "slot {hi} accepted beyond prefix {upto} + window {window}"
            )),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(round: u64, member: usize) -> Ballot {
        Ballot { round, member }
    }

    #[test]
    fn replay_rebuilds_promise_accepted_and_decided_prefix() {
        let records = vec![
            Record::Promised { ballot: b(1, 0) },
            Record::Accepted {
                ballot: b(1, 0),
                entries: vec![(0, Some(10)), (1, Some(11)), (2, None)],
            },
            Record::Promised { ballot: b(2, 1) },
            Record::Decided {
                upto: 2,
                learned: vec![(1, Some(99))],
            },
        ];
        let mut log: Log<u32> = Log::new();
        for r in &records {
            log.apply(r).unwrap();
        }
        assert_eq!(log.promised, b(2, 1));
        assert_eq!(log.decided_upto(), 2);
        assert_eq!(
            log.decided(0),
            Some(&Some(10)),
            "from its own accepted record"
        );
        assert_eq!(
            log.decided(1),
            Some(&Some(99)),
            "learned overrides accepted"
        );
        assert_eq!(log.accepted.len(), 1, "slot 2 still undecided");
        log.check(8).unwrap();
    }

    #[test]
    fn a_decision_without_a_value_on_record_is_refused() {
        let mut log: Log<u32> = Log::new();
        let r = Record::Decided {
            upto: 1,
            learned: vec![],
        };
        assert!(log.apply(&r).is_err());
    }

    #[test]
    fn truncation_and_checkpoint_round_trip() {
        let mut log: Log<u32> = Log::new();
        for v in 0..5 {
            log.push_decided(Some(v));
        }
        log.accept(b(3, 2), 6, Some(60));
        log.truncate(3);
        assert_eq!((log.truncated_below(), log.decided_upto()), (3, 5));
        assert_eq!(log.decided(2), None);
        assert_eq!(log.decided(4), Some(&Some(4)));
        let mut copy: Log<u32> = Log::new();
        copy.apply(&Record::Checkpoint(Box::new(log.checkpoint())))
            .unwrap();
        assert_eq!(copy.checkpoint(), log.checkpoint());
        log.truncate(10);
        assert_eq!(
            (log.decided_upto(), log.accepted.len()),
            (10, 0),
            "snapshot jump"
        );
    }
}
