//! The hash: an add-wins map of field -> value, each field a register that counts, as
//! Redis Active-Active documents its hashes ("OR-Set" fields whose values behave as CRDT
//! strings, or counters when `HINCRBY` made them).
//!
//! A field's state ([`Field`]) is the op-based OR-set of [`super`] applied to the field,
//! with the counting register of [`super`] inside it:
//! - `sets`: the live `HSET`s of the field (no later `HSET` or `HDEL` observed them), each
//!   with its arbitration timestamp, value and `base` (the sum of increments it observed).
//!   The shown value is the greatest `(ts, id)` of them plus every increment it did not
//!   observe (`total - base`), as a string register that counts.
//! - `incs`: the tags of the live `HINCRBY`s; each replaces the tags of the increments it
//!   observed, as a set's re-add does, so a counter incremented forever keeps one tag per
//!   concurrent increment. `total` sums every increment ever applied to the field.
//! - `reset`: of the `HDEL`s that observed a non-zero sum, the greatest `(ts, id)` and that
//!   sum: with no live `HSET`, the value is `total - reset`, the increments no `HDEL` reset.
//!
//! A field shows while it has a live `HSET` or `HINCRBY`: `HDEL` removes the tags it
//! observed, so a write concurrent with it survives (observed-remove, add-wins). The
//! argument that this converges is the set's: every tag removal names tags in the causal
//! past of the removing op, sums commute, and `reset` is a maximum. A field whose state is
//! the fresh one is dropped from the map (that changes nothing: absent reads as fresh); a
//! field that counted keeps `total` and `reset` after its `HDEL` (a few integers), since an
//! increment concurrent with that `HDEL` counts from them.

use super::{counted_value, decimal, ArbTs, Effect, Op, Tags, Update, COUNTER_OVERFLOW};
use crate::error::Error;
use crate::ids::{OpId, Value};
use crate::limits::{HASH_FIELDS_MAX, HASH_FIELD_LEN_MAX, HASH_VALUE_LEN_MAX};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Why `HINCRBY` was refused: the field holds no decimal integer (Redis's words).
pub const HASH_NOT_AN_INTEGER: &str = "hash value is not an integer";

/// A live `HSET` of a field.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldSet {
    pub ts: ArbTs,
    #[serde(with = "serde_bytes")]
    pub value: Value,
    /// The field's `total` the `HSET` observed: the increments it replaces.
    pub base: i64,
}

/// One field of a hash (module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Field {
    pub sets: BTreeMap<OpId, FieldSet>,
    pub incs: Tags,
    pub total: i64,
    pub reset: Option<(ArbTs, OpId, i64)>,
    /// Ids an op deleted before they were applied here: empty under causal delivery. The
    /// `eventual` baseline delivers in any order, and an increment replaced before it
    /// arrives must still add its delta (its tag stays deleted) when it does.
    pub gone: Tags,
}

impl Field {
    /// Whether the field shows (a live `HSET` or `HINCRBY`).
    pub fn shows(&self) -> bool {
        !self.sets.is_empty() || !self.incs.is_empty()
    }

    /// The value the field shows, `None` when it does not.
    pub fn value(&self) -> Option<Value> {
        if !self.shows() {
            return None;
        }
        let winner = self.sets.iter().max_by_key(|(id, s)| (s.ts, **id));
        match winner {
            Some((_, s)) => counted_value(&Some(s.value.clone()), self.total.wrapping_sub(s.base)),
            None => {
                let reset = self.reset.map_or(0, |(_, _, base)| base);
                Some(self.total.wrapping_sub(reset).to_string().into_bytes())
            }
        }
    }

    /// The ids of the live writes (`HSET`s and `HINCRBY`s), ascending: what an `HSET` or
    /// `HDEL` of the field observes and removes.
    fn live_ids(&self) -> Vec<OpId> {
        let mut ids: Vec<OpId> = self.sets.keys().copied().collect();
        ids.extend(self.incs.iter().copied());
        ids.sort_unstable();
        ids
    }
}

