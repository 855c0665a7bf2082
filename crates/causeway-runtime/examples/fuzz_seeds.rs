//! Writes the seed inputs of the runtime's fuzz targets (`fuzz/corpus/{client_frame,
//! peer_frame,cluster_file}/seed-*`), encoded by the crates' own encoders so the seeds are
//! frames and files the real code sends and writes:
//! `cargo run --release -p causeway-runtime --example fuzz_seeds -- fuzz/corpus`.

use causeway_client::wire::{self, ClientFrame, ServerFrame, Welcome, CLIENT_WIRE_VERSION};
use causeway_core::{
    Addr, Error, Key, NodeId, ObjType, ObjValue, OpId, ReadValue, Request, Response, SessionId,
    Topology, TxnId, TxnKind, Update,
};
use causeway_protocols::{eventual, registry::Carries, Msg};
use causeway_runtime::config::local_cluster;
use causeway_runtime::peer::{self, PeerFrame, PEER_WIRE_VERSION};
use std::path::{Path, PathBuf};

fn op(session: u64, seq: u64, index: u32) -> OpId {
    OpId {
        txn: TxnId {
            session: SessionId(session),
            seq,
        },
        index,
    }
}

fn client_frames() -> Vec<ClientFrame> {
    let key = Key::new(b"user:1".to_vec());
    vec![
        ClientFrame::Hello {
            wire_version: CLIENT_WIRE_VERSION,
            cluster: Some("local".into()),
            password: None,
        },
        ClientFrame::Hello {
            wire_version: CLIENT_WIRE_VERSION,
            cluster: None,
            password: Some("fuzz-password".into()),
        },
        ClientFrame::Request(Request::Begin {
            kind: TxnKind::Strong,
            label: Some("storeBid".into()),
        }),
        ClientFrame::Request(Request::Read {
            keys: vec![
                (key.clone(), ObjType::Lww),
                (Key::new(b"c".to_vec()), ObjType::Counter),
            ],
        }),
        ClientFrame::Request(Request::Update {
            key: key.clone(),
            update: Update::Assign(b"alice".to_vec()),
        }),
        ClientFrame::Request(Request::Update {
            key,
            update: Update::Increment(-3),
        }),
        ClientFrame::Request(Request::Commit),
        ClientFrame::Request(Request::Attach {
            token: vec![1, 2, 3, 0xff],
        }),
        ClientFrame::Request(Request::Barrier),
        ClientFrame::Request(Request::ListKeys {
            partition: causeway_core::PartitionId(3),
            from: 1 << 40,
            max: 100,
        }),
    ]
}

fn server_frames() -> Vec<ServerFrame> {
    let value = ReadValue {
        key: Key::new(b"k".to_vec()),
        value: ObjValue::Set(vec![b"a".to_vec(), b"b".to_vec()]),
        observed: vec![op(3, 1, 0), op(4, 2, 1)],
    };
    vec![
        ServerFrame::Welcome(Welcome {
            cluster: "local".into(),
            protocol: "cure".into(),
            node: "dc1-n1".into(),
            dc: "dc1".into(),
            session: SessionId(1 << 40 | 7),
        }),
        ServerFrame::Refused {
            reason: "too many client connections on this endpoint".into(),
        },
        ServerFrame::Response(Response::Values(vec![value])),
        ServerFrame::Response(Response::Updated { op: op(1, 2, 0) }),
        ServerFrame::Response(Response::Token(vec![9; 12])),
        ServerFrame::Response(Response::Error(Error::WrongType {
            expected: ObjType::Lww,
            found: ObjType::MvReg,
        })),
        ServerFrame::Response(Response::Keys(causeway_core::KeyPage {
            keys: vec![(Key::new(b"k".to_vec()), ObjType::Hash)],
            next: Some(1 << 20),
            partitions: 8,
        })),
    ]
}

