//! The simulator runs the test loop makes of `cure` ([`crate::sweep`]): the fault shapes it
//! must survive and a run catching each of its mutations.

use crate::sweep::Sweep;

/// Cure's runs, faults first, then one per mutation.
pub const SWEEPS: &[Sweep] = &[
    Sweep::pass("--seeds 1 --faults all").quick(),
    Sweep::caught("--mutation no-read-wait --seeds 1..3").quick(),
    // A swarm of random faults, liveness after healing included.
    Sweep::pass("--seeds 1..30 --faults all"),
    // Redis strings that count: SETs of integers and concurrent INCRBYs.
    Sweep::pass("--seeds 1..6 --faults all --objects strings"),
    // Keys freed by DEL and written with another type, and those parts deleted.
    Sweep::pass("--seeds 1..6 --faults all --objects retype"),
    // With 12 clients per DC, crashes meet more reads in flight: a read's reply that
    // reaches its coordinator's next incarnation must answer nothing there
    // (`kit::txn::ReadId`; seed 2026 found it).
    Sweep::pass("--seeds 2021..2030 --faults all --clients-per-dc 12"),
    // Read-then-commit (a read followed by only updates and the commit, one exchange):
    // single-partition read-modify-writes, then a small hot key space.
    Sweep::pass(READ_THEN_COMMIT_RMW),
    Sweep::pass(READ_THEN_COMMIT_HOT),
    // Slowed links inside a DC: a commit overtaken by the client's next request.
    Sweep::pass(SLOW_LINKS),
    // Long outages: catch up from the senders' logs, or by state transfer with no log.
    Sweep::pass("--faults long-outage --set silent_sibling_ns=300000000 --seeds 1..6"),
    Sweep::pass(concat!(sweep_outage!(), " --seeds 1..6")),
    Sweep::pass(concat!(sweep_lossy!(), " --seeds 1..3")),
    // Every causal txn commits without faults, some requests asking a key twice.
    Sweep::pass(sweep_merged!()),
    // Merged reads under faults: the coordinator answering a multi-key read request.
    Sweep::pass("--seeds 1..6 --faults all --workload ycsb-a --merge-reads --keys 10"),
    Sweep::caught("--mutation no-read-wait --seeds 1..5"),
    Sweep::caught("--mutation pvc-ignores-prepared --seeds 1..5"),
    Sweep::caught("--mutation commit-time-min --seeds 1..5"),
    // A checkpoint that forgets prepared txns shows only after a crash restarts a node
    // from it (2 violations in seeds 1..10).
    Sweep::caught(
        "--mutation checkpoint-drops-prepared --faults crashes --clients-per-dc 16 --seeds 1..10",
    ),
    Sweep::caught(concat!(
        "--mutation no-state-transfer ",
        sweep_outage!(),
        " --seeds 1..5"
    )),
    Sweep::caught("--mutation keeps-overwritten-assign --seeds 1..5"),
    // A one-node commit shown before its record is durable shows after a crash; with one
    // node per DC most multi-key txns commit on one node.
    Sweep::caught(
        "--mutation node-commit-early --faults crashes --clients-per-dc 16 --nodes-per-dc 1 \
         --seeds 1..5",
    ),
    // A replica writing a rewound piece whole applies its repeated txns twice when a
    // restart replays that record: counters show it, only without a checkpoint since
    // (seeds 8 and 16 of 1..20).
    Sweep::caught(
        "--mutation piece-record-whole --objects counter --faults all --checkpoint-records 0 \
         --seeds 1..20",
    ),
    // A read-then-commit that does not wait for a prepared two-phase txn misses it only
    // when the txn's commit reaches the partition late: slowed links inside a DC.
    Sweep::caught(
        "--mutation read-commit-no-wait --faults slow-links --txn-ops 2 --keys 10 --seeds 1..10",
    ),
];

/// Read-then-commit over single-partition read-modify-writes (YCSB-A, 20 keys).
pub const READ_THEN_COMMIT_RMW: &str =
    "--seeds 1..10 --faults all --workload ycsb-a --partitions-per-txn 1 --txn-ops 2 --keys 20";
/// Read-then-commit over a hot key space (10 keys, two ops a txn).
pub const READ_THEN_COMMIT_HOT: &str = "--seeds 1..10 --faults all --txn-ops 2 --keys 10";
/// Links between a DC's nodes slowed for a while.
pub const SLOW_LINKS: &str = "--seeds 1..6 --faults slow-links --txn-ops 2 --keys 10";

/// CureFT's runs (Cure's engine with forwarding): the same swarm with the stricter
/// liveness (a failed DC's txn that a survivor saw must survive it).
/// (Its snapshots come from the stable vector, UniStore Alg. 1 l.2-7, which partitions
/// already hold: `no-read-wait` has no wait to skip and is not caught, 0 of seeds 1..3.)
pub const CUREFT_SWEEPS: &[Sweep] = &[
    Sweep::pass("--seeds 1 --faults all").quick(),
    Sweep::caught("--mutation pvc-ignores-prepared --seeds 1..3").quick(),
    Sweep::pass(READ_THEN_COMMIT_RMW),
    Sweep::pass(READ_THEN_COMMIT_HOT),
    Sweep::pass(SLOW_LINKS),
    Sweep::pass("--seeds 1..30 --faults all"),
    Sweep::pass(concat!(sweep_outage!(), " --seeds 1..3")),
    Sweep::pass(sweep_merged!()),
];
