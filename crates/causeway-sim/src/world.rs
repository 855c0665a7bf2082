//! The simulated world: virtual time, an event queue, nodes with clocks and disks, links,
//! faults, and the workload clients. One `World` runs one seed of one configuration.
//!
//! Links are reliable and FIFO (a link's deliveries never overtake each other); a network
//! partition holds a link's messages until it heals. A crashed node loses its volatile
//! state, its unsynced disk records and the messages that reach it while it is down (and
//! those addressed to the incarnation that died); it restarts from its synced records.
//! Clock readings are true time plus a per-node offset and drift, kept monotonic.

use crate::config::SimConfig;
use crate::faults::{FaultEvent, FaultPlan};
use crate::rng::SimRng;
use crate::workload::{Step, Workload};
use causeway_check::{FinalRead, HOp, History, Outcome, TxnRecord};
use causeway_core::clock::Nanos;
use causeway_core::{
    Addr, Ctx, DcId, Lsn, NodeId, Output, Request, Response, SessionId, Topology, TrueTime, TxnKind,
};
use causeway_protocols::{new_node, new_session, BoxedNode, BoxedSession, Msg, NodeConfig};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

/// Virtual time starts at 1 s so that negative clock offsets stay positive.
pub const T0: Nanos = 1_000_000_000;
const GAUGE_INTERVAL_NS: Nanos = 100_000_000;
const IDLE_POLL_NS: Nanos = 100_000_000;
/// How long after the fault phase the run may take before it is declared stuck.
const DRAIN_MAX_NS: Nanos = 60_000_000_000;
const FINAL_READ_CHUNK: usize = 64;
/// Most samples kept per measurement name (later ones are dropped).
pub const SAMPLES_PER_NAME_MAX: usize = 200_000;
/// Most invariant violations recorded per run (the first one fails the run).
const INVARIANT_REPORTS_MAX: usize = 8;
/// A machine that leaves a due deadline behind after `handle_timeout` is woken again only
/// this much later (and the run fails): waking it at once would loop forever.
const DUE_DEADLINE_RETRY_NS: Nanos = 1_000_000;

#[derive(Debug)]
pub(crate) enum Ev {
    Deliver {
        from: Addr,
        to: Addr,
        msg: Msg,
        incarnation: u32,
    },
    NodeTimer {
        node: usize,
        incarnation: u32,
        at: Nanos,
    },
    ClientTimer {
        client: usize,
        at: Nanos,
    },
    Persisted {
        node: usize,
        incarnation: u32,
        lsn: Lsn,
    },
    ClientNext {
        client: usize,
    },
    Fault(FaultEvent),
    EndFaults,
    PollIdle,
    StartFinal,
    Gauges,
}

pub(crate) struct NodeSlot {
    pub machine: Option<BoxedNode>,
    pub incarnation: u32,
    pub dc: u16,
    pub durable: Vec<Vec<u8>>,
    pub unsynced: BTreeMap<Lsn, Vec<u8>>,
    pub disk_free_at: Nanos,
    pub offset_ns: i64,
    pub drift_ppm: i64,
    pub last_clock: Nanos,
    pub slow_until: Nanos,
    pub slow_extra_ns: Nanos,
    /// True time of the one wake-up scheduled for the machine's next deadline.
    pub timer_at: Option<Nanos>,
    pub failed: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Idle,
    Beginning,
    Stepping,
    Committing,
    Aborting,
}

pub(crate) struct ClientSlot {
    session: BoxedSession,
    id: SessionId,
    dc: u16,
    steps: Vec<Step>,
    next_step: usize,
    record: Option<TxnRecord>,
    phase: Phase,
    final_reader: bool,
    done: bool,
    stopped: bool,
    timer_at: Option<Nanos>,
}

/// Counters and samples gathered during a run.
#[derive(Debug, Default)]
pub struct Metrics {
    pub events: u64,
    pub messages: u64,
    pub latencies_ns: Vec<Nanos>,
    pub gauges: BTreeMap<String, (f64, u64)>,
    /// Samples the nodes report (`ServerNode::take_samples`), per name.
    pub samples: BTreeMap<String, Vec<u64>>,
    pub liveness: Vec<String>,
    /// Broken machine invariants and driver errors (a message of the wrong protocol, a
    /// deadline left due), each with the node and virtual time.
    pub invariants: Vec<String>,
}

