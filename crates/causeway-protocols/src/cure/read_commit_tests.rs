//! Tests of read-then-commit (`kit::session`, `First::ReadCommit`): the read and the
//! commit in one exchange, the promised updates' op ids, and the waits of a read served
//! in place: none for a one-phase txn still being persisted, the full Cure wait (Alg. 2
//! l.2) for a two-phase txn prepared below the snapshot.

use super::msg::{First, Msg};
use super::tests::assign;
use super::Cure;
use crate::kit::testnet::TestNet;
use crate::params::Params;
use causeway_core::crdt::{ObjType, Update};
use causeway_core::{
    Addr, ClientSession, Ctx, Key, ObjValue, OpId, Output, Request, Response, ServerNode,
    SessionId, Topology, TrueTime, TxnId, TxnKind, Vc,
};

const T: u64 = 1_000_000_000;

type Net = TestNet<Cure>;

fn begin() -> Request {
    Request::Begin {
        kind: TxnKind::Causal,
        label: None,
    }
}

fn incr(key: &Key, by: i64) -> Request {
    Request::Update {
        key: key.clone(),
        update: Update::Increment(by),
    }
}

fn read_counter(key: &Key) -> Request {
    Request::Read {
        keys: vec![(key.clone(), ObjType::Counter)],
    }
}

/// Submits `read` on session `s` with `ahead` promised after it, and delivers.
fn submit_ahead(net: &mut Net, s: u64, read: Request, ahead: &[Request]) {
    net.session_call(s, |m, ctx| m.submit_ahead(ctx, read, ahead));
    net.deliver_all();
}

fn counter(values: &Response) -> i64 {
    match values {
        Response::Values(v) => match v[0].value {
            ObjValue::Counter(n) => n,
            ref other => panic!("not a counter: {other:?}"),
        },
        other => panic!("not values: {other:?}"),
    }
}

/// The value of `key` as a fresh txn of session `s` reads it.
fn value(net: &mut Net, s: u64, key: &Key) -> i64 {
    let r = net.txn(s, vec![read_counter(key)]);
    counter(&r[1])
}

/// The answers of a read submitted with `ahead` promised, once it was answered: the
/// read's, then each promised request's, taken as a driver does (answered ahead by the
/// session, or submitted).
fn promised_answers(net: &mut Net, s: u64, ahead: &[Request]) -> Vec<Response> {
    let mut answers = vec![net.take_reply(s).expect("the read is answered")];
    for request in ahead {
        let answer = match net.take_reply(s) {
            Some(early) => early,
            None => net.request(s, request.clone()),
        };
        answers.push(answer);
    }
    answers
}

/// Runs INCR as the RESP front end does: BEGIN, then read, update and commit promised.
fn incr_promised(net: &mut Net, s: u64, key: &Key) -> Vec<Response> {
    assert!(matches!(net.request(s, begin()), Response::Begun { .. }));
    let ahead = [incr(key, 1), Request::Commit];
    submit_ahead(net, s, read_counter(key), &ahead);
    promised_answers(net, s, &ahead)
}

/// A read-then-commit whose read comes with its commit's result (served and committed
/// at the coordinator's own partition) has its promised update and commit answered in
/// the read's turn: the driver submits neither (`ClientSession::submit_ahead`).
#[test]
fn a_settled_read_then_commit_answers_its_update_and_commit_in_the_reads_turn() {
    let topo = Topology::full(1, 1, 2);
    let mut net = Net::new(topo, Params::default(), T);
    let key = Key::from("n");
    net.session(1, 0);
    net.run(20);
    net.request(1, begin());
    let ahead = [incr(&key, 1), Request::Commit];
    submit_ahead(&mut net, 1, read_counter(&key), &ahead);
    let replies: Vec<Response> = net.replies.remove(&1).unwrap_or_default().into();
    assert_eq!(replies.len(), 3, "{replies:?}");
    assert_eq!(counter(&replies[0]), 0);
    assert!(matches!(replies[1], Response::Updated { op } if op.index == 0));
    assert_eq!(replies[2], Response::Committed);
    assert!(matches!(net.request(1, begin()), Response::Begun { .. }));
    assert_eq!(
        net.request(1, Request::Abort),
        Response::Aborted {
            reason: "aborted by the client".into()
        }
    );
    assert_eq!(value(&mut net, 1, &key), 1);
    net.check_invariants().expect("invariants hold");
}

