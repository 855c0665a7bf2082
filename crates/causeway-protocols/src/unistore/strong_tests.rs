//! Tests of UniStore's strong transactions (§6, Alg. 3) on the kit's test network:
//! conflicting strong txns race and exactly one commits, a committed strong txn is
//! delivered to every DC, the leader DC's failure does not stop certification, and the
//! uniform barrier's role in Figure 2 (the `no-uniform-barrier` mutation).

use crate::cure::msg::Msg;
use crate::kit::testnet::TestNet;
use crate::params::Params;
use crate::unistore::{RedBlue, UniStore};
use causeway_core::crdt::{ObjType, Update};
use causeway_core::{
    Addr, ClientSession, DcId, Key, ObjValue, Request, Response, Topology, TxnKind,
};
use std::collections::VecDeque;

const T: u64 = 1_000_000_000;

fn params(mutation: Option<&str>) -> Params {
    Params {
        mutation: mutation.map(str::to_string),
        ..Params::default()
    }
}

fn net(mutation: Option<&str>) -> TestNet<UniStore> {
    TestNet::new(Topology::full(3, 1, 2), params(mutation), T)
}

fn read(key: &str) -> Request {
    Request::Read {
        keys: vec![(Key::from(key), ObjType::Lww)],
    }
}

fn set(key: &str, v: &str) -> Request {
    Request::Update {
        key: Key::from(key),
        update: Update::Assign(v.as_bytes().to_vec()),
    }
}

fn submit(net: &mut TestNet<UniStore>, s: u64, req: Request) {
    net.session_call(s, |m, ctx| m.submit(ctx, req));
}

fn answer(net: &mut TestNet<UniStore>, s: u64) -> Option<Response> {
    net.replies.get_mut(&s).and_then(VecDeque::pop_front)
}

/// BEGIN STRONG, read `key`, write it: a strong read-modify-write left uncommitted.
fn strong_rmw(net: &mut TestNet<UniStore>, s: u64, key: &str, v: &str) {
    let begin = Request::Begin {
        kind: TxnKind::Strong,
        label: None,
    };
    assert!(matches!(net.request(s, begin), Response::Begun { .. }));
    assert!(matches!(net.request(s, read(key)), Response::Values(_)));
    assert!(matches!(
        net.request(s, set(key, v)),
        Response::Updated { .. }
    ));
}

/// The value a causal txn of session `s` reads at `key`.
fn value(net: &mut TestNet<UniStore>, s: u64, key: &str) -> Option<Vec<u8>> {
    match &net.txn(s, vec![read(key)])[1] {
        Response::Values(v) => match &v[0].value {
            ObjValue::Lww(x) => x.clone(),
            other => panic!("a register reads {other:?}"),
        },
        other => panic!("read answered {other:?}"),
    }
}

fn from_dc(topo: &Topology, from: Addr, dc: u16) -> bool {
    matches!(from, Addr::Node(n) if topo.dc_of(n) == DcId(dc))
}

fn to_dc(topo: &Topology, to: Addr, dc: u16) -> bool {
    matches!(to, Addr::Node(n) if topo.dc_of(n) == DcId(dc))
}

/// Two clients at different DCs register the same nickname: exactly one commits, and
/// every DC then shows the winner's value (DELIVER_UPDATES, Alg. 3 l.4-8).
#[test]
fn racing_strong_txns_on_one_key_commit_exactly_one_and_it_reaches_every_dc() {
    let mut net = net(None);
    for (s, dc) in [(1, 1), (2, 2), (3, 0)] {
        net.session(s, dc);
    }
    net.run(50);
    strong_rmw(&mut net, 1, "nick", "alice");
    strong_rmw(&mut net, 2, "nick", "bob");
    submit(&mut net, 1, Request::Commit);
    submit(&mut net, 2, Request::Commit);
    net.run(1000);
    let (a, b) = (answer(&mut net, 1), answer(&mut net, 2));
    let won: Vec<bool> = [&a, &b]
        .iter()
        .map(|r| matches!(r, Some(Response::Committed)))
        .collect();
    assert_eq!(won.iter().filter(|w| **w).count(), 1, "{a:?} {b:?}");
    let lost = if won[0] { &b } else { &a };
    assert!(
        matches!(lost, Some(Response::Aborted { reason }) if reason.contains("conflict")),
        "{lost:?}"
    );
    let winner = if won[0] { "alice" } else { "bob" };
    net.run(500);
    for s in [1, 2, 3] {
        assert_eq!(value(&mut net, s, "nick"), Some(winner.as_bytes().to_vec()));
    }
    net.check_invariants().unwrap();
}

