//! PaRiS in whole simulated runs (§III-C): a cut between two DCs freezes the UST in every
//! DC for as long as it lasts (the sample `ust_lag_ns` grows with the cut), transactions
//! keep running on the frozen snapshot, and after healing the UST catches up, so every
//! committed write becomes visible (the liveness checks) with no violation. Without
//! faults the UST trails the clocks by about the WAN's round trips.

use causeway_sim::faults::{FaultEvent, FaultPlan};
use causeway_sim::{run, FaultKind, FaultSel, SimConfig};
use std::collections::BTreeMap;

fn paris(seed: u64, faults: FaultSel) -> SimConfig {
    SimConfig {
        protocol: "paris".into(),
        seed,
        dcs: 3,
        replication_factor: Some(2),
        duration_ms: 3_000,
        faults,
        ..SimConfig::default()
    }
}

/// The longest time any DC pair stays cut in the plan, in ms.
fn longest_cut_ms(plan: &FaultPlan) -> f64 {
    let mut open: BTreeMap<(u16, u16), u64> = BTreeMap::new();
    let mut longest = 0;
    for (at, e) in &plan.events {
        match e {
            FaultEvent::Cut { a, b } => {
                open.entry((*a.min(b), *a.max(b))).or_insert(*at);
            }
            FaultEvent::Heal { a, b } => {
                if let Some(from) = open.remove(&(*a.min(b), *a.max(b))) {
                    longest = longest.max(at - from);
                }
            }
            _ => {}
        }
    }
    longest as f64 / 1e6
}

#[test]
fn a_cut_freezes_the_ust_everywhere_and_it_catches_up_after_healing() {
    let mut seen = 0;
    for seed in 1..=8 {
        let c = paris(seed, FaultSel::One(FaultKind::Partitions));
        let cut_ms = longest_cut_ms(&FaultPlan::draw(&c, &c.topology()));
        if cut_ms < 300.0 {
            continue;
        }
        let r = run(&c).expect("runs");
        assert_eq!(r.violation, None, "seed {seed}");
        assert!(
            r.committed > 50,
            "transactions keep committing: {}",
            r.committed
        );
        let lag = &r.samples["ust_lag_ns"];
        assert!(
            lag.max_ms >= 0.9 * cut_ms,
            "seed {seed}: the UST froze for the {cut_ms} ms cut, lag max {} ms",
            lag.max_ms
        );
        seen += 1;
    }
    assert!(seen >= 2, "some seeds draw long cuts: {seen}");
}

#[test]
fn without_faults_the_ust_trails_by_about_the_wan_round_trips() {
    let r = run(&paris(1, FaultSel::None)).expect("runs");
    assert_eq!(r.violation, None);
    let lag = &r.samples["ust_lag_ns"];
    // Nearest replicas are 80-145 ms apart (PaRiS Fig. 1 round trips): a heartbeat's
    // one-way trip plus the GST's trip between roots, plus the 5 ms periods.
    assert!(lag.p50_ms > 40.0 && lag.p50_ms < 400.0, "{lag:?}");
    assert!(r.samples["visibility_ns"].count > 0);
}

/// The byte counters are cumulative: their value when the load stopped is what a node
/// sent during the load (Fig. 6's shares), which grows with the load's length; the
/// running means of `gauges` also cover the drain and quiesce phases.
#[test]
fn cumulative_byte_gauges_are_reported_as_of_the_end_of_the_load() {
    let long = run(&paris(1, FaultSel::None)).expect("runs");
    let short = run(&SimConfig {
        duration_ms: 1_000,
        ..paris(1, FaultSel::None)
    })
    .expect("runs");
    assert_eq!(long.violation, None);
    assert_eq!(
        long.gauges.keys().collect::<Vec<_>>(),
        long.gauges_end_of_load.keys().collect::<Vec<_>>()
    );
    for name in [
        "bytes_replication",
        "bytes_ust_intra_dc",
        "bytes_ust_inter_dc",
    ] {
        let (end, end_short) = (
            long.gauges_end_of_load[name],
            short.gauges_end_of_load[name],
        );
        assert!(
            end_short > 0.0 && end > 2.0 * end_short,
            "{name}: {end_short} after 1 s of load, {end} after 3 s"
        );
    }
}
