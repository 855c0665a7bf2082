//! Liveness after healing: what the final reads must show once every fault healed and the
//! system quiesced. Convergence (every surviving DC reads the same) is the checker's; here
//! are the checks that need outcomes: every required counter increment is counted, every
//! required set add that nothing removed is visible (its tag, or its element through a
//! re-add that replaced the tag), and no register shows a write that a required
//! assignment knowingly overwrote (one its transaction read, or its session wrote before),
//! where a committed transaction of a surviving DC is required, and so is one with an
//! unknown outcome that a read observed (it did commit: `crate::required`); any other
//! unknown outcome may or may not be visible. The last two rules hold only for protocols
//! with atomic, causal transactions ([`FinalStateRules`]'s `causal`, `registers` and
//! `atomic_unknowns`, from the protocol's `Requirements`).
//!
//! Partial replication ([`final_read_keys`]): each surviving DC's final session reads only
//! the keys of the partitions that DC replicates, so convergence compares the replicas of
//! each key and both checks judge a key at the surviving DCs that read it; a key no
//! surviving DC replicates is read nowhere and left out (`SimResult::unreplicated_keys`).
//! Under full replication every surviving DC reads every key, as before.
//!
//! DC failures ([`FinalStateRules`]): the failed DCs' final reads are never taken. Where the
//! protocol lets their writes vanish (Cure §IV-A, eventual), every key a failed DC wrote is
//! left out of both checks (`tainted_keys`). Otherwise (UniStore, CUREFT) every key stays
//! in, and a failed DC's transaction counts as required when `crate::required` says it
//! must survive, and as an unknown outcome otherwise.

use crate::required::required_txns;
use causeway_check::{session_order, HOp, History, Outcome, TxnRecord};
use causeway_core::crdt::{ObjType, Update};
use causeway_core::{DcId, Key, ObjValue, OpId, Topology, TxnKind};
use std::collections::{BTreeMap, BTreeSet};

/// What the final reads cover: the keys each surviving DC reads, and how many keys no
/// surviving DC replicates (read nowhere, so left out of convergence and liveness).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FinalKeys {
    /// Per surviving DC, in the order of the keys given: those of the partitions it
    /// replicates (all of them under full replication).
    pub by_dc: BTreeMap<u16, Vec<(Key, ObjType)>>,
    /// Keys whose every replica failed.
    pub unreplicated: usize,
}

/// Splits `keys` among the `survivors` for the final reads: DC `d` reads key `k` iff
/// `topology.replicates(d, topology.partition_of(k))`. Under full replication every
/// survivor reads every key, in the same order (the run replays as before).
pub fn final_read_keys(
    topology: &Topology,
    keys: &[(Key, ObjType)],
    survivors: &[u16],
) -> FinalKeys {
    if topology.replication_factor >= topology.dcs {
        let by_dc = survivors.iter().map(|d| (*d, keys.to_vec())).collect();
        let unreplicated = if survivors.is_empty() { keys.len() } else { 0 };
        return FinalKeys {
            by_dc,
            unreplicated,
        };
    }
    let mut out = FinalKeys {
        by_dc: survivors.iter().map(|d| (*d, Vec::new())).collect(),
        unreplicated: 0,
    };
    for (key, obj) in keys {
        let replicas = topology.replicas_of(topology.partition_of(key));
        let mut read = false;
        for dc in replicas {
            if let Some(list) = out.by_dc.get_mut(&dc.0) {
                list.push((key.clone(), *obj));
                read = true;
            }
        }
        if !read {
            out.unreplicated += 1;
        }
    }
    out
}

/// The rules a run's final state is held to: the DCs that failed for good, and what the
/// protocol promises about their writes, unknown outcomes and registers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FinalStateRules {
    /// The DCs that failed for good.
    pub failed: BTreeSet<u16>,
    /// Their writes may vanish (`Requirements::failed_dc_writes_may_vanish`).
    pub may_vanish: bool,
    /// How many DC failures the protocol's completed barriers survive (its `f`).
    pub tolerated: usize,
    /// The protocol promises atomic transactions whose last-writer-wins order follows
    /// causality (every guarantee but `eventual`'s convergence). Two checks rely on it: a
    /// transaction with an unknown outcome that a read observed counts as committed whole
    /// (`crate::required`), and a register may not show a write that a required
    /// assignment knowingly overwrote. `eventual` writes each key apart, so a crash may
    /// keep one write of a transaction and lose another; its clocks order its registers.
    pub causal: bool,
    /// The register rule applies (`Requirements::final_registers`; with `causal`).
    pub registers: bool,
    /// The unknown-outcome rule applies (`Requirements::atomic_unknowns`; with `causal`).
    pub atomic_unknowns: bool,
}

impl FinalStateRules {
    /// Whether `t` ran at a failed DC.
    pub fn has_failed(&self, t: &TxnRecord) -> bool {
        self.failed.contains(&t.dc.0)
    }
}

