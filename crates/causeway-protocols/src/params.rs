//! The ground floor of the protocols crate: what every protocol, the kit and the registry
//! are built with, [`Params`] (the timing knobs and the mutation every protocol shares)
//! and [`NodeConfig`] (everything a server node gets at construction). It imports nothing
//! from the crate, so any module may import it without reaching back up to `lib.rs`.

use causeway_core::{NodeId, Topology};
use serde::{Deserialize, Serialize};

/// Timing knobs every protocol shares (all in nanoseconds of the node's clock).
/// Protocol-specific settings live in the protocol's own config section.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Params {
    /// How often partitions replicate to or heartbeat their siblings in other DCs.
    pub replication_interval_ns: u64,
    /// How often partitions of a DC exchange their vectors to compute the stable one.
    pub stabilization_interval_ns: u64,
    /// How long a client session waits for an answer before giving up on a request.
    pub request_timeout_ns: u64,
    /// Deliberately broken variant to run, for testing the checker (`None` = correct).
    pub mutation: Option<String>,
    /// How far after boot this node's periodic timers (replication, stabilization) first
    /// fire. Nodes of a real cluster boot apart, so their timers tick out of phase; the
    /// simulator boots every node at once and draws each node's phase from the seed, below
    /// the shorter interval, so that its nodes do not tick in lockstep (a lockstep adds a
    /// fixed wait to every cross-node step and makes latency distributions vertical).
    #[serde(default)]
    pub timer_phase_ns: u64,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            replication_interval_ns: 5_000_000,
            stabilization_interval_ns: 5_000_000,
            request_timeout_ns: 10_000_000_000,
            mutation: None,
            timer_phase_ns: 0,
        }
    }
}

/// Everything a server node needs to know at construction.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeConfig {
    pub node: NodeId,
    pub topology: Topology,
    pub params: Params,
    /// The protocol's own config section (`[protocol.NAME]`); `Null` means defaults.
    pub section: serde_json::Value,
}

impl NodeConfig {
    /// A node config with default protocol settings.
    pub fn new(node: NodeId, topology: Topology, params: Params) -> NodeConfig {
        NodeConfig {
            node,
            topology,
            params,
            section: serde_json::Value::Null,
        }
    }
}
