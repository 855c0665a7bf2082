//! Identifiers (DC, partition, node, session, transaction, operation) and the key and
//! value byte strings. Every id is a small copyable value with a total order so that maps
//! keyed by ids iterate deterministically.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A data center, numbered from 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DcId(pub u16);

/// A logical partition (shard) of the key space, numbered from 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PartitionId(pub u32);

/// A server process, numbered from 0 across the whole cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NodeId(pub u32);

/// A client session, unique across the cluster for the cluster's lifetime.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SessionId(pub u64);

/// A transaction: the session that ran it and its sequence number in that session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TxnId {
    pub session: SessionId,
    pub seq: u64,
}

/// One update operation: its transaction and its index inside the transaction. Globally
/// unique, so replicas apply each operation exactly once and histories name versions by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct OpId {
    pub txn: TxnId,
    pub index: u32,
}

/// Where a message goes: a server node or a client session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Addr {
    Node(NodeId),
    Client(SessionId),
}

/// A key: an arbitrary byte string.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Key(#[serde(with = "serde_bytes")] pub Vec<u8>);

/// A value stored in a register or a set: an arbitrary byte string.
pub type Value = Vec<u8>;

impl Key {
    pub fn new(bytes: impl Into<Vec<u8>>) -> Key {
        Key(bytes.into())
    }
}

impl From<&str> for Key {
    fn from(s: &str) -> Key {
        Key(s.as_bytes().to_vec())
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self)
    }
}

impl fmt::Display for Key {
    /// UTF-8 keys print as themselves; other bytes print as `\xNN` escapes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&escape_bytes(&self.0))
    }
}

/// Renders bytes as text: printable ASCII as is, everything else (and `\`) as `\xNN`.
pub fn escape_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        if (0x20..0x7f).contains(&b) && b != b'\\' {
            out.push(b as char);
        } else {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// Inverse of [`escape_bytes`]; `None` on a malformed escape.
pub fn unescape_bytes(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            let hex = text.get(i + 2..i + 4)?;
            if bytes.get(i + 1) != Some(&b'x') {
                return None;
            }
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
}

impl fmt::Display for TxnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "s{}.t{}", self.session.0, self.seq)
    }
}

impl fmt::Display for OpId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.o{}", self.txn, self.index)
    }
}

impl OpId {
    /// Parses the `s1.t2.o3` form written by `Display`.
    pub fn parse(text: &str) -> Option<OpId> {
        let mut parts = text.split('.');
        let session = parts.next()?.strip_prefix('s')?.parse().ok()?;
        let seq = parts.next()?.strip_prefix('t')?.parse().ok()?;
        let index = parts.next()?.strip_prefix('o')?.parse().ok()?;
        if parts.next().is_some() {
            return None;
        }
        Some(OpId {
            txn: TxnId {
                session: SessionId(session),
                seq,
            },
            index,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_round_trips_arbitrary_bytes() {
        let raw = vec![b'a', 0, 255, b'\\', b'z'];
        let text = escape_bytes(&raw);
        assert_eq!(text, "a\\x00\\xff\\x5cz");
        assert_eq!(unescape_bytes(&text), Some(raw));
        assert_eq!(unescape_bytes("\\q00"), None);
    }

    #[test]
    fn op_id_text_round_trips() {
        let id = OpId {
            txn: TxnId {
                session: SessionId(7),
                seq: 3,
            },
            index: 2,
        };
        assert_eq!(id.to_string(), "s7.t3.o2");
        assert_eq!(OpId::parse("s7.t3.o2"), Some(id));
        assert_eq!(OpId::parse("s7.t3"), None);
    }
}
