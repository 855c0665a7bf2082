//! The history model: per transaction its session, DC, kind, optional type label, start
//! and end times, its operations in order (reads with the write ids they observed, writes
//! with their unique op id) and its outcome; the uniform barriers sessions completed; plus
//! the final reads taken at every DC after the run healed and quiesced, for the
//! convergence check; and, for protocols with a master per key, each key's version order
//! (`History::overwrites`).
//!
//! A session here is the client's *logical* session: a client that moves to another DC
//! (UniStore's ATTACH) keeps its history session while its transactions get ids from the
//! protocol session of the new DC, so `TxnRecord::id.session` may differ from
//! `TxnRecord::session`. Session order is [`session_order`]: by start time.

use causeway_core::clock::Nanos;
use causeway_core::{DcId, Key, ObjType, ObjValue, OpId, SessionId, TxnId, TxnKind, Update};
use std::collections::BTreeMap;

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

/// A uniform barrier (UniStore §5.6, `Request::Barrier`) that a session completed: its
/// causal past was then stored in enough DCs to survive the tolerated DC failures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BarrierRecord {
    /// The (logical) session that asked for it.
    pub session: SessionId,
    /// The DC the session was in.
    pub dc: DcId,
    pub start_ns: Nanos,
    pub end_ns: Nanos,
    /// How many of the session's transactions, in session order, precede the barrier.
    pub txns: usize,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct History {
    pub txns: Vec<TxnRecord>,
    pub finals: Vec<FinalRead>,
    pub barriers: Vec<BarrierRecord>,
    /// The version order of keys that have a master (Occult): for a write id, the write it
    /// directly overwrote at the key's master (`None`: it overwrote the initial value).
    /// Empty for protocols without a master per key; a write missing here is simply not
    /// placed in its key's version order ([`crate::pcpsi`] then derives fewer edges).
    pub overwrites: BTreeMap<OpId, Option<OpId>>,
}

/// Each session's transactions in session order, as indices into `history.txns`: by start
/// time, then end time, then sequence number (a session runs one transaction at a time;
/// sequence numbers restart when a session moves to a new protocol session).
pub fn session_order(history: &History) -> BTreeMap<SessionId, Vec<usize>> {
    let mut by_session: BTreeMap<SessionId, Vec<usize>> = BTreeMap::new();
    for (i, t) in history.txns.iter().enumerate() {
        by_session.entry(t.session).or_default().push(i);
    }
    for list in by_session.values_mut() {
        list.sort_by_key(|&i| {
            let t = &history.txns[i];
            (t.start_ns, t.end_ns, t.id.seq, t.id.session)
        });
    }
    by_session
}
