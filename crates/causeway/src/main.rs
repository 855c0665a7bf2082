//! The `causeway` binary: one CLI for the simulator (`sim`), the checker (`check`) and the
//! cluster commands. Each subcommand lives in its own module; this file only parses.

mod alloc;
mod bench_cmd;
mod check_cmd;
mod cli_cmd;
#[cfg(test)]
mod cli_doc;
mod keyring_cmd;
mod load_cmd;
mod server_cmd;
mod sim_cmd;
mod sim_plan;
mod top_cmd;
mod up_cmd;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// mimalloc instead of glibc's malloc: under redis-benchmark's SET a node spent 18% of its
/// CPU in glibc's malloc and free (`perf`, BENCHMARKS.md, issue 14's fifth session).
/// Entered through [`alloc::Allocator`], which spares word-aligned blocks the aligned path.
#[global_allocator]
static GLOBAL: alloc::Allocator = alloc::Allocator;

#[derive(Parser)]
#[command(
    name = "causeway",
    version,
    about = "Causeway: a geo-replicated transactional key-value store"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run protocols in the deterministic simulator across seeds and check every history.
    Sim(sim_cmd::SimArgs),
    /// Compare protocols side by side in the simulator (ratios against the first).
    Bench(bench_cmd::BenchArgs),
    /// Check a saved history (JSON lines) against a guarantee.
    Check(check_cmd::CheckArgs),
    /// Run one node of a cluster (`--config FILE --node NAME`).
    Server(server_cmd::ServerArgs),
    /// Write each node's keyring (its links' keys) from the cluster secret, so no host holds
    /// a key that proves another node's id.
    Keyring(keyring_cmd::KeyringArgs),
    /// Run a whole local multi-DC cluster on loopback until Ctrl-C.
    Up(up_cmd::UpArgs),
    /// Kill, start or restart a node or a DC of a running `up` by name; `status` lists them.
    Ctl(up_cmd::ctl::CtlArgs),
    /// A shell on one session of a DC (`--addr HOST:PORT`, `-c "cmd; cmd"` for scripts).
    Cli(cli_cmd::CliArgs),
    /// Drive a running cluster with closed-loop clients (YCSB A/B/C, ro-wo); latency table,
    /// optional history for `check`, `--sweep` over client counts.
    Load(load_cmd::LoadArgs),
    /// The live cluster page's figures in the terminal (`--addr` of `up`'s page), every second.
    Top(top_cmd::TopArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Sim(args) => sim_cmd::run(args),
        Command::Bench(args) => bench_cmd::run(args),
        Command::Check(args) => check_cmd::run(args),
        Command::Server(args) => server_cmd::run(args),
        Command::Keyring(args) => keyring_cmd::run(args),
        Command::Up(args) => up_cmd::run(args),
        Command::Ctl(args) => up_cmd::ctl::run(args),
        Command::Cli(args) => cli_cmd::run(args),
        Command::Load(args) => load_cmd::run(args),
        Command::Top(args) => top_cmd::run(args),
    }
}
