//! The transaction buffer every protocol's session and coordinator keep, with the input
//! limits (key and value length, updates per transaction, keys per read), the overlay of a
//! transaction's own writes on what it reads, and the typed-object helpers.

use causeway_core::crdt::{ArbTs, Effect, ObjType, Object, Op, Update};
use causeway_core::limits::{KEY_LEN_MAX, READ_KEYS_MAX, TXN_UPDATES_MAX, VALUE_LEN_MAX};
use causeway_core::{Error, Key, OpId, ReadValue, TxnId, TxnKind};
use std::collections::BTreeMap;

/// The updates a session has buffered in its open transaction, in program order.
#[derive(Clone, Debug)]
pub struct TxnBuffer {
    pub txn: TxnId,
    pub kind: TxnKind,
    pub updates: Vec<(Key, Update, OpId)>,
}

impl TxnBuffer {
    pub fn new(txn: TxnId, kind: TxnKind) -> TxnBuffer {
        TxnBuffer {
            txn,
            kind,
            updates: Vec::new(),
        }
    }

    /// Buffers an update after checking the limits; returns its op id.
    pub fn push(&mut self, key: Key, update: Update) -> Result<OpId, Error> {
        check_key(&key)?;
        check_update(&update)?;
        if self.updates.len() >= TXN_UPDATES_MAX {
            return Err(limit("updates in one transaction", TXN_UPDATES_MAX));
        }
        let id = OpId {
            txn: self.txn,
            index: self.updates.len() as u32,
        };
        self.updates.push((key, update, id));
        Ok(id)
    }

    /// Applies this transaction's own updates of `key` on top of `obj` (a snapshot read).
    /// Effects are prepared against the evolving private state, as the coordinator of
    /// Cure Alg. 1 l.20-21 does, and get the pending timestamp (newer than the snapshot).
    pub fn overlay(&self, key: &Key, obj: &mut Object) -> Result<(), Error> {
        for (k, update, id) in &self.updates {
            if k == key {
                let effect = obj.prepare(update)?;
                obj.apply_effect(&Op {
                    id: *id,
                    ts: ArbTs::PENDING,
                    effect,
                });
            }
        }
        Ok(())
    }

    /// Buffered updates grouped by a routing function (partition, node...).
    pub fn group_by<T: Ord>(
        &self,
        mut route: impl FnMut(&Key) -> T,
    ) -> BTreeMap<T, Vec<(Key, Update, OpId)>> {
        let mut groups: BTreeMap<T, Vec<_>> = BTreeMap::new();
        for u in &self.updates {
            groups.entry(route(&u.0)).or_default().push(u.clone());
        }
        groups
    }
}

/// The error for a request that is not valid inside (or outside) a transaction.
pub fn invalid_in_state(request: &causeway_core::Request, in_txn: bool) -> Error {
    let place = if in_txn { "inside" } else { "outside" };
    Error::InvalidState(format!("{request:?} {place} a transaction"))
}

pub fn limit(what: &str, max: usize) -> Error {
    Error::LimitExceeded {
        what: what.to_string(),
        max: max as u64,
    }
}

pub fn check_key(key: &Key) -> Result<(), Error> {
    if key.0.len() > KEY_LEN_MAX {
        return Err(limit("key length in bytes", KEY_LEN_MAX));
    }
    Ok(())
}

pub fn check_update(update: &Update) -> Result<(), Error> {
    let len = match update {
        Update::Assign(v) | Update::Add(v) | Update::Remove(v) | Update::MvAssign(v) => v.len(),
        Update::Increment(_) => 0,
    };
    if len > VALUE_LEN_MAX {
        return Err(limit("value length in bytes", VALUE_LEN_MAX));
    }
    Ok(())
}

pub fn check_read(keys: &[(Key, ObjType)]) -> Result<(), Error> {
    if keys.len() > READ_KEYS_MAX {
        return Err(limit("keys in one read", READ_KEYS_MAX));
    }
    keys.iter().try_for_each(|(k, _)| check_key(k))
}

