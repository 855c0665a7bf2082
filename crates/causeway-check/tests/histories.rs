//! Hand-written histories: every kind of bad history the checker must reject, and good
//! ones it must accept. A checker that cannot fail proves nothing.

use causeway_check::{
    check, read_history, session_order, write_history, BarrierRecord, FinalRead, Guarantee, HOp,
    History, Outcome, TxnRecord, ViolationKind,
};
use causeway_core::crdt::TOMBSTONE;
use causeway_core::{DcId, Key, ObjType, ObjValue, OpId, SessionId, TxnId, TxnKind, Update};

fn tid(session: u64, seq: u64) -> TxnId {
    TxnId {
        session: SessionId(session),
        seq,
    }
}

fn oid(session: u64, seq: u64, index: u32) -> OpId {
    OpId {
        txn: tid(session, seq),
        index,
    }
}

fn txn(session: u64, seq: u64, ops: Vec<HOp>) -> TxnRecord {
    TxnRecord {
        id: tid(session, seq),
        session: SessionId(session),
        dc: DcId(0),
        kind: TxnKind::Causal,
        label: None,
        start_ns: seq * 10,
        end_ns: seq * 10 + 5,
        ops,
        outcome: Outcome::Committed,
    }
}

/// Writes `value` to register `key` as op `index` of txn (session, seq).
fn set(key: &str, value: &str, at: (u64, u64, u32)) -> HOp {
    HOp::Write {
        key: Key::from(key),
        update: Update::Assign(value.as_bytes().to_vec()),
        id: oid(at.0, at.1, at.2),
    }
}

/// Reads register `key` showing the write `from` (with `value`), or the initial value.
fn get(key: &str, from: Option<((u64, u64, u32), &str)>) -> HOp {
    HOp::Read {
        key: Key::from(key),
        obj: ObjType::Lww,
        value: ObjValue::Lww(from.map(|(_, v)| v.as_bytes().to_vec())),
        observed: from
            .map(|(at, _)| oid(at.0, at.1, at.2))
            .into_iter()
            .collect(),
    }
}

fn sadd(key: &str, elem: &str, at: (u64, u64, u32)) -> HOp {
    HOp::Write {
        key: Key::from(key),
        update: Update::Add(elem.as_bytes().to_vec()),
        id: oid(at.0, at.1, at.2),
    }
}

fn srem(key: &str, elem: &str, at: (u64, u64, u32)) -> HOp {
    HOp::Write {
        key: Key::from(key),
        update: Update::Remove(elem.as_bytes().to_vec()),
        id: oid(at.0, at.1, at.2),
    }
}

fn smembers(key: &str, adds: &[((u64, u64, u32), &str)]) -> HOp {
    let mut elems: Vec<Vec<u8>> = adds.iter().map(|(_, e)| e.as_bytes().to_vec()).collect();
    elems.sort();
    elems.dedup();
    HOp::Read {
        key: Key::from(key),
        obj: ObjType::Set,
        value: ObjValue::Set(elems),
        observed: adds.iter().map(|(a, _)| oid(a.0, a.1, a.2)).collect(),
    }
}

fn history(txns: Vec<TxnRecord>) -> History {
    History {
        txns,
        ..History::default()
    }
}

fn rejects(h: &History, kind: ViolationKind, names: &[TxnId]) {
    let v = check(h, Guarantee::Tcc).expect_err("the checker must reject this history");
    assert_eq!(v.kind, kind, "wrong kind: {v}");
    for t in names {
        assert!(v.txns.contains(t), "violation {v} does not name {t}");
    }
}

/// The photo scenario done right: a comment read with its photo.
fn photo_then_comment() -> Vec<TxnRecord> {
    vec![
        txn(1, 1, vec![set("photo", "p", (1, 1, 0))]),
        txn(
            1,
            2,
            vec![
                get("photo", Some(((1, 1, 0), "p"))),
                set("comment", "nice", (1, 2, 0)),
            ],
        ),
    ]
}

#[test]
fn a_causal_history_passes() {
    let mut txns = photo_then_comment();
    txns.push(txn(
        2,
        1,
        vec![
            get("comment", Some(((1, 2, 0), "nice"))),
            get("photo", Some(((1, 1, 0), "p"))),
        ],
    ));
    let stats = check(&history(txns), Guarantee::Tcc).expect("causal history");
    assert_eq!(stats.counted, 3);
    assert_eq!(stats.reads, 3);
}

#[test]
fn causal_violation_comment_without_photo_is_rejected() {
    let mut txns = photo_then_comment();
    txns.push(txn(
        2,
        1,
        vec![
            get("comment", Some(((1, 2, 0), "nice"))),
            get("photo", None),
        ],
    ));
    rejects(
        &history(txns),
        ViolationKind::CausalViolation,
        &[tid(2, 1), tid(1, 1)],
    );
}

#[test]
fn fractured_read_is_rejected() {
    // T1 and T2 both write x and y; T2 read T1's x first. A reader seeing T2's x and
    // T1's y has a fractured snapshot.
    let txns = vec![
        txn(
            1,
            1,
            vec![set("x", "1", (1, 1, 0)), set("y", "1", (1, 1, 1))],
        ),
        txn(
            2,
            1,
            vec![
                get("x", Some(((1, 1, 0), "1"))),
                set("x", "2", (2, 1, 0)),
                set("y", "2", (2, 1, 1)),
            ],
        ),
        txn(
            3,
            1,
            vec![
                get("x", Some(((2, 1, 0), "2"))),
                get("y", Some(((1, 1, 1), "1"))),
            ],
        ),
    ];
    rejects(
        &history(txns),
        ViolationKind::CausalViolation,
        &[tid(3, 1), tid(1, 1), tid(2, 1)],
    );
}

