//! Checkpoints of an Occult node (and of `eventual-ms`): log compaction, issue 15. The
//! paper is silent on it; the rule is Cure's (`cure/checkpoint.rs`, docs/ARCHITECTURE.md):
//! a checkpoint is taken only at a *quiescent* moment
//! ([`Durability::quiescent`](crate::kit::durability::Durability::quiescent)), when the
//! node's durable state is exactly what replaying its records would rebuild:
//!
//! - `Write` / `Committed` / `Remote` records: every key's current version (Occult keeps
//!   one per key, Fig. 4), every shard's shardstamp, our stream's last sequence number,
//!   the received streams and what of them is durable;
//! - `Lease` records and written shardstamps: the lease and the highest timestamp;
//! - `Prepared` / `Released` / `Committed`: the txns holding locks (the locks follow from
//!   them) and the fences;
//! - `Decided` without `Forgotten`: the decisions still kept;
//! - the replication log, only what some live sibling has not acknowledged.
//!
//! Volatile state (queued single-key writes, floors, sibling acknowledgements, counters)
//! is lost as in a crash; a recovered prepared txn gets no floor promise (`ss_min` 0), as
//! after a replay.

use super::Node;
use crate::occult::msg::{Checkpoint, Record};

impl Node {
    /// The checkpoint record, or `None` when records are in flight.
    pub(super) fn take_checkpoint(&self) -> Option<Vec<u8>> {
        let receiving = self.transfers.receiving();
        if !self.durability.quiescent() || self.seq != self.durable_seq || receiving {
            return None;
        }
        let prepared = self.prepared.iter().map(|(t, p)| {
            let (writes, shards) = (p.writes.clone(), p.shards.clone());
            (*t, p.coord, writes, shards)
        });
        let decisions = self.decisions.iter().map(|(t, d, parts, durable)| {
            assert!(durable, "quiescent: every decision record is durable");
            (t, d.clone(), parts.values().copied().collect())
        });
        let ck = Checkpoint {
            lease: self.time.lease,
            last: self.time.last,
            seq: self.seq,
            store: self
                .store
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            stamps: self.stamps.iter().map(|(s, v)| (*s, *v)).collect(),
            prepared: prepared.collect(),
            decisions: decisions.collect(),
            fences: self.fence_order.iter().copied().collect(),
            log: self.log.clone(),
            received: self.received.clone(),
            durable_have: self.durable_have.clone(),
        };
        Some(postcard::to_allocvec(&Record::Checkpoint(Box::new(ck))).expect("encodes"))
    }

    /// Replays a checkpoint (the first record of a compacted log).
    pub(super) fn restore(&mut self, ck: Checkpoint) {
        self.time.recovered(ck.lease);
        self.time.last = self.time.last.max(ck.last);
        self.seq = self.seq.max(ck.seq);
        self.durable_seq = self.seq;
        self.store = ck.store.into_iter().collect();
        self.listed.invalidate();
        self.stamps = ck.stamps.into_iter().collect();
        for (txn, coord, writes, shards) in ck.prepared {
            self.recovered_prepared(txn, coord, writes, shards);
        }
        for (txn, decision, participants) in ck.decisions {
            let parts = Self::parts(&participants);
            self.decisions.recovered(txn, decision, parts);
        }
        for txn in ck.fences {
            self.fence(txn);
        }
        self.log = ck.log;
        self.received = ck.received;
        self.durable_have = ck.durable_have;
    }
}
