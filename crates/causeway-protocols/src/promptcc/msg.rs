//! PrompTCC's messages (client library to partitions, partition to partition) and what a
//! node persists ([`Record`]).

use super::config::Wire;
use causeway_core::crdt::{Effect, ObjType, Object, Update};
use causeway_core::{Addr, Error, Key, OpId, PartitionId, TxnId, Vc};
use serde::{Deserialize, Serialize};

/// Updates as the session buffered them, with the op ids it assigned.
pub type Updates = Vec<(Key, Update, OpId)>;
/// Effects a participant computed: (key, op id, effect).
pub type Effects = Vec<(Key, OpId, Effect)>;
/// Objects read, per key.
pub type Objects = Vec<(Key, Result<Object, Error>)>;

/// Which read a partition serves.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReadKind {
    /// Round one (Alg. 2 l.36-44): merge `D_c`, the most recent visible versions.
    Latest { deps: Wire },
    /// Round two, or a read at a fixed snapshot (Alg. 2 l.45-53): merge the bound, the
    /// latest versions with timestamps `<=` it.
    Bounded { bound: Wire },
    /// Eiger's round three (§II l.82): the read at round two's bound, answered once no txn
    /// open at the partition may be in it (the partition holds it until then).
    Wait { bound: Wire },
    /// Eiger's round two: a bounded read that also carries the read's effective time (the
    /// largest EVT round one saw), for Eiger's pending check.
    At { bound: Wire, time: u64 },
    /// Eiger's round one: [`ReadKind::Latest`] plus the client's logical time, which the
    /// node's logical clock takes (Lamport).
    Clocked { deps: Wire, time: u64 },
}

impl ReadKind {
    /// Round one: the most recent visible versions.
    pub fn latest(&self) -> bool {
        matches!(self, ReadKind::Latest { .. } | ReadKind::Clocked { .. })
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    // ---- client -> partition ----
    Read {
        rid: u64,
        partition: PartitionId,
        keys: Vec<(Key, ObjType)>,
        kind: ReadKind,
        /// The first request of a READ (counts reads, and reads needing round two).
        first: bool,
    },
    /// Wren: the node's snapshot vector, to read at.
    Snapshot {
        rid: u64,
    },
    /// write_request (Alg. 1 l.7): the partition's writes, `P(T)`, the coordinator, the
    /// dependencies (`D_c` joined with the txn's snapshot) and the snapshot the effects
    /// are computed at (None: what is visible after merging the dependencies).
    Write {
        txn: TxnId,
        req: u64,
        partition: PartitionId,
        updates: Updates,
        parts: Vec<PartitionId>,
        coord: PartitionId,
        deps: Wire,
        snapshot: Option<Wire>,
    },
    // ---- partition -> client ----
    /// read_response (Alg. 2 l.43, l.52): the objects, their timestamps (one local max
    /// read timestamp, or one per key with full vectors) and the visible frontier.
    ReadReply {
        rid: u64,
        partition: PartitionId,
        objects: Objects,
        ts: Vec<Wire>,
        vis: u64,
        /// The node's snapshot vector `S`: in every reply of the naive wire; in PrompTCC's,
        /// in the first partition's round-one reply (`session.rs` `snapshot_of`) and in
        /// every round-one reply with `vis < S[i]` (the round-two test, `consistent`).
        snapshot: Option<Wire>,
    },
    SnapshotReply {
        rid: u64,
        snapshot: Wire,
    },
    /// The partition committed the txn at sequence number `seq` (durably).
    Committed {
        txn: TxnId,
        req: u64,
        partition: PartitionId,
        seq: u64,
    },
    WriteFailed {
        txn: TxnId,
        req: u64,
        partition: PartitionId,
        error: Error,
    },
    // ---- partition -> partition ----
    /// prepared (Alg. 2 l.8): participant -> coordinator.
    Prepared {
        txn: TxnId,
        partition: PartitionId,
        seq: u64,
        parts: Vec<PartitionId>,
    },
    /// A participant refused the txn: the coordinator aborts it everywhere.
    Refused {
        txn: TxnId,
    },
    /// commit (Alg. 2 l.16): the final timestamp's participant entries.
    Commit {
        txn: TxnId,
        final_ts: Vec<(PartitionId, u64)>,
    },
    Abort {
        txn: TxnId,
    },
    /// Recovery (§VIII): does the participant hold the txn? (It fences it if not.)
    Query {
        txn: TxnId,
    },
    Status {
        txn: TxnId,
        partition: PartitionId,
        seq: Option<u64>,
    },
    /// Stabilization (§IV-E): the sender's partitions' committed prefixes `S[i]`.
    Stable {
        entries: Vec<(PartitionId, u64)>,
    },
    // ---- partition -> client, Eiger (last: the others' encodings stay as they were) ----
    /// Eiger: a round-two read at this partition may need a version of a txn still open
    /// here (partially committed, §II l.82): no values, run round three.
    ReadPending {
        rid: u64,
        partition: PartitionId,
    },
    /// Eiger's round-one read_response: a [`Msg::ReadReply`] plus the validity interval
    /// of what it read: `evt`, the latest logical time at which a version of a key read
    /// became visible there, and `lvt`, the node's logical clock, up to which they are the
    /// latest.
    EigerReadReply {
        rid: u64,
        partition: PartitionId,
        objects: Objects,
        ts: Vec<Wire>,
        vis: u64,
        snapshot: Option<Wire>,
        evt: u64,
        lvt: u64,
    },
    /// `Request::ListKeys`, session to the node listing a partition (`kit::keys`).
    ListKeys(crate::kit::keys::ListAsk),
    /// The answer to `ListKeys`.
    KeysListed(crate::kit::keys::ListAnswer),
}

/// A prepared write-only txn at a participant, as persisted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreparedTxn {
    pub txn: TxnId,
    pub seq: u64,
    pub parts: Vec<PartitionId>,
    pub coord: PartitionId,
    pub tentative: Vc,
    pub ops: Effects,
    pub session: Addr,
    pub req: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Record {
    Prepare {
        partition: PartitionId,
        t: Box<PreparedTxn>,
    },
    Commit {
        partition: PartitionId,
        seq: u64,
        final_ts: Vec<(PartitionId, u64)>,
    },
    Abort {
        partition: PartitionId,
        seq: u64,
    },
    Fence {
        partition: PartitionId,
        txn: TxnId,
    },
    /// A checkpoint standing for every record persisted before it (log compaction, issue
    /// 15; `checkpoint.rs`). Always the first record replayed when present; the last
    /// variant, so older logs decode unchanged.
    Checkpoint(Box<Checkpoint>),
}

/// What a node's records give at a quiescent moment, plus the facts a GC-folded store
/// needs kept (`S`, the visible join).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// `S`: committed prefixes of every partition as far as this node knew (facts that
    /// stay true).
    pub s: Vc,
    pub parts: Vec<super::part::PartCheckpoint>,
}

impl Record {
    pub fn encode(&self) -> Vec<u8> {
        postcard::to_allocvec(self).expect("a promptcc record always encodes")
    }

    pub fn decode(index: usize, bytes: &[u8]) -> Result<Record, String> {
        postcard::from_bytes(bytes).map_err(|e| format!("promptcc: record {index} is corrupt: {e}"))
    }
}
