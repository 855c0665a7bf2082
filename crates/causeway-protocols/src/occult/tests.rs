//! Occult on the kit's in-memory network: the read check with local retries and the
//! master fallback (and the `no-read-check` mutation accepting the stale value), a
//! transaction's writes seen all or none (a fractured read set aborts in validation),
//! lock conflicts and the termination of a txn whose COMMIT never arrives (§7), and
//! recovery from the records.

use super::{Config, Msg, Occult, Record, Shards};
use crate::kit::testnet::{TestNet, MS};
use crate::params::{NodeConfig, Params};
use crate::registry::Protocol;
use causeway_core::crdt::{ObjType, Update};
use causeway_core::{
    Addr, Ctx, DcId, Key, NodeId, ObjValue, OpId, Output, Request, Response, ServerNode, SessionId,
    Topology, TrueTime, TxnId,
};

const T: u64 = 1_000_000_000;

/// 2 DCs, one node each, 2 partitions: shards of partition 0 have their master in DC 0,
/// those of partition 1 in DC 1.
fn topo() -> Topology {
    Topology::full(2, 1, 2)
}

fn net(mutation: Option<&str>) -> TestNet<Occult> {
    let params = Params {
        mutation: mutation.map(str::to_string),
        ..Params::default()
    };
    let mut n = TestNet::new(topo(), params, T);
    n.session(1, 0);
    n.session(2, 1);
    n
}

/// A key whose shard has its master in `dc` (the `i`-th such key).
fn key_in(dc: u16, i: usize) -> Key {
    let shards = Shards::new(&topo(), Config::default().shards);
    (0..)
        .map(|j| Key::from(format!("k{j}").as_str()))
        .filter(|k| shards.master_dc(shards.of(k)) == DcId(dc))
        .nth(i)
        .expect("keys")
}

fn set(k: &Key, v: &str) -> Request {
    Request::Update {
        key: k.clone(),
        update: Update::Assign(v.into()),
    }
}

fn read(keys: &[&Key]) -> Request {
    Request::Read {
        keys: keys.iter().map(|k| ((*k).clone(), ObjType::Lww)).collect(),
    }
}

fn lww(r: &Response, i: usize) -> Option<String> {
    let Response::Values(v) = r else {
        panic!("not values: {r:?}")
    };
    match &v[i].value {
        ObjValue::Lww(x) => x.as_ref().map(|b| String::from_utf8_lossy(b).into_owned()),
        other => panic!("{other:?}"),
    }
}

fn gauge(net: &TestNet<Occult>, n: usize, name: &str) -> f64 {
    let g = net.nodes[n].gauges(net.clock);
    g.iter().find(|(k, _)| *k == name).expect("gauge").1
}

/// Replication from DC 1's node to DC 0's is held.
fn hold_repl_from_1(_: &Topology, from: Addr, _: Addr, m: &Msg) -> bool {
    from == Addr::Node(NodeId(1)) && matches!(m, Msg::Repl { .. })
}

fn hold_repl_from_0(_: &Topology, from: Addr, _: Addr, m: &Msg) -> bool {
    from == Addr::Node(NodeId(0)) && matches!(m, Msg::Repl { .. })
}

/// Fig. 3 and §4.3: the client wrote at DC 1's master; its local slave lags, so the read
/// is stale, retried locally, then served by the master.
#[test]
fn a_stale_read_is_retried_then_served_by_the_master() {
    let mut net = net(None);
    net.hold = hold_repl_from_1;
    let k = key_in(1, 0);
    let w = net.txn(1, vec![set(&k, "v1")]);
    assert_eq!(w.last(), Some(&Response::Committed));
    let r = net.txn(1, vec![read(&[&k])]);
    assert_eq!(lww(&r[1], 0).as_deref(), Some("v1"), "read your writes");
    assert_eq!(gauge(&net, 0, "occult_stale_reads"), 1.0);
    assert_eq!(gauge(&net, 0, "occult_read_retries"), 4.0);
    assert_eq!(gauge(&net, 1, "occult_master_fallbacks"), 1.0);
    net.check_invariants().unwrap();
}

