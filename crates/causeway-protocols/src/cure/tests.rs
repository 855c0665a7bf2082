//! Tests of the Cure machines: the waits of Alg. 1 and 2, prepare and commit times,
//! recovery, and the paper's examples (photo and comment, OR-set add/remove) driven
//! through a small in-test network with instant delivery and durable-at-once disks.

use super::msg::Msg;
use super::record::Record;
use super::Node;
use super::{Config, Cure};
use crate::kit::testnet::TestNet;
use crate::params::{NodeConfig, Params};
use crate::registry::Protocol;
use causeway_core::crdt::{ObjType, Update};
use causeway_core::{
    Addr, ClientSession, Ctx, DcId, Key, NodeId, ObjValue, OpId, Output, PartitionId, Request,
    Response, ServerNode, SessionId, Topology, TrueTime, TxnId, TxnKind, Vc,
};
use std::collections::VecDeque;

const T: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;

fn config(topo: &Topology, node: u32, mutation: Option<&str>) -> NodeConfig {
    NodeConfig::new(NodeId(node), topo.clone(), params(mutation))
}

fn params(mutation: Option<&str>) -> Params {
    Params {
        mutation: mutation.map(str::to_string),
        ..Params::default()
    }
}

/// The kit's in-memory network, running Cure.
type Net = TestNet<Cure>;

fn net(topo: Topology, mutation: Option<&str>) -> Net {
    TestNet::new(topo, params(mutation), T)
}

fn key_pair_on_two_partitions(topo: &Topology) -> (Key, Key) {
    let photo = Key::from("photo");
    let p = topo.partition_of(&photo);
    let comment = (0..100)
        .map(|i| Key::new(format!("comment{i}")))
        .find(|k| topo.partition_of(k) != p)
        .expect("some key lands elsewhere");
    (photo, comment)
}

fn read(net: &mut Net, s: u64, keys: &[(Key, ObjType)]) -> Vec<ObjValue> {
    let resp = net.txn(
        s,
        vec![Request::Read {
            keys: keys.to_vec(),
        }],
    );
    match &resp[1] {
        Response::Values(v) => v.iter().map(|r| r.value.clone()).collect(),
        other => panic!("read answered {other:?}"),
    }
}

pub(crate) fn assign(key: &Key, v: &str) -> Request {
    Request::Update {
        key: key.clone(),
        update: Update::Assign(v.as_bytes().to_vec()),
    }
}

/// The introduction of the Cure paper: Alice posts a photo, then a comment on it, at DC 0;
/// Bob at DC 1 must never see the comment without the photo, even when the photo's
/// partition replicates late.
#[test]
fn photo_then_comment_never_seen_out_of_order() {
    let topo = Topology::full(2, 2, 4);
    let mut net = net(topo.clone(), None);
    let (photo, comment) = key_pair_on_two_partitions(&topo);
    net.session(1, 0);
    net.session(2, 1);
    net.run(20);
    // Hold the photo partition's replication from DC 0 to DC 1.
    net.hold = |topo, from, _to, m| {
        let photo_p = topo.partition_of(&Key::from("photo"));
        matches!((from, m), (Addr::Node(n), Msg::Repl { partition, .. })
            if topo.dc_of(n) == DcId(0) && *partition == photo_p)
    };
    net.txn(1, vec![assign(&photo, "photo")]);
    net.txn(1, vec![assign(&comment, "nice photo!")]);
    let keys = [
        (photo.clone(), ObjType::Lww),
        (comment.clone(), ObjType::Lww),
    ];
    for _ in 0..30 {
        net.run(10);
        let v = read(&mut net, 2, &keys);
        assert_eq!(
            v[1],
            ObjValue::Lww(None),
            "comment visible before its photo: {v:?}"
        );
    }
    net.release();
    net.run(300);
    let v = read(&mut net, 2, &keys);
    assert_eq!(v[0], ObjValue::Lww(Some(b"photo".to_vec())));
    assert_eq!(v[1], ObjValue::Lww(Some(b"nice photo!".to_vec())));
    net.check_invariants().unwrap();
}

/// The OR-set example: both DCs hold {x}; DC 0 removes x while DC 1 concurrently adds x
/// again. Add wins: both DCs converge to {x}; a later remove that saw both adds empties it.
#[test]
fn or_set_concurrent_add_and_remove_converge_add_wins() {
    let topo = Topology::full(2, 1, 2);
    let mut net = net(topo, None);
    let set = Key::from("set");
    let x = b"x".to_vec();
    net.session(1, 0);
    net.session(2, 1);
    net.run(20);
    let add = |e: &Vec<u8>| Request::Update {
        key: Key::from("set"),
        update: Update::Add(e.clone()),
    };
    let remove = |e: &Vec<u8>| Request::Update {
        key: Key::from("set"),
        update: Update::Remove(e.clone()),
    };
    net.txn(1, vec![add(&x)]);
    net.run(300);
    let keys = [(set.clone(), ObjType::Set)];
    assert_eq!(
        read(&mut net, 2, &keys),
        vec![ObjValue::Set(vec![x.clone()])]
    );
    // Concurrent: neither sees the other's txn before committing.
    net.hold = |_, from, to, _| matches!((from, to), (Addr::Node(a), Addr::Node(b)) if a != b);
    net.txn(
        1,
        vec![
            Request::Read {
                keys: keys.to_vec(),
            },
            remove(&x),
        ],
    );
    net.txn(2, vec![add(&x)]);
    net.release();
    net.run(300);
    assert_eq!(
        read(&mut net, 1, &keys),
        vec![ObjValue::Set(vec![x.clone()])]
    );
    assert_eq!(
        read(&mut net, 2, &keys),
        vec![ObjValue::Set(vec![x.clone()])]
    );
    net.txn(
        1,
        vec![
            Request::Read {
                keys: keys.to_vec(),
            },
            remove(&x),
        ],
    );
    net.run(300);
    assert_eq!(read(&mut net, 2, &keys), vec![ObjValue::Set(vec![])]);
    assert_eq!(read(&mut net, 1, &keys), vec![ObjValue::Set(vec![])]);
}

