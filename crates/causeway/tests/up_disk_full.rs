//! A node whose disk fills up fails safely (issue 15): no write is acknowledged that is
//! not on disk, the node refuses writes with a clear error and log line instead of dying,
//! and after the disk is fixed every acknowledged write is there.
//!
//! Every way a node writes its log is covered: `group_commit = "auto"` (the default: the
//! node task while the disk is fast), the storage thread (`"thread"`) and the node task
//! alone (`"node"`).
//!
//! The node's data directory is a 16 MiB tmpfs: mounting one needs root (CAP_SYS_ADMIN),
//! so without it the test says so and passes vacuously.

mod up;

use std::path::{Path, PathBuf};
use std::process::Command;
use up::{resp_command, resp_connect, Up};

/// Size of the small filesystem the node writes to.
const DISK_MB: u32 = 16;
/// Value size of each SET: the disk fills after about `DISK_MB * 16` of them.
const VALUE_BYTES: usize = 64 * 1024;
/// Most SETs before the test gives up on filling the disk.
const SETS_MAX: usize = 2_000;

/// A tmpfs mounted on a directory, unmounted on drop (lazily: a node may still hold it).
struct Mount(PathBuf);

impl Mount {
    fn try_new(dir: &Path) -> Option<Mount> {
        std::fs::create_dir_all(dir).expect("create the mount point");
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={DISK_MB}m"), "tmpfs"])
            .arg(dir)
            .status()
            .ok()?;
        status.success().then(|| Mount(dir.to_path_buf()))
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// SETs `k0, k1, ...` until the node refuses one; the keys acknowledged with `+OK` and
/// every error reply seen.
fn fill(resp: &str) -> (Vec<usize>, Vec<String>) {
    let mut conn = resp_connect(resp);
    let value = "v".repeat(VALUE_BYTES);
    let (mut acked, mut errors) = (Vec::new(), Vec::new());
    for i in 0..SETS_MAX {
        let reply = resp_command(&mut conn, &["SET", &format!("k{i}"), &value]);
        if reply == "+OK" {
            acked.push(i);
        } else {
            errors.push(reply.clone());
            if reply.contains("read-only after a disk failure") {
                break;
            }
        }
    }
    (acked, errors)
}

/// Copies every file under `from` into `to` (the node's directory off the small disk).
fn copy_tree(from: &Path, to: &Path) {
    let status = Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", from.display()))
        .arg(to)
        .status()
        .expect("run cp");
    assert!(
        status.success(),
        "copy {} to {}",
        from.display(),
        to.display()
    );
}

#[test]
fn a_full_disk_stops_writes_and_loses_nothing_acknowledged() {
    full_disk_stops_writes_and_loses_nothing("diskfull", &[]);
}

/// The same with the storage thread appending and fsyncing every record
/// (`group_commit = "thread"`).
#[test]
fn a_full_disk_under_the_storage_threads_writes_loses_nothing_either() {
    let thread_writes = "--cluster-set=storage.group_commit=thread";
    full_disk_stops_writes_and_loses_nothing("diskfull-thread", &[thread_writes]);
}

/// The same with the node task appending and fsyncing its own records
/// (`group_commit = "node"`): its writer fails the same way the storage thread's does.
#[test]
fn a_full_disk_under_the_node_tasks_own_writes_loses_nothing_either() {
    let node_writes = "--cluster-set=storage.group_commit=node";
    full_disk_stops_writes_and_loses_nothing("diskfull-node", &[node_writes]);
}

fn full_disk_stops_writes_and_loses_nothing(name: &str, extra: &[&str]) {
    let data = std::env::temp_dir().join(format!("causeway-it-{name}-{}", std::process::id()));
    let Some(mount) = Mount::try_new(&data) else {
        eprintln!("cannot mount a tmpfs (not root?): the disk-full test is skipped");
        return;
    };
    let mut args = vec!["--protocol", "cure"];
    args.extend_from_slice(extra);
    let mut up = Up::start(name, 1, 1, &args);
    let (acked, errors) = fill(&up.resp_addr(0));
    eprintln!(
        "{} SETs acknowledged before the disk filled; errors: {errors:?}",
        acked.len()
    );
    assert!(acked.len() > 20, "some writes fit on the disk: {errors:?}");
    let refusal = errors.last().expect("the disk filled up");
    assert!(
        refusal.contains("read-only after a disk failure") && refusal.contains("No space left"),
        "a clear refusal naming the cause: {refusal}"
    );
    let mut conn = resp_connect(&up.resp_addr(0));
    let info = resp_command(&mut conn, &["INFO", "causeway"]);
    assert!(
        info.contains("disk_failed:1"),
        "INFO shows the failure: {info}"
    );
    let log = std::fs::read_to_string(data.join("dc1-n1.log")).expect("the node's log");
    assert!(log.contains("disk failure"), "a log line says why: {log}");
    assert_eq!(up.live_nodes().len(), 1, "the node stays up, read-only");
    let (status, rest) = up.interrupt();
    assert!(status.success(), "up stops cleanly: {rest:?}");
    // Fix the disk: move the data off the full filesystem, then start again.
    let saved =
        std::env::temp_dir().join(format!("causeway-it-{name}-saved-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&saved);
    std::fs::create_dir_all(&saved).expect("create the copy");
    copy_tree(&data, &saved);
    drop(mount);
    copy_tree(&saved, &data);
    let _ = std::fs::remove_dir_all(&saved);
    up.launch();
    let mut conn = resp_connect(&up.resp_addr(0));
    for i in &acked {
        let value = resp_command(&mut conn, &["GET", &format!("k{i}")]);
        assert_eq!(
            value.len(),
            VALUE_BYTES,
            "acknowledged k{i} survived: {value:.60}"
        );
    }
    let after = resp_command(&mut conn, &["SET", "after", "1"]);
    assert_eq!(after, "+OK", "a fixed disk takes writes again");
}
