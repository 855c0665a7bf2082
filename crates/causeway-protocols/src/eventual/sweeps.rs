//! The simulator runs the test loop makes of `eventual` ([`crate::sweep`]).

use crate::sweep::Sweep;

/// The eventual baseline's runs: it converges under faults and is caught violating TCC.
pub const SWEEPS: &[Sweep] = &[
    Sweep::pass("--seeds 1 --faults all").quick(),
    // The checker can fail: held to TCC under faults, the baseline is caught.
    Sweep::caught("--guarantee tcc --seeds 1..20 --faults all"),
    // It converges (its own guarantee) when messages are only delayed and reordered: a
    // set's or register's op replaced before it arrives still applies its replacements.
    Sweep::pass("--faults partitions --seeds 1..8"),
    // And under crashes: writes replicate through acknowledged streams (`repl.rs`).
    Sweep::pass("--faults crashes --seeds 1..8"),
    // Long outages (`transfer.rs`: the image replaces the receiver's store, which
    // re-applies what it holds beyond it), plain, lossy and under crashes.
    Sweep::pass(concat!(sweep_outage!(), " --seeds 1..8")),
    Sweep::pass(concat!(sweep_lossy!(), " --seeds 1..8")),
    Sweep::pass(
        "--faults crashes --set silent_sibling_ns=300000000 --set silent_sibling_log_max=0 \
         --seeds 1..8",
    ),
    Sweep::caught(concat!(
        "--mutation no-state-transfer ",
        sweep_lossy!(),
        " --seeds 1..3"
    ))
    .quick(),
    Sweep::pass(sweep_merged!()),
];