/// A session told to skip the observed ids (`ClientSession::skip_observed`, the RESP
/// front end's) reads the same values with `observed` empty; one that keeps them gets the
/// ids of the adds and the assignment it saw. Over two partitions, so the coordinator
/// reads one of them remotely.
#[test]
fn a_session_that_skips_observed_ids_reads_the_same_values_without_them() {
    let topo = Topology::full(1, 2, 4);
    let mut net = net(topo.clone(), None);
    let (photo, set) = key_pair_on_two_partitions(&topo);
    net.session(1, 0);
    net.session(2, 0);
    net.session_call(2, |s, _| s.skip_observed());
    net.run(20);
    let add = |e: &str| Request::Update {
        key: set.clone(),
        update: Update::Add(e.as_bytes().to_vec()),
    };
    net.txn(1, vec![add("x"), add("y"), assign(&photo, "p")]);
    net.txn(2, vec![add("z")]);
    net.run(300);
    let keys = vec![(photo.clone(), ObjType::Lww), (set.clone(), ObjType::Set)];
    let answers =
        |net: &mut Net, s| match &net.txn(s, vec![Request::Read { keys: keys.clone() }])[1] {
            Response::Values(v) => v.clone(),
            other => panic!("read answered {other:?}"),
        };
    let (kept, skipped) = (answers(&mut net, 1), answers(&mut net, 2));
    let values =
        |v: &[causeway_core::ReadValue]| v.iter().map(|r| r.value.clone()).collect::<Vec<_>>();
    assert_eq!(values(&kept), values(&skipped));
    let members: Vec<Vec<u8>> = ["x", "y", "z"]
        .iter()
        .map(|m| m.as_bytes().to_vec())
        .collect();
    assert_eq!(values(&kept)[1], ObjValue::Set(members));
    assert_eq!(kept[0].observed.len(), 1, "the assignment read");
    assert_eq!(kept[1].observed.len(), 3, "one tag per add");
    assert!(skipped.iter().all(|r| r.observed.is_empty()), "{skipped:?}");
}

/// START waits until the GSS covers the session's past (Alg. 1 l.2-3).
#[test]
fn start_waits_for_the_gss_to_cover_the_session_past() {
    let topo = Topology::full(2, 1, 1);
    let mut net = net(topo, None);
    net.session(1, 1);
    net.run(20);
    let mut past = Vc::zero(2);
    past.set(0, net.clock + 100 * MS); // a DC 0 commit 100 ms in the future
    let token = postcard::to_allocvec(&past).expect("encodes");
    assert_eq!(
        net.request(1, Request::Attach { token }),
        Response::Attached
    );
    let begin = Request::Begin {
        kind: TxnKind::Causal,
        label: None,
    };
    assert!(matches!(net.request(1, begin), Response::Begun { .. }));
    // The START goes out with the first read, and waits there.
    let read = Request::Read {
        keys: vec![(Key::from("k"), ObjType::Lww)],
    };
    net.session_call(1, |s, ctx| s.submit(ctx, read));
    net.run(50);
    assert!(
        net.replies.get(&1).is_none_or(VecDeque::is_empty),
        "started before the GSS covered cvc"
    );
    net.run(100);
    let r = net.replies.get_mut(&1).and_then(VecDeque::pop_front);
    assert!(matches!(r, Some(Response::Values(_))), "got {r:?}");
}

fn txn_id(seq: u64) -> TxnId {
    TxnId {
        session: SessionId(9),
        seq,
    }
}

/// One node of a one-DC, one-partition cluster, started with its lease durable.
fn lone_node(mutation: Option<&str>, records: &[Vec<u8>], clock: u64) -> (Node, Vec<Vec<u8>>) {
    let topo = Topology::full(1, 1, 1);
    let mut node = Node::recover(
        config(&topo, 0, mutation),
        Config::default(),
        super::Flavor::Cure,
        records,
    )
    .expect("node");
    let mut ctx = Ctx::new(TrueTime(clock), clock);
    node.start(&mut ctx);
    let out = drain_persisting(&mut node, ctx, clock);
    let recs = out
        .iter()
        .filter_map(|o| match o {
            Output::Persist { record, .. } => Some(record.clone()),
            _ => None,
        })
        .collect();
    (node, recs)
}

/// Returns the outputs of `ctx`, acknowledging every persist at once (and what that sends).
fn drain_persisting(node: &mut Node, ctx: Ctx<Msg>, clock: u64) -> Vec<Output<Msg>> {
    let mut all = Vec::new();
    let mut pending = ctx.outputs;
    while !pending.is_empty() {
        let lsns: Vec<u64> = pending
            .iter()
            .filter_map(|o| match o {
                Output::Persist { lsn, .. } => Some(*lsn),
                _ => None,
            })
            .collect();
        all.extend(pending);
        pending = Vec::new();
        for lsn in lsns {
            let mut c = Ctx::new(TrueTime(clock), clock);
            node.handle_persisted(&mut c, lsn);
            pending.extend(c.outputs);
        }
    }
    all
}

fn call(node: &mut Node, clock: u64, msg: Msg) -> Vec<Output<Msg>> {
    let mut ctx = Ctx::new(TrueTime(clock), clock);
    node.handle_message(&mut ctx, Addr::Node(NodeId(0)), msg);
    drain_persisting(node, ctx, clock)
}

