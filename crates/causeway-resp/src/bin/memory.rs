//! `causeway-resp-memory`: the RESP front end over the in-memory backend, for the
//! compatibility tests and for measuring the front end alone. DC i (from 1) serves on
//! `--port` + i - 1, on loopback.

use causeway_resp::memory::{MemoryCluster, MemoryOptions};
use causeway_resp::{serve, RespConfig};
use clap::Parser;
use std::time::Duration;
use tokio::net::TcpListener;

/// Most DCs the demo server runs.
const DCS_MAX: usize = 16;

#[derive(Parser, Debug)]
#[command(
    name = "causeway-resp-memory",
    about = "Serves RESP over an in-memory Causeway"
)]
struct Args {
    /// Port of DC 1; DC i listens on PORT + i - 1 (0: every DC on a free port, printed).
    #[arg(long, default_value_t = 7001)]
    port: u16,
    /// Number of DCs.
    #[arg(long, default_value_t = 1)]
    dcs: usize,
    /// Replicate every DC's commits to the others this often (0: only when a session
    /// needs it, through causal tokens and barriers).
    #[arg(long, default_value_t = 50)]
    replicate_ms: u64,
    /// Protocol name reported by INFO and in capability errors.
    #[arg(long, default_value = "memory")]
    protocol: String,
    /// Refuse strong transactions (to exercise capability errors).
    #[arg(long)]
    no_strong: bool,
    /// Refuse causal tokens and barriers (to exercise capability errors).
    #[arg(long)]
    no_tokens: bool,
    /// Require AUTH with this password.
    #[arg(long)]
    password: Option<String>,
    /// Tokio worker threads (0: one per core; 1: a single-threaded runtime, as Redis).
    #[arg(long, default_value_t = 0)]
    threads: usize,
}

fn main() -> std::io::Result<()> {
    let args = Args::parse();
    assert!(
        args.dcs >= 1 && args.dcs <= DCS_MAX,
        "--dcs must be in 1..={DCS_MAX}"
    );
    let mut builder = match args.threads {
        1 => tokio::runtime::Builder::new_current_thread(),
        0 => tokio::runtime::Builder::new_multi_thread(),
        n => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(n);
            b
        }
    };
    builder.enable_all().build()?.block_on(run(args))
}

async fn run(args: Args) -> std::io::Result<()> {
    let cluster = MemoryCluster::new(MemoryOptions {
        protocol: args.protocol.clone(),
        dcs: args.dcs,
        strong: !args.no_strong,
        tokens: !args.no_tokens,
        aborted_reads: 0,
    });
    let mut servers = tokio::task::JoinSet::new();
    for dc in 0..args.dcs {
        let port = match args.port {
            0 => 0,
            base => u16::try_from(usize::from(base) + dc).expect("port in range"),
        };
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        println!("dc{} RESP on {}", dc + 1, listener.local_addr()?);
        let config = RespConfig {
            password: args.password.clone().map(Into::into),
            ..RespConfig::default()
        };
        servers.spawn(serve(listener, cluster.factory(dc), config));
    }
    if args.replicate_ms > 0 && args.dcs > 1 {
        let cluster = cluster.clone();
        let period = Duration::from_millis(args.replicate_ms);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(period).await;
                cluster.replicate();
            }
        });
    }
    while let Some(result) = servers.join_next().await {
        result.map_err(std::io::Error::other)??;
    }
    Ok(())
}
