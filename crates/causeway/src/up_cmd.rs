//! `causeway up`: a whole local multi-DC cluster on loopback from one command.
//!
//! Writes the cluster file `DATA/cluster.toml` (DC i, from 1, serves clients at
//! 127.0.0.1:PORT_BASE+i and RESP at 127.0.0.1:RESP_PORT_BASE+i, none with 0; node k listens for peers
//! at PORT_BASE+100+k and serves Prometheus metrics at 127.0.0.1:METRICS_PORT_BASE+k;
//! `--set KEY=VALUE` / `--f N` fill the running protocol's `[protocols.NAME]` section,
//! `--replication R` / `--partitions N` its `replication_factor` / `partitions`),
//! starts one `causeway server` process per node with its log in `DATA/NODE.log` (rotated
//! by size, [`logs`]) and its pid in `DATA/up.pids` (`NAME DC PID` per line), waits until
//! every DC answers, prints the addresses and runs until Ctrl-C or SIGTERM; then it asks every node to stop (SIGTERM),
//! waits for them and removes the pid file. Meanwhile it serves the live cluster page
//! (`causeway_runtime::dashboard`) at http://127.0.0.1:HTTP_PORT/, built from scraping
//! every node's metrics each second.
//!
//! A node that exits on its own (a crash, a `kill -9` in a DC-failure experiment) is
//! reported on stderr with its name, DC and exit status; with `--on-node-exit keep` (the
//! default) the others keep running, with `stop` the whole cluster stops. Nodes get SIGTERM
//! from the kernel if `up` itself dies (PR_SET_PDEATHSIG), so none is left orphaned.
pub mod ctl;
pub mod logs;

use causeway_core::SessionScope;
use causeway_runtime::config::Durability;
use causeway_runtime::{local_cluster, ClusterConfig};
use clap::{Args, ValueEnum};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How long `up` waits for every DC's client endpoint to accept connections.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a node may take to stop after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a report of a node's exit waits for its last log lines to be copied.
const LOG_SETTLE: Duration = Duration::from_millis(100);
/// The pid file in the data directory: one `NAME DC PID` line per node.
pub const PID_FILE: &str = "up.pids";

/// What `up` does when a node process exits on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OnNodeExit {
    /// Report it and start it again, after a backoff that doubles from 200 ms to 10 s
    /// while it keeps dying (reset once it stayed up 30 s); the others keep running.
    Restart,
    /// Report it (name, DC, exit status) and leave it dead; the others keep running.
    Keep,
    /// Stop the whole cluster and exit with failure.
    Stop,
}

