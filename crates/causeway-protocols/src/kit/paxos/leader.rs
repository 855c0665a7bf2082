//! The proposer side: campaigning (phase 1), the leader-elect's recovery and catch-up,
//! phase 2 with its window and re-sends, heartbeats, stepping down.

use super::types::{Ballot, Entry, Msg, Record, Slot};
use super::{Member, Paxos, Role, Timer};
use causeway_core::Nanos;
use serde::{de::DeserializeOwned, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;

/// A promise: the promiser's decided prefix and its accepted, undecided slots.
type Promise<V> = (Slot, Vec<(Slot, Ballot, Entry<V>)>);

/// Running phase 1.
#[derive(Debug)]
pub(super) struct Candidate<V> {
    pub ballot: Ballot,
    pub promises: BTreeMap<Member, Promise<V>>,
}

/// A proposed, undecided slot.
#[derive(Debug)]
pub(super) struct InFlight<V> {
    pub value: Entry<V>,
    pub acks: BTreeSet<Member>,
    pub sent_at: Nanos,
}

/// A majority promised: catching up to `target`, then phase 2.
#[derive(Debug)]
pub(super) struct Leader<V> {
    pub ballot: Ballot,
    /// Slots below were decided before this ballot: learned, not proposed.
    pub target: Slot,
    /// Promisers whose decided prefix passed ours, best first (catch-up sources).
    pub sources: Vec<Member>,
    pub asks: usize,
    /// The values phase 1 recovered, re-proposed once caught up.
    pub recovered: BTreeMap<Slot, Entry<V>>,
    pub phase2: bool,
    /// Exactly the slots `decided_upto..next_slot` in phase 2.
    pub in_flight: BTreeMap<Slot, InFlight<V>>,
    /// Slots to send in the next accept.
    pub unsent: Vec<Slot>,
    pub next_slot: Slot,
    /// When each member last answered this ballot.
    pub heard: Vec<Option<Nanos>>,
    /// Each member's decided prefix, as last reported.
    pub decided_at: Vec<Slot>,
    pub since: Nanos,
    /// The decided prefix advanced: tell the members.
    pub commit_dirty: bool,
}

impl<V: Clone + Debug + Serialize + DeserializeOwned> Paxos<V> {
    pub(super) fn role_ballot(&self) -> Option<Ballot> {
        match &self.role {
            Role::Follower => None,
            Role::Candidate(c) => Some(c.ballot),
            Role::Leader(l) => Some(l.ballot),
        }
    }

    /// Phase 1a with a round above every one seen; our own ballot is durable before any
    /// prepare leaves. Proposals queued so far stay queued.
    pub(super) fn campaign(&mut self) {
        if self.snapshot_needed.is_some() {
            return self.arm_election(self.now);
        }
        let round = self.round_seen.max(self.log.promised.round) + 1;
        let ballot = Ballot {
            round,
            member: self.cfg.me,
        };
        self.round_seen = round;
        let promises = BTreeMap::new();
        self.role = Role::Candidate(Candidate { ballot, promises });
        self.leader = None;
        self.heard_leader_at = None;
        self.timers.cancel(Timer::Heartbeat);
        self.timers
            .set(Timer::Resend, self.now + self.cfg.resend_ns);
        self.arm_election(self.now);
        self.log.promised = ballot;
        self.persist(Record::Promised { ballot });
        let from = self.log.decided_upto();
        for m in 0..self.cfg.members {
            self.send_durable(m, Msg::Prepare { ballot, from });
        }
    }

    pub(super) fn on_promise(
        &mut self,
        from: Member,
        ballot: Ballot,
        upto: Slot,
        acc: Vec<(Slot, Ballot, Entry<V>)>,
    ) {
        let Role::Candidate(c) = &mut self.role else {
            return;
        };
        if c.ballot != ballot {
            return;
        }
        c.promises.insert(from, (upto, acc));
        if c.promises.len() >= self.cfg.quorum() {
            self.become_leader();
        }
    }

    /// A majority promised: recover the undecided slots, catch up, then phase 2.
    fn become_leader(&mut self) {
        let Role::Candidate(c) = std::mem::replace(&mut self.role, Role::Follower) else {
            unreachable!("only a candidate wins phase 1");
        };
        let d = self.log.decided_upto();
        let target = c.promises.values().map(|(u, _)| *u).fold(d, Slot::max);
        let recovered = if self.cfg.mutations.skip_recovery {
            BTreeMap::new()
        } else {
            recover_values(&c.promises, target)
        };
        let next_slot = recovered.keys().next_back().map_or(target, |s| s + 1);
        let mut ahead: Vec<(Slot, Member)> = (c.promises.iter())
            .filter(|(m, (u, _))| *u > d && **m != self.cfg.me)
            .map(|(m, (u, _))| (*u, *m))
            .collect();
        ahead.sort_by(|a, b| b.cmp(a));
        let n = self.cfg.members;
        let leader = Leader {
            ballot: c.ballot,
            target,
            sources: ahead.into_iter().map(|(_, m)| m).collect(),
            asks: 0,
            recovered,
            phase2: false,
            in_flight: BTreeMap::new(),
            unsent: Vec::new(),
            next_slot: next_slot.max(target),
            heard: vec![None; n],
            decided_at: vec![0; n],
            since: self.now,
            commit_dirty: false,
        };
        self.role = Role::Leader(Box::new(leader));
        self.leader = Some(self.cfg.me);
        self.timers.cancel(Timer::Resend);
        self.on_heartbeat_timer();
        if d >= target {
            self.start_phase2();
        } else {
            self.timers
                .set(Timer::Election, self.now + 2 * self.cfg.election_timeout_ns);
            self.ask_next_source();
        }
    }

    /// Caught up to the target: propose the recovered slots (no-ops in the gaps), then
    /// the queued values.
    fn start_phase2(&mut self) {
        let (d, now) = (self.log.decided_upto(), self.now);
        let Role::Leader(l) = &mut self.role else {
            return;
        };
        assert!(!l.phase2 && d >= l.target, "phase 2 starts once, caught up");
        l.phase2 = true;
        l.next_slot = l.next_slot.max(d);
        let recovered = std::mem::take(&mut l.recovered);
        for s in d..l.next_slot {
            let value = recovered.get(&s).cloned().unwrap_or(None);
            let acks = BTreeSet::new();
            l.in_flight.insert(
                s,
                InFlight {
                    value,
                    acks,
                    sent_at: now,
                },
            );
            l.unsent.push(s);
        }
        self.timers.cancel(Timer::Election);
        self.timers.cancel(Timer::CatchUp);
        self.timers.set(Timer::Resend, now + self.cfg.resend_ns);
        self.fill_from_queue();
    }

    /// The decided prefix grew by catch-up: a leader-elect may be done, or has more time.
    pub(super) fn caught_up_some(&mut self) {
        let d = self.log.decided_upto();
        let Role::Leader(l) = &self.role else {
            return;
        };
        if d >= l.target {
            self.start_phase2();
        } else {
            self.timers
                .set(Timer::Election, self.now + 2 * self.cfg.election_timeout_ns);
        }
    }

    /// A leader-elect asks the next promiser that is ahead (rotating on every retry).
    pub(super) fn ask_next_source(&mut self) {
        let Role::Leader(l) = &mut self.role else {
            return;
        };
        assert!(
            !l.sources.is_empty(),
            "a leader-elect behind its target has sources"
        );
        let to = l.sources[l.asks % l.sources.len()];
        l.asks += 1;
        self.send_ask(to);
    }

    pub(super) fn window_open(&self) -> bool {
        let d = self.log.decided_upto();
        match &self.role {
            Role::Leader(l) => l.phase2 && l.next_slot < d + self.cfg.in_flight_max as u64,
            _ => false,
        }
    }

    /// Gives `value` the next slot (sent with the next flush).
    pub(super) fn assign(&mut self, value: V) -> Slot {
        let now = self.now;
        let Role::Leader(l) = &mut self.role else {
            unreachable!("only a leader assigns slots");
        };
        let s = l.next_slot;
        l.next_slot += 1;
        let acks = BTreeSet::new();
        let value = Some(value);
        l.in_flight.insert(
            s,
            InFlight {
                value,
                acks,
                sent_at: now,
            },
        );
        l.unsent.push(s);
        s
    }

    fn fill_from_queue(&mut self) {
        while self.window_open() {
            let Some(v) = self.queued.pop_front() else {
                break;
            };
            self.assign(v);
        }
    }

    /// Sends the accepts batched since the last flush (to every member, this one
    /// included), or a heartbeat if only the decided prefix moved. True if a message to
    /// this member itself is waiting.
    pub(super) fn flush(&mut self) -> bool {
        let d = self.log.decided_upto();
        let Role::Leader(l) = &mut self.role else {
            return false;
        };
        let (ballot, dirty) = (l.ballot, std::mem::take(&mut l.commit_dirty));
        let unsent = std::mem::take(&mut l.unsent);
        let entries: Vec<(Slot, Entry<V>)> = (unsent.iter())
            .filter_map(|s| l.in_flight.get(s).map(|f| (*s, f.value.clone())))
            .collect();
        if entries.is_empty() {
            if dirty {
                self.heartbeat_others(ballot);
            }
            return false;
        }
        for chunk in entries.chunks(self.cfg.batch_max) {
            for m in 0..self.cfg.members {
                let entries = chunk.to_vec();
                self.send(
                    m,
                    Msg::Accept {
                        ballot,
                        decided_upto: d,
                        entries,
                    },
                );
            }
        }
        true
    }

    fn heartbeat_others(&mut self, ballot: Ballot) {
        let decided_upto = self.log.decided_upto();
        let others: Vec<Member> = self.others().collect();
        for m in others {
            self.send(
                m,
                Msg::Heartbeat {
                    ballot,
                    decided_upto,
                },
            );
        }
    }

    pub(super) fn on_accepted(
        &mut self,
        from: Member,
        ballot: Ballot,
        upto: Slot,
        slots: Vec<Slot>,
    ) {
        let now = self.now;
        let Role::Leader(l) = &mut self.role else {
            if self.cfg.learn_from_acceptances {
                self.count_acceptances(from, ballot, &slots);
            }
            return;
        };
        if l.ballot != ballot {
            return;
        }
        l.heard[from] = Some(now);
        l.decided_at[from] = l.decided_at[from].max(upto);
        for s in slots {
            if let Some(f) = l.in_flight.get_mut(&s) {
                f.acks.insert(from);
            }
        }
        self.advance();
    }

    /// Decides the slots a majority accepted, in slot order from the decided prefix.
    fn advance(&mut self) {
        let (quorum, start) = (self.cfg.quorum(), self.log.decided_upto());
        let Role::Leader(l) = &mut self.role else {
            return;
        };
        let mut learned = Vec::new();
        while let Some(first) = l.in_flight.first_entry() {
            if first.get().acks.len() < quorum {
                break;
            }
            let (s, f) = first.remove_entry();
            assert_eq!(
                s,
                self.log.decided_upto(),
                "in-flight slots start at the prefix"
            );
            let mine = self
                .log
                .accepted
                .get(&s)
                .is_some_and(|(b, _)| *b == l.ballot);
            if !mine {
                learned.push((s, f.value.clone()));
            }
            self.log.push_decided(f.value);
        }
        let upto = self.log.decided_upto();
        if upto > start {
            l.commit_dirty = true;
            l.decided_at[self.cfg.me] = upto;
            self.persist(Record::Decided { upto, learned });
            self.fill_from_queue();
        }
    }

    /// A member promised a higher ballot: the preferred member campaigns again at once
    /// (a member back from a partition rejoins without waiting); others step down.
    pub(super) fn on_nack(&mut self, promised: Ballot) {
        let preempted = self.role_ballot().is_some_and(|b| b < promised);
        self.round_seen = self.round_seen.max(promised.round);
        if preempted && self.cfg.me == self.cfg.preferred {
            self.campaign();
        } else {
            self.saw_ballot(promised);
        }
    }

    /// Back to follower: queued proposals are dropped (the embedder takes them back).
    pub(super) fn step_down(&mut self) {
        if matches!(self.role, Role::Follower) {
            return;
        }
        self.role = Role::Follower;
        self.dropped.extend(self.queued.drain(..));
        if self.leader == Some(self.cfg.me) {
            self.leader = None;
        }
        self.timers.cancel(Timer::Heartbeat);
        self.timers.cancel(Timer::Resend);
        self.arm_election(self.now);
    }

    pub(super) fn on_election_timer(&mut self) {
        match &self.role {
            Role::Follower => self.election_due(),
            Role::Candidate(_) if self.far_ahead().is_some() => {
                self.step_down();
                self.retry_catch_up();
            }
            Role::Candidate(_) => self.campaign(),
            Role::Leader(l) if !l.phase2 => self.campaign(),
            Role::Leader(_) => {}
        }
    }

    /// A follower's election deadline passed: the leader is silent, or (the preferred
    /// member) it reclaims the leadership; either way only once caught up to within the
    /// window of every member heard lately.
    fn election_due(&mut self) {
        if self.far_ahead().is_some() {
            self.retry_catch_up();
            return self.arm_election(self.now);
        }
        self.campaign();
    }

    /// Heartbeats, and stepping down without a majority heard within an election timeout.
    pub(super) fn on_heartbeat_timer(&mut self) {
        let (now, timeout) = (self.now, self.cfg.election_timeout_ns);
        let Role::Leader(l) = &self.role else {
            return;
        };
        let heard = (l.heard.iter().enumerate())
            .filter(|(m, t)| *m != self.cfg.me && t.is_some_and(|t| now < t + timeout))
            .count();
        if now >= l.since + timeout && heard + 1 < self.cfg.quorum() {
            return self.step_down();
        }
        self.heartbeat_others(l.ballot);
        self.timers
            .set(Timer::Heartbeat, now + self.cfg.heartbeat_ns);
    }

    /// A candidate re-sends its prepare to the members that have not promised, every
    /// `resend_ns` (a lost message costs a re-send, not an election timeout).
    fn resend_prepares(&mut self) {
        let Role::Candidate(c) = &self.role else {
            return;
        };
        let (ballot, from) = (c.ballot, self.log.decided_upto());
        let silent: Vec<Member> = (self.others())
            .filter(|m| !c.promises.contains_key(m))
            .collect();
        for m in silent {
            self.send_durable(m, Msg::Prepare { ballot, from });
        }
        self.timers
            .set(Timer::Resend, self.now + self.cfg.resend_ns);
    }

    /// Re-sends the accepts a member has not acknowledged for `resend_ns` (a candidate:
    /// its prepares).
    pub(super) fn on_resend_timer(&mut self) {
        let (now, d, me) = (self.now, self.log.decided_upto(), self.cfg.me);
        let stale_at = now.saturating_sub(self.cfg.resend_ns);
        if matches!(self.role, Role::Candidate(_)) {
            return self.resend_prepares();
        }
        let Role::Leader(l) = &mut self.role else {
            return;
        };
        let mut sends = Vec::new();
        for m in (0..self.cfg.members).filter(|m| *m != me) {
            let entries: Vec<(Slot, Entry<V>)> = (l.in_flight.iter())
                .filter(|(_, f)| f.sent_at <= stale_at && !f.acks.contains(&m))
                .take(self.cfg.batch_max)
                .map(|(s, f)| (*s, f.value.clone()))
                .collect();
            if !entries.is_empty() {
                sends.push((
                    m,
                    Msg::Accept {
                        ballot: l.ballot,
                        decided_upto: d,
                        entries,
                    },
                ));
            }
        }
        for f in l.in_flight.values_mut().filter(|f| f.sent_at <= stale_at) {
            f.sent_at = now;
        }
        for (m, msg) in sends {
            self.send(m, msg);
        }
        self.timers.set(Timer::Resend, now + self.cfg.resend_ns);
    }

    pub(super) fn check_role(&self) -> Result<(), String> {
        let (me, d) = (self.cfg.me, self.log.decided_upto());
        let ballot = self.role_ballot();
        if ballot.is_some_and(|b| b.member != me || b != self.log.promised) {
            return Err(format!(
                "role ballot {ballot:?}, promised {:?}",
                self.log.promised
            ));
        }
        let Role::Leader(l) = &self.role else {
            return Ok(());
        };
        if !l.phase2 {
            return match l.in_flight.is_empty() {
                true => Ok(()),
                false => Err("a leader-elect has slots in flight".into()),
            };
        }
        let first = l.in_flight.keys().next().copied().unwrap_or(d);
        let span = l.next_slot.checked_sub(d);
        if first != d || span != Some(l.in_flight.len() as u64) {
            return Err(format!(
                "in flight {first}.. ({}) vs {d}..{}",
                l.in_flight.len(),
                l.next_slot
            ));
        }
        if l.next_slot - d > self.cfg.accept_window() {
            return Err(format!(
                "next slot {} beyond the window above {d}",
                l.next_slot
            ));
        }
        Ok(())
    }
}

/// For every slot at or above `target`, the value of the highest ballot any promise
/// reports.
fn recover_values<V: Clone>(
    promises: &BTreeMap<Member, Promise<V>>,
    target: Slot,
) -> BTreeMap<Slot, Entry<V>> {
    let mut best: BTreeMap<Slot, (Ballot, &Entry<V>)> = BTreeMap::new();
    for (s, b, v) in promises.values().flat_map(|(_, acc)| acc) {
        if *s >= target && best.get(s).is_none_or(|(bb, _)| bb < b) {
            best.insert(*s, (*b, v));
        }
    }
    best.into_iter().map(|(s, (_, v))| (s, v.clone())).collect()
}

#[cfg(test)]
impl<V: Clone + Debug + Serialize + DeserializeOwned> Paxos<V> {
    /// One line of state, for failing simulator runs.
    pub(super) fn describe(&self) -> String {
        let role = match &self.role {
            Role::Follower => "follower".to_string(),
            Role::Candidate(c) => {
                format!("candidate {:?} ({} promises)", c.ballot, c.promises.len())
            }
            Role::Leader(l) => format!(
                "leader {:?} phase2={} target={} next={} in_flight={:?} heard={:?}",
                l.ballot,
                l.phase2,
                l.target,
                l.next_slot,
                l.in_flight
                    .iter()
                    .map(|(s, f)| (*s, f.acks.len()))
                    .collect::<Vec<_>>(),
                l.heard
            ),
        };
        format!(
            "{role}; promised {:?}, decided {}, leader {:?} (at {:?}, ahead {:?}), queued {}, snapshot {:?}, timers next {:?}, seq {}/{}, accepted {:?}",
            self.log.promised,
            self.log.decided_upto(),
            self.leader,
            self.heard_leader_at,
            self.ahead,
            self.queued.len(),
            self.snapshot_needed,
            self.timers.next(),
            self.durable_seq,
            self.last_seq,
            self.log.accepted.keys().collect::<Vec<_>>()
        )
    }
}
