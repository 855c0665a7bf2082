//! Shared by the simulator's whole-run tests: one Cure run that must pass and do work.

use causeway_sim::{run, SimConfig, SimResult};

/// Runs Cure for 1 s of load on `seed` with `tweak` applied; asserts no violation and
/// that transactions committed.
pub fn cure_run(seed: u64, tweak: impl FnOnce(&mut SimConfig)) -> SimResult {
    let mut c = SimConfig {
        protocol: "cure".into(),
        seed,
        duration_ms: 1_000,
        quiesce_ms: 1_000,
        ..SimConfig::default()
    };
    tweak(&mut c);
    let r = run(&c).expect("runs");
    assert_eq!(r.violation, None);
    assert!(r.committed > 50, "the run did work: {}", r.committed);
    r
}
