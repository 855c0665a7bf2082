//! PrompTCC §IX (shared/papers/001): read-only transactions in one round, never more
//! than two, in one DC, against `eventual` (no consistency, the paper's normalization
//! baseline), `wren` (always two rounds: a snapshot first, then the reads) and `eiger` (up
//! to three: a second when the first may be inconsistent, a third when the second met a
//! partially committed version), and the metadata of `promptcc-naive` (full vectors on the
//! wire).
//!
//! - `promptcc-skew` (Fig. 3/4): Zipf 0.5 to 0.99, 90:10 read-only:write-only
//!   transactions of 5 keys. Findings per skew: each protocol's peak over eventual's
//!   (paper at 0.99: promptcc -12% throughput, +20% latency; wren -25%; eiger -37%, +60%
//!   latency), promptcc's round-two fraction (paper: about 2% at 0.99) and eiger's rounds.
//! - `promptcc-readset` (Fig. 5): read sets of 2 to 32 keys. Findings: rounds per
//!   read-only transaction (paper: promptcc at most 1.3 on average with large read sets,
//!   eiger 2.9) and the peak over eventual.
//!
//! The workload sends a transaction's reads one key per READ (`SimConfig::merge_reads`
//! off), as the numbers in BENCHMARKS.md were taken: the rounds counted are those of the
//! first READ, which fixes the snapshot; later READs read at it. A one-key READ never
//! has two partitions' validity intervals to compare, so eiger's second rounds there come
//! only from what the session's past needs.
//! - `promptcc-scale` (Fig. 7/8): 1 to 8 servers with 16 partitions and 1,000 keys per
//!   server (the paper: up to 64 servers, 200 partitions each). Findings: the peaks' scaling
//!   and the read metadata bytes per read of `promptcc` against `promptcc-naive`.
//!
//! Scale: one simulated core per server, and at most 8 servers (the paper: 8 to 64
//! machines of 4 vCPUs, 1,600 logical partitions); the simulator runs about 10^5 events a
//! second, so a saturated point of one server already takes tens of seconds.

use crate::experiment::{Curve, Experiment, Kind, Point, QuickCheck, Variant};
use crate::peaks::{PeaksReport, VariantReport};
use causeway_sim::cpu::CpuModel;
use causeway_sim::{FaultSel, ObjectMix, SimConfig, WorkloadFamily};

/// Servers of the default setup (the paper's 8, at one simulated core each).
const SERVERS: u32 = 4;
/// Logical partitions per server.
const PARTITIONS_PER_SERVER: u32 = 16;
/// Keys per server.
const KEYS_PER_SERVER: u32 = 1_000;
/// Clients start spread over this long (closed loops started at once move in waves).
const START_SPREAD_MS: u64 = 100;

/// The paper's default workload (§IX-A) at our scale: 90% read-only, 10% write-only
/// transactions of 5 keys, Zipf 0.99, LWW registers of 8 bytes.
fn default_workload() -> SimConfig {
    SimConfig {
        dcs: 1,
        nodes_per_dc: SERVERS,
        partitions: SERVERS * PARTITIONS_PER_SERVER,
        workload: WorkloadFamily::Custom,
        keys: SERVERS * KEYS_PER_SERVER,
        zipf: 0.99,
        txn_ops: 5,
        read_only_ratio: 0.9,
        write_only_ratio: 0.1,
        value_bytes: 8,
        objects: ObjectMix::Lww,
        think_time_ns: 0,
        faults: FaultSel::None,
        quiesce_ms: 500,
        allow_unchecked: true,
        // Per-input invariant checks cost a tenth of a saturated run's wall time; the fault
        // sweeps of `scripts/test` check every invariant.
        check_invariants: false,
        start_spread_ms: START_SPREAD_MS,
        cpu: CpuModel {
            enabled: true,
            cores: 1,
            ..CpuModel::default()
        },
        ..SimConfig::default()
    }
}

/// What the three experiments share: the sweep, its durations and the default setup.
const BASE: Experiment = Experiment {
    name: "",
    figure: "",
    kind: Kind::Sweep,
    protocols: &[],
    lines: &[],
    config: default_workload,
    clients_per_dc: &[16, 64, 256, 1024],
    duration_ms: 600,
    seeds: 1,
    quick_clients_per_dc: &[16, 128],
    quick_duration_ms: 300,
    real_clients_per_dc: &[1],
    real_duration_s: 1,
    quick_real_clients_per_dc: &[1],
    quick_real_duration_s: 1,
    warmup_ms: 100,
    quick_warmup_ms: 100,
    findings: None,
    quick_check: QuickCheck::NONE,
};

