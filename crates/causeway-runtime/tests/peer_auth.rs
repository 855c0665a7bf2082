//! Peer authentication against a running node: a raw TCP client speaking the node-to-node
//! frames is refused when it cannot prove the cluster secret (a wrong proof, or a `Data`
//! frame instead of the proof), and nothing it sent is applied; with the secret, the same
//! write is applied (so the check would see one).

use causeway_core::{
    Addr, Key, NodeId, ObjType, ObjValue, OpId, Request, Response, SessionId, TxnId, TxnKind,
    Update,
};
use causeway_protocols::{eventual, registry::Carries, Msg};
use causeway_runtime::auth::{self, Direction, Transcript};
use causeway_runtime::config::{local_cluster, ClusterConfig};
use causeway_runtime::peer::{self, PeerFrame, PEER_WIRE_VERSION};
use causeway_runtime::Server;
use futures_util::{SinkExt, StreamExt};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_util::codec::Framed;

const SECRET: &str = "peer-auth-test-secret-0123456789";
const KEY: &[u8] = b"injected";

fn free_addr() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

fn cluster(dir: &std::path::Path) -> ClusterConfig {
    let mut c = local_cluster("eventual", 2, 1, dir.to_path_buf(), 7100, 7000).unwrap();
    for node in &mut c.nodes {
        node.addr = free_addr();
        node.client_addr = None;
        node.resp_addr = None;
    }
    c.secret = Some(SECRET.into());
    c.validate().unwrap();
    c
}

fn write_frame(value: &[u8]) -> PeerFrame {
    let op = OpId {
        txn: TxnId {
            session: SessionId(99),
            seq: 1,
        },
        index: 0,
    };
    let write = eventual::Msg::Write {
        req: 1,
        updates: vec![(Key::new(KEY.to_vec()), Update::Add(value.to_vec()), op)],
    };
    PeerFrame::Data {
        seq: 1,
        from: Addr::Node(NodeId(1)),
        to: Addr::Node(NodeId(0)),
        msg: <Msg as Carries<eventual::Eventual>>::wrap(write),
    }
}

type Conn = Framed<TcpStream, tokio_util::codec::LengthDelimitedCodec>;

async fn send(conn: &mut Conn, frame: &PeerFrame) {
    conn.send(peer::encode(frame).unwrap()).await.unwrap();
}

async fn recv(conn: &mut Conn) -> Option<PeerFrame> {
    let next = tokio::time::timeout(Duration::from_secs(10), conn.next()).await;
    match next.expect("an answer in time") {
        Some(Ok(bytes)) => Some(peer::decode(&bytes).unwrap()),
        _ => None,
    }
}

/// The key of the link between node `from` and node 0 that the secret `secret` gives.
fn key_to_0(config: &ClusterConfig, secret: &str, from: u32) -> auth::LinkKey {
    auth::link_key(secret.as_bytes(), &config.cluster, from, 0)
}

/// Dials node 0 as node 1 and answers its challenge with `answer(proof)` (given the
/// proof the secret `secret` gives); returns the node's answer and whether a proof is the
/// node's proof of `SECRET` in this handshake.
async fn handshake(
    config: &ClusterConfig,
    secret: &str,
    answer: impl FnOnce(auth::Proof) -> PeerFrame,
) -> (Conn, Option<PeerFrame>, impl Fn(&auth::Proof) -> bool) {
    handshake_as(config, 1, key_to_0(config, secret, 1), answer).await
}

