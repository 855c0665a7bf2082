//! A node's notion of time for protocols that issue timestamps from their physical clock
//! (Cure, UniStore, PaRiS): the clock made strictly monotonic (`Clock` of the papers), and
//! a durable lease on claims. A node never claims (`pvc[d]`, a stable time) a value past
//! its lease, and the lease is persisted before it is used, so after a crash the node
//! restarts above every lease and timestamp on disk and never reissues one.

use causeway_core::Nanos;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Time {
    /// Highest raw clock reading (drives periodic work and timers).
    pub clock: Nanos,
    /// Highest clock reading or issued timestamp: `Clock` of the papers.
    pub last: Nanos,
    /// Claims never exceed this durable lease.
    pub lease: Nanos,
    /// A renewal is being persisted.
    pub lease_pending: bool,
}

impl Time {
    /// Takes a clock reading; returns `Clock` (never below an issued timestamp).
    pub fn read(&mut self, clock: Nanos) -> Nanos {
        self.clock = self.clock.max(clock);
        self.last = self.last.max(clock);
        self.last
    }

    /// A fresh timestamp above every reading and claim so far.
    pub fn issue(&mut self, clock: Nanos) -> Nanos {
        self.last = self.last.max(clock) + 1;
        self.last
    }

    /// The lease to persist now, if the current one is less than half `span` ahead
    /// (and no renewal is in flight); marks a renewal in flight.
    pub fn lease_to_renew(&mut self, span: Nanos) -> Option<Nanos> {
        if self.lease_pending || self.last + span / 2 < self.lease {
            return None;
        }
        self.lease_pending = true;
        Some(self.last + span)
    }

    /// A lease record is durable: claims may now reach it.
    pub fn lease_durable(&mut self, until: Nanos) {
        self.lease = self.lease.max(until);
        self.lease_pending = false;
    }

    /// Replays a persisted lease or timestamp: restart above it.
    pub fn recovered(&mut self, floor: Nanos) {
        self.lease = self.lease.max(floor);
        self.last = self.last.max(floor);
    }

    /// The highest value a claim may take now.
    pub fn claimable(&self) -> Nanos {
        self.last.min(self.lease)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_is_monotonic_and_issued_times_are_fresh() {
        let mut t = Time::default();
        assert_eq!(t.read(100), 100);
        assert_eq!(t.read(90), 100, "a reading behind the last one");
        assert_eq!(t.issue(90), 101);
        assert_eq!(t.issue(200), 201);
        assert_eq!(
            t.clock, 100,
            "raw readings are kept apart from issued times"
        );
    }

    #[test]
    fn claims_wait_for_the_lease_and_renewals_do_not_pile_up() {
        let mut t = Time::default();
        t.read(1_000);
        assert_eq!(t.claimable(), 0, "no durable lease yet");
        let until = t.lease_to_renew(200).expect("renew");
        assert_eq!(until, 1_200);
        assert_eq!(t.lease_to_renew(200), None, "one renewal in flight");
        t.lease_durable(until);
        assert_eq!(t.claimable(), 1_000);
        assert_eq!(t.lease_to_renew(200), None, "more than half the span ahead");
        t.read(1_150);
        assert!(t.lease_to_renew(200).is_some());
    }

    #[test]
    fn a_restart_starts_above_every_persisted_time() {
        let mut t = Time::default();
        t.recovered(5_000);
        assert_eq!(t.issue(10), 5_001);
    }
}