pub struct World {
    pub config: SimConfig,
    pub topology: Topology,
    pub(crate) now: Nanos,
    seq: u64,
    queue: BinaryHeap<Reverse<(Nanos, u64)>>,
    events: BTreeMap<u64, Ev>,
    pub(crate) nodes: Vec<NodeSlot>,
    clients: Vec<ClientSlot>,
    link_free: BTreeMap<(Addr, Addr), Nanos>,
    pub(crate) cuts: BTreeMap<(u16, u16), u32>,
    held: BTreeMap<(Addr, Addr), VecDeque<(Msg, u32)>>,
    net_rng: SimRng,
    work_rng: SimRng,
    workload: Workload,
    stopping: bool,
    final_started: bool,
    pub history: History,
    pub metrics: Metrics,
    pub trace_hash: u64,
    pub fault_log: Vec<String>,
    pub(crate) failed_dc: Option<u16>,
    end_faults_at: Nanos,
}

impl World {
    pub fn new(config: SimConfig) -> Result<World, String> {
        config.validate()?;
        let topology = Topology::full(config.dcs, config.nodes_per_dc, config.partitions);
        let mut world = World {
            topology: topology.clone(),
            now: T0,
            seq: 0,
            queue: BinaryHeap::new(),
            events: BTreeMap::new(),
            nodes: Vec::new(),
            clients: Vec::new(),
            link_free: BTreeMap::new(),
            cuts: BTreeMap::new(),
            held: BTreeMap::new(),
            net_rng: SimRng::new(config.seed, 1),
            work_rng: SimRng::new(config.seed, 2),
            workload: Workload::new(&config),
            stopping: false,
            final_started: false,
            history: History::default(),
            metrics: Metrics::default(),
            trace_hash: 0xcbf2_9ce4_8422_2325,
            fault_log: Vec::new(),
            failed_dc: None,
            end_faults_at: T0 + config.duration_ms * 1_000_000,
            config,
        };
        world.boot_nodes()?;
        world.boot_clients()?;
        let plan = FaultPlan::draw(&world.config, &world.topology);
        world.fault_log = plan.describe();
        plan.apply_static(&mut world);
        for (at, ev) in plan.events {
            world.schedule(at, Ev::Fault(ev));
        }
        world.schedule(world.end_faults_at, Ev::EndFaults);
        world.schedule(T0 + GAUGE_INTERVAL_NS, Ev::Gauges);
        Ok(world)
    }

    fn node_config(&self, node: usize) -> NodeConfig {
        NodeConfig {
            node: NodeId(node as u32),
            topology: self.topology.clone(),
            params: self.config.params.clone(),
            section: self.config.section.clone(),
        }
    }

    fn boot_nodes(&mut self) -> Result<(), String> {
        for n in 0..self.topology.node_count() as usize {
            let machine = new_node(&self.config.protocol, self.node_config(n), &[])?;
            let dc = self.topology.dc_of(NodeId(n as u32)).0;
            self.nodes.push(NodeSlot {
                machine: Some(machine),
                incarnation: 0,
                dc,
                durable: Vec::new(),
                unsynced: BTreeMap::new(),
                disk_free_at: 0,
                offset_ns: 0,
                drift_ppm: 0,
                last_clock: 0,
                slow_until: 0,
                slow_extra_ns: 0,
                timer_at: None,
                failed: false,
            });
        }
        for n in 0..self.nodes.len() {
            self.with_node(n, |m, ctx| m.start(ctx));
        }
        Ok(())
    }

