//! Causeway simulator (layer 4): runs any protocol's sans-IO machines in virtual time with
//! a seeded network, disks, clocks and faults, drives closed-loop workload clients that
//! record a history, and judges the history with the checker. Same seed, same trace: the
//! run is a pure function of its configuration.
//!
//! Modules by concern: `world` (event loop, dispatch, phases), `network` (links, cuts,
//! held messages), `disk` (unsynced and durable records), `nodes` (machines, clocks,
//! deadline wake-ups, crash and restart), `clients` (workload sessions, history
//! recording, final reads), `barriers` (uniform barriers and moves to another DC),
//! `faults` (the fault plan, as data), `workload` (what each
//! transaction does, one planner per family: custom, YCSB, RUBiS), `liveness` (final-state
//! checks), `required` (which failed-DC transactions must survive), `config` and `rng`.

#![forbid(unsafe_code)]

mod barriers;
mod clients;
pub mod config;
pub mod cpu;
mod disk;
pub mod faults;
pub mod liveness;
mod network;
mod nodes;
pub mod required;
pub mod rng;
pub mod workload;
pub mod world;

pub use config::{FaultKind, FaultSel, ObjectMix, SimConfig, WorkloadFamily};

use causeway_check::{check_with, History, Outcome, TxnRecord, CHECK_TXNS_MAX};
use causeway_core::TxnKind;
use causeway_protocols::Guarantee;
use serde::Serialize;
use std::collections::BTreeMap;

/// Latency summary in milliseconds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    pub count: usize,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Summary {
    pub fn of(samples_ns: &[u64]) -> Summary {
        if samples_ns.is_empty() {
            return Summary::default();
        }
        let mut sorted = samples_ns.to_vec();
        sorted.sort_unstable();
        let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q).round() as usize] as f64 / 1e6;
        let mean = sorted.iter().map(|v| *v as f64).sum::<f64>() / sorted.len() as f64 / 1e6;
        Summary {
            count: sorted.len(),
            mean_ms: mean,
            p50_ms: at(0.5),
            p99_ms: at(0.99),
            max_ms: at(1.0),
        }
    }
}

