//! PaRiS §V (shared/papers/002): partial replication with non-blocking reads against its
//! baselines, on the paper's 5 DCs (N. Virginia, Oregon, Ireland, Mumbai, Sydney: the
//! simulator's default WAN is the round-trip matrix of Fig. 1), replication factor 2,
//! YCSB transactions of 20 operations on 4 partitions (reads first, in parallel, then the
//! writes), Zipf 0.99 inside a partition, 8-byte values, closed-loop clients without think
//! time.
//!
//! - `paris-vs-bpr` (Fig. 2a/2b): throughput vs mean latency of `paris`, `bpr` (blocking
//!   reads at the freshest snapshot) and `nocc` (no causal consistency) at 95:5 and 50:50
//!   read:write (YCSB B: 19 reads + 1 write; A: 10 + 10), local-DC:multi-DC 95:5. Findings:
//!   paris over bpr (peak throughput, latency), nocc over paris, bpr's read blocking at its
//!   peak, and the update visibility latency of each at its peak (Fig. 5; its CDF is the
//!   second plot, `--plot F.svg` writing `F-visibility.svg` beside it).
//! - `paris-locality` (Fig. 4, with Fig. 5 and 6 data): `paris` at local-DC:multi-DC
//!   100:0, 95:5, 90:10 and 50:50 (95:5 read:write). Findings per ratio: peak throughput and
//!   mean latency at the peak, UST lag and visibility latency, the share of bytes sent for
//!   replication, intra-DC and inter-DC UST when the load stopped (Fig. 6), and the client
//!   cache's mean size.
//! - `paris-scale` (Fig. 3): `paris` on 3 and 5 DCs of 1 and 3 nodes, and on 10 DCs of 1
//!   node, partitions, keys and clients in proportion to the nodes (each node stores 4
//!   partitions, as in the default setup). Findings: each peak against the same DCs of 1
//!   node (paper Fig. 3a: 3x from 6 to 18 machines/DC) and against 3 DCs of the same nodes
//!   (Fig. 3b: 3.33x from 3 to 10 DCs).
//!
//! All measure a steady state ([`Experiment::warmup_ms`]): a client's multi-DC txn takes
//! one or two WAN round trips (up to ~600 ms with Sydney and Mumbai), so until every
//! client has met a few of them a run counts mostly its fast local txns (at 128
//! clients/DC, txns begun in the first 100 ms ran at 73,000/s, from 400 ms on at a steady
//! 31,000/s; a 300 ms run measured 30% more than a 1 s one), and clients start spread
//! over the first 200 ms ([`START_SPREAD_MS`]). Scale: 2 nodes of 1 core per DC and 20
//! partitions (each DC stores 8), against the paper's 18 machines of 4 vCPUs and 45
//! partitions: the simulator runs about 10^5 events a second, and a saturated point of
//! 1 s still took 44 s of wall time with one core per node.

use crate::experiment::{Curve, Experiment, Kind, Point, QuickCheck, Variant};
use crate::peaks::{PeaksReport, VariantReport};
use crate::report::abort_rate;
use causeway_sim::cpu::CpuModel;
use causeway_sim::{FaultSel, ObjectMix, SimConfig, WorkloadFamily};

/// Inter-DC jitter as a fraction of a link's one-way latency (as in the UniStore
/// experiments: the order of inter-region jitter; the simulator's 10% is for faults).
const WAN_JITTER: f64 = 0.02;
/// Nodes per DC: two, so that the UST's intra-DC exchange exists (Fig. 6).
const NODES_PER_DC: u32 = 2;
/// Cores per node (see the module doc: simulation time).
const CORES: u32 = 1;
/// Partitions: each of the 5 DCs stores 8 of them with replication factor 2 (a local-DC
/// txn takes 4 of its DC's 8, as the paper's took 4 of 18).
const PARTITIONS: u32 = 20;
/// Keys: 250 per partition (the paper does not give its key count).
const KEYS: u32 = 5_000;
/// Clients start at uniform times in the first 200 ms (all of them inside the warm-up):
/// started within one millisecond, closed-loop clients without think time stay in
/// lock-step at saturation, their txns ending in waves a latency apart, and a window of a
/// few waves measures the phase (at 4096 clients/DC it read 110,000 txn/s where 2 s gave
/// 82,000, the 100:0 capacity).
const START_SPREAD_MS: u64 = 200;
/// The raw sample kept for the CDF plot (Fig. 5).
pub const VISIBILITY: &str = "visibility_ns";