fn tick(node: &mut Node, clock: u64) -> Vec<Output<Msg>> {
    let mut ctx = Ctx::new(TrueTime(clock), clock);
    node.handle_timeout(&mut ctx);
    drain_persisting(node, ctx, clock)
}

fn sent(outs: &[Output<Msg>]) -> Vec<Msg> {
    outs.iter()
        .filter_map(|o| match o {
            Output::Send { msg: m, .. } => Some(m.clone()),
            _ => None,
        })
        .collect()
}

fn prepare_msg(seq: u64, svc_d: u64, key: &Key, value: &str) -> Msg {
    let txn = txn_id(seq);
    let update = Update::Assign(value.as_bytes().to_vec());
    let updates = vec![(key.clone(), update, OpId { txn, index: 0 })];
    Msg::Prepare {
        txn,
        partition: PartitionId(0),
        svc: Vc {
            dcs: vec![svc_d],
            extra: vec![],
        },
        updates,
        one_phase: false,
    }
}

fn vote(outs: &[Output<Msg>]) -> Option<u64> {
    sent(outs).into_iter().find_map(|m| match m {
        Msg::Prepared { result: Ok(t), .. } => Some(t),
        _ => None,
    })
}

/// PREPARE waits until svc[d] <= Clock (Alg. 2 l.7), not longer, and votes a time above
/// the snapshot (l.8-11): the time is issued above the clock reading.
#[test]
fn prepare_waits_for_the_clock_and_votes_above_the_snapshot() {
    let (mut node, _) = lone_node(None, &[], T);
    let svc_d = T + 5 * MS;
    let outs = call(&mut node, T, prepare_msg(1, svc_d, &Key::from("a"), "v"));
    assert_eq!(vote(&outs), None, "voted before the clock reached svc[d]");
    let outs = tick(&mut node, svc_d - 1);
    assert_eq!(vote(&outs), None, "voted with the clock below svc[d]");
    let outs = tick(&mut node, svc_d);
    let t = vote(&outs).expect("votes once the clock reached svc[d]");
    assert!(t > svc_d, "prepare time {t} not above svc[d] {svc_d}");
}

fn read_msg(svc_d: u64, key: &Key) -> Msg {
    Msg::ReadKeys {
        rid: crate::kit::txn::ReadId {
            txn: txn_id(7),
            req: 1,
        },
        partition: PartitionId(0),
        svc: Vc {
            dcs: vec![svc_d],
            extra: vec![],
        },
        keys: vec![(key.clone(), ObjType::Lww)],
    }
}

fn read_reply(outs: &[Output<Msg>]) -> Option<ObjValue> {
    sent(outs).into_iter().find_map(|m| match m {
        Msg::ReadReply { objects, .. } => Some(objects[0].1.clone().expect("read ok").value()),
        _ => None,
    })
}

/// READ_KEY waits while a txn prepared at or below svc[d] may still commit there
/// (Alg. 2 l.2); the `no-read-wait` mutation answers at once and misses the commit.
#[test]
fn read_waits_for_prepared_txns_below_its_snapshot() {
    for (mutation, waits) in [(None, true), (Some("no-read-wait"), false)] {
        let key = Key::from("a");
        let (mut node, _) = lone_node(mutation, &[], T);
        let t = vote(&call(&mut node, T + MS, prepare_msg(1, T, &key, "v"))).expect("vote");
        let outs = call(&mut node, T + 2 * MS, read_msg(t + 10, &key));
        assert_eq!(read_reply(&outs).is_none(), waits, "mutation {mutation:?}");
        let ct = Vc {
            dcs: vec![t],
            extra: vec![],
        };
        let outs = call(
            &mut node,
            T + 3 * MS,
            Msg::CommitTxn {
                txn: txn_id(1),
                partition: PartitionId(0),
                ct,
            },
        );
        if waits {
            assert_eq!(read_reply(&outs), Some(ObjValue::Lww(Some(b"v".to_vec()))));
        }
    }
}

/// The commit time is the max of the prepare times and ct = svc with the local entry
/// replaced (Alg. 1 l.31-33): checked on the persisted records of a two-partition txn
/// (one-phase and one-node commit off, so that every participant persists its prepare
/// time; the coordinator's decision is the same code with them on).
#[test]
fn commit_time_is_the_max_prepare_time() {
    let topo = Topology::full(1, 2, 2);
    let cfg = Config {
        one_phase: false,
        ..Config::default()
    };
    let mut net = Net::with_config(topo.clone(), params(None), &cfg, T);
    let (a, b) = key_pair_on_two_partitions(&topo);
    net.session(1, 0);
    net.run(20);
    net.clock += 0; // both nodes share the clock; prepare times still differ (issue order)
    let r = net.txn(1, vec![assign(&a, "1"), assign(&b, "2")]);
    assert_eq!(r.last(), Some(&Response::Committed));
    let recs: Vec<Record> = net
        .records
        .iter()
        .flatten()
        .map(|r| Record::decode(0, r).expect("decodes"))
        .collect();
    let preps: Vec<u64> = recs
        .iter()
        .filter_map(|r| match r {
            Record::Prepare { prep_time, .. } => Some(*prep_time),
            _ => None,
        })
        .collect();
    let ct = recs
        .iter()
        .find_map(|r| match r {
            Record::Decision { ct, .. } => Some(ct.clone()),
            _ => None,
        })
        .expect("a decision");
    assert_eq!(preps.len(), 2);
    assert_eq!(ct.get(0), *preps.iter().max().expect("two"));
    assert_eq!(net.sessions[&1].client.cvc(), &ct);
}

