//! The client-facing transaction API, the same for every protocol: what an application
//! asks a session to do ([`Request`]) and what it gets back ([`Response`]).

use crate::crdt::{ObjType, Update};
use crate::error::Error;
use crate::ids::{Key, OpId, TxnId, Value};
use serde::{Deserialize, Serialize};

/// Causal transactions run on a causal snapshot; strong ones are serialized with the
/// conflicting strong transactions (UniStore), where the protocol supports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TxnKind {
    Causal,
    Strong,
}

/// An application's call on its session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    Begin {
        kind: TxnKind,
        /// The transaction's type, for declared conflict relations (UniStore's RUBiS
        /// types): a strong transaction of a type no rule names is ad-hoc. At most
        /// `limits::TXN_LABEL_MAX` bytes.
        #[serde(default)]
        label: Option<String>,
    },
    /// Reads keys, each with the type the caller expects it to hold.
    Read {
        keys: Vec<(Key, ObjType)>,
    },
    Update {
        key: Key,
        update: Update,
    },
    Commit,
    Abort,
    /// Exports the session's causal past.
    Token,
    /// Adopts a causal past exported by another session.
    Attach {
        token: Vec<u8>,
    },
    /// Waits until everything the session has seen is durable in enough DCs.
    Barrier,
    /// Lists the keys of one partition, as the node of the session's DC holding it (its
    /// nearest replica where the DC holds none) stores them now: no snapshot, no
    /// replication ([`crate::keyorder`]). Outside a transaction only. Last, so the
    /// encodings above stay as they were.
    ListKeys {
        partition: crate::ids::PartitionId,
        /// The first key position to list ([`crate::keyorder::key_position`]).
        from: u64,
        /// Most keys to answer, at most `limits::LIST_KEYS_MAX`.
        max: u32,
    },
}

/// The value of a read object.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ObjValue {
    Lww(#[serde(with = "serde_bytes")] Option<Value>),
    Counter(i64),
    Set(Vec<Value>),
    MvReg(Vec<Value>),
    /// A hash's fields and their values, in field order. Last, so the encodings above
    /// stay as they were.
    Hash(Vec<(Value, Value)>),
    /// A list's elements, head first. Last, like the one above.
    List(Vec<Value>),
    /// A sorted set's members and their scores (`f64::to_bits`), in member order. Last,
    /// like the ones above.
    ZSet(Vec<(Value, u64)>),
}

/// One key's read result, with the write ids it observed (see `Object::observed`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadValue {
    pub key: Key,
    pub value: ObjValue,
    pub observed: Vec<OpId>,
}

/// A session's answer to a [`Request`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    Begun {
        txn: TxnId,
    },
    Values(Vec<ReadValue>),
    Updated {
        op: OpId,
    },
    Committed,
    Aborted {
        reason: String,
    },
    Token(Vec<u8>),
    Attached,
    BarrierDone,
    Error(Error),
    /// The answer to [`Request::ListKeys`]. Last, like it.
    Keys(KeyPage),
}

/// One page of a partition's keys ([`Request::ListKeys`]): keys that hold a value at the
/// node (a key whose newest state shows nothing, as after `DEL`, is left out), with the
/// type each shows, in position order ([`crate::keyorder`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyPage {
    pub keys: Vec<(Key, ObjType)>,
    /// The position to list from next; `None` when the partition has no more.
    pub next: Option<u64>,
    /// The cluster's partition count, so a caller can walk them all.
    pub partitions: u32,
}

/// Whose causal past a session hosted for a remote client starts each transaction from
/// (the runtime's `scope` module: a scope's sessions share their pasts through
/// [`crate::ClientSession::join_past`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionScope {
    /// Every connection of the node's endpoint (per user): a write acknowledged to one
    /// is in the snapshot of every transaction begun after it on any.
    #[default]
    Endpoint,
    /// The connection alone (the papers' client session).
    Connection,
}

impl SessionScope {
    pub fn name(self) -> &'static str {
        match self {
            SessionScope::Endpoint => "endpoint",
            SessionScope::Connection => "connection",
        }
    }

    /// For `skip_serializing_if`: the default is not written out.
    pub fn is_endpoint(&self) -> bool {
        *self == SessionScope::Endpoint
    }

    /// Parses `endpoint` or `connection`, in any case.
    pub fn parse(text: &str) -> Option<SessionScope> {
        match text.to_ascii_lowercase().as_str() {
            "endpoint" => Some(SessionScope::Endpoint),
            "connection" => Some(SessionScope::Connection),
            _ => None,
        }
    }
}