/// The fields a hash shows, with their values, in field order.
pub fn shown(fields: &BTreeMap<Value, Field>) -> Vec<(Value, Value)> {
    fields
        .iter()
        .filter_map(|(f, s)| s.value().map(|v| (f.clone(), v)))
        .collect()
}

/// The ids of every live write of the hash, ascending: what a read observes.
pub fn observed(fields: &BTreeMap<Value, Field>) -> Vec<OpId> {
    let mut ids: Vec<OpId> = fields.values().flat_map(Field::live_ids).collect();
    ids.sort_unstable();
    ids
}

/// Refuses a field or value past its limit.
pub fn check_sizes(field: &[u8], value: Option<&[u8]>) -> Result<(), Error> {
    let limit = |what: &str, max: usize| Error::LimitExceeded {
        what: what.into(),
        max: max as u64,
    };
    if field.len() > HASH_FIELD_LEN_MAX {
        return Err(limit("hash field length in bytes", HASH_FIELD_LEN_MAX));
    }
    if value.is_some_and(|v| v.len() > HASH_VALUE_LEN_MAX) {
        return Err(limit("hash value length in bytes", HASH_VALUE_LEN_MAX));
    }
    Ok(())
}

/// Generator of a hash update against the observed `fields`. Refuses a field or value
/// past its limit, a new field past [`HASH_FIELDS_MAX`], and an increment of a field
/// that holds no decimal integer or that would overflow it.
pub fn prepare(fields: &BTreeMap<Value, Field>, update: &Update) -> Result<Effect, Error> {
    let fresh = Field::default();
    let of = |f: &Value| fields.get(f).unwrap_or(&fresh);
    match update {
        Update::HashSet { field, value } => {
            check_sizes(field, Some(value))?;
            check_room(fields, field)?;
            let f = of(field);
            Ok(Effect::HashSet {
                field: field.clone(),
                value: value.clone(),
                base: f.total,
                replaces: f.live_ids(),
            })
        }
        Update::HashIncrement { field, delta } => {
            check_sizes(field, None)?;
            check_room(fields, field)?;
            let f = of(field);
            let current = match f.value() {
                None => 0,
                Some(v) => {
                    decimal(&v).ok_or_else(|| Error::InvalidState(HASH_NOT_AN_INTEGER.into()))?
                }
            };
            if current.checked_add(*delta).is_none() {
                return Err(Error::InvalidState(COUNTER_OVERFLOW.into()));
            }
            Ok(Effect::HashIncrement {
                field: field.clone(),
                delta: *delta,
                replaces: f.incs.iter().copied().collect(),
            })
        }
        Update::HashRemove { field } => {
            let f = of(field);
            Ok(Effect::HashRemove {
                field: field.clone(),
                base: f.total,
                tags: f.live_ids(),
            })
        }
        other => unreachable!("{other:?} is no hash update (type checked)"),
    }
}

/// A new field may not take the hash past [`HASH_FIELDS_MAX`] shown fields.
fn check_room(fields: &BTreeMap<Value, Field>, field: &Value) -> Result<(), Error> {
    if fields.get(field).is_some_and(Field::shows) {
        return Ok(());
    }
    if fields.values().filter(|f| f.shows()).count() >= HASH_FIELDS_MAX {
        return Err(Error::LimitExceeded {
            what: "fields in one hash".into(),
            max: HASH_FIELDS_MAX as u64,
        });
    }
    Ok(())
}