#[test]
fn fractured_read_of_concurrent_writers_is_an_arbitration_cycle() {
    // T1 and T2 are concurrent and both write x and y. Reader A sees T1 win x and T2 win y;
    // no single last-writer order explains that.
    let txns = vec![
        txn(
            1,
            1,
            vec![set("x", "1", (1, 1, 0)), set("y", "1", (1, 1, 1))],
        ),
        txn(
            2,
            1,
            vec![set("x", "2", (2, 1, 0)), set("y", "2", (2, 1, 1))],
        ),
        txn(
            3,
            1,
            vec![
                get("x", Some(((1, 1, 0), "1"))),
                get("y", Some(((2, 1, 1), "2"))),
            ],
        ),
    ];
    rejects(
        &history(txns),
        ViolationKind::ArbitrationCycle,
        &[tid(1, 1)],
    );
}

#[test]
fn read_your_writes_violation_is_rejected() {
    let txns = vec![
        txn(1, 1, vec![set("x", "a", (1, 1, 0))]),
        txn(
            2,
            1,
            vec![
                set("x", "mine", (2, 1, 0)),
                get("x", Some(((1, 1, 0), "a"))),
            ],
        ),
    ];
    rejects(&history(txns), ViolationKind::ReadYourWrites, &[tid(2, 1)]);
}

#[test]
fn session_read_your_writes_across_txns_is_enforced() {
    // The session wrote x in t1 and reads the initial value in t2.
    let txns = vec![
        txn(1, 1, vec![set("x", "a", (1, 1, 0))]),
        txn(1, 2, vec![get("x", None)]),
    ];
    rejects(
        &history(txns),
        ViolationKind::CausalViolation,
        &[tid(1, 2), tid(1, 1)],
    );
}

#[test]
fn non_monotonic_reads_are_rejected() {
    // x=1 then x=2 (which read x=1); a session reads x=2, then x=1.
    let txns = vec![
        txn(1, 1, vec![set("x", "1", (1, 1, 0))]),
        txn(
            1,
            2,
            vec![get("x", Some(((1, 1, 0), "1"))), set("x", "2", (1, 2, 0))],
        ),
        txn(2, 1, vec![get("x", Some(((1, 2, 0), "2")))]),
        txn(2, 2, vec![get("x", Some(((1, 1, 0), "1")))]),
    ];
    rejects(&history(txns), ViolationKind::CausalViolation, &[tid(2, 2)]);
}

#[test]
fn read_of_an_aborted_write_is_rejected() {
    let mut aborted = txn(1, 1, vec![set("x", "ghost", (1, 1, 0))]);
    aborted.outcome = Outcome::Aborted;
    let txns = vec![
        aborted,
        txn(2, 1, vec![get("x", Some(((1, 1, 0), "ghost")))]),
    ];
    rejects(&history(txns), ViolationKind::ReadFromAborted, &[tid(2, 1)]);
}

#[test]
fn a_value_that_is_not_the_named_write_is_rejected() {
    let txns = vec![
        txn(1, 1, vec![set("x", "a", (1, 1, 0))]),
        txn(2, 1, vec![get("x", Some(((1, 1, 0), "b")))]),
    ];
    rejects(&history(txns), ViolationKind::BadValue, &[tid(2, 1)]);
}

/// A read of an assignment its txn overwrote later (Adya's G1b): the txn's writes are
/// visible only together, as its final state; the final assignment reads fine.
#[test]
fn a_read_of_an_overwritten_assignment_is_an_intermediate_read() {
    let h = |index: u32, value: &str| {
        history(vec![
            txn(
                1,
                1,
                vec![set("x", "a", (1, 1, 0)), set("x", "b", (1, 1, 1))],
            ),
            txn(2, 1, vec![get("x", Some(((1, 1, index), value)))]),
        ])
    };
    rejects(
        &h(0, "a"),
        ViolationKind::IntermediateRead,
        &[tid(2, 1), tid(1, 1)],
    );
    check(&h(1, "b"), Guarantee::Tcc).expect("the final assignment reads fine");
}

#[test]
fn a_causal_cycle_is_rejected() {
    // Each reads the other's write: wr edges both ways.
    let txns = vec![
        txn(
            1,
            1,
            vec![get("y", Some(((2, 1, 0), "b"))), set("x", "a", (1, 1, 0))],
        ),
        txn(
            2,
            1,
            vec![get("x", Some(((1, 1, 0), "a"))), set("y", "b", (2, 1, 0))],
        ),
    ];
    rejects(
        &history(txns),
        ViolationKind::CausalCycle,
        &[tid(1, 1), tid(2, 1)],
    );
}

#[test]
fn a_set_read_missing_a_causal_add_is_rejected() {
    let txns = vec![
        txn(
            1,
            1,
            vec![sadd("s", "a", (1, 1, 0)), set("flag", "1", (1, 1, 1))],
        ),
        txn(
            2,
            1,
            vec![get("flag", Some(((1, 1, 1), "1"))), smembers("s", &[])],
        ),
    ];
    rejects(
        &history(txns),
        ViolationKind::SetNotCausallyClosed,
        &[tid(2, 1), tid(1, 1)],
    );
}

