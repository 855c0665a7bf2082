//! `cure`: Transactional Causal Consistency as in Cure (Akkoorath et al., ICDCS 2016,
//! shared/papers/003), as sans-IO state machines: a server [`Node`] hosting its partitions
//! and acting as transaction coordinator (TC), and a client [`Session`].
//!
//! # The protocol (paper §III)
//!
//! - A session holds `cvc`. `Begin` is answered by the session; START (`StartWith{cvc}`)
//!   rides with the txn's first read or its commit to the node owning the first key's
//!   partition, which coordinates the txn (TC), so consecutive txns of a session on other
//!   keys have different TCs. The TC waits until `cvc[k] <= GSS[k]` for every remote DC
//!   `k` and takes `svc = GSS`, `svc[d] = max(cvc[d], Clock)` (Alg. 1 l.1-6). A read-only
//!   txn commits at the session at its `svc` (what the TC would answer, Alg. 1 l.26-28).
//! - One-phase commit (on by default, `one_phase`): a txn that updates one partition is
//!   committed by that partition alone: its commit time is its prepare time (Alg. 1 l.31
//!   over one participant), `ct = svc` with that local entry (l.32-33), one record holds
//!   prepare and commit, and the txn stays prepared, holding `pvc[d]` below its time
//!   (Alg. 2 l.20), until the record is durable. Nothing else changes: the same waits,
//!   the same vector, the same visibility, so the argument of Cure's correctness holds
//!   with the coordinator's decision replaced by the participant's own durable record.
//! - One-node commit (with `one_phase`): a txn that updates several partitions, all
//!   hosted by its TC's node, prepares at each as for a PREPARE (the same waits and
//!   prepare times, Alg. 2 l.6-10) but without a record; once all are prepared the TC
//!   computes the commit vector as 2PC does (Alg. 1 l.31-33) and persists one record
//!   with every partition's effects and the vector, in place of the prepare records,
//!   the decision and the commit records. The node's log makes that record atomic, so
//!   the txn commits at all its partitions or at none; it stays prepared at each,
//!   holding its `pvc[d]`, until the record is durable, and only then is it answered.
//!   A txn that also updates partitions of other nodes runs 2PC with those, and the
//!   TC's node's own partitions prepare the same way: the decision's record
//!   (`NodeCommit` with its participants elsewhere) holds their effects too.
//! - Updates are buffered by the session (it assigns the op ids, so it can answer
//!   `Response::Updated` at once) and shipped to the TC with the next read or the commit;
//!   the TC keeps the write set (Alg. 1 l.8-14) and overlays it on what it reads (l.20-21).
//! - A read goes to each owning partition of the DC as `READ_KEY(svc, keys)`; the partition
//!   waits until `svc[d] <= pvc[d]` (Alg. 2 l.2) and materializes the keys at `svc`.
//! - Commit is 2PC inside the DC (Alg. 1 l.25-36, Alg. 2 l.6-16): PREPARE to each updated
//!   partition, which waits until `svc[d] <= Clock`, takes a `PrepTime` above Clock, persists the
//!   prepare record and only then answers; `CommitTime = max(PrepTime)`, `ct = svc` with
//!   `ct[d] = CommitTime`; the TC persists the decision, then sends COMMIT and answers the
//!   session with `ct`, which becomes the session's `cvc`. Read-only txns return `svc`.
//! - Replication (Alg. 2 l.18-37): every `replication_interval_ns` a partition computes
//!   `pvc[d] = min(prepTx) - 1`, or its clock if nothing is prepared, and ships the
//!   committed txns with `ct[d] <= pvc[d]` to its siblings in commit-time order, or a
//!   heartbeat. The paper writes `ct < pvc[d]`; with `pvc[d] = min(prep) - 1` every txn with
//!   `ct[d] <= pvc[d]` is committed already (any prepared txn commits at `>= min(prep)`), so
//!   `<=` is correct and `<` would only delay txns committed exactly at `pvc[d]`.
//! - GSS (Alg. 2 l.39-46): every `stabilization_interval_ns` each node sends the entry-wise
//!   min of its partitions' `pvc` to every other node of its DC; `GSS[k]` is the min over
//!   the nodes. All-to-all rather than the paper's tree (§III-C): a DC has few nodes, and one
//!   round instead of a tree's two (up, down) halves the staleness of the GSS.
//!
//! # Code layout
//!
//! `ext.rs`: the hooks of an extension ([`Extension`]). `ft.rs`: CureFt's snapshot rules,
//! ATTACH and UNIFORM_BARRIER.
//! `node.rs`: the node's state, recovery, dispatch, the partition side of reads and 2PC,
//! timers (`kit::timers`), invariants, persist-before-release (`kit::durability`) and the
//! clock and lease (`kit::clock`). `coord.rs`: the TC (Alg. 1), its 2PC bookkeeping on
//! `kit::twopc`; `direct.rs`: a read-then-commit read and prepared in one step at the
//! coordinator's own partition, answered in one message. `part.rs`: one partition replica (`pvc`, prepared txns, parked requests)
//! over the kit's multi-version store (`kit::mvstore`) and replication log
//! (`kit::repl`). `repl.rs`: replication, catch-up and relaying (`kit::repl`) and the
//! GSS / GC exchange inside the DC (`kit::gossip`). `session.rs`: the client side on the
//! kit's session core. `msg.rs`, `record.rs`: messages and persisted records.
//!
//! # Decisions where the paper is silent
//!
//! - **Time.** `Clock` is the node's reading made strictly monotonic: every reading is
//!   `max(last, clock)` and every issued timestamp (prepare time) is `last + 1`, so a prepare
//!   time exceeds every `pvc[d]` the node ever claimed. Claims are also capped by a persisted
//!   *lease* (`Record::Lease`, renewed [`LEASE_NS`] ahead): after a crash the node starts its
//!   clock above every lease and prepare time on disk, so a restart with a clock that went
//!   back never issues a time at or below one already claimed or used. Prepare times are
//!   strictly above `svc[d]`, which makes `ct_T` strictly above `svc_T` (Prop. 1) and rules
//!   out prepare-wait cycles.
//! - **Effects.** A set remove and an mvreg assignment need the state the txn observed. The
//!   partition computes every effect at PREPARE time against the object materialized at
//!   `svc` plus the txn's earlier updates of the key (exactly what the TC's overlay showed
//!   the client). For such writes PREPARE also waits for `svc[d] <= pvc[d]`, like a read.
//!   Arbitration timestamp: `(ct.max_entry(), ct.sum())`, which grows strictly along
//!   causality; ties are broken by op id inside `Object`.
//! - **Store.** Per key: committed versions ordered by `(ct.max, ct.sum, txn)` (a causal
//!   order) on top of a checkpoint (object + join of the folded commit vectors). A snapshot
//!   applies the checkpoint and every version with `ct <= svc`. GC folds versions with
//!   `ct <=` the DC's oldest snapshot in use (min over the TCs' active `svc` and their lower
//!   bound `(GSS, Clock)` for future ones, exchanged with the GSS messages) and at most
//!   [`VERSIONS_PER_KEY_MAX`] are kept; a read whose `svc` lies below the checkpoint aborts
//!   its txn ("snapshot too old").
//! - **Replication log and catch-up.** Each partition keeps every committed txn (its own
//!   and received ones) in a replication log until every live sibling acknowledged it.
//!   Every replication message carries the sender's `pvc` as acknowledgement, and a stream
//!   of one origin's txns as `(from, upto]` with the claim "you now have every txn of
//!   `origin` with `ct[origin] <= upto`"; a receiver takes a stream only if `from <=` what it
//!   has (no gaps), drops duplicates, persists new txns, and advances `pvc[origin]` once
//!   they are durable (so acknowledgements only cover durable txns). A sibling whose
//!   acknowledgement of some origin stays behind ours for [`LAG_GRACE_NS`] while it keeps
//!   talking gets the missing txns again: our own from the acknowledged point, a third DC's
//!   relayed from our log. That one mechanism covers a restarted node (which also flags its
//!   first message as `restarted` to be served at once), messages lost to a crash, and a
//!   DC that failed after replicating to only some DCs: the survivors relay its txns to each
//!   other, so their GSS entries for it meet and their own later txns, which may depend on
//!   it, become visible everywhere.
//! - **Failures.** A crash loses volatile state. Recovery replays the records: leases and
//!   prepare times (clock floor), prepared txns, commits (store and log), received batches
//!   (store, log, `pvc`), the coordinator's commit decisions and which of them ended.
//!   A participant holding a prepared txn asks its coordinator after [`INQUIRE_AFTER_NS`]
//!   (at once after a restart); the coordinator persists its commit decision before any
//!   COMMIT leaves, so one with no record of a decision and no live txn answers abort
//!   (presumed abort). A coordinator re-sends COMMIT for every decision not yet acknowledged
//!   by all participants (after a restart and every [`INQUIRE_AFTER_NS`]); it aborts a txn
//!   whose prepares do not all arrive within [`PREPARE_TIMEOUT_NS`].
//! - **Failed DCs and long outages.** A sibling that stops acknowledging holds back the
//!   replication log's GC while the origin's log holds at most
//!   [`SILENT_SIBLING_LOG_MAX`](crate::kit::repl::SILENT_SIBLING_LOG_MAX) txns: a DC away
//!   for any time (partitioned, frozen, restarted) catches up from the log when it
//!   returns (the lag grace rewinds our stream to its acknowledgement). Past that limit a
//!   sibling silent for [`SILENT_SIBLING_NS`] is presumed failed and no longer holds the
//!   log, so memory stays bounded; should it come back lacking txns the log dropped, it
//!   gets a state transfer (`transfer.rs`): the partition at our `pvc` and the stream
//!   after it. A stream piece never claims a dropped txn.
//! - **Timers.** Deadlines in the node's clock, in a timer table keyed by purpose
//!   (`kit::timers`): replication, stabilization, and the earliest clock wait of a parked
//!   PREPARE (`svc[d] <= Clock`). The driver wakes the node at the earliest one.
//! - Cure needs full replication: a topology with a smaller replication factor is refused.
//! - The tunables below are the `[protocol.cure]` config section ([`Config`]).
//! - Tokens are the postcard-encoded `cvc`; `Attach` joins one into `cvc`. Barriers and
//!   strong transactions are unsupported.
//!
//! # Flavors and extensions: one engine, several protocols
//!
//! [`Flavor`] selects the snapshot rules: `Cure` (all of the above), or those of its
//! fault-tolerant baseline `CureFt` (registry entry `cureft.rs`), UniStore's Alg. 1 l.2-7
//! (`ft.rs`): START's snapshot without a wait, from the visible vector (the GSS) and the
//! client's own DC entry; remote entries of the snapshots seen adopted; ATTACH parked at a
//! node until the visible vector covers the token. A protocol built on the engine adds its
//! state and handlers as the node's type parameter, an [`Extension`] (`ext.rs`), whose
//! hooks the engine calls: UniStore (`crate::unistore`) runs `Node<UniExt>` under CureFt's
//! rules, with `uniformVec` as the visible vector, UNIFORM_BARRIER and strong txns. Cure
//! and CureFt run `Node<Plain>`, with no extension.
//!
//! [`VERSIONS_PER_KEY_MAX`]: causeway_core::limits::VERSIONS_PER_KEY_MAX

