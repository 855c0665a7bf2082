//! Tests of the engine's UniStore and CureFt flavors (UniStore §5): remote txns visible
//! only once uniform, the uniform barrier, attach after migration, and forwarding by a
//! third DC when the origin cannot reach a sibling; driven through the kit's test network.

use crate::cure::msg::Msg;
use crate::cureft::CureFt;
use crate::kit::testnet::TestNet;
use crate::params::Params;
use crate::registry::Protocol;
use crate::unistore::UniStore;
use causeway_core::crdt::{ObjType, Update};
use causeway_core::{Addr, ClientSession, DcId, Error, Key, ObjValue, Request, Response, Topology};
use std::collections::VecDeque;

const T: u64 = 1_000_000_000;

fn params(mutation: Option<&str>) -> Params {
    Params {
        mutation: mutation.map(str::to_string),
        ..Params::default()
    }
}

fn add(key: &str, e: &str) -> Request {
    Request::Update {
        key: Key::from(key),
        update: Update::Add(e.as_bytes().to_vec()),
    }
}

fn members<P: Protocol>(net: &mut TestNet<P>, s: u64, key: &str) -> Vec<Vec<u8>> {
    let keys = vec![(Key::from(key), ObjType::Set)];
    let resp = net.txn(s, vec![Request::Read { keys }]);
    match &resp[1] {
        Response::Values(v) => match &v[0].value {
            ObjValue::Set(m) => m.clone(),
            other => panic!("a set reads {other:?}"),
        },
        other => panic!("read answered {other:?}"),
    }
}

/// Submits without waiting for the answer.
fn submit<P: Protocol>(net: &mut TestNet<P>, s: u64, req: Request) {
    net.session_call(s, |m, ctx| m.submit(ctx, req));
}

fn answer<P: Protocol>(net: &mut TestNet<P>, s: u64) -> Option<Response> {
    net.replies.get_mut(&s).and_then(VecDeque::pop_front)
}

fn from_dc(topo: &Topology, from: Addr, dc: u16) -> bool {
    matches!(from, Addr::Node(n) if topo.dc_of(n) == DcId(dc))
}

fn to_dc(topo: &Topology, to: Addr, dc: u16) -> bool {
    matches!(to, Addr::Node(n) if topo.dc_of(n) == DcId(dc))
}

/// A node-to-node message from DC `a` to another DC, other than DC `spared`.
fn between(topo: &Topology, from: Addr, to: Addr, a: u16, spared: u16) -> bool {
    matches!(to, Addr::Node(_))
        && from_dc(topo, from, a)
        && !to_dc(topo, to, a)
        && !to_dc(topo, to, spared)
}

/// Five DCs, f = 2 (the default for five): DC 0's txn that reached only DC 1 is stable at
/// DC 1 but stored in two DCs, not three, so DC 1 must not show it; CureFt shows it.
#[test]
fn a_remote_txn_is_visible_only_once_stored_in_f_plus_one_dcs() {
    fn hold<M>(topo: &Topology, from: Addr, to: Addr, _: &M) -> bool {
        between(topo, from, to, 0, 1)
    }
    let topo = Topology::full(5, 1, 1);
    let mut uni: TestNet<UniStore> = TestNet::new(topo.clone(), params(None), T);
    let mut ft: TestNet<CureFt> = TestNet::new(topo, params(None), T);
    uni.hold = hold::<Msg>;
    ft.hold = hold::<Msg>;
    for s in [1, 2] {
        uni.session(s, if s == 1 { 0 } else { 1 });
        ft.session(s, if s == 1 { 0 } else { 1 });
    }
    uni.run(20);
    ft.run(20);
    uni.txn(1, vec![add("s", "x")]);
    ft.txn(1, vec![add("s", "x")]);
    uni.run(200);
    ft.run(200);
    assert_eq!(
        members(&mut ft, 2, "s"),
        vec![b"x".to_vec()],
        "cureft: stable"
    );
    assert!(
        members(&mut uni, 2, "s").is_empty(),
        "unistore: not uniform"
    );
    uni.release();
    uni.run(200);
    assert_eq!(members(&mut uni, 2, "s"), vec![b"x".to_vec()]);
    uni.check_invariants().unwrap();
}

