//! The configuration of the PrompTCC family: which protocol runs (the flavor), the
//! mutation table, the limits, `[protocol.promptcc]`'s tunables, and the wire form of the
//! vectors. A ground floor of the folder: the node's parts and the session take these
//! from here, not from `mod.rs`, which imports them.

use causeway_core::{Nanos, Vc};
use serde::{Deserialize, Serialize};

/// Which of the four protocols on this code runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    PrompTcc,
    /// Full vectors on every message (§V's unoptimized version).
    Naive,
    /// Wren-style reads (§IX): a snapshot first, then every read at it.
    Wren,
    /// Eiger-style reads (§II l.82, §IX): no stabilization, up to three rounds.
    Eiger,
}

impl Flavor {
    pub const fn name(self) -> &'static str {
        match self {
            Flavor::PrompTcc => "promptcc",
            Flavor::Naive => "promptcc-naive",
            Flavor::Wren => "wren",
            Flavor::Eiger => "eiger",
        }
    }

    /// Whether vectors travel whole.
    pub fn full_vectors(self) -> bool {
        self == Flavor::Naive
    }

    /// Whether a version is visible once its txn committed at its own partition (Eiger:
    /// no stabilization, §II l.82), rather than at every participant (Alg. 2 l.32).
    pub fn local_visibility(self) -> bool {
        self == Flavor::Eiger
    }

    /// Whether round one also validates Eiger's way, with scalar validity intervals
    /// (module doc: Eiger's metadata), beside the vector check.
    pub fn validity_intervals(self) -> bool {
        self == Flavor::Eiger
    }

    /// Most rounds of one read: PrompTCC never needs a third (§IV-F l.345), Eiger may
    /// (§II l.82).
    pub fn max_rounds(self) -> u8 {
        if self == Flavor::Eiger {
            3
        } else {
            2
        }
    }

    /// The mutations this flavor runs (its registry entry's).
    pub const fn mutations(self) -> &'static [&'static str] {
        match self {
            Flavor::PrompTcc => MUTATIONS,
            Flavor::Naive | Flavor::Wren | Flavor::Eiger => &[],
        }
    }

    /// The mutation `name`, refused unless this flavor runs it.
    pub fn mutation(self, name: Option<&str>) -> Result<Mutation, String> {
        Mutation::parse_among(name, self.mutations(), self.name())
    }
}

mutations! {
    /// Which deliberately broken variant runs, decoded from `Params::mutation`.
    pub struct Mutation for "promptcc" {
        /// The client never runs round two.
        single_round_always = "single-round-always",
        /// Committed versions are visible at once, without waiting for the other
        /// participants.
        visible_before_stable = "visible-before-stable",
        /// A txn's snapshot is `max-read-ts` alone: later reads stay pinned to what the
        /// first read saw (a liveness bug: `session.rs` `snapshot_of`).
        stale_snapshot = "stale-snapshot",
        /// The snapshot raises the partitions the first read touched to `S`, not to their
        /// `vis_i` (a safety bug: fractured reads).
        snapshot_from_s = "snapshot-from-s",
        /// The round-two test's vector check compares only the partition's own entry of
        /// `S_i` with `max-read-ts` (a safety bug: a txn held invisible there by another
        /// participant, whose commit the read saw elsewhere, is missed; fractured reads).
        own_entry_only = "own-entry-only",
    }
    /// Deliberately broken variants the simulator and checker must catch.
    pub const MUTATIONS;
}

/// A txn older than this aborts at COMMIT, and versions visible for longer fold (§VII).
pub const TXN_TIMEOUT_NS: Nanos = 5_000_000_000;
/// A partition asks the participants about a txn prepared this long with no final
/// timestamp (§VIII).
pub const RECOVER_AFTER_NS: Nanos = 1_000_000_000;
/// Most txn ids a partition remembers having fenced (refused for good).
pub const FENCES_MAX: usize = 65_536;
/// Most requests an Eiger node holds until a txn open at a partition resolves (round-three
/// reads, writes whose effects must observe it); past it they are refused (overload).
pub const PARKED_MAX: usize = 4_096;

/// `[protocols.promptcc]` (and `promptcc-naive`, `wren`, `eiger`), in ns of the node's
/// clock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub txn_timeout_ns: Nanos,
    pub recover_after_ns: Nanos,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            txn_timeout_ns: TXN_TIMEOUT_NS,
            recover_after_ns: RECOVER_AFTER_NS,
        }
    }
}

/// A vector on the wire: whole, or its minimum plus the entries above it (lossless).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Wire {
    Full(Vec<u64>),
    Above { min: u64, entries: Vec<(u32, u64)> },
}

impl Wire {
    /// `v` over `p` partitions, whole or compressed.
    pub fn of(v: &Vc, p: usize, full: bool) -> Wire {
        let all: Vec<u64> = (0..p).map(|i| v.get(i)).collect();
        if full {
            return Wire::Full(all);
        }
        let min = all.iter().copied().min().unwrap_or(0);
        let entries = all
            .iter()
            .enumerate()
            .filter(|(_, x)| **x > min)
            .map(|(i, x)| (i as u32, *x))
            .collect();
        Wire::Above { min, entries }
    }

    /// The entries of `v` above `floor`, the others as `floor` (lossy below it): how a
    /// partition sends its local max read timestamp back (§V).
    pub fn above(v: &Vc, p: usize, floor: u64, full: bool) -> Wire {
        if full {
            return Wire::of(v, p, true);
        }
        let entries = (0..p)
            .filter(|i| v.get(*i) > floor)
            .map(|i| (i as u32, v.get(i)))
            .collect();
        Wire::Above {
            min: floor,
            entries,
        }
    }

    pub fn to_vc(&self, p: usize) -> Vc {
        match self {
            Wire::Full(all) => Vc {
                dcs: all.clone(),
                extra: Vec::new(),
            },
            Wire::Above { min, entries } => {
                let mut v = Vc {
                    dcs: vec![*min; p],
                    extra: Vec::new(),
                };
                for (i, x) in entries {
                    v.set(*i as usize, *x);
                }
                v
            }
        }
    }
}
