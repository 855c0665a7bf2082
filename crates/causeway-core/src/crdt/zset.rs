//! The sorted set: an add-wins map of member -> score, as Redis Active-Active documents its
//! sorted sets (members an "OR-Set", each score resolved as a counter).
//!
//! A member's state ([`Member`]) is the hash field of [`super::hash`] with a float score in
//! place of the string, so it converges by the same argument (tag removals name tags in
//! the causal past of the removing op, sums commute, `reset` is a maximum):
//! - `adds`: the live `ZADD`s of the member (no later write or `ZREM` observed them), each
//!   with its timestamp, score and `base` (the increment sum it observed). The greatest
//!   `(ts, id)` wins, as a register: two concurrent `ZADD`s of one member keep the later.
//! - `incs`: the tags of the live `ZINCRBY`s, each replacing the increments it observed;
//!   `total` sums every increment ever applied. The score is the winning `ZADD` plus every
//!   increment it did not observe (`total - base`): a `ZINCRBY` concurrent with a `ZADD`
//!   or another `ZINCRBY` counts, as Redis Active-Active's counter scores do.
//! - `reset`: of the `ZREM`s that observed a non-zero sum, the greatest and that sum, so a
//!   member re-created by a `ZINCRBY` concurrent with its `ZREM` counts from 0.
//!
//! **Increments sum in fixed point.** Float addition is not associative, so replicas
//! adding the same deltas in different orders could disagree in the last bits. An
//! increment is kept as a signed 64.64 fixed-point integer ([`to_fixed`]): integer sums
//! commute exactly, and the sum becomes a float only when a score is shown. A delta is
//! rounded to 2^-64 (every double of magnitude 2^-11 or more is exact), and one must be
//! finite and below [`INCR_ABS_MAX`] in magnitude.

use super::{ArbTs, Effect, Op, Tags, Update};
use crate::error::Error;
use crate::ids::{OpId, Value};
use crate::limits::{ZSET_BYTES_MAX, ZSET_MEMBERS_MAX, ZSET_MEMBER_LEN_MAX};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Largest increment magnitude, and largest increment sum an increment may reach: 2^62,
/// so the fixed-point sum (scaled by 2^64) stays far inside an `i128`.
pub const INCR_ABS_MAX: f64 = 4_611_686_018_427_387_904.0;

/// Why a `ZINCRBY` was refused: its delta, or the sum it makes, is past [`INCR_ABS_MAX`].
pub const INCR_OUT_OF_RANGE: &str = "increment is not a finite number below 2^62 in magnitude";

/// [`INCR_ABS_MAX`] in fixed point: the largest magnitude of a member's increment sum.
const FIXED_SUM_MAX: u128 = 1 << 126;

/// 2^64 as a float: the fixed-point scale.
const SCALE: f64 = 18_446_744_073_709_551_616.0;

/// A delta in 64.64 fixed point, `None` when it is not finite or past [`INCR_ABS_MAX`].
pub fn to_fixed(delta: f64) -> Option<i128> {
    (delta.is_finite() && delta.abs() < INCR_ABS_MAX).then_some((delta * SCALE) as i128)
}

/// A 64.64 fixed-point sum as a float (nearest).
pub fn from_fixed(sum: i128) -> f64 {
    sum as f64 / SCALE
}

/// A live `ZADD` of a member.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScoreSet {
    pub ts: ArbTs,
    /// The score, as `f64::to_bits` (states are `Eq`).
    pub score: u64,
    /// The member's `total` the `ZADD` observed: the increments it replaces.
    pub base: i128,
}

/// What a `ZREM` removes of one member: the live writes it observed (`tags`) and the
/// increments they sum to (`base`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ZRemoved {
    #[serde(with = "serde_bytes")]
    pub member: Value,
    pub base: i128,
    pub tags: Vec<OpId>,
}

