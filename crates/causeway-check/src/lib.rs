//! Causeway checker (layer 3): the history model recorded by simulated and real clients,
//! its JSON-lines form (docs/HISTORY.md), and the consistency checkers that judge a
//! history: transactional causal consistency ([`tcc`]), UniStore's partial
//! order-restrictions for strong transactions ([`por`], under a [`conflict`] relation),
//! Occult's PC-PSI ([`pcpsi`]) and convergence ([`convergence`]). A violation names the transactions and the edges involved.

#![forbid(unsafe_code)]

pub mod conflict;
pub mod convergence;
#[doc(hidden)]
pub mod fuzzing;
pub mod graph;
pub mod history;
pub mod jsonl;
mod parts;
pub mod pcpsi;
pub mod por;
pub mod tcc;

pub use conflict::{ConflictRelation, ConflictRule, KeyPattern};
pub use history::{session_order, BarrierRecord, FinalRead, HOp, History, Outcome, TxnRecord};
pub use jsonl::{read_history, write_history};
pub use tcc::{Stats, CHECK_TXNS_MAX};

use causeway_core::TxnId;
use std::fmt;

/// The guarantee a history is checked against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Guarantee {
    /// Transactional causal consistency plus convergence of the final reads.
    Tcc,
    /// Convergence of the final reads only (what `eventual` promises).
    Convergence,
    /// TCC, plus Conflict Ordering of strong transactions (UniStore's PoR), plus
    /// convergence. The conflict relation is [`check_with`]'s argument ([`check`] uses the
    /// default one for ad-hoc strong transactions).
    Por,
    /// Occult's per-client parallel snapshot isolation (§6.1): no aborted or intermediate
    /// reads, no circular information flow, no missed effects; plus TCC (causality as
    /// clients observe it, Occult §3: PC-PSI reads a causally consistent snapshot) and
    /// convergence.
    PcPsi,
}

impl Guarantee {
    pub fn parse(text: &str) -> Option<Guarantee> {
        match text {
            "tcc" => Some(Guarantee::Tcc),
            "convergence" => Some(Guarantee::Convergence),
            "por" => Some(Guarantee::Por),
            "pc-psi" => Some(Guarantee::PcPsi),
            _ => None,
        }
    }
}

/// What went wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ViolationKind {
    /// The history itself is inconsistent (duplicate ids, a read of a write nobody made).
    Malformed,
    /// A read observed a write of an aborted (or never-committed) transaction.
    ReadFromAborted,
    /// A register read returned another value than the write it names.
    BadValue,
    /// Session order and write-read form a cycle.
    CausalCycle,
    /// A read after the transaction's own write did not show it.
    ReadYourWrites,
    /// A read missed a write in its causal past (stale, fractured, non-monotonic).
    CausalViolation,
    /// A set read that is not causally closed.
    SetNotCausallyClosed,
    /// No arbitration order consistent with causality explains the reads.
    ArbitrationCycle,
    /// Replicas disagree after quiescence.
    Divergence,
    /// Two committed strong transactions read one version of a key and both overwrote it.
    LostUpdate,
    /// Two conflicting strong transactions that causality cannot order (PoR).
    ConflictOrder,
    /// A read of a version that was not its writer's final write of the key (PC-PSI).
    IntermediateRead,
    /// A cycle of write-read, write-write and session edges (PC-PSI).
    CircularFlow,
    /// A cycle with exactly one read-write anti-dependency edge (PC-PSI).
    MissedEffect,
}

/// A counterexample: its kind, the transactions involved and a sentence with the edges.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub kind: ViolationKind,
    pub txns: Vec<TxnId>,
    pub detail: String,
}

impl Violation {
    pub fn new(kind: ViolationKind, txns: Vec<TxnId>, detail: String) -> Violation {
        Violation { kind, txns, detail }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.kind, self.detail)
    }
}

impl std::error::Error for Violation {}

/// Checks `history` against `guarantee`, with the default conflict relation for `Por`.
pub fn check(history: &History, guarantee: Guarantee) -> Result<Stats, Violation> {
    check_with(history, guarantee, &ConflictRelation::ad_hoc())
}

/// Checks `history` against `guarantee`; `conflicts` says which strong transactions
/// conflict (used by `Por` only).
pub fn check_with(
    history: &History,
    guarantee: Guarantee,
    conflicts: &ConflictRelation,
) -> Result<Stats, Violation> {
    let stats = match guarantee {
        Guarantee::Tcc => tcc::check_tcc(history)?,
        Guarantee::Por => por::check_por(history, conflicts)?,
        Guarantee::PcPsi => {
            let causal = tcc::check_tcc(history)?;
            Stats {
                causal_edges: causal.causal_edges,
                arbitration_edges: causal.arbitration_edges,
                ..pcpsi::check_pcpsi(history)?
            }
        }
        Guarantee::Convergence => Stats {
            txns: history.txns.len(),
            finals: history.finals.len(),
            ..Stats::default()
        },
    };
    convergence::check_convergence(history)?;
    Ok(stats)
}
