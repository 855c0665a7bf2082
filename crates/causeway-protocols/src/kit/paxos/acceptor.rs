//! The acceptor and learner side of every member: promises, acceptances, the leader's
//! commit index, and catch-up (asking for decided values and serving them).

use super::types::{Ballot, Msg, Output, Record, Slot};
use super::{Ahead, Ask, Member, Paxos, Role, Timer};
use serde::{de::DeserializeOwned, Serialize};
use std::collections::BTreeMap;
use std::fmt::Debug;

impl<V: Clone + Debug + Serialize + DeserializeOwned> Paxos<V> {
    pub(super) fn dispatch(&mut self, from: Member, msg: Msg<V>) {
        match msg {
            Msg::Prepare { ballot, from: slot } => self.on_prepare(from, ballot, slot),
            Msg::Promise {
                ballot,
                decided_upto,
                accepted,
            } => self.on_promise(from, ballot, decided_upto, accepted),
            Msg::Accept {
                ballot,
                decided_upto,
                entries,
            } => self.on_accept(from, ballot, decided_upto, entries),
            Msg::Accepted {
                ballot,
                decided_upto,
                slots,
            } => self.on_accepted(from, ballot, decided_upto, slots),
            Msg::Heartbeat {
                ballot,
                decided_upto,
            } => self.on_heartbeat(from, ballot, decided_upto),
            Msg::Nack { promised } => self.on_nack(promised),
            Msg::CatchUp { from: slot } => self.on_catch_up(from, slot),
            Msg::Decided {
                from: slot,
                values,
                decided_upto,
            } => self.on_decided(from, slot, values, decided_upto),
            Msg::Truncated { below } => self.on_truncated(from, below),
        }
    }

    /// Phase 1b: promise (durably) and report the accepted, undecided slots.
    fn on_prepare(&mut self, from: Member, ballot: Ballot, from_slot: Slot) {
        if ballot < self.log.promised {
            self.nack(from);
            return self.yield_to_preferred(from);
        }
        if ballot > self.log.promised {
            if self.sticky(from) {
                return;
            }
            if self.far_behind(from_slot) {
                return self.on_catch_up(from, from_slot);
            }
            self.saw_ballot(ballot);
            self.log.promised = ballot;
            self.persist(Record::Promised { ballot });
            if from != self.cfg.me {
                self.leader = None;
                self.heard_leader_at = None;
                self.arm_election(self.now);
            }
        }
        let d = self.log.decided_upto();
        let accepted: Vec<_> = (self.log.accepted.range(from_slot.max(d)..))
            .map(|(s, (b, v))| (*s, *b, v.clone()))
            .collect();
        assert!(
            accepted.len() <= self.cfg.batch_max,
            "a promise over the batch limit"
        );
        let promise = Msg::Promise {
            ballot,
            decided_upto: d,
            accepted,
        };
        self.send_durable(from, promise);
    }

    /// Whether to ignore a prepare from `from`: a live leader is known and `from` is
    /// neither it nor the preferred member (a liveness choice only).
    fn sticky(&self, from: Member) -> bool {
        let timeout = self.cfg.election_timeout_ns;
        let alive = matches!(self.role, Role::Leader(_))
            || self.heard_leader_at.is_some_and(|t| self.now < t + timeout);
        alive && from != self.cfg.me && from != self.cfg.preferred && self.leader != Some(from)
    }

    /// Whether a candidate whose decided prefix is `from_slot` lags ours by more than the
    /// window: it gets decided values instead of a promise, so that a member back from a
    /// long absence does not win and then stall the group while it catches up (Raft's
    /// up-to-date rule; a liveness choice only, the most advanced member always passes).
    fn far_behind(&self, from_slot: Slot) -> bool {
        let window = self.cfg.in_flight_max as u64;
        self.log.decided_upto() > from_slot.saturating_add(window)
    }

    /// A candidate that hears the preferred member campaign stops campaigning (the nack
    /// lets the preferred member pick a higher round; campaigning on would only tie it).
    fn yield_to_preferred(&mut self, from: Member) {
        if from == self.cfg.preferred && matches!(self.role, Role::Candidate(_)) {
            self.step_down();
        }
    }

    fn nack(&mut self, to: Member) {
        let promised = self.log.promised;
        self.send(to, Msg::Nack { promised });
    }

    /// A ballot exists: remember its round, and give up a role of a lower ballot.
    pub(super) fn saw_ballot(&mut self, ballot: Ballot) {
        self.round_seen = self.round_seen.max(ballot.round);
        if self.role_ballot().is_some_and(|b| b < ballot) {
            self.step_down();
        }
    }

    /// `from` leads in `ballot` (not below our promise) with decided prefix `upto`.
    fn follow(&mut self, from: Member, ballot: Ballot, upto: Slot) {
        self.saw_ballot(ballot);
        if self.leader != Some(from) {
            self.following_since = self.now;
        }
        self.leader = Some(from);
        self.heard_leader_at = Some(self.now);
        self.saw_prefix(from, upto);
        let preferred = self.cfg.me == self.cfg.preferred;
        let since = if preferred {
            self.following_since
        } else {
            self.now
        };
        self.arm_election(since);
    }

