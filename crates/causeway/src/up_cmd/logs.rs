//! The node logs of `causeway up`, rotated by size so they cannot fill the disk (issue
//! 75): a node's stdout and stderr go into a pipe, and a thread of `up` appends what comes
//! out of it to `DATA/NODE.log`; once that file would pass [`LOG_BYTES_MAX`] it becomes
//! `NODE.log.1` (`.1` becomes `.2`, and so on; the oldest of [`LOG_GENERATIONS_KEPT`] is
//! removed) and a fresh `NODE.log` begins. A node's log thus takes at most
//! `(LOG_GENERATIONS_KEPT + 1) * LOG_BYTES_MAX` bytes. If the log cannot be written (a
//! full disk), the thread keeps reading the pipe and drops what it cannot write, so a
//! node never blocks on its log.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// Largest node log file before it is rotated, in bytes.
pub const LOG_BYTES_MAX: u64 = 64 << 20;
/// Rotated generations kept beside the live log (`NODE.log.1` ... `NODE.log.N`).
pub const LOG_GENERATIONS_KEPT: usize = 3;
/// Bytes the copying thread reads from the pipe at a time.
const PIPE_BUFFER_BYTES: usize = 64 << 10;

/// A log file rotated by size.
pub struct RotatingLog {
    path: PathBuf,
    file: File,
    /// Bytes in the live file.
    len: u64,
    bytes_max: u64,
    kept: usize,
}

impl RotatingLog {
    /// Opens `path` for appending (rotated once it would pass `bytes_max`, with `kept`
    /// older generations).
    pub fn open(path: &Path, bytes_max: u64, kept: usize) -> io::Result<RotatingLog> {
        assert!(bytes_max > 0 && kept > 0, "a log keeps something");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        let len = file.metadata()?.len();
        Ok(RotatingLog {
            path: path.to_path_buf(),
            file,
            len,
            bytes_max,
            kept,
        })
    }

    fn generation(&self, k: usize) -> PathBuf {
        let mut name = self.path.clone().into_os_string();
        name.push(format!(".{k}"));
        PathBuf::from(name)
    }

    /// Shifts the generations by one (dropping the oldest) and starts a fresh live file.
    fn rotate(&mut self) -> io::Result<()> {
        for k in (1..self.kept).rev() {
            let from = self.generation(k);
            if from.exists() {
                std::fs::rename(&from, self.generation(k + 1))?;
            }
        }
        std::fs::rename(&self.path, self.generation(1))?;
        self.file = File::create(&self.path)?;
        self.len = 0;
        Ok(())
    }

    /// Appends `bytes` (whole lines, but for a line longer than the limit), rotating
    /// between lines whenever the next ones would take the live file past its limit.
    pub fn write(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            let room = self.bytes_max.saturating_sub(self.len) as usize;
            let take = match bytes.len() <= room {
                true => bytes.len(),
                false => bytes[..room]
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |i| i + 1),
            };
            if take == 0 && self.len > 0 {
                self.rotate()?;
                continue;
            }
            // A fresh file takes at least one line, however long, so the copy moves on.
            let take = match take {
                0 => bytes
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(bytes.len(), |i| i + 1),
                n => n,
            };
            self.file.write_all(&bytes[..take])?;
            self.len += take as u64;
            bytes = &bytes[take..];
        }
        Ok(())
    }

    /// Copies `input` into the log until its end, cutting after the last whole line of
    /// each read so a rotation falls between lines. A failed write drops those bytes
    /// (reported once on `up`'s stderr) and the copy goes on.
    pub fn copy_from(mut self, input: impl Read) {
        let mut input = BufReader::with_capacity(PIPE_BUFFER_BYTES, input);
        let mut reported = false;
        loop {
            let buf = match input.fill_buf() {
                Ok([]) | Err(_) => return,
                Ok(buf) => buf,
            };
            let cut = buf
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(buf.len(), |i| i + 1);
            if let Err(e) = self.write(&buf[..cut]) {
                if !reported {
                    eprintln!(
                        "cannot write {}: {e}; dropping its lines",
                        self.path.display()
                    );
                    reported = true;
                }
            }
            input.consume(cut);
        }
    }
}

/// The stdout and stderr of node `name`: one pipe, copied by a thread into its rotated
/// log `DATA/NAME.log` until the node exits.
pub fn node_output(data: &Path, name: &str) -> Result<(Stdio, Stdio), String> {
    let path = data.join(format!("{name}.log"));
    let log = RotatingLog::open(&path, LOG_BYTES_MAX, LOG_GENERATIONS_KEPT)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let (reader, writer) = std::io::pipe().map_err(|e| format!("cannot make a pipe: {e}"))?;
    let err = writer.try_clone().map_err(|e| e.to_string())?;
    std::thread::Builder::new()
        .name(format!("log-{name}"))
        .spawn(move || log.copy_from(reader))
        .map_err(|e| format!("cannot start the log thread of {name}: {e}"))?;
    Ok((writer.into(), err.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_rotates_by_size_between_lines_and_keeps_its_generations() {
        let dir = std::env::temp_dir().join(format!("cw-rotate-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("n1.log");
        let log = RotatingLog::open(&path, 100, 2).unwrap();
        let text: String = (0..40)
            .map(|i| format!("line {i:02} of the node\n"))
            .collect();
        log.copy_from(text.as_bytes());
        let live = std::fs::read_to_string(&path).unwrap();
        let one = std::fs::read_to_string(dir.join("n1.log.1")).unwrap();
        let two = std::fs::read_to_string(dir.join("n1.log.2")).unwrap();
        assert!(!dir.join("n1.log.3").exists(), "two generations kept");
        for file in [&live, &one, &two] {
            assert!(file.len() <= 100, "{file:?}");
            assert!(file.ends_with('\n'), "cut between lines: {file:?}");
        }
        assert!(live.ends_with("line 39 of the node\n"), "{live}");
        let newest_first = format!("{two}{one}{live}");
        assert!(text.ends_with(&newest_first), "the last lines, in order");
        let again = RotatingLog::open(&path, 100, 2).unwrap();
        assert_eq!(again.len, live.len() as u64, "reopened, it appends");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