    fn add_client(&mut self, dc: u16, final_reader: bool) -> Result<usize, String> {
        let id = SessionId(self.clients.len() as u64 + 1);
        let cfg = &self.config;
        let (topo, params, section) = (&self.topology, &cfg.params, &cfg.section);
        let session = new_session(&cfg.protocol, id, DcId(dc), topo, params, section)?;
        self.clients.push(ClientSlot {
            session,
            id,
            dc,
            steps: Vec::new(),
            next_step: 0,
            record: None,
            phase: Phase::Idle,
            final_reader,
            done: false,
            stopped: false,
            timer_at: None,
        });
        Ok(self.clients.len() - 1)
    }

    fn boot_clients(&mut self) -> Result<(), String> {
        for dc in 0..self.config.dcs {
            for _ in 0..self.config.clients_per_dc {
                let c = self.add_client(dc, false)?;
                let delay = self.work_rng.range(0, 1_000_000);
                self.schedule(T0 + delay, Ev::ClientNext { client: c });
            }
        }
        Ok(())
    }

    pub(crate) fn schedule(&mut self, at: Nanos, ev: Ev) {
        self.seq += 1;
        self.queue.push(Reverse((at, self.seq)));
        self.events.insert(self.seq, ev);
    }

    fn hash(&mut self, word: u64) {
        for b in word.to_le_bytes() {
            self.trace_hash ^= u64::from(b);
            self.trace_hash = self.trace_hash.wrapping_mul(0x0100_0000_01b3);
        }
    }

    /// Runs until the final reads are done or the run is declared stuck.
    pub fn run(&mut self) {
        let hard_end = self.end_faults_at + DRAIN_MAX_NS;
        while let Some(Reverse((at, seq))) = self.queue.pop() {
            if at > hard_end {
                self.metrics.liveness.push(format!(
                    "run did not finish within {} s after the fault phase (final reads stuck)",
                    DRAIN_MAX_NS / 1_000_000_000
                ));
                break;
            }
            let ev = self
                .events
                .remove(&seq)
                .expect("every queued seq has an event");
            self.now = at;
            self.metrics.events += 1;
            self.hash(at);
            self.dispatch(ev);
            if self.final_started
                && self
                    .clients
                    .iter()
                    .filter(|c| c.final_reader)
                    .all(|c| c.done)
            {
                break;
            }
        }
        self.close_open_txns();
    }

    fn dispatch(&mut self, ev: Ev) {
        match ev {
            Ev::Deliver {
                from,
                to,
                msg,
                incarnation,
            } => self.deliver(from, to, msg, incarnation),
            Ev::NodeTimer {
                node,
                incarnation,
                at,
            } => self.node_timer(node, incarnation, at),
            Ev::ClientTimer { client, at } => {
                if self.clients[client].timer_at == Some(at) {
                    self.clients[client].timer_at = None;
                    self.with_client(client, |s, ctx| s.handle_timeout(ctx));
                }
            }
            Ev::Persisted {
                node,
                incarnation,
                lsn,
            } => self.persisted(node, incarnation, lsn),
            Ev::ClientNext { client } => self.client_next(client),
            Ev::Fault(f) => crate::faults::inject(self, f),
            Ev::EndFaults => self.end_faults(),
            Ev::PollIdle => self.poll_idle(),
            Ev::StartFinal => self.start_final(),
            Ev::Gauges => self.sample_gauges(),
        }
    }

    /// Node `n`'s clock formula at true time `t`: offset and drift, before monotonicity.
    fn drifted(&self, n: usize, t: Nanos) -> i128 {
        let slot = &self.nodes[n];
        i128::from(t)
            + i128::from(slot.offset_ns)
            + i128::from(t) * i128::from(slot.drift_ppm) / 1_000_000
    }

    /// The first true time (not before now) at which node `n`'s clock reads `clock`:
    /// the clock formula inverted, so a stalled clock (set back) is waited out in one
    /// wake-up rather than polled.
    fn true_time_at(&self, n: usize, clock: Nanos) -> Nanos {
        let slot = &self.nodes[n];
        let rate = 1_000_000 + i128::from(slot.drift_ppm);
        let target = i128::from(clock) - i128::from(slot.offset_ns);
        let mut t = ((target * 1_000_000 + rate - 1) / rate).max(i128::from(self.now)) as Nanos;
        while self.drifted(n, t) < i128::from(clock) {
            t += 1; // integer rounding in the formula: at most a step or two
        }
        t
    }

