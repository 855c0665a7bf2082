//! The simulator runs the test loop makes of `promptcc`, `promptcc-naive`, `wren` and `eiger`
//! ([`crate::sweep`]), all on one DC (the paper's setting): every fault that applies to
//! one DC.

use crate::sweep::Sweep;

/// The experiments' workload under the CPU model: 16 sessions over 4 nodes and 64
/// partitions; the final reads (one txn of 64-key reads) caught later reads pinned to a
/// stale snapshot.
macro_rules! loaded {
    () => {
        "--dcs 1 --nodes-per-dc 4 --partitions 64 --keys 4000 --zipf 0.99 --txn-ops 5 \
         --read-only-ratio 0.9 --write-only-ratio 0.1 --value-bytes 8 --objects lww \
         --clients-per-dc 16 --duration-ms 300 --cpu --cores 1 --seeds 1..20"
    };
}

/// Hot keys, many clients and slow nodes: the window in which versions made visible
/// before every participant committed are read.
macro_rules! hot {
    () => {
        "--dcs 1 --seeds 1..3 --keys 10 --clients-per-dc 32 --faults slow --duration-ms 1000"
    };
}

/// PrompTCC's runs, then one catching each mutation.
pub const SWEEPS: &[Sweep] = &[
    Sweep::pass("--dcs 1 --seeds 1 --faults all").quick(),
    Sweep::caught("--dcs 1 --mutation single-round-always --seeds 1..5").quick(),
    Sweep::pass("--dcs 1 --seeds 1..30 --faults all"),
    // Redis strings that count: SETs of integers and concurrent INCRBYs.
    Sweep::pass("--dcs 1 --seeds 1..6 --faults all --objects strings"),
    // Keys freed by DEL and written with another type, and those parts deleted.
    Sweep::pass("--dcs 1 --seeds 1..6 --faults all --objects retype"),
    Sweep::pass(loaded!()),
    Sweep::pass(hot!()),
    Sweep::pass(concat!("--dcs 1 ", sweep_merged!())),
    Sweep::pass("--dcs 1 --seeds 1..4 --faults crashes --checkpoint-records 16"),
    // The snapshot pinned to the first read's versions (the final reads miss writes: 7 of
    // 20 seeds); raised to S where the first read touched (fractured reads under faults).
    Sweep::caught(concat!(loaded!(), " --mutation stale-snapshot")),
    Sweep::caught("--dcs 1 --seeds 1..20 --faults all --mutation snapshot-from-s"),
    Sweep::caught("--dcs 1 --mutation single-round-always --seeds 1..20"),
    Sweep::caught(concat!(hot!(), " --mutation visible-before-stable")),
    // Round two skipped where `S_i` covers only its own entry of `max-read-ts` (the final
    // reads see half of a txn held invisible by another participant: 5 of 5 seeds).
    Sweep::caught("--dcs 1 --seeds 1..5 --mutation own-entry-only"),
];

/// PrompTCC with full vectors on the wire.
pub const NAIVE_SWEEPS: &[Sweep] = &[
    Sweep::pass("--dcs 1 --seeds 1 --faults all").quick(),
    Sweep::pass("--dcs 1 --seeds 1..10 --faults all"),
];

/// Wren-style reads, always two rounds.
pub const WREN_SWEEPS: &[Sweep] = &[
    Sweep::pass("--dcs 1 --seeds 1 --faults all").quick(),
    Sweep::pass("--dcs 1 --seeds 1..10 --faults all"),
    Sweep::pass(concat!("--dcs 1 ", sweep_merged!())),
];

/// Eiger-style reads, up to three rounds.
pub const EIGER_SWEEPS: &[Sweep] = &[
    Sweep::pass("--dcs 1 --seeds 1 --faults all").quick(),
    Sweep::pass("--dcs 1 --seeds 1..10 --faults all"),
    Sweep::pass(concat!("--dcs 1 ", sweep_merged!())),
];