mod checkpoint;
pub(crate) mod coord;
mod direct;
pub(crate) mod ext;
mod ft;
pub(crate) mod msg;
pub(crate) mod msg_enc;
pub(crate) mod node;
pub(crate) mod part;
#[cfg(test)]
mod read_commit_tests;
pub(crate) mod record;
mod record_enc;
mod repl;
mod session;
pub mod sweeps;
#[cfg(test)]
mod tests;
mod transfer;
#[cfg(test)]
mod transfer_tests;
pub(crate) mod wire;

pub use ext::{Extension, Plain};
pub use msg::{Msg, ReplTxn, Stream};
pub use node::Node;
pub use session::Client;
pub use wire::{commit_ts, SharedStream};

use crate::kit::session::{Session, SessionCore};
use crate::params::{NodeConfig, Params};
use crate::{Guarantee, Protocol, Requirements};
use causeway_core::clock::Nanos;
use causeway_core::{DcId, SessionId, Topology};
use serde::{Deserialize, Serialize};

/// The `cure` protocol (registry entry).
pub struct Cure;

impl Protocol for Cure {
    const NAME: &'static str = "cure";
    const GUARANTEE: Guarantee = Guarantee::Tcc;
    const MUTATIONS: &'static [&'static str] = MUTATIONS;
    const SWEEPS: &'static [crate::sweep::Sweep] = sweeps::SWEEPS;
    const REQUIREMENTS: Requirements = Requirements {
        full_replication: true,
        failed_dc_writes_may_vanish: true, // Cure §IV-A
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
        Node::recover(config.clone(), section.clone(), Flavor::Cure, records)
    }

    fn session(
        id: SessionId,
        dc: DcId,
        topology: &Topology,
        params: &Params,
        _: &Config,
    ) -> Result<Session<Client>, String> {
        session(Flavor::Cure, id, dc, topology, params)
    }

    fn encode_msg_by_hand(msg: &Msg, out: &mut Vec<u8>) -> bool {
        msg_enc::encode_into(msg, out)
    }
}

