//! The multi-version store of one partition (Cure §III-D), generic over the snapshot
//! timestamp (a vector clock for Cure and UniStore, a scalar HLC/UST for PaRiS): per key,
//! committed versions in a causal order on top of a checkpoint. A snapshot read applies the
//! checkpoint and every version whose commit timestamp is `<=` the snapshot; GC folds old
//! versions into the checkpoint so memory stays flat.

use crate::kit::keys::KeyOrder;
use crate::kit::lattice::Lattice;
use crate::kit::txn::effect_type;
use causeway_core::clock::Extra;
use causeway_core::crdt::{ObjType, Object, Op};
use causeway_core::limits::VERSIONS_PER_KEY_MAX;
use causeway_core::{Error, Key, TxnId, Vc};
use serde::{Deserialize, Serialize};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::hash::BuildHasher;
use std::sync::OnceLock;

/// A snapshot / commit timestamp: a lattice with a causal apply order.
pub trait SnapshotTs: Lattice {
    /// A key that grows strictly along causality (`a < b` implies a smaller key), so
    /// sorting by it applies effects in a causal order.
    fn order(&self) -> (u64, u64);
    /// An entry where `self` is above `point`, with `self`'s value there: a witness that
    /// `!self.le(point)`, which holds for as long as `point`'s entry stays below that
    /// value ([`Blocker`]). `None` when `self.le(point)`.
    fn above(&self, point: &Self) -> Option<Blocker>;
    /// The value of `entry` in `self`.
    fn entry(&self, entry: TsEntry) -> u64;
}

/// One entry of a timestamp: a DC's (index), or a named extra one of a vector clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TsEntry {
    Dc(usize),
    Extra(Extra),
}

/// Why a key's first version does not fold yet: its timestamp's `entry` is `value`, and
/// the GC point's is below it ([`KeyVersions::gc`] skips the key while that lasts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Blocker {
    pub entry: TsEntry,
    pub value: u64,
}

impl Blocker {
    /// Whether `point` is still below the blocking entry (so the version still does not
    /// fold): exact, whatever else `point` did.
    fn holds<T: SnapshotTs>(&self, point: &T) -> bool {
        point.entry(self.entry) < self.value
    }
}

impl SnapshotTs for Vc {
    /// `(max entry, sum)`: `ct1 < ct2` entry-wise implies a smaller sum.
    fn order(&self) -> (u64, u64) {
        (self.max_entry(), self.sum())
    }

    fn above(&self, point: &Vc) -> Option<Blocker> {
        let dc = (0..self.dcs.len())
            .find(|&i| self.get(i) > point.get(i))
            .map(|i| (TsEntry::Dc(i), self.get(i)));
        let extra = || {
            self.extra
                .iter()
                .find(|(n, v)| *v > point.get_extra(*n))
                .map(|(n, v)| (TsEntry::Extra(*n), *v))
        };
        dc.or_else(extra)
            .map(|(entry, value)| Blocker { entry, value })
    }

    fn entry(&self, entry: TsEntry) -> u64 {
        match entry {
            TsEntry::Dc(i) => self.get(i),
            TsEntry::Extra(n) => self.get_extra(n),
        }
    }
}

impl SnapshotTs for u64 {
    fn order(&self) -> (u64, u64) {
        (*self, 0)
    }

    fn above(&self, point: &u64) -> Option<Blocker> {
        (self > point).then_some(Blocker {
            entry: TsEntry::Dc(0),
            value: *self,
        })
    }

    fn entry(&self, _entry: TsEntry) -> u64 {
        *self
    }
}

/// One committed txn's ops on one key.
///
/// It keeps its timestamp's [`SnapshotTs::order`] beside the timestamp: an insert compares
/// the key's last version's order with the new one's, and reading it from the vector
/// (a heap allocation of its own, rarely in cache by then) was 3% of a 3-DC replica's
/// time under `perf` (BENCHMARKS.md, issue 14). Not serialized: computed again when read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    from = "VersionParts<T>",
    bound(deserialize = "T: SnapshotTs + Deserialize<'de>")
)]
pub struct Version<T> {
    pub ct: T,
    pub txn: TxnId,
    pub ops: Vec<Op>,
    #[serde(skip)]
    ct_order: (u64, u64),
}

/// A [`Version`] as it is serialized.
#[derive(Deserialize)]
struct VersionParts<T> {
    ct: T,
    txn: TxnId,
    ops: Vec<Op>,
}

impl<T: SnapshotTs> From<VersionParts<T>> for Version<T> {
    fn from(v: VersionParts<T>) -> Version<T> {
        Version::new(v.ct, v.txn, v.ops)
    }
}

impl<T: SnapshotTs> Version<T> {
    pub fn new(ct: T, txn: TxnId, ops: Vec<Op>) -> Version<T> {
        let ct_order = ct.order();
        Version {
            ct,
            txn,
            ops,
            ct_order,
        }
    }

    /// The causal apply order, ties broken by txn id.
    fn order(&self) -> ((u64, u64), TxnId) {
        debug_assert_eq!(self.ct_order, self.ct.order(), "a version's ct changed");
        (self.ct_order, self.txn)
    }
}

/// One key: the checkpoint (object + join of the folded commit vectors) and the versions.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(bound(
    serialize = "T: Serialize",
    deserialize = "T: SnapshotTs + Deserialize<'de>"
))]
pub struct KeyVersions<T> {
    base: Option<Object>,
    base_vc: T,
    versions: VecDeque<Version<T>>,
    /// A cache, not state (skipped by serde and equality): the object a read at a snapshot
    /// covering every version returns, the common read of a hot key. Replaying tens of
    /// versions per read (each `Object::apply` records op ids in a set) was the largest
    /// cost of a hot key's reads; this makes them a clone. It holds the state alone
    /// (effects applied without their ids, as `fold` does: see `effects_at` for why that
    /// is the same state): a transaction needs no more, and recording a SADD's 50
    /// replaced tags in an applied-ids set at every insert was a tenth of its cost. A
    /// reader that needs the ids ([`KeyVersions::at`]) gets them listed from the
    /// versions. `None` before the key's first version, after an out-of-order insert,
    /// an install or a fold into a checkpoint of another type (the next in-order insert
    /// rebuilds it), and after a restore.
    #[serde(skip)]
    latest: Option<Latest<T>>,
    /// A second cache (skipped as `latest` is): the object of the checkpoint plus the
    /// first `len` versions, for a read below the newest object. A transaction that read
    /// a hot key prepares after other commits (a pipeline's group), so its snapshot
    /// misses `latest`; with three DCs the key holds every version of the last
    /// replication round trip (GC folds what every sibling acknowledged), and replaying
    /// them all for each such prepare was a seventh of a pipelined INCR at DC 1. Each GC
    /// extends it over the leading run `<= durable`, which every later snapshot of the
    /// DC covers, so a read replays the last tick's versions only. Extended only for a
    /// key a read missed `latest` on since the last GC (`missed`): a replica that serves
    /// no such read pays nothing.
    /// `None` after an insert inside it, an out-of-order fold, an install, a restore.
    #[serde(skip)]
    stable: Option<Prefix<T>>,
    /// Whether a read replayed versions since the last GC (see `stable`).
    #[serde(skip)]
    missed: Cell<bool>,
}

/// The fewest versions a stable prefix is built over from the checkpoint
/// ([`KeyVersions::extend_stable`]).
pub const STABLE_PREFIX_RUN_MIN: usize = 16;

/// [`KeyVersions::stable`]: the checkpoint's state with the effects of the first `len`
/// versions applied in order (ops of the key's type only, ids not recorded, as in
/// [`Latest`]), and the join of the checkpoint's and their commit timestamps (a fold
/// moves a prefix version's timestamp into the checkpoint's, so it stays exact;
/// [`KeyVersions::ts_at`] relies on that).
#[derive(Clone, Debug)]
struct Prefix<T> {
    len: usize,
    obj: Object,
    top: T,
}

/// [`KeyVersions::latest`]: the checkpoint's state with every version's effects applied
/// in the read order (ops of the key's type only, as [`KeyVersions::at`] applies them), no
/// op ids recorded, and the join of the versions' commit timestamps.
#[derive(Clone, Debug)]
struct Latest<T> {
    obj: Object,
    top: T,
}

impl<T: PartialEq> PartialEq for KeyVersions<T> {
    fn eq(&self, other: &Self) -> bool {
        self.base == other.base && self.base_vc == other.base_vc && self.versions == other.versions
    }
}

impl<T: Eq> Eq for KeyVersions<T> {}

/// The checkpoint an op of type `t` applies to (`base`, created with the type of its
/// first op), or none when it holds another type.
fn base_for(base: &mut Option<Object>, t: ObjType) -> Option<&mut Object> {
    let base = base.get_or_insert_with(|| Object::new(t));
    (base.obj_type() == t).then_some(base)
}

/// Whether applying a type's effects in any order gives the same object: LWW registers
/// (the greatest `(ts, id)` wins) and counters (increments add up), not sets and
/// multi-value registers (a remove or an assignment deletes the tags it observed).
///
/// A key with parts of other types (a key freed by `DEL`, `crdt`), or a version that
/// writes one, is not: its parts may be sets.
fn order_free<T>(obj: &Object, v: &Version<T>) -> bool {
    matches!(obj.obj_type(), ObjType::Lww | ObjType::Counter)
        && !obj.has_parts()
        && !v.ops.iter().any(|op| op.effect.is_part())
}

/// Applies a version's effects to a key's checkpoint ([`base_for`]) and joins its commit
/// timestamp into the checkpoint's (`base_vc`).
fn fold_into<T: SnapshotTs>(base: &mut Option<Object>, base_vc: &mut T, v: &Version<T>) {
    for op in &v.ops {
        if let Some(base) = base_for(base, effect_type(&op.effect)) {
            base.apply_effect(op);
        }
    }
    base_vc.join(&v.ct);
}

/// [`fold_into`] of a version that leaves the key: its values move into the checkpoint.
fn fold_owned<T: SnapshotTs>(base: &mut Option<Object>, base_vc: &mut T, v: Version<T>) {
    base_vc.join(&v.ct);
    for op in v.ops {
        if let Some(base) = base_for(base, effect_type(&op.effect)) {
            base.apply_effect_owned(op);
        }
    }
}

