//! The registry: one line per protocol gives the wire enum, the factories, the mutation
//! lookup and typed config sections; a message of another protocol is an error the driver
//! sees; an answered request leaves no timer behind.

use causeway_core::crdt::{ObjType, Update};
use causeway_core::{
    Addr, Ctx, DcId, Key, NodeId, Request, Response, SessionId, Topology, TrueTime, TxnKind,
};
use causeway_protocols::{
    entry, eventual, mutations, new_node, new_session, Msg, NodeConfig, Params, PROTOCOLS,
};
use serde_json::json;

fn topo() -> Topology {
    Topology::full(2, 1, 1)
}

#[test]
fn every_protocol_is_listed_once_with_its_mutations() {
    assert_eq!(
        PROTOCOLS,
        &[
            "eventual",
            "cure",
            "cureft",
            "unistore",
            "strong",
            "redblue",
            "paris",
            "bpr",
            "nocc",
            "promptcc",
            "promptcc-naive",
            "wren",
            "eiger",
            "occult",
            "eventual-ms"
        ]
    );
    assert!(mutations("paris").contains(&"no-client-cache"));
    assert!(mutations("paris").contains(&"ust-ignores-remote-dc"));
    assert!(mutations("bpr").contains(&"no-read-block"));
    assert!(mutations("promptcc").contains(&"single-round-always"));
    assert!(mutations("promptcc").contains(&"visible-before-stable"));
    assert!(mutations("occult").contains(&"no-read-check"));
    assert!(mutations("occult").contains(&"skip-overwrite-validation"));
    assert!(
        !entry("paris")
            .expect("paris")
            .requirements()
            .full_replication
    );
    assert!(mutations("cure").contains(&"no-read-wait"));
    assert!(mutations("unistore").contains(&"no-forwarding"));
    assert!(mutations("unistore").contains(&"visible-before-uniform"));
    assert!(mutations("unistore").contains(&"certify-ignores-conflicts"));
    assert!(mutations("unistore").contains(&"no-state-transfer"));
    assert!(mutations("strong").contains(&"certify-ignores-conflicts"));
    assert!(!mutations("cureft").contains(&"no-forwarding"));
    // eventual's one mutation: a sender never starts a state transfer (eventual/transfer.rs).
    assert_eq!(mutations("eventual"), ["no-state-transfer"]);
    let e = entry("nope").err().expect("unknown protocol");
    assert!(
        e.contains("known: eventual, cure, cureft, unistore, strong, redblue, paris"),
        "{e}"
    );
}

#[test]
fn a_message_of_another_protocol_is_an_error() {
    let config = NodeConfig::new(NodeId(0), topo(), Params::default());
    let mut node = new_node("cure", config, &[]).expect("node");
    let mut ctx = Ctx::new(TrueTime(1), 1);
    let foreign = Msg::Eventual(eventual::Msg::Repl {
        restarted: false,
        acks: causeway_core::Vc::zero(2),
        stream: None,
    });
    let err = node
        .handle_message(&mut ctx, Addr::Node(NodeId(1)), foreign)
        .expect_err("a foreign message is refused");
    assert_eq!((err.expected, err.got), ("cure", "eventual"));
}

#[test]
fn config_sections_are_typed_with_defaults() {
    let cure = entry("cure").expect("cure");
    cure.check_section(&serde_json::Value::Null)
        .expect("defaults");
    cure.check_section(&json!({"lease_ns": 5}))
        .expect("a known field");
    let e = cure
        .check_section(&json!({"lease_sec": 5}))
        .expect_err("unknown field");
    assert!(
        e.contains("lease_sec") && e.contains("protocol.cure"),
        "{e}"
    );
    let e = cure
        .check_section(&json!({"lease_ns": "x"}))
        .expect_err("bad type");
    assert!(e.contains("protocol.cure"), "{e}");
}

#[test]
fn topology_requirements_are_enforced() {
    let mut t = topo();
    t.replication_factor = 1;
    let config = NodeConfig::new(NodeId(0), t, Params::default());
    let e = new_node("cure", config, &[]).err().expect("refused");
    assert!(e.contains("full replication"), "{e}");
}

/// BEGIN of a causal transaction.
fn causal_begin() -> Request {
    Request::Begin {
        kind: TxnKind::Causal,
        label: None,
    }
}

/// An `eventual` session (one DC of one node: reads go to node 0).
fn eventual_session(params: &Params) -> causeway_protocols::BoxedSession {
    let null = serde_json::Value::Null;
    new_session("eventual", SessionId(1), DcId(0), &topo(), params, &null).expect("session")
}

#[test]
fn an_answered_request_leaves_no_timer_behind() {
    let params = Params::default();
    let mut s = eventual_session(&params);
    let mut ctx = Ctx::new(TrueTime(10), 10);
    s.submit(&mut ctx, causal_begin());
    assert_eq!(s.poll_timeout(), None, "begin is answered at once");
    let keys = vec![(Key::from("k"), ObjType::Lww)];
    s.submit(&mut ctx, Request::Read { keys });
    let deadline = s.poll_timeout().expect("a running read has a deadline");
    assert_eq!(deadline, 10 + params.request_timeout_ns);
    let reply = Msg::Eventual(eventual::Msg::ReadReply {
        req: 1,
        objects: vec![(Key::from("k"), Ok(causeway_core::Object::new(ObjType::Lww)))],
    });
    s.handle_message(&mut ctx, Addr::Node(NodeId(0)), reply)
        .expect("ours");
    assert!(matches!(
        ctx.outputs.last(),
        Some(causeway_core::Output::Reply(Response::Values(_)))
    ));
    assert_eq!(s.poll_timeout(), None, "the answered read's timer is gone");
    let update = Request::Update {
        key: Key::from("k"),
        update: Update::Assign("v".into()),
    };
    s.submit(&mut ctx, update);
    assert_eq!(s.poll_timeout(), None);
}

