//! Both logs keep records in lsn order across reopen, refuse out-of-order lsns, and lose
//! only what was never synced.

use causeway_storage::{meta_u64, FjallLog, Log, MemLog};
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