/// The paper's default workload (§V-A) at our scale: YCSB B transactions of 19 reads and
/// 1 write over 4 partitions, 95:5 local-DC:multi-DC, R = 2 over the 5 DCs of Fig. 1.
fn default_workload() -> SimConfig {
    SimConfig {
        dcs: 5,
        nodes_per_dc: NODES_PER_DC,
        partitions: PARTITIONS,
        replication_factor: Some(2),
        workload: WorkloadFamily::YcsbB,
        keys: KEYS,
        zipf: 0.99,
        txn_ops: 20,
        partitions_per_txn: 4,
        local_dc_ratio: 0.95,
        value_bytes: 8,
        objects: ObjectMix::Lww,
        think_time_ns: 0,
        // The simulator's default WAN: PaRiS Fig. 1's round trips, halved one way.
        inter_dc_one_way_ms: None,
        jitter: WAN_JITTER,
        faults: FaultSel::None,
        quiesce_ms: 1_000,
        allow_unchecked: true,
        // Saturated points take minutes of wall time each; the machines' per-input
        // invariant checks add a tenth (as in UniStore's Fig. 3 and 4 runs). Histories
        // within the checker's limit are still checked, and the fault sweeps of
        // `scripts/test` check every invariant.
        check_invariants: false,
        samples_by_dc: vec![VISIBILITY.to_string()],
        // Started all at once, saturated clients would move in lock-step waves.
        start_spread_ms: START_SPREAD_MS,
        cpu: CpuModel {
            enabled: true,
            cores: CORES,
            ..CpuModel::default()
        },
        ..SimConfig::default()
    }
}

const RW_RATIOS: &[Variant] = &[
    Variant {
        label: "r:w 95:5",
        apply: |c| c.workload = WorkloadFamily::YcsbB,
    },
    Variant {
        label: "r:w 50:50",
        apply: |c| c.workload = WorkloadFamily::YcsbA,
    },
];

/// The paper's figures per read:write ratio (§V-B): paris over bpr (peak throughput, "up
/// to" lower latency), nocc over paris (peak throughput), bpr's mean blocking time of a
/// txn's read phase at its top throughput (ms).
struct PaperVsBpr {
    variant: &'static str,
    paris_over_bpr: f64,
    latency_lower: f64,
    nocc_over_paris: f64,
    blocking_ms: f64,
}

const PAPER_VS_BPR: [PaperVsBpr; 2] = [
    PaperVsBpr {
        variant: "r:w 95:5",
        paris_over_bpr: 1.47,
        latency_lower: 5.91,
        nocc_over_paris: 1.24,
        blocking_ms: 29.0,
    },
    PaperVsBpr {
        variant: "r:w 50:50",
        paris_over_bpr: 1.46,
        latency_lower: 20.56,
        nocc_over_paris: 1.59,
        blocking_ms: 41.0,
    },
];

