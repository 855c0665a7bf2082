//! Zeros written over the holes of a fjall database's journal files, once, before fjall
//! writes there.
//!
//! fjall preallocates each journal file to 64 MiB by extending it: a sparse file. Every
//! fdatasync of records written into a hole then also allocates the blocks and writes the
//! inode, a second synchronous write before the flush (on this project's ext4 disk,
//! `scripts/fsync-holes`: 120 µs per 2,500-byte write and fdatasync into a sparse file,
//! 88 µs into one written with zeros first; one node served 11-15% more SET per second:
//! BENCHMARKS.md). With the holes filled, an fdatasync writes the data only, as
//! PostgreSQL's zero-filled WAL segments do (`wal_init_zero`).
//!
//! Reading a hole or the zeros written over it gives the same bytes, so fjall reads
//! nothing different. The fill must run while nothing writes the journal (a zero written
//! over fjall's newer bytes would lose them): when a generation's database has just been
//! opened, before the log appends anything.
//!
//! Only the first [`FILL_BYTES_MAX`] of a journal are filled: a generation holds one
//! checkpoint interval of records (100,000 by default, about 7 MB of SETs of small
//! values), so that covers the usual interval's syncs while a node's disk holds 16 MiB
//! per generation instead of fjall's 64. Past it, syncs cost what they did before.
//!
//! It is an optimization only: it fills nothing when the filesystem would keep less than
//! [`FREE_AFTER_MIN_BYTES`] free (a small disk keeps its space for records), and the log
//! goes on without it when it fails (the holes left read as zeros all the same).

use rustix::fs::{fstatvfs, seek, SeekFrom};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// The bytes of a journal, from its start, whose holes are filled.
pub const FILL_BYTES_MAX: u64 = 16 << 20;
/// A fill leaves at least this much of the filesystem free, or fills nothing.
pub const FREE_AFTER_MIN_BYTES: u64 = 1 << 30;
/// Zeros written per `pwrite`.
const CHUNK_BYTES: u64 = 1 << 20;
/// The extension of fjall's journal files.
const JOURNAL_EXTENSION: &str = "jnl";

/// Fills the holes of every journal file of the database at `db`; returns the bytes
/// written (0 when there was no hole, or too little free space).
pub fn fill_journal_holes(db: &Path) -> io::Result<u64> {
    let mut filled = 0;
    for entry in std::fs::read_dir(db)? {
        let path = entry?.path();
        if path.extension().and_then(|e| e.to_str()) == Some(JOURNAL_EXTENSION) {
            let file = OpenOptions::new().read(true).write(true).open(&path)?;
            filled += fill_holes(&file)?;
        }
    }
    Ok(filled)
}

/// Fills the holes of `file` with zeros and fdatasyncs it, if the space allows.
fn fill_holes(file: &File) -> io::Result<u64> {
    let len = file.metadata()?.len().min(FILL_BYTES_MAX);
    let holes = holes(file, len)?;
    let total: u64 = holes.iter().map(|(from, to)| to - from).sum();
    if total == 0 {
        return Ok(0);
    }
    let fs = fstatvfs(file)?;
    let free_bytes = fs.f_bavail.saturating_mul(fs.f_frsize);
    if free_bytes < total.saturating_add(FREE_AFTER_MIN_BYTES) {
        return Ok(0);
    }
    let zeros = vec![0u8; CHUNK_BYTES as usize];
    for (from, to) in holes {
        let mut at = from;
        while at < to {
            let n = (to - at).min(CHUNK_BYTES);
            file.write_all_at(&zeros[..n as usize], at)?;
            at += n;
        }
    }
    file.sync_data()?;
    Ok(total)
}

/// The holes of `file` (its first `len` bytes), as `[from, to)` byte ranges in order.
fn holes(file: &File, len: u64) -> io::Result<Vec<(u64, u64)>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < len {
        let hole = seek(file, SeekFrom::Hole(at))?;
        if hole >= len {
            break;
        }
        // ENXIO: no data after the hole, which runs to the end.
        let data = match seek(file, SeekFrom::Data(hole)) {
            Ok(data) => data.min(len),
            Err(rustix::io::Errno::NXIO) => len,
            Err(e) => return Err(e.into()),
        };
        // A filesystem answering with no progress is not ours to crash on: the fill is
        // an optimization, so it takes the holes found so far.
        if data <= hole {
            break;
        }
        out.push((hole, data));
        at = data;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn temp_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("causeway-fill-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn allocated_bytes(path: &Path) -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).unwrap().blocks() * 512
    }

    #[test]
    fn holes_are_filled_with_zeros_and_the_bytes_read_the_same() {
        let dir = temp_dir("holes");
        let journal = dir.join("0.jnl");
        let other = dir.join("data.bin");
        let len = FILL_BYTES_MAX + 8 * CHUNK_BYTES + 12_345;
        let file = OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&journal)
            .unwrap();
        file.set_len(len).unwrap();
        file.write_all_at(b"head", 0).unwrap();
        file.write_all_at(b"middle", 3 * CHUNK_BYTES).unwrap();
        std::fs::write(&other, b"x").unwrap();
        file.write_all_at(b"tail", FILL_BYTES_MAX + CHUNK_BYTES)
            .unwrap();
        let before = std::fs::read(&journal).unwrap();
        let sparse = allocated_bytes(&journal);
        // Filesystems without holes (or without the free space) fill nothing; the
        // bytes must stay the same either way.
        let filled = fill_journal_holes(&dir).unwrap();
        let mut after = Vec::new();
        File::open(&journal)
            .unwrap()
            .read_to_end(&mut after)
            .unwrap();
        assert!(before == after, "the journal reads the same");
        if filled > 0 {
            assert!(
                filled < FILL_BYTES_MAX,
                "the written blocks are not filled again"
            );
            let allocated = allocated_bytes(&journal);
            assert!(
                allocated >= FILL_BYTES_MAX,
                "the first blocks are allocated"
            );
            assert!(allocated < len, "the blocks past the limit are not");
            let opened = File::open(&journal).unwrap();
            assert!(holes(&opened, FILL_BYTES_MAX).unwrap().is_empty());
            assert!(!holes(&opened, len).unwrap().is_empty());
            assert_eq!(fill_journal_holes(&dir).unwrap(), 0, "nothing left to fill");
        } else {
            eprintln!("no hole filled (allocated {sparse} of {len} bytes)");
        }
        assert_eq!(
            std::fs::read(&other).unwrap(),
            b"x",
            "other files untouched"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn holes_are_found_between_and_after_the_data() {
        let dir = temp_dir("find");
        let path = dir.join("f");
        let file = OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        let len = 4 * CHUNK_BYTES;
        file.set_len(len).unwrap();
        file.write_all_at(&[7u8; 4096], CHUNK_BYTES).unwrap();
        let found = holes(&file, len).unwrap();
        // A filesystem may report no holes at all (then every byte is data); where it
        // does, the data written is never inside one and the holes cover the rest.
        for (from, to) in &found {
            assert!(from < to && *to <= len);
            assert!(
                *to <= CHUNK_BYTES || *from >= CHUNK_BYTES + 4096,
                "{found:?}"
            );
        }
        if !found.is_empty() {
            let total: u64 = found.iter().map(|(f, t)| t - f).sum();
            assert!(total >= len - CHUNK_BYTES - 4096 - 2 * 4096, "{found:?}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
