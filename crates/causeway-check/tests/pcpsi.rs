//! Hand-written histories for the PC-PSI checker (Occult §6.1): each anomaly it must
//! reject (aborted and intermediate reads, circular information flow, missed effects), and
//! histories PSI allows (write skew among them) that it must accept.

use causeway_check::{
    check, read_history, write_history, Guarantee, HOp, History, Outcome, Stats, TxnRecord,
    ViolationKind,
};
use causeway_core::{DcId, Key, ObjType, ObjValue, OpId, SessionId, TxnId, TxnKind, Update};

type At = (u64, u64, u32);

fn tid(session: u64, seq: u64) -> TxnId {
    TxnId {
        session: SessionId(session),
        seq,
    }
}

fn oid(at: At) -> OpId {
    OpId {
        txn: tid(at.0, at.1),
        index: at.2,
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

fn set(key: &str, value: &str, at: At) -> HOp {
    HOp::Write {
        key: Key::from(key),
        update: Update::Assign(value.as_bytes().to_vec()),
        id: oid(at),
    }
}

/// Reads register `key` showing the write `from` (with `value`), or the initial value.
fn get(key: &str, from: Option<(At, &str)>) -> HOp {
    HOp::Read {
        key: Key::from(key),
        obj: ObjType::Lww,
        value: ObjValue::Lww(from.map(|(_, v)| v.as_bytes().to_vec())),
        observed: from.map(|(at, _)| oid(at)).into_iter().collect(),
    }
}

/// A history with the version order `(write, the write it overwrote)`.
fn history(txns: Vec<TxnRecord>, overwrites: &[(At, Option<At>)]) -> History {
    History {
        txns,
        overwrites: overwrites
            .iter()
            .map(|(w, prev)| (oid(*w), prev.map(oid)))
            .collect(),
        ..History::default()
    }
}

/// Checks that PC-PSI's own graph checks reject `h` with `kind`, naming every one of
/// `names`; returns the detail. `Guarantee::PcPsi` runs the TCC checks first, which catch
/// several of these histories under their own names: it must reject each too.
fn rejects(h: &History, kind: ViolationKind, names: &[TxnId]) -> String {
    let v = causeway_check::pcpsi::check_pcpsi(h).expect_err("PC-PSI must reject this history");
    assert!(
        check(h, Guarantee::PcPsi).is_err(),
        "the pc-psi guarantee rejects it too"
    );
    assert_eq!(v.kind, kind, "{v}");
    for name in names {
        assert!(v.txns.contains(name), "{v} should name {name}");
    }
    v.detail
}

fn accepts(h: &History) -> Stats {
    check(h, Guarantee::PcPsi).unwrap_or_else(|v| panic!("PC-PSI must accept: {v}"))
}

#[test]
fn pc_psi_parses() {
    assert_eq!(Guarantee::parse("pc-psi"), Some(Guarantee::PcPsi));
}

#[test]
fn aborted_read_is_rejected() {
    let mut w = txn(1, 1, vec![set("x", "1", (1, 1, 0))]);
    w.outcome = Outcome::Aborted;
    let r = txn(2, 2, vec![get("x", Some(((1, 1, 0), "1")))]);
    let detail = rejects(
        &history(vec![w, r], &[]),
        ViolationKind::ReadFromAborted,
        &[tid(2, 2), tid(1, 1)],
    );
    assert!(detail.contains("Aborted"), "{detail}");
}

fn intermediate(read: At, value: &str) -> History {
    let w = txn(
        1,
        1,
        vec![set("x", "a", (1, 1, 0)), set("x", "b", (1, 1, 1))],
    );
    let r = txn(2, 2, vec![get("x", Some((read, value)))]);
    history(vec![w, r], &[((1, 1, 1), None)])
}

#[test]
fn intermediate_read_is_rejected_and_the_final_write_accepted() {
    let detail = rejects(
        &intermediate((1, 1, 0), "a"),
        ViolationKind::IntermediateRead,
        &[tid(2, 2), tid(1, 1)],
    );
    assert!(
        detail.contains("s1.t1.o1"),
        "names the later write: {detail}"
    );
    accepts(&intermediate((1, 1, 1), "b"));
}

#[test]
fn a_txn_may_read_its_own_earlier_write() {
    let t = txn(
        1,
        1,
        vec![
            set("x", "a", (1, 1, 0)),
            get("x", Some(((1, 1, 0), "a"))),
            set("x", "b", (1, 1, 2)),
        ],
    );
    accepts(&history(vec![t], &[((1, 1, 2), None)]));
}

/// T1 writes x and reads T2's y; T2 overwrites T1's x: `T1 -ww-> T2 -wr-> T1`.
fn ww_wr_cycle(with_versions: bool) -> History {
    let t1 = txn(
        1,
        1,
        vec![set("x", "1", (1, 1, 0)), get("y", Some(((2, 1, 0), "2")))],
    );
    let t2 = txn(
        2,
        1,
        vec![set("y", "2", (2, 1, 0)), set("x", "2", (2, 1, 1))],
    );
    let versions: &[(At, Option<At>)] = if with_versions {
        &[((1, 1, 0), None), ((2, 1, 1), Some((1, 1, 0)))]
    } else {
        &[]
    };
    history(vec![t1, t2], versions)
}

#[test]
fn circular_flow_through_ww_and_wr_is_rejected() {
    let detail = rejects(
        &ww_wr_cycle(true),
        ViolationKind::CircularFlow,
        &[tid(1, 1), tid(2, 1)],
    );
    assert!(
        detail.contains("-ww->") && detail.contains("-wr->"),
        "{detail}"
    );
    // Without the version order there is no ww edge: weaker, never wrong.
    let stats = accepts(&ww_wr_cycle(false));
    assert_eq!(stats.rw_edges, 0);
}

#[test]
fn circular_flow_through_sd_and_wr_is_rejected() {
    // C -wr-> A -sd-> B -wr-> C.
    let a = txn(1, 1, vec![get("x", Some(((2, 1, 1), "c")))]);
    let b = txn(1, 2, vec![set("y", "b", (1, 2, 0))]);
    let c = txn(
        2,
        1,
        vec![get("y", Some(((1, 2, 0), "b"))), set("x", "c", (2, 1, 1))],
    );
    let detail = rejects(
        &history(vec![a, b, c], &[]),
        ViolationKind::CircularFlow,
        &[tid(1, 1), tid(1, 2), tid(2, 1)],
    );
    assert!(
        detail.contains("-sd->") && detail.contains("-wr->"),
        "{detail}"
    );
}

#[test]
fn lost_update_is_a_missed_effect() {
    // Both read x's initial value and write x; T2's write overwrote T1's:
    // T2 -rw-> T1 -ww-> T2.
    let t1 = txn(1, 1, vec![get("x", None), set("x", "1", (1, 1, 1))]);
    let t2 = txn(2, 1, vec![get("x", None), set("x", "2", (2, 1, 1))]);
    let h = history(
        vec![t1, t2],
        &[((1, 1, 1), None), ((2, 1, 1), Some((1, 1, 1)))],
    );
    let detail = rejects(&h, ViolationKind::MissedEffect, &[tid(1, 1), tid(2, 1)]);
    assert!(detail.contains("s2.t1 -rw-> s1.t1"), "{detail}");
    assert!(detail.contains("s1.t1 -ww-> s2.t1"), "{detail}");
}

#[test]
fn fractured_read_is_a_missed_effect() {
    // T2 sees T1's x but not its y: T2 -rw-> T1 -wr-> T2.
    let t1 = txn(
        1,
        1,
        vec![set("x", "1", (1, 1, 0)), set("y", "1", (1, 1, 1))],
    );
    let t2 = txn(2, 2, vec![get("x", Some(((1, 1, 0), "1"))), get("y", None)]);
    let h = history(vec![t1, t2], &[((1, 1, 0), None), ((1, 1, 1), None)]);
    let detail = rejects(&h, ViolationKind::MissedEffect, &[tid(1, 1), tid(2, 2)]);
    assert!(
        detail.contains("-rw->") && detail.contains("-wr->"),
        "{detail}"
    );
}

#[test]
fn a_missed_effect_through_a_longer_path_is_found() {
    // T1 writes x and y; T3 reads T1's x and writes z; T2 reads T3's z but y's initial
    // value: T2 -rw-> T1 -wr-> T3 -wr-> T2.
    let t1 = txn(
        1,
        1,
        vec![set("x", "1", (1, 1, 0)), set("y", "1", (1, 1, 1))],
    );
    let t3 = txn(
        3,
        2,
        vec![get("x", Some(((1, 1, 0), "1"))), set("z", "3", (3, 2, 1))],
    );
    let t2 = txn(2, 3, vec![get("z", Some(((3, 2, 1), "3"))), get("y", None)]);
    let h = history(
        vec![t1, t2, t3],
        &[((1, 1, 0), None), ((1, 1, 1), None), ((3, 2, 1), None)],
    );
    let detail = rejects(
        &h,
        ViolationKind::MissedEffect,
        &[tid(1, 1), tid(2, 3), tid(3, 2)],
    );
    assert!(detail.contains("s2.t3 -rw-> s1.t1"), "{detail}");
}

#[test]
fn missing_the_sessions_own_write_is_a_missed_effect() {
    // The session wrote x, then read x's initial value: T2 -rw-> T1 -sd-> T2.
    let t1 = txn(1, 1, vec![set("x", "1", (1, 1, 0))]);
    let t2 = txn(1, 2, vec![get("x", None)]);
    let h = history(vec![t1, t2], &[((1, 1, 0), None)]);
    let detail = rejects(&h, ViolationKind::MissedEffect, &[tid(1, 1), tid(1, 2)]);
    assert!(
        detail.contains("-sd->") && detail.contains("-rw->"),
        "{detail}"
    );
}

#[test]
fn write_skew_is_allowed() {
    // Two rw edges and nothing else: PSI allows it.
    let t1 = txn(
        1,
        1,
        vec![get("x", None), get("y", None), set("x", "1", (1, 1, 2))],
    );
    let t2 = txn(
        2,
        1,
        vec![get("x", None), get("y", None), set("y", "2", (2, 1, 2))],
    );
    let h = history(vec![t1, t2], &[((1, 1, 2), None), ((2, 1, 2), None)]);
    let stats = accepts(&h);
    assert_eq!(stats.rw_edges, 2, "T1 -rw-> T2 and T2 -rw-> T1");
    assert_eq!(stats.counted, 2);
}

#[test]
fn a_serial_chain_and_a_stale_read_only_txn_are_accepted() {
    let t1 = txn(1, 1, vec![set("x", "1", (1, 1, 0))]);
    let t2 = txn(
        2,
        2,
        vec![get("x", Some(((1, 1, 0), "1"))), set("x", "2", (2, 2, 1))],
    );
    let t3 = txn(
        3,
        3,
        vec![get("x", Some(((2, 2, 1), "2"))), set("x", "3", (3, 3, 1))],
    );
    // A read-only txn on another session reading the first version: stale, but a
    // consistent snapshot.
    let t4 = txn(4, 4, vec![get("x", Some(((1, 1, 0), "1")))]);
    let h = history(
        vec![t1, t2, t3, t4],
        &[
            ((1, 1, 0), None),
            ((2, 2, 1), Some((1, 1, 0))),
            ((3, 3, 1), Some((2, 2, 1))),
        ],
    );
    let stats = accepts(&h);
    assert_eq!(stats.counted, 4);
    assert_eq!(stats.reads, 3);
    assert_eq!(
        stats.rw_edges, 1,
        "only the read-only txn missed a later version"
    );
    // wr T1->T2, T2->T3, T1->T4; the ww edges T1->T2, T2->T3 coincide with wr ones.
    assert_eq!(stats.causal_edges, 3, "{stats:?}");
}

#[test]
fn concurrent_non_conflicting_txns_and_a_reader_are_accepted() {
    let t1 = txn(1, 1, vec![set("x", "1", (1, 1, 0))]);
    let t2 = txn(2, 1, vec![set("y", "2", (2, 1, 0))]);
    let t3 = txn(
        3,
        2,
        vec![
            get("x", Some(((1, 1, 0), "1"))),
            get("y", Some(((2, 1, 0), "2"))),
        ],
    );
    let h = history(vec![t1, t2, t3], &[((1, 1, 0), None), ((2, 1, 0), None)]);
    let stats = accepts(&h);
    assert_eq!(stats.rw_edges, 0);
    assert_eq!(stats.causal_edges, 2);
}

#[test]
fn a_read_only_txn_of_initial_values_is_accepted() {
    let r = txn(1, 1, vec![get("x", None), get("y", None)]);
    let w = txn(2, 2, vec![set("x", "1", (2, 2, 0))]);
    let stats = accepts(&history(vec![r, w], &[((2, 2, 0), None)]));
    assert_eq!(
        stats.rw_edges, 1,
        "the reader precedes the first version of x"
    );
}

#[test]
fn a_forked_version_order_is_malformed() {
    let t1 = txn(1, 1, vec![set("x", "1", (1, 1, 0))]);
    let t2 = txn(2, 1, vec![set("x", "2", (2, 1, 0))]);
    let h = history(vec![t1, t2], &[((1, 1, 0), None), ((2, 1, 0), None)]);
    let detail = rejects(&h, ViolationKind::Malformed, &[tid(1, 1), tid(2, 1)]);
    assert!(
        detail.contains("both overwrote the initial value"),
        "{detail}"
    );
}

#[test]
fn a_version_order_across_keys_is_malformed() {
    let t1 = txn(1, 1, vec![set("x", "1", (1, 1, 0))]);
    let t2 = txn(2, 1, vec![set("y", "2", (2, 1, 0))]);
    let h = history(vec![t1, t2], &[((2, 1, 0), Some((1, 1, 0)))]);
    rejects(&h, ViolationKind::Malformed, &[tid(2, 1)]);
}

#[test]
fn overwrites_round_trip_through_jsonl() {
    let t1 = txn(1, 1, vec![set("x", "1", (1, 1, 0))]);
    let t2 = txn(2, 2, vec![set("x", "2", (2, 2, 0))]);
    let h = history(
        vec![t1, t2],
        &[((1, 1, 0), None), ((2, 2, 0), Some((1, 1, 0)))],
    );
    let mut out = Vec::new();
    write_history(&h, &mut out).expect("write");
    let text = String::from_utf8(out).expect("utf-8");
    assert!(
        text.contains(r#"{"type":"overwrite","id":"s2.t2.o0","overwrote":"s1.t1.o0"}"#),
        "{text}"
    );
    assert!(
        text.contains(r#"{"type":"overwrite","id":"s1.t1.o0","overwrote":null}"#),
        "{text}"
    );
    let back = read_history(text.as_bytes()).expect("read");
    assert_eq!(back, h);
    // An older file, without overwrite records, still reads: no version order.
    let old: String = text
        .lines()
        .filter(|l| !l.contains("overwrite"))
        .map(|l| format!("{l}\n"))
        .collect();
    let back = read_history(old.as_bytes()).expect("read an old file");
    assert!(back.overwrites.is_empty());
    assert_eq!(back.txns, h.txns);
}

#[test]
fn a_repeated_overwrite_record_is_refused() {
    let line = r#"{"type":"overwrite","id":"s1.t1.o0","overwrote":null}"#;
    let text = format!("{line}\n{line}\n");
    let e = read_history(text.as_bytes()).expect_err("duplicate");
    assert!(e.contains("line 2"), "{e}");
}

#[test]
fn a_set_add_removed_later_by_its_txn_is_an_intermediate_read() {
    let add = HOp::Write {
        key: Key::from("s"),
        update: Update::Add(b"a".to_vec()),
        id: oid((1, 1, 0)),
    };
    let remove = HOp::Write {
        key: Key::from("s"),
        update: Update::Remove(b"a".to_vec()),
        id: oid((1, 1, 1)),
    };
    let read = HOp::Read {
        key: Key::from("s"),
        obj: ObjType::Set,
        value: ObjValue::Set(vec![b"a".to_vec()]),
        observed: vec![oid((1, 1, 0))],
    };
    let h = history(
        vec![txn(1, 1, vec![add, remove]), txn(2, 2, vec![read])],
        &[],
    );
    rejects(&h, ViolationKind::IntermediateRead, &[tid(2, 2), tid(1, 1)]);
}

#[test]
fn a_set_add_re_added_later_by_its_txn_is_an_intermediate_read() {
    let add = |index| HOp::Write {
        key: Key::from("s"),
        update: Update::Add(b"a".to_vec()),
        id: oid((1, 1, index)),
    };
    let read = |index| HOp::Read {
        key: Key::from("s"),
        obj: ObjType::Set,
        value: ObjValue::Set(vec![b"a".to_vec()]),
        observed: vec![oid((1, 1, index))],
    };
    let h = |index| {
        history(
            vec![
                txn(1, 1, vec![add(0), add(1)]),
                txn(2, 2, vec![read(index)]),
            ],
            &[],
        )
    };
    rejects(
        &h(0),
        ViolationKind::IntermediateRead,
        &[tid(2, 2), tid(1, 1)],
    );
    accepts(&h(1));
}

/// `n` read-modify-writes over 10 keys from 50 sessions, each reading its key's latest
/// version, and every 10th followed by a read-only txn 5 versions stale; the one after
/// txn `bad`, if any, runs in the session that just wrote the key's latest version.
fn serial(n: u64, bad: Option<u64>) -> History {
    let mut txns = Vec::new();
    let mut overwrites = Vec::new();
    let mut chains: Vec<Vec<At>> = vec![Vec::new(); 10];
    for i in 1..=n {
        let key = format!("k{}", i % 10);
        let chain = &mut chains[(i % 10) as usize];
        let me = (i % 50, i, 1);
        let last = chain.last().copied();
        let read = get(&key, last.map(|at| (at, "v")));
        txns.push(txn(i % 50, i, vec![read, set(&key, "v", me)]));
        overwrites.push((me, last));
        chain.push(me);
        if i % 10 == 0 && chain.len() > 5 {
            let stale = chain[chain.len() - 6];
            let reader = if bad == Some(i) {
                txn(i % 50, i + n, vec![get(&key, Some((stale, "v")))])
            } else {
                txn(1000 + i % 7, i, vec![get(&key, Some((stale, "v")))])
            };
            txns.push(reader);
        }
    }
    history(txns, &overwrites)
}

#[test]
fn a_large_serial_history_is_accepted() {
    let stats = accepts(&serial(20_000, None));
    assert_eq!(stats.counted, 20_000 + 1_995);
    assert_eq!(
        stats.rw_edges, 1_995,
        "every stale reader missed a later version"
    );
}

#[test]
fn a_stale_read_after_the_sessions_own_write_is_found_in_a_large_history() {
    // The reader after txn 10,000 runs in that txn's session and reads 5 versions back:
    // it -rw-> the writer of the next version, which reaches it over ww edges and session
    // order.
    let detail = rejects(
        &serial(20_000, Some(10_000)),
        ViolationKind::MissedEffect,
        &[tid(0, 30_000)],
    );
    assert!(detail.contains("s0.t30000 -rw->"), "{detail}");
    assert!(detail.contains("-sd-> s0.t30000"), "{detail}");
}
