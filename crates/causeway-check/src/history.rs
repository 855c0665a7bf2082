//! The history model: per transaction its session, DC, kind, optional type label, start
//! and end times, its operations in order (reads with the write ids they observed, writes with their unique
//! op id) and its outcome; plus the final reads taken at every DC after the run healed and
//! quiesced, for the convergence check.

use causeway_core::clock::Nanos;
use causeway_core::{DcId, Key, ObjType, ObjValue, OpId, SessionId, TxnId, TxnKind, Update};

/// One operation of a transaction, in program order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HOp {
    Read {
        key: Key,
        obj: ObjType,
        value: ObjValue,
        observed: Vec<OpId>,
    },
    Write {
        key: Key,
        update: Update,
        id: OpId,
    },
}

/// How a transaction ended. `Unknown`: the client gave up (timeout, crash) without
/// learning the outcome; its writes may or may not be visible.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Committed,
    Aborted,
    Unknown,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnRecord {
    pub id: TxnId,
    pub session: SessionId,
    pub dc: DcId,
    pub kind: TxnKind,
    /// The transaction's type (`registerUser`, `storeBid`, ...), which a declared conflict
    /// relation names ([`crate::conflict`]); `None` for an ad-hoc transaction.
    pub label: Option<String>,
    pub start_ns: Nanos,
    pub end_ns: Nanos,
    pub ops: Vec<HOp>,
    pub outcome: Outcome,
}

/// A read of one key at one DC after healing and quiescence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FinalRead {
    pub dc: DcId,
    pub key: Key,
    pub obj: ObjType,
    pub value: ObjValue,
    pub observed: Vec<OpId>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct History {
    pub txns: Vec<TxnRecord>,
    pub finals: Vec<FinalRead>,
}