/// How a transaction's writes weigh in the final state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Weight {
    /// Must be visible.
    Required,
    /// May or may not be visible.
    Maybe,
    /// Never visible (aborted).
    Void,
}

#[derive(Default)]
struct KeyFacts {
    sum_required: i64,
    maybe_neg: i64,
    maybe_pos: i64,
    adds: Vec<(Vec<u8>, OpId)>,
    removed: BTreeSet<Vec<u8>>,
    /// Register: a required assignment of the key exists.
    assigned: bool,
    /// Register: writes a required assignment knowingly overwrote, with that assignment.
    overwritten: BTreeMap<OpId, OpId>,
}

fn weight(t: &TxnRecord, failed_here: bool, required: bool) -> Weight {
    match t.outcome {
        Outcome::Aborted => Weight::Void,
        _ if required => Weight::Required,
        Outcome::Committed if !failed_here => Weight::Required,
        _ => Weight::Maybe,
    }
}

fn collect(history: &History, failures: &FinalStateRules) -> BTreeMap<Key, KeyFacts> {
    let required = required_txns(history, failures);
    let weights: Vec<Weight> = history
        .txns
        .iter()
        .enumerate()
        .map(|(i, t)| weight(t, failures.has_failed(t), required.contains(&i)))
        .collect();
    let mut facts: BTreeMap<Key, KeyFacts> = BTreeMap::new();
    if failures.causal && failures.registers {
        collect_overwrites(history, &weights, &mut facts);
    }
    for (i, txn) in history.txns.iter().enumerate() {
        let w = weights[i];
        for op in &txn.ops {
            let HOp::Write { key, update, id } = op else {
                continue;
            };
            let f = facts.entry(key.clone()).or_default();
            match (update, w) {
                (_, Weight::Void) => {}
                (Update::Increment(d), Weight::Required) => f.sum_required += d,
                (Update::Increment(d), _) if *d < 0 => f.maybe_neg += d,
                (Update::Increment(d), _) => f.maybe_pos += d,
                (Update::Add(e), Weight::Required) => f.adds.push((e.clone(), *id)),
                (Update::Remove(e), _) => {
                    f.removed.insert(e.clone());
                }
                _ => {}
            }
        }
    }
    facts
}

/// The register writes each required assignment knowingly overwrote: the value its
/// transaction read of the key before assigning it, the session's own earlier committed
/// assignment of the key, or its own earlier assignment in the transaction. Its commit
/// (and so its place in last-writer-wins order) comes after every one of them, so the
/// final state may not show one of them: that would mean the assignment was lost.
fn collect_overwrites(history: &History, weights: &[Weight], facts: &mut BTreeMap<Key, KeyFacts>) {
    for order in session_order(history).values() {
        // The register ids of each key this session last wrote in a committed txn.
        let mut session_last: BTreeMap<&Key, Vec<OpId>> = BTreeMap::new();
        for &i in order {
            let t = &history.txns[i];
            let mut known = session_last.clone();
            for op in &t.ops {
                match op {
                    HOp::Read {
                        key,
                        obj: ObjType::Lww,
                        observed,
                        ..
                    } => {
                        known.insert(key, observed.clone());
                    }
                    HOp::Write {
                        key,
                        update: Update::Assign(_),
                        id,
                    } => {
                        let before = known.insert(key, vec![*id]).unwrap_or_default();
                        if weights[i] == Weight::Required {
                            let f = facts.entry(key.clone()).or_default();
                            f.assigned = true;
                            f.overwritten.extend(before.into_iter().map(|b| (b, *id)));
                        }
                    }
                    _ => {}
                }
            }
            if t.outcome == Outcome::Committed {
                session_last = known;
            }
        }
    }
}

/// Keys whose final state may legitimately differ between surviving DCs: those a failed
/// DC wrote (with a possibly committed transaction), where its writes may vanish; none
/// otherwise.
pub fn tainted_keys(history: &History, failures: &FinalStateRules) -> BTreeSet<Key> {
    if !failures.may_vanish {
        return BTreeSet::new();
    }
    let from_failed = history
        .txns
        .iter()
        .filter(|t| failures.has_failed(t) && t.outcome != Outcome::Aborted);
    let writes = from_failed.flat_map(|t| &t.ops).filter_map(|op| match op {
        HOp::Write { key, .. } => Some(key.clone()),
        HOp::Read { .. } => None,
    });
    writes.collect()
}

/// The history with the final reads that must agree: those of surviving DCs, without the
/// tainted keys.
pub fn comparable(history: &History, failures: &FinalStateRules) -> History {
    let tainted = tainted_keys(history, failures);
    let mut h = history.clone();
    h.finals
        .retain(|f| !tainted.contains(&f.key) && !failures.failed.contains(&f.dc.0));
    h
}

