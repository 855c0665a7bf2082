//! UniStore's strong transactions in whole runs: `unistore` is checked against PoR (TCC
//! plus conflict ordering of strong transactions), strong transactions are recorded with
//! their kind and type label, and the result counts them: committed, aborted by
//! certification, and committed after the last DC failure.
//!
//! Written to hold both while `unistore` refuses strong transactions (each counted in
//! `refused`) and once it certifies them: then every strong transaction is committed or
//! aborted, never refused, and some commit, also after a DC failed.

use causeway_check::{Outcome, TxnRecord};
use causeway_core::TxnKind;
use causeway_protocols::Guarantee;
use causeway_sim::{run, FaultKind, FaultSel, SimConfig, SimResult, WorkloadFamily};

/// A contended strong mix: few keys, steep skew, 30% strong read-modify-writes.
fn strong_run(seed: u64, tweak: impl FnOnce(&mut SimConfig)) -> SimResult {
    let mut c = SimConfig {
        protocol: "unistore".into(),
        seed,
        duration_ms: 1_000,
        quiesce_ms: 1_500,
        strong_ratio: 0.3,
        keys: 12,
        zipf: 1.2,
        ..SimConfig::default()
    };
    tweak(&mut c);
    let r = run(&c).expect("runs");
    assert_eq!(r.violation, None, "faults: {:?}", r.faults);
    assert_eq!(r.guarantee, Guarantee::Por);
    assert_eq!(r.guarantee.name(), "por");
    assert!(r.committed > 50, "the run did work: {}", r.committed);
    check_strong_counts(&r);
    r
}

fn strong(r: &SimResult) -> Vec<&TxnRecord> {
    let h = &r.history;
    h.txns
        .iter()
        .filter(|t| t.kind == TxnKind::Strong)
        .collect()
}

/// The counts agree with the history; strong transactions were attempted; once the
/// protocol takes them (no refusals), some commit.
fn check_strong_counts(r: &SimResult) {
    let strong = strong(r);
    let committed = strong
        .iter()
        .filter(|t| t.outcome == Outcome::Committed)
        .count();
    assert_eq!(r.strong_committed, committed);
    let aborted = strong
        .iter()
        .filter(|t| t.outcome == Outcome::Aborted)
        .count();
    // Refusals are recorded aborted too; so is a begin that failed otherwise (counted
    // in neither).
    assert!(r.strong_aborted + r.refused <= aborted);
    assert!(
        r.refused + r.strong_committed + r.strong_aborted > 0,
        "strong transactions were attempted"
    );
    if r.refused == 0 {
        assert!(r.strong_committed > 0, "strong transactions commit");
    }
}

#[test]
fn unistore_is_checked_against_por_and_records_strong_transactions() {
    let r = strong_run(1, |_| {});
    for t in strong(&r) {
        assert_eq!(t.label.as_deref(), Some("custom"), "{}", t.id);
    }
    let causal = r
        .history
        .txns
        .iter()
        .filter(|t| t.kind == TxnKind::Causal && t.outcome == Outcome::Committed)
        .count();
    assert!(causal > 50, "causal transactions commit: {causal}");
    assert_eq!(r.strong_committed_after_failure, None, "no DC failed");
    let json = serde_json::to_value(&r).expect("json");
    assert_eq!(json["guarantee"], "por");
}

#[test]
fn strong_transactions_keep_committing_after_a_dc_fails() {
    // Low contention, so strong txns commit often enough to show the resumption after
    // the leader DC (0 in this seed) fails and new leaders take over.
    let r = strong_run(3, |c| {
        c.duration_ms = 4_000;
        c.keys = 200;
        c.zipf = 0.5;
        c.faults = FaultSel::One(FaultKind::DcFailure);
    });
    assert!(
        r.faults.iter().any(|f| f.contains("FailDc")),
        "{:?}",
        r.faults
    );
    let after = r
        .strong_committed_after_failure
        .expect("a DC failed: counted");
    assert!(after <= r.strong_committed);
    if r.refused == 0 {
        assert!(after > 0, "strong commits resume after the failure");
    }
}

#[test]
fn rubis_strong_transactions_carry_their_type_under_the_rubis_relation() {
    let r = strong_run(2, |c| {
        c.workload = WorkloadFamily::Rubis;
        c.strong_ratio = 0.0;
        c.zipf = WorkloadFamily::Rubis.default_zipf();
        c.keys = 50;
    });
    let strong_types = ["registerUser", "storeBuyNow", "storeBid", "closeAuction"];
    let strong = strong(&r);
    assert!(!strong.is_empty());
    for t in strong {
        let label = t.label.as_deref().unwrap_or("none");
        assert!(strong_types.contains(&label), "{}: {label}", t.id);
    }
}

#[test]
fn a_bad_conflict_relation_is_refused_before_the_run() {
    let c = SimConfig {
        protocol: "unistore".into(),
        strong_ratio: 0.3,
        conflicts: Some("storeBid closeAuction items/*".into()),
        ..SimConfig::default()
    };
    let e = run(&c).expect_err("refused");
    assert!(e.starts_with("--conflicts: "), "{e}");
}