/// A strong txn that read the winner's write commits: it follows it (Property 5).
#[test]
fn a_strong_txn_that_saw_the_previous_one_commits_after_it() {
    let mut net = net(None);
    net.session(1, 1);
    net.session(2, 2);
    net.run(50);
    strong_rmw(&mut net, 1, "x", "1");
    assert_eq!(net.request(1, Request::Commit), Response::Committed);
    net.run(300);
    strong_rmw(&mut net, 2, "x", "2");
    assert_eq!(net.request(2, Request::Commit), Response::Committed);
    net.run(300);
    assert_eq!(value(&mut net, 1, "x"), Some(b"2".to_vec()));
    net.check_invariants().unwrap();
}

/// REDBLUE (§8.1) certifies every strong txn at partition 0's group, and two of them
/// conflict when they share a key, whatever their types (the authors' baseline: one
/// conflict label for all red txns, checked key by key): racing strong txns from two DCs
/// on different keys both commit, on one key exactly one does.
#[test]
fn redblue_racing_strong_txns_conflict_only_on_a_common_key() {
    for (keys, commits) in [(["a", "b"], 2), (["a", "a"], 1)] {
        let mut net: TestNet<RedBlue> = TestNet::new(Topology::full(3, 1, 2), params(None), T);
        net.session(1, 1);
        net.session(2, 2);
        net.run(50);
        for (s, key) in [(1, keys[0]), (2, keys[1])] {
            let begin = Request::Begin {
                kind: TxnKind::Strong,
                label: None,
            };
            assert!(matches!(net.request(s, begin), Response::Begun { .. }));
            assert!(matches!(net.request(s, read(key)), Response::Values(_)));
            assert!(matches!(
                net.request(s, set(key, "v")),
                Response::Updated { .. }
            ));
        }
        for s in [1, 2] {
            net.session_call(s, |m, ctx| m.submit(ctx, Request::Commit));
        }
        net.run(1000);
        let answers: Vec<Option<Response>> = [1, 2]
            .iter()
            .map(|s| net.replies.get_mut(s).and_then(VecDeque::pop_front))
            .collect();
        let won = answers
            .iter()
            .filter(|a| matches!(a, Some(Response::Committed)))
            .count();
        assert_eq!(won, commits, "{keys:?}: {answers:?}");
        net.check_invariants().unwrap();
    }
}

/// The leader DC (0) fails: its groups elect leaders among the survivors and strong
/// txns commit again (f = 1 of 3 DCs).
#[test]
fn strong_txns_commit_after_the_leader_dc_fails() {
    let mut net = net(None);
    net.session(1, 1);
    net.run(50);
    net.hold = |topo, from, to, _| from_dc(topo, from, 0) || to_dc(topo, to, 0);
    strong_rmw(&mut net, 1, "y", "after");
    submit(&mut net, 1, Request::Commit);
    net.run(3000);
    assert_eq!(answer(&mut net, 1), Some(Response::Committed));
    net.check_invariants().unwrap();
}

/// Figure 2: a causal txn t1 and a strong t2 that depends on it, at DC 0, whose causal
/// replication does not get out (its consensus traffic does). With the uniform barrier
/// t2 waits for t1 to be uniform; without it (`no-uniform-barrier`) t2 commits, DC 0
/// fails, and t2 can never become visible at DC 1: its commit vector covers t1, which
/// no survivor has. A strong txn conflicting with it then aborts again and again.
#[test]
fn without_the_uniform_barrier_a_dc_failure_hides_a_committed_strong_txn() {
    for mutation in [None, Some("no-uniform-barrier")] {
        let mut net = net(mutation);
        net.session(1, 0);
        net.session(2, 1);
        net.run(50);
        // DC 0's causal replication and stable vectors do not get out.
        net.hold = |topo, from, _, m| {
            from_dc(topo, from, 0) && matches!(m, Msg::Repl { .. } | Msg::StableVec { .. })
        };
        net.txn(1, vec![set("t1", "causal")]);
        strong_rmw(&mut net, 1, "t2", "strong");
        submit(&mut net, 1, Request::Commit);
        net.run(1000);
        let got = answer(&mut net, 1);
        if mutation.is_none() {
            assert_eq!(got, None, "t1 is not uniform: t2 must wait");
            continue;
        }
        assert_eq!(got, Some(Response::Committed), "no barrier: t2 commits");
        // DC 0 fails: nothing of it gets out any more.
        net.hold = |topo, from, to, _| from_dc(topo, from, 0) || to_dc(topo, to, 0);
        net.run(2000);
        assert_eq!(value(&mut net, 2, "t2"), None, "t2 stays invisible at DC 1");
        strong_rmw(&mut net, 2, "t2", "later");
        assert!(
            matches!(net.request(2, Request::Commit), Response::Aborted { .. }),
            "t3 conflicts with the invisible t2"
        );
    }
}

