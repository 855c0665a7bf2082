//! `causeway bench --real --experiment NAME`: the experiment's sweep against real clusters.
//! For each protocol a fresh local cluster (`causeway up`, a child process of this binary in
//! its own process group, data in a fresh temporary directory) is started with the
//! experiment's topology (DCs, nodes per DC, replication factor); once every DC accepts
//! connections, the `causeway load` driver runs
//! in this process over the real sweep (far smaller than the simulator's: the servers and
//! the client threads share this machine's cores); then the cluster is stopped (SIGINT to
//! its group, SIGKILL after a timeout) and its directory removed, also on errors. The
//! workload follows the experiment's as closely as the driver allows; what differs is
//! returned as notes for the report.

use crate::load_cmd::{self, Mix, Row, Sweep};
use causeway_bench::{Curve, Plan, Point};
use causeway_sim::{ObjectMix, SimConfig, Summary};
use std::io::IsTerminal;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::{Duration, Instant};

/// Most clients per DC at one point of a real sweep (each is a thread of this process).
pub const REAL_CLIENTS_MAX: u32 = 256;
/// Longest real point, in seconds.
pub const REAL_DURATION_S_MAX: u64 = 600;
/// How long a fresh cluster may take until every DC accepts connections.
const READY_TIMEOUT: Duration = Duration::from_secs(90);
/// How long `up` may take to stop its nodes after SIGINT before the group is killed
/// (longer than `up`'s own 15 s per-node grace, so it can finish its work).
const STOP_TIMEOUT: Duration = Duration::from_secs(25);
/// Bytes per written value: the simulator's values are short tags.
pub(crate) const VALUE_SIZE: usize = 16;
/// Where automatic port ranges are looked for, and how many ranges are tried. Below Linux's
/// default ephemeral range (32768-60999), so no outgoing connection takes a port between
/// the check and the bind.
const AUTO_PORTS: (u16, u16) = (10_000, 32_000);
const AUTO_PORT_TRIES: u32 = 40;

/// The process group of the running cluster, for the signal handler (0: none).
static CLUSTER_PGID: AtomicI32 = AtomicI32::new(0);
pub(crate) static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// What the command line asked of the real run.
pub struct RealOptions {
    /// Clients per DC at each point.
    pub clients_per_dc: Vec<u32>,
    pub duration_s: u64,
    /// First port of the clusters' port range; `None`: a free range is chosen.
    pub port_base: Option<u16>,
}

impl RealOptions {
    /// The experiment's real sweep, replaced by the flags that are given; bounded.
    pub fn new(
        plan: &Plan,
        clients: &[u32],
        duration_s: Option<u64>,
        port_base: Option<u16>,
    ) -> Result<RealOptions, String> {
        let clients_per_dc = if clients.is_empty() {
            plan.real_clients().to_vec()
        } else {
            clients.to_vec()
        };
        let points_max = causeway_bench::experiment::SWEEP_POINTS_MAX;
        if clients_per_dc.is_empty() || clients_per_dc.len() > points_max {
            return Err(format!(
                "--real-clients takes 1 to {points_max} counts; fix: pass fewer"
            ));
        }
        if let Some(n) = clients_per_dc
            .iter()
            .find(|n| !(1..=REAL_CLIENTS_MAX).contains(*n))
        {
            return Err(format!(
                "--real-clients {n} is out of range; fix: pass 1 to {REAL_CLIENTS_MAX} per DC"
            ));
        }
        let duration_s = duration_s.unwrap_or_else(|| plan.real_duration_s());
        if !(1..=REAL_DURATION_S_MAX).contains(&duration_s) {
            return Err(format!(
                "--real-duration {duration_s} is out of range; fix: pass 1 to {REAL_DURATION_S_MAX}"
            ));
        }
        Ok(RealOptions {
            clients_per_dc,
            duration_s,
            port_base,
        })
    }
}

/// The load driver's workload nearest to the experiment's, and what still differs.
pub struct Mapping {
    pub mix: Mix,
    /// Uniform inter-DC round trip for `up --rtt-ms`; `None`: `up`'s default matrix.
    pub rtt_ms: Option<f64>,
    pub notes: Vec<String>,
}

/// The simulated one-way delays as one round trip, if every pair of DCs has the same.
fn uniform_rtt(one_way: &[Vec<f64>]) -> Option<f64> {
    let off: Vec<f64> = one_way
        .iter()
        .enumerate()
        .flat_map(|(a, row)| row.iter().enumerate().filter(move |(b, _)| *b != a))
        .map(|(_, v)| *v)
        .collect();
    let first = *off.first()?;
    off.iter()
        .all(|v| (v - first).abs() < 1e-9)
        .then_some(first * 2.0)
}

