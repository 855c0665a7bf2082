//! `causeway server --config FILE --node NAME`: runs one node of a cluster until SIGINT or
//! SIGTERM, then shuts down cleanly (the log is synced, the counters are logged).
//!
//! Logs go to stderr, one line per event (`tracing` fmt), `--log debug` for more.
//!
//! When the node has a `resp_addr`, it also serves the Redis protocol there: the RESP
//! front end (`causeway_resp::serve`) opens one gateway session per connection through
//! [`RespFactory`], the adapter between `causeway_resp::SessionFactory` and the runtime's
//! [`Gateway`]. A standalone command's `Begin`, operations and `Commit` reach the node task
//! as one batch (`call_batch`), and `INFO` shows every gauge the node publishes (the
//! protocol's own, its latest samples, and the number of open `sessions`).
//!
//! `CLUSTER NODES` and `CLUSTER SLOTS` show the node's DC as a Redis Cluster
//! ([`cluster_view`]): each node with a `resp_addr` owns the hash slots of its partitions,
//! and the node answering owns those of the nodes without one (it serves them through the
//! hop), so cluster-aware clients send each key straight to its node.

use causeway_core::{Key, PartitionId, Topology};
use causeway_core::{Request, Response, SessionScope};
use causeway_resp::cluster::{push_range, ClusterNode};
use causeway_resp::{RespConfig, ServerInfo, SessionFactory, SessionHandle};
use causeway_runtime::{ClusterConfig, Gateway, GatewaySession, Server};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct ServerArgs {
    /// The cluster file (TOML; see docs/OPERATIONS.md).
    #[arg(long)]
    config: PathBuf,
    /// This node's name in the cluster file.
    #[arg(long)]
    node: String,
    /// Log level: error, warn, info, debug or trace.
    #[arg(long, default_value = "info")]
    log: String,
    /// Start even though the cluster file has no `secret`: peer connections are then not
    /// authenticated (a test on one machine only)
    #[arg(long)]
    insecure: bool,
}

/// Sends `tracing` events to stderr at `level` and above.
pub fn init_logging(level: &str) -> Result<(), String> {
    use std::io::IsTerminal;
    let level: tracing::Level = level.parse().map_err(|_| {
        format!("unknown log level '{level}'; use error, warn, info, debug or trace")
    })?;
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init()
        .map_err(|e| format!("cannot set up logging: {e}"))
}

/// Completes on SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("install the SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("install the SIGINT handler");
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
        _ = int.recv() => tracing::info!("SIGINT: shutting down"),
    }
}

/// The tokio runtime of `[runtime] worker_threads` (0: current-thread; see `RuntimeConfig`).
fn runtime_builder(worker_threads: u16) -> tokio::runtime::Builder {
    if worker_threads == 0 {
        return tokio::runtime::Builder::new_current_thread();
    }
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.worker_threads(usize::from(worker_threads));
    builder
}

/// Turns transparent huge pages off for this process (`[runtime] transparent_huge_pages`
/// is false by default; see `RuntimeConfig`). Before the runtime and the store allocate:
/// the kernel checks the flag when a page faults in, so every later fault takes 4 KiB.
fn disable_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: prctl(2) with PR_SET_THP_DISABLE reads integer arguments only.
        let rc = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            tracing::warn!("could not turn transparent huge pages off for this node: {e}");
        }
    }
}

