//! [`FjallLog`]: the log on fjall 3, one database at a time per node directory.
//!
//! Records live in keyspace `log` in runs (`runs.rs`): one entry per run of records written
//! together, under its first lsn, so that key order is lsn order (a directory written
//! before runs holds an entry per record under its bare lsn, read the same way); metadata
//! in keyspace `meta`. The database is opened with
//! `manual_journal_persist(true)`: appends go to a write batch in memory, and `sync`
//! commits that batch to the journal and calls `persist(PersistMode::SyncData)` once:
//! that one fdatasync is the group commit for every record of the batch.
//!
//! Keyspace `snapshot` holds the snapshot and the truncation point; every call that
//! changes them fsyncs before it returns:
//! - `upto` (8 bytes, big-endian) and `data` (the bytes), written in one atomic batch so
//!   that a crash keeps the old pair or the new one. This keyspace separates large values
//!   into blob files, so compactions do not rewrite a big snapshot;
//! - `floor` (8 bytes, big-endian): no record below it is kept. Reads start there (a
//!   directory written before generations may still hold tombstones below it).
//!
//! Truncation moves the log to a fresh database, the next generation of
//! `generation.rs`: it copies the metadata, the snapshot, `floor` and the records
//! from the truncation point (in batches of [`COPY_CHUNK`], bounded memory), fsyncs it,
//! makes it current with one atomic rename, then deletes the old database. Opening a
//! fjall database (10-13 ms here), closing the old one and deleting it (another 9 ms)
//! stalled every record behind the truncation, once per checkpoint: a thread of the log's
//! own ([`tidy`]) now closes and deletes the old generation and opens the next one,
//! empty, ahead of time; the truncation only fills it (under a millisecond). A crash before
//! the rename keeps the old database whole, after it the new one: either way the durable
//! snapshot covers whatever is missing. So the node directory holds one database whose
//! journal has at most the snapshot and one checkpoint interval of records, whatever the
//! node's age (issue 15): fjall would otherwise keep appending to a journal it rotates only
//! at 64 MB (a restart replays all of it), plus a table of tombstones per truncation and
//! old snapshots in blob files until its compactions drop them.
//!
//! The last lsn on open is the largest of the last record's and the snapshot's `upto`:
//! truncation never deletes above `upto`, so that is the last lsn before the crash or
//! close (minus records never synced).

use crate::generation::{path_in, remove_others_in, Layout, Place};
use crate::runs::{decode_entry, key_bound, put_frame, run_key, Pending, RUN_BYTES_MAX};
use crate::{
    check_meta, check_order, check_snapshot, check_truncate, Log, LogStats, Result, StorageError,
};
use causeway_core::Lsn;
use fjall::{Database, Keyspace, KeyspaceCreateOptions, KvSeparationOptions, PersistMode};
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

/// Most entries one batch of a truncation's copy holds, to bound its memory (with
/// [`COPY_CHUNK_BYTES`]).
const COPY_CHUNK: usize = 64 * 1024;
/// Most bytes one batch of a truncation's copy holds.
const COPY_CHUNK_BYTES: usize = 64 * RUN_BYTES_MAX;
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
    /// No record below this lsn is kept.
    floor: Lsn,
    pending: Pending,
    /// Records were flushed to the OS but not fsynced since.
    unsynced: bool,
    last: Lsn,
    stats: LogStats,
    /// The generation `db` is.
    place: Place,
    /// The work the last truncation left to a thread of its own, if any.
    tidying: Option<JoinHandle<Tidied>>,
    /// Last, so that the directory stays locked until the database is closed.
    layout: Layout,
}

fn err(path: &Path, what: &str, e: impl std::fmt::Display) -> StorageError {
    StorageError::new(format!("{what} in {}: {e}", path.display()))
}

/// One opened database of the log.
struct Store {
    db: Database,
    log: Keyspace,
    meta: Keyspace,
    snap: Keyspace,
}

impl Store {
    /// Opens the database at `path` and fills its journal's holes (nothing writes it yet:
    /// see `journal_fill.rs`; best effort, a failure leaves them as they are).
    fn open(path: &Path) -> Result<Store> {
        let db = open_db(path)?;
        let _ = crate::journal_fill::fill_journal_holes(path);
        Ok(Store {
            log: open_keyspace(&db, path, "log", KeyspaceCreateOptions::default)?,
            meta: open_keyspace(&db, path, "meta", KeyspaceCreateOptions::default)?,
            snap: open_keyspace(&db, path, "snapshot", snapshot_options)?,
            db,
        })
    }
}

