//! The node-to-node wire: length-prefixed postcard frames (4-byte big-endian length, at
//! most `FRAME_LEN_MAX` bytes) over TCP, one connection per direction of each node pair.
//!
//! The dialing node sends [`PeerFrame::Hello`] naming the cluster, protocol, wire version,
//! itself (id and boot epoch), the node it expects, the cluster's shape from its
//! cluster file (DCs, nodes per DC, partitions, replication factor: two nodes that place
//! partitions differently must not talk) and a fresh random nonce. The listener checks
//! it and answers `Challenge` with its own nonce; the dialer proves first, answering
//! `Proof` with its proof of the cluster secret (see [`crate::auth`] for what a proof
//! covers). Only a dialer whose proof holds gets the listener's: `Welcome` carries it with
//! the listener's epoch and the last sequence number it delivered from that sender epoch,
//! and the dialer checks it before trusting anything else the listener says. So a
//! stranger who connects learns no proof to guess the secret from offline. At any step the
//! listener may answer `Refused`: before the dialer proved, with a reason that names only
//! the wire version (the rest is in the listener's log), so a stranger learns nothing of
//! the cluster. Only then does the dialer send `Data` frames numbered 1, 2, ... per sender
//! epoch, and the listener answers with cumulative `Ack`s; a listener closes a connection
//! sending anything but `Proof` after its `Challenge`.

use crate::auth::{Nonce, Proof};
use causeway_core::limits::FRAME_LEN_MAX;
use causeway_core::{Addr, NodeId, Topology};
use causeway_protocols::kit::postcard_form::Writer;
use causeway_protocols::Msg;
use serde::{Deserialize, Serialize};
use tokio_util::codec::LengthDelimitedCodec;

/// Version of this frame format; nodes refuse peers speaking another. 3: a set add's
/// effect names the tags it replaces (the optimized OR-set). 4: mutual challenge-response
/// authentication (`Hello` carries a nonce; `Challenge` and `Proof` frames). 5: PaRiS's
/// PREPARE says whether its partition commits the txn alone (one-phase commit). 6: Cure's
/// START says whether the txn's read answers carry the observed ids. 7: Cure's
/// `ReadCommitResult` (a direct read-then-commit answered in one message). 8: every
/// protocol's replication stream pieces as one byte string, encoded once for every
/// sibling (`kit::wire`), Cure's in a compact form (`cure/wire.rs`). 9: a coordinator's
/// read of its partitions (Cure's `ReadKeys`, PaRiS's `ReadSlice`) and their replies are
/// named by txn and request (`kit::txn::ReadId`), not by a counter a restart reset.
/// 10: Occult's replication heartbeat carries a floor per shard (`occult::msg::Floor`).
/// 11: a register counts (`Update::RegisterIncrement`, `Effect::RegisterIncrement` and
/// `CountedAssign`: new variants at the ends of their enums, so every earlier message
/// decodes as before, but an earlier build cannot decode them). 12: the dialer proves
/// first (`Challenge` carries no proof; `Welcome` carries the listener's). 13: a key freed
/// by `DEL` takes another type (`Update::Part`, `Effect::Part`, `State::Parts`: new
/// variants at the ends, so earlier messages decode as before). 14: proofs are keyed by
/// the link's own key (`auth::link_key`), not by the cluster secret. 15: Redis hashes
/// (`ObjType::Hash`, `Update`/`Effect::HashSet`, `HashIncrement`, `HashRemove`,
/// `State::Hash`, `ObjValue::Hash`: new variants at the ends, so earlier messages decode
/// as before). 16: Redis lists (`ObjType::List`, `Update::ListPush`, `ListPop`,
/// `Effect::ListPush`, `ListRemove`, `State::List`, `ObjValue::List`: new variants at the
/// ends, so earlier messages decode as before). 17: Redis sorted sets (`ObjType::ZSet`,
/// `Update`/`Effect::ZAdd`, `ZIncrement`, `ZRemove`, `State::ZSet`, `ObjValue::ZSet`: new
/// variants at the ends, so earlier messages decode as before).
/// 18: listing keys (each protocol's `Msg::ListKeys`, `KeysListed`, `kit::keys`) and
/// UniStore's votes to the coordinator (`Msg::CertAck`, the vote in `CertEntry::Prepare`).
/// 19: UniStore's decisions applied ahead of the log (`Certifier::early` in a transfer's
/// `StrongImage`; acceptances to every member of a certification group).
pub const PEER_WIRE_VERSION: u32 = 19;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum PeerFrame {
    Hello {
        cluster: String,
        protocol: String,
        wire_version: u32,
        from: NodeId,
        from_epoch: u64,
        to: NodeId,
        /// The sender's placement, as its cluster file gives it.
        topology: Topology,
        /// The dialer's fresh random nonce.
        nonce: Nonce,
    },
    /// The listener's acceptance of a dialer whose proof held, with its own proof.
    Welcome {
        epoch: u64,
        delivered: u64,
        proof: Proof,
    },
    Refused {
        reason: String,
    },
    Data {
        seq: u64,
        from: Addr,
        to: Addr,
        msg: Msg,
    },
    Ack {
        delivered: u64,
    },
    /// The listener's answer to an acceptable `Hello`: its nonce (its proof waits for the
    /// dialer's).
    Challenge {
        nonce: Nonce,
    },
    /// The dialer's proof, its answer to `Challenge`.
    Proof {
        proof: Proof,
    },
}

