//! `causeway load`: the load generator for a real cluster (`causeway up` or a deployment).
//!
//! Closed-loop clients, one thread and one native-client session each, spread round-robin
//! over the `--addr` list, run a workload (YCSB A/B/C or PrompTCC's read-only/write-only
//! split, see [`plan`]) for `--duration` seconds; then one table row: committed, aborted and
//! unknown transactions, committed txn/s and the latency of committed transactions (mean,
//! p50, p99, max, from merged HDR histograms). `--sweep 1,4,16` runs one row per client
//! count. A live progress line goes to stderr when it is a terminal.
//!
//! `--history FILE` records every transaction in the format `causeway check` reads. To
//! make that history complete, each run works on keys of its own (`--key-prefix`, by default
//! one named after the start time): no read can observe a write the history lacks, from an
//! earlier run or another tool. Every key is written once first (YCSB's load phase,
//! `--no-preload` skips it), and after the run every DC's copy of every key is read once
//! the DCs agree, for the convergence check. The history stops at what the checker takes
//! ([`CHECK_TXNS_MAX`] transactions): the run then ends early and says so.
//!
//! Other commands run the same driver as a library: [`drive`] takes a [`Sweep`] and returns
//! one [`Row`] per client count (`causeway bench --real` uses it against the cluster it
//! started).

mod cluster;
mod driver;
mod plan;

use causeway_check::tcc::CHECK_TXNS_MAX;
use causeway_check::{History, TxnRecord};
use causeway_client::Options;
use causeway_core::abort_reasons::{self, AbortReasons};
use clap::Args;
use driver::{Shared, Tally, WallClock, Worker};
use indicatif::{ProgressBar, ProgressStyle};
pub use plan::Mix;
use plan::{KeySpace, Planner};
use serde::Serialize;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::ScopedJoinHandle;
use std::time::{Duration, Instant};

/// Most `--addr` entries.
const ADDRS_MAX: usize = 64;
/// Most clients in one run (each is a thread and a session).
const CLIENTS_MAX: u32 = 1024;
/// Most client counts in one `--sweep`.
const SWEEP_STEPS_MAX: usize = 16;
/// Longest `--duration`, in seconds.
const DURATION_S_MAX: u64 = 3600;
/// Most `--keys` (each client shares one Zipf table of this many entries).
const KEYS_MAX: u32 = 1_000_000;
/// Most `--txn-ops` (reads of one request stay under the server's `READ_KEYS_MAX`).
const TXN_OPS_MAX: u32 = 1000;
/// Largest `--value-size`, in bytes (the history holds every value written).
const VALUE_SIZE_MAX: usize = 65_536;
/// Largest `--zipf` exponent.
const ZIPF_MAX: f64 = 5.0;
/// Longest `--key-prefix`, in bytes.
const KEY_PREFIX_LEN_MAX: usize = 256;
/// How long a client waits for one answer before the outcome is unknown.
const REQUEST_TIMEOUT_MS: u64 = 15_000;

#[derive(Args)]
pub struct LoadArgs {
    /// Client address of a DC, HOST:PORT; repeat the flag or separate by commas (one per
    /// DC); clients are spread over them round-robin.
    #[arg(long, value_delimiter = ',', required = true)]
    addr: Vec<String>,
    /// ycsb-a (50% reads), ycsb-b (95%), ycsb-c (100%) or ro-wo (each txn read-only or
    /// write-only, 90% read-only).
    #[arg(long, default_value = "ycsb-b")]
    workload: String,
    /// Number of keys.
    #[arg(long, default_value_t = 1000)]
    keys: u32,
    /// Zipf exponent of the key choice (0: uniform).
    #[arg(long, default_value_t = 0.99)]
    zipf: f64,
    /// Operations per transaction.
    #[arg(long, default_value_t = 4)]
    txn_ops: u32,
    /// Bytes per written value.
    #[arg(long, default_value_t = 100)]
    value_size: usize,
    /// Concurrent clients (closed loop, one session each).
    #[arg(long, default_value_t = 16)]
    clients: u32,
    /// Client counts to run in turn, comma-separated, one table row each.
    #[arg(long, value_delimiter = ',', conflicts_with = "clients")]
    sweep: Vec<u32>,
    /// Seconds each client count runs.
    #[arg(long, default_value_t = 10)]
    duration: u64,
    /// Record every transaction to FILE (JSON lines, for `causeway check`).
    #[arg(long)]
    history: Option<PathBuf>,
    /// Seed of the key choice (each client draws its own stream from it).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write the parameters and table rows to FILE as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Prefix of every key (default: `load-` and the start time in hex, fresh per run).
    #[arg(long)]
    key_prefix: Option<String>,
    /// Skip writing every key once before the timed run.
    #[arg(long)]
    no_preload: bool,
    /// The cluster's client password (`password` in the cluster file); default: the
    /// environment variable CAUSEWAY_PASSWORD.
    #[arg(long)]
    password: Option<String>,
    /// Connect with TLS, trusting this CA certificate file (PEM; `causeway up --tls`
    /// writes DIR/tls/ca.pem).
    #[arg(long, value_name = "CA_FILE")]
    tls_ca: Option<PathBuf>,
}