#[test]
fn a_set_read_showing_a_removed_add_is_rejected() {
    let txns = vec![
        txn(1, 1, vec![sadd("s", "a", (1, 1, 0))]),
        txn(
            1,
            2,
            vec![
                smembers("s", &[((1, 1, 0), "a")]),
                srem("s", "a", (1, 2, 0)),
            ],
        ),
        txn(1, 3, vec![smembers("s", &[((1, 1, 0), "a")])]),
    ];
    rejects(
        &history(txns),
        ViolationKind::SetNotCausallyClosed,
        &[tid(1, 3)],
    );
}

#[test]
fn add_wins_over_a_concurrent_remove_passes() {
    // The OR-set example: a remove that never saw a concurrent add does not hide it.
    let txns = vec![
        txn(1, 1, vec![sadd("s", "a", (1, 1, 0))]),
        txn(
            2,
            1,
            vec![
                smembers("s", &[((1, 1, 0), "a")]),
                srem("s", "a", (2, 1, 0)),
            ],
        ),
        txn(3, 1, vec![sadd("s", "a", (3, 1, 0))]),
        txn(
            4,
            1,
            vec![smembers("s", &[((3, 1, 0), "a")]), get("x", None)],
        ),
    ];
    // Reader 4 may or may not have seen remover 2; it shows only the concurrent add.
    let h = history(txns);
    check(&h, Guarantee::Tcc).expect("add-wins is causal");
}

/// Session 1 adds `a`, then re-adds it having read it (the optimized set replaces the
/// first tag); txn 3 of session `reader` reads the set showing `shown`, with both adds in
/// its causal past (session order, or a read of the flag written with the re-add).
fn re_add_then_read(reader: u64, shown: &[((u64, u64, u32), &str)]) -> History {
    let mut txns = vec![
        txn(1, 1, vec![sadd("s", "a", (1, 1, 0))]),
        txn(
            1,
            2,
            vec![
                smembers("s", &[((1, 1, 0), "a")]),
                sadd("s", "a", (1, 2, 0)),
                set("flag", "1", (1, 2, 1)),
            ],
        ),
    ];
    let mut ops = vec![smembers("s", shown)];
    if reader != 1 {
        ops.insert(0, get("flag", Some(((1, 2, 1), "1"))));
    }
    txns.push(txn(reader, 3, ops));
    history(txns)
}

#[test]
fn a_set_read_showing_only_the_re_adds_tag_passes() {
    for reader in [1, 2] {
        let h = re_add_then_read(reader, &[((1, 2, 0), "a")]);
        check(&h, Guarantee::Tcc).expect("the re-add replaced the first tag");
    }
}

#[test]
fn a_set_read_missing_a_re_added_element_is_rejected() {
    rejects(
        &re_add_then_read(2, &[]),
        ViolationKind::SetNotCausallyClosed,
        &[tid(2, 3)],
    );
}

#[test]
fn a_set_read_showing_only_the_replaced_tag_is_rejected() {
    // The re-add is in the reader's past and no shown add can have replaced it.
    rejects(
        &re_add_then_read(2, &[((1, 1, 0), "a")]),
        ViolationKind::SetNotCausallyClosed,
        &[tid(2, 3), tid(1, 2)],
    );
}

#[test]
fn concurrent_adds_of_one_element_cannot_hide_each_other() {
    // Each add may have observed the other, but a read showing neither misses the element.
    let txns = vec![
        txn(
            1,
            1,
            vec![sadd("s", "a", (1, 1, 0)), set("x", "1", (1, 1, 1))],
        ),
        txn(
            2,
            1,
            vec![sadd("s", "a", (2, 1, 0)), set("y", "1", (2, 1, 1))],
        ),
        txn(
            3,
            1,
            vec![
                get("x", Some(((1, 1, 1), "1"))),
                get("y", Some(((2, 1, 1), "1"))),
                smembers("s", &[]),
            ],
        ),
    ];
    rejects(
        &history(txns),
        ViolationKind::SetNotCausallyClosed,
        &[tid(3, 1)],
    );
}

#[test]
fn a_txn_reading_its_two_adds_of_one_element_sees_the_second_tag() {
    let own = |shown: &[((u64, u64, u32), &str)]| {
        history(vec![txn(
            1,
            1,
            vec![
                sadd("s", "a", (1, 1, 0)),
                sadd("s", "a", (1, 1, 1)),
                smembers("s", shown),
            ],
        )])
    };
    check(&own(&[((1, 1, 1), "a")]), Guarantee::Tcc).expect("the second add replaced the first");
    rejects(&own(&[]), ViolationKind::ReadYourWrites, &[tid(1, 1)]);
}

#[test]
fn divergent_replicas_are_rejected() {
    let mut h = history(vec![
        txn(1, 1, vec![set("x", "a", (1, 1, 0))]),
        txn(2, 1, vec![set("x", "b", (2, 1, 0))]),
    ]);
    for (dc, (at, v)) in [((1, 1, 0), "a"), ((2, 1, 0), "b")].into_iter().enumerate() {
        h.finals.push(FinalRead {
            dc: DcId(dc as u16),
            key: Key::from("x"),
            obj: ObjType::Lww,
            value: ObjValue::Lww(Some(v.as_bytes().to_vec())),
            observed: vec![oid(at.0, at.1, at.2)],
        });
    }
    let v = check(&h, Guarantee::Convergence).expect_err("replicas diverged");
    assert_eq!(v.kind, ViolationKind::Divergence);
    assert!(
        v.detail.contains("DC 0") && v.detail.contains("DC 1"),
        "{v}"
    );
}

