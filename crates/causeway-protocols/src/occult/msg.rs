//! Occult's messages (client library to servers, master to slaves) and durable records.

use super::cts::Cts;
use crate::kit::repl::Replicated;
use causeway_core::crdt::{ObjType, Object, Op, Update};
use causeway_core::{Addr, DcId, Error, Key, NodeId, OpId, TxnId, Vc};
use serde::{Deserialize, Serialize};

/// A key's version as a server stores it: the object, the causal timestamp of the write
/// that made it (Fig. 4 `store(key, value, deps)`) and that write's op id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Version {
    pub obj: Object,
    /// `None` under `eventual-ms` (no causal metadata).
    pub deps: Option<Cts>,
    pub last: Option<OpId>,
}

/// One key's read answer (Fig. 4 `read`: value, deps, the shard's shardstamp).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ReadItem {
    pub key: Key,
    pub obj: Result<Object, Error>,
    pub deps: Option<Cts>,
    /// The shard's shardstamp at the answering server.
    pub ss: u64,
    /// The answering server is the shard's master (never stale, unless `held`).
    pub master: bool,
    /// A prepared txn holds the shard at its master: its writes may be applied at another
    /// master already (§6.2's commit phase is not atomic across masters), so this master's
    /// answer is checked like a slave's.
    pub held: bool,
}

/// What a master answers a single-key write (Fig. 4 returns the shardstamp).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Written {
    pub ss: u64,
    /// The overwritten version's causal timestamp: the writer now depends on it.
    pub prev: Option<Cts>,
    /// The write this one overwrote at the master (the key's version order).
    pub overwrote: Option<OpId>,
}

/// A key a master locked for a txn (Listing 2 `prepare`): the new shardstamp the write
/// will get and the current version's causal timestamp (the overwrite set, §6.2).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Locked {
    pub key: Key,
    pub shard: u32,
    pub ss: u64,
    pub deps: Cts,
    pub overwrote: Option<OpId>,
}

/// Why a master refused to lock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Refusal {
    /// A shard is locked by another txn (Listing 2 `throw LOCKED`).
    Locked,
    /// The txn was terminated (§7) and may not prepare again.
    Fenced,
    Error(Error),
}

/// Writes of one shard applied at its master, replicated in order to its slaves.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplWrite {
    /// Position in the master node's stream to each sibling (`kit::repl` time).
    pub seq: u64,
    pub txn: TxnId,
    pub shard: u32,
    /// The shard's shardstamp once these writes are applied.
    pub ss: u64,
    /// The lowest entry a timestamp depending on these writes may hold for the shard: `ss`
    /// for a single write, the shardstamp promised at PREPARE for a txn (its `ts_T` holds
    /// that, while the shard's stamp jumps to `ts_T`'s highest, Listing 2 l.28). Floors
    /// stay below it until the writes are streamed.
    pub dep_ss: u64,
    pub deps: Option<Cts>,
    pub ops: Vec<(Key, Op)>,
}

/// A piece goes on the wire in its own encoding, once for every slave (`kit::wire`).
impl crate::kit::wire::WireForm for ReplWrite {}

impl Replicated for ReplWrite {
    fn id(&self) -> TxnId {
        self.txn
    }

    fn time_at(&self, _origin: DcId) -> u64 {
        self.seq
    }
}

/// Most per-shard exceptions a floor carries; past it the highest fold into `base`.
pub const FLOOR_CAPS_MAX: usize = 256;

/// A master node's floor (§5's "periodically advance" shardstamps, decided here): every
/// write of shard `s` with a shardstamp at or below `get(s)` is applied (at the master)
/// or streamed. Shardstamps are per shard (§4.2), so a prepared txn or a write not yet
/// streamed holds back only its own shards (`caps`), never the node's other shards.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Floor {
    /// The bound for every shard without a cap.
    pub base: u64,
    /// (shard, bound below `base`), sorted by shard, at most [`FLOOR_CAPS_MAX`].
    pub caps: Vec<(u32, u64)>,
}

impl Floor {
    /// `base` with `caps` (any order, a shard any number of times: its lowest counts).
    pub fn new(base: u64, caps: impl IntoIterator<Item = (u32, u64)>) -> Floor {
        let mut low: std::collections::BTreeMap<u32, u64> = Default::default();
        for (shard, cap) in caps {
            if cap < base {
                let c = low.entry(shard).or_insert(cap);
                *c = (*c).min(cap);
            }
        }
        let mut caps: Vec<(u32, u64)> = low.into_iter().collect();
        let mut base = base;
        if caps.len() > FLOOR_CAPS_MAX {
            // Fold the highest caps into the base: it falls the least.
            caps.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            let cut = caps.len() - FLOOR_CAPS_MAX;
            base = caps[..cut].iter().map(|c| c.1).fold(base, u64::min);
            caps.drain(..cut);
            caps.sort_unstable();
        }
        caps.retain(|c| c.1 < base);
        assert!(caps.len() <= FLOOR_CAPS_MAX, "a floor's caps stay bounded");
        Floor { base, caps }
    }