/// The validated parameters of a run.
#[derive(Clone, Debug, Serialize)]
struct Settings {
    addrs: Vec<String>,
    workload: String,
    #[serde(skip)]
    mix: Mix,
    keys: u32,
    zipf: f64,
    txn_ops: u32,
    value_size: usize,
    client_counts: Vec<u32>,
    duration_s: u64,
    seed: u64,
    key_prefix: String,
    preload: bool,
    history: Option<PathBuf>,
    #[serde(skip)]
    json: Option<PathBuf>,
    /// Prefix of the progress line (who is running the sweep).
    #[serde(skip)]
    label: String,
    /// Print the cluster and preload lines (the CLI does; a library caller does not).
    #[serde(skip)]
    verbose: bool,
    /// The client password (never in the JSON).
    #[serde(skip)]
    password: Option<String>,
    tls_ca: Option<PathBuf>,
}

/// A sweep run by another command through [`drive`]: where, what, and how long.
pub struct Sweep {
    /// Client addresses, one per DC; clients are spread over them round-robin.
    pub addrs: Vec<String>,
    pub mix: Mix,
    pub keys: u32,
    pub zipf: f64,
    pub txn_ops: u32,
    pub value_size: usize,
    /// Total clients of each step (not per DC).
    pub client_counts: Vec<u32>,
    pub duration_s: u64,
    pub seed: u64,
    /// Shown at the start of the progress line, e.g. `cure (real)`.
    pub label: String,
}

fn limit<T: PartialOrd + std::fmt::Display>(flag: &str, v: T, lo: T, hi: T) -> Result<T, String> {
    if v < lo || v > hi {
        return Err(format!(
            "{flag} {v} is out of range; fix: pass {lo} to {hi}"
        ));
    }
    Ok(v)
}

fn default_prefix() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    format!("load-{ms:x}-")
}

impl Settings {
    fn from_args(a: &LoadArgs) -> Result<Settings, String> {
        let addrs: Vec<String> = a.addr.iter().map(|s| s.trim().to_string()).collect();
        if addrs.len() > ADDRS_MAX || addrs.iter().any(String::is_empty) {
            return Err(format!(
                "--addr takes 1 to {ADDRS_MAX} HOST:PORT addresses, none empty"
            ));
        }
        let client_counts = if a.sweep.is_empty() {
            vec![a.clients]
        } else {
            a.sweep.clone()
        };
        if client_counts.len() > SWEEP_STEPS_MAX {
            return Err(format!(
                "--sweep takes at most {SWEEP_STEPS_MAX} client counts"
            ));
        }
        let flag = if a.sweep.is_empty() {
            "--clients"
        } else {
            "--sweep"
        };
        for n in &client_counts {
            limit(flag, *n, 1, CLIENTS_MAX)?;
        }
        let key_prefix = a.key_prefix.clone().unwrap_or_else(default_prefix);
        limit(
            "--key-prefix length",
            key_prefix.len(),
            0,
            KEY_PREFIX_LEN_MAX,
        )?;
        if !a.zipf.is_finite() {
            return Err("--zipf must be a number; fix: pass 0 to 5".into());
        }
        Ok(Settings {
            addrs,
            workload: a.workload.clone(),
            mix: Mix::parse(&a.workload)?,
            keys: limit("--keys", a.keys, 1, KEYS_MAX)?,
            zipf: limit("--zipf", a.zipf, 0.0, ZIPF_MAX)?,
            txn_ops: limit("--txn-ops", a.txn_ops, 1, TXN_OPS_MAX)?,
            value_size: limit("--value-size", a.value_size, 0, VALUE_SIZE_MAX)?,
            client_counts,
            duration_s: limit("--duration", a.duration, 1, DURATION_S_MAX)?,
            seed: a.seed,
            key_prefix,
            preload: !a.no_preload,
            history: a.history.clone(),
            json: a.json.clone(),
            label: String::new(),
            verbose: true,
            password: a
                .password
                .clone()
                .or_else(|| std::env::var("CAUSEWAY_PASSWORD").ok()),
            tls_ca: a.tls_ca.clone(),
        })
    }

