//! PaRiS's messages (session to coordinator, coordinator to partition replicas, replica
//! to replica, stabilization) and what a node persists ([`Record`]).

use crate::kit::txn::ReadId;
use causeway_core::crdt::{Effect, ObjType, Object, Op, Update};
use causeway_core::{DcId, Error, Key, NodeId, OpId, PartitionId, TxnId, Vc};
use serde::{Deserialize, Serialize};

/// A committed txn's writes at one partition, as applied and replicated (Alg. 4 l.15).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplTxn {
    pub txn: TxnId,
    pub ct: u64,
    pub ops: Vec<(Key, Op)>,
}

/// A piece goes on the wire in its own encoding, once for every sibling (`kit::wire`).
impl crate::kit::wire::WireForm for ReplTxn {}

impl crate::kit::repl::Replicated for ReplTxn {
    fn id(&self) -> TxnId {
        self.txn
    }
    /// Every replica streams its own txns in commit-time order (Alg. 4 l.10-16).
    fn time_at(&self, _origin: DcId) -> u64 {
        self.ct
    }
}

/// A piece of one origin replica's stream for one partition; empty = heartbeat.
pub type Stream = crate::kit::repl::Stream<ReplTxn>;

/// Updates as the session buffered them, with the op ids it assigned.
pub type Updates = Vec<(Key, Update, OpId)>;

/// Effects a participant computed for a txn: (key, op id, effect).
pub type Effects = Vec<(Key, OpId, Effect)>;

/// Objects read, per key (an error for a key that could not be read).
pub type Objects = Vec<(Key, Result<Object, Error>)>;
/// A READ's answer: the txn's snapshot and the objects.
pub type ReadAnswer = Result<(u64, Objects), Error>;
/// A COMMIT's answer: commit time, snapshot and the committed ops (for the cache).
pub type CommitAnswer = Result<(u64, u64, Vec<(Key, Op)>), Error>;

/// START_TX (Alg. 1 l.2, Alg. 2 l.1-5), riding with the txn's first request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Start {
    /// `ust_c` (PaRiS) or the client's highest seen snapshot / write time (BPR).
    pub ust: u64,
    /// Writes in the client's cache (measured: cache size per client).
    pub cache_len: u32,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    // ---- session -> coordinator ----
    /// READ (Alg. 1 l.15): the keys the client cannot serve itself.
    Read {
        txn: TxnId,
        req: u64,
        start: Option<Start>,
        keys: Vec<(Key, ObjType)>,
    },
    /// COMMIT (Alg. 1 l.27) with `hwt_c`, the write set and the client's cached writes
    /// of the written keys (the effects of a set remove must see them).
    Commit {
        txn: TxnId,
        req: u64,
        start: Option<Start>,
        hwt: u64,
        updates: Updates,
        cached: Vec<(Key, Op)>,
    },
    Abort {
        txn: TxnId,
    },
    // ---- coordinator -> session ----
    /// The objects read at the txn's snapshot, and the snapshot.
    ReadResult {
        txn: TxnId,
        req: u64,
        result: ReadAnswer,
    },
    /// The commit time, the snapshot and the committed ops (for the client's cache).
    CommitResult {
        txn: TxnId,
        req: u64,
        result: CommitAnswer,
    },
    // ---- coordinator <-> partition replica ----
    /// ReadSliceReq (Alg. 2 l.12, Alg. 3 l.1).
    ReadSlice {
        rid: ReadId,
        partition: PartitionId,
        snapshot: u64,
        keys: Vec<(Key, ObjType)>,
    },
    ReadSliceReply {
        rid: ReadId,
        partition: PartitionId,
        objects: Vec<(Key, Result<Object, Error>)>,
    },
    /// PrepareReq (Alg. 2 l.24, Alg. 3 l.9).
    Prepare {
        txn: TxnId,
        partition: PartitionId,
        snapshot: u64,
        ht: u64,
        updates: Updates,
        cached: Vec<(Key, Op)>,
        /// The txn writes this partition only: commit it here at the proposed time, and
        /// vote once that commit is durable (one-phase commit).
        one_phase: bool,
    },
    /// PrepareResp: the proposed time and the effects, or why the txn cannot commit.
    Prepared {
        txn: TxnId,
        partition: PartitionId,
        result: Result<(u64, Effects), Error>,
    },
    /// CommitReq (Alg. 2 l.29, Alg. 3 l.15).
    CommitTxn {
        txn: TxnId,
        partition: PartitionId,
        ct: u64,
    },
    CommitAck {
        txn: TxnId,
        partition: PartitionId,
    },
    AbortTxn {
        txn: TxnId,
        partition: PartitionId,
    },
    /// A participant asks about a txn prepared for long (presumed abort).
    Inquire {
        txn: TxnId,
        partition: PartitionId,
    },
    // ---- replica -> sibling replica (Alg. 4 l.15, l.20) ----
    Repl {
        partition: PartitionId,
        restarted: bool,
        /// The sender's `VV` of this partition, by DC: acknowledgements.
        acks: Vc,
        /// Shared by every sibling that gets the piece, and encoded once (`kit::wire`).
        stream: Option<crate::kit::wire::SharedStream<ReplTxn>>,
    },
    /// A chunk of a state transfer to a replica that lacks txns our log dropped
    /// (`transfer.rs`).
    Transfer {
        partition: PartitionId,
        chunk: crate::kit::transfer::Chunk<u64>,
    },
    // ---- stabilization (Alg. 4 l.34-38) ----
    /// Node -> nodes of its DC: the minimum of its partitions' `VV` entries (`None`:
    /// hosts none) and its oldest snapshot in use.
    Stable {
        vv_min: Option<u64>,
        oldest: u64,
    },
    /// DC root -> other DCs' roots: the DC's GST and oldest snapshot.
    Gst {
        gst: Option<u64>,
        oldest: u64,
    },
    /// DC root -> its DC's nodes: the UST and the global oldest snapshot (GC point).
    Ust {
        ust: u64,
        gc: u64,
    },
    /// `Request::ListKeys`, session to the node listing a partition (`kit::keys`).
    ListKeys(crate::kit::keys::ListAsk),
    /// The answer to `ListKeys`.
    KeysListed(crate::kit::keys::ListAnswer),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Record {
    /// Timestamps up to `until` may be claimed; recovery starts the clock above it.
    Lease { until: u64 },
    /// A participant's prepared txn (Alg. 3 l.13), with its effects.
    Prepare {
        partition: PartitionId,
        txn: TxnId,
        coord: NodeId,
        pt: u64,
        ops: Effects,
    },
    /// A participant's commit (Alg. 3 l.17-19).
    Commit {
        partition: PartitionId,
        txn: TxnId,
        ct: u64,
    },
    /// A participant's abort of a prepared txn: until it is durable the txn keeps
    /// holding `VV[own]` below it (recovery would resurrect it otherwise).
    Abort { partition: PartitionId, txn: TxnId },
    /// Txns received from a sibling replica, and the stream claim they complete.
    Remote {
        partition: PartitionId,
        origin: DcId,
        upto: u64,
        txns: Vec<ReplTxn>,
    },
    /// A coordinator's commit decision, durable before any COMMIT or answer leaves.
    Decision {
        txn: TxnId,
        ct: u64,
        participants: Vec<(PartitionId, NodeId)>,
    },
    /// A decision every participant acknowledged.
    Ended { txn: TxnId },
    /// A checkpoint standing for every record persisted before it (log compaction, issue
    /// 15; `checkpoint.rs`). Always the first record replayed when present; the last
    /// variant, so older logs decode unchanged.
    Checkpoint(Box<Checkpoint>),
    /// A chunk of a state transfer received from replica DC `from` (`transfer.rs`):
    /// replay buffers it until its `TransferDone`.
    TransferChunk {
        partition: PartitionId,
        from: DcId,
        chunk: crate::kit::transfer::Chunk<u64>,
    },
    /// Every chunk of transfer `id` from `from` arrived and was installed.
    TransferDone {
        partition: PartitionId,
        from: DcId,
        id: u64,
    },
    /// A txn that writes one partition, prepared and committed here at once (one-phase
    /// commit): its commit time is its proposed time. A variant at the end, so older logs
    /// keep their tags.
    OnePhase {
        partition: PartitionId,
        txn: TxnId,
        coord: NodeId,
        pt: u64,
        ops: Effects,
    },
}

