//! A seeded simulator for [`Paxos`]: one group on a network that delays (so reorders;
//! now and then past several election timeouts, so stale ballots arrive after failovers),
//! drops and duplicates messages, with disks that lose unsynced records, members that
//! crash and restart from their durable records only, partitions, truncation with
//! snapshots, and checkpoints. After a chaotic phase the network heals with at most f
//! members down, and every value then proposed must be decided everywhere.
//!
//! Checked at every step: agreement (one value per slot across all members and all
//! time), validity (only proposed values, each in at most one slot), in-order delivery,
//! every member's invariants; so every member's decided log is a prefix of another's.
//! "Chosen" counts too: a value whose durable acceptances in one ballot reach a true
//! majority is chosen, even if nobody learned it yet, and must agree with every decision
//! (no majority-accepted value is lost by a failover). After healing, the preferred
//! member (if up) must lead.

use super::{
    Ballot, Config, Member, Msg, Mutations, Output, Paxos, ProposeError, Proposed, Record, Slot,
};
use std::collections::{BTreeMap, BTreeSet};

const MS: u64 = 1_000_000;
/// Simulated time with faults, then at most this long for the healed group to settle:
/// the preferred member (if up) leads, every live member within the window of it.
const CHAOS_MS: u64 = 1_500;
const SETTLE_MAX_MS: u64 = 3_000;
/// The longest a message is delayed in the chaotic phase: settling is checked only once
/// every message sent before healing has arrived.
const LATE_MAX_MS: u64 = 320;
/// Values proposed once quiet, and how long they may take to be decided everywhere.
const LIVE_VALUES: usize = 20;
const LIVE_MS: u64 = 1_500;

/// xorshift64*, seeded through splitmix64: tiny, and the same on every platform.
pub(super) struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng((z ^ (z >> 31)) | 1)
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True once in `n` draws, on average.
    pub fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }
}

/// What one run saw (to show the sweep is not vacuous).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Stats {
    pub decided: u64,
    pub crashes: u64,
    pub snapshots: u64,
    pub checkpoints: u64,
    /// Ballots seen leading (phase 2).
    pub leaderships: u64,
    /// The longest time a healed group took to settle.
    pub settle_max_ms: u64,
    /// Slots a true majority acknowledged in one ballot.
    pub chosen: u64,
}

struct Node {
    px: Option<Paxos<u64>>,
    cfg: Config,
    durable: Vec<Record<u64>>,
    pending: Vec<(u64, Record<u64>)>,
    offset_ns: u64,
    down_until: u64,
    /// Decided slots below this were checked against `chosen`.
    checked_upto: Slot,
    /// The next slot this member may deliver.
    delivered_next: Slot,
    snapshot: Option<Slot>,
}

pub(super) struct Sim {
    rng: Rng,
    t: u64,
    nodes: Vec<Node>,
    wire: BTreeMap<(u64, u64), (Member, Member, Msg<u64>)>,
    wire_seq: u64,
    side: Vec<u8>,
    chaos: bool,
    chosen: BTreeMap<Slot, Option<u64>>,
    slot_of: BTreeMap<u64, Slot>,
    proposed: BTreeSet<u64>,
    next_value: u64,
    /// Durable acknowledgements per (slot, ballot): the value and who acknowledged it.
    acks: BTreeMap<(Slot, Ballot), (Option<u64>, BTreeSet<Member>)>,
    leaderships: BTreeSet<Ballot>,
    /// A violation found while routing outputs.
    failure: Option<String>,
    stats: Stats,
}

/// One whole run: chaos, heal, settle, liveness.
pub(super) fn run(seed: u64, members: usize, mutations: Mutations) -> Result<Stats, String> {
    let mut sim = Sim::new(seed, members, mutations);
    for _ in 0..CHAOS_MS {
        sim.step()?;
    }
    sim.heal();
    sim.settle()?;
    sim.liveness()?;
    Ok(sim.stats)
}

