//! The disk side of a node: recovery at boot, and one OS thread that owns the log and
//! performs group commit.
//!
//! The node task sends `Persist` records over a bounded channel; the thread takes every
//! record waiting (up to the storage crate's batch limits), appends them, calls `sync`
//! once (one fdatasync for the whole batch) and only then reports the batch's lsns back to
//! the node task, which calls `handle_persisted` for each, in order. While a sync runs, the
//! next batch accumulates: the busier the node, the bigger the batches. Each batch's size
//! and write time go to the node's metrics ([`DiskMetrics`]).

use crate::telemetry::DiskMetrics;
use causeway_core::Lsn;
use causeway_storage::{meta_u64, FjallLog, Log, LogStats, BATCH_BYTES_MAX, BATCH_RECORDS_MAX};
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// How often the storage thread logs its group-commit counters.
const STATS_INTERVAL: Duration = Duration::from_secs(10);
/// A batch whose append and sync take longer than this is logged as a warning.
const SLOW_SYNC: Duration = Duration::from_millis(200);
/// The session-id epoch is kept below this (20 bits, see `gateway`).
pub const EPOCH_MAX: u64 = (1 << 20) - 1;

/// A record to make durable.
pub struct PersistReq {
    pub lsn: Lsn,
    pub record: Vec<u8>,
}

/// What the storage thread tells the node task.
#[derive(Debug)]
pub enum DiskEvent {
    /// These lsns (ascending) are durable.
    Persisted(Vec<Lsn>),
    /// The disk failed: the node must stop (it can no longer keep its promises).
    Failed(String),
}

/// What a node recovers from its directory.
pub struct Recovered {
    pub log: FjallLog,
    pub records: Vec<Vec<u8>>,
    pub last_lsn: Lsn,
    /// This boot's epoch: 1 on the first boot, one more on each restart.
    pub epoch: u64,
}

/// Opens the node's log, bumps and syncs its boot epoch, and reads every durable record.
pub fn recover(dir: &Path) -> Result<Recovered, String> {
    let mut log = FjallLog::open(dir).map_err(|e| e.to_string())?;
    let epoch = meta_u64(&log, "boot_epoch")
        .map_err(|e| e.to_string())?
        .unwrap_or(0)
        + 1;
    if epoch > EPOCH_MAX {
        return Err(format!(
            "node directory {} has been booted {epoch} times, more than {EPOCH_MAX}",
            dir.display()
        ));
    }
    log.put_meta("boot_epoch", &epoch.to_le_bytes())
        .map_err(|e| e.to_string())?;
    let all = log.read_all().map_err(|e| e.to_string())?;
    let last_lsn = all.last().map_or(0, |(lsn, _)| *lsn);
    let records = all.into_iter().map(|(_, r)| r).collect();
    Ok(Recovered {
        log,
        records,
        last_lsn,
        epoch,
    })
}

/// Group-commit counters, shared for reports.
#[derive(Clone, Copy, Debug, Default)]
pub struct GroupCommitStats {
    pub log: LogStats,
    pub batch_records_max: u64,
    /// The longest append-and-sync of one batch, in ms.
    pub sync_ms_max: u64,
    /// Batches whose append and sync took longer than `SLOW_SYNC`.
    pub slow_syncs: u64,
}

/// Runs the storage thread until the node task drops its sender; returns the counters.
pub fn spawn(
    name: String,
    mut log: Box<dyn Log>,
    mut rx: mpsc::Receiver<PersistReq>,
    events: mpsc::UnboundedSender<DiskEvent>,
    metrics: DiskMetrics,
) -> std::thread::JoinHandle<GroupCommitStats> {
    std::thread::Builder::new()
        .name(format!("{name}-disk"))
        .spawn(move || {
            let mut stats = GroupCommitStats::default();
            let mut last_report = Instant::now();
            while let Some(first) = rx.blocking_recv() {
                let batch = take_batch(first, &mut rx);
                stats.batch_records_max = stats.batch_records_max.max(batch.len() as u64);
                let began = Instant::now();
                let written = write_batch(log.as_mut(), &batch);
                note_sync(&name, &mut stats, began.elapsed(), batch.len());
                metrics.batch(batch.len(), began.elapsed());
                match written {
                    Ok(()) => {
                        let lsns = batch.iter().map(|r| r.lsn).collect();
                        let _ = events.send(DiskEvent::Persisted(lsns));
                    }
                    Err(e) => {
                        tracing::error!(node = %name, "disk failure, stopping the node: {e}");
                        let _ = events.send(DiskEvent::Failed(e));
                        break;
                    }
                }
                stats.log = log.stats();
                if last_report.elapsed() >= STATS_INTERVAL {
                    last_report = Instant::now();
                    report(&name, &stats);
                }
            }
            stats.log = log.stats();
            stats
        })
        .expect("spawn the storage thread")
}

