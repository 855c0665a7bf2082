//! Experiments end to end in the simulator: the CPU model moves peak throughput (doubling
//! the per-message cost lowers it), reports carry ratios, peaks and a plot.

use causeway_bench::{Experiment, Kind, Plan, Report};
use causeway_sim::cpu::CpuModel;
use causeway_sim::{ObjectMix, SimConfig};

/// One DC, one node with one core: saturates with a few clients, so the test is fast.
fn tiny() -> SimConfig {
    SimConfig {
        dcs: 1,
        nodes_per_dc: 1,
        partitions: 2,
        keys: 200,
        read_ratio: 0.9,
        txn_ops: 1,
        objects: ObjectMix::Lww,
        think_time_ns: 0,
        quiesce_ms: 200,
        allow_unchecked: true,
        cpu: CpuModel {
            enabled: true,
            cores: 1,
            ..CpuModel::default()
        },
        ..SimConfig::default()
    }
}

const TINY: Experiment = Experiment {
    name: "tiny",
    figure: "test only",
    kind: Kind::Sweep,
    protocols: &["eventual", "cure"],
    lines: &[],
    config: tiny,
    clients_per_dc: &[1, 8, 32],
    duration_ms: 200,
    seeds: 1,
    quick_clients_per_dc: &[1, 8, 32],
    quick_duration_ms: 200,
    real_clients_per_dc: &[1],
    real_duration_s: 1,
    quick_real_clients_per_dc: &[1],
    quick_real_duration_s: 1,
    warmup_ms: 0,
    quick_warmup_ms: 0,
    findings: None,
    quick_check: causeway_bench::QuickCheck::NONE,
};

/// TINY measured after a warm-up of half the run.
const TINY_STEADY: Experiment = Experiment {
    name: "tiny-steady",
    warmup_ms: 100,
    quick_warmup_ms: 100,
    ..TINY
};

fn run(msg_ns: u64) -> Report {
    let cpu = CpuModel {
        msg_ns,
        ..tiny().cpu
    };
    let plan = Plan {
        experiment: &TINY,
        quick: true,
        cpu: Some(cpu),
    };
    let curves = plan.run(&mut |_, _| {}).expect("runs");
    Report::new(&TINY, true, curves)
}

#[test]
fn doubling_the_message_cost_lowers_peak_throughput() {
    let base = run(20_000);
    let slow = run(40_000);
    for (b, s) in base.curves.iter().zip(&slow.curves) {
        let (pb, ps) = (b.peak().throughput_txn_per_s, s.peak().throughput_txn_per_s);
        assert!(
            ps < pb * 0.8,
            "{}: peak {pb:.0} -> {ps:.0} txn/s",
            b.protocol
        );
        assert!(
            b.peak().cpu_utilization.expect("cpu model on") > 0.5,
            "saturated"
        );
    }
    assert_eq!(base.violations(), 0);
}

#[test]
fn the_report_has_ratios_peaks_and_a_plot() {
    let r = run(20_000);
    assert_eq!(r.peak_ratios[0], ("eventual".to_string(), 1.0));
    let cure = r.peak_ratios[1].1;
    assert!(cure > 0.0 && cure < 1.0, "cure pays for causality: {cure}");
    let table = r.table();
    assert!(
        table.contains("peak cure:") && table.contains("clients/dc"),
        "{table}"
    );
    assert_eq!(
        table.lines().filter(|l| l.contains(" cure ")).count(),
        3,
        "{table}"
    );
    let path = std::env::temp_dir().join(format!("causeway-exp-{}.svg", std::process::id()));
    causeway_bench::plot::plot(&path, "tiny", &r.series()).expect("plot");
    assert!(std::fs::read_to_string(&path)
        .expect("svg")
        .contains("cure"));
}

#[test]
fn a_warm_up_leaves_the_first_transactions_and_samples_out() {
    let plan = |e| Plan {
        experiment: e,
        quick: true,
        cpu: None,
    };
    let whole = plan(&TINY).run(&mut |_, _| {}).expect("runs");
    let steady_plan = plan(&TINY_STEADY);
    assert_eq!(steady_plan.config(None, "cure", 8, 1).sample_warmup_ms, 100);
    let steady = steady_plan.run(&mut |_, _| {}).expect("runs");
    for (w, s) in whole.iter().zip(&steady) {
        for (pw, ps) in w.points.iter().zip(&s.points) {
            // Half the load's transactions, over half its time: about the same rate.
            assert!(
                ps.committed < pw.committed * 2 / 3 && ps.committed > pw.committed / 3,
                "{}: {} of {} txns",
                w.protocol,
                ps.committed,
                pw.committed
            );
            let (tw, ts) = (pw.throughput_txn_per_s, ps.throughput_txn_per_s);
            assert!((ts / tw - 1.0).abs() < 0.3, "{tw:.0} vs {ts:.0} txn/s");
            assert_eq!(ps.latency.count, ps.committed);
        }
    }
}
