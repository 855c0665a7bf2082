//! Occult §8 (shared/papers/000): its overhead against a master/slave eventually
//! consistent store, its transactions, and its immunity to slowdown cascades.
//!
//! - `occult-overhead` (Fig. 6): 2 DCs 39 ms apart, YCSB 95:5 single-key operations,
//!   Zipf 0.99; `eventual-ms` (Redis Cluster) against `occult` with structural, temporal
//!   and dc-isolate timestamps of 4, 8 and 16 entries. Findings per size: each scheme's
//!   peak goodput and mean latency against eventual-ms (paper, dc-isolate with 4 entries:
//!   -8.7% goodput, +50 us mean latency), stale reads per DC, metadata bytes.
//! - `occult-txn` (Fig. 7): PC-PSI transactions of 1 to 20 operations (95:5 per
//!   operation, dispatched one after another), dc-isolate with 8 entries. Findings: goodput
//!   in operations per second against single-key operations (paper: 60-70%) and the abort
//!   rate by reason (paper at 20 operations: mostly lock failures).
//! - `occult-slow-nodes` (Fig. 8): the replication into the 1 to 3 slave nodes per DC with
//!   the least read load (tail nodes) slowed by 100 ms (`SimConfig::slow_tail_replication`:
//!   a node's load is the Zipf weight of the keys it holds as a slave), `occult` against
//!   `cure` under the same slowdown. Findings: each peak against no slowdown (paper: Occult unaffected when the
//!   slowed nodes have spare capacity), tail latency, and update visibility: Cure's
//!   stable vector advances only as fast as its slowest partition, so every remote update
//!   at a DC waits (the cascade), while Occult's writes are readable once applied.
//!
//! - `occult-hot-nodes` (Fig. 8a/8c): the same with the slowed slaves those with the most
//!   read load, in decreasing order (`SimConfig::slow_hot_replication`). Findings as for the slowed tail nodes
//!   (paper: throughput falls, no further past two slowed slaves; p95/p99 latency up
//!   faster than with tail nodes, the median unchanged).
//!
//! - `occult-write-heavy` (Fig. 9a/b): the overhead experiment at 75:25 reads:writes with
//!   4 entries (paper: -6.9% goodput, +50 us median and +4 ms p99 latency vs Redis).
//!
//! Scale: 2 DCs of 4 nodes (16 for the slow nodes, half of them slaves: 1 to 3 slowed is
//! 6-19% of them, the paper's 1-3 of 40 is 2.5-7.5%) at one simulated core each, 100,000
//! keys (the paper: 20 servers of 4 processes per DC, 10 million keys); the simulator has
//! no bandwidth limit, the paper's bottleneck, so the CPU model's per-message and per-byte
//! costs stand in for it.

use crate::experiment::{uniform_wan, Curve, Experiment, Kind, Line, Point, QuickCheck, Variant};
use crate::peaks::{PeaksReport, VariantReport};
use causeway_sim::cpu::CpuModel;
use causeway_sim::{FaultSel, ObjectMix, SimConfig, WorkloadFamily};

/// Servers per DC of the overhead and txn experiments.
const SERVERS: u32 = 4;

/// YCSB-B (95% reads) single-key operations, Zipf 0.99, 2 DCs 39 ms apart (§8.1).
fn ycsb_two_dcs() -> SimConfig {
    SimConfig {
        dcs: 2,
        nodes_per_dc: SERVERS,
        partitions: 4 * SERVERS,
        workload: WorkloadFamily::YcsbB,
        keys: 100_000,
        zipf: 0.99,
        txn_ops: 1,
        value_bytes: 100,
        objects: ObjectMix::Lww,
        think_time_ns: 0,
        faults: FaultSel::None,
        inter_dc_one_way_ms: Some(uniform_wan(2, 19.5)),
        // §8.2.1: South Carolina's clocks ran about 22 ms ahead of Wisconsin's.
        dc_clock_offsets_ms: vec![0.0, 22.0],
        // Clients stay in their DC, as in §8 (the sweeps of scripts/test move them).
        migrate_ratio: Some(0.0),
        quiesce_ms: 500,
        allow_unchecked: true,
        check_invariants: false,
        start_spread_ms: 50,
        cpu: CpuModel {
            enabled: true,
            cores: 1,
            ..CpuModel::default()
        },
        ..SimConfig::default()
    }
}

