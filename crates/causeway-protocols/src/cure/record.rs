//! What a Cure node persists, one postcard-encoded [`Record`] per durable write, and the
//! decoding used by recovery.

use super::msg::ReplTxn;
use crate::kit::mvstore::Store;
use crate::kit::repl::{Received, ReplLog};
use crate::kit::wire::WireForm;
use causeway_core::crdt::Effect;
use causeway_core::{Key, NodeId, OpId, PartitionId, TxnId, Vc};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Record {
    /// Timestamps up to `until` may be claimed; recovery starts the clock above it.
    Lease { until: u64 },
    /// A participant's prepared txn (Alg. 2 l.9-10), with the effects it computed.
    Prepare {
        partition: PartitionId,
        txn: TxnId,
        coord: NodeId,
        svc: Vc,
        prep_time: u64,
        ops: Vec<(Key, OpId, Effect)>,
    },
    /// A participant's commit of a prepared txn (Alg. 2 l.14).
    Commit {
        partition: PartitionId,
        txn: TxnId,
        ct: Vc,
    },
    /// Txns received from a sibling, and the stream claim they complete.
    Remote {
        partition: PartitionId,
        origin: causeway_core::DcId,
        upto: u64,
        txns: Vec<ReplTxn>,
    },
    /// A single-partition txn committed by its partition alone (one-phase commit): the
    /// prepare and the commit in one record.
    OnePhase {
        partition: PartitionId,
        txn: TxnId,
        coord: NodeId,
        ct: Vc,
        ops: Vec<(Key, OpId, Effect)>,
    },
    /// A coordinator's commit decision, persisted before any COMMIT leaves.
    Decision {
        txn: TxnId,
        ct: Vc,
        participants: Vec<(PartitionId, NodeId)>,
    },
    /// Decisions every participant acknowledged: recovery need not re-send them.
    Ended { txns: Vec<TxnId> },
    /// A record of the partition's certification group (kit::paxos), UniStore only.
    Paxos {
        partition: PartitionId,
        record: crate::kit::paxos::Record<crate::kit::certify::CertEntry>,
    },
    /// The node's state standing for every record before it (log compaction; see
    /// `checkpoint.rs`). Always the first record replayed when present. (Later variants
    /// go after it, so older logs' records keep their tags.)
    Checkpoint(Box<Checkpoint>),
    /// A chunk of a state transfer received from sibling DC `from` (`transfer.rs`):
    /// replay buffers it until its `TransferDone`.
    TransferChunk {
        partition: PartitionId,
        from: causeway_core::DcId,
        chunk: crate::kit::transfer::Chunk<Vc>,
    },
    /// Every chunk of transfer `id` from `from` arrived and was installed.
    TransferDone {
        partition: PartitionId,
        from: causeway_core::DcId,
        id: u64,
    },
    /// UniStore: the certification state that came with the first chunk of transfer `id`
    /// from `from` (`strong_transfer.rs`); replay holds it until the transfer's end.
    StrongImage {
        partition: PartitionId,
        from: causeway_core::DcId,
        image: Box<crate::kit::certify::StrongImage>,
    },
    /// UniStore: every chunk of transfer `id` arrived and was installed together with its
    /// certification state; the versions of `dropped` were removed from the store, to be
    /// delivered again by the adopted certifier (`strong_transfer.rs`).
    TransferAdopted {
        partition: PartitionId,
        from: causeway_core::DcId,
        id: u64,
        dropped: Vec<TxnId>,
    },
    /// A coordinator's commit of a multi-partition txn with participants on its own node,
    /// written once every participant prepared: the effects of those of this node (which
    /// prepared without a record) and the commit vector, and the participants elsewhere
    /// (as in `Decision`; none for a one-node commit). Its partitions here commit once it
    /// is durable.
    NodeCommit {
        txn: TxnId,
        ct: Vc,
        parts: Vec<(PartitionId, Effects)>,
        participants: Vec<(PartitionId, NodeId)>,
    },
    /// `Remote` with the txns in the replication stream's compact form (`wire.rs`): what
    /// a partition writes for a received piece (older logs' `Remote` records replay too).
    RemoteTxns {
        partition: PartitionId,
        origin: causeway_core::DcId,
        upto: u64,
        txns: super::wire::CompactTxns,
    },
    /// A received piece taken whole, as the bytes it came in (the compact form of
    /// `wire.rs`: origin, from, upto and its txns): what a replica writes instead of
    /// encoding the txns again. [`Record::decode`] gives it back as `RemoteTxns`.
    RemotePiece {
        partition: PartitionId,
        piece: serde_bytes::ByteBuf,
    },
}

