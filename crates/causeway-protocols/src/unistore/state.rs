//! UniStore's state on the Cure engine (issue 73: machines that own their state): the
//! strong-txn configuration and limits, each partition's certification group member, the
//! recoveries, a strong txn's commit step at its coordinator, and the certification parts
//! of state transfers. A lower floor of the folder: it imports none of the files with
//! `impl Node<UniExt>`, so `hooks.rs` holds these without importing its handlers back.

use crate::kit::certify::{CertEntry, CertTxn, Certifier, Relation, StrongImage};
use crate::kit::paxos::{self, Paxos, Slot};
use crate::kit::twopc::{Retry, Votes};
use causeway_core::conflict::ConflictRule;
use causeway_core::crdt::Effect;
use causeway_core::{DcId, Key, Nanos, NodeId, OpId, PartitionId, TxnId};
use std::collections::{BTreeMap, BTreeSet};

/// Effects of one partition's updates.
pub type Ops = Vec<(Key, OpId, Effect)>;

/// A txn's conflict tokens under the declared relation (`kit::certify`'s module doc):
/// `declared` if a rule names its type, and each token with whether it is written.
#[derive(Clone, Debug, Default)]
pub struct Tokens {
    pub(super) declared: bool,
    pub(super) keys: Vec<(Key, bool)>,
}

/// The conflict tokens of a txn of type `label` touching `keys` under `rules`.
pub fn conflict_tokens<'k>(
    rules: &[ConflictRule],
    label: Option<&str>,
    keys: impl Iterator<Item = &'k Key> + Clone,
) -> Tokens {
    let Some(label) = label else {
        return Tokens::default();
    };
    let mut out = Tokens::default();
    for (i, rule) in rules.iter().enumerate().filter(|(_, r)| r.names(label)) {
        out.declared = true;
        let write = rule.b == label; // `a` reads the token, `b` writes it
        for k in keys.clone() {
            if let Some(c) = rule.pattern.capture(k) {
                let mut token = format!("\0conflict/{i}/").into_bytes();
                token.extend_from_slice(c);
                out.keys.push((Key(token), write));
            }
        }
    }
    out.keys.sort();
    out.keys.dedup();
    out
}

/// Default: a leader whose group proposed nothing for this long appends a heartbeat.
pub const STRONG_HEARTBEAT_NS: Nanos = 10_000_000;
/// Default: a txn prepared this long at a leader gets a recovery coordinator.
pub const STRONG_RECOVER_NS: Nanos = 3_000_000_000;
/// Default: a coordinator answers "outcome unknown" after this long.
pub const STRONG_TIMEOUT_NS: Nanos = 10_000_000_000;
/// Default: a coordinator missing votes, or a recovery missing answers, asks again after
/// this long (a group may be electing a leader).
pub const STRONG_RETRY_NS: Nanos = 300_000_000;
/// Default: decided slots a group keeps for a lagging member (at a heartbeat every
/// 10 ms, about 11 minutes of an idle group).
pub const STRONG_LOG_KEPT_MAX: u64 = 1 << 16;
/// The members (DC indexes) that accepted a Prepare in one ballot, and the vote it holds.
pub(super) type AckTally = (BTreeSet<usize>, Result<u64, String>);

/// Most (partition, ballot) acceptance tallies one coordinated txn keeps.
pub const ACK_TALLIES_MAX: usize = 64;
/// Most recoveries one node runs at a time.
pub const RECOVERIES_MAX: usize = 1024;

/// The strong-transaction tunables (the `[protocols.unistore]` section sets them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StrongConfig {
    /// The DC whose replicas lead every partition's group while up (paper: one DC).
    pub leader_dc: u16,
    pub heartbeat_ns: Nanos,
    pub recover_ns: Nanos,
    pub timeout_ns: Nanos,
    pub retry_ns: Nanos,
    pub relation: Relation,
    /// RedBlue: partition 0's group certifies every strong txn.
    pub central: bool,
    /// The declared conflict relation (empty: every strong txn is ad-hoc).
    pub rules: Vec<ConflictRule>,
    /// Strong txns run at all (false: the paper's CAUSAL / UNIFORM, with no
    /// certification groups and no strong heartbeats; strong BEGINs run causal).
    pub enabled: bool,
    /// Decided slots the group keeps for a member that lags behind the others; past it,
    /// members forget what a majority decided and the laggard gets a state transfer
    /// (`strong_gc.rs`, `strong_transfer.rs`).
    pub log_kept_max: u64,
}

impl Default for StrongConfig {
    fn default() -> StrongConfig {
        StrongConfig {
            leader_dc: 0,
            heartbeat_ns: STRONG_HEARTBEAT_NS,
            recover_ns: STRONG_RECOVER_NS,
            timeout_ns: STRONG_TIMEOUT_NS,
            retry_ns: STRONG_RETRY_NS,
            relation: Relation::AdHoc,
            central: false,
            rules: Vec::new(),
            enabled: true,
            log_kept_max: STRONG_LOG_KEPT_MAX,
        }
    }
}

