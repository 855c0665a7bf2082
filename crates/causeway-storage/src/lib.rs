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
//! To bound recovery time, a log also holds at most one snapshot: opaque bytes (the
//! node's state) that stand for every record with lsn <= some `upto`. Once a snapshot is
//! durable, [`Log::truncate_before`] may drop the records it covers. Recovery then
//! starts from the snapshot and replays only the records of [`Log::read_all`] above its
//! `upto` (read_all may still return some covered records: those not truncated yet).
//!
//! # Crash semantics
//!
//! A crash (a killed process, a lost machine) keeps exactly this:
//! - records appended and then synced by [`Log::sync`]; appended but unsynced ones are
//!   lost, whatever other call came after them;
//! - every [`Log::put_meta`], [`Log::put_snapshot`] and [`Log::truncate_before`] that
//!   returned `Ok` (each is synced before it returns). A crash during `put_snapshot`
//!   leaves the old snapshot or the new one, never a mix. A crash during
//!   `truncate_before` leaves a (possibly empty) prefix of the doomed records deleted,
//!   which is harmless: the snapshot, already durable, covers all of them;
//! - after reopen, [`Log::last_lsn`] is the largest lsn of the durable records and the
//!   durable snapshot's `upto`, so lsns keep increasing even when truncation left no
//!   record (the snapshot keeps the high-water mark).
//!
//! A snapshot may cover records still buffered (`upto` up to [`Log::last_lsn`]); if a
//! crash loses them, the snapshot still stands for them, which is what recovery needs.
//!
//! Two implementations: [`FjallLog`] on the fjall LSM engine (the real one) and
//! [`MemLog`], an in-memory twin for tests that can also simulate a crash with exactly
//! the semantics above.

#![forbid(unsafe_code)]

mod fjall_log;
mod generation;
mod journal_fill;
mod mem;
mod runs;

pub use fjall_log::FjallLog;
pub use journal_fill::FILL_BYTES_MAX as JOURNAL_FILL_BYTES_MAX;
pub use mem::MemLog;

use causeway_core::Lsn;
use std::fmt;

/// Most records one group commit may hold; drivers cut bigger batches in pieces.
pub const BATCH_RECORDS_MAX: usize = 4096;
/// Most bytes of records one group commit may hold.
pub const BATCH_BYTES_MAX: usize = 64 << 20;
/// Largest metadata value, in bytes.
pub const META_LEN_MAX: usize = 4096;
/// Largest snapshot, in bytes (1 GiB): a snapshot is written and read back whole, in
/// memory, so a bigger one is refused with an error rather than exhausting memory.
pub const SNAPSHOT_LEN_MAX: usize = 1 << 30;

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
    /// Hands every appended record to the operating system without an fsync, so that it
    /// survives a crash of this process but not of the machine (power loss, kernel
    /// panic); the next [`Log::sync`] makes it durable. For the `batched` durability
    /// setting (`appendfsync everysec` of Redis). The default syncs, which is stronger.
    fn flush(&mut self) -> Result<()> {
        self.sync()
    }
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
    /// Durably (synced before returning) stores `snapshot` as standing for every record
    /// with lsn <= `upto`, replacing any older snapshot. Refuses an `upto` below the
    /// current snapshot's (recovery must never go back) or above [`Log::last_lsn`] (it
    /// would cover records that do not exist), and a snapshot over [`SNAPSHOT_LEN_MAX`].
    fn put_snapshot(&mut self, upto: Lsn, snapshot: &[u8]) -> Result<()>;
    /// The durable snapshot as `(upto, bytes)`, if one was ever stored.
    fn snapshot(&self) -> Result<Option<(Lsn, Vec<u8>)>>;
    /// Durably deletes every record with lsn < `lsn` (buffered ones included), so that
    /// [`Log::read_all`] returns only the rest; [`Log::last_lsn`] does not change. Refuses
    /// to drop a record the durable snapshot does not cover (`lsn` > its `upto` + 1, or
    /// `lsn` > 1 without a snapshot), so that snapshot + remaining records always recover
    /// everything. Truncating before an lsn already truncated is a no-op.
    fn truncate_before(&mut self, lsn: Lsn) -> Result<()>;
}

/// Group-commit counters of a log since it was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogStats {
    pub records: u64,
    pub syncs: u64,
    pub bytes: u64,
    /// Writes to the OS without an fsync ([`Log::flush`]).
    pub flushes: u64,
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

/// Checks a [`Log::put_snapshot`] against the current snapshot's `upto` (`current`) and
/// the log's last lsn, before anything is written.
fn check_snapshot(current: Option<Lsn>, last: Lsn, upto: Lsn, len: usize) -> Result<()> {
    if len > SNAPSHOT_LEN_MAX {
        return Err(StorageError::new(format!(
            "snapshot of {len} bytes exceeds the limit of {SNAPSHOT_LEN_MAX} bytes"
        )));
    }
    if let Some(current) = current.filter(|c| upto < *c) {
        return Err(StorageError::new(format!(
            "snapshot up to lsn {upto} would replace a newer one up to lsn {current}"
        )));
    }
    if upto > last {
        return Err(StorageError::new(format!(
            "snapshot up to lsn {upto} covers records never appended (last lsn {last})"
        )));
    }
    Ok(())
}

/// Checks that [`Log::truncate_before`] `lsn` drops only records covered by the durable
/// snapshot (up to `covered`, `None` without a snapshot).
fn check_truncate(covered: Option<Lsn>, lsn: Lsn) -> Result<()> {
    let limit = covered.map_or(1, |upto| upto.saturating_add(1));
    if lsn > limit {
        let have = covered.map_or("no snapshot".to_string(), |u| {
            format!("a snapshot up to lsn {u}")
        });
        return Err(StorageError::new(format!(
            "truncating before lsn {lsn} would drop records not covered by the snapshot \
             (the log has {have}); write a snapshot up to lsn {} first",
            lsn - 1
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
