//! `causeway sim`: runs a protocol in the simulator over a range of seeds, prints each
//! failing seed with its counterexample and one summary line, exits 1 on any violation.

use causeway_core::abort_reasons;
use causeway_sim::cpu::CpuModel;
use causeway_sim::{run as run_seed, FaultSel, ObjectMix, SimConfig, SimResult, WorkloadFamily};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::{BufWriter, IsTerminal, Write};
use std::process::ExitCode;

#[derive(Args)]
pub struct SimArgs {
    /// Protocol to run (eventual, cure, ...).
    #[arg(long, default_value = "cure")]
    protocol: String,
    /// Seeds to run, as A..B (inclusive) or a single number.
    #[arg(long, default_value = "1..10")]
    seeds: String,
    /// A deliberately broken variant of the protocol (see `--mutation list`).
    #[arg(long)]
    mutation: Option<String>,
    /// Print the runs the test loop makes (`scripts/test`), as each protocol declares
    /// them, one `pass|caught` line of `sim` arguments each, and run nothing: of every
    /// protocol, or of the comma-separated ones named.
    #[arg(long, value_name = "all|P,P..", num_args = 0..=1, default_missing_value = "all")]
    plan: Option<String>,
    /// With --plan: only the fast loop's runs (`scripts/test --quick`).
    #[arg(long, requires = "plan")]
    quick: bool,
    #[command(flatten)]
    pub(crate) workload: WorkloadArgs,
    /// Faults: none, partitions, crashes, skew, slow, dc-failure or all (each seed a random
    /// subset of those); or alone: long-outage, long-outage-lossy (one DC cut off for most
    /// of the run) or slow-links (links between nodes of a DC slowed for a while).
    #[arg(long, default_value = "none")]
    faults: String,
    /// Write a history to FILE as JSON lines: the first failing seed's, else the last seed's.
    #[arg(long)]
    history: Option<String>,
    /// Write per-seed results and the summary to FILE as JSON.
    #[arg(long)]
    json: Option<String>,
    /// Print the trace hash of each seed (same seed, same hash).
    #[arg(long)]
    trace_hash: bool,
    /// Check against this guarantee (convergence, tcc, por, pc-psi) instead of the protocol's
    /// own; `--protocol eventual --guarantee tcc` shows the baseline violating TCC.
    /// unistore's own is por (TCC plus conflict ordering of strong transactions under
    /// --conflicts).
    #[arg(long)]
    guarantee: Option<String>,
    /// Skip the machines' invariant checks after every input (on by default), e.g. to
    /// see whether the history checker alone catches a mutation.
    #[arg(long)]
    no_invariants: bool,
    /// Charge CPU time per input (the CPU model; see --cores, --cpu-msg-ns ...).
    #[arg(long)]
    cpu: bool,
    /// Fraction of committed transactions followed by a uniform barrier (default: 0.05
    /// for protocols with uniform barriers, e.g. unistore; others take only 0).
    #[arg(long)]
    barrier_ratio: Option<f64>,
    /// Fraction of committed transactions after which the client moves to another DC
    /// (token, barrier, attach on a new session there; default: 0.02 for protocols with
    /// uniform barriers, others take only 0).
    #[arg(long)]
    migrate_ratio: Option<f64>,
    /// DC failures the protocol tolerates (unistore's `f`; default (dcs - 1) / 2). The
    /// dc-failure fault then fails up to that many DCs.
    #[arg(long = "f", value_name = "N")]
    f: Option<usize>,
    /// A setting of the protocol's section, as `causeway up --set` (`--set entries=8
    /// --set compression=temporal` for occult); repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// A fixed clock offset per DC in ms, comma-separated (`0,22`: DC 1 runs 22 ms ahead),
    /// added to any drawn skew.
    #[arg(long, value_name = "MS,MS..", value_delimiter = ',')]
    dc_clock_offsets_ms: Vec<f64>,
    /// Replace a node's durable records with its checkpoint once this many accumulate
    /// (log compaction; 0: never). Lower it so short runs restart from checkpoints.
    #[arg(long, default_value_t = causeway_sim::config::CHECKPOINT_RECORDS_DEFAULT, value_name = "N")]
    checkpoint_records: usize,
}

