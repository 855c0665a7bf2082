//! `causeway bench --calibrate`: the CPU model against real clusters, protocol by protocol.
//!
//! For each protocol a fresh local cluster (`causeway up`, see [`super::real`]) runs the
//! protocol's calibration workload (`causeway_bench::calibrate::config`) through the load
//! driver's native sessions: a warm-up step, then a measured step of the same length,
//! around which the CPU time of every process of the cluster's process group is read from
//! `/proc` (the nodes, their storage threads and hosted sessions; not the load driver,
//! which runs in this process). The simulator then runs the same workload twice, loaded
//! and idle, with the CPU model on, and the model's charge per transaction is set beside
//! the real one. `--fit` fits the model's constants for every protocol together.

use super::real::{install_signal_handlers, LocalCluster, INTERRUPTED, VALUE_SIZE};
use crate::load_cmd::{self, Mix, Sweep};
use causeway_bench::calibrate::{self, Features, Recorded, Sample, CONSTANTS};
use causeway_sim::cpu::CpuModel;
use causeway_sim::SimConfig;
use std::sync::atomic::Ordering;

/// How long each step runs.
pub struct Durations {
    /// Real warm-up and measured step, each, in seconds.
    pub real_step_s: u64,
    /// Simulated load phase, in ms.
    pub sim_ms: u64,
    /// Real idle measurement, in seconds.
    pub idle_s: u64,
}

impl Durations {
    pub fn new(quick: bool) -> Durations {
        if quick {
            Durations {
                real_step_s: 4,
                sim_ms: 2_000,
                idle_s: 2,
            }
        } else {
            Durations {
                real_step_s: 15,
                sim_ms: 5_000,
                idle_s: 5,
            }
        }
    }
}

/// CPU seconds of every process in process group `group` (user and system), from
/// `/proc/PID/stat`.
fn group_cpu_s(group: i32) -> f64 {
    // SAFETY: sysconf(3) has no preconditions.
    let ticks_per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    let mut ticks = 0u64;
    for entry in dir.flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // The command name may hold spaces: the fields start after its last ')'.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.len() > 12 && f[2].parse::<i32>().ok() == Some(group) {
            let n = |i: usize| f[i].parse::<u64>().unwrap_or(0);
            ticks += n(11) + n(12);
        }
    }
    ticks as f64 / ticks_per_s
}

/// What the real cluster measured.
struct Real {
    us_per_txn: f64,
    txn_per_s: f64,
    idle_us_per_s: f64,
}

/// The idle cluster's CPU per second, over `seconds` after a second to settle.
fn idle_cpu_us_per_s(group: i32, seconds: u64) -> f64 {
    std::thread::sleep(std::time::Duration::from_secs(1));
    let (before, at) = (group_cpu_s(group), std::time::Instant::now());
    std::thread::sleep(std::time::Duration::from_secs(seconds));
    (group_cpu_s(group) - before) * 1e6 / at.elapsed().as_secs_f64()
}

