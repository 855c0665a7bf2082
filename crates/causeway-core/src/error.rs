//! Errors a client can see. Each says what happened in words a user can act on.

use crate::crdt::ObjType;
use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Error {
    /// An operation on a key of another type.
    WrongType { expected: ObjType, found: ObjType },
    /// The cluster's protocol lacks a capability.
    Unsupported {
        protocol: String,
        capability: String,
    },
    /// An input exceeded a limit.
    LimitExceeded { what: String, max: u64 },
    /// A call that is not valid in the session's current state (read outside a txn...).
    InvalidState(String),
    /// The transaction was aborted by the system.
    Aborted(String),
    /// The cluster could not serve the request now (node down, overloaded).
    Unavailable(String),
    /// A token from `Token` could not be decoded.
    BadToken(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::WrongType { expected, found } => write!(
                f,
                "WRONGTYPE operation against a key holding a {} object, not a {}",
                expected.name(),
                found.name()
            ),
            Error::Unsupported {
                protocol,
                capability,
            } => {
                write!(f, "protocol '{protocol}' does not support {capability}")
            }
            Error::LimitExceeded { what, max } => write!(f, "{what} exceeds the limit of {max}"),
            Error::InvalidState(why) => write!(f, "invalid in this state: {why}"),
            Error::Aborted(why) => write!(f, "transaction aborted: {why}"),
            Error::Unavailable(why) => write!(f, "unavailable: {why}"),
            Error::BadToken(why) => write!(f, "bad causal token: {why}"),
        }
    }
}

impl std::error::Error for Error {}