/// Partial replication: each key is read only at its replicas. Keys read at some DCs
/// only are compared among those; a key read at a single DC passes alone.
#[test]
fn convergence_compares_each_key_among_the_dcs_that_read_it() {
    let txns = vec![
        txn(1, 1, vec![set("x", "a", (1, 1, 0))]),
        txn(2, 1, vec![set("y", "b", (2, 1, 0))]),
        txn(3, 1, vec![set("z", "c", (3, 1, 0))]),
        txn(3, 2, vec![set("z", "d", (3, 2, 0))]),
    ];
    let read = |dc: u16, key: &str, v: &str, at: (u64, u64, u32)| FinalRead {
        dc: DcId(dc),
        key: Key::from(key),
        obj: ObjType::Lww,
        value: ObjValue::Lww(Some(v.as_bytes().to_vec())),
        observed: vec![oid(at.0, at.1, at.2)],
    };
    let mut h = history(txns);
    // x lives in DCs 0 and 1, y in DC 2 only (its other replica failed), z in 1 and 2.
    h.finals = vec![
        read(0, "x", "a", (1, 1, 0)),
        read(1, "x", "a", (1, 1, 0)),
        read(2, "y", "b", (2, 1, 0)),
        read(1, "z", "d", (3, 2, 0)),
        read(2, "z", "d", (3, 2, 0)),
    ];
    check(&h, Guarantee::Tcc).expect("every key agrees among its readers");
    h.finals[4] = read(2, "z", "c", (3, 1, 0));
    let v = check(&h, Guarantee::Convergence).expect_err("z diverged at its replicas");
    assert_eq!(v.kind, ViolationKind::Divergence);
    assert!(
        v.detail.contains("key z") && v.detail.contains("DC 1") && v.detail.contains("DC 2"),
        "{v}"
    );
}

#[test]
fn an_unknown_outcome_nobody_saw_imposes_nothing() {
    // The session timed out on t1 (it may not have committed); t2 need not see it.
    let mut unknown = txn(1, 1, vec![set("x", "maybe", (1, 1, 0))]);
    unknown.outcome = Outcome::Unknown;
    let txns = vec![unknown, txn(1, 2, vec![get("x", None)])];
    check(&history(txns), Guarantee::Tcc).expect("unknown outcome is not in the past");
}

#[test]
fn a_history_without_labels_still_reads() {
    let line = r#"{"type":"txn","id":"s1.t1","session":1,"dc":0,"kind":"strong","start_ns":0,"end_ns":1,"outcome":"committed","ops":[]}"#;
    let h = read_history(line.as_bytes()).expect("an old line without a label");
    assert_eq!(h.txns[0].label, None);
    assert_eq!(h.txns[0].kind, TxnKind::Strong);
}

#[test]
fn histories_round_trip_through_json_lines() {
    let mut h = history(photo_then_comment());
    h.txns[1].kind = TxnKind::Strong;
    h.txns[1].label = Some("registerUser".into());
    h.txns[0].ops.push(HOp::Write {
        key: Key(vec![0, 255, b'\\']),
        update: Update::Increment(-3),
        id: oid(1, 1, 1),
    });
    h.finals.push(FinalRead {
        dc: DcId(2),
        key: Key::from("s"),
        obj: ObjType::Set,
        value: ObjValue::Set(vec![b"a".to_vec()]),
        observed: vec![oid(1, 1, 0)],
    });
    h.barriers.push(BarrierRecord {
        session: SessionId(1),
        dc: DcId(1),
        start_ns: 12,
        end_ns: 40,
        txns: 1,
    });
    let mut bytes = Vec::new();
    write_history(&h, &mut bytes).expect("write");
    let back = read_history(&bytes[..]).expect("read");
    assert_eq!(back, h);
    let text = String::from_utf8(bytes).expect("utf-8");
    assert_eq!(
        text.matches("\"label\"").count(),
        1,
        "only labelled txns carry one"
    );
    let err = read_history(&b"{\"type\":\"txn\"}\n"[..]).expect_err("missing fields");
    assert!(err.starts_with("line 1"), "{err}");
}

/// Session 1 moves to DC 1 after its second transaction (ATTACH): its later transactions
/// carry ids of protocol session 9, but stay in session 1's order.
fn moved(seq: u64, at: u64, ops: Vec<HOp>) -> TxnRecord {
    let mut t = txn(9, seq, ops);
    t.session = SessionId(1);
    t.dc = DcId(1);
    t.start_ns = at;
    t.end_ns = at + 5;
    t
}

#[test]
fn session_order_spans_a_move_to_another_protocol_session() {
    let before = vec![
        txn(1, 1, vec![set("x", "a", (1, 1, 0))]),
        txn(1, 2, vec![set("y", "b", (1, 2, 0))]),
    ];
    // At the new DC, the session reads its own earlier writes: good.
    let mut good = before.clone();
    good.push(moved(1, 100, vec![get("x", Some(((1, 1, 0), "a")))]));
    good.push(moved(2, 110, vec![get("y", Some(((1, 2, 0), "b")))]));
    let h = history(good);
    check(&h, Guarantee::Tcc).expect("the moved session sees its past");
    let order: Vec<TxnId> = session_order(&h)[&SessionId(1)]
        .iter()
        .map(|&i| h.txns[i].id)
        .collect();
    assert_eq!(order, vec![tid(1, 1), tid(1, 2), tid(9, 1), tid(9, 2)]);
    // The first txn at the new DC misses the session's own write: read-your-writes across
    // the move is broken (an ATTACH that did not wait).
    let mut bad = before;
    bad.push(moved(1, 100, vec![get("y", None)]));
    rejects(
        &history(bad),
        ViolationKind::CausalViolation,
        &[tid(9, 1), tid(1, 2)],
    );
}

