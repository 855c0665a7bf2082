//! The node's Prometheus metrics: one recorder per node (not the process-global one of the
//! `metrics` crate, because tests and embedders run several nodes in one process), with
//! the labels `protocol`, `dc` and `node` on every series, and typed handles for the
//! parts of the runtime that feed it:
//!
//! - [`TxnMetrics`] (node task): commits by kind, aborts by reason, Begin-to-Committed
//!   latency of the transactions run through the node's hosted sessions;
//! - [`MachineMetrics`] (node task): every sample the machine reports becomes a histogram
//!   (`*_ns` in seconds as `causeway_*_seconds`, any other name as `causeway_<name>`), every
//!   machine gauge a gauge `causeway_<name>`; nothing here knows any protocol's names;
//! - [`DiskMetrics`] (storage thread): group-commit batch sizes and write times;
//! - the scrape-time gauges (sessions, connections, link queues), set by whoever renders.
//!
//! The exporter buffers histogram values until a render or an upkeep folds them into the
//! buckets, so [`run_upkeep`] does that every [`UPKEEP_INTERVAL`]: a node nobody scrapes
//! (or with no `metrics_addr`) must not keep every sample it ever took.
//!
//! Label values and machine-provided names are bounded (`*_MAX`): a series costs memory
//! for the life of the process and every scrape, so an unbounded source (abort reasons are
//! free text) must not grow them without limit.

use metrics::{Counter, Gauge, Histogram, Key, KeyName, Label, Level, Metadata, Recorder};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Most distinct abort reasons counted apart; later ones count under `other`.
pub const ABORT_REASONS_MAX: usize = 16;
/// Longest abort reason kept as a label value (longer ones are cut).
pub const REASON_CHARS_MAX: usize = 64;
/// Most distinct machine sample and gauge names exported; later ones are ignored.
pub const MACHINE_NAMES_MAX: usize = 256;
/// How often buffered histogram values are folded into their buckets.
pub const UPKEEP_INTERVAL: Duration = Duration::from_secs(5);
/// Buckets of every `*_seconds` histogram: 50 µs to 10 s.
const SECONDS_BUCKETS: &[f64] = &[
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0,
];
/// Buckets of every other histogram (counts such as records per batch): powers of two.
const COUNT_BUCKETS: &[f64] = &[
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 4096.0, 16384.0, 65536.0,
];

static META: Metadata<'static> = Metadata::new(module_path!(), Level::INFO, Some(module_path!()));

/// Who the node is, for the labels on every series.
#[derive(Clone, Debug)]
pub struct NodeLabels {
    pub protocol: String,
    pub dc: String,
    pub node: String,
}

struct Inner {
    recorder: metrics_exporter_prometheus::PrometheusRecorder,
    handle: PrometheusHandle,
}

/// One node's metrics registry. Cheap to clone: clones share it.
#[derive(Clone)]
pub struct NodeMetrics {
    inner: Arc<Inner>,
}