    /// The settings of a library sweep, with the CLI's bounds (the error names the
    /// field, since there is no flag).
    fn from_sweep(w: Sweep) -> Result<Settings, String> {
        if w.addrs.is_empty() || w.addrs.len() > ADDRS_MAX {
            return Err(format!("a sweep takes 1 to {ADDRS_MAX} addresses"));
        }
        limit("client counts", w.client_counts.len(), 1, SWEEP_STEPS_MAX)?;
        for n in &w.client_counts {
            limit("clients", *n, 1, CLIENTS_MAX)?;
        }
        Ok(Settings {
            addrs: w.addrs,
            workload: format!("{:?}", w.mix),
            mix: w.mix,
            keys: limit("keys", w.keys, 1, KEYS_MAX)?,
            zipf: limit("zipf", w.zipf, 0.0, ZIPF_MAX)?,
            txn_ops: limit("txn ops", w.txn_ops, 1, TXN_OPS_MAX)?,
            value_size: limit("value size", w.value_size, 0, VALUE_SIZE_MAX)?,
            client_counts: w.client_counts,
            duration_s: limit("duration", w.duration_s, 1, DURATION_S_MAX)?,
            seed: w.seed,
            key_prefix: default_prefix(),
            preload: true,
            history: None,
            json: None,
            label: w.label,
            verbose: false,
            password: None,
            tls_ca: None,
        })
    }
}

/// One table row: a client count's results (latencies of committed transactions).
#[derive(Debug, Serialize)]
pub struct Row {
    pub clients: u32,
    pub committed: u64,
    pub aborted: u64,
    pub unknown: u64,
    pub seconds: f64,
    pub txn_per_s: f64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Row {
    fn new(clients: u32, t: &Tally, elapsed: Duration) -> Row {
        let seconds = elapsed.as_secs_f64();
        let ms = |us: u64| us as f64 / 1e3;
        Row {
            clients,
            committed: t.committed,
            aborted: t.aborted,
            unknown: t.unknown,
            seconds,
            txn_per_s: t.committed as f64 / seconds.max(1e-9),
            mean_ms: t.latency_us.mean() / 1e3,
            p50_ms: ms(t.latency_us.value_at_quantile(0.5)),
            p99_ms: ms(t.latency_us.value_at_quantile(0.99)),
            max_ms: ms(t.latency_us.max()),
        }
    }
}

const HEADER: &str =
    "clients  committed  aborted  unknown      txn/s   mean_ms    p50_ms    p99_ms    max_ms";

fn print_row(r: &Row) {
    println!(
        "{:>7} {:>10} {:>8} {:>8} {:>10.1} {:>9.2} {:>9.2} {:>9.2} {:>9.2}",
        r.clients,
        r.committed,
        r.aborted,
        r.unknown,
        r.txn_per_s,
        r.mean_ms,
        r.p50_ms,
        r.p99_ms,
        r.max_ms
    );
}

/// What every client of a run shares besides [`Shared`].
struct RunCtx {
    settings: Settings,
    endpoints: cluster::Endpoints,
    options: Options,
    space: Arc<KeySpace>,
    clock: Arc<WallClock>,
}

impl RunCtx {
    /// Client `i` of sweep step `step`, on address `i mod n`.
    fn worker(&self, name: String, i: usize) -> Worker {
        let (addr, dc, _) = &self.endpoints.addrs[i % self.endpoints.addrs.len()];
        Worker {
            name,
            addr: addr.clone(),
            dc: *dc,
            options: self.options.clone(),
            space: self.space.clone(),
            clock: self.clock.clone(),
            record: self.settings.history.is_some(),
            writes: 0,
        }
    }

