//! [`FjallLog`]: the log on fjall 3, one database per node directory.
//!
//! Records live in keyspace `log` under their lsn (8 bytes, big-endian, so that key order
//! is lsn order); metadata in keyspace `meta`. The database is opened with
//! `manual_journal_persist(true)`: appends go to a write batch in memory, and `sync`
//! commits that batch to the journal and calls `persist(PersistMode::SyncData)` once:
//! that one fdatasync is the group commit for every record of the batch.
//!
//! Keyspace `snapshot` holds the snapshot and the truncation point; every call that
//! changes them fsyncs before it returns:
//! - `upto` (8 bytes, big-endian) and `data` (the bytes), written in one atomic batch so
//!   that a crash keeps the old pair or the new one. This keyspace separates large values
//!   into blob files, so compactions do not rewrite a big snapshot;
//! - `floor` (8 bytes, big-endian): every record below it was deleted. Reads and later
//!   truncations start there and so skip the tombstones truncation left behind.
//!
//! Truncation deletes records in batches of [`TRUNCATE_CHUNK`] keys (bounded memory) in
//! lsn order, each batch also moving `floor` past what it deleted, then fsyncs once. The
//! journal keeps batches in order, so a crash midway deletes a prefix of the covered
//! records and leaves `floor` consistent with it.
//!
//! What stays on disk is bounded whatever the node's age (issue 15): after each
//! truncation every memtable is sealed (so fjall can drop the journal files behind them)
//! and a background major compaction of `log` and `snapshot` drops the tombstones and the
//! old snapshots' blob files. The journal itself is fjall's: one file preallocated to 64
//! MiB (sparse), rotated by fjall once past 64 MB, the sealed one deleted once every
//! keyspace flushed past it; fjall 3.1 offers no smaller rotation size, so a restart may
//! replay up to about 64 MB of journal (mostly records already in tables, skipped).
//!
//! The last lsn on open is the largest of the last record's and the snapshot's `upto`:
//! truncation never deletes above `upto`, so that is the last lsn before the crash or
//! close (minus records never synced).

use crate::{
    check_meta, check_order, check_snapshot, check_truncate, Log, LogStats, Result, StorageError,
};
use causeway_core::Lsn;
use fjall::{Database, Keyspace, KeyspaceCreateOptions, KvSeparationOptions, PersistMode};
use std::path::{Path, PathBuf};

/// Most record deletions one truncation batch holds, to bound its memory.
const TRUNCATE_CHUNK: usize = 64 * 1024;
const UPTO_KEY: &str = "upto";
const DATA_KEY: &str = "data";
const FLOOR_KEY: &str = "floor";

pub struct FjallLog {
    path: PathBuf,
    db: Database,
    log: Keyspace,
    meta: Keyspace,
    snap: Keyspace,
    /// The durable snapshot's `upto`, cached so that checks need no read.
    snap_upto: Option<Lsn>,
    /// Every record below this lsn was deleted by truncation.
    floor: Lsn,
    pending: Vec<(Lsn, Vec<u8>)>,
    /// Records were flushed to the OS but not fsynced since.
    unsynced: bool,
    last: Lsn,
    stats: LogStats,
    /// The compaction started by the last truncation (see `compact_in_background`).
    compactor: Option<std::thread::JoinHandle<fjall::Result<()>>>,
}

/// Closing waits for a running compaction: its thread holds the database open (and
/// locked against the next opener).
impl Drop for FjallLog {
    fn drop(&mut self) {
        let _ = self.join_compactor();
    }
}

fn err(path: &Path, what: &str, e: impl std::fmt::Display) -> StorageError {
    StorageError::new(format!("{what} in {}: {e}", path.display()))
}