/// A client session of the engine running `flavor` (cure or cureft).
pub fn session(
    flavor: Flavor,
    id: SessionId,
    dc: DcId,
    topology: &Topology,
    params: &Params,
) -> Result<Session<Client>, String> {
    let (name, mutations) = (flavor.name(), flavor.mutations());
    session_of((name, mutations), flavor, id, dc, topology, params)
}

/// A client session of the engine running `flavor` for the protocol `name`, which runs
/// `mutations` (an extension's; its capabilities are the client's to set).
pub fn session_of(
    (name, mutations): (&'static str, &[&str]),
    flavor: Flavor,
    id: SessionId,
    dc: DcId,
    topology: &Topology,
    params: &Params,
) -> Result<Session<Client>, String> {
    let core = SessionCore::new(name, id, dc, topology.clone(), params.clone());
    let mut client = Client::new(topology, flavor);
    // The session needs only this variant, but refuses what the node refuses.
    let mutation = Mutation::parse_among(params.mutation.as_deref(), mutations, name)?;
    client.keep_first_assign = mutation.keeps_overwritten_assign;
    Ok(Session::new(core, client))
}

/// Which snapshot rules the engine runs: Cure's, or the fault-tolerant ones of
/// UniStore's Alg. 1 l.2-7 (CureFt, and UniStore's extension on top of them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// Cure (Akkoorath et al.): snapshots from the GSS and the clock, START waits.
    Cure,
    /// UniStore's `CUREFT` baseline (§8.3): UniStore without uniformity tracking, i.e.
    /// snapshots from the stable vector (the GSS) under Alg. 1's rules, with forwarding.
    CureFt,
}