/// Increments register `key` by `by` as op `index` of txn (session, seq).
fn incr(key: &str, by: i64, at: (u64, u64, u32)) -> HOp {
    HOp::Write {
        key: Key::from(key),
        update: Update::RegisterIncrement(by),
        id: oid(at.0, at.1, at.2),
    }
}

/// Reads counting register `key` as `shown`, naming the winning assignment `winner`.
fn get_counted(key: &str, winner: (u64, u64, u32), shown: &str) -> HOp {
    HOp::Read {
        key: Key::from(key),
        obj: ObjType::Lww,
        value: ObjValue::Lww(Some(shown.as_bytes().to_vec())),
        observed: vec![oid(winner.0, winner.1, winner.2)],
    }
}

/// `SET c 10` (s1), then in session 2 an `INCR c` by 5 after reading it, then a read of
/// c in session 2 showing `shown`.
fn set_then_incr_then_read(shown: &str) -> History {
    history(vec![
        txn(1, 1, vec![set("c", "10", (1, 1, 0))]),
        txn(
            2,
            2,
            vec![get("c", Some(((1, 1, 0), "10"))), incr("c", 5, (2, 2, 1))],
        ),
        txn(2, 3, vec![get_counted("c", (1, 1, 0), shown)]),
    ])
}

#[test]
fn a_counting_register_read_counts_the_increments_in_its_past() {
    check(&set_then_incr_then_read("15"), Guarantee::Tcc).expect("10 + 5");
    rejects(
        &set_then_incr_then_read("10"),
        ViolationKind::BadValue,
        &[tid(2, 3)],
    );
    rejects(
        &set_then_incr_then_read("16"),
        ViolationKind::BadValue,
        &[tid(2, 3)],
    );
}

/// The rule for a `SET` concurrent with an `INCR`: the increment survives it (s3's SET 20
/// did not see s2's increment), and one the `SET` observed is replaced by it.
#[test]
fn a_set_keeps_the_increments_it_did_not_observe_and_replaces_the_others() {
    let concurrent = |shown: &str| {
        history(vec![
            txn(1, 1, vec![set("c", "10", (1, 1, 0))]),
            txn(
                2,
                2,
                vec![get("c", Some(((1, 1, 0), "10"))), incr("c", 1, (2, 2, 1))],
            ),
            txn(
                3,
                3,
                vec![get("c", Some(((1, 1, 0), "10"))), set("c", "20", (3, 3, 1))],
            ),
            // Session 2 reads s3's SET: its own increment must still count.
            txn(2, 4, vec![get_counted("c", (3, 3, 1), shown)]),
        ])
    };
    check(&concurrent("21"), Guarantee::Tcc).expect("20 + the unobserved 1");
    // The history does not show whether s3's SET observed s2's increment (its snapshot
    // may hold more than it read), so 20 passes too; neither 22 nor 19 can be.
    check(&concurrent("20"), Guarantee::Tcc).expect("the SET may have seen the 1");
    rejects(&concurrent("22"), ViolationKind::BadValue, &[tid(2, 4)]);
    rejects(&concurrent("19"), ViolationKind::BadValue, &[tid(2, 4)]);
    // An increment that read the SET surely counts on top of it.
    let after = |shown: &str| {
        history(vec![
            txn(3, 1, vec![set("c", "20", (3, 1, 0))]),
            txn(
                2,
                2,
                vec![get("c", Some(((3, 1, 0), "20"))), incr("c", 1, (2, 2, 1))],
            ),
            txn(2, 3, vec![get_counted("c", (3, 1, 0), shown)]),
        ])
    };
    check(&after("21"), Guarantee::Tcc).expect("20 + 1");
    rejects(&after("20"), ViolationKind::BadValue, &[tid(2, 3)]);
    // s2 increments, then sets 7 having read 15: the SET replaced the increment.
    let observed = |shown: &str| {
        history(vec![
            txn(1, 1, vec![set("c", "10", (1, 1, 0))]),
            txn(
                2,
                2,
                vec![get("c", Some(((1, 1, 0), "10"))), incr("c", 5, (2, 2, 1))],
            ),
            txn(
                2,
                3,
                vec![get_counted("c", (1, 1, 0), "15"), set("c", "7", (2, 3, 1))],
            ),
            txn(2, 4, vec![get_counted("c", (2, 3, 1), shown)]),
        ])
    };
    check(&observed("7"), Guarantee::Tcc).expect("the SET replaced the increment");
    rejects(&observed("12"), ViolationKind::BadValue, &[tid(2, 4)]);
    // A text winner shows as written: concurrent increments are dropped.
    let text = history(vec![
        txn(1, 1, vec![set("c", "10", (1, 1, 0))]),
        txn(
            2,
            2,
            vec![get("c", Some(((1, 1, 0), "10"))), incr("c", 1, (2, 2, 1))],
        ),
        txn(2, 3, vec![set("c", "abc", (2, 3, 0))]),
        txn(2, 4, vec![get_counted("c", (2, 3, 0), "abd")]),
    ]);
    rejects(&text, ViolationKind::BadValue, &[tid(2, 4)]);
}

/// Writes `update` to the part of its type of set `key` (a key freed by `DEL` taking
/// another type, `Update::Part`) as op `index` of txn (session, seq).
fn part(key: &str, update: Update, at: (u64, u64, u32)) -> HOp {
    HOp::Write {
        key: Key::from(key),
        update: Update::Part {
            key_type: ObjType::Set,
            update: Box::new(update),
        },
        id: oid(at.0, at.1, at.2),
    }
}

