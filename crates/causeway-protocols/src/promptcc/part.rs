//! One PrompTCC partition: its sequence number `s_i`, the prepared txns by sequence
//! number, the committed ones waiting to become visible, the store of visible versions
//! (`kit::mvstore` over P-entry vectors) and the fences of txns refused for good.

use super::config::FENCES_MAX;
use super::msg::{Effects, Objects, PreparedTxn, Updates};
use crate::kit::mvstore::Store;
use crate::kit::twopc::Retry;
use causeway_core::crdt::{ArbTs, ObjType, Object, Op, Update};
use causeway_core::{Error, Key, Nanos, PartitionId, TxnId, Vc};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// A prepared txn kept in a checkpoint: its sequence number, the txn, its final
/// timestamp once known.
pub type KeptPending = (u64, PreparedTxn, Option<Vec<(PartitionId, u64)>>);

/// One partition's durable state in a checkpoint (`checkpoint.rs`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartCheckpoint {
    pub id: PartitionId,
    pub s: u64,
    pub committed: u64,
    pub pending: Vec<KeptPending>,
    pub aborted: Vec<u64>,
    pub invisible: Vec<(u64, Invisible)>,
    /// Visible versions on top of each key's folded base.
    pub store: Store<Vc>,
    /// Remembered sequence numbers and fences, oldest first (bounded FIFOs).
    pub seqs: Vec<(TxnId, u64)>,
    pub fences: Vec<TxnId>,
    pub visible_join: Vc,
    /// Txns made visible within the GC horizon: they get the whole horizon again.
    pub recent: Vec<TxnId>,
}

/// Most (clock, visible join) points kept for the GC horizon.
const GC_RING_MAX: usize = 4096;

/// Stabilization rounds by which the stores' stable prefixes trail the visible frontier.
/// A read's snapshot is a stable vector a server computed from its siblings' entries (a
/// round behind their visible frontiers), which the client carries from its previous
/// reply (up to another round): a prefix over everything visible now sits above most
/// snapshots, and a read below it replays the key from its checkpoint (hundreds of
/// versions of a hot key). Measured at Zipf 0.99 (4 servers, 256 clients, 4 seeds):
/// 0/1/2/4/8 rounds gave 47.6k/66.5k/71.4k/69.7k/64.8k txns, reads from the checkpoint
/// falling from 52% to 1% of those the newest-object cache misses.
const PREFIX_LAG_ROUNDS: usize = 2;
/// Most txns remembered as made visible within the GC horizon; past it the oldest may fold
/// early (a read at a snapshot without them then aborts "snapshot too old", safely).
const RECENT_MAX: usize = 262_144;

/// A prepared txn and what became of it.
#[derive(Clone, Debug)]
pub struct Pending {
    pub t: PreparedTxn,
    pub since: Nanos,
    /// The final timestamp's participant entries, once the coordinator (or a
    /// recovery) sent them.
    pub final_ts: Option<Vec<(PartitionId, u64)>>,
    pub query: Retry,
    /// Eiger: the node's logical time when the txn prepared here (volatile: 0 after a
    /// restart, "prepared long ago").
    pub prepared_at: u64,
}

/// A committed txn not yet visible (Alg. 2 l.32: waiting for `S[p] >= final[p]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Invisible {
    pub txn: TxnId,
    pub ct: Vc,
    pub final_ts: Vec<(PartitionId, u64)>,
    pub ops: Vec<(Key, Op)>,
}

