//! The simulator runs the test loop makes of `occult` and `eventual-ms`
//! ([`crate::sweep`]): masters split between the DCs, clients moving between DCs (token,
//! attach, no wait), every fault but DC failures (out of Occult's fault model, §7).

use crate::sweep::Sweep;

/// Loaded txns (8 ops, 64 clients per DC, CPU model) with DC 1's clocks 22 ms ahead; the
/// compression scheme follows.
macro_rules! skewed {
    () => {
        "--workload ycsb-a --txn-ops 8 --keys 1000 --dcs 2 --nodes-per-dc 2 --partitions 8 \
         --clients-per-dc 64 --cpu --cores 1 --duration-ms 1000 --seeds 1..10 --faults all \
         --dc-clock-offsets-ms 0,22 --set "
    };
}

/// Occult's runs: PC-PSI and client-observed causality.
pub const SWEEPS: &[Sweep] = &[
    Sweep::pass("--dcs 2 --seeds 1 --faults all").quick(),
    Sweep::caught("--dcs 2 --mutation no-read-check --seeds 1..10 --faults all").quick(),
    Sweep::pass("--dcs 2 --seeds 1..50 --faults all"),
    // Redis strings that count: SETs of integers and concurrent INCRBYs.
    Sweep::pass("--dcs 2 --seeds 1..6 --faults all --objects strings"),
    // Keys freed by DEL and written with another type, and those parts deleted.
    Sweep::pass("--dcs 2 --seeds 1..6 --faults all --objects retype"),
    Sweep::pass("--dcs 3 --seeds 1..10 --faults all"),
    Sweep::pass("--seeds 1..6 --faults slow-links"),
    // Long outages; lossy ones converge by state transfer from the masters
    // (`node/transfer.rs`), caught without it.
    Sweep::pass("--dcs 2 --faults long-outage --set silent_sibling_ns=300000000 --seeds 1..6"),
    Sweep::pass(concat!(
        "--dcs 2 --clients-per-dc 16 ",
        sweep_lossy!(),
        " --seeds 1..20"
    )),
    Sweep::pass(concat!(
        "--dcs 3 --clients-per-dc 16 ",
        sweep_lossy!(),
        " --seeds 1..10"
    )),
    Sweep::caught(concat!(
        "--dcs 2 --clients-per-dc 16 --mutation no-state-transfer ",
        sweep_lossy!(),
        " --seeds 1..10"
    )),
    // Merged reads under faults: the client answering a multi-key read request.
    Sweep::pass("--seeds 1..4 --faults all --merge-reads --keys 10"),
    // Restarts from checkpoints: one every 16 records.
    Sweep::pass("--dcs 2 --seeds 1..20 --faults all --checkpoint-records 16"),
    Sweep::pass(concat!(skewed!(), "compression=dc-isolate")),
    Sweep::pass(concat!(skewed!(), "compression=temporal")),
    Sweep::pass(concat!(skewed!(), "compression=structural --set entries=3")),
    Sweep::caught("--dcs 2 --mutation no-read-check --seeds 1..50 --faults all"),
    Sweep::caught("--dcs 2 --mutation skip-overwrite-validation --seeds 1..50 --faults all"),
    // Per-shard floors: a prepared txn's shards (and unstreamed writes') must stay below
    // their promised shardstamps, or a reader of the txn sees its other writes missing.
    Sweep::caught(concat!(
        skewed!(),
        "compression=dc-isolate --mutation floor-without-caps"
    )),
];

/// The same store without causal metadata: it converges, and is caught against TCC.
pub const EVENTUAL_MS_SWEEPS: &[Sweep] = &[
    Sweep::pass("--dcs 2 --seeds 1 --faults all").quick(),
    Sweep::caught("--dcs 2 --guarantee tcc --seeds 1..20 --faults all").quick(),
    Sweep::pass(concat!(
        "--dcs 3 --clients-per-dc 16 ",
        sweep_lossy!(),
        " --seeds 1..10"
    )),
    Sweep::pass(sweep_merged!()),
];
