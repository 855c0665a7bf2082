//! UniStore's experiments, shrunk to a few seconds: the peak-per-variant report (Fig. 5)
//! has a peak row per variant and protocol against the baseline and plots every curve;
//! the CDF report (Fig. 6) keeps the sample per destination DC, where Virginia (the
//! worst case: its third store, Frankfurt, is far from California) waits longer than
//! Brazil (Virginia relays California's txns to it almost as fast as they arrive), and
//! f = 1 waits less than f = 2.

use causeway_bench::unistore::{UNIFORMITY_COST, VISIBILITY};
use causeway_bench::{CdfReport, Experiment, Kind, PeaksReport, Plan};

/// Fig. 5's setup and variants, 3 and 4 DCs only, at two light loads.
const SMALL_COST: Experiment = Experiment {
    kind: match UNIFORMITY_COST.kind {
        Kind::PeakPerVariant(v) => Kind::PeakPerVariant(v.split_at(2).0),
        _ => panic!("Fig. 5 compares peaks"),
    },
    quick_clients_per_dc: &[2, 8],
    quick_duration_ms: 60,
    ..UNIFORMITY_COST
};

/// Fig. 6's setup at a light load, long enough for a few hundred samples.
const SMALL_VISIBILITY: Experiment = Experiment {
    quick_clients_per_dc: &[4],
    quick_duration_ms: 600,
    ..VISIBILITY
};

fn plan(e: &Experiment) -> Plan<'_> {
    Plan {
        experiment: e,
        quick: true,
        cpu: None,
    }
}

fn temp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("causeway-{name}-{}.svg", std::process::id()))
}

#[test]
fn the_peak_report_compares_each_variants_peaks_and_plots_every_curve() {
    let p = plan(&SMALL_COST);
    assert_eq!(p.runs(), 2 * 2 * 2, "variants x protocols x loads");
    let r = PeaksReport::run(&p, &mut |_, _| {}).expect("runs");
    assert_eq!(r.violations(), 0);
    let rows: Vec<(&str, &str)> = r
        .peaks
        .iter()
        .map(|p| (p.variant.as_str(), p.protocol.as_str()))
        .collect();
    let want = [
        ("3 DCs", "cureft"),
        ("3 DCs", "unistore"),
        ("4 DCs", "cureft"),
        ("4 DCs", "unistore"),
    ];
    assert_eq!(rows, want);
    assert!(r.peaks.iter().all(|p| p.peak_txn_per_s > 0.0));
    assert_eq!(r.peaks[0].ratio, 1.0, "the baseline against itself");
    let table = r.table();
    assert!(table.contains("[4 DCs]"), "{table}");
    assert!(
        table.contains("mean peak change of unistore over 2 variants"),
        "{table}"
    );
    let path = temp("peaks");
    r.plot(&path).expect("plot");
    let svg = std::fs::read_to_string(&path).expect("svg");
    assert!(svg.contains("unistore, 4 DCs") && svg.matches("<polyline").count() >= 4);
}

#[test]
fn uniform_visibility_waits_longest_at_virginia_and_less_with_f_1() {
    let p = plan(&SMALL_VISIBILITY);
    assert_eq!(p.runs(), 2, "f = 2 and f = 1, one protocol");
    let r = CdfReport::run(&p, &mut |_, _| {}).expect("runs");
    assert_eq!(r.violations(), 0);
    let p90 = |variant: &str, dc: &str| {
        let row = r
            .rows
            .iter()
            .find(|x| x.variant == variant && x.dc_name == dc)
            .expect("a row per variant and DC");
        assert!(row.count > 50, "{variant} {dc}: {} samples", row.count);
        row.p90_ms
    };
    let (brazil, virginia) = (p90("f=2", "Brazil"), p90("f=2", "Virginia"));
    assert!(
        virginia > brazil + 40.0,
        "Virginia {virginia} ms, Brazil {brazil} ms"
    );
    assert!(p90("f=1", "Virginia") < virginia / 4.0);
    let table = r.table();
    assert!(
        table.contains("p90_ms") && table.contains("Frankfurt"),
        "{table}"
    );
    let path = temp("cdf");
    r.plot(&path).expect("plot");
    let svg = std::fs::read_to_string(&path).expect("svg");
    assert!(svg.contains("f=2: Virginia") && svg.contains("fraction at or below"));
}
