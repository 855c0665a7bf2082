//! `causeway bench`: protocols side by side in one run of the simulator, on the same
//! topology, workload and seeds, with every ratio taken against the first protocol (the
//! eventual baseline by default). Throughput is committed transactions per second of
//! virtual time from closed-loop clients, so it moves with latency, as in the papers'
//! closed-loop experiments. Every run's history still goes through the checker: a
//! protocol that violates its guarantee is reported, not measured.
//!
//! `--experiment NAME --real` runs the experiment against real local clusters instead (see
//! [`real`]); `--also-sim` adds the simulated sweep, and the plot then shows both.

mod calibrate;
mod real;

use crate::sim_cmd::{fail, parse_seeds, progress, workload_config, WorkloadArgs};
use causeway_sim::cpu::CpuModel;
use causeway_sim::{run as run_seed, FaultSel, SimResult, Summary};
use clap::Args;
use serde::Serialize;
use std::collections::BTreeMap;
use std::process::ExitCode;

/// Most protocols one bench compares.
const BENCH_PROTOCOLS_MAX: usize = 16;

#[derive(Args)]
pub struct BenchArgs {
    /// Protocols to compare, comma-separated; ratios are against the first (default:
    /// every registered protocol, the baseline first).
    #[arg(long)]
    protocols: Option<String>,
    /// Seeds to run per protocol, as A..B or N; the figures pool all of them.
    #[arg(long, default_value = "1..3")]
    seeds: String,
    #[command(flatten)]
    workload: WorkloadArgs,
    /// Write the per-protocol figures to FILE as JSON.
    #[arg(long)]
    json: Option<String>,
    /// Turn the CPU model off (pure-latency studies: throughput then moves only with
    /// round trips).
    #[arg(long)]
    no_cpu: bool,
    /// Run a named experiment (a sweep of client counts per protocol); `list` lists them,
    /// `plan` prints what the test loop requires of each one's `--quick` report.
    #[arg(long)]
    experiment: Option<String>,
    /// With --experiment: the reduced sweep (under a minute); with --calibrate: short
    /// steps (4 s real, 2 s simulated).
    #[arg(long)]
    quick: bool,
    /// Calibrate the CPU model: each protocol (--protocols, default all) on a fresh local
    /// cluster and in the simulator with the same workload; node CPU per committed txn in
    /// both, one line each, then a summary. Exit 1 if a ratio is outside 0.75-1.33.
    #[arg(long, conflicts_with = "experiment")]
    calibrate: bool,
    /// With --calibrate: fit the model's constants for every protocol together and print
    /// them with each protocol's ratio under them.
    #[arg(long, requires = "calibrate")]
    fit: bool,
    /// With --calibrate: read the protocols' figures from FILE (a --json of an earlier
    /// calibration) instead of running clusters.
    #[arg(long, requires = "calibrate")]
    calibrate_from: Option<String>,
    /// With --calibrate-from: run the simulator's side again (with the model the --cpu-*
    /// flags give) and keep the recorded real figures: a model with new inputs, refitted
    /// without new cluster runs.
    #[arg(long, requires = "calibrate_from")]
    resimulate: bool,
    /// With --experiment: write the throughput-latency plot to FILE (.svg or .png).
    #[arg(long)]
    plot: Option<String>,
    /// With --experiment: run the sweep against a fresh local `causeway up` cluster per
    /// protocol instead of the simulator (a smaller sweep: real clients share the cores).
    #[arg(long, requires = "experiment")]
    real: bool,
    /// With --real: run the simulated sweep too; one table each, one plot with both.
    #[arg(long, requires = "real")]
    also_sim: bool,
    /// With --real: clients per DC at each point, comma-separated (default: the
    /// experiment's real sweep).
    #[arg(long, value_delimiter = ',', requires = "real")]
    real_clients: Vec<u32>,
    /// With --real: seconds of load per point (default: the experiment's).
    #[arg(long, requires = "real")]
    real_duration: Option<u64>,
    /// With --real: first port of the clusters' range (DC client ports BASE+1.., node
    /// ports BASE+100..); default: a free range is found.
    #[arg(long, requires = "real")]
    real_port_base: Option<u16>,
}