    /// The physical clock reading of node `n` now: offset and drift, never going back.
    fn clock_of(&mut self, n: usize) -> Nanos {
        let reading = self.drifted(n, self.now).max(0) as Nanos;
        let slot = &mut self.nodes[n];
        slot.last_clock = slot.last_clock.max(reading);
        slot.last_clock
    }

    pub(crate) fn with_node(&mut self, n: usize, f: impl FnOnce(&mut BoxedNode, &mut Ctx<Msg>)) {
        let clock = self.clock_of(n);
        let Some(mut machine) = self.nodes[n].machine.take() else {
            return;
        };
        let mut ctx = Ctx::new(TrueTime(self.now), clock);
        f(&mut machine, &mut ctx);
        if self.config.check_invariants {
            if let Err(e) = machine.check_invariants() {
                self.invariant_broken(format!("node {n}: {e}"));
            }
        }
        let deadline = machine.poll_timeout();
        for (name, value) in machine.take_samples() {
            let kept = self.metrics.samples.entry(name.to_string()).or_default();
            if kept.len() < SAMPLES_PER_NAME_MAX {
                kept.push(value);
            }
        }
        self.nodes[n].machine = Some(machine);
        for out in ctx.outputs {
            self.node_output(n, out);
        }
        self.arm_node(n, clock, deadline);
    }

    /// Keeps one wake-up for node `n` at the true time its clock reaches `deadline`.
    fn arm_node(&mut self, n: usize, clock: Nanos, deadline: Option<Nanos>) {
        let slot = &self.nodes[n];
        if slot.machine.is_none() {
            return;
        }
        let Some(deadline) = deadline else {
            self.nodes[n].timer_at = None;
            return;
        };
        let at = if deadline <= clock {
            self.now
        } else {
            self.true_time_at(n, deadline)
        };
        // Only an earlier wake-up is scheduled; one that comes too early (the deadline
        // moved later) finds the clock short of it and re-arms.
        if slot.timer_at.is_some_and(|t| t <= at) {
            return;
        }
        let incarnation = slot.incarnation;
        self.nodes[n].timer_at = Some(at);
        let ev = Ev::NodeTimer {
            node: n,
            incarnation,
            at,
        };
        self.schedule(at, ev);
    }

    /// A node's wake-up: runs `handle_timeout` if its clock reached the deadline (drift
    /// or a clock set back may make it early: then it waits for the rest).
    fn node_timer(&mut self, n: usize, incarnation: u32, at: Nanos) {
        let slot = &self.nodes[n];
        if slot.incarnation != incarnation || slot.timer_at != Some(at) {
            return; // superseded by a later deadline, or the incarnation died
        }
        let Some(deadline) = slot.machine.as_ref().and_then(|m| m.poll_timeout()) else {
            return;
        };
        self.nodes[n].timer_at = None;
        let clock = self.clock_of(n);
        if clock < deadline {
            return self.arm_node(n, clock, Some(deadline));
        }
        self.hash(n as u64);
        self.with_node(n, |m, ctx| m.handle_timeout(ctx));
        let next = self.nodes[n]
            .machine
            .as_ref()
            .and_then(|m| m.poll_timeout());
        if next.is_some_and(|d| d <= clock) {
            self.invariant_broken(format!(
                "node {n}: deadline {next:?} still due after handle_timeout at clock {clock}"
            ));
            self.nodes[n].timer_at = None;
            self.arm_node(n, clock, Some(clock + DUE_DEADLINE_RETRY_NS));
        }
    }

    /// Records a broken invariant (the run fails with it).
    pub(crate) fn invariant_broken(&mut self, what: String) {
        if self.metrics.invariants.len() < INVARIANT_REPORTS_MAX {
            let at_ms = (self.now - T0) as f64 / 1e6;
            self.metrics
                .invariants
                .push(format!("invariant at {at_ms:.3} ms: {what}"));
        }
    }