impl FjallLog {
    /// Opens (or creates) the log in directory `path`. One process per directory: the
    /// log locks it, and a second opener gets an error naming the directory.
    pub fn open(path: impl AsRef<Path>) -> Result<FjallLog> {
        let path = path.as_ref().to_path_buf();
        let layout = Layout::lock(&path)?;
        let place = layout.current()?;
        layout.remove_others(place)?;
        let Store {
            db,
            log,
            meta,
            snap,
        } = Store::open(&layout.path(place))?;
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
            pending: Pending::default(),
            unsynced: false,
            last,
            stats: LogStats::default(),
            place,
            // The first truncation finds its generation open too. Not for a directory
            // still in the layout before generations: it moves at its first truncation.
            tidying: match place {
                Place::Gen(_) => tidy(None, layout.root().to_path_buf(), place),
                Place::Root => None,
            },
            layout,
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
        .map_err(|e| err(path, "cannot open the database", e))
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
    let Some(guard) = log.last_key_value() else {
        return Ok(0);
    };
    let (k, v) = guard.into_inner().map_err(|e| err(path, "read", e))?;
    let records = decode_entry(&k, &v).map_err(|e| err(path, "cannot read the log", e))?;
    Ok(records.last().map_or(0, |(lsn, _)| *lsn))
}

/// The key to read `log` from for the records from `from` on: that of the entry holding
/// `from` or the last below it (a run may start below `from` and hold it), else `from`'s.
fn start_key(log: &Keyspace, path: &Path, from: Lsn) -> Result<Vec<u8>> {
    match log.range(..=key_bound(from)).next_back() {
        Some(guard) => Ok(guard.key().map_err(|e| err(path, "read", e))?.to_vec()),
        None => Ok(from.to_be_bytes().to_vec()),
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
    /// batch of their runs, counted in the stats; `sync` or `flush` then persists it.
    fn write_pending(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let mut batch = self.db.batch();
        let (runs, records, bytes) = self.pending.take();
        for (first, run) in runs {
            batch.insert(&self.log, run_key(first), run);
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
        self.pending.push(lsn, record);
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
        let start = start_key(&self.log, &self.path, self.floor)?;
        for guard in self.log.range(start..) {
            let (k, v) = guard
                .into_inner()
                .map_err(|e| err(&self.path, "cannot read the log", e))?;
            let records =
                decode_entry(&k, &v).map_err(|e| err(&self.path, "cannot read the log", e))?;
            let kept = records.into_iter().filter(|(lsn, _)| *lsn >= self.floor);
            out.extend(kept.map(|(lsn, r)| (lsn, r.to_vec())));
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
        self.pending.retain_from(lsn);
        if lsn <= self.floor {
            return Ok(());
        }
        let next = self.place.next();
        let fresh = match self.spare(next)? {
            Some(spare) => self.fill_generation(spare, next, lsn)?,
            None => self.start_generation(next, lsn)?,
        };
        self.layout.commit(next)?;
        let Store {
            db,
            log,
            meta,
            snap,
        } = fresh;
        let old = Store {
            db: std::mem::replace(&mut self.db, db),
            log: std::mem::replace(&mut self.log, log),
            meta: std::mem::replace(&mut self.meta, meta),
            snap: std::mem::replace(&mut self.snap, snap),
        };
        self.place = Place::Gen(next);
        self.floor = lsn;
        self.unsynced = false;
        // The copy synced every record the old database held: it closes, and goes, off
        // this thread.
        self.tidying = tidy(Some(old), self.layout.root().to_path_buf(), self.place);
        Ok(())
    }
}

/// What a truncation's copy keeps of a `log` entry.
enum Tail {
    Whole,
    /// The records from the copy's start on, as a run from this lsn.
    Part(Lsn, Vec<u8>),
    None,
}

/// What a truncation's [`tidy`] thread did: whether the old generation is gone, and the
/// next generation opened empty (or why not).
struct Tidied {
    removed: Result<()>,
    spare: Result<(u64, Store)>,
}

/// Closes `old` and deletes the generations but `current` in `root` (`old`'s among them;
/// none when the log just opened), then opens generation `current + 1` empty, for the next
/// truncation. One such thread at a time (the log waits for it before the next truncation
/// and on close), so it never races another deletion or opening in the directory. `None`
/// when the thread cannot start: `old` is then closed and deleted here, as before.
fn tidy(old: Option<Store>, root: PathBuf, current: Place) -> Option<JoinHandle<Tidied>> {
    let job = {
        let root = root.clone();
        move || {
            let removed = match old {
                Some(old) => {
                    drop(old);
                    remove_others_in(&root, current)
                }
                None => Ok(()),
            };
            let n = current.next();
            let spare = Store::open(&path_in(&root, Place::Gen(n))).map(|store| (n, store));
            Tidied { removed, spare }
        }
    };
    match std::thread::Builder::new()
        .name("log-tidy".into())
        .spawn(job)
    {
        Ok(handle) => Some(handle),
        // The job, and `old` with it, was dropped: what is left is the deletion.
        Err(_) => {
            let _ = remove_others_in(&root, current);
            None
        }
    }
}

impl Drop for FjallLog {
    /// Waits for the last truncation's thread, and deletes the generation it opened ahead
    /// (before the directory's lock goes with `layout`).
    fn drop(&mut self) {
        let Some(handle) = self.tidying.take() else {
            return;
        };
        if let Ok(Tidied {
            spare: Ok((n, store)),
            ..
        }) = handle.join()
        {
            drop(store);
            let _ = std::fs::remove_dir_all(self.layout.path(Place::Gen(n)));
        }
    }
}

impl FjallLog {
    /// Builds generation `n` of the log, durably: the metadata, the snapshot, `floor` =
    /// `from` and the records from `from` on (those only flushed to the OS included).
    /// Replaces what a crash may have left of an earlier attempt at `n`.
    fn start_generation(&self, n: u64, from: Lsn) -> Result<Store> {
        let path = self.layout.path(Place::Gen(n));
        if path.exists() {
            std::fs::remove_dir_all(&path)
                .map_err(|e| err(&path, "cannot delete an unfinished generation", e))?;
        }
        let fresh = Store::open(&path)?;
        self.fill_generation(fresh, n, from)
    }

    /// Fills `fresh`, the empty database of generation `n`, as [`Self::start_generation`]
    /// describes, and fsyncs it.
    fn fill_generation(&self, fresh: Store, n: u64, from: Lsn) -> Result<Store> {
        self.copy_meta_and_snapshot(&fresh, from)?;
        self.copy_records(&fresh, from)?;
        fresh.db.persist(PersistMode::SyncData).map_err(|e| {
            err(
                &self.layout.path(Place::Gen(n)),
                "cannot fsync the new generation",
                e,
            )
        })?;
        Ok(fresh)
    }

    /// Waits for the last truncation's thread: its error if it could not delete the old
    /// generation, else generation `n` opened empty, if it could open it (if not, the
    /// truncation opens it itself, replacing what the attempt left).
    fn spare(&mut self, n: u64) -> Result<Option<Store>> {
        let Some(handle) = self.tidying.take() else {
            return Ok(None);
        };
        let tidied = handle.join().map_err(|_| {
            err(
                &self.path,
                "cannot tidy the old generation",
                "its thread panicked",
            )
        })?;
        tidied.removed?;
        match tidied.spare {
            Ok((opened, store)) => {
                assert_eq!(opened, n, "the spare is the next generation");
                Ok(Some(store))
            }
            Err(_) => Ok(None),
        }
    }

    fn copy_meta_and_snapshot(&self, fresh: &Store, floor: Lsn) -> Result<()> {
        let mut batch = fresh.db.batch();
        for guard in self.meta.iter() {
            let (k, v) = guard
                .into_inner()
                .map_err(|e| err(&self.path, "cannot read metadata", e))?;
            batch.insert(&fresh.meta, k, v);
        }
        for key in [UPTO_KEY, DATA_KEY] {
            let value = self
                .snap
                .get(key)
                .map_err(|e| err(&self.path, "cannot read the snapshot", e))?;
            if let Some(value) = value {
                batch.insert(&fresh.snap, key, value);
            }
        }
        batch.insert(&fresh.snap, FLOOR_KEY, floor.to_be_bytes());
        batch
            .commit()
            .map_err(|e| err(&self.path, "cannot write the new generation", e))
    }

    /// Copies the records from `from` on, in batches of at most [`COPY_CHUNK`] entries
    /// and [`COPY_CHUNK_BYTES`]. Entries wholly at or above `from` are copied as they are;
    /// a run holding records below it is copied as a run of the rest.
    fn copy_records(&self, fresh: &Store, from: Lsn) -> Result<()> {
        let mut batch = fresh.db.batch();
        let (mut held, mut held_bytes) = (0, 0);
        let start = start_key(&self.log, &self.path, from)?;
        for guard in self.log.range(start..) {
            let (k, v) = guard
                .into_inner()
                .map_err(|e| err(&self.path, "cannot read the log", e))?;
            held_bytes += v.len();
            match self.tail_from(&k, &v, from)? {
                Tail::Whole => batch.insert(&fresh.log, k, v),
                Tail::Part(first, run) => batch.insert(&fresh.log, run_key(first), run),
                Tail::None => {}
            }
            held += 1;
            if held == COPY_CHUNK || held_bytes >= COPY_CHUNK_BYTES {
                let full = std::mem::replace(&mut batch, fresh.db.batch());
                full.commit()
                    .map_err(|e| err(&self.path, "cannot write the new generation", e))?;
                (held, held_bytes) = (0, 0);
            }
        }
        batch
            .commit()
            .map_err(|e| err(&self.path, "cannot write the new generation", e))
    }

    /// What of entry `key` (value `value`) a copy from `from` keeps.
    fn tail_from(&self, key: &[u8], value: &[u8], from: Lsn) -> Result<Tail> {
        let records =
            decode_entry(key, value).map_err(|e| err(&self.path, "cannot read the log", e))?;
        let kept: Vec<_> = records.iter().filter(|(lsn, _)| *lsn >= from).collect();
        if kept.len() == records.len() {
            return Ok(Tail::Whole);
        }
        let Some((first, _)) = kept.first() else {
            return Ok(Tail::None);
        };
        let mut run = Vec::with_capacity(value.len());
        for (lsn, record) in &kept {
            put_frame(&mut run, *lsn, record);
        }
        Ok(Tail::Part(*first, run))
    }

    fn persist(&self, what: &str) -> Result<()> {
        self.db
            .persist(PersistMode::SyncData)
            .map_err(|e| err(&self.path, what, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lsns(log: &FjallLog) -> Vec<Lsn> {
        log.read_all().unwrap().iter().map(|(l, _)| *l).collect()
    }

    #[test]
    fn a_log_written_before_runs_reads_on_beside_runs_and_truncates_through_both() {
        let dir = std::env::temp_dir().join(format!("causeway-runs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        {
            // Records 1-4 as a log before runs wrote them: an entry each, under the lsn.
            let log = FjallLog::open(&dir).unwrap();
            for lsn in 1..=4u64 {
                log.log
                    .insert(lsn.to_be_bytes(), format!("old {lsn}"))
                    .unwrap();
            }
            log.persist("test").unwrap();
        }
        let mut log = FjallLog::open(&dir).unwrap();
        assert_eq!(log.last_lsn(), 4, "the last bare key's lsn");
        for lsn in 5..=9 {
            log.append(lsn, format!("new {lsn}").as_bytes()).unwrap();
        }
        log.sync().unwrap();
        assert_eq!(log.log.len().unwrap(), 5, "four bare entries and one run");
        drop(log);
        let mut log = FjallLog::open(&dir).unwrap();
        assert_eq!(log.last_lsn(), 9, "the last run's last record");
        assert_eq!(lsns(&log), (1..=9).collect::<Vec<_>>());
        log.put_snapshot(6, b"s6").unwrap();
        log.truncate_before(7).unwrap();
        drop(log);
        let log = FjallLog::open(&dir).unwrap();
        let records = log.read_all().unwrap();
        let expected: Vec<(Lsn, Vec<u8>)> = (7..=9)
            .map(|l| (l, format!("new {l}").into_bytes()))
            .collect();
        assert_eq!(records, expected, "the run cut at 7, the bare keys gone");
        assert_eq!(log.last_lsn(), 9);
        drop(log);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_damaged_run_is_refused_naming_the_directory_and_the_damage() {
        let dir = std::env::temp_dir().join(format!("causeway-badrun-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        {
            let log = FjallLog::open(&dir).unwrap();
            // A run whose frame claims 9 bytes and holds 2.
            let mut run = 3u64.to_be_bytes().to_vec();
            run.extend(9u32.to_be_bytes());
            run.extend(b"ab");
            log.log.insert(run_key(3), run).unwrap();
            log.persist("test").unwrap();
        }
        let e = FjallLog::open(&dir)
            .err()
            .expect("a damaged run refused")
            .to_string();
        assert!(e.contains("cannot read the log"), "{e}");
        assert!(e.contains("inside a record"), "{e}");
        assert!(e.contains(&dir.display().to_string()), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