#[test]
fn a_promised_read_then_commit_reads_before_its_updates_and_commits_them() {
    let topo = Topology::full(1, 2, 4);
    let mut net = Net::new(topo, Params::default(), T);
    let key = Key::from("n");
    net.session(1, 0);
    net.run(20);
    for expected in 0..3 {
        let r = incr_promised(&mut net, 1, &key);
        assert_eq!(
            counter(&r[0]),
            expected,
            "the read does not see its own update"
        );
        match &r[1] {
            Response::Updated { op } => assert_eq!(op.index, 0, "the op id it would get"),
            other => panic!("update answered {other:?}"),
        }
        assert_eq!(r[2], Response::Committed);
    }
    assert_eq!(value(&mut net, 1, &key), 3);
    net.check_invariants().expect("invariants hold");
}

/// A promise over two partitions (read one key, add to another) is not answered ahead:
/// its commit's result comes after the read's, so the driver submits the update, and one
/// other than the promised one is refused.
#[test]
fn an_update_other_than_the_promised_one_is_refused() {
    let topo = Topology::full(1, 1, 2);
    let mut net = Net::new(topo.clone(), Params::default(), T);
    let key = Key::from("n");
    let other = (0..100)
        .map(|i| Key::from(format!("m{i}").as_str()))
        .find(|k| topo.partition_of(k) != topo.partition_of(&key))
        .expect("a key of the other partition");
    net.session(1, 0);
    net.run(20);
    net.request(1, begin());
    submit_ahead(
        &mut net,
        1,
        read_counter(&key),
        &[incr(&other, 1), Request::Commit],
    );
    let read = net.take_reply(1);
    assert!(matches!(read, Some(Response::Values(_))), "{read:?}");
    assert_eq!(net.take_reply(1), None, "nothing answered ahead");
    match net.request(1, incr(&other, 2)) {
        Response::Error(e) => assert!(e.to_string().contains("promised"), "{e}"),
        other => panic!("a broken promise answered {other:?}"),
    }
}

/// Starts a txn adding each `by` to its key at node 0 from session 9 (committed in one
/// phase, or one node, with one record) and keeps its record from becoming durable;
/// returns the lsn to make durable later.
fn pending_commit(net: &mut Net, adds: &[(&Key, i64)]) -> u64 {
    let txn = TxnId {
        session: SessionId(9),
        seq: 1,
    };
    let updates = adds
        .iter()
        .enumerate()
        .map(|(i, (key, by))| {
            let op = OpId {
                txn,
                index: i as u32,
            };
            ((*key).clone(), Update::Increment(*by), op)
        })
        .collect();
    let first = First::Commit { req: 1, updates };
    let m = Msg::StartWith {
        txn,
        kind: TxnKind::Causal,
        label: None,
        cvc: Vc::zero(1),
        first,
        observed: true,
    };
    // The START, then the PREPARE the coordinator sends to its own partition (or the votes
    // its partitions send it); what the node sends elsewhere is dropped (nothing else is
    // waiting for it).
    // A prepare that must wait for svc[d] <= Clock (Alg. 2 l.7) is served by a timer 1 ms later.
    let mut inbox = vec![(Addr::Client(SessionId(9)), Some(m))];
    let mut lsns = Vec::new();
    while let Some((from, m)) = inbox.pop() {
        let mut ctx = Ctx::new(TrueTime(net.clock), net.clock);
        match m {
            Some(m) => net.nodes[0].handle_message(&mut ctx, from, m),
            None => net.nodes[0].handle_timeout(&mut ctx),
        }
        if inbox.is_empty() && lsns.is_empty() && net.clock < T + 100_000_000 {
            net.clock += 1_000_000;
            inbox.push((from, None));
        }
        for out in ctx.outputs {
            match out {
                Output::Persist { lsn, .. } => lsns.push(lsn),
                Output::Send {
                    to: to @ Addr::Node(_),
                    msg: msg @ (Msg::Prepare { .. } | Msg::Prepared { .. }),
                } => inbox.push((to, Some(msg))),
                _ => {}
            }
        }
    }
    assert_eq!(
        lsns.len(),
        1,
        "one record for a one-phase or one-node commit"
    );
    lsns[0]
}

/// Session `s` begins a txn and reads `key` as a counter (a plain read, no commit
/// promised); whether the read is answered once the network is quiet.
fn plain_read_answered(net: &mut Net, s: u64, key: &Key) -> bool {
    net.request(s, begin());
    net.session_call(s, |m, ctx| m.submit(ctx, read_counter(key)));
    net.deliver_all();
    net.replies.get(&s).is_some_and(|q| !q.is_empty())
}

