//! The final-state checks after DC failures, on hand-written histories: for protocols whose
//! failed-DC writes may not vanish (UniStore, CUREFT) a failed DC's transaction that a
//! survivor made visible, or that a completed barrier covered, or that such a transaction
//! depends on, must be visible at every surviving DC; one nobody saw may vanish. For Cure
//! the keys a failed DC wrote stay exempt.

use causeway_check::{BarrierRecord, FinalRead, HOp, History, Outcome, TxnRecord};
use causeway_core::{DcId, Key, ObjType, ObjValue, OpId, SessionId, TxnId, TxnKind, Update};
use causeway_sim::liveness::{check_final_state, comparable, FinalStateRules};
use std::collections::BTreeSet;

fn oid(session: u64, seq: u64, index: u32) -> OpId {
    OpId {
        txn: TxnId {
            session: SessionId(session),
            seq,
        },
        index,
    }
}

/// Txn `s<session>.t<seq>` of session `session` at `dc`, committed, starting at `at`.
fn txn(session: u64, seq: u64, dc: u16, at: u64, ops: Vec<HOp>) -> TxnRecord {
    TxnRecord {
        id: oid(session, seq, 0).txn,
        session: SessionId(session),
        dc: DcId(dc),
        kind: TxnKind::Causal,
        start_ns: at,
        end_ns: at + 5,
        ops,
        outcome: Outcome::Committed,
        label: None,
    }
}

fn write(key: &str, update: Update, id: OpId) -> HOp {
    HOp::Write {
        key: Key::from(key),
        update,
        id,
    }
}

fn add(key: &str, elem: &str, id: OpId) -> HOp {
    write(key, Update::Add(elem.as_bytes().to_vec()), id)
}

fn incr(key: &str, by: i64, id: OpId) -> HOp {
    write(key, Update::Increment(by), id)
}

fn assign(key: &str, value: &str, id: OpId) -> HOp {
    write(key, Update::Assign(value.as_bytes().to_vec()), id)
}

/// A read of register `key` showing the write `id` of `value`.
fn get(key: &str, value: &str, id: OpId) -> HOp {
    HOp::Read {
        key: Key::from(key),
        obj: ObjType::Lww,
        value: ObjValue::Lww(Some(value.as_bytes().to_vec())),
        observed: vec![id],
    }
}

/// A set read showing `adds` (element, id).
fn members(key: &str, adds: &[(&str, OpId)]) -> HOp {
    HOp::Read {
        key: Key::from(key),
        obj: ObjType::Set,
        value: ObjValue::Set(adds.iter().map(|(e, _)| e.as_bytes().to_vec()).collect()),
        observed: adds.iter().map(|(_, id)| *id).collect(),
    }
}

fn final_set(dc: u16, key: &str, adds: &[(&str, OpId)]) -> FinalRead {
    let HOp::Read {
        key,
        obj,
        value,
        observed,
    } = members(key, adds)
    else {
        unreachable!()
    };
    FinalRead {
        dc: DcId(dc),
        key,
        obj,
        value,
        observed,
    }
}

fn final_counter(dc: u16, key: &str, value: i64) -> FinalRead {
    FinalRead {
        dc: DcId(dc),
        key: Key::from(key),
        obj: ObjType::Counter,
        value: ObjValue::Counter(value),
        observed: Vec::new(),
    }
}

/// DC 0 failed; `vanish` for Cure's promise, f = 1 for UniStore's.
fn dc0_failed(vanish: bool) -> FinalStateRules {
    FinalStateRules {
        failed: BTreeSet::from([0]),
        may_vanish: vanish,
        tolerated: usize::from(!vanish),
        causal: true,
        registers: true,
        atomic_unknowns: true,
    }
}

/// No DC failed, for a protocol with atomic, causal transactions.
fn no_failures() -> FinalStateRules {
    FinalStateRules {
        causal: true,
        registers: true,
        atomic_unknowns: true,
        ..FinalStateRules::default()
    }
}

