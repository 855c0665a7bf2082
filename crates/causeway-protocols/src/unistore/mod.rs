//! `unistore`: UniStore's fault-tolerant causal consistency (Bravo, Gotsman et al., USENIX
//! ATC 2021, shared/papers/004, §4-§5, Algorithms 1-2 without the strong lines), on the
//! Cure engine with its extension [`UniExt`] (`hooks.rs`), under CureFt's snapshot rules
//! (`cure/ft.rs`). What it adds to Cure:
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
//! - **Strong transactions** (§6, Alg. 3; `strong.rs`): speculative execution on a
//!   snapshot with a strong entry, COMMIT_STRONG = uniform barrier + certification by 2PC
//!   over per-partition consensus groups (`kit::paxos` + `kit::certify`), delivery in
//!   strong-timestamp order, strong heartbeats, recovery of orphaned txns.
//!
//! Files: this one (the registry entries and `[protocols.unistore]`), `hooks.rs` (the
//! state, [`UniExt`], and the engine's hooks), `uniform.rs` (uniformity, snapshots,
//! barriers), `strong.rs` (Alg. 3), `strong_gc.rs` (the certification groups' checkpoint
//! and GC), `strong_transfer.rs` (their state transfer): `impl Node<UniExt>` blocks.
//!
//! `f` defaults to the most a majority tolerates, (dcs - 1) / 2. The baselines of §8.1
//! are registry entries on the same code: `strong` (every txn strong: serializability)
//! and `redblue` (every two strong txns conflict on a common key, whatever their types,
//! certified centrally by partition 0's group);
//! `causal` is `unistore` with `strong_txns = false`.

mod early;
mod hooks;
mod state;
mod strong;
mod strong_gc;
#[cfg(test)]
mod strong_tests;
mod strong_transfer;
#[cfg(test)]
mod strong_transfer_tests;
mod uniform;
#[cfg(test)]
mod unistore_tests;

pub use hooks::UniExt;
pub use state::StrongConfig;

use crate::cure::{self, Client, Flavor, Msg, UNISTORE_MUTATIONS};
use crate::kit::certify::Relation;
use crate::kit::session::Session;
use crate::params::{NodeConfig, Params};
use crate::registry::{Guarantee, Protocol, Requirements};
use crate::sweep::Sweep;
use causeway_core::{DcId, SessionId, Topology, TxnKind};
use serde::{Deserialize, Serialize};

/// Cure's mutations (they break the engine UniStore shares) and UniStore's own.
const MUTATIONS: &[&str] = UNISTORE_MUTATIONS;

/// The engine's node running UniStore.
pub type Node = cure::Node<UniExt>;

const REQUIREMENTS: Requirements = Requirements {
    full_replication: true,
    failed_dc_writes_may_vanish: false, // §4: Eventual Visibility despite f failures
    uniform_barrier: true,
    dc_failures: true,
    token_moves: false,
    final_registers: true,
    atomic_unknowns: true,
    causal_commits_without_faults: true,
};

/// The requirements of `mode`: STRONG certifies every txn, so conflicts abort causal ones.
const fn requirements(mode: Mode) -> Requirements {
    Requirements {
        causal_commits_without_faults: !matches!(mode, Mode::Strong),
        ..REQUIREMENTS
    }
}

/// Which of the three protocols on UniStore's code runs.
#[derive(Clone, Copy)]
enum Mode {
    UniStore,
    /// §8.1 STRONG: every txn strong, conflicts by the ad-hoc relation.
    Strong,
    /// §8.1 REDBLUE: every two strong txns sharing a key conflict, whatever their types
    /// (ad-hoc relation, no declared rules), one central certifier.
    RedBlue,
}

fn recover(
    mode: Mode,
    config: &NodeConfig,
    section: &Config,
    records: &[Vec<u8>],
) -> Result<Node, String> {
    section.validate(config.topology.dcs)?;
    let topo = &config.topology;
    let (dcs, d) = (
        usize::from(topo.dcs),
        usize::from(topo.dc_of(config.node).0),
    );
    let (engine, strong) = section.engine(mode);
    let ext = UniExt::new(dcs, d, section.f_for(topo.dcs), strong)?;
    // UniStore's snapshots are the fault-tolerant ones, on `uniformVec` (its extension).
    Node::recover_with(config.clone(), engine, Flavor::CureFt, ext, records)
}

