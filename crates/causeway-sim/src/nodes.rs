//! Simulated nodes: one slot per node with its machine (absent while crashed), incarnation,
//! disk, physical clock and slowness. Owns driving a machine through one input
//! (`with_node`: the invariant check after it, its samples and outputs), the one wake-up per
//! node for its machine's next deadline (`arm_node`, `node_timer`, found by inverting the
//! clock formula), crash and restart from the durable records, and the gauge samples.
//!
//! A node's clock reads true time plus a per-node offset and drift (clock skew is a fault
//! drawn in the fault plan) and never goes back: a clock set back stalls instead.

use crate::cpu::Cpu;
use crate::disk::Disk;
use crate::rng::SimRng;
use crate::world::{Ev, World, GAUGE_INTERVAL_NS, SAMPLES_PER_NAME_MAX, T0};
use causeway_core::clock::Nanos;
use causeway_core::{Addr, Ctx, NodeId, Output, TrueTime};
use causeway_protocols::{new_node, BoxedNode, Msg, NodeConfig};
use std::collections::BTreeMap;

/// A machine that leaves a due deadline behind after `handle_timeout` is woken again only
/// this much later (and the run fails): waking it at once would loop forever.
const DUE_DEADLINE_RETRY_NS: Nanos = 1_000_000;

/// The first of the seed's streams of timer phases, one per node (`SimRng::new`); far
/// above the few streams of faults, network and workload.
const TIMER_PHASE_STREAM: u64 = 1 << 32;

/// A node's physical clock: `t + offset + t * drift / 10^6` at true time `t`, monotonic.
#[derive(Default)]
pub(crate) struct Clock {
    offset_ns: i64,
    drift_ppm: i64,
    /// The last reading given out: later readings never go below it.
    last: Nanos,
}

impl Clock {
    pub(crate) fn set_skew(&mut self, offset_ns: i64, drift_ppm: i64) {
        self.offset_ns = offset_ns;
        self.drift_ppm = drift_ppm;
    }

    /// The clock formula at true time `t`, before monotonicity.
    fn drifted(&self, t: Nanos) -> i128 {
        i128::from(t)
            + i128::from(self.offset_ns)
            + i128::from(t) * i128::from(self.drift_ppm) / 1_000_000
    }

    /// The first true time (not before `now`) at which the clock reads `clock`: the
    /// formula inverted, so a stalled clock (set back) is waited out in one wake-up rather
    /// than polled.
    fn true_time_at(&self, clock: Nanos, now: Nanos) -> Nanos {
        let rate = 1_000_000 + i128::from(self.drift_ppm);
        let target = i128::from(clock) - i128::from(self.offset_ns);
        let mut t = ((target * 1_000_000 + rate - 1) / rate).max(i128::from(now)) as Nanos;
        while self.drifted(t) < i128::from(clock) {
            t += 1; // integer rounding in the formula: at most a step or two
        }
        t
    }

    /// The reading at true time `now`, never below an earlier reading.
    fn read(&mut self, now: Nanos) -> Nanos {
        self.last = self.peek(now);
        self.last
    }

    /// What [`Clock::read`] would return, without recording it.
    fn peek(&self, now: Nanos) -> Nanos {
        self.last.max(self.drifted(now).max(0) as Nanos)
    }
}

pub(crate) struct NodeSlot {
    pub machine: Option<BoxedNode>,
    /// Bumped by every crash: messages, timers and writes of a dead incarnation are lost.
    pub incarnation: u32,
    pub dc: u16,
    pub disk: Disk,
    pub clock: Clock,
    pub slow_until: Nanos,
    pub slow_extra_ns: Nanos,
    /// True time of the one wake-up scheduled for the machine's next deadline.
    pub timer_at: Option<Nanos>,
    /// Its DC failed: it never restarts.
    pub failed: bool,
    /// Cores and run queue (CPU model).
    pub cpu: Cpu,
}

