//! Causeway storage (layer 5 of DESIGN.md): the durable log every server node writes.
//!
//! A node's state machine emits `Persist { lsn, record }`; the runtime appends the records
//! to a [`Log`] and calls [`Log::sync`] once per batch (group commit: many records, one
//! fsync); only after `sync` returns may it call `handle_persisted(lsn)`. Recovery reads
//! every record back in lsn order with [`Log::read_all`] and hands them to
//! `causeway_protocols::new_node`.
//!
//! Beside the records, a log keeps a few small named metadata values (the boot epoch and
//! the session-id reservation of the runtime) that are written and synced at once.
//!
//! Two implementations: [`FjallLog`] on the fjall LSM engine (the real one) and
//! [`MemLog`], an in-memory twin for tests that can also simulate a crash (records that
//! were appended but not synced are lost).

mod fjall_log;
mod mem;

pub use fjall_log::FjallLog;
pub use mem::MemLog;

use causeway_core::Lsn;
use std::fmt;

/// Most records one group commit may hold; drivers cut bigger batches in pieces.
pub const BATCH_RECORDS_MAX: usize = 4096;
/// Most bytes of records one group commit may hold.
pub const BATCH_BYTES_MAX: usize = 64 << 20;
/// Largest metadata value, in bytes.
pub const META_LEN_MAX: usize = 4096;

/// A storage failure, with what was being done and where.
#[derive(Debug)]
pub struct StorageError {
    pub what: String,
}

impl StorageError {
    pub fn new(what: impl Into<String>) -> StorageError {
        StorageError { what: what.into() }
    }
}

impl fmt::Display for StorageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "storage: {}", self.what)
    }
}

impl std::error::Error for StorageError {}

pub type Result<T> = std::result::Result<T, StorageError>;

/// A node's durable, append-only log of records keyed by strictly increasing lsn.
pub trait Log: Send {
    /// Buffers `record` under `lsn`; it is durable only after the next [`Log::sync`].
    /// Lsns must increase strictly across the log's lifetime (recovery included).
    fn append(&mut self, lsn: Lsn, record: &[u8]) -> Result<()>;
    /// Makes every appended record durable with one write and one fsync (group commit).
    fn sync(&mut self) -> Result<()>;
    /// Every durable record, in lsn order.
    fn read_all(&self) -> Result<Vec<(Lsn, Vec<u8>)>>;
    /// The largest lsn appended (durable or buffered), 0 for an empty log.
    fn last_lsn(&self) -> Lsn;
    /// Reads a metadata value.
    fn get_meta(&self, name: &str) -> Result<Option<Vec<u8>>>;
    /// Writes a metadata value durably (synced before returning).
    fn put_meta(&mut self, name: &str, value: &[u8]) -> Result<()>;
    /// Counters: (records synced, syncs done).
    fn stats(&self) -> LogStats;
}

/// Group-commit counters of a log since it was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogStats {
    pub records: u64,
    pub syncs: u64,
    pub bytes: u64,
}

impl LogStats {
    /// Mean records per fsync (0 when nothing was synced).
    pub fn records_per_sync(&self) -> f64 {
        if self.syncs == 0 {
            0.0
        } else {
            self.records as f64 / self.syncs as f64
        }
    }
}

/// Reads a little-endian u64 metadata value; `None` when it is absent or malformed.
pub fn meta_u64(log: &dyn Log, name: &str) -> Result<Option<u64>> {
    Ok(log
        .get_meta(name)?
        .and_then(|v| <[u8; 8]>::try_from(v.as_slice()).ok())
        .map(u64::from_le_bytes))
}

fn check_order(last: Lsn, lsn: Lsn) -> Result<()> {
    if lsn <= last {
        return Err(StorageError::new(format!(
            "lsn {lsn} appended after lsn {last}: lsns must increase strictly"
        )));
    }
    Ok(())
}

fn check_meta(name: &str, value: &[u8]) -> Result<()> {
    if value.len() > META_LEN_MAX || name.is_empty() {
        return Err(StorageError::new(format!(
            "metadata '{name}' must have a name and at most {META_LEN_MAX} bytes"
        )));
    }
    Ok(())
}
