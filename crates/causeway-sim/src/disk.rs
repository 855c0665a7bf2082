//! Simulated disks, one per node. A record a machine asks to persist is unsynced until its
//! write completes, then durable. Writes use group commit, as the real runtime does (fjall,
//! one fsync per batch): a record issued while a write is in flight joins the next batch,
//! which starts when the current one ends and takes 0.1-0.5 ms; batches complete in order.
//! The machine hears one `handle_persisted` per batch, with the batch's last lsn, as the
//! runtime's node task calls it once per durable batch (`handle_persisted(lsn)` releases
//! everything up to `lsn`), so the CPU model charges one durability notice per fsync, not
//! one per record. A crash loses the unsynced records; a restart replays the durable ones. A machine that offers checkpoints has its
//! durable records replaced by one once they are many (`SimConfig::checkpoint_records`).
//!
//! A disk may stall before its node crashes (`FaultEvent::DiskStall`, drawn with crashes):
//! until the crash, each write takes milliseconds more, as a failing disk or a node thrashing
//! its memory does before it dies. The records of that last slow batch are then the ones
//! the crash loses, so a protocol that shows a write before it is durable (the
//! `node-commit-early` mutation) has it read for milliseconds, not a fraction of one,
//! before losing it.

use crate::cpu::NodeInput;
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
    /// Records written but not yet synced, by lsn, with their batch's completion time.
    unsynced: BTreeMap<Lsn, (Nanos, Vec<u8>)>,
    /// The last lsn of each batch not yet complete, by its completion time.
    batch_last: BTreeMap<Nanos, Lsn>,
    /// When the batch in flight completes.
    free_at: Nanos,
    /// Checkpoints that replaced the durable records.
    pub(crate) checkpoints: u64,
    /// When the batch queued behind it completes (records issued meanwhile join it).
    next_batch_at: Option<Nanos>,
    /// Until when writes stall (`FaultEvent::DiskStall`), and by how much each.
    stall_until: Nanos,
    stall_extra_ns: Nanos,
}

impl Disk {
    /// Queues a write; returns its completion time. An idle disk writes it in a batch of
    /// its own taking `latency`; a busy one adds it to the next batch (whose latency was
    /// drawn by the write that opened it).
    fn write(&mut self, lsn: Lsn, record: Vec<u8>, now: Nanos, latency: Nanos) -> Nanos {
        let at = self.batch_for(now, latency);
        self.unsynced.insert(lsn, (at, record));
        let last = self.batch_last.entry(at).or_insert(lsn);
        *last = (*last).max(lsn);
        at
    }

    /// The completion time of the batch a record issued at `now` joins.
    fn batch_for(&mut self, now: Nanos, latency: Nanos) -> Nanos {
        if let Some(next) = self.next_batch_at {
            if now >= self.free_at {
                self.free_at = next; // the queued batch is in flight now
                self.next_batch_at = None;
            }
        }
        if now >= self.free_at {
            self.free_at = now + latency;
            return self.free_at;
        }
        *self.next_batch_at.get_or_insert(self.free_at + latency)
    }

    /// Completes the write of `lsn`: the record becomes durable. Returns the batch's last
    /// lsn once every record of its batch is durable (the batch's fsync returned).
    fn sync(&mut self, lsn: Lsn) -> Option<Lsn> {
        let (at, record) = self
            .unsynced
            .remove(&lsn)
            .expect("persisted record was pending");
        self.durable.push(record);
        let rest = self.unsynced.values().any(|(t, _)| *t == at);
        match rest {
            true => None,
            false => self.batch_last.remove(&at),
        }
    }

    /// Until `until`, every write opened takes `extra_ns` longer.
    pub(crate) fn stall(&mut self, until: Nanos, extra_ns: Nanos) {
        self.stall_until = until;
        self.stall_extra_ns = extra_ns;
    }

