//! Checkpoints and log truncation of UniStore's certification groups (issue 15). The
//! paper keeps its certification logs whole (§6.3 says nothing of their size); this is
//! our decision, written down here and in docs/ARCHITECTURE.md.
//!
//! - **Checkpoint**: at a quiescent moment (every record durable, every deferred action
//!   run; `checkpoint.rs`), a node's checkpoint holds, per group, the acceptor state
//!   (`Paxos::checkpoint`: promise, accepted and decided slots kept), the certifier
//!   (`kit::certify::Certifier`, whole) and `delivered`, the slot below which every
//!   decided entry was applied to the certifier and, through DELIVER_UPDATES (Alg. 3
//!   l.4-8), to the store the same checkpoint holds. Recovery rebuilds the group from
//!   that acceptor state plus the `Record::Paxos` records after it, restores the
//!   certifier, and skips delivery below `delivered` (`Paxos::skip_delivery`): a strong
//!   txn already in the store is not applied twice.
//! - **Truncation**: a member forgets, in memory and with no record
//!   (`Paxos::forget`), the slots below both its own `delivered` and the group's
//!   *everywhere* point, the lowest decided prefix any member reported to the leader
//!   (`Paxos::decided_everywhere`), which the leader sends to the members
//!   (`Msg::StrongGc`) every [`STRONG_GC_EVERY_NS`]. The durable records keep the slots
//!   until the next checkpoint replaces them, so a replay of the old records and a
//!   replay of the checkpoint each rebuild a consistent store and certifier.
//! - **A member away for long** would hold the everywhere point back and the others'
//!   logs would grow until it returns. So once a member lags the decided prefix by more
//!   than `strong_log_kept_max` slots, the leader sends the point a majority decided
//!   instead ([`gc_point`]); the laggard's catch-up is then answered `Truncated`
//!   (`Output::SnapshotNeeded`) and it gets a state transfer that carries the
//!   certification state (`strong_transfer.rs`).

use super::hooks::UniExt;
use crate::cure::msg::Msg;
use crate::cure::node::Node;
use crate::cure::record::GroupCheckpoint;
use crate::kit::paxos::{Record as PxRecord, Slot};
use causeway_core::{Addr, Ctx, DcId, Nanos, PartitionId};

/// How often a leader tells its group's members the everywhere point.
pub const STRONG_GC_EVERY_NS: Nanos = 1_000_000_000;

impl Node<UniExt> {
    /// Every group's durable state, for the node's checkpoint (quiescent: every decided
    /// entry was taken and applied, every record is durable).
    /// `None` before `start_strong` built the groups.
    pub(crate) fn strong_checkpoint(&self) -> Option<Vec<GroupCheckpoint>> {
        let Some(st) = self.ext.strong.as_ref() else {
            return Some(Vec::new());
        };
        if !st.restored.is_empty() || !st.recovered.is_empty() {
            return None;
        }
        let groups = st.groups.iter().map(|(p, g)| {
            assert_eq!(
                g.px.delivered(),
                g.px.decided_upto(),
                "quiescent: every decided entry of {p:?} was applied"
            );
            GroupCheckpoint {
                partition: *p,
                paxos: g.px.checkpoint(),
                cert: g.cert.clone(),
                delivered: g.px.delivered(),
                gc_below: g.gc_below,
            }
        });
        Some(groups.collect())
    }

    /// Replays the groups of a checkpoint: the acceptor state becomes the first record
    /// of each group, the rest waits for `start_strong`.
    pub(crate) fn restore_strong(&mut self, groups: Vec<GroupCheckpoint>) {
        let Some(st) = self.ext.strong.as_mut() else {
            return; // strong txns turned off since: the groups are dropped
        };
        st.recovered.clear();
        st.xfer.adopted.clear(); // the checkpoint stands for any earlier transfer
        for g in groups {
            let first = PxRecord::Checkpoint(Box::new(g.paxos.clone()));
            st.recovered.insert(g.partition, vec![first]);
            st.restored.insert(g.partition, g);
        }
    }

    /// Leaders send the everywhere point (paced); every member forgets what is below it
    /// and its own delivered slot.
    pub(crate) fn strong_gc(&mut self, ctx: &mut Ctx<Msg>) {
        let clock = self.time.clock;
        let kept_max = self.ext.cfg.log_kept_max;
        let Some(st) = self.ext.strong.as_mut() else {
            return;
        };
        let mut sends = Vec::new();
        for (p, g) in st.groups.iter_mut() {
            if let Some(point) = gc_point(&g.px, kept_max) {
                g.gc_below = g.gc_below.max(point);
                if clock >= g.gc_sent_ns + STRONG_GC_EVERY_NS {
                    g.gc_sent_ns = clock;
                    sends.push((*p, g.gc_below));
                }
            }
            let below = g.gc_below.min(g.px.delivered());
            if below > g.px.truncated_below() {
                g.px.forget(below);
            }
        }
        for (p, below) in sends {
            self.send_gc(ctx, p, below);
        }
    }

    fn send_gc(&self, ctx: &mut Ctx<Msg>, partition: PartitionId, below: Slot) {
        for dc in 0..self.topo.dcs {
            if usize::from(dc) != self.d {
                let node = self.topo.node_of(DcId(dc), partition);
                ctx.send(Addr::Node(node), Msg::StrongGc { partition, below });
            }
        }
    }

    /// Decided slots every group keeps in memory (what truncation bounds).
    pub(crate) fn cert_log_slots(&self) -> u64 {
        let groups = self.ext.strong.iter().flat_map(|s| s.groups.values());
        groups
            .map(|g| g.px.decided_upto() - g.px.truncated_below())
            .sum()
    }

    /// The leader's everywhere point for `partition`'s group.
    pub(crate) fn on_strong_gc(&mut self, partition: PartitionId, below: Slot) {
        let g = self
            .ext
            .strong
            .as_mut()
            .and_then(|s| s.groups.get_mut(&partition));
        if let Some(g) = g {
            g.gc_below = g.gc_below.max(below);
        }
    }
}

/// On a leader, the slot below which members may forget: what every member decided, or,
/// once a member lags the decided prefix by more than `kept_max` slots, what a majority
/// decided (the laggard then needs a state transfer, `strong_transfer.rs`).
fn gc_point(
    px: &crate::kit::paxos::Paxos<crate::kit::certify::CertEntry>,
    kept_max: u64,
) -> Option<Slot> {
    let everywhere = px.decided_everywhere()?;
    if px.decided_upto().saturating_sub(everywhere) <= kept_max {
        return Some(everywhere);
    }
    px.decided_by_quorum().map(|q| q.max(everywhere))
}