/// The real side: idle, then a warm-up and a measured step of load.
fn real_run(protocol: &str, cfg: &SimConfig, d: &Durations) -> Result<Real, String> {
    let rtt = Some(calibrate::RTT_MS);
    let mut cluster = LocalCluster::start(protocol, cfg, rtt, None)?;
    let group = cluster.group().ok_or("the cluster has no process")?;
    let idle_us_per_s = idle_cpu_us_per_s(group, d.idle_s);
    let mix = if cfg.read_only_ratio > 0.0 {
        Mix::ReadOnlyWriteOnly {
            read_only: cfg.read_only_ratio,
        }
    } else {
        Mix::Ycsb {
            read_ratio: cfg.read_ratio,
        }
    };
    let clients = cfg.clients_per_dc * u32::from(cfg.dcs);
    let sweep = Sweep {
        addrs: cluster.addrs.iter().map(ToString::to_string).collect(),
        mix,
        keys: cfg.keys,
        zipf: cfg.zipf,
        txn_ops: cfg.txn_ops,
        value_size: VALUE_SIZE,
        client_counts: vec![clients, clients],
        duration_s: d.real_step_s,
        seed: 1,
        label: format!("{protocol} (calibrate)"),
    };
    let mut marks = Vec::new();
    let rows = load_cmd::drive_observed(sweep, &mut |_| marks.push(group_cpu_s(group)));
    let rows = rows.map_err(|e| format!("{protocol}: {e}{}", cluster.exit_note()))?;
    drop(cluster);
    if INTERRUPTED.load(Ordering::SeqCst) {
        return Err("interrupted; the cluster was stopped and its data removed".into());
    }
    let measured = rows.get(1).ok_or("no measured step")?;
    if measured.committed == 0 || marks.len() < 2 {
        return Err(format!(
            "{protocol}: nothing committed in the measured step"
        ));
    }
    let cpu_us = (marks[1] - marks[0]) * 1e6;
    Ok(Real {
        us_per_txn: cpu_us / measured.committed as f64,
        txn_per_s: measured.txn_per_s,
        idle_us_per_s,
    })
}

/// The simulator's side: the figures per transaction for the real throughput, and the
/// idle run's per second.
fn sim_features(cfg: &SimConfig, real_txn_per_s: f64) -> Result<(Features, Features), String> {
    let loaded = causeway_sim::run(cfg)?;
    let idle_cfg = SimConfig {
        clients_per_dc: 0,
        ..cfg.clone()
    };
    let idle = causeway_sim::run(&idle_cfg)?;
    let (Some(l), Some(i)) = (&loaded.cpu_tally, &idle.cpu_tally) else {
        return Err("the simulator ran without its CPU model".into());
    };
    if loaded.committed == 0 {
        return Err(format!("{}: the simulator committed nothing", cfg.protocol));
    }
    let seconds = cfg.duration_ms as f64 / 1e3;
    let committed = loaded.committed as u64;
    Ok((
        Features::of(l, i, committed, seconds, real_txn_per_s),
        Features::per_second(i, seconds),
    ))
}

/// The calibration workload of `protocol` with the model `model`.
fn config(protocol: &str, o: &CalibrateOptions, d: &Durations) -> SimConfig {
    let base = calibrate::config(protocol, o.clients_per_dc, d.sim_ms);
    SimConfig {
        cpu: CpuModel {
            enabled: true,
            host_nodes: base.cpu.host_nodes,
            ..o.model.clone()
        },
        ..base
    }
}

/// One protocol, both worlds.
fn calibrate_one(protocol: &str, o: &CalibrateOptions, d: &Durations) -> Result<Sample, String> {
    let cfg = config(protocol, o, d);
    let real = real_run(protocol, &cfg, d)?;
    let (features, idle_features) = sim_features(&cfg, real.txn_per_s)?;
    Ok(Sample {
        protocol: protocol.to_string(),
        real_us_per_txn: real.us_per_txn,
        real_txn_per_s: real.txn_per_s,
        features,
        real_idle_us_per_s: real.idle_us_per_s,
        idle_features,
    })
}

fn line(s: &Sample, m: &CpuModel) -> String {
    let sim = calibrate::predict_us(m, &s.features);
    format!(
        "calibrate protocol={} real_us_per_txn={:.1} sim_us_per_txn={sim:.1} ratio={:.2} idle_ratio={:.2}",
        s.protocol,
        s.real_us_per_txn,
        s.ratio(m),
        s.idle_ratio(m)
    )
}

/// The summary line: how many protocols, how many within the band, the worst.
pub fn summary(samples: &[Sample], m: &CpuModel) -> String {
    let within = samples
        .iter()
        .filter(|s| (calibrate::RATIO_MIN..=calibrate::RATIO_MAX).contains(&s.ratio(m)))
        .count();
    let worst = samples
        .iter()
        .max_by(|a, b| (a.ratio(m).ln().abs()).total_cmp(&b.ratio(m).ln().abs()))
        .map_or("-".to_string(), |s| {
            format!("{}:{:.2}", s.protocol, s.ratio(m))
        });
    format!(
        "calibrate protocols={} within={within} worst={worst}",
        samples.len()
    )
}