#[derive(Args)]
pub struct UpArgs {
    /// Protocol to run (default: unistore, causal with strong transactions on demand, when
    /// this build has it; else cure, else eventual).
    #[arg(long)]
    protocol: Option<String>,
    /// Data centers.
    #[arg(long, default_value_t = 3)]
    dcs: u16,
    /// Server nodes per DC.
    #[arg(long, default_value_t = 2)]
    nodes_per_dc: u32,
    /// Partitions of the key space (default: 4 per node of a DC).
    #[arg(long)]
    partitions: Option<u32>,
    /// DCs storing each partition, 1 to --dcs (default: every DC). Partition p lives in R
    /// consecutive DCs from p % dcs; only protocols built for partial replication (paris,
    /// bpr, nocc) accept fewer than --dcs.
    #[arg(long, alias = "replication-factor", value_name = "R")]
    replication: Option<u16>,
    /// Directory for the cluster file, node logs and data (reused across runs).
    #[arg(long, default_value = "causeway-data")]
    data: PathBuf,
    /// DC i (from 1) serves native clients at 127.0.0.1:PORT_BASE+i.
    #[arg(long, default_value_t = 7100)]
    port_base: u16,
    /// DC i (from 1) serves RESP at 127.0.0.1:RESP_PORT_BASE+i (0: no RESP endpoints).
    #[arg(long, default_value_t = 7000)]
    resp_port_base: u16,
    /// Node k (from 0) serves Prometheus metrics at http://127.0.0.1:METRICS_PORT_BASE+k/metrics
    /// (0: no metrics endpoints).
    #[arg(long, default_value_t = 9100)]
    metrics_port_base: u16,
    /// The live cluster page at http://127.0.0.1:HTTP_PORT/ (and its JSON at /api/cluster,
    /// what `causeway top` reads); 0: no page. No page either with --metrics-port-base 0.
    #[arg(long, default_value_t = 9000)]
    http_port: u16,
    /// Emulated round trip between every pair of DCs, in ms (default: the PaRiS Fig. 1
    /// matrix of the cluster file's documentation).
    #[arg(long)]
    rtt_ms: Option<f64>,
    /// Sets KEY = VALUE in the running protocol's `[protocols.NAME]` section of the cluster
    /// file (repeatable; VALUE is a TOML value, e.g. `--set f=1 --set lease_ns=100000000`).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// UniStore's f (DC failures tolerated; a txn is uniform once f+1 DCs store it):
    /// shorthand for `--set f=N`.
    #[arg(long = "f", value_name = "N")]
    f: Option<u32>,
    /// When a node process exits on its own: `restart` reports it and starts it again with
    /// backoff (200 ms doubling to 10 s while it keeps dying), `keep` reports it and leaves
    /// it dead (failure experiments), `stop` stops the whole cluster. The other nodes keep
    /// running under `restart` and `keep`.
    #[arg(long, value_enum, default_value = "restart")]
    on_node_exit: OnNodeExit,
    /// Leave a node that dies dead: shorthand for `--on-node-exit keep`.
    #[arg(long, conflicts_with = "on_node_exit")]
    no_restart: bool,
    /// When an acknowledged write is on disk: `sync` (after its fsync, like Redis
    /// `appendfsync always`) or `batched` (fsync at most every --batched-sync-interval-ms:
    /// a power failure loses the writes of the last interval, a process crash none).
    #[arg(long, value_enum, default_value = "sync")]
    durability: DurabilityArg,
    /// With `--durability batched`, the longest time between two fsyncs, in ms.
    #[arg(long, default_value_t = 100)]
    batched_sync_interval_ms: u64,
    /// Serve RESP on every node, not only on the first of each DC: node k (from 0, in DC
    /// order) other than a DC's first listens at 127.0.0.1:RESP_PORT_BASE+64+k. Any node
    /// accepts every key (its sessions reach the key's partition in one intra-DC hop), so
    /// clients spread over a DC's nodes spread the load; a Redis Cluster client
    /// (`redis-benchmark --cluster`) reads `CLUSTER SLOTS` and skips the hop.
    #[arg(long)]
    resp_every_node: bool,
    /// TLS everywhere: node links (mutual TLS), client and RESP ports, with a throwaway CA
    /// and node certificate generated into DIR/tls (`redis-cli --tls --cacert
    /// DIR/tls/ca.pem`, `causeway cli --tls-ca DIR/tls/ca.pem`).
    #[arg(long)]
    tls: bool,
    /// Sets SECTION.KEY = VALUE in the cluster file's `[limits]`, `[timing]` or `[storage]`
    /// (repeatable; e.g. `--cluster-set limits.link_queue_max=4096`).
    #[arg(long = "cluster-set", value_name = "SECTION.KEY=VALUE")]
    cluster_set: Vec<String>,
    /// Whose causal past a client session starts each transaction from: `endpoint` (every
    /// connection of the node's endpoint: a write acknowledged to one connection is seen
    /// by the next transaction of any) or `connection` (its own, as in the papers). RESP
    /// clients switch with `CLIENT SESSION` (docs/REDIS.md).
    #[arg(long, value_enum, default_value = "endpoint")]
    session_scope: SessionScopeArg,
}

/// `--session-scope` (the cluster file's `session_scope`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SessionScopeArg {
    Endpoint,
    Connection,
}

/// The cluster-file sections `--cluster-set` may change.
const CLUSTER_SET_SECTIONS: [&str; 4] = ["limits", "timing", "storage", "runtime"];

/// `--durability` (the cluster file's `[storage] durability`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DurabilityArg {
    Sync,
    Batched,
}

/// Largest `--rtt-ms`.
const RTT_MS_MAX: f64 = 10_000.0;

/// The same round trip between every pair of DCs.
fn uniform_rtt(dcs: u16, rtt_ms: f64) -> Result<Vec<Vec<f64>>, String> {
    if !(0.0..=RTT_MS_MAX).contains(&rtt_ms) {
        return Err(format!(
            "--rtt-ms {rtt_ms} is out of range; fix: pass 0 to {RTT_MS_MAX}"
        ));
    }
    let n = usize::from(dcs);
    Ok((0..n)
        .map(|a| (0..n).map(|b| if a == b { 0.0 } else { rtt_ms }).collect())
        .collect())
}

/// The protocol `up` runs without `--protocol`: the first of these this build has.
const DEFAULT_PROTOCOLS: [&str; 3] = ["unistore", "cure", "eventual"];

fn default_protocol() -> String {
    DEFAULT_PROTOCOLS
        .into_iter()
        .find(|p| causeway_protocols::PROTOCOLS.contains(p))
        .unwrap_or("eventual")
        .to_string()
}

