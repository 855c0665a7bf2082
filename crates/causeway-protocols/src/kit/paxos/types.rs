//! The vocabulary of [`super::Paxos`]: ballots, the configuration with its limits, the
//! messages between members, the records an acceptor persists, and the outputs the
//! embedder drains.

use causeway_core::Nanos;
use serde::{Deserialize, Serialize};

/// A member's index in its consensus group (`0..members`; UniStore: the DC).
pub type Member = usize;
/// A position in the replicated log.
pub type Slot = u64;

/// Most members of one group (n = 2f + 1 DCs; 9 tolerates 4 failures).
pub const MEMBERS_MAX: usize = 9;
/// Most slots a leader has proposed and not yet decided (its window). An acceptor accepts
/// up to twice this above its decided prefix, so a promise always fits one message.
pub const IN_FLIGHT_MAX: usize = 1024;
/// Most entries in one message (accepts, acknowledgements, promises, decisions).
pub const BATCH_MAX: usize = 4096;
/// Most proposals queued at a leader (window full) or a leader-elect (phase 1 running).
pub const QUEUED_MAX: usize = 4096;
/// Default: how often the leader tells every member it is alive and what is decided.
pub const HEARTBEAT_NS: Nanos = 50_000_000;
/// Default: a member that hears no leader for this long campaigns (staggered by rank).
pub const ELECTION_TIMEOUT_NS: Nanos = 500_000_000;
/// Default: accepts not acknowledged, and catch-up requests not answered, for this long
/// are sent again.
pub const RESEND_NS: Nanos = 200_000_000;

mutations! {
    /// Which deliberately broken variant runs (all false = correct Paxos).
    #[derive(Serialize, Deserialize)]
    pub struct Mutations for "paxos" {
        /// Quorums of n/2 instead of n/2 + 1.
        no_majority = "paxos-no-majority",
        /// A new leader ignores the values its promises report.
        skip_recovery = "paxos-skip-recovery",
        /// A learner counting acceptances decides the value it accepted itself, whatever
        /// the ballot it accepted it in.
        learn_any_value = "paxos-learn-any-value",
    }
    /// Deliberately broken variants, for showing that the simulator catches them.
    pub const MUTATIONS;
}

/// A ballot: a round, and the member that owns it (ties between rounds are impossible:
/// a member never reuses a round, see the persistence contract in the module doc).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Ballot {
    pub round: u64,
    pub member: Member,
}

impl Ballot {
    /// Below every real ballot (real rounds start at 1).
    pub const ZERO: Ballot = Ballot {
        round: 0,
        member: 0,
    };
}

/// One member's view of its group. Times are in the member's clock nanoseconds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Config {
    pub members: usize,
    pub me: Member,
    /// The member that leads whenever it is alive and caught up (UniStore: every
    /// partition's leader in one DC).
    pub preferred: Member,
    pub heartbeat_ns: Nanos,
    pub election_timeout_ns: Nanos,
    pub resend_ns: Nanos,
    /// The leader's window (at most [`IN_FLIGHT_MAX`]).
    pub in_flight_max: usize,
    /// Entries per message (at most [`BATCH_MAX`], at least twice `in_flight_max`).
    pub batch_max: usize,
    /// Every member learns decisions from the acceptances: an acceptor sends its
    /// `Accepted` to every member, not to the leader alone, and a follower that counts a
    /// majority of acceptances of a slot in the ballot it accepted it in knows the slot
    /// decided one message delay after the acceptors, where the leader's commit index
    /// reaches it a round trip later (more messages: n - 1 per acceptance, not one).
    pub learn_from_acceptances: bool,
    pub mutations: Mutations,
}

impl Config {
    /// Member `me` of `members`, led by `preferred`, with the default timing and limits.
    pub fn new(members: usize, me: Member, preferred: Member) -> Config {
        Config {
            members,
            me,
            preferred,
            heartbeat_ns: HEARTBEAT_NS,
            election_timeout_ns: ELECTION_TIMEOUT_NS,
            resend_ns: RESEND_NS,
            in_flight_max: IN_FLIGHT_MAX,
            batch_max: BATCH_MAX,
            learn_from_acceptances: false,
            mutations: Mutations::default(),
        }
    }

    /// Members whose votes decide: a majority (n/2 + 1 = f + 1 for n = 2f + 1).
    pub fn quorum(&self) -> usize {
        if self.mutations.no_majority {
            (self.members / 2).max(1)
        } else {
            self.members / 2 + 1
        }
    }

    /// How far above its decided prefix an acceptor accepts.
    pub(super) fn accept_window(&self) -> u64 {
        2 * self.in_flight_max as u64
    }

    /// Distance from the preferred member: who campaigns first when the leader is silent.
    pub(super) fn rank(&self) -> u64 {
        ((self.me + self.members - self.preferred) % self.members) as u64
    }

    /// When a member that last heard a leader (or started) at `since` campaigns: the
    /// timeout, plus half of it per rank, so members rarely duel.
    pub(super) fn election_deadline(&self, since: Nanos) -> Nanos {
        let stagger = self.rank() * (self.election_timeout_ns / 2);
        since + self.election_timeout_ns + stagger
    }

