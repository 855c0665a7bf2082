//! The disk side of a node: recovery at boot, and one OS thread that owns the log and
//! performs group commit.
//!
//! The node task sends `Persist` records over a bounded channel; the thread takes every
//! record waiting (up to the storage crate's batch limits), appends them, calls `sync`
//! once (one fdatasync for the whole batch) and only then reports the batch's lsns back to
//! the node task, which calls `handle_persisted` for each, in order. While a sync runs, the
//! next batch accumulates: the busier the node, the bigger the batches. Each batch's size
//! and write time go to the node's metrics ([`DiskMetrics`]) and to the `disk_*` gauges of
//! RESP `INFO` ([`SharedDiskStats`]).
//!
//! With `[storage] durability = "batched"` the thread hands each batch to the OS
//! (`Log::flush`, no fsync) and reports it at once, and fsyncs at most
//! `batched_sync_interval_ms` after the first record not yet synced: a crashed process
//! loses nothing acknowledged, a power failure the last interval (`appendfsync everysec`).
//!
//! With `[storage] group_commit = "auto"` (the default) the node task and the thread share
//! the writer ([`Shared`]): the node task appends and fsyncs a burst itself when the thread
//! holds nothing and recent batches took under `auto_inline_max_us` each (a fast disk:
//! the Redis way, no hand-over), and hands it to the thread otherwise (a slow disk: the
//! node goes on during the fsync). Records stay in lsn order because the node writes only
//! when every record it sent is written.
//!
//! A failed write or fsync stops the thread for good (retrying an fsync after an error can
//! report success for pages the kernel already dropped): the node is told, and no record
//! is reported durable after it.

use crate::config::{Durability, StorageConfig};
use crate::telemetry::DiskMetrics;
use causeway_core::Lsn;
use causeway_storage::{meta_u64, FjallLog, Log, LogStats, BATCH_BYTES_MAX, BATCH_RECORDS_MAX};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// How often the storage thread logs its group-commit counters.
const STATS_INTERVAL: Duration = Duration::from_secs(10);
/// A batch whose append and sync take longer than this is logged as a warning.
const SLOW_SYNC: Duration = Duration::from_millis(200);
/// The session-id epoch is kept below this (20 bits, see `gateway`).
pub const EPOCH_MAX: u64 = (1 << 20) - 1;

/// A record to make durable, or a checkpoint to store as the log's snapshot.
pub struct PersistReq {
    pub lsn: Lsn,
    pub record: Vec<u8>,
    /// `record` is a checkpoint standing for every record up to `lsn`: stored with
    /// `Log::put_snapshot`, then the records it covers are truncated. Not reported back.
    pub snapshot: bool,
}

impl PersistReq {
    pub fn record(lsn: Lsn, record: Vec<u8>) -> PersistReq {
        PersistReq {
            lsn,
            record,
            snapshot: false,
        }
    }

    pub fn snapshot(upto: Lsn, checkpoint: Vec<u8>) -> PersistReq {
        PersistReq {
            lsn: upto,
            record: checkpoint,
            snapshot: true,
        }
    }
}

/// What the storage thread tells the node task.
#[derive(Debug)]
pub enum DiskEvent {
    /// These lsns (ascending) are durable.
    Persisted(Vec<Lsn>),
    /// The disk failed: the node must stop (it can no longer keep its promises).
    Failed(String),
}

/// Refuses a directory written with another key layout (a node holds the keys the layout
/// places on it, and after a change its records would sit in the wrong partitions), or by
/// a build before layouts were recorded (one that placed keys by FNV-1a hash, not by hash
/// slot); records the layout on a directory's first boot.
fn check_layout(log: &mut FjallLog, dir: &Path, layout: &str, booted: bool) -> Result<(), String> {
    let stored = log.get_meta("key_layout").map_err(|e| e.to_string())?;
    match stored {
        Some(s) if s == layout.as_bytes() => Ok(()),
        Some(s) => Err(format!(
            "node directory {} holds keys placed by layout '{}', but the cluster file gives \
             '{layout}'; fix: restore the cluster file's partitions and nodes, or start from \
             an empty data directory",
            dir.display(),
            String::from_utf8_lossy(&s)
        )),
        None if booted => Err(format!(
            "node directory {} was written by an older Causeway that placed keys by FNV-1a \
             hash, not by hash slot; fix: start from an empty data directory",
            dir.display()
        )),
        None => log
            .put_meta("key_layout", layout.as_bytes())
            .map_err(|e| e.to_string()),
    }
}