pub struct Part {
    pub id: PartitionId,
    /// `s_i`: the last sequence number handed out.
    pub s: u64,
    /// Sequence numbers resolved (committed or aborted) in memory, in order: the next
    /// commit waits for `committed + 1` (Alg. 2 l.23). `S[i]` is the durable part.
    pub committed: u64,
    pub pending: BTreeMap<u64, Pending>,
    /// Aborted sequence numbers not yet passed by `committed`.
    pub aborted: BTreeSet<u64>,
    pub invisible: BTreeMap<u64, Invisible>,
    pub store: Store<Vc>,
    /// Txns we hold or held, with their sequence numbers (answers to recovery queries).
    pub seqs: BTreeMap<TxnId, u64>,
    seq_order: VecDeque<TxnId>,
    pub fences: BTreeSet<TxnId>,
    fence_order: VecDeque<TxnId>,
    /// Join of every visible version's timestamp, sampled over time (GC horizon).
    pub visible_join: Vc,
    pub gc_ring: VecDeque<(Nanos, Vc)>,
    /// `visible_join` at the last `PREFIX_LAG_ROUNDS + 1` GC ticks, oldest first.
    frontiers: VecDeque<Vc>,
    /// Eiger: each key's EVT, the node's logical time when a version of it last became
    /// visible here (volatile; one entry per key written, like the store's).
    pub evt: BTreeMap<Key, u64>,
    /// Txns made visible within the GC horizon, by the clock when they became visible:
    /// they never fold, whatever their timestamp (a txn can become visible long after
    /// txns with higher timestamps, and a round two in flight may not include it).
    recent: VecDeque<(Nanos, TxnId)>,
    recent_set: BTreeSet<TxnId>,
}

impl Part {
    pub fn new(id: PartitionId) -> Part {
        Part {
            id,
            s: 0,
            committed: 0,
            pending: BTreeMap::new(),
            aborted: BTreeSet::new(),
            invisible: BTreeMap::new(),
            store: Store::default(),
            seqs: BTreeMap::new(),
            seq_order: VecDeque::new(),
            fences: BTreeSet::new(),
            fence_order: VecDeque::new(),
            visible_join: Vc::default(),
            gc_ring: VecDeque::new(),
            frontiers: VecDeque::with_capacity(PREFIX_LAG_ROUNDS + 1),
            evt: BTreeMap::new(),
            recent: VecDeque::new(),
            recent_set: BTreeSet::new(),
        }
    }

    pub fn idx(&self) -> usize {
        self.id.0 as usize
    }

    /// The partition's durable state (at a quiescent moment: nothing in flight).
    pub fn checkpoint(&self) -> PartCheckpoint {
        let pending = self.pending.iter();
        PartCheckpoint {
            id: self.id,
            s: self.s,
            committed: self.committed,
            pending: pending
                .map(|(seq, p)| (*seq, p.t.clone(), p.final_ts.clone()))
                .collect(),
            aborted: self.aborted.iter().copied().collect(),
            invisible: self
                .invisible
                .iter()
                .map(|(q, i)| (*q, i.clone()))
                .collect(),
            store: self.store.clone(),
            seqs: self.seq_order.iter().map(|t| (*t, self.seqs[t])).collect(),
            fences: self.fence_order.iter().copied().collect(),
            visible_join: self.visible_join.clone(),
            recent: self.recent.iter().map(|(_, t)| *t).collect(),
        }
    }

    /// Replays a checkpoint's partition (the first record of a compacted log). The
    /// recent txns get clock 0, restamped at start like a replay's.
    pub fn restore(&mut self, pc: PartCheckpoint) {
        assert_eq!(pc.id, self.id, "a checkpoint of this partition");
        self.s = self.s.max(pc.s);
        self.committed = pc.committed;
        for (seq, t, final_ts) in pc.pending {
            let p = Pending {
                t,
                since: 0,
                final_ts,
                query: Retry::default(),
                prepared_at: 0,
            };
            self.pending.insert(seq, p);
        }
        self.aborted = pc.aborted.into_iter().collect();
        self.invisible = pc.invisible.into_iter().collect();
        self.store = pc.store;
        for (txn, seq) in pc.seqs {
            self.remember(txn, seq);
        }
        for txn in pc.fences {
            self.fence(txn);
        }
        self.visible_join = pc.visible_join;
        for txn in pc.recent {
            self.recent.push_back((0, txn));
            self.recent_set.insert(txn);
        }
    }