/// The capacity an encoded frame starts with.
const FRAME_START_BYTES: usize = 256;

/// The frame codec both wires use: 4-byte big-endian length, payload of at most
/// `FRAME_LEN_MAX` bytes.
pub fn codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .length_field_length(4)
        .big_endian()
        .max_frame_length(FRAME_LEN_MAX)
        .new_codec()
}

/// `PeerFrame::Data`'s variant index (the enum's order; the tests compare with serde).
const DATA_TAG: u64 = 3;

pub fn encode(frame: &PeerFrame) -> Result<bytes::Bytes, String> {
    // Room for a usual message from the start: grown from empty, the vector reallocated
    // and copied itself at every doubling; with the room an encode costs a third fewer
    // instructions (callgrind, two-node INCR: 2,870 to 1,860 per message, issue 14).
    let mut buf = Vec::with_capacity(FRAME_START_BYTES);
    let bytes = match encode_data_by_hand(frame, &mut buf) {
        true => buf,
        false => postcard::to_extend(frame, buf).map_err(|e| format!("encode: {e}"))?,
    };
    if bytes.len() > FRAME_LEN_MAX {
        return Err(format!(
            "a frame of {} bytes exceeds the limit of {FRAME_LEN_MAX}",
            bytes.len()
        ));
    }
    Ok(bytes.into())
}

/// Writes a `Data` frame whose message its protocol writes by hand
/// (`Msg::encode_by_hand`: postcard's bytes, as serde would write them); else leaves
/// `out` empty and says so.
fn encode_data_by_hand(frame: &PeerFrame, out: &mut Vec<u8>) -> bool {
    let PeerFrame::Data { seq, from, to, msg } = frame else {
        return false;
    };
    let mut w = Writer(out);
    w.varint(DATA_TAG);
    w.varint(*seq);
    for addr in [from, to] {
        match addr {
            Addr::Node(n) => {
                w.varint(0);
                w.varint(u64::from(n.0));
            }
            Addr::Client(s) => {
                w.varint(1);
                w.varint(s.0);
            }
        }
    }
    if msg.encode_by_hand(out) {
        return true;
    }
    out.clear();
    false
}

pub fn decode(bytes: &[u8]) -> Result<PeerFrame, String> {
    postcard::from_bytes(bytes).map_err(|e| format!("undecodable peer frame: {e}"))
}

/// What a listener expects of a dialer's `Hello`; `Err` is the refusal reason.
pub fn check_hello(
    frame: &PeerFrame,
    cluster: &str,
    protocol: &str,
    me: NodeId,
    topology: &Topology,
) -> Result<(NodeId, u64), String> {
    let PeerFrame::Hello {
        cluster: c,
        protocol: p,
        wire_version,
        from,
        from_epoch,
        to,
        topology: t,
        nonce: _,
    } = frame
    else {
        return Err("the first frame is not a Hello".into());
    };
    if *wire_version != PEER_WIRE_VERSION {
        return Err(format!(
            "wire version {wire_version}, this node speaks {PEER_WIRE_VERSION} (run the same causeway build everywhere)"
        ));
    }
    if c != cluster {
        return Err(format!(
            "cluster '{c}', this node is in cluster '{cluster}'"
        ));
    }
    if p != protocol {
        return Err(format!(
            "protocol '{p}', this node runs '{protocol}' (every node needs the same cluster file)"
        ));
    }
    if *to != me {
        return Err(format!(
            "addressed to node {}, this is node {} (the cluster files disagree on addresses)",
            to.0, me.0
        ));
    }
    if t != topology {
        return Err(format!(
            "placement {}, this node has {} (every node needs the same cluster file)",
            shape(t),
            shape(topology)
        ));
    }
    if from.0 >= topology.node_count() || *from == me {
        return Err(format!("unknown sender node {}", from.0));
    }
    Ok((*from, *from_epoch))
}

