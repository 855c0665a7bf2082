//! The workload families in whole runs: what the history records matches what each family
//! promises, and the new options leave default runs exactly as they were.

mod common;

use causeway_check::{HOp, Outcome};
use causeway_core::crdt::Update;
use causeway_core::TxnKind;
use causeway_sim::{SimConfig, SimResult, WorkloadFamily};

fn cure(tweak: impl FnOnce(&mut SimConfig)) -> SimResult {
    common::cure_run(2, tweak)
}

#[test]
fn ycsb_c_never_writes_and_ycsb_a_pads_its_values() {
    let r = cure(|c| c.workload = WorkloadFamily::YcsbC);
    let ops: Vec<&HOp> = r.history.txns.iter().flat_map(|t| &t.ops).collect();
    assert!(ops.len() > 100, "reads were recorded: {}", ops.len());
    assert!(ops.iter().all(|op| matches!(op, HOp::Read { .. })));
    let r = cure(|c| {
        c.workload = WorkloadFamily::YcsbA;
        c.value_bytes = 256;
    });
    let sizes: Vec<usize> = r
        .history
        .txns
        .iter()
        .flat_map(|t| &t.ops)
        .filter_map(|op| match op {
            HOp::Write {
                update: Update::Assign(v),
                ..
            } => Some(v.len()),
            _ => None,
        })
        .collect();
    assert!(sizes.len() > 50, "writes were recorded: {}", sizes.len());
    assert!(sizes.iter().all(|n| *n == 256), "{sizes:?}");
}

#[test]
fn rubis_on_cure_refuses_exactly_its_strong_txns_and_commits_the_causal_ones() {
    let r = cure(|c| c.workload = WorkloadFamily::Rubis);
    assert!(r.refused > 0, "cure has no strong transactions");
    let strong: Vec<_> = r
        .history
        .txns
        .iter()
        .filter(|t| t.kind == TxnKind::Strong)
        .collect();
    assert_eq!(strong.len(), r.refused);
    assert!(strong.iter().all(|t| t.outcome == Outcome::Aborted));
    // About 10% of the mix is strong.
    let share = strong.len() as f64 / r.history.txns.len() as f64;
    assert!((0.06..0.14).contains(&share), "strong share {share}");
    let writers = r
        .history
        .txns
        .iter()
        .filter(|t| t.outcome == Outcome::Committed)
        .filter(|t| t.ops.iter().any(|op| matches!(op, HOp::Write { .. })))
        .count();
    assert!(writers > 0, "registerItem and storeComment commit");
}

#[test]
fn a_zero_remote_ratio_and_no_padding_keep_the_trace_hash() {
    let plain = cure(|_| {});
    let explicit = cure(|c| {
        c.workload = WorkloadFamily::Custom;
        c.remote_ratio = 0.0;
        c.value_bytes = 0;
    });
    assert_eq!(plain.trace_hash, explicit.trace_hash);
    let remote = cure(|c| c.remote_ratio = 0.5);
    assert_ne!(
        plain.trace_hash, remote.trace_hash,
        "remote draws change the run"
    );
}

#[test]
fn paris_shaped_ycsb_runs_and_a_local_ratio_alone_changes_nothing_under_full_replication() {
    let r = cure(|c| {
        c.workload = WorkloadFamily::YcsbB;
        c.keys = 1_000;
        c.txn_ops = 20;
        c.partitions_per_txn = 4;
        c.local_dc_ratio = 0.95;
    });
    let committed: Vec<_> = r
        .history
        .txns
        .iter()
        .filter(|t| t.outcome == Outcome::Committed)
        .collect();
    assert!(committed.len() > 50);
    for t in committed {
        let reads = t.ops.iter().take_while(|op| matches!(op, HOp::Read { .. }));
        assert_eq!(reads.count(), 19, "19 reads first: {:?}", t.ops);
        assert!(matches!(t.ops[19..], [HOp::Write { .. }]), "then 1 write");
    }
    let plain = cure(|_| {});
    let local = cure(|c| c.local_dc_ratio = 0.5);
    assert_eq!(
        plain.trace_hash, local.trace_hash,
        "every partition is local"
    );
}