/// A committed, not yet applied txn kept in a checkpoint: (commit time, txn), its ops.
pub type KeptCommit = ((u64, TxnId), Vec<(Key, Op)>);
/// A coordinator decision kept in a checkpoint: txn, commit time, participants.
pub type KeptDecision = (TxnId, u64, Vec<(PartitionId, NodeId)>);

/// What replaying a node's records up to a quiescent moment gives, and nothing volatile.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The durable lease (`Record::Lease`).
    pub lease: u64,
    /// The highest timestamp prepared or committed: recovery starts the clock above it.
    pub last: u64,
    /// The node's UST: a stable time stays stable, and the stores below were folded at
    /// or below it, so a restarted node must not serve snapshots under it.
    pub ust: u64,
    pub parts: Vec<PartCheckpoint>,
    /// Coordinator decisions not yet acknowledged by every participant.
    pub decisions: Vec<KeptDecision>,
}

/// One partition replica's durable state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartCheckpoint {
    pub partition: PartitionId,
    /// Applied versions on top of each key's folded base.
    pub store: crate::kit::mvstore::Store<u64>,
    /// Txns prepared here and not yet decided: (txn, coordinator, prepare time, effects).
    pub prepared: Vec<(TxnId, NodeId, u64, Effects)>,
    /// Txns durably committed here and not yet applied (`Committed`, Alg. 3 l.19).
    pub committed: Vec<KeptCommit>,
    /// `VV`: the sibling entries (`Remote` records' claims) and ours (what was installed).
    pub vv: Vc,
    /// Per origin, the stream received.
    pub received: crate::kit::repl::Received,
    /// Applied txns not yet acknowledged by every live sibling, for catch-up.
    pub log: crate::kit::repl::ReplLog<ReplTxn>,
    /// Txns a state transfer added that a stream may still deliver.
    pub transferred: Vec<(TxnId, u64)>,
}

impl Record {
    pub fn encode(&self) -> Vec<u8> {
        postcard::to_allocvec(self).expect("a paris record always encodes")
    }

    pub fn decode(index: usize, bytes: &[u8]) -> Result<Record, String> {
        postcard::from_bytes(bytes).map_err(|e| format!("paris: record {index} is corrupt: {e}"))
    }
}