pub const VS_BPR: Experiment = Experiment {
    name: "paris-vs-bpr",
    figure: "PaRiS Fig. 2a/2b (YCSB txns of 20 ops on 4 partitions, 5 DCs, R = 2, local-DC 95%): throughput vs mean latency of paris, bpr and nocc at 95:5 and 50:50 r:w, paper: paris 1.47x/1.46x bpr's peak and up to 5.91x/20.56x lower latency, nocc 1.24x/1.59x paris's peak",
    kind: Kind::PeakPerVariant(RW_RATIOS),
    protocols: &["paris", "bpr", "nocc"],
    lines: &[],
    config: default_workload,
    // bpr's blocked reads need the most clients to saturate the CPU (71% at 4096).
    clients_per_dc: &[16, 256, 1024, 8192],
    duration_ms: 900,
    seeds: 1,
    quick_clients_per_dc: &[16, 128],
    quick_duration_ms: 400,
    real_clients_per_dc: &[1],
    real_duration_s: 1,
    quick_real_clients_per_dc: &[1],
    quick_real_duration_s: 1,
    warmup_ms: 400,
    quick_warmup_ms: 200,
    findings: Some(vs_bpr_findings),
    quick_check: QuickCheck {
        must: &["^\\[r:w 50:50\\] paris over bpr:"],
        show: "^\\[r:w .*over",
    },
};

const LOCALITY_RATIOS: &[Variant] = &[
    Variant {
        label: "l:m 100:0",
        apply: |c| c.local_dc_ratio = 1.0,
    },
    Variant {
        label: "l:m 95:5",
        apply: |c| c.local_dc_ratio = 0.95,
    },
    Variant {
        label: "l:m 90:10",
        apply: |c| c.local_dc_ratio = 0.9,
    },
    Variant {
        label: "l:m 50:50",
        apply: |c| c.local_dc_ratio = 0.5,
    },
];

pub const LOCALITY: Experiment = Experiment {
    name: "paris-locality",
    figure: "PaRiS Fig. 4-6 (default workload, local-DC:multi-DC (l:m) 100:0 to 50:50): paris's peak throughput and mean latency at the peak, paper: 350 -> 300 KTx/s, 8 -> 150 ms; UST lag and visibility; bytes for replication / intra-DC UST / inter-DC UST, paper: 64-72% / 26-34% / 2%",
    kind: Kind::PeakPerVariant(LOCALITY_RATIOS),
    protocols: &["paris"],
    lines: &[],
    config: default_workload,
    clients_per_dc: &[16, 256, 1024, 4096],
    duration_ms: 900,
    seeds: 1,
    quick_clients_per_dc: &[16, 128],
    quick_duration_ms: 400,
    real_clients_per_dc: &[1],
    real_duration_s: 1,
    quick_real_clients_per_dc: &[1],
    quick_real_duration_s: 1,
    warmup_ms: 400,
    quick_warmup_ms: 200,
    findings: Some(locality_findings),
    quick_check: QuickCheck {
        must: &["^\\[l:m 50:50\\] bytes sent per node"],
        show: "^\\[l:m .*paris peak",
    },
};

/// Partition replicas per node of the scalability experiment (the default setup's 4).
const REPLICAS_PER_NODE: u32 = 4;
/// Keys per partition (the default setup's 250).
const KEYS_PER_PARTITION: u32 = KEYS / PARTITIONS;

/// `dcs` DCs of `nodes` nodes each, with partitions, keys and clients in proportion (the
/// sweep's client counts are per node). The simulator's default WAN holds Fig. 1's five
/// regions, then 100 ms one way for the DCs past them.
fn paris_shape(c: &mut SimConfig, dcs: u16, nodes: u32) {
    let factor = u32::from(c.replication_factor.unwrap_or(dcs));
    c.dcs = dcs;
    c.nodes_per_dc = nodes;
    c.partitions = u32::from(dcs) * nodes * REPLICAS_PER_NODE / factor;
    c.keys = c.partitions * KEYS_PER_PARTITION;
    c.clients_per_dc *= nodes;
}

const SCALE_SHAPES: &[Variant] = &[
    Variant {
        label: "3 DCs x 1 node",
        apply: |c| paris_shape(c, 3, 1),
    },
    Variant {
        label: "3 DCs x 3 nodes",
        apply: |c| paris_shape(c, 3, 3),
    },
    Variant {
        label: "5 DCs x 1 node",
        apply: |c| paris_shape(c, 5, 1),
    },
    Variant {
        label: "5 DCs x 3 nodes",
        apply: |c| paris_shape(c, 5, 3),
    },
    Variant {
        label: "10 DCs x 1 node",
        apply: |c| paris_shape(c, 10, 1),
    },
];

