//! Experiments as code: each names the paper figure it reproduces, a topology and workload
//! (a `SimConfig` with the CPU model on), the protocols compared (the first is the
//! baseline), what it measures ([`Kind`]) and a sweep of closed-loop clients per DC from
//! idle to past saturation. Running a sweep gives a throughput-latency curve per protocol;
//! [`Kind::PeakPerVariant`] runs it once per variant of the setup (`crate::peaks`),
//! [`Kind::Cdf`] runs each variant once and keeps a sample's distribution per DC
//! (`crate::cdf`). An experiment may measure a steady state (`warmup_ms`: transactions
//! beginning before it are left out) and add findings of its own to a peaks report (the
//! paper's comparisons: `crate::paris`).

use crate::peaks::PeaksReport;
use causeway_check::Outcome;
use causeway_sim::cpu::CpuModel;
use causeway_sim::{run, SimConfig, SimResult, Summary};
use serde::Serialize;
use std::collections::BTreeMap;

/// Most points one sweep may hold.
pub const SWEEP_POINTS_MAX: usize = 32;

/// A change to the experiment's configuration (a DC count, a config section, the clients
/// in proportion to the servers: the runner sets the sweep's count before it), labelled
/// for tables and plots.
pub struct Variant {
    pub label: &'static str,
    pub apply: fn(&mut SimConfig),
}

/// A curve beyond the experiment's plain protocols: `protocol` under `label`, with the
/// configuration changed by `apply` (e.g. UniStore's CAUSAL baseline: `unistore` with the
/// section `strong_txns = false`; or one strong ratio of a microbenchmark).
pub struct Line {
    pub label: &'static str,
    pub protocol: &'static str,
    pub apply: fn(&mut SimConfig),
}

/// One curve to run: a plain protocol (its own label, no change) or a [`Line`].
#[derive(Clone, Copy)]
pub struct CurveSpec {
    pub label: &'static str,
    pub protocol: &'static str,
    pub apply: Option<fn(&mut SimConfig)>,
}

/// Which sample a [`Kind::Cdf`] experiment reports, and at which DCs.
pub struct CdfSpec {
    pub variants: &'static [Variant],
    /// A node sample (`SimConfig::samples_by_dc` keeps it per DC).
    pub sample: &'static str,
    /// What the sample measures, for the plot's x axis.
    pub measure: &'static str,
    /// The destination DCs reported: index and name.
    pub dcs: &'static [(u16, &'static str)],
}

/// What an experiment measures.
pub enum Kind {
    /// One throughput-latency curve per protocol (Cure Fig. 2a).
    Sweep,
    /// The sweep once per variant; each protocol's peak against the baseline's peak in the
    /// same variant (UniStore Fig. 5: the DC count).
    PeakPerVariant(&'static [Variant]),
    /// No sweep: each protocol once per variant at the sweep's first client count, with a
    /// sample's distribution per destination DC (UniStore Fig. 6).
    Cdf(&'static CdfSpec),
}

pub struct Experiment {
    pub name: &'static str,
    /// The paper's figure this reproduces, and what it shows.
    pub figure: &'static str,
    pub kind: Kind,
    pub protocols: &'static [&'static str],
    /// Labelled curves after `protocols` (a protocol with a changed configuration).
    pub lines: &'static [Line],
    /// Topology and workload; the runner sets protocol, clients, seed and duration.
    pub config: fn() -> SimConfig,
    pub clients_per_dc: &'static [u32],
    pub duration_ms: u64,
    pub seeds: u64,
    /// The reduced sweep of `--quick` (under a minute).
    pub quick_clients_per_dc: &'static [u32],
    pub quick_duration_ms: u64,
    /// The sweep of `--real` (a local `causeway up` cluster per protocol): far smaller,
    /// since servers and client threads share the machine's cores. Sweeps only.
    pub real_clients_per_dc: &'static [u32],
    /// Wall-clock seconds per point of `--real`.
    pub real_duration_s: u64,
    /// `--real --quick`.
    pub quick_real_clients_per_dc: &'static [u32],
    pub quick_real_duration_s: u64,
    /// When nonzero, a steady-state measurement: transactions that begin in the first
    /// `warmup_ms` of the load are left out of throughput and latency (which then cover
    /// those begun in the rest of the load phase: [`steady_state`]), and so are node
    /// samples taken then
    /// (`SimConfig::sample_warmup_ms`). For closed loops whose start-up lasts: PaRiS's
    /// multi-DC txns take WAN round trips, and until every client has met some, a short
    /// run counts mostly fast local txns.
    pub warmup_ms: u64,
    /// `warmup_ms` of `--quick`.
    pub quick_warmup_ms: u64,
    /// Lines a peaks report adds after its tables: the paper's comparisons, computed from
    /// the curves (e.g. [`crate::paris`]). `None`: nothing beyond the generic tables.
    pub findings: Option<fn(&PeaksReport) -> Vec<String>>,
    /// What the test loop requires of the `--quick` report.
    pub quick_check: QuickCheck,
}

/// The lines a `--quick` report must hold for the test loop (`scripts/test`) to accept the
/// run, and those it shows: grep basic regular expressions, listed by `causeway bench
/// --experiment plan`.
pub struct QuickCheck {
    /// Each must match some line of the report.
    pub must: &'static [&'static str],
    /// The lines shown in the loop's output.
    pub show: &'static str,
}