/// One member of a sorted set (module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    pub adds: BTreeMap<OpId, ScoreSet>,
    pub incs: Tags,
    pub total: i128,
    pub reset: Option<(ArbTs, OpId, i128)>,
    /// Ids an op deleted before they were applied here: empty under causal delivery (the
    /// `eventual` baseline delivers in any order; see `hash::Field::gone`).
    pub gone: Tags,
}

impl Member {
    /// Whether the member shows (a live `ZADD` or `ZINCRBY`).
    pub fn shows(&self) -> bool {
        !self.adds.is_empty() || !self.incs.is_empty()
    }

    /// The score the member shows, `None` when it does not.
    pub fn score(&self) -> Option<f64> {
        if !self.shows() {
            return None;
        }
        let winner = self.adds.iter().max_by_key(|(id, s)| (s.ts, **id));
        Some(match winner {
            // Exactly the score assigned when nothing counts on it (keeps -0.0 and inf).
            Some((_, s)) if s.base == self.total => f64::from_bits(s.score),
            Some((_, s)) => f64::from_bits(s.score) + from_fixed(self.total.wrapping_sub(s.base)),
            None => {
                let reset = self.reset.map_or(0, |(_, _, base)| base);
                from_fixed(self.total.wrapping_sub(reset))
            }
        })
    }

    /// The ids of the live writes, ascending: what a `ZADD` or `ZREM` observes and removes.
    fn live_ids(&self) -> Vec<OpId> {
        let mut ids: Vec<OpId> = self.adds.keys().copied().collect();
        ids.extend(self.incs.iter().copied());
        ids.sort_unstable();
        ids
    }
}

/// The members a sorted set shows with their scores (as `f64::to_bits`), in member order.
pub fn shown(members: &BTreeMap<Value, Member>) -> Vec<(Value, u64)> {
    members
        .iter()
        .filter_map(|(m, s)| s.score().map(|v| (m.clone(), v.to_bits())))
        .collect()
}

/// The ids of every live write of the sorted set, ascending: what a read observes.
pub fn observed(members: &BTreeMap<Value, Member>) -> Vec<OpId> {
    let mut ids: Vec<OpId> = members.values().flat_map(Member::live_ids).collect();
    ids.sort_unstable();
    ids
}

/// Refuses a member past [`ZSET_MEMBER_LEN_MAX`].
pub fn check_member(member: &[u8]) -> Result<(), Error> {
    if member.len() > ZSET_MEMBER_LEN_MAX {
        return Err(Error::LimitExceeded {
            what: "sorted set member length in bytes".into(),
            max: ZSET_MEMBER_LEN_MAX as u64,
        });
    }
    Ok(())
}

/// Refuses a sorted-set update whose members are past their limits.
pub fn check_sizes(update: &Update) -> Result<(), Error> {
    match update {
        Update::ZAdd { member, .. } | Update::ZIncrement { member, .. } => check_member(member),
        Update::ZRemove { members } if members.len() > ZSET_MEMBERS_MAX => {
            Err(Error::LimitExceeded {
                what: "members in one sorted-set remove".into(),
                max: ZSET_MEMBERS_MAX as u64,
            })
        }
        Update::ZRemove { members } => members.iter().try_for_each(|m| check_member(m)),
        _ => Ok(()),
    }
}