/// One protocol's pooled figures.
#[derive(Debug, Serialize)]
struct Row {
    protocol: String,
    committed: usize,
    aborted: usize,
    /// Transactions the protocol refused to begin (in `aborted` too).
    #[serde(skip_serializing_if = "is_zero")]
    refused: usize,
    throughput_txn_per_s: f64,
    latency: Summary,
    samples: BTreeMap<String, Summary>,
    violations: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Pools the seeds of one protocol with the experiments' pooling (latencies weighted by
/// committed count).
fn pool(protocol: &str, clients: u32, results: &[SimResult], duration_ms: u64) -> Row {
    let p = causeway_bench::experiment::pool(clients, results, duration_ms);
    Row {
        protocol: protocol.to_string(),
        committed: p.committed,
        aborted: p.aborted,
        refused: results.iter().map(|r| r.refused).sum(),
        throughput_txn_per_s: p.throughput_txn_per_s,
        latency: p.latency,
        samples: p.samples,
        violations: p.violations,
    }
}

fn run_protocol(protocol: &str, args: &BenchArgs, seeds: (u64, u64)) -> Result<Row, String> {
    let mut base = workload_config(protocol, &args.workload, FaultSel::None, !args.no_cpu)?;
    // Throughput of the workload itself: no barriers or moves between transactions.
    base.barrier_ratio = Some(0.0);
    base.migrate_ratio = Some(0.0);
    let bar = progress(seeds.1 - seeds.0 + 1);
    bar.set_message(protocol.to_string());
    let mut results = Vec::new();
    for seed in seeds.0..=seeds.1 {
        let mut cfg = base.clone();
        cfg.seed = seed;
        let mut r = run_seed(&cfg)?;
        r.history = Default::default();
        bar.inc(1);
        results.push(r);
    }
    bar.finish_and_clear();
    Ok(pool(
        protocol,
        args.workload.clients_per_dc,
        &results,
        args.workload.duration_ms,
    ))
}

fn print_table(rows: &[Row]) {
    let base = &rows[0];
    println!(
        "{:<10} {:>10} {:>12} {:>9} {:>9} {:>9} {:>10} {:>10}",
        "protocol", "committed", "txn/s", "mean_ms", "p99_ms", "tput_x", "latency_x", "violations"
    );
    for r in rows {
        println!(
            "{:<10} {:>10} {:>12.1} {:>9.2} {:>9.2} {:>9.3} {:>10.3} {:>10}",
            r.protocol,
            r.committed,
            r.throughput_txn_per_s,
            r.latency.mean_ms,
            r.latency.p99_ms,
            r.throughput_txn_per_s / base.throughput_txn_per_s.max(1e-9),
            r.latency.mean_ms / base.latency.mean_ms.max(1e-9),
            r.violations
        );
    }
    for r in rows.iter().filter(|r| r.refused > 0) {
        println!(
            "{} refused {} transactions (a kind it does not support), counted as aborted",
            r.protocol, r.refused
        );
    }
    for r in rows.iter().filter(|r| !r.samples.is_empty()) {
        for (name, s) in &r.samples {
            let name = name.trim_end_matches("_ns");
            println!(
                "{} {name}: mean {:.2} ms, p50 {:.2} ms, p99 {:.2} ms (n={})",
                r.protocol, s.mean_ms, s.p50_ms, s.p99_ms, s.count
            );
        }
    }
}

fn list_experiments() -> ExitCode {
    for e in causeway_bench::EXPERIMENTS {
        println!("{:<26} {}", e.name, e.figure);
    }
    ExitCode::SUCCESS
}

/// `--experiment plan`: what the test loop runs of each experiment, one line each, fields
/// split by tabs: the name, the pattern of the report lines it shows, then each pattern
/// the `--quick` report must match (`QuickCheck`).
fn plan_experiments() -> ExitCode {
    for e in causeway_bench::EXPERIMENTS {
        let check = &e.quick_check;
        println!("{}\t{}\t{}", e.name, check.show, check.must.join("\t"));
    }
    ExitCode::SUCCESS
}

/// `--experiment NAME`: the sweep (simulated, real or both), its tables, JSON and plot.
fn run_experiment(name: &str, args: &BenchArgs) -> ExitCode {
    match name {
        "list" => return list_experiments(),
        "plan" => return plan_experiments(),
        _ => {}
    }
    let experiment = match causeway_bench::find(name) {
        Ok(e) => e,
        Err(e) => return fail(&e),
    };
    // Refuse a plot we could not write before minutes of sweeping, not after.
    if let Some(path) = &args.plot {
        if let Err(e) = causeway_bench::plot::check_path(std::path::Path::new(path)) {
            return fail(&e);
        }
    }
    let plan = causeway_bench::Plan {
        experiment,
        quick: args.quick,
        cpu: cpu_override(&args.workload.cpu.model(!args.no_cpu)),
    };
    if !matches!(experiment.kind, causeway_bench::Kind::Sweep) {
        return run_other_kind(&plan, args);
    }
    let mut reports = Vec::new();
    if !args.real || args.also_sim {
        match sim_report(&plan) {
            Ok(r) => reports.push(r),
            Err(e) => return fail(&e),
        }
    }
    if args.real {
        match real_report(&plan, args) {
            Ok(r) => reports.push(r),
            Err(e) => return fail(&e),
        }
    }
    for r in &reports {
        print!("{}", r.table());
    }
    write_outputs(&reports, args)
}

/// `--calibrate`: exit 0 when every protocol's ratio is within the band.
fn run_calibrate(protocols: &[&str], args: &BenchArgs) -> ExitCode {
    let options = calibrate::CalibrateOptions {
        protocols: protocols.iter().map(ToString::to_string).collect(),
        quick: args.quick,
        clients_per_dc: args.workload.clients_per_dc,
        fit: args.fit,
        from: args.calibrate_from.clone(),
        resimulate: args.resimulate,
        model: args.workload.cpu.model(true),
        json: args.json.clone(),
    };
    match calibrate::run(&options) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => fail(&e),
    }
}

