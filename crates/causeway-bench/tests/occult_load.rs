//! Occult's transactions under the load of `occult-txn` (20 operations, 256 clients per DC,
//! DC 1's clocks 22 ms ahead, CPU model on): the history passes PC-PSI and TCC. Found by the
//! full experiment: a txn's dependency entry for a shard (the shardstamp promised at
//! PREPARE) lay below the write's stamp, and a slave's floor between the two let a stale
//! read pass the check (`ReplWrite::dep_ss`).

use causeway_bench::occult::TXN;

#[test]
fn twenty_op_transactions_under_load_pass_the_checker() {
    let mut c = (TXN.config)();
    c.txn_ops = 20;
    c.protocol = "occult".into();
    c.clients_per_dc = 256;
    c.duration_ms = 600;
    c.seed = 1;
    let r = causeway_sim::run(&c).expect("the run");
    assert!(r.checked, "the history was checked");
    assert_eq!(r.violation, None);
    assert!(r.committed > 1_000, "committed {}", r.committed);
}
