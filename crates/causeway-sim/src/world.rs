//! The event loop of one simulated run: virtual time, the event queue ordered by (time,
//! sequence), the trace hash, dispatch of each event to the module that owns it (network,
//! disk, nodes, clients), the fault plan's timed events applied to the world, and the run's
//! phases (faults; heal and drain; quiesce; final reads). One `World` runs one seed of one
//! configuration. State lives with its owner: links in [`crate::network`], disks in
//! [`crate::disk`], node slots and clocks in [`crate::nodes`], client slots and history
//! recording in [`crate::clients`].

use crate::clients::ClientSlot;
use crate::config::SimConfig;
use crate::cpu::NodeInput;
use crate::faults::{FaultEvent, FaultPlan};
use crate::network::Network;
use crate::nodes::NodeSlot;
use crate::rng::SimRng;
use crate::workload::Workload;
use causeway_check::History;
use causeway_core::clock::Nanos;
use causeway_core::{Addr, Lsn, SessionId, Topology};
use causeway_protocols::Msg;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

/// Virtual time starts at 1 s so that negative clock offsets stay positive.
pub const T0: Nanos = 1_000_000_000;
pub(crate) const GAUGE_INTERVAL_NS: Nanos = 100_000_000;
const IDLE_POLL_NS: Nanos = 100_000_000;
/// How long after the fault phase the run may take before it is declared stuck.
const DRAIN_MAX_NS: Nanos = 60_000_000_000;
/// Most samples kept per measurement name (later ones are dropped).
pub const SAMPLES_PER_NAME_MAX: usize = 200_000;
/// Most invariant violations recorded per run (the first one fails the run).
const INVARIANT_REPORTS_MAX: usize = 8;
/// The FNV-1a offset basis the trace hash starts from.
const TRACE_HASH_INIT: u64 = 0xcbf2_9ce4_8422_2325;

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
    /// A core of `node` frees up (CPU model): run the next queued input.
    CpuFree {
        node: usize,
    },
    Fault(FaultEvent),
    EndFaults,
    PollIdle,
    StartFinal,
    Gauges,
}

/// Where a protocol session's messages go.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Route {
    /// The client slot it serves (or served).
    pub slot: usize,
    pub dc: u16,
    /// Retired: its client moved to another DC; messages to it are dropped.
    pub retired: bool,
}

/// Counters and samples gathered during a run.
#[derive(Debug, Default)]
pub struct Metrics {
    pub events: u64,
    pub messages: u64,
    pub latencies_ns: Vec<Nanos>,
    pub gauges: BTreeMap<String, (f64, u64)>,
    /// Each gauge when the load phase ended (mean over the live nodes; see
    /// `SimResult::gauges_end_of_load`).
    pub gauges_end_of_load: BTreeMap<String, f64>,
    /// Samples the nodes report (`ServerNode::take_samples`), per name.
    pub samples: BTreeMap<String, Vec<u64>>,
    /// The samples named in `SimConfig::samples_by_dc`, per (name, DC of the node).
    pub samples_by_dc: BTreeMap<(String, u16), Vec<u64>>,
    pub liveness: Vec<String>,
    /// Broken machine invariants and driver errors (a message of the wrong protocol, a
    /// deadline left due), each with the node and virtual time.
    pub invariants: Vec<String>,
    /// CPU utilization over the load phase (CPU model only).
    pub cpu_utilization: Option<f64>,
    /// What the CPUs ran during the load phase (CPU model only).
    pub cpu_tally: crate::cpu::CpuTally,
    /// Transactions the protocol refused to begin (a kind it lacks, e.g. strong).
    pub refused: usize,
    /// Keys left out of the final reads: no surviving DC replicates them.
    pub unreplicated_keys: usize,
    /// Restarts whose durable records began with a checkpoint.
    pub restarts_from_checkpoint: usize,
    /// Workload transactions that ended aborted, by kind (`causeway_core::abort_reasons`).
    pub abort_reasons: BTreeMap<String, u64>,
}

