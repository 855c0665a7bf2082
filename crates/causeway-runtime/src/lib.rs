//! Causeway runtime (layer 6 of DESIGN.md): the tokio driver that runs the protocols'
//! sans-IO machines as a real node process.
//!
//! A [`Server`] is one node: it recovers the node's machine from its log
//! ([`storage::recover`], then `causeway_protocols::new_node` with every record), runs the
//! node task ([`node`]) that owns the machine and the client sessions hosted here, a
//! storage thread doing group commit ([`storage`]), one outgoing link per peer node and a
//! listener for incoming ones ([`transport`], wire in [`peer`]), and, when the cluster
//! file gives the node a `client_addr`, the native client endpoint ([`gateway`]), and,
//! when it gives a `metrics_addr`, the Prometheus endpoint ([`metrics_http`]) over the
//! node's metrics registry ([`telemetry`]), and, when it gives an `http_addr`, the live
//! cluster page ([`dashboard`]) that scrapes every node's metrics.
//! The gateway and the node task know each other only through [`control`] (the requests,
//! limits, session-id layout and gauge board they share); [`samples`] turns the machine's
//! measurement samples into published gauges.
//! Any protocol of `causeway_protocols::PROTOCOLS` runs unchanged, chosen by name.

#![forbid(unsafe_code)]

pub mod auth;
pub mod config;
pub mod control;
pub mod dashboard;
#[doc(hidden)]
pub mod fuzzing;
pub mod gateway;
pub mod keyring;
pub mod metrics_http;
pub mod node;
pub mod peer;
pub mod samples;
pub mod scope;
pub mod storage;
pub mod telemetry;
pub mod throttle;
pub mod tls;
pub mod transport;

pub use config::{local_cluster, ClusterConfig, GroupCommit, Placement};
pub use gateway::{Gateway, GatewayInfo, GatewaySession};

use causeway_core::NodeId;
use causeway_protocols::{new_node, NodeConfig};
use control::{Control, SharedGauges};
use node::{Inputs, NodeSetup, NodeTask};
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};
use telemetry::{NodeLabels, NodeMetrics};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use transport::{Identity, Inbound};

/// A running node.
pub struct Server {
    placement: Placement,
    gateway: Gateway,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<Result<(), String>>,
    /// The storage thread (none when the node task writes: `group_commit = "node"`).
    disk: Option<std::thread::JoinHandle<storage::GroupCommitStats>>,
    background: Vec<tokio::task::JoinHandle<()>>,
}

/// Why a node without a cluster secret does not start.
pub const NO_SECRET: &str = "no cluster secret configured: peer connections would not be authenticated, and anyone who could reach this node's peer port could inject messages; fix: set `secret`, `secret_file` or `keyring_dir` in the cluster file (`causeway up` writes a random secret), or, for a test on one machine, `insecure = true` or `causeway server --insecure` (docs/OPERATIONS.md, Security)";

async fn bind(addr: std::net::SocketAddr, what: &str) -> Result<TcpListener, String> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr} ({what}): {e}; fix: free the port or change `{what}` in the cluster file"))
}