const SKEWS: &[Variant] = &[
    Variant {
        label: "zipf 0.5",
        apply: |c| c.zipf = 0.5,
    },
    Variant {
        label: "zipf 0.8",
        apply: |c| c.zipf = 0.8,
    },
    Variant {
        label: "zipf 0.99",
        apply: |c| c.zipf = 0.99,
    },
];

pub const SKEW: Experiment = Experiment {
    name: "promptcc-skew",
    figure: "PrompTCC Fig. 3/4 (one DC, 90:10 read-only:write-only txns of 5 keys, Zipf 0.5 to 0.99): throughput and latency normalized to eventual, paper at 0.99: promptcc -12% throughput and +20% latency, wren -25%, eiger -37% and +60%; round two in about 2% of read-only txns",
    kind: Kind::PeakPerVariant(SKEWS),
    protocols: &["eventual", "promptcc", "wren", "eiger"],
    findings: Some(skew_findings),
    quick_check: QuickCheck {
        must: &["^\\[zipf 0.99\\] promptcc round two in"],
        show: "^\\[zipf 0.99\\]",
    },
    ..BASE
};

const READ_SETS: &[Variant] = &[
    Variant {
        label: "2 keys",
        apply: |c| c.txn_ops = 2,
    },
    Variant {
        label: "8 keys",
        apply: |c| c.txn_ops = 8,
    },
    Variant {
        label: "32 keys",
        apply: |c| c.txn_ops = 32,
    },
];

pub const READSET: Experiment = Experiment {
    name: "promptcc-readset",
    figure: "PrompTCC Fig. 5 (one DC, Zipf 0.99, read sets of 2 to 32 keys): rounds per read-only txn (paper: promptcc at most 1.3 on average, eiger 2.9 with large read sets) and throughput normalized to eventual",
    kind: Kind::PeakPerVariant(READ_SETS),
    protocols: &["eventual", "promptcc", "wren", "eiger"],
    findings: Some(readset_findings),
    quick_check: QuickCheck {
        must: &["^\\[32 keys\\] promptcc: .* rounds"],
        show: "^\\[32 keys\\] promptcc: .* rounds",
    },
    ..BASE
};

/// Value sizes of Fig. 2 (the paper: 1 to 2,048 B): its ends and where promptcc and wren
/// meet. Three, so that 4 protocols in each make the 12 curves a plot holds.
const VALUE_SIZES: &[Variant] = &[
    Variant {
        label: "8 B",
        apply: |c| c.value_bytes = 8,
    },
    Variant {
        label: "512 B",
        apply: |c| c.value_bytes = 512,
    },
    Variant {
        label: "2048 B",
        apply: |c| c.value_bytes = 2048,
    },
];

pub const VALUE_SIZE: Experiment = Experiment {
    name: "promptcc-value-size",
    figure: "PrompTCC Fig. 2 (one DC, 90:10 read-only:write-only txns of 5 keys, Zipf 0.99, values of 8 to 2048 B): throughput normalized to eventual; paper: promptcc closest to eventual, promptcc and wren approaching each other above 512 B, eiger -96% for large values (a second round in 40% of its reads, promptcc's about 2%)",
    kind: Kind::PeakPerVariant(VALUE_SIZES),
    protocols: &["eventual", "promptcc", "wren", "eiger"],
    findings: Some(value_size_findings),
    quick_check: QuickCheck {
        must: &["^\\[2048 B\\] eiger: .*x the peak throughput of eventual"],
        show: "^\\[2048 B\\]",
    },
    ..BASE
};

/// A variant whose write-only share is `$w` (the rest read-only), values of 128 B.
macro_rules! write_share {
    ($label:expr, $w:expr) => {
        Variant {
            label: $label,
            apply: |c| {
                c.write_only_ratio = $w;
                c.read_only_ratio = 1.0 - $w;
            },
        }
    };
}

/// Write-only shares of Fig. 6 (Table II: 0.01 to 0.5): its ends and the default. Three,
/// so that 4 protocols in each make the 12 curves a plot holds.
const WRITE_SHARES: &[Variant] = &[
    write_share!("1% writes", 0.01),
    write_share!("10% writes", 0.1),
    write_share!("50% writes", 0.5),
];

