//! One partition replica of PaRiS (§IV-A): the multi-version store keyed by commit time,
//! the `Prepared` and `Committed` queues, the version clock `VV` (indexed by DC; only the
//! partition's replica DCs count), and the replication bookkeeping (`kit::repl`).

use super::msg::{Effects, ReplTxn, Updates};
use crate::kit::mvstore::Store;
use crate::kit::repl::{Received, ReplLog, Siblings};
use crate::kit::twopc::Retry;
use crate::kit::txn::ReadId;
use causeway_core::crdt::{ArbTs, ObjType, Object, Op};
use causeway_core::{DcId, Error, Key, Nanos, NodeId, TxnId, Vc};
use std::collections::BTreeMap;

/// Most replicated txns remembered for the visibility-latency measurement.
pub const UNSEEN_MAX: usize = 4096;

/// A txn prepared here (Alg. 3 l.13).
#[derive(Clone, Debug)]
pub struct Prepared {
    pub coord: NodeId,
    pub pt: u64,
    pub ops: Effects,
    pub inquiry: Retry,
    /// Its commit time, once decided, while the commit record becomes durable: it keeps
    /// holding `VV[own]` below its prepare time until then.
    pub committing: Option<u64>,
    /// Its abort record is being made durable.
    pub aborting: bool,
}

impl Prepared {
    /// A prepared txn given back by a `Prepare` record or a checkpoint: it inquires at
    /// once after the restart.
    pub fn recovered(coord: NodeId, pt: u64, ops: Effects) -> Prepared {
        Prepared {
            coord,
            pt,
            ops,
            inquiry: Retry::default(),
            committing: None,
            aborting: false,
        }
    }
}

pub struct Part {
    pub me: DcId,
    /// DCs replicating this partition (ours included).
    pub replicas: Vec<DcId>,
    pub store: Store<u64>,
    pub prepared: BTreeMap<TxnId, Prepared>,
    /// Committed (durably) but not yet applied, by (ct, txn) (Alg. 3 l.19).
    pub committed: BTreeMap<(u64, TxnId), Vec<(Key, Op)>>,
    /// `VV`, by DC (entries of non-replica DCs stay 0 and do not count).
    pub vv: Vc,
    pub received: Received,
    pub log: ReplLog<ReplTxn>,
    pub sibs: Siblings,
    /// Txns applied here but maybe not visible yet: (clock when applied, ct).
    pub unseen: Vec<(Nanos, u64)>,
    /// Reads parked until `VV` covers their snapshot (BPR).
    pub blocked: Vec<BlockedRead>,
    /// PREPAREs whose effects read the snapshot (a set remove, an mvreg assignment),
    /// parked like a read until it is installed (BPR).
    pub blocked_prepares: Vec<BlockedPrepare>,
    /// State transfers to and from sibling replicas (`transfer.rs`).
    pub transfers: super::types::Transfers,
}

/// A BPR PREPARE waiting for its snapshot to be installed here.
#[derive(Clone, Debug)]
pub struct BlockedPrepare {
    pub coord: NodeId,
    pub txn: TxnId,
    pub snapshot: u64,
    pub ht: u64,
    pub updates: Updates,
    pub cached: Vec<(Key, Op)>,
    /// One-phase commit (`Msg::Prepare`).
    pub one_phase: bool,
}

/// A BPR read waiting at the partition until it applied everything up to its snapshot.
#[derive(Clone, Debug)]
pub struct BlockedRead {
    pub coord: NodeId,
    pub rid: ReadId,
    pub snapshot: u64,
    pub keys: Vec<(Key, ObjType)>,
    pub arrived: Nanos,
}

impl Part {
    pub fn new(dcs: usize, me: DcId, replicas: Vec<DcId>) -> Part {
        Part {
            me,
            store: Store::default(),
            prepared: BTreeMap::new(),
            committed: BTreeMap::new(),
            vv: Vc::zero(dcs),
            received: Received::new(me, dcs),
            log: ReplLog::default(),
            sibs: Siblings::new(me, replicas.iter().copied()),
            replicas,
            unseen: Vec::new(),
            blocked: Vec::new(),
            blocked_prepares: Vec::new(),
            transfers: Default::default(),
        }
    }

    /// The minimum of `VV` over the partition's replicas (what it installed of all).
    pub fn vv_min(&self) -> u64 {
        self.replicas
            .iter()
            .map(|d| self.vv.get(usize::from(d.0)))
            .min()
            .expect("a partition has a replica")
    }