/// Reads set `key` showing its string part: `value`, written by `from`.
fn get_part(key: &str, from: (u64, u64, u32), value: &[u8]) -> HOp {
    HOp::Read {
        key: Key::from(key),
        obj: ObjType::Set,
        value: ObjValue::Lww(Some(value.to_vec())),
        observed: vec![oid(from.0, from.1, from.2)],
    }
}

/// `SADD k a` (s1), then s1's `DEL k` and `SET k v` (the key takes a string), while s2
/// adds `b` to the set concurrently and writes `x`; `reader`'s ops follow, in session 1
/// after reading `x` (so both in its causal past).
fn retyped_then_read(reader: Vec<HOp>) -> History {
    let mut ops = vec![get("x", Some(((2, 1, 1), "x")))];
    ops.extend(reader);
    history(vec![
        txn(1, 1, vec![sadd("k", "a", (1, 1, 0))]),
        txn(
            1,
            2,
            vec![
                srem("k", "a", (1, 2, 0)),
                part("k", Update::Assign(b"v".to_vec()), (1, 2, 1)),
            ],
        ),
        txn(
            2,
            1,
            vec![sadd("k", "b", (2, 1, 0)), set("x", "x", (2, 1, 1))],
        ),
        txn(1, 3, ops),
    ])
}

/// The rule for a key freed by `DEL` (`causeway_core::crdt`): the write of another type
/// after the `DEL` shows, and hides the concurrent add of the key's own type. A read
/// showing that add instead breaks it.
#[test]
fn a_read_of_a_retyped_key_shows_the_new_type_over_concurrent_writes_of_its_own() {
    let good = retyped_then_read(vec![get_part("k", (1, 2, 1), b"v")]);
    check(&good, Guarantee::Tcc).expect("the string shows");
    check(&good, Guarantee::Por).expect("the string shows (PoR)");
    let bad = retyped_then_read(vec![smembers("k", &[((2, 1, 0), "b")])]);
    rejects(
        &bad,
        ViolationKind::CausalViolation,
        &[tid(1, 3), tid(1, 2)],
    );
    // Nothing shown (the set's empty value) is as wrong, b or not.
    let nothing = retyped_then_read(vec![smembers("k", &[])]);
    rejects(&nothing, ViolationKind::SetNotCausallyClosed, &[tid(1, 3)]);
    let mut without_b = retyped_then_read(Vec::new());
    without_b.txns[3] = txn(1, 3, vec![smembers("k", &[])]);
    rejects(
        &without_b,
        ViolationKind::CausalViolation,
        &[tid(1, 3), tid(1, 2)],
    );
    // The histories round-trip through JSON lines with their parts.
    let mut buf = Vec::new();
    write_history(&good, &mut buf).unwrap();
    assert_eq!(read_history(&buf[..]).unwrap(), good);
}

/// The reverse: once the string is deleted (a tombstone in its part), the set shows
/// again; a read still showing the string, or showing the deleted string part, breaks
/// the rule.
#[test]
fn a_deleted_part_of_another_type_shows_the_key_s_own_type_again() {
    let then = |read: HOp| {
        retyped_then_read(vec![
            part("k", Update::Assign(TOMBSTONE.to_vec()), (1, 3, 1)),
            sadd("k", "c", (1, 3, 2)),
            read,
        ])
    };
    let own = smembers("k", &[((2, 1, 0), "b"), ((1, 3, 2), "c")]);
    check(&then(own), Guarantee::Tcc).expect("the set shows again, with b");
    let stale = then(get_part("k", (1, 2, 1), b"v"));
    rejects(&stale, ViolationKind::ReadYourWrites, &[tid(1, 3)]);
    let later = |read: HOp| {
        let mut h = retyped_then_read(vec![part(
            "k",
            Update::Assign(TOMBSTONE.to_vec()),
            (1, 3, 1),
        )]);
        h.txns.push(txn(1, 4, vec![read]));
        h
    };
    let stale = later(get_part("k", (1, 2, 1), b"v"));
    rejects(
        &stale,
        ViolationKind::CausalViolation,
        &[tid(1, 4), tid(1, 3)],
    );
    let deleted = later(get_part("k", (1, 3, 1), TOMBSTONE));
    rejects(&deleted, ViolationKind::BadValue, &[tid(1, 4)]);
    let b = smembers("k", &[((2, 1, 0), "b")]);
    check(&later(b), Guarantee::Tcc).expect("the concurrent add shows again");
}

/// Two parts of other types: the one whose op causally follows every op of the other
/// in the view shows (its stamp is greater).
#[test]
fn the_newest_part_of_another_type_shows() {
    let h = |read: HOp| retyped_then_read(vec![part("k", Update::Increment(3), (1, 3, 1)), read]);
    rejects(
        &h(get_part("k", (1, 2, 1), b"v")),
        ViolationKind::CausalViolation,
        &[tid(1, 3)],
    );
    let counter = HOp::Read {
        key: Key::from("k"),
        obj: ObjType::Set,
        value: ObjValue::Counter(3),
        observed: Vec::new(),
    };
    check(&h(counter), Guarantee::Tcc).expect("the counter shows");
}

fn hset(key: &str, field: &str, value: &str, at: (u64, u64, u32)) -> HOp {
    HOp::Write {
        key: Key::from(key),
        update: Update::HashSet {
            field: field.as_bytes().to_vec(),
            value: value.as_bytes().to_vec(),
        },
        id: oid(at.0, at.1, at.2),
    }
}

fn hdel(key: &str, field: &str, at: (u64, u64, u32)) -> HOp {
    HOp::Write {
        key: Key::from(key),
        update: Update::HashRemove {
            field: field.as_bytes().to_vec(),
        },
        id: oid(at.0, at.1, at.2),
    }
}