impl NodeSlot {
    fn new(machine: BoxedNode, dc: u16, cores: u32) -> NodeSlot {
        NodeSlot {
            cpu: Cpu::new(cores),
            machine: Some(machine),
            incarnation: 0,
            dc,
            disk: Disk::default(),
            clock: Clock::default(),
            slow_until: 0,
            slow_extra_ns: 0,
            timer_at: None,
            failed: false,
        }
    }

    /// Until `until`, every message to this node arrives `extra_ns` late.
    pub(crate) fn slow_down(&mut self, until: Nanos, extra_ns: Nanos) {
        self.slow_until = until;
        self.slow_extra_ns = extra_ns;
    }
}

impl World {
    fn node_config(&self, node: usize) -> NodeConfig {
        let mut params = self.config.params.clone();
        params.timer_phase_ns = self.timer_phase_ns(node);
        NodeConfig {
            node: NodeId(node as u32),
            topology: self.topology.clone(),
            params,
            section: self.config.section.clone(),
        }
    }

    /// Node `node`'s timer phase (`Params::timer_phase_ns`): drawn from the seed, below the
    /// shorter periodic interval, the same at every boot of the node.
    fn timer_phase_ns(&self, node: usize) -> u64 {
        let params = &self.config.params;
        let every_ns = params
            .replication_interval_ns
            .min(params.stabilization_interval_ns);
        SimRng::new(self.config.seed, TIMER_PHASE_STREAM + node as u64).range(0, every_ns)
    }

    pub(crate) fn boot_nodes(&mut self) -> Result<(), String> {
        for n in 0..self.topology.node_count() as usize {
            let machine = new_node(&self.config.protocol, self.node_config(n), &[])?;
            let dc = self.topology.dc_of(NodeId(n as u32)).0;
            self.nodes
                .push(NodeSlot::new(machine, dc, self.config.cpu.cores));
        }
        for n in 0..self.nodes.len() {
            self.with_node(n, |m, ctx| m.start(ctx));
        }
        Ok(())
    }

    /// The physical clock reading of node `n` now.
    fn clock_of(&mut self, n: usize) -> Nanos {
        let now = self.now;
        self.nodes[n].clock.read(now)
    }

