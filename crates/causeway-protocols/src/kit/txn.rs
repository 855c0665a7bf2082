//! The transaction buffer every protocol's session and coordinator keep, with the input
//! limits (key and value length, updates per transaction, keys per read), the overlay of a
//! transaction's own writes on what it reads, the typed-object helpers, [`TxnMap`], the
//! map of in-flight transactions by id, and [`ReadId`], what names a coordinator's read.

use causeway_core::crdt::{hash, list, zset, ArbTs, Effect, ObjType, Object, Op, Update};
use causeway_core::limits::{KEY_LEN_MAX, READ_KEYS_MAX, TXN_UPDATES_MAX, VALUE_LEN_MAX};
use causeway_core::{Error, Key, OpId, ReadValue, TxnId, TxnKind};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;

/// In-flight transactions by id (a coordinator's txns, a partition's prepared ones): a
/// hash map, not a B-tree. Txns come and go in id order, so a B-tree removed its first
/// entry each time and shifted the rest of the leaf; the inserts and removes of the two
/// maps a SET passes were about 1k of its instructions (issue 14). Iteration order is the
/// hasher's, fixed, so runs replay alike; what iterates does not depend on it (the oldest
/// snapshot's meet; the inquiries and certification retries, each message independent of
/// the others) or sorts first (a checkpoint's prepared txns).
pub type TxnMap<V> = HashMap<TxnId, V, TxnHashState>;

/// A coordinator's read of a txn's partitions, as its requests to them and their replies
/// name it: the txn and the session's id of the request the read answers.
///
/// Unique across the coordinator's incarnations, as a counter of its own is not: a reply
/// to a read of an incarnation that crashed can reach the next one (a read parked at its
/// partition is served after the restart), and a counter that starts again at 1 would
/// take it as the answer to a new read of other keys, or of the same keys at another
/// snapshot. A txn never lives in two incarnations (a restarted coordinator knows no txn
/// and never gets an old START: the transport drops what was meant for the dead one), and
/// a txn runs one request at a time, each with a fresh id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ReadId {
    pub txn: TxnId,
    pub req: u64,
}

/// [`TxnMap`]'s hasher: foldhash with a fixed seed (txn ids are the servers' own, not
/// picked by clients, so a per-process seed would buy nothing).
#[derive(Clone, Debug, Default)]
pub struct TxnHashState;

impl BuildHasher for TxnHashState {
    type Hasher = <foldhash::fast::FixedState as BuildHasher>::Hasher;

    fn build_hasher(&self) -> Self::Hasher {
        foldhash::fast::FixedState::with_seed(TXN_HASH_SEED).build_hasher()
    }
}

const TXN_HASH_SEED: u64 = 0x2545_f491_4f6c_dd1d;

/// The updates a session has buffered in its open transaction, in program order.
#[derive(Clone, Debug)]
pub struct TxnBuffer {
    pub txn: TxnId,
    pub kind: TxnKind,
    pub updates: Vec<(Key, Update, OpId)>,
}