/// After a restart whose clock went back, the node never issues a timestamp at or below
/// one it issued or claimed before the crash.
#[test]
fn recovery_never_reissues_a_timestamp() {
    let key = Key::from("a");
    let (mut node, mut records) = lone_node(None, &[], T);
    let outs = call(&mut node, T + MS, prepare_msg(1, T, &key, "v"));
    let first = vote(&outs).expect("vote");
    records.extend(outs.iter().filter_map(|o| match o {
        Output::Persist { record, .. } => Some(record.clone()),
        _ => None,
    }));
    // Restart with a clock 500 ms behind: the lease and the prepare record set the floor.
    let back = T - 500 * MS;
    let (mut node, _) = lone_node(None, &records, back);
    let recovered = &node.parts[&PartitionId(0)].prepared;
    assert!(
        recovered.contains_key(&txn_id(1)),
        "the prepared txn survives the crash"
    );
    let second = vote(&call(&mut node, back + MS, prepare_msg(2, 0, &key, "w"))).expect("vote");
    assert!(
        second > first && second > T + super::LEASE_NS / 2,
        "reissued {second} <= {first}"
    );
}

/// A read whose snapshot was folded away ("snapshot too old") ends the transaction at the
/// coordinator and at the session: the session is idle again, not stuck inside it.
#[test]
fn a_snapshot_too_old_leaves_the_session_idle() {
    let topo = Topology::full(1, 1, 1);
    let mut net = net(topo, None);
    net.session(1, 0);
    net.session(2, 0);
    net.run(20);
    let k = Key::from("k");
    let begin = Request::Begin {
        kind: TxnKind::Causal,
        label: None,
    };
    let read = Request::Read {
        keys: vec![(k.clone(), ObjType::Lww)],
    };
    assert!(matches!(
        net.request(1, begin.clone()),
        Response::Begun { .. }
    ));
    // The first read fixes the snapshot.
    assert!(matches!(net.request(1, read.clone()), Response::Values(_)));
    let over = causeway_core::limits::VERSIONS_PER_KEY_MAX + 10;
    for i in 0..over {
        net.txn(2, vec![assign(&k, &format!("v{i}"))]);
    }
    net.run(20); // GC folds past the limit, above session 1's snapshot
    match net.request(1, read.clone()) {
        Response::Aborted { reason } => assert!(reason.contains("too old"), "{reason}"),
        other => panic!("an old snapshot read answered {other:?}"),
    }
    assert!(matches!(net.request(1, begin), Response::Begun { .. }));
    assert!(matches!(net.request(1, read), Response::Values(_)));
    net.check_invariants().unwrap();
}

/// The index of the node of DC 0 that owns `k`'s partition (into `Net::records`).
fn node_index(topo: &Topology, k: &Key) -> usize {
    topo.node_of(DcId(0), topo.partition_of(k)).0 as usize
}

/// The kinds of commit records node `n` persisted, in order.
fn commit_records(net: &Net, n: usize) -> Vec<&'static str> {
    net.records[n]
        .iter()
        .enumerate()
        .map(|(i, b)| match Record::decode(i, b).expect("record") {
            Record::OnePhase { .. } => "one-phase",
            Record::NodeCommit { .. } => "node-commit",
            Record::Prepare { .. } => "prepare",
            Record::Decision { .. } => "decision",
            Record::Commit { .. } => "commit",
            _ => "other",
        })
        .filter(|k| *k != "other")
        .collect()
}

/// Recovers node 0 of a one-node DC from its first `upto` records and reads `keys` at
/// the newest snapshot.
fn recovered_values(net: &Net, topo: &Topology, upto: usize, keys: &[&Key]) -> Vec<ObjValue> {
    let cfg = config(topo, 0, None);
    let flavor = super::Flavor::Cure;
    let records = &net.records[0][..upto];
    let node = Node::recover(cfg, Config::default(), flavor, records).expect("node");
    assert!(node.check_invariants().is_ok());
    let all = Vc {
        dcs: vec![u64::MAX],
        extra: vec![],
    };
    keys.iter()
        .map(|k| {
            let part = &node.parts[&topo.partition_of(k)];
            let got = part.read(&all, vec![((*k).clone(), ObjType::Lww)]);
            got[0].1.as_ref().expect("readable").value()
        })
        .collect()
}

/// The index of the first record of node 0 matching `kind`, plus one.
fn records_through(net: &Net, kind: fn(&Record) -> bool) -> usize {
    let records = &net.records[0];
    let at = records.iter().enumerate().position(|(i, b)| {
        let r = Record::decode(i, b).expect("record");
        kind(&r)
    });
    at.expect("such a record") + 1
}

/// A single-partition txn commits in one phase: one durable record (prepare and commit
/// together), no coordinator decision. The record alone restores the write after a
/// restart.
#[test]
fn single_partition_txns_commit_in_one_phase_with_one_record() {
    let topo = Topology::full(1, 1, 4);
    let mut net = net(topo.clone(), None);
    let (photo, _) = key_pair_on_two_partitions(&topo);
    net.session(1, 0);
    net.run(20);
    net.txn(1, vec![assign(&photo, "p1")]);
    assert_eq!(commit_records(&net, 0), vec!["one-phase"]);
    let upto = records_through(&net, |r| matches!(r, Record::OnePhase { .. }));
    let got = recovered_values(&net, &topo, upto, &[&photo]);
    assert_eq!(got, vec![ObjValue::Lww(Some(b"p1".to_vec()))]);
}