impl Flavor {
    /// Snapshots follow UniStore's Alg. 1 l.2-7 (no START wait): the fault-tolerant rules.
    pub fn ft_rules(self) -> bool {
        !matches!(self, Flavor::Cure)
    }

    pub fn name(self) -> &'static str {
        match self {
            Flavor::Cure => "cure",
            Flavor::CureFt => "cureft",
        }
    }

    /// The mutations this flavor runs: Cure's.
    pub fn mutations(self) -> &'static [&'static str] {
        MUTATIONS
    }

    /// The mutation `name`, refused unless this flavor runs it.
    pub fn mutation(self, name: Option<&str>) -> Result<Mutation, String> {
        Mutation::parse_among(name, self.mutations(), self.name())
    }
}

/// `[protocol.cure]`: Cure's tunables, in nanoseconds of the node's clock. Every field
/// defaults to the constant of the same name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// How far ahead of the clock the persisted lease on claimed timestamps reaches.
    pub lease_ns: Nanos,
    /// When a participant inquires about, and a coordinator re-sends, an old decision.
    pub inquire_after_ns: Nanos,
    /// A coordinator aborts a txn whose votes do not all arrive within this time.
    pub prepare_timeout_ns: Nanos,
    /// A coordinator drops an open txn idle this long.
    pub txn_idle_ns: Nanos,
    /// How long a sibling's acknowledgement may lag before we re-send or relay.
    pub lag_grace_ns: Nanos,
    /// A sibling silent this long is presumed failed for log GC, once an origin's log
    /// holds more than `silent_sibling_log_max` txns (0: at once, the behavior before
    /// catch-up from the log was kept for long outages; for the simulator's negative test).
    pub silent_sibling_ns: Nanos,
    pub silent_sibling_log_max: usize,
    /// A state transfer to a sibling is not started again for this long (`transfer.rs`).
    pub transfer_retry_ns: Nanos,
    /// Commit single-partition txns in one phase (the partition alone, one record), and
    /// txns whose partitions are all on their coordinator's node with one record.
    pub one_phase: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            lease_ns: LEASE_NS,
            inquire_after_ns: INQUIRE_AFTER_NS,
            prepare_timeout_ns: PREPARE_TIMEOUT_NS,
            txn_idle_ns: TXN_IDLE_NS,
            lag_grace_ns: LAG_GRACE_NS,
            silent_sibling_ns: SILENT_SIBLING_NS,
            silent_sibling_log_max: crate::kit::repl::SILENT_SIBLING_LOG_MAX,
            transfer_retry_ns: crate::kit::transfer::TRANSFER_RETRY_NS,
            one_phase: true,
        }
    }
}