/// Fig. 6's workload: the default one with values of 128 B.
fn write_ratio_workload() -> SimConfig {
    SimConfig {
        value_bytes: 128,
        ..default_workload()
    }
}

pub const WRITE_RATIO: Experiment = Experiment {
    name: "promptcc-write-ratio",
    figure: "PrompTCC Fig. 6 (one DC, txns of 5 keys of 128 B, Zipf 0.99, 1% to 50% write-only txns): throughput normalized to eventual; paper: at residual write ratios eiger 20% below promptcc, promptcc falling as writes grow and wren ahead of it at large write ratios",
    kind: Kind::PeakPerVariant(WRITE_SHARES),
    protocols: &["eventual", "promptcc", "wren", "eiger"],
    config: write_ratio_workload,
    findings: Some(write_ratio_findings),
    quick_check: QuickCheck {
        must: &["^\\[50% writes\\] wren over promptcc:"],
        show: "^\\[.*over promptcc",
    },
    ..BASE
};

/// A variant of `servers` servers, with partitions, keys and clients in proportion (the
/// sweep's client counts are per server).
macro_rules! servers {
    ($label:expr, $n:expr) => {
        Variant {
            label: $label,
            apply: |c| {
                c.nodes_per_dc = $n;
                c.partitions = $n * PARTITIONS_PER_SERVER;
                c.keys = $n * KEYS_PER_SERVER;
                c.clients_per_dc *= $n;
            },
        }
    };
}

const SERVER_COUNTS: &[Variant] = &[
    servers!("1 server", 1),
    servers!("2 servers", 2),
    servers!("4 servers", 4),
    servers!("8 servers", 8),
];

pub const SCALE: Experiment = Experiment {
    name: "promptcc-scale",
    figure: "PrompTCC Fig. 7/8 (one DC, 1 to 8 servers with partitions, keys and clients in proportion): peak throughput scaling of every system and read metadata bytes of promptcc (compressed, §V) vs promptcc-naive (full vectors); paper: all scale almost linearly but promptcc-naive",
    kind: Kind::PeakPerVariant(SERVER_COUNTS),
    protocols: &["promptcc", "promptcc-naive", "wren", "eiger"],
    // Clients per server: the variants multiply them by the servers.
    clients_per_dc: &[4, 16, 64, 256],
    quick_clients_per_dc: &[4, 32],
    findings: Some(scale_findings),
    quick_check: QuickCheck {
        must: &["^\\[8 servers\\] read metadata"],
        show: "^\\[8 servers\\] read metadata",
    },
    ..BASE
};

fn curve<'a>(v: &'a VariantReport, label: &str) -> Option<&'a Curve> {
    v.report.curve(label)
}

/// A node gauge when the load stopped (mean over the nodes; cumulative counters).
fn gauge(p: &Point, name: &str) -> f64 {
    p.gauges_end_of_load.get(name).copied().unwrap_or(0.0)
}

/// The fraction of read-only rounds one that needed a round two at `p`.
pub fn round_two_fraction(p: &Point) -> f64 {
    let reads = gauge(p, "reads_total");
    if reads > 0.0 {
        gauge(p, "reads_round_two") / reads
    } else {
        0.0
    }
}

/// The fraction of read-only rounds one that needed a round three at `p` (eiger's; every
/// one of them needed a round two too).
pub fn round_three_fraction(p: &Point) -> f64 {
    let reads = gauge(p, "reads_total");
    if reads > 0.0 {
        gauge(p, "reads_round_three") / reads
    } else {
        0.0
    }
}

/// Eiger's rounds at its peak in `v`: "eiger: N rounds per read-only txn, ...".
fn eiger_rounds(v: &VariantReport, paper: &str) -> Option<String> {
    let p = curve(v, "eiger")?.peak();
    let (two, three) = (round_two_fraction(p), round_three_fraction(p));
    Some(format!(
        "[{}] eiger: {:.3} rounds per read-only txn at its peak, second round in {:.2}%, third round in {:.2}% ({paper})",
        v.variant,
        1.0 + two + three,
        two * 100.0,
        three * 100.0
    ))
}

/// Read metadata bytes (requests and replies) per read round at `p`.
pub fn bytes_per_read(p: &Point) -> f64 {
    let reads = gauge(p, "reads_total") + gauge(p, "reads_round_two");
    if reads > 0.0 {
        gauge(p, "read_bytes_total") / reads
    } else {
        0.0
    }
}

