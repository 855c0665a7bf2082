//! Hand-written histories with strong transactions: what PoR (UniStore's Conflict
//! Ordering, on top of TCC) must reject, and what it must accept.

use causeway_check::{
    check, check_with, ConflictRelation, Guarantee, HOp, History, Outcome, TxnRecord, ViolationKind,
};
use causeway_core::{DcId, Key, ObjType, ObjValue, OpId, SessionId, TxnId, TxnKind, Update};

fn tid(session: u64, seq: u64) -> TxnId {
    TxnId {
        session: SessionId(session),
        seq,
    }
}

fn oid(at: (u64, u64, u32)) -> OpId {
    OpId {
        txn: tid(at.0, at.1),
        index: at.2,
    }
}

fn txn(kind: TxnKind, (session, seq): (u64, u64), ops: Vec<HOp>) -> TxnRecord {
    TxnRecord {
        id: tid(session, seq),
        session: SessionId(session),
        dc: DcId(0),
        kind,
        label: None,
        start_ns: seq * 10,
        end_ns: seq * 10 + 5,
        ops,
        outcome: Outcome::Committed,
    }
}

fn strong(at: (u64, u64), ops: Vec<HOp>) -> TxnRecord {
    txn(TxnKind::Strong, at, ops)
}

fn causal(at: (u64, u64), ops: Vec<HOp>) -> TxnRecord {
    txn(TxnKind::Causal, at, ops)
}

fn labelled(label: &str, at: (u64, u64), ops: Vec<HOp>) -> TxnRecord {
    let mut t = strong(at, ops);
    t.label = Some(label.into());
    t
}

fn set(key: &str, value: &str, at: (u64, u64, u32)) -> HOp {
    HOp::Write {
        key: Key::from(key),
        update: Update::Assign(value.as_bytes().to_vec()),
        id: oid(at),
    }
}

/// Reads register `key` showing the write `from` (with its value), or the initial value.
fn get(key: &str, from: Option<((u64, u64, u32), &str)>) -> HOp {
    HOp::Read {
        key: Key::from(key),
        obj: ObjType::Lww,
        value: ObjValue::Lww(from.map(|(_, v)| v.as_bytes().to_vec())),
        observed: from.map(|(at, _)| oid(at)).into_iter().collect(),
    }
}

fn sadd(key: &str, elem: &str, at: (u64, u64, u32)) -> HOp {
    HOp::Write {
        key: Key::from(key),
        update: Update::Add(elem.as_bytes().to_vec()),
        id: oid(at),
    }
}

fn smembers(key: &str, adds: &[((u64, u64, u32), &str)]) -> HOp {
    HOp::Read {
        key: Key::from(key),
        obj: ObjType::Set,
        value: ObjValue::Set(adds.iter().map(|(_, e)| e.as_bytes().to_vec()).collect()),
        observed: adds.iter().map(|(a, _)| oid(*a)).collect(),
    }
}

fn history(txns: Vec<TxnRecord>) -> History {
    History {
        txns,
        ..History::default()
    }
}

fn rejects(h: &History, rel: &ConflictRelation, kind: ViolationKind, names: &[TxnId]) -> String {
    check_with(h, Guarantee::Tcc, rel).expect("TCC alone accepts it");
    let v = check_with(h, Guarantee::Por, rel).expect_err("PoR must reject this history");
    assert_eq!(v.kind, kind, "wrong kind: {v}");
    for t in names {
        assert!(v.txns.contains(t), "violation {v} does not name {t}");
    }
    v.detail
}

fn accepts(h: &History, rel: &ConflictRelation) {
    if let Err(v) = check_with(h, Guarantee::Por, rel) {
        panic!("PoR must accept this history: {v}");
    }
}

/// T0 writes k; two read-modify-writes of k, of `kind`; the second reads the first's
/// write when `chained`, else T0's too.
fn two_increments(kind: TxnKind, chained: bool) -> History {
    let second_reads = if chained {
        ((2, 1, 0), "b")
    } else {
        ((1, 1, 0), "a")
    };
    history(vec![
        causal((1, 1), vec![set("k", "a", (1, 1, 0))]),
        txn(
            kind,
            (2, 1),
            vec![get("k", Some(((1, 1, 0), "a"))), set("k", "b", (2, 1, 0))],
        ),
        txn(
            kind,
            (3, 1),
            vec![get("k", Some(second_reads)), set("k", "c", (3, 1, 0))],
        ),
    ])
}

