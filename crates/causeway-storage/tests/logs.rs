//! Both logs keep records in lsn order across reopen, refuse out-of-order lsns, and lose
//! only what was never synced.

use causeway_storage::{
    meta_u64, FjallLog, Log, MemLog, BATCH_RECORDS_MAX, JOURNAL_FILL_BYTES_MAX, SNAPSHOT_LEN_MAX,
};
use std::path::PathBuf;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("causeway-storage-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn exercise(log: &mut dyn Log) {
    for lsn in 1..=100u64 {
        log.append(lsn, format!("record {lsn}").as_bytes()).unwrap();
        if lsn % 10 == 0 {
            log.sync().unwrap();
        }
    }
    assert!(log.append(100, b"again").is_err(), "repeated lsn accepted");
    let all = log.read_all().unwrap();
    assert_eq!(all.len(), 100);
    assert!(all.windows(2).all(|w| w[0].0 < w[1].0));
    assert_eq!(all[41].1, b"record 42");
    assert_eq!(log.stats().syncs, 10);
    assert_eq!(log.stats().records_per_sync(), 10.0);
    log.put_meta("epoch", &7u64.to_le_bytes()).unwrap();
    assert_eq!(meta_u64(log, "epoch").unwrap(), Some(7));
    assert_eq!(meta_u64(log, "absent").unwrap(), None);
}

#[test]
fn mem_log_keeps_synced_records_and_loses_the_rest_on_crash() {
    let mut log = MemLog::new();
    exercise(&mut log);
    log.append(101, b"unsynced").unwrap();
    log.crash();
    assert_eq!(log.read_all().unwrap().len(), 100);
    assert_eq!(log.last_lsn(), 100);
    log.append(101, b"after crash").unwrap();
}

#[test]
fn mem_log_flushed_records_survive_a_crash_not_a_power_loss() {
    let mut log = MemLog::new();
    log.append(1, b"synced").unwrap();
    log.sync().unwrap();
    log.append(2, b"flushed").unwrap();
    log.flush().unwrap();
    let mut crashed = log.clone();
    crashed.crash();
    assert_eq!(
        lsns(&crashed),
        vec![1, 2],
        "a process crash keeps flushed records"
    );
    log.power_loss();
    assert_eq!(lsns(&log), vec![1], "a power loss drops them");
    assert_eq!(log.last_lsn(), 1);
    assert_eq!((log.stats().syncs, log.stats().flushes), (1, 1));
}