    /// Runs one input of node `n`'s machine (nothing if it is down), then checks its
    /// invariants, keeps its samples, routes its outputs and re-arms its wake-up.
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
        if let Some((kind, bytes)) = self.cpu_input.take() {
            // Under the CPU model the handler's cost is known once it ran; its outputs
            // leave when it finishes.
            let work = machine.take_work();
            let cost = self.config.cpu.cost(kind, bytes, work);
            self.cpu_last_cost = Some(cost);
            self.cpu_last_work = work;
            self.out_delay_ns = cost;
        }
        for (name, value) in machine.take_samples() {
            self.keep_sample(n, name, value);
        }
        self.nodes[n].machine = Some(machine);
        for out in ctx.outputs {
            self.node_output(n, out);
        }
        self.out_delay_ns = 0;
        self.arm_node(n, clock, deadline);
    }

    /// Keeps a sample of node `n` (bounded per name, none during the warm-up), and under
    /// its DC too if the configuration asks for `name` per DC.
    fn keep_sample(&mut self, n: usize, name: &str, value: u64) {
        if self.now < T0 + self.config.sample_warmup_ms * 1_000_000 {
            return;
        }
        let kept = self.metrics.samples.entry(name.to_string()).or_default();
        if kept.len() < SAMPLES_PER_NAME_MAX {
            kept.push(value);
        }
        if !self.config.samples_by_dc.iter().any(|s| s == name) {
            return;
        }
        let dc = self.topology.dc_of(NodeId(n as u32)).0;
        let kept = self
            .metrics
            .samples_by_dc
            .entry((name.to_string(), dc))
            .or_default();
        if kept.len() < SAMPLES_PER_NAME_MAX {
            kept.push(value);
        }
    }

    fn node_output(&mut self, n: usize, out: Output<Msg>) {
        match out {
            Output::Send { to, msg } => self.send(Addr::Node(NodeId(n as u32)), to, msg),
            Output::Persist { lsn, record } => self.persist(n, lsn, record),
            Output::Reply(_) => panic!("node {n} emitted a client reply: only sessions reply"),
        }
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
            slot.clock.true_time_at(deadline, self.now)
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
    pub(crate) fn node_timer(&mut self, n: usize, incarnation: u32, at: Nanos) {
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

    /// Crashes node `n`: volatile state, unsynced records and pending timers are lost.
    pub(crate) fn crash(&mut self, n: usize) {
        let slot = &mut self.nodes[n];
        if slot.machine.is_none() {
            return;
        }
        slot.machine = None;
        // Inputs of the dead incarnation are lost; its hosted sessions' are the clients'.
        slot.cpu
            .queue
            .retain(|(_, input, _)| input.survives_crash());
        slot.disk.lose_unsynced();
        slot.timer_at = None;
        slot.incarnation += 1;
    }

    /// Restarts node `n` from its synced records (a node of a failed DC stays down).
    pub(crate) fn restart(&mut self, n: usize) {
        if self.nodes[n].machine.is_some() || self.nodes[n].failed {
            return;
        }
        let durable = self.nodes[n].disk.durable();
        if self.nodes[n].disk.checkpoints > 0 {
            self.metrics.restarts_from_checkpoint += 1;
        }
        match new_node(&self.config.protocol, self.node_config(n), durable) {
            Ok(machine) => {
                self.nodes[n].machine = Some(machine);
                self.with_node(n, |m, ctx| m.start(ctx));
                self.tell_sessions_restarted(n);
            }
            Err(e) => self
                .metrics
                .liveness
                .push(format!("node {n} failed to recover: {e}")),
        }
    }

    /// Node `n` is back as a new incarnation: every session with a running request hears
    /// it (`ClientSession::peer_restarted`), as the runtime's sessions do once their
    /// node's link meets the new incarnation; one that waited on `n` ends its request now.
    fn tell_sessions_restarted(&mut self, n: usize) {
        for c in 0..self.clients.len() {
            if self.clients[c].session.running() {
                self.with_client(c, |s, ctx| s.peer_restarted(ctx, NodeId(n as u32)));
            }
        }
    }

    /// Every gauge now, as a mean over the live nodes reporting it (reads the machines
    /// and peeks at the clocks: no event and no state changes, so the trace is the same).
    pub(crate) fn gauges_now(&self) -> BTreeMap<String, f64> {
        let mut sums: BTreeMap<String, (f64, u64)> = BTreeMap::new();
        for slot in &self.nodes {
            let clock = slot.clock.peek(self.now);
            let Some(m) = slot.machine.as_ref() else {
                continue;
            };
            for (name, value) in m.gauges(clock) {
                let entry = sums.entry(name.to_string()).or_insert((0.0, 0));
                entry.0 += value;
                entry.1 += 1;
            }
        }
        sums.into_iter()
            .map(|(name, (sum, n))| (name, sum / n as f64))
            .collect()
    }

    /// Adds every live node's gauges to the running means, every `GAUGE_INTERVAL_NS`
    /// until the final reads start.
    pub(crate) fn sample_gauges(&mut self) {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skewed_clock_is_monotonic_and_its_inverse_is_exact() {
        let mut clock = Clock::default();
        clock.set_skew(-5_000, 200);
        let t0 = 1_000_000_000;
        let reading = clock.read(t0);
        assert_eq!(reading, 1_000_195_000, "offset -5 us, drift +200 ppm");
        // The first true time at which the clock reaches a later reading.
        let target = reading + 1_000_000;
        let t = clock.true_time_at(target, t0);
        assert!(clock.drifted(t) >= i128::from(target));
        assert!(
            clock.drifted(t - 1) < i128::from(target),
            "not the first: {t}"
        );
        // Set back by 1 ms: the clock stalls rather than going back.
        clock.set_skew(-1_005_000, 200);
        assert_eq!(clock.read(t0 + 10), reading);
        assert!(clock.read(t0 + 2_000_000) > reading);
    }
}
