//! The simulator runs the test loop makes of `paris`, `bpr` and `nocc`
//! ([`crate::sweep`]). A DC failing for good is outside their fault model (§III-C): the
//! simulator draws none for them.

use crate::sweep::Sweep;

/// PaRiS's runs, under full and partial replication.
pub const SWEEPS: &[Sweep] = &[
    Sweep::pass(concat!(sweep_partial!(), " --seeds 1 --faults all")).quick(),
    Sweep::caught(concat!(
        "--mutation no-client-cache ",
        sweep_partial!(),
        " --seeds 1..10"
    ))
    .quick(),
    Sweep::pass(concat!(sweep_partial!(), " --seeds 1..30 --faults all")),
    // Redis strings that count: SETs of integers and concurrent INCRBYs.
    Sweep::pass(concat!(
        sweep_partial!(),
        " --seeds 1..6 --faults all --objects strings"
    )),
    // Keys freed by DEL and written with another type, and those parts deleted.
    Sweep::pass(concat!(
        sweep_partial!(),
        " --seeds 1..6 --faults all --objects retype"
    )),
    Sweep::pass("--seeds 1..6 --faults slow-links"),
    // Long outages: from the senders' logs, then by state transfer (`transfer.rs`), under
    // full and partial replication, plain and lossy; caught without the transfer.
    Sweep::pass("--faults long-outage --set silent_sibling_ns=300000000 --seeds 1..6"),
    Sweep::pass(concat!(sweep_outage!(), " --seeds 1..3")),
    Sweep::pass(concat!(
        sweep_partial!(),
        " ",
        sweep_outage!(),
        " --seeds 1..3"
    )),
    Sweep::pass(concat!(sweep_lossy!(), " --seeds 1..3")),
    Sweep::caught(concat!(
        "--mutation no-state-transfer ",
        sweep_outage!(),
        " --seeds 1..3"
    )),
    Sweep::caught(concat!(
        "--mutation no-client-cache ",
        sweep_partial!(),
        " --seeds 1..50"
    )),
    Sweep::caught(concat!(
        "--mutation ust-ignores-remote-dc ",
        sweep_partial!(),
        " --seeds 1..50"
    )),
    // Every causal txn commits without faults, some requests asking a key twice; the bug
    // that aborted those (`forget-repeated-read`) is caught only with merged reads.
    Sweep::pass(concat!("--replication 2 --dcs 5 ", sweep_merged!())),
    Sweep::caught(concat!("--mutation forget-repeated-read ", sweep_merged!())),
    // Merged reads under faults: the coordinator answering a multi-key read request.
    Sweep::pass(concat!(
        sweep_partial!(),
        " --seeds 1..4 --faults all --workload ycsb-a --merge-reads --keys 20"
    )),
    // A one-phase commit answered before its record is durable shows only when a crash
    // loses it (7, 9 and 10 of seeds 6..10 catch it).
    Sweep::caught("--mutation one-phase-early --faults crashes --clients-per-dc 16 --seeds 6..10"),
    // Restarts from checkpoints: one every 16 records.
    Sweep::pass("--seeds 1..4 --faults crashes --checkpoint-records 16"),
];

/// BPR's runs: blocking reads, under partial replication.
pub const BPR_SWEEPS: &[Sweep] = &[
    Sweep::pass(concat!(sweep_partial!(), " --seeds 1 --faults all")).quick(),
    Sweep::caught(concat!(
        "--mutation no-read-block ",
        sweep_partial!(),
        " --seeds 1..10"
    ))
    .quick(),
    Sweep::pass(concat!(sweep_partial!(), " --seeds 1..20 --faults all")),
    Sweep::pass(concat!(sweep_outage!(), " --seeds 1..3")),
    Sweep::caught(concat!(
        "--mutation no-read-block ",
        sweep_partial!(),
        " --seeds 1..50"
    )),
    Sweep::pass(sweep_merged!()),
];

/// NoCC's runs: it converges, and is caught violating TCC.
pub const NOCC_SWEEPS: &[Sweep] = &[
    Sweep::pass(concat!(sweep_partial!(), " --seeds 1 --faults all")).quick(),
    Sweep::caught(concat!(sweep_partial!(), " --guarantee tcc --seeds 1..20")).quick(),
    Sweep::pass(sweep_merged!()),
];