fn session(
    mode: Mode,
    id: SessionId,
    dc: DcId,
    topology: &Topology,
    params: &Params,
    section: &Config,
) -> Result<Session<Client>, String> {
    let named = ("unistore", MUTATIONS);
    let mut s = cure::session_of(named, Flavor::CureFt, id, dc, topology, params)?;
    s.client.strong_txns = true;
    s.client.barriers = true;
    s.client.kind_override = match mode {
        Mode::Strong => Some(TxnKind::Strong),
        _ if section.strong_txns == Some(false) => Some(TxnKind::Causal),
        _ => None,
    };
    Ok(s)
}

/// Defines a registry entry running UniStore's code in `mode`.
macro_rules! unistore_protocol {
    ($(#[$doc:meta])* $ty:ident, $name:literal, $mode:expr, $mutations:expr, $sweeps:expr) => {
        $(#[$doc])*
        pub struct $ty;

        impl Protocol for $ty {
            const NAME: &'static str = $name;
            const GUARANTEE: Guarantee = Guarantee::Por;
            const MUTATIONS: &'static [&'static str] = $mutations;
            const SWEEPS: &'static [Sweep] = $sweeps;
            const REQUIREMENTS: Requirements = requirements($mode);
            type Msg = Msg;
            type Config = Config;
            type Node = Node;
            type Session = Session<Client>;

            fn recover(
                config: &NodeConfig,
                section: &Config,
                records: &[Vec<u8>],
            ) -> Result<Node, String> {
                recover($mode, config, section, records)
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
            ) -> Result<Session<Client>, String> {
                session($mode, id, dc, topology, params, section)
            }

            fn encode_msg_by_hand(msg: &Msg, out: &mut Vec<u8>) -> bool {
                crate::cure::msg_enc::encode_into(msg, out)
            }
        }
    };
}

unistore_protocol!(
    /// The `unistore` protocol (registry entry).
    UniStore,
    "unistore",
    Mode::UniStore,
    MUTATIONS,
    SWEEPS
);
unistore_protocol!(
    /// UniStore's STRONG baseline (§8.1): every txn strong (registry entry `strong`).
    StrongBaseline,
    "strong",
    Mode::Strong,
    &["certify-ignores-conflicts"],
    STRONG_SWEEPS
);
unistore_protocol!(
    /// UniStore's REDBLUE baseline (§8.1): all strong txns conflict (on common keys),
    /// certified centrally (registry entry `redblue`).
    RedBlue,
    "redblue",
    Mode::RedBlue,
    &["certify-ignores-conflicts"],
    REDBLUE_SWEEPS
);

/// `[protocols.unistore]` (also `[protocols.strong]`, `[protocols.redblue]`): how many
/// DC failures to tolerate, strong-transaction settings, and the engine's tunables (the
/// same as `[protocols.cure]`, same defaults).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// DC failures tolerated: a txn is uniform once f+1 DCs store it. Default:
    /// (dcs - 1) / 2, the most a majority of DCs tolerates. Must be below the DC count.
    pub f: Option<usize>,
    /// The DC whose replicas lead the certification groups while up (default 0).
    pub leader_dc: Option<u16>,
    /// `false`: strong txns run causal and no certification runs (the paper's CAUSAL
    /// baseline, and UNIFORM of §8.3). Default true.
    pub strong_txns: Option<bool>,
    /// The declared conflict relation the certifier enforces: `default` (every strong
    /// txn ad-hoc), `rubis`, or rules `TYPE TYPE PATTERN; ...` (transaction types are the
    /// BEGIN's label). Default: `default`.
    pub conflicts: Option<String>,
    pub strong_heartbeat_ns: Option<u64>,
    pub strong_recover_ns: Option<u64>,
    pub strong_timeout_ns: Option<u64>,
    pub strong_retry_ns: Option<u64>,
    /// Decided slots a certification group keeps for a lagging member before it gets a
    /// state transfer instead (default 65,536).
    pub strong_log_kept_max: Option<u64>,
    pub lease_ns: Option<u64>,
    pub inquire_after_ns: Option<u64>,
    pub prepare_timeout_ns: Option<u64>,
    pub txn_idle_ns: Option<u64>,
    pub lag_grace_ns: Option<u64>,
    pub silent_sibling_ns: Option<u64>,
    pub silent_sibling_log_max: Option<usize>,
    pub transfer_retry_ns: Option<u64>,
    pub one_phase: Option<bool>,
}

impl Config {
    /// `f` for a cluster of `dcs` DCs.
    pub fn f_for(&self, dcs: u16) -> usize {
        self.f.unwrap_or(usize::from(dcs.saturating_sub(1)) / 2)
    }