/// The `no-read-check` mutation takes the slave's stale value: read-your-writes breaks.
#[test]
fn without_the_read_check_the_stale_value_is_read() {
    let mut net = net(Some("no-read-check"));
    net.hold = hold_repl_from_1;
    let k = key_in(1, 0);
    net.txn(1, vec![set(&k, "v1")]);
    let r = net.txn(1, vec![read(&[&k])]);
    assert_eq!(lww(&r[1], 0), None, "the stale initial value");
}

/// §6.2: a txn writing keys mastered in both DCs, with DC 0's writes not yet at DC 1.
/// Reading the fresh key first makes the other read stale until the master serves it;
/// reading both at once returns a fractured pair that validation refuses.
#[test]
fn a_transaction_is_seen_all_or_nothing() {
    let mut net = net(None);
    let (a, b) = (key_in(0, 0), key_in(1, 0));
    net.txn(1, vec![set(&a, "a0"), set(&b, "b0")]);
    net.run(20);
    net.hold = hold_repl_from_0;
    let w = net.txn(1, vec![set(&a, "a1"), set(&b, "b1")]);
    assert_eq!(w.last(), Some(&Response::Committed));
    let r = net.txn(2, vec![read(&[&b]), read(&[&a])]);
    assert_eq!(lww(&r[1], 0).as_deref(), Some("b1"));
    assert_eq!(lww(&r[2], 0).as_deref(), Some("a1"), "not the half state");
    assert_eq!(r.last(), Some(&Response::Committed));
    // A session that has not seen the txn reads both at once: a0 with b1 is fractured.
    net.session(3, 1);
    let r = net.txn(3, vec![read(&[&a, &b])]);
    assert_eq!(lww(&r[1], 0).as_deref(), Some("a0"));
    assert_eq!(lww(&r[1], 1).as_deref(), Some("b1"));
    let Some(Response::Aborted { reason }) = r.last() else {
        panic!("{r:?}")
    };
    assert!(reason.starts_with("validation-read-set"), "{reason}");
}

/// Hold every COMMIT: the first txn keeps its locks until the coordinator terminates it.
fn hold_commits(_: &Topology, _: Addr, _: Addr, m: &Msg) -> bool {
    matches!(m, Msg::Commit { .. })
}

/// §6.2 lock conflicts abort after the retries; §7 termination frees the locks of a txn
/// whose COMMIT never arrived, and that COMMIT, once it does, is refused.
#[test]
fn locks_conflict_and_termination_frees_them() {
    let mut net = net(None);
    let (x, y) = (key_in(0, 0), key_in(1, 0));
    net.hold = hold_commits;
    let begin = Request::Begin {
        kind: causeway_core::TxnKind::Causal,
        label: None,
    };
    net.request(1, begin.clone());
    net.request(1, set(&x, "one"));
    net.request(1, set(&y, "one"));
    net.session_call(1, |s, ctx| {
        causeway_core::ClientSession::submit(s, ctx, Request::Commit)
    });
    net.deliver_all(); // both shards locked, the COMMIT held
    net.hold = |_, _, _, _| false;
    let r = net.txn(2, vec![set(&x, "two"), set(&y, "two")]);
    let Some(Response::Aborted { reason }) = r.last() else {
        panic!("{r:?}")
    };
    assert!(reason.starts_with("lock"), "{reason}");
    net.run(2_100); // past lock_timeout_ns: the coordinator fences, DC 1 asks and releases
    assert_eq!(gauge(&net, 0, "occult_locks"), 0.0);
    assert_eq!(gauge(&net, 1, "occult_locks"), 0.0);
    let r = net.txn(2, vec![set(&x, "two"), set(&y, "two")]);
    assert_eq!(r.last(), Some(&Response::Committed));
    net.release(); // the late COMMIT reaches a coordinator that terminated the txn
    net.deliver_all();
    let answer = net.replies.get_mut(&1).and_then(|q| q.pop_back());
    let Some(Response::Aborted { reason }) = answer else {
        panic!("{answer:?}")
    };
    assert!(reason.starts_with("terminated"), "{reason}");
    net.check_invariants().unwrap();
}