    fn planner(&self, step: usize, i: usize) -> Planner {
        let s = &self.settings;
        let stream = ((step as u64) << 32) | i as u64;
        Planner::new(self.space.clone(), s.mix, s.txn_ops, s.seed, stream)
    }
}

/// Updates the progress line once a second until every client finished.
fn show_progress(
    handles: &[ScopedJoinHandle<'_, Tally>],
    shared: &Shared,
    label: &str,
    clients: u32,
) {
    let bar = if std::io::stderr().is_terminal() {
        let bar = ProgressBar::new_spinner();
        bar.set_style(ProgressStyle::with_template("{msg}").expect("template"));
        bar
    } else {
        ProgressBar::hidden()
    };
    let started = Instant::now();
    let mut shown = Instant::now();
    while !handles.iter().all(|h| h.is_finished()) {
        std::thread::sleep(Duration::from_millis(50));
        if shown.elapsed() >= Duration::from_secs(1) {
            shown = Instant::now();
            let secs = started.elapsed().as_secs_f64();
            let committed = shared.committed.load(Ordering::Relaxed);
            bar.set_message(format!(
                "{label}{clients} clients  {secs:>5.0} s  {committed} committed  {:.0} txn/s",
                committed as f64 / secs
            ));
        }
    }
    bar.finish_and_clear();
}

/// Runs `clients` closed-loop clients for the duration; returns their merged tally and
/// how long the step took (until the last client finished its last transaction).
fn run_step(ctx: &RunCtx, step: usize, clients: u32, shared: &Shared) -> (Tally, Duration) {
    let started = Instant::now();
    let deadline = started + Duration::from_secs(ctx.settings.duration_s);
    let tallies: Vec<Tally> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..clients as usize)
            .map(|i| {
                let worker = ctx.worker(format!("s{step}c{i}"), i);
                let planner = ctx.planner(step, i);
                s.spawn(move || worker.run(planner, deadline, shared))
            })
            .collect();
        let label = match ctx.settings.label.as_str() {
            "" => String::new(),
            l => format!("{l}: "),
        };
        show_progress(&handles, shared, &label, clients);
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    let mut t = Tally::new();
                    t.errors.push("a client thread panicked".into());
                    t
                })
            })
            .collect()
    });
    let elapsed = started.elapsed();
    let mut total = Tally::new();
    tallies.into_iter().for_each(|t| total.merge(t));
    (total, elapsed)
}

/// The history: every recorded transaction by start time, and the final reads.
fn write_history(
    ctx: &RunCtx,
    path: &std::path::Path,
    mut txns: Vec<TxnRecord>,
) -> Result<(), String> {
    txns.sort_by_key(|t| (t.start_ns, t.id));
    let finals = match cluster::final_reads(&ctx.endpoints.one_per_dc(), &ctx.space, &ctx.options) {
        Ok((finals, true)) => finals,
        Ok((finals, false)) => {
            eprintln!("warning: the DCs still disagree on some key after the run; the history records what each DC read");
            finals
        }
        // The txns are still worth checking; only the convergence check loses its input.
        Err(e) => {
            eprintln!("warning: {e}");
            Vec::new()
        }
    };
    let history = History {
        txns,
        finals,
        ..History::default()
    };
    crate::sim_cmd::write_history(&path.to_string_lossy(), &history)?;
    println!(
        "history: {} txns and {} final reads in {} (check it: causeway check --guarantee tcc --history {})",
        history.txns.len(),
        history.finals.len(),
        path.display(),
        path.display()
    );
    Ok(())
}

fn write_json(settings: &Settings, rows: &[Row], path: &std::path::Path) -> Result<(), String> {
    let doc = serde_json::json!({ "settings": settings, "rows": rows });
    let text = serde_json::to_string_pretty(&doc).expect("json");
    std::fs::write(path, text).map_err(|e| format!("cannot write --json {}: {e}", path.display()))
}