/// A one-node commit is visible nowhere until its record is durable: a read of one of
/// its keys waits for it (it is prepared there, Alg. 2 l.2 and l.20) and then sees it.
#[test]
fn a_one_node_commit_is_invisible_until_its_record_is_durable() {
    node_commit_visibility(None);
}

/// The `node-commit-early` mutation commits the partitions when the record is written:
/// the read sees a txn that a crash before the fsync would lose.
#[test]
#[should_panic(expected = "a read waits for the one-node commit")]
fn the_node_commit_early_mutation_shows_it_before_it_is_durable() {
    node_commit_visibility(Some("node-commit-early"));
}

/// A fresh network of `topo` running Cure with `mutation`.
fn mutated(topo: &Topology, mutation: Option<&str>) -> Net {
    let params = Params {
        mutation: mutation.map(str::to_string),
        ..Params::default()
    };
    Net::new(topo.clone(), params, T)
}

fn node_commit_visibility(mutation: Option<&str>) {
    let topo = Topology::full(1, 1, 4);
    let mut net = mutated(&topo, mutation);
    let key = Key::from("n");
    let other = (0..100)
        .map(|i| Key::new(format!("m{i}")))
        .find(|k| topo.partition_of(k) != topo.partition_of(&key))
        .expect("a key of another partition");
    for s in [2, 9] {
        net.session(s, 0);
    }
    net.run(20);
    let lsn = pending_commit(&mut net, &[(&key, 5), (&other, 1)]);
    net.clock += 1_000_000;
    assert!(
        !plain_read_answered(&mut net, 2, &key),
        "a read waits for the one-node commit"
    );
    net.node_call(0, |m, ctx| m.handle_persisted(ctx, lsn));
    net.deliver_all();
    let read = net.replies.get_mut(&2).and_then(|q| q.pop_front());
    assert_eq!(counter(&read.expect("answered")), 5, "it sees the txn");
    net.check_invariants().expect("invariants hold");
}

#[test]
fn a_read_then_commit_does_not_wait_for_a_one_phase_txn_still_being_persisted() {
    let topo = Topology::full(1, 1, 1);
    let mut net = Net::new(topo, Params::default(), T);
    let key = Key::from("n");
    for s in [1, 2, 9] {
        net.session(s, 0);
    }
    net.run(20);
    let lsn = pending_commit(&mut net, &[(&key, 5)]);
    net.clock += 1_000_000;
    // A plain read waits for it (Cure Alg. 2 l.2)...
    assert!(
        !plain_read_answered(&mut net, 2, &key),
        "a plain read waits"
    );
    // ...a read-then-commit is served and commits without it.
    let r = incr_promised(&mut net, 1, &key);
    assert_eq!(counter(&r[0]), 0, "the pending txn is not in the snapshot");
    assert_eq!(r[2], Response::Committed);
    net.node_call(0, |m, ctx| m.handle_persisted(ctx, lsn));
    net.deliver_all();
    let plain = net.replies.get_mut(&2).and_then(|q| q.pop_front());
    assert!(matches!(plain, Some(Response::Values(_))), "{plain:?}");
    assert_eq!(value(&mut net, 1, &key), 6, "both increments count");
    net.check_invariants().expect("invariants hold");
}

/// The two-phase wait, and the `read-commit-no-wait` mutation that skips it: its read
/// misses a txn whose commit the session was already told of.
#[test]
fn a_read_then_commit_waits_for_a_two_phase_txn_prepared_below_its_snapshot() {
    waits_for_two_phase(None);
}

#[test]
#[should_panic(expected = "the read waits for the prepared two-phase txn")]
fn the_read_commit_no_wait_mutation_does_not() {
    waits_for_two_phase(Some("read-commit-no-wait"));
}