/// Counts a batch's write time, warning about slow ones (a slow disk delays every vote
/// and commit behind it).
fn note_sync(name: &str, stats: &mut GroupCommitStats, took: Duration, records: usize) {
    stats.sync_ms_max = stats.sync_ms_max.max(took.as_millis() as u64);
    if took >= SLOW_SYNC {
        stats.slow_syncs += 1;
        tracing::warn!(
            node = %name,
            ms = took.as_millis() as u64,
            records,
            "slow disk: appending and syncing one batch took this long"
        );
    }
}

/// Logs the group-commit counters.
pub fn report(name: &str, stats: &GroupCommitStats) {
    tracing::info!(
        node = %name,
        records = stats.log.records,
        syncs = stats.log.syncs,
        records_per_sync = format!("{:.1}", stats.log.records_per_sync()),
        batch_records_max = stats.batch_records_max,
        sync_ms_max = stats.sync_ms_max,
        slow_syncs = stats.slow_syncs,
        "group commit"
    );
}

fn take_batch(first: PersistReq, rx: &mut mpsc::Receiver<PersistReq>) -> Vec<PersistReq> {
    let mut bytes = first.record.len();
    let mut batch = vec![first];
    while batch.len() < BATCH_RECORDS_MAX && bytes < BATCH_BYTES_MAX {
        match rx.try_recv() {
            Ok(r) => {
                bytes += r.record.len();
                batch.push(r);
            }
            Err(_) => break,
        }
    }
    batch
}

fn write_batch(log: &mut dyn Log, batch: &[PersistReq]) -> Result<(), String> {
    for r in batch {
        log.append(r.lsn, &r.record).map_err(|e| e.to_string())?;
    }
    log.sync().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_storage::MemLog;

    #[test]
    fn the_thread_reports_lsns_only_after_sync_and_batches_waiting_records() {
        let (tx, rx) = mpsc::channel(64);
        let (ev_tx, mut ev_rx) = mpsc::unbounded_channel();
        for lsn in 1..=10 {
            tx.try_send(PersistReq {
                lsn,
                record: vec![lsn as u8],
            })
            .unwrap();
        }
        drop(tx);
        let labels = crate::telemetry::NodeLabels {
            protocol: "p".into(),
            dc: "d".into(),
            node: "t".into(),
        };
        let metrics = crate::telemetry::NodeMetrics::new(&labels);
        let stats = spawn(
            "t".into(),
            Box::new(MemLog::new()),
            rx,
            ev_tx,
            metrics.disk(),
        )
        .join()
        .unwrap();
        let mut seen = Vec::new();
        while let Ok(DiskEvent::Persisted(lsns)) = ev_rx.try_recv() {
            seen.extend(lsns);
        }
        assert_eq!(seen, (1..=10).collect::<Vec<_>>());
        assert_eq!(stats.log.records, 10);
        assert!(stats.log.syncs < 10, "records were batched: {stats:?}");
        let text = metrics.render();
        let count = r#"causeway_disk_batch_records_sum{protocol="p",dc="d",node="t"} 10"#;
        assert!(text.contains(count), "every record counted once: {text}");
    }

    #[test]
    fn recovery_bumps_the_epoch_and_reads_the_records() {
        let dir = std::env::temp_dir().join(format!("causeway-rt-recover-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut r = recover(&dir).unwrap();
        assert_eq!((r.epoch, r.last_lsn), (1, 0));
        r.log.append(1, b"a").unwrap();
        r.log.append(2, b"b").unwrap();
        r.log.sync().unwrap();
        drop(r);
        let r = recover(&dir).unwrap();
        assert_eq!((r.epoch, r.last_lsn), (2, 2));
        assert_eq!(r.records, vec![b"a".to_vec(), b"b".to_vec()]);
        drop(r);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
