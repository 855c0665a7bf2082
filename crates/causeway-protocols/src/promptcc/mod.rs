//! `promptcc`: PrompTCC (Lykhenko, Soares, Rodrigues; shared/papers/001, §IV-VIII,
//! Algorithms 1-2), transactional causal consistency in one DC whose read-only rounds are
//! one in most cases and never more than two, with lock-free write-only transactions;
//! plus `promptcc-naive` (full vectors on the wire, §V's baseline), `wren` (always two
//! rounds: fix a snapshot, then read at it, §IX) and `eiger` (up to three rounds, §II,
//! §IX; below) on the same code.
//!
//! **Metadata** (§IV-B). Timestamps are vectors over the P partitions (`Vc` with P
//! entries). Partition `i` keeps its sequence number `s_i`, and its node keeps the
//! snapshot vector `S` (node-level: what it knows of every partition's committed prefix;
//! the partitions of a node share it). A client keeps its dependency vector `D_c`.
//!
//! **Write-only transactions** (§IV-D, Alg. 1 l.1-11, Alg. 2 l.2-31). The client sends each
//! participant its writes, `P(T)`, the coordinator (the first participant) and `D_c`. A
//! participant merges `D_c` into `S`, increments `s_i`, prepares with tentative timestamp
//! `D_c` with `[i] = s_i` and tells the coordinator `s_i`. The coordinator's final
//! timestamp holds each participant's `s_p`; a participant commits once `S[i] + 1 >=
//! final[i]` (every earlier sequence number resolved: commits are in sequence order),
//! with commit timestamp `max(tentative, final)`, and `S[i] = final[i]`. A committed
//! version becomes **visible** once `S[p] >= final[p]` for every participant `p` (l.32).
//! Every participant acknowledges the client after its commit is durable; the client
//! then takes the commit timestamp as `D_c` (l.10). A single-partition txn needs one round.
//!
//! **Read-only rounds** (§IV-F, Alg. 1 l.12-34, Alg. 2 l.36-53). Round one: each
//! partition merges the client's `D_c` into `S` (which may make versions visible) and
//! returns its most recent visible versions. The client's `max-read-ts` joins `D_c` and
//! the timestamps read; partition `i` needs round two unless `S_i >= max-read-ts` (Alg. 1
//! l.27; §IV-F, l.343 of the paper's text): every txn with a timestamp below `S_i` was
//! visible at `i`, so no version `i` missed is in `max-read-ts`. §V's scalar passes too:
//! the visible frontier `vis_i` (every txn committed at `i` up to that sequence number is
//! visible) reaching `max-read-ts[i]`. Either test is sound; round two runs where both
//! fail, only where a newer version could have been missed. Round two sends the txn's
//! snapshot (`max-read-ts` raised, `session.rs` `snapshot_of`) to those partitions, which
//! merge it into `S` and return the latest versions with timestamps `<=` it: a consistent
//! snapshot by construction, so there is never a third round.
//!
//! **Read-write transactions** (§IV-G) through the same interactive API as the other
//! protocols: the txn's first READ runs the rounds above and fixes its snapshot
//! (`max-read-ts`); later READs of the txn read at that snapshot (a round-two read, one
//! round); COMMIT runs the write-only protocol with `D_c` joined with the snapshot, and
//! the participants compute the updates' effects at the snapshot (or, for a blind write,
//! at what is visible after merging `D_c`).
//!
//! **Metadata parsimony** (§V). The compressed wire sends, in round one, only `D_c[i]` and
//! `min(D_c)`; a partition answers with one scalar (`vis_i`) and its local max read
//! timestamp's entries above `min(D_c)`; vectors that must be exact (write dependencies,
//! round two's bound) go as their minimum plus the entries above it (lossless). §V
//! replaces `S_i` by "the highest version visible", which stands for `S_i` only where
//! every txn up to it is visible; here a txn waits for its other participants, so the
//! scalar is `vis_i`, and a round-one reply also carries `S` (minimum plus the entries
//! above it) where a committed txn is not visible yet (`vis_i < S[i]`): there the vector
//! test may pass where the scalar fails. Elsewhere `vis_i = S[i]`, and the scalar passes
//! wherever the vector would. `promptcc-naive` ships every vector whole. Nodes count
//! request and response bytes.
//!
//! **Eiger** (`eiger`, the evaluation's optimistic baseline; in this section "l.N" is line
//! N of shared/papers/001's text). The paper says of it: it reads the latest values and
//! validates them (l.37, l.42); it "requires a second round if the transaction read from a
//! possibly inconsistent snapshot and even a third round if partially committed versions
//! were read on the second round", where PrompTCC "avoids the third round completely, by
//! always returning versions that have been committed at all participating partitions"
//! (§II l.82; Table I l.60: up to 3 rounds, O(deps) metadata; §IX l.395); its small
//! metadata cannot always validate what was read, hence spurious rounds (§I l.44, §IV-A
//! l.138); stabilization is what spares PrompTCC the third round (§IV-A l.140). Here:
//! - *Visibility* (l.82): a version is visible once its txn committed at its own partition,
//!   durably, not once every participant did (Alg. 2 l.32 is PrompTCC's); `vis_i` is then
//!   the partition's durable committed prefix `S[i]`, so round one carries no extra `S`.
//! - *No client-assisted visibility*: nodes do not merge clients' vectors into `S` (Alg. 2
//!   l.37, l.46): under Eiger they hold timestamps of txns committed at one participant,
//!   which are not committed prefixes of the others.
//! - *Round one* is PrompTCC's, plus Eiger's validity intervals: a reply carries EVT (the
//!   logical time at which the latest version of a key read became visible there) and LVT
//!   (the node's logical clock, up to which those versions are the latest). The read's
//!   effective time is the largest EVT.
//! - *Round two* goes to the partitions PrompTCC's test names (here `vis_i <
//!   max-read-ts[i]`, which the snapshot's consistency needs) and to those whose LVT is
//!   below the effective time (Eiger's check: scalars cannot tell a dependency from a
//!   version that merely became visible later elsewhere, so these are often spurious). It
//!   reads at PrompTCC's round-two bound and carries the effective time.
//! - *Round three* (l.82): a partition answers round two "pending", without values, when a
//!   txn still open there (prepared, or committed but not durable) writes a key read and
//!   may be in the bound (a partially committed version the snapshot needs), or is
//!   prepared, not committed, since a logical time at or before the effective time
//!   (Eiger's pending check: it may commit before that time, so Eiger asks its
//!   coordinator). The client re-sends the read to those partitions, which answer once no
//!   open txn may be in the bound, holding the read until then (a bounded queue).
//!
//! Where the paper is silent, we chose: (1) Logical clocks: a node's ticks once per message
//! handled and takes the logical time a client's read carries (the client's clock, or a
//! round two's effective time); a client's takes every EVT and LVT it is sent. Node-to-node
//! messages carry none (2PC and stabilization are PrompTCC's messages), so the clocks of
//! nodes drift apart more than Eiger's would. (2) The scalars only decide rounds: what is
//! read is PrompTCC's vector snapshot, so a spurious round costs time and bytes, never
//! consistency. (3) Eiger's third round is the server's check with the coordinator; here the
//! client re-sends the read (a round trip either way), counted at the client and the nodes
//! (`reads_round_three`). Our final timestamps are fixed at prepare (sequence numbers), so a
//! round three that may need a partially committed version waits for it to resolve at the
//! partition (Eiger's coordinator answers at once). (4) A write whose effects observe state
//! (a remove, a multi-value assign) and whose snapshot or past may include a txn still open
//! at the partition on the same key waits in that queue until it resolves (PrompTCC's merge
//! makes such a txn visible first). (5) Later reads of an interactive txn read at its
//! snapshot: round three on a partially committed version too, uncounted like their round
//! two. (6) Not modelled: Eiger's client-side dependency tree (its CPU cost, §IX l.459).
//!
//! **Stabilization** (§IV-E): every node sends its partitions' `S[i]` to every other node
//! every `stabilization_interval` (all-to-all between nodes, a two-level tree of the
//! paper's kind: partitions aggregate at their node; a DC has few nodes).
//!
//! **Garbage collection** (§VII) by a timeout: a txn older than `txn_timeout_ns` aborts at
//! COMMIT (the client restarts it), and versions made visible more than that long ago fold
//! into the key's checkpoint (`kit::mvstore`).
//!
//! **Failure handling** (§VIII). Prepares, commits and aborts are durable before they are
//! acknowledged. A partition holding a txn prepared without a final timestamp for
//! `recover_after_ns` asks every participant: if all prepared it, it completes the commit
//! (the final timestamp is a function of their sequence numbers); otherwise it aborts it
//! everywhere, and a participant that had not seen it fences it. Partition replicas are
//! out of scope (one DC; a crashed node restarts from its records).