pub struct World {
    pub config: SimConfig,
    pub topology: Topology,
    pub(crate) now: Nanos,
    seq: u64,
    queue: BinaryHeap<Reverse<(Nanos, u64)>>,
    events: BTreeMap<u64, Ev>,
    pub(crate) nodes: Vec<NodeSlot>,
    pub(crate) clients: Vec<ClientSlot>,
    /// Every protocol session ever created, by id (ids count from 1): where its messages
    /// go. A client that moved DCs retires its old session (see `crate::barriers`).
    pub(crate) routes: BTreeMap<SessionId, Route>,
    pub(crate) network: Network,
    pub(crate) work_rng: SimRng,
    pub(crate) workload: Workload,
    /// The fault phase is over: clients finish their transaction and start no other.
    pub(crate) stopping: bool,
    pub(crate) final_started: bool,
    pub history: History,
    pub metrics: Metrics,
    pub trace_hash: u64,
    pub fault_log: Vec<String>,
    /// DCs failed for good (at most what the fault plan allows; see
    /// `faults::dc_failures_max`).
    pub(crate) failed_dcs: BTreeSet<u16>,
    /// When the last DC failed (`None`: no DC failed).
    pub(crate) last_dc_failure_at: Option<Nanos>,
    pub(crate) end_faults_at: Nanos,
    /// How long after `now` the outputs being routed leave (the running handler's cost
    /// under the CPU model; 0 otherwise).
    pub(crate) out_delay_ns: Nanos,
    /// Set while a CPU-model input runs on a machine: its kind and encoded size (for its
    /// cost).
    pub(crate) cpu_input: Option<(crate::cpu::InputKind, usize)>,
    /// The cost of the input that just ran, and the work its machine reported.
    pub(crate) cpu_last_cost: Option<Nanos>,
    pub(crate) cpu_last_work: u64,
    /// The node whose CPU queue is being drained, if any (drains never nest).
    pub(crate) cpu_draining: Option<usize>,
}

impl World {
    pub fn new(mut config: SimConfig) -> Result<World, String> {
        config.validate()?;
        // The network reads the slowed nodes from `slow_replication`: hot and tail ones join it.
        config.slow_replication = crate::faults::slowed_replication(&config)?;
        config.slow_hot_replication = None;
        config.slow_tail_replication = None;
        let topology = config.topology();
        let mut world = World {
            topology: topology.clone(),
            now: T0,
            seq: 0,
            queue: BinaryHeap::new(),
            events: BTreeMap::new(),
            nodes: Vec::new(),
            clients: Vec::new(),
            routes: BTreeMap::new(),
            network: Network::new(config.seed),
            work_rng: SimRng::new(config.seed, 2),
            workload: Workload::new(&config),
            stopping: false,
            final_started: false,
            history: History::default(),
            metrics: Metrics::default(),
            trace_hash: TRACE_HASH_INIT,
            fault_log: Vec::new(),
            failed_dcs: BTreeSet::new(),
            last_dc_failure_at: None,
            end_faults_at: T0 + config.duration_ms * 1_000_000,
            out_delay_ns: 0,
            cpu_input: None,
            cpu_last_cost: None,
            cpu_last_work: 0,
            cpu_draining: None,
            config,
        };
        world.boot_nodes()?;
        world.boot_clients()?;
        world.load_fault_plan(FaultPlan::draw(&world.config, &world.topology));
        world.schedule(world.end_faults_at, Ev::EndFaults);
        world.schedule(T0 + GAUGE_INTERVAL_NS, Ev::Gauges);
        Ok(world)
    }

    /// Takes the plan's boot-time clock skew now and queues its timed events; the world
    /// applies each event when its time comes (`apply_fault`).
    fn load_fault_plan(&mut self, plan: FaultPlan) {
        self.fault_log = plan.describe();
        for (n, (offset, drift)) in plan.skew.iter().enumerate() {
            self.nodes[n].clock.set_skew(*offset, *drift);
        }
        for (at, ev) in plan.events {
            self.schedule(at, Ev::Fault(ev));
        }
    }