/// Dials node 0 claiming to be node `from`, proving with the link key `key`.
async fn handshake_as(
    config: &ClusterConfig,
    from: u32,
    key: auth::LinkKey,
    answer: impl FnOnce(auth::Proof) -> PeerFrame,
) -> (Conn, Option<PeerFrame>, impl Fn(&auth::Proof) -> bool) {
    let stream = TcpStream::connect(config.nodes[0].addr).await.unwrap();
    let mut conn = Framed::new(stream, peer::codec());
    let nonce = auth::nonce().unwrap();
    let hello = PeerFrame::Hello {
        cluster: config.cluster.clone(),
        protocol: config.protocol.clone(),
        wire_version: PEER_WIRE_VERSION,
        from: NodeId(from),
        from_epoch: 1,
        to: NodeId(0),
        topology: config.topology(),
        nonce,
    };
    send(&mut conn, &hello).await;
    let Some(PeerFrame::Challenge { nonce: theirs }) = recv(&mut conn).await else {
        panic!("the node challenges an acceptable Hello");
    };
    let t = Transcript {
        cluster: &config.cluster,
        dialer: from,
        dialer_nonce: &nonce,
        listener: 0,
        listener_nonce: &theirs,
    };
    let proof = auth::proof(&key, Direction::Dialer, &t);
    send(&mut conn, &answer(proof)).await;
    let reply = recv(&mut conn).await;
    let cluster = config.cluster.clone();
    let true_key = key_to_0(config, SECRET, from);
    let listeners = move |given: &auth::Proof| {
        let t = Transcript {
            cluster: &cluster,
            dialer: from,
            dialer_nonce: &nonce,
            listener: 0,
            listener_nonce: &theirs,
        };
        auth::verify(&true_key, Direction::Listener, &t, given)
    };
    (conn, reply, listeners)
}

async fn read_set(server: &Server) -> Vec<Vec<u8>> {
    let mut session = server.gateway().open_session();
    let begin = Request::Begin {
        kind: TxnKind::Causal,
        label: None,
    };
    assert!(matches!(session.call(begin).await, Response::Begun { .. }));
    let read = Request::Read {
        keys: vec![(Key::new(KEY.to_vec()), ObjType::Set)],
    };
    let Response::Values(values) = session.call(read).await else {
        panic!("a read answers values");
    };
    let _ = session.call(Request::Commit).await;
    match &values[0].value {
        ObjValue::Set(members) => members.clone(),
        other => panic!("a set, not {other:?}"),
    }
}