impl QuickCheck {
    /// For a template every experiment overrides.
    pub const NONE: QuickCheck = QuickCheck {
        must: &[],
        show: "",
    };
}

/// The same one-way delay between every pair of DCs (Cure §V-A added 50 ms to every
/// inter-DC message).
pub(crate) fn uniform_wan(dcs: usize, one_way_ms: f64) -> Vec<Vec<f64>> {
    (0..dcs)
        .map(|a| {
            (0..dcs)
                .map(|b| if a == b { 0.0 } else { one_way_ms })
                .collect()
        })
        .collect()
}

impl Experiment {
    /// The curves it runs: each of `protocols`, then each of `lines`; the first is the
    /// baseline.
    pub fn curves(&self) -> Vec<CurveSpec> {
        let plain = self.protocols.iter().map(|p| CurveSpec {
            label: p,
            protocol: p,
            apply: None,
        });
        let lines = self.lines.iter().map(|l| CurveSpec {
            label: l.label,
            protocol: l.protocol,
            apply: Some(l.apply),
        });
        plain.chain(lines).collect()
    }
}

/// One point of a curve: a protocol at one client count.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Point {
    pub clients_per_dc: u32,
    pub committed: usize,
    pub aborted: usize,
    pub throughput_txn_per_s: f64,
    pub latency: Summary,
    /// Latency by the workload's txn kind and client DC (`strong`, `causal@dc1`, ...;
    /// see `causeway_sim::latency_by_kind`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub latency_by_kind: BTreeMap<String, Summary>,
    pub cpu_utilization: Option<f64>,
    /// The protocol's own figures and the CPU queueing delay (names end in their unit).
    pub samples: BTreeMap<String, Summary>,
    /// The nodes' gauges, each the mean over the run (`SimResult::gauges`), over seeds.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub gauges: BTreeMap<String, f64>,
    /// The nodes' gauges when the load stopped (`SimResult::gauges_end_of_load`: a
    /// cumulative counter's total per node), mean over seeds.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub gauges_end_of_load: BTreeMap<String, f64>,
    /// The CDF of each sample the configuration keeps raw (`SimConfig::samples_by_dc`),
    /// every DC and seed pooled: (ms, fraction at or below), see [`crate::cdf::cdf_points`].
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub cdfs: BTreeMap<String, Vec<(f64, f64)>>,
    /// Aborts by reason (the text before its first ':'), summed over seeds: the whole run.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub abort_reasons: BTreeMap<String, u64>,
    pub violations: usize,
    /// Runs whose history was too large for the checker (invariants still checked).
    pub unchecked: usize,
    /// The first violation's text (seed and counterexample), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub violation: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Curve {
    pub protocol: String,
    pub points: Vec<Point>,
}

