//! Checkpoints of a PrompTCC node: log compaction, issue 15. The paper is silent on it;
//! the rule is Cure's (`cure/checkpoint.rs`, docs/ARCHITECTURE.md): a checkpoint is taken
//! only at a *quiescent* moment
//! ([`Durability::quiescent`](crate::kit::durability::Durability::quiescent)), when every
//! record handed out is durable, so each partition's state is what replaying its
//! `Prepare` / `Commit` / `Abort` / `Fence` records gives: `s_i`, the resolved prefix, the
//! pending txns with their final timestamps, the aborted and the committed-but-invisible
//! ones, the remembered sequence numbers and the fences.
//!
//! Unlike a replay, which rebuilds the store unfolded, a checkpoint holds the store as GC
//! folded it, so it also keeps what folding relied on: `S` (committed prefixes, facts that
//! stay true), the visible join, and the txns made visible within the GC horizon (they
//! get the whole horizon again after the restart, like a replay's). Volatile state
//! (coordinated txns, recovery queries, the GC ring) is lost as in a crash.

use super::msg::{Checkpoint, Record};
use super::node::Node;

impl Node {
    /// The checkpoint record, or `None` when records are in flight.
    pub(super) fn take_checkpoint(&self) -> Option<Vec<u8>> {
        if !self.durability.quiescent() {
            return None;
        }
        let ck = Checkpoint {
            s: self.s.clone(),
            parts: self.parts.values().map(|p| p.checkpoint()).collect(),
        };
        Some(Record::Checkpoint(Box::new(ck)).encode())
    }
}