impl Server {
    /// Recovers node `node_name` of `config` from its directory and starts it.
    pub async fn start(config: &ClusterConfig, node_name: &str) -> Result<Server, String> {
        let placement = config.placement(node_name)?;
        let (recovered, machine) = recover_machine(config, &placement)?;
        let keys = config.node_keys(node_name)?;
        if keys.is_none() {
            if !config.insecure {
                return Err(NO_SECRET.to_string());
            }
            tracing::warn!(
                node = node_name,
                "no cluster secret configured and `insecure` set: peer connections are not authenticated, anyone who can reach this node's peer port can inject messages"
            );
        }
        let me = Identity {
            cluster: config.cluster.clone(),
            protocol: config.protocol.clone(),
            node: placement.id,
            name: node_name.to_string(),
            epoch: recovered.epoch,
            topology: config.topology(),
            keys: keys.unwrap_or_else(|| auth::Keys::Secret(std::sync::Arc::from(&b""[..]))),
            tls: load_tls(config)?,
        };
        let peers = bind(placement.spec.addr, "addr").await?;
        let metrics = node_metrics(config, &placement);
        let (persist_tx, persist_rx) = mpsc::channel(config.limits.persist_queue_max);
        let (disk_tx, disk_rx) = mpsc::unbounded_channel();
        let disk_stats = storage::SharedDiskStats::default();
        let writer = storage::Writer::new(
            node_name.to_string(),
            Box::new(recovered.log),
            disk_tx,
            metrics.disk(),
            storage::DiskSetup::from_config(&config.storage),
            disk_stats.clone(),
        );
        let (disk, writer) = disk_path(&config.storage, writer, persist_rx);
        let (inbox, net_rx) =
            transport::Inbox::new(config.limits.inbox_max, config.limits.inbox_bytes_max);
        let (control_tx, control_rx) = mpsc::unbounded_channel();
        let (stop_tx, stop_rx) = watch::channel(false);
        let links = spawn_links(config, &placement, &me);
        let mut background = vec![
            tokio::spawn(Inbound::new(me.clone(), inbox.clone(), peer_port(config)).serve(peers)),
            tokio::spawn(telemetry::run_upkeep(metrics.clone())),
        ];
        let gauges = SharedGauges::default();
        let gateway = new_gateway(config, &placement, recovered.epoch, control_tx, &gauges);
        let render = scrape_render(config, &metrics, (&gateway, &inbox), &links);
        background.extend(open_endpoints(config, &placement, &gateway, render).await?);
        let setup = NodeSetup {
            id: placement.id,
            dc: placement.dc,
            protocol: config.protocol.clone(),
            topology: config.topology(),
            params: config.params(),
            section: config.section(),
        };
        let inputs = Inputs {
            net: net_rx,
            control: control_rx,
            disk: disk_rx,
            stop: stop_rx,
        };
        let node_task = NodeTask::new(setup, machine, links, persist_tx, gauges, &metrics)
            .with_disk_path(writer)
            .with_disk_stats(disk_stats)
            .with_checkpoints(recovered.lsn_offset, config.storage.checkpoint_records);
        let task = tokio::spawn(node_task.run(inputs));
        log_ready(config, &placement);
        Ok(Server {
            placement,
            gateway,
            stop: stop_tx,
            task,
            disk,
            background,
        })
    }

    /// The gateway for in-process front ends (RESP) to open sessions on this node.
    pub fn gateway(&self) -> Gateway {
        self.gateway.clone()
    }

    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    /// Keeps a front-end task alive as long as the server, and stops it at shutdown.
    pub fn attach_task(&mut self, task: tokio::task::JoinHandle<()>) {
        self.background.push(task);
    }

    /// Runs until `stop` completes or the node fails, then shuts down cleanly: the node
    /// task stops, the storage thread syncs what it holds, the counters are logged.
    pub async fn run_until(mut self, stop: impl Future<Output = ()>) -> Result<(), String> {
        let result = tokio::select! {
            _ = stop => {
                let _ = self.stop.send(true);
                (&mut self.task).await
            }
            r = &mut self.task => r,
        };
        for task in &self.background {
            task.abort();
        }
        let name = self.placement.spec.name.clone();
        // The node task reported its own writer's counters as it stopped.
        if let Some(disk) = self.disk {
            let stats = tokio::task::spawn_blocking(move || disk.join())
                .await
                .map_err(|e| e.to_string())?
                .map_err(|_| "the storage thread panicked".to_string())?;
            storage::report(&name, &stats);
        }
        tracing::info!(node = %name, "stopped");
        result.map_err(|e| format!("node task failed: {e}"))?
    }
}

/// Who writes the log (`[storage] group_commit`): with `node` the node task owns the
/// writer; with `thread` (or `auto` with `durability = "batched"`) a thread does; with
/// `auto` they share it.
fn disk_path(
    config: &config::StorageConfig,
    writer: storage::Writer,
    rx: mpsc::Receiver<storage::PersistReq>,
) -> (
    Option<std::thread::JoinHandle<storage::GroupCommitStats>>,
    node::DiskPath,
) {
    let batched = config.durability == config::Durability::Batched;
    match config.group_commit {
        GroupCommit::Node => (None, node::DiskPath::Node(Box::new(writer))),
        GroupCommit::Thread => (Some(storage::spawn(writer, rx)), node::DiskPath::Thread),
        GroupCommit::Auto if batched => (Some(storage::spawn(writer, rx)), node::DiskPath::Thread),
        GroupCommit::Auto => {
            let inline_max = Duration::from_micros(config.auto_inline_max_us);
            let shared = storage::Shared::new(writer, inline_max);
            let thread = storage::spawn_shared(shared.clone(), rx);
            (Some(thread), node::DiskPath::Auto(shared))
        }
    }
}