/// The rule for a run whose fault plan drew nothing, of a protocol that aborts causal txns
/// only under faults (`Requirements::causal_commits_without_faults`): every causal txn
/// committed. An abort (or an unknown outcome) there is a bug the checker cannot see, as
/// an aborted txn breaks no safety guarantee: PaRiS aborted every request that read one
/// key twice. `reasons` are the run's abort reasons, named in the violation.
pub fn check_fault_free_commits(
    history: &History,
    reasons: &BTreeMap<String, u64>,
) -> Result<(), String> {
    let failed: Vec<&TxnRecord> = history
        .txns
        .iter()
        .filter(|t| t.kind == TxnKind::Causal && t.outcome != Outcome::Committed)
        .collect();
    let Some(first) = failed.first() else {
        return Ok(());
    };
    let why = causeway_core::abort_reasons::summary_line(reasons)
        .unwrap_or_else(|| "no reason given".into());
    Err(format!(
        "liveness: {} causal txn(s) did not commit in a run without faults \
         (first: {:?}, {:?}); {why}",
        failed.len(),
        first.id,
        first.outcome
    ))
}

/// Checks the final reads against the required writes.
pub fn check_final_state(history: &History, failures: &FinalStateRules) -> Result<(), String> {
    let facts = collect(history, failures);
    let comparable = comparable(history, failures);
    for read in &comparable.finals {
        let Some(f) = facts.get(&read.key) else {
            continue;
        };
        check_key(read.dc, &read.key, &read.value, &read.observed, f)?;
    }
    Ok(())
}

/// A register's final value is no write a required assignment overwrote, and not the
/// initial value once a required assignment exists.
fn check_register(dc: DcId, key: &Key, observed: &[OpId], f: &KeyFacts) -> Result<(), String> {
    match observed.first() {
        None if f.assigned => Err(format!(
            "liveness: register {key} reads its initial value at DC {} after quiescence, \
             though a required transaction assigned it",
            dc.0
        )),
        Some(shown) => match f.overwritten.get(shown) {
            Some(by) if by != shown => Err(format!(
                "liveness: register {key} shows {shown} at DC {} after quiescence, which the \
                 required assignment {by} overwrote",
                dc.0
            )),
            _ => Ok(()),
        },
        None => Ok(()),
    }
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
            let (lo, hi) = (f.sum_required + f.maybe_neg, f.sum_required + f.maybe_pos);
            if *v < lo || *v > hi {
                return Err(format!(
                    "liveness: counter {key} reads {v} at DC {} after quiescence; required increments sum to {} \
                     (unknown outcomes allow {lo}..={hi})",
                    dc.0, f.sum_required
                ));
            }
        }
        ObjValue::Lww(_) => check_register(dc, key, observed, f)?,
        ObjValue::Set(elems) => {
            // A re-add of the element replaces the tags it observed (optimized OR-set):
            // the element must show, by this add's tag or a later one.
            for (elem, id) in &f.adds {
                let shown = observed.contains(id) || elems.contains(elem);
                if !f.removed.contains(elem) && !shown {
                    return Err(format!(
                        "liveness: required add {id} to set {key} never removed but invisible at DC {} after quiescence",
                        dc.0
                    ));
                }
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_core::{SessionId, TxnId};

    fn txn(seq: u64, kind: TxnKind, outcome: Outcome) -> TxnRecord {
        TxnRecord {
            id: TxnId {
                session: SessionId(1),
                seq,
            },
            session: SessionId(1),
            dc: DcId(0),
            kind,
            label: None,
            start_ns: seq * 10,
            end_ns: seq * 10 + 5,
            ops: Vec::new(),
            outcome,
        }
    }

    fn history(txns: Vec<TxnRecord>) -> History {
        History {
            txns,
            ..History::default()
        }
    }

    #[test]
    fn a_fault_free_run_must_commit_every_causal_txn() {
        let mut reasons = BTreeMap::new();
        causeway_core::abort_reasons::count(&mut reasons, "transaction unknown at coordinator");
        let committed = txn(1, TxnKind::Causal, Outcome::Committed);
        let ok = history(vec![
            committed.clone(),
            // A strong txn may lose a certification; the rule is about causal ones.
            txn(2, TxnKind::Strong, Outcome::Aborted),
        ]);
        assert_eq!(check_fault_free_commits(&ok, &reasons), Ok(()));
        for outcome in [Outcome::Aborted, Outcome::Unknown] {
            let bad = history(vec![committed.clone(), txn(3, TxnKind::Causal, outcome)]);
            let e = check_fault_free_commits(&bad, &reasons).expect_err("rejected");
            assert!(
                e.starts_with("liveness: 1 causal txn(s) did not commit"),
                "{e}"
            );
            assert!(e.contains("transaction unknown at coordinator"), "{e}");
        }
    }
}