fn refused(reply: Option<PeerFrame>, what: &str) -> String {
    match reply {
        Some(PeerFrame::Refused { reason }) => reason,
        other => panic!("{what} must be refused, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_without_the_secret_is_refused_and_nothing_it_sent_is_applied() {
    let dir = std::env::temp_dir().join(format!("cw-peer-auth-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config = cluster(&dir);
    let server = Server::start(&config, &config.nodes[0].name).await.unwrap();

    let (mut conn, reply, _) = handshake(&config, "not-the-secret-at-all-000", |proof| {
        PeerFrame::Proof { proof }
    })
    .await;
    let reason = refused(reply, "a wrong proof");
    assert!(reason.contains("failed authentication"), "{reason}");
    send(&mut conn, &write_frame(b"wrong-proof")).await;
    assert!(
        recv(&mut conn).await.is_none(),
        "the node closed the connection"
    );

    let (mut conn, reply, _) = handshake(&config, SECRET, |_| write_frame(b"no-proof")).await;
    let reason = refused(reply, "Data before the proof");
    assert!(
        reason.contains("a Data frame instead of its proof"),
        "{reason}"
    );
    assert!(
        recv(&mut conn).await.is_none(),
        "the node closed the connection"
    );

    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        read_set(&server).await,
        Vec::<Vec<u8>>::new(),
        "nothing applied"
    );

    let (mut conn, reply, listeners) =
        handshake(&config, SECRET, |proof| PeerFrame::Proof { proof }).await;
    match &reply {
        Some(PeerFrame::Welcome { proof, .. }) => {
            assert!(listeners(proof), "the Welcome carries the node's proof")
        }
        other => panic!("a Welcome, not {other:?}"),
    }
    send(&mut conn, &write_frame(b"authenticated")).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while read_set(&server).await.is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the write is applied"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(read_set(&server).await, vec![b"authenticated".to_vec()]);
    drop(conn);
    let _ = std::fs::remove_dir_all(&dir);
}

/// With keyrings (`causeway keyring`), node 0 holds only its own links' keys and the
/// cluster file no secret: a node proving with its own keyring is welcome, and one holding
/// node 2's keyring cannot claim to be node 1 (the key of link 1-0 is in neither's hands).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_keyrings_a_node_cannot_claim_another_nodes_id() {
    let dir = std::env::temp_dir().join(format!("cw-peer-keyring-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut config = local_cluster("eventual", 2, 2, dir.clone(), 7100, 7000).unwrap();
    for node in &mut config.nodes {
        node.addr = free_addr();
        node.client_addr = None;
        node.resp_addr = None;
    }
    let name_of_2 = config.placements()[2].spec.name.clone();
    let keys = dir.join("keys");
    causeway_runtime::keyring::write_all(&config, SECRET.as_bytes(), &keys).unwrap();
    config.secret = None;
    config.keyring_dir = Some(keys.clone());
    config.validate().unwrap();
    let server = Server::start(&config, &config.nodes[0].name).await.unwrap();
    let ring_of_2 = causeway_runtime::keyring::load(&config, &keys, &name_of_2).unwrap();
    let stolen = ring_of_2.link(&config.cluster, 2, 0).unwrap();
    let (_conn, reply, _) =
        handshake_as(&config, 1, stolen, |proof| PeerFrame::Proof { proof }).await;
    let reason = refused(reply, "node 2's key under node 1's id");
    assert!(reason.contains("node 1 failed authentication"), "{reason}");
    let (_conn, reply, listeners) =
        handshake_as(&config, 2, stolen, |proof| PeerFrame::Proof { proof }).await;
    match &reply {
        Some(PeerFrame::Welcome { proof, .. }) => assert!(listeners(proof), "node 0's proof"),
        other => panic!("node 2 with its own key is welcome, not {other:?}"),
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Before a dialer proves it knows the secret, a refusal names only a wire-version
/// mismatch: a Hello of another cluster, protocol or node learns neither the node's cluster
/// name, protocol nor placement, and the challenge to an acceptable Hello carries no proof
/// (the `Challenge` frame has no room for one) to guess the secret from.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stranger_learns_nothing_of_the_cluster_before_it_proves() {
    let dir = std::env::temp_dir().join(format!("cw-peer-stranger-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config = cluster(&dir);
    let server = Server::start(&config, &config.nodes[0].name).await.unwrap();
    let ask = |cluster: &str, protocol: &str, version: u32| PeerFrame::Hello {
        cluster: cluster.into(),
        protocol: protocol.into(),
        wire_version: version,
        from: NodeId(1),
        from_epoch: 1,
        to: NodeId(0),
        topology: config.topology(),
        nonce: [7; 32],
    };
    let hellos = [
        ask("guess", &config.protocol, PEER_WIRE_VERSION),
        ask(&config.cluster, "cure", PEER_WIRE_VERSION),
    ];
    for hello in hellos {
        let stream = TcpStream::connect(config.nodes[0].addr).await.unwrap();
        let mut conn = Framed::new(stream, peer::codec());
        send(&mut conn, &hello).await;
        let reason = refused(recv(&mut conn).await, "a mismatching Hello");
        for secret in [
            config.cluster.as_str(),
            config.protocol.as_str(),
            "placement",
        ] {
            assert!(!reason.contains(secret), "'{reason}' discloses '{secret}'");
        }
    }
    let stream = TcpStream::connect(config.nodes[0].addr).await.unwrap();
    let mut conn = Framed::new(stream, peer::codec());
    send(&mut conn, &ask(&config.cluster, &config.protocol, 1)).await;
    let reason = refused(recv(&mut conn).await, "another wire version");
    assert!(reason.contains("wire version 1"), "{reason}");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A node whose cluster file has no secret does not start (its peers could not
/// authenticate it, nor it them), and says how to fix it; `insecure` starts it anyway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_without_a_secret_refuses_to_start_unless_insecure() {
    let dir = std::env::temp_dir().join(format!("cw-peer-nosecret-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut config = cluster(&dir);
    config.secret = None;
    let e = Server::start(&config, &config.nodes[0].name)
        .await
        .err()
        .expect("no secret, no start");
    assert_eq!(e, causeway_runtime::NO_SECRET);
    assert!(e.contains("fix: set `secret`"), "{e}");
    config.insecure = true;
    let server = Server::start(&config, &config.nodes[0].name).await;
    assert!(server.is_ok(), "insecure starts: {:?}", server.err());
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