impl Sim {
    fn new(seed: u64, members: usize, mutations: Mutations) -> Sim {
        let mut rng = Rng::new(seed);
        let preferred = rng.below(members as u64) as usize;
        let nodes = (0..members)
            .map(|me| {
                let mut cfg = Config::new(members, me, preferred);
                cfg.heartbeat_ns = 10 * MS;
                cfg.election_timeout_ns = 60 * MS;
                cfg.resend_ns = 30 * MS;
                cfg.in_flight_max = 4;
                cfg.batch_max = 8;
                cfg.mutations = mutations;
                // Odd seeds run with every member a learner (UniStore's setting).
                cfg.learn_from_acceptances = seed % 2 == 1;
                let offset_ns = rng.below(1_000) * MS;
                Node {
                    px: Some(Paxos::new(cfg.clone(), offset_ns)),
                    cfg,
                    durable: Vec::new(),
                    pending: Vec::new(),
                    offset_ns,
                    down_until: 0,
                    checked_upto: 0,
                    delivered_next: 0,
                    snapshot: None,
                }
            })
            .collect();
        Sim {
            rng,
            t: 0,
            nodes,
            wire: BTreeMap::new(),
            wire_seq: 0,
            side: vec![0; members],
            chaos: true,
            chosen: BTreeMap::new(),
            slot_of: BTreeMap::new(),
            proposed: BTreeSet::new(),
            next_value: 1,
            acks: BTreeMap::new(),
            leaderships: BTreeSet::new(),
            failure: None,
            stats: Stats::default(),
        }
    }

    fn now(&self, i: usize) -> u64 {
        self.t + self.nodes[i].offset_ns
    }

    fn step(&mut self) -> Result<(), String> {
        self.t += MS;
        self.deliver_due();
        self.fire_timers();
        self.sync_disks()?;
        if self.chaos {
            self.faults()?;
        }
        if self.rng.one_in(3) {
            self.propose_somewhere();
        }
        if self.rng.one_in(100) {
            self.gc();
        }
        self.check_all()?;
        self.failure.take().map_or(Ok(()), Err)
    }

    /// Calls member `i` (if up) and routes what it outputs.
    fn call(&mut self, i: usize, f: impl FnOnce(&mut Paxos<u64>, u64)) {
        let now = self.now(i);
        let Some(px) = self.nodes[i].px.as_mut() else {
            return;
        };
        f(px, now);
        let outputs = px.take_outputs();
        for out in outputs {
            match out {
                Output::Send { to, msg } => self.post(i, to, msg),
                Output::Persist { seq, record } => self.nodes[i].pending.push((seq, record)),
                Output::SnapshotNeeded { below, .. } => self.nodes[i].snapshot = Some(below),
                Output::Accepted { .. } => {} // the values are checked once decided
            }
        }
    }

    /// Durable acceptances count towards "chosen" (a decided slot's acknowledgement,
    /// which stores nothing, is not counted).
    fn count_accepted(&mut self, i: Member, records: &[(u64, Record<u64>)]) {
        let majority = self.nodes.len() / 2 + 1;
        let mut chosen = Vec::new();
        for (_, r) in records {
            let Record::Accepted { ballot, entries } = r else {
                continue;
            };
            for (s, v) in entries {
                let (value, who) = self
                    .acks
                    .entry((*s, *ballot))
                    .or_insert((*v, BTreeSet::new()));
                assert_eq!(*value, *v, "one value per slot and ballot");
                if who.insert(i) && who.len() == majority {
                    chosen.push((*s, *v));
                }
            }
        }
        for (s, v) in chosen {
            self.stats.chosen += 1;
            if let Err(e) = self.agree(s, v) {
                self.failure
                    .get_or_insert(format!("chosen by a majority: {e}"));
            }
        }
    }

    fn linked(&self, a: Member, b: Member) -> bool {
        self.side[a] == self.side[b]
    }

