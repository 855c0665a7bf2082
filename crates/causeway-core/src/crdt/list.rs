//! The list: a sequence CRDT for Redis lists, whose elements are pushed at and popped
//! from its two ends only (`LPUSH`, `RPUSH`, `LPOP`, `RPOP`).
//!
//! It is RGA (Roh et al., "Replicated abstract data types", 2011) restricted to
//! insertions at the ends. RGA inserts an element after a reference element and orders
//! the elements inserted after one reference by descending timestamp. Every `LPUSH`
//! inserts after the head sentinel, so the left-pushed elements are siblings ordered by
//! descending `(timestamp, op id, index)`; every `RPUSH` inserts before the tail
//! sentinel, the mirror rule, so the right-pushed ones follow in ascending order. The
//! arbitration timestamp grows along causality, so a push that observed another lands
//! outside it, as in Redis: sequentially the list is exactly Redis's list. Concurrent
//! pushes at one end interleave by timestamp, the same order at every replica.
//!
//! Because no element is a reference for another, an element's position follows from
//! its own id alone: a pop deletes the elements it observed outright and leaves **no
//! tombstone** (RGA keeps tombstones only as references for later inserts). A pop
//! ([`Effect::ListRemove`]) names the element ids (op id and index in its push) it
//! took from the observed list; an element popped concurrently by two replicas is
//! returned by both and removed once (deletion is idempotent); an element pushed
//! concurrently with a pop survives it (the pop never observed it).
//!
//! Under causal delivery a pop always finds the elements it names. The `eventual`
//! baseline delivers in any order: a pop that arrives first records the ids it did not
//! find in `gone`, and the push, arriving later, skips them (and clears them from `gone`),
//! so replicas converge; under causal delivery `gone` stays empty.

use super::{ArbTs, Effect, Op, Update};
use crate::error::Error;
use crate::ids::{OpId, Value};
use crate::limits::{LIST_BYTES_MAX, LIST_ELEMS_MAX, LIST_ELEM_LEN_MAX};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::sync::Arc;

/// An element's id: the push that wrote it and its index among the push's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ElemId {
    pub op: OpId,
    pub index: u32,
}

/// One element: its id, its push's timestamp, its value. The value is shared, so a
/// copy of a list (a reader's snapshot, a generator's state) copies no element bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Elem {
    pub id: ElemId,
    pub ts: ArbTs,
    pub value: Arc<[u8]>,
}

impl Elem {
    /// The element's place among the pushes at its end (module docs).
    fn key(&self) -> (ArbTs, ElemId) {
        (self.ts, self.id)
    }
}

/// Most elements of one chunk of a [`Run`]: a copy of a list copies one pointer per
/// chunk, and a push or pop at an end copies one chunk at most.
const CHUNK_MAX: usize = 64;

/// One end's elements in ascending `(timestamp, id)`, in shared chunks of up to
/// [`CHUNK_MAX`] (a chunk a mid-list insert fills past twice that is split). Readers
/// and generators copy a key's state per transaction: with one shared chunk per 64
/// elements, copying a 40,000-element list costs 625 pointer copies, not 40,000 element
/// copies. Two runs are equal when their elements are, whatever their chunks; a run
/// encodes as the flat sequence of its elements.
#[derive(Clone, Debug, Default)]
pub struct Run {
    chunks: Vec<Arc<Vec<Elem>>>,
    len: usize,
}