pub const SCALE: Experiment = Experiment {
    name: "paris-scale",
    figure: "PaRiS Fig. 3 (default workload, R = 2, partitions in proportion to the machines): paris's peak throughput as machines per DC and DCs grow; paper: 3x from 6 to 18 machines/DC on 3 and on 5 DCs (Fig. 3a), 3.33x from 3 to 10 DCs with 6 and 12 machines/DC (Fig. 3b)",
    kind: Kind::PeakPerVariant(SCALE_SHAPES),
    protocols: &["paris"],
    // Per node: the variants multiply them by the nodes per DC.
    clients_per_dc: &[8, 128, 512, 2048],
    // 64 per node left 1 core at 35-60% busy: a peak the WAN latency set, not the CPU.
    quick_clients_per_dc: &[16, 256],
    findings: Some(scale_findings),
    quick_check: QuickCheck {
        must: &["^\\[10 DCs x 1 node\\] .*x the peak of 3 DCs x 1 node"],
        show: "^\\[.*x the peak of",
    },
    ..LOCALITY
};

/// Fig. 3: each shape's peak against fewer nodes (3a) and against fewer DCs (3b).
pub fn scale_findings(r: &PeaksReport) -> Vec<String> {
    let peak = |label: &str| {
        Some(
            curve(r.variant(label)?, "paris")?
                .peak()
                .throughput_txn_per_s,
        )
    };
    let mut out = Vec::new();
    for (variant, base, paper) in [
        (
            "3 DCs x 3 nodes",
            "3 DCs x 1 node",
            "paper Fig. 3a: 3x from 6 to 18 machines/DC",
        ),
        (
            "5 DCs x 3 nodes",
            "5 DCs x 1 node",
            "paper Fig. 3a: 3x from 6 to 18 machines/DC",
        ),
        ("5 DCs x 1 node", "3 DCs x 1 node", "ideal 1.67x"),
        (
            "10 DCs x 1 node",
            "3 DCs x 1 node",
            "paper Fig. 3b: 3.33x from 3 to 10 DCs",
        ),
    ] {
        if let (Some(p), Some(b)) = (peak(variant), peak(base)) {
            out.push(format!(
                "[{variant}] {:.2}x the peak of {base} ({p:.0} vs {b:.0} txn/s; {paper})",
                p / b.max(1e-9)
            ));
        }
    }
    out
}

fn curve<'a>(v: &'a VariantReport, label: &str) -> Option<&'a Curve> {
    v.report.curve(label)
}

/// A sample's summary at a point, as `mean X ms, p50 Y ms, p99 Z ms`, or `-`.
fn sample_line(p: &Point, name: &str) -> String {
    match p.samples.get(name) {
        Some(s) if s.count > 0 => format!(
            "mean {:.1} ms, p50 {:.1} ms, p99 {:.1} ms (n={})",
            s.mean_ms, s.p50_ms, s.p99_ms, s.count
        ),
        _ => "-".to_string(),
    }
}

/// The largest ratio of `slow`'s mean latency over `fast`'s at a client count both ran,
/// and that count.
fn max_latency_ratio(slow: &Curve, fast: &Curve) -> Option<(f64, u32)> {
    slow.points
        .iter()
        .filter_map(|s| {
            let f = fast
                .points
                .iter()
                .find(|f| f.clients_per_dc == s.clients_per_dc)?;
            (f.latency.mean_ms > 0.0)
                .then(|| (s.latency.mean_ms / f.latency.mean_ms, s.clients_per_dc))
        })
        .max_by(|a, b| a.0.total_cmp(&b.0))
}