    /// The bound for `shard`.
    pub fn get(&self, shard: u32) -> u64 {
        match self.caps.binary_search_by_key(&shard, |c| c.0) {
            Ok(i) => self.caps[i].1,
            Err(_) => self.base,
        }
    }
}

/// The coordinator's commit decision, forwarded to every other participant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    pub ts: Cts,
    pub client: Addr,
    pub req: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    /// A read at the local server (or the master after `retries` stale answers).
    /// `attempt` counts earlier stale answers for these keys; `fallback` marks a read sent
    /// to the master after them (servers count both, for the stale-read rate).
    Read {
        req: u64,
        keys: Vec<(Key, ObjType)>,
        attempt: u8,
        fallback: bool,
    },
    ReadReply {
        req: u64,
        items: Vec<ReadItem>,
    },
    /// A write outside a lock-based txn (Fig. 3 `write`): `max_ss` is the highest entry of
    /// the client's timestamp for the master's DC (§5).
    Write {
        req: u64,
        key: Key,
        update: Update,
        id: OpId,
        deps: Option<Cts>,
        max_ss: u64,
    },
    WriteReply {
        req: u64,
        result: Result<Written, Error>,
    },
    /// Validation phase, second step (§6.2, Listing 2 `prepare`): lock the shards of these
    /// keys at their master. `coord` is the txn's coordinator participant (§7).
    Prepare {
        req: u64,
        txn: TxnId,
        coord: NodeId,
        writes: Vec<(Key, Update, OpId)>,
        max_ss: u64,
    },
    PrepareReply {
        req: u64,
        result: Result<Vec<Locked>, Refusal>,
    },
    /// Commit phase (Listing 2 `commit_server`), sent to the coordinator participant, which
    /// records the decision and forwards it to the other participants.
    Commit {
        req: u64,
        txn: TxnId,
        ts: Cts,
        participants: Vec<NodeId>,
    },
    /// The decision, from the coordinator to another participant (re-sent until acked).
    Forward {
        txn: TxnId,
        decision: Decision,
    },
    ForwardAck {
        txn: TxnId,
    },
    /// A participant applied the txn's writes (to the client).
    Done {
        req: u64,
        txn: TxnId,
    },
    /// The coordinator had terminated the txn before its commit arrived (§7).
    Refused {
        req: u64,
        txn: TxnId,
    },
    /// Abort: release the locks (Listing 2 `abort_server`).
    Release {
        txn: TxnId,
    },
    /// Cooperative termination (§7): a participant holding a txn's locks too long asks its
    /// coordinator; the answer is the decision, or abort (the coordinator then fences it).
    Inquire {
        txn: TxnId,
    },
    Resolved {
        txn: TxnId,
        decision: Option<Decision>,
    },
    /// Master-to-slave replication in order (`kit::repl`), with acknowledgements.
    /// `floor`: every write of the master's shards with a shardstamp at or below its
    /// bound for the shard is in its stream up to `floor_upto` (heartbeat advancement of
    /// idle shards, §5).
    Repl {
        restarted: bool,
        acks: Vc,
        /// Shared by every slave that gets the piece, and encoded once (`kit::wire`).
        stream: Option<crate::kit::wire::SharedStream<ReplWrite>>,
        floor: Floor,
        floor_upto: u64,
    },
    /// A chunk of a state transfer from a master to a slave that lacks writes its log
    /// dropped (issue 15, `node/transfer.rs`).
    Transfer {
        chunk: Chunk,
    },
    /// `Request::ListKeys`, session to the node listing a partition (`kit::keys`).
    ListKeys(crate::kit::keys::ListAsk),
    /// The answer to `ListKeys`.
    KeysListed(crate::kit::keys::ListAnswer),
}

/// One item of a state transfer's image (`node/transfer.rs`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Item {
    /// A key of a shard the sender masters, as the sender stores it.
    Key(Key, Version),
    /// The shardstamp of a shard the sender masters.
    Stamp(u32, u64),
}

