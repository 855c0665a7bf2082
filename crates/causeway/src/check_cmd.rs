//! `causeway check --guarantee tcc|convergence|por|pc-psi [--conflicts REL] --history FILE`: checks
//! a saved history. A file without a transaction (empty, or only final reads) is refused
//! with exit status 2, as a malformed one is: "ok" would claim a check that checked nothing.

use causeway_check::{check_with, read_history, ConflictRelation, Guarantee};
use clap::Args;
use std::fs::File;
use std::io::BufReader;
use std::process::ExitCode;

#[derive(Args)]
pub struct CheckArgs {
    /// The guarantee to check: tcc, convergence, por (tcc plus the conflict ordering
    /// of strong transactions, UniStore's PoR), or pc-psi (Occult's PC-PSI).
    #[arg(long, default_value = "tcc")]
    guarantee: String,
    /// The conflict relation of strong transactions for por: `default` (ad-hoc: a common
    /// written key, or one reads what the other writes), `rubis`, or rules
    /// `TYPE TYPE PATTERN; ...` over the transactions' labels, e.g.
    /// `registerUser registerUser users/{}/name`.
    #[arg(long, default_value = "default")]
    conflicts: String,
    /// A history in the JSON-lines format of docs/HISTORY.md.
    #[arg(long)]
    history: String,
}

pub fn run(args: CheckArgs) -> ExitCode {
    let Some(guarantee) = Guarantee::parse(&args.guarantee) else {
        eprintln!(
            "error: unknown guarantee '{}'; use tcc, convergence, por or pc-psi",
            args.guarantee
        );
        return ExitCode::from(2);
    };
    let conflicts = match ConflictRelation::parse(&args.conflicts) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: bad --conflicts: {e}");
            return ExitCode::from(2);
        }
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
    if history.txns.is_empty() {
        eprintln!(
            "error: history '{}' holds no transaction: nothing to check (an empty file, or \
             not a history written by `causeway sim --history` or `causeway load --history`)",
            args.history
        );
        return ExitCode::from(2);
    }
    match check_with(&history, guarantee, &conflicts) {
        Ok(stats) => {
            let strong = match guarantee {
                Guarantee::Por => format!(
                    ", {} strong txns, {} conflict edges",
                    stats.strong, stats.conflict_edges
                ),
                Guarantee::PcPsi => format!(", {} rw edges", stats.rw_edges),
                _ => String::new(),
            };
            println!(
                "ok: {} txns ({} counted), {} reads, {} causal edges, {} arbitration edges, {} final reads{strong}",
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