/// Fig. 2's comparisons and Fig. 5's visibility, per read:write ratio.
pub fn vs_bpr_findings(r: &PeaksReport) -> Vec<String> {
    let mut out = Vec::new();
    for paper in &PAPER_VS_BPR {
        let Some(v) = r.variant(paper.variant) else {
            continue;
        };
        let (Some(paris), Some(bpr), Some(nocc)) =
            (curve(v, "paris"), curve(v, "bpr"), curve(v, "nocc"))
        else {
            continue;
        };
        let (pp, bp, np) = (paris.peak(), bpr.peak(), nocc.peak());
        let label = paper.variant;
        out.push(format!(
            "[{label}] paris over bpr: {:.2}x peak throughput (paper {:.2}x); mean latency at the peaks {:.1} ms vs {:.1} ms, {:.2}x lower",
            pp.throughput_txn_per_s / bp.throughput_txn_per_s.max(1e-9),
            paper.paris_over_bpr,
            pp.latency.mean_ms,
            bp.latency.mean_ms,
            bp.latency.mean_ms / pp.latency.mean_ms.max(1e-9),
        ));
        if let Some((ratio, clients)) = max_latency_ratio(bpr, paris) {
            out.push(format!(
                "[{label}] paris's latency up to {ratio:.2}x lower than bpr's at the same clients/DC ({clients}) (paper: up to {:.2}x lower)",
                paper.latency_lower
            ));
        }
        out.push(format!(
            "[{label}] nocc over paris: {:.2}x peak throughput (paper {:.2}x); mean latency at the peaks {:.1} ms vs {:.1} ms",
            np.throughput_txn_per_s / pp.throughput_txn_per_s.max(1e-9),
            paper.nocc_over_paris,
            np.latency.mean_ms,
            pp.latency.mean_ms,
        ));
        out.push(format!(
            "[{label}] aborted at the peaks: paris {:.1}%, bpr {:.1}%, nocc {:.1}%",
            abort_rate(pp) * 100.0,
            abort_rate(bp) * 100.0,
            abort_rate(np) * 100.0
        ));
        out.push(format!(
            "[{label}] bpr read blocking at its peak ({} clients/DC), per read at a partition: {} (paper: {:.0} ms per txn's read phase)",
            bp.clients_per_dc,
            sample_line(bp, "read_block_ns"),
            paper.blocking_ms
        ));
        for (name, p) in [("paris", pp), ("bpr", bp)] {
            out.push(format!(
                "[{label}] {name} update visibility at its peak (Fig. 5): {}",
                sample_line(p, VISIBILITY)
            ));
        }
    }
    out
}

/// Each share of `parts` in their sum, in percent (0 when the sum is 0).
fn shares(parts: &[f64]) -> Vec<f64> {
    let total: f64 = parts.iter().sum();
    parts
        .iter()
        .map(|p| if total > 0.0 { p / total * 100.0 } else { 0.0 })
        .collect()
}