/// A state transfer chunk: at the sender's stream sequence number, claiming its stream.
pub type Chunk = crate::kit::transfer::Chunk<u64, Item>;

/// A node's durable records, replayed in order on recovery.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Record {
    /// A master applied writes (its own stream).
    Write(ReplWrite),
    /// A slave accepted a piece of a master's stream.
    Remote {
        origin: DcId,
        upto: u64,
        writes: Vec<ReplWrite>,
    },
    /// Locks taken for a txn.
    Prepared {
        txn: TxnId,
        coord: NodeId,
        writes: Vec<(Key, Update, OpId)>,
        shards: Vec<u32>,
    },
    /// The coordinator's decision (before any participant hears it).
    Decided {
        txn: TxnId,
        decision: Decision,
        participants: Vec<NodeId>,
    },
    /// Locks released without applying (abort or termination); `fence` refuses the txn
    /// for good.
    Released { txn: TxnId, fence: bool },
    /// Every participant acknowledged the decision.
    Forgotten { txn: TxnId },
    /// Shardstamps and floors may reach this clock value (`kit::clock` lease).
    Lease(u64),
    /// A checkpoint standing for every record persisted before it (log compaction, issue
    /// 15; `node/checkpoint.rs`). Always the first record replayed when present; the last
    /// variant, so older logs decode unchanged.
    Checkpoint(Box<Checkpoint>),
    /// A chunk of a state transfer from `from`'s master, buffered until the last.
    TransferChunk { from: DcId, chunk: Chunk },
    /// The transfer's last chunk arrived: it is installed (replay installs it again).
    TransferDone { from: DcId, id: u64 },
    /// A prepared txn committed here: its writes, one per shard, and the release of its
    /// locks, in one record so that a crash keeps all of the txn's writes here or none
    /// (`Node::commit_local`). Last, so older logs decode unchanged.
    Committed { txn: TxnId, writes: Vec<ReplWrite> },
}

/// A txn holding locks, as a checkpoint keeps it: txn, coordinator, writes, shards.
pub type KeptPrepared = (TxnId, NodeId, Vec<(Key, Update, OpId)>, Vec<u32>);

/// What replaying a node's records up to a quiescent moment gives.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The durable lease and the highest timestamp (`Lease` records, written shardstamps).
    pub lease: u64,
    pub last: u64,
    /// The last sequence number of our own stream (all durable).
    pub seq: u64,
    /// Every key's current version, and every shard's shardstamp.
    pub store: Vec<(Key, Version)>,
    pub stamps: Vec<(u32, u64)>,
    pub prepared: Vec<KeptPrepared>,
    /// Decisions not yet acknowledged by every participant.
    pub decisions: Vec<(TxnId, Decision, Vec<NodeId>)>,
    /// Fenced txns, oldest first (a bounded FIFO).
    pub fences: Vec<TxnId>,
    /// Writes some live sibling has not acknowledged, for catch-up.
    pub log: crate::kit::repl::ReplLog<ReplWrite>,
    pub received: crate::kit::repl::Received,
    pub durable_have: Vec<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_floor_caps_only_its_own_shards() {
        let f = Floor::new(100, [(7, 40), (3, 90), (7, 60), (9, 150)]);
        assert_eq!(f.get(7), 40, "a shard's lowest cap");
        assert_eq!(f.get(3), 90);
        assert_eq!(f.get(9), 100, "a cap above the base bounds nothing");
        assert_eq!(f.get(1), 100, "other shards get the base");
        assert_eq!(f.caps, vec![(3, 90), (7, 40)]);
    }

    /// Past `FLOOR_CAPS_MAX` the highest caps fold into the base: every shard's bound is
    /// still at or below each cap given for it, and the lowest caps stay exact.
    #[test]
    fn too_many_caps_fold_the_highest_into_the_base() {
        let n = FLOOR_CAPS_MAX as u32 + 10;
        let caps: Vec<(u32, u64)> = (0..n).map(|s| (s, 1_000 + u64::from(s))).collect();
        let f = Floor::new(10_000, caps.clone());
        assert_eq!(f.caps.len(), FLOOR_CAPS_MAX);
        for (s, c) in &caps {
            assert!(
                f.get(*s) <= *c,
                "shard {s}: {} above its cap {c}",
                f.get(*s)
            );
        }
        assert_eq!(f.get(0), 1_000, "the lowest caps stay");
        assert_eq!(
            f.base,
            1_000 + u64::from(FLOOR_CAPS_MAX as u32),
            "the highest folded"
        );
        assert_eq!(f.get(n + 5), f.base);
    }
}
