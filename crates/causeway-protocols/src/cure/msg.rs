//! Cure's messages: session to coordinator, coordinator to partition (READ_KEY, 2PC),
//! partition to sibling partition in another DC (replication), node to node inside a DC
//! (GSS and GC exchange).

use crate::kit::certify::{CertEntry, CertTxn};
use crate::kit::paxos;
use crate::kit::txn::ReadId;
use causeway_core::crdt::{Effect, ObjType, Object, Op, Update};
use causeway_core::{Error, Key, OpId, PartitionId, ReadValue, TxnId, TxnKind, Vc};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A committed transaction's updates of one partition, as replicated (Alg. 2 l.29).
///
/// The ops are shared: the replication log keeps the txn until every sibling has it, and
/// each stream piece to a sibling is a copy of it; copying the keys and values for each
/// was a tenth of a 3-DC cluster's instructions per SET (`machine_txn`, BENCHMARKS.md).
/// Serialized as the ops themselves.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplTxn {
    pub txn: TxnId,
    pub ct: Vc,
    pub ops: Arc<Vec<(Key, Op)>>,
}

/// A contiguous piece of one origin DC's replication stream for one partition: every
/// txn of `origin` with `from < ct[origin] <= upto` that the receiver may lack. Empty
/// `txns` is a heartbeat (Alg. 2 l.25).
pub type Stream = crate::kit::repl::Stream<ReplTxn>;

impl crate::kit::repl::Replicated for ReplTxn {
    fn id(&self) -> TxnId {
        self.txn
    }
    /// The commit vector's entry of its origin DC (Alg. 2 l.27: streams in `ct[d]` order).
    fn time_at(&self, origin: causeway_core::DcId) -> u64 {
        self.ct.get(usize::from(origin.0))
    }
}

/// Updates as the session buffered them, with the op ids it assigned.
pub type Updates = Vec<(Key, Update, OpId)>;