    fn validate(&self, dcs: u16) -> Result<(), String> {
        if let Some(l) = self.leader_dc.filter(|l| *l >= dcs) {
            return Err(format!("leader_dc = {l}, the cluster has DCs 0..{dcs}"));
        }
        if let Some(c) = &self.conflicts {
            causeway_core::conflict::parse_rules(c).map_err(|e| format!("conflicts: {e}"))?;
        }
        if self.strong_heartbeat_ns == Some(0) {
            return Err("strong_heartbeat_ns must be positive".into());
        }
        Ok(())
    }

    /// The engine's tunables (ours where set, Cure's defaults otherwise) and the strong
    /// txns' ones.
    fn engine(&self, mode: Mode) -> (cure::Config, StrongConfig) {
        let d = cure::Config::default();
        let s = StrongConfig::default();
        let strong = StrongConfig {
            leader_dc: self.leader_dc.unwrap_or(s.leader_dc),
            heartbeat_ns: self.strong_heartbeat_ns.unwrap_or(s.heartbeat_ns),
            recover_ns: self.strong_recover_ns.unwrap_or(s.recover_ns),
            timeout_ns: self.strong_timeout_ns.unwrap_or(s.timeout_ns),
            retry_ns: self.strong_retry_ns.unwrap_or(s.retry_ns),
            log_kept_max: self.strong_log_kept_max.unwrap_or(s.log_kept_max),
            // REDBLUE's strong txns all conflict as types, so they meet through their
            // keys by the ad-hoc rule, whatever the declared rules say: the authors'
            // baseline commits every red txn under one conflict label ("default",
            // ergl/lasp-bench rubis_bench_redblue.erl) and its central sequencer checks
            // them key by key (ergl/rb_sequencer rb_sequencer_paxos_state.erl,
            // check_prepared and check_committed), as UniStore's partitions do.
            relation: Relation::AdHoc,
            central: matches!(mode, Mode::RedBlue),
            enabled: self.strong_txns != Some(false) || matches!(mode, Mode::Strong),
            // STRONG and REDBLUE declare no rules: every strong txn is ad-hoc (§8.1).
            rules: match mode {
                Mode::UniStore => self
                    .conflicts
                    .as_deref()
                    .and_then(|c| causeway_core::conflict::parse_rules(c).ok())
                    .unwrap_or_default(),
                _ => Vec::new(),
            },
        };
        let engine = cure::Config {
            lease_ns: self.lease_ns.unwrap_or(d.lease_ns),
            inquire_after_ns: self.inquire_after_ns.unwrap_or(d.inquire_after_ns),
            prepare_timeout_ns: self.prepare_timeout_ns.unwrap_or(d.prepare_timeout_ns),
            txn_idle_ns: self.txn_idle_ns.unwrap_or(d.txn_idle_ns),
            lag_grace_ns: self.lag_grace_ns.unwrap_or(d.lag_grace_ns),
            silent_sibling_ns: self.silent_sibling_ns.unwrap_or(d.silent_sibling_ns),
            silent_sibling_log_max: self
                .silent_sibling_log_max
                .unwrap_or(d.silent_sibling_log_max),
            transfer_retry_ns: self.transfer_retry_ns.unwrap_or(d.transfer_retry_ns),
            one_phase: self.one_phase.unwrap_or(d.one_phase),
        };
        (engine, strong)
    }
}

/// A long outage with strong txns (`unistore/strong_transfer.rs`): with `strong_log_kept_max`
/// small the certification groups forget what a majority decided, so a returning DC's
/// group member needs the transfer's certification state too.
macro_rules! strong_outage {
    () => {
        "--strong-ratio 0.3 --keys 20 --set silent_sibling_ns=300000000 \
         --set silent_sibling_log_max=0 --set strong_log_kept_max=16"
    };
}