fn waits_for_two_phase(mutation: Option<&str>) {
    // Two nodes: a txn over partitions of one node commits with one record, no 2PC.
    let topo = Topology::full(1, 2, 4);
    let mut net = mutated(&topo, mutation);
    let key = Key::from("n");
    let node_of = |k: &Key| topo.node_of(causeway_core::DcId(0), topo.partition_of(k));
    let other = (0..100)
        .map(|i| Key::new(format!("m{i}")))
        .find(|k| node_of(k) != node_of(&key))
        .expect("a key of the other node");
    for s in [1, 2] {
        net.session(s, 0);
    }
    net.run(20);
    // Session 2's txn over two partitions prepares, and its COMMITs are held. It is
    // coordinated on `other`'s node (its first key), so `key`'s partition is a 2PC
    // participant (a partition of the coordinator's node commits with the decision).
    net.hold = |_, _, _, m| matches!(m, Msg::CommitTxn { .. });
    net.request(2, begin());
    net.request(2, incr(&other, 1));
    net.request(2, incr(&key, 7));
    assert_eq!(net.request(2, Request::Commit), Response::Committed);
    net.clock += 1_000_000;
    net.request(1, begin());
    submit_ahead(
        &mut net,
        1,
        read_counter(&key),
        &[incr(&key, 1), Request::Commit],
    );
    assert!(
        net.replies.get(&1).is_none_or(|q| q.is_empty()),
        "the read waits for the prepared two-phase txn"
    );
    net.release();
    net.deliver_all();
    let r = promised_answers(&mut net, 1, &[incr(&key, 1), Request::Commit]);
    assert_eq!(counter(&r[0]), 7, "it sees the committed txn");
    assert_eq!(r[2], Response::Committed);
    assert_eq!(value(&mut net, 1, &key), 8);
}

/// A read-then-commit whose read fails commits nothing, and the txn goes on as an
/// ordinary one (a client that does not stop at the error).
#[test]
fn a_failed_read_drops_the_promised_commit() {
    let topo = Topology::full(1, 2, 4);
    let mut net = Net::new(topo, Params::default(), T);
    let (set, n) = (Key::from("s"), Key::from("n"));
    net.session(1, 0);
    net.run(20);
    let add = Request::Update {
        key: set.clone(),
        update: Update::Add(b"x".to_vec()),
    };
    assert_eq!(net.txn(1, vec![add])[2], Response::Committed);
    net.request(1, begin());
    submit_ahead(
        &mut net,
        1,
        read_counter(&set),
        &[incr(&set, 1), Request::Commit],
    );
    let read = net.replies.get_mut(&1).and_then(|q| q.pop_front());
    assert!(matches!(read, Some(Response::Error(_))), "{read:?}");
    assert!(matches!(
        net.request(1, read_counter(&n)),
        Response::Values(_)
    ));
    assert_eq!(net.request(1, Request::Commit), Response::Committed);
    let r = net.txn(
        1,
        vec![Request::Read {
            keys: vec![(set.clone(), ObjType::Set)],
        }],
    );
    match &r[1] {
        Response::Values(v) => assert_eq!(v[0].value, ObjValue::Set(vec![b"x".to_vec()])),
        other => panic!("read answered {other:?}"),
    }
    assert_eq!(value(&mut net, 1, &n), 0, "nothing was incremented");
    net.check_invariants().expect("invariants hold");
}

/// Holds the messages a direct read-then-commit no longer sends: the separate read and
/// commit answers, and the partition's `OnePhaseDone` to a coordinator on its own node.
fn hold_separate_answers(_: &Topology, _: Addr, _: Addr, m: &Msg) -> bool {
    matches!(
        m,
        Msg::ReadResult { .. } | Msg::CommitResult { .. } | Msg::OnePhaseDone { .. }
    )
}

/// Holds `OnePhaseDone` only: a one-phase commit coordinated at its partition's node
/// does not send it.
fn hold_one_phase_done(_: &Topology, _: Addr, _: Addr, m: &Msg) -> bool {
    matches!(m, Msg::OnePhaseDone { .. })
}

/// A read-then-commit served at the coordinator's own partition answers its read and
/// its commit in one `ReadCommitResult`, and a one-phase commit coordinated there learns
/// its record is durable without a message to itself: with the separate messages held,
/// both still complete.
#[test]
fn a_direct_read_then_commit_answers_in_one_message() {
    let topo = Topology::full(1, 2, 4);
    let mut net = Net::new(topo, Params::default(), T);
    let key = Key::from("n");
    net.session(1, 0);
    net.run(20);
    net.hold = hold_one_phase_done;
    assert_eq!(net.txn(1, vec![incr(&key, 4)])[2], Response::Committed);
    net.hold = hold_separate_answers;
    let r = incr_promised(&mut net, 1, &key);
    assert_eq!(counter(&r[0]), 4, "the read sees the committed increment");
    assert!(matches!(r[1], Response::Updated { .. }), "{:?}", r[1]);
    assert_eq!(r[2], Response::Committed);
    net.release();
    net.deliver_all();
    assert_eq!(value(&mut net, 1, &key), 5);
    net.check_invariants().expect("invariants hold");
}