    /// Phase 2b: accept (durably) what lies within the window above the decided prefix.
    /// A decided slot is acknowledged without being stored: a Paxos acceptor accepts in
    /// any ballot it promised, and for a decided slot it reports the decided value in
    /// every later promise (through its prefix), which is what any choice there is. A
    /// stale ballot still gets no majority: the quorum that chose promised a higher one.
    fn on_accept(
        &mut self,
        from: Member,
        ballot: Ballot,
        upto: Slot,
        entries: Vec<(Slot, Option<V>)>,
    ) {
        if ballot < self.log.promised {
            return self.nack(from);
        }
        let raised = ballot > self.log.promised;
        if from != self.cfg.me {
            self.follow(from, ballot, upto);
        }
        self.learn_commit(ballot, upto);
        let d = self.log.decided_upto();
        let limit = d + self.cfg.accept_window();
        let (mut fresh, mut slots) = (Vec::new(), Vec::new());
        for (s, v) in entries.into_iter().filter(|(s, _)| *s < limit) {
            slots.push(s);
            if s >= d && self.log.accepted.get(&s).is_none_or(|(b, _)| *b != ballot) {
                self.log.accept(ballot, s, v.clone());
                fresh.push((s, v));
            }
        }
        self.log.promised = self.log.promised.max(ballot);
        if !fresh.is_empty() {
            self.persist(Record::Accepted {
                ballot,
                entries: fresh,
            });
        } else if raised {
            self.persist(Record::Promised { ballot });
        }
        let decided_upto = self.log.decided_upto();
        if self.cfg.learn_from_acceptances && !slots.is_empty() {
            let learners: Vec<Member> = self.others().filter(|m| *m != from).collect();
            for m in learners {
                let copy = Msg::Accepted {
                    ballot,
                    decided_upto,
                    slots: slots.clone(),
                };
                self.send_durable(m, copy);
            }
        }
        self.send_durable(
            from,
            Msg::Accepted {
                ballot,
                decided_upto,
                slots,
            },
        );
        if upto > decided_upto {
            self.ask_catch_up(from);
        }
    }

    /// A learner (`learn_from_acceptances`) counts `from`'s durable acceptance of `slots`
    /// in `ballot`, the ballot it follows, and learns the slots a majority accepted there,
    /// in slot order from its decided prefix: the leader's own rule for deciding
    /// (`advance`), so what it learns is what the leader decides; what it accepted in
    /// that ballot is the value (`learn_commit`), one value per slot per ballot.
    pub(super) fn count_acceptances(&mut self, from: Member, ballot: Ballot, slots: &[Slot]) {
        if ballot != self.log.promised {
            return;
        }
        if self.acks.0 != ballot {
            self.acks = (ballot, BTreeMap::new());
        }
        let d = self.log.decided_upto();
        let limit = d + self.cfg.accept_window();
        for s in slots.iter().filter(|s| (d..limit).contains(*s)) {
            self.acks.1.entry(*s).or_default().insert(from);
        }
        let quorum = self.cfg.quorum();
        let mut upto = d;
        while self.acks.1.get(&upto).is_some_and(|a| a.len() >= quorum) {
            upto += 1;
        }
        if upto > d {
            if self.cfg.mutations.learn_any_value {
                for (_, (b, _)) in self.log.accepted.range_mut(d..upto) {
                    *b = ballot;
                }
            }
            self.learn_commit(ballot, upto);
        }
        let kept = self.acks.1.split_off(&self.log.decided_upto());
        self.acks.1 = kept;
    }

    fn on_heartbeat(&mut self, from: Member, ballot: Ballot, upto: Slot) {
        if ballot < self.log.promised {
            return self.nack(from);
        }
        if from == self.cfg.me {
            return;
        }
        self.follow(from, ballot, upto);
        self.learn_commit(ballot, upto);
        let decided_upto = self.log.decided_upto();
        let ack = Msg::Accepted {
            ballot,
            decided_upto,
            slots: Vec::new(),
        };
        self.send(from, ack);
        if upto > decided_upto {
            self.ask_catch_up(from);
        }
    }

    /// The leader of `ballot` has decided every slot below `upto`: what we accepted in
    /// `ballot` there is its decision.
    fn learn_commit(&mut self, ballot: Ballot, upto: Slot) {
        let start = self.log.decided_upto();
        while self.log.decided_upto() < upto {
            let d = self.log.decided_upto();
            match self.log.accepted.get(&d) {
                Some((b, v)) if *b == ballot => {
                    let v = v.clone();
                    self.log.push_decided(v);
                }
                _ => break,
            }
        }
        let upto = self.log.decided_upto();
        if upto > start {
            let learned = Vec::new();
            self.persist(Record::Decided { upto, learned });
        }
    }