/// UNIFORM_BARRIER (Alg. 1 l.49-50) answers only once f+1 = 2 DCs store the past; the
/// `visible-before-uniform` mutation answers once DC 0 alone does.
#[test]
fn the_barrier_waits_until_the_past_is_uniform() {
    for mutation in [None, Some("visible-before-uniform")] {
        let topo = Topology::full(3, 1, 2);
        let mut net: TestNet<UniStore> = TestNet::new(topo, params(mutation), T);
        net.hold = |topo, from, to, _| between(topo, from, to, 0, 0);
        net.session(1, 0);
        net.run(20);
        net.txn(1, vec![add("s", "x")]);
        submit(&mut net, 1, Request::Barrier);
        net.run(300);
        if mutation.is_some() {
            assert_eq!(answer(&mut net, 1), Some(Response::BarrierDone));
            continue;
        }
        assert_eq!(answer(&mut net, 1), None, "no other DC stores the txn yet");
        net.release();
        net.run(100);
        assert_eq!(answer(&mut net, 1), Some(Response::BarrierDone));
        net.check_invariants().unwrap();
    }
}

/// Migration (§5.6): barrier at DC 0, attach at DC 1. DC 0 never reaches DC 1 (as if it
/// failed towards it); DC 2 forwards DC 0's txn (§5.5), the attach answers, and the
/// client reads its own write at DC 1. Without forwarding the attach never answers.
#[test]
fn attach_after_a_barrier_sees_the_past_through_forwarding() {
    for (mutation, forwards) in [(None, true), (Some("no-forwarding"), false)] {
        let topo = Topology::full(3, 1, 2);
        let mut net: TestNet<UniStore> = TestNet::new(topo, params(mutation), T);
        // The certification groups' traffic flows: strong txns assume reliable links
        // between correct DCs (§2), and the token's strong entry is delivered at DC 1
        // only through them (Alg. 1 l.21).
        net.hold = |topo, from, to, m| {
            from_dc(topo, from, 0) && to_dc(topo, to, 1) && !matches!(m, Msg::Paxos { .. })
        };
        net.session(1, 0);
        net.session(2, 1);
        net.run(20);
        net.txn(1, vec![add("s", "mine")]);
        let token = match net.request(1, Request::Token) {
            Response::Token(t) => t,
            other => panic!("token answered {other:?}"),
        };
        assert_eq!(net.request(1, Request::Barrier), Response::BarrierDone);
        submit(&mut net, 2, Request::Attach { token });
        net.run(1500);
        let got = answer(&mut net, 2);
        if !forwards {
            assert_eq!(got, None, "{mutation:?}: attached without the past");
            continue;
        }
        assert_eq!(got, Some(Response::Attached));
        assert_eq!(members(&mut net, 2, "s"), vec![b"mine".to_vec()]);
        net.check_invariants().unwrap();
    }
}

/// A token must come from a cluster of the same shape; barriers need uniformity.
#[test]
fn bad_tokens_and_barriers_without_uniformity_are_refused() {
    let topo = Topology::full(3, 1, 1);
    let mut net: TestNet<UniStore> = TestNet::new(topo.clone(), params(None), T);
    net.session(1, 0);
    net.run(10);
    let r = net.request(1, Request::Attach { token: vec![1, 2] });
    assert!(matches!(r, Response::Error(Error::BadToken(_))), "{r:?}");
    let mut ft: TestNet<CureFt> = TestNet::new(topo, params(None), T);
    ft.session(1, 0);
    ft.run(10);
    let r = ft.request(1, Request::Barrier);
    assert!(
        matches!(r, Response::Error(Error::Unsupported { .. })),
        "{r:?}"
    );
}

/// f must leave a DC: unistore refuses f >= dcs with a clear error.
#[test]
fn f_must_be_below_the_number_of_dcs() {
    let topo = Topology::full(2, 1, 1);
    let config = crate::params::NodeConfig::new(causeway_core::NodeId(0), topo, params(None));
    let section = crate::unistore::Config {
        f: Some(2),
        ..Default::default()
    };
    let e = UniStore::recover(&config, &section, &[])
        .err()
        .expect("refused");
    assert!(e.contains("f = 2 needs at least f+1 = 3 DCs"), "{e}");
}

