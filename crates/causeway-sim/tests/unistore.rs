//! Whole UniStore runs under DC failures: with barriers and moves in the workload, the
//! stricter liveness (a failed DC's visible or barriered transactions must survive) holds,
//! moved sessions keep their history session, the history round-trips through JSON lines,
//! and several DCs may fail when the protocol tolerates it.

use causeway_check::{read_history, write_history};
use causeway_sim::faults::{FaultEvent, FaultPlan};
use causeway_sim::{run, FaultKind, FaultSel, SimConfig, SimResult};

fn unistore(seed: u64, tweak: impl FnOnce(&mut SimConfig)) -> SimResult {
    let mut c = SimConfig {
        protocol: "unistore".into(),
        seed,
        duration_ms: 1_500,
        quiesce_ms: 1_500,
        faults: FaultSel::One(FaultKind::DcFailure),
        ..SimConfig::default()
    };
    tweak(&mut c);
    let r = run(&c).expect("runs");
    assert_eq!(r.violation, None, "faults: {:?}", r.faults);
    assert!(r.committed > 50, "the run did work: {}", r.committed);
    r
}

fn failed_dcs(c: &SimConfig) -> usize {
    let plan = FaultPlan::draw(c, &c.topology());
    let fails = plan
        .events
        .iter()
        .filter(|(_, e)| matches!(e, FaultEvent::FailDc { .. }));
    fails.count()
}

#[test]
fn a_failed_dc_with_barriers_and_moves_passes_the_stricter_checks() {
    let r = unistore(3, |c| {
        c.barrier_ratio = Some(0.1);
        c.migrate_ratio = Some(0.05);
    });
    assert!(
        r.faults.iter().any(|f| f.contains("FailDc")),
        "{:?}",
        r.faults
    );
    let h = &r.history;
    assert!(!h.barriers.is_empty(), "barriers completed");
    let moved = h.txns.iter().filter(|t| t.id.session != t.session).count();
    assert!(moved > 0, "some session moved to another DC and went on");
    let mut bytes = Vec::new();
    write_history(h, &mut bytes).expect("write");
    assert_eq!(&read_history(&bytes[..]).expect("read"), h, "round trip");
}

#[test]
fn two_of_five_dcs_may_fail_with_f_2() {
    let base = SimConfig {
        protocol: "unistore".into(),
        dcs: 5,
        clients_per_dc: 2,
        faults: FaultSel::One(FaultKind::DcFailure),
        section: serde_json::json!({ "f": 2 }),
        ..SimConfig::default()
    };
    let seed = (1..100)
        .find(|&seed| {
            failed_dcs(&SimConfig {
                seed,
                ..base.clone()
            }) == 2
        })
        .expect("some seed fails two DCs");
    let r = unistore(seed, |c| *c = SimConfig { seed, ..base });
    let fails = r.faults.iter().filter(|f| f.contains("FailDc")).count();
    assert_eq!(fails, 2, "{:?}", r.faults);
}