#[test]
fn a_request_that_times_out_is_answered_and_its_late_reply_ignored() {
    let params = Params::default();
    let mut s = eventual_session(&params);
    let mut ctx = Ctx::new(TrueTime(0), 0);
    s.submit(&mut ctx, causal_begin());
    s.submit(
        &mut ctx,
        Request::Read {
            keys: vec![(Key::from("k"), ObjType::Lww)],
        },
    );
    let deadline = s.poll_timeout().expect("deadline");
    let mut ctx = Ctx::new(TrueTime(deadline), deadline);
    s.handle_timeout(&mut ctx);
    let timed_out = ctx.outputs.iter().any(|o| {
        matches!(
            o,
            causeway_core::Output::Reply(Response::Error(causeway_core::Error::Unavailable(_)))
        )
    });
    assert!(timed_out, "{:?}", ctx.outputs);
    assert_eq!(s.poll_timeout(), None);
    let late = Msg::Eventual(eventual::Msg::ReadReply {
        req: 1,
        objects: Vec::new(),
    });
    let mut ctx = Ctx::new(TrueTime(deadline + 1), deadline + 1);
    s.handle_message(&mut ctx, Addr::Node(NodeId(0)), late)
        .expect("ours");
    assert!(
        ctx.outputs.is_empty(),
        "a stale reply is dropped: {:?}",
        ctx.outputs
    );
}

/// The node a running read went to restarted: the read ends at once, `Unavailable` like a
/// timeout, and its late reply is ignored; a restart of a node it did not reach, or with
/// no request running, changes nothing.
#[test]
fn a_restart_of_the_node_a_request_waits_on_ends_it_at_once() {
    let params = Params::default();
    let mut s = eventual_session(&params);
    let mut ctx = Ctx::new(TrueTime(0), 0);
    s.submit(&mut ctx, causal_begin());
    s.peer_restarted(&mut ctx, NodeId(0));
    assert_eq!(ctx.outputs.len(), 1, "nothing runs: {:?}", ctx.outputs);
    let mut ctx = Ctx::new(TrueTime(0), 0);
    let keys = vec![(Key::from("k"), ObjType::Lww)];
    s.submit(&mut ctx, Request::Read { keys });
    let waits_on: Vec<Addr> = ctx
        .outputs
        .iter()
        .filter_map(|o| match o {
            causeway_core::Output::Send { to, .. } => Some(*to),
            _ => None,
        })
        .collect();
    assert_eq!(waits_on, vec![Addr::Node(NodeId(0))]);
    let mut ctx = Ctx::new(TrueTime(5), 5);
    s.peer_restarted(&mut ctx, NodeId(1));
    assert!(
        ctx.outputs.is_empty() && s.running(),
        "node 1 was not asked"
    );
    s.peer_restarted(&mut ctx, NodeId(0));
    match ctx.outputs.as_slice() {
        [causeway_core::Output::Reply(Response::Error(causeway_core::Error::Unavailable(why)))] => {
            assert!(why.contains("node 0 restarted"), "{why}")
        }
        other => panic!("expected one Unavailable answer, got {other:?}"),
    }
    assert!(!s.running());
    assert_eq!(s.poll_timeout(), None, "its timer is gone");
    let late = Msg::Eventual(eventual::Msg::ReadReply {
        req: 1,
        objects: Vec::new(),
    });
    let mut ctx = Ctx::new(TrueTime(6), 6);
    s.handle_message(&mut ctx, Addr::Node(NodeId(0)), late)
        .expect("ours");
    assert!(ctx.outputs.is_empty(), "a late reply is stale");
}

/// A BEGIN refused inside an open transaction ends the promise that came with it: the
/// promised updates and commit are neither answered nor applied to the open transaction
/// (a driver whose BEGIN was refused submits nothing more; before, the session answered
/// them ahead into the transaction already open, and committed it).
#[test]
fn a_refused_begin_takes_nothing_ahead() {
    let params = Params::default();
    let mut s = eventual_session(&params);
    let mut ctx = Ctx::new(TrueTime(10), 10);
    let assign = |v: &str| Request::Update {
        key: Key::from("k"),
        update: Update::Assign(v.into()),
    };
    s.submit(&mut ctx, causal_begin());
    s.submit(&mut ctx, assign("open"));
    let mut ctx = Ctx::new(TrueTime(10), 10);
    s.submit_ahead(
        &mut ctx,
        causal_begin(),
        &[assign("promised"), Request::Commit],
    );
    let outputs: Vec<String> = ctx.outputs.iter().map(|o| format!("{o:?}")).collect();
    assert_eq!(outputs.len(), 1, "{outputs:?}");
    assert!(outputs[0].contains("inside a transaction"), "{outputs:?}");
    assert!(!s.running(), "the promised commit was not taken");
}
