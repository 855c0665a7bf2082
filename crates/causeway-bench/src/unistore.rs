//! UniStore §8.3, "What is the cost of uniformity?" (shared/papers/004): Fig. 5, the peak
//! throughput of `unistore` (remote txns visible once uniform) against the `cureft`
//! baseline (the same engine without uniformity tracking) for 3, 4 and 5 DCs, and Fig. 6,
//! the extra visibility delay of uniform snapshots with f = 2 over 4 DCs, per destination
//! DC. Both use the paper's causal-only microbenchmark: 15% update transactions, every
//! transaction on 3 keys, on the paper's regions (`crate::regions`).

use crate::experiment::{CdfSpec, Experiment, Kind, QuickCheck, Variant};
use crate::regions::{one_way_ms, Region};
use causeway_sim::cpu::CpuModel;
use causeway_sim::{FaultSel, ObjectMix, SimConfig};

/// Fig. 5's DCs, in the order the paper adds them: 3 DCs, then Ireland, then Brazil.
const FIG5_REGIONS: [Region; 5] = [
    Region::Virginia,
    Region::California,
    Region::Frankfurt,
    Region::Ireland,
    Region::Brazil,
];

/// Fig. 6's DCs: California (DC 1) is the origin, Brazil (3) the best-case destination,
/// Virginia (0) the worst case.
const FIG6_REGIONS: [Region; 4] = [
    Region::Virginia,
    Region::California,
    Region::Frankfurt,
    Region::Brazil,
];

/// Inter-DC jitter as a fraction of a link's one-way latency: 0 to 2%, 0.5 to 2 ms on
/// these links, the order of inter-region jitter (the simulator's default 10% is for
/// fault finding).
const WAN_JITTER: f64 = 0.02;

/// The causal-only microbenchmark (§8.3): 85% read-only and 15% update (write-only)
/// transactions, 3 LWW keys each, drawn uniformly (as in §8.2) from 10,000; closed-loop
/// clients without think time; 2 nodes and 8 partitions per DC; CPU model on.
fn microbenchmark(regions: &[Region]) -> SimConfig {
    SimConfig {
        dcs: regions.len() as u16,
        nodes_per_dc: 2,
        partitions: 8,
        keys: 10_000,
        zipf: 0.0,
        read_only_ratio: 0.85,
        write_only_ratio: 0.15,
        txn_ops: 3,
        objects: ObjectMix::Lww,
        think_time_ns: 0,
        inter_dc_one_way_ms: Some(one_way_ms(regions)),
        jitter: WAN_JITTER,
        faults: FaultSel::None,
        quiesce_ms: 500,
        allow_unchecked: true,
        cpu: CpuModel {
            enabled: true,
            ..CpuModel::default()
        },
        ..SimConfig::default()
    }
}

fn fig5() -> SimConfig {
    microbenchmark(&FIG5_REGIONS[..3])
}

/// The first `n` regions of Fig. 5.
fn dcs(c: &mut SimConfig, n: usize) {
    c.dcs = n as u16;
    c.inter_dc_one_way_ms = Some(one_way_ms(&FIG5_REGIONS[..n]));
}

const DC_COUNTS: &[Variant] = &[
    Variant {
        label: "3 DCs",
        apply: |c| dcs(c, 3),
    },
    Variant {
        label: "4 DCs",
        apply: |c| dcs(c, 4),
    },
    Variant {
        label: "5 DCs",
        apply: |c| dcs(c, 5),
    },
];

pub const UNIFORMITY_COST: Experiment = Experiment {
    name: "unistore-uniformity-cost",
    figure: "UniStore Fig. 5 (causal microbenchmark, 15% updates, 3 to 5 DCs): peak throughput of unistore vs cureft, paper: -8% on average, -10.6% with 5 DCs",
    kind: Kind::PeakPerVariant(DC_COUNTS),
    protocols: &["cureft", "unistore"],
    lines: &[],
    config: fig5,
    clients_per_dc: &[64, 256, 512, 768, 1024],
    duration_ms: 300,
    seeds: 1,
    quick_clients_per_dc: &[64, 768],
    quick_duration_ms: 100,
    real_clients_per_dc: &[1],
    real_duration_s: 1,
    quick_real_clients_per_dc: &[1],
    quick_real_duration_s: 1,
    warmup_ms: 0,
    quick_warmup_ms: 0,
    findings: None,
    quick_check: QuickCheck {
        must: &["^mean peak change of unistore"],
        show: "^mean peak change",
    },
};

/// Fig. 6's setup: the microbenchmark over its 4 DCs, the sample kept per DC, the first
/// 300 ms dropped (txns committed then wait for the first reports of every DC: a
/// warm-up, not the steady state the paper plots).
fn fig6() -> SimConfig {
    SimConfig {
        samples_by_dc: vec![FIG6_SAMPLE.to_string()],
        sample_warmup_ms: 300,
        ..microbenchmark(&FIG6_REGIONS)
    }
}

/// The extra delay of txns from California (DC 1), as seen at each destination.
const FIG6_SAMPLE: &str = "uniform_extra_ns.from1";

fn f(c: &mut SimConfig, f: usize) {
    c.section = serde_json::json!({ "f": f });
}

const FIG6: CdfSpec = CdfSpec {
    variants: &[
        Variant {
            label: "f=2",
            apply: |c| f(c, 2),
        },
        Variant {
            label: "f=1",
            apply: |c| f(c, 1),
        },
    ],
    sample: FIG6_SAMPLE,
    measure: "extra visibility delay of California's txns (ms)",
    dcs: &[(3, "Brazil"), (0, "Virginia"), (2, "Frankfurt")],
};

pub const VISIBILITY: Experiment = Experiment {
    name: "unistore-visibility",
    figure: "UniStore Fig. 6 (4 DCs, f = 2): extra visibility delay of uniform snapshots, California to Brazil and to Virginia, paper: +5 ms and +92 ms at p90, none with f = 1",
    kind: Kind::Cdf(&FIG6),
    protocols: &["unistore"],
    lines: &[],
    config: fig6,
    clients_per_dc: &[128],
    duration_ms: 2_000,
    seeds: 1,
    quick_clients_per_dc: &[32],
    quick_duration_ms: 600,
    real_clients_per_dc: &[1],
    real_duration_s: 1,
    quick_real_clients_per_dc: &[1],
    quick_real_duration_s: 1,
    warmup_ms: 0,
    quick_warmup_ms: 0,
    findings: None,
    quick_check: QuickCheck {
        must: &["^f=2 .*Virginia"],
        show: "^f=2 ",
    },
};
