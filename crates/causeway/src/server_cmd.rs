//! `causeway server --config FILE --node NAME`: runs one node of a cluster until SIGINT or
//! SIGTERM, then shuts down cleanly (the log is synced, the counters are logged).
//!
//! Logs go to stderr, one line per event (`tracing` fmt), `--log debug` for more.

use causeway_runtime::{ClusterConfig, Server};
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
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("build the tokio runtime");
    let result = runtime.block_on(async {
        let server = Server::start(&config, &args.node).await?;
        // RESP front end: started here once the causeway-resp crate joins the workspace
        // (see docs/OPERATIONS.md, "RESP"): `server.gateway()` is the session factory.
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