/// `HGETALL key` showing `pairs`, naming the writes `observed`.
fn hgetall(key: &str, pairs: &[(&str, &str)], observed: &[(u64, u64, u32)]) -> HOp {
    HOp::Read {
        key: Key::from(key),
        obj: ObjType::Hash,
        value: ObjValue::Hash(
            pairs
                .iter()
                .map(|(f, v)| (f.as_bytes().to_vec(), v.as_bytes().to_vec()))
                .collect(),
        ),
        observed: observed.iter().map(|a| oid(a.0, a.1, a.2)).collect(),
    }
}

/// A hash read judged against the model: a read that shows the fields and values of the
/// writes in its past passes, with the write concurrent with an `HDEL` surviving; one
/// that misses a field written in its causal past, shows a field removed in its past, or
/// shows a value no named `HSET` wrote, is rejected.
#[test]
fn hash_reads_are_checked_against_the_model() {
    let writes = || {
        vec![
            txn(
                1,
                1,
                vec![
                    hset("h", "a", "1", (1, 1, 0)),
                    hset("h", "b", "2", (1, 1, 1)),
                ],
            ),
            txn(2, 1, vec![hset("h", "a", "9", (2, 1, 0))]),
        ]
    };
    // Session 1 then deletes `a` (it saw only its own write); session 2's write survives.
    let mut good = writes();
    good.push(txn(1, 2, vec![hdel("h", "a", (1, 2, 0))]));
    good.push(txn(
        3,
        1,
        vec![hgetall(
            "h",
            &[("a", "9"), ("b", "2")],
            &[(1, 1, 1), (2, 1, 0)],
        )],
    ));
    assert!(check(&history(good), Guarantee::Tcc).is_ok());
    // Session 1's next read misses its own field `b`.
    let mut missing = writes();
    missing.push(txn(1, 2, vec![hgetall("h", &[("a", "1")], &[(1, 1, 0)])]));
    rejects(
        &history(missing),
        ViolationKind::SetNotCausallyClosed,
        &[tid(1, 2)],
    );
    // A read after session 1's HDEL of `a` (in its past) still shows session 1's `a`.
    let mut removed = writes();
    removed.push(txn(1, 2, vec![hdel("h", "a", (1, 2, 0))]));
    removed.push(txn(
        1,
        3,
        vec![hgetall(
            "h",
            &[("a", "1"), ("b", "2")],
            &[(1, 1, 0), (1, 1, 1)],
        )],
    ));
    rejects(
        &history(removed),
        ViolationKind::SetNotCausallyClosed,
        &[tid(1, 3)],
    );
    // A value no named HSET wrote.
    let mut wrong = writes();
    wrong.push(txn(
        1,
        2,
        vec![hgetall(
            "h",
            &[("a", "7"), ("b", "2")],
            &[(1, 1, 0), (1, 1, 1)],
        )],
    ));
    rejects(&history(wrong), ViolationKind::BadValue, &[tid(1, 2)]);
    // JSON lines carry hash writes and reads unchanged.
    let mut text = Vec::new();
    write_history(&history(writes()), &mut text).expect("writes");
    let back = read_history(&text[..]).expect("reads");
    assert_eq!(back.txns, writes());
}

fn lpush(key: &str, left: bool, values: &[&str], at: (u64, u64, u32)) -> HOp {
    HOp::Write {
        key: Key::from(key),
        update: Update::ListPush {
            left,
            values: values.iter().map(|v| v.as_bytes().to_vec()).collect(),
        },
        id: oid(at.0, at.1, at.2),
    }
}

fn lpop(key: &str, left: bool, count: u64, at: (u64, u64, u32)) -> HOp {
    HOp::Write {
        key: Key::from(key),
        update: Update::ListPop { left, count },
        id: oid(at.0, at.1, at.2),
    }
}

/// `LRANGE key 0 -1` showing `elems`, naming the pushes `observed`.
fn lrange(key: &str, elems: &[&str], observed: &[(u64, u64, u32)]) -> HOp {
    HOp::Read {
        key: Key::from(key),
        obj: ObjType::List,
        value: ObjValue::List(elems.iter().map(|v| v.as_bytes().to_vec()).collect()),
        observed: observed.iter().map(|a| oid(a.0, a.1, a.2)).collect(),
    }
}