/// What a node recovers from its directory.
pub struct Recovered {
    pub log: FjallLog,
    /// The snapshot's checkpoint first (if any), then every record after it.
    pub records: Vec<Vec<u8>>,
    pub last_lsn: Lsn,
    /// The log's lsn of the machine's lsn 0: the machine numbers its records on from
    /// `records.len()`, the log from `last_lsn` (truncation made them differ).
    pub lsn_offset: Lsn,
    /// The snapshot's `upto` (0 without one).
    pub snapshot_upto: Lsn,
    /// This boot's epoch: 1 on the first boot, one more on each restart.
    pub epoch: u64,
}

/// Opens the node's log, checks that it was written with the same key `layout` (which
/// keys the node holds: see [`check_layout`]), bumps and syncs its boot epoch, and reads
/// every durable record.
pub fn recover(dir: &Path, layout: &str) -> Result<Recovered, String> {
    let mut log = FjallLog::open(dir).map_err(|e| e.to_string())?;
    let booted = meta_u64(&log, "boot_epoch")
        .map_err(|e| e.to_string())?
        .unwrap_or(0);
    check_layout(&mut log, dir, layout, booted > 0)?;
    let epoch = booted + 1;
    if epoch > EPOCH_MAX {
        return Err(format!(
            "node directory {} has been booted {epoch} times, more than {EPOCH_MAX}",
            dir.display()
        ));
    }
    log.put_meta("boot_epoch", &epoch.to_le_bytes())
        .map_err(|e| e.to_string())?;
    let (snapshot_upto, mut records) = match log.snapshot().map_err(|e| e.to_string())? {
        Some((upto, checkpoint)) => (upto, vec![checkpoint]),
        None => (0, Vec::new()),
    };
    let all = log.read_all().map_err(|e| e.to_string())?;
    // read_all may still hold records the snapshot covers (a truncation cut short).
    records.extend(
        all.into_iter()
            .filter(|(lsn, _)| *lsn > snapshot_upto)
            .map(|(_, r)| r),
    );
    let last_lsn = log.last_lsn();
    let lsn_offset = last_lsn.checked_sub(records.len() as Lsn).ok_or_else(|| {
        format!(
            "node directory {}: {} records recovered but the last lsn is {last_lsn}",
            dir.display(),
            records.len()
        )
    })?;
    Ok(Recovered {
        log,
        records,
        last_lsn,
        lsn_offset,
        snapshot_upto,
        epoch,
    })
}

/// Group-commit counters, shared for reports.
#[derive(Clone, Copy, Debug, Default)]
pub struct GroupCommitStats {
    pub log: LogStats,
    /// Batches written (each one append and one sync, or one flush with `batched`).
    pub batches: u64,
    pub batch_records_max: u64,
    /// Time spent writing batches (append and sync, or append and flush), in ms.
    pub write_ms_total: f64,
    /// The longest append-and-sync of one batch (or one interval sync), in ms.
    pub sync_ms_max: u64,
    /// Batches whose append and sync took longer than `SLOW_SYNC`.
    pub slow_syncs: u64,
    /// The durability setting is `batched`.
    pub batched: bool,
    /// The disk failed: the thread stopped and nothing more becomes durable.
    pub failed: bool,
    /// Checkpoints stored as the log's snapshot (each followed by a truncation).
    pub snapshots: u64,
    /// The last checkpoint's size, in bytes.
    pub snapshot_bytes_last: u64,
    /// The longest time storing one checkpoint and truncating took, in ms.
    pub snapshot_ms_max: u64,
    /// Recent batches' append-and-sync time, in µs (each batch weighs 1/8).
    pub write_us_recent: u64,
    /// Batches the node task wrote itself (`group_commit` `node`, or `auto` on a fast disk).
    pub batches_inline: u64,
}

