//! Tests of the PrompTCC machines on the kit's in-memory network.

use super::{PrompTcc, Wren};
use crate::kit::testnet::TestNet;
use crate::{Params, Protocol};
use causeway_core::crdt::{ObjType, Update};
use causeway_core::{Key, ObjValue, Request, Response, Topology};

const T: u64 = 1_000_000_000;

fn topo() -> Topology {
    Topology::full(1, 2, 8)
}

fn net<P: Protocol>(mutation: Option<&str>) -> TestNet<P> {
    let params = Params {
        mutation: mutation.map(str::to_string),
        ..Params::default()
    };
    let mut n = TestNet::new(topo(), params, T);
    n.run(10);
    n
}

/// Two keys on different partitions.
fn two_keys(topo: &Topology) -> (Key, Key) {
    let a = Key::from("a");
    let b = (0..100)
        .map(|i| Key::new(format!("b{i}")))
        .find(|k| topo.partition_of(k) != topo.partition_of(&a))
        .expect("another partition");
    (a, b)
}

fn upd(key: &Key, update: Update) -> Request {
    Request::Update {
        key: key.clone(),
        update,
    }
}

fn read<P: Protocol>(net: &mut TestNet<P>, s: u64, key: &Key, t: ObjType) -> ObjValue {
    let resp = net.txn(
        s,
        vec![Request::Read {
            keys: vec![(key.clone(), t)],
        }],
    );
    match &resp[1] {
        Response::Values(v) => v[0].value.clone(),
        other => panic!("read answered {other:?}"),
    }
}

#[test]
fn a_blind_mvreg_assignment_overwrites_the_sessions_previous_one() {
    let mut net = net::<PrompTcc>(None);
    let (a, b) = two_keys(&net.topo);
    net.session(1, 0);
    let r = net.txn(
        1,
        vec![
            upd(&a, Update::MvAssign(b"1".to_vec())),
            upd(&b, Update::Increment(1)),
        ],
    );
    assert_eq!(r.last(), Some(&Response::Committed));
    let r = net.txn(1, vec![upd(&a, Update::MvAssign(b"2".to_vec()))]);
    assert_eq!(r.last(), Some(&Response::Committed));
    assert_eq!(
        read(&mut net, 1, &a, ObjType::MvReg),
        ObjValue::MvReg(vec![b"2".to_vec()])
    );
}

#[test]
fn wren_reads_take_two_rounds() {
    let mut net = net::<Wren>(None);
    let (a, _) = two_keys(&net.topo);
    net.session(1, 0);
    let r = net.txn(1, vec![upd(&a, Update::Assign(b"x".to_vec()))]);
    assert_eq!(r.last(), Some(&Response::Committed));
    assert_eq!(
        read(&mut net, 1, &a, ObjType::Lww),
        ObjValue::Lww(Some(b"x".to_vec()))
    );
    assert_eq!(net.sessions[&1].client.rounds, (1, 1));
}