/// A list read judged against the model: a read showing the pushes in its past in list
/// order passes, with a push concurrent with a pop surviving; one that misses a push in
/// its causal past no pop may have observed, shows a value no named push wrote, or shows
/// two causally ordered pushes out of order, is rejected.
#[test]
fn list_reads_are_checked_against_the_model() {
    let writes = || {
        vec![
            txn(1, 1, vec![lpush("l", false, &["a", "b"], (1, 1, 0))]),
            txn(1, 2, vec![lpush("l", true, &["c"], (1, 2, 0))]),
            txn(2, 1, vec![lpush("l", false, &["z"], (2, 1, 0))]),
        ]
    };
    let all = [(1, 1, 0), (1, 2, 0), (2, 1, 0)];
    let mut good = writes();
    good.push(txn(3, 1, vec![lrange("l", &["c", "a", "b", "z"], &all)]));
    assert!(check(&history(good), Guarantee::Tcc).is_ok());
    // Session 1 pops the head it saw (c); session 2's push, concurrent, survives.
    let mut popped = writes();
    popped.push(txn(1, 3, vec![lpop("l", true, 1, (1, 3, 0))]));
    popped.push(txn(
        3,
        1,
        vec![lrange("l", &["a", "b", "z"], &[(1, 1, 0), (2, 1, 0)])],
    ));
    assert!(check(&history(popped), Guarantee::Tcc).is_ok());
    // Session 1's next read misses its own first push, which no pop observed.
    let mut missing = writes();
    missing.push(txn(1, 3, vec![lrange("l", &["c"], &[(1, 2, 0)])]));
    rejects(
        &history(missing),
        ViolationKind::SetNotCausallyClosed,
        &[tid(1, 3)],
    );
    // A value no named push wrote.
    let mut wrong = writes();
    wrong.push(txn(
        1,
        3,
        vec![lrange("l", &["c", "a", "q"], &[(1, 1, 0), (1, 2, 0)])],
    ));
    rejects(&history(wrong), ViolationKind::BadValue, &[tid(1, 3)]);
    // Session 1's LPUSH of c came after its RPUSH of a b: c cannot follow them... nor can
    // b come before a (one push's order).
    let mut order = writes();
    order.push(txn(
        1,
        3,
        vec![lrange("l", &["c", "b", "a"], &[(1, 1, 0), (1, 2, 0)])],
    ));
    rejects(&history(order), ViolationKind::BadValue, &[tid(1, 3)]);
    let mut ends = writes();
    ends.push(txn(
        1,
        4,
        vec![
            lpush("l", true, &["d"], (1, 4, 0)),
            lrange(
                "l",
                &["c", "d", "a", "b"],
                &[(1, 1, 0), (1, 2, 0), (1, 4, 0)],
            ),
        ],
    ));
    rejects(&history(ends), ViolationKind::BadValue, &[tid(1, 4)]);
    // JSON lines carry list writes and reads unchanged.
    let mut text = Vec::new();
    let mut both = writes();
    both.push(txn(1, 3, vec![lpop("l", false, 2, (1, 3, 0))]));
    write_history(&history(both.clone()), &mut text).expect("writes");
    let back = read_history(&text[..]).expect("reads");
    assert_eq!(back.txns, both);
}

fn zwrite(key: &str, update: Update, at: (u64, u64, u32)) -> HOp {
    HOp::Write {
        key: Key::from(key),
        update,
        id: oid(at.0, at.1, at.2),
    }
}

fn zadd(member: &str, score: f64) -> Update {
    Update::ZAdd {
        member: member.as_bytes().to_vec(),
        score: score.to_bits(),
    }
}

/// A read of a sorted set showing `pairs`, naming the writes `observed`.
fn zread(key: &str, pairs: &[(&str, f64)], observed: &[(u64, u64, u32)]) -> HOp {
    HOp::Read {
        key: Key::from(key),
        obj: ObjType::ZSet,
        value: ObjValue::ZSet(
            pairs
                .iter()
                .map(|(m, s)| (m.as_bytes().to_vec(), s.to_bits()))
                .collect(),
        ),
        observed: observed.iter().map(|a| oid(a.0, a.1, a.2)).collect(),
    }
}

/// Sorted-set reads judged as a hash's (members are add-wins): a read naming the writes in
/// its past passes, a `ZADD` concurrent with a `ZREM` survives it; a read that misses a
/// write in its causal past no remove observed, or shows one a visible remove observed, is
/// rejected; the history round-trips through JSON lines.
#[test]
fn sorted_set_reads_are_checked_against_the_model() {
    let writes = || {
        vec![
            txn(1, 1, vec![zwrite("z", zadd("a", 1.0), (1, 1, 0))]),
            txn(2, 1, vec![zwrite("z", zadd("b", 2.0), (2, 1, 0))]),
        ]
    };
    let mut good = writes();
    good.push(txn(
        3,
        1,
        vec![zread(
            "z",
            &[("a", 1.0), ("b", 2.0)],
            &[(1, 1, 0), (2, 1, 0)],
        )],
    ));
    assert!(check(&history(good), Guarantee::Tcc).is_ok());
    // Session 1 removes a; session 2's concurrent re-add of a survives.
    let mut removed = writes();
    let rem = Update::ZRemove {
        members: vec![b"a".to_vec()],
    };
    removed.push(txn(1, 2, vec![zwrite("z", rem, (1, 2, 0))]));
    removed.push(txn(2, 2, vec![zwrite("z", zadd("a", 5.0), (2, 2, 0))]));
    removed.push(txn(
        2,
        3,
        vec![zread(
            "z",
            &[("a", 5.0), ("b", 2.0)],
            &[(2, 1, 0), (2, 2, 0)],
        )],
    ));
    assert!(check(&history(removed.clone()), Guarantee::Tcc).is_ok());
    let mut text = Vec::new();
    write_history(&history(removed.clone()), &mut text).expect("writes");
    assert_eq!(read_history(&text[..]).expect("reads").txns, removed);
    // Session 1's next read misses its own ZADD.
    let mut missing = writes();
    missing.push(txn(1, 2, vec![zread("z", &[], &[])]));
    rejects(
        &history(missing),
        ViolationKind::SetNotCausallyClosed,
        &[tid(1, 2)],
    );
    // Session 1 removed a, then reads it back from its own removed ZADD.
    let mut ghost = writes();
    let rem = Update::ZRemove {
        members: vec![b"a".to_vec()],
    };
    ghost.push(txn(1, 2, vec![zwrite("z", rem, (1, 2, 0))]));
    ghost.push(txn(1, 3, vec![zread("z", &[("a", 1.0)], &[(1, 1, 0)])]));
    assert!(check(&history(ghost), Guarantee::Tcc).is_err());
}