/// Shardstamps are per shard (§4.2): a txn prepared on one shard holds back the floor of
/// that shard only, at its master and at the slave; the node's other shards advance.
#[test]
fn a_prepared_txn_holds_back_only_its_own_shards() {
    let mut net = net(None);
    let (x, y, z) = (key_in(0, 0), key_in(1, 0), key_in(0, 1));
    let shards = Shards::new(&topo(), Config::default().shards);
    assert_ne!(shards.of(&x), shards.of(&z), "two shards of node 0");
    net.run(20);
    net.hold = hold_commits;
    let begin = Request::Begin {
        kind: causeway_core::TxnKind::Causal,
        label: None,
    };
    net.request(1, begin);
    net.request(1, set(&x, "one"));
    net.request(1, set(&y, "one"));
    net.session_call(1, |s, ctx| {
        causeway_core::ClientSession::submit(s, ctx, Request::Commit)
    });
    net.deliver_all(); // both shards locked, the COMMIT held
    let prepared_at = net.clock;
    net.run(50); // heartbeats carry DC 0's floor to DC 1
    for n in 0..2 {
        let (held, free) = (
            net.nodes[n].read_stamp_of(&x),
            net.nodes[n].read_stamp_of(&z),
        );
        assert!(
            held <= prepared_at,
            "node {n}: the held shard stays below its promise"
        );
        assert!(
            free > prepared_at + 30 * MS,
            "node {n}: another shard advances ({free} vs {prepared_at})"
        );
    }
    net.check_invariants().unwrap();
}

/// A node rebuilt from its records holds the same versions and serves the same reads.
#[test]
fn a_node_recovers_its_store_from_the_records() {
    let mut net = net(None);
    let (a, b) = (key_in(0, 0), key_in(1, 1));
    net.txn(1, vec![set(&a, "a"), set(&b, "b")]);
    net.txn(2, vec![set(&b, "b2")]);
    net.run(20);
    for n in 0..2 {
        let cfg = NodeConfig::new(NodeId(n as u32), topo(), Params::default());
        let back = Occult::recover(&cfg, &Config::default(), &net.records[n]).expect("recover");
        for k in [&a, &b] {
            assert_eq!(back.version(k), net.nodes[n].version(k), "node {n} key {k}");
        }
    }
    assert!(net.clock > T + 20 * MS - 1);
}

/// A READ naming one key twice answers it twice (one read-set entry).
#[test]
fn a_key_read_twice_in_one_request_is_answered_twice() {
    let mut net = net(None);
    let k = key_in(1, 0);
    net.txn(1, vec![set(&k, "v")]);
    let r = net.txn(1, vec![read(&[&k, &k])]);
    assert_eq!(lww(&r[1], 0).as_deref(), Some("v"));
    assert_eq!(lww(&r[1], 1).as_deref(), Some("v"));
    assert_eq!(r.last(), Some(&Response::Committed));
}

/// Hold the coordinator's forwarded decision to DC 1's master.
fn hold_forward(_: &Topology, _: Addr, to: Addr, m: &Msg) -> bool {
    to == Addr::Node(NodeId(1)) && matches!(m, Msg::Forward { .. })
}

/// §6.2's commit phase is not atomic across masters: the coordinator (DC 0) applied the
/// txn while DC 1's master still holds it prepared. A client that read the new `a` depends
/// on the txn, so DC 1's master must not serve it the old `b`: its answer is checked while
/// the shard is held, and the read waits for the decision.
#[test]
fn a_master_holding_a_prepared_txn_is_not_read_past() {
    let mut net = net(None);
    let (a, b) = (key_in(0, 0), key_in(1, 0));
    net.txn(1, vec![set(&a, "a0"), set(&b, "b0")]);
    net.run(20);
    net.hold = hold_forward;
    let begin = Request::Begin {
        kind: causeway_core::TxnKind::Causal,
        label: None,
    };
    net.request(1, begin);
    net.request(1, set(&a, "a1"));
    net.request(1, set(&b, "b1"));
    net.session_call(1, |s, ctx| {
        causeway_core::ClientSession::submit(s, ctx, Request::Commit)
    });
    net.deliver_all(); // DC 0 applied a1; DC 1's master holds b1 prepared
    net.run(30); // a1 reaches DC 1's slave of a
    net.session(3, 1);
    net.request(
        3,
        Request::Begin {
            kind: causeway_core::TxnKind::Causal,
            label: None,
        },
    );
    let r = net.request(3, read(&[&a]));
    assert_eq!(lww(&r, 0).as_deref(), Some("a1"));
    net.session_call(3, |s, ctx| {
        causeway_core::ClientSession::submit(s, ctx, read(&[&b]))
    });
    net.run(50);
    assert!(
        net.replies.get(&3).is_none_or(|q| q.is_empty()),
        "the read of b waits while the master holds the txn: {:?}",
        net.replies.get(&3)
    );
    net.release(); // the decision arrives
    net.run(20);
    let answer = net.replies.get_mut(&3).and_then(|q| q.pop_front());
    let Some(r) = answer else { panic!("no answer") };
    assert_eq!(lww(&r, 0).as_deref(), Some("b1"), "not the half state");
}

