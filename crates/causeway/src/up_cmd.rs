//! `causeway up`: a whole local multi-DC cluster on loopback from one command.
//!
//! Writes the cluster file `DATA/cluster.toml` (DC i, from 1, serves clients at
//! 127.0.0.1:PORT_BASE+i and RESP at 127.0.0.1:RESP_PORT_BASE+i; node k listens for peers
//! at PORT_BASE+100+k and serves Prometheus metrics at 127.0.0.1:METRICS_PORT_BASE+k),
//! starts one `causeway server` process per node with its log in
//! `DATA/NODE.log`, waits until every DC answers, prints the addresses and runs until
//! Ctrl-C or SIGTERM; then it asks every node to stop (SIGTERM) and waits for them.
//! Meanwhile it serves the live cluster page (`causeway_runtime::dashboard`) at
//! http://127.0.0.1:HTTP_PORT/, built from scraping every node's metrics each second.

use causeway_runtime::{local_cluster, ClusterConfig};
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

/// How long `up` waits for every DC's client endpoint to accept connections.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a node may take to stop after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(15);

#[derive(Args)]
pub struct UpArgs {
    /// Protocol to run (default: cure when this build has it, else eventual).
    #[arg(long)]
    protocol: Option<String>,
    #[arg(long, default_value_t = 3)]
    dcs: u16,
    #[arg(long, default_value_t = 2)]
    nodes_per_dc: u32,
    /// Directory for the cluster file, node logs and data (reused across runs).
    #[arg(long, default_value = "causeway-data")]
    data: PathBuf,
    /// DC i (from 1) serves native clients at 127.0.0.1:PORT_BASE+i.
    #[arg(long, default_value_t = 7100)]
    port_base: u16,
    /// DC i (from 1) serves RESP at 127.0.0.1:RESP_PORT_BASE+i.
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

fn default_protocol() -> String {
    let cure = causeway_protocols::PROTOCOLS.contains(&"cure");
    if cure { "cure" } else { "eventual" }.to_string()
}

/// Writes the cluster file, refusing to reuse a data directory made for another cluster.
fn prepare(args: &UpArgs) -> Result<(ClusterConfig, PathBuf), String> {
    let protocol = args.protocol.clone().unwrap_or_else(default_protocol);
    if args.dcs == 0 || args.dcs > 64 || args.nodes_per_dc == 0 || args.nodes_per_dc > 64 {
        return Err("--dcs and --nodes-per-dc must be between 1 and 64".into());
    }
    let data = std::path::absolute(&args.data).map_err(|e| format!("--data: {e}"))?;
    let mut config = local_cluster(
        &protocol,
        args.dcs,
        args.nodes_per_dc,
        data.clone(),
        args.port_base,
        args.resp_port_base,
    )
    .map_err(|e| e.replace("cluster file: ", ""))?;
    if let Some(rtt) = args.rtt_ms {
        config.rtt_ms = Some(uniform_rtt(args.dcs, rtt)?);
    }
    assign_metrics_ports(&mut config, args.metrics_port_base)?;
    config.validate()?;
    std::fs::create_dir_all(&data).map_err(|e| format!("cannot create {}: {e}", data.display()))?;
    let path = data.join("cluster.toml");
    let text = config.to_toml();
    if let Ok(old) = std::fs::read_to_string(&path) {
        if old != text {
            return Err(format!(
                "{} holds a different cluster (another protocol, size or ports); fix: pass another --data directory or delete this one",
                data.display()
            ));
        }
    }
    std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok((config, path))
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

fn spawn_node(config_path: &Path, data: &Path, name: &str) -> Result<Child, String> {
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find the causeway binary: {e}"))?;
    let log_path = data.join(format!("{name}.log"));
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(|e| format!("cannot open {}: {e}", log_path.display()))?;
    let err = log.try_clone().map_err(|e| e.to_string())?;
    Command::new(exe)
        .args(["server", "--config"])
        .arg(config_path)
        .args(["--node", name])
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("cannot start node {name}: {e}"))
}

fn wait_ready(config: &ClusterConfig, children: &mut [(String, Child)]) -> Result<(), String> {
    let deadline = Instant::now() + READY_TIMEOUT;
    for node in config.nodes.iter() {
        let Some(addr) = node.client_addr else {
            continue;
        };
        while std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            if let Some(dead) = exited(children) {
                return Err(dead);
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

/// A line about the first child that exited, if any did.
fn exited(children: &mut [(String, Child)]) -> Option<String> {
    children
        .iter_mut()
        .find_map(|(name, child)| match child.try_wait() {
            Ok(Some(status)) => Some(format!(
                "node {name} exited ({status}); see its log {name}.log in the data directory"
            )),
            _ => None,
        })
}

fn stop_all(children: &mut [(String, Child)]) {
    for (_, child) in children.iter_mut() {
        // SAFETY: kill(2) on the pid of a child we spawned and have not reaped.
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
        }
    }
    let deadline = Instant::now() + STOP_TIMEOUT;
    for (name, child) in children.iter_mut() {
        loop {
            match child.try_wait() {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) if Instant::now() > deadline => {
                    eprintln!("node {name} did not stop in {STOP_TIMEOUT:?}; killing it");
                    let _ = child.kill();
                    let _ = child.wait();
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
    let listener = std::net::TcpListener::bind(addr)
        .map_err(|e| format!("cannot listen on {addr} for the cluster page: {e}; fix: pass another --http-port (0: no page)"))?;
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
    for node in &config.nodes {
        if let Some(addr) = node.client_addr {
            let resp = node
                .resp_addr
                .map(|a| format!(", RESP at {a}"))
                .unwrap_or_default();
            println!("  {}: clients at {addr}{resp}", node.dc);
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
    println!("  data and logs in {}", data.display());
    println!(
        "  try: causeway cli --addr {} -c \"begin; set photo p1; commit\"",
        config.nodes[0]
            .client_addr
            .expect("dc1 has a client address")
    );
    println!("press Ctrl-C to stop");
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
    let mut children = Vec::new();
    for node in &config.nodes {
        match spawn_node(&path, &data, &node.name) {
            Ok(child) => children.push((node.name.clone(), child)),
            Err(e) => {
                eprintln!("error: {e}");
                stop_all(&mut children);
                return ExitCode::FAILURE;
            }
        }
    }
    if let Err(e) = wait_ready(&config, &mut children) {
        eprintln!("error: {e}");
        stop_all(&mut children);
        return ExitCode::FAILURE;
    }
    print_addresses(&config, &data, page.as_ref());
    let code = supervise(&mut children, page.map(|l| (l, config.clone())));
    stop_all(&mut children);
    println!("causeway: stopped");
    code
}

/// Waits for Ctrl-C / SIGTERM (success) or a node exiting on its own (failure), serving
/// the cluster page meanwhile when `page` has its listener.
fn supervise(
    children: &mut [(String, Child)],
    page: Option<(std::net::TcpListener, ClusterConfig)>,
) -> ExitCode {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("build the tokio runtime");
    runtime.block_on(async {
        if let Some((listener, config)) = page {
            match tokio::net::TcpListener::from_std(listener) {
                Ok(l) => drop(tokio::spawn(causeway_runtime::dashboard::serve(l, config))),
                Err(e) => eprintln!("warning: the cluster page cannot be served: {e}"),
            }
        }
        let signal = crate::server_cmd::shutdown_signal();
        tokio::pin!(signal);
        loop {
            tokio::select! {
                _ = &mut signal => return ExitCode::SUCCESS,
                _ = tokio::time::sleep(Duration::from_millis(200)) => {
                    if let Some(dead) = exited(children) {
                        eprintln!("error: {dead}; stopping the cluster");
                        return ExitCode::FAILURE;
                    }
                }
            }
        }
    })
}
