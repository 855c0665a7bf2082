//! The CPU model (DESIGN.md, "CPU model"): each node has `cores` served in FIFO order, and
//! handling an input (a message, a timer, a durable lsn) costs
//! `msg_ns + byte_ns x encoded size + op_ns x work`, where `work` is what the machine
//! reports it did (`ServerNode::take_work`: keys read and written, versions traversed,
//! entries merged). An input that finds every core busy waits in the node's queue; the
//! machine runs it when a core frees up, and its messages and writes leave only when the
//! handler finishes. Off by default for `sim` (pure protocol studies), on for experiments.

use crate::world::{Ev, World};
use causeway_core::clock::Nanos;
use causeway_core::Addr;
use causeway_protocols::Msg;
use serde::Serialize;
use std::collections::VecDeque;

/// Most inputs waiting for a core on one node; past it the node is hopelessly overloaded
/// and the run fails rather than grow without bound.
pub const CPU_QUEUE_MAX: usize = 1 << 20;

/// The cost model, per node.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CpuModel {
    pub enabled: bool,
    pub cores: u32,
    /// Fixed cost of handling one input.
    pub msg_ns: Nanos,
    /// Cost per byte of an input message's encoding.
    pub byte_ns: Nanos,
    /// Cost per unit of work the machine reports.
    pub op_ns: Nanos,
}

impl Default for CpuModel {
    /// Calibrated against the real runtime (BENCHMARKS.md, "CPU model calibration"):
    /// `scripts/calibrate-cpu` measured 34.6 us (GET) and 76.3 us (SET) of node CPU per
    /// single-key Cure transaction; the simulator counts 6.4 and 11.6 node inputs for the
    /// same transactions, so about 6 us per input.
    fn default() -> CpuModel {
        CpuModel {
            enabled: false,
            cores: 4,
            msg_ns: 6_000,
            byte_ns: 2,
            op_ns: 500,
        }
    }
}

impl CpuModel {
    pub fn cost(&self, bytes: usize, work: u64) -> Nanos {
        self.msg_ns + self.byte_ns * bytes as Nanos + self.op_ns * work
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.enabled && !(1..=1024).contains(&self.cores) {
            return Err(format!(
                "--cores must be between 1 and 1024, not {}",
                self.cores
            ));
        }
        Ok(())
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
}

impl NodeInput {
    /// Bytes of the input's encoding (messages only: a timer or an lsn is a word).
    pub(crate) fn bytes(&self) -> usize {
        match self {
            NodeInput::Message { msg, .. } => postcard::to_allocvec(msg).map_or(0, |b| b.len()),
            _ => 0,
        }
    }
}

/// One node's cores and run queue.
#[derive(Debug, Default)]
pub(crate) struct Cpu {
    /// When each core finishes its current handler.
    pub free_at: Vec<Nanos>,
    /// Inputs waiting for a core, with their arrival time.
    pub queue: VecDeque<(Nanos, NodeInput)>,
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
        let queue = &mut self.nodes[n].cpu.queue;
        if queue.len() >= CPU_QUEUE_MAX {
            let what = format!("node {n}: {CPU_QUEUE_MAX} inputs wait for a core (CPU_QUEUE_MAX)");
            return self.invariant_broken(format!("driver: {what}"));
        }
        queue.push_back((self.now, input));
        self.cpu_drain(n);
    }

    /// Runs queued inputs on free cores, in arrival order; when every core is busy,
    /// wakes up when the first one frees.
    pub(crate) fn cpu_drain(&mut self, n: usize) {
        loop {
            let (core, free_at) = self.nodes[n].cpu.first_free();
            let cpu = &mut self.nodes[n].cpu;
            if cpu.queue.is_empty() {
                return;
            }
            if free_at > self.now {
                if cpu.wake_at.is_none_or(|w| w > free_at) {
                    cpu.wake_at = Some(free_at);
                    self.schedule(free_at, Ev::CpuFree { node: n });
                }
                return;
            }
            let (arrived, input) = cpu.queue.pop_front().expect("not empty");
            self.sample("cpu_queue_wait_ns", self.now - arrived);
            let cost = self.run_input(n, input);
            self.nodes[n].cpu.occupy(core, self.now, cost);
        }
    }

    /// Runs one input through the machine; returns its cost (the fixed part if the input
    /// was for a dead incarnation or a stale wake-up).
    fn run_input(&mut self, n: usize, input: NodeInput) -> Nanos {
        self.cpu_input_bytes = Some(input.bytes());
        self.cpu_last_cost = None;
        match input {
            NodeInput::Message {
                from,
                msg,
                incarnation,
            } => self.deliver_to_node(n, from, msg, incarnation),
            NodeInput::Timer { incarnation, at } => self.node_timer(n, incarnation, at),
            NodeInput::Persisted { incarnation, lsn } => self.persisted(n, incarnation, lsn),
        }
        self.cpu_input_bytes = None;
        self.cpu_last_cost.take().unwrap_or(self.config.cpu.msg_ns)
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
            byte_ns: 2,
            op_ns: 10,
        };
        assert_eq!(m.cost(50, 3), 100 + 100 + 30);
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
}