impl<T: SnapshotTs> KeyVersions<T> {
    /// Inserts `v` in the causal apply order; returns its index.
    fn insert(&mut self, v: Version<T>) -> usize {
        // A key's versions mostly arrive in order (a DC's commits, a sibling's stream):
        // one comparison with the last instead of a search.
        let order = v.order();
        let at = match self.versions.back() {
            Some(l) if l.order() > order => self.versions.partition_point(|x| x.order() < order),
            _ => self.versions.len(),
        };
        let last = at == self.versions.len();
        if self.stable.as_ref().is_some_and(|p| at < p.len) {
            self.stable = None;
        }
        self.versions.insert(at, v);
        match (&mut self.latest, last) {
            (Some(l), true) => {
                let v = self.versions.back().expect("just inserted");
                let t = l.obj.obj_type();
                for op in v.ops.iter().filter(|op| effect_type(&op.effect) == t) {
                    l.obj.apply_effect(op);
                }
                l.top.join(&v.ct);
            }
            (None, true) => self.latest = self.rebuilt_latest(),
            // Applied out of order only where the effects commute whatever their order:
            // a register's assignments (the greatest timestamp wins) and a counter's
            // increments. PrompTCC makes a hot key's concurrent writes visible out of
            // their causal apply order all the time, and each one cost every later read
            // a replay of the key's versions.
            (Some(l), false) if order_free(&l.obj, &self.versions[at]) => {
                let t = l.obj.obj_type();
                for op in self.versions[at].ops.iter() {
                    if effect_type(&op.effect) == t {
                        l.obj.apply_effect(op);
                    }
                }
                l.top.join(&self.versions[at].ct);
            }
            // Not applied to the cache out of order otherwise: a version can arrive after
            // one that deleted its tag (Cure inserts each origin's stream in its order, but
            // not the origins in a causal order: visibility, the stable vector, orders
            // them), and the cache would keep that tag. Tried, and the simulator caught it
            // (`sim --protocol cure --faults all`, seeds 1 and 3: causal violations).
            (_, false) => self.latest = None,
        }
        at
    }

    /// The key's type as a read of every version sees it: the checkpoint's, else its first
    /// version's (see [`KeyVersions::at`]).
    fn key_type(&self) -> Option<ObjType> {
        let held = self.base.as_ref().map(Object::obj_type);
        let first = || self.versions.iter().flat_map(|v| v.ops.first()).next();
        held.or_else(|| first().map(|op| effect_type(&op.effect)))
    }

    /// Whether the key's register counts (`Object::counts`) in its checkpoint or any
    /// version: then an assignment's effect depends on the state it observes (the sum of
    /// the increments it replaces), and no write of it is blind. The newest object
    /// answers when cached (a register that counted once counts for good).
    fn counts(&self) -> bool {
        if let Some(l) = &self.latest {
            return l.obj.counts();
        }
        let counted = |op: &Op| {
            matches!(
                op.effect,
                causeway_core::crdt::Effect::RegisterIncrement(_)
                    | causeway_core::crdt::Effect::CountedAssign { .. }
                    | causeway_core::crdt::Effect::Part { .. }
            )
        };
        self.base.as_ref().is_some_and(Object::counts)
            || self.versions.iter().any(|v| v.ops.iter().any(counted))
    }

    /// The type the key's newest state shows (`Object::shown_type`), `None` when it shows
    /// nothing (deleted, never written, emptied).
    fn shown_type(&self) -> Option<ObjType> {
        if let Some(l) = &self.latest {
            return l.obj.shown_type();
        }
        match self.rebuilt_latest() {
            Some(l) => l.obj.shown_type(),
            None if self.versions.is_empty() => self.base.as_ref()?.shown_type(),
            None => None,
        }
    }

    /// [`KeyVersions::latest`] computed from scratch (`None` without versions).
    fn rebuilt_latest(&self) -> Option<Latest<T>> {
        let first = self.versions.front()?;
        let t = self.key_type()?;
        let mut obj = self.base_state(t)?;
        let mut top = first.ct.clone();
        for v in &self.versions {
            for op in v.ops.iter().filter(|op| effect_type(&op.effect) == t) {
                obj.apply_effect(op);
            }
            top.join(&v.ct);
        }
        Some(Latest { obj, top })
    }

    /// Versions [`KeyVersions::at`] visits for this read: none when the newest-object
    /// cache answers, else every version (the replay scans them all for `ct <= svc`).
    fn at_cost(&self, svc: &T, obj_type: ObjType) -> usize {
        match &self.latest {
            Some(l) if l.obj.obj_type() == obj_type && l.top.le(svc) => 0,
            _ => self.versions.len(),
        }
    }

    /// Versions [`KeyVersions::state_at`] visits: none from the cache, else those past
    /// the stable prefix it starts from.
    fn state_cost(&self, svc: &T, obj_type: ObjType) -> usize {
        if let Some(l) = &self.latest {
            if l.obj.obj_type() == obj_type && l.top.le(svc) && self.base_vc.le(svc) {
                return 0;
            }
        }
        match &self.stable {
            Some(p) if p.obj.obj_type() == obj_type && p.top.le(svc) => {
                self.versions.len().saturating_sub(p.len)
            }
            _ => self.versions.len(),
        }
    }

    /// The object as of snapshot `svc` (Cure Alg. 2 l.3-4), or "snapshot too old" when the
    /// checkpoint already holds versions the snapshot must not see.
    fn at(&self, svc: &T, obj_type: ObjType) -> Result<Object, Error> {
        // Snapshot too old, or the key holds another type (with no checkpoint yet, its
        // type is its first version's in the snapshot).
        self.check(svc, obj_type)?;
        if let Some(l) = &self.latest {
            if l.obj.obj_type() == obj_type && l.top.le(svc) {
                return Ok(self.with_ids(l.obj.clone_state()));
            }
        }
        let mut obj = crate::kit::txn::typed(self.base.as_ref(), obj_type)?;
        for v in self.versions.iter().filter(|v| v.ct.le(svc)) {
            for op in &v.ops {
                if effect_type(&op.effect) == obj_type {
                    obj.apply(op);
                }
            }
        }
        Ok(obj)
    }

    /// `obj`, the state of every version of its type (the cache's), with the op ids a
    /// replay by `Object::apply` would have recorded: the checkpoint's, each applied op's
    /// and the ids each op deleted.
    fn with_ids(&self, mut obj: Object) -> Object {
        let t = obj.obj_type();
        if let Some(base) = &self.base {
            obj.note_seen(base.seen_ids().copied());
        }
        for v in &self.versions {
            for op in v.ops.iter().filter(|op| effect_type(&op.effect) == t) {
                obj.note_seen(std::iter::once(op.id));
                obj.note_seen(op.effect.deleted_ids().iter().copied());
            }
        }
        obj
    }

    /// [`KeyVersions::at`] for a transaction's snapshot: the latest object's state
    /// without its applied ids when the snapshot covers every version
    /// ([`Object::clone_state`]).
    fn state_at(&self, svc: &T, obj_type: ObjType) -> Result<Object, Error> {
        if let Some(l) = &self.latest {
            if l.obj.obj_type() == obj_type && l.top.le(svc) && self.base_vc.le(svc) {
                return Ok(l.obj.clone_state());
            }
        }
        self.effects_at(svc, obj_type)
    }

    /// [`KeyVersions::at`]'s state, replaying the effects without recording their op ids
    /// (as [`KeyVersions::fold`] does). `Object::apply`'s bookkeeping has nothing to do
    /// here: a key holds one version per txn (the replication stream drops duplicates, an
    /// install skips the txns it has), and the versions are in a causal order (`insert`),
    /// so an op that deletes a tag or a register entry comes after the op that made it
    /// (it observed that op in its snapshot, which is below its commit timestamp). A
    /// transaction that read a hot key and prepares its updates after other commits (a
    /// pipeline's group) misses the newest-object cache, and inserting every version's id
    /// into a set was a fifth of a pipelined INCR's CPU.
    ///
    /// It starts from the stable prefix when the snapshot covers it: the prefix is the
    /// replay of its versions, each of them `<= svc`, so the result is the same.
    fn effects_at(&self, svc: &T, obj_type: ObjType) -> Result<Object, Error> {
        self.check(svc, obj_type)?;
        self.missed.set(true);
        let (mut obj, from) = match &self.stable {
            Some(p) if p.obj.obj_type() == obj_type && p.top.le(svc) => {
                (p.obj.clone_state(), p.len)
            }
            _ => {
                let base = self.base_state(obj_type);
                (base.expect("the type is checked above"), 0)
            }
        };
        for v in self.versions.range(from..).filter(|v| v.ct.le(svc)) {
            for op in &v.ops {
                if effect_type(&op.effect) == obj_type {
                    obj.apply_effect(op);
                }
            }
        }
        Ok(obj)
    }

    /// The checkpoint's state without its ids (an empty object without a checkpoint);
    /// `None` when the checkpoint holds another type.
    fn base_state(&self, obj_type: ObjType) -> Option<Object> {
        match &self.base {
            Some(base) if base.obj_type() != obj_type => None,
            Some(base) => Some(base.clone_state()),
            None => Some(Object::new(obj_type)),
        }
    }

    /// The error [`KeyVersions::at`] would return for this read, without building the
    /// object: for an update whose effect does not depend on the state it observes.
    fn check(&self, svc: &T, obj_type: ObjType) -> Result<(), Error> {
        if !self.base_vc.le(svc) {
            return Err(Error::Aborted("snapshot too old".into()));
        }
        let held = match &self.base {
            Some(base) => Some(base.obj_type()),
            None => {
                let mut visible = self.versions.iter().filter(|v| v.ct.le(svc));
                let first = visible.find_map(|v| v.ops.first());
                first.map(|op| effect_type(&op.effect))
            }
        };
        match held {
            Some(t) if t != obj_type => Err(Error::WrongType {
                expected: t,
                found: obj_type,
            }),
            _ => Ok(()),
        }
    }

