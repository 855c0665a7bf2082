//! `occult`: Occult (Mehdi, Littley, Crooks, Alvisi, Lloyd, NSDI'17; shared/papers/000,
//! §3-§7, Figures 3-4, Appendix A), causal consistency enforced by the client library so
//! that no server ever waits for another (no slowdown cascades), with compressed causal
//! timestamps and PC-PSI read-write transactions; plus `eventual-ms`, the same
//! master/slave store with no causal metadata (the paper's Redis Cluster baseline).
//!
//! **Shards** (§4.1, §8.1). Keys hash (FNV-1a) onto `shards` logical shards (16,384 by
//! default, as Redis Cluster); shard `s` lives on partition `s % partitions`, so on node
//! `partition % nodes_per_dc` of every DC; its master DC is the partition's master
//! (`Topology::master_of`: `partition % dcs`, which puts half the masters in each of two
//! DCs as §8.1 does). Every DC holds every shard (full replication).
//!
//! **Basic protocol** (§4.2-4.3). A master gives each write a new shardstamp (Listing 2
//! `newShardstamp`: above the current one, the node's clock and the client's highest entry
//! for that DC, §5), stores the value with the client's causal timestamp whose entry for
//! the shard is the new shardstamp (Fig. 4), and replicates the shard's writes to the
//! slaves in order (`kit::repl`: one stream per master node and sibling, acknowledged,
//! rewound when a sibling lags). A read goes to the local server, which answers the value,
//! its causal timestamp and the shard's shardstamp; the client accepts it if it came from
//! the master or the shardstamp reaches the client's entry for the shard (Fig. 3 l.13),
//! else retries locally `read_retries` times after 0, 1, 2, 4 ms and then reads at the
//! master (§4.3). Accepted reads merge their timestamp into the client's. Idle shards
//! advance by the master's heartbeat floor (`msg::Floor`, decided here): a base from its
//! clock, with per-shard caps for the shards a prepared txn holds or whose writes are not
//! yet streamed, so a txn holds back only its own shards (shardstamps are per shard).
//!
//! **Compression** (§5): `structural`, `temporal` or `dc-isolate` with `entries`
//! shardstamps (`cts.rs`).
//!
//! **Transactions: PC-PSI** (§6.2, Listing 3). Reads as above fill the read set (key,
//! deps, shardstamp) and writes are buffered. COMMIT validates the read set pairwise
//! (abort "validation-read-set"), locks the write set's shards at their masters (Listing 2
//! locks shards, so each shard applies its writes in shardstamp order), retrying a locked
//! master `lock_retries` times after `lock_backoff_ns` (then abort "lock"), takes each
//! key's current deps (the overwrite set) and new shardstamp, checks the read set is at
//! least as recent as the overwrite set (abort "validation-overwrite-set"), and commits
//! with `ts_T` = the client's timestamp (read deps merged, new shardstamps in): every
//! write of the txn carries `ts_T`, so they depend on each other (§6.2). A single write
//! with no reads takes Fig. 3's one-round path instead. A commit's effects (CRDT updates)
//! are computed at the master under the lock, on the state the overwrite-set check
//! vouched for.
//!
//! **Termination** (§7, decided here). The client names one participant master (one in
//! its DC when it can) the txn's coordinator: COMMIT goes to it, it records the decision
//! durably, applies its writes and forwards the decision to the other participants,
//! re-sending until each acknowledges (`kit::twopc::Decisions`). A participant holding a
//! txn's locks for `lock_timeout_ns` asks the coordinator: the decision if there is one,
//! else the coordinator fences the txn (its late COMMIT or PREPARE is refused, the
//! client aborts) and answers abort. A coordinator that times out itself fences and
//! releases. So a dead client never holds locks for good and no txn is half applied:
//! Bernstein's cooperative termination with the coordinator's decision as the single
//! point (no Paxos election needed since the coordinator is a durable server).
//!
//! **Failures.** Every write, prepare and decision is durable before it is acknowledged,
//! replicated or read at the master (a read of a shard whose last write is in flight
//! waits), so a crashed master restarts with all it acknowledged or showed. A
//! participant's commit is one record (its writes and the release), kept whole or not at
//! all; a coordinator back with a decision and the txn still prepared commits it at
//! start (a crash fell between its `Decided` record and its writes). The loss of a
//! master's whole DC (§7: asynchronously replicated writes may be lost and dependents
//! replicated without them) is outside the fault model: `dc_failures = false`.
//!
//! **Metadata and counters** (node gauges, cumulative): first reads, stale reads,
//! local retries, master fallbacks, causal-timestamp bytes per read reply item and per
//! stored object.

mod config;
mod cts;
mod msg;
mod node;
mod session;
mod sweeps;
#[cfg(test)]
mod tests;

pub use config::{
    Config, Flavor, Mutation, Shards, ENTRIES_MAX, FENCES_MAX, MUTATIONS, OVERWRITES_MAX,
    QUEUED_WRITES_MAX, SHARDS, SHARDS_MAX,
};
pub use cts::{Cts, Layout, Scheme};
pub use msg::{Msg, Record};
pub use node::Node;
pub use session::Client;

use crate::kit::session::{Session, SessionCore};
use crate::params::{NodeConfig, Params};
use crate::registry::{Guarantee, Requirements};
use causeway_core::{DcId, Key, PartitionId, SessionId, Topology};

const REQUIREMENTS: Requirements = Requirements {
    full_replication: true,
    failed_dc_writes_may_vanish: true,
    uniform_barrier: false,
    dc_failures: false,
    token_moves: true,
    final_registers: true,
    atomic_unknowns: true,
    causal_commits_without_faults: false, // §6.2: validation and lock failures abort
};

/// The registry entry's requirements for `flavor` (`flavor_protocol!`).
const fn requirements(flavor: Flavor) -> Requirements {
    match flavor {
        Flavor::Occult => REQUIREMENTS,
        // The baseline's txns take no validation: nothing aborts them but faults.
        Flavor::EventualMs => Requirements {
            causal_commits_without_faults: true,
            ..REQUIREMENTS
        },
    }
}

fn recover(
    flavor: Flavor,
    config: &NodeConfig,
    section: &Config,
    records: &[Vec<u8>],
) -> Result<Node, String> {
    section.validate(usize::from(config.topology.dcs))?;
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
    let mut section = section.clone();
    if section.validate(usize::from(topology.dcs)).is_err() {
        section = Config::default(); // the nodes refuse such a config with its reason
    }
    let shards = Shards::new(topology, section.shards);
    Ok(Session::new(
        core,
        Client::new(flavor, mutation, section, shards),
    ))
}

/// The partition storing `key`: its shard's (the registry's `partition_of_key`).
fn partition_of_key(section: &Config, topology: &Topology, key: &Key) -> PartitionId {
    let shards = Shards::new(topology, section.shards);
    shards.partition(shards.of(key))
}

flavor_protocol!(
    /// The `occult` protocol (registry entry).
    Occult,
    Flavor::Occult,
    Guarantee::PcPsi,
    Flavor::Occult.mutations(),
    sweeps::SWEEPS,
    partition_of_key = partition_of_key
);
flavor_protocol!(
    /// `eventual-ms`: master/slave with no causal metadata (registry entry).
    EventualMs,
    Flavor::EventualMs,
    Guarantee::Convergence,
    Flavor::EventualMs.mutations(),
    sweeps::EVENTUAL_MS_SWEEPS,
    partition_of_key = partition_of_key
);
