//! Causeway protocols (layer 2): every protocol as sans-IO state machines, a server node
//! and a client session per protocol, and the registry that lets the simulator and the
//! runtime run any of them by name.
//!
//! A protocol is a type implementing [`Protocol`]: its name, guarantee, mutations, its own
//! message type, its own config section (`[protocol.NAME]` in the cluster file, typed,
//! with defaults), its topology requirements, and its node and session constructors
//! (recovery included). The one `registry!` line per protocol at the bottom of this file
//! generates the wire enum [`Msg`], [`PROTOCOLS`], the factories and the mutation lookup.
//! Drivers hold machines as [`BoxedNode`] / [`BoxedSession`], which speak [`Msg`]; a
//! message of another protocol is a [`WrongProtocol`] error the driver sees.
//!
//! [`kit`] holds the pieces protocols share.

pub mod cure;
pub mod cureft;
pub mod eventual;
pub mod kit;
pub mod occult;
pub mod paris;
pub mod promptcc;
#[macro_use]
pub mod registry;
pub mod sweep;
pub mod unistore;

pub use registry::{
    AnyNode, AnySession, BoxedNode, BoxedSession, Guarantee, Protocol, Requirements, WrongProtocol,
};

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
}

impl Default for Params {
    fn default() -> Params {
        Params {
            replication_interval_ns: 5_000_000,
            stabilization_interval_ns: 5_000_000,
            request_timeout_ns: 10_000_000_000,
            mutation: None,
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

registry! {
    Eventual => eventual::Eventual,
    Cure => cure::Cure,
    CureFt => cureft::CureFt,
    UniStore => unistore::UniStore,
    Strong => unistore::StrongBaseline,
    RedBlue => unistore::RedBlue,
    Paris => paris::Paris,
    Bpr => paris::Bpr,
    Nocc => paris::Nocc,
    PrompTcc => promptcc::PrompTcc,
    PrompTccNaive => promptcc::PrompTccNaive,
    Wren => promptcc::Wren,
    Eiger => promptcc::Eiger,
    Occult => occult::Occult,
    EventualMs => occult::EventualMs,
}
