//! The simulator runs a protocol declares for the test loop: each registry entry names,
//! in [`crate::Protocol::SWEEPS`], the `causeway sim` runs that must pass (its fault
//! shapes) and those that must be caught (its deliberately broken variants, or a baseline
//! held to a guarantee it does not keep). `causeway sim --plan` lists them for every
//! registered protocol and `scripts/test` runs what it lists, so adding a protocol adds
//! no line to the script. The runs marked [`Sweep::quick`] make the fast loop
//! (`scripts/test --quick`): one short faulted run per protocol and one broken variant
//! caught where the protocol has any.
//!
//! A sweep's flags are kept as the command line writes them (`--seeds 1..6 --faults
//! all`): the simulator's CLI parses them, and a test there refuses any declared sweep it
//! cannot parse.

/// What a sweep must end in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// No violation in any seed (exit 0).
    Pass,
    /// Violations reported (exit 1, not a crash): a broken variant, or a baseline checked
    /// against a stronger guarantee than its own.
    Caught,
}

impl Expect {
    /// The word `causeway sim --plan` prints for it.
    pub const fn word(self) -> &'static str {
        match self {
            Expect::Pass => "pass",
            Expect::Caught => "caught",
        }
    }
}

/// One simulator run of a protocol: `causeway sim --protocol NAME ARGS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sweep {
    pub expect: Expect,
    /// The flags after `--protocol NAME`, space-separated, without quotes.
    pub args: &'static str,
    /// Also in the fast loop (`scripts/test --quick`), not only the full one.
    pub quick: bool,
}

impl Sweep {
    /// A run that must end with no violation.
    pub const fn pass(args: &'static str) -> Sweep {
        Sweep {
            expect: Expect::Pass,
            args,
            quick: false,
        }
    }

    /// A run that must report violations.
    pub const fn caught(args: &'static str) -> Sweep {
        Sweep {
            expect: Expect::Caught,
            args,
            quick: false,
        }
    }

    /// The same run, in the fast loop too.
    pub const fn quick(self) -> Sweep {
        Sweep {
            quick: true,
            ..self
        }
    }

    /// The mutation the run asks for (`--mutation NAME`), if any.
    pub fn mutation(&self) -> Option<&'static str> {
        let mut words = self.args.split_whitespace();
        while let Some(word) = words.next() {
            if word == "--mutation" {
                return words.next();
            }
        }
        None
    }
}

/// A long outage (one DC cut from the others for most of the run) with the GC horizon
/// (`silent_sibling_ns`) eight times shorter than the cut and no log kept for a silent
/// sibling: the DC comes back only by state transfer.
#[macro_export]
macro_rules! sweep_outage {
    () => {
        "--faults long-outage --set silent_sibling_ns=300000000 --set silent_sibling_log_max=0"
    };
}

/// [`sweep_outage!`] whose heal drops what the cut links held, as a reset connection does.
#[macro_export]
macro_rules! sweep_lossy {
    () => {
        "--faults long-outage-lossy --set silent_sibling_ns=300000000 \
         --set silent_sibling_log_max=0"
    };
}

/// A fault-free run whose txns send their consecutive reads as one request, as `causeway
/// load` does, so some request asks a key twice: every causal txn must commit
/// (`Requirements::causal_commits_without_faults`).
#[macro_export]
macro_rules! sweep_merged {
    () => {
        "--faults none --workload ycsb-a --merge-reads --keys 10 --seeds 1..2"
    };
}

/// Partial replication as PaRiS's evaluation runs it: 5 DCs, each partition in 2, half the
/// txns local to the client's DC.
#[macro_export]
macro_rules! sweep_partial {
    () => {
        "--replication 2 --dcs 5 --local-dc-ratio 0.5"
    };
}

/// Most sweeps one protocol may declare (the full loop must stay within its budget).
pub const SWEEPS_PER_PROTOCOL_MAX: usize = 40;

/// Mutations no sweep catches, each shown step by step by the unit test named beside it
/// (a sweep would need a schedule the random faults rarely draw).
pub const UNIT_TESTED_MUTATIONS: &[(&str, &str)] = &[(
    "no-uniform-barrier",
    "unistore::strong_tests (UniStore Fig. 2: strong certification without the barrier stalls)",
)];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sweep_names_its_mutation() {
        let s = Sweep::caught("--mutation no-read-wait --seeds 1..5");
        assert_eq!(s.mutation(), Some("no-read-wait"));
        assert_eq!(Sweep::pass("--seeds 1..5 --faults all").mutation(), None);
        assert!(!s.quick);
        assert!(s.quick().quick);
        assert_eq!(s.quick().expect, Expect::Caught);
    }
}
