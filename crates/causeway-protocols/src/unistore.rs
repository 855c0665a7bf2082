//! `unistore`: UniStore's fault-tolerant causal consistency (Bravo, Gotsman et al., USENIX
//! ATC 2021, shared/papers/004, §4-§5, Algorithms 1-2 without the strong lines), on the
//! Cure engine (`cure::Flavor::UniStore`). What it adds to Cure:
//!
//! - **Uniformity** (§5.1, §5.4): sibling nodes exchange their DC's stable vector
//!   (STABLEVEC); `uniformVec` is the best any group of f+1 DCs including ours has all
//!   stored (`kit::uniform`). Remote txns become visible only once uniform.
//! - **Snapshots** (Alg. 1 l.2-7): `uniformVec` with the client's own DC entry, no START
//!   wait; coordinators and partitions adopt the remote entries of the pasts and
//!   snapshots they see (l.2-3, l.19-20, l.37-38).
//! - **Forwarding** (§5.5): a sibling whose acknowledgement of a third DC's stream lags
//!   gets the missing txns relayed from our log (the engine's catch-up, `kit::repl`), so a
//!   txn that reached any surviving DC reaches them all after its origin fails.
//! - **UNIFORM_BARRIER and ATTACH** (§5.6, Alg. 1 l.49-52): parked at a node of the
//!   session's DC until `uniformVec` covers the session's own-DC entry (barrier) or every
//!   remote entry of the attached token (attach).
//!
//! The strong entry of the vectors (`Extra::Strong` of `Vc`) is left for the strong
//! transactions of part 2. `f` defaults to the most a majority tolerates, (dcs - 1) / 2.

use crate::cure::{self, Client, Flavor, Msg, Node};
use crate::kit::session::Session;
use crate::{Guarantee, NodeConfig, Params, Protocol, Requirements};
use causeway_core::{DcId, SessionId, Topology};
use serde::{Deserialize, Serialize};

/// The `unistore` protocol (registry entry).
pub struct UniStore;

/// Cure's mutations (they break the engine UniStore shares) and UniStore's own.
const MUTATIONS: &[&str] = &[
    "no-read-wait",
    "pvc-ignores-prepared",
    "commit-time-min",
    "no-forwarding",
    "visible-before-uniform",
    "attach-no-wait",
];

impl Protocol for UniStore {
    const NAME: &'static str = "unistore";
    const GUARANTEE: Guarantee = Guarantee::Por;
    const MUTATIONS: &'static [&'static str] = MUTATIONS;
    const REQUIREMENTS: Requirements = Requirements {
        full_replication: true,
        failed_dc_writes_may_vanish: false, // §4: Eventual Visibility despite f failures
        uniform_barrier: true,
    };
    type Msg = Msg;
    type Config = Config;
    type Node = Node;
    type Session = Session<Client>;

    fn recover(config: &NodeConfig, section: &Config, records: &[Vec<u8>]) -> Result<Node, String> {
        let flavor = Flavor::UniStore {
            f: section.f_for(config.topology.dcs),
        };
        Node::recover(config.clone(), section.engine(), flavor, records)
    }

    fn tolerated_failures(section: &Config, dcs: u16) -> usize {
        section.f_for(dcs)
    }

    fn session(
        id: SessionId,
        dc: DcId,
        topology: &Topology,
        params: &Params,
        section: &Config,
    ) -> Session<Client> {
        let flavor = Flavor::UniStore {
            f: section.f_for(topology.dcs),
        };
        cure::session(flavor, id, dc, topology, params)
    }
}

/// `[protocols.unistore]`: how many DC failures to tolerate, and the engine's tunables
/// (the same as `[protocols.cure]`, same defaults).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// DC failures tolerated: a txn is uniform once f+1 DCs store it. Default:
    /// (dcs - 1) / 2, the most a majority of DCs tolerates. Must be below the DC count.
    pub f: Option<usize>,
    pub lease_ns: Option<u64>,
    pub inquire_after_ns: Option<u64>,
    pub prepare_timeout_ns: Option<u64>,
    pub txn_idle_ns: Option<u64>,
    pub lag_grace_ns: Option<u64>,
    pub silent_sibling_ns: Option<u64>,
    pub one_phase: Option<bool>,
}

impl Config {
    /// `f` for a cluster of `dcs` DCs.
    pub fn f_for(&self, dcs: u16) -> usize {
        self.f.unwrap_or(usize::from(dcs.saturating_sub(1)) / 2)
    }

    /// The engine's tunables: ours where set, Cure's defaults otherwise.
    pub fn engine(&self) -> cure::Config {
        let d = cure::Config::default();
        cure::Config {
            lease_ns: self.lease_ns.unwrap_or(d.lease_ns),
            inquire_after_ns: self.inquire_after_ns.unwrap_or(d.inquire_after_ns),
            prepare_timeout_ns: self.prepare_timeout_ns.unwrap_or(d.prepare_timeout_ns),
            txn_idle_ns: self.txn_idle_ns.unwrap_or(d.txn_idle_ns),
            lag_grace_ns: self.lag_grace_ns.unwrap_or(d.lag_grace_ns),
            silent_sibling_ns: self.silent_sibling_ns.unwrap_or(d.silent_sibling_ns),
            one_phase: self.one_phase.unwrap_or(d.one_phase),
        }
    }
}