impl Curve {
    /// The point of highest throughput.
    pub fn peak(&self) -> &Point {
        let by_tput =
            |a: &&Point, b: &&Point| a.throughput_txn_per_s.total_cmp(&b.throughput_txn_per_s);
        self.points
            .iter()
            .max_by(by_tput)
            .expect("a curve has points")
    }
}

/// What to run: the experiment, reduced or not, and CPU model overrides.
pub struct Plan<'a> {
    pub experiment: &'a Experiment,
    pub quick: bool,
    /// Replaces the experiment's CPU model (e.g. `--cpu-msg-ns`), if set.
    pub cpu: Option<CpuModel>,
}

impl Plan<'_> {
    pub fn clients(&self) -> &'static [u32] {
        let e = self.experiment;
        if self.quick {
            e.quick_clients_per_dc
        } else {
            e.clients_per_dc
        }
    }

    /// The client counts per DC of a real-cluster run.
    pub fn real_clients(&self) -> &'static [u32] {
        let e = self.experiment;
        if self.quick {
            e.quick_real_clients_per_dc
        } else {
            e.real_clients_per_dc
        }
    }

    /// Wall-clock seconds per point of a real-cluster run.
    pub fn real_duration_s(&self) -> u64 {
        let e = self.experiment;
        if self.quick {
            e.quick_real_duration_s
        } else {
            e.real_duration_s
        }
    }

    /// The experiment's warm-up (see [`Experiment::warmup_ms`]), quick or not.
    pub fn warmup_ms(&self) -> u64 {
        let e = self.experiment;
        if self.quick {
            e.quick_warmup_ms
        } else {
            e.warmup_ms
        }
    }

    /// Seeds per point: 1 when quick.
    pub fn seeds(&self) -> u64 {
        if self.quick {
            1
        } else {
            self.experiment.seeds
        }
    }

    /// Simulator runs in all, for a progress bar.
    pub fn runs(&self) -> u64 {
        let e = self.experiment;
        let per_variant = match e.kind {
            Kind::Cdf(_) => e.protocols.len() as u64,
            _ => (e.curves().len() * self.clients().len()) as u64,
        };
        let variants = match e.kind {
            Kind::Sweep => 1,
            Kind::PeakPerVariant(v) => v.len() as u64,
            Kind::Cdf(spec) => spec.variants.len() as u64,
        };
        per_variant * variants * self.seeds()
    }

    /// The configuration of one run: the experiment's with the run's clients, changed by
    /// `variant` (which may scale the clients), then the run's protocol, seed, duration
    /// and the plan's CPU model.
    pub fn config(
        &self,
        variant: Option<&Variant>,
        protocol: &str,
        clients: u32,
        seed: u64,
    ) -> SimConfig {
        self.curve_config(variant, protocol, None, clients, seed)
    }

    /// [`Plan::config`] for one curve: `apply` (a [`Line`]'s change) after the variant's.
    pub fn curve_config(
        &self,
        variant: Option<&Variant>,
        protocol: &str,
        apply: Option<fn(&mut SimConfig)>,
        clients: u32,
        seed: u64,
    ) -> SimConfig {
        let e = self.experiment;
        let mut c = (e.config)();
        // Before the variant: one may scale the clients with the servers (PrompTCC Fig. 7).
        c.clients_per_dc = clients;
        if let Some(v) = variant {
            (v.apply)(&mut c);
        }
        if let Some(apply) = apply {
            apply(&mut c);
        }
        c.protocol = protocol.to_string();
        c.seed = seed;
        // The papers' workloads have no barriers or moves: none unless the experiment
        // asks (the simulator's default gives them to protocols with uniform barriers).
        c.barrier_ratio.get_or_insert(0.0);
        c.migrate_ratio.get_or_insert(0.0);
        c.duration_ms = if self.quick {
            e.quick_duration_ms
        } else {
            e.duration_ms
        };
        if let Some(cpu) = &self.cpu {
            c.cpu = cpu.clone();
        }
        let warmup = self.warmup_ms();
        if warmup > 0 {
            assert!(
                warmup < c.duration_ms,
                "the warm-up leaves some load to measure"
            );
            c.sample_warmup_ms = warmup;
        }
        c
    }

    /// Runs every protocol over the sweep; `tick` is called after each simulator run.
    pub fn run(&self, tick: &mut dyn FnMut(&str, u32)) -> Result<Vec<Curve>, String> {
        self.run_variant(None, tick)
    }

    /// [`Plan::run`] on the experiment's configuration changed by `variant`.
    pub fn run_variant(
        &self,
        variant: Option<&Variant>,
        tick: &mut dyn FnMut(&str, u32),
    ) -> Result<Vec<Curve>, String> {
        assert!(self.clients().len() <= SWEEP_POINTS_MAX, "sweep too long");
        let mut curves = Vec::new();
        for spec in self.experiment.curves() {
            let config = |clients, seed| {
                self.curve_config(variant, spec.protocol, spec.apply, clients, seed)
            };
            let mut points = Vec::new();
            for &clients in self.clients() {
                let mut results = Vec::new();
                // The clients the runs had: a variant may have scaled the sweep's count.
                let (duration, clients_run) = {
                    let c = config(clients, 1);
                    (c.duration_ms, c.clients_per_dc)
                };
                let warmup = self.warmup_ms();
                for seed in 1..=self.seeds() {
                    let mut r = run(&config(clients, seed))?;
                    if warmup > 0 {
                        steady_state(&mut r, warmup, duration);
                    }
                    r.history = Default::default();
                    results.push(r);
                    tick(spec.label, clients);
                }
                points.push(pool(clients_run, &results, duration - warmup));
            }
            curves.push(Curve {
                protocol: spec.label.to_string(),
                points,
            });
        }
        Ok(curves)
    }
}