    /// Like [`KeyVersions::at`], also returning the join of the commit timestamps of
    /// everything applied (checkpoint included): what the read depends on.
    fn at_with_ts(&self, svc: &T, obj_type: ObjType) -> Result<(Object, T), Error> {
        let obj = self.at(svc, obj_type)?;
        Ok((obj, self.ts_at(svc)))
    }

    /// The join of the commit timestamps of what a read at `svc` applies. From the
    /// newest-object cache when the snapshot covers every version, else from the stable
    /// prefix when it covers that: a hot key keeps thousands of versions (PrompTCC §VII
    /// keeps them for the txn timeout), and joining them all on every read was most of a
    /// PrompTCC server's work at Zipf 0.99.
    fn ts_at(&self, svc: &T) -> T {
        let mut ts = self.base_vc.clone();
        if let Some(l) = self.latest.as_ref().filter(|l| l.top.le(svc)) {
            ts.join(&l.top);
            return ts;
        }
        let from = self.ts_prefix(svc).map_or(0, |p| {
            ts.join(&p.top);
            p.len
        });
        for v in self.versions.range(from..).filter(|v| v.ct.le(svc)) {
            ts.join(&v.ct);
        }
        ts
    }

    /// The stable prefix when `svc` covers it: its `top` is the join of the checkpoint's
    /// and its versions' timestamps ([`Prefix`]).
    fn ts_prefix(&self, svc: &T) -> Option<&Prefix<T>> {
        self.stable.as_ref().filter(|p| p.top.le(svc))
    }

    /// Versions [`KeyVersions::ts_at`] visits.
    fn ts_cost(&self, svc: &T) -> usize {
        if self.latest.as_ref().is_some_and(|l| l.top.le(svc)) {
            return 0;
        }
        let from = self.ts_prefix(svc).map_or(0, |p| p.len);
        self.versions.len() - from
    }

    /// Folds versions into the checkpoint: the leading run with `ct <= point`
    /// ([`KeyVersions::gc_below`]), then, past `VERSIONS_PER_KEY_MAX`, the oldest ones
    /// with `ct <= durable` (nothing that arrives later can precede those causally).
    ///
    /// In place (a hot key holds hundreds of versions between two GC ticks: rebuilding
    /// the vector, then growing it again one insert at a time, was a tenth of a replica's
    /// CPU), and the newest-object cache stays: a fold moves a version into the
    /// checkpoint, so the checkpoint plus the versions left is the same object.
    ///
    /// Both fold from the front while they can, in apply order: a hot key under WAN
    /// replication holds every version of the last round trip (a fold waits for every
    /// sibling's acknowledgement; past the limit from about 40,000 writes a second), and
    /// checking them all every tick was a tenth of a replica's CPU.
    ///
    /// Returns why nothing more folds, if a later GC of this key would do nothing while
    /// it holds: an entry of the first version's timestamp above `point`'s ([`Blocker`]),
    /// with the key within the version limit (past it, a forced fold may be due whatever
    /// the point). The store skips the key's visits on it until the key changes or a read
    /// asks for its stable prefix (`Store::unfolded`): under WAN replication each key
    /// holds its versions for a round trip, and comparing its first vector every 5 ms
    /// tick was a sixth of a 3-DC replica's CPU.
    fn gc(&mut self, point: &T, durable: &T) -> Option<Blocker> {
        self.gc_below(point);
        let excess = self.versions.len().saturating_sub(VERSIONS_PER_KEY_MAX);
        if excess > 0 {
            let run = self.fold_leading(excess, |v| v.ct.le(durable));
            if run < excess {
                self.gc_forced_anywhere(point, durable, excess - run);
            }
            self.keep_latest_if_typed();
            self.gc_below(point); // what the forced run held back
        }
        self.extend_stable(durable);
        let within = self.versions.len() <= VERSIONS_PER_KEY_MAX;
        let first = self.versions.front().filter(|_| within);
        first.and_then(|v| v.ct.above(point))
    }

    /// Extends [`KeyVersions::stable`] over the leading run of the versions after it with
    /// `ct <= durable`, for a key a read missed the newest object on since the last GC
    /// (`missed`, reset here: a key no longer read so stops costing anything). Applies
    /// each version once, so a tick costs the versions it adds. Built from the checkpoint
    /// when there is none, which costs a copy of the object (what one read costs), so
    /// only over at least [`STABLE_PREFIX_RUN_MIN`] versions: a large set written and
    /// read every tick would otherwise be copied every tick for a few versions.
    fn extend_stable(&mut self, durable: &T) {
        if !self.missed.replace(false) {
            return;
        }
        let from = self.stable.as_ref().map_or(0, |p| p.len);
        let run = self.versions.range(from..).take_while(|v| v.ct.le(durable));
        let run = run.count();
        let min = if self.stable.is_some() {
            1
        } else {
            STABLE_PREFIX_RUN_MIN
        };
        if run < min {
            return;
        }
        let mut p = match self.stable.take() {
            Some(p) => p,
            None => {
                let Some(obj) = self.key_type().and_then(|t| self.base_state(t)) else {
                    return;
                };
                let top = self.base_vc.clone();
                Prefix { len: 0, obj, top }
            }
        };
        let t = p.obj.obj_type();
        for v in self.versions.range(from..from + run) {
            for op in v.ops.iter().filter(|op| effect_type(&op.effect) == t) {
                p.obj.apply_effect(op);
            }
            p.top.join(&v.ct);
        }
        p.len += run;
        self.stable = Some(p);
    }

    /// Drops both caches (after a change that is not an in-order insert or fold).
    fn forget_caches(&mut self) {
        self.latest = None;
        self.stable = None;
    }

    /// Past the limit with a version in the way that is not durable everywhere yet: every
    /// version below `point`, and the oldest `excess` others with `ct <= durable`,
    /// wherever they are (out of order: the checkpoint's type may change).
    fn gc_forced_anywhere(&mut self, point: &T, durable: &T, excess: usize) {
        self.stable = None; // folds out of order
        let mut forced = 0;
        let (base, base_vc) = (&mut self.base, &mut self.base_vc);
        self.versions.retain(|v| {
            let below = v.ct.le(point);
            let force = !below && forced < excess && v.ct.le(durable);
            forced += usize::from(force);
            if below || force {
                fold_into(base, base_vc, v);
            }
            !(below || force)
        });
    }

    /// Folds the longest run of versions from the first (in apply order) with `ct <=
    /// point`, so the checkpoint is a prefix of the key's history and a tick costs the
    /// versions it folds, plus one. A version that does not fold yet (a concurrent one
    /// whose other entries `point` has not reached) holds back the later ones until it
    /// does; folding fewer is always sound (reads just keep more versions), and `point`
    /// reaches it within about a round of acknowledgements.
    fn gc_below(&mut self, point: &T) {
        if self.fold_leading(usize::MAX, |v| v.ct.le(point)) > 0 {
            self.keep_latest_if_typed();
        }
    }

    /// Folds the versions from the first for as long as `fold` picks them, at most `max`
    /// (they leave the queue from its front); returns how many.
    fn fold_leading(&mut self, max: usize, fold: impl Fn(&Version<T>) -> bool) -> usize {
        let run = self
            .versions
            .iter()
            .take(max)
            .take_while(|v| fold(v))
            .count();
        for v in self.versions.drain(..run) {
            fold_owned(&mut self.base, &mut self.base_vc, v);
        }
        // The checkpoint now holds the prefix's first `run` versions: the same object.
        match &mut self.stable {
            Some(p) if p.len > run => p.len -= run,
            _ => self.stable = None,
        }
        run
    }

    /// After a fold: the cache holds the checkpoint's type's state, so it stays only while
    /// the checkpoint has that type (a forced fold past a version not yet durable takes
    /// versions out of order, [`KeyVersions::gc_forced_anywhere`]: a key written as two
    /// types by concurrent txns may have taken the other one's first; then a read of the
    /// cache's type must fail).
    fn keep_latest_if_typed(&mut self) {
        let base_type = self.base.as_ref().map(Object::obj_type);
        if let Some(l) = &self.latest {
            if base_type != Some(l.obj.obj_type()) {
                self.latest = None;
            }
        }
        if let Some(p) = &self.stable {
            if base_type != Some(p.obj.obj_type()) {
                self.stable = None;
            }
        }
    }

    /// Folds the versions `fold` picks (by commit timestamp and txn) into the checkpoint.
    /// In place and keeping the cache, as [`KeyVersions::gc`]; a pick that is a leading
    /// run (the oldest versions, as a GC by age mostly picks) keeps the stable prefix too.
    fn gc_where(&mut self, fold: &dyn Fn(&T, TxnId) -> bool) {
        let picked = |v: &Version<T>| fold(&v.ct, v.txn);
        let run = self.versions.iter().take_while(|v| picked(v)).count();
        if !self.versions.iter().skip(run).any(picked) {
            if self.fold_leading(run, |_| true) > 0 {
                self.keep_latest_if_typed();
            }
            return;
        }
        let mut folded = false;
        let (base, base_vc) = (&mut self.base, &mut self.base_vc);
        self.versions.retain(|v| {
            let picked = fold(&v.ct, v.txn);
            if picked {
                fold_into(base, base_vc, v);
                folded = true;
            }
            !picked
        });
        if folded {
            self.stable = None; // folds out of order
            self.keep_latest_if_typed();
        }
    }

    /// This key for a state transfer at `at` (the sender's stable vector): the object
    /// with every version `<= at` applied, and the versions above it as they are.
    fn image_at(&self, at: &T) -> Result<Image<T>, Error> {
        let below = self.versions.iter().filter(|v| v.ct.le(at));
        let held = self.base.as_ref().map(Object::obj_type);
        let first = below.flat_map(|v| v.ops.first()).next();
        let base = match held.or(first.map(|op| effect_type(&op.effect))) {
            Some(t) => Some(self.at_with_ts(at, t)?),
            None => None,
        };
        let above = self.versions.iter().filter(|v| !v.ct.le(at)).cloned();
        Ok((base, above.collect()))
    }

