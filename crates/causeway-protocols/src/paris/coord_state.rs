//! The PaRiS coordinator's state (Alg. 2): each running txn's context (`TX[id_T]`) with
//! what the coordinator is doing for it, the parallel reads in progress, and the commit
//! decisions until every participant has them. The handlers that drive it are
//! `coord.rs`'s; this file imports none of the node's parts, so `node.rs` holds a
//! [`Coord`] without importing the handlers back.

use super::msg::{Effects, Msg};
use crate::kit::twopc::{Decisions, Retry, Votes};
use crate::kit::txn::ReadId;
use causeway_core::crdt::{ObjType, Object};
use causeway_core::{Addr, Error, Key, Nanos, NodeId, PartitionId, TxnId};
use std::collections::BTreeMap;

/// What a txn's coordinator is doing for it.
#[derive(Debug)]
pub(super) enum Step {
    Idle,
    Reading {
        req: u64,
    },
    Preparing {
        req: u64,
        votes: Votes<(u64, Effects)>,
        targets: BTreeMap<PartitionId, NodeId>,
        /// One partition written: its replica commits alone (`Node::prepare`).
        one_phase: bool,
        /// The PREPAREs of a two-phase txn, re-sent to the participants whose vote is
        /// missing every `inquire_after_ns` (`resend_prepares`); none for one phase.
        prepares: BTreeMap<PartitionId, Msg>,
        resend: Retry,
    },
}

/// `TX[id_T]` (Alg. 2 l.4): a running txn's context.
#[derive(Debug)]
pub(super) struct TxnCtx {
    pub(super) session: Addr,
    pub(super) snapshot: u64,
    pub(super) last_active: Nanos,
    pub(super) step: Step,
}

/// A parallel read in progress (Alg. 2 l.10-15).
#[derive(Debug)]
pub(super) struct ReadCtx {
    pub(super) txn: TxnId,
    pub(super) keys: Vec<(Key, ObjType)>,
    pub(super) waiting: usize,
    pub(super) objects: BTreeMap<Key, Result<Object, Error>>,
}

#[derive(Debug, Default)]
pub struct Coord {
    pub(super) txns: BTreeMap<TxnId, TxnCtx>,
    /// By `ReadId`, unique across this node's restarts, as the replies name them.
    pub(super) reads: BTreeMap<ReadId, ReadCtx>,
    pub decisions: Decisions<u64>,
}

impl Coord {
    /// The session is done with `txn` (read-only commit or abort): drop its context.
    pub fn forget(&mut self, txn: TxnId) {
        if let Some(t) = self.txns.get(&txn) {
            if !matches!(t.step, Step::Preparing { .. }) {
                self.txns.remove(&txn);
            }
        }
    }

    /// Keeps a preparing txn's PREPAREs for `Node::resend_prepares`.
    pub(super) fn keep_prepares(&mut self, txn: TxnId, kept: BTreeMap<PartitionId, Msg>) {
        if let Some(TxnCtx {
            step: Step::Preparing { prepares, .. },
            ..
        }) = self.txns.get_mut(&txn)
        {
            *prepares = kept;
        }
    }

    /// The oldest snapshot of a running txn.
    pub fn oldest(&self) -> Option<u64> {
        self.txns.values().map(|t| t.snapshot).min()
    }
}