/// Limits a run's transaction figures to the steady state: the transactions that began
/// between `warmup_ms` into the load and its end (`duration_ms`). Those still running
/// when the load ends finish in the drain phase, so a long txn counts as long (counting
/// those that *ended* in the window would leave out the ones longer than what is left of
/// it); in a closed loop as many begin as end in a window, so the rate is the same.
/// Committed and aborted counts, latency and latency by kind are recomputed from the
/// history (which must still be there); the rest of the result is left as it is.
pub fn steady_state(r: &mut SimResult, warmup_ms: u64, duration_ms: u64) {
    let t0 = causeway_sim::world::T0;
    let (from, to) = (t0 + warmup_ms * 1_000_000, t0 + duration_ms * 1_000_000);
    r.history
        .txns
        .retain(|t| (from..to).contains(&t.start_ns) && t.outcome != Outcome::Unknown);
    let committed: Vec<u64> = r
        .history
        .txns
        .iter()
        .filter(|t| t.outcome == Outcome::Committed)
        .map(|t| t.end_ns.saturating_sub(t.start_ns))
        .collect();
    r.committed = committed.len();
    r.aborted = r.history.txns.len() - committed.len();
    r.txn_latency = Summary::of(&committed);
    r.txn_latency_by_kind = causeway_sim::latency_by_kind(&r.history);
}

/// Summaries of several seeds as one: counts added, mean and percentiles weighted by
/// count (percentiles so pooled are an approximation), the largest max.
pub fn pool_summaries<'a>(parts: impl IntoIterator<Item = &'a Summary> + Clone) -> Summary {
    let n: usize = parts.clone().into_iter().map(|s| s.count).sum();
    let weighted = |f: fn(&Summary) -> f64| {
        let total: f64 = parts
            .clone()
            .into_iter()
            .map(|s| f(s) * s.count as f64)
            .sum();
        if n == 0 {
            0.0
        } else {
            total / n as f64
        }
    };
    Summary {
        count: n,
        mean_ms: weighted(|s| s.mean_ms),
        p50_ms: weighted(|s| s.p50_ms),
        p99_ms: weighted(|s| s.p99_ms),
        max_ms: parts.into_iter().map(|s| s.max_ms).fold(0.0, f64::max),
    }
}