/// A txn over two partitions of one node commits with one record holding both
/// partitions' effects (one-node commit): no prepare, decision or commit record. Replaying
/// the records up to it restores both writes; replaying those before it, neither.
#[test]
fn a_txn_over_partitions_of_one_node_commits_with_one_record() {
    let topo = Topology::full(1, 1, 4);
    let mut net = net(topo.clone(), None);
    let (photo, comment) = key_pair_on_two_partitions(&topo);
    net.session(1, 0);
    net.run(20);
    net.txn(1, vec![assign(&photo, "p1")]);
    net.txn(1, vec![assign(&photo, "p2"), assign(&comment, "c")]);
    assert_eq!(commit_records(&net, 0), vec!["one-phase", "node-commit"]);
    let upto = records_through(&net, |r| matches!(r, Record::NodeCommit { .. }));
    let both = recovered_values(&net, &topo, upto, &[&photo, &comment]);
    let lww = |v: &str| ObjValue::Lww(Some(v.as_bytes().to_vec()));
    assert_eq!(both, vec![lww("p2"), lww("c")]);
    let before = recovered_values(&net, &topo, upto - 1, &[&photo, &comment]);
    assert_eq!(before, vec![lww("p1"), ObjValue::Lww(None)]);
    net.check_invariants().unwrap();
}

/// A txn over partitions of two nodes runs 2PC: a prepare record at the participant on
/// the other node, and at the coordinator one record holding its own partition's
/// effects with the decision; the other node's commit record follows it.
#[test]
fn a_txn_over_two_nodes_runs_two_phase_commit() {
    let topo = Topology::full(1, 2, 4);
    let mut net = net(topo.clone(), None);
    let node_of = |k: &Key| node_index(&topo, k);
    let photo = Key::from("photo");
    let comment = (0..100)
        .map(|i| Key::new(format!("comment{i}")))
        .find(|k| node_of(k) != node_of(&photo))
        .expect("some key lands on the other node");
    net.session(1, 0);
    net.run(20);
    net.txn(1, vec![assign(&photo, "p"), assign(&comment, "c")]);
    net.run(20);
    let coord = node_of(&photo);
    assert_eq!(commit_records(&net, coord), vec!["node-commit"]);
    assert_eq!(commit_records(&net, 1 - coord), vec!["prepare", "commit"]);
    let records = &net.records[coord];
    let decided =
        records
            .iter()
            .enumerate()
            .find_map(|(i, b)| match Record::decode(i, b).expect("record") {
                Record::NodeCommit {
                    parts,
                    participants,
                    ..
                } => Some((parts.len(), participants)),
                _ => None,
            });
    let comment_at = (
        topo.partition_of(&comment),
        NodeId(node_of(&comment) as u32),
    );
    assert_eq!(decided, Some((1, vec![comment_at])));
    net.check_invariants().unwrap();
}

/// A txn that starts with its commit is coordinated by the node owning the most of its
/// partitions (the first key's on a tie), whose share commits with the decision: with
/// one key on one node and two partitions of the other, the other coordinates.
#[test]
fn the_node_with_most_of_a_commits_partitions_coordinates_it() {
    let topo = Topology::full(1, 2, 4);
    let mut net = net(topo.clone(), None);
    let node_of = |k: &Key| node_index(&topo, k);
    let first = Key::from("first");
    let keys: Vec<Key> = (0..200).map(|i| Key::new(format!("k{i}"))).collect();
    let other = keys
        .iter()
        .find(|k| node_of(k) != node_of(&first))
        .expect("a key");
    let second = keys
        .iter()
        .find(|k| node_of(k) == node_of(other) && topo.partition_of(k) != topo.partition_of(other))
        .expect("a key of another partition of that node");
    net.session(1, 0);
    net.run(20);
    let updates = vec![assign(&first, "f"), assign(other, "o"), assign(second, "s")];
    assert_eq!(net.txn(1, updates).last(), Some(&Response::Committed));
    net.run(20);
    assert_eq!(commit_records(&net, node_of(other)), vec!["node-commit"]);
    assert_eq!(
        commit_records(&net, node_of(&first)),
        vec!["prepare", "commit"]
    );
    // A tie (one partition on each node): the first key's node coordinates.
    net.txn(1, vec![assign(&first, "f2"), assign(other, "o2")]);
    net.run(20);
    assert_eq!(
        commit_records(&net, node_of(&first)),
        vec!["prepare", "commit", "node-commit"]
    );
    net.check_invariants().unwrap();
}

/// Every key's value at the newest snapshot, per hosted partition.
fn everything(node: &Node, keys: &[Key]) -> Vec<String> {
    everything_as(node, keys, ObjType::Lww)
}

/// [`everything`], each key read as an object of type `ty`.
fn everything_as(node: &Node, keys: &[Key], ty: ObjType) -> Vec<String> {
    let all = Vc {
        dcs: vec![u64::MAX; node.topo.dcs as usize],
        extra: vec![],
    };
    keys.iter()
        .filter_map(|k| {
            let part = node.parts.get(&node.topo.partition_of(k))?;
            let got = part.read(&all, vec![(k.clone(), ty)]);
            Some(format!(
                "{k:?} = {:?}",
                got[0].1.as_ref().map(|o| o.value())
            ))
        })
        .collect()
}