    /// Asks `to` for decided values from our prefix on, unless an answer to the same
    /// request is still expected (paced by `resend_ns`).
    pub(super) fn ask_catch_up(&mut self, to: Member) {
        let d = self.log.decided_upto();
        let resend = self.cfg.resend_ns;
        let pending = self
            .ask
            .is_some_and(|a| a.from >= d && self.now < a.at + resend);
        if !pending {
            self.send_ask(to);
        }
    }

    pub(super) fn send_ask(&mut self, to: Member) {
        let from = self.log.decided_upto();
        self.send(to, Msg::CatchUp { from });
        self.ask = Some(Ask { from, at: self.now });
        self.timers
            .set(Timer::CatchUp, self.now + self.cfg.resend_ns);
    }

    /// Serves decided values from `from_slot` on, or says they are truncated.
    fn on_catch_up(&mut self, to: Member, from_slot: Slot) {
        let below = self.log.truncated_below();
        if from_slot < below {
            return self.send(to, Msg::Truncated { below });
        }
        let decided_upto = self.log.decided_upto();
        let end = decided_upto.min(from_slot + self.cfg.batch_max as u64);
        let values = (from_slot..end)
            .map(|s| self.log.decided(s).expect("kept").clone())
            .collect();
        let msg = Msg::Decided {
            from: from_slot,
            values,
            decided_upto,
        };
        self.send(to, msg);
    }

    /// Decided values from a member that has them (ignored by a leader in phase 2, whose
    /// commit index must only count slots it decided itself).
    fn on_decided(&mut self, from: Member, start: Slot, values: Vec<Option<V>>, theirs: Slot) {
        if self.is_leader() {
            return;
        }
        let d0 = self.log.decided_upto();
        if start <= d0 {
            let mut learned = Vec::new();
            for v in values.into_iter().skip((d0 - start) as usize) {
                learned.push((self.log.decided_upto(), v.clone()));
                self.log.push_decided(v);
            }
            if !learned.is_empty() {
                let upto = self.log.decided_upto();
                self.persist(Record::Decided { upto, learned });
            }
        }
        self.saw_prefix(from, theirs);
        if self.log.decided_upto() > d0 {
            self.caught_up_some();
        }
        if matches!(self.role, Role::Candidate(_)) && self.far_ahead().is_some() {
            self.step_down();
        }
        if theirs > self.log.decided_upto() {
            self.ask_catch_up(from);
        }
    }

    /// `from` truncated the slots we lack: the embedder must install a snapshot.
    fn on_truncated(&mut self, from: Member, below: Slot) {
        if below <= self.log.decided_upto() {
            return;
        }
        self.snapshot_needed = Some(self.snapshot_needed.unwrap_or(0).max(below));
        self.outputs.push(Output::SnapshotNeeded {
            source: from,
            below,
        });
        self.step_down();
    }

    /// The catch-up timer: ask again whoever should have what we lack.
    pub(super) fn on_catch_up_timer(&mut self) {
        match &self.role {
            Role::Leader(l) if !l.phase2 => self.ask_next_source(),
            Role::Leader(_) => {}
            _ => self.retry_catch_up(),
        }
    }

    /// Asks again whoever showed more lately, or the leader if a snapshot is awaited
    /// (its `Truncated` answer repeats the signal).
    pub(super) fn retry_catch_up(&mut self) {
        let ahead = self.ahead_by(0);
        let leader = self.leader.filter(|_| self.snapshot_needed.is_some());
        if let Some(m) = ahead.or(leader).filter(|m| *m != self.cfg.me) {
            self.send_ask(m);
        }
    }

    /// `member` showed decided prefix `upto`: remember the longest heard lately.
    fn saw_prefix(&mut self, member: Member, upto: Slot) {
        let timeout = self.cfg.election_timeout_ns;
        let replace = self
            .ahead
            .is_none_or(|a| a.member == member || upto >= a.upto || self.now >= a.at + timeout);
        if replace && member != self.cfg.me {
            let now = self.now;
            self.ahead = Some(Ahead {
                member,
                upto,
                at: now,
            });
        }
    }

    /// The member that showed, within an election timeout, a decided prefix more than
    /// `by` slots past ours.
    pub(super) fn ahead_by(&self, by: u64) -> Option<Member> {
        let (d, timeout) = (self.log.decided_upto(), self.cfg.election_timeout_ns);
        let fresh = self.ahead.filter(|a| self.now < a.at + timeout);
        fresh.filter(|a| a.upto > d + by).map(|a| a.member)
    }

    /// A member more than a window ahead, heard lately: this one should catch up from it
    /// rather than campaign (it would be refused, and its rounds would only delay others).
    pub(super) fn far_ahead(&self) -> Option<Member> {
        self.ahead_by(self.cfg.in_flight_max as u64)
    }
}
