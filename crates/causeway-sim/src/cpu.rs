//! The CPU model (DESIGN.md, "CPU model"): each node has `cores` served in FIFO order, and
//! handling an input costs a fixed part by its kind ([`InputKind`]: a message from another
//! node, a timer, a durability notice, or a client-session event) plus `byte_ns` per byte
//! of its encoding and `op_ns` per unit of the work the machine reports it did
//! (`ServerNode::take_work`: keys read and written, versions traversed, entries merged).
//!
//! Client sessions are charged where the runtime runs them: on the node hosting the
//! session (a node of the client's DC), each message into or out of the session is a
//! session event in that node's queue, so the front end and the hosted session compete
//! with the node's protocol work for its cores, as they do in a real node process.
//!
//! An input that finds every core busy waits in the node's queue; the machine runs it
//! when a core frees up, and its messages and writes leave only when the handler
//! finishes. The constants are fitted for every protocol together against real clusters
//! (`causeway bench --calibrate`, `causeway_bench::calibrate`). Off by default for `sim`
//! (pure protocol studies), on for experiments.

use crate::world::{Ev, World};
use causeway_core::clock::Nanos;
use causeway_core::{Addr, SessionId};
use causeway_protocols::Msg;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Most inputs waiting for a core on one node; past it the node is hopelessly overloaded
/// and the run fails rather than grow without bound.
pub const CPU_QUEUE_MAX: usize = 1 << 20;

/// Most node processes one host of the model may share.
pub const HOST_NODES_MAX: u32 = 1024;

/// Idle time after which an arriving input counts as a wake ([`CpuModel::wake_gap_ns`]):
/// about what a runtime worker spins or stays in its poll loop before it parks.
pub const WAKE_GAP_NS: Nanos = 200_000;

/// What kind of input a handler ran, for its fixed cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputKind {
    /// A message from another node.
    Message,
    /// A timer of the node's machine (replication, stabilization, heartbeats).
    Timer,
    /// A durability notice: a group-commit batch is on disk (records up to its last lsn).
    Persisted,
    /// A message into or out of a client session hosted on the node.
    Session,
}

/// The cost model, per node.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CpuModel {
    pub enabled: bool,
    pub cores: u32,
    /// Fixed cost of handling one message from another node.
    pub msg_ns: Nanos,
    /// Fixed cost of one timer of the node's machine.
    pub timer_ns: Nanos,
    /// Fixed cost of one durability notice (one per group-commit batch, not per record).
    pub persist_ns: Nanos,
    /// Fixed cost of one message into or out of a hosted client session (the front end,
    /// the session machine, the hop to the protocol).
    pub session_ns: Nanos,
    /// Cost per byte of an input message's encoding.
    pub byte_ns: Nanos,
    /// Cost per unit of work the machine reports.
    pub op_ns: Nanos,
    /// Extra cost of an input that wakes an idle node: it finds no handler running and
    /// none queued, and every core has been idle for at least `wake_gap_ns`. It stands
    /// for what the runtime pays when work arrives at parked threads (a poll wake-up,
    /// context switches, a read that finds one frame) and not when it arrives at busy
    /// ones (the frame comes in the same read as others, no thread is unparked).
    pub wake_ns: Nanos,
    /// How long every core must have been idle for an arriving input to count as a wake.
    pub wake_gap_ns: Nanos,
    /// Node processes sharing the cores of the host a wake-up lands on: 1 where each node
    /// has a machine of its own (experiments), a calibration cluster's node count where
    /// they all run on one host. A wake costs `wake_ns` per process: the more processes
    /// share the cores, the more often a wake-up displaces another one (the profile of a
    /// loaded calibration node is mostly the scheduler's task switches).
    pub host_nodes: u32,
}

impl Default for CpuModel {
    /// Fitted for every registered protocol together by `causeway bench --calibrate
    /// --fit` (byte_ns and op_ns held; `causeway_bench::calibrate::HELD`) on the recorded
    /// figures in `docs/results/calibrate.json` (BENCHMARKS.md, "CPU model calibration").
    /// A timer stands for a tick with its fan-out and the runtime's wake-ups, a session
    /// event for a client frame through the front end and the hosted session.
    fn default() -> CpuModel {
        CpuModel {
            enabled: false,
            cores: 4,
            msg_ns: 2_600,
            timer_ns: 38_600,
            persist_ns: 70_700,
            session_ns: 4_100,
            byte_ns: 2,
            op_ns: 500,
            wake_ns: 4_000,
            wake_gap_ns: WAKE_GAP_NS,
            host_nodes: 1,
        }
    }
}

