//! State transfer (transfer.rs) end to end on the kit's in-memory network: two DCs cut
//! from each other past the silent-sibling horizon with no log kept for a silent sibling,
//! both writing, then healed. They must converge with every increment counted once, and
//! a node restarted from its records (transfer chunks and ends included) must hold the
//! same values.

use super::msg::Msg;
use super::node::Node;
use super::record::Record;
use super::{Config, Cure, Flavor};
use crate::kit::testnet::TestNet;
use crate::params::{NodeConfig, Params};
use causeway_core::crdt::{ObjType, Update};
use causeway_core::{Addr, DcId, Key, NodeId, ObjValue, Request, Topology, Vc};

const T: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;

fn outage_config() -> Config {
    Config {
        silent_sibling_ns: 100 * MS,
        silent_sibling_log_max: 0,
        transfer_retry_ns: 200 * MS,
        ..Config::default()
    }
}

fn incr(key: &Key, by: i64) -> Request {
    Request::Update {
        key: key.clone(),
        update: Update::Increment(by),
    }
}

fn assign(key: &Key, v: &str) -> Request {
    Request::Update {
        key: key.clone(),
        update: Update::Assign(v.as_bytes().to_vec()),
    }
}

/// Every key's value at this node, read at a vector above everything.
fn values(node: &Node, counter: &Key, regs: &[Key]) -> Vec<String> {
    let all = Vc {
        dcs: vec![u64::MAX; node.topo.dcs as usize],
        extra: vec![],
    };
    let typed = std::iter::once((counter.clone(), ObjType::Counter))
        .chain(regs.iter().map(|k| (k.clone(), ObjType::Lww)));
    typed
        .map(|(k, t)| {
            let part = &node.parts[&node.topo.partition_of(&k)];
            let got = part.read(&all, vec![(k.clone(), t)]);
            format!("{k:?} = {:?}", got[0].1.as_ref().map(|o| o.value()))
        })
        .collect()
}

fn cut_between_dcs(topo: &Topology, from: Addr, to: Addr, _: &Msg) -> bool {
    match (from, to) {
        (Addr::Node(a), Addr::Node(b)) => topo.dc_of(a) != topo.dc_of(b),
        _ => false,
    }
}

/// Two DCs, both writing, cut from each other past the silent-sibling horizon (so both
/// logs drop what the other lacks), then healed with what was in flight lost.
fn outage(mutation: Option<&str>) -> (TestNet<Cure>, Key, Vec<Key>) {
    let topo = Topology::full(2, 1, 2);
    let params = Params {
        mutation: mutation.map(str::to_string),
        ..Params::default()
    };
    let mut net: TestNet<Cure> = TestNet::with_config(topo, params, &outage_config(), T);
    let counter = Key::from("count");
    let regs: Vec<Key> = (0..8).map(|i| Key::new(format!("r{i}"))).collect();
    net.session(1, 0);
    net.session(2, 1);
    net.run(20);
    net.txn(1, vec![incr(&counter, 1000), assign(&regs[0], "before")]);
    net.run(100);
    net.hold = cut_between_dcs;
    for i in 0..20 {
        let r = &regs[i % regs.len()];
        net.txn(1, vec![incr(&counter, 1), assign(r, &format!("dc0-{i}"))]);
        net.txn(2, vec![incr(&counter, 100), assign(r, &format!("dc1-{i}"))]);
        net.run(20);
    }
    net.run(400); // past silent_sibling_ns: each DC's log drops what the other lacks
    for (n, d) in [(0, DcId(0)), (1, DcId(1))] {
        let dropped = net.nodes[n].parts.values().map(|p| p.log.dropped(d)).max();
        assert!(dropped > Some(0), "node {n} kept its log for the silent DC");
    }
    net.drop_held(); // what was in flight is lost, then the link heals
    net.run(2000);
    (net, counter, regs)
}

#[test]
fn a_sibling_back_after_its_log_was_dropped_converges_by_state_transfer() {
    let (mut net, counter, regs) = outage(None);
    let topo = net.topo.clone();
    let at0 = values(&net.nodes[0], &counter, &regs);
    let at1 = values(&net.nodes[1], &counter, &regs);
    assert_eq!(at0, at1, "the DCs converge");
    assert_eq!(
        at0[0],
        format!("{counter:?} = Ok(Counter({}))", 1000 + 20 + 20 * 100),
        "every increment counted once"
    );
    for (n, records) in net.records.iter().enumerate() {
        let done = records.iter().enumerate().filter(|(i, r)| {
            let r = Record::decode(*i, r).expect("decodes");
            matches!(r, Record::TransferDone { .. })
        });
        assert!(done.count() > 0, "node {n} installed no state transfer");
    }
    net.check_invariants().expect("invariants hold");
    // A restart replays the transfer's records into the same state.
    for n in 0..2u32 {
        let config = NodeConfig::new(NodeId(n), topo.clone(), Params::default());
        let again = Node::recover(
            config,
            outage_config(),
            Flavor::Cure,
            &net.records[n as usize],
        )
        .expect("recovers");
        assert_eq!(
            values(&again, &counter, &regs),
            at0,
            "node {n} after a restart"
        );
    }
    // And the sessions read the converged values once the vectors caught up.
    net.run(200);
    let read = |net: &mut TestNet<Cure>, s| {
        let r = net.txn(
            s,
            vec![Request::Read {
                keys: vec![(counter.clone(), ObjType::Counter)],
            }],
        );
        format!("{:?}", r[1])
    };
    let (a, b) = (read(&mut net, 1), read(&mut net, 2));
    assert_eq!(a, b);
    assert!(a.contains(&format!("{:?}", ObjValue::Counter(3020))), "{a}");
}

/// Without the transfer (the `no-state-transfer` mutation) the same outage leaves the
/// DCs diverged for good: what the test above checks is the transfer's doing.
#[test]
fn without_state_transfer_the_same_outage_diverges() {
    let (mut net, counter, regs) = outage(Some("no-state-transfer"));
    net.run(2000);
    let at0 = values(&net.nodes[0], &counter, &regs);
    let at1 = values(&net.nodes[1], &counter, &regs);
    assert_ne!(at0, at1, "diverged");
}