    /// The time a write opened at `now` takes, its drawn `latency` plus any stall.
    fn stalled(&self, latency: Nanos, now: Nanos) -> Nanos {
        match now < self.stall_until {
            true => latency + self.stall_extra_ns,
            false => latency,
        }
    }

    /// A crash: writes in flight are lost.
    pub(crate) fn lose_unsynced(&mut self) {
        self.unsynced.clear();
        self.batch_last.clear();
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
        let now = self.now + self.out_delay_ns;
        let latency = slot.disk.stalled(latency, now);
        let at = slot.disk.write(lsn, record, now, latency);
        let incarnation = slot.incarnation;
        let ev = Ev::Persisted {
            node: n,
            incarnation,
            lsn,
        };
        self.schedule(at, ev);
    }

    /// The write of `lsn` completed: durable now, unless the node crashed since. The last
    /// record of a batch tells the machine (through its CPU queue when the model is on).
    pub(crate) fn write_done(&mut self, n: usize, incarnation: u32, lsn: Lsn) {
        if self.nodes[n].incarnation != incarnation || self.nodes[n].machine.is_none() {
            return;
        }
        let batch_last = self.nodes[n].disk.sync(lsn);
        self.hash(lsn);
        match batch_last {
            Some(last) if self.config.cpu.enabled => {
                let input = NodeInput::Persisted {
                    incarnation,
                    lsn: last,
                };
                self.node_input(n, input)
            }
            Some(last) => self.persisted(n, incarnation, last),
            None => {}
        }
    }

    /// A batch up to `lsn` is durable: the machine hears it, unless it crashed since.
    pub(crate) fn persisted(&mut self, n: usize, incarnation: u32, lsn: Lsn) {
        if self.nodes[n].incarnation != incarnation || self.nodes[n].machine.is_none() {
            return;
        }
        self.with_node(n, |m, ctx| m.handle_persisted(ctx, lsn));
        self.maybe_checkpoint(n);
    }

    /// Compacts node `n`'s durable records into its checkpoint once they reach
    /// `checkpoint_records` and the machine can take one (nothing in flight).
    fn maybe_checkpoint(&mut self, n: usize) {
        let limit = self.config.checkpoint_records;
        let slot = &mut self.nodes[n];
        if limit == 0 || slot.disk.durable.len() < limit || !slot.disk.unsynced.is_empty() {
            return;
        }
        if let Some(ck) = slot.machine.as_ref().and_then(|m| m.checkpoint()) {
            slot.disk.durable = vec![ck];
            slot.disk.checkpoints += 1;
        }
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
        // Joins that queued batch (group commit).
        assert_eq!(disk.write(9, b"z".to_vec(), 1_060, 300), 1_200);
        disk.unsynced.remove(&9);
        assert_eq!(disk.sync(1), Some(1), "a batch of one record");
        disk.lose_unsynced();
        assert_eq!(disk.durable(), &[b"a".to_vec()]);
        // An idle disk starts the next write now.
        assert_eq!(disk.write(3, b"c".to_vec(), 5_000, 100), 5_100);
    }

    #[test]
    fn a_batch_is_announced_once_with_its_last_lsn() {
        let mut disk = Disk::default();
        assert_eq!(disk.write(1, b"a".to_vec(), 1_000, 100), 1_100);
        assert_eq!(disk.write(2, b"b".to_vec(), 1_010, 100), 1_200);
        assert_eq!(disk.write(3, b"c".to_vec(), 1_020, 300), 1_200);
        assert_eq!(disk.write(4, b"d".to_vec(), 1_030, 300), 1_200);
        assert_eq!(disk.sync(1), Some(1));
        assert_eq!(disk.sync(2), None, "records 3 and 4 are in the same fsync");
        assert_eq!(disk.sync(3), None);
        assert_eq!(disk.sync(4), Some(4));
        let durable: Vec<&[u8]> = disk.durable().iter().map(|r| r.as_slice()).collect();
        assert_eq!(durable, [b"a", b"b", b"c", b"d"]);
        assert!(disk.batch_last.is_empty(), "no batch left to announce");
    }
}