/// A checkpoint stands for the records before it: recovering from it plus the records
/// after it gives the same values, received streams and replication log as replaying
/// everything; it is refused while records are in flight.
#[test]
fn a_checkpoint_plus_the_later_records_recovers_what_a_full_replay_does() {
    let topo = Topology::full(2, 1, 4);
    let mut net = net(topo.clone(), None);
    let (photo, comment) = key_pair_on_two_partitions(&topo);
    let keys: Vec<Key> = (0..20).map(|i| Key::new(format!("k{i}"))).collect();
    net.session(1, 0);
    net.session(2, 1);
    net.run(20);
    for (i, k) in keys.iter().enumerate() {
        net.txn(1 + (i as u64 % 2), vec![assign(k, &format!("a{i}"))]);
    }
    net.txn(1, vec![assign(&photo, "p1"), assign(&comment, "c1")]);
    net.run(50);
    let ck = net.nodes[0].checkpoint().expect("quiescent after run");
    let covered = net.records[0].len();
    for (i, k) in keys.iter().enumerate().step_by(3) {
        net.txn(2 - (i as u64 % 2), vec![assign(k, &format!("b{i}"))]);
    }
    // A write from DC 1 on every partition after the checkpoint: a received stream a
    // replay rebuilds ends at the last remote record, where the live node's (and so the
    // checkpoint's) may have moved on with heartbeats, which are not logged.
    for p in 0..topo.partitions {
        let k = keys.iter().find(|k| topo.partition_of(k).0 == p);
        net.txn(2, vec![assign(k.expect("a key per partition"), "c")]);
    }
    net.txn(2, vec![assign(&photo, "p2"), assign(&comment, "c2")]);
    net.run(50);
    let mut compacted = vec![ck];
    compacted.extend_from_slice(&net.records[0][covered..]);
    let recover = |records: &[Vec<u8>]| {
        let cfg = config(&topo, 0, None);
        Node::recover(cfg, Config::default(), super::Flavor::Cure, records).expect("recovers")
    };
    let full = recover(&net.records[0]);
    let from_ck = recover(&compacted);
    let mut all_keys = keys.clone();
    all_keys.extend([photo, comment]);
    let values = everything(&full, &all_keys);
    assert_eq!(values.len(), all_keys.len());
    assert_eq!(values, everything(&from_ck, &all_keys));
    assert_eq!(
        values,
        everything(&net.nodes[0], &all_keys),
        "as the live node"
    );
    for (p, part) in &full.parts {
        let other = &from_ck.parts[p];
        assert_eq!(part.received, other.received, "{p:?}");
        assert_eq!(part.pvc.dcs[1], other.pvc.dcs[1], "{p:?}");
        assert_eq!(part.prepared.len(), other.prepared.len(), "{p:?}");
    }
    assert!(from_ck.check_invariants().is_ok());
    assert!(compacted.len() < net.records[0].len() / 2, "it compacts");

    // With a record in flight there is no checkpoint.
    let key = Key::from("a");
    let (mut node, _) = lone_node(None, &[], T);
    let mut ctx = Ctx::new(TrueTime(T + MS), T + MS);
    node.handle_message(
        &mut ctx,
        Addr::Node(NodeId(0)),
        prepare_msg(1, T, &key, "v"),
    );
    assert!(node.checkpoint().is_none(), "a prepare record is in flight");
    drain_persisting(&mut node, ctx, T + MS);
    assert!(node.checkpoint().is_some());
}

