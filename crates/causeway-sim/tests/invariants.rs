//! The simulator calls every machine's `check_invariants` after every input: a protocol
//! variant that breaks an invariant on purpose fails the run with the invariant named,
//! even before (or without) the history checker noticing anything.

use causeway_sim::{run, FaultSel, SimConfig};

fn cure(mutation: Option<&str>, check_invariants: bool) -> SimConfig {
    let mut c = SimConfig {
        protocol: "cure".into(),
        seed: 1,
        duration_ms: 500,
        quiesce_ms: 1_000,
        faults: FaultSel::None,
        check_invariants,
        ..SimConfig::default()
    };
    c.params.mutation = mutation.map(str::to_string);
    c
}

#[test]
fn a_broken_invariant_fails_the_run_and_names_itself() {
    // `pvc-ignores-prepared` claims pvc[d] = clock over prepared txns, breaking
    // "pvc[d] < min prepare time" (Cure Alg. 2 l.20).
    let r = run(&cure(Some("pvc-ignores-prepared"), true)).expect("runs");
    let v = r.violation.expect("the broken invariant is caught");
    assert!(v.starts_with("invariant"), "{v}");
    assert!(v.contains("prepare time"), "{v}");
}

#[test]
fn the_correct_protocol_keeps_its_invariants() {
    let r = run(&cure(None, true)).expect("runs");
    assert_eq!(r.violation, None);
    assert!(r.committed > 100, "the run did work: {}", r.committed);
}

#[test]
fn without_invariant_checks_the_same_mutation_is_left_to_the_checker() {
    let mut c = cure(Some("pvc-ignores-prepared"), false);
    c.duration_ms = 3_000;
    let r = run(&c).expect("runs");
    let v = r.violation.expect("the history checker catches it too");
    assert!(v.starts_with("safety"), "invariants were off: {v}");
}

#[test]
fn eventual_is_held_to_its_own_guarantee_convergence() {
    let mut c = cure(None, true);
    c.protocol = "eventual".into();
    let own = run(&c).expect("runs");
    assert_eq!(own.violation, None, "eventual converges without faults");
    assert!(own.committed > 100, "the run did work: {}", own.committed);
}