/// Topology and workload options shared by `sim` and `bench`.
#[derive(Args, Clone)]
pub struct WorkloadArgs {
    /// Data centers.
    #[arg(long, default_value_t = 3)]
    pub dcs: u16,
    /// Server nodes per DC (partitions are spread over them).
    #[arg(long, default_value_t = 2)]
    pub nodes_per_dc: u32,
    /// Partitions (shards) of the key space.
    #[arg(long, default_value_t = 4)]
    pub partitions: u32,
    /// DCs holding each partition (1..=dcs; default: dcs, full replication). Protocols
    /// that need full replication refuse a smaller factor.
    #[arg(long, visible_alias = "replication", value_name = "R")]
    pub replication_factor: Option<u16>,
    /// Closed-loop clients per DC, each one session.
    #[arg(long, default_value_t = 4)]
    pub clients_per_dc: u32,
    /// Transaction generator: custom (driven by --read-ratio, --objects and the kind
    /// ratios), ycsb-a, ycsb-b, ycsb-c (LWW registers, 50/95/100% reads) or rubis (the
    /// RUBiS bidding mix, with strong registerUser, storeBuyNow, storeBid, closeAuction).
    #[arg(long, default_value = "custom")]
    pub workload: String,
    /// Distinct keys the workload draws from.
    #[arg(long, default_value_t = 50)]
    pub keys: u32,
    /// Zipf exponent of key draws (default: 0.99 for ycsb-*, else 0.8). With few --keys
    /// or a high --zipf, strong transactions contend (conflict) on hot keys.
    #[arg(long)]
    pub zipf: Option<f64>,
    /// Fraction of operations that read, in mixed transactions.
    #[arg(long, default_value_t = 0.5)]
    pub read_ratio: f64,
    /// Fraction of transactions that are strong (a protocol without strong transactions
    /// refuses them: counted as refused and aborted). A strong update reads its key
    /// first (read-modify-write); contend with e.g. --keys 10 --zipf 1.2 (custom only).
    #[arg(long, default_value_t = 0.0)]
    pub strong_ratio: f64,
    /// Which strong transactions conflict, for the por check: default (ad-hoc: a common
    /// written key, or one reads what the other writes), rubis (RUBiS's declared pairs),
    /// or rules 'TYPE TYPE PATTERN; ...' (TYPE a transaction label such as custom or
    /// storeBid; PATTERN '/'-separated segments, '*' any, '{}' the captured object, e.g.
    /// 'storeBid closeAuction items/{}/*'). Default: rubis under --workload rubis, else
    /// default.
    #[arg(long, value_name = "default|rubis|RULES")]
    pub conflicts: Option<String>,
    /// Fraction of transactions that only read.
    #[arg(long, default_value_t = 0.0)]
    pub read_only_ratio: f64,
    /// Fraction of transactions that only update.
    #[arg(long, default_value_t = 0.0)]
    pub write_only_ratio: f64,
    /// Operations per transaction.
    #[arg(long, default_value_t = 4)]
    pub txn_ops: u32,
    /// Pad register values to this many bytes (0: short unique values).
    #[arg(long, default_value_t = 0)]
    pub value_bytes: u32,
    /// Fraction of a transaction's keys homed at another DC (key index modulo --dcs)
    /// instead of the client's own; 0 draws over all keys.
    #[arg(long, default_value_t = 0.0)]
    pub remote_ratio: f64,
    /// Under partial replication, the fraction of transactions that are local-DC (touch
    /// only partitions the client's DC replicates); the others are multi-DC (partitions
    /// drawn from all). No effect under full replication (custom and ycsb-* only).
    #[arg(long, default_value_t = 1.0, value_name = "X")]
    pub local_dc_ratio: f64,
    /// Each transaction's keys come from N distinct partitions (0: off), Zipf within a
    /// partition; ycsb-* transactions then read first, all in one request, then write
    /// (PaRiS: --workload ycsb-b --txn-ops 20 --partitions-per-txn 4 is 19 reads and 1
    /// write over 4 partitions).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub partitions_per_txn: u32,
    /// Send a transaction's consecutive reads as one request, as `causeway load` does (a
    /// key drawn twice is then asked twice in one request)
    #[arg(long)]
    pub merge_reads: bool,
    /// RUBiS database size: 100 x N users, 500 x N items (--workload rubis).
    #[arg(long, default_value_t = 1)]
    pub rubis_scale: u32,
    /// Object type on keys: lww, counter, set, mvreg, hash, list, zset, mixed (key by
    /// key, each of the first six), strings (mixed with registers
    /// that count: SET of integers and INCRBY, as Redis strings), or retype (mixed, where a
    /// few updates DEL a key and write it with another type, or DEL such a write).
    #[arg(long, default_value = "mixed")]
    pub objects: String,
    /// Length of the fault phase in virtual milliseconds.
    #[arg(long, default_value_t = 3000)]
    pub duration_ms: u64,
    #[command(flatten)]
    pub cpu: CpuArgs,
}