/// Maps the experiment's topology and workload onto `causeway up` and the load driver.
pub fn map_workload(cfg: &SimConfig, opts: &RealOptions, sim_clients: &[u32]) -> Mapping {
    let mut notes = Vec::new();
    let mix = if cfg.read_only_ratio + cfg.write_only_ratio >= 1.0 - 1e-9 {
        Mix::ReadOnlyWriteOnly {
            read_only: cfg.read_only_ratio,
        }
    } else {
        if cfg.read_only_ratio > 0.0 || cfg.write_only_ratio > 0.0 {
            notes.push("read-only/write-only transaction shares are not run: every operation is a read with the read ratio".into());
        }
        Mix::Ycsb {
            read_ratio: cfg.read_ratio,
        }
    };
    if cfg.strong_ratio > 0.0 {
        notes.push("no strong transactions (the load driver runs causal ones only)".into());
    }
    if cfg.objects != ObjectMix::Lww {
        notes.push("LWW registers only (the load driver writes registers)".into());
    }
    if cfg.remote_ratio > 0.0 {
        notes.push(format!(
            "keys drawn over the whole key space (the simulator takes {:.0}% from other DCs' home ranges)",
            cfg.remote_ratio * 100.0
        ));
    }
    if cfg.partitions_per_txn > 0 {
        notes.push(
            "operations drawn one by one over all keys (the load driver has no --partitions-per-txn)"
                .into(),
        );
    }
    if cfg.think_time_ns > 0 {
        notes
            .push("no think time (the load driver's clients are closed-loop at full speed)".into());
    }
    let rtt_ms = cfg.inter_dc_one_way_ms.as_deref().and_then(uniform_rtt);
    if rtt_ms.is_none() {
        notes.push(
            "inter-DC latency: `up`'s default PaRiS Fig. 1 matrix, not the experiment's".into(),
        );
    }
    notes.extend(common_notes(opts, sim_clients));
    Mapping { mix, rtt_ms, notes }
}

/// What differs in every real run, whatever the experiment.
fn common_notes(opts: &RealOptions, sim_clients: &[u32]) -> Vec<String> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    vec![
        format!(
            "no CPU model: {cores} real cores shared by every node process and the client threads (the simulator's clients cost nothing)"
        ),
        format!(
            "clients per DC {:?} for {} s of wall time each (simulator: {sim_clients:?}); interactive begin/ops/commit over the native client on loopback",
            opts.clients_per_dc, opts.duration_s
        ),
        format!("{VALUE_SIZE}-byte values; keys preloaded once per cluster; histories neither recorded nor checked (viol '-')"),
    ]
}

/// A free port range for `up`: DC client ports at BASE+1.., node ports at BASE+100..,
/// RESP ports after the node ports. Returns (port base, RESP port base).
fn ports(dcs: u16, nodes: u32, given: Option<u16>) -> Result<(u16, u16), String> {
    let resp_base = |base: u32| base + 100 + nodes;
    let needed = |base: u32| -> Vec<u32> {
        let dc = 1..=u32::from(dcs);
        dc.clone()
            .map(|i| base + i)
            .chain((0..nodes).map(|k| base + 100 + k))
            .chain(dc.map(|i| resp_base(base) + i))
            .collect()
    };
    let busy = |base: u32| {
        needed(base)
            .into_iter()
            .find(|p| *p > 65_535 || TcpListener::bind(("127.0.0.1", *p as u16)).is_err())
    };
    if let Some(base) = given {
        if let Some(p) = busy(u32::from(base)) {
            return Err(format!(
                "port {p} of --real-port-base {base} is busy or out of range; fix: pass another --real-port-base"
            ));
        }
        return Ok((base, resp_base(u32::from(base)) as u16));
    }
    let (lo, hi) = (u32::from(AUTO_PORTS.0), u32::from(AUTO_PORTS.1));
    let start = std::process::id() % 97 * 400;
    for t in 0..AUTO_PORT_TRIES {
        let base = lo + (start + t * 1000) % (hi - lo);
        if busy(base).is_none() {
            return Ok((base as u16, resp_base(base) as u16));
        }
    }
    Err("found no free port range; fix: pass --real-port-base with a free range".into())
}