/// §7 at a coordinator that crashes mid-commit: its `Decided` record is durable (so the
/// decision went out and DC 1's master applied its write) but its own write's record is
/// not. Restarted from the durable records, it holds the txn prepared with the decision:
/// it must apply its write from the decision, not terminate the txn it decided, so the
/// txn is visible whole (the simulator's seed 40 with 2 DCs and all faults).
#[test]
fn a_coordinator_restarted_after_its_decision_applies_its_own_writes() {
    let mut net = net(None);
    let (a, b) = (key_in(0, 0), key_in(1, 0));
    net.txn(1, vec![set(&a, "a0"), set(&b, "b0")]);
    net.run(20);
    let before = net.records[0].len();
    // Only durable writes replicate: keep `a1` from DC 1, whose log it is about to leave.
    net.hold = hold_repl_from_0;
    let w = net.txn(1, vec![set(&a, "a1"), set(&b, "b1")]);
    assert_eq!(w.last(), Some(&Response::Committed));
    net.drop_held();
    let is_decided = |r: &Vec<u8>| matches!(postcard::from_bytes(r), Ok(Record::Decided { .. }));
    let decided = net.records[0][before..].iter().position(is_decided);
    let kept = before + decided.expect("node 0 coordinates: a decision") + 1;
    assert!(
        kept < net.records[0].len(),
        "its write came after the decision"
    );
    net.records[0].truncate(kept); // the crash loses every record after the decision
    let cfg = NodeConfig::new(NodeId(0), topo(), Params::default());
    net.nodes[0] = Occult::recover(&cfg, &Config::default(), &net.records[0]).expect("recovers");
    net.node_call(0, |m, ctx| m.start(ctx));
    net.run(20);
    assert_eq!(gauge(&net, 0, "occult_locks"), 0.0, "committed at once");
    net.run(2_500); // past lock_timeout_ns: nothing left to terminate
    for (s, dc) in [(3, 0), (4, 1)] {
        net.session(s, dc);
        let r = net.txn(s, vec![read(&[&b]), read(&[&a])]);
        assert_eq!(lww(&r[1], 0).as_deref(), Some("b1"), "DC {dc}");
        assert_eq!(
            lww(&r[2], 0).as_deref(),
            Some("a1"),
            "DC {dc}: all of the txn"
        );
        assert_eq!(r.last(), Some(&Response::Committed));
    }
    net.check_invariants().unwrap();
}

/// A participant crashes right after the record of its writes of a txn, before the
/// coordinator hears its acknowledgement: restarted, it must not apply them again when
/// the decision is re-sent. With the writes and the release in separate records a crash
/// between them left the txn prepared with its writes applied, and the re-sent decision
/// counted the increment twice; `Record::Committed` holds both.
#[test]
fn a_participant_restarted_after_its_commit_does_not_apply_it_twice() {
    let mut net = net(None);
    let (a, b) = (key_in(0, 0), key_in(1, 0));
    let before = net.records[1].len();
    net.hold = |_, _, _, m| matches!(m, Msg::ForwardAck { .. } | Msg::Repl { .. });
    let add = |k: &Key| Request::Update {
        key: k.clone(),
        update: Update::Increment(1),
    };
    let w = net.txn(1, vec![add(&a), add(&b)]);
    assert_eq!(w.last(), Some(&Response::Committed));
    let holds_write = |r: &Vec<u8>| {
        let r = postcard::from_bytes(r);
        matches!(r, Ok(Record::Write(_)) | Ok(Record::Committed { .. }))
    };
    let at = net.records[1][before..].iter().position(holds_write);
    net.records[1].truncate(before + at.expect("node 1 applied b") + 1);
    let cfg = NodeConfig::new(NodeId(1), topo(), Params::default());
    net.nodes[1] = Occult::recover(&cfg, &Config::default(), &net.records[1]).expect("recovers");
    net.node_call(1, |m, ctx| m.start(ctx));
    net.drop_held(); // lost with the crash: the coordinator re-sends the decision
    net.run(2_500);
    for (s, dc) in [(3, 0), (4, 1)] {
        net.session(s, dc);
        let keys = vec![(a.clone(), ObjType::Counter), (b.clone(), ObjType::Counter)];
        let r = net.txn(s, vec![Request::Read { keys }]);
        let Response::Values(v) = &r[1] else {
            panic!("{r:?}")
        };
        let counts: Vec<&ObjValue> = v.iter().map(|x| &x.value).collect();
        let one = ObjValue::Counter(1);
        assert_eq!(counts, [&one, &one], "DC {dc}: each increment once");
    }
    net.check_invariants().unwrap();
}

