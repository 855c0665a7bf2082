//! Multi-Paxos for one consensus group (UniStore §6.3: a partition's replicas in all DCs,
//! one leader, majority quorums), as a deterministic sans-IO machine generic over the
//! value type. The embedder runs one [`Paxos`] per group per node, tags its messages with
//! the group, sends them, persists its records and drives its deadlines: it calls
//! `handle_message`, `handle_timeout` (at [`Paxos::poll_timeout`], in the node's clock
//! nanoseconds), `handle_persisted` and `propose`, then drains [`Paxos::take_outputs`]
//! and [`Paxos::take_decided`]. Messages from a member to itself never leave the machine.
//!
//! # The protocol
//!
//! - **Ballots** are `(round, member)`, ordered by round then member; a member never reuses
//!   a round (its own ballot is durable before its prepares leave).
//! - **Phase 1**: a candidate sends `Prepare(b, from)` (`from` = its decided prefix). An
//!   acceptor that promised nothing higher promises `b`, durably, and answers `Promise`
//!   with its decided prefix and every accepted, undecided slot at or above `from` (at
//!   most twice the window: one message). With a majority of promises the candidate leads:
//!   slots below `target`, the highest decided prefix among the promises, were decided
//!   before this ballot and are *learned* by catch-up from a promiser that has them (the
//!   leader-elect proposes nothing until its prefix reaches `target`); every slot from
//!   `target` on is re-proposed with the value of the highest ballot any promise reports,
//!   a gap with a no-op (`None`, never delivered).
//! - **Phase 2**: the leader sends `Accept(b, decided_upto, entries)` to every member,
//!   itself included. An acceptor that promised nothing higher accepts, durably, and then
//!   answers `Accepted`; a slot it has already decided is acknowledged without being
//!   stored (a Paxos acceptor may accept in any ballot it promised; for a decided slot its
//!   later promises report the decided value through their prefix, which is what any
//!   choice there is, and a stale ballot still finds no majority: the quorum that chose
//!   promised higher). A slot acknowledged by a majority is decided; the decided prefix
//!   advances in slot order. Accepts unacknowledged for `resend_ns` are sent again.
//! - **Learning**: `decided_upto` in every `Accept` and `Heartbeat` is the leader's commit
//!   index: a slot below it that the receiver accepted *in that same ballot* holds the
//!   decided value, since a leader proposes one value per slot per ballot and counts in
//!   its prefix only slots it decided itself or learned before proposing anything (a
//!   leader in phase 2 ignores `Decided` messages). A member whose prefix is below the
//!   leader's asks `CatchUp(from)` and gets `Decided` values, `batch_max` at a time.
//!   With `learn_from_acceptances` every member is a learner: an acceptor sends its
//!   `Accepted` to every member, and a follower that counts a majority of durable
//!   acceptances of a slot in the ballot it follows, and accepted that slot in that
//!   ballot itself, holds the decided value (the leader's own rule, one message delay
//!   after the acceptors instead of a round trip to the leader and back).
//!   [`Paxos::take_decided`] delivers decisions in slot order, each once per incarnation.
//!
//! # Choices Paxos leaves open
//!
//! - **Election timeout**: the leader heartbeats every `heartbeat_ns`. A member that hears
//!   no leader for `election_timeout_ns` plus half of it per rank (its distance from the
//!   preferred member: no randomness, and members rarely duel) campaigns with a round above
//!   every one it saw, re-sends its prepare to the silent members every `resend_ns`, and
//!   without a majority by the next deadline campaigns again.
//! - **Check-quorum and stickiness**: a leader that heard from no majority within an
//!   election timeout steps down (a minority-side leader stops claiming the group). An
//!   acceptor that heard its leader within an election timeout ignores the prepares of
//!   other members, except the preferred one's (a member back from a partition does not
//!   depose a working leader). Anyone that sees a higher ballot steps down; a nacked
//!   leader that is the preferred member campaigns again at once instead, and a candidate
//!   that hears the preferred member campaign stops campaigning (it still nacks a lower
//!   ballot, so the preferred member's next round wins instead of tying with it).
//! - **Up-to-date candidates**: an acceptor does not promise a new ballot to a candidate
//!   whose decided prefix lags its own by more than the window; it sends it decided values
//!   instead (Raft's up-to-date rule), and a member that heard, within an election
//!   timeout, of a prefix more than a window past its own does not campaign (a candidate
//!   steps down) but catches up. A member back from a long absence so catches up before it
//!   can lead, rather than stalling the group while it does (or duelling with higher and
//!   higher rounds); the most advanced live member always passes.
//! - **Preferred leader**: the configured member (UniStore: every partition's leader in
//!   one DC) has rank 0, so it campaigns first; once it has followed another leader for an
//!   election timeout and is caught up to within the window, it campaigns and takes the
//!   leadership back. A member waiting for a snapshot never campaigns.
//! - **Catch-up** is pulled: a member asks whoever showed a longer prefix (the leader, or
//!   for a leader-elect its promisers in turn), again after `resend_ns` without an answer
//!   and at once after each answer while still behind. A leader-elect whose catch-up makes
//!   no progress for two election timeouts campaigns again.
//!
//! # Persistence contract
//!
//! Every acceptor state change is a [`Record`] in an [`Output::Persist`] with a sequence
//! number (1, 2, ... per incarnation). The embedder appends the records in order and calls
//! [`Paxos::handle_persisted`]`(seq)` once `seq` and everything before it are durable.
//! Every [`Output::Send`] may leave at once: the machine itself holds back what must wait,
//! namely promises and acceptances (and its own votes, which count only once durable)
//! until the records before them are durable, and a candidate's prepares until its ballot
//! is. Decisions wait for nothing. [`Paxos::recover`] takes every durable record in order
//! and rebuilds the promise, the accepted values and the decided prefix; a
//! [`Record::Checkpoint`] (from [`Paxos::compact`]) stands for everything before it, so
//! once it is durable the embedder may drop the older records. With `kit::durability`,
//! an embedder persists each record as `persist(ctx, bytes, vec![])`, parks an action
//! `(group, seq)` with `after_durable`, and calls `handle_persisted` when it runs.
//!
//! # Proposals, limits, truncation
//!
//! [`Paxos::propose`] on the leader returns the slot. While this member is a leader-elect
//! (phase 1 or its catch-up), or its window (`in_flight_max` ≤ [`IN_FLIGHT_MAX`]
//! undecided slots) is full, the value is queued (at most [`QUEUED_MAX`], then
//! [`ProposeError::Busy`]) and takes the next free slots in order. When leadership is
//! lost, queued values come back from [`Paxos::take_dropped`] (never proposed, so never
//! decided); a value already given a slot may still be decided there, by this ballot or
//! through the next leader's recovery, or not at all: the embedder watches
//! `take_decided` (its values carry their own ids) and retries or aborts after a timeout.
//! A message carries at most `batch_max` ≤ [`BATCH_MAX`] entries (bigger ones are
//! ignored), a group has at most [`MEMBERS_MAX`] members. [`Paxos::truncate`] forgets the
//! slots the embedder applied at every member ([`Paxos::decided_everywhere`] is a hint on
//! the leader). A member that asks for a truncated slot gets `Truncated`: the embedder
//! sees [`Output::SnapshotNeeded`] (repeated while the member asks), copies its own state
//! from `source` and calls [`Paxos::install_snapshot`]`(below)` (nothing below is then
//! delivered, even if this member caught up meanwhile). After recovery, delivery restarts
//! at the truncation point: the embedder's state must cover what is below it, and an
//! embedder whose applied state is durable skips the slots it applied already (each
//! decision comes with its slot).
//!
//! # Tests
//!
//! `tests.rs` drives a hand-run group; `sim.rs` is a seeded simulator (delays, some far
//! past the election timeout, drops, duplicates, partitions, crashes losing unsynced
//! records, snapshots, checkpoints) whose sweeps (500 seeds by default, `long_sweep` for
//! more) check agreement, validity, that no majority-accepted value is lost, and liveness
//! once healed, and catch the `paxos-no-majority` and `paxos-skip-recovery` mutations
//! ([`MUTATIONS`]).