/// A running `causeway up` cluster; dropping it stops the cluster and removes its data.
pub(crate) struct LocalCluster {
    child: Option<Child>,
    dir: PathBuf,
    pub(crate) addrs: Vec<SocketAddr>,
}

impl LocalCluster {
    /// The process group of `up` and its nodes.
    pub(crate) fn group(&self) -> Option<i32> {
        self.child.as_ref().map(|c| c.id() as i32)
    }

    pub(crate) fn start(
        protocol: &str,
        cfg: &SimConfig,
        rtt_ms: Option<f64>,
        port_base: Option<u16>,
    ) -> Result<LocalCluster, String> {
        let (base, resp) = ports(cfg.dcs, u32::from(cfg.dcs) * cfg.nodes_per_dc, port_base)?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let dir = std::env::temp_dir().join(format!(
            "causeway-bench-real-{}-{protocol}-{nanos:x}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let mut cluster = LocalCluster {
            child: None,
            addrs: (1..=cfg.dcs)
                .map(|i| SocketAddr::from(([127, 0, 0, 1], base + i)))
                .collect(),
            dir,
        };
        let mut cmd = cluster.up_command(protocol, cfg, rtt_ms, (base, resp))?;
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start causeway up: {e}"))?;
        CLUSTER_PGID.store(child.id() as i32, Ordering::SeqCst);
        cluster.child = Some(child);
        cluster.wait_ready(protocol, port_base.is_some())?;
        Ok(cluster)
    }

    /// `causeway up` for this cluster, in its own process group (so one signal reaches
    /// `up` and every node, and a Ctrl-C at the terminal reaches only us: we stop it).
    fn up_command(
        &self,
        protocol: &str,
        cfg: &SimConfig,
        rtt_ms: Option<f64>,
        (base, resp): (u16, u16),
    ) -> Result<Command, String> {
        let exe =
            std::env::current_exe().map_err(|e| format!("cannot find the causeway binary: {e}"))?;
        let log = std::fs::File::create(self.dir.join("up.log"))
            .map_err(|e| format!("cannot create up.log: {e}"))?;
        let err = log.try_clone().map_err(|e| e.to_string())?;
        let mut cmd = Command::new(exe);
        cmd.arg("up")
            .args(["--protocol", protocol])
            .args(["--dcs", &cfg.dcs.to_string()])
            .args(["--nodes-per-dc", &cfg.nodes_per_dc.to_string()])
            .arg("--data")
            .arg(self.dir.join("data"))
            .args(["--port-base", &base.to_string()])
            .args(["--resp-port-base", &resp.to_string()])
            // The bench reads its own numbers; metrics ports would only risk a clash.
            .args(["--metrics-port-base", "0"])
            // A node that dies would skew the numbers: the whole run fails instead.
            .args(["--on-node-exit", "stop"])
            .args(["--http-port", "0"])
            // Every load client its own causal past, as in the papers (and as the simulator
            // runs them): an endpoint's shared past would add a join per transaction.
            .args(["--session-scope", "connection"])
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .process_group(0);
        if let Some(rtt) = rtt_ms {
            cmd.args(["--rtt-ms", &rtt.to_string()]);
        }
        if let Some(r) = cfg.replication_factor {
            cmd.args(["--replication", &r.to_string()]);
        }
        // SAFETY: prctl(2) is async-signal-safe; it asks the kernel to SIGTERM `up` (which
        // then stops its nodes) if this process dies without stopping it.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        Ok(cmd)
    }

    /// Waits until every DC's client port accepts connections, or `up` exits.
    fn wait_ready(&mut self, protocol: &str, port_given: bool) -> Result<(), String> {
        let deadline = Instant::now() + READY_TIMEOUT;
        for addr in self.addrs.clone() {
            while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
                let child = self.child.as_mut().expect("started");
                if let Ok(Some(status)) = child.try_wait() {
                    let fix = if port_given {
                        "pass another --real-port-base"
                    } else {
                        "retry, or pass --real-port-base with a free range"
                    };
                    return Err(format!(
                        "the {protocol} cluster (causeway up) exited ({status}) before DC port {addr} opened: {}; if a port was busy, fix: {fix}",
                        self.log_tail()
                    ));
                }
                if INTERRUPTED.load(Ordering::SeqCst) || Instant::now() > deadline {
                    return Err(format!(
                        "the {protocol} cluster did not open {addr} within {READY_TIMEOUT:?}: {}",
                        self.log_tail()
                    ));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(())
    }

    /// Why the run failed if the cluster itself is gone (it was signalled or crashed).
    pub(crate) fn exit_note(&mut self) -> String {
        match self.child.as_mut().map(Child::try_wait) {
            Some(Ok(Some(status))) => format!(
                "; the cluster (causeway up) exited during the run ({status}): another process stopped it or a node failed; to keep its logs, rerun with CAUSEWAY_KEEP_LOGS=1"
            ),
            _ => String::new(),
        }
    }

    /// The last lines `up` wrote, for error messages.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("up.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().rev().take(3).collect();
        let tail: Vec<&str> = lines.into_iter().rev().collect();
        format!("'{}'", tail.join(" / "))
    }

    /// SIGINT to the cluster's group, then SIGKILL if it has not stopped in time.
    fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let group = child.id() as libc::pid_t;
        // SAFETY: kill(2) on the process group of a child we spawned and have not reaped.
        unsafe { libc::kill(-group, libc::SIGINT) };
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            match child.try_wait() {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) if Instant::now() > deadline => {
                    eprintln!("the cluster did not stop in {STOP_TIMEOUT:?}; killing it");
                    // SAFETY: as above; `up` is not reaped yet, so the group is still ours.
                    unsafe { libc::kill(-group, libc::SIGKILL) };
                    let _ = child.wait();
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        CLUSTER_PGID.store(0, Ordering::SeqCst);
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        self.stop();
        if std::env::var_os("CAUSEWAY_KEEP_LOGS").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        } else {
            eprintln!("cluster data and logs kept in {}", self.dir.display());
        }
    }
}

/// On SIGINT/SIGTERM: pass SIGINT on to the cluster and note it; the run then fails its
/// step (the cluster is gone) and the cluster's guard cleans up.
extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
    let group = CLUSTER_PGID.load(Ordering::SeqCst);
    if group > 0 {
        // SAFETY: kill(2) is async-signal-safe.
        unsafe { libc::kill(-group, libc::SIGINT) };
    }
}