/// The CPU model's settings (on with `sim --cpu`, on by default in `bench`).
#[derive(Args, Clone)]
pub struct CpuArgs {
    /// Cores per node (CPU model).
    #[arg(long, default_value_t = CpuModel::default().cores)]
    pub cores: u32,
    /// Fixed cost of handling one message from another node, in ns (CPU model).
    #[arg(long, default_value_t = CpuModel::default().msg_ns)]
    pub cpu_msg_ns: u64,
    /// Fixed cost of one timer of a node (replication, stabilization), in ns (CPU model).
    #[arg(long, default_value_t = CpuModel::default().timer_ns)]
    pub cpu_timer_ns: u64,
    /// Fixed cost of one durability notice (records on disk), in ns (CPU model).
    #[arg(long, default_value_t = CpuModel::default().persist_ns)]
    pub cpu_persist_ns: u64,
    /// Fixed cost of one message into or out of a client session, charged on the node
    /// hosting the session, in ns (CPU model).
    #[arg(long, default_value_t = CpuModel::default().session_ns)]
    pub cpu_session_ns: u64,
    /// Cost per encoded byte of a message, in ns (CPU model).
    #[arg(long, default_value_t = CpuModel::default().byte_ns)]
    pub cpu_byte_ns: u64,
    /// Cost per unit of work the machine reports (keys, effects, entries), in ns.
    #[arg(long, default_value_t = CpuModel::default().op_ns)]
    pub cpu_op_ns: u64,
    /// Extra cost of an input that wakes an idle node (every core idle for the wake gap),
    /// in ns (CPU model).
    #[arg(long, default_value_t = CpuModel::default().wake_ns)]
    pub cpu_wake_ns: u64,
    /// Idle time of every core after which an arriving input counts as a wake, in ns.
    #[arg(long, default_value_t = CpuModel::default().wake_gap_ns)]
    pub cpu_wake_gap_ns: u64,
}

impl CpuArgs {
    pub fn model(&self, enabled: bool) -> CpuModel {
        CpuModel {
            enabled,
            cores: self.cores,
            msg_ns: self.cpu_msg_ns,
            timer_ns: self.cpu_timer_ns,
            persist_ns: self.cpu_persist_ns,
            session_ns: self.cpu_session_ns,
            byte_ns: self.cpu_byte_ns,
            op_ns: self.cpu_op_ns,
            wake_ns: self.cpu_wake_ns,
            wake_gap_ns: self.cpu_wake_gap_ns,
            host_nodes: CpuModel::default().host_nodes,
        }
    }
}

pub(crate) fn parse_seeds(text: &str) -> Result<(u64, u64), String> {
    let bad = || format!("--seeds must be A..B or N, not '{text}'");
    let (a, b) = match text.split_once("..") {
        Some((a, b)) => (
            a.parse().map_err(|_| bad())?,
            b.trim_start_matches('=').parse().map_err(|_| bad())?,
        ),
        None => {
            let n = text.parse().map_err(|_| bad())?;
            (n, n)
        }
    };
    if a > b {
        return Err(format!("--seeds {text}: the first seed is after the last"));
    }
    Ok((a, b))
}