/// `label`'s peak over eventual's peak and its mean latency over eventual's at the peaks.
fn over_eventual(v: &VariantReport, label: &str) -> Option<(f64, f64)> {
    let (p, e) = (curve(v, label)?.peak(), curve(v, "eventual")?.peak());
    let tput = p.throughput_txn_per_s / e.throughput_txn_per_s.max(1e-9);
    let lat = p.latency.mean_ms / e.latency.mean_ms.max(1e-9);
    Some((tput, lat))
}

/// Fig. 3/4: each protocol against eventual per skew, promptcc's round-two share and
/// eiger's rounds.
pub fn skew_findings(r: &PeaksReport) -> Vec<String> {
    let mut out = Vec::new();
    for v in &r.variants {
        for name in ["promptcc", "wren", "eiger"] {
            if let Some((tput, lat)) = over_eventual(v, name) {
                out.push(format!(
                    "[{}] {name}: {:+.1}% peak throughput, {:+.1}% mean latency at the peak vs eventual",
                    v.variant,
                    (tput - 1.0) * 100.0,
                    (lat - 1.0) * 100.0
                ));
            }
        }
        if let Some(c) = curve(v, "promptcc") {
            out.push(format!(
                "[{}] promptcc round two in {:.2}% of read-only rounds at its peak (paper: about 2% at Zipf 0.99)",
                v.variant,
                round_two_fraction(c.peak()) * 100.0
            ));
        }
        out.extend(eiger_rounds(
            v,
            "paper: a second round ever more likely with skew",
        ));
    }
    out.push(
        "paper at Zipf 0.99: promptcc -12% throughput, +20% latency; wren -25% throughput; eiger -37% throughput, +60% latency".into(),
    );
    out
}

/// Fig. 5: rounds per read-only txn and the peak against eventual per read-set size.
pub fn readset_findings(r: &PeaksReport) -> Vec<String> {
    let mut out = Vec::new();
    for v in &r.variants {
        if let Some(c) = curve(v, "promptcc") {
            let f = round_two_fraction(c.peak());
            out.push(format!(
                "[{}] promptcc: {:.3} rounds per read-only round one ({:.2}% round two; paper: at most 1.3 rounds on average); wren: 2 by design",
                v.variant,
                1.0 + f,
                f * 100.0
            ));
        }
        out.extend(eiger_rounds(
            v,
            "paper: 2.9 on average with large read sets",
        ));
        for name in ["promptcc", "wren", "eiger"] {
            if let Some((tput, _)) = over_eventual(v, name) {
                out.push(format!(
                    "[{}] {name}: {:+.1}% peak throughput vs eventual",
                    v.variant,
                    (tput - 1.0) * 100.0
                ));
            }
        }
    }
    out
}

/// Each of promptcc, wren and eiger against eventual in variant `v`: peak throughput
/// and mean latency at the peak.
fn normalized_lines(v: &VariantReport) -> Vec<String> {
    ["promptcc", "wren", "eiger"]
        .into_iter()
        .filter_map(|name| {
            let (tput, lat) = over_eventual(v, name)?;
            Some(format!(
                "[{}] {name}: {:.2}x the peak throughput of eventual ({:+.1}%), {:+.1}% mean latency at the peak",
                v.variant,
                tput,
                (tput - 1.0) * 100.0,
                (lat - 1.0) * 100.0
            ))
        })
        .collect()
}

/// promptcc's round-two share at its peak in `v`, if it ran.
fn promptcc_rounds(v: &VariantReport) -> Option<String> {
    let c = curve(v, "promptcc")?;
    Some(format!(
        "[{}] promptcc round two in {:.2}% of read-only rounds at its peak",
        v.variant,
        round_two_fraction(c.peak()) * 100.0
    ))
}

/// Fig. 2: each protocol against eventual per value size, and the read rounds.
pub fn value_size_findings(r: &PeaksReport) -> Vec<String> {
    let mut out = Vec::new();
    for v in &r.variants {
        out.extend(normalized_lines(v));
        out.extend(promptcc_rounds(v));
        out.extend(eiger_rounds(
            v,
            "paper: a second round in 40% of eiger's reads",
        ));
    }
    out.push(
        "paper: promptcc closest to eventual at every size; promptcc and wren approach each \
         other above 512 B; eiger -96% vs eventual for large values (second rounds carry the \
         values again); promptcc's second round in about 2% of reads"
            .into(),
    );
    out
}