/// Every update's effect with arbitration stamp `ts`, prepared in program order against the
/// current objects (`stored`) plus the batch's earlier updates; nothing is applied, so an
/// error (a wrong type) leaves the caller's store untouched. Used where a write applies to
/// the latest state: `eventual` at the origin, Occult at a key's master.
pub fn prepare_effects<'a>(
    stored: impl Fn(&Key) -> Option<&'a Object>,
    ts: ArbTs,
    updates: &[(Key, Update, OpId)],
) -> Result<Vec<(Key, Op)>, Error> {
    let mut scratch: BTreeMap<Key, Object> = BTreeMap::new();
    let mut ops = Vec::with_capacity(updates.len());
    for (key, update, id) in updates {
        if !scratch.contains_key(key) {
            let obj = typed(stored(key), update.obj_type())?;
            scratch.insert(key.clone(), obj);
        }
        let obj = scratch.get_mut(key).expect("inserted above");
        let effect = obj.prepare(update)?;
        let op = Op {
            id: *id,
            ts,
            effect,
        };
        obj.apply(&op);
        ops.push((key.clone(), op));
    }
    Ok(ops)
}

/// Drops every assignment that a later assignment of the same key in the same txn
/// overwrites, keeping the order of the rest (our decision; the papers ship every op).
///
/// A txn's ops all carry its one arbitration stamp, so the last assignment of a key wins
/// over the txn's earlier ones everywhere (the op id breaks the tie), and no read outside
/// the txn can see an earlier one. Every op of a key that a txn assigns is an assignment:
/// the generator refuses any other update of a register. So the version, the record and
/// the replicated txn hold one value per assigned key. A pipelined group of 16 SETs of
/// one key (`redis-benchmark -P 16`) used to record, replicate and apply all 16 values.
///
/// `broken` is Cure's `keeps-overwritten-assign` mutation: each key keeps its *first*
/// assignment instead, which readers elsewhere see (an intermediate read, G1b).
pub fn drop_overwritten_assigns(ops: &mut Vec<(Key, OpId, Effect)>, broken: bool) {
    if ops.len() < 2 {
        return;
    }
    let n = ops.len();
    let mut keep = vec![true; n];
    {
        // Each key's assignments from the last one back: the first met is kept.
        let mut met = std::collections::BTreeSet::new();
        for step in 0..n {
            let i = if broken { step } else { n - 1 - step };
            let (key, _, effect) = &ops[i];
            if matches!(effect, Effect::Assign(_)) {
                keep[i] = met.insert(key);
            }
        }
    }
    let mut kept = keep.iter();
    ops.retain(|_| *kept.next().expect("one flag per op"));
}

/// The object type an effect belongs to.
pub fn effect_type(effect: &Effect) -> ObjType {
    match effect {
        Effect::Assign(_) => ObjType::Lww,
        Effect::Increment(_) => ObjType::Counter,
        Effect::Add { .. } | Effect::Remove { .. } => ObjType::Set,
        Effect::MvAssign { .. } => ObjType::MvReg,
    }
}

/// Builds the read result of `key` from a snapshot object plus the transaction's own writes.
pub fn read_value(buffer: &TxnBuffer, key: &Key, mut obj: Object) -> Result<ReadValue, Error> {
    buffer.overlay(key, &mut obj)?;
    Ok(ReadValue {
        key: key.clone(),
        value: obj.value(),
        observed: obj.observed(),
    })
}

/// A fresh object of `obj_type`, or an error if a stored object has another type.
pub fn typed(stored: Option<&Object>, obj_type: ObjType) -> Result<Object, Error> {
    match stored {
        Some(o) if o.obj_type() != obj_type => Err(Error::WrongType {
            expected: o.obj_type(),
            found: obj_type,
        }),
        Some(o) => Ok(o.clone()),
        None => Ok(Object::new(obj_type)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_core::SessionId;

    /// Only an assignment that a later one of its key in the txn overwrites goes; other
    /// keys' assignments and other effects stay, in order.
    #[test]
    fn an_assignment_overwritten_later_in_the_txn_is_dropped() {
        let txn = TxnId {
            session: SessionId(1),
            seq: 1,
        };
        let id = |index| OpId { txn, index };
        let key = |k: &str| Key(k.as_bytes().to_vec());
        let assign = |k: &str, v: &str, i| (key(k), id(i), Effect::Assign(v.as_bytes().to_vec()));
        let add = (
            key("s"),
            id(1),
            Effect::Add {
                elem: b"x".to_vec(),
                replaces: Vec::new(),
            },
        );
        let mut ops = vec![
            assign("a", "1", 0),
            add.clone(),
            assign("a", "2", 2),
            assign("c", "3", 3),
            assign("a", "4", 4),
        ];
        drop_overwritten_assigns(&mut ops, false);
        assert_eq!(ops, vec![add, assign("c", "3", 3), assign("a", "4", 4)]);
        let mut one = vec![assign("a", "1", 0)];
        drop_overwritten_assigns(&mut one, false);
        assert_eq!(one, vec![assign("a", "1", 0)]);
    }
}