mod acceptor;
mod leader;
mod log;
#[cfg(test)]
mod sim;
#[cfg(test)]
mod tests;
mod types;

pub use types::{
    Ballot, Checkpoint, Config, Entry, Member, Msg, Mutations, Output, ProposeError, Proposed,
    Record, Slot, BATCH_MAX, ELECTION_TIMEOUT_NS, HEARTBEAT_NS, IN_FLIGHT_MAX, MEMBERS_MAX,
    MUTATIONS, QUEUED_MAX, RESEND_NS,
};

use super::durability::RECORDS_IN_FLIGHT_MAX;
use super::timers::Timers;
use causeway_core::Nanos;
use leader::{Candidate, Leader};
use log::Log;
use serde::{de::DeserializeOwned, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Debug;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Timer {
    /// Follower: campaign (the leader is silent, or the preferred reclaims). Candidate:
    /// campaign again. Leader-elect: its catch-up stalled, campaign again.
    Election,
    Heartbeat,
    /// Leader: re-send unacknowledged accepts. Candidate: re-send unanswered prepares.
    Resend,
    /// Ask again for decided values.
    CatchUp,
}

/// The last catch-up request: from which slot, when.
#[derive(Clone, Copy, Debug)]
struct Ask {
    from: Slot,
    at: Nanos,
}

/// Another member's decided prefix, and when we heard it: whom to catch up from.
#[derive(Clone, Copy, Debug)]
struct Ahead {
    member: Member,
    upto: Slot,
    at: Nanos,
}

#[derive(Debug)]
enum Role<V> {
    Follower,
    Candidate(Candidate<V>),
    Leader(Box<Leader<V>>),
}

/// One member of one consensus group. See the module doc.
#[derive(Debug)]
pub struct Paxos<V> {
    cfg: Config,
    log: Log<V>,
    /// `take_decided` hands out slots from here.
    delivered: Slot,
    role: Role<V>,
    /// The leader this member follows (itself when leading).
    leader: Option<Member>,
    heard_leader_at: Option<Nanos>,
    following_since: Nanos,
    /// The longest decided prefix another member showed lately.
    ahead: Option<Ahead>,
    round_seen: u64,
    timers: Timers<Timer>,
    last_seq: u64,
    durable_seq: u64,
    /// Messages waiting for the record of their key to be durable.
    held: BTreeMap<u64, Vec<(Member, Msg<V>)>>,
    /// Messages to this member itself, handled before the current call returns.
    inbox: VecDeque<Msg<V>>,
    outputs: Vec<Output<V>>,
    queued: VecDeque<V>,
    dropped: Vec<V>,
    ask: Option<Ask>,
    snapshot_needed: Option<Slot>,
    /// A follower's count of the acceptances of `acks.0`'s slots above its decided prefix
    /// (with `learn_from_acceptances`; within the accept window).
    acks: (Ballot, BTreeMap<Slot, BTreeSet<Member>>),
    now: Nanos,
}

impl<V: Clone + Debug + Serialize + DeserializeOwned> Paxos<V> {
    /// A member with nothing on disk, at clock `now`.
    pub fn new(cfg: Config, now: Nanos) -> Paxos<V> {
        Paxos::recover(cfg, &[], now).expect("a fresh member")
    }

    /// Rebuilds a member from every durable record it wrote, in order. It starts as a
    /// follower; delivery restarts at its truncation point.
    pub fn recover(cfg: Config, records: &[Record<V>], now: Nanos) -> Result<Paxos<V>, String> {
        cfg.validate()?;
        let mut log = Log::new();
        for (i, r) in records.iter().enumerate() {
            log.apply(r).map_err(|e| format!("record {i}: {e}"))?;
        }
        let mut px = Paxos {
            delivered: log.truncated_below(),
            round_seen: log.promised.round,
            cfg,
            log,
            role: Role::Follower,
            leader: None,
            heard_leader_at: None,
            following_since: now,
            ahead: None,
            timers: Timers::default(),
            last_seq: 0,
            durable_seq: 0,
            held: BTreeMap::new(),
            inbox: VecDeque::new(),
            outputs: Vec::new(),
            queued: VecDeque::new(),
            dropped: Vec::new(),
            ask: None,
            acks: (Ballot::ZERO, BTreeMap::new()),
            snapshot_needed: None,
            now,
        };
        px.arm_election(now);
        px.check_invariants()?;
        Ok(px)
    }

    /// A message from member `from` (ignored if `from` is no member or a batch is over
    /// the limit).
    pub fn handle_message(&mut self, now: Nanos, from: Member, msg: Msg<V>) {
        self.now = now;
        if from < self.cfg.members && self.within_limits(&msg) {
            self.dispatch(from, msg);
        }
        self.finish();
    }

    /// The clock reached [`Paxos::poll_timeout`]: runs every due timer.
    pub fn handle_timeout(&mut self, now: Nanos) {
        self.now = now;
        for t in self.timers.take_due(now) {
            match t {
                Timer::Election => self.on_election_timer(),
                Timer::Heartbeat => self.on_heartbeat_timer(),
                Timer::Resend => self.on_resend_timer(),
                Timer::CatchUp => self.on_catch_up_timer(),
            }
        }
        self.finish();
    }

    /// Record `seq` and every one before it are durable: releases what waited for them.
    pub fn handle_persisted(&mut self, now: Nanos, seq: u64) {
        assert!(seq <= self.last_seq, "record {seq} was never handed out");
        self.now = now;
        self.durable_seq = self.durable_seq.max(seq);
        let later = self.held.split_off(&(seq + 1));
        for (to, msg) in std::mem::replace(&mut self.held, later)
            .into_values()
            .flatten()
        {
            self.send(to, msg);
        }
        self.finish();
    }

    /// The earliest deadline, in this member's clock.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        self.timers.next()
    }

    /// Proposes `value`: see the module doc for slots, queueing and errors.
    pub fn propose(&mut self, now: Nanos, value: V) -> Result<Proposed, ProposeError> {
        self.now = now;
        if matches!(self.role, Role::Follower) {
            return Err(ProposeError::NotLeader { hint: self.leader });
        }
        let proposed = if self.queued.is_empty() && self.window_open() {
            Proposed::Slot(self.assign(value))
        } else if self.queued.len() < QUEUED_MAX {
            self.queued.push_back(value);
            Proposed::Queued
        } else {
            return Err(ProposeError::Busy);
        };
        self.finish();
        Ok(proposed)
    }

    /// What the embedder must do, in order.
    pub fn take_outputs(&mut self) -> Vec<Output<V>> {
        std::mem::take(&mut self.outputs)
    }

    /// Newly decided values, in slot order (no-ops skipped).
    pub fn take_decided(&mut self) -> Vec<(Slot, V)> {
        let upto = self.log.decided_upto();
        let taken = (self.delivered..upto).filter_map(|s| {
            let v = self.log.decided(s).expect("undelivered slots are kept");
            v.clone().map(|v| (s, v))
        });
        let taken = taken.collect();
        self.delivered = upto;
        taken
    }

    /// Queued proposals that lost their leader (never proposed).
    pub fn take_dropped(&mut self) -> Vec<V> {
        std::mem::take(&mut self.dropped)
    }

    /// Forgets the slots below `below`, which the embedder applied at every member (they
    /// must have been taken from `take_decided`).
    pub fn truncate(&mut self, below: Slot) {
        assert!(
            below <= self.delivered,
            "truncating below {below}, undelivered slots"
        );
        if below > self.log.truncated_below() {
            self.log.truncate(below);
            self.persist(Record::Truncated { below });
        }
    }

    /// The embedder's state now covers every slot below `upto` (a snapshot installed
    /// after [`Output::SnapshotNeeded`]): those slots are not delivered and are forgotten
    /// as by [`Paxos::truncate`]; past the decided prefix, the prefix jumps to `upto`.
    pub fn install_snapshot(&mut self, now: Nanos, upto: Slot) {
        self.now = now;
        if self.snapshot_needed.is_some_and(|b| b <= upto) {
            self.snapshot_needed = None;
        }
        if upto <= self.log.truncated_below() {
            return;
        }
        if upto > self.log.decided_upto() {
            self.step_down();
            self.ask = None;
        }
        self.delivered = self.delivered.max(upto);
        self.log.truncate(upto);
        self.persist(Record::Truncated { below: upto });
        self.retry_catch_up();
        self.finish();
    }

    /// The embedder replaced its applied state by one covering exactly the slots below
    /// `upto` (a state transfer from another member): delivery restarts at `upto`, going
    /// back if this member had delivered more (those slots are delivered again, so the
    /// embedder must have undone them) or, past the decided prefix, jumping as
    /// [`Paxos::install_snapshot`] does. `upto` must not be below the truncation point.
    pub fn redeliver_from(&mut self, now: Nanos, upto: Slot) {
        assert!(
            upto >= self.log.truncated_below(),
            "redelivering from {upto}, below the truncation point {}",
            self.log.truncated_below()
        );
        if upto > self.log.decided_upto() {
            return self.install_snapshot(now, upto);
        }
        self.now = now;
        self.delivered = upto;
    }

    /// On the leader: the highest slot below which a majority of the members (itself
    /// included) reported every slot decided.
    pub fn decided_by_quorum(&self) -> Option<Slot> {
        match &self.role {
            Role::Leader(l) => {
                let mut at = l.decided_at.clone();
                at.sort_unstable_by(|a, b| b.cmp(a));
                at.get(self.cfg.quorum() - 1).copied()
            }
            _ => None,
        }
    }

    /// Forgets the decided slots below `below` in memory only, with no record: for an
    /// embedder whose own checkpoint holds [`Paxos::checkpoint`] and its applied state
    /// (the slots stay in the durable records until that checkpoint replaces them, and a
    /// replay of either rebuilds a consistent pair). `below` must be delivered here and,
    /// for the group to stay live, decided at every member ([`Paxos::decided_everywhere`]).
    pub fn forget(&mut self, below: Slot) {
        assert!(
            below <= self.delivered,
            "forgetting below {below}, undelivered slots"
        );
        self.log.truncate(below);
    }

    /// The whole acceptor state as a checkpoint value, for an embedder that stores it in
    /// its own checkpoint ([`Record::Checkpoint`] of it is the first record to recover).
    pub fn checkpoint(&self) -> Checkpoint<V> {
        self.log.checkpoint()
    }

    /// After [`Paxos::recover`]: the embedder's restored state already covers the slots
    /// below `upto` (it took them from `take_decided` before its checkpoint), so they are
    /// not delivered again.
    pub fn skip_delivery(&mut self, upto: Slot) {
        assert!(
            upto <= self.log.decided_upto(),
            "skipping delivery to {upto}, past the decided prefix {}",
            self.log.decided_upto()
        );
        self.delivered = self.delivered.max(upto);
    }

    /// Every slot below this was taken from [`Paxos::take_decided`].
    pub fn delivered(&self) -> Slot {
        self.delivered
    }

    /// Emits a [`Record::Checkpoint`] of the whole acceptor state; once it is durable the
    /// records before it may be dropped.
    pub fn compact(&mut self) {
        let c = self.log.checkpoint();
        self.persist(Record::Checkpoint(Box::new(c)));
    }

    /// The preferred member of a group that has never had a leader (nothing promised,
    /// nothing decided: a fresh cluster) campaigns now instead of after an election
    /// timeout; anyone else, or a group with history, keeps its timer.
    pub fn boot(&mut self, now: Nanos) {
        self.now = now;
        let fresh = self.log.promised == Ballot::ZERO && self.log.decided_upto() == 0;
        if fresh && self.cfg.me == self.cfg.preferred && matches!(self.role, Role::Follower) {
            self.timers.set(Timer::Election, now);
        }
    }

    /// Leading in phase 2 (proposals get slots at once).
    pub fn is_leader(&self) -> bool {
        matches!(&self.role, Role::Leader(l) if l.phase2)
    }

    /// A phase-2 leader's ballot and the values `take_decided` will hand out next while
    /// it leads that ballot: decided but not taken, then its undecided slots in order,
    /// then its queued proposals.
    pub fn pending_values(&self) -> Option<(Ballot, Vec<&V>)> {
        let Role::Leader(l) = &self.role else {
            return None;
        };
        if !l.phase2 {
            return None;
        }
        let untaken = (self.delivered..self.log.decided_upto())
            .filter_map(|s| self.log.decided(s).and_then(|v| v.as_ref()));
        let in_flight = l.in_flight.values().filter_map(|f| f.value.as_ref());
        let values = untaken.chain(in_flight).chain(self.queued.iter()).collect();
        Some((l.ballot, values))
    }

    /// The leader this member follows (itself when leading or leader-elect).
    pub fn leader(&self) -> Option<Member> {
        self.leader
    }

    pub fn promised(&self) -> Ballot {
        self.log.promised
    }

    /// Every slot below this is decided here.
    pub fn decided_upto(&self) -> Slot {
        self.log.decided_upto()
    }

    pub fn truncated_below(&self) -> Slot {
        self.log.truncated_below()
    }

    /// The decided value of `slot` (`Some(None)` for a no-op), if decided and kept.
    pub fn decided_value(&self, slot: Slot) -> Option<Option<&V>> {
        self.log.decided(slot).map(Option::as_ref)
    }

    /// On the leader: the lowest decided prefix any member reported (a GC hint).
    pub fn decided_everywhere(&self) -> Option<Slot> {
        match &self.role {
            Role::Leader(l) => l.decided_at.iter().min().copied(),
            _ => None,
        }
    }

    /// A snapshot is needed below this before this member can catch up.
    pub fn snapshot_needed(&self) -> Option<Slot> {
        self.snapshot_needed
    }

    pub fn check_invariants(&self) -> Result<(), String> {
        self.log.check(self.cfg.accept_window())?;
        let d = self.log.decided_upto();
        let t = self.log.truncated_below();
        if !(t <= self.delivered && self.delivered <= d) {
            return Err(format!("delivered {} outside {t}..={d}", self.delivered));
        }
        if self.round_seen < self.log.promised.round {
            return Err(format!("round seen {} below promised", self.round_seen));
        }
        if self.durable_seq > self.last_seq {
            return Err(format!("durable seq {} above last", self.durable_seq));
        }
        if self
            .held
            .keys()
            .next()
            .is_some_and(|k| *k <= self.durable_seq)
        {
            return Err("messages held on a durable record".into());
        }
        if self.queued.len() > QUEUED_MAX {
            return Err(format!("{} proposals queued", self.queued.len()));
        }
        self.check_role()
    }

    fn within_limits(&self, msg: &Msg<V>) -> bool {
        let len = match msg {
            Msg::Promise { accepted, .. } => accepted.len(),
            Msg::Accept { entries, .. } => entries.len(),
            Msg::Accepted { slots, .. } => slots.len(),
            Msg::Decided { values, .. } => values.len(),
            _ => 0,
        };
        len <= self.cfg.batch_max
    }

    /// Handles the messages to itself, then sends what the leader batched, until quiet.
    fn finish(&mut self) {
        loop {
            while let Some(msg) = self.inbox.pop_front() {
                self.dispatch(self.cfg.me, msg);
            }
            if !self.flush() {
                break;
            }
        }
    }

    fn persist(&mut self, record: Record<V>) {
        assert!(
            self.last_seq - self.durable_seq < RECORDS_IN_FLIGHT_MAX as u64,
            "too many records in flight: the disk stopped answering"
        );
        self.last_seq += 1;
        let seq = self.last_seq;
        self.outputs.push(Output::Persist { seq, record });
    }

    fn send(&mut self, to: Member, msg: Msg<V>) {
        // An acceptance leaves for its leader once (copies to the other learners are not
        // reported again); a follower counts its own, durable by now, as a learner.
        if let Msg::Accepted { ballot, slots, .. } = &msg {
            if to == ballot.member {
                self.report_accepted(*ballot, slots);
                if ballot.member != self.cfg.me && self.cfg.learn_from_acceptances {
                    let (ballot, slots) = (*ballot, slots.clone());
                    self.count_acceptances(self.cfg.me, ballot, &slots);
                }
            }
        }
        if to == self.cfg.me {
            self.inbox.push_back(msg);
        } else {
            self.outputs.push(Output::Send { to, msg });
        }
    }

    /// [`Output::Accepted`] for the slots of an `Accepted` leaving now: the values held
    /// in that ballot (or decided since).
    fn report_accepted(&mut self, ballot: Ballot, slots: &[Slot]) {
        let values: Vec<(Slot, V)> = (slots.iter())
            .filter_map(|s| {
                let held = match self.log.accepted.get(s) {
                    Some((b, v)) if *b == ballot => v.as_ref(),
                    _ => self.log.decided(*s).and_then(|v| v.as_ref()),
                };
                held.map(|v| (*s, v.clone()))
            })
            .collect();
        if !values.is_empty() {
            self.outputs.push(Output::Accepted { ballot, values });
        }
    }

    /// Sends `msg` once every record persisted so far is durable.
    fn send_durable(&mut self, to: Member, msg: Msg<V>) {
        if self.durable_seq >= self.last_seq {
            self.send(to, msg);
        } else {
            self.held.entry(self.last_seq).or_default().push((to, msg));
        }
    }

    fn others(&self) -> impl Iterator<Item = Member> {
        let me = self.cfg.me;
        (0..self.cfg.members).filter(move |m| *m != me)
    }

    fn arm_election(&mut self, since: Nanos) {
        let at = self.cfg.election_deadline(since);
        self.timers.set(Timer::Election, at);
    }
}