/// Connects, preloads, and builds what the clients share.
fn prepare(settings: Settings) -> Result<(RunCtx, Tally), String> {
    let options = Options {
        request_timeout_ms: REQUEST_TIMEOUT_MS,
        password: settings.password.clone().map(Into::into),
        tls_ca_file: settings.tls_ca.clone(),
        ..Options::default()
    };
    let endpoints = cluster::probe(&settings.addrs, &options)?;
    let options = Options {
        cluster: Some(endpoints.cluster.clone()),
        ..options
    };
    let space = Arc::new(KeySpace::new(
        settings.key_prefix.clone(),
        settings.keys,
        settings.zipf,
        settings.value_size,
    ));
    let ctx = RunCtx {
        settings,
        endpoints,
        options,
        space,
        clock: Arc::new(WallClock::new()),
    };
    if ctx.settings.verbose {
        describe(&ctx);
    }
    let mut preloaded = Tally::new();
    if ctx.settings.preload {
        let began = Instant::now();
        preloaded = cluster::preload(&mut ctx.worker("pre".into(), 0))?;
        if ctx.settings.verbose {
            println!(
                "preloaded {} keys in {} txns ({:.1} s)",
                ctx.settings.keys,
                preloaded.committed,
                began.elapsed().as_secs_f64()
            );
        }
    }
    Ok((ctx, preloaded))
}

/// The line naming the cluster and the workload.
fn describe(ctx: &RunCtx) {
    let dcs: Vec<String> = ctx
        .endpoints
        .addrs
        .iter()
        .map(|(a, _, d)| format!("{d}={a}"))
        .collect();
    println!(
        "cluster '{}' ({}), {}; workload {}, {} keys {}k0.., zipf {}, {} ops/txn, {} B values, {} s per client count",
        ctx.endpoints.cluster,
        ctx.endpoints.protocol,
        dcs.join(" "),
        ctx.settings.workload,
        ctx.settings.keys,
        ctx.settings.key_prefix,
        ctx.settings.zipf,
        ctx.settings.txn_ops,
        ctx.settings.value_size,
        ctx.settings.duration_s
    );
}

pub fn run(args: LoadArgs) -> ExitCode {
    let settings = match Settings::from_args(&args) {
        Ok(s) => s,
        Err(e) => return crate::sim_cmd::fail(&e),
    };
    let (ctx, preloaded) = match prepare(settings) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut out = Swept {
        rows: Vec::new(),
        records: preloaded.records,
        errors: Vec::new(),
        abort_reasons: AbortReasons::new(),
    };
    println!("{HEADER}");
    sweep(&ctx, &mut out, &mut print_row);
    if let Some(line) = abort_reasons::summary_line(&out.abort_reasons) {
        println!("{line}");
    }
    finish(&ctx, &out.rows, out.records, out.errors)
}

/// What a sweep produced: its rows, the recorded transactions, client errors and why
/// transactions aborted.
struct Swept {
    rows: Vec<Row>,
    records: Vec<TxnRecord>,
    errors: Vec<String>,
    abort_reasons: AbortReasons,
}

/// Runs every client count in turn, calling `on_row` after each.
fn sweep(ctx: &RunCtx, out: &mut Swept, on_row: &mut dyn FnMut(&Row)) {
    let slots = CHECK_TXNS_MAX.saturating_sub(out.records.len()) as u64;
    let shared = Shared::new(ctx.settings.history.is_some().then_some(slots));
    for (step, clients) in ctx.settings.client_counts.iter().enumerate() {
        shared.committed.store(0, Ordering::Relaxed);
        let (tally, elapsed) = run_step(ctx, step, *clients, &shared);
        let row = Row::new(*clients, &tally, elapsed);
        on_row(&row);
        out.rows.push(row);
        out.records.extend(tally.records);
        out.errors.extend(tally.errors);
        abort_reasons::merge(&mut out.abort_reasons, &tally.abort_reasons);
        if shared.history_full.load(Ordering::Relaxed) {
            println!("note: the history reached {CHECK_TXNS_MAX} txns, the most causeway check takes, so the run stopped early; fix: a shorter --duration, fewer --clients, or no --history");
            break;
        }
    }
}