/// Parses one `--set KEY=VALUE`: VALUE as a TOML value (`1`, `true`, `"text"`), or as a
/// bare string when it is not one.
pub(crate) fn parse_setting(setting: &str) -> Result<(String, toml::Value), String> {
    let Some((key, value)) = setting.split_once('=') else {
        return Err(format!(
            "--set {setting}: expected KEY=VALUE, e.g. --set f=1"
        ));
    };
    let key = key.trim();
    if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!(
            "--set {setting}: the key must be a setting name (letters, digits, _)"
        ));
    }
    let value = value.trim();
    let parsed = toml::from_str::<toml::Table>(&format!("v = {value}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(value.to_string()));
    Ok((key.to_string(), parsed))
}

/// The running protocol's section from `--set` and `--f` (none when neither is given).
fn protocol_section(args: &UpArgs) -> Result<Option<toml::Table>, String> {
    let mut table = toml::Table::new();
    for setting in &args.set {
        let (key, value) = parse_setting(setting)?;
        table.insert(key, value);
    }
    if let Some(f) = args.f {
        table.insert("f".into(), toml::Value::Integer(i64::from(f)));
    }
    Ok((!table.is_empty()).then_some(table))
}

/// The cluster `up` runs, from its options (validated).
fn cluster_config(args: &UpArgs, data: PathBuf) -> Result<ClusterConfig, String> {
    let protocol = args.protocol.clone().unwrap_or_else(default_protocol);
    if args.dcs == 0 || args.dcs > 64 || args.nodes_per_dc == 0 || args.nodes_per_dc > 64 {
        return Err("--dcs and --nodes-per-dc must be between 1 and 64".into());
    }
    let mut config = local_cluster(
        &protocol,
        args.dcs,
        args.nodes_per_dc,
        data,
        args.port_base,
        args.resp_port_base,
    )
    .map_err(|e| e.replace("cluster file: ", ""))?;
    if let Some(partitions) = args.partitions {
        (config.partitions_per_node, config.partitions) = (None, Some(partitions));
    }
    // Full replication is the default: left out of the file, so that `--replication DCS`
    // and no flag make the same cluster.
    config.replication_factor = args.replication.filter(|r| *r != args.dcs);
    if let Some(rtt) = args.rtt_ms {
        config.rtt_ms = Some(uniform_rtt(args.dcs, rtt)?);
    }
    if let Some(section) = protocol_section(args)? {
        config.protocols.insert(protocol, section);
    }
    assign_metrics_ports(&mut config, args.metrics_port_base)?;
    if args.resp_every_node {
        if args.resp_port_base == 0 {
            return Err("--resp-every-node needs RESP ports; fix: drop --resp-port-base 0".into());
        }
        assign_resp_ports(&mut config, args.resp_port_base)?;
    }
    config.storage.durability = match args.durability {
        DurabilityArg::Sync => Durability::Sync,
        DurabilityArg::Batched => Durability::Batched,
    };
    config.storage.batched_sync_interval_ms = args.batched_sync_interval_ms;
    config.session_scope = match args.session_scope {
        SessionScopeArg::Endpoint => SessionScope::Endpoint,
        SessionScopeArg::Connection => SessionScope::Connection,
    };
    if args.tls {
        config.tls = Some(throwaway_tls_files(&config.data_dir));
    }
    config.validate().map_err(|e| flag_names(&e))?;
    apply_cluster_settings(config, &args.cluster_set)
}

/// Applies every `--cluster-set SECTION.KEY=VALUE` to the file `config` would write, and
/// parses (so validates) the result.
fn apply_cluster_settings(
    config: ClusterConfig,
    settings: &[String],
) -> Result<ClusterConfig, String> {
    if settings.is_empty() {
        return Ok(config);
    }
    let mut table: toml::Table =
        toml::from_str(&config.to_toml()).map_err(|e| format!("cluster file: {e}"))?;
    for setting in settings {
        let bad = || {
            let sections = CLUSTER_SET_SECTIONS.join(", ");
            format!("--cluster-set {setting}: expected SECTION.KEY=VALUE with SECTION one of {sections}")
        };
        let (section, rest) = setting.split_once('.').ok_or_else(bad)?;
        if !CLUSTER_SET_SECTIONS.contains(&section) {
            return Err(bad());
        }
        let (key, value) = parse_setting(rest).map_err(|_| bad())?;
        let entry = table
            .entry(section)
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        let section_table = entry.as_table_mut().ok_or_else(bad)?;
        section_table.insert(key, value);
    }
    let text = toml::to_string(&table).map_err(|e| format!("cluster file: {e}"))?;
    ClusterConfig::parse(&text).map_err(|e| format!("--cluster-set: {e}"))
}

/// A validation error as `up`'s user should read it: naming the flag that set the field.
fn flag_names(e: &str) -> String {
    e.replace("cluster file: field `replication_factor`", "--replication")
        .replace(
            "cluster file: field `storage.batched_sync_interval_ms`",
            "--batched-sync-interval-ms",
        )
        .replace("cluster file: field `partitions`", "--partitions")
}

/// Writes the cluster file (mode 0600: it holds the cluster secret), refusing to reuse a
/// data directory made for another cluster. A new cluster gets a fresh random secret; a
/// data directory's existing file keeps its own.
fn prepare(args: &UpArgs) -> Result<(ClusterConfig, PathBuf), String> {
    let data = std::path::absolute(&args.data).map_err(|e| format!("--data: {e}"))?;
    let mut config = cluster_config(args, data.clone())?;
    std::fs::create_dir_all(&data).map_err(|e| format!("cannot create {}: {e}", data.display()))?;
    let path = data.join("cluster.toml");
    let old = std::fs::read_to_string(&path)
        .ok()
        .and_then(|text| ClusterConfig::parse(&text).ok().map(|c| (text, c)));
    if let Some((text, mut old)) = old {
        let secret = old.secret.take();
        if old.to_toml() != config.to_toml() {
            return Err(format!(
                "{} holds a different cluster (another protocol, size, replication, ports or protocol settings); fix: pass another --data directory or delete this one",
                data.display()
            ));
        }
        config.secret = secret;
        if config.secret.is_some() && config.to_toml() == text {
            restrict(&path)?;
            return Ok((config, path));
        }
    }
    if config.secret.is_none() {
        config.secret = Some(random_secret()?.into());
    }
    ensure_tls_files(&config)?;
    write_private(&path, &config.to_toml())?;
    Ok((config, path))
}

/// Where `up --tls` keeps its throwaway CA and node certificate: DIR/tls.
fn throwaway_tls_files(data: &Path) -> causeway_runtime::config::TlsConfig {
    let dir = data.join("tls");
    causeway_runtime::config::TlsConfig {
        ca_file: dir.join("ca.pem"),
        cert_file: dir.join("node.pem"),
        key_file: dir.join("node.key"),
        server_name: None,
    }
}

/// Generates the throwaway CA and node certificate of `up --tls` unless the data
/// directory already has them (a rerun keeps them, so clients keep trusting the CA).
fn ensure_tls_files(config: &ClusterConfig) -> Result<(), String> {
    let Some(tls) = &config.tls else {
        return Ok(());
    };
    let have = [&tls.ca_file, &tls.cert_file, &tls.key_file];
    if have.iter().all(|f| f.exists()) {
        return Ok(());
    }
    let dir = tls.ca_file.parent().expect("DIR/tls/ca.pem has a parent");
    causeway_runtime::tls::generate_throwaway(dir).map(|_| ())
}

/// 32 random bytes from the operating system, as 64 hex digits.
fn random_secret() -> Result<String, String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| format!("no randomness for the cluster secret: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Writes `text` to `path`, readable and writable by the owner only.
fn write_private(path: &Path, text: &str) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let err = |e: std::io::Error| format!("cannot write {}: {e}", path.display());
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(err)?;
    restrict(path)?;
    file.write_all(text.as_bytes()).map_err(err)
}

/// Makes `path` readable and writable by its owner only.
fn restrict(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("cannot restrict {}: {e}", path.display()))
}