/// Each name's summaries over the seeds, pooled ([`pool_summaries`]).
fn pool_named(results: &[SimResult]) -> BTreeMap<String, Summary> {
    let names: std::collections::BTreeSet<&String> = results
        .iter()
        .flat_map(|r| r.txn_latency_by_kind.keys())
        .collect();
    names
        .into_iter()
        .map(|name| {
            let parts = results
                .iter()
                .filter_map(|r| r.txn_latency_by_kind.get(name));
            (name.clone(), pool_summaries(parts))
        })
        .collect()
}

/// Each name's mean over the seeds' maps (a name missing from a seed counts for nothing).
fn mean_gauges<'a>(maps: impl Iterator<Item = &'a BTreeMap<String, f64>>) -> BTreeMap<String, f64> {
    let mut sums: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    for m in maps {
        for (k, v) in m {
            let e = sums.entry(k.clone()).or_insert((0.0, 0));
            e.0 += v;
            e.1 += 1;
        }
    }
    sums.into_iter()
        .map(|(k, (sum, n))| (k, sum / n as f64))
        .collect()
}

/// The CDF of each raw sample (`name@dcN` in `SimResult::samples_by_dc`), every DC and
/// seed pooled.
fn pooled_cdfs(results: &[SimResult]) -> BTreeMap<String, Vec<(f64, f64)>> {
    let mut raw: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for r in results {
        for (key, values) in &r.samples_by_dc {
            let name = key.split('@').next().unwrap_or(key);
            raw.entry(name.to_string())
                .or_default()
                .extend_from_slice(values);
        }
    }
    raw.into_iter()
        .map(|(name, mut values)| {
            values.sort_unstable();
            (name, crate::cdf::cdf_points(&values))
        })
        .collect()
}

/// Pools the seeds of one point (latency figures weighted by committed count); the
/// throughput is committed txns over `duration_ms` per seed.
pub fn pool(clients_per_dc: u32, results: &[SimResult], duration_ms: u64) -> Point {
    let committed: usize = results.iter().map(|r| r.committed).sum();
    let seconds = duration_ms as f64 / 1e3 * results.len() as f64;
    let utils: Vec<f64> = results.iter().filter_map(|r| r.cpu_utilization).collect();
    Point {
        clients_per_dc,
        committed,
        aborted: results.iter().map(|r| r.aborted).sum(),
        throughput_txn_per_s: committed as f64 / seconds.max(1e-9),
        latency: pool_summaries(results.iter().map(|r| &r.txn_latency)),
        latency_by_kind: pool_named(results),
        cpu_utilization: (!utils.is_empty())
            .then(|| utils.iter().sum::<f64>() / utils.len() as f64),
        samples: results
            .last()
            .map(|r| r.samples.clone())
            .unwrap_or_default(),
        gauges: mean_gauges(results.iter().map(|r| &r.gauges)),
        gauges_end_of_load: mean_gauges(results.iter().map(|r| &r.gauges_end_of_load)),
        cdfs: pooled_cdfs(results),
        abort_reasons: results.iter().fold(BTreeMap::new(), |mut m, r| {
            for (k, v) in &r.abort_reasons {
                *m.entry(k.clone()).or_default() += v;
            }
            m
        }),
        violations: results.iter().filter(|r| r.violation.is_some()).count(),
        unchecked: results.iter().filter(|r| !r.checked).count(),
        violation: results.iter().find_map(|r| {
            r.violation
                .as_ref()
                .map(|v| format!("seed {}: {v}", r.seed))
        }),
    }
}