/// Fig. 4's peaks per locality ratio against 100:0, Fig. 5's UST lag and visibility and
/// Fig. 6's byte shares at each peak, and the client cache.
pub fn locality_findings(r: &PeaksReport) -> Vec<String> {
    let mut out = Vec::new();
    let first = r
        .variants
        .first()
        .and_then(|v| curve(v, "paris"))
        .map(|c| c.peak().throughput_txn_per_s);
    for v in &r.variants {
        let Some(paris) = curve(v, "paris") else {
            continue;
        };
        let p = paris.peak();
        let label = &v.variant;
        let change = first.map_or(String::new(), |f| {
            format!(
                " ({:+.1}% vs {})",
                (p.throughput_txn_per_s / f.max(1e-9) - 1.0) * 100.0,
                r.variants[0].variant
            )
        });
        out.push(format!(
            "[{label}] paris peak {:.0} txn/s at {} clients/DC{change}, mean latency there {:.1} ms (p50 {:.1}, p99 {:.1})",
            p.throughput_txn_per_s,
            p.clients_per_dc,
            p.latency.mean_ms,
            p.latency.p50_ms,
            p.latency.p99_ms
        ));
        out.push(format!(
            "[{label}] ust lag {}; update visibility {}",
            sample_line(p, "ust_lag_ns"),
            sample_line(p, VISIBILITY)
        ));
        let g = |n: &str| p.gauges_end_of_load.get(n).copied().unwrap_or(0.0);
        let bytes = [
            g("bytes_replication"),
            g("bytes_ust_intra_dc"),
            g("bytes_ust_inter_dc"),
        ];
        let s = shares(&bytes);
        out.push(format!(
            "[{label}] bytes sent per node during the load: replication {:.1}%, intra-DC UST {:.1}%, inter-DC UST {:.1}% ({:.0} / {:.0} / {:.0} B) (paper Fig. 6: 64-72% / 26-34% / 2%)",
            s[0], s[1], s[2], bytes[0], bytes[1], bytes[2]
        ));
        let cache = p.gauges.get("client_cache_writes").copied().unwrap_or(0.0);
        out.push(format!(
            "[{label}] client cache: {cache:.1} writes per client at START (mean)"
        ));
    }
    out.push(
        "paper Fig. 4: 350 KTx/s at 100:0 -> 300 KTx/s at 50:50 (-16%), mean latency 8 -> 150 ms"
            .to_string(),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Report;
    use causeway_sim::Summary;

    fn point(clients: u32, tput: f64, mean_ms: f64) -> Point {
        Point {
            clients_per_dc: clients,
            throughput_txn_per_s: tput,
            latency: Summary {
                count: 1,
                mean_ms,
                ..Summary::default()
            },
            ..Point::default()
        }
    }

    fn curve(label: &str, points: Vec<Point>) -> Curve {
        Curve {
            protocol: label.to_string(),
            points,
        }
    }

    fn report(variants: Vec<(&str, Vec<Curve>)>) -> PeaksReport {
        let variants = variants
            .into_iter()
            .map(|(label, curves)| VariantReport {
                variant: label.to_string(),
                partitions: PARTITIONS,
                report: Report::new(&VS_BPR, false, curves),
            })
            .collect();
        PeaksReport {
            experiment: "x".into(),
            figure: "y".into(),
            quick: false,
            variants,
            peaks: Vec::new(),
            scaling: Vec::new(),
            findings: Vec::new(),
        }
    }

    #[test]
    fn the_configurations_are_valid_and_the_papers() {
        for e in [&VS_BPR, &LOCALITY, &SCALE] {
            let Kind::PeakPerVariant(variants) = e.kind else {
                panic!("peaks per variant");
            };
            for v in variants {
                let mut c = (e.config)();
                (v.apply)(&mut c);
                c.protocol = "paris".into();
                assert_eq!(c.validate(), Ok(()), "{} {}", e.name, v.label);
                assert_eq!(
                    (c.replication_factor, c.txn_ops, c.partitions_per_txn),
                    (Some(2), 20, 4)
                );
                // Every node stores as many partitions as in the default setup.
                let replicas = c.partitions * 2;
                assert_eq!(
                    replicas,
                    u32::from(c.dcs) * c.nodes_per_dc * 4,
                    "{}",
                    v.label
                );
            }
            assert!(e.quick_warmup_ms < e.quick_duration_ms && e.warmup_ms < e.duration_ms);
        }
        let mut c = default_workload();
        (LOCALITY_RATIOS[3].apply)(&mut c);
        assert_eq!(c.local_dc_ratio, 0.5);
        (RW_RATIOS[1].apply)(&mut c);
        assert_eq!(c.workload, WorkloadFamily::YcsbA);
    }

    #[test]
    fn scale_shapes_grow_partitions_keys_and_clients_with_the_nodes() {
        let mut c = default_workload();
        c.clients_per_dc = 64;
        paris_shape(&mut c, 10, 3);
        assert_eq!((c.dcs, c.nodes_per_dc, c.partitions), (10, 3, 60));
        assert_eq!((c.keys, c.clients_per_dc), (60 * 250, 192));
        c.protocol = "paris".into();
        assert_eq!(c.validate(), Ok(()));
        let r = report(vec![
            (
                "3 DCs x 1 node",
                vec![curve("paris", vec![point(8, 10_000.0, 9.0)])],
            ),
            (
                "10 DCs x 1 node",
                vec![curve("paris", vec![point(8, 31_000.0, 9.0)])],
            ),
        ]);
        let lines = scale_findings(&r).join("\n");
        assert!(
            lines.contains("[10 DCs x 1 node] 3.10x the peak of 3 DCs x 1 node (31000 vs 10000 txn/s; paper Fig. 3b"),
            "{lines}"
        );
        assert!(!lines.contains("3 DCs x 3 nodes"), "only the variants run");
    }

    #[test]
    fn vs_bpr_findings_compare_the_peaks_and_latencies_with_the_papers() {
        let mut bpr_peak = point(512, 50_000.0, 200.0);
        bpr_peak.samples.insert(
            "read_block_ns".into(),
            Summary {
                count: 10,
                mean_ms: 31.0,
                ..Summary::default()
            },
        );
        let r = report(vec![(
            "r:w 95:5",
            vec![
                curve(
                    "paris",
                    vec![point(16, 10_000.0, 10.0), point(512, 75_000.0, 20.0)],
                ),
                curve("bpr", vec![point(16, 2_000.0, 80.0), bpr_peak]),
                curve(
                    "nocc",
                    vec![point(16, 11_000.0, 9.0), point(512, 90_000.0, 15.0)],
                ),
            ],
        )]);
        let lines = vs_bpr_findings(&r).join("\n");
        assert!(
            lines.contains("paris over bpr: 1.50x peak throughput (paper 1.47x); mean latency at the peaks 20.0 ms vs 200.0 ms, 10.00x lower"),
            "{lines}"
        );
        assert!(
            lines.contains("up to 10.00x lower than bpr's at the same clients/DC (512)"),
            "{lines}"
        );
        assert!(lines.contains("nocc over paris: 1.20x"), "{lines}");
        assert!(
            lines.contains("aborted at the peaks: paris 0.0%"),
            "{lines}"
        );
        assert!(
            lines.contains("per read at a partition: mean 31.0 ms"),
            "{lines}"
        );
        assert!(!lines.contains("r:w 50:50"), "only the variants run");
    }

    #[test]
    fn locality_findings_give_each_ratios_change_and_byte_shares() {
        let mut a = point(128, 100_000.0, 5.0);
        for (name, bytes) in [
            ("bytes_replication", 70.0),
            ("bytes_ust_intra_dc", 28.0),
            ("bytes_ust_inter_dc", 2.0),
        ] {
            a.gauges_end_of_load.insert(name.into(), bytes);
        }
        a.gauges.insert("client_cache_writes".into(), 12.5);
        let b = point(1024, 80_000.0, 150.0);
        let r = report(vec![
            ("l:m 100:0", vec![curve("paris", vec![a])]),
            ("l:m 50:50", vec![curve("paris", vec![b])]),
        ]);
        let lines = locality_findings(&r).join("\n");
        assert!(
            lines.contains("[l:m 50:50] paris peak 80000 txn/s at 1024 clients/DC (-20.0% vs l:m 100:0), mean latency there 150.0 ms"),
            "{lines}"
        );
        assert!(
            lines.contains("[l:m 100:0] bytes sent per node during the load: replication 70.0%, intra-DC UST 28.0%, inter-DC UST 2.0%"),
            "{lines}"
        );
        assert!(lines.contains("client cache: 12.5 writes"), "{lines}");
        assert_eq!(shares(&[0.0, 0.0]), vec![0.0, 0.0]);
    }
}