const BASE: Experiment = Experiment {
    name: "",
    figure: "",
    kind: Kind::Sweep,
    protocols: &[],
    lines: &[],
    config: ycsb_two_dcs,
    clients_per_dc: &[16, 64, 256, 1024],
    duration_ms: 600,
    seeds: 1,
    quick_clients_per_dc: &[16, 256],
    quick_duration_ms: 300,
    real_clients_per_dc: &[1],
    real_duration_s: 1,
    quick_real_clients_per_dc: &[1],
    quick_real_duration_s: 1,
    warmup_ms: 200,
    quick_warmup_ms: 100,
    findings: None,
    quick_check: QuickCheck::NONE,
};

macro_rules! entries {
    ($label:expr, $n:expr) => {
        Variant {
            label: $label,
            apply: |c| c.section["entries"] = $n.into(),
        }
    };
}

const SIZES: &[Variant] = &[
    entries!("4 entries", 4),
    entries!("8 entries", 8),
    entries!("16 entries", 16),
];

const SCHEMES: &[Line] = &[
    Line {
        label: "structural",
        protocol: "occult",
        apply: |c| c.section["compression"] = "structural".into(),
    },
    Line {
        label: "temporal",
        protocol: "occult",
        apply: |c| c.section["compression"] = "temporal".into(),
    },
    Line {
        label: "dc-isolate",
        protocol: "occult",
        apply: |c| c.section["compression"] = "dc-isolate".into(),
    },
];

pub const OVERHEAD: Experiment = Experiment {
    name: "occult-overhead",
    figure: "Occult Fig. 6 (2 DCs 39 ms apart, YCSB 95:5 single-key ops, Zipf 0.99): goodput and latency of structural, temporal and dc-isolate causal timestamps of 4 to 16 entries against eventual-ms (Redis Cluster); paper: dc-isolate with 4 entries -8.7% goodput, +50 us mean latency, the others far more stale reads",
    kind: Kind::PeakPerVariant(SIZES),
    protocols: &["eventual-ms"],
    lines: SCHEMES,
    findings: Some(overhead_findings),
    quick_check: QuickCheck {
        must: &["^\\[4 entries\\] dc-isolate"],
        show: "^\\[4 entries\\] dc-isolate",
    },
    ..BASE
};

macro_rules! txn_size {
    ($label:expr, $n:expr) => {
        Variant {
            label: $label,
            apply: |c| c.txn_ops = $n,
        }
    };
}

const TXN_SIZES: &[Variant] = &[
    txn_size!("1 op", 1),
    txn_size!("5 ops", 5),
    txn_size!("10 ops", 10),
    txn_size!("20 ops", 20),
];

fn txn_config() -> SimConfig {
    let mut c = ycsb_two_dcs();
    c.section["entries"] = 8.into();
    c
}

pub const TXN: Experiment = Experiment {
    name: "occult-txn",
    figure: "Occult Fig. 7 (dc-isolate, 8 entries, YCSB 95:5 per op, Zipf 0.99): goodput in ops/s and abort rate by reason vs transaction size; paper: goodput 60-70% of single-key Occult, aborts at 20 ops mostly lock failures",
    kind: Kind::PeakPerVariant(TXN_SIZES),
    protocols: &["occult"],
    config: txn_config,
    findings: Some(txn_findings),
    quick_check: QuickCheck {
        must: &["^\\[20 ops\\]"],
        show: "^\\[20 ops\\]",
    },
    ..BASE
};

/// Nodes per DC of the slow-nodes experiment.
const SLOW_SERVERS: u32 = 16;
/// The replication delay of a slowed slave (§8.3).
const SLOW_NS: u64 = 100_000_000;

fn slow_config() -> SimConfig {
    SimConfig {
        nodes_per_dc: SLOW_SERVERS,
        partitions: 4 * SLOW_SERVERS,
        samples_by_dc: vec!["remote_visibility_ns".into()],
        ..ycsb_two_dcs()
    }
}

/// Slows the replication into the `k` slave nodes of each DC with the least read load
/// (§8.3's tail nodes: `SimConfig::slow_tail_replication`).
fn slow(c: &mut SimConfig, k: u32) {
    c.slow_tail_replication = (k > 0).then_some((k, SLOW_NS));
}

const SLOWED: &[Variant] = &[
    Variant {
        label: "no slow node",
        apply: |c| slow(c, 0),
    },
    Variant {
        label: "1 slow slave/DC",
        apply: |c| slow(c, 1),
    },
    Variant {
        label: "2 slow slaves/DC",
        apply: |c| slow(c, 2),
    },
    Variant {
        label: "3 slow slaves/DC",
        apply: |c| slow(c, 3),
    },
];