/// A txn's buffered updates, in order, with the op ids they got.
pub type BufferedUpdates = Vec<(Key, Update, OpId)>;

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

    /// Takes the buffered updates, grouped by a routing function (partition, node...) in
    /// the order of the groups' routes: moved, not copied, and the buffer left empty. All
    /// in one group (every single-key command) is one move of the whole vector into a
    /// vector of one group (a B-tree of groups was a node allocated and walked per commit).
    pub fn take_by<T: Ord>(
        &mut self,
        mut route: impl FnMut(&Key) -> T,
    ) -> Vec<(T, BufferedUpdates)> {
        let updates = std::mem::take(&mut self.updates);
        let Some((first, rest)) = updates.split_first() else {
            return Vec::new();
        };
        let first = route(&first.0);
        if rest.iter().all(|u| route(&u.0) == first) {
            return vec![(first, updates)];
        }
        let mut groups: BTreeMap<T, Vec<_>> = BTreeMap::new();
        for u in updates {
            groups.entry(route(&u.0)).or_default().push(u);
        }
        groups.into_iter().collect()
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
        Update::Increment(_) | Update::RegisterIncrement(_) => 0,
        Update::Part { update, .. } => return check_update(update),
        Update::HashSet { field, value } => return hash::check_sizes(field, Some(value)),
        Update::HashIncrement { field, .. } | Update::HashRemove { field } => {
            return hash::check_sizes(field, None)
        }
        Update::ListPush { values, .. } => return list::check_sizes(values),
        Update::ListPop { .. } => 0,
        Update::ZAdd { .. } | Update::ZIncrement { .. } | Update::ZRemove { .. } => {
            return zset::check_sizes(update)
        }
    };
    if len > VALUE_LEN_MAX {
        return Err(limit("value length in bytes", VALUE_LEN_MAX));
    }
    Ok(())
}