/// A direct read-then-commit whose commit fails (an increment that would overflow the
/// value it read) answers the read, then the abort, in the one message; nothing is
/// written.
#[test]
fn a_direct_read_then_commit_whose_commit_fails_answers_both() {
    let topo = Topology::full(1, 1, 4);
    let mut net = Net::new(topo, Params::default(), T);
    let key = Key::from("n");
    net.session(1, 0);
    net.run(20);
    assert_eq!(
        net.txn(1, vec![incr(&key, i64::MAX)])[2],
        Response::Committed
    );
    net.hold = hold_separate_answers;
    let r = incr_promised(&mut net, 1, &key);
    assert_eq!(counter(&r[0]), i64::MAX, "the read is answered");
    match &r[2] {
        Response::Aborted { reason } => assert!(reason.contains("overflow"), "{reason}"),
        other => panic!("the commit answered {other:?}"),
    }
    net.release();
    net.deliver_all();
    assert_eq!(value(&mut net, 1, &key), i64::MAX, "nothing was written");
    net.check_invariants().expect("invariants hold");
}

/// A network of one DC with session 1 at DC 0, after 20 rounds.
fn started(nodes_per_dc: u32, partitions: u32) -> Net {
    let mut net = Net::new(
        Topology::full(1, nodes_per_dc, partitions),
        Params::default(),
        T,
    );
    net.session(1, 0);
    net.run(20);
    net
}

/// Every answer session `s` has had since the last call.
fn take_replies(net: &mut Net, s: u64) -> Vec<Response> {
    net.replies.remove(&s).unwrap_or_default().into()
}

/// A BEGIN with updates and the commit promised (a SET, an MSET) answers the BEGIN and
/// the updates in its turn and takes the commit: the session runs it, the driver
/// submits nothing, and the commit's answer comes with the node's message
/// (`ClientSession::submit_ahead`, `running`).
#[test]
fn a_begin_answers_its_promised_updates_and_takes_the_commit() {
    let (a, b) = (Key::from("a"), Key::from("b"));
    let mut net = started(2, 4);
    let ahead = [assign(&a, "1"), assign(&b, "2"), Request::Commit];
    net.session_call(1, |m, ctx| m.submit_ahead(ctx, begin(), &ahead));
    let replies = take_replies(&mut net, 1);
    assert_eq!(
        replies.len(),
        3,
        "BEGIN and both updates at once: {replies:?}"
    );
    assert!(matches!(replies[0], Response::Begun { .. }));
    assert!(matches!(replies[1], Response::Updated { op } if op.index == 0));
    assert!(matches!(replies[2], Response::Updated { op } if op.index == 1));
    assert!(net.sessions[&1].running(), "the commit is taken and runs");
    net.deliver_all();
    let replies = take_replies(&mut net, 1);
    assert_eq!(replies, vec![Response::Committed]);
    assert!(!net.sessions[&1].running());
    let r = net.txn(
        1,
        vec![Request::Read {
            keys: vec![(a, ObjType::Lww), (b, ObjType::Lww)],
        }],
    );
    match &r[1] {
        Response::Values(v) => {
            let got: Vec<&ObjValue> = v.iter().map(|r| &r.value).collect();
            assert_eq!(
                got,
                [
                    &ObjValue::Lww(Some(b"1".to_vec())),
                    &ObjValue::Lww(Some(b"2".to_vec()))
                ]
            );
        }
        other => panic!("not values: {other:?}"),
    }
    net.check_invariants().expect("invariants hold");
}

/// A BEGIN with a read-then-commit promised (INCR) takes the read with its update and
/// commit: one message, and the read's answer (with the rest, settled) comes with it.
#[test]
fn a_begin_takes_a_promised_read_then_commit() {
    let key = Key::from("n");
    let mut net = started(1, 2);
    for expected in 0..2 {
        let ahead = [read_counter(&key), incr(&key, 1), Request::Commit];
        net.session_call(1, |m, ctx| m.submit_ahead(ctx, begin(), &ahead));
        let replies = take_replies(&mut net, 1);
        assert_eq!(replies.len(), 1, "only the BEGIN at once: {replies:?}");
        assert!(net.sessions[&1].running(), "the read is taken and runs");
        net.deliver_all();
        let replies = take_replies(&mut net, 1);
        assert_eq!(replies.len(), 3, "{replies:?}");
        assert_eq!(counter(&replies[0]), expected);
        assert!(matches!(replies[1], Response::Updated { op } if op.index == 0));
        assert_eq!(replies[2], Response::Committed);
    }
    assert_eq!(value(&mut net, 1, &key), 2);
    net.check_invariants().expect("invariants hold");
}