/// Effector: applies a hash effect of `op` to `fields`.
pub fn apply(fields: &mut BTreeMap<Value, Field>, op: &Op, effect: &Effect) {
    let field = match effect {
        Effect::HashSet { field, .. }
        | Effect::HashIncrement { field, .. }
        | Effect::HashRemove { field, .. } => field,
        other => panic!("effect {other:?} applied to a hash: type invariant broken"),
    };
    let f = match fields.get_mut(field) {
        Some(f) => f,
        None => fields.entry(field.clone()).or_default(),
    };
    apply_field(f, op, effect);
    if *f == Field::default() {
        fields.remove(field);
    }
}

fn apply_field(f: &mut Field, op: &Op, effect: &Effect) {
    assert!(
        !effect.deleted_ids().contains(&op.id),
        "hash op {} deletes itself",
        op.id
    );
    remove_ids(f, effect.deleted_ids());
    match effect {
        Effect::HashSet { value, base, .. } => {
            let set = FieldSet {
                ts: op.ts,
                value: value.clone(),
                base: *base,
            };
            f.sets.insert(op.id, set);
        }
        Effect::HashIncrement { delta, .. } => {
            f.total = f.total.wrapping_add(*delta);
            f.incs.insert(op.id);
        }
        Effect::HashRemove { base, .. } if *base != 0 => {
            let candidate = (op.ts, op.id, *base);
            if f.reset.is_none_or(|(ts, id, _)| (op.ts, op.id) > (ts, id)) {
                f.reset = Some(candidate);
            }
        }
        _ => {}
    }
}

/// Removes the live writes named by `ids` (an effect's observed ids).
fn remove_ids(f: &mut Field, ids: &[OpId]) {
    for id in ids {
        f.sets.remove(id);
    }
    f.incs.remove_all(ids);
}

/// The field `effect` writes, if it is a hash effect.
pub fn field_of(effect: &Effect) -> Option<&Value> {
    match effect {
        Effect::HashSet { field, .. }
        | Effect::HashIncrement { field, .. }
        | Effect::HashRemove { field, .. } => Some(field),
        _ => None,
    }
}

/// Before `effect` applies: notes the ids it deletes that were never applied here
/// (`applied` false for them), so their ops count their deltas when they arrive.
pub fn note_early_deletions(
    fields: &mut BTreeMap<Value, Field>,
    effect: &Effect,
    applied: impl Fn(&OpId) -> bool,
) {
    let Some(field) = field_of(effect) else {
        return;
    };
    let early: Vec<OpId> = {
        let f = fields.get(field);
        let live = |id: &OpId| f.is_some_and(|f| f.sets.contains_key(id) || f.incs.has(id));
        let ids = effect.deleted_ids().iter();
        ids.filter(|id| !live(id) && !applied(id))
            .copied()
            .collect()
    };
    if early.is_empty() {
        return;
    }
    let f = fields.entry(field.clone()).or_default();
    early.into_iter().for_each(|id| f.gone.insert(id));
}

/// An op that arrives after an op deleted it (see [`Field::gone`]): an increment adds
/// its delta; its tag stays deleted.
pub fn apply_late(fields: &mut BTreeMap<Value, Field>, op: &Op) {
    let Some(field) = field_of(&op.effect) else {
        return;
    };
    let Some(f) = fields.get_mut(field) else {
        return;
    };
    if !f.gone.has(&op.id) {
        return;
    }
    f.gone.remove_all(&[op.id]);
    if let Effect::HashIncrement { delta, .. } = op.effect {
        f.total = f.total.wrapping_add(delta);
    }
    if *f == Field::default() {
        fields.remove(field);
    }
}