impl CpuModel {
    /// The fixed cost of an input of `kind`.
    pub fn fixed_ns(&self, kind: InputKind) -> Nanos {
        match kind {
            InputKind::Message => self.msg_ns,
            InputKind::Timer => self.timer_ns,
            InputKind::Persisted => self.persist_ns,
            InputKind::Session => self.session_ns,
        }
    }

    /// What a wake-up adds to an input's cost (nothing if it did not wake the node).
    pub fn wake_cost_ns(&self, woke: bool) -> Nanos {
        if woke {
            self.wake_ns * Nanos::from(self.host_nodes)
        } else {
            0
        }
    }

    pub fn cost(&self, kind: InputKind, bytes: usize, work: u64) -> Nanos {
        self.fixed_ns(kind) + self.byte_ns * bytes as Nanos + self.op_ns * work
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.enabled && !(1..=1024).contains(&self.cores) {
            return Err(format!(
                "--cores must be between 1 and 1024, not {}",
                self.cores
            ));
        }
        if !(1..=HOST_NODES_MAX).contains(&self.host_nodes) {
            return Err(format!(
                "the CPU model's host_nodes must be between 1 and {HOST_NODES_MAX}, not {}",
                self.host_nodes
            ));
        }
        Ok(())
    }
}

/// What the nodes' CPUs ran during the load phase, by what the model charges: the inputs
/// of the calibration fit (`causeway_bench::calibrate`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuTally {
    pub messages: u64,
    pub timers: u64,
    pub persisted: u64,
    pub session_events: u64,
    /// Bytes of the messages' encodings (node and session messages).
    pub bytes: u64,
    /// Work units the machines reported.
    pub work: u64,
    /// Inputs that woke an idle node ([`CpuModel::wake_ns`]), each counted once per node
    /// process sharing the host ([`CpuModel::host_nodes`]).
    #[serde(default)]
    pub wakes: u64,

    /// Handler time charged.
    pub busy_ns: u64,
}

impl CpuTally {
    pub(crate) fn add(&mut self, kind: InputKind, bytes: usize, work: u64, cost: Nanos) {
        match kind {
            InputKind::Message => self.messages += 1,
            InputKind::Timer => self.timers += 1,
            InputKind::Persisted => self.persisted += 1,
            InputKind::Session => self.session_events += 1,
        }
        self.bytes += bytes as u64;
        self.work += work;
        self.busy_ns += cost;
    }
}

/// An input a node's CPU runs.
#[derive(Debug)]
pub(crate) enum NodeInput {
    Message {
        from: Addr,
        msg: Msg,
        incarnation: u32,
    },
    Timer {
        incarnation: u32,
        at: Nanos,
    },
    Persisted {
        incarnation: u32,
        lsn: u64,
    },
    /// A message to a client session this node hosts.
    ToSession {
        from: Addr,
        session: SessionId,
        msg: Msg,
    },
    /// A message a client session this node hosts sends.
    FromSession {
        session: SessionId,
        to: Addr,
        msg: Msg,
    },
}

impl NodeInput {
    fn kind(&self) -> InputKind {
        match self {
            NodeInput::Message { .. } => InputKind::Message,
            NodeInput::Timer { .. } => InputKind::Timer,
            NodeInput::Persisted { .. } => InputKind::Persisted,
            NodeInput::ToSession { .. } | NodeInput::FromSession { .. } => InputKind::Session,
        }
    }

    /// Bytes of the input's encoding (messages only: a timer or an lsn is a word).
    pub(crate) fn bytes(&self) -> usize {
        match self {
            NodeInput::Message { msg, .. }
            | NodeInput::ToSession { msg, .. }
            | NodeInput::FromSession { msg, .. } => {
                postcard::to_allocvec(msg).map_or(0, |b| b.len())
            }
            _ => 0,
        }
    }

    /// Whether the input outlives a crash of the node running it: a session's messages
    /// are the client's, and the model only borrows the node's cores for them.
    pub(crate) fn survives_crash(&self) -> bool {
        self.kind() == InputKind::Session
    }
}

/// One node's cores and run queue.
#[derive(Debug, Default)]
pub(crate) struct Cpu {
    /// When each core finishes its current handler.
    pub free_at: Vec<Nanos>,
    /// Inputs waiting for a core, with their arrival time and whether each woke the node.
    pub queue: VecDeque<(Nanos, NodeInput, bool)>,
    /// Time of the wake-up scheduled for the next free core, if any.
    pub wake_at: Option<Nanos>,
    /// Total handler time so far.
    pub busy_ns: Nanos,
}

