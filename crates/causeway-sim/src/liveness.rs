//! Liveness after healing: what the final reads must show once every fault healed and the
//! system quiesced. Convergence (every surviving DC reads the same) is the checker's; here
//! are the checks that need outcomes: every committed counter increment is counted, every
//! committed set add that nothing removed is visible. Writes that originate in a failed DC
//! may stay invisible (Cure §IV-A), so keys such a DC wrote are left out, and the failed
//! DC's reads too.

use causeway_check::{HOp, History, Outcome};
use causeway_core::crdt::Update;
use causeway_core::{DcId, Key, ObjValue, OpId};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Default)]
struct KeyFacts {
    sum_committed: i64,
    unknown_neg: i64,
    unknown_pos: i64,
    adds: Vec<(Vec<u8>, OpId)>,
    removed: BTreeSet<Vec<u8>>,
}

fn collect(history: &History, failed_dc: Option<u16>) -> (BTreeMap<Key, KeyFacts>, BTreeSet<Key>) {
    let mut facts: BTreeMap<Key, KeyFacts> = BTreeMap::new();
    let mut tainted = BTreeSet::new();
    for txn in &history.txns {
        for op in &txn.ops {
            let HOp::Write { key, update, id } = op else {
                continue;
            };
            if Some(txn.dc.0) == failed_dc && txn.outcome != Outcome::Aborted {
                tainted.insert(key.clone());
            }
            let f = facts.entry(key.clone()).or_default();
            match (update, txn.outcome) {
                (_, Outcome::Aborted) => {}
                (Update::Increment(d), Outcome::Committed) => f.sum_committed += d,
                (Update::Increment(d), _) if *d < 0 => f.unknown_neg += d,
                (Update::Increment(d), _) => f.unknown_pos += d,
                (Update::Add(e), Outcome::Committed) => f.adds.push((e.clone(), *id)),
                (Update::Remove(e), _) => {
                    f.removed.insert(e.clone());
                }
                _ => {}
            }
        }
    }
    (facts, tainted)
}

/// Keys written (with a possibly committed transaction) from the failed DC: their final
/// state may legitimately differ between surviving DCs.
pub fn tainted_keys(history: &History, failed_dc: Option<u16>) -> BTreeSet<Key> {
    collect(history, failed_dc).1
}

/// Checks the final reads against the committed writes.
pub fn check_final_state(history: &History, failed_dc: Option<u16>) -> Result<(), String> {
    let (facts, tainted) = collect(history, failed_dc);
    for read in &history.finals {
        if tainted.contains(&read.key) || Some(read.dc.0) == failed_dc {
            continue;
        }
        let Some(f) = facts.get(&read.key) else {
            continue;
        };
        check_key(read.dc, &read.key, &read.value, &read.observed, f)?;
    }
    Ok(())
}

fn check_key(
    dc: DcId,
    key: &Key,
    value: &ObjValue,
    observed: &[OpId],
    f: &KeyFacts,
) -> Result<(), String> {
    match value {
        ObjValue::Counter(v) => {
            let (lo, hi) = (
                f.sum_committed + f.unknown_neg,
                f.sum_committed + f.unknown_pos,
            );
            if *v < lo || *v > hi {
                return Err(format!(
                    "liveness: counter {key} reads {v} at DC {} after quiescence; committed increments sum to {} \
                     (unknown outcomes allow {lo}..={hi})",
                    dc.0, f.sum_committed
                ));
            }
        }
        ObjValue::Set(_) => {
            for (elem, id) in &f.adds {
                if !f.removed.contains(elem) && !observed.contains(id) {
                    return Err(format!(
                        "liveness: committed add {id} to set {key} never removed but invisible at DC {} after quiescence",
                        dc.0
                    ));
                }
            }
        }
        _ => {}
    }
    Ok(())
}