#[test]
fn a_lost_update_between_strong_txns_is_rejected() {
    let h = two_increments(TxnKind::Strong, false);
    let why = rejects(
        &h,
        &ConflictRelation::ad_hoc(),
        ViolationKind::LostUpdate,
        &[tid(2, 1), tid(3, 1)],
    );
    assert!(why.contains("lost update on k"), "{why}");
    assert!(why.contains("s1.t1.o0"), "names the version: {why}");
}

#[test]
fn a_lost_update_of_the_initial_value_is_rejected() {
    let h = history(vec![
        strong((1, 1), vec![get("k", None), set("k", "a", (1, 1, 0))]),
        strong((2, 1), vec![get("k", None), set("k", "b", (2, 1, 0))]),
    ]);
    let why = rejects(
        &h,
        &ConflictRelation::ad_hoc(),
        ViolationKind::LostUpdate,
        &[tid(1, 1), tid(2, 1)],
    );
    assert!(why.contains("initial value"), "{why}");
}

#[test]
fn a_chain_of_strong_read_modify_writes_is_accepted() {
    let stats = check(&two_increments(TxnKind::Strong, true), Guarantee::Por).expect("chain");
    assert_eq!(stats.strong, 2);
    assert_eq!(stats.conflict_edges, 0);
}

#[test]
fn causal_txns_conflict_freely() {
    accepts(
        &two_increments(TxnKind::Causal, false),
        &ConflictRelation::ad_hoc(),
    );
}

#[test]
fn a_strong_lost_update_with_a_causal_txn_is_no_por_violation() {
    let mut h = two_increments(TxnKind::Strong, false);
    h.txns[2].kind = TxnKind::Causal;
    accepts(&h, &ConflictRelation::ad_hoc());
}

#[test]
fn aborted_strong_txns_are_ignored() {
    let mut h = two_increments(TxnKind::Strong, false);
    h.txns[2].outcome = Outcome::Aborted;
    accepts(&h, &ConflictRelation::ad_hoc());
}

/// Write skew: each reads what the other writes and misses it.
fn write_skew(second_saw_first: bool) -> History {
    let b_seen = second_saw_first.then_some(((1, 1, 0), "1"));
    history(vec![
        strong((1, 1), vec![get("a", None), set("b", "1", (1, 1, 0))]),
        strong((2, 1), vec![get("b", b_seen), set("a", "1", (2, 1, 0))]),
    ])
}

#[test]
fn concurrent_conflicting_strong_txns_are_rejected() {
    let why = rejects(
        &write_skew(false),
        &ConflictRelation::ad_hoc(),
        ViolationKind::ConflictOrder,
        &[tid(1, 1), tid(2, 1)],
    );
    assert!(why.contains("neither can precede the other"), "{why}");
    assert!(why.contains("s1.t1 read a at its initial value without s2.t1's write"));
}

#[test]
fn conflicting_strong_txns_ordered_by_an_observation_are_accepted() {
    accepts(&write_skew(true), &ConflictRelation::ad_hoc());
}

#[test]
fn three_strong_txns_each_missing_the_next_are_rejected() {
    // No pair is mutually blind, but a -cf-> c -cf-> b -cf-> a is a cycle.
    let h = history(vec![
        strong((1, 1), vec![get("a", None), set("b", "1", (1, 1, 0))]),
        strong((2, 1), vec![get("b", None), set("c", "1", (2, 1, 0))]),
        strong((3, 1), vec![get("c", None), set("a", "1", (3, 1, 0))]),
    ]);
    let why = rejects(
        &h,
        &ConflictRelation::ad_hoc(),
        ViolationKind::ConflictOrder,
        &[tid(1, 1), tid(2, 1), tid(3, 1)],
    );
    assert!(why.contains("-cf->"), "{why}");
}

#[test]
fn blind_strong_writes_that_no_read_orders_are_accepted() {
    // Each may hold the other in its snapshot without any read showing it: the history
    // cannot prove them unordered.
    let h = history(vec![
        strong((1, 1), vec![set("k", "a", (1, 1, 0))]),
        strong((2, 1), vec![set("k", "b", (2, 1, 0))]),
    ]);
    accepts(&h, &ConflictRelation::ad_hoc());
}

/// A strong txn that missed W's write of k must precede W; a reader that saw W's write
/// must then see the first one's write of m too.
fn forced_order(w_outcome: Outcome, reader_sees_w: bool) -> History {
    let mut w = strong((1, 2), vec![set("k", "w", (1, 2, 0))]);
    w.outcome = w_outcome;
    let mut reader = vec![get("m", None)];
    if reader_sees_w {
        reader.insert(0, get("k", Some(((1, 2, 0), "w"))));
    }
    history(vec![
        causal((1, 1), vec![set("k", "a", (1, 1, 0))]),
        w,
        strong(
            (2, 1),
            vec![
                get("k", Some(((1, 1, 0), "a"))),
                set("k", "b", (2, 1, 0)),
                set("m", "1", (2, 1, 1)),
            ],
        ),
        causal((3, 1), reader),
    ])
}