/// The engine learns UniStore's name, mutations and capabilities from its extension, and
/// Cure's and CureFt's from the flavor (`Plain`): strong txns only where the groups run,
/// the strong entry and barriers for every UniStore node.
#[test]
fn the_extension_gives_the_engine_its_name_mutations_and_capabilities() {
    use crate::cure::{Extension, Flavor, Plain, MUTATIONS, UNISTORE_MUTATIONS};
    use crate::unistore::{StrongConfig, UniExt};
    let on = UniExt::new(3, 0, 1, StrongConfig::default()).expect("f = 1 of 3 DCs");
    let off_cfg = StrongConfig {
        enabled: false,
        ..StrongConfig::default()
    };
    let off = UniExt::new(3, 0, 1, off_cfg).expect("f = 1 of 3 DCs");
    for (ext, strong) in [(&on, true), (&off, false)] {
        assert_eq!(ext.name(Flavor::CureFt), "unistore");
        assert_eq!(ext.mutations(Flavor::CureFt), UNISTORE_MUTATIONS);
        assert_eq!(ext.strong_txns(), strong);
        assert!(ext.strong_entry() && ext.uniform());
    }
    for (flavor, name) in [(Flavor::Cure, "cure"), (Flavor::CureFt, "cureft")] {
        assert_eq!(Plain.name(flavor), name);
        assert_eq!(Plain.mutations(flavor), MUTATIONS);
    }
    assert!(!Plain.strong_txns() && !Plain.strong_entry() && !Plain.uniform());
    assert!(UniExt::new(3, 0, 3, StrongConfig::default()).is_err());
}

/// The join of pasts behind endpoint scopes (`ClientSession::join_past`): DC 0 reaches
/// no other DC, so session 1's write never becomes uniform. A fresh session of DC 0 does
/// not see it (Alg. 1 l.5-6: its own-DC entry is uniformVec's); one that joined session
/// 1's past does (l.6 takes the entry from its past), with no wait, and so does one that
/// joined a holder of the pasts of sessions 1 and 4 (each wrote another set). A session
/// inside a transaction refuses the join: its snapshot is fixed.
#[test]
fn a_session_that_joined_another_past_reads_its_writes() {
    let topo = Topology::full(3, 1, 2);
    let mut net: TestNet<UniStore> = TestNet::new(topo, params(None), T);
    net.hold = |topo, from, to, _| between(topo, from, to, 0, 0);
    for s in 1..=6 {
        net.session(s, 0);
    }
    net.run(20);
    net.txn(1, vec![add("s", "x")]);
    net.txn(4, vec![add("t", "y")]);
    net.run(300);
    assert!(members(&mut net, 2, "s").is_empty(), "not uniform: unseen");
    let joined = |net: &mut TestNet<UniStore>, to: u64, from: u64| {
        let other = net.sessions.remove(&from).expect("session");
        let ok = net
            .sessions
            .get_mut(&to)
            .expect("session")
            .join_past(&other);
        net.sessions.insert(from, other);
        ok
    };
    assert!(joined(&mut net, 3, 1));
    assert_eq!(members(&mut net, 3, "s"), vec![b"x".to_vec()]);
    // A holder of both pasts (the runtime's scope), then a session taking it.
    assert!(joined(&mut net, 5, 1) && joined(&mut net, 5, 4));
    assert!(joined(&mut net, 6, 5));
    assert_eq!(members(&mut net, 6, "s"), vec![b"x".to_vec()]);
    assert_eq!(members(&mut net, 6, "t"), vec![b"y".to_vec()]);
    // Inside a transaction: refused, and the transaction still reads its snapshot.
    let begin = Request::Begin {
        kind: causeway_core::TxnKind::Causal,
        label: None,
    };
    assert!(matches!(net.request(2, begin), Response::Begun { .. }));
    assert!(!joined(&mut net, 2, 1));
    let keys = vec![(Key::from("s"), ObjType::Set)];
    match net.request(2, Request::Read { keys }) {
        Response::Values(v) => assert_eq!(v[0].value, ObjValue::Set(vec![])),
        other => panic!("read answered {other:?}"),
    }
    net.check_invariants().unwrap();
}