impl GroupCommitStats {
    /// The counters as `disk_*` gauges for RESP `INFO`.
    pub fn gauges(&self) -> Vec<(String, f64)> {
        let per_batch = |total: f64| {
            if self.batches == 0 {
                0.0
            } else {
                total / self.batches as f64
            }
        };
        let flag = |b: bool| if b { 1.0 } else { 0.0 };
        [
            ("disk_batch_records_max", self.batch_records_max as f64),
            (
                "disk_batch_records_mean",
                per_batch(self.log.records as f64),
            ),
            ("disk_batch_write_ms_mean", per_batch(self.write_ms_total)),
            ("disk_batches", self.batches as f64),
            ("disk_batches_inline", self.batches_inline as f64),
            ("disk_batch_write_us_recent", self.write_us_recent as f64),
            ("disk_durability_batched", flag(self.batched)),
            ("disk_failed", flag(self.failed)),
            ("disk_flushes", self.log.flushes as f64),
            ("disk_records", self.log.records as f64),
            ("disk_records_per_sync", self.log.records_per_sync()),
            ("disk_slow_syncs", self.slow_syncs as f64),
            ("disk_snapshot_bytes_last", self.snapshot_bytes_last as f64),
            ("disk_snapshot_ms_max", self.snapshot_ms_max as f64),
            ("disk_snapshots", self.snapshots as f64),
            ("disk_sync_ms_max", self.sync_ms_max as f64),
            ("disk_syncs", self.log.syncs as f64),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_string(), value))
        .collect()
    }
}

/// The storage thread's counters as it last published them, for the node task's gauges.
#[derive(Clone, Default)]
pub struct SharedDiskStats(Arc<Mutex<GroupCommitStats>>);

impl SharedDiskStats {
    pub fn read(&self) -> GroupCommitStats {
        *self.0.lock().expect("disk stats lock")
    }

    fn publish(&self, stats: &GroupCommitStats) {
        *self.0.lock().expect("disk stats lock") = *stats;
    }
}

/// How the storage thread makes records durable.
#[derive(Clone, Copy, Debug)]
pub struct DiskSetup {
    pub durability: Durability,
    /// With `Batched`: the longest time records stay flushed but not fsynced.
    pub batched_sync_interval: Duration,
}

impl DiskSetup {
    pub fn from_config(config: &StorageConfig) -> DiskSetup {
        DiskSetup {
            durability: config.durability,
            batched_sync_interval: Duration::from_millis(config.batched_sync_interval_ms),
        }
    }
}

/// What writes a node's log: the storage thread (`spawn`), or the node task itself with
/// `[storage] group_commit = "node"` (`Writer::write_now`).
pub struct Writer {
    name: String,
    log: Box<dyn Log>,
    events: mpsc::UnboundedSender<DiskEvent>,
    metrics: DiskMetrics,
    setup: DiskSetup,
    stats: GroupCommitStats,
    shared: SharedDiskStats,
    last_report: Instant,
    /// With `Batched`: since when records were flushed but not fsynced.
    unsynced_since: Option<Instant>,
}

impl Writer {
    /// The writer of node `name`'s log: it reports each batch on `events`, to the
    /// node's `metrics` and to `shared` (`INFO`).
    pub fn new(
        name: String,
        log: Box<dyn Log>,
        events: mpsc::UnboundedSender<DiskEvent>,
        metrics: DiskMetrics,
        setup: DiskSetup,
        shared: SharedDiskStats,
    ) -> Writer {
        let stats = GroupCommitStats {
            batched: setup.durability == Durability::Batched,
            ..GroupCommitStats::default()
        };
        Writer {
            name,
            log,
            events,
            metrics,
            setup,
            stats,
            shared,
            last_report: Instant::now(),
            unsynced_since: None,
        }
    }

    /// With `[storage] group_commit = "node"`: appends and syncs `batch` on the calling
    /// thread (the node task's), then reports it on `events` as the thread would. After
    /// a failure, nothing more is written: the batch is dropped, never reported.
    pub fn write_now(&mut self, batch: Vec<PersistReq>) {
        assert!(
            self.setup.durability == Durability::Sync,
            "the node task writes only with durability = sync (config validation)"
        );
        if !batch.is_empty() && !self.stats.failed {
            self.stats.batches_inline += 1;
        }
        self.write_or_fail(batch);
    }

    /// Appends and syncs `batch` and reports it; after a failure, drops it unreported.
    fn write_or_fail(&mut self, batch: Vec<PersistReq>) {
        if batch.is_empty() || self.stats.failed {
            return;
        }
        if let Err(e) = self.write(batch) {
            self.fail(e);
        }
    }