fn peer_frames() -> Vec<PeerFrame> {
    let write = eventual::Msg::Write {
        req: 7,
        updates: vec![(
            Key::new(b"k1".to_vec()),
            Update::Add(b"x".to_vec()),
            op(2, 1, 0),
        )],
    };
    let read = eventual::Msg::Read {
        req: 8,
        keys: vec![(Key::new(b"k1".to_vec()), ObjType::Set)],
    };
    let data = |seq, msg: eventual::Msg| PeerFrame::Data {
        seq,
        from: Addr::Node(NodeId(1)),
        to: Addr::Node(NodeId(0)),
        msg: <Msg as Carries<eventual::Eventual>>::wrap(msg),
    };
    vec![
        PeerFrame::Hello {
            cluster: "local".into(),
            protocol: "eventual".into(),
            wire_version: PEER_WIRE_VERSION,
            from: NodeId(1),
            from_epoch: 3,
            to: NodeId(0),
            topology: Topology::full(3, 2, 8),
            nonce: [0x5a; 32],
        },
        PeerFrame::Welcome {
            epoch: 5,
            delivered: 12,
            proof: [0x3c; 32],
        },
        PeerFrame::Refused {
            reason: "the Hello does not match this node's cluster file".into(),
        },
        data(1, write),
        data(2, read),
        PeerFrame::Ack { delivered: 2 },
        PeerFrame::Challenge { nonce: [0xa5; 32] },
        PeerFrame::Proof { proof: [0xc3; 32] },
    ]
}

/// Cluster files: what `causeway up` writes, and variants using every optional field.
fn cluster_files() -> Result<Vec<String>, String> {
    let up = local_cluster("cure", 3, 1, "causeway-data".into(), 7100, 7000)?;
    let mut partial = local_cluster("paris", 3, 2, "/var/lib/causeway".into(), 7100, 7000)?;
    partial.replication_factor = Some(2);
    partial.rtt_ms = Some(vec![
        vec![0.0, 88.0, 80.0],
        vec![86.0, 0.0, 145.0],
        vec![76.0, 139.0, 0.0],
    ]);
    partial.intra_dc_ms = 0.5;
    partial.password = Some("secret".into());
    partial.secret = Some("0123456789abcdef0123456789abcdef".into());
    partial.nodes[0].metrics_addr = Some("127.0.0.1:9100".parse().expect("addr"));
    partial.nodes[0].http_addr = Some("127.0.0.1:9000".parse().expect("addr"));
    partial.nodes[1].data_dir = Some("/data/n2".into());
    partial.validate()?;
    let uni = local_cluster("unistore", 3, 1, "d".into(), 7100, 7000)?.to_toml();
    Ok(vec![
        up.to_toml(),
        partial.to_toml(),
        format!("{uni}\n[protocols.unistore]\nf = 1\n"),
    ])
}

fn write_all(dir: &Path, name: &str, items: Vec<Vec<u8>>) -> std::io::Result<()> {
    let dir = dir.join(name);
    std::fs::create_dir_all(&dir)?;
    for (i, bytes) in items.into_iter().enumerate() {
        std::fs::write(dir.join(format!("seed-{i:02}")), bytes)?;
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "fuzz/corpus".into()),
    );
    let mut client = Vec::new();
    for frame in client_frames() {
        client.push(wire::encode(&frame)?);
    }
    for frame in server_frames() {
        client.push(wire::encode(&frame)?);
    }
    let mut framed = Vec::new();
    wire::write_frame(&mut framed, &client[0])?;
    client.push(framed);
    write_all(&dir, "client_frame", client)?;
    let peers = peer_frames()
        .into_iter()
        .map(|f| peer::encode(&f).map(|b| b.to_vec()));
    write_all(&dir, "peer_frame", peers.collect::<Result<_, _>>()?)?;
    let files = cluster_files()?
        .into_iter()
        .map(String::into_bytes)
        .collect();
    write_all(&dir, "cluster_file", files)?;
    Ok(())
}