/// The deletions of a hash effect alone (`Object::apply` of an op seen before).
pub fn delete_in(fields: &mut BTreeMap<Value, Field>, effect: &Effect) {
    let (Effect::HashSet { field, .. }
    | Effect::HashIncrement { field, .. }
    | Effect::HashRemove { field, .. }) = effect
    else {
        return;
    };
    if let Some(f) = fields.get_mut(field) {
        remove_ids(f, effect.deleted_ids());
        if *f == Field::default() {
            fields.remove(field);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{ObjType, Object, State};
    use super::*;
    use crate::api::ObjValue;

    use super::super::test_ops::op;

    fn hset(f: &str, v: &str) -> Update {
        Update::HashSet {
            field: f.into(),
            value: v.into(),
        }
    }

    fn hincr(f: &str, delta: i64) -> Update {
        Update::HashIncrement {
            field: f.into(),
            delta,
        }
    }

    fn hdel(f: &str) -> Update {
        Update::HashRemove { field: f.into() }
    }

    fn applied(start: &Object, ops: &[&Op]) -> Object {
        let mut r = start.clone();
        for o in ops {
            assert!(r.apply(o), "{o:?} applies once");
        }
        r
    }

    fn pairs(obj: &Object) -> Vec<(String, String)> {
        let ObjValue::Hash(p) = obj.value() else {
            panic!("a hash shows {:?}", obj.value())
        };
        let text = |b: Vec<u8>| String::from_utf8(b).expect("utf-8");
        p.into_iter().map(|(f, v)| (text(f), text(v))).collect()
    }

    fn want(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(f, v)| (f.to_string(), v.to_string()))
            .collect()
    }

    /// Every order of `ops` that keeps each op after the ops its origin had applied
    /// (`after[i]`: indexes op `i` depends on) gives `expect`, and one state.
    fn converge(start: &Object, ops: &[Op], after: &[&[usize]], expect: &[(&str, &str)]) {
        let n = ops.len();
        let mut states = Vec::new();
        permute(&mut (0..n).collect::<Vec<_>>(), 0, &mut |order| {
            let causal = order
                .iter()
                .enumerate()
                .all(|(pos, &i)| after[i].iter().all(|d| order[..pos].contains(d)));
            if !causal {
                return;
            }
            let refs: Vec<&Op> = order.iter().map(|&i| &ops[i]).collect();
            let r = applied(start, &refs);
            assert_eq!(pairs(&r), want(expect), "order {order:?}: {r:?}");
            states.push(r);
        });
        assert!(!states.is_empty());
        assert!(states.windows(2).all(|w| w[0] == w[1]), "one state");
    }

    fn permute(v: &mut Vec<usize>, k: usize, f: &mut impl FnMut(&[usize])) {
        if k == v.len() {
            return f(v);
        }
        for i in k..v.len() {
            v.swap(k, i);
            permute(v, k + 1, f);
            v.swap(k, i);
        }
    }

    /// Concurrent HSETs of one field: the later (timestamp, then id) wins; of two fields:
    /// both show. HSET answers the old value's replacement, and HDEL removes the field.
    #[test]
    fn hset_is_a_register_per_field() {
        let empty = Object::new(ObjType::Hash);
        let a = op(&empty, 5, 1, hset("f", "a"));
        let b = op(&empty, 7, 2, hset("f", "b"));
        let g = op(&empty, 6, 3, hset("g", "x"));
        let ops = [a, b, g];
        converge(&empty, &ops, &[&[], &[], &[]], &[("f", "b"), ("g", "x")]);
        let h = applied(&empty, &[&ops[0], &ops[1], &ops[2]]);
        let del = op(&h, 9, 4, hdel("f"));
        let h2 = applied(&h, &[&del]);
        assert_eq!(pairs(&h2), want(&[("g", "x")]));
        let del_g = op(&h2, 10, 5, hdel("g"));
        let gone = applied(&h2, &[&del_g]);
        assert_eq!(
            gone.shown_type(),
            None,
            "a hash with no field shows nothing"
        );
        assert_eq!(
            gone.state,
            Object::new(ObjType::Hash).state,
            "no tombstones"
        );
    }

    /// An HSET concurrent with an HDEL of its field survives it (add-wins), whatever
    /// their timestamps and delivery order; so does an HINCRBY, counting from the reset.
    #[test]
    fn a_write_concurrent_with_hdel_survives() {
        let empty = Object::new(ObjType::Hash);
        let first = op(&empty, 1, 1, hset("f", "10"));
        let base = applied(&empty, &[&first]);
        let del = op(&base, 9, 2, hdel("f"));
        let set = op(&base, 5, 3, hset("f", "v"));
        let ops = [first.clone(), del, set];
        converge(&empty, &ops, &[&[], &[0], &[0]], &[("f", "v")]);
        let del = op(&base, 9, 2, hdel("f"));
        let inc = op(&base, 5, 3, hincr("f", 3));
        let ops = [first, del, inc];
        converge(&empty, &ops, &[&[], &[0], &[0]], &[("f", "3")]);
    }

    /// HINCRBY: concurrent increments add up; an HSET concurrent with them keeps them
    /// (the register rule: winner plus the increments it did not observe); an HDEL resets
    /// the increments it observed and keeps the concurrent ones.
    #[test]
    fn concurrent_increments_add_up_and_hdel_resets_what_it_saw() {
        let empty = Object::new(ObjType::Hash);
        let i1 = op(&empty, 1, 1, hincr("n", 5));
        let base = applied(&empty, &[&i1]);
        assert_eq!(pairs(&base), want(&[("n", "5")]));
        let i2 = op(&base, 2, 2, hincr("n", 2));
        let i3 = op(&base, 3, 3, hincr("n", -4));
        let s = op(&base, 4, 4, hset("n", "100"));
        let ops = [i1.clone(), i2.clone(), i3.clone(), s];
        converge(&empty, &ops, &[&[], &[0], &[0], &[0]], &[("n", "98")]);
        // HDEL saw 5 (and i2); i3 was concurrent: the field shows -4.
        let seen = applied(&base, &[&i2]);
        let del = op(&seen, 9, 5, hdel("n"));
        let ops = [i1.clone(), i2.clone(), i3.clone(), del];
        converge(&empty, &ops, &[&[], &[0], &[0], &[0, 1]], &[("n", "-4")]);
        // After the HDEL (causally), HINCRBY counts from 0; a repeated counter keeps a tag.
        let all = applied(&empty, &[&ops[0], &ops[1], &ops[2], &ops[3]]);
        let mut r = all.clone();
        for seq in 10..20 {
            let o = op(&r, seq, seq, hincr("m", 1));
            r.apply(&o);
        }
        assert_eq!(pairs(&r), want(&[("m", "10"), ("n", "-4")]));
        let State::Hash { fields } = &r.state else {
            panic!("a hash")
        };
        assert_eq!(fields[&b"m".to_vec()].incs.len(), 1, "one tag per counter");
    }

    /// Without causal delivery (the `eventual` baseline): an increment that arrives after
    /// the increment that replaced it still counts, and its tag stays deleted.
    #[test]
    fn a_late_replaced_increment_still_counts() {
        let empty = Object::new(ObjType::Hash);
        let i1 = op(&empty, 1, 1, hincr("n", 2));
        let after = applied(&empty, &[&i1]);
        let i2 = op(&after, 2, 2, hincr("n", 5));
        let in_order = applied(&empty, &[&i1, &i2]);
        let mut late = empty.clone();
        assert!(late.apply(&i2));
        assert!(!late.apply(&i1), "its id counts as seen");
        assert_eq!(pairs(&late), want(&[("n", "7")]));
        assert_eq!(late.state, in_order.state, "one state");
    }

    /// HINCRBY of text is refused, as is one that would overflow; a winning HSET of text
    /// shows the text (concurrent increments dropped), as a string register that counts.
    #[test]
    fn hincrby_of_text_is_refused() {
        let empty = Object::new(ObjType::Hash);
        let s = op(&empty, 1, 1, hset("f", "abc"));
        let h = applied(&empty, &[&s]);
        assert_eq!(
            h.prepare(&hincr("f", 1)),
            Err(Error::InvalidState(HASH_NOT_AN_INTEGER.into()))
        );
        let big = op(&empty, 1, 2, hset("g", &i64::MAX.to_string()));
        let h = applied(&empty, &[&big]);
        assert_eq!(
            h.prepare(&hincr("g", 1)),
            Err(Error::InvalidState(COUNTER_OVERFLOW.into()))
        );
        let n = op(&empty, 1, 3, hset("f", "1"));
        let base = applied(&empty, &[&n]);
        let inc = op(&base, 2, 4, hincr("f", 1));
        let text = op(&base, 3, 5, hset("f", "t"));
        converge(&empty, &[n, inc, text], &[&[], &[0], &[0]], &[("f", "t")]);
    }

    /// Fields past the limit, and fields or values past their sizes, are refused.
    #[test]
    fn limits_are_refused_with_clear_errors() {
        let mut h = Object::new(ObjType::Hash);
        for seq in 0..HASH_FIELDS_MAX as u64 {
            let o = op(&h, seq + 1, seq + 1, hset(&format!("f{seq}"), "v"));
            h.apply(&o);
        }
        let err = h.prepare(&hset("one-more", "v")).unwrap_err();
        assert!(err.to_string().contains("fields in one hash"), "{err}");
        assert!(
            h.prepare(&hset("f0", "w")).is_ok(),
            "an existing field takes a write"
        );
        let long = "x".repeat(HASH_FIELD_LEN_MAX + 1);
        let err = Object::new(ObjType::Hash).prepare(&hset(&long, "v"));
        assert!(err.unwrap_err().to_string().contains("hash field length"));
        let big = "x".repeat(HASH_VALUE_LEN_MAX + 1);
        let err = Object::new(ObjType::Hash).prepare(&hset("f", &big));
        assert!(err.unwrap_err().to_string().contains("hash value length"));
    }

    /// A hash freed by deleting its fields takes another type (the `Part` rule), and a
    /// key freed by DEL of a string takes a hash; the new variants go last.
    #[test]
    fn hashes_retype_and_keep_older_encodings() {
        let empty = Object::new(ObjType::Lww);
        let s = op(&empty, 1, 1, Update::Assign(b"v".to_vec()));
        let k = applied(&empty, &[&s]);
        let part = |u: Update| Update::Part {
            key_type: ObjType::Lww,
            update: Box::new(u),
        };
        let refused = k.prepare(&part(hset("f", "v")));
        assert!(matches!(refused, Err(Error::WrongType { .. })));
        let del = op(&k, 2, 2, Update::Assign(super::super::TOMBSTONE.to_vec()));
        let k = applied(&k, &[&del]);
        let h = op(&k, 3, 3, part(hset("f", "v")));
        let k = applied(&k, &[&h]);
        assert_eq!(k.shown_type(), Some(ObjType::Hash));
        assert_eq!(pairs(&k), want(&[("f", "v")]));
        let tag = |b: Vec<u8>| b[0];
        assert_eq!(tag(postcard::to_allocvec(&hset("f", "v")).unwrap()), 7);
        assert_eq!(tag(postcard::to_allocvec(&ObjType::Hash).unwrap()), 4);
        let e = op(&Object::new(ObjType::Hash), 1, 1, hset("f", "v")).effect;
        assert_eq!(tag(postcard::to_allocvec(&e).unwrap()), 8);
        let fresh = Object::new(ObjType::Hash);
        let h = applied(&fresh, &[&op(&fresh, 1, 1, hincr("c", 1))]);
        let bytes = postcard::to_allocvec(&h).unwrap();
        assert_eq!(bytes[0], 6, "Hash is the seventh state");
        assert_eq!(postcard::from_bytes::<Object>(&bytes).unwrap(), h);
        let v = postcard::to_allocvec(&ObjValue::Hash(vec![])).unwrap();
        assert_eq!(v[0], 4);
    }
}
