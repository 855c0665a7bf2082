//! Time: physical clock readings (nanoseconds, passed in by the driver), hybrid logical
//! clocks, and vector clocks with one entry per DC plus named extra entries (UniStore's
//! strong entry, for instance).

use serde::{Deserialize, Serialize};

/// Nanoseconds. Simulated time and physical clock readings are both `Nanos`.
pub type Nanos = u64;

/// Bits of an [`Hlc`] reserved for the logical counter.
pub const HLC_LOGICAL_BITS: u32 = 16;

/// A hybrid logical clock timestamp packed in a u64: the high bits are physical time in
/// nanoseconds (with the low [`HLC_LOGICAL_BITS`] bits masked off), the low bits a counter.
/// Packing keeps comparisons and the wire format as cheap as a scalar.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Hlc(pub u64);

impl Hlc {
    const LOGICAL_MASK: u64 = (1 << HLC_LOGICAL_BITS) - 1;

    pub fn physical(self) -> u64 {
        self.0 & !Self::LOGICAL_MASK
    }

    pub fn logical(self) -> u64 {
        self.0 & Self::LOGICAL_MASK
    }

    /// The timestamp for a local or send event at physical reading `clock`.
    pub fn tick(self, clock: Nanos) -> Hlc {
        let physical = clock & !Self::LOGICAL_MASK;
        if physical > self.physical() {
            Hlc(physical)
        } else {
            self.bump()
        }
    }

    /// The timestamp for receiving `remote` at physical reading `clock`: greater than both.
    pub fn receive(self, remote: Hlc, clock: Nanos) -> Hlc {
        let physical = clock & !Self::LOGICAL_MASK;
        let top = self.max(remote);
        if physical > top.physical() {
            Hlc(physical)
        } else {
            top.bump()
        }
    }

    fn bump(self) -> Hlc {
        // Overflowing the counter carries into the physical part, which stays monotonic.
        Hlc(self.0.checked_add(1).expect("hlc overflow"))
    }
}

/// Named extra entries a protocol may add to a vector clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Extra {
    /// UniStore's entry counting strong transactions.
    Strong,
}

/// A vector clock: one entry per DC (index = DC id) plus optional named extra entries.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Vc {
    pub dcs: Vec<u64>,
    pub extra: Vec<(Extra, u64)>,
}

impl Vc {
    pub fn zero(dcs: usize) -> Vc {
        Vc {
            dcs: vec![0; dcs],
            extra: Vec::new(),
        }
    }

    pub fn get(&self, dc: usize) -> u64 {
        self.dcs.get(dc).copied().unwrap_or(0)
    }

    pub fn set(&mut self, dc: usize, value: u64) {
        if self.dcs.len() <= dc {
            self.dcs.resize(dc + 1, 0);
        }
        self.dcs[dc] = value;
    }

    pub fn get_extra(&self, name: Extra) -> u64 {
        self.extra
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(0, |(_, v)| *v)
    }

    pub fn set_extra(&mut self, name: Extra, value: u64) {
        match self.extra.iter_mut().find(|(n, _)| *n == name) {
            Some(entry) => entry.1 = value,
            None => {
                self.extra.push((name, value));
                self.extra.sort();
            }
        }
    }

    /// Entry-wise `self <= other` (missing entries count as 0).
    pub fn le(&self, other: &Vc) -> bool {
        let len = self.dcs.len().max(other.dcs.len());
        (0..len).all(|i| self.get(i) <= other.get(i))
            && self.extra.iter().all(|(n, v)| *v <= other.get_extra(*n))
    }

    /// Entry-wise maximum, in place.
    pub fn join(&mut self, other: &Vc) {
        for i in 0..other.dcs.len() {
            let v = self.get(i).max(other.get(i));
            self.set(i, v);
        }
        for (n, v) in &other.extra {
            let joined = self.get_extra(*n).max(*v);
            self.set_extra(*n, joined);
        }
    }

    /// Entry-wise minimum, in place (entries missing on either side become 0).
    pub fn meet(&mut self, other: &Vc) {
        let len = self.dcs.len().max(other.dcs.len());
        for i in 0..len {
            let v = self.get(i).min(other.get(i));
            self.set(i, v);
        }
        let names: Vec<Extra> = self.extra.iter().map(|(n, _)| *n).collect();
        for n in names {
            let met = self.get_extra(n).min(other.get_extra(n));
            self.set_extra(n, met);
        }
    }

    /// Largest entry, extras included (UniStore's strong timestamp grows along causality
    /// like the DC entries, so orders built on this stay causal).
    pub fn max_entry(&self) -> u64 {
        let extras = self.extra.iter().map(|(_, v)| *v);
        self.dcs.iter().copied().chain(extras).max().unwrap_or(0)
    }

    /// Sum of the entries, extras included (saturating): `a < b` entry-wise implies a
    /// smaller sum.
    pub fn sum(&self) -> u64 {
        let extras = self.extra.iter().map(|(_, v)| *v);
        self.dcs
            .iter()
            .copied()
            .chain(extras)
            .fold(0u64, |acc, v| acc.saturating_add(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hlc_tick_follows_physical_time_and_counts_when_it_stalls() {
        let a = Hlc::default().tick(1 << 20);
        assert_eq!(a.physical(), 1 << 20);
        assert_eq!(a.logical(), 0);
        let b = a.tick(1 << 20);
        assert!(b > a);
        assert_eq!(b.logical(), 1);
        let c = b.tick(5); // clock went backwards: still monotonic
        assert!(c > b);
    }

    #[test]
    fn hlc_receive_exceeds_both_sides() {
        let local = Hlc(1 << 20);
        let remote = Hlc((9 << 20) + 4);
        let r = local.receive(remote, 3 << 20);
        assert!(r > local && r > remote);
        let later = local.receive(remote, 100 << 20);
        assert_eq!(later.physical(), 100 << 20);
    }

    #[test]
    fn vector_clock_order_join_and_meet() {
        let mut a = Vc {
            dcs: vec![1, 5, 3],
            extra: vec![],
        };
        let b = Vc {
            dcs: vec![2, 4, 3],
            extra: vec![(Extra::Strong, 7)],
        };
        assert!(!a.le(&b) && !b.le(&a));
        let mut m = a.clone();
        m.meet(&b);
        assert_eq!(m.dcs, vec![1, 4, 3]);
        assert!(m.le(&a) && m.le(&b));
        a.join(&b);
        assert_eq!(a.dcs, vec![2, 5, 3]);
        assert_eq!(a.get_extra(Extra::Strong), 7);
        assert!(b.le(&a));
        // The strong entry counts in the causal order keys.
        assert_eq!(a.max_entry(), 7);
        assert_eq!(a.sum(), 17);
        assert_eq!(m.max_entry(), 4);
        assert_eq!(m.sum(), 8);
    }
}