    /// Installs a sender's image at `at`: its object replaces our checkpoint (which holds
    /// nothing `at` lacks: checked by [`Store::installable`]), our versions `<= at` go
    /// (the image has them), the sender's versions above `at` join ours. Returns the
    /// versions added that we did not have.
    fn install(&mut self, at: &T, image: KeyImage<T>) -> Vec<(TxnId, T)> {
        assert!(self.base_vc.le(at), "a state transfer below our checkpoint");
        match image.base {
            Some((obj, ts)) => {
                self.base = Some(obj);
                self.base_vc = ts;
            }
            None => assert!(self.base.is_none(), "the sender lacks our checkpoint"),
        }
        self.versions.retain(|v| !v.ct.le(at));
        self.forget_caches();
        let mut added = Vec::new();
        for v in image.versions {
            assert!(!v.ct.le(at), "an image's versions are above its vector");
            if !self.versions.iter().any(|x| x.txn == v.txn) {
                added.push((v.txn, v.ct.clone()));
                self.insert(v);
            }
        }
        added
    }

    pub fn len(&self) -> usize {
        self.versions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.versions.is_empty()
    }
}

/// A key's object at a transfer's vector (with the join of what it applied) and its
/// versions above the vector.
type Image<T> = (Option<(Object, T)>, Vec<Version<T>>);

/// One key of a partition in a state transfer (`cure/transfer.rs`): its object at the
/// transfer's vector with the join of what it applied, and its versions above the vector.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(bound(
    serialize = "T: Serialize",
    deserialize = "T: SnapshotTs + Deserialize<'de>"
))]
pub struct KeyImage<T> {
    pub key: Key,
    pub base: Option<(Object, T)>,
    pub versions: Vec<Version<T>>,
}

/// The seed of every store's key index in this process ([`set_key_hash_seed`]).
static KEY_HASH_SEED: OnceLock<u64> = OnceLock::new();

/// The seed the key index hashes with when the host set none: the simulator and the
/// tests, which must replay bit for bit, leave it so.
const KEY_HASH_SEED_FIXED: u64 = 0x9e37_79b9_7f4a_7c15;

/// Sets this process's key-index seed, once, before any store is built (a server node
/// draws it from the OS at start, as Redis seeds its dict hash, so clients cannot pick
/// keys that collide; this layer has no entropy of its own). False if already set.
pub fn set_key_hash_seed(seed: u64) -> bool {
    KEY_HASH_SEED.set(seed).is_ok()
}

/// The hasher of a store's key index: foldhash, seeded per process
/// ([`set_key_hash_seed`]), fixed where the host set no seed.
#[derive(Clone, Debug)]
pub struct KeyHashState(foldhash::fast::FixedState);

impl Default for KeyHashState {
    fn default() -> Self {
        let seed = *KEY_HASH_SEED.get().unwrap_or(&KEY_HASH_SEED_FIXED);
        KeyHashState(foldhash::fast::FixedState::with_seed(seed))
    }
}

impl BuildHasher for KeyHashState {
    type Hasher = <foldhash::fast::FixedState as BuildHasher>::Hasher;

    fn build_hasher(&self) -> Self::Hasher {
        self.0.build_hasher()
    }
}

/// Versions a read replays per unit of the CPU model's work (a key read and applied, about
/// 0.5 µs): `examples/mvstore_read.rs` replays a counter version in about 0.1 µs (39 µs for
/// a key of 400 versions).
pub const VERSIONS_PER_WORK_UNIT: u64 = 5;

/// Every key of one partition.
/// Serializable whole for node checkpoints (`cure::record::Checkpoint`).
///
/// The key index is a hash map, not a B-tree: a partition of 100k keys spent a third of a
/// pipelined random-key SET's node time in B-tree searches (key compares, cache misses),
/// three per write (the generator's check, the insert, the GC). Nothing needs the keys in
/// order: what iterates them (GC, state transfer images, checkpoints) treats each key
/// alone.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(bound(
    serialize = "T: Serialize",
    deserialize = "T: SnapshotTs + Deserialize<'de>"
))]
pub struct Store<T> {
    keys: HashMap<Key, KeyVersions<T>, KeyHashState>,
    /// An index, not state (skipped by serde and equality): every key that may hold
    /// versions, so that a GC, which runs every stabilization tick, visits those and not
    /// every key the partition ever stored (a key folded into its checkpoint has nothing
    /// to do). A superset: a key enters when it gains a version and leaves when a GC
    /// leaves it none. `None` in a restored store: the next GC lists the keys.
    ///
    /// Each with the hint its last GC visit returned ([`KeyVersions::gc`]) (`None`:
    /// visit it), cleared by a change of the key's first version (an insert before it, a
    /// restore, an install), by an insert that takes it past `VERSIONS_PER_KEY_MAX`, and
    /// by a read that asks for its stable prefix (`missed_keys`), so a tick skips a
    /// blocked key without even looking it up: the lookups were a seventh of a 3-DC
    /// node's CPU under random keys.
    #[serde(skip)]
    unfolded: Option<HashMap<Key, Option<Blocker>, KeyHashState>>,
    /// Keys a transaction's read replayed versions of since the last GC (their
    /// `KeyVersions::missed` turned on): the GC visits them to extend their stable prefix.
    /// At most one entry per key between two GCs.
    #[serde(skip)]
    missed_keys: RefCell<Vec<Key>>,
    /// A count, not state (skipped by serde and equality): versions the reads replayed or
    /// scanned since the last [`Store::take_traversed`], the work the simulator's CPU model
    /// charges for a read below the newest-object cache.
    #[serde(skip)]
    traversed: Cell<u64>,
    /// A cache, not state (skipped by serde and equality): the keys in listing order
    /// (`kit::keys`), rebuilt by a listing after the store gained keys (it never drops
    /// one), so a write pays nothing for it.
    #[serde(skip)]
    listed: KeyOrder,
}

impl<T> Default for Store<T> {
    fn default() -> Self {
        Store {
            keys: HashMap::default(),
            unfolded: Some(HashMap::default()),
            missed_keys: RefCell::default(),
            traversed: Cell::default(),
            listed: KeyOrder::default(),
        }
    }
}

impl<T: PartialEq> PartialEq for Store<T> {
    fn eq(&self, other: &Self) -> bool {
        self.keys == other.keys
    }
}

impl<T: Eq> Eq for Store<T> {}

impl<T: SnapshotTs> Store<T> {
    /// Adds a committed txn's ops, grouped per key.
    pub fn insert(&mut self, txn: TxnId, ct: &T, ops: &[(Key, Op)]) {
        let version = |ops| Version::new(ct.clone(), txn, ops);
        // One op (a standalone command's txn): nothing to group.
        if let [(k, op)] = ops {
            self.insert_version(k, version(vec![op.clone()]));
            return;
        }
        let mut per_key: BTreeMap<&Key, Vec<Op>> = BTreeMap::new();
        for (k, op) in ops {
            per_key.entry(k).or_default().push(op.clone());
        }
        for (k, ops) in per_key {
            self.insert_version(k, version(ops));
        }
    }

    /// Adds a version of `k`, copying the key only when it is new (a hot key's is not).
    fn insert_version(&mut self, k: &Key, v: Version<T>) {
        // `revisit`: whether the key's GC hint no longer holds. It is about the first
        // version alone (`KeyVersions::gc`), so a version appended behind it keeps it,
        // unless the key is now past VERSIONS_PER_KEY_MAX (a forced fold is due). Under
        // WAN replication a key holds a round trip's versions, and clearing the hint at
        // every append made each tick look up every key written since the last one.
        let (gained, revisit) = match self.keys.get_mut(k) {
            Some(versions) => {
                let gained = versions.is_empty();
                let at = versions.insert(v);
                (gained, at == 0 || versions.len() > VERSIONS_PER_KEY_MAX)
            }
            None => {
                let mut versions = KeyVersions::default();
                versions.insert(v);
                self.keys.insert(k.clone(), versions);
                (true, true)
            }
        };
        if let Some(unfolded) = &mut self.unfolded {
            match unfolded.get_mut(k) {
                Some(hint) if revisit => *hint = None,
                Some(_) => {}
                None if gained => {
                    unfolded.insert(k.clone(), None);
                }
                None => {}
            }
        }
    }

    /// Runs `gc` on every key that may hold versions ([`Store::unfolded`]), and forgets
    /// the keys it leaves without any.
    /// `skip(hint)`: whether the key's hint says a visit would do nothing.
    fn gc_unfolded(
        &mut self,
        skip: impl Fn(&Blocker) -> bool,
        mut gc: impl FnMut(&mut KeyVersions<T>) -> Option<Blocker>,
    ) {
        let Store {
            keys,
            unfolded,
            missed_keys,
            traversed: _,
            listed: _,
        } = self;
        let unfolded = unfolded.get_or_insert_with(|| {
            let held = keys.iter().filter(|(_, k)| !k.is_empty());
            held.map(|(key, _)| (key.clone(), None)).collect()
        });
        for key in missed_keys.get_mut().drain(..) {
            if let Some(hint) = unfolded.get_mut(&key) {
                *hint = None;
            }
        }
        unfolded.retain(|key, hint| {
            if hint.as_ref().is_some_and(&skip) {
                return true;
            }
            match keys.get_mut(key) {
                Some(k) => {
                    *hint = gc(k);
                    !k.is_empty()
                }
                None => false,
            }
        });
    }

    /// Clears every key's GC hint (after a change to many keys' versions at once).
    fn forget_hints(&mut self) {
        if let Some(unfolded) = &mut self.unfolded {
            unfolded.values_mut().for_each(|hint| *hint = None);
        }
    }

    pub fn read(&self, key: &Key, svc: &T, obj_type: ObjType) -> Result<Object, Error> {
        match self.keys.get(key) {
            Some(k) => {
                self.count(k.at_cost(svc, obj_type));
                k.at(svc, obj_type)
            }
            None => Ok(Object::new(obj_type)),
        }
    }

    /// Up to `max` keys from position `from` whose newest state shows a value, with the
    /// type it shows, and the position to go on from (`kit::keys`). The newest state
    /// includes versions not yet visible to any snapshot (a remote txn received, not yet
    /// stable): a listing is of what the store holds, not of a snapshot.
    pub fn list_keys(&mut self, from: u64, max: u32) -> (Vec<(Key, ObjType)>, Option<u64>) {
        let Store { keys, listed, .. } = self;
        let shown = |k: &Key| keys.get(k).and_then(KeyVersions::shown_type);
        let all = || keys.keys().map(|k| (0, k)).collect();
        listed.list(keys.len(), all, shown, (0, from, max))
    }

