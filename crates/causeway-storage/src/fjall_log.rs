//! [`FjallLog`]: the log on fjall 3, one database per node directory.
//!
//! Records live in keyspace `log` under their lsn (8 bytes, big-endian, so that key order
//! is lsn order); metadata in keyspace `meta`. The database is opened with
//! `manual_journal_persist(true)`: appends go to a write batch in memory, and `sync`
//! commits that batch to the journal and calls `persist(PersistMode::SyncData)` once:
//! that one fdatasync is the group commit for every record of the batch.

use crate::{check_meta, check_order, Log, LogStats, Result, StorageError};
use causeway_core::Lsn;
use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};
use std::path::{Path, PathBuf};

pub struct FjallLog {
    path: PathBuf,
    db: Database,
    log: Keyspace,
    meta: Keyspace,
    pending: Vec<(Lsn, Vec<u8>)>,
    last: Lsn,
    stats: LogStats,
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
        let db = Database::builder(&path)
            .manual_journal_persist(true)
            .worker_threads(1)
            .cache_size(8 << 20)
            .open()
            .map_err(|e| {
                err(
                    &path,
                    "cannot open the database (is another node using it?)",
                    e,
                )
            })?;
        let log = db
            .keyspace("log", KeyspaceCreateOptions::default)
            .map_err(|e| err(&path, "cannot open keyspace 'log'", e))?;
        let meta = db
            .keyspace("meta", KeyspaceCreateOptions::default)
            .map_err(|e| err(&path, "cannot open keyspace 'meta'", e))?;
        let last = match log.last_key_value() {
            Some(guard) => decode_lsn(&path, &guard.key().map_err(|e| err(&path, "read", e))?)?,
            None => 0,
        };
        Ok(FjallLog {
            path,
            db,
            log,
            meta,
            pending: Vec::new(),
            last,
            stats: LogStats::default(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
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

impl Log for FjallLog {
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
        self.db
            .persist(PersistMode::SyncData)
            .map_err(|e| err(&self.path, "cannot fsync the journal", e))?;
        self.stats.records += records;
        self.stats.bytes += bytes;
        self.stats.syncs += 1;
        Ok(())
    }

    fn read_all(&self) -> Result<Vec<(Lsn, Vec<u8>)>> {
        let mut out = Vec::new();
        for guard in self.log.iter() {
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
}