    fn node_output(&mut self, n: usize, out: Output<Msg>) {
        match out {
            Output::Send { to, msg } => self.send(Addr::Node(NodeId(n as u32)), to, msg),
            Output::Persist { lsn, record } => {
                let slot = &mut self.nodes[n];
                slot.unsynced.insert(lsn, record);
                let latency = 100_000 + self.net_rng.range(0, 400_000);
                let slot = &mut self.nodes[n];
                slot.disk_free_at = slot.disk_free_at.max(self.now) + latency;
                let (at, incarnation) = (slot.disk_free_at, slot.incarnation);
                self.schedule(
                    at,
                    Ev::Persisted {
                        node: n,
                        incarnation,
                        lsn,
                    },
                );
            }
            Output::Reply(_) => panic!("node {n} emitted a client reply: only sessions reply"),
        }
    }

    fn persisted(&mut self, n: usize, incarnation: u32, lsn: Lsn) {
        if self.nodes[n].incarnation != incarnation || self.nodes[n].machine.is_none() {
            return;
        }
        let record = self.nodes[n]
            .unsynced
            .remove(&lsn)
            .expect("persisted record was pending");
        self.nodes[n].durable.push(record);
        self.hash(lsn);
        self.with_node(n, |m, ctx| m.handle_persisted(ctx, lsn));
    }

    fn dc_of_addr(&self, addr: Addr) -> u16 {
        match addr {
            Addr::Node(n) => self.nodes[n.0 as usize].dc,
            Addr::Client(s) => self.clients[(s.0 - 1) as usize].dc,
        }
    }

    fn is_cut(&self, a: u16, b: u16) -> bool {
        a != b && self.cuts.get(&(a.min(b), a.max(b))).copied().unwrap_or(0) > 0
    }

    fn send(&mut self, from: Addr, to: Addr, msg: Msg) {
        self.metrics.messages += 1;
        let incarnation = match to {
            Addr::Node(n) => self.nodes[n.0 as usize].incarnation,
            Addr::Client(_) => 0,
        };
        let (a, b) = (self.dc_of_addr(from), self.dc_of_addr(to));
        let held = self.held.get(&(from, to)).is_some_and(|q| !q.is_empty());
        if self.is_cut(a, b) || held {
            self.held
                .entry((from, to))
                .or_default()
                .push_back((msg, incarnation));
            return;
        }
        self.transmit(from, to, msg, incarnation);
    }

    fn transmit(&mut self, from: Addr, to: Addr, msg: Msg, incarnation: u32) {
        let (a, b) = (self.dc_of_addr(from), self.dc_of_addr(to));
        let base = self.config.one_way_ns(a, b);
        let jitter = (base as f64 * self.config.jitter * self.net_rng.unit()) as Nanos;
        let mut at = self.now + base + jitter;
        if let Addr::Node(n) = to {
            let slot = &self.nodes[n.0 as usize];
            if slot.slow_until > self.now {
                at += slot.slow_extra_ns;
            }
        }
        let free = self.link_free.entry((from, to)).or_insert(0);
        at = at.max(*free);
        *free = at;
        self.schedule(
            at,
            Ev::Deliver {
                from,
                to,
                msg,
                incarnation,
            },
        );
    }

    /// Re-sends the messages held on links that no longer cross a cut.
    pub(crate) fn release_held(&mut self) {
        let links: Vec<(Addr, Addr)> = self.held.keys().copied().collect();
        for (from, to) in links {
            let (a, b) = (self.dc_of_addr(from), self.dc_of_addr(to));
            if self.is_cut(a, b) {
                continue;
            }
            let queue = self.held.remove(&(from, to)).unwrap_or_default();
            for (msg, incarnation) in queue {
                self.transmit(from, to, msg, incarnation);
            }
        }
    }