/// A strong increment of counter `key` by session `s`, committed.
fn strong_incr(net: &mut TestNet<UniStore>, s: u64, key: &str) {
    let begin = Request::Begin {
        kind: TxnKind::Strong,
        label: None,
    };
    assert!(matches!(net.request(s, begin), Response::Begun { .. }));
    let incr = Request::Update {
        key: Key::from(key),
        update: Update::Increment(1),
    };
    assert!(matches!(net.request(s, incr), Response::Updated { .. }));
    assert_eq!(net.request(s, Request::Commit), Response::Committed);
}

/// Every counter's value in `node`'s store at the newest snapshot, and each group's
/// `knownVec[strong]`.
fn counters(node: &super::Node, keys: &[&str]) -> (Vec<i64>, Vec<u64>) {
    let all = causeway_core::Vc {
        dcs: vec![u64::MAX; node.topo.dcs as usize],
        extra: vec![(causeway_core::clock::Extra::Strong, u64::MAX)],
    };
    let values = keys.iter().map(|k| {
        let k = Key::from(*k);
        let part = &node.parts[&node.topo.partition_of(&k)];
        match part.read(&all, vec![(k, ObjType::Counter)]).remove(0).1 {
            Ok(o) => match o.value() {
                ObjValue::Counter(n) => n,
                other => panic!("a counter reads {other:?}"),
            },
            Err(e) => panic!("read: {e}"),
        }
    });
    let st = node.ext.strong.as_ref().expect("strong groups");
    let known = st.groups.values().map(|g| g.cert.known()).collect();
    (values.collect(), known)
}

/// Certification logs are forgotten below what every member decided (`strong_gc.rs`),
/// and a node restarted from a checkpoint (acceptor state, certifier, store) plus the
/// later records reaches what a full replay does: no strong increment applied twice.
#[test]
fn a_checkpoint_with_certification_groups_recovers_what_a_full_replay_does() {
    let mut net = net(None);
    net.session(1, 1);
    net.run(50);
    let keys = ["c0", "c1", "c2", "c3"];
    for k in keys {
        strong_incr(&mut net, 1, k);
    }
    net.run(3000); // past STRONG_GC_EVERY_NS: the leaders sent the everywhere point
    for (i, node) in net.nodes.iter().enumerate() {
        let groups = &node.ext.strong.as_ref().unwrap().groups;
        let decided: u64 = groups.values().map(|g| g.px.decided_upto()).sum();
        assert!(
            node.cert_log_slots() * 2 < decided, // about one GC period of slots kept
            "node {i} keeps {} of {decided} slots",
            node.cert_log_slots()
        );
    }
    // More txns commit and are delivered before the next everywhere point: node 1 (DC 1,
    // a follower in every group) checkpoints with delivered slots it has not forgotten.
    for k in keys.iter().skip(1).step_by(2) {
        strong_incr(&mut net, 1, k);
    }
    net.run(100);
    let groups = &net.nodes[1].ext.strong.as_ref().unwrap().groups;
    assert!(groups
        .values()
        .any(|g| g.px.truncated_below() < g.px.delivered()));
    let ck = causeway_core::ServerNode::checkpoint(&net.nodes[1]).expect("quiescent after run");
    let covered = net.records[1].len();
    for k in keys.iter().step_by(2) {
        strong_incr(&mut net, 1, k);
    }
    net.run(500);
    let live = counters(&net.nodes[1], &keys);
    assert_eq!(live.0, vec![2, 2, 2, 2]);
    let mut compacted = vec![ck];
    compacted.extend_from_slice(&net.records[1][covered..]);
    let recover = |records: &[Vec<u8>]| {
        let config = crate::params::NodeConfig::new(
            causeway_core::NodeId(1),
            net.topo.clone(),
            params(None),
        );
        let section = crate::unistore::Config::default();
        let mut node =
            <UniStore as crate::Protocol>::recover(&config, &section, records).expect("recovers");
        let mut ctx = causeway_core::Ctx::new(causeway_core::TrueTime(net.clock), net.clock);
        causeway_core::ServerNode::start(&mut node, &mut ctx);
        node
    };
    let full = recover(&net.records[1]);
    let from_ck = recover(&compacted);
    assert_eq!(counters(&full, &keys), live);
    assert_eq!(
        counters(&from_ck, &keys),
        live,
        "the checkpoint's txns once"
    );
    causeway_core::ServerNode::check_invariants(&from_ck).unwrap();
    assert!(compacted.len() < net.records[1].len() / 2, "it compacts");
}