#[test]
fn a_reader_after_a_strong_txn_must_see_the_conflicting_one_before_it() {
    let why = rejects(
        &forced_order(Outcome::Committed, true),
        &ConflictRelation::ad_hoc(),
        ViolationKind::ConflictOrder,
        &[tid(3, 1)],
    );
    assert!(why.contains("s2.t1 -cf-> s1.t2"), "{why}");
}

#[test]
fn an_observed_unknown_outcome_strong_txn_counts_as_committed() {
    rejects(
        &forced_order(Outcome::Unknown, true),
        &ConflictRelation::ad_hoc(),
        ViolationKind::ConflictOrder,
        &[tid(3, 1)],
    );
}

#[test]
fn an_unobserved_unknown_outcome_strong_txn_is_ignored() {
    accepts(
        &forced_order(Outcome::Unknown, false),
        &ConflictRelation::ad_hoc(),
    );
}

/// RUBiS on item 7: storeBid (max_bid, bids) and closeAuction (closed); the auction's
/// close sees the bid when `close_saw_bid`.
fn bid_and_close(close_saw_bid: bool) -> History {
    let (max_bid, bids) = if close_saw_bid {
        (Some(((1, 1, 1), "10")), vec![((1, 1, 0), "b1")])
    } else {
        (None, Vec::new())
    };
    history(vec![
        labelled(
            "storeBid",
            (1, 1),
            vec![
                get("items/7/closed", None),
                get("items/7/max_bid", None),
                sadd("items/7/bids", "b1", (1, 1, 0)),
                set("items/7/max_bid", "10", (1, 1, 1)),
            ],
        ),
        labelled(
            "closeAuction",
            (2, 1),
            vec![
                get("items/7/max_bid", max_bid),
                smembers("items/7/bids", &bids),
                set("items/7/closed", "yes", (2, 1, 0)),
            ],
        ),
    ])
}

#[test]
fn a_bid_concurrent_with_the_auctions_close_is_rejected() {
    let why = rejects(
        &bid_and_close(false),
        &ConflictRelation::rubis(),
        ViolationKind::ConflictOrder,
        &[tid(1, 1), tid(2, 1)],
    );
    assert!(why.contains("items/7/*"), "names the conflict: {why}");
    assert!(why.contains("storeBid with closeAuction"), "{why}");
}

#[test]
fn a_close_that_saw_the_bid_is_accepted() {
    accepts(&bid_and_close(true), &ConflictRelation::rubis());
}

#[test]
fn a_bid_set_read_alone_proves_the_close_missed_it() {
    // The close read max_bid from elsewhere, but its bids read misses the add.
    let mut h = bid_and_close(false);
    h.txns[1].ops.remove(0);
    let why = rejects(
        &h,
        &ConflictRelation::rubis(),
        ViolationKind::ConflictOrder,
        &[tid(1, 1), tid(2, 1)],
    );
    assert!(why.contains("read items/7/bids"), "{why}");
}

#[test]
fn a_set_read_showing_a_concurrent_re_add_proves_nothing() {
    // The close shows another storeBid's add of b1, which may have replaced the first
    // bid's tag (optimized OR-set): no evidence that the close missed the first bid.
    let mut h = bid_and_close(false);
    h.txns[1].ops.remove(0);
    h.txns.push(labelled(
        "storeBid",
        (3, 1),
        vec![sadd("items/7/bids", "b1", (3, 1, 0))],
    ));
    h.txns[1].ops[0] = smembers("items/7/bids", &[((3, 1, 0), "b1")]);
    accepts(&h, &ConflictRelation::rubis());
}

/// Two storeBids of item 7 that both read the initial max_bid and both write it.
fn two_bids() -> History {
    let bid = |s: u64| {
        labelled(
            "storeBid",
            (s, 1),
            vec![
                get("items/7/max_bid", None),
                set("items/7/max_bid", "10", (s, 1, 0)),
            ],
        )
    };
    history(vec![bid(1), bid(2)])
}