/// The driver as a library: connects to `w.addrs`, writes every key once, runs each client
/// count for the duration and returns one row per count; an error if a client failed
/// (a lost cluster, say), since its rows would then not measure the cluster.
pub fn drive(w: Sweep) -> Result<Vec<Row>, String> {
    drive_observed(w, &mut |_| {})
}

/// [`drive`], calling `on_row` as each client count's step ends (the next one starts
/// right after it returns).
pub fn drive_observed(w: Sweep, on_row: &mut dyn FnMut(&Row)) -> Result<Vec<Row>, String> {
    let (ctx, preloaded) = prepare(Settings::from_sweep(w)?)?;
    let mut out = Swept {
        rows: Vec::new(),
        records: preloaded.records,
        errors: Vec::new(),
        abort_reasons: AbortReasons::new(),
    };
    sweep(&ctx, &mut out, on_row);
    out.errors.dedup();
    match out.errors.first() {
        None => Ok(out.rows),
        Some(e) => Err(format!("{e} ({} client errors)", out.errors.len())),
    }
}

/// Writes the history and the JSON, reports client errors; the exit code.
fn finish(
    ctx: &RunCtx,
    rows: &[Row],
    records: Vec<TxnRecord>,
    mut errors: Vec<String>,
) -> ExitCode {
    if let Some(path) = &ctx.settings.history {
        if let Err(e) = write_history(ctx, path, records) {
            errors.push(e);
        }
    }
    if let Some(path) = &ctx.settings.json {
        if let Err(e) = write_json(&ctx.settings, rows, path) {
            errors.push(e);
        }
    }
    errors.dedup();
    for e in &errors {
        eprintln!("error: {e}");
    }
    if errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        load: LoadArgs,
    }

    fn settings(flags: &str) -> Result<Settings, String> {
        let argv = std::iter::once("load").chain(flags.split_whitespace());
        let cli = Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
        Settings::from_args(&cli.load)
    }

    #[test]
    fn addresses_and_sweeps_take_commas_or_repeats() {
        let s = settings("--addr a:1,b:2 --addr c:3 --sweep 1,4,16").unwrap();
        assert_eq!(s.addrs, ["a:1", "b:2", "c:3"]);
        assert_eq!(s.client_counts, [1, 4, 16]);
        let s = settings("--addr a:1").unwrap();
        assert_eq!(
            (s.client_counts.clone(), s.duration_s, s.keys),
            (vec![16], 10, 1000)
        );
        assert!(s.key_prefix.starts_with("load-") && s.preload);
        assert!(
            settings("--addr a:1 --clients 4 --sweep 1,2").is_err(),
            "both"
        );
    }

    #[test]
    fn every_input_has_a_limit_and_the_error_names_the_flag_and_the_fix() {
        for (flags, flag) in [
            ("--clients 0", "--clients"),
            ("--clients 5000", "--clients"),
            ("--sweep 1,0", "--sweep"),
            ("--duration 0", "--duration"),
            ("--duration 100000", "--duration"),
            ("--keys 0", "--keys"),
            ("--keys 2000000", "--keys"),
            ("--zipf 9", "--zipf"),
            ("--txn-ops 0", "--txn-ops"),
            ("--value-size 100000", "--value-size"),
            ("--workload tpcc", "--workload"),
        ] {
            let e = settings(&format!("--addr a:1 {flags}")).unwrap_err();
            assert!(e.contains(flag), "{flags}: {e}");
            assert!(e.contains("fix") || e.contains("use "), "{flags}: {e}");
        }
        let many = vec!["1"; SWEEP_STEPS_MAX + 1].join(",");
        assert!(settings(&format!("--addr a:1 --sweep {many}")).is_err());
    }

    #[test]
    fn rows_report_throughput_and_latency_in_ms() {
        let mut t = Tally::new();
        t.committed = 300;
        for us in [1000, 2000, 3000] {
            t.latency_us.record(us).unwrap();
        }
        let r = Row::new(4, &t, Duration::from_secs(3));
        assert_eq!((r.clients, r.committed), (4, 300));
        assert!((r.txn_per_s - 100.0).abs() < 1e-9);
        assert!((r.mean_ms - 2.0).abs() < 0.01 && (r.max_ms - 3.0).abs() < 0.01);
        assert!((r.p50_ms - 2.0).abs() < 0.01 && (r.p99_ms - 3.0).abs() < 0.01);
    }
}