/// Generator of a sorted-set update against the observed `members`. Refuses a member past
/// its limit, a new member past [`ZSET_MEMBERS_MAX`] or [`ZSET_BYTES_MAX`], a NaN score,
/// and an increment past [`INCR_ABS_MAX`].
pub fn prepare(members: &BTreeMap<Value, Member>, update: &Update) -> Result<Effect, Error> {
    let fresh = Member::default();
    let of = |m: &Value| members.get(m).unwrap_or(&fresh);
    match update {
        Update::ZAdd { member, score } => {
            check_member(member)?;
            if f64::from_bits(*score).is_nan() {
                return Err(Error::InvalidState("score is not a number (NaN)".into()));
            }
            check_room(members, member)?;
            let m = of(member);
            Ok(Effect::ZAdd {
                member: member.clone(),
                score: *score,
                base: m.total,
                replaces: m.live_ids(),
            })
        }
        Update::ZIncrement { member, delta } => {
            check_member(member)?;
            check_room(members, member)?;
            let m = of(member);
            let out = || Error::InvalidState(INCR_OUT_OF_RANGE.into());
            let fixed = to_fixed(f64::from_bits(*delta)).ok_or_else(out)?;
            // The sum of every increment of the member stays in range (concurrent ones
            // may still take it past, and wrap, as counters do).
            let sum = m.total.checked_add(fixed).ok_or_else(out)?;
            if sum.unsigned_abs() >= FIXED_SUM_MAX {
                return Err(out());
            }
            Ok(Effect::ZIncrement {
                member: member.clone(),
                delta: fixed,
                replaces: m.incs.iter().copied().collect(),
            })
        }
        Update::ZRemove { members: names } => {
            let removed = names.iter().filter_map(|name| {
                let m = members.get(name)?;
                Some(ZRemoved {
                    member: name.clone(),
                    base: m.total,
                    tags: m.live_ids(),
                })
            });
            Ok(Effect::ZRemove {
                members: removed.collect(),
            })
        }
        other => unreachable!("{other:?} is no sorted-set update (type checked)"),
    }
}

/// A new member may not take the set past [`ZSET_MEMBERS_MAX`] members or
/// [`ZSET_BYTES_MAX`] summed member bytes.
fn check_room(members: &BTreeMap<Value, Member>, member: &Value) -> Result<(), Error> {
    if members.get(member).is_some_and(Member::shows) {
        return Ok(());
    }
    let limit = |what: &str, max: usize| {
        Err(Error::LimitExceeded {
            what: what.into(),
            max: max as u64,
        })
    };
    let live = members.iter().filter(|(_, m)| m.shows());
    let (mut count, mut bytes) = (0usize, member.len());
    for (name, _) in live {
        count += 1;
        bytes += name.len();
    }
    if count >= ZSET_MEMBERS_MAX {
        return limit("members in one sorted set", ZSET_MEMBERS_MAX);
    }
    if bytes > ZSET_BYTES_MAX {
        return limit("bytes of members in one sorted set", ZSET_BYTES_MAX);
    }
    Ok(())
}

/// What an effect does to one member.
enum MemberWrite {
    Add { score: u64, base: i128 },
    Increment { delta: i128 },
    Remove { base: i128 },
}