impl Cpu {
    pub(crate) fn new(cores: u32) -> Cpu {
        Cpu {
            free_at: vec![0; cores as usize],
            ..Cpu::default()
        }
    }

    /// Whether an input arriving at `now` wakes the node: nothing runs or waits, and
    /// every core has been idle for at least `gap_ns`.
    pub(crate) fn wakes_at(&self, now: Nanos, gap_ns: Nanos) -> bool {
        let last_busy = self.free_at.iter().copied().max().unwrap_or(0);
        self.queue.is_empty() && now >= last_busy + gap_ns
    }

    /// The core that frees up first, and when.
    pub(crate) fn first_free(&self) -> (usize, Nanos) {
        let (i, t) = self
            .free_at
            .iter()
            .enumerate()
            .min_by_key(|(_, t)| **t)
            .expect("cores");
        (i, *t)
    }

    /// Core `core` runs a handler from `start` for `cost`.
    pub(crate) fn occupy(&mut self, core: usize, start: Nanos, cost: Nanos) {
        self.free_at[core] = start + cost;
        self.busy_ns += cost;
    }
}

impl World {
    /// An input reaches node `n`'s CPU: it runs at once on a free core, else waits.
    pub(crate) fn node_input(&mut self, n: usize, input: NodeInput) {
        let cpu = &mut self.nodes[n].cpu;
        if cpu.queue.len() >= CPU_QUEUE_MAX {
            let what = format!("node {n}: {CPU_QUEUE_MAX} inputs wait for a core (CPU_QUEUE_MAX)");
            return self.invariant_broken(format!("driver: {what}"));
        }
        let woke = cpu.wakes_at(self.now, self.config.cpu.wake_gap_ns);
        cpu.queue.push_back((self.now, input, woke));
        // An input that arrives inside a handler (a hosted session answering) waits for
        // the running drain: `n`'s own picks it up once the handler's core is occupied,
        // another node's runs it at the same instant, from the event queue.
        match self.cpu_draining {
            None => self.cpu_drain(n),
            Some(d) if d == n => {}
            Some(_) => self.schedule(self.now, Ev::CpuFree { node: n }),
        }
    }

    /// Runs queued inputs on free cores, in arrival order; when every core is busy,
    /// wakes up when the first one frees.
    pub(crate) fn cpu_drain(&mut self, n: usize) {
        assert!(self.cpu_draining.is_none(), "CPU drains never nest");
        self.cpu_draining = Some(n);
        loop {
            let (core, free_at) = self.nodes[n].cpu.first_free();
            let cpu = &mut self.nodes[n].cpu;
            if cpu.queue.is_empty() {
                break;
            }
            if free_at > self.now {
                if cpu.wake_at.is_none_or(|w| w > free_at) {
                    cpu.wake_at = Some(free_at);
                    self.schedule(free_at, Ev::CpuFree { node: n });
                }
                break;
            }
            let (arrived, input, woke) = cpu.queue.pop_front().expect("not empty");
            self.sample("cpu_queue_wait_ns", self.now - arrived);
            let cost = self.run_input(n, input, woke);
            self.nodes[n].cpu.occupy(core, self.now, cost);
        }
        self.cpu_draining = None;
    }

    /// Runs one input through the machine (or, for a session's message, the session);
    /// returns its cost (the fixed part if the input was for a dead incarnation or a
    /// stale wake-up), plus the wake-up's if it `woke` the node.
    fn run_input(&mut self, n: usize, input: NodeInput, woke: bool) -> Nanos {
        let (kind, bytes) = (input.kind(), input.bytes());

        self.cpu_input = Some((kind, bytes));
        self.cpu_last_cost = None;
        self.cpu_last_work = 0;
        match input {
            NodeInput::Message {
                from,
                msg,
                incarnation,
            } => self.deliver_to_node(n, from, msg, incarnation),
            NodeInput::Timer { incarnation, at } => self.node_timer(n, incarnation, at),
            NodeInput::Persisted { incarnation, lsn } => self.persisted(n, incarnation, lsn),
            NodeInput::ToSession { from, session, msg } => {
                self.cpu_input = None;
                self.deliver_to_session(from, session, msg);
            }
            NodeInput::FromSession { session, to, msg } => {
                self.cpu_input = None;
                // The message leaves when the host has handled it.
                let wake_ns = self.config.cpu.wake_cost_ns(woke);
                self.out_delay_ns = self.config.cpu.cost(kind, bytes, 0) + wake_ns;
                self.send_direct(Addr::Client(session), to, msg);
                self.out_delay_ns = 0;
            }
        }
        self.cpu_input = None;
        let wakes = if woke { self.config.cpu.host_nodes } else { 0 };
        let cost = (self.cpu_last_cost.take())
            .unwrap_or_else(|| self.config.cpu.cost(kind, bytes, 0))
            + self.config.cpu.wake_cost_ns(woke);
        if self.now < self.end_faults_at {
            let work = self.cpu_last_work;
            let tally = &mut self.metrics.cpu_tally;
            tally.add(kind, bytes, work, cost);
            tally.wakes += u64::from(wakes);
        }
        cost
    }