    fn deliver(&mut self, from: Addr, to: Addr, msg: Msg, incarnation: u32) {
        match to {
            Addr::Node(n) => {
                let n = n.0 as usize;
                if self.nodes[n].incarnation != incarnation || self.nodes[n].machine.is_none() {
                    return; // the connection to that incarnation is gone
                }
                self.hash(n as u64);
                let mut wrong = None;
                self.with_node(n, |m, ctx| wrong = m.handle_message(ctx, from, msg).err());
                if let Some(e) = wrong {
                    self.invariant_broken(format!("node {n}: {e}"));
                }
            }
            Addr::Client(s) => {
                let c = (s.0 - 1) as usize;
                let mut wrong = None;
                self.with_client(c, |s, ctx| wrong = s.handle_message(ctx, from, msg).err());
                if let Some(e) = wrong {
                    self.invariant_broken(format!("client {c}: {e}"));
                }
            }
        }
    }

    /// Crashes node `n`: volatile state, unsynced records and pending timers are lost.
    pub(crate) fn crash(&mut self, n: usize) {
        let slot = &mut self.nodes[n];
        if slot.machine.is_none() {
            return;
        }
        slot.machine = None;
        slot.unsynced.clear();
        slot.timer_at = None;
        slot.incarnation += 1;
    }

    /// Restarts node `n` from its synced records.
    pub(crate) fn restart(&mut self, n: usize) {
        if self.nodes[n].machine.is_some() || self.nodes[n].failed {
            return;
        }
        match new_node(
            &self.config.protocol,
            self.node_config(n),
            &self.nodes[n].durable,
        ) {
            Ok(machine) => {
                self.nodes[n].machine = Some(machine);
                self.with_node(n, |m, ctx| m.start(ctx));
            }
            Err(e) => self
                .metrics
                .liveness
                .push(format!("node {n} failed to recover: {e}")),
        }
    }

    pub(crate) fn fail_dc(&mut self, dc: u16) {
        self.failed_dc = Some(dc);
        for n in 0..self.nodes.len() {
            if self.nodes[n].dc == dc {
                self.crash(n);
                self.nodes[n].failed = true;
            }
        }
        for c in 0..self.clients.len() {
            if self.clients[c].dc == dc {
                self.clients[c].stopped = true;
                self.abandon(c);
            }
        }
    }

    fn end_faults(&mut self) {
        self.stopping = true;
        self.cuts.clear();
        self.release_held();
        for n in 0..self.nodes.len() {
            self.nodes[n].slow_until = 0;
            self.restart(n);
        }
        self.schedule(self.now, Ev::PollIdle);
    }

    fn poll_idle(&mut self) {
        let busy = self
            .clients
            .iter()
            .any(|c| !c.final_reader && !c.stopped && c.phase != Phase::Idle);
        if busy && self.now < self.end_faults_at + DRAIN_MAX_NS / 2 {
            self.schedule(self.now + IDLE_POLL_NS, Ev::PollIdle);
            return;
        }
        for c in 0..self.clients.len() {
            if self.clients[c].phase != Phase::Idle {
                self.abandon(c);
            }
        }
        self.schedule(
            self.now + self.config.quiesce_ms * 1_000_000,
            Ev::StartFinal,
        );
    }

    fn start_final(&mut self) {
        self.final_started = true;
        let keys = self.workload.all_keys();
        for dc in 0..self.config.dcs {
            if Some(dc) == self.failed_dc {
                continue;
            }
            let c = match self.add_client(dc, true) {
                Ok(c) => c,
                Err(e) => return self.metrics.liveness.push(e),
            };
            self.clients[c].steps = keys
                .chunks(FINAL_READ_CHUNK)
                .map(|ch| Step::ReadMany(ch.to_vec()))
                .collect();
            self.client_next(c);
        }
    }

    fn sample_gauges(&mut self) {
        for n in 0..self.nodes.len() {
            let clock = self.clock_of(n);
            let Some(m) = self.nodes[n].machine.as_ref() else {
                continue;
            };
            for (name, value) in m.gauges(clock) {
                let entry = self
                    .metrics
                    .gauges
                    .entry(name.to_string())
                    .or_insert((0.0, 0));
                entry.0 += value;
                entry.1 += 1;
            }
        }
        if !self.final_started {
            self.schedule(self.now + GAUGE_INTERVAL_NS, Ev::Gauges);
        }
    }