    pub fn validate(&self) -> Result<(), String> {
        let n = self.members;
        if n == 0 || n > MEMBERS_MAX {
            return Err(format!("{n} members (1..={MEMBERS_MAX})"));
        }
        if self.me >= n || self.preferred >= n {
            return Err(format!(
                "member {} or preferred {} not below {n}",
                self.me, self.preferred
            ));
        }
        if self.in_flight_max == 0 || self.in_flight_max > IN_FLIGHT_MAX {
            return Err(format!(
                "in_flight_max {} (1..={IN_FLIGHT_MAX})",
                self.in_flight_max
            ));
        }
        if self.batch_max > BATCH_MAX || self.batch_max < 2 * self.in_flight_max {
            return Err(format!(
                "batch_max {} must lie in 2 * in_flight_max..={BATCH_MAX}",
                self.batch_max
            ));
        }
        if self.heartbeat_ns == 0 || self.election_timeout_ns <= 2 * self.heartbeat_ns {
            return Err("the election timeout must exceed two heartbeats".into());
        }
        if self.resend_ns == 0 {
            return Err("resend_ns must be positive".into());
        }
        Ok(())
    }
}

/// A value in a slot: `None` is the no-op a new leader fills a gap with (never delivered).
pub type Entry<V> = Option<V>;

/// Messages between the members of one group (the embedder tags them with the group).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Msg<V> {
    /// Phase 1a: promise `ballot`, and report what you accepted at or above `from` (the
    /// candidate's decided prefix).
    Prepare { ballot: Ballot, from: Slot },
    /// Phase 1b: promised; the sender's decided prefix and its accepted, undecided slots
    /// at or above both `from` and that prefix.
    Promise {
        ballot: Ballot,
        decided_upto: Slot,
        accepted: Vec<(Slot, Ballot, Entry<V>)>,
    },
    /// Phase 2a, also the leader's commit index: every slot below `decided_upto` is
    /// decided, so a slot the receiver accepted in this very ballot holds its decision.
    Accept {
        ballot: Ballot,
        decided_upto: Slot,
        entries: Vec<(Slot, Entry<V>)>,
    },
    /// Phase 2b (durable), or with no slots the answer to a heartbeat.
    Accepted {
        ballot: Ballot,
        decided_upto: Slot,
        slots: Vec<Slot>,
    },
    /// The leader is alive; its decided prefix (the commit index, as in `Accept`).
    Heartbeat { ballot: Ballot, decided_upto: Slot },
    /// Your ballot is below what I promised.
    Nack { promised: Ballot },
    /// Send me the decided values from `from` on.
    CatchUp { from: Slot },
    /// Decided values of the slots `from..from + values.len()`; the sender's prefix.
    Decided {
        from: Slot,
        values: Vec<Entry<V>>,
        decided_upto: Slot,
    },
    /// I dropped every slot below `below`: install a snapshot of them.
    Truncated { below: Slot },
}

/// What an acceptor persists. Replayed in order by [`super::Paxos::recover`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Record<V> {
    /// Promised `ballot` (never to accept below it).
    Promised { ballot: Ballot },
    /// Accepted these entries in `ballot` (which is also promised).
    Accepted {
        ballot: Ballot,
        entries: Vec<(Slot, Entry<V>)>,
    },
    /// The decided prefix now reaches `upto`; a slot not in `learned` was decided with the
    /// value this acceptor accepted last for it (written in an earlier record).
    Decided {
        upto: Slot,
        learned: Vec<(Slot, Entry<V>)>,
    },
    /// Slots below `below` are forgotten (applied everywhere, or a snapshot installed).
    Truncated { below: Slot },
    /// The whole acceptor state: replaces everything before it.
    Checkpoint(Box<Checkpoint<V>>),
}

/// An acceptor's whole durable state, in one record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint<V> {
    pub promised: Ballot,
    pub truncated_below: Slot,
    /// Decided values from `truncated_below` on.
    pub decided: Vec<Entry<V>>,
    pub accepted: Vec<(Slot, Ballot, Entry<V>)>,
}

/// What the embedder does for the machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output<V> {
    /// Send at once (never addressed to this member: those are handled inside).
    Send { to: Member, msg: Msg<V> },
    /// Append `record` to this member's log, after every record before it; call
    /// `handle_persisted(seq)` once it (and so everything before it) is durable.
    Persist { seq: u64, record: Record<V> },
    /// Slots below `below` are truncated at `source` and this member lacks some of them:
    /// copy the embedder's state through `below - 1` from `source`, then call
    /// `install_snapshot(below)`.
    SnapshotNeeded { source: Member, below: Slot },
    /// This member's acceptance of these slots in `ballot` is durable and its `Accepted`
    /// leaves now (also to itself, when leading): the values it accepted, no-ops left out.
    /// With `f + 1` such acceptances of one ballot a value is chosen, so an embedder may
    /// tell a waiting party directly (UniStore's votes to the coordinator, [19]).
    Accepted {
        ballot: Ballot,
        values: Vec<(Slot, V)>,
    },
}

/// A proposal was taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proposed {
    /// Proposed in this slot (decided there unless leadership is lost first).
    Slot(Slot),
    /// Queued: the window is full or this member is still winning phase 1; it gets the
    /// next free slot in order, or comes back from `take_dropped` if leadership is lost.
    Queued,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProposeError {
    /// Propose at `hint` (the leader this member follows, if any).
    NotLeader { hint: Option<Member> },
    /// [`QUEUED_MAX`] proposals wait already: try again after some are decided.
    Busy,
}

impl std::fmt::Display for ProposeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProposeError::NotLeader { hint: Some(m) } => write!(f, "not the leader; try {m}"),
            ProposeError::NotLeader { hint: None } => write!(f, "not the leader; none known"),
            ProposeError::Busy => write!(f, "too many proposals queued"),
        }
    }
}