impl FjallLog {
    /// Opens (or creates) the log in directory `path`. One process per directory: fjall
    /// locks it, and a second opener gets an error naming the directory.
    pub fn open(path: impl AsRef<Path>) -> Result<FjallLog> {
        let path = path.as_ref().to_path_buf();
        std::fs::create_dir_all(&path).map_err(|e| err(&path, "cannot create directory", e))?;
        let db = open_db(&path)?;
        let log = open_keyspace(&db, &path, "log", KeyspaceCreateOptions::default)?;
        let meta = open_keyspace(&db, &path, "meta", KeyspaceCreateOptions::default)?;
        let snap = open_keyspace(&db, &path, "snapshot", snapshot_options)?;
        let snap_upto = get_lsn(&snap, &path, UPTO_KEY)?;
        let floor = get_lsn(&snap, &path, FLOOR_KEY)?.unwrap_or(0);
        let last = last_record(&log, &path)?.max(snap_upto.unwrap_or(0));
        Ok(FjallLog {
            path,
            db,
            log,
            meta,
            snap,
            snap_upto,
            floor,
            pending: Vec::new(),
            unsynced: false,
            last,
            stats: LogStats::default(),
            compactor: None,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn open_db(path: &Path) -> Result<Database> {
    Database::builder(path)
        .manual_journal_persist(true)
        .worker_threads(1)
        .cache_size(8 << 20)
        .open()
        .map_err(|e| {
            err(
                path,
                "cannot open the database (is another node using it?)",
                e,
            )
        })
}

fn open_keyspace(
    db: &Database,
    path: &Path,
    name: &str,
    options: impl FnOnce() -> KeyspaceCreateOptions,
) -> Result<Keyspace> {
    db.keyspace(name, options)
        .map_err(|e| err(path, &format!("cannot open keyspace '{name}'"), e))
}

/// The snapshot keyspace stores big values apart (key-value separation), so that
/// compactions move a pointer, not up to [`crate::SNAPSHOT_LEN_MAX`] bytes.
fn snapshot_options() -> KeyspaceCreateOptions {
    KeyspaceCreateOptions::default().with_kv_separation(Some(KvSeparationOptions::default()))
}

/// The lsn of the last durable record, 0 when there is none.
fn last_record(log: &Keyspace, path: &Path) -> Result<Lsn> {
    match log.last_key_value() {
        Some(guard) => decode_lsn(path, &guard.key().map_err(|e| err(path, "read", e))?),
        None => Ok(0),
    }
}

/// Reads an lsn value (8 bytes, big-endian) of the snapshot keyspace.
fn get_lsn(snap: &Keyspace, path: &Path, key: &str) -> Result<Option<Lsn>> {
    let value = snap
        .get(key)
        .map_err(|e| err(path, &format!("cannot read snapshot key '{key}'"), e))?;
    value.map(|v| decode_lsn(path, &v)).transpose()
}

fn decode_lsn(path: &Path, key: &[u8]) -> Result<Lsn> {
    let bytes = <[u8; 8]>::try_from(key).map_err(|_| {
        err(
            path,
            "corrupt log key",
            format!("{} bytes instead of 8", key.len()),
        )
    })?;
    Ok(Lsn::from_be_bytes(bytes))
}

impl FjallLog {
    /// Commits the appended records to the journal (its in-process buffer): one write
    /// batch, counted in the stats; `sync` or `flush` then persists it.
    fn write_pending(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let mut batch = self.db.batch();
        let mut bytes = 0u64;
        let records = self.pending.len() as u64;
        for (lsn, record) in self.pending.drain(..) {
            bytes += record.len() as u64;
            batch.insert(&self.log, lsn.to_be_bytes(), record);
        }
        batch
            .commit()
            .map_err(|e| err(&self.path, "cannot write the journal", e))?;
        self.stats.records += records;
        self.stats.bytes += bytes;
        Ok(())
    }
}

impl Log for FjallLog {
    fn append(&mut self, lsn: Lsn, record: &[u8]) -> Result<()> {
        check_order(self.last, lsn)?;
        self.last = lsn;
        self.pending.push((lsn, record.to_vec()));
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        if self.pending.is_empty() && !self.unsynced {
            return Ok(());
        }
        self.write_pending()?;
        self.db
            .persist(PersistMode::SyncData)
            .map_err(|e| err(&self.path, "cannot fsync the journal", e))?;
        self.unsynced = false;
        self.stats.syncs += 1;
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        self.write_pending()?;
        self.db
            .persist(PersistMode::Buffer)
            .map_err(|e| err(&self.path, "cannot write the journal to the OS", e))?;
        self.unsynced = true;
        self.stats.flushes += 1;
        Ok(())
    }

    fn read_all(&self) -> Result<Vec<(Lsn, Vec<u8>)>> {
        let mut out = Vec::new();
        for guard in self.log.range(self.floor.to_be_bytes()..) {
            let (k, v) = guard
                .into_inner()
                .map_err(|e| err(&self.path, "cannot read the log", e))?;
            out.push((decode_lsn(&self.path, &k)?, v.to_vec()));
        }
        Ok(out)
    }

    fn last_lsn(&self) -> Lsn {
        self.last
    }

    fn get_meta(&self, name: &str) -> Result<Option<Vec<u8>>> {
        let value = self
            .meta
            .get(name)
            .map_err(|e| err(&self.path, "cannot read metadata", e))?;
        Ok(value.map(|v| v.to_vec()))
    }

    fn put_meta(&mut self, name: &str, value: &[u8]) -> Result<()> {
        check_meta(name, value)?;
        self.meta
            .insert(name, value)
            .map_err(|e| err(&self.path, "cannot write metadata", e))?;
        self.db
            .persist(PersistMode::SyncData)
            .map_err(|e| err(&self.path, "cannot fsync metadata", e))
    }

    fn stats(&self) -> LogStats {
        self.stats
    }

    fn put_snapshot(&mut self, upto: Lsn, snapshot: &[u8]) -> Result<()> {
        check_snapshot(self.snap_upto, self.last, upto, snapshot.len())?;
        let mut batch = self.db.batch();
        batch.insert(&self.snap, UPTO_KEY, upto.to_be_bytes());
        batch.insert(&self.snap, DATA_KEY, snapshot);
        batch
            .commit()
            .map_err(|e| err(&self.path, "cannot write the snapshot", e))?;
        self.persist("cannot fsync the snapshot")?;
        self.snap_upto = Some(upto);
        Ok(())
    }

    fn snapshot(&self) -> Result<Option<(Lsn, Vec<u8>)>> {
        let Some(upto) = get_lsn(&self.snap, &self.path, UPTO_KEY)? else {
            return Ok(None);
        };
        let data = self
            .snap
            .get(DATA_KEY)
            .map_err(|e| err(&self.path, "cannot read the snapshot", e))?
            .ok_or_else(|| err(&self.path, "corrupt snapshot", "'upto' without 'data'"))?;
        Ok(Some((upto, data.to_vec())))
    }

    fn truncate_before(&mut self, lsn: Lsn) -> Result<()> {
        check_truncate(self.snap_upto, lsn)?;
        self.pending.retain(|(l, _)| *l >= lsn);
        if lsn <= self.floor {
            return Ok(());
        }
        while !self.delete_chunk(lsn)? {}
        self.persist("cannot fsync the truncation")?;
        self.release_journal()?;
        self.compact_in_background()
    }
}

impl FjallLog {
    /// Deletes up to [`TRUNCATE_CHUNK`] of the lowest records below `end`; once none
    /// remain, moves `floor` to `end` in the same batch and returns true.
    fn delete_chunk(&mut self, end: Lsn) -> Result<bool> {
        let keys = self.keys_between(self.floor, end)?;
        let done = keys.len() < TRUNCATE_CHUNK;
        let next = if done { end } else { keys[keys.len() - 1] + 1 };
        let mut batch = self.db.batch();
        for lsn in keys {
            batch.remove(&self.log, lsn.to_be_bytes());
        }
        batch.insert(&self.snap, FLOOR_KEY, next.to_be_bytes());
        batch
            .commit()
            .map_err(|e| err(&self.path, "cannot write the truncation", e))?;
        self.floor = next;
        Ok(done)
    }

    /// The lsns of at most [`TRUNCATE_CHUNK`] records in `[start, end)`, in order.
    fn keys_between(&self, start: Lsn, end: Lsn) -> Result<Vec<Lsn>> {
        let range = self.log.range(start.to_be_bytes()..end.to_be_bytes());
        range
            .take(TRUNCATE_CHUNK)
            .map(|guard| {
                let key = guard
                    .key()
                    .map_err(|e| err(&self.path, "cannot read the log", e))?;
                decode_lsn(&self.path, &key)
            })
            .collect()
    }

    /// Seals every keyspace's memtable so fjall flushes them to tables in the
    /// background and drops the journal files behind them: otherwise a restart replays a
    /// journal holding every truncated record and every old snapshot (up to fjall's 512
    /// MiB journal limit), and recovery time would still grow with the node's age.
    fn release_journal(&self) -> Result<()> {
        for keyspace in [&self.log, &self.snap, &self.meta] {
            keyspace
                .rotate_memtable()
                .map_err(|e| err(&self.path, "cannot seal a memtable", e))?;
        }
        Ok(())
    }

    /// Starts merging every table of `log` and `snapshot` into their last level, on a
    /// thread of its own so that the write path does not wait for it. There fjall drops
    /// the tombstones and the values they shadow: without it, leveled compaction only
    /// moved the disjoint (lsn-ordered) tables down, so every truncation left a table of
    /// tombstones (about 10 bytes per truncated record) for good, and every old snapshot
    /// stayed in its blob file until some compaction happened to merge its pointer away
    /// (a blob file per checkpoint, 6 MB each for 100,000 keys).
    ///
    /// It covers the tables flushed so far: what [`FjallLog::release_journal`] just
    /// sealed is flushed in the background and compacted after the next truncation, so
    /// the tables hold at most about one checkpoint interval's tombstones and three
    /// snapshots, whatever the node's age. A compaction still running then is left alone
    /// (the next truncation catches up), and one that failed fails that next truncation.
    fn compact_in_background(&mut self) -> Result<()> {
        if self.compactor.as_ref().is_some_and(|c| !c.is_finished()) {
            return Ok(());
        }
        self.join_compactor()?;
        let (log, snap) = (self.log.clone(), self.snap.clone());
        let compactor = std::thread::Builder::new()
            .name("log-compaction".into())
            .spawn(move || log.major_compact().and_then(|()| snap.major_compact()))
            .map_err(|e| err(&self.path, "cannot start the compaction thread", e))?;
        self.compactor = Some(compactor);
        Ok(())
    }

    /// Waits for the last compaction, if any, and returns its outcome.
    fn join_compactor(&mut self) -> Result<()> {
        let Some(compactor) = self.compactor.take() else {
            return Ok(());
        };
        match compactor.join() {
            Ok(outcome) => outcome.map_err(|e| err(&self.path, "cannot compact the log", e)),
            Err(_) => Err(err(
                &self.path,
                "cannot compact the log",
                "the thread panicked",
            )),
        }
    }

    fn persist(&self, what: &str) -> Result<()> {
        self.db
            .persist(PersistMode::SyncData)
            .map_err(|e| err(&self.path, what, e))
    }
}