    pub(crate) fn schedule(&mut self, at: Nanos, ev: Ev) {
        self.seq += 1;
        self.queue.push(Reverse((at, self.seq)));
        self.events.insert(self.seq, ev);
    }

    /// Feeds one word into the FNV-1a trace hash.
    pub(crate) fn hash(&mut self, word: u64) {
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
            if self.final_started && self.final_reads_done() {
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
            } if self.config.cpu.enabled => {
                self.node_input(node, NodeInput::Timer { incarnation, at })
            }
            Ev::NodeTimer {
                node,
                incarnation,
                at,
            } => self.node_timer(node, incarnation, at),
            Ev::ClientTimer { client, at } => self.client_timer(client, at),
            Ev::Persisted {
                node,
                incarnation,
                lsn,
            } => self.write_done(node, incarnation, lsn),
            Ev::CpuFree { node } => {
                self.nodes[node].cpu.wake_at = None;
                self.cpu_drain(node);
            }
            Ev::ClientNext { client } => self.client_next(client),
            Ev::Fault(f) => self.apply_fault(f),
            Ev::EndFaults => self.end_faults(),
            Ev::PollIdle => self.poll_idle(),
            Ev::StartFinal => self.start_final(),
            Ev::Gauges => self.sample_gauges(),
        }
    }

    /// Applies one event of the fault plan.
    fn apply_fault(&mut self, event: FaultEvent) {
        match event {
            FaultEvent::Cut { a, b } => self.network.cut(a, b),
            FaultEvent::Heal { a, b } => {
                self.network.heal(a, b);
                self.release_held();
            }
            FaultEvent::HealDropping { a, b } => {
                self.network.heal(a, b);
                self.drop_held_between(a, b);
                self.release_held();
            }
            FaultEvent::Crash { node } => self.crash(node),
            FaultEvent::Restart { node } => self.restart(node),
            FaultEvent::SlowStart {
                node,
                until,
                extra_ns,
            } => self.nodes[node].slow_down(until, extra_ns),
            FaultEvent::DiskStall {
                node,
                until,
                extra_ns,
            } => self.nodes[node].disk.stall(until, extra_ns),
            FaultEvent::SlowLink {
                from,
                to,
                until,
                extra_ns,
            } => self.network.slow_link(from, to, until, extra_ns),
            FaultEvent::FailDc { dc } if !self.failed_dcs.contains(&dc) => self.fail_dc(dc),
            FaultEvent::FailDc { .. } => {}
        }
    }

    /// Fails DC `dc` for good: its nodes crash and never restart, its clients stop, and
    /// what its links held across a cut is lost.
    fn fail_dc(&mut self, dc: u16) {
        self.failed_dcs.insert(dc);
        self.last_dc_failure_at = Some(self.now);
        self.drop_held_from(dc);
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

    /// End of the fault phase: every cut heals, every slow node and link recovers, every
    /// crashed node restarts, and clients stop after their current transaction.
    fn end_faults(&mut self) {
        self.metrics.cpu_utilization = self.cpu_utilization();
        self.metrics.gauges_end_of_load = self.gauges_now();
        self.stopping = true;
        self.network.heal_all();
        self.release_held();
        for n in 0..self.nodes.len() {
            self.nodes[n].slow_until = 0;
            self.nodes[n].disk.stall(0, 0);
            self.restart(n);
        }
        self.schedule(self.now, Ev::PollIdle);
    }

    /// Waits (bounded) for the workload clients to finish, then quiesces before the
    /// final reads.
    fn poll_idle(&mut self) {
        if self.clients_busy() && self.now < self.end_faults_at + DRAIN_MAX_NS / 2 {
            self.schedule(self.now + IDLE_POLL_NS, Ev::PollIdle);
            return;
        }
        self.abandon_unfinished();
        self.schedule(
            self.now + self.config.quiesce_ms * 1_000_000,
            Ev::StartFinal,
        );
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
}