    /// Versions the reads replayed or scanned since the last call.
    pub fn take_traversed(&self) -> u64 {
        self.traversed.take()
    }

    /// The CPU model's work units for the versions the reads visited since the last call:
    /// one per [`VERSIONS_PER_WORK_UNIT`] versions, the rest kept for the next call.
    pub fn take_traversed_work(&self) -> u64 {
        let versions = self.traversed.get();
        self.traversed.set(versions % VERSIONS_PER_WORK_UNIT);
        versions / VERSIONS_PER_WORK_UNIT
    }

    fn count(&self, versions: usize) {
        self.traversed.set(self.traversed.get() + versions as u64);
    }

    /// [`Store::read`] for a transaction (a read or a generator), which applies no
    /// replicated op to the object: its state may come without its applied ids.
    pub fn read_state(&self, key: &Key, svc: &T, obj_type: ObjType) -> Result<Object, Error> {
        let Some(k) = self.keys.get(key) else {
            return Ok(Object::new(obj_type));
        };
        let missed = k.missed.get();
        self.count(k.state_cost(svc, obj_type));
        let state = k.state_at(svc, obj_type);
        if !missed && k.missed.get() {
            // The next GC extends its stable prefix (`unfolded`'s hint skips it otherwise).
            self.missed_keys.borrow_mut().push(key.clone());
        }
        state
    }

    /// Whether `key` holds a register that counts: its assignments are not blind
    /// ([`KeyVersions::counts`]).
    pub fn counts(&self, key: &Key) -> bool {
        self.keys.get(key).is_some_and(KeyVersions::counts)
    }

    /// Fails where [`Store::read`] would, and costs no object: a blind write (a register
    /// assignment of a key that never counted) needs nothing of the state but its type.
    pub fn check(&self, key: &Key, svc: &T, obj_type: ObjType) -> Result<(), Error> {
        match self.keys.get(key) {
            Some(k) => k.check(svc, obj_type),
            None => Ok(()),
        }
    }

    /// [`Store::read`] plus the join of the commit timestamps the object applied
    /// (`T::default()` for a key never written).
    pub fn read_with_ts(
        &self,
        key: &Key,
        svc: &T,
        obj_type: ObjType,
    ) -> Result<(Object, T), Error> {
        match self.keys.get(key) {
            Some(k) => {
                self.count(k.at_cost(svc, obj_type) + k.ts_cost(svc));
                k.at_with_ts(svc, obj_type)
            }
            None => Ok((Object::new(obj_type), T::default())),
        }
    }

    /// [`Store::read_state`] plus [`Store::read_with_ts`]'s timestamp: a reply's object
    /// without the applied ids, which grow with the key's history.
    pub fn read_state_with_ts(
        &self,
        key: &Key,
        svc: &T,
        obj_type: ObjType,
    ) -> Result<(Object, T), Error> {
        let Some(k) = self.keys.get(key) else {
            return Ok((Object::new(obj_type), T::default()));
        };
        self.count(k.ts_cost(svc));
        Ok((self.read_state(key, svc, obj_type)?, k.ts_at(svc)))
    }

    /// GC (§III-D): fold below `point` (the DC's oldest snapshot in use, met with `durable`,
    /// this partition's pvc, so no version can still arrive below it).
    pub fn gc(&mut self, point: &T, durable: &T) {
        let mut point = point.clone();
        point.meet(durable);
        self.gc_unfolded(|hint| hint.holds(&point), |k| k.gc(&point, durable));
    }

    /// GC by a rule of the protocol's own (PrompTCC §VII folds by the time a version
    /// became visible): folds every version `fold` picks. Folding any subset is sound for
    /// the store's objects (ops commute, LWW by arbitration timestamp); what it costs is
    /// "snapshot too old" for a later read at a snapshot that excludes a folded version.
    pub fn gc_where(&mut self, fold: impl Fn(&T, TxnId) -> bool) {
        self.gc_unfolded(
            |_| false,
            |k| {
                k.gc_where(&fold);
                None
            },
        );
    }

    /// Extends the stable prefix of every key a read replayed versions of since the last
    /// GC ([`KeyVersions::extend_stable`]) over its leading run `<= durable`: for a
    /// protocol whose GC folds by a rule of its own ([`Store::gc_where`]), which may fold
    /// nothing for a long while (PrompTCC keeps versions for the txn timeout).
    pub fn extend_missed(&mut self, durable: &T) {
        let missed = std::mem::take(self.missed_keys.get_mut());
        for key in missed {
            if let Some(hint) = self.unfolded.as_mut().and_then(|u| u.get_mut(&key)) {
                *hint = None; // as `gc_unfolded` does for a missed key
            }
            if let Some(k) = self.keys.get_mut(&key) {
                k.extend_stable(durable);
            }
        }
    }

    /// Every key as of `at` for a state transfer ([`KeyImage`]). `at` must be at or above
    /// every checkpoint (the sender's stable vector is: GC folds below it).
    pub fn images_at(&self, at: &T) -> Result<Vec<KeyImage<T>>, Error> {
        let mut out = Vec::with_capacity(self.keys.len());
        for (key, k) in &self.keys {
            let (base, versions) = k.image_at(at)?;
            if base.is_some() || !versions.is_empty() {
                let key = key.clone();
                out.push(KeyImage {
                    key,
                    base,
                    versions,
                });
            }
        }
        Ok(out)
    }

    /// A key whose checkpoint holds a version a state transfer at `at` lacks (`None`:
    /// every checkpoint is at or below `at`, so the images can replace them).
    pub fn installable(&self, at: &T) -> Option<&Key> {
        self.keys
            .iter()
            .find(|(_, k)| !k.base_vc.le(at))
            .map(|(key, _)| key)
    }

    /// Installs a state transfer at `at` ([`Store::installable`] first): every key the
    /// images name takes its image; a key they do not name keeps only its versions above
    /// `at` (the sender has every txn `<= at`, and none of them wrote it). Returns the
    /// versions added that we did not have (their txn and commit timestamp).
    pub fn install(&mut self, at: &T, images: Vec<KeyImage<T>>) -> Vec<(TxnId, T)> {
        let mut added = Vec::new();
        let mut named = BTreeSet::new();
        for image in images {
            let key = image.key.clone();
            named.insert(key.clone());
            let k = self.keys.entry(key.clone()).or_default();
            added.extend(k.install(at, image));
            if let (false, Some(unfolded)) = (k.is_empty(), &mut self.unfolded) {
                unfolded.insert(key, None);
            }
        }
        for (key, k) in self.keys.iter_mut() {
            if !named.contains(key) {
                k.versions.retain(|v| !v.ct.le(at));
                k.forget_caches();
            }
        }
        self.forget_hints();
        added
    }

    /// Drops every version (not the folded bases) written by one of `txns`, so they can
    /// be applied again (UniStore's state transfer re-delivers the strong txns a
    /// certifier it adopts has not applied yet: `unistore/strong_transfer.rs`). Returns how
    /// many versions were dropped.
    pub fn remove_txns(&mut self, txns: &std::collections::BTreeSet<TxnId>) -> usize {
        let mut dropped = 0;
        for k in self.keys.values_mut() {
            let before = k.versions.len();
            k.versions.retain(|v| !txns.contains(&v.txn));
            if k.versions.len() != before {
                dropped += before - k.versions.len();
                k.forget_caches();
            }
        }
        self.forget_hints();
        dropped
    }