/// `--resp-every-node`: node k without a RESP endpoint gets one at `base + 64 + k` (after the DC ports, base+1..=base+64).
fn assign_resp_ports(config: &mut ClusterConfig, base: u16) -> Result<(), String> {
    for (k, node) in config.nodes.iter_mut().enumerate() {
        if node.resp_addr.is_some() {
            continue;
        }
        let port = u16::try_from(usize::from(base) + 64 + k).map_err(|_| {
            format!("--resp-port-base {base}: node {k}'s RESP port is out of range; fix: lower it")
        })?;
        node.resp_addr = Some(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    }
    Ok(())
}

/// Node k (from 0) serves metrics at `base + k`; `base` 0 turns the endpoints off.
fn assign_metrics_ports(config: &mut ClusterConfig, base: u16) -> Result<(), String> {
    if base == 0 {
        return Ok(());
    }
    for (k, node) in config.nodes.iter_mut().enumerate() {
        let port = u16::try_from(usize::from(base) + k).map_err(|_| {
            format!("metrics port {base}+{k} is out of range; fix: lower --metrics-port-base")
        })?;
        node.metrics_addr = Some(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    }
    Ok(())
}

/// One node process `up` started.
struct NodeProc {
    name: String,
    dc: String,
    child: Child,
    /// Set once the process has exited and been reported.
    exited: Option<ExitStatus>,
    /// When this process started (a node up this long gets its backoff reset).
    started: Instant,
    /// Killed through `causeway ctl`: stays dead until `ctl start` or `ctl restart`.
    held: bool,
    /// The delay before the next restart (`--on-node-exit restart`).
    backoff: Duration,
    /// When the exited node is due to start again.
    restart_at: Option<Instant>,
    restarts: u32,
}

/// The first restart delay of a node that died, doubled while it keeps dying.
const RESTART_BACKOFF_MIN: Duration = Duration::from_millis(200);
const RESTART_BACKOFF_MAX: Duration = Duration::from_secs(10);
/// A node that stayed up this long before dying restarts after the minimum delay again.
const RESTART_BACKOFF_RESET: Duration = Duration::from_secs(30);

impl NodeProc {
    fn new(name: &str, dc: &str, child: Child) -> NodeProc {
        NodeProc {
            name: name.to_string(),
            dc: dc.to_string(),
            child,
            exited: None,
            held: false,
            started: Instant::now(),
            backoff: Duration::ZERO,
            restart_at: None,
            restarts: 0,
        }
    }

    /// Schedules the restart of a node that just exited; the delay.
    fn schedule_restart(&mut self) -> Duration {
        self.backoff = if self.started.elapsed() >= RESTART_BACKOFF_RESET || self.backoff.is_zero()
        {
            RESTART_BACKOFF_MIN
        } else {
            (self.backoff * 2).min(RESTART_BACKOFF_MAX)
        };
        self.restart_at = Some(Instant::now() + self.backoff);
        self.backoff
    }
}

fn spawn_node(config_path: &Path, data: &Path, name: &str) -> Result<Child, String> {
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find the causeway binary: {e}"))?;
    let (log, err) = logs::node_output(data, name)?;
    let mut cmd = Command::new(exe);
    cmd.args(["server", "--config"])
        .arg(config_path)
        .args(["--node", name])
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err);
    stop_with_parent(&mut cmd);
    cmd.spawn()
        .map_err(|e| format!("cannot start node {name}: {e}"))
}

/// Asks the kernel to SIGTERM the node when `up` dies (even by SIGKILL), so no node is left
/// orphaned. PR_SET_PDEATHSIG follows the spawning thread: nodes are spawned from the main
/// thread, which lives as long as `up`.
fn stop_with_parent(cmd: &mut Command) {
    let parent = std::process::id();
    // SAFETY: prctl(2) and getppid(2) are async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            if libc::getppid() as u32 != parent {
                return Err(std::io::Error::other("causeway up exited"));
            }
            Ok(())
        });
    }
}

