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

mod cts;
mod msg;
mod node;
mod session;
mod sweeps;
#[cfg(test)]
mod tests;

pub use cts::{Cts, Layout, Scheme};
pub use msg::{Msg, Record};
pub use node::Node;
pub use session::Client;

use crate::kit::session::{Session, SessionCore};
use crate::params::{NodeConfig, Params};
use crate::{Guarantee, Requirements};
use causeway_core::{DcId, Key, Nanos, NodeId, PartitionId, SessionId, Topology};
use serde::{Deserialize, Serialize};

/// Which of the two protocols on this code runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    Occult,
    /// No causal metadata, no read check, writes one by one (Redis Cluster).
    EventualMs,
}

impl Flavor {
    pub const fn name(self) -> &'static str {
        match self {
            Flavor::Occult => "occult",
            Flavor::EventualMs => "eventual-ms",
        }
    }

    /// The mutations this flavor runs (its registry entry's).
    pub const fn mutations(self) -> &'static [&'static str] {
        match self {
            Flavor::Occult => MUTATIONS,
            Flavor::EventualMs => &[],
        }
    }

    /// The mutation `name`, refused unless this flavor runs it.
    pub fn mutation(self, name: Option<&str>) -> Result<Mutation, String> {
        Mutation::parse_among(name, self.mutations(), self.name())
    }
}

crate::mutations! {
    /// Which deliberately broken variant runs, decoded from `Params::mutation`.
    pub struct Mutation for "occult" {
        /// The client accepts stale reads from slaves.
        no_read_check = "no-read-check",
        /// Commit without checking the read set against the overwrite set.
        skip_overwrite_validation = "skip-overwrite-validation",
        /// A master never sends a state transfer: a slave back after the log dropped what
        /// it lacks stays behind for good (`node/transfer.rs`).
        no_state_transfer = "no-state-transfer",
        /// A master's floor ignores its per-shard caps: a shard a prepared txn holds, or
        /// whose write is not yet streamed, reports the node's base floor.
        floor_without_caps = "floor-without-caps",
    }
    /// Deliberately broken variants the simulator and checker must catch.
    pub const MUTATIONS;
}

/// Logical shards (Redis Cluster's 16,384, §8.1).
pub const SHARDS: u32 = 16_384;
/// Most logical shards a cluster may have.
pub const SHARDS_MAX: u32 = 1 << 20;
/// Most entries in a causal timestamp.
pub const ENTRIES_MAX: usize = 4_096;
/// Most single-key writes a master queues behind locked shards.
pub const QUEUED_WRITES_MAX: usize = 4_096;
/// Most txn ids a master remembers having fenced.
pub const FENCES_MAX: usize = 65_536;
/// Most (write, overwritten write) pairs a session keeps for its history.
pub const OVERWRITES_MAX: usize = 4_096;

/// `[protocols.occult]` (and `eventual-ms`); times in ns of the node's clock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Logical shards.
    pub shards: u32,
    pub compression: Scheme,
    /// Shardstamps per causal timestamp (`n`); 0 = 4 (§8.2.1's best), or the scheme's
    /// minimum for the DC count if that is more (dc-isolate needs 2 per DC).
    pub entries: usize,
    /// Local retries of a stale read before it goes to the master (§4.3's `r`).
    pub read_retries: u8,
    /// The second retry's delay; each later one doubles it (the first is immediate).
    pub retry_backoff_ns: Nanos,
    /// Lock attempts per master after the first before the txn aborts (§6.2).
    pub lock_retries: u32,
    pub lock_backoff_ns: Nanos,
    /// A txn holding locks this long is terminated (§7).
    pub lock_timeout_ns: Nanos,
    /// How long a slave's acknowledgement may lag before the master rewinds its stream.
    pub lag_grace_ns: Nanos,
    /// A slave silent this long no longer holds back the master's log GC, once the log
    /// holds more than `silent_sibling_log_max` writes (a returning slave then gets a
    /// state transfer, `node/transfer.rs`).
    pub silent_sibling_ns: Nanos,
    pub silent_sibling_log_max: usize,
    /// A state transfer to a slave is not started again for this long.
    pub transfer_retry_ns: Nanos,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            shards: SHARDS,
            compression: Scheme::DcIsolate,
            entries: 0,
            read_retries: 4,
            retry_backoff_ns: 1_000_000,
            lock_retries: 2,
            lock_backoff_ns: 1_000_000,
            lock_timeout_ns: 2_000_000_000,
            lag_grace_ns: 500_000_000,
            silent_sibling_ns: 60_000_000_000,
            silent_sibling_log_max: crate::kit::repl::SILENT_SIBLING_LOG_MAX,
            transfer_retry_ns: crate::kit::transfer::TRANSFER_RETRY_NS,
        }
    }
}

impl Config {
    pub fn layout(&self, dcs: usize) -> Layout {
        Layout {
            scheme: self.compression,
            entries: self.entries_for(dcs),
            dcs,
        }
    }

    /// `entries`, with 0 resolved for `dcs` DCs.
    pub fn entries_for(&self, dcs: usize) -> usize {
        match self.entries {
            0 => Layout::entries_min(self.compression, dcs).max(4),
            n => n,
        }
    }

    fn validate(&self, dcs: usize) -> Result<(), String> {
        if !(1..=SHARDS_MAX).contains(&self.shards) {
            return Err(format!("shards = {} outside 1..={SHARDS_MAX}", self.shards));
        }
        let min = Layout::entries_min(self.compression, dcs);
        let n = self.entries_for(dcs);
        if !(min..=ENTRIES_MAX).contains(&n) {
            return Err(format!(
                "entries = {n} outside {min}..={ENTRIES_MAX} for {:?} with {dcs} DCs",
                self.compression
            ));
        }
        if self.lock_timeout_ns < 2 {
            return Err("lock_timeout_ns must be at least 2".into());
        }
        Ok(())
    }
}

/// The shard layout: key to shard, shard to partition, node and master DC.
#[derive(Clone, Debug)]
pub struct Shards {
    topology: Topology,
    count: u32,
}

impl Shards {
    pub fn new(topology: &Topology, count: u32) -> Shards {
        Shards {
            topology: topology.clone(),
            count,
        }
    }

    /// The key's hash (`Topology::key_hash`, FNV-1a) modulo the shard count.
    pub fn of(&self, key: &Key) -> u32 {
        (Topology::key_hash(key) % u64::from(self.count)) as u32
    }

    fn partition(&self, shard: u32) -> PartitionId {
        PartitionId(shard % self.topology.partitions)
    }

    pub fn master_dc(&self, shard: u32) -> DcId {
        self.topology.master_of(self.partition(shard))
    }

    pub fn node(&self, dc: DcId, shard: u32) -> NodeId {
        self.topology.node_of(dc, self.partition(shard))
    }

    pub fn dcs(&self) -> usize {
        usize::from(self.topology.dcs)
    }
}

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

crate::flavor_protocol!(
    /// The `occult` protocol (registry entry).
    Occult,
    Flavor::Occult,
    Guarantee::PcPsi,
    Flavor::Occult.mutations(),
    sweeps::SWEEPS,
    partition_of_key = partition_of_key
);
crate::flavor_protocol!(
    /// `eventual-ms`: master/slave with no causal metadata (registry entry).
    EventualMs,
    Flavor::EventualMs,
    Guarantee::Convergence,
    Flavor::EventualMs.mutations(),
    sweeps::EVENTUAL_MS_SWEEPS,
    partition_of_key = partition_of_key
);
