//! Simulated disks, one per node. A record a machine asks to persist is unsynced until its
//! write completes, then durable; the machine hears `handle_persisted` only then. Writes of
//! one disk complete in order, each taking 0.1-0.5 ms after the previous one finished. A
//! crash loses the unsynced records; a restart replays the durable ones.

use crate::world::{Ev, World};
use causeway_core::clock::Nanos;
use causeway_core::Lsn;
use std::collections::BTreeMap;

/// Shortest time one write takes.
const WRITE_MIN_NS: Nanos = 100_000;
/// Spread of the write time above the minimum (drawn uniformly below it).
const WRITE_SPREAD_NS: Nanos = 400_000;

#[derive(Default)]
pub(crate) struct Disk {
    /// Synced records, in completion order: what a restart recovers from.
    durable: Vec<Vec<u8>>,
    /// Records written but not yet synced, by lsn.
    unsynced: BTreeMap<Lsn, Vec<u8>>,
    /// When the disk finishes its last queued write.
    free_at: Nanos,
}

impl Disk {
    /// Queues a write taking `latency` after the previous one; returns its completion time.
    fn write(&mut self, lsn: Lsn, record: Vec<u8>, now: Nanos, latency: Nanos) -> Nanos {
        self.unsynced.insert(lsn, record);
        self.free_at = self.free_at.max(now) + latency;
        self.free_at
    }

    /// Completes the write of `lsn`: the record becomes durable.
    fn sync(&mut self, lsn: Lsn) {
        let record = self
            .unsynced
            .remove(&lsn)
            .expect("persisted record was pending");
        self.durable.push(record);
    }

    /// A crash: writes in flight are lost.
    pub(crate) fn lose_unsynced(&mut self) {
        self.unsynced.clear();
    }

    pub(crate) fn durable(&self) -> &[Vec<u8>] {
        &self.durable
    }
}

impl World {
    /// Node `n` asks to persist `record`; `Persisted` comes back when the write completes.
    pub(crate) fn persist(&mut self, n: usize, lsn: Lsn, record: Vec<u8>) {
        // Drawn from the network stream, as always: a stream of its own would change
        // every trace hash.
        let latency = WRITE_MIN_NS + self.network.rng.range(0, WRITE_SPREAD_NS);
        let slot = &mut self.nodes[n];
        let at = slot.disk.write(lsn, record, self.now, latency);
        let incarnation = slot.incarnation;
        let ev = Ev::Persisted {
            node: n,
            incarnation,
            lsn,
        };
        self.schedule(at, ev);
    }

    /// A write completed: durable now, unless the node crashed since.
    pub(crate) fn persisted(&mut self, n: usize, incarnation: u32, lsn: Lsn) {
        if self.nodes[n].incarnation != incarnation || self.nodes[n].machine.is_none() {
            return;
        }
        self.nodes[n].disk.sync(lsn);
        self.hash(lsn);
        self.with_node(n, |m, ctx| m.handle_persisted(ctx, lsn));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_complete_in_order_and_a_crash_loses_only_unsynced_ones() {
        let mut disk = Disk::default();
        assert_eq!(disk.write(1, b"a".to_vec(), 1_000, 100), 1_100);
        // Queued behind the first write, though issued before it finished.
        assert_eq!(disk.write(2, b"b".to_vec(), 1_050, 100), 1_200);
        disk.sync(1);
        disk.lose_unsynced();
        assert_eq!(disk.durable(), &[b"a".to_vec()]);
        // An idle disk starts the next write now.
        assert_eq!(disk.write(3, b"c".to_vec(), 5_000, 100), 5_100);
    }
}