    /// Remembers `txn`'s sequence number (bounded: the oldest are forgotten).
    pub fn remember(&mut self, txn: TxnId, seq: u64) {
        if self.seqs.insert(txn, seq).is_none() {
            self.seq_order.push_back(txn);
        }
        while self.seq_order.len() > FENCES_MAX {
            let old = self.seq_order.pop_front().expect("non-empty");
            self.seqs.remove(&old);
        }
    }

    pub fn fence(&mut self, txn: TxnId) {
        if self.fences.insert(txn) {
            self.fence_order.push_back(txn);
        }
        while self.fence_order.len() > FENCES_MAX {
            let old = self.fence_order.pop_front().expect("non-empty");
            self.fences.remove(&old);
        }
    }

    pub fn pending_of(&self, txn: TxnId) -> Option<u64> {
        self.seqs
            .get(&txn)
            .copied()
            .filter(|s| self.pending.contains_key(s))
    }

    /// The visible frontier `vis_i`: every txn at or below it is visible or aborted.
    pub fn vis(&self, durable: u64) -> u64 {
        let first_open = self.invisible.keys().chain(self.pending.keys()).min();
        match first_open {
            Some(s) => (s - 1).min(durable),
            None => durable,
        }
    }

    /// The effects of `updates` against `at` (a snapshot, or the client's past), each
    /// after the txn's earlier updates of its key. An update that may observe nothing
    /// (assign, increment, add) on a key whose versions below `at` were folded by GC is
    /// type-checked against `latest` and prepared against an empty object of that type,
    /// so the txn observes nothing `at` does not cover (an add then replaces no older tag:
    /// the set keeps one more tag until a later op observes it, which is safe). A remove
    /// or multi-value assign there aborts "snapshot too old": its effect must name what it
    /// observed.
    pub fn effects(&self, at: &Vc, updates: &Updates, latest: &Vc) -> Result<Effects, Error> {
        let mut objs: BTreeMap<Key, Object> = BTreeMap::new();
        let mut out = Vec::with_capacity(updates.len());
        for (key, update, id) in updates {
            if !objs.contains_key(key) {
                let o = self.observed(key, at, update, latest)?;
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

    /// The object `update` of `key` is prepared against ([`Part::effects`]). An assignment
    /// of a register that never counted is blind, so the key's versions are only
    /// type-checked: replaying a hot key's versions at the client's past was most of a
    /// write-only txn's cost at Zipf 0.99.
    fn observed(&self, key: &Key, at: &Vc, update: &Update, latest: &Vc) -> Result<Object, Error> {
        let t = update.obj_type();
        let blind = matches!(update, Update::Assign(_)) && !self.store.counts(key);
        let read = |at: &Vc| match blind {
            true => self.store.check(key, at, t).map(|()| Object::new(t)),
            false => self.store.read(key, at, t),
        };
        match read(at) {
            Err(e @ Error::Aborted(_)) if may_observe_nothing(update) => {
                // A counting register's assignment names the increments it replaces: it
                // must observe them, as a remove does.
                match read(latest)? {
                    o if o.counts() => Err(e),
                    _ => Ok(Object::new(t)),
                }
            }
            other => other,
        }
    }

    /// Whether a txn still open here (prepared, or committed but not yet visible) may be
    /// in the snapshot `bound` and writes a key `touches` names: a read or an effect at
    /// `bound` cannot be exact before it resolves (Eiger's partially committed versions,
    /// §II l.82). A prepared txn's timestamp is at least its tentative one, raised to the
    /// final entries once known; one whose known part is not below `bound` is out of it
    /// whatever its final timestamp. Txns numbered later are out too: every entry of
    /// `bound` is a sequence number handed out already.
    pub fn in_doubt(&self, bound: &Vc, touches: impl Fn(&Key) -> bool) -> bool {
        let upto = bound.get(self.idx());
        let prepared = self.pending.range(..=upto).any(|(_, p)| {
            let known = p.t.tentative.le(bound)
                && p.final_ts
                    .iter()
                    .flatten()
                    .all(|(q, f)| *f <= bound.get(q.0 as usize));
            known && p.t.ops.iter().any(|(k, _, _)| touches(k))
        });
        prepared
            || self
                .invisible
                .range(..=upto)
                .any(|(_, t)| t.ct.le(bound) && t.ops.iter().any(|(k, _)| touches(k)))
    }

    /// Whether a txn prepared here and not committed yet writes a key `touches` names and
    /// prepared at logical time `time` or before: Eiger's pending check (it may commit
    /// before the read's effective time, so Eiger asks its coordinator).
    pub fn prepared_before(&self, time: u64, touches: impl Fn(&Key) -> bool) -> bool {
        self.pending.values().any(|p| {
            p.final_ts.is_none()
                && p.prepared_at <= time
                && p.t.ops.iter().any(|(k, _, _)| touches(k))
        })
    }

    /// Reads `keys` at `bound`: the objects and the join of what they applied.
    pub fn read(&self, bound: &Vc, keys: &[(Key, ObjType)]) -> (Objects, Vec<Vc>) {
        let mut objects = Vec::with_capacity(keys.len());
        let mut ts = Vec::with_capacity(keys.len());
        for (k, t) in keys {
            // Without the applied ids (they grow with the key's history): a reader needs
            // the state.
            match self.store.read_state_with_ts(k, bound, *t) {
                Ok((o, v)) => {
                    objects.push((k.clone(), Ok(o)));
                    ts.push(v);
                }
                Err(e) => {
                    // A key of another type still has versions the read depends on: a
                    // retry of the read as that type, at this txn's snapshot, must see
                    // them (RESP's GET of a counter reads as a register first).
                    let held = match &e {
                        Error::WrongType { expected, .. } => {
                            self.store.read_with_ts(k, bound, *expected).ok()
                        }
                        _ => None,
                    };
                    objects.push((k.clone(), Err(e)));
                    ts.push(held.map(|(_, v)| v).unwrap_or_default());
                }
            }
        }
        (objects, ts)
    }

    /// The next sequence number to resolve, if it can be now: an aborted one, or a
    /// prepared one with its final timestamp (Alg. 2 l.23: `S[i] + 1 >= final[i]`).
    pub fn next_resolvable(&self) -> Option<u64> {
        let next = self.committed + 1;
        if self.aborted.contains(&next) {
            return Some(next);
        }
        self.pending
            .get(&next)
            .filter(|p| p.final_ts.is_some())
            .map(|_| next)
    }

    /// Commits the prepared txn at `seq` (Alg. 2 l.24-27): its commit timestamp is the
    /// tentative one raised to the final entries.
    pub fn commit(&mut self, seq: u64) -> Option<(PreparedTxn, Vec<(PartitionId, u64)>)> {
        let p = self.pending.remove(&seq)?;
        let final_ts = p
            .final_ts
            .clone()
            .expect("committing with a final timestamp");
        let mut ct = p.t.tentative.clone();
        for (q, v) in &final_ts {
            let q = q.0 as usize;
            ct.set(q, ct.get(q).max(*v));
        }
        let ts = ArbTs {
            primary: ct.sum(),
            secondary: ct.max_entry(),
        };
        let ops =
            p.t.ops
                .iter()
                .map(|(k, id, e)| {
                    let op = Op {
                        id: *id,
                        ts,
                        effect: e.clone(),
                    };
                    (k.clone(), op)
                })
                .collect();
        let inv = Invisible {
            txn: p.t.txn,
            ct,
            final_ts: final_ts.clone(),
            ops,
        };
        self.invisible.insert(seq, inv);
        self.committed = seq;
        Some((p.t, final_ts))
    }

    /// Makes visible every committed txn whose participants all committed it as far as
    /// `s` knows (Alg. 2 l.32-34), or, when `local` (Eiger), whose commit here is durable
    /// (`S[i]` reached it), or all at once (`visible-before-stable`), at `clock`; under
    /// Eiger its keys' EVT becomes `evt`. Returns the number of ops made visible.
    pub fn make_visible(
        &mut self,
        s: &Vc,
        (broken, local): (bool, bool),
        clock: Nanos,
        evt: Option<u64>,
    ) -> usize {
        let own = s.get(self.idx());
        let ready: Vec<u64> = self
            .invisible
            .iter()
            .filter(|(seq, t)| {
                broken
                    || (local && own >= **seq)
                    || (!local && t.final_ts.iter().all(|(p, f)| s.get(p.0 as usize) >= *f))
            })
            .map(|(seq, _)| *seq)
            .collect();
        let mut n = 0;
        for seq in ready {
            let t = self.invisible.remove(&seq).expect("listed");
            n += t.ops.len();
            self.store.insert(t.txn, &t.ct, &t.ops);
            self.visible_join.join(&t.ct);
            for (k, _) in t.ops.iter().filter(|_| evt.is_some()) {
                self.evt.insert(k.clone(), evt.unwrap_or(0));
            }
            self.recent.push_back((clock, t.txn));
            self.recent_set.insert(t.txn);
        }
        n
    }

    /// Stamps the txns made visible while replaying the log (clock 0) with the first clock
    /// reading after the restart, so they get the whole horizon too.
    pub fn restamp_recent(&mut self, clock: Nanos) {
        for (at, _) in self.recent.iter_mut().filter(|(at, _)| *at == 0) {
            *at = clock;
        }
    }

    /// Records the visible join at `clock` and folds what became visible before the GC
    /// horizon (§VII, after Eiger: versions are kept for the txn timeout, so a round two,
    /// which starts within it, finds every version its round one could have missed). A
    /// version folds when it became visible more than `horizon` ago and its timestamp is
    /// below the visible join of then.
    pub fn gc(&mut self, clock: Nanos, horizon: Nanos) {
        if self.gc_ring.len() < GC_RING_MAX {
            self.gc_ring.push_back((clock, self.visible_join.clone()));
        }
        let mut point = None;
        while let Some((at, _)) = self.gc_ring.front() {
            if clock.saturating_sub(*at) < horizon {
                break;
            }
            point = self.gc_ring.pop_front().map(|(_, v)| v);
        }
        while let Some((at, txn)) = self.recent.front().copied() {
            if clock.saturating_sub(at) < horizon && self.recent.len() <= RECENT_MAX {
                break;
            }
            self.recent.pop_front();
            self.recent_set.remove(&txn);
        }
        if let Some(p) = point {
            let recent = &self.recent_set;
            self.store
                .gc_where(|ct, txn| ct.le(&p) && !recent.contains(&txn));
        }
        self.extend_prefixes();
    }

    /// Extends the stable prefixes of the keys reads replayed to the visible frontier of
    /// `PREFIX_LAG_ROUNDS` ticks ago, which the snapshots of reads to come cover: those
    /// then replay the versions since then only.
    fn extend_prefixes(&mut self) {
        self.frontiers.push_back(self.visible_join.clone());
        if self.frontiers.len() > PREFIX_LAG_ROUNDS + 1 {
            self.frontiers.pop_front();
        }
        assert!(self.frontiers.len() <= PREFIX_LAG_ROUNDS + 1);
        if self.frontiers.len() > PREFIX_LAG_ROUNDS {
            let at = self.frontiers.front().expect("not empty").clone();
            self.store.extend_missed(&at);
        }
    }
}

/// Whether `update` keeps its meaning when prepared against an empty object: assign and
/// increment ignore the state, and an add then merely replaces no older tag.
pub(super) fn may_observe_nothing(update: &Update) -> bool {
    matches!(
        update,
        Update::Assign(_) | Update::Increment(_) | Update::Add(_)
    )
}