/// The CPU model an experiment runs with: the command line's when it differs from the
/// defaults (a `--cores`, `--cpu-msg-ns`... flag or `--no-cpu`), else `None`: the
/// experiment's own model (e.g. `unistore-rubis` runs 1-core nodes).
fn cpu_override(given: &CpuModel) -> Option<CpuModel> {
    let defaults = CpuModel {
        enabled: true,
        ..CpuModel::default()
    };
    (*given != defaults).then(|| given.clone())
}

/// What a peak-per-variant or CDF experiment produced.
enum Outcome {
    Peaks(causeway_bench::PeaksReport),
    Cdf(causeway_bench::CdfReport),
}

impl Outcome {
    fn table(&self) -> String {
        match self {
            Outcome::Peaks(r) => r.table(),
            Outcome::Cdf(r) => r.table(),
        }
    }

    fn json(&self) -> String {
        let text = match self {
            Outcome::Peaks(r) => serde_json::to_string_pretty(r),
            Outcome::Cdf(r) => serde_json::to_string_pretty(r),
        };
        text.expect("a report encodes")
    }

    /// Writes the plot to `path` (a peaks report adds its CDF plots beside it); the
    /// files written.
    fn plot(&self, path: &std::path::Path) -> Result<Vec<std::path::PathBuf>, String> {
        match self {
            Outcome::Peaks(r) => r.plots(path),
            Outcome::Cdf(r) => r.plot(path).map(|()| vec![path.to_path_buf()]),
        }
    }

    fn violations(&self) -> usize {
        match self {
            Outcome::Peaks(r) => r.violations(),
            Outcome::Cdf(r) => r.violations(),
        }
    }
}

/// A peak-per-variant or CDF experiment (simulator only): runs, table, `--json`, `--plot`.
fn run_other_kind(plan: &causeway_bench::Plan, args: &BenchArgs) -> ExitCode {
    if args.real {
        return fail(&format!(
            "--real runs throughput-latency sweeps only; {} is not one",
            plan.experiment.name
        ));
    }
    let bar = progress(plan.runs());
    let mut tick = |p: &str, clients: u32| {
        bar.set_message(format!("{p} at {clients} clients/DC"));
        bar.inc(1);
    };
    let outcome = match plan.experiment.kind {
        causeway_bench::Kind::Cdf(_) => {
            causeway_bench::CdfReport::run(plan, &mut tick).map(Outcome::Cdf)
        }
        _ => causeway_bench::PeaksReport::run(plan, &mut tick).map(Outcome::Peaks),
    };
    bar.finish_and_clear();
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => return fail(&e),
    };
    print!("{}", outcome.table());
    write_outcome(&outcome, args)
}