    /// The node that hosts session `s` under the CPU model: a live node of its DC, by its
    /// client slot (`None`: its DC has none alive, or the route retired).
    pub(crate) fn session_host(&self, s: SessionId) -> Option<usize> {
        let route = self.routes.get(&s)?;
        if route.retired {
            return None;
        }
        let live: Vec<usize> = (0..self.nodes.len())
            .filter(|&n| self.nodes[n].dc == route.dc && self.nodes[n].machine.is_some())
            .collect();
        (!live.is_empty()).then(|| live[route.slot % live.len()])
    }

    /// Keeps a sample of the simulator's own measurements (bounded per name).
    fn sample(&mut self, name: &str, value: u64) {
        let kept = self.metrics.samples.entry(name.to_string()).or_default();
        if kept.len() < crate::world::SAMPLES_PER_NAME_MAX {
            kept.push(value);
        }
    }

    /// Every node's busy time over its cores' time since the start of the run.
    pub(crate) fn cpu_utilization(&self) -> Option<f64> {
        if !self.config.cpu.enabled || self.nodes.is_empty() {
            return None;
        }
        let elapsed = self.now.saturating_sub(crate::world::T0).max(1) as f64;
        let cores = f64::from(self.config.cpu.cores) * self.nodes.len() as f64;
        let busy: Nanos = self.nodes.iter().map(|s| s.cpu.busy_ns).sum();
        Some(busy as f64 / (elapsed * cores))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_adds_the_three_parts() {
        let m = CpuModel {
            enabled: true,
            cores: 2,
            msg_ns: 100,
            timer_ns: 7,
            persist_ns: 5,
            session_ns: 40,
            byte_ns: 2,
            op_ns: 10,
            wake_ns: 0,
            wake_gap_ns: WAKE_GAP_NS,
            host_nodes: 1,
        };
        assert_eq!(m.cost(InputKind::Message, 50, 3), 100 + 100 + 30);
        assert_eq!(m.cost(InputKind::Session, 50, 0), 40 + 100);
        assert_eq!(m.cost(InputKind::Timer, 0, 1), 7 + 10);
        assert_eq!(m.cost(InputKind::Persisted, 0, 0), 5);
    }

    #[test]
    fn handlers_go_to_the_core_that_frees_first() {
        let mut cpu = Cpu::new(2);
        cpu.occupy(0, 0, 100);
        assert_eq!(cpu.first_free(), (1, 0));
        cpu.occupy(1, 10, 50);
        assert_eq!(cpu.first_free(), (1, 60));
        assert_eq!(cpu.busy_ns, 150);
    }

    /// An input wakes a node only when nothing runs or waits there and every core has
    /// been idle for the gap; the charge is per node process sharing the host.
    #[test]
    fn a_wake_is_an_arrival_at_a_node_idle_for_the_gap() {
        let gap = 200;
        let mut cpu = Cpu::new(2);
        assert!(cpu.wakes_at(1_000, gap), "a node idle since boot");
        cpu.occupy(0, 1_000, 50);
        assert!(!cpu.wakes_at(1_020, gap), "a core is busy");
        assert!(!cpu.wakes_at(1_100, gap), "idle for 50 ns only");
        assert!(cpu.wakes_at(1_250, gap), "idle for the whole gap");
        cpu.queue.push_back((
            1_250,
            NodeInput::Persisted {
                incarnation: 0,
                lsn: 1,
            },
            true,
        ));
        assert!(!cpu.wakes_at(1_260, gap), "an input waits already");
        let m = CpuModel {
            wake_ns: 7,
            host_nodes: 3,
            ..CpuModel::default()
        };
        assert_eq!((m.wake_cost_ns(true), m.wake_cost_ns(false)), (21, 0));
    }
}