/// The fitted constants and every protocol's ratio under them.
fn print_fit(samples: &[Sample], base: &CpuModel) {
    let Some(c) = calibrate::fit(samples, calibrate::HELD) else {
        return println!("calibrate fit: none (too few protocols)");
    };
    let named: Vec<String> = CONSTANTS
        .iter()
        .zip(c)
        .map(|(n, v)| format!("{n}={v}"))
        .collect();
    println!("calibrate fit {} (byte_ns and op_ns held)", named.join(" "));
    let fitted = calibrate::with_constants(base, c);
    for s in samples {
        println!("calibrate fitted {}", line(s, &fitted));
    }
    println!("calibrate fitted {}", summary(samples, &fitted));
}

/// What `bench --calibrate` was asked.
pub struct CalibrateOptions {
    pub protocols: Vec<String>,
    pub quick: bool,
    /// Closed-loop clients per DC, in both worlds.
    pub clients_per_dc: u32,
    pub fit: bool,
    /// Read the samples from this JSON instead of running (a recorded calibration).
    pub from: Option<String>,
    /// With `from`: run the simulator's side again, keeping the real figures.
    pub resimulate: bool,
    /// The model the simulator runs and the ratios are priced with.
    pub model: CpuModel,
    pub json: Option<String>,
}

/// Runs (or reads) the calibration, prints a line per protocol and the summary.
pub fn run(o: &CalibrateOptions) -> Result<bool, String> {
    let model = o.model.clone();
    let samples = match &o.from {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
            let rec: Recorded = serde_json::from_str(&text).map_err(|e| format!("{path}: {e}"))?;
            if o.resimulate {
                resimulate(rec.samples, o)?
            } else {
                rec.samples
            }
        }
        None => run_all(o, &model)?,
    };
    if o.from.is_some() {
        samples.iter().for_each(|s| println!("{}", line(s, &model)));
    }
    println!("{}", summary(&samples, &model));
    if o.fit {
        print_fit(&samples, &model);
    }
    if let Some(path) = &o.json {
        let rec = Recorded { samples };
        let text = serde_json::to_string_pretty(&rec).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n").map_err(|e| format!("{path}: {e}"))?;
        let band = calibrate::RATIO_MIN..=calibrate::RATIO_MAX;
        return Ok(rec.samples.iter().all(|s| band.contains(&s.ratio(&model))));
    }
    let band = calibrate::RATIO_MIN..=calibrate::RATIO_MAX;
    Ok(samples.iter().all(|s| band.contains(&s.ratio(&model))))
}

fn run_all(o: &CalibrateOptions, model: &CpuModel) -> Result<Vec<Sample>, String> {
    install_signal_handlers();
    let d = Durations::new(o.quick);
    let mut samples = Vec::new();
    for (i, p) in o.protocols.iter().enumerate() {
        eprintln!("calibrating {p} ({}/{})", i + 1, o.protocols.len());
        let s = calibrate_one(p, o, &d)?;
        println!("{}", line(&s, model));
        samples.push(s);
    }
    Ok(samples)
}

/// The recorded samples with the simulator's side run again under `o.model`.
fn resimulate(samples: Vec<Sample>, o: &CalibrateOptions) -> Result<Vec<Sample>, String> {
    let d = Durations::new(o.quick);
    let total = samples.len();
    let mut out = Vec::with_capacity(total);
    for (i, s) in samples.into_iter().enumerate() {
        eprintln!("simulating {} ({}/{total})", s.protocol, i + 1);
        let cfg = config(&s.protocol, o, &d);
        let (features, idle_features) = sim_features(&cfg, s.real_txn_per_s)?;
        out.push(Sample {
            features,
            idle_features,
            ..s
        });
    }
    Ok(out)
}
