//! `causeway check --guarantee tcc --history FILE`: checks a saved history.

use causeway_check::{check, read_history, Guarantee};
use clap::Args;
use std::fs::File;
use std::io::BufReader;
use std::process::ExitCode;

#[derive(Args)]
pub struct CheckArgs {
    /// The guarantee to check: tcc or convergence.
    #[arg(long, default_value = "tcc")]
    guarantee: String,
    /// A history in the JSON-lines format of docs/HISTORY.md.
    #[arg(long)]
    history: String,
}

pub fn run(args: CheckArgs) -> ExitCode {
    let Some(guarantee) = Guarantee::parse(&args.guarantee) else {
        eprintln!(
            "error: unknown guarantee '{}'; use tcc or convergence",
            args.guarantee
        );
        return ExitCode::from(2);
    };
    let file = match File::open(&args.history) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: cannot open history '{}': {e}", args.history);
            return ExitCode::from(2);
        }
    };
    let history = match read_history(BufReader::new(file)) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("error: history '{}' is malformed: {e}", args.history);
            return ExitCode::from(2);
        }
    };
    match check(&history, guarantee) {
        Ok(stats) => {
            println!(
                "ok: {} txns ({} counted), {} reads, {} causal edges, {} arbitration edges, {} final reads",
                stats.txns,
                stats.counted,
                stats.reads,
                stats.causal_edges,
                stats.arbitration_edges,
                stats.finals
            );
            ExitCode::SUCCESS
        }
        Err(v) => {
            println!("violation: {v}");
            ExitCode::from(1)
        }
    }
}