#[test]
fn fjall_log_survives_reopen_in_lsn_order() {
    let dir = scratch("reopen");
    {
        let mut log = FjallLog::open(&dir).unwrap();
        exercise(&mut log);
        // Lsn order must not be byte order of decimal strings: 256 > 255 in big-endian.
        log.append(256, b"x").unwrap();
        log.append(257, b"y").unwrap();
        log.sync().unwrap();
    }
    let log = FjallLog::open(&dir).unwrap();
    let all = log.read_all().unwrap();
    assert_eq!(all.len(), 102);
    assert_eq!(all.last().unwrap().0, 257);
    assert_eq!(log.last_lsn(), 257);
    assert_eq!(meta_u64(&log, "epoch").unwrap(), Some(7));
    drop(log);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fjall_log_refuses_a_second_opener() {
    let dir = scratch("lock");
    let _first = FjallLog::open(&dir).unwrap();
    match FjallLog::open(&dir) {
        Ok(_) => panic!("two logs opened the same directory"),
        Err(e) => assert!(e.to_string().contains(&dir.display().to_string()), "{e}"),
    }
    drop(_first);
    let _ = std::fs::remove_dir_all(&dir);
}

// Snapshots and truncation: the generic bodies below run on both logs, so that `MemLog`
// (which the runtime's tests use) keeps the exact semantics of `FjallLog`.

/// Appends `lsns` with a record naming each, then syncs.
fn append_synced(log: &mut dyn Log, lsns: std::ops::RangeInclusive<u64>) {
    for lsn in lsns {
        log.append(lsn, format!("record {lsn}").as_bytes()).unwrap();
    }
    log.sync().unwrap();
}

fn lsns(log: &dyn Log) -> Vec<u64> {
    log.read_all()
        .unwrap()
        .iter()
        .map(|(lsn, _)| *lsn)
        .collect()
}

fn refusal(result: causeway_storage::Result<()>, words: &str) {
    match result {
        Ok(()) => panic!("accepted; expected a refusal mentioning '{words}'"),
        Err(e) => assert!(e.to_string().contains(words), "{e}"),
    }
}

fn snapshot_round_trip_replacement_and_refusals(log: &mut dyn Log) {
    assert_eq!(log.snapshot().unwrap(), None);
    append_synced(log, 1..=10);
    log.put_snapshot(5, b"state at 5").unwrap();
    assert_eq!(log.snapshot().unwrap(), Some((5, b"state at 5".to_vec())));
    log.put_snapshot(8, b"state at 8").unwrap();
    assert_eq!(log.snapshot().unwrap(), Some((8, b"state at 8".to_vec())));
    log.put_snapshot(8, b"").unwrap();
    assert_eq!(log.snapshot().unwrap(), Some((8, Vec::new())));
    refusal(log.put_snapshot(7, b"older"), "newer one up to lsn 8");
    refusal(log.put_snapshot(11, b"future"), "never appended");
    // Zeroed pages are mapped lazily: this costs no real memory.
    let huge = vec![0u8; SNAPSHOT_LEN_MAX + 1];
    refusal(log.put_snapshot(9, &huge), "exceeds the limit");
    assert_eq!(log.snapshot().unwrap(), Some((8, Vec::new())));
    assert_eq!(
        lsns(log),
        (1..=10).collect::<Vec<_>>(),
        "a snapshot truncates nothing"
    );
}

fn truncation_keeps_the_rest_and_the_last_lsn(log: &mut dyn Log) {
    append_synced(log, 1..=20);
    refusal(log.truncate_before(2), "no snapshot");
    log.truncate_before(1).unwrap();
    log.put_snapshot(10, b"s10").unwrap();
    refusal(log.truncate_before(12), "snapshot up to lsn 10");
    assert_eq!(lsns(log).len(), 20, "a refused truncation deleted records");
    log.truncate_before(11).unwrap();
    assert_eq!(lsns(log), (11..=20).collect::<Vec<_>>());
    assert_eq!(log.read_all().unwrap()[0].1, b"record 11");
    assert_eq!(log.last_lsn(), 20);
    log.truncate_before(5).unwrap();
    assert_eq!(
        lsns(log),
        (11..=20).collect::<Vec<_>>(),
        "an older truncation is a no-op"
    );
    refusal(log.append(20, b"again"), "increase strictly");
    append_synced(log, 21..=22);
    assert_eq!(lsns(log), (11..=22).collect::<Vec<_>>());
    assert_eq!(log.snapshot().unwrap(), Some((10, b"s10".to_vec())));
}

fn truncating_everything_keeps_lsns_increasing(log: &mut dyn Log) {
    append_synced(log, 1..=5);
    log.append(6, b"buffered 6").unwrap();
    log.put_snapshot(6, b"s6").unwrap();
    log.truncate_before(7).unwrap();
    log.sync().unwrap();
    assert!(
        lsns(log).is_empty(),
        "a buffered record below the truncation came back"
    );
    assert_eq!(log.last_lsn(), 6);
    refusal(log.append(6, b"again"), "increase strictly");
    append_synced(log, 7..=7);
    assert_eq!(lsns(log), vec![7]);
}

#[test]
fn mem_log_snapshots() {
    snapshot_round_trip_replacement_and_refusals(&mut MemLog::new());
}

#[test]
fn mem_log_truncation() {
    truncation_keeps_the_rest_and_the_last_lsn(&mut MemLog::new());
    truncating_everything_keeps_lsns_increasing(&mut MemLog::new());
}

#[test]
fn fjall_log_snapshots() {
    let dir = scratch("snapshots");
    snapshot_round_trip_replacement_and_refusals(&mut FjallLog::open(&dir).unwrap());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fjall_log_truncation() {
    let dir = scratch("truncation");
    truncation_keeps_the_rest_and_the_last_lsn(&mut FjallLog::open(&dir).unwrap());
    let _ = std::fs::remove_dir_all(&dir);
    truncating_everything_keeps_lsns_increasing(&mut FjallLog::open(&dir).unwrap());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mem_log_crash_after_truncation_keeps_snapshot_and_remaining_records() {
    let mut log = MemLog::new();
    append_synced(&mut log, 1..=20);
    log.put_snapshot(10, b"s10").unwrap();
    log.truncate_before(11).unwrap();
    log.append(21, b"unsynced").unwrap();
    log.crash();
    assert_eq!(log.snapshot().unwrap(), Some((10, b"s10".to_vec())));
    assert_eq!(lsns(&log), (11..=20).collect::<Vec<_>>());
    assert_eq!(log.last_lsn(), 20);
    log.append(21, b"after crash").unwrap();
}

#[test]
fn mem_log_crash_keeps_a_snapshot_of_lost_records_as_the_last_lsn() {
    let mut log = MemLog::new();
    append_synced(&mut log, 1..=5);
    log.append(6, b"unsynced 6").unwrap();
    log.append(7, b"unsynced 7").unwrap();
    log.put_snapshot(6, b"s6").unwrap();
    log.truncate_before(7).unwrap();
    log.crash();
    assert!(lsns(&log).is_empty());
    assert_eq!(log.snapshot().unwrap(), Some((6, b"s6".to_vec())));
    assert_eq!(
        log.last_lsn(),
        6,
        "the snapshot stands for the lost record 6"
    );
    refusal(log.append(6, b"again"), "increase strictly");
    log.append(7, b"after crash").unwrap();
}

#[test]
fn fjall_log_reopen_after_truncation_keeps_last_lsn_and_snapshot() {
    let dir = scratch("truncate-reopen");
    let big: Vec<u8> = (0..2 << 20).map(|i: u32| i as u8).collect();
    {
        let mut log = FjallLog::open(&dir).unwrap();
        append_synced(&mut log, 1..=300);
        log.put_snapshot(100, b"small").unwrap();
        log.put_snapshot(260, &big).unwrap();
        log.truncate_before(261).unwrap();
        log.append(301, b"never synced").unwrap();
    }
    let mut log = FjallLog::open(&dir).unwrap();
    assert_eq!(log.last_lsn(), 300);
    assert_eq!(lsns(&log), (261..=300).collect::<Vec<_>>());
    assert_eq!(log.snapshot().unwrap(), Some((260, big)));
    log.put_snapshot(300, b"everything").unwrap();
    log.truncate_before(301).unwrap();
    drop(log);
    let mut log = FjallLog::open(&dir).unwrap();
    assert!(lsns(&log).is_empty());
    assert_eq!(
        log.last_lsn(),
        300,
        "lsns must not restart after truncating everything"
    );
    assert_eq!(log.snapshot().unwrap(), Some((300, b"everything".to_vec())));
    refusal(log.append(300, b"again"), "increase strictly");
    append_synced(&mut log, 301..=302);
    drop(log);
    let log = FjallLog::open(&dir).unwrap();
    assert_eq!(lsns(&log), vec![301, 302]);
    assert_eq!(log.last_lsn(), 302);
    drop(log);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fjall_log_truncates_more_records_than_one_deletion_batch() {
    let dir = scratch("truncate-many");
    let total = 3 * 64 * 1024 / 2; // 1.5 deletion batches of the implementation
    {
        let mut log = FjallLog::open(&dir).unwrap();
        for start in (1..=total).step_by(BATCH_RECORDS_MAX) {
            append_synced(
                &mut log,
                start..=(start + BATCH_RECORDS_MAX as u64 - 1).min(total),
            );
        }
        log.put_snapshot(total - 1, b"s").unwrap();
        log.truncate_before(total).unwrap();
        assert_eq!(lsns(&log), vec![total]);
    }
    let log = FjallLog::open(&dir).unwrap();
    assert_eq!(lsns(&log), vec![total]);
    assert_eq!(log.last_lsn(), total);
    drop(log);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The child half of `fjall_log_flushed_records_survive_a_killed_process`: appends and
/// flushes (no fsync), then dies at once, running no destructor.
fn flush_then_abort(dir: &std::path::Path) -> ! {
    let mut log = FjallLog::open(dir).unwrap();
    for lsn in 1..=50u64 {
        log.append(lsn, format!("record {lsn}").as_bytes()).unwrap();
        if lsn % 5 == 0 {
            log.flush().unwrap();
        }
    }
    assert_eq!(log.stats().syncs, 0, "flush must not fsync");
    assert_eq!(log.stats().flushes, 10);
    std::process::abort();
}

#[test]
fn fjall_log_flushed_records_survive_a_killed_process() {
    const CHILD: &str = "CAUSEWAY_STORAGE_FLUSH_CHILD";
    if let Ok(dir) = std::env::var(CHILD) {
        flush_then_abort(std::path::Path::new(&dir));
    }
    let dir = scratch("flush-abort");
    let exe = std::env::current_exe().unwrap();
    let status = std::process::Command::new(exe)
        .args([
            "fjall_log_flushed_records_survive_a_killed_process",
            "--exact",
            "--nocapture",
        ])
        .env(CHILD, &dir)
        .status()
        .unwrap();
    assert!(!status.success(), "the child aborts");
    let mut log = FjallLog::open(&dir).unwrap();
    let all = log.read_all().unwrap();
    assert_eq!(all.len(), 50, "every flushed record outlived the process");
    assert_eq!(all[49], (50, b"record 50".to_vec()));
    log.append(51, b"after").unwrap();
    log.sync().unwrap();
    assert_eq!(log.stats().syncs, 1);
    drop(log);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Bytes allocated on disk under `path` (fjall's journal is sparse: its apparent size
/// is 64 MiB from the start).
fn disk_bytes(path: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(path).unwrap();
    if !meta.is_dir() {
        return meta.blocks() * 512;
    }
    let entries = std::fs::read_dir(path).unwrap();
    entries.map(|e| disk_bytes(&e.unwrap().path())).sum()
}

/// The names of the node directory's entries, sorted.
fn entries(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Issue 15: checkpoint after checkpoint, the directory holds one database of about one
/// snapshot (each truncation moves to a new generation and deletes the old one), not a
/// journal, blob files and tables growing with every snapshot and truncated record.
#[test]
fn fjall_log_disk_stays_bounded_over_many_checkpoints() {
    let dir = scratch("bounded");
    let snapshot = 1 << 20;
    let mut log = FjallLog::open(&dir).unwrap();
    for round in 0..12u64 {
        let first = round * 4000 + 1;
        append_synced(&mut log, first..=first + 3999);
        let bytes: Vec<u8> = (0..snapshot)
            .map(|i| (i as u64 * 31 + round) as u8)
            .collect();
        log.put_snapshot(first + 3999, &bytes).unwrap();
        log.truncate_before(first + 4000).unwrap();
    }
    drop(log);
    assert_eq!(entries(&dir), ["CURRENT", "causeway.lock", "gen-12"]);
    let bytes = disk_bytes(&dir);
    // The snapshot and the current generation's journal, its first blocks zero-filled.
    let bound = 3 * snapshot as u64 + JOURNAL_FILL_BYTES_MAX;
    assert!(bytes <= bound, "{bytes} bytes on disk");
    let log = FjallLog::open(&dir).unwrap();
    assert!(lsns(&log).is_empty());
    assert_eq!(log.snapshot().unwrap().unwrap().0, 48_000);
    drop(log);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A directory written before generations (the database at its root) opens in place and
/// moves to a generation at its first truncation, keeping everything; what a crash left
/// of another generation is deleted on open.
#[test]
fn fjall_log_moves_an_old_directory_to_generations() {
    let dir = scratch("legacy");
    {
        let mut log = FjallLog::open(&dir).unwrap();
        append_synced(&mut log, 1..=50);
        log.put_meta("epoch", b"7").unwrap();
    }
    // The old layout: gen-0's database at the root, no CURRENT.
    for name in entries(&dir.join("gen-0")) {
        std::fs::rename(dir.join("gen-0").join(&name), dir.join(&name)).unwrap();
    }
    std::fs::remove_dir(dir.join("gen-0")).unwrap();
    std::fs::remove_file(dir.join("CURRENT")).unwrap();
    std::fs::create_dir_all(dir.join("gen-1").join("junk")).unwrap();
    let mut log = FjallLog::open(&dir).unwrap();
    assert!(!dir.join("gen-1").exists(), "a crash's leftover is deleted");
    assert_eq!(lsns(&log), (1..=50).collect::<Vec<_>>());
    log.put_snapshot(40, b"state").unwrap();
    log.truncate_before(41).unwrap();
    // The old database goes, and the next generation opens ahead, on the log's own
    // thread; closing the log waits for it and deletes the one opened ahead.
    drop(log);
    assert_eq!(entries(&dir), ["CURRENT", "causeway.lock", "gen-1"]);
    let log = FjallLog::open(&dir).unwrap();
    assert_eq!(lsns(&log), (41..=50).collect::<Vec<_>>());
    assert_eq!(log.get_meta("epoch").unwrap(), Some(b"7".to_vec()));
    assert_eq!(log.snapshot().unwrap(), Some((40, b"state".to_vec())));
    drop(log);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A truncation leaves closing and deleting the old generation, and opening the next one,
/// to a thread of the log's own; the next truncation fills that one, and records written
/// in between, the snapshot and the metadata all survive a reopen.
#[test]
fn fjall_log_opens_the_next_generation_ahead() {
    let dir = scratch("ahead");
    let mut log = FjallLog::open(&dir).unwrap();
    append_synced(&mut log, 1..=100);
    log.put_meta("epoch", b"3").unwrap();
    log.put_snapshot(60, b"first").unwrap();
    log.truncate_before(61).unwrap();
    append_synced(&mut log, 101..=150);
    log.put_snapshot(120, b"second").unwrap();
    log.truncate_before(121).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while entries(&dir) != ["CURRENT", "causeway.lock", "gen-2", "gen-3"] {
        assert!(std::time::Instant::now() < deadline, "{:?}", entries(&dir));
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    append_synced(&mut log, 151..=160);
    drop(log);
    assert_eq!(entries(&dir), ["CURRENT", "causeway.lock", "gen-2"]);
    let log = FjallLog::open(&dir).unwrap();
    assert_eq!(lsns(&log), (121..=160).collect::<Vec<_>>());
    assert_eq!(log.snapshot().unwrap(), Some((120, b"second".to_vec())));
    assert_eq!(log.get_meta("epoch").unwrap(), Some(b"3".to_vec()));
    drop(log);
    let _ = std::fs::remove_dir_all(&dir);
}