/// An update refused ahead ends the promise: its error is the last answer, and the
/// commit is not taken.
#[test]
fn a_begin_stops_taking_at_a_refused_update() {
    let mut net = started(1, 2);
    let too_long = Key(vec![b'k'; causeway_core::limits::KEY_LEN_MAX + 1]);
    let ahead = [assign(&too_long, "1"), Request::Commit];
    net.session_call(1, |m, ctx| m.submit_ahead(ctx, begin(), &ahead));
    let replies = take_replies(&mut net, 1);
    assert_eq!(replies.len(), 2, "{replies:?}");
    assert!(matches!(replies[1], Response::Error(_)), "{replies:?}");
    assert!(!net.sessions[&1].running(), "nothing taken after the error");
}

/// Holds what a one-partition read-only txn sent on the general path: the READ_KEY and
/// READ_REPLY through the coordinator's own queue, the separate read and commit answers,
/// and the ABORT that freed the txn at its coordinator.
fn hold_general_read(_: &Topology, _: Addr, _: Addr, m: &Msg) -> bool {
    matches!(
        m,
        Msg::ReadKeys { .. }
            | Msg::ReadReply { .. }
            | Msg::ReadResult { .. }
            | Msg::CommitResult { .. }
            | Msg::Abort { .. }
    )
}

/// Runs GET as the RESP front end does: BEGIN, then the read with the commit promised.
fn read_only_promised(net: &mut Net, s: u64, key: &Key) -> Vec<Response> {
    assert!(matches!(net.request(s, begin()), Response::Begun { .. }));
    let ahead = [Request::Commit];
    submit_ahead(net, s, read_counter(key), &ahead);
    take_replies(net, s)
}

/// A read with only the commit promised (a GET) is served at its partition and answered
/// with the commit's result in one message, both in the read's turn: no READ_KEY or
/// READ_REPLY, and no ABORT to free the txn at its coordinator: with those held (then
/// dropped), both answers come, and the session's next txn reads the same value.
#[test]
fn a_promised_read_only_txn_is_served_in_place_and_answered_in_one_message() {
    let mut net = started(2, 4);
    let key = Key::from("n");
    assert_eq!(net.txn(1, vec![incr(&key, 4)])[2], Response::Committed);
    net.hold = hold_general_read;
    let replies = read_only_promised(&mut net, 1, &key);
    assert_eq!(replies.len(), 2, "the read and the commit: {replies:?}");
    assert_eq!(
        counter(&replies[0]),
        4,
        "the read sees the committed increment"
    );
    assert_eq!(replies[1], Response::Committed);
    assert!(
        !net.sessions[&1].running(),
        "the driver submits nothing more"
    );
    net.drop_held();
    assert_eq!(value(&mut net, 1, &key), 4);
    net.check_invariants().expect("invariants hold");
}

/// A read-only txn served in place has no record after it to order it behind a one-phase
/// txn still being persisted, so its read waits for that txn as any read does (Cure Alg.
/// 2 l.2), unlike a read-then-commit's, and then sees it.
#[test]
fn a_promised_read_only_txn_waits_for_a_one_phase_txn_still_being_persisted() {
    let topo = Topology::full(1, 1, 1);
    let mut net = Net::new(topo, Params::default(), T);
    let key = Key::from("n");
    for s in [1, 9] {
        net.session(s, 0);
    }
    net.run(20);
    let lsn = pending_commit(&mut net, &[(&key, 5)]);
    net.clock += 1_000_000;
    let replies = read_only_promised(&mut net, 1, &key);
    assert!(replies.is_empty(), "the read waits: {replies:?}");
    net.node_call(0, |m, ctx| m.handle_persisted(ctx, lsn));
    net.deliver_all();
    let replies = take_replies(&mut net, 1);
    assert_eq!(replies.len(), 2, "{replies:?}");
    assert_eq!(counter(&replies[0]), 5, "it sees the txn");
    assert_eq!(replies[1], Response::Committed);
    net.check_invariants().expect("invariants hold");
}
