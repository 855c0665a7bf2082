//! Causeway protocols (layer 2): every protocol as sans-IO state machines, a server node
//! and a client session per protocol, behind one message type and one factory so that the
//! simulator and the runtime can run any of them by name.

pub mod common;
pub mod cure;
pub mod eventual;

use causeway_core::{ClientSession, DcId, NodeId, ServerNode, SessionId, Topology};
use serde::{Deserialize, Serialize};

/// Every message any protocol sends, node to node or client to node.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    Eventual(eventual::Msg),
    Cure(cure::Msg),
}

/// Protocol names this build can run.
pub const PROTOCOLS: &[&str] = &["eventual", "cure"];

/// Timing knobs shared by the protocols (all in nanoseconds of the node's clock).
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
}

pub type BoxedNode = Box<dyn ServerNode<Msg = Msg> + Send>;
pub type BoxedSession = Box<dyn ClientSession<Msg = Msg> + Send>;

/// Mutations (broken variants) each protocol knows.
pub fn mutations(protocol: &str) -> &'static [&'static str] {
    match protocol {
        "eventual" => eventual::MUTATIONS,
        "cure" => cure::MUTATIONS,
        _ => &[],
    }
}

fn check_protocol(protocol: &str, params: &Params) -> Result<(), String> {
    if !PROTOCOLS.contains(&protocol) {
        return Err(format!(
            "unknown protocol '{protocol}'; known: {}",
            PROTOCOLS.join(", ")
        ));
    }
    if let Some(m) = &params.mutation {
        if !mutations(protocol).contains(&m.as_str()) {
            return Err(format!(
                "protocol '{protocol}' has no mutation '{m}'; known: {}",
                mutations(protocol).join(", ")
            ));
        }
    }
    Ok(())
}

/// Builds a server node, recovering it from its persisted records (oldest first).
pub fn new_node(
    protocol: &str,
    config: NodeConfig,
    records: &[Vec<u8>],
) -> Result<BoxedNode, String> {
    check_protocol(protocol, &config.params)?;
    match protocol {
        "eventual" => Ok(Box::new(eventual::Node::recover(config, records)?)),
        "cure" => Ok(Box::new(cure::Node::recover(config, records)?)),
        _ => unreachable!("checked above"),
    }
}

/// Builds a client session of `protocol` living in `dc`.
pub fn new_session(
    protocol: &str,
    session: SessionId,
    dc: DcId,
    topology: &Topology,
    params: &Params,
) -> Result<BoxedSession, String> {
    check_protocol(protocol, params)?;
    match protocol {
        "eventual" => Ok(Box::new(eventual::Session::new(
            session,
            dc,
            topology.clone(),
            params.clone(),
        ))),
        "cure" => Ok(Box::new(cure::Session::new(
            session,
            dc,
            topology.clone(),
            params.clone(),
        ))),
        _ => unreachable!("checked above"),
    }
}