    fn post(&mut self, from: Member, to: Member, msg: Msg<u64>) {
        assert_ne!(from, to, "messages to oneself stay inside");
        let drops = if self.chaos { 20 } else { 50 };
        if !self.linked(from, to) || self.rng.one_in(drops) {
            return;
        }
        let copies = if self.rng.one_in(30) { 2 } else { 1 };
        for _ in 0..copies {
            let late = self.chaos && self.rng.one_in(50);
            let delay_ms = if late {
                20 + self.rng.below(LATE_MAX_MS - 20)
            } else {
                1 + self.rng.below(10)
            };
            let at = self.t + delay_ms * MS;
            self.wire_seq += 1;
            self.wire
                .insert((at, self.wire_seq), (from, to, msg.clone()));
        }
    }

    fn deliver_due(&mut self) {
        let later = self.wire.split_off(&(self.t + 1, 0));
        let due = std::mem::replace(&mut self.wire, later);
        for (_, (from, to, msg)) in due {
            if self.linked(from, to) {
                self.call(to, |px, now| px.handle_message(now, from, msg));
            }
        }
    }

    fn fire_timers(&mut self) {
        for i in 0..self.nodes.len() {
            let now = self.now(i);
            let due = (self.nodes[i].px.as_ref())
                .is_some_and(|px| px.poll_timeout().is_some_and(|d| d <= now));
            if due {
                self.call(i, |px, now| px.handle_timeout(now));
            }
        }
    }

    /// Each disk syncs now and then: its pending records become durable (and a durable
    /// checkpoint lets it drop what came before); an awaited snapshot gets installed.
    fn sync_disks(&mut self) -> Result<(), String> {
        for i in 0..self.nodes.len() {
            if self.nodes[i].px.is_none() || !self.rng.one_in(2) {
                continue;
            }
            let pending = std::mem::take(&mut self.nodes[i].pending);
            self.count_accepted(i, &pending);
            if let Some((seq, _)) = pending.last() {
                let seq = *seq;
                let node = &mut self.nodes[i];
                node.durable.extend(pending.into_iter().map(|(_, r)| r));
                if let Some(c) = node
                    .durable
                    .iter()
                    .rposition(|r| matches!(r, Record::Checkpoint(_)))
                {
                    node.durable.drain(..c);
                }
                self.call(i, |px, now| px.handle_persisted(now, seq));
            }
            if let Some(below) = self.nodes[i].snapshot.take() {
                self.install_snapshot(i, below)?;
            }
        }
        Ok(())
    }

    /// The embedder's part: copy the state below `below` (here: every slot there is
    /// known chosen, since some member truncated it), then tell the member.
    fn install_snapshot(&mut self, i: usize, below: Slot) -> Result<(), String> {
        if let Some(s) = (0..below).find(|s| !self.chosen.contains_key(s)) {
            return Err(format!(
                "snapshot below {below} asked, slot {s} never decided"
            ));
        }
        self.stats.snapshots += 1;
        self.call(i, |px, now| px.install_snapshot(now, below));
        let node = &mut self.nodes[i];
        node.delivered_next = node.delivered_next.max(below);
        node.checked_upto = node.checked_upto.max(below);
        Ok(())
    }

    fn faults(&mut self) -> Result<(), String> {
        for i in 0..self.nodes.len() {
            if self.nodes[i].px.is_some() && self.rng.one_in(1_500) {
                self.crash(i);
            } else if self.nodes[i].px.is_none() && self.t >= self.nodes[i].down_until {
                self.restart(i)?;
            } else if self.nodes[i].px.is_some() && self.rng.one_in(500) {
                self.call(i, |px, _| px.compact());
                self.stats.checkpoints += 1;
            }
        }
        if self.rng.one_in(300) {
            let split = self.rng.one_in(2);
            for s in self.side.iter_mut() {
                *s = if split {
                    (self.rng.next() % 2) as u8
                } else {
                    0
                };
            }
        }
        Ok(())
    }

    fn crash(&mut self, i: usize) {
        let down_ms = 5 + self.rng.below(100);
        let node = &mut self.nodes[i];
        node.px = None;
        node.pending.clear();
        node.snapshot = None;
        node.down_until = self.t + down_ms * MS;
        self.stats.crashes += 1;
    }

