//! A machine's timer table: deadlines (in the machine's clock) keyed by purpose, as
//! quinn-proto keeps its timers. Setting a key replaces its deadline, removing it cancels
//! the timer, `next` is what the machine answers to `poll_timeout`, and `take_due` hands
//! back every purpose whose deadline has passed. Nothing here can be lost: the driver
//! always wakes the machine at `next`, whatever happened before.

use causeway_core::Nanos;
use std::collections::BTreeMap;

/// Most timers one table holds: purposes are a small fixed set per machine.
pub const TIMERS_MAX: usize = 64;

#[derive(Clone, Debug)]
pub struct Timers<K: Ord + Copy> {
    table: BTreeMap<K, Nanos>,
    /// The earliest deadline, kept by every change: drivers ask for it after every
    /// call into the machine (several times per request), the table changes less often.
    next: Option<Nanos>,
}

impl<K: Ord + Copy + std::fmt::Debug> Default for Timers<K> {
    fn default() -> Self {
        Timers {
            table: BTreeMap::new(),
            next: None,
        }
    }
}

impl<K: Ord + Copy + std::fmt::Debug> Timers<K> {
    /// Sets (or moves) the deadline of `key`.
    pub fn set(&mut self, key: K, at: Nanos) {
        let old = self.table.insert(key, at);
        assert!(self.table.len() <= TIMERS_MAX, "timer table overflow");
        match old {
            // The earliest moved later: another may be first now.
            Some(old) if Some(old) == self.next && at > old => self.recompute_next(),
            _ => self.next = Some(self.next.map_or(at, |n| n.min(at))),
        }
    }

    /// Sets `key` to `at` unless it is already due earlier.
    pub fn set_min(&mut self, key: K, at: Nanos) {
        let at = self.table.get(&key).map_or(at, |old| (*old).min(at));
        self.set(key, at);
    }

    pub fn cancel(&mut self, key: K) {
        if self
            .table
            .remove(&key)
            .is_some_and(|at| Some(at) == self.next)
        {
            self.recompute_next();
        }
    }

    fn recompute_next(&mut self) {
        self.next = self.table.values().copied().min();
    }

    pub fn get(&self, key: K) -> Option<Nanos> {
        self.table.get(&key).copied()
    }

    /// The earliest deadline (what `poll_timeout` answers).
    pub fn next(&self) -> Option<Nanos> {
        debug_assert_eq!(self.next, self.table.values().copied().min());
        self.next
    }

    /// Removes and returns every key due at `clock`, in key order.
    pub fn take_due(&mut self, clock: Nanos) -> Vec<K> {
        let due: Vec<K> = self
            .table
            .iter()
            .filter(|(_, at)| **at <= clock)
            .map(|(k, _)| *k)
            .collect();
        for k in &due {
            self.table.remove(k);
        }
        if !due.is_empty() {
            self.recompute_next();
        }
        due
    }

    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
    enum T {
        A,
        B,
    }

    #[test]
    fn next_is_the_earliest_and_cancel_removes() {
        let mut t = Timers::default();
        assert_eq!(t.next(), None);
        t.set(T::A, 50);
        t.set(T::B, 20);
        assert_eq!(t.next(), Some(20));
        t.cancel(T::B);
        assert_eq!(t.next(), Some(50));
        t.set(T::A, 70);
        assert_eq!(t.next(), Some(70), "set moves a deadline");
        t.set_min(T::A, 90);
        assert_eq!(t.get(T::A), Some(70), "set_min keeps the earlier one");
    }

    #[test]
    fn take_due_returns_only_passed_deadlines_once() {
        let mut t = Timers::default();
        t.set(T::A, 10);
        t.set(T::B, 30);
        assert_eq!(t.take_due(9), Vec::<T>::new());
        assert_eq!(t.take_due(10), vec![T::A]);
        assert_eq!(t.take_due(100), vec![T::B]);
        assert!(t.is_empty());
    }

    #[test]
    fn the_kept_earliest_deadline_matches_a_scan_after_any_changes() {
        let keys = [T::A, T::B];
        let mut t = Timers::default();
        let mut next = crate::kit::xorshift(0x2545_f491_4f6c_dd1d);
        for _ in 0..5_000 {
            let key = keys[next(2) as usize];
            let at = next(100);
            match next(4) {
                0 => t.set(key, at),
                1 => t.set_min(key, at),
                2 => t.cancel(key),
                _ => {
                    t.take_due(at);
                }
            }
            assert_eq!(t.next(), t.table.values().copied().min());
        }
    }
}
