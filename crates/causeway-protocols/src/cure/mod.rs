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
pub(crate) mod config;
pub(crate) mod coord;
pub(crate) mod coord_state;
mod direct;
pub(crate) mod ext;
mod ft;
pub(crate) mod msg;
pub(crate) mod msg_enc;
#[cfg(test)]
mod msg_enc_tests;
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
pub(crate) mod types;
pub(crate) mod wire;

pub use config::{
    Config, Flavor, Mutation, INQUIRE_AFTER_NS, LAG_GRACE_NS, LEASE_NS, MUTATIONS,
    PREPARE_TIMEOUT_NS, SILENT_SIBLING_NS, TXN_IDLE_NS, UNISTORE_MUTATIONS,
};
pub use ext::{Extension, Plain};
pub use msg::{Msg, ReplTxn, Stream};
pub use node::Node;
pub use session::Client;
pub use wire::{commit_ts, SharedStream};

use crate::kit::session::{Session, SessionCore};
use crate::params::{NodeConfig, Params};
use crate::registry::{Guarantee, Protocol, Requirements};
use causeway_core::{DcId, SessionId, Topology};

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