/// A topology as the refusal names it.
fn shape(t: &Topology) -> String {
    format!(
        "{} DCs of {} nodes, {} partitions in {} DCs each",
        t.dcs, t.nodes_per_dc, t.partitions, t.replication_factor
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(protocol: &str, version: u32) -> PeerFrame {
        PeerFrame::Hello {
            cluster: "c".into(),
            protocol: protocol.into(),
            wire_version: version,
            from: NodeId(1),
            from_epoch: 3,
            to: NodeId(0),
            topology: Topology::full(2, 1, 2),
            nonce: [7; 32],
        }
    }

    #[test]
    fn hello_mismatches_are_refused_with_a_reason() {
        let v = PEER_WIRE_VERSION;
        let topo = Topology::full(2, 1, 2);
        assert_eq!(
            check_hello(&hello("eventual", v), "c", "eventual", NodeId(0), &topo),
            Ok((NodeId(1), 3))
        );
        let e = check_hello(&hello("cure", v), "c", "eventual", NodeId(0), &topo).unwrap_err();
        assert!(e.contains("protocol 'cure'"), "{e}");
        let other = v + 1;
        let e = check_hello(&hello("eventual", other), "c", "eventual", NodeId(0), &topo);
        assert!(e.unwrap_err().contains(&format!("wire version {other}")));
        let e = check_hello(&hello("eventual", v), "d", "eventual", NodeId(0), &topo).unwrap_err();
        assert!(e.contains("cluster 'c'"), "{e}");
        let partial = Topology::partial(2, 1, 2, 1);
        let e =
            check_hello(&hello("eventual", v), "c", "eventual", NodeId(0), &partial).unwrap_err();
        assert!(
            e.contains("placement 2 DCs of 1 nodes, 2 partitions in 2 DCs each")
                && e.contains("this node has 2 DCs of 1 nodes, 2 partitions in 1 DCs each"),
            "{e}"
        );
        let bytes = encode(&hello("eventual", v)).unwrap();
        assert!(matches!(decode(&bytes), Ok(PeerFrame::Hello { .. })));
    }

    /// A `Data` frame is serde's bytes whether its message is written by hand (Cure's
    /// answers) or not (an abort), from a node or a session, to a node or a session.
    #[test]
    fn data_frames_written_by_hand_are_postcards_bytes() {
        use causeway_core::{SessionId, TxnId, Vc};
        use causeway_protocols::cure::Msg as CureMsg;
        let txn = TxnId {
            session: SessionId(300),
            seq: 7,
        };
        let answer = CureMsg::CommitResult {
            txn,
            req: 2,
            result: Ok(Vc::zero(3)),
        };
        let abort = CureMsg::Abort { txn };
        let addrs = [Addr::Node(NodeId(0)), Addr::Client(SessionId(u64::MAX))];
        for (msg, by_hand) in [(answer, true), (abort, false)] {
            for (from, to) in [(addrs[0], addrs[1]), (addrs[1], addrs[0])] {
                let frame = PeerFrame::Data {
                    seq: 1 << 33,
                    from,
                    to,
                    msg: Msg::Cure(msg.clone()),
                };
                let mut out = Vec::new();
                assert_eq!(encode_data_by_hand(&frame, &mut out), by_hand);
                assert_eq!(out.is_empty(), !by_hand, "a refusal leaves nothing");
                let bytes = encode(&frame).expect("encodes");
                assert_eq!(bytes[..], postcard::to_allocvec(&frame).unwrap()[..]);
                assert!(matches!(decode(&bytes), Ok(PeerFrame::Data { .. })));
            }
        }
    }
}