#[test]
fn declared_relations_order_only_declared_pairs() {
    // RUBiS does not make two bids conflict; the default relation does.
    accepts(&two_bids(), &ConflictRelation::rubis());
    rejects(
        &two_bids(),
        &ConflictRelation::ad_hoc(),
        ViolationKind::LostUpdate,
        &[tid(1, 1), tid(2, 1)],
    );
}

#[test]
fn two_registrations_of_one_nickname_are_rejected() {
    let register = |s: u64| {
        labelled(
            "registerUser",
            (s, 1),
            vec![
                get("users/5/name", None),
                set("users/5/name", "me", (s, 1, 0)),
            ],
        )
    };
    let why = rejects(
        &history(vec![register(1), register(2)]),
        &ConflictRelation::rubis(),
        ViolationKind::LostUpdate,
        &[tid(1, 1), tid(2, 1)],
    );
    assert!(why.contains("users/5/name"), "{why}");
}

#[test]
fn a_long_chain_of_strong_read_modify_writes_is_accepted() {
    // Every txn reads the previous one's write of k: one chain, whose PoR part takes two
    // bit tests per read (TCC's arbitration edges, quadratic on one hot key, dominate).
    const N: u64 = 1_000;
    let mut txns = vec![strong(
        (1, 1),
        vec![get("k", None), set("k", "v", (1, 1, 0))],
    )];
    for s in 2..=N {
        let prev = ((s - 1, 1, 0), "v");
        txns.push(strong(
            (s, 1),
            vec![get("k", Some(prev)), set("k", "v", (s, 1, 0))],
        ));
    }
    let stats = check(&history(txns), Guarantee::Por).expect("one chain");
    assert_eq!(stats.strong, N as usize);
    assert_eq!(stats.conflict_edges, 0);
}

/// A serial history (each txn reads the latest write of its keys, so it is correct
/// under any relation): causal txns read and write cold keys, every fifth txn is strong,
/// reads two of `hot` hot keys and writes the second. The strong reads prove many
/// conflict orders that no read observes, which PoR must accept.
fn serial(n: u64, hot: u64) -> History {
    let mut x: u64 = 7;
    let mut draw = |m: u64| {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) % m
    };
    let mut latest: std::collections::BTreeMap<String, OpId> = Default::default();
    let mut seqs = vec![0; 50];
    let mut txns = Vec::new();
    for i in 0..n {
        let s = draw(50);
        seqs[s as usize] += 1;
        let at = (s + 1, seqs[s as usize]);
        let keys = match i % 5 {
            0 => [0, 1].map(|_| format!("hot{}", draw(hot))),
            _ => [0, 1].map(|_| format!("k{}", draw(1000))),
        };
        let mut ops: Vec<HOp> = keys
            .iter()
            .map(|k| {
                get(
                    k,
                    latest
                        .get(k)
                        .map(|id| ((id.txn.session.0, id.txn.seq, 0), "v")),
                )
            })
            .collect();
        let k = &keys[(i % 5 == 0) as usize];
        ops.push(set(k, "v", (at.0, at.1, 0)));
        latest.insert(k.clone(), oid((at.0, at.1, 0)));
        let kind = if i % 5 == 0 {
            TxnKind::Strong
        } else {
            TxnKind::Causal
        };
        txns.push(txn(kind, at, ops));
    }
    history(txns)
}

#[test]
fn serial_histories_with_unobserved_conflict_orders_are_accepted() {
    for hot in [3, 20] {
        let stats = check(&serial(3_000, hot), Guarantee::Por).expect("a serial history");
        assert!(stats.conflict_edges > 100, "{stats:?}");
    }
}

#[test]
fn a_lost_update_injected_into_a_serial_history_is_rejected() {
    let mut h = serial(3_000, 20);
    // A strong txn late in the run re-reads and overwrites the first strong write of hot
    // keys, as if it missed everything since.
    let first = h.txns[0].clone();
    let HOp::Write { key, id, .. } = first.ops[2].clone() else {
        panic!("the first txn writes")
    };
    let at = (99, 1);
    let stale = HOp::Read {
        key: key.clone(),
        obj: ObjType::Lww,
        value: ObjValue::Lww(Some(b"v".to_vec())),
        observed: vec![id],
    };
    let k = String::from_utf8(key.0).expect("utf-8");
    h.txns
        .push(strong(at, vec![stale, set(&k, "v", (99, 1, 0))]));
    check(&h, Guarantee::Tcc).expect("TCC alone accepts it");
    let v = check(&h, Guarantee::Por).expect_err("a lost update");
    assert_eq!(v.kind, ViolationKind::LostUpdate, "{v}");
    assert!(v.txns.contains(&tid(99, 1)), "{v}");
}