/// A master shows its own write only once it is durable: a read arriving while the
/// write's record is in flight is answered when the disk confirms it (a crash in between
/// would lose a write that a client had read: the simulator's seed 5 of the loaded
/// `compression=temporal` sweep in scripts/test).
#[test]
fn a_master_answers_a_read_of_its_write_once_the_write_is_durable() {
    let cfg = NodeConfig::new(NodeId(0), topo(), Params::default());
    let mut node = Occult::recover(&cfg, &Config::default(), &[]).expect("a fresh node");
    let call = |node: &mut super::Node, f: &dyn Fn(&mut super::Node, &mut Ctx<Msg>)| {
        let mut ctx = Ctx::new(TrueTime(T), T);
        f(node, &mut ctx);
        ctx.outputs
    };
    call(&mut node, &|n, ctx| n.start(ctx));
    let (k, client) = (key_in(0, 0), Addr::Client(SessionId(1)));
    let id = OpId {
        txn: TxnId {
            session: SessionId(1),
            seq: 1,
        },
        index: 0,
    };
    let write = Msg::Write {
        req: 1,
        key: k.clone(),
        update: Update::Assign("v".into()),
        id,
        deps: Some(Config::default().layout(2).zero()),
        max_ss: 0,
    };
    let out = call(&mut node, &|n, ctx| {
        n.handle_message(ctx, client, write.clone())
    });
    let lsn = out.iter().find_map(|o| match o {
        Output::Persist { lsn, .. } => Some(*lsn),
        _ => None,
    });
    let read = Msg::Read {
        req: 2,
        keys: vec![(k.clone(), ObjType::Lww)],
        attempt: 0,
        fallback: false,
    };
    let out = call(&mut node, &|n, ctx| {
        n.handle_message(ctx, client, read.clone())
    });
    assert!(
        out.is_empty(),
        "no answer while the write may be lost: {out:?}"
    );
    let lsn = lsn.expect("the write is persisted");
    let out = call(&mut node, &|n, ctx| n.handle_persisted(ctx, lsn));
    let read_value = out.iter().find_map(|o| match o {
        Output::Send {
            msg: Msg::ReadReply { req: 2, items },
            ..
        } => Some(items[0].obj.as_ref().map(|o| o.value())),
        _ => None,
    });
    let v = ObjValue::Lww(Some("v".into()));
    assert_eq!(read_value, Some(Ok(v)), "answered once durable: {out:?}");
}

/// A checkpoint plus the records after it rebuild what a full replay does (and what the
/// live node holds), from far fewer records.
#[test]
fn a_checkpoint_plus_the_later_records_recovers_what_a_full_replay_does() {
    let mut net = net(None);
    let keys: Vec<Key> = (0..12).flat_map(|i| [key_in(0, i), key_in(1, i)]).collect();
    for (i, pair) in keys.chunks(2).enumerate() {
        let txn = pair.iter().map(|k| set(k, &format!("a{i}"))).collect();
        net.txn(1 + (i as u64 % 2), txn);
    }
    net.run(50);
    let ck = net.nodes[0].checkpoint().expect("quiescent after run");
    let covered = net.records[0].len();
    for (i, k) in keys.iter().enumerate().step_by(3) {
        net.txn(2 - (i as u64 % 2), vec![set(k, &format!("b{i}"))]);
    }
    net.run(50);
    let mut compacted = vec![ck];
    compacted.extend_from_slice(&net.records[0][covered..]);
    let cfg = NodeConfig::new(NodeId(0), topo(), Params::default());
    let recover =
        |records: &[Vec<u8>]| Occult::recover(&cfg, &Config::default(), records).expect("recovers");
    let (full, from_ck) = (recover(&net.records[0]), recover(&compacted));
    let mut held = 0;
    for k in &keys {
        assert_eq!(full.version(k), from_ck.version(k), "key {k}");
        assert_eq!(
            full.version(k),
            net.nodes[0].version(k),
            "as the live node: {k}"
        );
        held += usize::from(full.version(k).is_some());
    }
    assert_eq!(held, keys.len(), "full replication: node 0 holds every key");
    assert!(from_ck.check_invariants().is_ok());
    assert!(compacted.len() < net.records[0].len() / 2, "it compacts");
}