/// One partition's certification group member.
#[derive(Debug)]
pub struct Group {
    pub px: Paxos<CertEntry>,
    pub cert: Certifier,
    /// When this member last proposed (for heartbeats).
    pub(super) last_proposal: Nanos,
    /// Every member decided the slots below this (`strong_gc.rs`).
    pub gc_below: crate::kit::paxos::Slot,
    /// When this member, as leader, last sent `gc_below` to the others.
    pub gc_sent_ns: Nanos,
    /// As leader: the certifier its log will reach, for the votes it proposes (`strong.rs`,
    /// `spec`), with the ballot it was built in.
    pub(super) spec: Option<(paxos::Ballot, Certifier)>,
    /// Decisions heard before the log applied them (`early.rs`).
    pub(super) early: Early,
}

/// Most decisions a member keeps heard before its log applied their Prepare.
pub const EARLY_HEARD_MAX: usize = 4_096;

/// A member's decisions heard ahead of its log (`early.rs`); those applied are in the
/// certifier (`Certifier::early`).
#[derive(Debug, Default)]
pub(super) struct Early {
    /// Heard, the Prepare not applied yet: the decision.
    pub(super) heard: BTreeMap<TxnId, Option<u64>>,
    /// As leader: the txns applied early at the last check, and when it ran.
    pub(super) seen: (BTreeSet<TxnId>, Nanos),
}

/// A recovery of an orphaned txn prepared in our group (module doc).
#[derive(Debug)]
pub(super) struct Recovery {
    pub(super) partition: PartitionId,
    pub(super) votes: Votes<u64>,
    pub(super) voters: BTreeMap<PartitionId, NodeId>,
    pub(super) retry: Retry,
    /// Decided: proposed to our group (again at each retry) until it is applied.
    pub(super) decided: Option<Option<u64>>,
}

/// The node's strong-txn state.
#[derive(Debug, Default)]
pub struct Strong {
    pub groups: BTreeMap<PartitionId, Group>,
    /// Records replayed at recovery, until `start` builds the groups.
    pub recovered: BTreeMap<PartitionId, Vec<paxos::Record<CertEntry>>>,
    /// The groups of a replayed checkpoint (`strong_gc.rs`), until `start`.
    pub restored: BTreeMap<PartitionId, crate::cure::record::GroupCheckpoint>,
    pub(super) recovering: BTreeMap<TxnId, Recovery>,
    /// The node that last voted for each partition (its leader, probably).
    pub(super) leader_hint: BTreeMap<PartitionId, NodeId>,
    /// The certification parts of state transfers, both ways (`strong_transfer.rs`).
    pub xfer: StrongTransfers,
}

/// A strong txn's commit at its coordinator.
#[derive(Debug)]
pub struct StrongStep {
    pub req: u64,
    pub(super) deadline: Nanos,
    pub(super) phase: Phase,
}

#[derive(Debug)]
pub(super) enum Phase {
    /// Waiting for the uniform barrier and the effects of each written partition.
    Prep {
        effects: BTreeMap<PartitionId, Option<Ops>>,
        participants: BTreeSet<PartitionId>,
        tokens: Tokens,
    },
    /// CERTIFY sent: waiting for every participant's vote.
    Certify {
        parts: BTreeMap<PartitionId, CertTxn>,
        votes: Votes<u64>,
        voters: BTreeMap<PartitionId, NodeId>,
        retry: Retry,
        /// Members' acceptances of a partition's Prepare, per ballot, and its vote ([19]).
        acks: BTreeMap<(PartitionId, paxos::Ballot), AckTally>,
    },
}

/// The certification parts of one node's transfers, both ways.
#[derive(Debug, Default)]
pub struct StrongTransfers {
    /// Taken with a transfer's images, until its first chunk leaves.
    pub(super) out: BTreeMap<(PartitionId, DcId), StrongImage>,
    /// Received with a transfer's first chunk, until its end.
    pub(super) incoming: BTreeMap<(PartitionId, DcId), StrongImage>,
    /// Siblings that asked for a transfer (their group member needs a snapshot).
    pub(super) wanted: BTreeSet<(PartitionId, DcId)>,
    /// Replay: the certification state the last adopted transfer brought, until
    /// `start_strong` builds the group.
    pub adopted: BTreeMap<PartitionId, (Slot, Certifier)>,
}

/// Why a transfer's certification part cannot be adopted.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The first chunk came without one (or from another transfer).
    Missing,
    /// Our group log forgot slots the image's certifier still has to deliver.
    Forgotten,
}