    /// Rebuilt from its durable records only; delivery restarts at its truncation point.
    fn restart(&mut self, i: usize) -> Result<(), String> {
        let now = self.now(i);
        let node = &mut self.nodes[i];
        let px = Paxos::recover(node.cfg.clone(), &node.durable, now)
            .map_err(|e| format!("member {i} does not recover: {e}"))?;
        node.checked_upto = px.truncated_below();
        node.delivered_next = px.truncated_below();
        node.px = Some(px);
        Ok(())
    }

    /// The network heals and faults stop; up to f members stay down.
    fn heal(&mut self) {
        self.chaos = false;
        self.side.iter_mut().for_each(|s| *s = 0);
        let n = self.nodes.len();
        let down = self.rng.below(((n - 1) / 2) as u64 + 1) as usize;
        let first = self.rng.below(n as u64) as usize;
        for k in 0..n {
            let i = (first + k) % n;
            if k < down {
                self.crash(i);
                self.nodes[i].down_until = u64::MAX;
            } else if self.nodes[i].px.is_none() {
                self.nodes[i].down_until = 0;
                self.restart(i).expect("recovered before");
            }
        }
    }

    /// Proposes a fresh value at a random member, or at the leader it names.
    fn propose_somewhere(&mut self) {
        let i = self.rng.below(self.nodes.len() as u64) as usize;
        let v = self.next_value;
        if let Some(Err(ProposeError::NotLeader { hint: Some(h) })) = self.propose_at(i, v) {
            self.propose_at(h, v);
        }
    }

    fn propose_at(&mut self, i: usize, v: u64) -> Option<Result<Proposed, ProposeError>> {
        self.nodes[i].px.as_ref()?;
        let mut result = None;
        self.call(i, |px, now| result = Some(px.propose(now, v)));
        if result.is_some_and(|r| r.is_ok()) {
            self.proposed.insert(v);
            self.next_value += 1;
        }
        result
    }

    /// Truncates every live member below what all live members delivered (the embedder's
    /// "applied everywhere", here ignoring members that are down: they need snapshots).
    fn gc(&mut self) {
        let up = self.nodes.iter().filter(|n| n.px.is_some());
        let Some(below) = up.map(|n| n.delivered_next).min() else {
            return;
        };
        let below = below.saturating_sub(3);
        for i in 0..self.nodes.len() {
            self.call(i, |px, _| px.truncate(below));
        }
    }

    fn check_all(&mut self) -> Result<(), String> {
        for i in 0..self.nodes.len() {
            let checked = self.nodes[i].checked_upto;
            let Some(px) = self.nodes[i].px.as_mut() else {
                continue;
            };
            px.check_invariants()
                .map_err(|e| format!("member {i}: {e}"))?;
            if px.is_leader() && self.leaderships.insert(px.promised()) {
                self.stats.leaderships += 1;
            }
            let (from, upto) = (checked.max(px.truncated_below()), px.decided_upto());
            let values: Vec<(Slot, Option<u64>)> = (from..upto)
                .map(|s| (s, px.decided_value(s).expect("kept").copied()))
                .collect();
            let delivered = px.take_decided();
            px.take_dropped();
            self.nodes[i].checked_upto = upto;
            for (s, v) in values {
                self.agree(s, v).map_err(|e| format!("member {i}: {e}"))?;
            }
            self.check_delivered(i, delivered, upto)?;
        }
        Ok(())
    }

    fn check_delivered(
        &mut self,
        i: usize,
        delivered: Vec<(Slot, u64)>,
        upto: Slot,
    ) -> Result<(), String> {
        for (s, v) in delivered {
            if s < self.nodes[i].delivered_next {
                return Err(format!(
                    "member {i} delivered slot {s} again or out of order"
                ));
            }
            self.agree(s, Some(v))
                .map_err(|e| format!("member {i}: {e}"))?;
            self.nodes[i].delivered_next = s + 1;
            self.stats.decided += 1;
        }
        let node = &mut self.nodes[i];
        node.delivered_next = node.delivered_next.max(upto);
        Ok(())
    }

