//! Occult's configuration: which of the two protocols runs (the flavor), the mutation
//! table, the limits, `[protocol.occult]`'s tunables, and the shard layout. A ground floor
//! of the folder: the node and the session take these from here, not from `mod.rs`,
//! which imports them.

use super::cts::{Layout, Scheme};
use causeway_core::{DcId, Key, Nanos, NodeId, PartitionId, Topology};
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

mutations! {
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

    pub(super) fn validate(&self, dcs: usize) -> Result<(), String> {
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

    pub(super) fn partition(&self, shard: u32) -> PartitionId {
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