impl PartialEq for Run {
    fn eq(&self, other: &Run) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl Eq for Run {}

impl Serialize for Run {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(self.len))?;
        for e in self.iter() {
            seq.serialize_element(e)?;
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for Run {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Run, D::Error> {
        let mut elems = Vec::<Elem>::deserialize(d)?;
        // Whatever the bytes, the run is ordered (the invariant every operation keeps).
        elems.sort_by_key(Elem::key);
        let len = elems.len();
        let chunks = elems
            .chunks(CHUNK_MAX)
            .map(|c| Arc::new(c.to_vec()))
            .collect();
        Ok(Run { chunks, len })
    }
}

impl Run {
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Elem> {
        self.chunks.iter().flat_map(|c| c.iter())
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Inserts `elem` in `(timestamp, id)` order: an append for the newest (the usual
    /// push), a search and an insert into one chunk otherwise.
    fn insert(&mut self, elem: Elem) {
        self.len += 1;
        let newest = self.iter().next_back().is_none_or(|l| l.key() < elem.key());
        if newest {
            match self.chunks.last_mut() {
                Some(c) if c.len() < CHUNK_MAX => Arc::make_mut(c).push(elem),
                _ => self.chunks.push(Arc::new(vec![elem])),
            }
            return;
        }
        let at = self
            .chunks
            .iter()
            .position(|c| c.last().is_some_and(|l| l.key() > elem.key()))
            .expect("an element newer than the one inserted");
        let chunk = Arc::make_mut(&mut self.chunks[at]);
        let i = chunk.partition_point(|e| e.key() < elem.key());
        chunk.insert(i, elem);
        if chunk.len() > 2 * CHUNK_MAX {
            let tail = chunk.split_off(CHUNK_MAX);
            self.chunks.insert(at + 1, Arc::new(tail));
        }
    }

    /// Removes the elements of `want` it holds from its ends (where a pop's are),
    /// returning their summed length; found ids leave `want`.
    fn remove_at_ends(&mut self, want: &mut BTreeSet<ElemId>) -> u64 {
        let mut freed = 0;
        while let Some(c) = self.chunks.last_mut() {
            match c.last() {
                Some(e) if want.remove(&e.id) => {
                    freed += e.value.len() as u64;
                    Arc::make_mut(c).pop();
                    self.len -= 1;
                }
                Some(_) => break,
                None => drop(self.chunks.pop()),
            }
        }
        while let Some(c) = self.chunks.first_mut() {
            match c.first() {
                Some(e) if want.remove(&e.id) => {
                    freed += e.value.len() as u64;
                    Arc::make_mut(c).remove(0);
                    self.len -= 1;
                }
                Some(_) => break,
                None => drop(self.chunks.remove(0)),
            }
        }
        freed
    }

    /// Removes the element with `key` if it holds it (a binary search), returning its
    /// length.
    fn remove_key(&mut self, key: (ArbTs, ElemId)) -> Option<u64> {
        let at = self
            .chunks
            .partition_point(|c| c.last().is_some_and(|l| l.key() < key));
        let chunk = self.chunks.get_mut(at)?;
        let i = chunk.binary_search_by(|e| e.key().cmp(&key)).ok()?;
        let freed = Arc::make_mut(chunk).remove(i).value.len() as u64;
        if chunk.is_empty() {
            self.chunks.remove(at);
        }
        self.len -= 1;
        Some(freed)
    }

    /// Removes the elements of `want` it holds wherever they are; found ids leave `want`.
    fn remove_anywhere(&mut self, want: &mut BTreeSet<ElemId>) -> u64 {
        let mut freed = 0;
        for c in &mut self.chunks {
            if !c.iter().any(|e| want.contains(&e.id)) {
                continue;
            }
            Arc::make_mut(c).retain(|e| {
                let keep = !want.remove(&e.id);
                if !keep {
                    freed += e.value.len() as u64;
                    self.len -= 1;
                }
                keep
            });
        }
        self.chunks.retain(|c| !c.is_empty());
        freed
    }
}

/// A list's state (module docs). The list shows `left` reversed, then `right`: each end
/// keeps its elements in ascending `(timestamp, id)`, so a push (usually the newest) is
/// an append, a pop a removal at an end, and a read needs no sorting.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListState {
    pub left: Run,
    pub right: Run,
    /// Ids popped before their push arrived (only without causal delivery).
    pub gone: BTreeSet<ElemId>,
    /// The summed length of the values, in bytes (for [`LIST_BYTES_MAX`]).
    bytes: u64,
}

impl ListState {
    /// The elements in list order, head first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Elem> {
        self.left.iter().rev().chain(self.right.iter())
    }

    pub fn len(&self) -> usize {
        self.left.len() + self.right.len()
    }

    pub fn is_empty(&self) -> bool {
        self.left.is_empty() && self.right.is_empty()
    }

    /// The values in list order.
    pub fn values(&self) -> Vec<Value> {
        self.iter().map(|e| e.value.to_vec()).collect()
    }

    /// The ids of the pushes whose elements show, ascending: what a read observes.
    pub fn observed(&self) -> Vec<OpId> {
        let mut ids: Vec<OpId> = self.iter().map(|e| e.id.op).collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// Inserts an element at its end, in `(timestamp, id)` order.
    fn insert(&mut self, left: bool, elem: Elem) {
        self.bytes += elem.value.len() as u64;
        match left {
            true => self.left.insert(elem),
            false => self.right.insert(elem),
        }
    }

    /// Removes the elements of `want` it holds, and leaves in `want` the ids it did not
    /// find. It looks at the ends first (a pop's are there), then searches each by the
    /// timestamp the pop saw (`seen`): an element popped twice concurrently (the usual
    /// case of many clients popping one list) costs a search, not a scan. Only an element
    /// seen in its own transaction's private view ([`ArbTs::PENDING`]) needs a scan.
    fn remove<'a>(
        &mut self,
        want: &mut BTreeSet<ElemId>,
        seen: impl Iterator<Item = (&'a ElemId, &'a ArbTs)>,
    ) {
        let mut freed = self.left.remove_at_ends(want) + self.right.remove_at_ends(want);
        let mut pending = false;
        for (id, ts) in seen {
            if !want.contains(id) {
                continue;
            }
            pending |= *ts == ArbTs::PENDING;
            let key = (*ts, *id);
            if let Some(f) = self
                .left
                .remove_key(key)
                .or_else(|| self.right.remove_key(key))
            {
                freed += f;
                want.remove(id);
            }
        }
        if pending && !want.is_empty() {
            freed += self.left.remove_anywhere(want) + self.right.remove_anywhere(want);
        }
        assert!(freed <= self.bytes, "list byte count broken");
        self.bytes -= freed;
    }
}

fn limit(what: &str, max: usize) -> Error {
    Error::LimitExceeded {
        what: what.into(),
        max: max as u64,
    }
}

/// Refuses a push of values past [`LIST_ELEM_LEN_MAX`], or of more values than a list
/// holds.
pub fn check_sizes(values: &[Value]) -> Result<(), Error> {
    if values.iter().any(|v| v.len() > LIST_ELEM_LEN_MAX) {
        let what = "list element length in bytes (LIST_ELEM_LEN_MAX)";
        return Err(limit(what, LIST_ELEM_LEN_MAX));
    }
    if values.len() > LIST_ELEMS_MAX {
        return Err(limit(
            "elements in one list (LIST_ELEMS_MAX)",
            LIST_ELEMS_MAX,
        ));
    }
    Ok(())
}

/// Generator of a list update against the observed `list`: a push must keep the list
/// within [`LIST_ELEMS_MAX`] elements and [`LIST_BYTES_MAX`] bytes; a pop names the
/// first `count` observed elements from its end.
pub fn prepare(list: &ListState, update: &Update) -> Result<Effect, Error> {
    match update {
        Update::ListPush { left, values } => {
            check_sizes(values)?;
            if list.len() + values.len() > LIST_ELEMS_MAX {
                return Err(limit(
                    "elements in one list (LIST_ELEMS_MAX)",
                    LIST_ELEMS_MAX,
                ));
            }
            let added: u64 = values.iter().map(|v| v.len() as u64).sum();
            if list.bytes + added > LIST_BYTES_MAX as u64 {
                return Err(limit("bytes in one list (LIST_BYTES_MAX)", LIST_BYTES_MAX));
            }
            Ok(Effect::ListPush {
                left: *left,
                values: values.clone(),
            })
        }
        Update::ListPop { left, count } => {
            let n = (*count).min(list.len() as u64) as usize;
            let taken: Vec<&Elem> = match left {
                true => list.iter().take(n).collect(),
                false => list.iter().rev().take(n).collect(),
            };
            Ok(Effect::ListRemove {
                ids: taken.iter().map(|e| e.id).collect(),
                ts: taken.iter().map(|e| e.ts).collect(),
            })
        }
        other => unreachable!("{other:?} is no list update (type checked)"),
    }
}

/// Effector: applies a list effect of `op` to `list`.
pub fn apply(list: &mut ListState, op: &Op, effect: &Effect) {
    match effect {
        Effect::ListPush { left, values } => {
            assert!(
                values.len() <= u32::MAX as usize,
                "push of {} values",
                values.len()
            );
            for (i, value) in values.iter().enumerate() {
                let id = ElemId {
                    op: op.id,
                    index: i as u32,
                };
                if list.gone.remove(&id) {
                    continue;
                }
                let elem = Elem {
                    id,
                    ts: op.ts,
                    value: Arc::from(value.as_slice()),
                };
                list.insert(*left, elem);
            }
        }
        Effect::ListRemove { ids, ts } => remove(list, ids, ts, |_| true),
        other => panic!("effect {other:?} applied to a list: type invariant broken"),
    }
}

/// Removes `ids`; one absent whose push was not applied (`applied` false) goes to `gone`.
fn remove(list: &mut ListState, ids: &[ElemId], ts: &[ArbTs], applied: impl Fn(&OpId) -> bool) {
    assert_eq!(ids.len(), ts.len(), "a pop names a timestamp per element");
    let mut want: BTreeSet<ElemId> = ids.iter().copied().collect();
    list.remove(&mut want, ids.iter().zip(ts));
    list.gone
        .extend(want.into_iter().filter(|id| !applied(&id.op)));
}

/// A pop, before it applies at a replica that may not have applied the pushes it names
/// (`applied`): notes the ids of unapplied pushes in `gone` (module docs).
pub fn note_early_removals(list: &mut ListState, effect: &Effect, applied: impl Fn(&OpId) -> bool) {
    if let Effect::ListRemove { ids, ts } = effect {
        remove(list, ids, ts, applied);
    }
}

#[cfg(test)]
mod tests {
    use super::super::{ObjType, Object, Op, State};
    use super::*;
    use crate::api::ObjValue;

    use super::super::test_ops::{id, op};

    fn push(left: bool, vs: &[&str]) -> Update {
        Update::ListPush {
            left,
            values: vs.iter().map(|v| v.as_bytes().to_vec()).collect(),
        }
    }

    fn pop(left: bool, count: u64) -> Update {
        Update::ListPop { left, count }
    }

    fn shown(obj: &Object) -> Vec<String> {
        let ObjValue::List(vs) = obj.value() else {
            panic!("a list shows {:?}", obj.value())
        };
        vs.into_iter()
            .map(|v| String::from_utf8(v).expect("utf-8"))
            .collect()
    }

    /// Applies `update` sequentially (at time `t`) and returns the new replica.
    fn step(r: &Object, t: u64, update: Update) -> Object {
        let mut next = r.clone();
        assert!(next.apply(&op(r, t, t, update)));
        next
    }

    /// Sequentially, the list is Redis's: LPUSH a b c gives c b a, RPUSH appends in
    /// order, pops take from their end, and an emptied list leaves no state behind.
    #[test]
    fn sequential_pushes_and_pops_are_redis_lists() {
        let mut r = Object::new(ObjType::List);
        r = step(&r, 1, push(true, &["a", "b", "c"]));
        assert_eq!(shown(&r), ["c", "b", "a"]);
        r = step(&r, 2, push(false, &["x", "y"]));
        r = step(&r, 3, push(true, &["d"]));
        r = step(&r, 4, push(false, &["z"]));
        assert_eq!(shown(&r), ["d", "c", "b", "a", "x", "y", "z"]);
        r = step(&r, 5, pop(true, 2));
        assert_eq!(shown(&r), ["b", "a", "x", "y", "z"]);
        r = step(&r, 6, pop(false, 1));
        assert_eq!(shown(&r), ["b", "a", "x", "y"]);
        r = step(&r, 7, pop(false, 3));
        assert_eq!(shown(&r), ["b"]);
        r = step(&r, 8, pop(true, 10));
        assert!(shown(&r).is_empty());
        assert_eq!(r.shown_type(), None, "an empty list shows nothing");
        assert_eq!(r.state, Object::new(ObjType::List).state, "no tombstones");
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

    /// Every order of `ops` (causal or not: the `eventual` baseline's) gives `want` and
    /// one state.
    fn converge(start: &Object, ops: &[Op], want: &[&str]) {
        let mut states: Vec<Object> = Vec::new();
        permute(&mut (0..ops.len()).collect(), 0, &mut |order| {
            let mut r = start.clone();
            for &i in order {
                r.apply(&ops[i]);
            }
            assert_eq!(shown(&r), want, "order {order:?}");
            states.push(r);
        });
        assert!(
            states.windows(2).all(|w| w[0].state == w[1].state),
            "one state"
        );
    }

    /// Two DCs popping the same head concurrently both take it; it is removed once, and
    /// an element pushed concurrently with the pops survives them.
    #[test]
    fn concurrent_pops_take_the_same_element_once() {
        let empty = Object::new(ObjType::List);
        let base_op = op(&empty, 1, 1, push(false, &["a", "b", "c"]));
        let base = step(&empty, 1, push(false, &["a", "b", "c"]));
        let p1 = op(&base, 2, 2, pop(true, 1));
        let p2 = op(&base, 3, 3, pop(true, 1));
        assert_eq!(p1.effect, p2.effect, "both pop a");
        let l = op(&base, 4, 4, push(true, &["z"]));
        converge(&empty, &[base_op, p1, p2, l], &["z", "b", "c"]);
    }

    /// Concurrent pushes at one end interleave by timestamp, at every replica alike,
    /// and pushes after observing others land outside them.
    #[test]
    fn concurrent_pushes_interleave_by_timestamp() {
        let empty = Object::new(ObjType::List);
        let a = op(&empty, 5, 1, push(true, &["a"]));
        let b = op(&empty, 7, 2, push(true, &["b"]));
        let c = op(&empty, 6, 3, push(false, &["c"]));
        let d = op(&empty, 2, 4, push(false, &["d"]));
        converge(&empty, &[a, b, c, d], &["b", "a", "d", "c"]);
    }

    /// A pop delivered before its push (no causal delivery): the push's element stays
    /// popped, the others show, and `gone` is empty again afterwards.
    #[test]
    fn a_pop_before_its_push_still_removes_it() {
        let empty = Object::new(ObjType::List);
        let p = op(&empty, 1, 1, push(false, &["a", "b"]));
        let after = step(&empty, 1, push(false, &["a", "b"]));
        let rm = op(&after, 2, 2, pop(true, 1));
        let mut r = empty.clone();
        assert!(r.apply(&rm));
        assert!(r.apply(&p));
        assert_eq!(shown(&r), ["b"]);
        let State::List(l) = &r.state else {
            panic!("a list")
        };
        assert!(l.gone.is_empty());
    }

    /// Pushes past the element count, the byte budget or the element size are refused,
    /// naming the limit; the new variants go last.
    #[test]
    fn limits_are_refused_and_variants_go_last() {
        let mut r = Object::new(ObjType::List);
        let many: Vec<String> = (0..LIST_ELEMS_MAX).map(|i| i.to_string()).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        r = step(&r, 1, push(false, &refs));
        let err = r.prepare(&push(true, &["one more"])).unwrap_err();
        assert!(err.to_string().contains("LIST_ELEMS_MAX"), "{err}");
        let big = "x".repeat(LIST_ELEM_LEN_MAX + 1);
        let err = Object::new(ObjType::List).prepare(&push(true, &[&big]));
        assert!(err.unwrap_err().to_string().contains("LIST_ELEM_LEN_MAX"));
        let chunk = "x".repeat(LIST_ELEM_LEN_MAX);
        let n = LIST_BYTES_MAX / LIST_ELEM_LEN_MAX + 1;
        let err = Object::new(ObjType::List).prepare(&push(true, &vec![chunk.as_str(); n]));
        assert!(err.unwrap_err().to_string().contains("LIST_BYTES_MAX"));
        let tag = |b: Vec<u8>| b[0];
        assert_eq!(tag(postcard::to_allocvec(&push(true, &[])).unwrap()), 10);
        assert_eq!(tag(postcard::to_allocvec(&ObjType::List).unwrap()), 5);
        let e = op(&Object::new(ObjType::List), 1, 1, push(true, &["a"])).effect;
        assert_eq!(tag(postcard::to_allocvec(&e).unwrap()), 11);
        let l = step(&Object::new(ObjType::List), 1, push(true, &["a"]));
        let bytes = postcard::to_allocvec(&l).unwrap();
        assert_eq!(bytes[0], 7, "List is the eighth state");
        assert_eq!(postcard::from_bytes::<Object>(&bytes).unwrap(), l);
        assert_eq!(
            postcard::to_allocvec(&ObjValue::List(vec![])).unwrap()[0],
            5
        );
    }

    /// A run in shared chunks behaves as the sorted vector it stands for, over random
    /// out-of-order inserts and removals at the ends and in the middle, and a copy taken
    /// midway is not changed by later writes to the original (chunks copy on write).
    #[test]
    fn chunked_runs_behave_as_sorted_vectors() {
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let mut run = Run::default();
        let mut model: Vec<Elem> = Vec::new();
        let mut frozen = None;
        for round in 0..3_000u64 {
            let ts = ArbTs {
                primary: if next(4) == 0 { next(round + 1) } else { round },
                secondary: 0,
            };
            let e = Elem {
                id: ElemId {
                    op: id(round),
                    index: 0,
                },
                ts,
                value: Arc::from(round.to_string().as_bytes()),
            };
            run.insert(e.clone());
            model.push(e);
            model.sort_by_key(Elem::key);
            if next(3) == 0 && !model.is_empty() {
                let at = match next(3) {
                    0 => 0,
                    1 => model.len() - 1,
                    _ => next(model.len() as u64) as usize,
                };
                let mut want: BTreeSet<ElemId> = [model.remove(at).id].into();
                run.remove_at_ends(&mut want);
                run.remove_anywhere(&mut want);
                assert!(want.is_empty());
            }
            if round == 1_500 {
                frozen = Some((run.clone(), model.clone()));
            }
            assert_eq!(run.len(), model.len());
        }
        assert!(run.iter().eq(model.iter()));
        assert!(run
            .chunks
            .iter()
            .all(|c| !c.is_empty() && c.len() <= 2 * CHUNK_MAX));
        let (copy, then) = frozen.expect("taken");
        assert!(copy.iter().eq(then.iter()), "the copy kept its elements");
        let bytes = postcard::to_allocvec(&run).unwrap();
        let back: Run = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(back, run, "equal whatever the chunks");
    }

    /// A list freed by popping everything takes another type, and a string freed by DEL
    /// takes a list (the `Part` rule).
    #[test]
    fn lists_retype() {
        let empty = Object::new(ObjType::Lww);
        let s = op(&empty, 1, 1, Update::Assign(b"v".to_vec()));
        let mut k = empty.clone();
        k.apply(&s);
        let part = |u: Update| Update::Part {
            key_type: ObjType::Lww,
            update: Box::new(u),
        };
        assert!(k.prepare(&part(push(true, &["a"]))).is_err());
        k = step(&k, 2, Update::Assign(super::super::TOMBSTONE.to_vec()));
        k = step(&k, 3, part(push(true, &["a"])));
        assert_eq!(k.shown_type(), Some(ObjType::List));
        assert_eq!(shown(&k), ["a"]);
        k = step(&k, 4, part(pop(false, 1)));
        assert_eq!(k.shown_type(), None);
    }
}
