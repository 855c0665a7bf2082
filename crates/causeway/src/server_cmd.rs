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

use causeway_core::{Request, Response};
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
    let config = match ClusterConfig::load(&args.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if !config.runtime.transparent_huge_pages {
        disable_transparent_huge_pages();
    }
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
                tls: causeway_runtime::load_tls(&config)?.map(|t| t.clients_config.clone()),
                ..RespConfig::default()
            };
            let factory = RespFactory(server.gateway());
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
pub struct RespFactory(pub Gateway);

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
}

impl SessionFactory for RespFactory {
    type Handle = RespSession;

    /// RESP replies never show which writes a read observed, so its sessions skip them.
    fn open(&self) -> RespSession {
        let mut session = self.0.open_session();
        session.skip_observed();
        RespSession(session)
    }

    fn info(&self) -> ServerInfo {
        let info = self.0.info();
        let mut gauges = self.0.gauges();
        gauges.push(("sessions".to_string(), self.0.live_sessions() as f64));
        ServerInfo {
            protocol: info.protocol.clone(),
            dc: u32::from(info.dc.0) + 1,
            dcs: info.dc_names.clone(),
            gauges,
        }
    }
}
