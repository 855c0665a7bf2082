//! [`MemLog`]: an in-memory log for tests. `crash()` drops what was appended but not
//! synced, as a killed process would, and keeps the rest: synced records, metadata, the
//! snapshot and truncations, which are durable as soon as their call returns (the crash
//! semantics of the crate docs). Records handed to the OS by `flush` survive `crash()`
//! and are lost by `power_loss()` until a `sync`.

use crate::{check_meta, check_order, check_snapshot, check_truncate, Log, LogStats, Result};
use causeway_core::Lsn;
use std::collections::BTreeMap;

#[derive(Debug, Default, Clone)]
pub struct MemLog {
    durable: BTreeMap<Lsn, Vec<u8>>,
    pending: Vec<(Lsn, Vec<u8>)>,
    /// Lsns flushed (in `durable`) but not synced since: a power loss drops them.
    unsynced: Vec<Lsn>,
    meta: BTreeMap<String, Vec<u8>>,
    snapshot: Option<(Lsn, Vec<u8>)>,
    last: Lsn,
    stats: LogStats,
}

impl MemLog {
    pub fn new() -> MemLog {
        MemLog::default()
    }

    /// Loses every record not yet synced, as a crash would. The last lsn falls back to
    /// what a reopened [`crate::FjallLog`] reports: the largest of the durable records'
    /// and the snapshot's `upto` (which outlives truncated records).
    pub fn crash(&mut self) {
        self.pending.clear();
        let durable = self.durable.keys().next_back().copied().unwrap_or(0);
        self.last = durable.max(self.snapshot_upto().unwrap_or(0));
    }

    /// Loses what a machine that lost power would: every record not synced, flushed ones
    /// included.
    pub fn power_loss(&mut self) {
        for lsn in self.unsynced.drain(..) {
            self.durable.remove(&lsn);
        }
        self.crash();
    }

    fn snapshot_upto(&self) -> Option<Lsn> {
        self.snapshot.as_ref().map(|(upto, _)| *upto)
    }
}

impl MemLog {
    fn write_pending(&mut self) {
        for (lsn, record) in self.pending.drain(..) {
            self.stats.records += 1;
            self.stats.bytes += record.len() as u64;
            self.durable.insert(lsn, record);
        }
    }
}

impl Log for MemLog {
    fn append(&mut self, lsn: Lsn, record: &[u8]) -> Result<()> {
        check_order(self.last, lsn)?;
        self.last = lsn;
        self.pending.push((lsn, record.to_vec()));
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        if self.pending.is_empty() && self.unsynced.is_empty() {
            return Ok(());
        }
        self.stats.syncs += 1;
        self.unsynced.clear();
        self.write_pending();
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        self.stats.flushes += 1;
        self.unsynced
            .extend(self.pending.iter().map(|(lsn, _)| *lsn));
        self.write_pending();
        Ok(())
    }

    fn read_all(&self) -> Result<Vec<(Lsn, Vec<u8>)>> {
        Ok(self
            .durable
            .iter()
            .map(|(lsn, r)| (*lsn, r.clone()))
            .collect())
    }

    fn last_lsn(&self) -> Lsn {
        self.last
    }

    fn get_meta(&self, name: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.meta.get(name).cloned())
    }

    fn put_meta(&mut self, name: &str, value: &[u8]) -> Result<()> {
        check_meta(name, value)?;
        self.meta.insert(name.to_string(), value.to_vec());
        Ok(())
    }

    fn stats(&self) -> LogStats {
        self.stats
    }

    fn put_snapshot(&mut self, upto: Lsn, snapshot: &[u8]) -> Result<()> {
        check_snapshot(self.snapshot_upto(), self.last, upto, snapshot.len())?;
        self.snapshot = Some((upto, snapshot.to_vec()));
        Ok(())
    }

    fn snapshot(&self) -> Result<Option<(Lsn, Vec<u8>)>> {
        Ok(self.snapshot.clone())
    }

    fn truncate_before(&mut self, lsn: Lsn) -> Result<()> {
        check_truncate(self.snapshot_upto(), lsn)?;
        self.durable = self.durable.split_off(&lsn);
        self.pending.retain(|(l, _)| *l >= lsn);
        self.unsynced.retain(|l| *l >= lsn);
        Ok(())
    }
}