impl NodeMetrics {
    pub fn new(labels: &NodeLabels) -> NodeMetrics {
        let builder = PrometheusBuilder::new()
            .add_global_label("protocol", &labels.protocol)
            .add_global_label("dc", &labels.dc)
            .add_global_label("node", &labels.node)
            .set_buckets(COUNT_BUCKETS)
            .and_then(|b| {
                b.set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS_BUCKETS)
            })
            .expect("the bucket lists are non-empty");
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        let metrics = NodeMetrics {
            inner: Arc::new(Inner { recorder, handle }),
        };
        metrics.describe_fixed();
        metrics
    }

    /// Folds buffered histogram values into their buckets.
    pub fn upkeep(&self) {
        self.inner.handle.run_upkeep();
    }

    /// The Prometheus text exposition of every series.
    pub fn render(&self) -> String {
        self.inner.handle.render()
    }

    fn key(name: &str, labels: &[(&'static str, String)]) -> Key {
        let labels: Vec<Label> = labels
            .iter()
            .map(|(k, v)| Label::new(*k, v.clone()))
            .collect();
        Key::from_parts(name.to_string(), labels)
    }

    pub fn counter(&self, name: &str, labels: &[(&'static str, String)]) -> Counter {
        let key = Self::key(name, labels);
        self.inner.recorder.register_counter(&key, &META)
    }

    pub fn gauge(&self, name: &str, labels: &[(&'static str, String)]) -> Gauge {
        let key = Self::key(name, labels);
        self.inner.recorder.register_gauge(&key, &META)
    }

    pub fn histogram(&self, name: &str) -> Histogram {
        let key = Self::key(name, &[]);
        self.inner.recorder.register_histogram(&key, &META)
    }

    /// `# HELP` lines for the series whose names the runtime fixes.
    fn describe_fixed(&self) {
        let r = &self.inner.recorder;
        let help = |name: &'static str, text: &'static str| (KeyName::from(name), text.into());
        for (name, text) in [
            help(
                COMMITS,
                "Transactions committed through this node's sessions",
            ),
            help(ABORTS, "Transactions aborted through this node's sessions"),
            help(
                LINK_DROPPED,
                "Messages to a peer dropped because the link's queue was full",
            ),
            help(
                LINK_DEAD,
                "Connections to a peer declared dead: what they sent went unacknowledged",
            ),
        ] {
            r.describe_counter(name, None, text);
        }
        for (name, text) in [
            help(
                LATENCY,
                "Begin to Committed of this node's sessions' transactions",
            ),
            help(BATCH, "Records per group-commit batch"),
            help(FSYNC, "Append and fsync of one group-commit batch"),
        ] {
            r.describe_histogram(name, None, text);
        }
        for (name, text) in [
            help(SESSIONS, "Client sessions open on this node"),
            help(CONNECTIONS, "Native client connections open on this node"),
            help(
                LINK_DEPTH,
                "Messages waiting on the outgoing link to a peer",
            ),
            help(
                INBOX_BYTES,
                "Bytes of network messages waiting for the node task",
            ),
        ] {
            r.describe_gauge(name, None, text);
        }
    }

    pub fn txn(&self) -> TxnMetrics {
        TxnMetrics {
            metrics: self.clone(),
            commits: BTreeMap::new(),
            aborts: BTreeMap::new(),
            latency: self.histogram(LATENCY),
        }
    }

    pub fn disk(&self) -> DiskMetrics {
        DiskMetrics {
            batch_records: self.histogram(BATCH),
            write_seconds: self.histogram(FSYNC),
        }
    }

    pub fn machine(&self) -> MachineMetrics {
        MachineMetrics {
            metrics: self.clone(),
            samples: crate::samples::NameMap::default(),
            gauges: BTreeMap::new(),
            overflowed: false,
        }
    }
}

/// Runs [`NodeMetrics::upkeep`] every [`UPKEEP_INTERVAL`], forever.
pub async fn run_upkeep(metrics: NodeMetrics) {
    let mut ticker = tokio::time::interval(UPKEEP_INTERVAL);
    loop {
        ticker.tick().await;
        metrics.upkeep();
    }
}

const COMMITS: &str = "causeway_txn_commits_total";
const ABORTS: &str = "causeway_txn_aborts_total";
const LATENCY: &str = "causeway_txn_latency_seconds";
const BATCH: &str = "causeway_disk_batch_records";
const FSYNC: &str = "causeway_disk_fsync_seconds";
/// Scrape-time gauges: sessions open, native client connections, link queue per peer,
/// bytes of network messages waiting for the node task.
pub const SESSIONS: &str = "causeway_sessions";
pub const CONNECTIONS: &str = "causeway_client_connections";
pub const LINK_DEPTH: &str = "causeway_link_queue_depth";
pub const INBOX_BYTES: &str = "causeway_inbox_bytes";
/// Scrape-time counters per link: messages a full queue dropped, connections declared dead.
pub const LINK_DROPPED: &str = "causeway_link_dropped_total";
pub const LINK_DEAD: &str = "causeway_link_dead_total";

/// Transaction outcomes of the node's hosted sessions.
pub struct TxnMetrics {
    metrics: NodeMetrics,
    commits: BTreeMap<&'static str, Counter>,
    aborts: BTreeMap<String, Counter>,
    latency: Histogram,
}

impl TxnMetrics {
    /// A transaction of `kind` committed `took` after its Begin was submitted (none when
    /// the Begin was not seen: it is counted but not timed).
    pub fn committed(&mut self, kind: &'static str, took: Option<Duration>) {
        let metrics = &self.metrics;
        self.commits
            .entry(kind)
            .or_insert_with(|| metrics.counter(COMMITS, &[("kind", kind.to_string())]))
            .increment(1);
        if let Some(took) = took {
            self.latency.record(took.as_secs_f64());
        }
    }

    /// A transaction aborted with `reason` (free text, bounded as the module doc says).
    pub fn aborted(&mut self, reason: &str) {
        let mut label: String = reason.chars().take(REASON_CHARS_MAX).collect();
        if !self.aborts.contains_key(&label) && self.aborts.len() >= ABORT_REASONS_MAX {
            label = "other".to_string();
        }
        let metrics = &self.metrics;
        self.aborts
            .entry(label)
            .or_insert_with_key(|l| metrics.counter(ABORTS, &[("reason", l.clone())]))
            .increment(1);
    }
}

/// Group-commit measurements of the storage thread.
pub struct DiskMetrics {
    batch_records: Histogram,
    write_seconds: Histogram,
}

impl DiskMetrics {
    pub fn batch(&self, records: usize, took: Duration) {
        self.batch_records.record(records as f64);
        self.write_seconds.record(took.as_secs_f64());
    }
}

/// The machine's samples and gauges, exported under names derived from theirs.
pub struct MachineMetrics {
    metrics: NodeMetrics,
    samples: crate::samples::NameMap<(Histogram, f64)>,
    gauges: BTreeMap<&'static str, Gauge>,
    /// Whether a name was refused, so the overflow is logged once.
    overflowed: bool,
}

/// `causeway_<name>` with anything Prometheus does not allow in a name made `_`.
fn metric_name(name: &str) -> String {
    let clean: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("causeway_{clean}")
}

/// The histogram a sample feeds and the factor its values are scaled by: `*_ns` becomes
/// `*_seconds` (Prometheus' base unit), and so does `STEM_ns.PART` (one series per part,
/// as UniStore's `uniform_extra_ns.from0`) as `STEM_PART_seconds`; anything else keeps its
/// name and value.
fn sample_series(name: &str) -> (String, f64) {
    if let Some(stem) = name.strip_suffix("_ns") {
        return (format!("{}_seconds", metric_name(stem)), 1e-9);
    }
    match name.split_once("_ns.") {
        Some((stem, part)) => (
            format!("{}_seconds", metric_name(&format!("{stem}_{part}"))),
            1e-9,
        ),
        None => (metric_name(name), 1.0),
    }
}

impl MachineMetrics {
    fn room(&mut self, name: &str) -> bool {
        let ok = self.samples.len() + self.gauges.len() < MACHINE_NAMES_MAX;
        if !ok && !self.overflowed {
            self.overflowed = true;
            tracing::warn!(
                name,
                "over {MACHINE_NAMES_MAX} machine metric names: ignoring new ones"
            );
        }
        ok
    }

    /// Records every sample into its name's histogram.
    pub fn samples(&mut self, samples: &[(&'static str, u64)]) {
        for (name, value) in samples {
            if let Some((histogram, scale)) = self.samples.get_mut(name) {
                histogram.record(*value as f64 * *scale);
            } else if self.room(name) {
                let (series, scale) = sample_series(name);
                let histogram = self.metrics.histogram(&series);
                histogram.record(*value as f64 * scale);
                self.samples.insert_new(name, (histogram, scale));
            }
        }
    }

    /// Sets every machine gauge to its current reading.
    pub fn gauges(&mut self, gauges: &[(&'static str, f64)]) {
        for (name, value) in gauges {
            if !self.gauges.contains_key(name) && !self.room(name) {
                continue;
            }
            let metrics = &self.metrics;
            self.gauges
                .entry(name)
                .or_insert_with(|| metrics.gauge(&metric_name(name), &[]))
                .set(*value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> NodeMetrics {
        NodeMetrics::new(&NodeLabels {
            protocol: "p".into(),
            dc: "dc1".into(),
            node: "dc1-n1".into(),
        })
    }

    #[test]
    fn outcomes_samples_and_gauges_render_with_the_node_labels() {
        let m = node();
        let mut txn = m.txn();
        txn.committed("causal", Some(Duration::from_millis(3)));
        txn.aborted("conflict");
        let mut machine = m.machine();
        machine.samples(&[("wait_ns", 2_000_000), ("hops", 3)]);
        machine.gauges(&[("versions", 12.0)]);
        m.disk().batch(5, Duration::from_micros(300));
        let text = m.render();
        let labels = r#"{protocol="p",dc="dc1",node="dc1-n1""#;
        for line in [
            r#"causeway_txn_commits_total{protocol="p",dc="dc1",node="dc1-n1",kind="causal"} 1"#,
            r#"causeway_txn_aborts_total{protocol="p",dc="dc1",node="dc1-n1",reason="conflict"} 1"#,
            "causeway_txn_latency_seconds_count{",
            "causeway_wait_seconds_sum{",
            "causeway_hops_bucket{",
            "causeway_versions{",
            "causeway_disk_batch_records_count{",
            "causeway_disk_fsync_seconds_bucket{",
        ] {
            assert!(text.contains(line), "{line} missing from:\n{text}");
        }
        assert!(text.contains(labels), "labels missing:\n{text}");
        assert!(text.contains("# HELP causeway_txn_commits_total"));
    }

    #[test]
    fn upkeep_keeps_what_was_recorded() {
        let m = node();
        m.disk().batch(3, Duration::from_millis(1));
        m.upkeep();
        m.disk().batch(4, Duration::from_millis(1));
        m.upkeep();
        let sum = r#"causeway_disk_batch_records_sum{protocol="p",dc="dc1",node="dc1-n1"} 7"#;
        assert!(m.render().contains(sum), "{}", m.render());
    }

    #[test]
    fn abort_reasons_beyond_the_limit_count_as_other() {
        let m = node();
        let mut txn = m.txn();
        for i in 0..ABORT_REASONS_MAX + 5 {
            txn.aborted(&format!("reason {i}"));
        }
        txn.aborted(&"x".repeat(REASON_CHARS_MAX * 2));
        let text = m.render();
        let series = text
            .lines()
            .filter(|l| l.starts_with("causeway_txn_aborts_total{"))
            .count();
        assert_eq!(series, ABORT_REASONS_MAX + 1, "{text}");
        assert!(text.contains("reason=\"other\""));
        assert!(!text.contains(&"x".repeat(REASON_CHARS_MAX + 1)));
    }

    #[test]
    fn sample_names_map_to_base_units_and_clean_names() {
        assert_eq!(
            sample_series("gss_lag_ns"),
            ("causeway_gss_lag_seconds".to_string(), 1e-9)
        );
        assert_eq!(sample_series("a-b"), ("causeway_a_b".to_string(), 1.0));
        assert_eq!(
            sample_series("uniform_extra_ns.from1"),
            ("causeway_uniform_extra_from1_seconds".to_string(), 1e-9)
        );
    }
}
