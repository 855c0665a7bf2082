//! Checkpoints of a PaRiS node (and of its `bpr` and `nocc` flavors): log compaction,
//! issue 15. The paper is silent on it; the rule is Cure's (`cure/checkpoint.rs`, written
//! down in docs/ARCHITECTURE.md): a checkpoint is taken only at a *quiescent* moment
//! ([`Durability::quiescent`](crate::kit::durability::Durability::quiescent)), when the
//! node's durable state is exactly what replaying its records would rebuild:
//!
//! - `Lease` records: the lease and the highest timestamp;
//! - `Prepare` / `Commit` / `Abort` records: the txns still prepared, the committed ones
//!   not yet applied (`Committed`, Alg. 3 l.19) and the store the applied ones built
//!   (replay rebuilds it by applying `Committed` again, Alg. 4 l.8-19);
//! - `Remote` records: the received streams, `VV`'s sibling entries and the store;
//! - the replication log, only what some live sibling has not acknowledged;
//! - `Decision` without `Ended`: the decisions still kept.
//!
//! Unlike a replay, which rebuilds the store unfolded, a checkpoint holds the store as GC
//! folded it (at the global oldest snapshot, at or below the UST). So it also keeps
//! `VV[own]` and the node's UST as they were: both are facts that stay true (installed
//! stays installed; stable stays stable), every prepared or unapplied txn in it lies
//! above `VV[own]` (Proposition 2), and without them a restarted node would serve fresh
//! clients snapshots from UST 0, below the fold ("snapshot too old", found by
//! `tests/up_checkpoint.rs`). Volatile state (blocked reads and prepares, sibling
//! acknowledgements, gossip) is lost as in a crash.

use super::msg::{Checkpoint, PartCheckpoint, Record};
use super::node::Node;
use super::part::Prepared;

impl Node {
    /// The checkpoint record, or `None` when records are in flight.
    pub(super) fn take_checkpoint(&self) -> Option<Vec<u8>> {
        if !self.durability.quiescent() {
            return None;
        }
        let in_flight = self.parts.values().any(|part| {
            // A transfer's chunk records must stay until its end (`transfer.rs`).
            part.transfers.receiving()
                || part
                    .prepared
                    .values()
                    .any(|p| p.committing.is_some() || p.aborting)
        });
        if in_flight {
            return None; // a commit or abort record is not applied yet
        }
        let parts = self.parts.iter().map(|(p, part)| PartCheckpoint {
            partition: *p,
            store: part.store.clone(),
            prepared: part
                .prepared
                .iter()
                .map(|(t, pr)| (*t, pr.coord, pr.pt, pr.ops.clone()))
                .collect(),
            committed: part
                .committed
                .iter()
                .map(|(k, ops)| (*k, ops.clone()))
                .collect(),
            vv: part.vv.clone(),
            received: part.received.clone(),
            log: part.log.clone(),
            transferred: part.transfers.transferred.clone().into_iter().collect(),
        });
        let decisions = self.coord.decisions.iter().map(|(t, ct, parts, durable)| {
            assert!(durable, "quiescent: every decision record is durable");
            (t, *ct, parts.iter().map(|(p, n)| (*p, *n)).collect())
        });
        let ck = Checkpoint {
            lease: self.time.lease,
            last: self.time.last,
            ust: self.ust,
            parts: parts.collect(),
            decisions: decisions.collect(),
        };
        Some(Record::Checkpoint(Box::new(ck)).encode())
    }

    /// Replays a checkpoint (the first record of a compacted log).
    pub(super) fn restore(&mut self, ck: Checkpoint) {
        self.time.recovered(ck.lease);
        self.time.last = self.time.last.max(ck.last);
        self.ust = self.ust.max(ck.ust);
        for pc in ck.parts {
            let part = self.part(pc.partition);
            part.store = pc.store;
            part.received = pc.received;
            part.log = pc.log;
            part.transfers.transferred = pc.transferred.into_iter().collect();
            part.committed = pc.committed.into_iter().collect();
            part.vv = pc.vv;
            for (txn, coord, pt, ops) in pc.prepared {
                part.prepared
                    .insert(txn, Prepared::recovered(coord, pt, ops));
            }
        }
        for (txn, ct, participants) in ck.decisions {
            let parts = participants.into_iter().collect();
            self.coord.decisions.recovered(txn, ct, parts);
        }
    }
}
