//! `causeway keyring --config FILE --out DIR`: derives every node's keyring from the
//! cluster secret (`causeway_runtime::keyring`), so each host can hold the keys of its own
//! node's links and no secret that lets it pose as another node.
//!
//! Afterwards: copy `DIR/<name>.keyring` to node `<name>`'s host only, and in the cluster
//! file replace `secret` / `secret_file` by `keyring_dir = "DIR"` (docs/OPERATIONS.md).

use causeway_runtime::{keyring, ClusterConfig};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct KeyringArgs {
    /// The cluster file with the cluster secret (`secret` or `secret_file`).
    #[arg(long)]
    config: PathBuf,
    /// The directory to write `<node name>.keyring` into, one file per node (mode 0600).
    #[arg(long)]
    out: PathBuf,
}

pub fn run(args: KeyringArgs) -> ExitCode {
    match keyrings(&args) {
        Ok(files) => {
            for f in &files {
                println!("wrote {}", f.display());
            }
            println!(
                "next: copy each node's file to its host only, and in the cluster file replace \
                 `secret`/`secret_file` with keyring_dir = \"{}\"",
                args.out.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("causeway keyring: {e}");
            ExitCode::FAILURE
        }
    }
}

fn keyrings(args: &KeyringArgs) -> Result<Vec<PathBuf>, String> {
    let config = ClusterConfig::load(&args.config)?;
    let secret = config.cluster_secret()?.ok_or_else(|| {
        format!(
            "{} has no `secret` or `secret_file` to derive the keyrings from",
            args.config.display()
        )
    })?;
    keyring::write_all(&config, secret.as_bytes(), &args.out)
}