/// `--json`, `--plot` and the exit code of a peak-per-variant or CDF experiment.
fn write_outcome(outcome: &Outcome, args: &BenchArgs) -> ExitCode {
    if let Some(path) = &args.json {
        if let Err(e) = std::fs::write(path, outcome.json()) {
            return fail(&format!("cannot write --json {path}: {e}"));
        }
    }
    if let Some(path) = &args.plot {
        match outcome.plot(std::path::Path::new(path)) {
            Ok(written) => {
                for p in written {
                    println!("plot: {}", p.display());
                }
            }
            Err(e) => return fail(&e),
        }
    }
    if outcome.violations() > 0 {
        eprintln!("error: a protocol violated its guarantee: its figures are not a measurement");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

/// The experiment in the simulator, with a progress bar.
fn sim_report(plan: &causeway_bench::Plan) -> Result<causeway_bench::Report, String> {
    let bar = progress(plan.runs());
    let mut tick = |p: &str, clients: u32| {
        bar.set_message(format!("{p} at {clients} clients/DC"));
        bar.inc(1);
    };
    let curves = plan.run(&mut tick)?;
    bar.finish_and_clear();
    Ok(causeway_bench::Report::new(
        plan.experiment,
        plan.quick,
        curves,
    ))
}

/// The experiment against real local clusters.
fn real_report(
    plan: &causeway_bench::Plan,
    args: &BenchArgs,
) -> Result<causeway_bench::Report, String> {
    let opts = real::RealOptions::new(
        plan,
        &args.real_clients,
        args.real_duration,
        args.real_port_base,
    )?;
    let (curves, notes) = real::run(plan, &opts)?;
    Ok(causeway_bench::Report::real(
        plan.experiment,
        plan.quick,
        curves,
        notes,
    ))
}

/// The plot's series: each report's curves; with both, labelled `(sim)` and `(real)`.
fn plot_series(reports: &[causeway_bench::Report]) -> Vec<causeway_bench::plot::Series> {
    let both = reports.len() > 1;
    reports
        .iter()
        .flat_map(|r| match (both, r.source.as_str()) {
            (true, "simulator") => r.series_labelled(" (sim)"),
            _ => r.series(),
        })
        .collect()
}

/// `--json` (one report, or `[simulator, real]` with `--also-sim`), `--plot`, and the exit
/// code (1 if a simulated protocol violated its guarantee).
fn write_outputs(reports: &[causeway_bench::Report], args: &BenchArgs) -> ExitCode {
    if let Some(path) = &args.json {
        let text = match reports {
            [one] => serde_json::to_string_pretty(one),
            all => serde_json::to_string_pretty(all),
        };
        if let Err(e) = std::fs::write(path, text.expect("a report encodes")) {
            return fail(&format!("cannot write --json {path}: {e}"));
        }
    }
    if let Some(path) = &args.plot {
        let sources: Vec<&str> = reports.iter().map(|r| r.source.as_str()).collect();
        let title = format!(
            "{}: throughput vs mean latency ({})",
            reports[0].experiment,
            sources.join(" and ")
        );
        let series = plot_series(reports);
        if let Err(e) = causeway_bench::plot::plot(std::path::Path::new(path), &title, &series) {
            return fail(&e);
        }
        println!("plot: {path}");
    }
    if reports.iter().map(|r| r.violations()).sum::<usize>() > 0 {
        eprintln!("error: a protocol violated its guarantee: its figures are not a measurement");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

pub fn run(args: BenchArgs) -> ExitCode {
    if let Some(name) = args.experiment.clone() {
        return run_experiment(&name, &args);
    }
    let all = causeway_protocols::PROTOCOLS.join(",");
    let list = args.protocols.as_deref().unwrap_or(&all);
    let protocols: Vec<&str> = list.split(',').map(str::trim).collect();
    if protocols.is_empty() || protocols.len() > BENCH_PROTOCOLS_MAX {
        return fail(&format!(
            "--protocols takes 1 to {BENCH_PROTOCOLS_MAX} names, got {}",
            protocols.len()
        ));
    }
    if let Some(p) = protocols
        .iter()
        .find(|p| !causeway_protocols::PROTOCOLS.contains(p))
    {
        return fail(&format!("unknown protocol '{p}'; known: {all}"));
    }
    if args.calibrate {
        return run_calibrate(&protocols, &args);
    }
    let seeds = match parse_seeds(&args.seeds) {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    let mut rows = Vec::new();
    for p in &protocols {
        match run_protocol(p, &args, seeds) {
            Ok(row) => rows.push(row),
            Err(e) => return fail(&e),
        }
    }
    print_table(&rows);
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&rows).expect("rows encode");
        if let Err(e) = std::fs::write(path, text) {
            return fail(&format!("cannot write --json {path}: {e}"));
        }
    }
    // Each protocol is held to its own guarantee (eventual: convergence).
    if rows.iter().any(|r| r.violations > 0) {
        eprintln!("error: a protocol violated its guarantee: its figures are not a measurement");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_cpu_flags_that_differ_from_the_defaults_override_the_experiments_model() {
        let on = CpuModel {
            enabled: true,
            ..CpuModel::default()
        };
        assert_eq!(cpu_override(&on), None);
        let one_core = CpuModel {
            cores: 1,
            ..on.clone()
        };
        assert_eq!(cpu_override(&one_core), Some(one_core.clone()));
        let off = CpuModel {
            enabled: false,
            ..on
        };
        assert_eq!(cpu_override(&off), Some(off.clone()));
    }
}