/// Whether the effect of `update` depends on the state it is prepared against beyond its
/// type, so the snapshot it observes must be complete: a set remove (the tags it
/// removes), a multi-value assignment (what it dominates), and every hash update (the
/// field's writes it replaces, the increments it resets, the integer it increments), and
/// a list pop (the elements it removes), and every sorted-set update (as a hash's).
pub fn reads_state(update: &Update) -> bool {
    matches!(update, Update::Remove(_) | Update::MvAssign(_))
        || matches!(
            update.own(),
            Update::HashSet { .. }
                | Update::HashIncrement { .. }
                | Update::HashRemove { .. }
                | Update::ListPop { .. }
                | Update::ZAdd { .. }
                | Update::ZIncrement { .. }
                | Update::ZRemove { .. }
        )
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
            let obj = typed_state(stored(key), update.obj_type())?;
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

/// Coalesces a txn's ops on one partition before they are recorded (our decision; the
/// papers ship every op): drops every assignment that a later assignment of the same key
/// in the txn overwrites, and folds increments of a counter and re-adds of a set element
/// into the last of them ([`fold_into_last`]), keeping the order of the rest.
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
pub fn coalesce_txn_ops(ops: &mut Vec<(Key, OpId, Effect)>, broken: bool) {
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
    fold_into_last(ops, &mut keep);
    retain_flagged(ops, &keep);
}

/// Coalesces the updates a session ships in one message, as [`coalesce_txn_ops`] does to
/// the ops at the partition, one step earlier so the message is small too (our decision;
/// a pipelined group of 16 SETs of one key in a 2-node DC shipped all 16 values to the
/// key's node, and decoding them was a tenth of that node's CPU). Only what cannot change
/// the outcome goes:
/// - of a key whose updates here are all assignments, all but the last (the generator
///   prepares an assignment blind, and the last one of the txn wins);
/// - of a key whose updates here are all increments of one sign, all but the last, which
///   carries their sum (one sign: the partial sums are monotone, so the sum overflows the
///   observed value exactly when one of the steps would, and the prepare refuses the same
///   txns; a sum that overflows `i64` itself stays apart).
///
/// A key with any other update keeps all of them, in order. Each update's op id stays
/// its own (the kept last one keeps its id). `broken` is the `keeps-overwritten-assign`
/// mutation: a key's *first* assignment is kept instead.
pub fn coalesce_updates(updates: &mut Vec<(Key, Update, OpId)>, broken: bool) {
    if updates.len() < 2 {
        return;
    }
    let mut runs: BTreeMap<&Key, KeyRun> = BTreeMap::new();
    for (i, (key, update, _)) in updates.iter().enumerate() {
        runs.entry(key)
            .and_modify(|r| r.add(i, update))
            .or_insert_with(|| KeyRun::start(i, update));
    }
    let mut keep = vec![true; updates.len()];
    let mut sums = Vec::new();
    for run in runs.values().filter(|r| r.members.len() > 1) {
        let kept = match (run.kind, broken) {
            (RunKind::Assigns, false) => *run.members.last().expect("two or more"),
            (RunKind::Assigns, true) => run.members[0],
            (RunKind::Increments { sum, .. }, _) => {
                let last = *run.members.last().expect("two or more");
                sums.push((last, sum));
                last
            }
            (RunKind::Other, _) => continue,
        };
        for &i in run.members.iter().filter(|&&i| i != kept) {
            keep[i] = false;
        }
    }
    for (i, sum) in sums {
        updates[i].1 = Update::Increment(sum);
    }
    retain_flagged(updates, &keep);
}

/// Keeps the items whose flag in `keep` (one per item, in order) is set.
fn retain_flagged<T>(items: &mut Vec<T>, keep: &[bool]) {
    assert_eq!(items.len(), keep.len(), "one flag per item");
    let mut kept = keep.iter();
    items.retain(|_| *kept.next().expect("checked above"));
}

/// [`coalesce_updates`]: one key's updates in a shipped batch (their positions) and
/// whether they can go as one.
struct KeyRun {
    members: Vec<usize>,
    kind: RunKind,
}

#[derive(Clone, Copy)]
enum RunKind {
    Assigns,
    /// Increments, none of them of the other sign (`negative`: `None` while all are 0).
    Increments {
        sum: i64,
        negative: Option<bool>,
    },
    Other,
}

impl KeyRun {
    fn start(i: usize, update: &Update) -> KeyRun {
        let kind = match update {
            Update::Assign(_) => RunKind::Assigns,
            Update::Increment(d) => RunKind::Increments {
                sum: *d,
                negative: (*d != 0).then_some(*d < 0),
            },
            _ => RunKind::Other,
        };
        KeyRun {
            members: vec![i],
            kind,
        }
    }

    fn add(&mut self, i: usize, update: &Update) {
        self.members.push(i);
        self.kind = match (self.kind, update) {
            (RunKind::Assigns, Update::Assign(_)) => RunKind::Assigns,
            (RunKind::Increments { sum, negative }, Update::Increment(d)) => {
                let sign = (*d != 0).then_some(*d < 0);
                let same = negative.is_none() || sign.is_none() || negative == sign;
                match (same, sum.checked_add(*d)) {
                    (true, Some(sum)) => RunKind::Increments {
                        sum,
                        negative: negative.or(sign),
                    },
                    _ => RunKind::Other,
                }
            }
            _ => RunKind::Other,
        };
    }
}

/// Marks for dropping (`keep[i] = false`) every increment of a counter that a later
/// increment of it in the txn can carry, adding it in, and every add of a set element
/// that a later add of the same element replaces, the later add then replacing what the
/// earlier one did. A pipelined group of 16 INCRs or SADDs of one key used to record,
/// replicate and apply 16 ops (and each SADD's replaced tags).
///
/// The state is the same everywhere: increments commute and add up (a sum that would
/// overflow is left unmerged); adds `a1 .. am` of one element each replace the tags they
/// observed, which for `a(k+1)` is just `ak`'s tag (the txn's own writes show), so the
/// sequence removes what `a1` observed and leaves `am`'s tag, as `am` replacing the union
/// of their replaced tags minus their own does. An element the txn also removes keeps
/// all its ops. No read outside the txn sees an earlier op (TCC's intermediate-read rule).
fn fold_into_last(ops: &mut [(Key, OpId, Effect)], keep: &mut [bool]) {
    let mut removed = std::collections::BTreeSet::new();
    for (key, _, effect) in ops.iter() {
        if let Effect::Remove { elem, .. } = effect {
            removed.insert((key.clone(), elem.clone()));
        }
    }
    // The last op of each foldable group, by (key, element; none for a counter).
    let mut last: BTreeMap<(Key, Option<Vec<u8>>), usize> = BTreeMap::new();
    for i in (0..ops.len()).rev() {
        let key = &ops[i].0;
        let group = match &ops[i].2 {
            Effect::Increment(_) => (key.clone(), None),
            Effect::Add { elem, .. } => {
                let pair = (key.clone(), elem.clone());
                if removed.contains(&pair) {
                    continue;
                }
                (pair.0, Some(pair.1))
            }
            _ => continue,
        };
        let Some(&j) = last.get(&group) else {
            last.insert(group, i);
            continue;
        };
        let (earlier, later) = ops.split_at_mut(j);
        let (_, id, effect) = &earlier[i];
        keep[i] = !fold(effect, *id, &mut later[0].2);
    }
}

/// Folds `effect` (op `id`) into the later `into` of the same group; false if it cannot
/// (an increment sum that would overflow).
fn fold(effect: &Effect, id: OpId, into: &mut Effect) -> bool {
    match (effect, into) {
        (Effect::Increment(d), Effect::Increment(total)) => match total.checked_add(*d) {
            Some(sum) => {
                *total = sum;
                true
            }
            None => false,
        },
        (
            Effect::Add {
                replaces: earlier, ..
            },
            Effect::Add { replaces, .. },
        ) => {
            replaces.retain(|t| *t != id);
            replaces.extend(earlier.iter().copied());
            replaces.sort_unstable();
            replaces.dedup();
            true
        }
        _ => false,
    }
}

/// The object type an effect belongs to.
pub fn effect_type(effect: &Effect) -> ObjType {
    effect.obj_type()
}

/// Builds the read result of `key` from a snapshot object plus the transaction's own
/// writes; with `observed` false, without the ids of the writes it observed
/// (`ClientSession::skip_observed`). Takes the key: the answer carries it.
pub fn read_value(
    buffer: &TxnBuffer,
    key: Key,
    mut obj: Object,
    observed: bool,
) -> Result<ReadValue, Error> {
    buffer.overlay(&key, &mut obj)?;
    Ok(ReadValue {
        key,
        value: obj.value(),
        observed: if observed { obj.observed() } else { Vec::new() },
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

/// [`typed`] without the applied ids ([`Object::state_only`]): for readers and generators.
pub fn typed_state(stored: Option<&Object>, obj_type: ObjType) -> Result<Object, Error> {
    match stored {
        Some(o) if o.obj_type() != obj_type => typed(stored, obj_type),
        Some(o) => Ok(o.state_only()),
        None => Ok(Object::new(obj_type)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_core::SessionId;

    /// Two `TxnMap`s given the same inserts and removes iterate alike, in this process and
    /// across runs (a fixed seed: a simulation replays bit for bit), and each finds every
    /// txn it holds.
    #[test]
    fn txn_maps_iterate_alike_for_the_same_history() {
        let id = |session, seq| TxnId {
            session: SessionId(session),
            seq,
        };
        let fill = || {
            let mut map: TxnMap<u64> = TxnMap::default();
            for seq in 0..200 {
                map.insert(id(seq % 7 + 1, seq), seq);
                if seq % 3 == 0 {
                    map.remove(&id((seq / 2) % 7 + 1, seq / 2));
                }
            }
            map
        };
        let (a, b) = (fill(), fill());
        let order = |m: &TxnMap<u64>| m.iter().map(|(t, v)| (*t, *v)).collect::<Vec<_>>();
        assert_eq!(order(&a), order(&b));
        assert!(a.iter().all(|(t, v)| a.get(t) == Some(v) && t.seq == *v));
        let hash = |t: TxnId| TxnHashState.hash_one(t);
        assert_eq!(hash(id(1, 2)), TxnHashState.hash_one(id(1, 2)));
        assert_ne!(hash(id(1, 2)), hash(id(2, 1)), "session and seq both count");
    }

    /// `take_by` groups as `group_by` does, in buffer order within each group, whether
    /// the updates fall in one group or several, and leaves the buffer empty.
    #[test]
    fn take_by_moves_the_groups_group_by_copies() {
        let txn = TxnId {
            session: SessionId(1),
            seq: 1,
        };
        let route = |k: &Key| k.0[0] % 3;
        for keys in [
            &["a", "d", "g"][..],
            &["a", "b", "d", "c", "g"][..],
            &[][..],
        ] {
            let mut buffer = TxnBuffer::new(txn, TxnKind::Causal);
            for k in keys {
                buffer
                    .push(Key::from(*k), Update::Increment(1))
                    .expect("buffered");
            }
            let copied: Vec<_> = buffer.group_by(route).into_iter().collect();
            let taken = buffer.take_by(route);
            assert_eq!(taken, copied, "keys {keys:?}");
            assert!(buffer.updates.is_empty(), "the buffer is taken");
        }
    }

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
        coalesce_txn_ops(&mut ops, false);
        assert_eq!(ops, vec![add, assign("c", "3", 3), assign("a", "4", 4)]);
        let mut one = vec![assign("a", "1", 0)];
        coalesce_txn_ops(&mut one, false);
        assert_eq!(one, vec![assign("a", "1", 0)]);
    }

    /// `read_value` with `observed` false answers the same value, with the transaction's
    /// own buffered add overlaid, and no ids; with true, the ids of every tag.
    #[test]
    fn a_read_value_without_observed_ids_keeps_the_value() {
        let txn = TxnId {
            session: SessionId(2),
            seq: 5,
        };
        let mut obj = Object::new(ObjType::Set);
        let earlier = OpId {
            txn: TxnId { seq: 1, ..txn },
            index: 0,
        };
        obj.apply_effect(&Op {
            id: earlier,
            ts: ArbTs::default(),
            effect: Effect::Add {
                elem: b"x".to_vec(),
                replaces: Vec::new(),
            },
        });
        let mut buffer = TxnBuffer::new(txn, TxnKind::Causal);
        let key = Key::from("s");
        let own = buffer
            .push(key.clone(), Update::Add(b"y".to_vec()))
            .expect("ok");
        let kept = read_value(&buffer, key.clone(), obj.clone(), true).expect("ok");
        let skipped = read_value(&buffer, key, obj, false).expect("ok");
        let members = vec![b"x".to_vec(), b"y".to_vec()];
        assert_eq!(kept.value, causeway_core::ObjValue::Set(members));
        assert_eq!(skipped.value, kept.value);
        assert_eq!(kept.observed, vec![earlier, own]);
        assert!(skipped.observed.is_empty());
    }

    fn id(index: u32) -> OpId {
        OpId {
            txn: TxnId {
                session: SessionId(1),
                seq: 1,
            },
            index,
        }
    }

    fn add(k: &str, e: &str, i: u32, replaces: Vec<OpId>) -> (Key, OpId, Effect) {
        let elem = e.as_bytes().to_vec();
        (
            Key(k.as_bytes().to_vec()),
            id(i),
            Effect::Add { elem, replaces },
        )
    }

    /// Increments of a counter add up in its last one (a sum that would overflow stays
    /// apart); re-adds of an element fold into the last, which then replaces what the
    /// first observed and none of the txn's own tags; other elements, other keys and an
    /// element the txn also removes keep their ops, in order.
    #[test]
    fn increments_and_re_adds_fold_into_the_last_of_them() {
        let inc = |k: &str, d: i64, i| (Key(k.as_bytes().to_vec()), id(i), Effect::Increment(d));
        let mut ops = vec![
            inc("c", 2, 0),
            inc("d", 1, 1),
            inc("c", 5, 2),
            inc("c", -1, 3),
        ];
        coalesce_txn_ops(&mut ops, false);
        assert_eq!(ops, vec![inc("d", 1, 1), inc("c", 6, 3)]);
        let mut huge = vec![inc("c", i64::MAX, 0), inc("c", 1, 1)];
        coalesce_txn_ops(&mut huge, false);
        assert_eq!(huge.len(), 2, "an overflowing sum is not folded");

        let r = |i| OpId {
            txn: TxnId {
                session: SessionId(9),
                seq: i,
            },
            index: 0,
        };
        let mut ops = vec![
            add("s", "x", 0, vec![r(7), r(8)]),
            add("s", "y", 1, vec![]),
            add("s", "x", 2, vec![id(0)]),
            add("s", "x", 3, vec![id(2)]),
        ];
        coalesce_txn_ops(&mut ops, false);
        assert_eq!(
            ops,
            vec![add("s", "y", 1, vec![]), add("s", "x", 3, vec![r(7), r(8)])]
        );
        let remove = (
            Key(b"s".to_vec()),
            id(1),
            Effect::Remove {
                elem: b"x".to_vec(),
                tags: vec![id(0)],
            },
        );
        let with_remove = vec![add("s", "x", 0, vec![]), remove, add("s", "x", 2, vec![])];
        let mut ops = with_remove.clone();
        coalesce_txn_ops(&mut ops, false);
        assert_eq!(ops, with_remove, "an element the txn removes keeps its ops");
    }

    /// What the folded ops leave in a replica's state is what the txn's ops left, from
    /// any state holding the tags the first add observed.
    #[test]
    fn folded_re_adds_leave_the_state_the_ops_left() {
        use causeway_core::crdt::{ArbTs, Object, Op};
        let r = |seq| OpId {
            txn: TxnId {
                session: SessionId(9),
                seq,
            },
            index: 0,
        };
        let mut base = Object::new(ObjType::Set);
        for (seq, e) in [(7, "x"), (8, "x"), (9, "z")] {
            let effect = Effect::Add {
                elem: e.as_bytes().to_vec(),
                replaces: vec![],
            };
            base.apply(&Op {
                id: r(seq),
                ts: ArbTs::default(),
                effect,
            });
        }
        let ops = vec![
            add("s", "x", 0, vec![r(7), r(8)]),
            add("s", "x", 1, vec![id(0)]),
            add("s", "z", 2, vec![r(9)]),
            add("s", "x", 3, vec![id(1)]),
        ];
        let mut folded = ops.clone();
        coalesce_txn_ops(&mut folded, false);
        assert_eq!(folded.len(), 2);
        let run = |ops: &[(Key, OpId, Effect)]| {
            let mut o = base.clone();
            for (_, id, effect) in ops {
                let op = Op {
                    id: *id,
                    ts: ArbTs::default(),
                    effect: effect.clone(),
                };
                o.apply_effect(&op);
            }
            (o.value(), o.observed())
        };
        assert_eq!(run(&folded), run(&ops));
    }
}

#[cfg(test)]
mod coalesce_updates_tests {
    use super::*;
    use causeway_core::{ObjValue, SessionId};

    const TXN: TxnId = TxnId {
        session: SessionId(7),
        seq: 3,
    };

    fn updates(list: &[(&str, Update)]) -> Vec<(Key, Update, OpId)> {
        let id = |index| OpId { txn: TXN, index };
        let key = |k: &str| Key(k.as_bytes().to_vec());
        let each = list.iter().enumerate();
        each.map(|(i, (k, u))| (key(k), u.clone(), id(i as u32)))
            .collect()
    }

    fn value(v: &str) -> Update {
        Update::Assign(v.as_bytes().to_vec())
    }

    /// Assignments keep the last of their key, same-sign increments their sum in the last
    /// one's place and id; a key with mixed updates and the other keys stay, in order.
    #[test]
    fn a_shipped_batch_keeps_one_assignment_and_one_increment_per_key() {
        let input = updates(&[
            ("a", value("1")),
            ("c", Update::Increment(2)),
            ("m", Update::Increment(1)),
            ("a", value("2")),
            ("c", Update::Increment(3)),
            ("m", Update::Increment(-1)),
            ("s", Update::Add(b"x".to_vec())),
            ("c", Update::Increment(0)),
            ("a", value("3")),
        ]);
        let mut got = input.clone();
        coalesce_updates(&mut got, false);
        let mut want: Vec<_> = [2, 5, 6, 7, 8].iter().map(|&i| input[i].clone()).collect();
        want[3].1 = Update::Increment(5); // c's 2 + 3 + 0, in its last update's place
        assert_eq!(got, want);
        // The mutation keeps each key's first assignment.
        let mut broken = updates(&[("a", value("1")), ("a", value("2"))]);
        coalesce_updates(&mut broken, true);
        assert_eq!(broken, updates(&[("a", value("1"))]));
        // A sum past i64 stays apart.
        let apart = updates(&[
            ("c", Update::Increment(i64::MAX)),
            ("c", Update::Increment(1)),
        ]);
        let mut got = apart.clone();
        coalesce_updates(&mut got, false);
        assert_eq!(got, apart);
    }

    /// Runs `list` as a txn's generator does (each update prepared against the state the
    /// earlier ones left): the final values, or whether it was refused.
    fn outcome(
        start: &BTreeMap<Key, Object>,
        list: &[(Key, Update, OpId)],
    ) -> Option<BTreeMap<Key, ObjValue>> {
        let mut objs = start.clone();
        for (key, update, id) in list {
            let obj = objs.get_mut(key).expect("every key starts");
            let effect = obj.prepare(update).ok()?;
            let ts = ArbTs::PENDING;
            obj.apply_effect(&Op {
                id: *id,
                ts,
                effect,
            });
        }
        Some(objs.iter().map(|(k, o)| (k.clone(), o.value())).collect())
    }

    /// Random batches over two keys of random types (counters near both ends of `i64`
    /// too, where a step can overflow that a sum with the other sign would hide): the
    /// coalesced batch leaves the values the whole one leaves, and is refused exactly
    /// when it is.
    #[test]
    fn a_coalesced_batch_has_the_outcome_of_the_whole_one() {
        let mut next = crate::kit::xorshift(0x2545_f491_4f6c_dd1du64);
        let (mut refused, mut shorter) = (0, 0);
        for round in 0..20_000u64 {
            let mut start = BTreeMap::new();
            for k in ["a", "b"] {
                let obj = match next(4) {
                    0 => Object::new(ObjType::Lww),
                    1 => Object::new(ObjType::Set),
                    _ => {
                        let mut o = Object::new(ObjType::Counter);
                        let at = [0, i64::MAX - 4, i64::MIN + 4, 7][next(4) as usize];
                        let id = OpId {
                            txn: TXN,
                            index: 99,
                        };
                        let ts = ArbTs::PENDING;
                        o.apply_effect(&Op {
                            id,
                            ts,
                            effect: Effect::Increment(at),
                        });
                        o
                    }
                };
                start.insert(Key(k.as_bytes().to_vec()), obj);
            }
            let mut list = Vec::new();
            for i in 0..1 + next(10) {
                let k = ["a", "b"][next(2) as usize];
                let u = match next(5) {
                    0 => value(&format!("{round}.{i}")),
                    1 => Update::Add(vec![next(2) as u8]),
                    _ => Update::Increment([-3, -1, 0, 1, 3, i64::MAX][next(6) as usize]),
                };
                list.push((k, u));
            }
            let whole = updates(&list);
            let mut coalesced = whole.clone();
            coalesce_updates(&mut coalesced, false);
            let want = outcome(&start, &whole);
            assert_eq!(
                outcome(&start, &coalesced),
                want,
                "round {round}: {whole:?}"
            );
            refused += usize::from(want.is_none());
            shorter += usize::from(coalesced.len() < whole.len());
        }
        assert!(
            refused > 100 && shorter > 500,
            "{refused} refused, {shorter} shorter"
        );
    }
}