fn history(txns: Vec<TxnRecord>, finals: Vec<FinalRead>) -> History {
    History {
        txns,
        finals,
        ..History::default()
    }
}

fn rejects(h: &History, failures: &FinalStateRules, what: &str) {
    let e = check_final_state(h, failures).expect_err("the liveness check must reject this");
    assert!(e.contains(what), "{e}");
}

#[test]
fn a_failed_dc_add_nobody_saw_may_vanish() {
    let t1 = txn(1, 1, 0, 10, vec![add("s", "a", oid(1, 1, 0))]);
    let h = history(
        vec![t1],
        vec![final_set(1, "s", &[]), final_set(2, "s", &[])],
    );
    check_final_state(&h, &dc0_failed(false)).expect("not required: may vanish");
}

#[test]
fn a_failed_dc_add_a_survivor_saw_must_reach_every_survivor() {
    let a = oid(1, 1, 0);
    let t1 = txn(1, 1, 0, 10, vec![add("s", "a", a)]);
    let saw = txn(2, 1, 1, 50, vec![members("s", &[("a", a)])]);
    let finals = vec![final_set(1, "s", &[("a", a)]), final_set(2, "s", &[])];
    let h = history(vec![t1.clone(), saw.clone()], finals);
    rejects(&h, &dc0_failed(false), "required add s1.t1.o0 to set s");
    // Reaching both survivors is what the protocol promises.
    let finals = vec![
        final_set(1, "s", &[("a", a)]),
        final_set(2, "s", &[("a", a)]),
    ];
    check_final_state(&history(vec![t1, saw], finals), &dc0_failed(false)).expect("visible");
}

#[test]
fn cure_keeps_its_exemption_for_keys_the_failed_dc_wrote() {
    let a = oid(1, 1, 0);
    let t1 = txn(
        1,
        1,
        0,
        10,
        vec![add("s", "a", a), incr("c", 5, oid(1, 1, 1))],
    );
    let saw = txn(2, 1, 1, 50, vec![members("s", &[("a", a)])]);
    let finals = vec![
        final_set(1, "s", &[("a", a)]),
        final_set(2, "s", &[]),
        final_counter(1, "c", 0),
        final_counter(2, "c", 5),
    ];
    let h = history(vec![t1, saw], finals);
    check_final_state(&h, &dc0_failed(true)).expect("exempt keys");
    assert!(comparable(&h, &dc0_failed(true)).finals.is_empty());
    // Without the exemption every key stays in the comparison.
    assert_eq!(comparable(&h, &dc0_failed(false)).finals.len(), 4);
}

#[test]
fn a_barriered_txn_of_the_failed_dc_missing_everywhere_is_rejected() {
    let t1 = txn(1, 1, 0, 10, vec![incr("c", 5, oid(1, 1, 0))]);
    let mut h = history(
        vec![t1],
        vec![final_counter(1, "c", 0), final_counter(2, "c", 0)],
    );
    let barrier = |txns| BarrierRecord {
        session: SessionId(1),
        dc: DcId(0),
        start_ns: 20,
        end_ns: 90,
        txns,
    };
    // A barrier before the txn covers nothing: it may vanish.
    h.barriers.push(barrier(0));
    check_final_state(&h, &dc0_failed(false)).expect("the barrier came first");
    // A barrier after it: the increment must survive the failure.
    h.barriers.push(barrier(1));
    rejects(&h, &dc0_failed(false), "counter c reads 0 at DC 1");
    // Unless more DCs failed than the protocol tolerates.
    let beyond = FinalStateRules {
        tolerated: 0,
        ..dc0_failed(false)
    };
    check_final_state(&h, &beyond).expect("barriers promise nothing past f failures");
    // Seen everywhere, it passes.
    h.finals = vec![final_counter(1, "c", 5), final_counter(2, "c", 5)];
    check_final_state(&h, &dc0_failed(false)).expect("visible");
}