/// A txn's effects as prepared: (key, op id, effect) per update.
pub type Effects = Vec<(Key, OpId, Effect)>;
/// A coordinator decision kept in a checkpoint: txn, commit vector, participants.
pub type KeptDecision = (TxnId, Vc, Vec<(PartitionId, NodeId)>);

/// What replaying a node's records up to a quiescent moment gives, and nothing volatile.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The durable lease (`Record::Lease`).
    pub lease: u64,
    /// The highest timestamp issued or read: recovery starts the clock above it.
    pub last: u64,
    pub parts: Vec<PartCheckpoint>,
    /// Coordinator decisions not yet acknowledged by every participant (`Decision`
    /// records without their `Ended`).
    pub decisions: Vec<KeptDecision>,
    /// UniStore's certification groups, one per hosted partition (`strong_gc.rs`).
    pub strong: Vec<GroupCheckpoint>,
}

/// One certification group member's durable state (`strong_gc.rs`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GroupCheckpoint {
    pub partition: PartitionId,
    /// The acceptor state (`Record::Paxos` records).
    pub paxos: crate::kit::paxos::Checkpoint<crate::kit::certify::CertEntry>,
    /// The certifier after every slot below `delivered`.
    pub cert: crate::kit::certify::Certifier,
    /// Every decided slot below this is in `cert` and the partition's store.
    pub delivered: crate::kit::paxos::Slot,
    /// The group's everywhere point as last heard.
    pub gc_below: crate::kit::paxos::Slot,
}

/// One partition's durable state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartCheckpoint {
    pub partition: PartitionId,
    /// Committed versions on top of each key's folded base (`Prepare`+`Commit`,
    /// `OnePhase`, `Remote` records).
    pub store: Store<Vc>,
    /// Txns prepared here and not yet decided: (txn, coordinator, prepare time, effects).
    pub prepared: Vec<(TxnId, NodeId, u64, Effects)>,
    /// The partition vector's remote entries (`Remote` records' claims).
    pub pvc: Vc,
    /// Per origin, the stream received (`Remote` records).
    pub received: Received,
    /// Committed txns not yet acknowledged by every live sibling, for catch-up.
    pub log: ReplLog<ReplTxn>,
    /// Txns a state transfer added that a stream may still deliver (`TransferDone`).
    pub transferred: Vec<(TxnId, Vc)>,
}

