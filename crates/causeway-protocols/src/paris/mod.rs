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
mod config;
mod coord;
mod coord_state;
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

pub use config::{
    target_dc, Config, Flavor, Mutation, BPR_MUTATIONS, CACHE_OPS_MAX, INQUIRE_AFTER_NS,
    LAG_GRACE_NS, LEASE_NS, MUTATIONS, PREPARE_TIMEOUT_NS, SILENT_SIBLING_NS, TXN_IDLE_NS,
};
pub use msg::{Msg, Record};
pub use node::Node;
pub use session::Client;

use crate::kit::session::{Session, SessionCore};
use crate::params::{NodeConfig, Params};
use crate::registry::{Guarantee, Requirements};
use causeway_core::{DcId, SessionId, Topology};

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

flavor_protocol!(
    /// The `paris` protocol (registry entry).
    Paris,
    Flavor::Paris,
    Guarantee::Tcc,
    Flavor::Paris.mutations(),
    sweeps::SWEEPS
);
flavor_protocol!(
    /// The `bpr` baseline (registry entry): blocking partial replication.
    Bpr,
    Flavor::Bpr,
    Guarantee::Tcc,
    Flavor::Bpr.mutations(),
    sweeps::BPR_SWEEPS
);
flavor_protocol!(
    /// The `nocc` baseline (registry entry): no causal consistency; held to convergence
    /// (`--guarantee tcc` shows it violates TCC).
    Nocc,
    Flavor::Nocc,
    Guarantee::Convergence,
    Flavor::Nocc.mutations(),
    sweeps::NOCC_SWEEPS
);