/// `a`'s peak over `b`'s in variant `v`.
fn peak_over(v: &VariantReport, a: &str, b: &str) -> Option<f64> {
    let (pa, pb) = (curve(v, a)?.peak(), curve(v, b)?.peak());
    Some(pa.throughput_txn_per_s / pb.throughput_txn_per_s.max(1e-9))
}

/// Fig. 6: each protocol against eventual per write share, eiger and wren against
/// promptcc, and the read rounds.
pub fn write_ratio_findings(r: &PeaksReport) -> Vec<String> {
    let mut out = Vec::new();
    for v in &r.variants {
        out.extend(normalized_lines(v));
        for name in ["eiger", "wren"] {
            if let Some(x) = peak_over(v, name, "promptcc") {
                out.push(format!(
                    "[{}] {name} over promptcc: {x:.2}x peak throughput",
                    v.variant
                ));
            }
        }
        out.extend(promptcc_rounds(v));
        out.extend(eiger_rounds(
            v,
            "paper: as many second rounds as promptcc's at residual write ratios",
        ));
    }
    out.push(
        "paper: at residual write ratios eiger 20% below promptcc (its client's dependency \
         tree); promptcc falls as the write share grows, and wren overtakes it at large \
         write ratios"
            .into(),
    );
    out
}

/// Fig. 7/8: read metadata bytes per round, compressed against full vectors, by size.
pub fn scale_findings(r: &PeaksReport) -> Vec<String> {
    let mut out = Vec::new();
    for v in &r.variants {
        let (Some(p), Some(n)) = (curve(v, "promptcc"), curve(v, "promptcc-naive")) else {
            continue;
        };
        let (pb, nb) = (bytes_per_read(p.peak()), bytes_per_read(n.peak()));
        out.push(format!(
            "[{}] read metadata per round: promptcc {:.0} B, promptcc-naive {:.0} B ({:.1}x); peaks {:.0} vs {:.0} txn/s",
            v.variant,
            pb,
            nb,
            nb / pb.max(1e-9),
            p.peak().throughput_txn_per_s,
            n.peak().throughput_txn_per_s
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::Point;
    use std::collections::BTreeMap;

    fn point(reads: f64, second: f64, bytes: f64) -> Point {
        let gauges: BTreeMap<String, f64> = [
            ("reads_total".to_string(), reads),
            ("reads_round_two".to_string(), second),
            ("reads_round_three".to_string(), second / 2.0),
            ("read_bytes_total".to_string(), bytes),
        ]
        .into_iter()
        .collect();
        Point {
            clients_per_dc: 16,
            committed: 100,
            aborted: 0,
            throughput_txn_per_s: 1000.0,
            latency: Default::default(),
            latency_by_kind: BTreeMap::new(),
            abort_reasons: BTreeMap::new(),
            cpu_utilization: None,
            samples: BTreeMap::new(),
            gauges: BTreeMap::new(),
            gauges_end_of_load: gauges,
            cdfs: BTreeMap::new(),
            violations: 0,
            unchecked: 0,
            violation: None,
        }
    }

    #[test]
    fn round_two_and_bytes_come_from_the_counters_when_the_load_stopped() {
        let p = point(200.0, 10.0, 4200.0);
        assert!((round_two_fraction(&p) - 0.05).abs() < 1e-12);
        assert!((round_three_fraction(&p) - 0.025).abs() < 1e-12);
        assert!((bytes_per_read(&p) - 20.0).abs() < 1e-12);
        let none = point(0.0, 0.0, 0.0);
        assert_eq!(round_two_fraction(&none), 0.0);
        assert_eq!(round_three_fraction(&none), 0.0);
        assert_eq!(bytes_per_read(&none), 0.0);
    }

    #[test]
    fn the_configurations_are_valid_one_dc_and_scale_partitions_with_servers() {
        for e in [&SKEW, &READSET, &SCALE, &VALUE_SIZE, &WRITE_RATIO] {
            let Kind::PeakPerVariant(variants) = e.kind else {
                panic!("{} is peak-per-variant", e.name);
            };
            for v in variants {
                let mut c = (e.config)();
                (v.apply)(&mut c);
                assert_eq!(c.dcs, 1, "{} {}", e.name, v.label);
                c.validate()
                    .unwrap_or_else(|err| panic!("{} {}: {err}", e.name, v.label));
                assert_eq!(c.partitions, c.nodes_per_dc * PARTITIONS_PER_SERVER);
            }
        }
    }
}