#[test]
fn a_counter_is_required_through_the_other_writes_of_its_txn() {
    let r = oid(1, 1, 0);
    let t1 = txn(
        1,
        1,
        0,
        10,
        vec![assign("r", "x", r), incr("c", 3, oid(1, 1, 1))],
    );
    let saw = txn(2, 1, 2, 50, vec![get("r", "x", r)]);
    let h = history(
        vec![t1.clone(), saw.clone()],
        vec![final_counter(1, "c", 3), final_counter(2, "c", 0)],
    );
    rejects(&h, &dc0_failed(false), "counter c reads 0 at DC 2");
    // An unknown outcome that a survivor observed did commit: required as well.
    let mut unknown = t1;
    unknown.outcome = Outcome::Unknown;
    let h = history(vec![unknown, saw], h.finals.clone());
    rejects(&h, &dc0_failed(false), "counter c reads 0 at DC 2");
}

#[test]
fn the_causal_past_of_a_required_txn_is_required() {
    // Session 1 at DC 0: t1 adds, t2 writes a register that DC 1 read. t1 is in t2's
    // past (session order), so it must survive too.
    let a = oid(1, 1, 0);
    let r = oid(1, 2, 0);
    let t1 = txn(1, 1, 0, 10, vec![add("s", "a", a)]);
    let t2 = txn(1, 2, 0, 20, vec![assign("r", "x", r)]);
    let saw = txn(2, 1, 1, 50, vec![get("r", "x", r)]);
    let finals = vec![final_set(1, "s", &[("a", a)]), final_set(2, "s", &[])];
    let h = history(vec![t1, t2, saw], finals);
    rejects(&h, &dc0_failed(false), "required add s1.t1.o0");
}

#[test]
fn a_session_that_moved_to_a_survivor_keeps_its_failed_dc_past() {
    // Session 1 ran t1 at DC 0, then moved to DC 1 (new protocol session 9) and committed
    // there: t1 is in its past, so DC 0's failure must not lose it.
    let a = oid(1, 1, 0);
    let t1 = txn(1, 1, 0, 10, vec![add("s", "a", a)]);
    let mut moved = txn(9, 1, 1, 300, vec![incr("c", 1, oid(9, 1, 0))]);
    moved.session = SessionId(1);
    let finals = vec![
        final_set(1, "s", &[("a", a)]),
        final_set(2, "s", &[]),
        final_counter(1, "c", 1),
        final_counter(2, "c", 1),
    ];
    let h = history(vec![t1, moved], finals);
    rejects(&h, &dc0_failed(false), "required add s1.t1.o0 to set s");
}

#[test]
fn several_failed_dcs_are_all_left_out_of_the_final_reads() {
    let failures = FinalStateRules {
        failed: BTreeSet::from([0, 3]),
        may_vanish: false,
        tolerated: 2,
        causal: true,
        registers: true,
        atomic_unknowns: true,
    };
    let h = history(
        Vec::new(),
        vec![
            final_counter(0, "c", 1),
            final_counter(1, "c", 0),
            final_counter(3, "c", 7),
        ],
    );
    let kept: Vec<u16> = comparable(&h, &failures)
        .finals
        .iter()
        .map(|f| f.dc.0)
        .collect();
    assert_eq!(kept, vec![1]);
    check_final_state(&h, &failures).expect("only DC 1 counts, and it reads 0");
}

#[test]
fn a_required_add_replaced_by_a_re_add_shows_through_the_element() {
    // The optimized OR-set: the re-add replaced the first add's tag, so only the
    // re-add's tag shows; the element is there, which is what the first add requires.
    let t1 = txn(1, 1, 1, 10, vec![add("s", "a", oid(1, 1, 0))]);
    let t2 = txn(
        1,
        2,
        1,
        20,
        vec![
            members("s", &[("a", oid(1, 1, 0))]),
            add("s", "a", oid(1, 2, 1)),
        ],
    );
    let finals = |shown: &[(&str, OpId)]| vec![final_set(1, "s", shown), final_set(2, "s", shown)];
    let h = history(vec![t1.clone(), t2.clone()], finals(&[("a", oid(1, 2, 1))]));
    check_final_state(&h, &dc0_failed(false)).expect("the element shows");
    let lost = history(vec![t1, t2], finals(&[]));
    rejects(&lost, &dc0_failed(false), "never removed but invisible");
}

