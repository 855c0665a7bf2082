//! `cureft`: UniStore's CUREFT baseline (shared/papers/004, §8.3): Cure made fault
//! tolerant by transaction forwarding, without uniformity tracking, on the same engine as
//! `unistore` (`cure::Flavor::CureFt`). Snapshots follow UniStore's Alg. 1 l.2-7 with the
//! stable vector (the GSS) where UniStore uses `uniformVec`, so the pair measures exactly
//! what uniformity costs (Fig. 5). ATTACH waits for the stable vector; there is no uniform
//! barrier (nothing tracks what f+1 DCs store). The config section is Cure's.

use crate::cure::{Client, Config, Flavor, Msg, Node, MUTATIONS};
use crate::kit::session::Session;
use crate::params::{NodeConfig, Params};
use crate::registry::{Guarantee, Protocol, Requirements};
use causeway_core::{DcId, SessionId, Topology};

/// The `cureft` protocol (registry entry).
pub struct CureFt;

impl Protocol for CureFt {
    const NAME: &'static str = "cureft";
    const GUARANTEE: Guarantee = Guarantee::Tcc;
    const MUTATIONS: &'static [&'static str] = MUTATIONS;
    const SWEEPS: &'static [crate::sweep::Sweep] = crate::cure::sweeps::CUREFT_SWEEPS;
    const REQUIREMENTS: Requirements = Requirements {
        full_replication: true,
        failed_dc_writes_may_vanish: false, // forwarding (§5.5)
        uniform_barrier: false,
        dc_failures: true,
        token_moves: false,
        final_registers: true,
        atomic_unknowns: true,
        causal_commits_without_faults: true,
    };
    type Msg = Msg;
    type Config = Config;
    type Node = Node;
    type Session = Session<Client>;

    fn recover(config: &NodeConfig, section: &Config, records: &[Vec<u8>]) -> Result<Node, String> {
        Node::recover(config.clone(), section.clone(), Flavor::CureFt, records)
    }

    fn session(
        id: SessionId,
        dc: DcId,
        topology: &Topology,
        params: &Params,
        _: &Config,
    ) -> Result<Session<Client>, String> {
        crate::cure::session(Flavor::CureFt, id, dc, topology, params)
    }

    fn encode_msg_by_hand(msg: &Msg, out: &mut Vec<u8>) -> bool {
        crate::cure::msg_enc::encode_into(msg, out)
    }
}
