//! Lattice values: what protocols stabilize and snapshot with. A vector clock (Cure's GSS,
//! UniStore's stableVec and uniformVec) and a scalar (PaRiS's UST, an HLC) are both
//! lattices under entry-wise order; the gossip ([`super::gossip`]) and the multi-version
//! store ([`super::mvstore`]) are generic over them.

use causeway_core::Vc;
use std::fmt::Debug;

/// A join-semilattice with meets: `le` is the order, `join` the least upper bound, `meet`
/// the greatest lower bound (all in place).
pub trait Lattice: Clone + Debug + Default + PartialEq {
    fn le(&self, other: &Self) -> bool;
    fn join(&mut self, other: &Self);
    fn meet(&mut self, other: &Self);
}

impl Lattice for Vc {
    fn le(&self, other: &Vc) -> bool {
        Vc::le(self, other)
    }
    fn join(&mut self, other: &Vc) {
        Vc::join(self, other)
    }
    fn meet(&mut self, other: &Vc) {
        Vc::meet(self, other)
    }
}

impl Lattice for u64 {
    fn le(&self, other: &u64) -> bool {
        self <= other
    }
    fn join(&mut self, other: &u64) {
        *self = (*self).max(*other);
    }
    fn meet(&mut self, other: &u64) {
        *self = (*self).min(*other);
    }
}

/// The meet of `values`, or `None` if there are none.
pub fn meet_all<'a, L: Lattice + 'a>(values: impl IntoIterator<Item = &'a L>) -> Option<L> {
    let mut out: Option<L> = None;
    for v in values {
        match &mut out {
            Some(m) => m.meet(v),
            None => out = Some(v.clone()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_and_scalar_meets() {
        let a = Vc {
            dcs: vec![3, 9],
            extra: Vec::new(),
        };
        let b = Vc {
            dcs: vec![5, 1],
            extra: Vec::new(),
        };
        let m = meet_all([&a, &b]).expect("two values");
        assert_eq!(m.dcs, vec![3, 1]);
        assert!(m.le(&a) && m.le(&b));
        assert_eq!(meet_all([&7u64, &4, &9]), Some(4));
        assert_eq!(meet_all::<u64>([]), None);
    }
}
