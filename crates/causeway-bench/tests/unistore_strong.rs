//! UniStore's Fig. 3 and 4 experiments, shrunk to seconds: the RUBiS sweep runs the
//! CAUSAL baseline as a labelled `unistore` curve with `strong_txns = false` (its strong
//! txns then commit causally, fast), and reports latency by kind and DC; the scalability
//! experiment scales partitions with nodes and reports the drop against linear.

use causeway_bench::unistore_strong::{RUBIS, SCALABILITY};
use causeway_bench::{Experiment, Kind, PeaksReport, Plan, Report};
use causeway_protocols::Guarantee;

fn plan(e: &Experiment) -> Plan<'_> {
    Plan {
        experiment: e,
        quick: true,
        cpu: None,
    }
}

#[test]
fn the_rubis_curves_are_the_three_protocols_then_causal_on_unistore() {
    let labels: Vec<(&str, &str)> = RUBIS
        .curves()
        .iter()
        .map(|c| (c.label, c.protocol))
        .collect();
    assert_eq!(
        labels,
        [
            ("unistore", "unistore"),
            ("redblue", "redblue"),
            ("strong", "strong"),
            ("causal", "unistore"),
        ]
    );
    let p = plan(&RUBIS);
    let causal = RUBIS.curves()[3];
    let c = p.curve_config(None, causal.protocol, causal.apply, 10, 1);
    assert_eq!(c.section["strong_txns"], false);
    assert_eq!(c.section["leader_dc"], 0, "leaders in Virginia");
    assert_eq!(c.guarantee, Some(Guarantee::Tcc));
    let u = p.config(None, "unistore", 10, 1);
    assert_eq!(u.section["leader_dc"], 0);
    assert_eq!(u.guarantee, None, "unistore is held to PoR");
    assert_eq!(p.runs(), 4 * 2, "curves x loads");
}

/// Fig. 3's setup at a light load, 3 curves.
const SMALL_RUBIS: Experiment = Experiment {
    protocols: &["unistore"],
    quick_clients_per_dc: &[40],
    quick_duration_ms: 800,
    ..RUBIS
};

#[test]
fn causal_commits_rubis_strong_txns_without_certification() {
    let p = plan(&SMALL_RUBIS);
    let curves = p.run(&mut |_, _| {}).expect("runs");
    let r = Report::new(&SMALL_RUBIS, true, curves);
    assert_eq!(r.violations(), 0, "{}", r.table());
    let strong_mean = |label: &str| {
        let point = r.curve(label).expect("curve").peak();
        point.latency_by_kind.get("strong").map(|s| s.mean_ms)
    };
    let (uni, causal) = (strong_mean("unistore"), strong_mean("causal"));
    let (uni, causal) = (uni.expect("strong txns"), causal.expect("strong txns"));
    // Certification crosses the WAN (Virginia-California is 61 ms); causal does not.
    assert!(
        uni > 50.0 && causal < 20.0,
        "unistore {uni} ms, causal {causal} ms"
    );
    let table = r.table();
    assert!(
        table.contains("strong@dc0 txns") && table.contains("unistore over causal"),
        "{table}"
    );
}

#[test]
fn the_scalability_variants_scale_partitions_with_nodes() {
    let Kind::PeakPerVariant(variants) = SCALABILITY.kind else {
        panic!("Fig. 4 compares peaks");
    };
    let p = plan(&SCALABILITY);
    let shapes: Vec<(u32, u32)> = variants
        .iter()
        .map(|v| {
            let c = p.config(Some(v), "unistore", 1, 1);
            (c.nodes_per_dc, c.partitions)
        })
        .collect();
    assert_eq!(shapes, [(2, 16), (4, 32)]);
    let c = p.config(Some(&variants[0]), "unistore", 1, 1);
    assert_eq!(
        c.cpu.cores, 1,
        "one core per node, so that the clients saturate it"
    );
    let lines = SCALABILITY.curves();
    let contended = lines.last().expect("lines");
    let c = p.curve_config(None, contended.protocol, contended.apply, 1, 1);
    assert_eq!((c.strong_ratio, c.hot_partition_ratio), (0.1, 0.2));
    assert_eq!(c.write_only_ratio, 0.9, "every txn updates");
}

/// Fig. 4 with 2 and 4 nodes per DC, causal and 10% strong, at light loads.
const SMALL_SCALABILITY: Experiment = Experiment {
    kind: match SCALABILITY.kind {
        Kind::PeakPerVariant(v) => Kind::PeakPerVariant(v.split_at(2).0),
        _ => panic!("Fig. 4 compares peaks"),
    },
    lines: SCALABILITY.lines.split_at(2).0,
    quick_clients_per_dc: &[4, 16],
    quick_duration_ms: 150,
    ..SCALABILITY
};

#[test]
fn the_scalability_report_has_a_drop_per_curve_and_variant() {
    let r = PeaksReport::run(&plan(&SMALL_SCALABILITY), &mut |_, _| {}).expect("runs");
    assert_eq!(r.violations(), 0);
    assert_eq!(r.scaling.len(), 2 * 2, "curves x variants");
    assert!(r.scaling.iter().all(|s| s.peak_txn_per_s > 0.0));
    let table = r.table();
    assert!(
        table.contains("drop vs linear of 10% strong at 32 partitions/DC"),
        "{table}"
    );
}
