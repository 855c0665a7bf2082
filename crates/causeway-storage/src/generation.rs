//! Where in a node directory the current fjall database lives (issue 15).
//!
//! Each truncation of [`crate::FjallLog`] moves the log to a fresh database, a
//! *generation*, holding only what survives (metadata, snapshot, records from the
//! truncation point), then deletes the old one. fjall's journal is one file preallocated
//! to 64 MiB that fjall rotates only once past 64 MB, and a restart replays all of it: a
//! fresh database per checkpoint bounds the journal, and so the restart and the disk, by
//! one checkpoint interval instead of fjall's 64 MB, and leaves no tombstones or old
//! snapshots behind to compact.
//!
//! Layout of the directory `DIR`:
//! - `DIR/causeway.lock`: locked (flock) while a log is open, so that a second opener
//!   fails before it reads or cleans anything;
//! - `DIR/CURRENT`: the number `n` of the current generation, replaced atomically
//!   (written to `CURRENT.tmp`, fsynced, renamed, directory fsynced): this rename is the
//!   commit point of a truncation;
//! - `DIR/gen-n/`: generation `n`'s fjall database.
//!
//! A directory written before generations (no `CURRENT`, a fjall database at `DIR`
//! itself, found by fjall's `version` file) is opened in place and moves to generation 1
//! at its first truncation. On open, every generation but the current one (left by a
//! crash before or after a commit point) is deleted, and so is a database at `DIR` itself
//! once `CURRENT` exists.

use crate::{Result, StorageError};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

const LOCK: &str = "causeway.lock";
const CURRENT: &str = "CURRENT";
const CURRENT_TMP: &str = "CURRENT.tmp";
/// fjall's file naming a database directory's format version.
const FJALL_VERSION: &str = "version";

/// Where the current database is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// At the directory itself (a directory written before generations).
    Root,
    /// In `gen-N`.
    Gen(u64),
}

impl Place {
    /// The generation a truncation moves to.
    pub(crate) fn next(self) -> u64 {
        match self {
            Place::Root => 1,
            Place::Gen(n) => n + 1,
        }
    }
}

/// The locked node directory.
pub(crate) struct Layout {
    root: PathBuf,
    /// Held (and locked) while the log is open.
    _lock: File,
}

fn io_err(path: &Path, what: &str, e: impl std::fmt::Display) -> StorageError {
    StorageError::new(format!("{what} in {}: {e}", path.display()))
}

impl Layout {
    /// Creates `root` if needed and locks it; fails if another log holds it. Uses std's
    /// `File::try_lock` (Rust 1.89), as fjall 3.1 does (it needs Rust 1.90 anyway).
    pub(crate) fn lock(root: &Path) -> Result<Layout> {
        std::fs::create_dir_all(root).map_err(|e| io_err(root, "cannot create directory", e))?;
        let path = root.join(LOCK);
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| io_err(root, "cannot open the lock file", e))?;
        lock.try_lock().map_err(|e| {
            io_err(
                root,
                "cannot lock the directory (is another node using it?)",
                e,
            )
        })?;
        Ok(Layout {
            root: root.to_path_buf(),
            _lock: lock,
        })
    }

    /// The current database's place; a new directory starts at generation 0.
    pub(crate) fn current(&self) -> Result<Place> {
        match std::fs::read_to_string(self.root.join(CURRENT)) {
            Ok(text) => text
                .trim()
                .parse()
                .map(Place::Gen)
                .map_err(|e| io_err(&self.root, "corrupt CURRENT file", e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if self.root.join(FJALL_VERSION).exists() {
                    return Ok(Place::Root);
                }
                self.commit(0)?;
                Ok(Place::Gen(0))
            }
            Err(e) => Err(io_err(&self.root, "cannot read CURRENT", e)),
        }
    }

    /// The directory of the database at `place`.
    pub(crate) fn path(&self, place: Place) -> PathBuf {
        path_in(&self.root, place)
    }

    /// Makes generation `n` the current one, durably and atomically.
    pub(crate) fn commit(&self, n: u64) -> Result<()> {
        let tmp = self.root.join(CURRENT_TMP);
        let fail = |e: std::io::Error| io_err(&self.root, "cannot write CURRENT", e);
        let mut file = File::create(&tmp).map_err(fail)?;
        file.write_all(format!("{n}\n").as_bytes()).map_err(fail)?;
        file.sync_all().map_err(fail)?;
        std::fs::rename(&tmp, self.root.join(CURRENT)).map_err(fail)?;
        File::open(&self.root)
            .and_then(|dir| dir.sync_all())
            .map_err(fail)
    }

    /// Deletes every database but the one at `keep`: other generations, and the one at
    /// the directory itself unless it is `keep`. Only names this layout or fjall gives.
    pub(crate) fn remove_others(&self, keep: Place) -> Result<()> {
        remove_others_in(&self.root, keep)
    }

    /// The node directory.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }
}

/// [`Layout::path`] for the directory `root`, callable off the thread that holds the layout.
pub(crate) fn path_in(root: &Path, place: Place) -> PathBuf {
    match place {
        Place::Root => root.to_path_buf(),
        Place::Gen(n) => root.join(format!("gen-{n}")),
    }
}

/// [`Layout::remove_others`] for the directory `root`, callable off the thread that holds
/// the layout (the lock stays with it).
pub(crate) fn remove_others_in(root: &Path, keep: Place) -> Result<()> {
    let entries =
        std::fs::read_dir(root).map_err(|e| io_err(root, "cannot list the directory", e))?;
    for entry in entries {
        let entry = entry.map_err(|e| io_err(root, "cannot list the directory", e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if is_doomed(&name, keep) {
            remove(&entry.path())?;
        }
    }
    Ok(())
}

/// Whether the directory entry `name` belongs to a database other than `keep`'s.
fn is_doomed(name: &str, keep: Place) -> bool {
    if let Some(n) = name
        .strip_prefix("gen-")
        .and_then(|n| n.parse::<u64>().ok())
    {
        return keep != Place::Gen(n);
    }
    // fjall's own entries at the directory itself: the journals, the keyspaces, its
    // version and lock files (see fjall 3.1 `Database::create_new`).
    let fjall_root = name == "keyspaces"
        || name == FJALL_VERSION
        || name == "lock"
        || name
            .strip_suffix(".jnl")
            .is_some_and(|id| id.parse::<u64>().is_ok());
    fjall_root && keep != Place::Root
}

fn remove(path: &Path) -> Result<()> {
    let outcome = if path.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    };
    outcome.map_err(|e| io_err(path, "cannot delete an old database", e))
}