#[test]
fn an_unknown_outcome_a_committed_read_observed_must_survive_without_dc_failures() {
    // Session 1's client never heard t1's outcome (its node crashed). Session 2 read t1's
    // register, so t1 committed; its add must then be in every final read, as a committed
    // transaction's would be (the `node-commit-early` mutation loses it in a crash).
    let (r, a) = (oid(1, 1, 0), oid(1, 1, 1));
    let mut t1 = txn(1, 1, 0, 10, vec![assign("r", "x", r), add("s", "a", a)]);
    t1.outcome = Outcome::Unknown;
    let saw = txn(2, 1, 1, 50, vec![get("r", "x", r)]);
    let none = no_failures();
    let lost = vec![final_set(0, "s", &[]), final_set(1, "s", &[])];
    let h = history(vec![t1.clone(), saw.clone()], lost.clone());
    rejects(&h, &none, "required add s1.t1.o1");
    // `eventual` writes each key apart: a read of one write proves nothing of another.
    check_final_state(&h, &FinalStateRules::default()).expect("not atomic");
    // Nobody observed it: it may have committed or not, so its add may be missing. Its own
    // read of its write does not count.
    let mut own = t1.clone();
    own.ops.push(get("r", "x", r));
    check_final_state(&history(vec![own], lost), &none).expect("unobserved");
    // Observed and visible everywhere: accepted.
    let kept = vec![
        final_set(0, "s", &[("a", a)]),
        final_set(1, "s", &[("a", a)]),
    ];
    check_final_state(&history(vec![t1, saw], kept), &none).expect("visible");
}

fn final_register(dc: u16, key: &str, value: &str, id: Option<OpId>) -> FinalRead {
    FinalRead {
        dc: DcId(dc),
        key: Key::from(key),
        obj: ObjType::Lww,
        value: ObjValue::Lww(id.map(|_| value.as_bytes().to_vec())),
        observed: id.into_iter().collect(),
    }
}

#[test]
fn a_register_may_not_show_what_a_required_assignment_overwrote() {
    // t1 assigns r; t2 (another session) reads t1's value and assigns r again, and
    // commits. The final state showing t1's value lost t2.
    let (w1, w2) = (oid(1, 1, 0), oid(2, 1, 1));
    let t1 = txn(1, 1, 0, 10, vec![assign("r", "x", w1)]);
    let t2 = txn(2, 1, 0, 20, vec![get("r", "x", w1), assign("r", "y", w2)]);
    let none = no_failures();
    let stale = vec![final_register(0, "r", "x", Some(w1))];
    let h = history(vec![t1.clone(), t2.clone()], stale.clone());
    rejects(&h, &none, "shows s1.t1.o0 at DC 0");
    // `eventual` orders registers by its clocks, not by causality.
    check_final_state(&h, &FinalStateRules::default()).expect("not causal");
    let fresh = vec![final_register(0, "r", "y", Some(w2))];
    check_final_state(&history(vec![t1.clone(), t2.clone()], fresh), &none).expect("t2 wins");
    // The initial value with a required assignment: lost as well.
    let initial = vec![final_register(0, "r", "", None)];
    let h = history(vec![t1.clone(), t2.clone()], initial);
    rejects(&h, &none, "reads its initial value");
    // t2 with an unknown outcome that nobody observed may not have committed.
    let mut unknown = t2.clone();
    unknown.outcome = Outcome::Unknown;
    check_final_state(&history(vec![t1.clone(), unknown], stale.clone()), &none)
        .expect("t2 may not have committed");
    // A later assignment in t1's own session, without reading: overwritten all the same.
    let t3 = txn(1, 2, 0, 30, vec![assign("r", "z", oid(1, 2, 0))]);
    rejects(
        &history(vec![t1, t3], stale),
        &none,
        "shows s1.t1.o0 at DC 0",
    );
}