pub(crate) fn install_signal_handlers() {
    let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only touches atomics and calls kill(2).
    unsafe {
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
}

/// A row of the driver as a point of a curve (no CPU figure, no samples, not checked).
fn point(clients_per_dc: u32, r: &Row) -> Point {
    Point {
        clients_per_dc,
        committed: r.committed as usize,
        aborted: r.aborted as usize,
        throughput_txn_per_s: r.txn_per_s,
        latency: Summary {
            count: r.committed as usize,
            mean_ms: r.mean_ms,
            p50_ms: r.p50_ms,
            p99_ms: r.p99_ms,
            max_ms: r.max_ms,
        },
        ..Point::default()
    }
}

/// One protocol: a fresh cluster, the sweep, the cluster stopped and removed.
fn run_protocol(
    protocol: &str,
    cfg: &SimConfig,
    map: &Mapping,
    opts: &RealOptions,
) -> Result<Vec<Row>, String> {
    if std::io::stderr().is_terminal() {
        eprintln!(
            "{protocol} (real): starting a {}-DC cluster of {} nodes",
            cfg.dcs,
            u32::from(cfg.dcs) * cfg.nodes_per_dc
        );
    }
    let mut cluster = LocalCluster::start(protocol, cfg, map.rtt_ms, opts.port_base)?;
    let sweep = Sweep {
        addrs: cluster.addrs.iter().map(ToString::to_string).collect(),
        mix: map.mix,
        keys: cfg.keys,
        zipf: cfg.zipf,
        txn_ops: cfg.txn_ops,
        value_size: VALUE_SIZE,
        client_counts: opts
            .clients_per_dc
            .iter()
            .map(|n| n * u32::from(cfg.dcs))
            .collect(),
        duration_s: opts.duration_s,
        seed: 1,
        label: format!("{protocol} (real)"),
    };
    let rows = load_cmd::drive(sweep).map_err(|e| format!("{protocol} (real): {e}"));
    let rows = rows.map_err(|e| e + &cluster.exit_note());
    drop(cluster);
    if INTERRUPTED.load(Ordering::SeqCst) {
        return Err("interrupted; the cluster was stopped and its data removed".into());
    }
    rows
}

/// Runs every protocol of the plan's experiment on its own real cluster; the curves and
/// the notes on what differs from the simulated setup.
pub fn run(plan: &Plan, opts: &RealOptions) -> Result<(Vec<Curve>, Vec<String>), String> {
    let cfg = (plan.experiment.config)();
    let mut map = map_workload(&cfg, opts, plan.clients());
    install_signal_handlers();
    let mut curves = Vec::new();
    for p in plan.experiment.protocols {
        let rows = run_protocol(p, &cfg, &map, opts)?;
        let unknown: u64 = rows.iter().map(|r| r.unknown).sum();
        if unknown > 0 {
            map.notes.push(format!(
                "{p}: {unknown} transactions of unknown outcome (timeouts), in neither column"
            ));
        }
        let points = opts
            .clients_per_dc
            .iter()
            .zip(&rows)
            .map(|(n, r)| point(*n, r))
            .collect();
        curves.push(Curve {
            protocol: p.to_string(),
            points,
        });
    }
    Ok((curves, map.notes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uniform_one_way_matrix_is_one_round_trip() {
        let m = vec![
            vec![0.0, 50.0, 50.0],
            vec![50.0, 0.0, 50.0],
            vec![50.0, 50.0, 0.0],
        ];
        assert_eq!(uniform_rtt(&m), Some(100.0));
        let skewed = vec![vec![0.0, 50.0], vec![40.0, 0.0]];
        assert_eq!(uniform_rtt(&skewed), None);
    }

    #[test]
    fn the_experiment_workload_maps_to_reads_by_ratio_and_says_what_differs() {
        let e = causeway_bench::find("cure-vs-eventual").unwrap();
        let plan = Plan {
            experiment: e,
            quick: true,
            cpu: None,
        };
        let opts = RealOptions::new(&plan, &[], None, None).unwrap();
        assert_eq!(
            (opts.clients_per_dc.clone(), opts.duration_s),
            (vec![1, 8], 2)
        );
        let map = map_workload(&(e.config)(), &opts, plan.clients());
        assert_eq!(map.mix, Mix::Ycsb { read_ratio: 0.9 });
        assert_eq!(map.rtt_ms, Some(100.0));
        assert!(
            map.notes.iter().any(|n| n.contains("no CPU model")),
            "{:?}",
            map.notes
        );
    }

    #[test]
    fn up_gets_the_experiments_replication_factor() {
        let dir = std::env::temp_dir().join(format!("causeway-real-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cluster = LocalCluster {
            child: None,
            dir,
            addrs: Vec::new(),
        };
        let args = |cfg: &SimConfig| -> Vec<String> {
            let cmd = cluster
                .up_command("cure", cfg, None, (20_000, 20_200))
                .unwrap();
            cmd.get_args()
                .map(|a| a.to_string_lossy().to_string())
                .collect()
        };
        let full = args(&SimConfig::default());
        assert!(!full.contains(&"--replication".to_string()), "{full:?}");
        let partial = SimConfig {
            dcs: 5,
            replication_factor: Some(2),
            ..SimConfig::default()
        };
        let partial = args(&partial);
        let at = partial.iter().position(|a| a == "--replication");
        assert_eq!(
            at.map(|i| partial[i + 1].as_str()),
            Some("2"),
            "{partial:?}"
        );
        let e = causeway_bench::find("cure-vs-eventual").unwrap();
        let plan = Plan {
            experiment: e,
            quick: true,
            cpu: None,
        };
        let opts = RealOptions::new(&plan, &[], None, None).unwrap();
        let cfg = SimConfig {
            replication_factor: Some(2),
            ..(e.config)()
        };
        let map = map_workload(&cfg, &opts, plan.clients());
        assert!(
            !map.notes.iter().any(|n| n.contains("replication")),
            "{:?}",
            map.notes
        );
    }

    #[test]
    fn real_sweeps_are_bounded_and_a_busy_port_names_the_flag() {
        let e = causeway_bench::find("cure-vs-eventual").unwrap();
        let plan = Plan {
            experiment: e,
            quick: false,
            cpu: None,
        };
        let e1 = RealOptions::new(&plan, &[REAL_CLIENTS_MAX + 1], None, None)
            .err()
            .unwrap();
        assert!(e1.contains("--real-clients") && e1.contains("fix"), "{e1}");
        let e2 = RealOptions::new(&plan, &[], Some(REAL_DURATION_S_MAX + 1), None)
            .err()
            .unwrap();
        assert!(e2.contains("--real-duration"), "{e2}");
        let held = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = held.local_addr().unwrap().port() - 1;
        let e3 = ports(1, 1, Some(base)).unwrap_err();
        assert!(
            e3.contains("--real-port-base") && e3.contains("busy"),
            "{e3}"
        );
    }
}
