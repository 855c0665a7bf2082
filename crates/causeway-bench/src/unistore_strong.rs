//! UniStore §8.1-8.2 (shared/papers/004): what strong transactions cost.
//!
//! - `unistore-rubis` (Fig. 3): throughput vs mean latency on the RUBiS bidding mix for
//!   `unistore` (PoR: causal txns plus strong ones certified per partition), `redblue`
//!   (every two strong txns sharing a key conflict, whatever their types, one central
//!   certifier), `strong` (every txn strong) and `causal` (`unistore` with the section
//!   `strong_txns = false`), on 3 DCs in Virginia, California and Frankfurt with the
//!   certification leaders in Virginia, as in the paper. The report adds each curve's
//!   latency by txn kind and client DC at its peak ([`crate::report`]).
//! - `unistore-scalability` (Fig. 4): unistore's peak throughput as the nodes (and
//!   partitions, 8 per node) per DC grow from 2 to 4, one simulated core each, on a
//!   microbenchmark of update txns on 3 uniform keys, for
//!   0%, 10% and 100% strong txns, and a contended variant where 20% of the strong txns
//!   take a key of one designated partition ([`crate::peaks`] reports the drop against
//!   linear scaling).

use crate::experiment::{Experiment, Kind, Line, QuickCheck, Variant};
use crate::regions::{one_way_ms, Region};
use causeway_protocols::Guarantee;
use causeway_sim::cpu::CpuModel;
use causeway_sim::{FaultSel, ObjectMix, SimConfig, WorkloadFamily};

/// The paper's default deployment (§8): Virginia, California, Frankfurt; the Paxos
/// leaders of every partition in Virginia (DC 0).
pub const REGIONS: [Region; 3] = [Region::Virginia, Region::California, Region::Frankfurt];
/// The leaders' DC: Virginia.
pub const LEADER_DC: u16 = 0;

/// Inter-DC jitter as in Fig. 5 and 6 (2% of a link's latency).
const WAN_JITTER: f64 = 0.02;

/// The paper's RUBiS clients think 500 ms between transactions (§8.1; RUBiS draws think
/// times from a negative exponential distribution).
const RUBIS_THINK_NS: u64 = 500_000_000;

/// The section every curve of these experiments runs with: leaders in Virginia.
fn leaders_in_virginia(c: &mut SimConfig) {
    c.section = serde_json::json!({ "leader_dc": LEADER_DC });
}

/// What every experiment here shares: the paper's 3 regions, 2 nodes and 8 partitions
/// per DC (the paper: 4 machines of 8 partitions), CPU model on, no faults.
fn base() -> SimConfig {
    let mut c = SimConfig {
        dcs: REGIONS.len() as u16,
        nodes_per_dc: 2,
        partitions: 8,
        inter_dc_one_way_ms: Some(one_way_ms(&REGIONS)),
        jitter: WAN_JITTER,
        faults: FaultSel::None,
        quiesce_ms: 500,
        allow_unchecked: true,
        // The certification logs are kept whole, and their invariants walk them after
        // every input: two thirds of the run's wall time once strong txns number in the
        // thousands. Histories within the checker's limit are still checked.
        check_invariants: false,
        cpu: CpuModel {
            enabled: true,
            ..CpuModel::default()
        },
        ..SimConfig::default()
    };
    leaders_in_virginia(&mut c);
    c
}

/// Fig. 3: the RUBiS bidding mix (85% read-only, 15% updates of which 10 points strong:
/// registerUser, storeBuyNow, storeBid, closeAuction) at the largest database the
/// simulator takes (`--rubis-scale 100`: 10,000 users, 50,000 items; the paper: 1M users,
/// 33,000 items), clients thinking 500 ms as in the paper.
fn rubis() -> SimConfig {
    let mut c = SimConfig {
        workload: WorkloadFamily::Rubis,
        rubis_scale: causeway_sim::config::RUBIS_SCALE_MAX,
        think_time_ns: RUBIS_THINK_NS,
        // Exponential think times and spread starts: with a fixed 500 ms every client
        // starts in the same millisecond and the whole population arrives in waves.
        think_time_exponential: true,
        nodes_per_dc: 1,
        // Past saturation `strong` takes seconds per txn: the final reads (strong there
        // too) must not race the backlog.
        quiesce_ms: 3_000,
        ..base()
    };
    c.cpu.cores = RUBIS_CORES;
    // UniStore's certifier enforces RUBiS's declared conflicts (the checker's relation
    // too); `strong` and `redblue` ignore declared rules (their relations are fixed).
    c.section["conflicts"] = "rubis".into();
    c
}

/// Cores of RUBiS's one node per DC: 2, so that clients thinking 500 ms saturate it with
/// a few thousand clients per DC (4-core nodes would take tens of thousands, and the
/// simulator hours). The CLI's CPU flags override it only when given.
const RUBIS_CORES: u32 = 2;

