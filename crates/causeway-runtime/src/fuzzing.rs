//! The fuzz properties of the runtime's untrusted inputs, shared by the libFuzzer targets
//! under `fuzz/fuzz_targets/` and the corpus test (`tests/fuzz_corpus.rs`), so the two
//! cannot drift apart: the native client frames and their Hello ([`client_frame`]), the
//! node-to-node frames and the Hello check ([`peer_frame`]), and the cluster file
//! ([`cluster_file`]). Beyond "does not panic", each checks that what decodes re-encodes
//! to what decodes the same, and that the validators accept exactly what they promise.

use crate::config::ClusterConfig;
use crate::gateway::hello_refusal;
use crate::peer::{self, check_hello, PeerFrame, PEER_WIRE_VERSION};
use causeway_client::wire::{self, ClientFrame, ServerFrame, CLIENT_WIRE_VERSION};
use causeway_core::{NodeId, Topology};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt::Debug;

/// The cluster the fuzzed Hellos are checked against.
const CLUSTER: &str = "local";
/// The password the fuzzed client Hellos are checked against.
const PASSWORD: &str = "fuzz-password";
/// The protocol the fuzzed peer Hellos are checked against.
const PROTOCOL: &str = "eventual";

/// A client frame payload: decoded as the server decodes it (`ClientFrame`) and as the
/// client library does (`ServerFrame`), each round-tripped; a Hello is refused exactly
/// when its version, password or cluster is wrong (and without a server password, for
/// its version or cluster only). The length-prefixed framing reads its prefix.
pub fn client_frame(data: &[u8]) {
    if let Ok(frame) = wire::decode::<ClientFrame>(data) {
        round_trip(&frame);
        let open = matches!(&frame, ClientFrame::Hello { wire_version, cluster, .. }
            if *wire_version == CLIENT_WIRE_VERSION
                && cluster.as_deref().is_none_or(|c| c == CLUSTER));
        let refusal = hello_refusal(&frame, CLUSTER, None);
        assert_eq!(refusal.is_none(), open, "{frame:?}: {refusal:?}");
        let authed = matches!(&frame, ClientFrame::Hello { password: Some(p), .. } if p.expose() == PASSWORD);
        let refusal = hello_refusal(&frame, CLUSTER, Some(PASSWORD));
        assert_eq!(refusal.is_none(), open && authed, "{frame:?}: {refusal:?}");
    }
    if let Ok(frame) = wire::decode::<ServerFrame>(data) {
        round_trip(&frame);
    }
    if let Ok(payload) = wire::read_frame(&mut &data[..]) {
        let len = u32::from_be_bytes(data[..4].try_into().expect("4 bytes"));
        assert_eq!(payload.len(), len as usize);
        assert_eq!(payload, data[4..4 + payload.len()]);
    }
}

/// A decoded client frame encodes, decodes to the same frame, and encodes the same again.
fn round_trip<T: Serialize + DeserializeOwned + PartialEq + Debug>(frame: &T) {
    let bytes = wire::encode(frame).expect("a decoded frame encodes");
    let back: T = wire::decode(&bytes).expect("an encoded frame decodes");
    assert_eq!(&back, frame, "decode, encode, decode gives the same frame");
    assert_eq!(wire::encode(&back).expect("encodes"), bytes);
}

/// A peer frame payload: what decodes re-encodes stably, and [`check_hello`] accepts a
/// Hello exactly when it matches this node (node 0 of cluster `local`, 3 DCs of 2 nodes).
pub fn peer_frame(data: &[u8]) {
    let Ok(frame) = peer::decode(data) else {
        return;
    };
    let bytes = peer::encode(&frame).expect("a decoded frame encodes");
    let back = peer::decode(&bytes).expect("an encoded frame decodes");
    assert_eq!(
        peer::encode(&back).expect("encodes"),
        bytes,
        "stable encoding"
    );
    let me = NodeId(0);
    let topology = Topology::full(3, 2, 8);
    let verdict = check_hello(&frame, CLUSTER, PROTOCOL, me, &topology);
    let expected = match &frame {
        PeerFrame::Hello {
            cluster,
            protocol,
            wire_version,
            from,
            from_epoch,
            to,
            topology: t,
            nonce: _,
        } if *wire_version == PEER_WIRE_VERSION
            && cluster == CLUSTER
            && protocol == PROTOCOL
            && *to == me
            && *t == topology
            && from.0 < topology.node_count()
            && *from != me =>
        {
            Some((*from, *from_epoch))
        }
        _ => None,
    };
    assert_eq!(verdict.clone().ok(), expected, "{frame:?}: {verdict:?}");
}

/// A cluster file's text: a file that validates writes back (`to_toml`) to one that
/// validates to the same configuration, and its placements are consistent.
pub fn cluster_file(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(config) = ClusterConfig::parse(text) else {
        return;
    };
    let toml = config.to_toml();
    let back = ClusterConfig::parse(&toml).expect("a valid configuration's TOML validates");
    assert_eq!(back.to_toml(), toml, "the written form is stable");
    assert_eq!(
        back, config,
        "parse, write, parse gives the same configuration"
    );
    let topology = config.topology();
    let placements = config.placements();
    assert_eq!(placements.len(), config.nodes.len());
    assert_eq!(topology.node_count() as usize, placements.len());
    for (i, p) in placements.iter().enumerate() {
        assert_eq!(p.id, NodeId(i as u32), "ids are dense and sorted");
        assert_eq!(topology.dc_of(p.id), p.dc);
        assert_eq!(config.placement(&p.spec.name).as_ref(), Ok(p));
    }
    for a in topology.all_dcs() {
        let intra_ns = (config.intra_dc_ms * 1e6) as u64;
        assert_eq!(
            config.one_way_ns(a, a),
            intra_ns,
            "inside a DC: intra_dc_ms"
        );
        for b in topology.all_dcs() {
            assert!(
                config.one_way_ns(a, b) < 60_000_000_000,
                "one way under a minute"
            );
        }
    }
}