pub const SLOW_NODES: Experiment = Experiment {
    name: "occult-slow-nodes",
    figure: "Occult Fig. 8 (2 DCs, YCSB 95:5, replication into 1-3 slave nodes per DC delayed 100 ms): occult's goodput and latency against no slowdown, and cure under the same slowdown, whose update visibility stalls for every key (the slowdown cascade)",
    kind: Kind::PeakPerVariant(SLOWED),
    protocols: &["occult", "cure"],
    config: slow_config,
    // §8.1 reports goodput at its peak, the servers saturated: a client waits out each
    // failed-over read (4 local retries, then the remote master), so with slowed slaves it
    // takes more clients than without to saturate them.
    clients_per_dc: &[256, 1024, 4096, 8192, 16384],
    // The quick run stays below saturation (8,192 clients per DC take 10-12 minutes per
    // experiment, past the test loop's budget): it checks the setup, the full run the peak.
    quick_clients_per_dc: &[64, 512],
    findings: Some(slow_findings),
    quick_check: QuickCheck {
        must: &["^\\[3 slow slaves/DC\\] cure"],
        show: "^\\[3 slow slaves/DC\\] cure",
    },
    ..BASE
};

/// Slows the replication into the `k` slave nodes of each DC with the most read load.
fn slow_hot(c: &mut SimConfig, k: u32) {
    c.slow_hot_replication = (k > 0).then_some((k, SLOW_NS));
}

const SLOWED_HOT: &[Variant] = &[
    Variant {
        label: "no slow node",
        apply: |c| slow_hot(c, 0),
    },
    Variant {
        label: "1 hot slave/DC",
        apply: |c| slow_hot(c, 1),
    },
    Variant {
        label: "2 hot slaves/DC",
        apply: |c| slow_hot(c, 2),
    },
    Variant {
        label: "3 hot slaves/DC",
        apply: |c| slow_hot(c, 3),
    },
];

pub const HOT_NODES: Experiment = Experiment {
    name: "occult-hot-nodes",
    figure: "Occult Fig. 8a/8c (2 DCs, YCSB 95:5, Zipf 0.99, replication into the 1-3 nodes per DC holding the hottest keys delayed 100 ms): occult's goodput and latency against no slowdown, and cure under the same slowdown; paper: goodput falls (no further past two slowed slaves), p95/p99 latency up faster than with slowed tail nodes (Fig. 8b: to about 48 ms), median unchanged",
    kind: Kind::PeakPerVariant(SLOWED_HOT),
    findings: Some(hot_findings),
    quick_check: QuickCheck {
        must: &["^\\[3 hot slaves/DC\\] occult"],
        show: "^\\[.*hot slaves/DC\\] occult",
    },
    ..SLOW_NODES
};

/// YCSB single-key operations at 75:25 reads:writes (Appendix B.1), the overhead
/// experiment's setup otherwise.
fn write_heavy_config() -> SimConfig {
    SimConfig {
        workload: WorkloadFamily::Custom,
        read_ratio: 0.75,
        ..ycsb_two_dcs()
    }
}

const WRITE_HEAVY_SIZES: &[Variant] = &[entries!("4 entries", 4)];

pub const WRITE_HEAVY: Experiment = Experiment {
    name: "occult-write-heavy",
    figure: "Occult Fig. 9a/b (2 DCs, 75:25 reads:writes single-key ops, Zipf 0.99, 4 entries): goodput and latency of the three timestamp schemes against eventual-ms; paper: -6.9% goodput, +50 us median latency, +4 ms p99",
    kind: Kind::PeakPerVariant(WRITE_HEAVY_SIZES),
    protocols: &["eventual-ms"],
    lines: SCHEMES,
    config: write_heavy_config,
    findings: Some(write_heavy_findings),
    quick_check: QuickCheck {
        must: &["^\\[4 entries\\] dc-isolate: .* peak goodput"],
        show: "^\\[4 entries\\]",
    },
    ..BASE
};

fn curve<'a>(v: &'a VariantReport, label: &str) -> Option<&'a Curve> {
    v.report.curve(label)
}

/// A node gauge when the load stopped (mean over the nodes reporting it).
fn gauge(p: &Point, name: &str) -> f64 {
    p.gauges_end_of_load.get(name).copied().unwrap_or(0.0)
}

