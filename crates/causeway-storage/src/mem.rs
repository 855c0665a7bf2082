//! [`MemLog`]: an in-memory log for tests. `crash()` drops what was appended but not
//! synced, as a killed process would.

use crate::{check_meta, check_order, Log, LogStats, Result};
use causeway_core::Lsn;
use std::collections::BTreeMap;

#[derive(Debug, Default, Clone)]
pub struct MemLog {
    durable: BTreeMap<Lsn, Vec<u8>>,
    pending: Vec<(Lsn, Vec<u8>)>,
    meta: BTreeMap<String, Vec<u8>>,
    last: Lsn,
    stats: LogStats,
}

impl MemLog {
    pub fn new() -> MemLog {
        MemLog::default()
    }

    /// Loses every record not yet synced, as a crash would.
    pub fn crash(&mut self) {
        self.pending.clear();
        self.last = self.durable.keys().next_back().copied().unwrap_or(0);
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
        if self.pending.is_empty() {
            return Ok(());
        }
        self.stats.syncs += 1;
        for (lsn, record) in self.pending.drain(..) {
            self.stats.records += 1;
            self.stats.bytes += record.len() as u64;
            self.durable.insert(lsn, record);
        }
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
}
