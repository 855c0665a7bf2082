//! `causeway sim --plan`: the simulator runs the test loop makes, read from the registry
//! (each protocol's [`causeway_protocols::Protocol::SWEEPS`]), one line each:
//! `pass|caught --protocol NAME FLAGS...`. `scripts/test` runs every line (`--plan`) or
//! the fast loop's (`--plan --quick`); a line's words are the `causeway sim` arguments.

use causeway_protocols::sweep::{Sweep, SWEEPS_PER_PROTOCOL_MAX};
use causeway_protocols::PROTOCOLS;

/// The protocols `--plan` names: `all`, or a comma-separated list of registered ones.
pub(crate) fn selected(selection: &str) -> Result<Vec<&'static str>, String> {
    if selection == "all" {
        return Ok(PROTOCOLS.to_vec());
    }
    selection
        .split(',')
        .map(|name| causeway_protocols::entry(name.trim()).map(|e| e.name()))
        .collect()
}

/// The plan's lines for `protocols`, in registry order, each sweep as declared.
pub(crate) fn lines(protocols: &[&'static str], quick: bool) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for &name in protocols {
        let sweeps = causeway_protocols::entry(name)?.sweeps();
        assert!(
            sweeps.len() <= SWEEPS_PER_PROTOCOL_MAX,
            "{name} declares {} sweeps",
            sweeps.len()
        );
        out.extend(
            sweeps
                .iter()
                .filter(|s| s.quick || !quick)
                .map(|s| line(name, s)),
        );
    }
    Ok(out)
}

fn line(protocol: &str, sweep: &Sweep) -> String {
    let args: Vec<&str> = sweep.args.split_whitespace().collect();
    format!(
        "{} --protocol {protocol} {}",
        sweep.expect.word(),
        args.join(" ")
    )
}

/// `--plan [SELECTION]`: prints the lines, or says why it cannot.
pub(crate) fn print(selection: &str, quick: bool) -> std::process::ExitCode {
    match selected(selection).and_then(|p| lines(&p, quick)) {
        Ok(lines) => {
            for l in lines {
                println!("{l}");
            }
            std::process::ExitCode::SUCCESS
        }
        Err(e) => crate::sim_cmd::fail(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_protocols::sweep::{Expect, UNIT_TESTED_MUTATIONS};
    use clap::Parser;

    /// Every declared sweep is a command line `causeway sim` accepts, with seeds it can
    /// read and a mutation its protocol has.
    #[test]
    fn every_declared_sweep_parses_as_a_sim_command() {
        for l in lines(PROTOCOLS, false).unwrap() {
            let (_, args) = l.split_once(' ').unwrap();
            assert!(!args.contains(['\'', '"']), "{l}: no quotes in a sweep");
            let argv = ["causeway", "sim"].into_iter().chain(args.split(' '));
            let cli = crate::Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{l}: {e}"));
            let crate::Command::Sim(sim) = cli.command else {
                panic!("{l}: not a sim command")
            };
            crate::sim_cmd::config(&sim).unwrap_or_else(|e| panic!("{l}: {e}"));
            crate::sim_cmd::parse_seeds(sim.seeds()).unwrap_or_else(|e| panic!("{l}: {e}"));
        }
    }

    /// Each protocol is in the fast loop with a short faulted run that must pass, and one
    /// run that must be caught where it has mutations or a guarantee it can be caught
    /// breaking.
    #[test]
    fn every_protocol_has_a_quick_pass_and_a_quick_catch_where_it_can() {
        for &name in PROTOCOLS {
            let entry = causeway_protocols::entry(name).unwrap();
            let quick: Vec<&Sweep> = entry.sweeps().iter().filter(|s| s.quick).collect();
            assert!(
                quick
                    .iter()
                    .any(|s| s.expect == Expect::Pass && s.args.contains("--faults")),
                "{name}: no quick faulted run"
            );
            if !entry.mutations().is_empty() {
                assert!(
                    quick
                        .iter()
                        .any(|s| s.expect == Expect::Caught && s.mutation().is_some()),
                    "{name}: no quick run catches a mutation"
                );
            }
            assert!(
                entry
                    .sweeps()
                    .iter()
                    .any(|s| s.expect == Expect::Pass && !s.quick),
                "{name}: no full sweep"
            );
        }
    }

    /// Every mutation of every protocol is caught by some declared sweep (of the protocol,
    /// or of another entry on the same engine), or shown by the unit test named for it.
    #[test]
    fn every_mutation_is_caught_somewhere() {
        let caught: Vec<&str> = PROTOCOLS
            .iter()
            .flat_map(|p| causeway_protocols::entry(p).unwrap().sweeps())
            .filter(|s| s.expect == Expect::Caught)
            .filter_map(|s| s.mutation())
            .collect();
        for &name in PROTOCOLS {
            for m in causeway_protocols::mutations(name) {
                let unit = UNIT_TESTED_MUTATIONS.iter().any(|(u, _)| u == m);
                assert!(caught.contains(m) || unit, "{name}: no sweep catches {m}");
            }
        }
    }

    #[test]
    fn a_plan_names_registered_protocols_only() {
        assert_eq!(selected("cure, paris").unwrap(), vec!["cure", "paris"]);
        assert_eq!(selected("all").unwrap().len(), PROTOCOLS.len());
        let e = selected("cure,nope").unwrap_err();
        assert!(e.contains("unknown protocol 'nope'"), "{e}");
        let quick = lines(&["cure"], true).unwrap();
        let full = lines(&["cure"], false).unwrap();
        assert!(quick.len() < full.len() && !quick.is_empty());
        assert!(quick.iter().all(|l| full.contains(l)));
        assert!(full
            .iter()
            .all(|l| l.starts_with("pass --protocol cure ")
                || l.starts_with("caught --protocol cure ")));
    }
}