pub fn run(args: ServerArgs) -> ExitCode {
    if let Err(e) = init_logging(&args.log) {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let mut config = match ClusterConfig::load(&args.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    config.insecure |= args.insecure;
    if !config.runtime.transparent_huge_pages {
        disable_transparent_huge_pages();
    }
    seed_key_index();
    let runtime = runtime_builder(config.runtime.worker_threads)
        .enable_all()
        .build()
        .expect("build the tokio runtime");
    let result = runtime.block_on(async {
        let mut server = Server::start(&config, &args.node).await?;
        if let Some(addr) = server.placement().spec.resp_addr {
            let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
                format!("cannot listen on {addr} (resp_addr): {e}; fix: free the port or change `resp_addr` in the cluster file")
            })?;
            let resp = RespConfig {
                password: config.password.clone(),
                idle_timeout_ms: config.limits.client_idle_timeout_ms,
                unauthenticated_max: config.limits.unauthenticated_connections_max,
                auth_timeout_ms: config.limits.auth_timeout_ms,
                tls: causeway_runtime::load_tls(&config)?.map(|t| t.clients_config.clone()),
                native_addr: config.dc_endpoints(server.placement()).0,
                ..RespConfig::default()
            };
            let factory = RespFactory {
                gateway: server.gateway(),
                cluster: cluster_view(&config, &args.node),
            };
            server.attach_task(tokio::spawn(async move {
                if let Err(e) = causeway_resp::serve(listener, factory, resp).await {
                    tracing::error!("the RESP endpoint failed: {e}");
                }
            }));
            tracing::info!(%addr, "serving RESP");
        }
        server.run_until(shutdown_signal()).await
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(node = %args.node, "{e}");
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The RESP front end's session factory: one gateway session per RESP connection.
pub struct RespFactory {
    pub gateway: Gateway,
    /// The DC as a Redis Cluster, for `CLUSTER`.
    pub cluster: Vec<ClusterNode>,
}

/// Seeds the stores' key index from the OS before any node is built, so clients cannot
/// choose keys that collide in it (`kit::mvstore::set_key_hash_seed`; Redis seeds its dict
/// hash the same way). Without randomness the index keeps its fixed seed, with a warning.
fn seed_key_index() {
    let mut bytes = [0u8; 8];
    match getrandom::fill(&mut bytes) {
        Ok(()) => {
            let fresh =
                causeway_protocols::kit::mvstore::set_key_hash_seed(u64::from_le_bytes(bytes));
            assert!(fresh, "the key index is seeded once, before any store");
        }
        Err(e) => {
            tracing::warn!("no randomness to seed the key index ({e}): it keeps its fixed seed")
        }
    }
}

/// The Redis Cluster view of `me`'s DC: its nodes with a `resp_addr`, each with the slot
/// ranges of its partitions; `me` also owns the slots of the nodes without one. A node
/// id is 40 hex digits from the cluster's and the node's names, the same on every node.
pub fn cluster_view(config: &ClusterConfig, me: &str) -> Vec<ClusterNode> {
    let placements = config.placements();
    let Some(mine) = placements.iter().find(|p| p.spec.name == me) else {
        return Vec::new();
    };
    let shown: Vec<_> = placements
        .iter()
        .filter(|p| p.dc == mine.dc && (p.spec.resp_addr.is_some() || p.spec.name == me))
        .collect();
    let mut view: Vec<ClusterNode> = shown
        .iter()
        .map(|p| ClusterNode {
            id: node_id(&config.cluster, &p.spec.name),
            ip: p
                .spec
                .resp_addr
                .map_or(String::new(), |a| a.ip().to_string()),
            port: p.spec.resp_addr.map_or(0, |a| a.port()),
            myself: p.spec.name == me,
            slots: Vec::new(),
        })
        .collect();
    let me_at = shown.iter().position(|p| p.spec.name == me).expect("shown");
    let topology = config.topology();
    for p in (0..topology.partitions).map(PartitionId) {
        let owner = topology.node_of(mine.dc, p);
        let at = shown.iter().position(|q| q.id == owner).unwrap_or(me_at);
        push_range(&mut view[at].slots, topology.slots_of(p));
    }
    view
}

/// 40 hex digits (a Redis Cluster node id) from the cluster's and the node's names,
/// hashed with the topology's FNV-1a (`Topology::key_hash`).
fn node_id(cluster: &str, node: &str) -> String {
    let hash = |text: String| Topology::key_hash(&Key(text.into_bytes()));
    let (a, b) = (hash(cluster.to_string()), hash(format!("{cluster}/{node}")));
    let c = hash(format!("{node}/{cluster}")) as u32;
    format!("{a:016x}{b:016x}{c:08x}")
}

/// A gateway session as the RESP front end's session handle.
pub struct RespSession(GatewaySession);

impl SessionHandle for RespSession {
    async fn call(&mut self, req: Request) -> Response {
        self.0.call(req).await
    }

    /// One round trip to the node task for the whole batch (see `GatewaySession`).
    async fn call_batch(&mut self, reqs: Vec<Request>) -> Vec<Response> {
        self.0.call_batch(reqs).await
    }

    fn scope(&self) -> SessionScope {
        self.0.scope()
    }

    fn set_scope(&mut self, scope: SessionScope) -> bool {
        self.0.set_scope(scope);
        true
    }
}

impl SessionFactory for RespFactory {
    type Handle = RespSession;

    /// RESP replies never show which writes a read observed, so its sessions skip them.
    fn open(&self) -> RespSession {
        let mut session = self.gateway.open_session();
        session.skip_observed();
        RespSession(session)
    }

    fn info(&self) -> ServerInfo {
        let info = self.gateway.info();
        let mut gauges = self.gateway.gauges();
        gauges.push(("sessions".to_string(), self.gateway.live_sessions() as f64));
        ServerInfo {
            protocol: info.protocol.clone(),
            dc: u32::from(info.dc.0) + 1,
            dcs: info.dc_names.clone(),
            gauges,
        }
    }

    fn cluster(&self) -> &[ClusterNode] {
        &self.cluster
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_core::topology::{key_slot, SLOTS};
    use causeway_core::DcId;
    use std::net::SocketAddr;

    fn two_dcs(resp_on_every_node: bool) -> ClusterConfig {
        let dir = PathBuf::from("/tmp/causeway-cluster-view");
        let mut config = causeway_runtime::local_cluster("cure", 2, 2, dir, 7400, 7600).unwrap();
        if resp_on_every_node {
            for (i, n) in config.nodes.iter_mut().enumerate() {
                n.resp_addr = Some(SocketAddr::from(([127, 0, 0, 1], 7700 + i as u16)));
            }
        }
        config
    }

    #[test]
    fn each_key_slot_goes_to_the_node_holding_its_partition() {
        let config = two_dcs(true);
        let topology = config.topology();
        let view = cluster_view(&config, "dc2-n1");
        let ports: Vec<u16> = view.iter().map(|n| n.port).collect();
        assert_eq!(ports, [7702, 7703], "the DC's own nodes, in order");
        assert!(view[0].myself && !view[1].myself);
        assert_eq!(view, cluster_view(&config, "dc2-n1"), "ids are stable");
        assert_ne!(view[0].id, view[1].id);
        assert_eq!(view[0].id.len(), 40);
        let mut owner = vec![None; SLOTS];
        for (i, n) in view.iter().enumerate() {
            for &(a, b) in &n.slots {
                for s in a..=b {
                    assert!(owner[usize::from(s)].replace(i).is_none(), "slot {s} twice");
                }
            }
        }
        for key in ["foo", "bar", "{user:1}.name", "k17"] {
            let key = Key(key.as_bytes().to_vec());
            let node = topology.node_of(DcId(1), topology.partition_of(&key));
            let at = owner[usize::from(key_slot(&key.0))].expect("every slot has a node");
            assert_eq!(u32::from(view[at].port) - 7700, node.0);
        }
    }

    #[test]
    fn the_node_answering_owns_the_slots_of_nodes_without_a_resp_port() {
        let config = two_dcs(false);
        let view = cluster_view(&config, "dc1-n1");
        assert_eq!(view.len(), 1);
        assert!(view[0].myself);
        assert_eq!(view[0].slots, [(0, SLOTS as u16 - 1)]);
        assert!(cluster_view(&config, "no-such-node").is_empty());
    }
}