/// Stale first reads over first reads at DC `dc` (each counted once, retries apart).
pub fn stale_rate(p: &Point, dc: usize) -> f64 {
    let reads = gauge(p, &format!("occult_reads_dc{dc}"));
    let stale = gauge(p, &format!("occult_stale_reads_dc{dc}"));
    if reads > 0.0 {
        stale / reads
    } else {
        0.0
    }
}

fn pct(a: f64, b: f64) -> f64 {
    (a / b.max(1e-9) - 1.0) * 100.0
}

/// Fig. 6: each scheme against eventual-ms per timestamp size.
pub fn overhead_findings(r: &PeaksReport) -> Vec<String> {
    let mut out = scheme_lines(r);
    out.push("paper: dc-isolate with 4 entries -8.7% goodput and +50 us mean latency vs Redis Cluster; structural and temporal lower, with far more stale reads in the DC whose clocks run ahead".into());
    out
}

/// Fig. 9a/b: the same comparison on the write-heavy mix.
pub fn write_heavy_findings(r: &PeaksReport) -> Vec<String> {
    let mut out = scheme_lines(r);
    out.push(
        "paper (75:25 reads:writes): -6.9% goodput vs Redis Cluster, +50 us median latency, \
         +4 ms at the 99th percentile"
            .into(),
    );
    out
}

/// Each scheme's peak goodput, latency, stale reads and metadata against eventual-ms, per
/// variant.
fn scheme_lines(r: &PeaksReport) -> Vec<String> {
    let mut out = Vec::new();
    for v in &r.variants {
        let Some(base) = curve(v, "eventual-ms").map(Curve::peak) else {
            continue;
        };
        for line in SCHEMES {
            let Some(p) = curve(v, line.label).map(Curve::peak) else {
                continue;
            };
            out.push(format!(
                "[{}] {}: {:+.1}% peak goodput, {:+.0} us mean and {:+.0} us p99 latency at the peak vs eventual-ms; stale reads {:.2}% (dc0) / {:.2}% (dc1); {:.0} B of timestamp per stored object, {:.0} per read reply",
                v.variant,
                line.label,
                pct(p.throughput_txn_per_s, base.throughput_txn_per_s),
                (p.latency.mean_ms - base.latency.mean_ms) * 1e3,
                (p.latency.p99_ms - base.latency.p99_ms) * 1e3,
                stale_rate(p, 0) * 100.0,
                stale_rate(p, 1) * 100.0,
                gauge(p, "occult_meta_bytes_per_object"),
                gauge(p, "occult_meta_bytes_per_reply_item"),
            ));
        }
    }
    out
}

/// Aborts over commits plus aborts at `p`, and the share of each reason.
fn aborts(p: &Point) -> String {
    let total: u64 = p.abort_reasons.values().sum();
    let rate = p.aborted as f64 / ((p.committed + p.aborted) as f64).max(1.0) * 100.0;
    let shares: Vec<String> = p
        .abort_reasons
        .iter()
        .map(|(k, n)| format!("{k} {:.0}%", *n as f64 / total.max(1) as f64 * 100.0))
        .collect();
    format!("abort rate {rate:.1}% ({})", shares.join(", "))
}