    // ---- clients ----

    fn with_client(&mut self, c: usize, f: impl FnOnce(&mut BoxedSession, &mut Ctx<Msg>)) {
        let mut ctx = Ctx::new(TrueTime(self.now), self.now);
        f(&mut self.clients[c].session, &mut ctx);
        if self.config.check_invariants {
            if let Err(e) = self.clients[c].session.check_invariants() {
                self.invariant_broken(format!("client {c}: {e}"));
            }
        }
        // Sessions read true time as their clock: the deadline is a true time.
        let at = self.clients[c]
            .session
            .poll_timeout()
            .map(|d| d.max(self.now));
        if at != self.clients[c].timer_at {
            self.clients[c].timer_at = at;
            if let Some(at) = at {
                self.schedule(at, Ev::ClientTimer { client: c, at });
            }
        }
        for out in ctx.outputs {
            match out {
                Output::Send { to, msg } => self.send(Addr::Client(self.clients[c].id), to, msg),
                Output::Reply(resp) => self.on_reply(c, resp),
                Output::Persist { .. } => panic!("a client session asked to persist"),
            }
        }
    }

    fn submit(&mut self, c: usize, request: Request) {
        self.with_client(c, |s, ctx| s.submit(ctx, request));
    }

    fn client_next(&mut self, c: usize) {
        let slot = &mut self.clients[c];
        if slot.stopped || slot.done || slot.phase != Phase::Idle {
            return;
        }
        if !slot.final_reader {
            if self.stopping {
                return;
            }
            let steps = self.workload.plan(&mut self.work_rng);
            self.clients[c].steps = steps;
        }
        let slot = &mut self.clients[c];
        slot.next_step = 0;
        slot.phase = Phase::Beginning;
        slot.record = Some(TxnRecord {
            id: causeway_core::TxnId {
                session: slot.id,
                seq: 0,
            },
            session: slot.id,
            dc: DcId(slot.dc),
            kind: TxnKind::Causal,
            start_ns: self.now,
            end_ns: self.now,
            ops: Vec::new(),
            outcome: Outcome::Unknown,
        });
        self.submit(
            c,
            Request::Begin {
                kind: TxnKind::Causal,
            },
        );
    }

    fn next_step(&mut self, c: usize) {
        let slot = &mut self.clients[c];
        slot.phase = Phase::Stepping;
        let Some(step) = slot.steps.get(slot.next_step).cloned() else {
            slot.phase = Phase::Committing;
            return self.submit(c, Request::Commit);
        };
        slot.next_step += 1;
        let request = match step {
            Step::Read(key, obj) => Request::Read {
                keys: vec![(key, obj)],
            },
            Step::ReadMany(keys) => Request::Read { keys },
            Step::Update(key, update) => {
                if let Some(r) = slot.record.as_mut() {
                    r.ops.push(HOp::Write {
                        key: key.clone(),
                        update: update.clone(),
                        id: placeholder_op(),
                    });
                }
                Request::Update { key, update }
            }
        };
        self.submit(c, request);
    }

    fn on_reply(&mut self, c: usize, resp: Response) {
        self.hash(c as u64);
        if self.clients[c].stopped {
            return; // its DC failed or the run ended: nobody is listening
        }
        let phase = self.clients[c].phase;
        match (phase, resp) {
            (Phase::Beginning, Response::Begun { txn }) => {
                if let Some(r) = self.clients[c].record.as_mut() {
                    r.id = txn;
                }
                self.next_step(c);
            }
            (Phase::Stepping, Response::Values(values)) => {
                self.record_reads(c, values);
                self.next_step(c);
            }
            (Phase::Stepping, Response::Updated { op }) => {
                if let Some(HOp::Write { id, .. }) = self.clients[c]
                    .record
                    .as_mut()
                    .and_then(|r| r.ops.last_mut())
                {
                    *id = op;
                }
                self.next_step(c);
            }
            (Phase::Committing, Response::Committed) => self.finish(c, Outcome::Committed),
            (Phase::Committing, Response::Aborted { .. }) | (Phase::Aborting, _) => {
                self.finish(c, Outcome::Aborted)
            }
            (Phase::Committing, Response::Error(causeway_core::Error::Unavailable(_))) => {
                self.finish(c, Outcome::Unknown)
            }
            (Phase::Committing, Response::Error(_)) => self.finish(c, Outcome::Aborted),
            (Phase::Stepping, Response::Error(causeway_core::Error::Unavailable(_)))
            | (Phase::Beginning, Response::Error(_)) => self.finish(c, Outcome::Aborted),
            (_, Response::Error(e)) => {
                self.note_final_failure(c, &e.to_string());
                self.clients[c].phase = Phase::Aborting;
                self.submit(c, Request::Abort);
            }
            (_, Response::Aborted { .. }) => self.finish(c, Outcome::Aborted),
            (phase, other) => panic!("client {c} in {phase:?} got unexpected {other:?}"),
        }
    }