    /// Total versions kept (for tests and gauges). Counts over the keys that may hold
    /// versions ([`Store::unfolded`]), not every key: the gauge is read twice a second,
    /// and a store of millions of keys would stall its node for each reading.
    pub fn versions(&self) -> usize {
        match &self.unfolded {
            Some(unfolded) => unfolded
                .keys()
                .filter_map(|key| self.keys.get(key))
                .map(KeyVersions::<T>::len)
                .sum(),
            None => self.keys.values().map(KeyVersions::<T>::len).sum(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_core::crdt::{ArbTs, Effect};
    use causeway_core::{ObjValue, OpId, SessionId};

    fn txn(seq: u64) -> TxnId {
        TxnId {
            session: SessionId(1),
            seq,
        }
    }

    fn incr(seq: u64, by: i64) -> Vec<(Key, Op)> {
        let id = OpId {
            txn: txn(seq),
            index: 0,
        };
        let op = Op {
            id,
            ts: ArbTs::PENDING,
            effect: Effect::Increment(by),
        };
        vec![(Key::from("c"), op)]
    }

    /// A version is written as its timestamp, txn and ops (the form checkpoints and
    /// transfers always had) and read back with its order computed again.
    #[test]
    fn a_version_is_written_without_its_order_and_read_back_with_it() {
        let ct = Vc {
            dcs: vec![4, 9, 2],
            extra: Vec::new(),
        };
        let ops = vec![incr(3, 5).remove(0).1];
        let v = Version::new(ct.clone(), txn(3), ops.clone());
        let bytes = postcard::to_allocvec(&v).expect("encodes");
        let parts = postcard::to_allocvec(&(&ct, txn(3), &ops)).expect("encodes");
        assert_eq!(bytes, parts, "the order is not written");
        let back: Version<Vc> = postcard::from_bytes(&bytes).expect("decodes");
        assert_eq!(back, v);
        assert_eq!(back.order(), ((9, 15), txn(3)));
        let json: Version<Vc> = serde_json::from_str(&serde_json::to_string(&v).unwrap()).unwrap();
        assert_eq!(json.order(), v.order());
    }

    /// A register assignment on key "r", arbitrated by `ts` (not by commit order).
    fn assign(seq: u64, ts: u64) -> Vec<(Key, Op)> {
        let id = OpId {
            txn: txn(seq),
            index: 0,
        };
        let ts = ArbTs {
            primary: ts,
            secondary: 0,
        };
        let effect = Effect::Assign(seq.to_be_bytes().to_vec());
        vec![(Key::from("r"), Op { id, ts, effect })]
    }

    fn count<T: SnapshotTs>(s: &Store<T>, at: &T) -> Result<ObjValue, Error> {
        s.read(&Key::from("c"), at, ObjType::Counter)
            .map(|o| o.value())
    }

    /// A set op on key "s": add (replacing the earlier tags `replaces`) or remove.
    fn set_op(seq: u64, add: bool, elem: u8, deletes: Vec<OpId>) -> Vec<(Key, Op)> {
        let id = OpId {
            txn: txn(seq),
            index: 0,
        };
        let elem = vec![elem];
        let effect = if add {
            Effect::Add {
                elem,
                replaces: deletes,
            }
        } else {
            Effect::Remove {
                elem,
                tags: deletes,
            }
        };
        let ts = ArbTs::PENDING;
        vec![(Key::from("s"), Op { id, ts, effect })]
    }

    /// Every read the cache of the newest object answers equals a replay of the versions
    /// (the same key with the cache dropped), across in-order and out-of-order inserts of
    /// a counter, a set and a register over two DCs, GCs and reads at old and new
    /// snapshots, the applied ids included; so does what a transaction reads (`state_at`,
    /// which replays the effects without their ids when the cache misses, from the stable
    /// prefix when the snapshot covers it).
    #[test]
    fn the_newest_object_cache_answers_what_a_replay_does() {
        let mut next = crate::kit::xorshift(0x9e37_79b9_7f4a_7c15u64);
        let mut s: Store<Vc> = Store::default();
        let mut clocks = [0u64; 2];
        // The live adds' tags with their commit vectors.
        let mut tags: Vec<(OpId, Vc)> = Vec::new();
        let (mut cached_reads, mut prefix_reads) = (0, 0);
        for seq in 1..=400u64 {
            let (ct, ops) = random_txn(&mut next, seq, &mut clocks, &mut tags);
            s.insert(txn(seq), &ct, &ops);
            if next(10) == 0 {
                random_gc(&mut s, &mut next, &clocks);
            }
            let keys = [
                ("c", ObjType::Counter),
                ("s", ObjType::Set),
                ("r", ObjType::Lww),
            ];
            for (key, t) in keys {
                let Some(k) = s.keys.get(&Key::from(key)) else {
                    continue;
                };
                let mut svc = Vc::zero(2);
                svc.set(0, clocks[0].saturating_sub(next(3)));
                svc.set(1, clocks[1].saturating_sub(next(3)));
                compare_with_replay(k, &svc, t, &format!("seq {seq}, key {key}"));
                let top = k.latest.as_ref().map(|l| l.top.le(&svc));
                cached_reads += usize::from(top == Some(true));
                let prefix = k.stable.as_ref().filter(|p| p.len > 0 && p.top.le(&svc));
                prefix_reads += usize::from(top != Some(true) && prefix.is_some());
            }
        }
        assert!(
            cached_reads > 100,
            "the cache answered {cached_reads} reads"
        );
        assert!(
            prefix_reads > 100,
            "the stable prefix started {prefix_reads} reads"
        );
    }

    /// A random txn of the cache test from one of two DCs: its commit vector (mostly
    /// growing, sometimes concurrent with the other DC's) and one op on a counter, a set or a
    /// register. `tags` holds the live adds' tags with their commit vectors.
    fn random_txn(
        next: &mut impl FnMut(u64) -> u64,
        seq: u64,
        clocks: &mut [u64; 2],
        tags: &mut Vec<(OpId, Vc)>,
    ) -> (Vc, Vec<(Key, Op)>) {
        let dc = next(2) as usize;
        clocks[dc] += 1 + next(3);
        let mut ct = Vc::zero(2);
        ct.set(dc, clocks[dc]);
        ct.set(1 - dc, clocks[1 - dc].saturating_sub(next(4)));
        let ops = match next(4) {
            0 => incr(seq, next(5) as i64 - 2),
            3 => assign(seq, next(50)),
            kind => {
                // A set op deletes the tags it observed: those of the adds in its causal
                // past, whose commit vectors are below its own (a protocol's snapshot holds
                // them and its commit vector exceeds the snapshot).
                let (deletes, live): (Vec<_>, Vec<_>) = std::mem::take(tags)
                    .into_iter()
                    .partition(|(_, at)| at.le(&ct) && *at != ct);
                *tags = live;
                let deletes = deletes.into_iter().map(|(id, _)| id).collect();
                set_op(seq, kind == 1, next(3) as u8, deletes)
            }
        };
        if let Effect::Add { .. } = ops[0].1.effect {
            tags.push((ops[0].1.id, ct.clone()));
        }
        (ct, ops)
    }

    /// Folds below a point 40 ticks behind the clocks; the stable prefix grows up to a
    /// durable vector above it, by Cure's GC or by a rule of the protocol's own
    /// (PrompTCC's), which folds the leading run, then the prefixes the reads missed.
    fn random_gc(s: &mut Store<Vc>, next: &mut impl FnMut(u64) -> u64, clocks: &[u64; 2]) {
        let mut point = Vc::zero(2);
        point.set(0, clocks[0].saturating_sub(40));
        point.set(1, clocks[1].saturating_sub(40));
        let mut durable = Vc::zero(2);
        durable.set(0, clocks[0].saturating_sub(next(4)));
        durable.set(1, clocks[1].saturating_sub(next(4)));
        durable.join(&point);
        if next(2) == 0 {
            s.gc(&point, &durable);
        } else {
            s.gc_where(|ct, _| ct.le(&point));
            s.extend_missed(&durable);
        }
    }

    /// What the caches of `k` answer at `svc` equals a replay of its versions: the object
    /// (value, observed, applied ids), what a txn reads, the dependencies a read reports
    /// and the type checks of a blind write.
    fn compare_with_replay(k: &KeyVersions<Vc>, svc: &Vc, t: ObjType, at: &str) {
        let mut replay = k.clone();
        replay.forget_caches();
        let ids = |o: &Object| o.seen_ids().copied().collect::<Vec<_>>();
        let got = k.at(svc, t).map(|o| (o.value(), o.observed(), ids(&o)));
        let want = replay
            .at(svc, t)
            .map(|o| (o.value(), o.observed(), ids(&o)));
        assert_eq!(got, want, "{at}, svc {svc:?}");
        let want = want.map(|(value, observed, _)| (value, observed));
        let state = k.state_at(svc, t).map(|o| (o.value(), o.observed()));
        assert_eq!(state, want, "state, {at}, svc {svc:?}");
        assert_eq!(k.ts_at(svc), replay.ts_at(svc), "ts, {at}");
        for other in [ObjType::Lww, ObjType::Counter, ObjType::Set] {
            let check = k.check(svc, other);
            assert_eq!(check, replay.at(svc, other).map(|_| ()), "check {other:?}");
        }
    }

    #[test]
    fn a_read_as_another_type_is_refused_before_any_checkpoint_too() {
        let mut s: Store<u64> = Store::default();
        s.insert(txn(1), &10, &incr(1, 5));
        let e = s
            .read(&Key::from("c"), &10, ObjType::Lww)
            .map(|o| o.value());
        assert_eq!(
            e,
            Err(Error::WrongType {
                expected: ObjType::Counter,
                found: ObjType::Lww
            })
        );
        // Below the first version the key does not exist yet: any type reads empty.
        let empty = s.read(&Key::from("c"), &5, ObjType::Lww).map(|o| o.value());
        assert_eq!(empty, Ok(ObjValue::Lww(None)));
    }

    /// A GC keeps the newest-object cache (the checkpoint plus the versions left is the
    /// same object) unless the fold gave the checkpoint another type than the cache's: a
    /// key written as a counter and as a set by concurrent txns whose set version folds
    /// first must refuse a counter read, from the cache too.
    /// A read the newest-object cache answers visits no version; one below it replays
    /// every version of the key, and the store counts them for the CPU model.
    #[test]
    fn reads_below_the_cache_count_the_versions_they_visit() {
        let mut s: Store<Vc> = Store::default();
        let key = Key::from("c");
        for seq in 1..=3 {
            s.insert(txn(seq), &vc2(seq, 0), &incr(seq, 1));
        }
        let read = |s: &Store<Vc>, at: u64| s.read_state(&key, &vc2(at, 0), ObjType::Counter);
        assert_eq!(read(&s, 3).map(|o| o.value()), Ok(ObjValue::Counter(3)));
        assert_eq!(s.take_traversed(), 0, "the cache answered");
        assert_eq!(read(&s, 2).map(|o| o.value()), Ok(ObjValue::Counter(2)));
        assert_eq!(s.take_traversed(), 3, "a replay scans every version");
        assert_eq!(s.take_traversed(), 0, "taken");
    }

    #[test]
    fn a_gc_drops_the_cache_when_the_checkpoint_takes_another_type() {
        let mut s: Store<Vc> = Store::default();
        let mut set = set_op(2, true, 7, Vec::new());
        set[0].0 = Key::from("c");
        s.insert(txn(1), &vc2(1, 0), &incr(1, 5));
        s.insert(txn(2), &vc2(0, 2), &set);
        let key = Key::from("c");
        let cached = |s: &Store<Vc>| s.keys.get(&key).is_some_and(|k| k.latest.is_some());
        assert!(cached(&s), "an in-order insert keeps the cache");
        let read = |s: &Store<Vc>| s.read_state(&key, &vc2(1, 2), ObjType::Counter);
        assert_eq!(read(&s).map(|o| o.value()), Ok(ObjValue::Counter(5)));
        // A leading run only: the set's version waits behind the counter's, and the
        // key's type (its first version's) stays what reads see.
        s.gc(&vc2(0, 2), &vc2(0, 2));
        assert_eq!(s.versions(), 2, "the set's version waits for the counter's");
        assert!(cached(&s));
        assert_eq!(read(&s).map(|o| o.value()), Ok(ObjValue::Counter(5)));
        // Past VERSIONS_PER_KEY_MAX every version below the point folds, out of order: the
        // checkpoint becomes a set, so the counter cache must go.
        for seq in 3..=VERSIONS_PER_KEY_MAX as u64 + 2 {
            s.insert(txn(seq), &vc2(1, 0), &incr(seq, 0));
        }
        s.gc(&vc2(0, 2), &vc2(0, 2));
        assert_eq!(
            s.versions(),
            VERSIONS_PER_KEY_MAX + 1,
            "only the set's folds"
        );
        assert!(!cached(&s), "the checkpoint is a set, the cache a counter");
        let wrong = Err(Error::WrongType {
            expected: ObjType::Set,
            found: ObjType::Counter,
        });
        assert_eq!(read(&s).map(|o| o.value()), wrong);
        // Same type: the cache survives the fold and still answers.
        let mut t: Store<Vc> = Store::default();
        t.insert(txn(1), &vc2(1, 0), &incr(1, 5));
        t.insert(txn(2), &vc2(1, 1), &incr(2, 6));
        t.gc(&vc2(1, 0), &vc2(1, 0));
        assert!(
            cached(&t),
            "a fold into a counter checkpoint keeps the counter cache"
        );
        assert_eq!(count_vc(&t, &vc2(1, 1)), Ok(ObjValue::Counter(11)));
    }

    #[test]
    fn past_the_limit_gc_folds_the_oldest_durable_versions_from_the_front() {
        let mut s: Store<Vc> = Store::default();
        let extra = 5u64;
        let n = VERSIONS_PER_KEY_MAX as u64 + extra;
        for seq in 1..=n {
            s.insert(txn(seq), &vc2(seq, 0), &incr(seq, 1));
        }
        let key = Key::from("c");
        let cached = |s: &Store<Vc>| s.keys.get(&key).is_some_and(|k| k.latest.is_some());
        // Nothing below the point; everything durable: the oldest `extra` go, in order.
        s.gc(&vc2(0, 0), &vc2(n, 0));
        assert_eq!(s.versions(), VERSIONS_PER_KEY_MAX);
        let k = s.keys.get(&key).expect("written");
        assert_eq!(
            k.base_vc,
            vc2(extra, 0),
            "the checkpoint is the first {extra}"
        );
        assert!(cached(&s), "an in-order fold keeps the cache");
        assert_eq!(count_vc(&s, &vc2(n, 0)), Ok(ObjValue::Counter(n as i64)));
        // The first version is not durable everywhere, so it is in the way: the oldest
        // durable ones after it go all the same, and the limit holds.
        let mut t: Store<Vc> = Store::default();
        t.insert(txn(1), &vc2(0, 1), &incr(1, 1));
        for seq in 2..=n {
            t.insert(txn(seq), &vc2(seq, 0), &incr(seq, 1));
        }
        t.gc(&vc2(0, 0), &vc2(n, 0));
        assert_eq!(
            t.versions(),
            VERSIONS_PER_KEY_MAX,
            "txn 1 stays, five others go"
        );
        let k = t.keys.get(&key).expect("written");
        assert_eq!(k.versions.front().map(|v| v.txn), Some(txn(1)));
        assert_eq!(k.base_vc, vc2(extra + 1, 0), "txns 2 to 6 folded");
        assert_eq!(count_vc(&t, &vc2(n, 1)), Ok(ObjValue::Counter(n as i64)));
    }

    /// GC visits the keys that may hold versions: a key it leaves without any drops out
    /// of that index and comes back with its next version; a restored store (no index)
    /// and a state transfer's install (versions above its vector) fold all the same.
    #[test]
    fn gc_folds_every_key_with_versions_after_inserts_restores_and_installs() {
        let mut s: Store<u64> = Store::default();
        s.insert(txn(1), &10, &incr(1, 1));
        s.insert(txn(2), &20, &assign(2, 20));
        s.gc(&20, &20);
        assert_eq!(s.versions(), 0);
        assert_eq!(
            s.unfolded.as_ref().map(HashMap::len),
            Some(0),
            "nothing left to fold"
        );
        s.insert(txn(3), &30, &incr(3, 10));
        s.insert(txn(4), &40, &incr(4, 100));
        let bytes = postcard::to_allocvec(&s).expect("encode");
        let mut restored: Store<u64> = postcard::from_bytes(&bytes).expect("decode");
        assert_eq!(restored, s, "the index is not state");
        for store in [&mut s, &mut restored] {
            store.gc(&30, &30);
            assert_eq!(store.versions(), 1, "the key came back for its new version");
            assert_eq!(count(store, &40), Ok(ObjValue::Counter(111)));
            store.gc(&40, &40);
            assert_eq!(store.versions(), 0);
        }
        // An install brings versions above its vector for a key GC had emptied.
        let mut sender: Store<u64> = Store::default();
        sender.insert(txn(1), &10, &incr(1, 1));
        sender.insert(txn(3), &30, &incr(3, 10));
        sender.insert(txn(4), &40, &incr(4, 100));
        sender.insert(txn(5), &50, &incr(5, 1000));
        let images = sender.images_at(&40).expect("images");
        assert_eq!(s.installable(&40), None);
        s.install(&40, images);
        assert_eq!(s.versions(), 1, "txn 5 above the vector");
        s.gc(&50, &50);
        assert_eq!(s.versions(), 0, "the installed version folds too");
        assert_eq!(count(&s, &50), Ok(ObjValue::Counter(1111)));
    }

    #[test]
    fn gc_where_folds_exactly_the_picked_versions_out_of_commit_order() {
        let mut s: Store<u64> = Store::default();
        s.insert(txn(1), &10, &incr(1, 1));
        s.insert(txn(2), &20, &incr(2, 10));
        s.insert(txn(3), &30, &incr(3, 100));
        // Fold the middle one only (a version made visible long ago, above a late one).
        s.gc_where(|_, t| t == txn(2));
        assert_eq!(s.versions(), 2);
        assert_eq!(count(&s, &35), Ok(ObjValue::Counter(111)));
        assert_eq!(count(&s, &25), Ok(ObjValue::Counter(11)));
        // A snapshot below the folded version can no longer be served.
        assert!(count(&s, &15).is_err());
        s.gc_where(|_, _| true);
        assert_eq!(s.versions(), 0);
        assert_eq!(count(&s, &30), Ok(ObjValue::Counter(111)));
    }

    #[test]
    fn scalar_snapshots_see_exactly_the_versions_at_or_below_them() {
        let mut s: Store<u64> = Store::default();
        s.insert(txn(1), &10, &incr(1, 1));
        s.insert(txn(2), &20, &incr(2, 10));
        assert_eq!(count(&s, &5), Ok(ObjValue::Counter(0)));
        assert_eq!(count(&s, &10), Ok(ObjValue::Counter(1)));
        assert_eq!(count(&s, &25), Ok(ObjValue::Counter(11)));
    }

    #[test]
    fn a_read_reports_the_join_of_what_it_applied() {
        let mut s: Store<Vc> = Store::default();
        let k = Key::from("c");
        let v = |a: u64, b: u64| {
            let mut x = Vc::zero(2);
            x.set(0, a);
            x.set(1, b);
            x
        };
        s.insert(txn(1), &v(1, 0), &incr(1, 1));
        s.insert(txn(2), &v(0, 2), &incr(2, 1));
        let (_, ts) = s
            .read_with_ts(&k, &v(5, 5), ObjType::Counter)
            .expect("reads");
        assert_eq!(ts, v(1, 2));
        let (_, ts) = s
            .read_with_ts(&k, &v(5, 1), ObjType::Counter)
            .expect("reads");
        assert_eq!(ts, v(1, 0), "only what the snapshot applies");
        s.gc(&v(1, 0), &v(9, 9));
        let (_, ts) = s
            .read_with_ts(&k, &v(5, 5), ObjType::Counter)
            .expect("reads");
        assert_eq!(ts, v(1, 2), "the checkpoint counts");
    }

    /// What `KeyVersions::gc` must do below `VERSIONS_PER_KEY_MAX`: fold, in order, the
    /// versions from the first up to the first one not below `point`. Returns how many
    /// more a fold of every version below `point` would have taken.
    fn gc_leading_run(k: &mut KeyVersions<Vc>, point: &Vc) -> usize {
        let run = k.versions.iter().take_while(|v| v.ct.le(point)).count();
        for v in k.versions.drain(..run) {
            fold_into(&mut k.base, &mut k.base_vc, &v);
        }
        k.versions.iter().filter(|v| v.ct.le(point)).count()
    }

    /// Txn `seq`'s commit vector over three DCs: its own DC's entry (a random one) is its
    /// clock, `seq * 10`, the others a snapshot lagging by up to 60.
    fn concurrent_ct(seq: u64, next: &mut impl FnMut(u64) -> u64) -> Vc {
        let mut ct = Vc::zero(3);
        for d in 0..3 {
            ct.set(d, (seq * 10).saturating_sub(next(60)));
        }
        ct.set(next(3) as usize, seq * 10);
        ct
    }

    /// A GC point at txn `seq`'s time: each DC's entry lagging its clock by up to 90.
    fn lagging_point(seq: u64, next: &mut impl FnMut(u64) -> u64) -> Vc {
        let mut point = Vc::zero(3);
        for d in 0..3 {
            point.set(d, (seq * 10).saturating_sub(next(90)));
        }
        point
    }

    /// The hint a GC returns is exact: some exactly when the key's first version is above
    /// the point, and while it holds another GC of the unchanged key changes nothing.
    /// GC'd several times between inserts at points that go up and down (a strong entry
    /// included); some of those GCs fall while the hint holds.
    #[test]
    fn a_gc_hint_holds_exactly_while_a_gc_would_change_nothing() {
        let mut next = crate::kit::xorshift(0x9e37_79b9_7f4a_7c15);
        let mut skipped = 0;
        for _ in 0..100 {
            let mut key = KeyVersions::<Vc>::default();
            for seq in 1..=40u64 {
                let mut ct = concurrent_ct(seq, &mut next);
                if next(3) == 0 {
                    ct.set_extra(Extra::Strong, seq);
                }
                key.insert(Version::new(
                    ct,
                    txn(seq),
                    vec![incr(seq, seq as i64).remove(0).1],
                ));
                let mut hint = None;
                for _ in 0..next(4) {
                    let mut point = lagging_point(seq, &mut next);
                    point.set_extra(Extra::Strong, seq.saturating_sub(next(4)));
                    let before = key.clone();
                    let holds = hint.is_some_and(|b: Blocker| b.holds(&point));
                    hint = key.gc(&point, &point);
                    if holds {
                        skipped += 1;
                        assert_eq!(key, before, "a held hint's GC at {point:?} folds nothing");
                    }
                    let first = key.versions.front();
                    assert_eq!(
                        hint.is_some(),
                        first.is_some_and(|v| !v.ct.le(&point)),
                        "blocked exactly when the first version is above the point"
                    );
                }
            }
        }
        assert!(skipped > 100, "ticks skip blocked keys ({skipped})");
    }

    /// The store's hints (`Store::unfolded`) skip keys without changing anything: a store
    /// GC'd with them and one whose hints are cleared before every GC (so it visits every
    /// key) hold the same versions and the same stable prefixes, under inserts to a few
    /// keys (some out of order), points that go up and down, and reads that ask for the
    /// stable prefix.
    #[test]
    fn a_store_gc_that_skips_hinted_keys_keeps_what_a_full_visit_keeps() {
        let mut next = crate::kit::xorshift(0x5851_f42d_4c95_7f2d);
        let mut skipped = 0;
        for _ in 0..40 {
            let (mut hinted, mut visited) = (Store::<Vc>::default(), Store::<Vc>::default());
            for seq in 1..=80u64 {
                // One in four arrives late (a sibling's stream behind this DC's commits):
                // it may land before its key's first version, whose hint then no longer
                // holds; the others append behind it, which keeps the hint.
                let late = next(4) == 0;
                let at = if late {
                    seq.saturating_sub(next(12))
                } else {
                    seq
                };
                let ct = concurrent_ct(at, &mut next);
                let mut ops = incr(seq, 1);
                ops[0].0 = Key::from(format!("c{}", next(5)).as_str());
                hinted.insert(txn(seq), &ct, &ops);
                visited.insert(txn(seq), &ct, &ops);
                if next(3) == 0 {
                    let svc = concurrent_ct(seq, &mut next);
                    for s in [&hinted, &visited] {
                        let _ = s.read_state(&ops[0].0, &svc, ObjType::Counter);
                    }
                }
                for _ in 0..next(4) {
                    let point = lagging_point(seq, &mut next);
                    let hints = hinted.unfolded.as_ref().expect("built");
                    skipped += hints.values().flatten().filter(|b| b.holds(&point)).count();
                    hinted.gc(&point, &point);
                    visited.forget_hints();
                    visited.gc(&point, &point);
                    assert_eq!(hinted, visited, "gc at {point:?} after txn {seq}");
                    for (key, k) in &hinted.keys {
                        let stable = |k: &KeyVersions<Vc>| k.stable.as_ref().map(|p| p.len);
                        assert_eq!(stable(k), stable(&visited.keys[key]), "{key:?}");
                    }
                }
            }
        }
        assert!(skipped > 100, "ticks skip hinted keys ({skipped})");
    }

    #[test]
    fn gc_folds_the_leading_run_below_the_point_and_nothing_is_lost() {
        // Three DCs' commits of one counter with concurrent vectors (each txn's own entry
        // is its DC's clock, the others a lagging snapshot), GC'd at random points between
        // inserts; the kit's seeded `xorshift` picks them.
        let mut next = crate::kit::xorshift(0x2545_f491_4f6c_dd1d);
        let (mut folds, mut held_back) = (0, 0);
        for _ in 0..200 {
            let mut store: Store<Vc> = Store::default();
            let mut reference = KeyVersions::<Vc>::default();
            for seq in 1..=60u64 {
                let ct = concurrent_ct(seq, &mut next);
                store.insert(txn(seq), &ct, &incr(seq, seq as i64));
                reference.insert(Version::new(
                    ct,
                    txn(seq),
                    vec![incr(seq, seq as i64).remove(0).1],
                ));
                if next(4) == 0 {
                    let mut point = Vc::zero(3);
                    for d in 0..3 {
                        point.set(d, (seq * 10).saturating_sub(next(80)));
                    }
                    let before = reference.versions.len();
                    store.gc(&point, &point);
                    held_back += gc_leading_run(&mut reference, &point);
                    folds += before - reference.versions.len();
                    let key = store.keys.get(&Key::from("c")).expect("written");
                    assert_eq!(key, &reference, "gc at {point:?} after txn {seq}");
                }
            }
            let all = Vc {
                dcs: vec![1000; 3],
                extra: Vec::new(),
            };
            let total = (1..=60).sum::<i64>();
            assert_eq!(count(&store, &all), Ok(ObjValue::Counter(total)));
        }
        assert!(folds > 1000, "the points fold versions ({folds})");
        assert!(
            held_back > 0,
            "some runs stop before a concurrent version ({held_back})"
        );
    }

    #[test]
    fn gc_folds_into_the_checkpoint_and_older_snapshots_become_too_old() {
        let mut s: Store<u64> = Store::default();
        s.insert(txn(1), &10, &incr(1, 1));
        s.insert(txn(2), &20, &incr(2, 10));
        s.gc(&15, &100);
        assert_eq!(s.versions(), 1, "the version at 10 folded");
        assert_eq!(count(&s, &20), Ok(ObjValue::Counter(11)), "nothing lost");
        let e = count(&s, &5).expect_err("below the checkpoint");
        assert!(e.to_string().contains("snapshot too old"), "{e}");
    }

    #[test]
    fn vector_snapshots_apply_concurrent_versions_only_when_covered() {
        let mut s: Store<Vc> = Store::default();
        let vc = |a, b| Vc {
            dcs: vec![a, b],
            extra: Vec::new(),
        };
        s.insert(txn(1), &vc(10, 0), &incr(1, 1));
        s.insert(txn(2), &vc(0, 10), &incr(2, 10));
        assert_eq!(count(&s, &vc(10, 5)), Ok(ObjValue::Counter(1)));
        assert_eq!(count(&s, &vc(10, 10)), Ok(ObjValue::Counter(11)));
        s.gc(&vc(10, 5), &vc(100, 100));
        assert_eq!(s.versions(), 1, "only the covered version folds");
    }

    fn vc2(a: u64, b: u64) -> Vc {
        Vc {
            dcs: vec![a, b],
            extra: Vec::new(),
        }
    }

    fn count_vc(s: &Store<Vc>, at: &Vc) -> Result<ObjValue, Error> {
        s.read(&Key::from("c"), at, ObjType::Counter)
            .map(|o| o.value())
    }

    /// A state transfer at `at`: the sender's object below `at` replaces the receiver's
    /// checkpoint, the receiver keeps its own versions above `at`, and the sender's
    /// versions above `at` are added once (not twice when the receiver has them).
    #[test]
    fn an_image_installs_below_its_vector_and_merges_versions_above_it() {
        let mut sender: Store<Vc> = Store::default();
        sender.insert(txn(1), &vc2(10, 0), &incr(1, 1));
        sender.insert(txn(2), &vc2(20, 0), &incr(2, 10));
        sender.insert(txn(3), &vc2(0, 5), &incr(3, 100)); // the receiver's own, received
        sender.insert(txn(4), &vc2(30, 9), &incr(4, 1000)); // above the vector
        sender.gc(&vc2(10, 0), &vc2(10, 0));
        let at = vc2(20, 5);
        let images = sender.images_at(&at).expect("at the sender's pvc");
        assert_eq!(images.len(), 1);
        assert_eq!(
            images[0].versions.len(),
            1,
            "only txn 4 is above the vector"
        );

        let mut receiver: Store<Vc> = Store::default();
        receiver.insert(txn(3), &vc2(0, 5), &incr(3, 100));
        receiver.insert(txn(5), &vc2(0, 40), &incr(5, 10_000)); // its own, unseen there
        receiver.gc(&vc2(0, 5), &vc2(0, 5)); // txn 3 folded: acknowledged by the sender
        assert_eq!(receiver.installable(&at), None);
        let added = receiver.install(&at, images.clone());
        assert_eq!(added, vec![(txn(4), vc2(30, 9))]);
        let top = vc2(100, 100);
        assert_eq!(count_vc(&receiver, &top), Ok(ObjValue::Counter(11_111)));
        assert!(receiver.install(&at, images).is_empty(), "idempotent");
        assert_eq!(count_vc(&receiver, &top), Ok(ObjValue::Counter(11_111)));
    }

    /// A receiver whose checkpoint holds a version the image lacks (a forced fold above
    /// what the sender acknowledged) refuses the transfer: replacing would lose it.
    #[test]
    fn a_checkpoint_above_the_images_vector_is_not_installable() {
        let mut receiver: Store<Vc> = Store::default();
        receiver.insert(txn(1), &vc2(0, 50), &incr(1, 1));
        receiver.gc(&vc2(0, 50), &vc2(0, 50));
        assert_eq!(receiver.installable(&vc2(20, 10)), Some(&Key::from("c")));
        assert_eq!(receiver.installable(&vc2(20, 50)), None);
    }

    #[test]
    fn removed_txns_lose_their_versions_and_reads_follow() {
        let mut store: Store<Vc> = Store::default();
        let key = Key::from("k");
        for seq in 1..=3u64 {
            let ct = Vc {
                dcs: vec![seq, 0],
                extra: vec![],
            };
            let op = Op {
                id: OpId {
                    txn: txn(seq),
                    index: 0,
                },
                ts: ArbTs {
                    primary: seq,
                    secondary: seq,
                },
                effect: Effect::Increment(10 * seq as i64),
            };
            store.insert(txn(seq), &ct, &[(key.clone(), op)]);
        }
        let all = Vc {
            dcs: vec![u64::MAX, u64::MAX],
            extra: vec![],
        };
        let read = |s: &Store<Vc>| {
            let got = s.read(&key, &all, causeway_core::crdt::ObjType::Counter);
            got.expect("readable").value()
        };
        assert_eq!(read(&store), ObjValue::Counter(60));
        let gone: std::collections::BTreeSet<TxnId> = [txn(2), txn(9)].into_iter().collect();
        assert_eq!(
            store.remove_txns(&gone),
            1,
            "one version of txn 2; txn 9 has none"
        );
        assert_eq!(read(&store), ObjValue::Counter(40));
        assert_eq!(store.versions(), 2);
    }
}
