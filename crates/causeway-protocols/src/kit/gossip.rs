//! Stabilization by gossip of a lattice value inside a group of nodes (a DC): every member
//! reports a value (or no constraint, when it hosts nothing), and once every member has
//! reported, the group's stable value advances to the meet of the reports; it never goes
//! back (joins only). Cure's GSS is this over partition vectors (Alg. 2 l.39-46, exchanged
//! all-to-all); UniStore's stableVec/uniformVec and PaRiS's UST are the same shape. A
//! member's own stable value is also a claim about the group, so others may adopt it.

use super::lattice::{meet_all, Lattice};
use causeway_core::NodeId;
use std::collections::BTreeMap;

#[derive(Clone, Debug)]
pub struct Gossip<L> {
    members: Vec<NodeId>,
    /// Latest report per member; `None` = no constraint.
    reports: BTreeMap<NodeId, Option<L>>,
    stable: L,
}

impl<L: Lattice> Gossip<L> {
    /// A group of `members` whose stable value starts at `bottom`.
    pub fn new(members: Vec<NodeId>, bottom: L) -> Gossip<L> {
        Gossip {
            members,
            reports: BTreeMap::new(),
            stable: bottom,
        }
    }

    /// Records `node`'s report (ignored from a non-member) and advances the stable value.
    pub fn report(&mut self, node: NodeId, value: Option<L>) {
        if self.members.contains(&node) {
            self.reports.insert(node, value);
            self.advance();
        }
    }

    /// Adopts another member's stable value: it is a claim about the same group.
    pub fn adopt(&mut self, claim: &L) {
        self.stable.join(claim);
    }

    /// Every member has reported at least once.
    pub fn complete(&self) -> bool {
        self.members.iter().all(|m| self.reports.contains_key(m))
    }

    pub fn stable(&self) -> &L {
        &self.stable
    }

    /// The meet of the current reports, once complete (`None` before, or if no member
    /// constrains it). Unlike [`Gossip::stable`] it may go down (a lower report).
    pub fn meet_of_reports(&self) -> Option<L> {
        if !self.complete() {
            return None;
        }
        meet_all(self.reports.values().flatten())
    }

    fn advance(&mut self) {
        if let Some(m) = self.meet_of_reports() {
            self.stable.join(&m);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group() -> Gossip<u64> {
        Gossip::new(vec![NodeId(0), NodeId(1), NodeId(2)], 0)
    }

    #[test]
    fn stable_waits_for_every_member_then_is_the_meet() {
        let mut g = group();
        g.report(NodeId(0), Some(10));
        g.report(NodeId(1), Some(7));
        assert_eq!(*g.stable(), 0, "node 2 has not reported");
        g.report(NodeId(2), None); // hosts nothing: no constraint
        assert!(g.complete());
        assert_eq!(*g.stable(), 7);
        g.report(NodeId(9), Some(0));
        assert_eq!(*g.stable(), 7, "non-members are ignored");
    }

    #[test]
    fn stable_never_goes_back_but_adopts_higher_claims() {
        let mut g = group();
        for n in 0..3 {
            g.report(NodeId(n), Some(20));
        }
        g.report(NodeId(1), Some(5)); // a lower report (a restarted member)
        assert_eq!(*g.stable(), 20);
        assert_eq!(g.meet_of_reports(), Some(5));
        g.adopt(&30);
        assert_eq!(*g.stable(), 30);
    }
}