    /// One value per slot for all time; only proposed values, each in one slot.
    fn agree(&mut self, s: Slot, v: Option<u64>) -> Result<(), String> {
        if let Some(w) = self.chosen.get(&s) {
            return match *w == v {
                true => Ok(()),
                false => Err(format!("agreement: slot {s} decided {w:?} and {v:?}")),
            };
        }
        if let Some(v) = v {
            if !self.proposed.contains(&v) {
                return Err(format!("validity: slot {s} decided {v}, never proposed"));
            }
            if let Some(other) = self.slot_of.insert(v, s) {
                return Err(format!("value {v} decided in slots {other} and {s}"));
            }
        }
        self.chosen.insert(s, v);
        Ok(())
    }

    /// The leader, if one member (the preferred one if it is up) leads in phase 2 and every
    /// live member follows it, within the window of its decided prefix.
    fn settled_leader(&self) -> Option<Member> {
        let up = |i: usize| self.nodes[i].px.as_ref();
        let l = (0..self.nodes.len()).find(|i| up(*i).is_some_and(|p| p.is_leader()))?;
        let preferred = self.nodes[0].cfg.preferred;
        if l != preferred && up(preferred).is_some() {
            return None;
        }
        let upto = up(l)?.decided_upto();
        let window = self.nodes[l].cfg.in_flight_max as u64;
        let mut members = (0..self.nodes.len()).filter_map(up);
        let settled = members.all(|p| p.leader() == Some(l) && p.decided_upto() + window >= upto);
        settled.then_some(l)
    }

    fn settle(&mut self) -> Result<(), String> {
        for ms in 0..SETTLE_MAX_MS {
            if ms >= LATE_MAX_MS && self.settled_leader().is_some() {
                self.stats.settle_max_ms = ms;
                return Ok(());
            }
            self.step()?;
        }
        let state = self.describe();
        Err(format!(
            "liveness: not settled {SETTLE_MAX_MS} ms after healing\n{state}"
        ))
    }

    /// Proposes values at the leader of the settled group; each must be decided at every
    /// live member within `LIVE_MS`, with no change of leader.
    fn liveness(&mut self) -> Result<(), String> {
        let mut live = Vec::new();
        let l = self.settled_leader().expect("settled");
        for _ in 0..LIVE_VALUES {
            let v = self.next_value;
            match self.propose_at(l, v) {
                Some(Ok(_)) => live.push(v),
                other => {
                    return Err(format!(
                        "liveness: leader {l} refused a proposal: {other:?}\n{}",
                        self.describe()
                    ))
                }
            }
            self.step()?;
        }
        for _ in 0..LIVE_MS {
            if self.all_decided(&live) {
                return Ok(());
            }
            self.step()?;
        }
        let decided = live.iter().filter(|v| self.slot_of.contains_key(v)).count();
        Err(format!(
            "liveness: {decided} of {LIVE_VALUES} values decided everywhere after {LIVE_MS} ms\n{}",
            self.describe()
        ))
    }

    fn describe(&self) -> String {
        let lines = self.nodes.iter().enumerate().map(|(i, n)| match &n.px {
            Some(px) => format!("  {i} at {}: {}", self.now(i), px.describe()),
            None => format!("  {i}: down"),
        });
        lines.collect::<Vec<_>>().join("\n")
    }

    fn all_decided(&self, values: &[u64]) -> bool {
        let slots: Option<Vec<Slot>> = values
            .iter()
            .map(|v| self.slot_of.get(v).copied())
            .collect();
        let Some(top) = slots.and_then(|s| s.into_iter().max()) else {
            return false;
        };
        let up = self.nodes.iter().filter_map(|n| n.px.as_ref());
        up.into_iter().all(|px| px.decided_upto() > top)
    }
}
