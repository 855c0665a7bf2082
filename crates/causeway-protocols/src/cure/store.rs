//! The multi-version store of one partition (Cure §III-D): per key, committed versions in a
//! causal order on top of a checkpoint. A snapshot read applies the checkpoint and every
//! version whose commit vector is `<=` the snapshot; GC folds old versions into the
//! checkpoint so memory stays flat.

use causeway_core::crdt::{ObjType, Object, Op};
use causeway_core::limits::VERSIONS_PER_KEY_MAX;
use causeway_core::{Error, Key, TxnId, Vc};
use std::collections::BTreeMap;

use crate::common::effect_type;

/// One committed txn's ops on one key.
#[derive(Clone, Debug)]
pub struct Version {
    pub ct: Vc,
    pub txn: TxnId,
    pub ops: Vec<Op>,
}

impl Version {
    /// `(max entry, sum, txn)` grows strictly along causality (`ct1 < ct2` entry-wise
    /// implies a smaller sum), so sorting by it applies effects in a causal order.
    fn order(&self) -> (u64, u64, TxnId) {
        (self.ct.max_entry(), self.ct.sum(), self.txn)
    }
}

/// One key: the checkpoint (object + join of the folded commit vectors) and the versions.
#[derive(Clone, Debug, Default)]
pub struct KeyVersions {
    base: Option<Object>,
    base_vc: Vc,
    versions: Vec<Version>,
}

impl KeyVersions {
    fn insert(&mut self, v: Version) {
        let at = self.versions.partition_point(|x| x.order() < v.order());
        self.versions.insert(at, v);
    }

    /// The object as of snapshot `svc` (Cure Alg. 2 l.3-4), or "snapshot too old" when the
    /// checkpoint already holds versions the snapshot must not see.
    fn at(&self, svc: &Vc, obj_type: ObjType) -> Result<Object, Error> {
        if !self.base_vc.le(svc) {
            return Err(Error::Aborted("snapshot too old".into()));
        }
        let mut obj = crate::common::typed(self.base.as_ref(), obj_type)?;
        for v in self.versions.iter().filter(|v| v.ct.le(svc)) {
            for op in &v.ops {
                if effect_type(&op.effect) == obj_type {
                    obj.apply(op);
                }
            }
        }
        Ok(obj)
    }

    /// Folds the versions with `ct <= point` into the checkpoint; then, past
    /// `VERSIONS_PER_KEY_MAX`, the oldest ones with `ct <= durable` (nothing that arrives
    /// later can precede those causally).
    fn gc(&mut self, point: &Vc, durable: &Vc) {
        let mut keep = Vec::with_capacity(self.versions.len());
        let excess = self.versions.len().saturating_sub(VERSIONS_PER_KEY_MAX);
        let mut forced = 0;
        for v in std::mem::take(&mut self.versions) {
            let force = forced < excess && v.ct.le(durable);
            if v.ct.le(point) || force {
                forced += usize::from(force && !v.ct.le(point));
                self.fold(v);
            } else {
                keep.push(v);
            }
        }
        self.versions = keep;
    }

    fn fold(&mut self, v: Version) {
        for op in &v.ops {
            let t = effect_type(&op.effect);
            let base = self.base.get_or_insert_with(|| Object::new(t));
            if base.obj_type() == t {
                base.apply_effect(op);
            }
        }
        self.base_vc.join(&v.ct);
    }

    pub fn len(&self) -> usize {
        self.versions.len()
    }
}

/// Every key of one partition.
#[derive(Clone, Debug, Default)]
pub struct Store {
    keys: BTreeMap<Key, KeyVersions>,
}

impl Store {
    /// Adds a committed txn's ops, grouped per key.
    pub fn insert(&mut self, txn: TxnId, ct: &Vc, ops: &[(Key, Op)]) {
        let mut per_key: BTreeMap<&Key, Vec<Op>> = BTreeMap::new();
        for (k, op) in ops {
            per_key.entry(k).or_default().push(op.clone());
        }
        for (k, ops) in per_key {
            let v = Version {
                ct: ct.clone(),
                txn,
                ops,
            };
            self.keys.entry(k.clone()).or_default().insert(v);
        }
    }

    pub fn read(&self, key: &Key, svc: &Vc, obj_type: ObjType) -> Result<Object, Error> {
        match self.keys.get(key) {
            Some(k) => k.at(svc, obj_type),
            None => Ok(Object::new(obj_type)),
        }
    }

    /// GC (§III-D): fold below `point` (the DC's oldest snapshot in use, met with `durable`,
    /// this partition's pvc, so no version can still arrive below it).
    pub fn gc(&mut self, point: &Vc, durable: &Vc) {
        let mut point = point.clone();
        point.meet(durable);
        for k in self.keys.values_mut() {
            k.gc(&point, durable);
        }
    }

    /// Total versions kept (for tests and gauges).
    pub fn versions(&self) -> usize {
        self.keys.values().map(KeyVersions::len).sum()
    }
}
