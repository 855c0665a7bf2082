//! State transfer under UniStore's strong txns (`strong_transfer.rs`) on the kit's
//! test network: a DC cut off past the silent-sibling horizon and past the group's
//! `strong_log_kept_max`, while the other two commit causal and strong increments, comes
//! back and catches up on both by state transfer. Every increment must be counted once at
//! every DC, and a node restarted from its records (strong images and adoptions
//! included) must hold the same values.

use super::Node;
use crate::cure::msg::Msg;
use crate::cure::record::Record;
use crate::kit::testnet::TestNet;
use crate::params::{NodeConfig, Params};
use crate::registry::Protocol;
use crate::unistore::UniStore;
use causeway_core::clock::Extra;
use causeway_core::crdt::{ObjType, Update};
use causeway_core::{
    Addr, Ctx, DcId, Key, NodeId, ObjValue, Request, Response, ServerNode, Topology, TrueTime,
    TxnKind, Vc,
};

const T: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;

fn section() -> crate::unistore::Config {
    crate::unistore::Config {
        silent_sibling_ns: Some(100 * MS),
        silent_sibling_log_max: Some(0),
        transfer_retry_ns: Some(200 * MS),
        strong_log_kept_max: Some(4),
        ..Default::default()
    }
}

fn incr(key: &Key, by: i64) -> Request {
    Request::Update {
        key: key.clone(),
        update: Update::Increment(by),
    }
}

/// BEGIN STRONG, increment, COMMIT: the commit's answer.
fn strong_incr(net: &mut TestNet<UniStore>, s: u64, key: &Key, by: i64) -> Response {
    let begin = Request::Begin {
        kind: TxnKind::Strong,
        label: None,
    };
    assert!(matches!(net.request(s, begin), Response::Begun { .. }));
    assert!(matches!(
        net.request(s, incr(key, by)),
        Response::Updated { .. }
    ));
    net.request(s, Request::Commit)
}

/// Each counter's value at this node, read at a vector above everything.
fn values(node: &Node, keys: &[Key]) -> Vec<String> {
    let mut all = Vc {
        dcs: vec![u64::MAX; node.topo.dcs as usize],
        extra: vec![],
    };
    all.set_extra(Extra::Strong, u64::MAX);
    keys.iter()
        .map(|k| {
            let part = &node.parts[&node.topo.partition_of(k)];
            let got = part.read(&all, vec![(k.clone(), ObjType::Counter)]);
            format!("{k:?} = {:?}", got[0].1.as_ref().map(|o| o.value()))
        })
        .collect()
}

fn dc2_cut(topo: &Topology, from: Addr, to: Addr, _: &Msg) -> bool {
    match (from, to) {
        (Addr::Node(a), Addr::Node(b)) => {
            let (a, b) = (topo.dc_of(a), topo.dc_of(b));
            a != b && (a == DcId(2) || b == DcId(2))
        }
        _ => false,
    }
}

/// Three DCs with `sessions` (id, DC) open and four counters at 1000 by strong txns of
/// session 1.
fn seeded(mutation: Option<&str>, sessions: &[(u64, u16)]) -> (TestNet<UniStore>, Vec<Key>) {
    let params = Params {
        mutation: mutation.map(str::to_string),
        ..Params::default()
    };
    let topo = Topology::full(3, 1, 2);
    let mut net: TestNet<UniStore> = TestNet::with_config(topo, params, &section(), T);
    let keys: Vec<Key> = (0..4).map(|i| Key::new(format!("c{i}"))).collect();
    for (s, dc) in sessions {
        net.session(*s, *dc);
    }
    net.run(50);
    for k in &keys {
        let r = strong_incr(&mut net, 1, k, 1000);
        assert!(matches!(r, Response::Committed), "{r:?}");
    }
    net.run(200);
    (net, keys)
}

/// Three DCs; DC 2 is cut off while DCs 0 and 1 commit causal and strong increments,
/// long enough that the causal logs and the certification logs forget what it lacks;
/// then it comes back, with what was in flight lost.
fn outage(mutation: Option<&str>) -> (TestNet<UniStore>, Vec<Key>) {
    let (mut net, keys) = seeded(mutation, &[(1, 0), (2, 1), (3, 2)]);
    net.hold = dc2_cut;
    for i in 0..12 {
        let k = &keys[i % keys.len()];
        net.txn(2, vec![incr(k, 1)]);
        let r = strong_incr(&mut net, 1 + (i as u64 % 2), k, 100);
        assert!(matches!(r, Response::Committed), "{r:?}");
        net.run(20);
    }
    net.run(400); // past silent_sibling_ns and many heartbeat slots past log_kept_max
                  // The leaders (DC 0) forgot slots DC 2 lacks (the followers hear it within a second).
    let st = net.nodes[0].ext.strong.as_ref().expect("strong txns on");
    let forgot = st.groups.values().map(|g| g.px.truncated_below()).min();
    let lag = net.nodes[2]
        .ext
        .strong
        .as_ref()
        .expect("on")
        .groups
        .values();
    let behind = lag.map(|g| g.px.decided_upto()).max();
    assert!(
        forgot > behind,
        "the leaders kept their group logs for DC 2"
    );
    net.drop_held();
    net.run(3000);
    (net, keys)
}