impl Record {
    /// The record at `index` of the log; a `RemotePiece` comes back as the `RemoteTxns`
    /// it stands for.
    pub fn decode(index: usize, bytes: &[u8]) -> Result<Record, String> {
        let corrupt = |e: String| format!("cure: record {index} is corrupt: {e}");
        match postcard::from_bytes(bytes).map_err(|e| corrupt(e.to_string()))? {
            Record::RemotePiece { partition, piece } => {
                let st = <ReplTxn as WireForm>::decode_piece(&piece).map_err(corrupt)?;
                Ok(Record::RemoteTxns {
                    partition,
                    origin: st.origin,
                    upto: st.upto,
                    txns: super::wire::CompactTxns(st.txns),
                })
            }
            record => Ok(record),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_core::SessionId;

    fn txn() -> TxnId {
        TxnId {
            session: SessionId(3),
            seq: 9,
        }
    }

    /// A log outlives the build that wrote it: a record's tag (postcard writes the
    /// variant's index first) must never change, so new variants go at the end of the
    /// enum. This pins the tags of records every Cure log holds, the first and the last
    /// variant among them; reordering the enum fails here before it corrupts a restart.
    #[test]
    fn each_record_keeps_the_tag_older_logs_were_written_with() {
        let ct = Vc::zero(2);
        let tagged = [
            (0, Record::Lease { until: 5 }),
            (
                2,
                Record::Commit {
                    partition: PartitionId(1),
                    txn: txn(),
                    ct: ct.clone(),
                },
            ),
            (
                5,
                Record::Decision {
                    txn: txn(),
                    ct: ct.clone(),
                    participants: vec![(PartitionId(1), NodeId(0))],
                },
            ),
            (6, Record::Ended { txns: vec![txn()] }),
            (
                13,
                Record::NodeCommit {
                    txn: txn(),
                    ct,
                    parts: Vec::new(),
                    participants: Vec::new(),
                },
            ),
            (
                14,
                Record::RemoteTxns {
                    partition: PartitionId(1),
                    origin: causeway_core::DcId(2),
                    upto: 7,
                    txns: super::super::wire::CompactTxns(Vec::new()),
                },
            ),
        ];
        for (tag, record) in tagged {
            let bytes = record.encode();
            assert_eq!(bytes[0], tag, "{record:?}");
            let back = Record::decode(0, &bytes).expect("decodes");
            assert_eq!(format!("{back:?}"), format!("{record:?}"));
        }
        let piece = Record::RemotePiece {
            partition: PartitionId(1),
            piece: serde_bytes::ByteBuf::from(Vec::new()),
        };
        assert_eq!(piece.encode()[0], 15);
    }

    /// A piece written as it came reads back as the txns it holds, and a piece whose
    /// bytes are not a piece is a corrupt record, not a panic.
    #[test]
    fn a_piece_written_as_it_came_reads_back_as_its_txns() {
        use super::super::wire::{commit_ts, CompactTxns, SharedStream};
        use causeway_core::crdt::Op;
        let ct = Vc {
            dcs: vec![3, 20],
            extra: Vec::new(),
        };
        let op = Op {
            id: OpId {
                txn: txn(),
                index: 0,
            },
            ts: commit_ts(&ct),
            effect: Effect::Assign(b"v".to_vec()),
        };
        let t = ReplTxn {
            txn: txn(),
            ct,
            ops: std::sync::Arc::new(vec![(Key::from("k"), op)]),
        };
        let st = super::super::msg::Stream {
            origin: causeway_core::DcId(1),
            from: 10,
            upto: 30,
            txns: vec![t.clone()],
        };
        let framed = postcard::to_allocvec(&SharedStream::new(st)).expect("encodes");
        let got: SharedStream = postcard::from_bytes(&framed).expect("decodes");
        let (_, bytes) = got.into_parts();
        let record = Record::RemotePiece {
            partition: PartitionId(2),
            piece: serde_bytes::ByteBuf::from(bytes.expect("Cure keeps a piece's bytes")),
        };
        let back = Record::decode(0, &record.encode()).expect("decodes");
        let want = Record::RemoteTxns {
            partition: PartitionId(2),
            origin: causeway_core::DcId(1),
            upto: 30,
            txns: CompactTxns(vec![t]),
        };
        assert_eq!(format!("{back:?}"), format!("{want:?}"));
        let bad = Record::RemotePiece {
            partition: PartitionId(2),
            piece: serde_bytes::ByteBuf::from(vec![0xff; 9]),
        };
        let e = Record::decode(4, &bad.encode()).expect_err("not a piece");
        assert!(e.starts_with("cure: record 4 is corrupt"), "{e}");
    }
}