mod checkpoint;
mod config;
mod msg;
mod node;
mod part;
mod session;
mod sweeps;
#[cfg(test)]
mod tests;

pub use config::{
    Config, Flavor, Mutation, Wire, FENCES_MAX, MUTATIONS, PARKED_MAX, RECOVER_AFTER_NS,
    TXN_TIMEOUT_NS,
};
pub use msg::{Msg, Record};
pub use node::Node;
pub use session::Client;

use crate::kit::session::{Session, SessionCore};
use crate::params::{NodeConfig, Params};
use crate::registry::{Guarantee, Requirements};
use causeway_core::{DcId, SessionId, Topology};

const REQUIREMENTS: Requirements = Requirements {
    full_replication: true,
    failed_dc_writes_may_vanish: true,
    uniform_barrier: false,
    dc_failures: false,
    token_moves: false,
    final_registers: true,
    atomic_unknowns: true,
    causal_commits_without_faults: true,
};

/// The registry entry's requirements for `flavor` (`flavor_protocol!`).
const fn requirements(_flavor: Flavor) -> Requirements {
    REQUIREMENTS
}

fn recover(
    flavor: Flavor,
    config: &NodeConfig,
    section: &Config,
    records: &[Vec<u8>],
) -> Result<Node, String> {
    if config.topology.dcs != 1 {
        return Err(format!(
            "{} runs in one DC (PrompTCC §IV: single-DC design; replicas of a partition \
             would be a Paxos group, §VIII), got dcs = {}",
            flavor.name(),
            config.topology.dcs
        ));
    }
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
    let partitions = topology.partitions as usize;
    Ok(Session::new(
        core,
        Client::new(flavor, mutation, partitions, section.txn_timeout_ns),
    ))
}

flavor_protocol!(
    /// The `promptcc` protocol (registry entry).
    PrompTcc,
    Flavor::PrompTcc,
    Guarantee::Tcc,
    Flavor::PrompTcc.mutations(),
    sweeps::SWEEPS
);
flavor_protocol!(
    /// `promptcc-naive`: full vectors on the wire (registry entry).
    PrompTccNaive,
    Flavor::Naive,
    Guarantee::Tcc,
    Flavor::Naive.mutations(),
    sweeps::NAIVE_SWEEPS
);
flavor_protocol!(
    /// `wren`: Wren-style reads, always two rounds (registry entry).
    Wren,
    Flavor::Wren,
    Guarantee::Tcc,
    Flavor::Wren.mutations(),
    sweeps::WREN_SWEEPS
);
flavor_protocol!(
    /// `eiger`: Eiger-style reads, up to three rounds (registry entry).
    Eiger,
    Flavor::Eiger,
    Guarantee::Tcc,
    Flavor::Eiger.mutations(),
    sweeps::EIGER_SWEEPS
);
