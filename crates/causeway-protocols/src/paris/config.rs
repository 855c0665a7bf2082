//! PaRiS's configuration: which of the three protocols runs (the flavor), the mutation
//! tables, `[protocol.paris]`'s tunables with their defaults, and where a request for a
//! partition goes. A ground floor of the folder: the node's parts take these from here,
//! not from `mod.rs`, which imports them.

use causeway_core::{DcId, Nanos, PartitionId, Topology};
use serde::{Deserialize, Serialize};

/// Which of the three protocols runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// PaRiS: UST snapshots, non-blocking reads, client cache.
    Paris,
    /// BPR: freshest snapshot (client's highest seen vs the coordinator's HLC), blocking
    /// reads, no stabilization.
    Bpr,
    /// NoCC: latest versions, no snapshot, plain 2PC timestamps.
    Nocc,
}

impl Flavor {
    pub const fn name(self) -> &'static str {
        match self {
            Flavor::Paris => "paris",
            Flavor::Bpr => "bpr",
            Flavor::Nocc => "nocc",
        }
    }

    /// The mutations this flavor runs (its registry entry's).
    pub const fn mutations(self) -> &'static [&'static str] {
        match self {
            Flavor::Paris => MUTATIONS,
            Flavor::Bpr => BPR_MUTATIONS,
            Flavor::Nocc => &[],
        }
    }

    /// The mutation `name`, refused unless this flavor runs it.
    pub fn mutation(self, name: Option<&str>) -> Result<Mutation, String> {
        Mutation::parse_among(name, self.mutations(), self.name())
    }
}

mutations! {
    /// The mutation a run asked for.
    pub struct Mutation for "paris" {
        /// The client applies none of its cached writes to what it reads, and caches
        /// none (breaks Alg. 1 l.11: read-your-writes below the UST).
        no_client_cache = "no-client-cache",
        /// The UST is the DC's own GST, not the meet of every DC's (breaks §IV-B).
        ust_ignores_remote_dc = "ust-ignores-remote-dc",
        /// A replica back after our log dropped txns it lacks gets no state transfer
        /// (breaks transfer.rs: it never converges).
        no_state_transfer = "no-state-transfer",
        /// A one-phase txn's vote leaves when its record is written, not when it is
        /// durable: the client hears of a commit that a crash can still undo.
        one_phase_early = "one-phase-early",
        /// A key asked twice in one read request is answered once (the bug fixed in the
        /// thirty-eighth session, `coord.rs` `in_request_order`): the txn aborts. Only the
        /// simulator's fault-free rule catches it, with `--merge-reads`.
        forget_repeated_read = "forget-repeated-read",
        /// BPR's reads do not block (they then miss txns committed below their snapshot).
        no_read_block = "no-read-block",
    }
    /// Deliberately broken variants the simulator and checker must catch.
    /// (`no-state-transfer` and `one-phase-early` show only under the faults they need:
    /// scripts/test sweeps them with a long outage and with crashes.)
    pub const MUTATIONS = [
        no_client_cache,
        ust_ignores_remote_dc,
        no_state_transfer,
        one_phase_early,
        forget_repeated_read,
    ];
    /// BPR's: reads do not block (they then miss txns committed below their snapshot).
    pub const BPR_MUTATIONS = [no_read_block];
}

/// The persisted lease on claimable timestamps reaches this far ahead of the clock.
pub const LEASE_NS: Nanos = 200_000_000;
/// A participant asks the coordinator about a txn prepared this long; a coordinator
/// re-sends an unacknowledged decision as often.
pub const INQUIRE_AFTER_NS: Nanos = 1_000_000_000;
/// A coordinator aborts a txn whose votes do not all arrive within this time (several
/// WAN round trips: participants may be in other DCs).
pub const PREPARE_TIMEOUT_NS: Nanos = 3_000_000_000;
/// A coordinator drops a txn context with no request for this long (§III-C: contexts of
/// failed clients are cleaned up after a timeout).
pub const TXN_IDLE_NS: Nanos = 30_000_000_000;
/// A sibling replica whose acknowledgement lags this long gets our stream again.
pub const LAG_GRACE_NS: Nanos = 500_000_000;
/// A sibling silent this long no longer holds our replication log once it holds more
/// than `silent_sibling_log_max` txns (a returning one then gets a state transfer,
/// `transfer.rs`).
pub const SILENT_SIBLING_NS: Nanos = 60_000_000_000;
/// Most writes a client keeps in its cache.
pub const CACHE_OPS_MAX: usize = 100_000;

/// `[protocols.paris]` (and `bpr`, `nocc`): tunables in ns of the node's clock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub lease_ns: Nanos,
    pub inquire_after_ns: Nanos,
    pub prepare_timeout_ns: Nanos,
    pub txn_idle_ns: Nanos,
    pub lag_grace_ns: Nanos,
    pub silent_sibling_ns: Nanos,
    pub silent_sibling_log_max: usize,
    /// A state transfer to a sibling is not started again for this long.
    pub transfer_retry_ns: Nanos,
    /// Most writes a client session caches (its own writes not yet in the UST).
    pub cache_ops_max: usize,
    /// Commit a txn that writes one partition in one phase: its replica alone decides,
    /// with one record (issue 14; `node.rs`, `prepare`).
    pub one_phase: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            lease_ns: LEASE_NS,
            inquire_after_ns: INQUIRE_AFTER_NS,
            prepare_timeout_ns: PREPARE_TIMEOUT_NS,
            txn_idle_ns: TXN_IDLE_NS,
            lag_grace_ns: LAG_GRACE_NS,
            silent_sibling_ns: SILENT_SIBLING_NS,
            silent_sibling_log_max: crate::kit::repl::SILENT_SIBLING_LOG_MAX,
            transfer_retry_ns: crate::kit::transfer::TRANSFER_RETRY_NS,
            cache_ops_max: CACHE_OPS_MAX,
            one_phase: true,
        }
    }
}

/// The DC a node of `dc` sends a request for partition `p` to: its own if it stores
/// `p`, else the preferred remote replica, round-robin across DCs (§V-A).
pub fn target_dc(topo: &Topology, dc: DcId, p: PartitionId) -> DcId {
    topo.preferred_replica(dc, p)
}