/// The cluster file's `[tls]` loaded (certificate, key and CA files read and checked);
/// `None` without the section.
pub fn load_tls(config: &ClusterConfig) -> Result<Option<std::sync::Arc<tls::Tls>>, String> {
    match &config.tls {
        Some(t) => Ok(Some(std::sync::Arc::new(tls::Tls::load(t)?))),
        None => Ok(None),
    }
}

/// The node's metrics registry, labelled with its protocol, DC and name.
fn node_metrics(config: &ClusterConfig, placement: &Placement) -> NodeMetrics {
    NodeMetrics::new(&NodeLabels {
        protocol: config.protocol.clone(),
        dc: config.dcs[usize::from(placement.dc.0)].clone(),
        node: placement.spec.name.clone(),
    })
}

/// The peer port's pre-authentication limits, from the cluster file.
fn peer_port(config: &ClusterConfig) -> transport::PeerPort {
    transport::PeerPort {
        unauthenticated_max: config.limits.unauthenticated_connections_max,
        auth_timeout_ms: config.limits.auth_timeout_ms,
        link_dead_after_ms: config.limits.link_dead_after_ms,
    }
}

/// Opens the endpoints the cluster file gives the node: native clients at `client_addr`,
/// Prometheus metrics at `metrics_addr`, the cluster page at `http_addr`.
async fn open_endpoints(
    config: &ClusterConfig,
    placement: &Placement,
    gateway: &Gateway,
    render: metrics_http::Render,
) -> Result<Vec<tokio::task::JoinHandle<()>>, String> {
    let mut tasks = Vec::new();
    let (client_addr, resp_addr) = config.dc_endpoints(placement);
    if let Some(addr) = placement.spec.client_addr {
        let listener = bind(addr, "client_addr").await?;
        let port = gateway::ClientPort {
            connections_max: config.limits.client_connections_max,
            unauthenticated_max: config.limits.unauthenticated_connections_max,
            auth_timeout_ms: config.limits.auth_timeout_ms,
            idle_timeout_ms: config.limits.client_idle_timeout_ms,
            tls: load_tls(config)?.map(|t| t.clients.clone()),
            resp_addr,
        };
        let serve = gateway::serve_clients(listener, gateway.clone(), port);
        tasks.push(tokio::spawn(serve));
    }
    let elsewhere = |what| -> std::sync::Arc<str> {
        metrics_http::elsewhere(what, resp_addr, client_addr).into()
    };
    if let Some(addr) = placement.spec.metrics_addr {
        let listener = bind(addr, "metrics_addr").await?;
        let serve = metrics_http::serve(listener, render, elsewhere("metrics (HTTP)"));
        tasks.push(tokio::spawn(serve));
    }
    if let Some(addr) = placement.spec.http_addr {
        let listener = bind(addr, "http_addr").await?;
        let page = elsewhere("cluster page (HTTP)");
        tasks.push(tokio::spawn(dashboard::serve(
            listener,
            config.clone(),
            page,
        )));
    }
    Ok(tasks)
}

fn log_ready(config: &ClusterConfig, placement: &Placement) {
    tracing::info!(
        node = %placement.spec.name,
        id = placement.id.0,
        dc = %config.dcs[usize::from(placement.dc.0)],
        protocol = %config.protocol,
        peers = %placement.spec.addr,
        clients = ?placement.spec.client_addr,
        metrics = ?placement.spec.metrics_addr,
        page = ?placement.spec.http_addr,
        "node ready"
    );
}

