//! A gateway session told to skip the observed ids (`GatewaySession::skip_observed`, what
//! the RESP front end asks for) reads, on a live one-node Cure cluster, the same values as
//! one that keeps them, with `observed` empty; the one that keeps them gets a tag per add.

use causeway_core::{Key, ObjType, ReadValue, Request, Response, TxnKind, Update};
use causeway_runtime::config::local_cluster;
use causeway_runtime::{GatewaySession, Server};
use std::net::SocketAddr;

fn free_addr() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

fn begin() -> Request {
    Request::Begin {
        kind: TxnKind::Causal,
        label: None,
    }
}

async fn add(session: &mut GatewaySession, member: &str) {
    let add = Request::Update {
        key: Key::from("set"),
        update: Update::Add(member.as_bytes().to_vec()),
    };
    let answers = session
        .call_batch(vec![begin(), add, Request::Commit])
        .await;
    assert_eq!(answers.last(), Some(&Response::Committed), "{answers:?}");
}

async fn read(session: &mut GatewaySession) -> ReadValue {
    let read = Request::Read {
        keys: vec![(Key::from("set"), ObjType::Set)],
    };
    let answers = session
        .call_batch(vec![begin(), read, Request::Commit])
        .await;
    match &answers[1] {
        Response::Values(values) => values[0].clone(),
        other => panic!("a read answers values, not {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_that_skips_observed_ids_reads_the_same_members_without_them() {
    let dir = std::env::temp_dir().join(format!("cw-gateway-observed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut config = local_cluster("cure", 1, 1, dir.clone(), 7300, 7200).unwrap();
    for node in &mut config.nodes {
        node.addr = free_addr();
        node.client_addr = None;
        node.resp_addr = None;
    }
    // One node, no peer to authenticate.
    config.insecure = true;
    config.validate().unwrap();
    let server = Server::start(&config, &config.nodes[0].name).await.unwrap();
    let gateway = server.gateway();
    let mut keeps = gateway.open_session();
    let mut skips = gateway.open_session();
    skips.skip_observed();
    add(&mut keeps, "x").await;
    add(&mut skips, "y").await;
    let (kept, skipped) = (read(&mut keeps).await, read(&mut skips).await);
    assert_eq!(kept.value, skipped.value);
    assert_eq!(kept.observed.len(), 2, "one tag per member: {kept:?}");
    assert!(skipped.observed.is_empty(), "{skipped:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