/// UniStore's runs ([`crate::sweep`]): uniform barriers, moves between DCs and DC failures
/// up to f; strong txns under every fault; a run catching each of its own mutations (Cure's
/// are caught under `cure`, `no-uniform-barrier` by `unistore::strong_tests`).
const SWEEPS: &[Sweep] = &[
    Sweep::pass("--seeds 1 --faults all --strong-ratio 0.3 --keys 20").quick(),
    Sweep::caught("--mutation visible-before-uniform --faults dc-failure --seeds 1..3").quick(),
    // Redis strings that count, strong read-modify-writes of them among causal INCRBYs.
    Sweep::pass("--seeds 1..6 --faults all --strong-ratio 0.3 --keys 20 --objects strings"),
    // Keys freed by DEL and written with another type, and those parts deleted.
    Sweep::pass("--seeds 1..6 --faults all --strong-ratio 0.3 --keys 20 --objects retype"),
    Sweep::pass(cure::sweeps::READ_THEN_COMMIT_RMW),
    Sweep::pass(cure::sweeps::READ_THEN_COMMIT_HOT),
    Sweep::pass(cure::sweeps::SLOW_LINKS),
    // The stricter liveness: a failed DC's txn that a survivor saw, or that a completed
    // barrier covered, must survive it.
    Sweep::pass("--seeds 1..30 --faults all"),
    // A DC that fails after reaching only some DCs (no-forwarding), barriers that return
    // before f+1 DCs store the session's past (visible-before-uniform), partitions that
    // keep a moved session's past from its new DC (attach-no-wait).
    Sweep::caught("--mutation no-forwarding --faults dc-failure --seeds 1..25"),
    Sweep::caught("--mutation attach-no-wait --faults partitions --seeds 1..3"),
    // Strong txns must keep committing after DC failures (the sim prints
    // strong_after_failure); RUBiS with its declared conflicts.
    Sweep::pass("--seeds 1..20 --faults all --strong-ratio 0.3 --keys 20"),
    Sweep::pass("--workload rubis --seeds 1..3 --faults all"),
    // Certification that ignores conflicts (a lost update the PoR check sees); quorums of
    // n/2 (logs diverge when a partition splits a group at the wrong moment: 5 of seeds
    // 11..40 catch it).
    Sweep::caught(
        "--mutation certify-ignores-conflicts --faults all --seeds 1..3 --strong-ratio 0.3 --keys 20",
    ),
    Sweep::caught(
        "--mutation paxos-no-majority --faults all --seeds 1..40 --strong-ratio 0.3 --keys 20",
    ),
    // Decisions heard ahead of the log that raise `last`: a later Prepare proposes below
    // a commit already delivered (`knownVec[strong]` above the log's).
    Sweep::caught("--mutation early-raises-last --faults none --seeds 1..3 --strong-ratio 0.3"),
    // Long outages: from the senders' logs, then causal-only by state transfer, then with
    // strong txns (the transfer carries the groups' certification state).
    Sweep::pass("--faults long-outage --set silent_sibling_ns=300000000 --seeds 1..6"),
    Sweep::pass(concat!(
        "--set strong_txns=false ",
        sweep_outage!(),
        " --seeds 1..3"
    )),
    Sweep::pass(concat!("--faults long-outage ", strong_outage!(), " --seeds 1..10")),
    Sweep::pass(concat!("--faults long-outage-lossy ", strong_outage!(), " --seeds 1..10")),
    Sweep::pass(concat!("--faults crashes ", strong_outage!(), " --seeds 1..10")),
    Sweep::caught(concat!(
        "--mutation no-state-transfer --faults long-outage ",
        strong_outage!(),
        " --seeds 1..3"
    )),
    Sweep::pass(sweep_merged!()),
    // The certification groups in the checkpoint (`unistore/strong_gc.rs`), strong txns
    // contended, a checkpoint every 16 records.
    Sweep::pass("--seeds 1..10 --faults all --strong-ratio 0.3 --keys 20 --checkpoint-records 16"),
];

/// STRONG's runs: every txn strong and certified.
const STRONG_SWEEPS: &[Sweep] = &[
    Sweep::pass("--seeds 1 --faults all --strong-ratio 0.3 --keys 20").quick(),
    Sweep::caught(
        "--mutation certify-ignores-conflicts --faults none --seeds 1..2 --strong-ratio 0.3 --keys 20",
    )
    .quick(),
    Sweep::pass("--seeds 1..5 --faults all --strong-ratio 0.3 --keys 20"),
];

/// REDBLUE's runs: strong txns certified centrally, causal ones as UniStore's.
const REDBLUE_SWEEPS: &[Sweep] = &[
    Sweep::pass("--seeds 1 --faults all --strong-ratio 0.3 --keys 20").quick(),
    Sweep::caught(
        "--mutation certify-ignores-conflicts --faults none --seeds 1..2 --strong-ratio 0.3 --keys 20",
    )
    .quick(),
    Sweep::pass("--seeds 1..5 --faults all --strong-ratio 0.3 --keys 20"),
    Sweep::pass(sweep_merged!()),
];