    fn note_final_failure(&mut self, c: usize, why: &str) {
        if self.clients[c].final_reader {
            let dc = self.clients[c].dc;
            self.metrics
                .liveness
                .push(format!("final read at DC {dc} failed: {why}"));
        }
    }

    fn record_reads(&mut self, c: usize, values: Vec<causeway_core::ReadValue>) {
        let slot = &mut self.clients[c];
        let types: BTreeMap<_, _> = match &slot.steps[slot.next_step - 1] {
            Step::Read(k, t) => [(k.clone(), *t)].into_iter().collect(),
            Step::ReadMany(keys) => keys.iter().cloned().collect(),
            Step::Update(..) => BTreeMap::new(),
        };
        for v in values {
            let obj = types[&v.key];
            if slot.final_reader {
                let dc = DcId(slot.dc);
                self.history.finals.push(FinalRead {
                    dc,
                    key: v.key,
                    obj,
                    value: v.value,
                    observed: v.observed,
                });
            } else if let Some(r) = slot.record.as_mut() {
                r.ops.push(HOp::Read {
                    key: v.key,
                    obj,
                    value: v.value,
                    observed: v.observed,
                });
            }
        }
    }

    fn finish(&mut self, c: usize, outcome: Outcome) {
        let now = self.now;
        let slot = &mut self.clients[c];
        slot.phase = Phase::Idle;
        if slot.final_reader {
            if outcome != Outcome::Committed {
                let why = format!("{outcome:?}");
                self.note_final_failure(c, &why);
            }
            self.clients[c].done = true;
            return;
        }
        if let Some(mut r) = slot.record.take() {
            r.end_ns = now;
            r.outcome = outcome;
            r.ops
                .retain(|op| !matches!(op, HOp::Write { id, .. } if *id == placeholder_op()));
            if outcome == Outcome::Committed {
                self.metrics.latencies_ns.push(r.end_ns - r.start_ns);
            }
            self.history.txns.push(r);
        }
        let think = self.config.think_time_ns;
        self.schedule(now + think, Ev::ClientNext { client: c });
    }

    /// Records a transaction the client will never finish (its DC failed, or the run
    /// ended) with an unknown outcome.
    fn abandon(&mut self, c: usize) {
        let slot = &mut self.clients[c];
        slot.phase = Phase::Idle;
        slot.stopped = true;
        if let Some(mut r) = slot.record.take() {
            r.end_ns = self.now;
            r.outcome = Outcome::Unknown;
            self.history.txns.push(r);
        }
    }

    fn close_open_txns(&mut self) {
        for c in 0..self.clients.len() {
            if !self.clients[c].final_reader {
                self.abandon(c);
            } else if !self.clients[c].done {
                let dc = self.clients[c].dc;
                self.metrics
                    .liveness
                    .push(format!("final reads at DC {dc} did not complete"));
            }
        }
    }
}

/// Marks a write whose op id the session has not confirmed yet.
fn placeholder_op() -> causeway_core::OpId {
    causeway_core::OpId {
        txn: causeway_core::TxnId {
            session: SessionId(0),
            seq: 0,
        },
        index: u32::MAX,
    }
}