/// The outcome of one seed.
#[derive(Debug, Serialize)]
pub struct SimResult {
    pub protocol: String,
    pub seed: u64,
    pub trace_hash: String,
    pub committed: usize,
    pub aborted: usize,
    pub unknown: usize,
    /// Transactions the protocol refused to begin (counted in `aborted` too); left out
    /// of the JSON when 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub refused: usize,
    /// Keys the final reads left out because no surviving DC replicates them (partial
    /// replication with failed DCs); left out of the JSON when 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub unreplicated_keys: usize,
    /// Checkpoints that replaced a node's durable records (`SimConfig::checkpoint_records`),
    /// and restarts that recovered from one; left out of the JSON when 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub checkpoints: usize,
    #[serde(skip_serializing_if = "is_zero")]
    pub restarts_from_checkpoint: usize,
    /// Aborted workload transactions by reason (the reason's text up to its first `:`,
    /// digits dropped, so one cause is one line); left out of the JSON when empty.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub abort_reasons: BTreeMap<String, u64>,
    /// The guarantee the history was checked against (`SimConfig::guarantee`, else the
    /// protocol's own).
    pub guarantee: Guarantee,
    /// Strong transactions that committed; left out of the JSON when 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub strong_committed: usize,
    /// Strong transactions that began and ended aborted (certification said no, or an
    /// operation failed); refusals and failed begins are not counted (refusals are in
    /// `refused`). Left out of the JSON when 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub strong_aborted: usize,
    /// When a DC failed: the strong transactions that began after the last DC failure
    /// and committed (strong transactions keep committing once the failed DC's leaders
    /// are replaced). `None` when no DC failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strong_committed_after_failure: Option<usize>,
    pub txn_latency: Summary,
    /// Latency of committed transactions by the kind the workload gave them and by the
    /// client's DC: `strong`, `causal`, `strong@dcN`, `causal@dcN` (see
    /// [`latency_by_kind`]). A protocol that runs every txn strong (`strong`) or none
    /// (`unistore` with `strong_txns = false`) is still split by the workload's kinds.
    pub txn_latency_by_kind: BTreeMap<String, Summary>,
    /// Mean of each gauge the nodes report, sampled every 100 ms of virtual time.
    pub gauges: BTreeMap<String, f64>,
    /// Each gauge's value at the end of the load phase (`duration_ms`), as a mean over the
    /// live nodes: for a cumulative counter (PaRiS's `bytes_*`), what a node had counted
    /// when the load stopped, which the running mean of `gauges` cannot give (and later
    /// samples would add the quiesce phase's traffic).
    pub gauges_end_of_load: BTreeMap<String, f64>,
    /// Summaries of the samples the nodes report (names end in their unit; shown in ms),
    /// with those of `SimConfig::samples_by_dc` per DC as `NAME@dcN`.
    pub samples: BTreeMap<String, Summary>,
    /// The raw samples of `SimConfig::samples_by_dc`, per name and DC of the reporting
    /// node (`name@dcN` -> values), for distributions a summary cannot give (CDFs).
    #[serde(skip)]
    pub samples_by_dc: BTreeMap<String, Vec<u64>>,
    pub events: u64,
    pub messages: u64,
    /// Under the CPU model: the nodes' busy time over their cores' time during the
    /// fault (load) phase. Queueing delay is the sample `cpu_queue_wait_ns`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_utilization: Option<f64>,
    /// Under the CPU model: what the nodes' CPUs ran during the load phase, by what the
    /// model charges (the calibration's inputs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_tally: Option<cpu::CpuTally>,
    /// Whether the history went through the checker (see `SimConfig::allow_unchecked`).
    pub checked: bool,
    pub faults: Vec<String>,
    /// The first violation found, if any: safety (checker) or liveness.
    pub violation: Option<String>,
    #[serde(skip)]
    pub history: History,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The checker's form of a protocol's guarantee.
fn checker_guarantee(g: Guarantee) -> causeway_check::Guarantee {
    match g {
        Guarantee::Convergence => causeway_check::Guarantee::Convergence,
        Guarantee::Tcc => causeway_check::Guarantee::Tcc,
        Guarantee::Por => causeway_check::Guarantee::Por,
        Guarantee::PcPsi => causeway_check::Guarantee::PcPsi,
    }
}

/// The strong transactions of a history, by outcome (see `SimResult`).
struct StrongCounts {
    committed: usize,
    aborted: usize,
    committed_after_failure: Option<usize>,
}

impl StrongCounts {
    fn of(history: &History, last_dc_failure_at: Option<causeway_core::clock::Nanos>) -> Self {
        let strong = || history.txns.iter().filter(|t| t.kind == TxnKind::Strong);
        let committed = |t: &&TxnRecord| t.outcome == Outcome::Committed;
        // A refused begin is recorded aborted too, with an id no session issues.
        let began = |t: &&TxnRecord| t.id.seq < clients::NOT_BEGUN_SEQ;
        StrongCounts {
            committed: strong().filter(committed).count(),
            aborted: strong()
                .filter(|t| t.outcome == Outcome::Aborted)
                .filter(began)
                .count(),
            committed_after_failure: last_dc_failure_at.map(|at| {
                strong()
                    .filter(committed)
                    .filter(|t| t.start_ns > at)
                    .count()
            }),
        }
    }
}

/// Latency summaries of the committed transactions of `history` by kind (`strong`,
/// `causal`) and by kind and client DC (`strong@dc0`, ...): UniStore Fig. 3's per-kind
/// and per-site latencies. Kinds without a committed txn are left out.
pub fn latency_by_kind(history: &History) -> BTreeMap<String, Summary> {
    let mut raw: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for t in history
        .txns
        .iter()
        .filter(|t| t.outcome == Outcome::Committed)
    {
        let kind = match t.kind {
            TxnKind::Strong => "strong",
            TxnKind::Causal => "causal",
        };
        let took = t.end_ns.saturating_sub(t.start_ns);
        raw.entry(kind.to_string()).or_default().push(took);
        raw.entry(format!("{kind}@dc{}", t.dc.0))
            .or_default()
            .push(took);
    }
    raw.iter()
        .map(|(k, v)| (k.clone(), Summary::of(v)))
        .collect()
}

/// The per-DC samples keyed `name@dcN`.
fn by_dc_names(samples: BTreeMap<(String, u16), Vec<u64>>) -> BTreeMap<String, Vec<u64>> {
    samples
        .into_iter()
        .map(|((name, dc), v)| (format!("{name}@dc{dc}"), v))
        .collect()
}

/// Summaries of every sample name, then of each per-DC one.
fn summaries(
    all: &BTreeMap<String, Vec<u64>>,
    by_dc: &BTreeMap<String, Vec<u64>>,
) -> BTreeMap<String, Summary> {
    all.iter()
        .chain(by_dc)
        .map(|(k, v)| (k.clone(), Summary::of(v)))
        .collect()
}

/// Runs one seed and checks its history.
pub fn run(config: &SimConfig) -> Result<SimResult, String> {
    let entry = causeway_protocols::entry(&config.protocol)?;
    let guarantee = config.guarantee.unwrap_or(entry.guarantee());
    let mut world = world::World::new(config.clone())?;
    world.run();
    let history = std::mem::take(&mut world.history);
    let failures = liveness::FinalStateRules {
        failed: world.failed_dcs.clone(),
        may_vanish: entry.requirements().failed_dc_writes_may_vanish,
        tolerated: entry.tolerated_failures(&config.section, config.dcs)?,
        causal: entry.guarantee() != Guarantee::Convergence,
        registers: entry.requirements().final_registers,
        atomic_unknowns: entry.requirements().atomic_unknowns,
    };
    let mut violation = world.metrics.invariants.first().cloned();
    if violation.is_none() {
        violation = world.metrics.liveness.first().cloned();
    }
    // A history past the checker's size limit is a violation unless the configuration
    // accepts unchecked runs (load experiments): then invariants and liveness still hold
    // it to account, and the result says it was not checked.
    let checked = !config.allow_unchecked || history.txns.len() <= CHECK_TXNS_MAX;
    if violation.is_none() && checked {
        let comparable = liveness::comparable(&history, &failures);
        let conflicts = config.conflict_relation()?;
        violation = check_with(&comparable, checker_guarantee(guarantee), &conflicts)
            .err()
            .map(|v| format!("safety: {v}"));
    }
    if violation.is_none() {
        violation = liveness::check_final_state(&history, &failures).err();
    }
    // The CPU model may overload a coordinator, which then refuses by design.
    let fault_free = world.fault_log.is_empty() && !config.cpu.enabled;
    if violation.is_none() && fault_free && entry.requirements().causal_commits_without_faults {
        let reasons = &world.metrics.abort_reasons;
        violation = liveness::check_fault_free_commits(&history, reasons).err();
    }
    let samples_by_dc = by_dc_names(std::mem::take(&mut world.metrics.samples_by_dc));
    let count = |o: Outcome| history.txns.iter().filter(|t| t.outcome == o).count();
    let strong = StrongCounts::of(&history, world.last_dc_failure_at);
    Ok(SimResult {
        protocol: config.protocol.clone(),
        seed: config.seed,
        trace_hash: format!("{:016x}", world.trace_hash),
        committed: count(Outcome::Committed),
        aborted: count(Outcome::Aborted),
        unknown: count(Outcome::Unknown),
        refused: world.metrics.refused,
        unreplicated_keys: world.metrics.unreplicated_keys,
        checkpoints: world
            .nodes
            .iter()
            .map(|s| s.disk.checkpoints as usize)
            .sum(),
        restarts_from_checkpoint: world.metrics.restarts_from_checkpoint,
        abort_reasons: world.metrics.abort_reasons.clone(),
        guarantee,
        strong_committed: strong.committed,
        strong_aborted: strong.aborted,
        strong_committed_after_failure: strong.committed_after_failure,
        txn_latency: Summary::of(&world.metrics.latencies_ns),
        txn_latency_by_kind: latency_by_kind(&history),
        gauges: world
            .metrics
            .gauges
            .iter()
            .map(|(k, (sum, n))| (k.clone(), sum / *n as f64))
            .collect(),
        gauges_end_of_load: std::mem::take(&mut world.metrics.gauges_end_of_load),
        samples: summaries(&world.metrics.samples, &samples_by_dc),
        samples_by_dc,
        events: world.metrics.events,
        messages: world.metrics.messages,
        cpu_utilization: world.metrics.cpu_utilization,
        cpu_tally: (world.config.cpu.enabled).then(|| world.metrics.cpu_tally.clone()),
        checked,
        faults: world.fault_log.clone(),
        violation,
        history,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_core::{DcId, SessionId, TxnId};

    fn txn(seq: u64, dc: u16, kind: TxnKind, took_ms: u64, outcome: Outcome) -> TxnRecord {
        let session = SessionId(1);
        TxnRecord {
            id: TxnId { session, seq },
            session,
            dc: DcId(dc),
            kind,
            label: None,
            start_ns: 1_000_000_000,
            end_ns: 1_000_000_000 + took_ms * 1_000_000,
            ops: Vec::new(),
            outcome,
        }
    }

    #[test]
    fn exponential_think_times_keep_the_mean_rate_and_change_the_run() {
        let fixed = SimConfig {
            protocol: "cure".into(),
            think_time_ns: 20_000_000,
            duration_ms: 2_000,
            quiesce_ms: 200,
            ..SimConfig::default()
        };
        let exp = SimConfig {
            think_time_exponential: true,
            ..fixed.clone()
        };
        let (a, b) = (run(&fixed).expect("runs"), run(&exp).expect("runs"));
        assert!(a.violation.is_none() && b.violation.is_none());
        assert_ne!(a.trace_hash, b.trace_hash);
        // The same mean think time: about the same number of txns (within 20%).
        let (na, nb) = (a.committed as f64, b.committed as f64);
        assert!((nb / na - 1.0).abs() < 0.2, "fixed {na}, exponential {nb}");
    }

    #[test]
    fn clients_start_spread_over_start_spread_ms() {
        let at_once = SimConfig {
            protocol: "cure".into(),
            clients_per_dc: 20,
            duration_ms: 600,
            quiesce_ms: 200,
            ..SimConfig::default()
        };
        let spread = SimConfig {
            start_spread_ms: 300,
            ..at_once.clone()
        };
        // The spread of the sessions' first txn starts, in ms.
        let first_starts = |c: &SimConfig| {
            let r = run(c).expect("runs");
            assert!(r.violation.is_none());
            let mut first: BTreeMap<_, u64> = BTreeMap::new();
            for t in &r.history.txns {
                let e = first.entry(t.session).or_insert(t.start_ns);
                *e = (*e).min(t.start_ns);
            }
            let lo = first.values().min().copied().unwrap_or(0);
            let hi = first.values().max().copied().unwrap_or(0);
            (hi - lo) as f64 / 1e6
        };
        assert!(
            first_starts(&at_once) <= 1.0,
            "within the first millisecond"
        );
        let s = first_starts(&spread);
        assert!(s > 200.0 && s <= 300.0, "spread over {s} ms");
    }

    #[test]
    fn latency_by_kind_splits_committed_txns_by_kind_and_client_dc() {
        let history = History {
            txns: vec![
                txn(1, 0, TxnKind::Strong, 60, Outcome::Committed),
                txn(2, 2, TxnKind::Strong, 90, Outcome::Committed),
                txn(3, 2, TxnKind::Causal, 2, Outcome::Committed),
                txn(4, 1, TxnKind::Strong, 500, Outcome::Aborted),
                txn(5, 1, TxnKind::Causal, 900, Outcome::Unknown),
            ],
            ..History::default()
        };
        let by = latency_by_kind(&history);
        let keys: Vec<&str> = by.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["causal", "causal@dc2", "strong", "strong@dc0", "strong@dc2"],
            "only committed txns, only DCs that have some"
        );
        assert_eq!(by["strong"].count, 2);
        assert_eq!(by["strong"].mean_ms, 75.0);
        assert_eq!(by["strong@dc2"].mean_ms, 90.0);
        assert_eq!(by["causal"].mean_ms, 2.0);
    }
}
