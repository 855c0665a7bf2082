//! The coordinator's state (Cure Alg. 1): its open txns with what each is doing, the
//! STARTs waiting for the GSS, and the commit decisions until every participant has them.
//! The handlers that drive it are `coord.rs`'s; this file imports none of the node's
//! parts, so `node.rs` holds a [`Coord`] without importing the handlers back.

use super::msg::{First, Msg, Updates};
use super::part::Phase;
use crate::kit::twopc::{Decisions, Votes};
use crate::kit::txn::TxnBuffer;
use causeway_core::{
    Addr, Ctx, Error, Key, NodeId, Object, PartitionId, ReadValue, TxnId, TxnKind, Vc,
};
use std::collections::BTreeMap;

/// What an open txn is doing.
#[derive(Debug)]
pub(crate) enum Step<S> {
    Idle,
    /// A commit the extension runs (UniStore: a strong txn's COMMIT_STRONG, its
    /// `strong.rs`), as the extension's own type ([`Extension::TxnStep`]).
    Ext(S),
    /// A direct read-then-commit's read, parked at its partition here (`direct.rs`).
    ReadingHere {
        req: u64,
    },
    /// A read of partitions of other nodes, or of several (`ReadId { txn, req }` names
    /// it to them).
    Reading {
        req: u64,
        keys: Vec<Key>,
        missing: usize,
        got: BTreeMap<Key, Result<Object, Error>>,
    },
    Preparing {
        req: u64,
        /// Prepare times voted so far (`kit::twopc`), with the abort deadline.
        votes: Votes<u64>,
        /// How it commits. `Phase::One`: its participant commits it alone, so past the
        /// deadline the outcome is unknown here, not an abort.
        phase: Phase,
    },
}

#[derive(Debug)]
pub struct Txn<S> {
    pub(crate) client: Addr,
    pub svc: Vc,
    pub(crate) buffer: TxnBuffer,
    pub(crate) step: Step<S>,
    pub(super) last_active: u64,
    /// When the coordinator started it (clock).
    pub(crate) started: u64,
    pub(crate) kind: TxnKind,
    /// A strong txn's read set (Alg. 1 l.14), for certification.
    pub(crate) reads: std::collections::BTreeSet<Key>,
    /// Its type (declared conflict relations).
    pub(crate) label: Option<String>,
    /// A read-then-commit's updates after the read (`First::ReadCommit`): committed as
    /// soon as the read is answered.
    pub(crate) then: Option<Updates>,
    /// Whether its read answers carry `ReadValue::observed` (`Msg::StartWith`).
    pub(crate) observed: bool,
    /// A direct read-then-commit's read answer (`direct.rs`), held until its commit's
    /// answer, which carries it (`Msg::ReadCommitResult`).
    pub(crate) held: Option<(Vec<ReadValue>, Vc)>,
}

/// What a START says of its txn, besides the session's past and the first request.
#[derive(Debug)]
pub(crate) struct Start {
    pub txn: TxnId,
    pub kind: TxnKind,
    /// Its type (declared conflict relations).
    pub label: Option<String>,
    /// Whether its read answers carry `ReadValue::observed`.
    pub observed: bool,
}

/// A START not yet served, with the first request that came with it, if any.
#[derive(Debug)]
pub(super) struct PendingStart {
    pub(super) start: Start,
    pub(super) client: Addr,
    pub(super) cvc: Vc,
    pub(super) first: First,
}

#[derive(Debug)]
pub struct Coord<S> {
    /// Boxed: a `Txn` is 320 bytes, and a B-tree insert or remove shifted the values after
    /// it in its node (boxing them saved 5.9% of a SET's instructions, callgrind); in the
    /// hash map a resize moves them.
    pub txns: crate::kit::txn::TxnMap<Box<Txn<S>>>,
    /// START requests waiting for the GSS (Alg. 1 l.2-3).
    pub(super) starts: Vec<PendingStart>,
    /// Commit decisions until every participant acknowledged (commit vector each).
    pub decisions: Decisions<Vc>,
}

impl<S> Default for Coord<S> {
    fn default() -> Coord<S> {
        Coord {
            txns: Default::default(),
            starts: Vec::new(),
            decisions: Decisions::default(),
        }
    }
}

impl<S> Coord<S> {
    pub fn recovered_decision(&mut self, txn: TxnId, ct: Vc, parts: Vec<(PartitionId, NodeId)>) {
        self.decisions
            .recovered(txn, ct, parts.into_iter().collect());
    }

    pub fn decision_durable(&mut self, txn: TxnId) {
        self.decisions.durable(txn);
    }
}

pub(super) fn reply(ctx: &mut Ctx<Msg>, to: Addr, m: Msg) {
    ctx.send(to, m);
}

/// The answer to a txn's commit: a `CommitResult`, or a `ReadCommitResult` when its
/// read's answer was held for it (`Txn::held`).
pub(crate) fn commit_answer(
    (txn, req): (TxnId, u64),
    held: Option<(Vec<ReadValue>, Vc)>,
    result: Result<Vc, Error>,
) -> Msg {
    match held {
        Some(read) => Msg::ReadCommitResult {
            txn,
            req,
            read,
            commit: result,
        },
        None => Msg::CommitResult { txn, req, result },
    }
}