    /// Whether recent batches were fast enough for the node task to write the next.
    fn fast(&self, inline_max: Duration) -> bool {
        Duration::from_micros(self.stats.write_us_recent) < inline_max
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The counters at the end (the log's included).
    pub fn finish(mut self) -> GroupCommitStats {
        self.final_stats()
    }

    fn final_stats(&mut self) -> GroupCommitStats {
        self.stats.log = self.log.stats();
        self.stats
    }
}

/// With `group_commit = "auto"`: the writer the node task and the storage thread share.
#[derive(Clone)]
pub struct Shared {
    writer: Arc<Mutex<Writer>>,
    /// Records sent to the thread and not yet written by it.
    sent: Arc<AtomicUsize>,
    /// The longest recent append-and-sync for which the node task writes itself.
    inline_max: Duration,
}

impl Shared {
    pub fn new(writer: Writer, inline_max: Duration) -> Shared {
        assert!(
            writer.setup.durability == Durability::Sync,
            "auto group commit only with durability = sync (the server falls back to the thread)"
        );
        Shared {
            writer: Arc::new(Mutex::new(writer)),
            sent: Arc::new(AtomicUsize::new(0)),
            inline_max,
        }
    }

    /// The node task's part: writes `batch` now when the thread holds no record and the
    /// disk was fast (`None`), or gives it back to be sent to the thread, counted as sent.
    pub fn write_or_hand_back(&self, batch: Vec<PersistReq>) -> Option<Vec<PersistReq>> {
        // Acquire: pairs with the thread's release after its write, so the writer's
        // state is the thread's last (the lock orders it too; this keeps it obvious).
        if self.sent.load(Ordering::Acquire) == 0 {
            let mut writer = self.writer.lock().expect("writer lock");
            if writer.fast(self.inline_max) {
                writer.write_now(batch);
                return None;
            }
        }
        Some(self.hand_to_thread(batch))
    }

    /// Counts `batch` as sent to the thread (the node task sends it next).
    pub fn hand_to_thread(&self, batch: Vec<PersistReq>) -> Vec<PersistReq> {
        self.sent.fetch_add(batch.len(), Ordering::AcqRel);
        batch
    }

    /// Records sent to the thread and not yet written.
    pub fn sent(&self) -> usize {
        self.sent.load(Ordering::Acquire)
    }
}

/// Runs the storage thread of `group_commit = "auto"` until the node task drops its
/// sender: it writes what the node task sent, under the shared writer's lock.
pub fn spawn_shared(
    shared: Shared,
    mut rx: mpsc::Receiver<PersistReq>,
) -> std::thread::JoinHandle<GroupCommitStats> {
    let name = shared.writer.lock().expect("writer lock").name.clone();
    std::thread::Builder::new()
        .name(format!("{name}-disk"))
        .spawn(move || {
            while let Some(first) = rx.blocking_recv() {
                let batch = take_batch(first, &mut rx);
                let records = batch.len();
                shared
                    .writer
                    .lock()
                    .expect("writer lock")
                    .write_or_fail(batch);
                // Only now may the node task write again: this batch precedes its next.
                let before = shared.sent.fetch_sub(records, Ordering::AcqRel);
                assert!(before >= records, "more records written than sent");
            }
            shared.writer.lock().expect("writer lock").final_stats()
        })
        .expect("spawn the storage thread")
}

/// Runs a storage thread over `writer` until the node task drops its sender or the disk
/// fails; returns the counters.
pub fn spawn(
    writer: Writer,
    rx: mpsc::Receiver<PersistReq>,
) -> std::thread::JoinHandle<GroupCommitStats> {
    std::thread::Builder::new()
        .name(format!("{}-disk", writer.name))
        .spawn(move || writer.run(rx))
        .expect("spawn the storage thread")
}

/// What the storage thread waits for next.
enum Next {
    Record(PersistReq),
    /// The interval sync of `batched` is due.
    SyncDue,
    Closed,
}

impl Writer {
    fn run(mut self, mut rx: mpsc::Receiver<PersistReq>) -> GroupCommitStats {
        // A current-thread runtime only to wait for a record with a timeout (`batched`).
        let waiter = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a timer runtime for the storage thread");
        loop {
            let next = match self.sync_due_in() {
                None => rx.blocking_recv().map_or(Next::Closed, Next::Record),
                Some(wait) => waiter.block_on(async {
                    match tokio::time::timeout(wait, rx.recv()).await {
                        Ok(Some(r)) => Next::Record(r),
                        Ok(None) => Next::Closed,
                        Err(_) => Next::SyncDue,
                    }
                }),
            };
            let written = match next {
                Next::Record(first) => self.write(take_batch(first, &mut rx)),
                Next::SyncDue => self.interval_sync(),
                Next::Closed => break,
            };
            if let Err(e) = written {
                self.fail(e);
                return self.stats;
            }
        }
        if let Err(e) = self.interval_sync() {
            self.fail(e);
        }
        self.finish()
    }

    /// With unsynced records, how long until their fsync is due (zero when overdue).
    fn sync_due_in(&self) -> Option<Duration> {
        let since = self.unsynced_since?;
        Some(
            self.setup
                .batched_sync_interval
                .saturating_sub(since.elapsed()),
        )
    }

    /// Writes a batch and reports its lsns durable: after its fsync with `Sync`, after
    /// handing it to the OS with `Batched` (the interval sync follows).
    fn write(&mut self, mut batch: Vec<PersistReq>) -> Result<(), String> {
        if let Some(at) = batch.iter().position(|r| r.snapshot) {
            let rest = batch.split_off(at + 1);
            let snapshot = batch.pop().expect("the snapshot request");
            if !batch.is_empty() {
                self.write(batch)?;
            }
            self.store_snapshot(snapshot)?;
            return if rest.is_empty() {
                Ok(())
            } else {
                self.write(rest)
            };
        }
        let began = Instant::now();
        let batched = self.setup.durability == Durability::Batched;
        write_batch(self.log.as_mut(), &batch, batched)?;
        let took = began.elapsed();
        if batched && self.unsynced_since.is_none() {
            self.unsynced_since = Some(began);
        }
        self.stats.batches += 1;
        self.stats.batch_records_max = self.stats.batch_records_max.max(batch.len() as u64);
        self.stats.write_ms_total += took.as_secs_f64() * 1e3;
        let took_us = took.as_micros().min(u128::from(u32::MAX)) as u64;
        self.stats.write_us_recent = (self.stats.write_us_recent * 7 + took_us) / 8;
        note_sync(&self.name, &mut self.stats, took, batch.len());
        self.metrics.batch(batch.len(), took);
        let lsns = batch.iter().map(|r| r.lsn).collect();
        let _ = self.events.send(DiskEvent::Persisted(lsns));
        self.published();
        Ok(())
    }

    /// Stores a checkpoint as the snapshot standing for every record up to its lsn, then
    /// drops those records: the log stays bounded and recovery replays only the rest.
    fn store_snapshot(&mut self, req: PersistReq) -> Result<(), String> {
        let began = Instant::now();
        self.log
            .put_snapshot(req.lsn, &req.record)
            .map_err(|e| e.to_string())?;
        self.log
            .truncate_before(req.lsn + 1)
            .map_err(|e| e.to_string())?;
        let took = began.elapsed();
        self.stats.snapshots += 1;
        self.stats.snapshot_bytes_last = req.record.len() as u64;
        self.stats.snapshot_ms_max = self.stats.snapshot_ms_max.max(took.as_millis() as u64);
        tracing::info!(
            node = %self.name,
            upto = req.lsn,
            bytes = req.record.len(),
            ms = took.as_millis() as u64,
            "checkpoint stored; the records it covers are dropped"
        );
        self.published();
        Ok(())
    }

    /// The fsync of `batched`, at most `batched_sync_interval` after the first unsynced
    /// flush (a no-op when nothing waits for one).
    fn interval_sync(&mut self) -> Result<(), String> {
        if self.unsynced_since.take().is_none() {
            return Ok(());
        }
        let began = Instant::now();
        self.log.sync().map_err(|e| e.to_string())?;
        note_sync(&self.name, &mut self.stats, began.elapsed(), 0);
        self.published();
        Ok(())
    }

    /// Publishes the counters, and logs them every `STATS_INTERVAL`.
    fn published(&mut self) {
        self.stats.log = self.log.stats();
        self.shared.publish(&self.stats);
        if self.last_report.elapsed() >= STATS_INTERVAL {
            self.last_report = Instant::now();
            report(&self.name, &self.stats);
        }
    }

    /// A write or fsync failed: nothing after it may be reported durable (after a failed
    /// fsync the kernel may have dropped the dirty pages, so retrying could "succeed"
    /// without the data), so the thread tells the node and stops.
    fn fail(&mut self, e: String) {
        tracing::error!(node = %self.name, "disk failure: no record is made durable from now on: {e}");
        self.stats.failed = true;
        self.stats.log = self.log.stats();
        self.shared.publish(&self.stats);
        let _ = self.events.send(DiskEvent::Failed(e));
    }
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
        flushes = stats.log.flushes,
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

/// Appends a batch, then syncs it, or with `flush_only` hands it to the OS.
fn write_batch(log: &mut dyn Log, batch: &[PersistReq], flush_only: bool) -> Result<(), String> {
    for r in batch {
        log.append(r.lsn, &r.record).map_err(|e| e.to_string())?;
    }
    let done = if flush_only { log.flush() } else { log.sync() };
    done.map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_storage::MemLog;

    /// The metrics of node `node` of protocol `p` in DC `d`.
    fn node_metrics(node: &str) -> crate::telemetry::NodeMetrics {
        crate::telemetry::NodeMetrics::new(&crate::telemetry::NodeLabels {
            protocol: "p".into(),
            dc: "d".into(),
            node: node.into(),
        })
    }

    #[test]
    fn the_thread_reports_lsns_only_after_sync_and_batches_waiting_records() {
        let (tx, rx) = mpsc::channel(64);
        let (ev_tx, mut ev_rx) = mpsc::unbounded_channel();
        for lsn in 1..=10 {
            tx.try_send(PersistReq::record(lsn, vec![lsn as u8]))
                .unwrap();
        }
        drop(tx);
        let metrics = node_metrics("t");
        let setup = DiskSetup::from_config(&StorageConfig::default());
        let shared = SharedDiskStats::default();
        let stats = spawn(
            Writer::new(
                "t".into(),
                Box::new(MemLog::new()),
                ev_tx,
                metrics.disk(),
                setup,
                shared.clone(),
            ),
            rx,
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
        let gauges = shared.read().gauges();
        let gauge = |name: &str| gauges.iter().find(|(n, _)| n == name).map(|(_, v)| *v);
        assert_eq!(gauge("disk_records"), Some(10.0));
        assert_eq!(gauge("disk_durability_batched"), Some(0.0));
    }

    #[test]
    fn batched_durability_reports_before_the_fsync_and_syncs_within_the_interval() {
        let (tx, rx) = mpsc::channel(64);
        let (ev_tx, mut ev_rx) = mpsc::unbounded_channel();
        let metrics = node_metrics("b");
        let setup = DiskSetup {
            durability: Durability::Batched,
            batched_sync_interval: Duration::from_millis(20),
        };
        let shared = SharedDiskStats::default();
        let thread = spawn(
            Writer::new(
                "b".into(),
                Box::new(MemLog::new()),
                ev_tx,
                metrics.disk(),
                setup,
                shared.clone(),
            ),
            rx,
        );
        for lsn in 1..=5 {
            let record = vec![lsn as u8];
            tx.blocking_send(PersistReq::record(lsn, record)).unwrap();
        }
        let mut seen = Vec::new();
        while seen.len() < 5 {
            match ev_rx.blocking_recv() {
                Some(DiskEvent::Persisted(lsns)) => seen.extend(lsns),
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(seen, (1..=5).collect::<Vec<_>>());
        // The channel stays open: the sync must come from the interval, not from the end.
        let waited = Instant::now();
        while shared.read().log.syncs == 0 {
            assert!(
                waited.elapsed() < Duration::from_secs(5),
                "no interval sync"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let stats = shared.read();
        assert!(stats.batched && stats.log.flushes >= 1, "{stats:?}");
        assert_eq!(
            stats.log.syncs, 1,
            "one sync for every flushed batch: {stats:?}"
        );
        drop(tx);
        let end = thread.join().unwrap();
        assert_eq!((end.log.records, end.log.syncs), (5, 1), "{end:?}");
    }

    #[test]
    fn the_node_task_writes_a_batch_and_hears_of_it_as_from_the_thread() {
        let (ev_tx, mut ev_rx) = mpsc::unbounded_channel();
        let metrics = node_metrics("n");
        let setup = DiskSetup::from_config(&StorageConfig::default());
        let shared = SharedDiskStats::default();
        let log = Box::new(MemLog::new());
        let mut writer = Writer::new("n".into(), log, ev_tx, metrics.disk(), setup, shared);
        let batch = |lsns: std::ops::RangeInclusive<u64>| {
            lsns.map(|l| PersistReq::record(l, vec![l as u8])).collect()
        };
        writer.write_now(batch(1..=3));
        writer.write_now(Vec::new());
        writer.write_now(batch(4..=4));
        let mut heard = Vec::new();
        while let Ok(DiskEvent::Persisted(lsns)) = ev_rx.try_recv() {
            heard.push(lsns);
        }
        assert_eq!(
            heard,
            [vec![1, 2, 3], vec![4]],
            "one report per batch, at once"
        );
        let stats = writer.finish();
        assert_eq!(
            (stats.log.records, stats.log.syncs, stats.batches),
            (4, 2, 2)
        );
    }

    /// A log whose every sync takes `sync_ms` (a slow disk).
    struct SlowLog {
        inner: MemLog,
        sync_ms: u64,
    }

    impl Log for SlowLog {
        fn append(&mut self, lsn: Lsn, record: &[u8]) -> causeway_storage::Result<()> {
            self.inner.append(lsn, record)
        }
        fn sync(&mut self) -> causeway_storage::Result<()> {
            std::thread::sleep(Duration::from_millis(self.sync_ms));
            self.inner.sync()
        }
        fn read_all(&self) -> causeway_storage::Result<Vec<(Lsn, Vec<u8>)>> {
            self.inner.read_all()
        }
        fn last_lsn(&self) -> Lsn {
            self.inner.last_lsn()
        }
        fn get_meta(&self, name: &str) -> causeway_storage::Result<Option<Vec<u8>>> {
            self.inner.get_meta(name)
        }
        fn put_meta(&mut self, name: &str, value: &[u8]) -> causeway_storage::Result<()> {
            self.inner.put_meta(name, value)
        }
        fn stats(&self) -> LogStats {
            self.inner.stats()
        }
        fn put_snapshot(&mut self, upto: Lsn, snapshot: &[u8]) -> causeway_storage::Result<()> {
            self.inner.put_snapshot(upto, snapshot)
        }
        fn snapshot(&self) -> causeway_storage::Result<Option<(Lsn, Vec<u8>)>> {
            self.inner.snapshot()
        }
        fn truncate_before(&mut self, lsn: Lsn) -> causeway_storage::Result<()> {
            self.inner.truncate_before(lsn)
        }
    }

    fn records(lsns: std::ops::RangeInclusive<u64>) -> Vec<PersistReq> {
        lsns.map(|l| PersistReq::record(l, vec![l as u8])).collect()
    }

    /// Every lsn reported durable, in order, until `upto` was.
    fn heard_upto(ev_rx: &mut mpsc::UnboundedReceiver<DiskEvent>, upto: Lsn) -> Vec<Lsn> {
        let mut heard = Vec::new();
        while heard.last() != Some(&upto) {
            match ev_rx.blocking_recv() {
                Some(DiskEvent::Persisted(lsns)) => heard.extend(lsns),
                other => panic!("unexpected {other:?}"),
            }
        }
        heard
    }

    #[test]
    fn auto_writes_on_the_node_while_the_disk_is_fast_and_hands_over_when_slow() {
        let (ev_tx, mut ev_rx) = mpsc::unbounded_channel();
        let (tx, rx) = mpsc::channel(64);
        let log = Box::new(SlowLog {
            inner: MemLog::new(),
            sync_ms: 3,
        });
        let setup = DiskSetup::from_config(&StorageConfig::default());
        let shared_stats = SharedDiskStats::default();
        let metrics = node_metrics("a");
        let writer = Writer::new("a".into(), log, ev_tx, metrics.disk(), setup, shared_stats);
        let shared = Shared::new(writer, Duration::from_millis(1));
        let thread = spawn_shared(shared.clone(), rx);
        // Nothing written yet: the node task writes, until recent syncs average 1 ms.
        let mut next = 1;
        let mut inline = 0;
        while shared.write_or_hand_back(records(next..=next)).is_none() {
            inline += 1;
            next += 1;
            assert!(inline < 100, "a 3 ms sync never counted as slow");
        }
        assert!(
            inline >= 2,
            "the first fast batches were the node's: {inline}"
        );
        assert_eq!(shared.sent(), 1, "the slow disk's batch went to the thread");
        tx.blocking_send(PersistReq::record(next, vec![0])).unwrap();
        let heard = heard_upto(&mut ev_rx, next);
        assert_eq!(heard, (1..=next).collect::<Vec<_>>(), "in lsn order");
        drop(tx);
        let stats = thread.join().unwrap();
        assert_eq!(stats.batches_inline, inline);
        assert_eq!(stats.batches, inline + 1);
        assert_eq!(shared.sent(), 0);
    }

    #[test]
    fn auto_hands_over_while_the_thread_holds_records_so_the_order_holds() {
        let (ev_tx, mut ev_rx) = mpsc::unbounded_channel();
        let (tx, rx) = mpsc::channel(64);
        let setup = DiskSetup::from_config(&StorageConfig::default());
        let metrics = node_metrics("o");
        let log = Box::new(MemLog::new());
        let writer = Writer::new(
            "o".into(),
            log,
            ev_tx,
            metrics.disk(),
            setup,
            Default::default(),
        );
        let shared = Shared::new(writer, Duration::from_secs(1));
        // The thread is not running yet: what is sent stays sent.
        for req in shared.hand_to_thread(records(1..=3)) {
            tx.blocking_send(req).unwrap();
        }
        let batch = shared.write_or_hand_back(records(4..=5));
        let batch = batch.expect("the node must not write past records the thread holds");
        assert_eq!(shared.sent(), 5);
        for req in batch {
            tx.blocking_send(req).unwrap();
        }
        let thread = spawn_shared(shared.clone(), rx);
        assert_eq!(heard_upto(&mut ev_rx, 5), (1..=5).collect::<Vec<_>>());
        // Once the thread wrote them all (it counts down after each batch), the node writes.
        let waited = Instant::now();
        while shared.sent() > 0 {
            assert!(
                waited.elapsed() < Duration::from_secs(5),
                "never counted down"
            );
            std::thread::yield_now();
        }
        assert!(shared.write_or_hand_back(records(6..=6)).is_none());
        assert_eq!(heard_upto(&mut ev_rx, 6), vec![6]);
        drop(tx);
        let stats = thread.join().unwrap();
        assert_eq!((stats.batches_inline, stats.log.records), (1, 6));
    }

    #[test]
    fn recovery_bumps_the_epoch_and_reads_the_records() {
        let dir = std::env::temp_dir().join(format!("causeway-rt-recover-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut r = recover(&dir, "L1").unwrap();
        assert_eq!((r.epoch, r.last_lsn), (1, 0));
        r.log.append(1, b"a").unwrap();
        r.log.append(2, b"b").unwrap();
        r.log.sync().unwrap();
        drop(r);
        let r = recover(&dir, "L1").unwrap();
        assert_eq!((r.epoch, r.last_lsn), (2, 2));
        assert_eq!(r.records, vec![b"a".to_vec(), b"b".to_vec()]);
        drop(r);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn recovery_refuses_another_key_layout_or_a_directory_without_one() {
        let dir = std::env::temp_dir().join(format!("causeway-rt-layout-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        drop(recover(&dir, "slots-v1 partitions=8").unwrap());
        let e = recover(&dir, "slots-v1 partitions=16")
            .err()
            .expect("refused");
        assert!(e.contains("layout 'slots-v1 partitions=8'"), "{e}");
        let r = recover(&dir, "slots-v1 partitions=8").unwrap();
        assert_eq!(r.epoch, 2, "the refused boot did not count");
        drop(r);
        // A directory an older build booted: a boot epoch and no layout.
        let _ = std::fs::remove_dir_all(&dir);
        let mut log = FjallLog::open(&dir).unwrap();
        log.put_meta("boot_epoch", &1u64.to_le_bytes()).unwrap();
        drop(log);
        let e = recover(&dir, "slots-v1 partitions=8")
            .err()
            .expect("refused");
        assert!(e.contains("older Causeway"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
