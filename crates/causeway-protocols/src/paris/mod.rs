//! `paris`: PaRiS (Spirovska, Didona, Zwaenepoel, ICDCS 2019, shared/papers/002),
//! transactional causal consistency under **partial replication** with reads that never
//! block, and its two baselines of §V on the same code: `bpr` (blocking reads at the
//! freshest snapshot) and `nocc` (no causal consistency). Each partition lives in
//! `replication_factor` of the DCs (`Topology::replicas_of`).
//!
//! **Metadata** (§IV-A). Items carry their commit time `ut` (a scalar HLC). A partition
//! replica keeps its version clock `VV` (one entry per replica DC of its partition: ours
//! is the local snapshot it installed, the others the latest time received from each
//! sibling replica), its `Prepared` and `Committed` queues, and the node's `ust`. A client
//! keeps `ust_c`, `hwt_c` (its last update's commit time) and its private cache `WC_c`
//! of its own committed writes not yet covered by `ust_c`.
//!
//! **Transactions** (Alg. 1-3).
//! - START (Alg. 2 l.1-5) at a coordinator of the client's DC (node `session % nodes`,
//!   the paper's co-located coordinator): snapshot = `max(ust, ust_c)`. It rides with the
//!   txn's first read or its commit instead of a round trip of its own (the same rule,
//!   one message less; recorded here because the paper's NoCC saves exactly that round).
//! - READ (Alg. 2 l.6-16, Alg. 3 l.1-8): the coordinator sends each partition's keys in
//!   parallel to its preferred replica (local if the DC stores it, else
//!   `replicas_of(p)[dc % R]`: round-robin across DCs, §V-A), which returns the freshest
//!   version at or below the snapshot **without waiting** (UST guarantees every replica
//!   installed it). The client then applies its cached writes of the key on top (Alg. 1
//!   l.11; ops are idempotent CRDT effects, so the cache's versions win over older ones
//!   exactly as the paper's "cache first" does for registers).
//! - COMMIT (Alg. 2 l.17-33, Alg. 3 l.9-19): 2PC across the touched partitions' replicas
//!   (possibly in several DCs). A participant sets `HLC = max(Clock, ht + 1, HLC + 1)`
//!   with `ht = max(snapshot, hwt_c)`, adopts the snapshot into its `ust` and proposes a
//!   fresh timestamp above both (we issue strictly above `ust` too, so Lemma 1's
//!   `snapshot < ct` holds even when the UST runs ahead of the HLC); the coordinator
//!   commits at the max, and the client moves its writes into its cache tagged with it.
//!   Effects (a set remove's observed tags) are computed by the participant against the
//!   snapshot plus the client's cached writes of the key, which the commit carries.
//! - APPLY and REPLICATE (Alg. 4 l.5-33): `ub` = the lowest prepared time minus one, else
//!   the clock; committed txns with `ct <= ub` are applied in `ct` order, `VV[own] = ub`,
//!   and shipped to the partition's other replicas in that order, or a heartbeat. (The
//!   paper applies `ct < ub` and then claims `ub`; we apply `ct <= ub` so the claim holds.)
//!   The kit's replication streams (`kit::repl`) carry them, with acknowledgements and
//!   catch-up after restarts.
//! - UST (Alg. 4 l.34-38, §IV-B): every `stabilization_interval` each node reports the
//!   minimum of its partitions' `VV` entries to the nodes of its DC (all-to-all, like our
//!   Cure's GSS: a DC has few nodes and one round is fresher than the paper's tree); the
//!   meet is the DC's GST. The DC's root (its first node) sends the GST to the other DCs'
//!   roots; the meet of every DC's GST is the UST, which the root hands to its DC's
//!   nodes. A DC that cannot be heard freezes the UST everywhere (§III-C): transactions
//!   keep running on older snapshots and client caches grow until it heals.
//! - GC (§IV-B): the same exchange carries each node's oldest snapshot in use (its UST
//!   when it runs none); versions at or below the global minimum fold into the key's
//!   checkpoint (`kit::mvstore`).
//!
//! **Baselines** (§V): `bpr` takes snapshot = `max(client's highest seen, coordinator's
//! HLC)` and a read blocks at a partition until its `VV` covers the snapshot (every local
//! and remote txn up to it applied); no UST (the GC exchange still runs, every tenth
//! interval). `nocc` has no snapshot: reads return the latest received versions, commit
//! is 2PC where each participant proposes its clock + 1, no client cache, no UST.
//!
//! **Decisions where the paper is silent.** Durability as in our Cure (prepare records
//! before votes, coordinator decisions before COMMIT and before the client's answer,
//! presumed abort with inquiries, a persisted clock lease); a committed txn is applied
//! only once its commit record is durable, so `VV` never passes a txn a crash could
//! un-commit. Transaction contexts expire after `txn_idle_ns`. A client's cache holds
//! at most `cache_ops_max` writes: a commit that would pass it is refused ("UST frozen?")
//! rather than breaking read-your-writes. A whole DC failing for good is outside PaRiS's
//! fault model (§III-C discusses only partitions: the UST freezes until it heals), so
//! `Requirements::dc_failures` is false.

mod checkpoint;
mod coord;
mod msg;
mod node;
mod part;
mod session;
mod sweeps;
#[cfg(test)]
mod tests;
mod transfer;
mod types;
mod ust;

pub use msg::{Msg, Record};
pub use node::Node;
pub use session::Client;

use crate::kit::session::{Session, SessionCore};
use crate::params::{NodeConfig, Params};
use crate::{Guarantee, Requirements};
use causeway_core::{DcId, Nanos, PartitionId, SessionId, Topology};
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

crate::mutations! {
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

const REQUIREMENTS: Requirements = Requirements {
    full_replication: false,
    failed_dc_writes_may_vanish: true,
    uniform_barrier: false,
    dc_failures: false,
    token_moves: false,
    final_registers: true,
    atomic_unknowns: true,
    causal_commits_without_faults: true,
};

/// The registry entry's requirements for `flavor` (`flavor_protocol!`).
const fn requirements(_flavor: Flavor) -> Requirements {
    REQUIREMENTS
}

fn recover(
    flavor: Flavor,
    config: &NodeConfig,
    section: &Config,
    records: &[Vec<u8>],
) -> Result<Node, String> {
    Node::recover(config.clone(), section.clone(), flavor, records)
}

fn new_session(
    flavor: Flavor,
    id: SessionId,
    dc: DcId,
    topology: &Topology,
    params: &Params,
    section: &Config,
) -> Result<Session<Client>, String> {
    let core = SessionCore::new(flavor.name(), id, dc, topology.clone(), params.clone());
    let mutation = flavor.mutation(params.mutation.as_deref())?;
    Ok(Session::new(
        core,
        Client::new(flavor, mutation, section.cache_ops_max),
    ))
}

crate::flavor_protocol!(
    /// The `paris` protocol (registry entry).
    Paris,
    Flavor::Paris,
    Guarantee::Tcc,
    Flavor::Paris.mutations(),
    sweeps::SWEEPS
);
crate::flavor_protocol!(
    /// The `bpr` baseline (registry entry): blocking partial replication.
    Bpr,
    Flavor::Bpr,
    Guarantee::Tcc,
    Flavor::Bpr.mutations(),
    sweeps::BPR_SWEEPS
);
crate::flavor_protocol!(
    /// The `nocc` baseline (registry entry): no causal consistency; held to convergence
    /// (`--guarantee tcc` shows it violates TCC).
    Nocc,
    Flavor::Nocc,
    Guarantee::Convergence,
    Flavor::Nocc.mutations(),
    sweeps::NOCC_SWEEPS
);