/// Starts every node of the cluster (stopping those started if one cannot be).
fn spawn_all(config: &ClusterConfig, path: &Path) -> Result<Vec<NodeProc>, String> {
    let mut nodes = Vec::new();
    for node in &config.nodes {
        match spawn_node(path, &config.data_dir, &node.name) {
            Ok(child) => nodes.push(NodeProc::new(&node.name, &node.dc, child)),
            Err(e) => {
                stop_all(&mut nodes);
                return Err(e);
            }
        }
    }
    Ok(nodes)
}

/// Writes `DATA/up.pids`: one `NAME DC PID` line per node.
fn write_pids(data: &Path, nodes: &[NodeProc]) -> Result<(), String> {
    let text: String = nodes
        .iter()
        .map(|n| format!("{} {} {}\n", n.name, n.dc, n.child.id()))
        .collect();
    let path = data.join(PID_FILE);
    std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn wait_ready(config: &ClusterConfig, nodes: &mut [NodeProc]) -> Result<(), String> {
    let deadline = Instant::now() + READY_TIMEOUT;
    for node in config.nodes.iter() {
        let Some(addr) = node.client_addr else {
            continue;
        };
        while std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            if let Some(dead) = newly_exited(nodes, &config.data_dir).first() {
                return Err(dead.1.clone());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "DC {} did not open {addr} within {READY_TIMEOUT:?}",
                    node.dc
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    Ok(())
}

/// The last non-empty line of a node's log (why it exited, usually).
fn last_log_line(data: &Path, name: &str) -> String {
    let text = std::fs::read_to_string(data.join(format!("{name}.log"))).unwrap_or_default();
    let line = text.lines().rev().find(|l| !l.trim().is_empty());
    line.unwrap_or("").trim().to_string()
}

/// One line per node that exited since the last call (each is reported once).
/// The nodes that exited since the last look: their index and report line.
fn newly_exited(nodes: &mut [NodeProc], data: &Path) -> Vec<(usize, String)> {
    let mut lines = Vec::new();
    for (k, node) in nodes.iter_mut().enumerate() {
        if node.exited.is_some() {
            continue;
        }
        if let Ok(Some(status)) = node.child.try_wait() {
            node.exited = Some(status);
            lines.push((k, exit_line(node, status, data)));
        }
    }
    lines
}

/// `node NAME of DC DC exited (STATUS)`, with the log's last line when the node exited by
/// itself (its error, usually) rather than by a signal.
fn exit_line(node: &NodeProc, status: ExitStatus, data: &Path) -> String {
    let log = data.join(format!("{}.log", node.name));
    let why = match status.code() {
        Some(_) => {
            // The log thread copies the node's last lines after it exits.
            std::thread::sleep(LOG_SETTLE);
            format!(": {}", last_log_line(data, &node.name))
        }
        None => String::new(),
    };
    format!(
        "node {} of DC {} exited ({status}){why} (log: {})",
        node.name,
        node.dc,
        log.display()
    )
}

fn stop_all(nodes: &mut [NodeProc]) {
    for node in nodes.iter().filter(|n| n.exited.is_none()) {
        // SAFETY: kill(2) on the pid of a child we spawned and have not reaped.
        unsafe {
            libc::kill(node.child.id() as libc::pid_t, libc::SIGTERM);
        }
    }
    let deadline = Instant::now() + STOP_TIMEOUT;
    for node in nodes.iter_mut() {
        loop {
            match node.child.try_wait() {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) if Instant::now() > deadline => {
                    eprintln!(
                        "node {} did not stop in {STOP_TIMEOUT:?}; killing it",
                        node.name
                    );
                    let _ = node.child.kill();
                    let _ = node.child.wait();
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }
}

/// Binds the page's port before any node starts, so a taken port fails at once.
fn bind_page(args: &UpArgs) -> Result<Option<std::net::TcpListener>, String> {
    // The page is built from the metrics endpoints: none, no page.
    if args.http_port == 0 || args.metrics_port_base == 0 {
        return Ok(None);
    }
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], args.http_port));
    let listener = std::net::TcpListener::bind(addr).map_err(|e| {
        format!(
            "cannot listen on {addr} for the cluster page: {e}; fix: pass another --http-port (0: no page)"
        )
    })?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    Ok(Some(listener))
}

fn print_addresses(config: &ClusterConfig, data: &Path, page: Option<&std::net::TcpListener>) {
    println!(
        "causeway: cluster '{}' running protocol {} ({} nodes)",
        config.cluster,
        config.protocol,
        config.nodes.len()
    );
    let topology = config.topology();
    if topology.replication_factor < topology.dcs {
        println!(
            "  {} partitions, each stored in {} of the {} DCs (clients reach the others at a replica in another DC)",
            topology.partitions, topology.replication_factor, topology.dcs
        );
    }
    for node in &config.nodes {
        if let Some(addr) = node.client_addr {
            let resp = node
                .resp_addr
                .map(|a| format!(", RESP at {a}"))
                .unwrap_or_default();
            println!("  {}: clients at {addr}{resp}", node.dc);
        }
    }
    for node in config.nodes.iter().filter(|n| n.client_addr.is_none()) {
        if let Some(addr) = node.resp_addr {
            println!("  {}: RESP also at {addr} (node {})", node.dc, node.name);
        }
    }
    for node in &config.nodes {
        if let Some(addr) = node.metrics_addr {
            println!("  {}: metrics at http://{addr}/metrics", node.name);
        }
    }
    if let Some(addr) = page.and_then(|l| l.local_addr().ok()) {
        println!("  cluster page at http://{addr}/ (in a terminal: causeway top --addr {addr})");
    }
    if let Some(tls) = &config.tls {
        let ca = tls.ca_file.display();
        println!("  TLS on every port (throwaway CA {ca}): redis-cli --tls --cacert {ca} -p PORT, causeway cli --tls-ca {ca}");
    }
    println!("  data and logs in {}", data.display());
    println!(
        "  node pids in {} (NAME DC PID per line)",
        data.join(PID_FILE).display()
    );
    println!(
        "  try: causeway cli --addr {} -c \"begin; set photo p1; commit\"",
        config.nodes[0]
            .client_addr
            .expect("dc1 has a client address")
    );
    println!("press Ctrl-C to stop");
}

/// Starts the nodes and waits until every DC answers.
fn start(config: &ClusterConfig, path: &Path) -> Result<Vec<NodeProc>, String> {
    let mut nodes = spawn_all(config, path)?;
    let ready = write_pids(&config.data_dir, &nodes).and_then(|()| wait_ready(config, &mut nodes));
    if let Err(e) = ready {
        stop_all(&mut nodes);
        return Err(e);
    }
    Ok(nodes)
}

pub fn run(args: UpArgs) -> ExitCode {
    let prepared = prepare(&args).and_then(|p| Ok((p, bind_page(&args)?)));
    let ((config, path), page) = match prepared {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let data = config.data_dir.clone();
    let mut nodes = match start(&config, &path) {
        Ok(nodes) => nodes,
        Err(e) => {
            eprintln!("error: {e}");
            let _ = std::fs::remove_file(data.join(PID_FILE));
            return ExitCode::FAILURE;
        }
    };
    print_addresses(&config, &data, page.as_ref());
    let page = page.map(|l| (l, config.clone()));
    let policy = if args.no_restart {
        OnNodeExit::Keep
    } else {
        args.on_node_exit
    };
    let code = supervise(&mut nodes, &path, &data, policy, page);
    stop_all(&mut nodes);
    let _ = std::fs::remove_file(data.join(PID_FILE));
    let _ = std::fs::remove_file(data.join(ctl::SOCKET_FILE));
    println!("causeway: stopped");
    code
}

/// Reports nodes that exited since the last look (scheduling their restart under
/// `restart`); whether `up` should stop now.
fn report_exits(nodes: &mut [NodeProc], data: &Path, policy: OnNodeExit) -> Option<ExitCode> {
    let exits = newly_exited(nodes, data);
    for (k, line) in &exits {
        match policy {
            OnNodeExit::Restart => {
                let delay = nodes[*k].schedule_restart();
                eprintln!(
                    "warning: {line}; restarting it in {} ms, the other nodes keep running",
                    delay.as_millis()
                );
            }
            OnNodeExit::Keep => eprintln!("warning: {line}; the other nodes keep running"),
            OnNodeExit::Stop => eprintln!("error: {line}; stopping the cluster"),
        }
    }
    let stop = !exits.is_empty() && policy == OnNodeExit::Stop;
    let all_gone = nodes
        .iter()
        .all(|n| n.exited.is_some() && n.restart_at.is_none() && !n.held);
    if stop || all_gone {
        if !stop {
            eprintln!("error: every node has exited; stopping");
        }
        return Some(ExitCode::FAILURE);
    }
    None
}

/// Starts again every node whose restart is due; rewrites the pid file when one did.
fn restart_due(nodes: &mut [NodeProc], config_path: &Path, data: &Path) {
    let now = Instant::now();
    let mut restarted = false;
    for node in nodes.iter_mut() {
        if node.restart_at.is_none_or(|at| at > now) {
            continue;
        }
        match spawn_node(config_path, data, &node.name) {
            Ok(child) => {
                node.child = child;
                node.exited = None;
                node.restart_at = None;
                node.started = now;
                node.restarts += 1;
                restarted = true;
                eprintln!(
                    "node {} of DC {} restarted (pid {}, restart {})",
                    node.name,
                    node.dc,
                    node.child.id(),
                    node.restarts
                );
            }
            Err(e) => {
                let delay = node.schedule_restart();
                eprintln!("warning: {e}; trying again in {} ms", delay.as_millis());
            }
        }
    }
    if restarted {
        if let Err(e) = write_pids(data, nodes) {
            eprintln!("warning: {e}");
        }
    }
}

/// Waits for Ctrl-C / SIGTERM (success) while reporting nodes that exit on their own;
/// returns failure when one does under `--on-node-exit stop`, or when every node has.
/// Serves the cluster page meanwhile when `page` has its listener.
fn supervise(
    nodes: &mut [NodeProc],
    config_path: &Path,
    data: &Path,
    policy: OnNodeExit,
    page: Option<(std::net::TcpListener, ClusterConfig)>,
) -> ExitCode {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("build the tokio runtime");
    runtime.block_on(async {
        if let Some((listener, config)) = page {
            match tokio::net::TcpListener::from_std(listener) {
                Ok(l) => {
                    let elsewhere =
                        causeway_runtime::metrics_http::elsewhere("cluster page (HTTP)", None, None);
                    let serve = causeway_runtime::dashboard::serve(l, config, elsewhere.into());
                    drop(tokio::spawn(serve));
                }
                Err(e) => eprintln!("warning: the cluster page cannot be served: {e}"),
            }
        }
        let signal = crate::server_cmd::shutdown_signal();
        tokio::pin!(signal);
        let control = ctl::bind(data)
            .inspect_err(|e| eprintln!("warning: {e}; causeway ctl will not reach this up"))
            .ok();
        loop {
            tokio::select! {
                _ = &mut signal => return ExitCode::SUCCESS,
                Ok((stream, _)) = async { control.as_ref().expect("guarded").accept().await }, if control.is_some() => {
                    ctl::serve_one(stream, nodes, config_path, data).await;
                }
                _ = tokio::time::sleep(Duration::from_millis(200)) => {
                    if let Some(code) = report_exits(nodes, data, policy) {
                        return code;
                    }
                    restart_due(nodes, config_path, data);
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        up: UpArgs,
    }

    fn args(extra: &[&str]) -> UpArgs {
        let argv = ["up", "--data", "/tmp/causeway-up-unit"]
            .iter()
            .chain(extra);
        Cli::try_parse_from(argv).expect("valid options").up
    }

    #[test]
    fn up_writes_a_private_cluster_file_with_a_random_secret_it_keeps() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("causeway-up-secret-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut a = args(&[]);
        a.data = dir.clone();
        let (config, path) = prepare(&a).unwrap();
        let secret = config.secret.clone().expect("a secret");
        assert_eq!(secret.len(), 64);
        assert!(
            secret.bytes().all(|b| b.is_ascii_hexdigit()),
            "{}",
            secret.expose()
        );
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let on_disk = ClusterConfig::load(&path).unwrap();
        assert_eq!(on_disk.secret.as_deref(), Some(secret.expose()));
        let (again, _) = prepare(&a).unwrap();
        assert_eq!(again.secret, Some(secret), "a rerun keeps the secret");
        let other =
            std::env::temp_dir().join(format!("causeway-up-secret2-{}", std::process::id()));
        let mut b = args(&[]);
        b.data = other.clone();
        let (fresh, _) = prepare(&b).unwrap();
        assert_ne!(fresh.secret, again.secret, "each cluster gets its own");
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_dir_all(&other);
    }

    #[test]
    fn set_and_f_fill_the_running_protocols_section() {
        let a = args(&["--protocol", "unistore", "--f", "1", "--set", "lease_ns=5"]);
        let config = cluster_config(&a, "/tmp/causeway-up-unit".into()).unwrap();
        let section = config.section();
        assert_eq!(section, serde_json::json!({ "f": 1, "lease_ns": 5 }));
        assert!(config.to_toml().contains("[protocols.unistore]"));
        assert_eq!(a.on_node_exit, OnNodeExit::Restart, "the default");
        assert!(args(&["--no-restart"]).no_restart);
    }

    #[test]
    fn cluster_set_changes_limits_and_refuses_unknown_places() {
        let c = cluster_config(
            &args(&["--cluster-set", "limits.link_queue_max=4096"]),
            "/tmp/x".into(),
        )
        .unwrap();
        assert_eq!(c.limits.link_queue_max, 4096);
        let c = cluster_config(
            &args(&["--cluster-set", "storage.durability=batched"]),
            "/tmp/x".into(),
        )
        .unwrap();
        assert_eq!(c.storage.durability, Durability::Batched);
        for bad in [
            "nodes.x=1",
            "limits.nosuch=1",
            "limits.link_queue_max=0",
            "nodot",
        ] {
            let e = cluster_config(&args(&["--cluster-set", bad]), "/tmp/x".into()).unwrap_err();
            assert!(e.contains("--cluster-set"), "{bad}: {e}");
        }
    }

    #[test]
    fn resp_every_node_gives_each_node_a_resp_port() {
        let c =
            cluster_config(&args(&["--dcs", "2", "--resp-every-node"]), "/tmp/x".into()).unwrap();
        let ports: Vec<u16> = c
            .nodes
            .iter()
            .map(|n| n.resp_addr.unwrap().port())
            .collect();
        assert_eq!(ports, vec![7001, 7065, 7002, 7067], "firsts keep DC ports");
        let c = cluster_config(&args(&["--dcs", "2"]), "/tmp/x".into()).unwrap();
        assert_eq!(c.nodes.iter().filter(|n| n.resp_addr.is_some()).count(), 2);
    }

    /// As with the metrics and page ports, 0 turns RESP off (it used to listen at ports 1,
    /// 2, 3, ...), and then no node can serve RESP.
    #[test]
    fn resp_port_base_zero_means_no_resp_endpoint() {
        let c = cluster_config(
            &args(&["--dcs", "3", "--resp-port-base", "0"]),
            "/tmp/x".into(),
        )
        .unwrap();
        assert!(c.nodes.iter().all(|n| n.resp_addr.is_none()));
        assert!(c.nodes.iter().any(|n| n.client_addr.is_some()));
        let both = ["--resp-port-base", "0", "--resp-every-node"];
        let e = cluster_config(&args(&both), "/tmp/x".into()).unwrap_err();
        assert!(e.contains("--resp-every-node") && e.contains("fix:"), "{e}");
    }

    #[test]
    fn unistore_is_the_default_protocol() {
        let config = cluster_config(&args(&[]), "/tmp/causeway-up-unit".into()).unwrap();
        assert_eq!(config.protocol, "unistore");
        let config = cluster_config(&args(&["--f", "1"]), "/tmp/causeway-up-unit".into());
        assert_eq!(config.unwrap().section(), serde_json::json!({ "f": 1 }));
        let config = cluster_config(&args(&["--dcs", "1"]), "/tmp/causeway-up-unit".into());
        assert_eq!(
            config.unwrap().protocol,
            "unistore",
            "f defaults to 0 with one DC"
        );
    }

    #[test]
    fn bad_settings_are_refused_with_the_reason() {
        let a = args(&["--protocol", "cure", "--f", "1"]);
        let e = cluster_config(&a, "/tmp/x".into()).unwrap_err();
        assert!(
            e.contains("protocols.cure") && e.contains("unknown field `f`"),
            "{e}"
        );
        let a = args(&["--protocol", "unistore", "--f", "3"]);
        let e = cluster_config(&a, "/tmp/x".into()).unwrap_err();
        assert!(e.contains("f = 3 needs at least f+1 = 4 DCs"), "{e}");
        assert!(parse_setting("f").is_err());
        assert!(parse_setting("a.b=1").is_err());
        let (key, value) = parse_setting(" name = some text").unwrap();
        assert_eq!((key.as_str(), value.as_str()), ("name", Some("some text")));
    }

    #[test]
    fn replication_and_partitions_go_into_the_cluster_file() {
        let a = args(&["--protocol", "cure", "--partitions", "6"]);
        let config = cluster_config(&a, "/tmp/x".into()).unwrap();
        assert_eq!(
            (config.partitions, config.partitions_per_node),
            (Some(6), None)
        );
        assert_eq!(config.topology().partitions, 6);
        // --replication DCS is the default, full replication: the file leaves it out.
        let full = cluster_config(&args(&["--protocol", "cure"]), "/tmp/x".into()).unwrap();
        let same = args(&["--protocol", "cure", "--replication", "3"]);
        let same = cluster_config(&same, "/tmp/x".into()).unwrap();
        assert_eq!(same.to_toml(), full.to_toml());
        assert!(!full.to_toml().contains("replication_factor"));
        let a = args(&["--protocol", "cure", "--replication", "2"]);
        let e = cluster_config(&a, "/tmp/x".into()).unwrap_err();
        assert!(
            e.starts_with("--replication: protocol cure needs full replication")
                && e.contains("2 of the 3 DCs; fix: set it to 3 or leave it out"),
            "{e}"
        );
        let a = args(&["--protocol", "cure", "--replication-factor", "4"]);
        let e = cluster_config(&a, "/tmp/x".into()).unwrap_err();
        assert!(
            e.starts_with("--replication: 4 is out of range for 3 DCs"),
            "{e}"
        );
        let a = args(&["--protocol", "cure", "--partitions", "1"]);
        let e = cluster_config(&a, "/tmp/x".into()).unwrap_err();
        assert!(
            e.starts_with("--partitions: 1 partitions for 2 nodes per DC"),
            "{e}"
        );
        for p in causeway_runtime::config::partial_replication_protocols() {
            let a = args(&["--protocol", p, "--nodes-per-dc", "1", "--partitions", "3"]);
            let a = UpArgs {
                replication: Some(2),
                ..a
            };
            let config = cluster_config(&a, "/tmp/x".into()).unwrap();
            assert!(config.to_toml().contains("replication_factor = 2"));
            assert_eq!(
                config.topology(),
                causeway_core::Topology::partial(3, 1, 3, 2)
            );
        }
    }
}