/// The `Remote` records among `outs`: (upto, txns).
fn remote_records(outs: &[Output<Msg>]) -> Vec<(u64, usize)> {
    outs.iter()
        .filter_map(|o| match o {
            Output::Persist { record, .. } => match Record::decode(0, record) {
                Ok(Record::Remote { upto, txns, .. }) => Some((upto, txns.len())),
                Ok(Record::RemoteTxns { upto, txns, .. }) => Some((upto, txns.0.len())),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// Node 0 of `topo`, new (no records), started at `T` with its startup records durable.
fn fresh_node(topo: &Topology) -> Node {
    let cfg = config(topo, 0, None);
    let flavor = super::Flavor::Cure;
    let mut node = Node::recover(cfg, Config::default(), flavor, &[]).expect("node");
    let mut ctx = Ctx::new(TrueTime(T), T);
    node.start(&mut ctx);
    drain_persisting(&mut node, ctx, T);
    node
}

/// A restarted node's streams are back at their last durable records (heartbeats write
/// none), below the GSS the DC's other node gives it; adopting that GSS raises each
/// partition's remote `pvc` and stream mark to it (every txn below it is durable here), so
/// the GSS stays at or below `pvc` and the stream goes on from the GSS.
#[test]
fn a_restarted_node_raises_its_remote_pvc_to_the_gss_it_adopts() {
    let mut node = fresh_node(&Topology::full(2, 2, 2));
    assert!(!node.parts.is_empty());
    let gss = Vc {
        dcs: vec![T, T - 5 * MS],
        extra: Vec::new(),
    };
    let stable = Msg::Stable {
        pvc: Some(gss.clone()),
        gss: gss.clone(),
        oldest: gss.clone(),
    };
    let mut ctx = Ctx::new(TrueTime(T + MS), T + MS);
    node.handle_message(&mut ctx, Addr::Node(NodeId(1)), stable);
    assert_eq!(node.gss.stable().get(1), T - 5 * MS, "adopted");
    for part in node.parts.values() {
        assert_eq!(part.pvc.get(1), T - 5 * MS);
        assert_eq!(part.received.have(DcId(1)), T - 5 * MS);
    }
    assert_eq!(node.check_partition_invariants(), Ok(()));
}

/// A heartbeat writes no record: `pvc[origin]` moves at once when nothing is in flight, and
/// otherwise once the records before it (the stream's earlier txns) are durable. A piece
/// with txns moves it only once its own record is durable.
#[test]
fn a_heartbeat_writes_nothing_and_pvc_waits_only_for_earlier_records() {
    let mut node = fresh_node(&Topology::full(2, 1, 1));
    let piece = |from: u64, upto: u64, txns: Vec<super::msg::ReplTxn>| Msg::Repl {
        partition: PartitionId(0),
        restarted: false,
        acks: Vc::zero(2),
        stream: Some(super::wire::SharedStream::new(super::msg::Stream {
            origin: DcId(1),
            from,
            upto,
            txns,
        })),
    };
    let pvc_1 = |node: &Node| node.parts[&PartitionId(0)].pvc.get(1);
    let mut ctx = Ctx::new(TrueTime(T + MS), T + MS);
    node.handle_message(&mut ctx, Addr::Node(NodeId(1)), piece(0, T, Vec::new()));
    assert!(remote_records(&ctx.outputs).is_empty(), "no record");
    assert_eq!(pvc_1(&node), T, "nothing in flight: pvc moves at once");
    // A txn of the stream: written, and pvc waits for it.
    let txn = txn_id(1);
    let op = causeway_core::crdt::Op {
        id: OpId { txn, index: 0 },
        ts: causeway_core::crdt::ArbTs::PENDING,
        effect: causeway_core::crdt::Effect::Increment(1),
    };
    let ct = Vc {
        dcs: vec![0, T + MS],
        extra: Vec::new(),
    };
    let ops = vec![(Key::from("k"), op)];
    let written = vec![super::msg::ReplTxn {
        txn,
        ct,
        ops: ops.into(),
    }];
    let mut ctx = Ctx::new(TrueTime(T + MS), T + MS);
    node.handle_message(&mut ctx, Addr::Node(NodeId(1)), piece(T, T + MS, written));
    assert_eq!(remote_records(&ctx.outputs), vec![(T + MS, 1)]);
    assert_eq!(pvc_1(&node), T, "the txn's record is not durable yet");
    // A heartbeat behind it waits for that record, and writes none of its own.
    let mut later = Ctx::new(TrueTime(T + 2 * MS), T + 2 * MS);
    let beat = piece(T + MS, T + 2 * MS, Vec::new());
    node.handle_message(&mut later, Addr::Node(NodeId(1)), beat);
    assert!(remote_records(&later.outputs).is_empty());
    assert_eq!(pvc_1(&node), T, "an earlier record is in flight");
    drain_persisting(&mut node, ctx, T + 2 * MS);
    assert_eq!(pvc_1(&node), T + 2 * MS, "durable: both marks apply");
    let outs = tick(&mut node, T + 20 * MS);
    assert!(
        remote_records(&outs).is_empty(),
        "a tick writes no heartbeat"
    );
}

/// A piece that came over the wire and is taken whole is written as the bytes it came in
/// (`Record::RemotePiece`), and a restart from that record has what the piece brought; a
/// piece of which some txns were had already is written as its new txns (`RemoteTxns`).
/// Under `piece-record-whole` that piece is written whole too, and the restart applies
/// the txn it had twice.
#[test]
fn a_piece_taken_whole_is_written_as_it_came_and_replays_to_the_same_store() {
    let (live, recovered, tags) = receive_pieces_and_restart(None);
    assert_eq!(
        tags,
        vec![15, 14],
        "RemotePiece, then RemoteTxns of the new txn"
    );
    assert_eq!(live, vec!["a = Ok(Counter(5))", "b = Ok(Counter(2))"]);
    assert_eq!(recovered, live);
    let (live, recovered, tags) = receive_pieces_and_restart(Some("piece-record-whole"));
    assert_eq!(tags, vec![15, 15], "the rewound piece written whole");
    assert_eq!(live, vec!["a = Ok(Counter(5))", "b = Ok(Counter(2))"]);
    assert_eq!(recovered[1], "b = Ok(Counter(4))", "txn 2 applied twice");
}

/// A node of a 2-DC, one-partition cluster gets, over the wire, a piece of DC 1's txns 1
/// (a += 1) and 2 (b += 2), then a rewound piece of txns 2 and 4 (a += 4); returns its
/// counters, those of a node recovered from its records, and its records' tags.
fn receive_pieces_and_restart(mutation: Option<&str>) -> (Vec<String>, Vec<String>, Vec<u8>) {
    let topo = Topology::full(2, 1, 1);
    let cfg = || config(&topo, 0, mutation);
    let mut node = Node::recover(cfg(), Config::default(), super::Flavor::Cure, &[]).unwrap();
    let mut ctx = Ctx::new(TrueTime(T), T);
    node.start(&mut ctx);
    let mut records = Vec::new();
    let mut tags = Vec::new();
    let started = drain_persisting(&mut node, ctx, T);
    let mut persisted = |outs: &[Output<Msg>], tagged: bool| {
        for o in outs {
            if let Output::Persist { record, .. } = o {
                records.push(record.clone());
                if tagged {
                    tags.push(record[0]);
                }
            }
        }
    };
    persisted(&started, false);
    let txn = repl_increment;
    let over_wire = repl_over_wire;
    let pieces = [
        (0, T + 2 * MS, vec![txn(1, "a", 1), txn(2, "b", 2)]),
        (T, T + 4 * MS, vec![txn(2, "b", 2), txn(4, "a", 4)]),
    ];
    for (i, (from, upto, txns)) in pieces.into_iter().enumerate() {
        let clock = T + (3 + 2 * i as u64) * MS;
        let ctx = call_ctx(&mut node, clock, over_wire(from, upto, txns));
        persisted(&drain_persisting(&mut node, ctx, clock), true);
    }
    let keys = [Key::from("a"), Key::from("b")];
    let back = Node::recover(cfg(), Config::default(), super::Flavor::Cure, &records).unwrap();
    assert_eq!(
        back.parts[&PartitionId(0)].received.have(DcId(1)),
        T + 4 * MS
    );
    let counters = |n: &Node| everything_as(n, &keys, ObjType::Counter);
    (counters(&node), counters(&back), tags)
}

/// DC 1's txn `seq` (at `T + seq` ms) that increments `key` by `by`, as replication ships it.
fn repl_increment(seq: u64, key: &str, by: i64) -> super::msg::ReplTxn {
    use causeway_core::crdt::{Effect, Op};
    let ct = Vc {
        dcs: vec![0, T + seq * MS],
        extra: Vec::new(),
    };
    let id = OpId {
        txn: txn_id(seq),
        index: 0,
    };
    let ts = super::wire::commit_ts(&ct);
    let op = Op {
        id,
        ts,
        effect: Effect::Increment(by),
    };
    super::msg::ReplTxn {
        txn: txn_id(seq),
        ct,
        ops: vec![(Key::from(key), op)].into(),
    }
}

/// A piece of DC 1's stream of partition 0 through the wire, as the runtime delivers it.
fn repl_over_wire(from: u64, upto: u64, txns: Vec<super::msg::ReplTxn>) -> Msg {
    let msg = crate::Msg::Cure(Msg::Repl {
        partition: PartitionId(0),
        restarted: false,
        acks: Vc::zero(2),
        stream: Some(super::wire::SharedStream::new(super::msg::Stream {
            origin: DcId(1),
            from,
            upto,
            txns,
        })),
    });
    let bytes = postcard::to_allocvec(&msg).expect("encodes");
    match postcard::from_bytes(&bytes).expect("decodes") {
        crate::Msg::Cure(m) => m,
        other => panic!("{other:?}"),
    }
}

/// The outputs' context of `msg` from the sibling node 1, handled at `clock`.
fn call_ctx(node: &mut Node, clock: u64, msg: Msg) -> Ctx<Msg> {
    let mut ctx = Ctx::new(TrueTime(clock), clock);
    node.handle_message(&mut ctx, Addr::Node(NodeId(1)), msg);
    ctx
}

/// A read's reply that reaches the coordinator's next incarnation (its partition parked
/// the read across the restart) answers no read there: reads are named by txn and request
/// (`kit::txn::ReadId`), where a counter the restart set back to 1 took the stale reply
/// as the answer to the new incarnation's first read, at the old snapshot (the simulator
/// found it: `causeway sim --protocol cure --faults all --clients-per-dc 12 --seeds 2026`,
/// a reply of one key answering a read of another).
#[test]
fn a_read_reply_meant_for_a_crashed_coordinator_answers_nothing_after_its_restart() {
    let topo = Topology::full(1, 2, 4);
    let mut net = net(topo.clone(), None);
    let photo = Key::from("photo");
    let other = |k: &Key| node_index(&topo, k) != node_index(&topo, &photo);
    let comment = (0..100)
        .map(|i| Key::new(format!("comment{i}")))
        .find(other)
        .expect("some key lands on the other node");
    let coord = node_index(&topo, &photo); // the first key's node coordinates
    let keys = vec![
        (photo.clone(), ObjType::Lww),
        (comment.clone(), ObjType::Lww),
    ];
    let read_both = Request::Read { keys };
    net.session(1, 0);
    net.session(2, 0);
    net.run(20);
    net.hold = |_, _, _, m| matches!(m, Msg::ReadReply { .. });
    let begin = Request::Begin {
        kind: TxnKind::Causal,
        label: None,
    };
    assert!(matches!(
        net.request(1, begin.clone()),
        Response::Begun { .. }
    ));
    net.session_call(1, |s, ctx| s.submit(ctx, read_both.clone()));
    net.deliver_all();
    // The coordinator restarts from its records; the comment is written after that read.
    let config = config(&topo, coord as u32, None);
    net.nodes[coord] = Cure::recover(&config, &Config::default(), &net.records[coord])
        .expect("the coordinator recovers");
    net.node_call(coord, |m, ctx| m.start(ctx));
    net.run(20);
    net.txn(2, vec![assign(&comment, "c")]);
    net.run(20);
    // Session 2 reads both at the new incarnation: the old reply arrives first.
    assert!(matches!(net.request(2, begin), Response::Begun { .. }));
    net.session_call(2, |s, ctx| s.submit(ctx, read_both));
    net.deliver_all();
    net.release();
    // The new incarnation's clock starts past its lease: the other partition serves the
    // read once its own clock gets there.
    net.run(500);
    let values = match net.take_reply(2) {
        Some(Response::Values(v)) => v.into_iter().map(|r| r.value).collect::<Vec<_>>(),
        other => panic!("the read answered {other:?}"),
    };
    let c = ObjValue::Lww(Some(b"c".to_vec()));
    assert_eq!(values, vec![ObjValue::Lww(None), c]);
    net.check_invariants().unwrap();
}

/// Each flavor's mutations parse to their own flag alone (UniStore's, which Cure does not
/// run, included), and every protocol on this engine refuses a name it does not know at
/// node and session construction, listing those it does.
#[test]
fn mutations_parse_to_one_flag_and_unknown_ones_are_refused() {
    use super::{Flavor, Mutation, MUTATIONS, UNISTORE_MUTATIONS};
    use crate::mutation::{assert_constructors_refuse, assert_parses};
    for flavor in [Flavor::Cure, Flavor::CureFt] {
        assert_parses(flavor.mutations(), |n| {
            flavor.mutation(n).map(|m| m.active())
        });
    }
    assert_parses(UNISTORE_MUTATIONS, |n| {
        Mutation::parse_among(n, UNISTORE_MUTATIONS, "unistore").map(|m| m.active())
    });
    assert_eq!(Flavor::CureFt.mutations(), MUTATIONS);
    assert!(Flavor::Cure.mutation(Some("no-forwarding")).is_err());
    assert!(Mutation::parse(None).unwrap().active().is_empty());
    for name in MUTATIONS.iter().chain(UNISTORE_MUTATIONS) {
        assert_eq!(Mutation::parse(Some(name)).unwrap().active(), [*name]);
    }
    let topo = Topology::full(3, 1, 1);
    assert_constructors_refuse::<Cure>(topo.clone());
    assert_constructors_refuse::<crate::cureft::CureFt>(topo.clone());
    assert_constructors_refuse::<crate::unistore::UniStore>(topo.clone());
    assert_constructors_refuse::<crate::unistore::StrongBaseline>(topo.clone());
    assert_constructors_refuse::<crate::unistore::RedBlue>(topo);
}