/// The first request of a txn, sent with its START ([`Msg::StartWith`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum First {
    Read {
        req: u64,
        keys: Vec<(Key, ObjType)>,
        updates: Updates,
    },
    Commit {
        req: u64,
        updates: Updates,
    },
    /// A read followed by only updates and the commit (`kit::session` read-then-commit):
    /// the read (seeing `updates`, not `then`), then the commit with `then` added. The
    /// session gets the `ReadResult`, then the `CommitResult` (both with `req`), or both
    /// in one `ReadCommitResult` when the read was served and committed in one step at
    /// the coordinator's own partition (`coord.rs`, direct).
    ReadCommit {
        req: u64,
        keys: Vec<(Key, ObjType)>,
        updates: Updates,
        then: Updates,
    },
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    // ---- session -> coordinator ----
    /// START_TRANSACTION(cvc) (Alg. 1 l.1) with the txn's first request riding along (one
    /// round trip instead of two): sent to the node owning the first key's partition, so
    /// a single-partition read or write is served where the data is (one-hop reads,
    /// one-phase commits).
    StartWith {
        txn: TxnId,
        kind: TxnKind,
        /// The txn's type (strong txns under a declared conflict relation), else None.
        label: Option<String>,
        cvc: Vc,
        first: First,
        /// Whether the txn's read answers carry `ReadValue::observed`
        /// (`ClientSession::skip_observed`).
        observed: bool,
    },
    /// READ_OBJECTS, carrying the updates buffered since the last request.
    Read {
        txn: TxnId,
        req: u64,
        keys: Vec<(Key, ObjType)>,
        updates: Updates,
    },
    /// COMMIT, carrying the updates buffered since the last request.
    Commit {
        txn: TxnId,
        req: u64,
        updates: Updates,
    },
    Abort {
        txn: TxnId,
    },
    // ---- coordinator -> session ----
    /// The values read, with the txn's snapshot (a read-only txn commits at it without
    /// another message).
    ReadResult {
        txn: TxnId,
        req: u64,
        result: Result<(Vec<ReadValue>, Vc), Error>,
    },
    /// The commit vector (or the snapshot of a read-only txn), or why it aborted.
    CommitResult {
        txn: TxnId,
        req: u64,
        result: Result<Vc, Error>,
    },
    /// A direct read-then-commit's `ReadResult` (which succeeded) and `CommitResult` in
    /// one message: the read's answer waits for the commit's, which the session waits
    /// for anyway, and saves a message and a session turn per INCR or SADD.
    ReadCommitResult {
        txn: TxnId,
        req: u64,
        read: (Vec<ReadValue>, Vc),
        commit: Result<Vc, Error>,
    },
    // ---- coordinator <-> partition ----
    /// READ_KEY(svc, keys) (Alg. 1 l.19, Alg. 2 l.1).
    ReadKeys {
        /// Unique across the coordinator's restarts (`kit::txn::ReadId`).
        rid: ReadId,
        partition: PartitionId,
        svc: Vc,
        keys: Vec<(Key, ObjType)>,
    },
    ReadReply {
        rid: ReadId,
        partition: PartitionId,
        objects: Vec<(Key, Result<Object, Error>)>,
    },
    /// PREPARE(T, ws\[p\], svc) (Alg. 1 l.29, Alg. 2 l.6). `one_phase`: the txn updates
    /// only this partition, which commits it at its prepare time on its own (one-phase
    /// commit, docs/ARCHITECTURE.md) and answers with `OnePhaseDone`.
    Prepare {
        txn: TxnId,
        partition: PartitionId,
        svc: Vc,
        updates: Updates,
        one_phase: bool,
    },
    /// A one-phase commit is durable at the partition: the txn's commit vector, to a
    /// coordinator on another node (one on the partition's node learns it without a
    /// message: `Deferred::OnePhase::here`).
    OnePhaseDone {
        txn: TxnId,
        partition: PartitionId,
        ct: Vc,
    },
    /// The prepare time (Alg. 2 l.11), or why the partition cannot prepare.
    Prepared {
        txn: TxnId,
        partition: PartitionId,
        result: Result<u64, Error>,
    },
    /// COMMIT(T, ct) (Alg. 1 l.35, Alg. 2 l.13).
    CommitTxn {
        txn: TxnId,
        partition: PartitionId,
        ct: Vc,
    },
    CommitAck {
        txn: TxnId,
        partition: PartitionId,
    },
    AbortTxn {
        txn: TxnId,
        partition: PartitionId,
    },
    /// A participant asking what became of a txn it holds prepared.
    Inquire {
        txn: TxnId,
        partition: PartitionId,
    },
    // ---- partition <-> sibling partition in another DC ----
    /// REPLICATE_TX / HEARTBEAT (Alg. 2 l.25-37) plus the sender's `pvc` as acknowledgement.
    /// The piece is shared by every sibling that gets it, and encoded once (`wire.rs`).
    Repl {
        partition: PartitionId,
        restarted: bool,
        acks: Vc,
        stream: Option<crate::kit::wire::SharedStream<ReplTxn>>,
    },
    /// A chunk of a state transfer to a sibling that lacks txns our log dropped
    /// (`transfer.rs`); the last one (maybe empty) completes it.
    Transfer {
        partition: PartitionId,
        chunk: crate::kit::transfer::Chunk<Vc>,
        /// UniStore with strong txns: the first chunk carries the sender's certification
        /// state at the images' moment (`strong_transfer.rs`).
        strong: Option<Box<crate::kit::certify::StrongImage>>,
    },
    // ---- node <-> node inside a DC ----
    /// UPDATE_GSS (Alg. 2 l.41): the min `pvc` of the sender's partitions (`None` if it
    /// hosts none), its GSS, and the oldest snapshot it may still serve (for GC, §III-D).
    Stable {
        pvc: Option<Vc>,
        gss: Vc,
        oldest: Vc,
    },
    // ---- UniStore: node <-> sibling node in another DC ----
    /// STABLEVEC(d, stableVec) (UniStore Alg. 2 l.25): the sender DC's stable vector.
    StableVec {
        stable: Vc,
    },
    // ---- UniStore: session <-> node ----
    /// UNIFORM_BARRIER(V) (UniStore Alg. 1 l.49).
    Barrier {
        req: u64,
        past: Vc,
    },
    /// ATTACH(V) (UniStore Alg. 1 l.51).
    Attach {
        req: u64,
        past: Vc,
    },
    /// The barrier or attach of request `req` holds.
    WaitDone {
        req: u64,
        result: Result<(), Error>,
    },
    // ---- UniStore strong txns (strong.rs) ----
    /// Coordinator -> partition of its DC: the effects of a strong txn's updates at its
    /// snapshot (computed where the snapshot is readable, then certified everywhere).
    StrongEffects {
        txn: TxnId,
        partition: PartitionId,
        svc: Vc,
        updates: Updates,
    },
    Effects {
        txn: TxnId,
        partition: PartitionId,
        result: Result<Vec<(Key, OpId, Effect)>, Error>,
    },
    /// CERTIFY (Alg. 3 l.3): one partition's part of a strong txn, to its group's leader
    /// (any member forwards it there once: `forwarded`).
    CertPrepare {
        partition: PartitionId,
        t: Box<CertTxn>,
        forwarded: bool,
    },
    /// A partition's vote (its leader's, once the vote is in the log).
    CertVote {
        txn: TxnId,
        partition: PartitionId,
        vote: Result<u64, String>,
    },
    /// The txn is decided at that partition already (`Some(ts)`: committed at `ts`).
    CertDecided {
        txn: TxnId,
        partition: PartitionId,
        commit: Option<u64>,
    },
    /// The decision, to a participant's leader, which appends it to its log.
    CertDecide {
        txn: TxnId,
        partition: PartitionId,
        commit: Option<u64>,
        forwarded: bool,
    },
    /// A recovery coordinator asks for the partition's vote on an orphaned txn.
    CertQuery {
        txn: TxnId,
        partition: PartitionId,
    },
    /// A message of the partition's consensus group (kit::paxos).
    Paxos {
        partition: PartitionId,
        msg: paxos::Msg<CertEntry>,
    },
    /// Leader -> members: every member decided the group's slots below `below`
    /// (`strong_gc.rs`: each may forget them once applied).
    StrongGc {
        partition: PartitionId,
        below: paxos::Slot,
    },
    /// A member that needs a snapshot of the group (its catch-up was answered
    /// `Truncated`) asks the member that truncated for a state transfer
    /// (`strong_transfer.rs`).
    TransferAsk {
        partition: PartitionId,
    },
    /// `Request::ListKeys`, session to the node listing a partition (`kit::keys`).
    ListKeys(crate::kit::keys::ListAsk),
    /// The answer to `ListKeys`.
    KeysListed(crate::kit::keys::ListAnswer),
    /// A member's acceptance, durable, of a Prepare carrying its leader's vote, to the
    /// coordinator: `f + 1` of one ballot are the partition's vote ([19]).
    CertAck {
        txn: TxnId,
        partition: PartitionId,
        ballot: paxos::Ballot,
        vote: Result<u64, String>,
    },
}