    /// `ub` (Alg. 4 l.6-7): just below the lowest prepared time, else the claimable clock;
    /// never below what `VV[own]` already claims.
    pub fn upper_bound(&self, claimable: u64) -> u64 {
        let own = self.vv.get(usize::from(self.me.0));
        let ub = match self.prepared.values().map(|p| p.pt).min() {
            Some(pt) => pt - 1,
            None => claimable,
        };
        ub.max(own)
    }

    /// Applies the committed txns with `ct <= ub` in commit-time order, logs them for the
    /// siblings and sets `VV[own] = ub` (Alg. 4 l.8-19). Returns the ops applied.
    pub fn apply_upto(&mut self, ub: u64, clock: Nanos) -> usize {
        let mut applied = 0;
        while let Some(entry) = self.committed.first_entry() {
            let (ct, txn) = *entry.key();
            if ct > ub {
                break;
            }
            let ops = entry.remove();
            applied += ops.len();
            self.store.insert(txn, &ct, &ops);
            self.log.add(self.me, ReplTxn { txn, ct, ops });
            if self.unseen.len() < UNSEEN_MAX {
                self.unseen.push((clock, ct));
            }
        }
        let own = usize::from(self.me.0);
        self.vv.set(own, self.vv.get(own).max(ub));
        applied
    }

    /// A committed txn of a sibling (Alg. 4 l.23-28): into the store and the log (for
    /// relays); `VV[origin]` advances once the piece is durable.
    pub fn add_remote(&mut self, origin: DcId, t: ReplTxn, clock: Nanos) {
        self.store.insert(t.txn, &t.ct, &t.ops);
        if self.unseen.len() < UNSEEN_MAX {
            self.unseen.push((clock, t.ct));
        }
        self.log.add(origin, t);
    }

    /// Materializes `keys` at `snapshot` (Alg. 3 l.4-7), without the applied ids (they
    /// grow with a key's history): the client's cached writes it puts on top all commit
    /// after the snapshot (`session.rs` drops the others first), so none is in the state.
    pub fn read(
        &self,
        snapshot: u64,
        keys: &[(Key, ObjType)],
    ) -> Vec<(Key, Result<Object, Error>)> {
        keys.iter()
            .map(|(k, t)| (k.clone(), self.store.read_state(k, &snapshot, *t)))
            .collect()
    }

    /// The effects of a txn's updates, each prepared against the snapshot plus the
    /// client's cached writes of the key plus the txn's earlier updates of it.
    pub fn effects(
        &self,
        snapshot: u64,
        updates: &Updates,
        cached: &[(Key, Op)],
    ) -> Result<Effects, Error> {
        let mut objs: BTreeMap<Key, Object> = BTreeMap::new();
        let mut out = Vec::with_capacity(updates.len());
        for (key, update, id) in updates {
            if !objs.contains_key(key) {
                let mut o = self.store.read(key, &snapshot, update.obj_type())?;
                for (_, op) in cached.iter().filter(|(k, _)| k == key) {
                    if crate::kit::txn::effect_type(&op.effect) == o.obj_type() {
                        o.apply(op);
                    }
                }
                objs.insert(key.clone(), o);
            }
            let obj = objs.get_mut(key).expect("inserted above");
            let effect = obj.prepare(update)?;
            obj.apply_effect(&Op {
                id: *id,
                ts: ArbTs::PENDING,
                effect: effect.clone(),
            });
            out.push((key.clone(), *id, effect));
        }
        Ok(out)
    }

    /// A prepared txn's durable commit at `ct` (Alg. 3 l.17-19): into `Committed`.
    pub fn commit(&mut self, txn: TxnId, ct: u64) -> bool {
        let Some(p) = self.prepared.remove(&txn) else {
            return false;
        };
        assert!(
            ct >= p.pt,
            "commit time {ct} below the prepare time {}",
            p.pt
        );
        self.committed.insert((ct, txn), ops_at(ct, p.ops));
        true
    }
}

/// A txn's effects as ops arbitrated by its commit time (LWW: the later commit wins,
/// and Proposition 1 makes commit times grow along causality).
pub fn ops_at(ct: u64, effects: Effects) -> Vec<(Key, Op)> {
    let ts = ArbTs {
        primary: ct,
        secondary: 0,
    };
    effects
        .into_iter()
        .map(|(k, id, effect)| (k, Op { id, ts, effect }))
        .collect()
}