/// Reads the node's log and rebuilds its machine from every durable record.
fn recover_machine(
    config: &ClusterConfig,
    placement: &Placement,
) -> Result<(storage::Recovered, causeway_protocols::BoxedNode), String> {
    let name = &placement.spec.name;
    let dir = config.node_dir(&placement.spec);
    let began = Instant::now();
    let topology = config.topology();
    let layout = format!(
        "slots-v1 partitions={} nodes_per_dc={}",
        topology.partitions, topology.nodes_per_dc
    );
    let recovered = storage::recover(&dir, &layout)?;
    let node_config = NodeConfig {
        node: placement.id,
        topology,
        params: config.params(),
        section: config.section(),
    };
    let machine = new_node(&config.protocol, node_config, &recovered.records)
        .map_err(|e| format!("node {name} cannot recover from {}: {e}", dir.display()))?;
    tracing::info!(
        node = %name,
        epoch = recovered.epoch,
        records = recovered.records.len(),
        snapshot_upto = recovered.snapshot_upto,
        last_lsn = recovered.last_lsn,
        elapsed_ms = began.elapsed().as_millis() as u64,
        dir = %dir.display(),
        "recovered"
    );
    Ok((recovered, machine))
}

fn new_gateway(
    config: &ClusterConfig,
    placement: &Placement,
    epoch: u64,
    control: mpsc::UnboundedSender<Control>,
    gauges: &SharedGauges,
) -> Gateway {
    let info = GatewayInfo {
        cluster: config.cluster.clone(),
        protocol: config.protocol.clone(),
        node_name: placement.spec.name.clone(),
        dc: placement.dc,
        dc_names: config.dcs.clone(),
        password: config.password.clone(),
        session_scope: config.session_scope,
    };
    Gateway::new(
        info,
        placement.id,
        epoch,
        control,
        config.limits.sessions_max,
        gauges.clone(),
    )
}

/// What a scrape renders: the node's metrics after setting the series read only at
/// scrape time (sessions, client connections, the inbox's bytes, each link's queue, drops
/// and dead connections), so they cost nothing between scrapes.
fn scrape_render(
    config: &ClusterConfig,
    metrics: &NodeMetrics,
    (gateway, inbox): (&Gateway, &transport::Inbox),
    links: &HashMap<NodeId, transport::Link>,
) -> metrics_http::Render {
    let sessions = metrics.gauge(telemetry::SESSIONS, &[]);
    let connections = metrics.gauge(telemetry::CONNECTIONS, &[]);
    let inbox_bytes = metrics.gauge(telemetry::INBOX_BYTES, &[]);
    let names: HashMap<NodeId, String> = config
        .placements()
        .into_iter()
        .map(|p| (p.id, p.spec.name))
        .collect();
    let mut series: Vec<_> = links
        .iter()
        .map(|(id, link)| {
            let peer = names.get(id).cloned().unwrap_or_else(|| id.0.to_string());
            let label = [("peer", peer)];
            let depth = metrics.gauge(telemetry::LINK_DEPTH, &label);
            let dropped = metrics.counter(telemetry::LINK_DROPPED, &label);
            let dead = metrics.counter(telemetry::LINK_DEAD, &label);
            (link.clone(), depth, dropped, dead)
        })
        .collect();
    series.sort_by_key(|(link, ..)| link.peer());
    let (metrics, gateway, inbox) = (metrics.clone(), gateway.clone(), inbox.clone());
    Arc::new(move || {
        sessions.set(gateway.live_sessions() as f64);
        connections.set(gateway.client_connections() as f64);
        inbox_bytes.set(inbox.bytes() as f64);
        for (link, depth, dropped, dead) in &series {
            depth.set(link.depth() as f64);
            dropped.absolute(link.dropped());
            dead.absolute(link.dead());
        }
        metrics.render()
    })
}

fn spawn_links(
    config: &ClusterConfig,
    me: &Placement,
    identity: &Identity,
) -> HashMap<NodeId, transport::Link> {
    let mut links = HashMap::new();
    for p in config.placements() {
        if p.id == me.id {
            continue;
        }
        let settings = transport::LinkSettings {
            latency: Duration::from_nanos(config.one_way_ns(me.dc, p.dc)),
            queue_max: config.limits.link_queue_max,
            queue_bytes_max: transport::LINK_QUEUE_BYTES_MAX,
            dead_after: Duration::from_millis(config.limits.link_dead_after_ms),
        };
        let link = transport::spawn_link(identity.clone(), p.id, p.spec.addr, settings);
        links.insert(p.id, link);
    }
    links
}
