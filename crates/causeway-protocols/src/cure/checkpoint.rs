//! Checkpoints of a Cure / UniStore node (log compaction, issue 15): the node's durable
//! state as one [`Record::Checkpoint`] that stands for every record persisted before it.
//!
//! The papers say nothing about log compaction; this is our decision, written down here
//! and in docs/ARCHITECTURE.md. A checkpoint is taken only at a *quiescent* moment
//! ([`Durability::quiescent`](crate::kit::durability::Durability::quiescent)): every
//! record handed out is durable and every action deferred until durability has run. At
//! such a moment the node's durable state is exactly what replaying its records would
//! rebuild, field by field:
//!
//! - `Lease` records: the lease (`time.lease`) and the highest timestamp (`time.last`);
//! - `Prepare` / `Commit` / `OnePhase` / `Remote` records: the partition's multi-version
//!   store (versions above each key's folded base; GC folded the rest, as it would after
//!   a replay), the txns still prepared (an aborted one is simply gone, which replay
//!   would reach by asking its coordinator: presumed abort), the received streams and
//!   the partition vector's remote entries;
//! - the replication log: only the txns some live sibling has not acknowledged, so a
//!   restart from a checkpoint re-sends what siblings miss and no more (a full replay
//!   rebuilds the whole history into the log and then trims it as siblings re-ack);
//! - `Decision` without `Ended`: the decisions still kept.
//!
//! Volatile state is not in it (client requests waiting, coordinated txns not yet
//! decided, sibling acknowledgements, gossip), exactly as a crash loses it.
//!
//! UniStore's certification groups (`Record::Paxos`, kit::paxos) are in it too: each
//! group's acceptor state, certifier and delivered slot (`strong_gc.rs`).

use super::ext::Extension;
use super::node::Node;
use super::part::{Phase, Prepared};
use super::record::{Checkpoint, PartCheckpoint, Record};

impl<X: Extension> Node<X> {
    /// The checkpoint record, or `None` when records are in flight (or the certification
    /// groups are not started yet).
    pub(crate) fn take_checkpoint(&self) -> Option<Vec<u8>> {
        let receiving = self.parts.values().any(|p| p.transfers.receiving());
        if !self.durability.quiescent() || receiving {
            return None; // a transfer's chunk records must stay until its end
        }
        let strong = X::checkpoint(self)?;
        let parts = self
            .parts
            .iter()
            .map(|(p, part)| PartCheckpoint {
                partition: *p,
                store: part.store.clone(),
                prepared: part
                    .prepared
                    .in_txn_order()
                    .into_iter()
                    .filter(|_| !self.mutation.checkpoint_drops_prepared)
                    .map(|(t, pr)| {
                        // A one-phase txn commits once durable; a one-node txn still
                        // preparing is kept as a two-phase one: after a restart it asks
                        // its coordinator (this node), which no longer runs it and
                        // answers abort, unless its `NodeCommit` record follows.
                        assert!(
                            pr.phase != Phase::One,
                            "a one-phase txn commits once durable"
                        );
                        (*t, pr.coord, pr.prep_time, pr.ops.clone())
                    })
                    .collect(),
                pvc: part.pvc.clone(),
                received: part.received.clone(),
                log: part.log.clone(),
                transferred: part.transfers.transferred.clone().into_iter().collect(),
            })
            .collect();
        let decisions = self
            .coord
            .decisions
            .iter()
            .map(|(t, ct, parts, durable)| {
                assert!(durable, "quiescent: every decision record is durable");
                (t, ct.clone(), parts.iter().map(|(p, n)| (*p, *n)).collect())
            })
            .collect();
        let ck = Checkpoint {
            lease: self.time.lease,
            last: self.time.last,
            parts,
            decisions,
            strong,
        };
        Some(Record::Checkpoint(Box::new(ck)).encode())
    }

    /// Replays a checkpoint (the first record of a compacted log).
    pub(crate) fn restore(&mut self, ck: Checkpoint) {
        self.time.recovered(ck.lease);
        self.time.last = self.time.last.max(ck.last);
        let d = self.d;
        for pc in ck.parts {
            let part = self.part(pc.partition);
            part.store = pc.store;
            part.received = pc.received;
            part.log = pc.log;
            part.transfers.transferred = pc.transferred.into_iter().collect();
            for k in 0..part.pvc.dcs.len() {
                if k != d {
                    part.pvc.set(k, pc.pvc.get(k)); // remote entries; ours is recomputed
                }
            }
            for (txn, coord, prep_time, ops) in pc.prepared {
                part.prepared
                    .insert(txn, Prepared::recovered(coord, prep_time, ops));
            }
        }
        for (txn, ct, participants) in ck.decisions {
            self.coord.recovered_decision(txn, ct, participants);
        }
        X::restore(self, ck.strong);
    }
}