crate::mutations! {
    /// Which mutation is active, decoded once from `Params::mutation`.
    pub struct Mutation for "cure" {
        /// READ_KEY does not wait for `pvc[d] >= svc[d]` (breaks Alg. 2 l.2).
        no_read_wait = "no-read-wait",
        /// `pvc[d]` is the clock even with prepared txns (breaks Alg. 2 l.19-20).
        pvc_ignores_prepared = "pvc-ignores-prepared",
        /// CommitTime is the min of the prepare times (breaks Alg. 1 l.31).
        commit_time_min = "commit-time-min",
        /// No relaying of a third DC's txns to a lagging sibling (breaks UniStore §5.5).
        no_forwarding = "no-forwarding",
        /// `uniformVec` is the local stable vector: remote txns are visible and barriers
        /// return before f+1 DCs store them (breaks UniStore Alg. 2 l.33-36).
        visible_before_uniform = "visible-before-uniform",
        /// ATTACH answers at once (breaks UniStore Alg. 1 l.52).
        attach_no_wait = "attach-no-wait",
        /// COMMIT_STRONG certifies without the uniform barrier (breaks UniStore Alg. 3 l.2,
        /// the liveness failure of §4, Figure 2).
        no_uniform_barrier = "no-uniform-barrier",
        /// Certification votes commit whatever conflicts (breaks §6.3's OCC).
        certify_ignores_conflicts = "certify-ignores-conflicts",
        /// The certification groups decide with n/2 votes, not a majority.
        paxos_no_majority = "paxos-no-majority",
        /// A checkpoint leaves out the txns prepared here: one committed after it loses its
        /// writes on this partition after a restart from it (breaks checkpoint.rs).
        checkpoint_drops_prepared = "checkpoint-drops-prepared",
        /// A sibling that returns after our log dropped txns it lacks gets no state transfer
        /// (breaks transfer.rs: it never converges).
        no_state_transfer = "no-state-transfer",
        /// A read-then-commit served in place waits for no prepared txn, two-phase ones
        /// included (breaks Alg. 2 l.2 beyond what `Part::pvc_two_phase` allows).
        read_commit_no_wait = "read-commit-no-wait",
        /// A txn's record keeps each key's first assignment and drops the later ones it
        /// overwrites (breaks `kit::txn::coalesce_txn_ops`: other txns read an
        /// intermediate value).
        keeps_overwritten_assign = "keeps-overwritten-assign",
        /// A one-node commit's partitions commit when its record is written, not once it is
        /// durable (breaks the one-node commit: a crash loses a txn others already read).
        node_commit_early = "node-commit-early",
        /// A replica writes a received piece as the bytes it came in even when it took only
        /// part of it (breaks `Record::RemotePiece`: a restart applies the txns it had
        /// already a second time).
        piece_record_whole = "piece-record-whole",
    }
    /// Deliberately broken variants, for showing that the simulator and checker catch them.
    /// (A `no-start-wait` variant is not listed: a session's coordinators share the DC's GSS
    /// within a few ms, so skipping START's wait is rarely observable in the simulator; the
    /// wait is covered by a unit test instead.)
    /// (`checkpoint-drops-prepared` shows only after a crash: scripts/test sweeps it with
    /// crashes; UniStore does not list it.
    /// `no-state-transfer` shows only when a log drops txns a returning sibling lacks:
    /// scripts/test sweeps it with a long outage and `silent_sibling_log_max = 0`.
    /// `read-commit-no-wait` shows only when a two-phase txn's commit reaches a partition
    /// after a read-then-commit whose snapshot covers it (the client heard of the commit and
    /// went on faster than the coordinator's message): scripts/test sweeps it with
    /// `--faults slow-links --txn-ops 2 --keys 10` (seeds 2 and 3 of 1..10 caught); 30 seeds
    /// each of four sweeps without slowed links (1.4 million txns) did not produce it. A unit
    /// test (`read_commit_tests`) shows the read it lets through.
    /// `piece-record-whole` shows only when a replica writes a piece of which it had some txns
    /// (a rewound stream), then restarts and replays that record, then a counter those txns
    /// wrote is read (a register's second assignment changes nothing): scripts/test sweeps
    /// it with `--objects counter --faults all --checkpoint-records 0` (a restart replays
    /// every record; a checkpoint taken after the piece would hold the state instead), where
    /// seeds 8 and 16 of 1..20 diverge; 5 seeds of the default sweep did not produce it. A
    /// unit test (`cure::tests`) shows the restart that applies a txn twice.
    /// `node-commit-early` shows only when a crash falls between a one-node commit's record
    /// write and its fsync: scripts/test sweeps it with crashes, which the simulator often
    /// precedes by a disk stall of milliseconds per write (`causeway_sim`'s disk), and one
    /// node per DC, where most multi-key txns commit on one node. The txn it loses was
    /// replicated or read before its record was durable: the DCs diverge, or the final
    /// state misses a txn whose client never heard the outcome but that a read observed.)
    pub const MUTATIONS = [
        no_read_wait,
        pvc_ignores_prepared,
        commit_time_min,
        checkpoint_drops_prepared,
        no_state_transfer,
        keeps_overwritten_assign,
        node_commit_early,
        piece_record_whole,
        read_commit_no_wait,
    ];
    /// UniStore's deliberately broken variants: Cure's (they break the engine UniStore
    /// shares), then UniStore's own (its extension's `mutations`).
    pub const UNISTORE_MUTATIONS = [
        no_read_wait,
        pvc_ignores_prepared,
        commit_time_min,
        no_forwarding,
        visible_before_uniform,
        attach_no_wait,
        no_uniform_barrier,
        certify_ignores_conflicts,
        paxos_no_majority,
        no_state_transfer,
        keeps_overwritten_assign,
    ];
}

/// How far ahead of the clock the persisted lease on claimed timestamps reaches.
pub const LEASE_NS: Nanos = 200_000_000;
/// A participant asks the coordinator of a txn prepared for this long what became of it;
/// a coordinator re-sends COMMIT to participants that have not acknowledged it this long.
pub const INQUIRE_AFTER_NS: Nanos = 1_000_000_000;
/// A coordinator aborts a txn whose prepare votes do not all arrive within this time.
pub const PREPARE_TIMEOUT_NS: Nanos = 2_000_000_000;
/// A coordinator drops an open txn with no request from its session for this long.
pub const TXN_IDLE_NS: Nanos = 30_000_000_000;
/// How long a sibling's acknowledgement may lag behind before we re-send or relay.
pub const LAG_GRACE_NS: Nanos = 500_000_000;
/// A sibling partition silent for this long is presumed failed for log GC.
pub const SILENT_SIBLING_NS: Nanos = 60_000_000_000;
