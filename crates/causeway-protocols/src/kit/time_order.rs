//! [`TimeOrder`]: txns in flight ordered by a timestamp, for the oldest of them (Cure's
//! `pvc[d]` is just below the oldest prepare time, Alg. 2 l.20, asked for on every read
//! and prepare).
//!
//! Timestamps are issued in increasing order (`kit::clock::Time::issue`), and a txn
//! leaves about when those prepared with it do, so the entries live in a deque: an insert
//! is a push at the back (a binary-search insert for the rare older one, a txn given back
//! by a restart), the oldest leaves from the front. A txn that leaves from anywhere else
//! stays as a stale entry until it reaches the front, or until stale entries outnumber
//! the live ones by `STALE_SLACK` (then one pass drops them all): memory stays within
//! twice the live entries, and each operation is amortized O(1) plus a binary search.
//! A `BTreeSet` did the same with a search and a node shift on every insert and remove
//! (3% of a SET's instructions, issue 14).
//!
//! The owner says which entries are live (`is_live`): an entry is the txn's while the
//! txn is still in flight with that timestamp. Entries are unique (an insert of one
//! already there only counts it live again).

use causeway_core::TxnId;
use std::collections::VecDeque;

/// Stale entries tolerated beyond the live ones before a pass drops them.
const STALE_SLACK: usize = 64;

/// `(timestamp, txn)` entries in increasing order; see the module docs.
#[derive(Clone, Debug, Default)]
pub struct TimeOrder {
    entries: VecDeque<(u64, TxnId)>,
    /// Entries whose txn is in flight with that timestamp (the rest are stale).
    live: usize,
}

impl TimeOrder {
    /// Adds `(time, txn)`; the caller has made it live (`is_live` holds for it).
    pub fn insert(&mut self, time: u64, txn: TxnId) {
        let e = (time, txn);
        self.live += 1;
        match self.entries.back() {
            Some(last) if *last >= e => {
                if let Err(i) = self.entries.binary_search(&e) {
                    self.entries.insert(i, e);
                }
            }
            _ => self.entries.push_back(e),
        }
    }

    /// `(time, txn)` is no longer live (the caller has already made `is_live` false for
    /// it). Panics if it was never inserted: its txn's timestamp changed in place.
    pub fn remove(&mut self, time: u64, txn: TxnId, is_live: impl Fn(&(u64, TxnId)) -> bool) {
        let e = (time, txn);
        assert!(self.live > 0, "{txn:?}: removed from an empty order");
        self.live -= 1;
        // Txns mostly leave in the order they came (a group commit's records are durable
        // together, in order): the front, found without a search.
        if self.entries.front() == Some(&e) {
            self.entries.pop_front();
            while self.entries.front().is_some_and(|f| !is_live(f)) {
                self.entries.pop_front();
            }
        } else {
            assert!(
                self.entries.binary_search(&e).is_ok(),
                "{txn:?}: prepare time or phase changed"
            );
        }
        if self.entries.len() > 2 * self.live + STALE_SLACK {
            self.entries.retain(|e| is_live(e));
            assert_eq!(self.entries.len(), self.live, "live entries miscounted");
        }
    }

    /// The oldest live timestamp (the front is never stale: `remove` pops stale entries
    /// as they reach it).
    pub fn oldest(&self) -> Option<u64> {
        self.entries.front().map(|(t, _)| *t)
    }

    /// Entries held, stale ones included (for tests of the bound).
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_core::SessionId;
    use std::collections::BTreeSet;

    fn txn(seq: u64) -> TxnId {
        TxnId {
            session: SessionId(1),
            seq,
        }
    }

    /// Against a `BTreeSet` of the live entries, under random inserts (mostly in time
    /// order, some older) and removes from anywhere: the same oldest after every step,
    /// and never more than twice the live entries plus the slack held.
    #[test]
    fn the_oldest_matches_an_ordered_set_and_stale_entries_stay_bounded() {
        for seed in 1..=20u64 {
            let mut next = crate::kit::xorshift(seed * 7919);
            let mut order = TimeOrder::default();
            let mut live: BTreeSet<(u64, TxnId)> = BTreeSet::new();
            let mut clock = 1_000u64;
            for seq in 0..3_000u64 {
                if next(3) > 0 || live.is_empty() {
                    clock += 1 + next(5);
                    let time = if next(20) == 0 {
                        clock - next(900)
                    } else {
                        clock
                    };
                    live.insert((time, txn(seq)));
                    order.insert(time, txn(seq));
                } else {
                    // The oldest often, anything else otherwise.
                    let i = if next(2) == 0 {
                        0
                    } else {
                        next(live.len() as u64) as usize
                    };
                    let e = *live.iter().nth(i).expect("in range");
                    live.remove(&e);
                    order.remove(e.0, e.1, |x| live.contains(x));
                }
                assert_eq!(order.oldest(), live.first().map(|e| e.0), "seed {seed}");
                assert!(order.held() <= 2 * live.len() + STALE_SLACK, "seed {seed}");
            }
        }
    }

    /// A txn held at the front while thousands pass behind it: the stale entries are
    /// dropped in passes, not kept until it leaves.
    #[test]
    fn a_long_lived_oldest_does_not_keep_every_later_entry() {
        let mut order = TimeOrder::default();
        let mut live = BTreeSet::from([(1, txn(0))]);
        order.insert(1, txn(0));
        for seq in 1..10_000u64 {
            live.insert((seq + 1, txn(seq)));
            order.insert(seq + 1, txn(seq));
            live.remove(&(seq + 1, txn(seq)));
            order.remove(seq + 1, txn(seq), |x| live.contains(x));
            assert_eq!(order.oldest(), Some(1));
        }
        assert!(order.held() <= 2 + STALE_SLACK, "{}", order.held());
    }

    /// A stale entry made live again (its txn prepared again at the same time) is held
    /// once, and is the oldest once the entries before it leave.
    #[test]
    fn a_stale_entry_inserted_again_is_held_once() {
        let mut order = TimeOrder::default();
        let mut live = BTreeSet::from([(3, txn(2)), (5, txn(1))]);
        order.insert(3, txn(2));
        order.insert(5, txn(1));
        live.remove(&(5, txn(1)));
        order.remove(5, txn(1), |x| live.contains(x));
        assert_eq!((order.oldest(), order.held()), (Some(3), 2));
        live.insert((5, txn(1)));
        order.insert(5, txn(1));
        assert_eq!(order.held(), 2);
        live.remove(&(3, txn(2)));
        order.remove(3, txn(2), |x| live.contains(x));
        assert_eq!((order.oldest(), order.held()), (Some(5), 1));
    }

    #[test]
    #[should_panic(expected = "prepare time or phase changed")]
    fn removing_an_entry_never_inserted_panics() {
        let mut order = TimeOrder::default();
        order.insert(5, txn(1));
        order.remove(6, txn(1), |_| false);
    }
}