/// The paper's CAUSAL baseline: unistore with every txn causal. Its history still marks
/// RUBiS's strong txns strong, which PoR would hold to conflict ordering they no longer
/// have: it is checked against TCC, its own guarantee.
fn causal(c: &mut SimConfig) {
    c.section = serde_json::json!({
        "leader_dc": LEADER_DC,
        "strong_txns": false,
        "conflicts": "rubis",
    });
    c.guarantee = Some(Guarantee::Tcc);
}

pub const RUBIS: Experiment = Experiment {
    name: "unistore-rubis",
    figure: "UniStore Fig. 3 (RUBiS bidding mix, 3 DCs, leaders in Virginia): throughput vs mean latency, paper: unistore +72% / +183% peak over redblue / strong, mean latency 16.5 ms vs 80.4 ms (strong)",
    kind: Kind::Sweep,
    protocols: &["unistore", "redblue", "strong"],
    lines: &[Line {
        label: "causal",
        protocol: "unistore",
        apply: causal,
    }],
    config: rubis,
    clients_per_dc: &[500, 3000, 6000, 9000, 12000],
    duration_ms: 1_000,
    seeds: 1,
    quick_clients_per_dc: &[500, 2000],
    quick_duration_ms: 600,
    real_clients_per_dc: &[1, 4, 16],
    real_duration_s: 5,
    quick_real_clients_per_dc: &[1, 4],
    quick_real_duration_s: 2,
    warmup_ms: 0,
    quick_warmup_ms: 0,
    findings: None,
    quick_check: QuickCheck {
        must: &["^peak causal:", "strong@dc0 txns"],
        show: "^peak",
    },
};

/// Fig. 4: update txns (write-only, 3 LWW keys drawn uniformly from 100,000), closed-loop
/// clients without think time; a strong txn reads each key before it writes it (the
/// generator's read-modify-write, so certification has read sets to check).
fn microbenchmark() -> SimConfig {
    SimConfig {
        keys: 100_000,
        zipf: 0.0,
        read_ratio: 0.0,
        txn_ops: 3,
        objects: ObjectMix::Lww,
        think_time_ns: 0,
        ..base()
    }
}

fn strong_ratio(c: &mut SimConfig, ratio: f64) {
    c.strong_ratio = ratio;
    c.write_only_ratio = 1.0 - ratio;
}

/// Partitions per node, as in the paper (8 per machine).
const PARTITIONS_PER_NODE: u32 = 8;

fn nodes(c: &mut SimConfig, n: u32) {
    c.nodes_per_dc = n;
    c.partitions = n * PARTITIONS_PER_NODE;
}

const NODE_COUNTS: &[Variant] = &[
    Variant {
        label: "2 nodes/DC",
        apply: |c| nodes(c, 2),
    },
    Variant {
        label: "4 nodes/DC",
        apply: |c| nodes(c, 4),
    },
];

/// Fig. 4's setup: the microbenchmark on one simulated core per node. The paper grows a DC
/// from 2 to 8 machines (16 to 64 partitions); we grow it from 2 to 4 nodes, the curve's
/// first doubling. One core, so that the client counts the simulator can run saturate
/// every node: with four, 4 nodes per DC stay client-bound past 4,096 clients per DC
/// (1.6M txn/s), which takes minutes of wall time per point on 2 cores.
fn scalability() -> SimConfig {
    let mut c = microbenchmark();
    c.cpu.cores = 1;
    c
}

/// Fraction of strong txns that take a key of the designated partition (§8.2).
const CONTENDED_SHARE: f64 = 0.2;

pub const SCALABILITY: Experiment = Experiment {
    name: "unistore-scalability",
    figure: "UniStore Fig. 4 (100% update txns on 3 keys, 0/10/100% strong, uniform and contended): unistore's peak vs nodes per DC, paper: 9.76% below linear (uniform), 17.15% (contended), -25.72% with 10% strong",
    kind: Kind::PeakPerVariant(NODE_COUNTS),
    protocols: &[],
    lines: &[
        Line {
            label: "0% strong",
            protocol: "unistore",
            apply: |c| strong_ratio(c, 0.0),
        },
        Line {
            label: "10% strong",
            protocol: "unistore",
            apply: |c| strong_ratio(c, 0.1),
        },
        Line {
            label: "100% strong",
            protocol: "unistore",
            apply: |c| strong_ratio(c, 1.0),
        },
        Line {
            label: "10% strong, contended",
            protocol: "unistore",
            apply: |c| {
                strong_ratio(c, 0.1);
                c.hot_partition_ratio = CONTENDED_SHARE;
            },
        },
    ],
    config: scalability,
    clients_per_dc: &[128, 512, 1024, 2048],
    duration_ms: 300,
    seeds: 1,
    quick_clients_per_dc: &[128, 512],
    quick_duration_ms: 100,
    real_clients_per_dc: &[1],
    real_duration_s: 1,
    quick_real_clients_per_dc: &[1],
    quick_real_duration_s: 1,
    warmup_ms: 0,
    quick_warmup_ms: 0,
    findings: None,
    quick_check: QuickCheck {
        must: &["^drop vs linear of 0% strong at"],
        show: "^drop vs linear",
    },
};
