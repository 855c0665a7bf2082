//! Which transactions must survive although no client heard them commit: those of failed
//! DCs, for protocols whose failed-DC writes may not vanish (UniStore, CUREFT:
//! `failed_dc_writes_may_vanish == false`), and those of surviving DCs whose outcome is
//! unknown but that committed, as a read proves. A failed DC's transaction is *required*
//! (it must be visible at every surviving DC after quiescence, like any committed
//! transaction) when
//!
//! - (a) a read at a surviving DC observed one of its writes (a transaction's read, whatever
//!   its outcome, or a final read): that DC stores it, and forwarding must bring it to the
//!   others (under partial replication, to the other surviving replicas of the key: the
//!   final reads take each key only where it is replicated; a read served by a remote
//!   replica is taken as a survivor's read, which no protocol that both replicates
//!   partially and tolerates DC failures has needed to refine yet);
//! - (b) it precedes a completed uniform barrier of its session (the session's committed
//!   transactions before it), provided no more DCs failed than the protocol tolerates;
//! - (c) it is a committed strong transaction (PoR's Eventual Visibility holds for strong
//!   transactions whatever their origin: their certification made them durable in a
//!   majority of DCs), provided no more DCs failed than the protocol tolerates;
//! - or it is in the causal past of a required transaction or of a committed transaction of
//!   a surviving DC: it wrote what such a transaction read, or it is a committed
//!   transaction earlier in its session (a snapshot holds the session's past, and a moved
//!   session's ATTACH made that past visible at the new DC).
//!
//! Counters show no write ids, so a transaction is required through its other writes, (b)
//! or causality. A failed DC's transaction that is not required may or may not be visible.
//!
//! A surviving DC's transaction with an unknown outcome (its client timed out, or its node
//! crashed before answering) is required by the same walk: when a read observed it, or it
//! is in the causal past of a required or committed transaction. It committed, and a
//! surviving DC loses no committed transaction; one nobody observed may or may not be
//! visible.

use crate::liveness::FinalStateRules;
use causeway_check::{session_order, HOp, History, Outcome};
use causeway_core::OpId;
use std::collections::{BTreeMap, BTreeSet};

/// Indices (into `history.txns`) of the transactions that must survive although their
/// client never learned that they committed: the failed DCs' transactions described
/// above (for protocols whose failed-DC writes may not vanish), and the surviving DCs'
/// transactions with an unknown outcome that are observed or in the causal past of a
/// committed or required transaction by the same rules. A read of a write proves that its
/// transaction committed (every protocol here reads committed state only, which check 1
/// of the TCC checker enforces), and a committed transaction of a DC that did not fail
/// survives crashes: an anomaly that exposes a write before it is durable and then loses
/// it in a crash (the `node-commit-early` mutation) fails here. Only for protocols with
/// atomic transactions (`FinalStateRules::causal`).
pub fn required_txns(history: &History, failures: &FinalStateRules) -> BTreeSet<usize> {
    let failed_dcs_count = !failures.failed.is_empty() && !failures.may_vanish;
    let writers = writers(history);
    let prev = previous_committed(history);
    let mut seen = BTreeSet::new();
    let mut frontier = seeds(history, failures, &writers);
    while let Some(i) = frontier.pop() {
        if !seen.insert(i) {
            continue;
        }
        frontier.extend(observed_by(history, i, &writers));
        frontier.extend(prev[i]);
    }
    seen.retain(|&i| {
        let t = &history.txns[i];
        match failures.has_failed(t) {
            true => failed_dcs_count,
            false => failures.causal && failures.atomic_unknowns && t.outcome == Outcome::Unknown,
        }
    });
    seen
}

/// The transaction (index) of each write id, aborted transactions left out.
fn writers(history: &History) -> BTreeMap<OpId, usize> {
    let mut writers = BTreeMap::new();
    for (i, t) in history.txns.iter().enumerate() {
        if t.outcome == Outcome::Aborted {
            continue;
        }
        for op in &t.ops {
            if let HOp::Write { id, .. } = op {
                writers.insert(*id, i);
            }
        }
    }
    writers
}

/// The writers of what transaction `i`'s reads observed, itself left out: reading its own
/// write proves nothing about whether it committed.
fn observed_by(history: &History, i: usize, writers: &BTreeMap<OpId, usize>) -> Vec<usize> {
    let ids = history.txns[i].ops.iter().flat_map(|op| match op {
        HOp::Read { observed, .. } => &observed[..],
        HOp::Write { .. } => &[],
    });
    let others = ids.filter_map(|id| writers.get(id).copied());
    others.filter(|&w| w != i).collect()
}

/// For each transaction, the last committed transaction before it in its session.
fn previous_committed(history: &History) -> Vec<Option<usize>> {
    let mut prev = vec![None; history.txns.len()];
    for order in session_order(history).values() {
        let mut last = None;
        for &i in order {
            prev[i] = last;
            if history.txns[i].outcome == Outcome::Committed {
                last = Some(i);
            }
        }
    }
    prev
}

/// Where the walk starts: committed transactions of surviving DCs, the writers that reads
/// at surviving DCs observed (a), and the committed transactions before each completed
/// barrier (b).
fn seeds(
    history: &History,
    failures: &FinalStateRules,
    writers: &BTreeMap<OpId, usize>,
) -> Vec<usize> {
    let mut seeds = Vec::new();
    for (i, t) in history.txns.iter().enumerate() {
        if failures.has_failed(t) {
            continue;
        }
        if t.outcome == Outcome::Committed {
            seeds.push(i);
        }
        seeds.extend(observed_by(history, i, writers)); // (a), whatever the reader's outcome
    }
    for f in history.finals.iter() {
        if !failures.failed.contains(&f.dc.0) {
            seeds.extend(f.observed.iter().filter_map(|id| writers.get(id).copied()));
        }
    }
    if failures.failed.len() <= failures.tolerated {
        seeds.extend(before_barriers(history));
        let strong = history.txns.iter().enumerate().filter(|(_, t)| {
            t.kind == causeway_core::TxnKind::Strong && t.outcome == Outcome::Committed
        });
        seeds.extend(strong.map(|(i, _)| i)); // (c)
    }
    seeds
}

/// (b): each session's committed transactions before one of its completed barriers.
fn before_barriers(history: &History) -> Vec<usize> {
    let order = session_order(history);
    let mut out = Vec::new();
    for b in &history.barriers {
        let Some(txns) = order.get(&b.session) else {
            continue;
        };
        let before = &txns[..b.txns.min(txns.len())];
        let committed = before
            .iter()
            .filter(|&&i| history.txns[i].outcome == Outcome::Committed);
        out.extend(committed);
    }
    out
}