fn adopted(records: &[Vec<u8>]) -> usize {
    let decoded = records
        .iter()
        .enumerate()
        .map(|(i, r)| Record::decode(i, r).expect("decodes"));
    decoded
        .filter(|r| matches!(r, Record::TransferAdopted { .. }))
        .count()
}

/// Restarts node `n` from its records (the groups are built and deliver at `start`).
fn restarted(net: &TestNet<UniStore>, n: u32) -> Node {
    let config = NodeConfig::new(NodeId(n), net.topo.clone(), Params::default());
    let mut again =
        UniStore::recover(&config, &section(), &net.records[n as usize]).expect("recovers");
    let mut ctx = Ctx::new(TrueTime(net.clock), net.clock);
    again.start(&mut ctx);
    again
}

#[test]
fn a_dc_back_after_both_logs_forgot_it_catches_up_on_causal_and_strong_txns() {
    let (mut net, keys) = outage(None);
    let expected: Vec<String> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let rounds = (0..12).filter(|r| r % keys.len() == i).count() as i64;
            format!("{k:?} = Ok(Counter({}))", 1000 + rounds * 101)
        })
        .collect();
    for n in 0..3 {
        assert_eq!(values(&net.nodes[n], &keys), expected, "node {n}");
    }
    assert!(adopted(&net.records[2]) > 0, "DC 2 adopted no transfer");
    net.check_invariants().expect("invariants hold");
    let again = restarted(&net, 2);
    assert_eq!(values(&again, &keys), expected, "node 2 after a restart");
    // DC 2 serves strong txns again: its group caught up.
    let r = strong_incr(&mut net, 3, &keys[0], 5);
    assert!(matches!(r, Response::Committed), "{r:?}");
    net.run(500);
    let mut expected0 = expected[0].clone();
    expected0 = expected0.replace(
        &format!("Counter({})", 1000 + 3 * 101),
        &format!("Counter({})", 1000 + 3 * 101 + 5),
    );
    for n in 0..3 {
        assert_eq!(values(&net.nodes[n], &keys)[0], expected0, "node {n}");
    }
    let read = net.txn(
        3,
        vec![Request::Read {
            keys: vec![(keys[0].clone(), ObjType::Counter)],
        }],
    );
    let want = ObjValue::Counter(1000 + 3 * 101 + 5);
    assert!(
        format!("{:?}", read[1]).contains(&format!("{want:?}")),
        "{read:?}"
    );
}

/// Without the transfer (the `no-state-transfer` mutation) DC 2 never gets what the
/// logs forgot: the test above checks the transfer's doing.
#[test]
fn without_state_transfer_a_dc_the_logs_forgot_stays_behind() {
    let (mut net, keys) = outage(Some("no-state-transfer"));
    net.run(2000);
    assert_ne!(values(&net.nodes[2], &keys), values(&net.nodes[0], &keys));
    assert_eq!(adopted(&net.records[2]), 0);
}

fn to_dc1(topo: &Topology, from: Addr, to: Addr, _: &Msg) -> bool {
    match (from, to) {
        (Addr::Node(a), Addr::Node(b)) => topo.dc_of(a) != DcId(1) && topo.dc_of(b) == DcId(1),
        _ => false,
    }
}

/// A receiver ahead of the image's sender: DC 1 hears nothing while DCs 0 and 2 commit
/// strong increments, then sends DC 2 a transfer (as asked). DC 2 already delivered strong
/// txns the image lacks: it drops their versions, adopts DC 1's older certifier and
/// delivers them again, each once, and a restart rebuilds the same store.
#[test]
fn a_receiver_ahead_of_the_image_delivers_what_it_lacks_again_once() {
    let (mut net, keys) = seeded(None, &[(1, 0), (3, 2)]);
    net.hold = to_dc1;
    for (i, k) in keys.iter().enumerate() {
        net.txn(3, vec![incr(k, 1)]);
        let r = strong_incr(&mut net, 3, k, 10 * (i as i64 + 1));
        assert!(matches!(r, Response::Committed), "{r:?}");
    }
    net.run(100);
    for p in 0..2 {
        let pid = causeway_core::PartitionId(p);
        net.node_call(1, |m, _| m.on_transfer_ask(pid, DcId(2)));
    }
    net.run(300);
    let records = &net.records[2];
    let dropped: usize = records
        .iter()
        .enumerate()
        .map(|(i, r)| match Record::decode(i, r).expect("decodes") {
            Record::TransferAdopted { dropped, .. } => dropped.len(),
            _ => 0,
        })
        .sum();
    assert!(adopted(records) > 0, "DC 2 adopted no transfer");
    assert!(dropped > 0, "DC 2 was not ahead of the image");
    let expected: Vec<String> = (0..4)
        .map(|i| {
            format!(
                "{:?} = Ok(Counter({}))",
                keys[i],
                1000 + 1 + 10 * (i as i64 + 1)
            )
        })
        .collect();
    assert_eq!(values(&net.nodes[2], &keys), expected, "node 2");
    assert_eq!(values(&net.nodes[0], &keys), expected, "node 0");
    assert_eq!(
        values(&restarted(&net, 2), &keys),
        expected,
        "node 2 after a restart"
    );
    net.release();
    net.run(1000);
    for n in 0..3 {
        assert_eq!(
            values(&net.nodes[n], &keys),
            expected,
            "node {n} once healed"
        );
    }
    net.check_invariants().expect("invariants hold");
}
