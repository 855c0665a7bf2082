//! Unit tests of the machine on a hand-driven group, and the seed sweeps of the simulator.

use super::sim::{run, Stats};
use super::*;

/// Runs `seeds` seeds; the first failure, with its seed.
fn sweep(seeds: std::ops::Range<u64>, members: usize, m: Mutations) -> Result<Stats, String> {
    let mut total = Stats::default();
    for seed in seeds {
        let s = run(seed, members, m).map_err(|e| format!("seed {seed}: {e}"))?;
        total.decided += s.decided;
        total.crashes += s.crashes;
        total.snapshots += s.snapshots;
        total.checkpoints += s.checkpoints;
        total.leaderships += s.leaderships;
        total.chosen += s.chosen;
    }
    Ok(total)
}

#[test]
fn sweep_three_members() {
    let s = sweep(0..250, 3, Mutations::default()).unwrap();
    eprintln!("{s:?}");
}

#[test]
fn sweep_five_members() {
    let s = sweep(1000..1250, 5, Mutations::default()).unwrap();
    eprintln!("{s:?}");
}

#[test]
fn one_seed() {
    let seed = std::env::var("PAXOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(17);
    let n = std::env::var("PAXOS_N")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    run(seed, n, Mutations::default()).unwrap();
}

fn first_failure(members: usize, m: Mutations) -> Option<(u64, String)> {
    (0..500).find_map(|seed| run(seed, members, m).err().map(|e| (seed, e)))
}

#[test]
fn no_majority_is_caught() {
    let m = Mutations::named("paxos-no-majority").unwrap();
    let found = first_failure(3, m);
    eprintln!("{found:?}");
    assert!(found.is_some());
}

#[test]
fn skip_recovery_is_caught() {
    let m = Mutations::named("paxos-skip-recovery").unwrap();
    let found = first_failure(3, m);
    eprintln!("{found:?}");
    let found5 = first_failure(5, m);
    eprintln!("{found5:?}");
    assert!(found.is_some());
}