/// The simulator configuration of `protocol` under the workload options.
pub(crate) fn workload_config(
    protocol: &str,
    args: &WorkloadArgs,
    faults: FaultSel,
    cpu: bool,
) -> Result<SimConfig, String> {
    let workload = WorkloadFamily::parse(&args.workload)?;
    let c = SimConfig {
        protocol: protocol.to_string(),
        dcs: args.dcs,
        nodes_per_dc: args.nodes_per_dc,
        partitions: args.partitions,
        replication_factor: args.replication_factor,
        clients_per_dc: args.clients_per_dc,
        keys: args.keys,
        zipf: args.zipf.unwrap_or(workload.default_zipf()),
        read_ratio: args.read_ratio,
        strong_ratio: args.strong_ratio,
        read_only_ratio: args.read_only_ratio,
        write_only_ratio: args.write_only_ratio,
        txn_ops: args.txn_ops,
        objects: ObjectMix::parse(&args.objects)?,
        workload,
        value_bytes: args.value_bytes,
        remote_ratio: args.remote_ratio,
        local_dc_ratio: args.local_dc_ratio,
        partitions_per_txn: args.partitions_per_txn,
        merge_reads: args.merge_reads,
        conflicts: args.conflicts.clone(),
        rubis_scale: args.rubis_scale,
        duration_ms: args.duration_ms,
        faults,
        cpu: args.cpu.model(cpu),
        ..SimConfig::default()
    };
    c.validate()?;
    Ok(c)
}

pub(crate) fn config(args: &SimArgs) -> Result<SimConfig, String> {
    let faults = FaultSel::parse(&args.faults)?;
    let mut c = workload_config(&args.protocol, &args.workload, faults, args.cpu)?;
    c.params.mutation = args.mutation.clone();
    c.guarantee = args
        .guarantee
        .as_deref()
        .map(causeway_protocols::Guarantee::parse)
        .transpose()?;
    c.check_invariants = !args.no_invariants;
    c.barrier_ratio = args.barrier_ratio;
    c.migrate_ratio = args.migrate_ratio;
    if let Some(f) = args.f {
        c.section = section_with_f(&args.protocol, &c.section, f)?;
    }
    for setting in &args.set {
        let (key, value) = crate::up_cmd::parse_setting(setting)?;
        let value = serde_json::to_value(value).map_err(|e| format!("--set {setting}: {e}"))?;
        c.section[key.as_str()] = value;
    }
    if args
        .dc_clock_offsets_ms
        .iter()
        .any(|ms| !ms.is_finite() || ms.abs() > 3.6e6)
    {
        return Err("--dc-clock-offsets-ms: each offset must be within an hour".into());
    }
    c.dc_clock_offsets_ms = args.dc_clock_offsets_ms.clone();
    c.checkpoint_records = args.checkpoint_records;
    c.validate()?;
    c.section = section_with_conflicts(&args.protocol, &c.section, &c)?;
    Ok(c)
}

/// The protocol's section with the run's conflict relation (`--conflicts`, or RUBiS's
/// under `--workload rubis`) when the protocol enforces one (UniStore's certifier), so
/// the certifier and the checker use the same relation; unchanged otherwise.
fn section_with_conflicts(
    protocol: &str,
    section: &serde_json::Value,
    c: &SimConfig,
) -> Result<serde_json::Value, String> {
    let mut merged = match section {
        serde_json::Value::Object(m) => m.clone(),
        _ => serde_json::Map::new(),
    };
    if merged.contains_key("conflicts") {
        return Ok(section.clone());
    }
    merged.insert(
        "conflicts".into(),
        c.conflict_relation()?.to_string().into(),
    );
    let merged = serde_json::Value::Object(merged);
    let entry = causeway_protocols::entry(protocol)?;
    match entry.check_section(&merged) {
        Ok(()) => Ok(merged),
        Err(_) => Ok(section.clone()), // the protocol has no conflict relation
    }
}

/// The protocol's config section with `f` set, or an error if the protocol has no `f`.
fn section_with_f(
    protocol: &str,
    section: &serde_json::Value,
    f: usize,
) -> Result<serde_json::Value, String> {
    let mut merged = match section {
        serde_json::Value::Object(m) => m.clone(),
        _ => serde_json::Map::new(),
    };
    merged.insert("f".into(), f.into());
    let merged = serde_json::Value::Object(merged);
    let entry = causeway_protocols::entry(protocol)?;
    entry.check_section(&merged).map_err(|e| {
        format!("--f: protocol {protocol} has no tolerated DC failures to set ({e})")
    })?;
    Ok(merged)
}