/// State transfer (node/transfer.rs): both DCs write keys they master while cut from each
/// other past the silent-sibling horizon with no log kept for a silent slave, then heal
/// with what was in flight lost. Each slave gets its master's shards by state transfer
/// and the two nodes store the same versions; a restart replays the transfer into the
/// same state; without it (the `no-state-transfer` mutation) they stay diverged.
#[test]
fn a_slave_back_after_its_log_was_dropped_converges_by_state_transfer() {
    let cfg = Config {
        silent_sibling_ns: 100 * MS,
        silent_sibling_log_max: 0,
        transfer_retry_ns: 200 * MS,
        lag_grace_ns: 100 * MS,
        ..Config::default()
    };
    let keys: Vec<Key> = (0..4).flat_map(|i| [key_in(0, i), key_in(1, i)]).collect();
    let run = |mutation: Option<&str>| {
        let params = Params {
            mutation: mutation.map(str::to_string),
            ..Params::default()
        };
        let mut net: TestNet<Occult> = TestNet::with_config(topo(), params, &cfg, T);
        net.session(1, 0);
        net.session(2, 1);
        net.txn(1, vec![set(&key_in(0, 0), "before")]);
        net.run(100);
        net.hold = |topo, from, to, _| match (from, to) {
            (Addr::Node(a), Addr::Node(b)) => topo.dc_of(a) != topo.dc_of(b),
            _ => false,
        };
        for i in 0..12 {
            net.txn(1, vec![set(&key_in(0, i % 4), &format!("dc0-{i}"))]);
            net.txn(2, vec![set(&key_in(1, i % 4), &format!("dc1-{i}"))]);
            net.run(20);
        }
        net.run(400);
        net.drop_held();
        net.run(2000);
        net
    };
    let net = run(None);
    for k in &keys {
        let (v0, v1) = (net.nodes[0].version(k), net.nodes[1].version(k));
        assert!(v0.is_some(), "{k} written");
        assert_eq!(v0, v1, "the DCs converge on {k}");
    }
    net.check_invariants().expect("invariants");
    for n in 0..2u32 {
        let config = NodeConfig::new(NodeId(n), topo(), Params::default());
        let back = Occult::recover(&config, &cfg, &net.records[n as usize]).expect("recovers");
        for k in &keys {
            let want = net.nodes[n as usize].version(k);
            assert_eq!(back.version(k), want, "node {n} after a restart, {k}");
        }
    }
    let net = run(Some("no-state-transfer"));
    let diverged = keys
        .iter()
        .any(|k| net.nodes[0].version(k) != net.nodes[1].version(k));
    assert!(diverged, "without the transfer they stay diverged");
}

/// Each flavor's mutations parse to their own flag alone, and the node and session refuse
/// a name the flavor does not run, listing those it does.
#[test]
fn mutations_parse_to_one_flag_and_unknown_ones_are_refused() {
    use super::{Flavor, Mutation, MUTATIONS};
    use crate::mutation::{assert_constructors_refuse, assert_parses};
    assert_parses(MUTATIONS, |n| Mutation::parse(n).map(|m| m.active()));
    for flavor in [Flavor::Occult, Flavor::EventualMs] {
        assert_parses(flavor.mutations(), |n| {
            flavor.mutation(n).map(|m| m.active())
        });
    }
    assert!(Flavor::EventualMs.mutation(Some("no-read-check")).is_err());
    assert_constructors_refuse::<Occult>(topo());
    assert_constructors_refuse::<super::EventualMs>(topo());
}