/// The members `effect` writes, with what it does to each and the ids it deletes there.
fn writes(effect: &Effect) -> Vec<(&Value, MemberWrite, &[OpId])> {
    match effect {
        Effect::ZAdd {
            member,
            score,
            base,
            replaces,
        } => vec![(
            member,
            MemberWrite::Add {
                score: *score,
                base: *base,
            },
            replaces.as_slice(),
        )],
        Effect::ZIncrement {
            member,
            delta,
            replaces,
        } => vec![(
            member,
            MemberWrite::Increment { delta: *delta },
            replaces.as_slice(),
        )],
        Effect::ZRemove { members } => members
            .iter()
            .map(|r| {
                let w = MemberWrite::Remove { base: r.base };
                (&r.member, w, r.tags.as_slice())
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Whether `effect` is a sorted-set effect.
pub fn is_zset(effect: &Effect) -> bool {
    matches!(
        effect,
        Effect::ZAdd { .. } | Effect::ZIncrement { .. } | Effect::ZRemove { .. }
    )
}

/// Effector: applies a sorted-set effect of `op` to `members`.
pub fn apply(members: &mut BTreeMap<Value, Member>, op: &Op, effect: &Effect) {
    assert!(
        is_zset(effect),
        "{effect:?} applied to a sorted set: type invariant broken"
    );
    for (name, write, deletes) in writes(effect) {
        assert!(
            !deletes.contains(&op.id),
            "sorted-set op {} deletes itself",
            op.id
        );
        let m = match members.get_mut(name) {
            Some(m) => m,
            None => members.entry(name.clone()).or_default(),
        };
        apply_member(m, op, &write, deletes);
        if *m == Member::default() {
            members.remove(name);
        }
    }
}

fn apply_member(m: &mut Member, op: &Op, write: &MemberWrite, deletes: &[OpId]) {
    remove_ids(m, deletes);
    // Deleted before it arrived (`Member::gone`): it counts, and stays deleted.
    if m.gone.has(&op.id) {
        m.gone.remove_all(&[op.id]);
        if let MemberWrite::Increment { delta } = write {
            m.total = m.total.wrapping_add(*delta);
        }
        return;
    }
    match *write {
        MemberWrite::Add { score, base } => {
            let set = ScoreSet {
                ts: op.ts,
                score,
                base,
            };
            m.adds.insert(op.id, set);
        }
        MemberWrite::Increment { delta } => {
            m.total = m.total.wrapping_add(delta);
            m.incs.insert(op.id);
        }
        MemberWrite::Remove { base } if base != 0 => {
            if m.reset.is_none_or(|(ts, id, _)| (op.ts, op.id) > (ts, id)) {
                m.reset = Some((op.ts, op.id, base));
            }
        }
        MemberWrite::Remove { .. } => {}
    }
}

/// Removes the live writes named by `ids` (an effect's observed ids).
fn remove_ids(m: &mut Member, ids: &[OpId]) {
    for id in ids {
        m.adds.remove(id);
    }
    m.incs.remove_all(ids);
}

/// Before `effect` applies: notes the ids it deletes that were never applied here
/// (`applied` false for them), so their increments count when they arrive.
pub fn note_early_deletions(
    members: &mut BTreeMap<Value, Member>,
    effect: &Effect,
    applied: impl Fn(&OpId) -> bool,
) {
    for (name, _, deletes) in writes(effect) {
        let early: Vec<OpId> = {
            let m = members.get(name);
            let live = |id: &OpId| m.is_some_and(|m| m.adds.contains_key(id) || m.incs.has(id));
            let ids = deletes.iter();
            ids.filter(|id| !live(id) && !applied(id))
                .copied()
                .collect()
        };
        if early.is_empty() {
            continue;
        }
        let m = members.entry(name.clone()).or_default();
        early.into_iter().for_each(|id| m.gone.insert(id));
    }
}

/// An op applied before, delivered again (see [`Member::gone`]): an increment an op
/// deleted before it first arrived counts now.
pub fn apply_late(members: &mut BTreeMap<Value, Member>, op: &Op) {
    for (name, write, _) in writes(&op.effect) {
        let Some(m) = members.get_mut(name) else {
            continue;
        };
        if !m.gone.has(&op.id) {
            continue;
        }
        m.gone.remove_all(&[op.id]);
        if let MemberWrite::Increment { delta } = write {
            m.total = m.total.wrapping_add(delta);
        }
        if *m == Member::default() {
            members.remove(name);
        }
    }
}

/// The deletions of a sorted-set effect alone (`Object::apply` of an op seen before).
pub fn delete_in(members: &mut BTreeMap<Value, Member>, effect: &Effect) {
    for (name, _, deletes) in writes(effect) {
        if let Some(m) = members.get_mut(name) {
            remove_ids(m, deletes);
            if *m == Member::default() {
                members.remove(name);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_ops::op;
    use super::super::{ObjType, Object};
    use super::*;
    use crate::api::ObjValue;

    fn zadd(m: &str, score: f64) -> Update {
        Update::ZAdd {
            member: m.into(),
            score: score.to_bits(),
        }
    }

    fn zincr(m: &str, delta: f64) -> Update {
        Update::ZIncrement {
            member: m.into(),
            delta: delta.to_bits(),
        }
    }

    fn zrem(ms: &[&str]) -> Update {
        Update::ZRemove {
            members: ms.iter().map(|m| m.as_bytes().to_vec()).collect(),
        }
    }

    fn scores(obj: &Object) -> Vec<(String, f64)> {
        let ObjValue::ZSet(p) = obj.value() else {
            panic!("a sorted set shows {:?}", obj.value())
        };
        let text = |b: Vec<u8>| String::from_utf8(b).expect("utf-8");
        p.into_iter()
            .map(|(m, s)| (text(m), f64::from_bits(s)))
            .collect()
    }

    fn want(p: &[(&str, f64)]) -> Vec<(String, f64)> {
        p.iter().map(|(m, s)| (m.to_string(), *s)).collect()
    }

    /// Every order of `ops` that keeps each op after those its origin applied (`after[i]`)
    /// shows `expect`, and all reach one state: the merge commutes.
    fn converge(start: &Object, ops: &[Op], after: &[&[usize]], expect: &[(&str, f64)]) {
        let mut states = Vec::new();
        permute(&mut (0..ops.len()).collect::<Vec<_>>(), 0, &mut |order| {
            let causal = order
                .iter()
                .enumerate()
                .all(|(pos, &i)| after[i].iter().all(|d| order[..pos].contains(d)));
            if !causal {
                return;
            }
            let mut r = start.clone();
            for &i in order {
                assert!(r.apply(&ops[i]));
            }
            assert_eq!(scores(&r), want(expect), "order {order:?}: {r:?}");
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

    fn applied(start: &Object, ops: &[&Op]) -> Object {
        let mut r = start.clone();
        for o in ops {
            assert!(r.apply(o));
        }
        r
    }

    /// Concurrent `ZADD`s of one member: the later (timestamp, then id) score wins; of two
    /// members, both show.
    #[test]
    fn concurrent_zadds_of_a_member_keep_the_later_score() {
        let empty = Object::new(ObjType::ZSet);
        let a = op(&empty, 5, 1, zadd("m", 1.0));
        let b = op(&empty, 7, 2, zadd("m", 2.0));
        let c = op(&empty, 6, 3, zadd("n", f64::NEG_INFINITY));
        let expect = [("m", 2.0), ("n", f64::NEG_INFINITY)];
        converge(&empty, &[a, b, c], &[&[], &[], &[]], &expect);
    }

    /// Concurrent `ZINCRBY`s add up; one concurrent with a `ZADD` counts on top of it
    /// whichever DC's write is later; a `ZADD` that observed an increment replaces it.
    #[test]
    fn increments_count_as_a_counter() {
        let empty = Object::new(ObjType::ZSet);
        let base_op = op(&empty, 1, 1, zadd("m", 10.0));
        let base = applied(&empty, &[&base_op]);
        let i1 = op(&base, 2, 2, zincr("m", 1.5));
        let i2 = op(&base, 3, 3, zincr("m", -4.0));
        let set = op(&base, 4, 4, zadd("m", 100.0));
        converge(
            &base,
            &[i1.clone(), i2, set],
            &[&[], &[], &[]],
            &[("m", 97.5)],
        );
        // The ZADD saw i1: it replaces it; a later increment from its state adds.
        let seen = applied(&base, &[&i1]);
        let set2 = op(&seen, 5, 5, zadd("m", 7.0));
        let after = applied(&seen, &[&set2]);
        let i3 = op(&after, 6, 6, zincr("m", 1.0));
        converge(&base, &[i1, set2, i3], &[&[], &[0], &[1]], &[("m", 8.0)]);
    }

    /// Add-wins: a `ZREM` removes only the writes it observed, so a concurrent `ZADD`
    /// keeps the member with its score, and a concurrent `ZINCRBY` re-creates it counting
    /// from 0 (the increments the `ZREM` observed are reset).
    #[test]
    fn a_remove_loses_to_a_concurrent_write() {
        let empty = Object::new(ObjType::ZSet);
        let a = op(&empty, 1, 1, zadd("m", 3.0));
        let base = applied(&empty, &[&a]);
        let inc = op(&base, 2, 2, zincr("m", 2.0));
        let counted = applied(&base, &[&inc]);
        assert_eq!(scores(&counted), want(&[("m", 5.0)]));
        let rem = op(&counted, 3, 3, zrem(&["m", "absent"]));
        let readd = op(&counted, 4, 4, zadd("m", 9.0));
        let more = op(&counted, 5, 5, zincr("m", 0.25));
        converge(&counted, &[rem.clone(), readd], &[&[], &[]], &[("m", 9.0)]);
        converge(&counted, &[rem.clone(), more], &[&[], &[]], &[("m", 0.25)]);
        let gone = applied(&counted, &[&rem]);
        assert_eq!(scores(&gone), want(&[]));
        assert_eq!(gone.shown_type(), None, "an empty sorted set shows nothing");
    }

    /// Fixed-point sums: increments of 0.1 in any order give one score, and the state
    /// round-trips through postcard.
    #[test]
    fn increment_sums_agree_in_every_order() {
        let empty = Object::new(ObjType::ZSet);
        let deltas = [0.1, 0.2, 1e-3, 12345.678, -0.3];
        let ops: Vec<Op> = deltas
            .iter()
            .enumerate()
            .map(|(i, d)| op(&empty, i as u64 + 1, i as u64 + 1, zincr("m", *d)))
            .collect();
        let none: Vec<&[usize]> = vec![&[]; ops.len()];
        let sum: i128 = deltas.iter().map(|d| to_fixed(*d).expect("in range")).sum();
        converge(&empty, &ops, &none, &[("m", from_fixed(sum))]);
        let r = applied(&empty, &ops.iter().collect::<Vec<_>>());
        let bytes = postcard::to_allocvec(&r).expect("encodes");
        assert_eq!(postcard::from_bytes::<Object>(&bytes).expect("decodes"), r);
    }

    /// NaN scores, infinite or huge increments and long members are refused.
    #[test]
    fn bad_scores_and_members_are_refused() {
        let empty = Object::new(ObjType::ZSet);
        assert!(empty.prepare(&zadd("m", f64::NAN)).is_err());
        assert!(empty.prepare(&zincr("m", f64::INFINITY)).is_err());
        assert!(empty.prepare(&zincr("m", 1e30)).is_err());
        let long = "x".repeat(ZSET_MEMBER_LEN_MAX + 1);
        assert!(matches!(
            empty.prepare(&zadd(&long, 1.0)),
            Err(Error::LimitExceeded { .. })
        ));
        assert!(check_sizes(&zrem(&[&long])).is_err());
        assert!(empty.prepare(&zadd("m", f64::INFINITY)).is_ok());
    }

    /// Out of causal order (the `eventual` baseline): an increment replaced before it
    /// arrives still counts, once, and its tag stays deleted.
    #[test]
    fn a_late_increment_counts_once() {
        let empty = Object::new(ObjType::ZSet);
        let i1 = op(&empty, 1, 1, zincr("m", 2.0));
        let seen = applied(&empty, &[&i1]);
        let i2 = op(&seen, 2, 2, zincr("m", 3.0));
        let rem = op(&seen, 3, 3, zrem(&["m"]));
        for order in [[&i2, &i1], [&i1, &i2]] {
            let mut r = empty.clone();
            // Delivered after i2, i1 counts as seen already (i2 deleted its tag).
            order.iter().for_each(|o| {
                r.apply(o);
            });
            assert_eq!(scores(&r), want(&[("m", 5.0)]));
        }
        let mut r = applied(&empty, &[&rem, &i1]);
        assert_eq!(scores(&r), want(&[]));
        assert!(!r.apply(&i1), "applied once");
        assert_eq!(scores(&r), want(&[]));
    }
}