#[cfg(test)]
impl SimArgs {
    /// The seeds asked for, as written (`A..B` or `N`).
    pub(crate) fn seeds(&self) -> &str {
        &self.seeds
    }
}

pub(crate) fn progress(total: u64) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} seeds {elapsed} eta {eta} {msg}")
            .expect("template"),
    );
    // Redrawn on its own too: a seed of a long run takes seconds.
    bar.enable_steady_tick(std::time::Duration::from_millis(250));
    bar
}

pub fn run(args: SimArgs) -> ExitCode {
    if let Some(selection) = &args.plan {
        return crate::sim_plan::print(selection, args.quick);
    }
    if args.mutation.as_deref() == Some("list") {
        println!(
            "{}",
            causeway_protocols::mutations(&args.protocol).join("\n")
        );
        return ExitCode::SUCCESS;
    }
    let (first, last) = match parse_seeds(&args.seeds) {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    let base = match config(&args) {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    let bar = progress(last - first + 1);
    let mut results = Vec::new();
    let mut kept: Option<causeway_check::History> = None;
    let mut violations = 0;
    for seed in first..=last {
        let mut cfg = base.clone();
        cfg.seed = seed;
        let mut result = match run_seed(&cfg) {
            Ok(r) => r,
            Err(e) => return fail(&e),
        };
        report_seed(&args, &bar, &result);
        violations += usize::from(result.violation.is_some());
        bar.set_message(format!("violations {violations}"));
        // Keep the history of the first failing seed, else of the last seed.
        let first_failure = result.violation.is_some()
            && !results.iter().any(|r: &SimResult| r.violation.is_some());
        if args.history.is_some() && (first_failure || kept.is_none() || !has_failure(&results)) {
            kept = Some(std::mem::take(&mut result.history));
        }
        result.history = Default::default();
        bar.inc(1);
        results.push(result);
    }
    bar.finish_and_clear();
    if let (Some(path), Some(history)) = (&args.history, &kept) {
        if let Err(e) = write_history(path, history) {
            return fail(&e);
        }
    }
    summarize(&args, &results)
}

/// The replay line's flags for barriers, moves and `--f`, when given.
/// The command that replays `seed`: this run's own arguments with `--seeds` set to it
/// (every flag the run had, so the replay is bit for bit).
fn replay_command(seed: u64) -> String {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    replay_of(&argv, seed)
}

fn replay_of(argv: &[String], seed: u64) -> String {
    let mut out = vec!["causeway".to_string()];
    let mut seeds_given = false;
    let mut it = argv.iter();
    while let Some(a) = it.next() {
        if a == "--seeds" {
            it.next();
            out.push(format!("--seeds {seed}"));
            seeds_given = true;
        } else if a.starts_with("--seeds=") {
            out.push(format!("--seeds {seed}"));
            seeds_given = true;
        } else if a.contains(|c: char| c.is_whitespace() || "'\"$;&|<>()*?".contains(c)) {
            out.push(format!("'{}'", a.replace('\'', "'\\''")));
        } else {
            out.push(a.clone());
        }
    }
    if !seeds_given {
        out.push(format!("--seeds {seed}"));
    }
    out.join(" ")
}

fn has_failure(results: &[SimResult]) -> bool {
    results.iter().any(|r| r.violation.is_some())
}

fn report_seed(args: &SimArgs, bar: &ProgressBar, r: &SimResult) {
    if let Some(v) = &r.violation {
        bar.suspend(|| {
            println!("seed={} FAILED: {v}", r.seed);
            println!("  replay: {}", replay_command(r.seed));
            for f in &r.faults {
                println!("  fault: {f}");
            }
        });
    }
    if args.trace_hash {
        bar.suspend(|| println!("seed={} trace_hash={}", r.seed, r.trace_hash));
    }
}

pub(crate) fn write_history(path: &str, history: &causeway_check::History) -> Result<(), String> {
    let file =
        std::fs::File::create(path).map_err(|e| format!("cannot create --history {path}: {e}"))?;
    let mut out = BufWriter::new(file);
    causeway_check::write_history(history, &mut out).map_err(|e| format!("writing {path}: {e}"))?;
    out.flush().map_err(|e| format!("writing {path}: {e}"))
}

fn summarize(args: &SimArgs, results: &[SimResult]) -> ExitCode {
    let txns: usize = results
        .iter()
        .map(|r| r.committed + r.aborted + r.unknown)
        .sum();
    let violations = results.iter().filter(|r| r.violation.is_some()).count();
    let refused: usize = results.iter().map(|r| r.refused).sum();
    let unreplicated: usize = results.iter().map(|r| r.unreplicated_keys).sum();
    if let Some(path) = &args.json {
        let mut doc = serde_json::json!({
            "protocol": args.protocol,
            "mutation": args.mutation,
            "seeds": results.len(),
            "txns": txns,
            "violations": violations,
            "results": results,
        });
        if refused > 0 {
            doc["refused"] = refused.into();
        }
        if unreplicated > 0 {
            doc["unreplicated_keys"] = unreplicated.into();
        }
        let text = serde_json::to_string_pretty(&doc).expect("json");
        if let Err(e) = std::fs::write(path, text) {
            return fail(&format!("cannot write --json {path}: {e}"));
        }
    }
    let name = match &args.mutation {
        Some(m) => format!("{}+{m}", args.protocol),
        None => args.protocol.clone(),
    };
    // Refusals only show when a protocol lacks a kind the workload asked for.
    let refused = match refused {
        0 => String::new(),
        n => format!(" refused={n}"),
    };
    // Keys whose every replica failed (partial replication): not in the final reads.
    let unreplicated = match unreplicated {
        0 => String::new(),
        n => format!(" unreplicated_keys={n}"),
    };
    if let Some(line) = abort_reasons_line(results) {
        println!("{line}");
        println!("  ({ABORTS_MEANING})");
    }
    println!(
        "protocol={name} seeds={} txns={txns} violations={violations}{refused}{unreplicated}{}",
        results.len(),
        strong_summary(results)
    );
    if violations > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// What the abort counts are, printed under them.
const ABORTS_MEANING: &str = "aborts are not violations: each ended a txn with nothing of it \
     applied, for the reason given (a fault, a timeout, a conflict); counts over every seed";

/// `aborts by reason: REASON N, ...` over every seed, most frequent first; `None` when
/// nothing aborted.
fn abort_reasons_line(results: &[SimResult]) -> Option<String> {
    let mut total = abort_reasons::AbortReasons::new();
    for r in results {
        abort_reasons::merge(&mut total, &r.abort_reasons);
    }
    abort_reasons::summary_line(&total)
}

/// ` strong_committed=N strong_aborted=N strong_after_failure=N/S`, each part only when
/// nonzero (the last: strong commits begun after the last DC failure, over the S seeds
/// where a DC failed).
fn strong_summary(results: &[SimResult]) -> String {
    let committed: usize = results.iter().map(|r| r.strong_committed).sum();
    let aborted: usize = results.iter().map(|r| r.strong_aborted).sum();
    let failed: Vec<usize> = results
        .iter()
        .filter_map(|r| r.strong_committed_after_failure)
        .collect();
    let mut out = String::new();
    if committed > 0 {
        out += &format!(" strong_committed={committed}");
    }
    if aborted > 0 {
        out += &format!(" strong_aborted={aborted}");
    }
    let after: usize = failed.iter().sum();
    if after > 0 {
        out += &format!(" strong_after_failure={after}/{}", failed.len());
    }
    out
}

pub(crate) fn fail(message: &str) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(2)
}

#[cfg(test)]
mod tests {
    use super::replay_of;

    fn argv(s: &[&str]) -> Vec<String> {
        s.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn the_replay_keeps_every_flag_and_sets_the_seed() {
        let a = argv(&[
            "sim",
            "--protocol",
            "promptcc",
            "--seeds",
            "1..20",
            "--keys",
            "200",
        ]);
        assert_eq!(
            replay_of(&a, 14),
            "causeway sim --protocol promptcc --seeds 14 --keys 200"
        );
        let a = argv(&["sim", "--seeds=3..4", "--conflicts", "a b"]);
        assert_eq!(replay_of(&a, 4), "causeway sim --seeds 4 --conflicts 'a b'");
        let a = argv(&["sim", "--protocol", "cure"]);
        assert_eq!(replay_of(&a, 7), "causeway sim --protocol cure --seeds 7");
    }
}
