//! Workloads of read-only, write-only and strong transactions: each kind holds only the
//! operations it should, and a protocol without strong transactions refuses them cleanly
//! (recorded as aborted strong transactions and counted, not a violation).

mod common;

use causeway_check::{HOp, Outcome};
use causeway_core::TxnKind;
use causeway_sim::{SimConfig, SimResult};

fn cure(tweak: impl FnOnce(&mut SimConfig)) -> SimResult {
    common::cure_run(3, tweak)
}

#[test]
fn read_only_transactions_never_write() {
    let r = cure(|c| c.read_only_ratio = 1.0);
    assert!(r.history.txns.iter().all(|t| t.kind == TxnKind::Causal));
    for t in &r.history.txns {
        assert!(
            t.ops.iter().all(|op| matches!(op, HOp::Read { .. })),
            "{} wrote",
            t.id
        );
    }
    let reads = r.history.txns.iter().map(|t| t.ops.len()).sum::<usize>();
    assert!(reads > 100, "reads were recorded: {reads}");
}

#[test]
fn write_only_transactions_never_read() {
    let r = cure(|c| c.write_only_ratio = 1.0);
    for t in &r.history.txns {
        assert!(
            t.ops.iter().all(|op| matches!(op, HOp::Write { .. })),
            "{} read",
            t.id
        );
    }
    let writes = r.history.txns.iter().map(|t| t.ops.len()).sum::<usize>();
    assert!(writes > 100, "writes were recorded: {writes}");
}

#[test]
fn a_protocol_without_strong_transactions_refuses_them_without_a_violation() {
    let r = cure(|c| c.strong_ratio = 0.5);
    assert!(r.refused > 0, "cure has no strong transactions");
    let strong: Vec<_> = r
        .history
        .txns
        .iter()
        .filter(|t| t.kind == TxnKind::Strong)
        .collect();
    // Every strong transaction was refused at begin: aborted, with nothing in it.
    assert_eq!(strong.len(), r.refused);
    assert!(strong
        .iter()
        .all(|t| t.outcome == Outcome::Aborted && t.ops.is_empty()));
    assert!(r.aborted >= r.refused);
    // About half the transactions, and the causal half still commits.
    let total = r.history.txns.len();
    assert!(
        r.refused * 3 > total && r.refused * 3 < total * 2,
        "{} of {total}",
        r.refused
    );
}