/// Fig. 7: goodput in ops/s per txn size against single-key ops, and the aborts.
pub fn txn_findings(r: &PeaksReport) -> Vec<String> {
    let mut out = Vec::new();
    let ops = |label: &str| -> f64 {
        label
            .split(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(1.0)
    };
    let single = r
        .variants
        .first()
        .and_then(|v| curve(v, "occult"))
        .map(|c| c.peak().throughput_txn_per_s);
    for v in &r.variants {
        let Some(p) = curve(v, "occult").map(Curve::peak) else {
            continue;
        };
        let goodput = p.throughput_txn_per_s * ops(&v.variant);
        let share = single.map_or(0.0, |s| goodput / s.max(1e-9) * 100.0);
        out.push(format!(
            "[{}] {goodput:.0} ops/s at the peak ({share:.0}% of single-key ops), {}",
            v.variant,
            aborts(p)
        ));
    }
    out.push("paper: goodput 60-70% of non-transactional Occult; at 20 ops aborts are mostly lock failures, then overwrite-set validation".into());
    out
}

/// Fig. 8a/8c: as [`slow_findings`], with the paper's lines on hot nodes.
pub fn hot_findings(r: &PeaksReport) -> Vec<String> {
    let mut out = slow_lines(r);
    out.push("paper (hot nodes): goodput falls, the hot master having no spare capacity for the failed-over reads, and no further past two slowed slaves; p95/p99 read latency up faster than with slowed tail nodes (which reach about 48 ms), median and p75 unchanged".into());
    out
}

/// Fig. 8: peaks against no slowdown, tail latency and update visibility per protocol.
pub fn slow_findings(r: &PeaksReport) -> Vec<String> {
    let mut out = slow_lines(r);
    out.push("paper: Occult's throughput unchanged with slowed tail nodes, its p95/p99 read latency up to about 48 ms (4 retries, then the remote master); a causal store with a stable vector (cure here) delays the visibility of every remote update at the slowed DC".into());
    out
}

/// Each protocol's peak per variant against no slowdown, its latency and visibility.
fn slow_lines(r: &PeaksReport) -> Vec<String> {
    let mut out = Vec::new();
    for name in ["occult", "cure"] {
        let base = r
            .variants
            .first()
            .and_then(|v| curve(v, name))
            .map(|c| c.peak().throughput_txn_per_s);
        for v in &r.variants {
            let Some(p) = curve(v, name).map(Curve::peak) else {
                continue;
            };
            let vis = p.samples.get("remote_visibility_ns");
            let (vm, v99) = vis.map_or((0.0, 0.0), |s| (s.mean_ms, s.p99_ms));
            out.push(format!(
                "[{}] {name}: peak {:.0} txn/s ({:+.1}% vs no slow node), p50 {:.1} ms, p99 {:.1} ms; update visibility mean {vm:.1} ms, p99 {v99:.1} ms",
                v.variant,
                p.throughput_txn_per_s,
                base.map_or(0.0, |b| pct(p.throughput_txn_per_s, b)),
                p.latency.p50_ms,
                p.latency.p99_ms,
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    fn point(gauges: &[(&str, f64)], reasons: &[(&str, u64)]) -> Point {
        Point {
            committed: 60,
            aborted: 40,
            gauges_end_of_load: gauges.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            abort_reasons: reasons.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            ..Point::default()
        }
    }

    #[test]
    fn stale_rates_are_per_dc_and_aborts_split_by_reason() {
        let p = point(
            &[
                ("occult_reads_dc0", 1000.0),
                ("occult_stale_reads_dc0", 10.0),
                ("occult_reads_dc1", 500.0),
                ("occult_stale_reads_dc1", 50.0),
            ],
            &[("lock", 30), ("validation-read-set", 10)],
        );
        assert!((stale_rate(&p, 0) - 0.01).abs() < 1e-12);
        assert!((stale_rate(&p, 1) - 0.1).abs() < 1e-12);
        assert_eq!(stale_rate(&p, 2), 0.0, "no reads: no rate");
        assert_eq!(
            aborts(&p),
            "abort rate 40.0% (lock 75%, validation-read-set 25%)"
        );
        let none = point(&[], &[]);
        assert_eq!(aborts(&none), "abort rate 40.0% ()");
    }

    /// Variant `v` applied to the slowed-nodes setup under Occult: a valid run whose slowed
    /// slaves are picked by load, not listed by index.
    fn slowed_by_load(v: &Variant, why: &str) -> SimConfig {
        let mut c = slow_config();
        (v.apply)(&mut c);
        c.protocol = "occult".into();
        assert_eq!(c.validate(), Ok(()), "{}", v.label);
        assert!(c.slow_replication.is_empty(), "{why}");
        c
    }

    #[test]
    fn tail_variants_slow_the_least_loaded_slaves_and_their_runs_are_valid() {
        for (i, v) in SLOWED.iter().enumerate() {
            let c = slowed_by_load(v, "picked by load, not by index");
            let k = i as u32;
            assert_eq!(c.slow_tail_replication, (k > 0).then_some((k, SLOW_NS)));
            assert_eq!(c.slow_hot_replication, None);
        }
    }

    #[test]
    fn hot_variants_slow_the_hottest_nodes_and_their_runs_are_valid() {
        for (i, v) in SLOWED_HOT.iter().enumerate() {
            let c = slowed_by_load(v, "picked by heat, not by index");
            let k = i as u32;
            assert_eq!(c.slow_hot_replication, (k > 0).then_some((k, SLOW_NS)));
        }
    }
}
