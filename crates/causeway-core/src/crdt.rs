//! Op-based CRDTs: last-writer-wins register, PN counter, add-wins observed-remove set and
//! multi-value register.
//!
//! A client's intent is an [`Update`]. The replica that executes it turns it into an
//! [`Effect`] against the state the transaction observes ([`Object::prepare`], the
//! "generator" of op-based CRDTs: a set add or remove captures the add tags of its element
//! it observed, a multi-value assign the entries it overwrites). Effects travel in [`Op`]s
//! carrying a globally unique [`OpId`] and an arbitration timestamp supplied by the
//! protocol, and are applied at every replica exactly once ([`Object::apply`] ignores an id
//! it has seen). Delivered in any causal order, effects commute and replicas converge.
//!
//! **The set is the optimized add-wins OR-set** (Bieniusa et al., "An optimized
//! conflict-free replicated set", 2012): an element's state is the set of tags (op ids) of
//! the adds no later op of the element observed. A remove deletes the tags it observed; an
//! add inserts its own tag and deletes the tags it observed (`replaces` of [`Effect::Add`]), so
//! adding a member again and again keeps one tag, and an element holds at most one tag per
//! add concurrent with the others (no tombstones, no growth with re-adds).
//!
//! Why this commutes: an op only deletes tags its origin had applied when preparing it,
//! that is tags of ops in its causal past. The protocols deliver causally (an op is applied
//! after every op its origin had applied), so a deleted tag is always present, or already
//! deleted, when the deleting op arrives: it can never arrive later and reappear. Two
//! concurrent ops never delete each other's tags (neither observed the other), and deleting
//! a tag twice equals deleting it once, so concurrent ops applied in either order give the
//! same state. Add-wins follows: a remove concurrent with an add never names the add's tag.

use crate::error::Error;
use crate::ids::{OpId, Value};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The type of object a key holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ObjType {
    Lww,
    Counter,
    Set,
    MvReg,
}

impl ObjType {
    pub fn name(self) -> &'static str {
        match self {
            ObjType::Lww => "lww",
            ObjType::Counter => "counter",
            ObjType::Set => "set",
            ObjType::MvReg => "mvreg",
        }
    }

    pub fn parse(text: &str) -> Option<ObjType> {
        [ObjType::Lww, ObjType::Counter, ObjType::Set, ObjType::MvReg]
            .into_iter()
            .find(|t| t.name() == text)
    }
}

/// Why an increment was refused: it would overflow the counter's observed value.
pub const COUNTER_OVERFLOW: &str = "increment or decrement would overflow";

/// What a client asks to do to an object.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Update {
    /// Register assignment (lww).
    Assign(#[serde(with = "serde_bytes")] Value),
    /// Counter increment (negative to decrement).
    Increment(i64),
    /// Set insertion.
    Add(#[serde(with = "serde_bytes")] Value),
    /// Set removal of every add of the element that the transaction observed.
    Remove(#[serde(with = "serde_bytes")] Value),
    /// Multi-value register assignment.
    MvAssign(#[serde(with = "serde_bytes")] Value),
}

impl Update {
    pub fn obj_type(&self) -> ObjType {
        match self {
            Update::Assign(_) => ObjType::Lww,
            Update::Increment(_) => ObjType::Counter,
            Update::Add(_) | Update::Remove(_) => ObjType::Set,
            Update::MvAssign(_) => ObjType::MvReg,
        }
    }
}

/// The downstream effect of an update, prepared at the origin and applied everywhere.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Effect {
    Assign(#[serde(with = "serde_bytes")] Value),
    Increment(i64),
    /// Set insertion of `elem` with the op's id as its tag, deleting the tags of `elem`
    /// the adding transaction observed (a re-add keeps one tag per member).
    Add {
        #[serde(with = "serde_bytes")]
        elem: Value,
        replaces: Vec<OpId>,
    },
    /// Set removal of the tags of `elem` the removing transaction observed.
    Remove {
        #[serde(with = "serde_bytes")]
        elem: Value,
        tags: Vec<OpId>,
    },
    MvAssign {
        #[serde(with = "serde_bytes")]
        value: Value,
        dominated: Vec<OpId>,
    },
}

impl Effect {
    /// The ids of the ops this effect deletes.
    pub fn deleted_ids(&self) -> &[OpId] {
        match self {
            Effect::Add { replaces, .. } => replaces,
            Effect::Remove { tags, .. } => tags,
            Effect::MvAssign { dominated, .. } => dominated,
            Effect::Assign(_) | Effect::Increment(_) => &[],
        }
    }
}

/// Arbitration timestamp for last-writer-wins, chosen by the protocol so that it grows
/// along causality; ties are broken by the op id. Compared lexicographically.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct ArbTs {
    pub primary: u64,
    pub secondary: u64,
}

impl ArbTs {
    /// Above every committed timestamp: used for a transaction's own buffered writes,
    /// which are newer than anything in its snapshot.
    pub const PENDING: ArbTs = ArbTs {
        primary: u64::MAX,
        secondary: u64::MAX,
    };
}

/// An effect with its unique id and arbitration timestamp.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Op {
    pub id: OpId,
    pub ts: ArbTs,
    pub effect: Effect,
}

/// The tags of `elem` a transaction observes in `elems`: what its add or remove deletes
/// (in ascending order, which [`Tags::remove_all`] merges in one pass).
fn tags_of(elems: &BTreeMap<Value, Tags>, elem: &Value) -> Vec<OpId> {
    elems.get(elem).map(|t| t.0.clone()).unwrap_or_default()
}

/// The live tags of one set element: op ids, ascending, without repeats.
///
/// A sorted vector, not a `BTreeSet`: an element holds one tag per add concurrent with
/// the others, so 50 clients re-adding one member keep about 50 tags, and every add
/// deletes the ~50 it observed. Fifty B-tree removals per applied add (and a B-tree clone
/// per snapshot copy) were a fifth of such a SADD's instructions; a merge of two sorted
/// vectors and a flat copy cost a fraction. It encodes as the set did (a length, then the
/// ids in ascending order), so stored states decode unchanged; decoding sorts and
/// removes repeats, so the invariant holds whatever the bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Tags(Vec<OpId>);

impl<'de> Deserialize<'de> for Tags {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Tags, D::Error> {
        let mut ids = Vec::<OpId>::deserialize(d)?;
        ids.sort_unstable();
        ids.dedup();
        Ok(Tags(ids))
    }
}

impl Tags {
    /// Adds `id` (a no-op if present). An add's own id is usually the newest: a push.
    pub fn insert(&mut self, id: OpId) {
        match self.0.last() {
            Some(last) if *last >= id => {
                if let Err(at) = self.0.binary_search(&id) {
                    self.0.insert(at, id);
                }
            }
            _ => self.0.push(id),
        }
    }

    /// Removes every id of `ids` present: one merge when `ids` ascend (a generator's
    /// list does), a search per tag otherwise.
    pub fn remove_all(&mut self, ids: &[OpId]) {
        if ids.is_empty() || self.0.is_empty() {
            return;
        }
        if ids.is_sorted() {
            let mut j = 0;
            self.0.retain(|t| {
                while j < ids.len() && ids[j] < *t {
                    j += 1;
                }
                ids.get(j) != Some(t)
            });
        } else {
            self.0.retain(|t| !ids.contains(t));
        }
    }

    pub fn iter(&self) -> std::slice::Iter<'_, OpId> {
        self.0.iter()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<'a> IntoIterator for &'a Tags {
    type Item = &'a OpId;
    type IntoIter = std::slice::Iter<'a, OpId>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// The state of one object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum State {
    Lww {
        #[serde(with = "serde_bytes")]
        value: Option<Value>,
        winner: Option<(ArbTs, OpId)>,
    },
    Counter {
        value: i64,
    },
    Set {
        elems: BTreeMap<Value, Tags>,
    },
    MvReg {
        entries: BTreeMap<OpId, Value>,
    },
}

/// One object replica: its state plus the ids of the operations already applied.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Object {
    pub state: State,
    seen: BTreeSet<OpId>,
}

impl Object {
    pub fn new(obj_type: ObjType) -> Object {
        let state = match obj_type {
            ObjType::Lww => State::Lww {
                value: None,
                winner: None,
            },
            ObjType::Counter => State::Counter { value: 0 },
            ObjType::Set => State::Set {
                elems: BTreeMap::new(),
            },
            ObjType::MvReg => State::MvReg {
                entries: BTreeMap::new(),
            },
        };
        Object {
            state,
            seen: BTreeSet::new(),
        }
    }

    /// This object's state without the ids of the operations it applied: what a reader or
    /// a generator needs. The ids grow with every write to the key, and copying them into
    /// every read reply made a hot key's read cost grow with its history.
    pub fn state_only(&self) -> Object {
        Object {
            state: self.state.clone(),
            seen: BTreeSet::new(),
        }
    }

    pub fn obj_type(&self) -> ObjType {
        match self.state {
            State::Lww { .. } => ObjType::Lww,
            State::Counter { .. } => ObjType::Counter,
            State::Set { .. } => ObjType::Set,
            State::MvReg { .. } => ObjType::MvReg,
        }
    }

    /// Generator: turns an update into the effect to replicate, against this state.
    /// Refuses a type mismatch, and an increment that overflows the observed value.
    pub fn prepare(&self, update: &Update) -> Result<Effect, Error> {
        if update.obj_type() != self.obj_type() {
            return Err(Error::WrongType {
                expected: self.obj_type(),
                found: update.obj_type(),
            });
        }
        Ok(match (update, &self.state) {
            (Update::Assign(v), _) => Effect::Assign(v.clone()),
            // Refused when it would overflow the value this update observes (the
            // generator's precondition; concurrent increments still add up wrapping).
            (Update::Increment(d), State::Counter { value }) => match value.checked_add(*d) {
                Some(_) => Effect::Increment(*d),
                None => return Err(Error::InvalidState(COUNTER_OVERFLOW.into())),
            },
            (Update::Add(e), State::Set { elems }) => Effect::Add {
                elem: e.clone(),
                replaces: tags_of(elems, e),
            },
            (Update::Remove(e), State::Set { elems }) => Effect::Remove {
                elem: e.clone(),
                tags: tags_of(elems, e),
            },
            (Update::MvAssign(v), State::MvReg { entries }) => Effect::MvAssign {
                value: v.clone(),
                dominated: entries.keys().copied().collect(),
            },
            _ => unreachable!("type checked above"),
        })
    }

    /// Effector: applies `op` unless its id was applied before. Returns whether it applied.
    /// An effect of the wrong type is an invariant violation (types are checked at prepare).
    ///
    /// The ids the op deletes (a set's replaced or removed tags, a multi-value register's
    /// dominated entries) count as seen from now on: under causal delivery they were
    /// applied already, but a protocol without it (`eventual`) may deliver the deleting op
    /// first, and the deleted op, arriving later, must not come back (replicas would keep
    /// different tags for ever). Such a late op's own deletions still take effect: an add
    /// that replaced an older tag, arriving after an op that replaced it in turn, must
    /// still remove that older tag (delivered in between, it would stay live here only).
    /// For an op applied before, that is a no-op (what it deleted is gone and seen).
    pub fn apply(&mut self, op: &Op) -> bool {
        if !self.seen.insert(op.id) {
            self.apply_deletions(op);
            return false;
        }
        self.apply_effect(op);
        self.seen.extend(op.effect.deleted_ids().iter().copied());
        true
    }

    /// The deletions of `op` alone (the ids it replaces, removes or dominates).
    fn apply_deletions(&mut self, op: &Op) {
        match (&mut self.state, &op.effect) {
            (
                State::Set { elems },
                Effect::Add {
                    elem,
                    replaces: ids,
                },
            )
            | (State::Set { elems }, Effect::Remove { elem, tags: ids }) => {
                if let Some(live) = elems.get_mut(elem) {
                    live.remove_all(ids);
                    if live.is_empty() {
                        elems.remove(elem);
                    }
                }
            }
            (State::MvReg { entries }, Effect::MvAssign { dominated, .. }) => {
                for d in dominated {
                    entries.remove(d);
                }
            }
            _ => {}
        }
        self.seen.extend(op.effect.deleted_ids().iter().copied());
    }

    /// [`Object::apply_effect`] of an op its caller no longer needs: an assigned value
    /// moves in instead of being copied (GC folds each version into its key's checkpoint
    /// so, and drops the version).
    pub fn apply_effect_owned(&mut self, op: Op) {
        let Op { id, ts, effect } = op;
        if let State::Lww { value, winner } = &mut self.state {
            if let Effect::Assign(v) = effect {
                let candidate = (ts, id);
                if winner.is_none_or(|w| candidate > w) {
                    *value = Some(v);
                    *winner = Some(candidate);
                }
                return;
            }
        }
        self.apply_effect(&Op { id, ts, effect });
    }

    /// Applies without recording the id: for a transaction's private view of its own
    /// buffered writes on top of a snapshot, which is thrown away after the read.
    pub fn apply_effect(&mut self, op: &Op) {
        match (&mut self.state, &op.effect) {
            (State::Lww { value, winner }, Effect::Assign(v)) => {
                let candidate = (op.ts, op.id);
                if winner.is_none_or(|w| candidate > w) {
                    *value = Some(v.clone());
                    *winner = Some(candidate);
                }
            }
            (State::Counter { value }, Effect::Increment(d)) => *value = value.wrapping_add(*d),
            (State::Set { elems }, Effect::Add { elem, replaces }) => {
                assert!(!replaces.contains(&op.id), "add {} replaces itself", op.id);
                // A re-add finds the element live: no copy of it (a replay of a hot
                // set's versions re-adds one member again and again).
                let live = match elems.get_mut(elem) {
                    Some(live) => live,
                    None => elems.entry(elem.clone()).or_default(),
                };
                live.remove_all(replaces);
                live.insert(op.id);
            }
            (State::Set { elems }, Effect::Remove { elem, tags }) => {
                if let Some(live) = elems.get_mut(elem) {
                    live.remove_all(tags);
                    if live.is_empty() {
                        elems.remove(elem);
                    }
                }
            }
            (State::MvReg { entries }, Effect::MvAssign { value, dominated }) => {
                for d in dominated {
                    entries.remove(d);
                }
                entries.insert(op.id, value.clone());
            }
            (state, effect) => {
                panic!("effect {effect:?} applied to {state:?}: type invariant broken")
            }
        }
    }

    /// A copy of the state without the ids applied to it: for a reader or a generator
    /// (a transaction's snapshot), which never applies a replicated op to its copy and so
    /// needs no dedup set. Copying a hot key's set of ids was most of the cost of a read.
    pub fn clone_state(&self) -> Object {
        Object {
            state: self.state.clone(),
            seen: BTreeSet::new(),
        }
    }

    /// Records `ids` as applied without applying anything: for a state rebuilt from
    /// effects replayed alone ([`Object::apply_effect`]) that is handed to a reader who
    /// applies more ops with their dedup (`ids` are then the replayed ops' and the ids
    /// they deleted: what [`Object::apply`] would have recorded).
    pub fn note_seen(&mut self, ids: impl IntoIterator<Item = OpId>) {
        self.seen.extend(ids);
    }

    /// The ids applied to this replica (and not forgotten since).
    pub fn seen_ids(&self) -> impl Iterator<Item = &OpId> {
        self.seen.iter()
    }

    /// Whether the op id was applied to this replica (and not forgotten since).
    pub fn has_seen(&self, id: &OpId) -> bool {
        self.seen.contains(id)
    }

    /// Forgets applied ids for which `keep` is false. A protocol calls this once it can
    /// rule out redelivery of those ops by other means (a checkpoint's vector clock, say),
    /// so the dedup set stays bounded.
    pub fn forget_seen(&mut self, keep: impl Fn(&OpId) -> bool) {
        self.seen.retain(|id| keep(id));
    }

    /// The value a client reads.
    pub fn value(&self) -> crate::api::ObjValue {
        use crate::api::ObjValue;
        match &self.state {
            State::Lww { value, .. } => ObjValue::Lww(value.clone()),
            State::Counter { value } => ObjValue::Counter(*value),
            State::Set { elems } => ObjValue::Set(elems.keys().cloned().collect()),
            State::MvReg { entries } => {
                let mut values: Vec<Value> = entries.values().cloned().collect();
                values.sort();
                values.dedup();
                ObjValue::MvReg(values)
            }
        }
    }

    /// The ids of the writes a read of this state observes, for histories: the winning
    /// assignment of a register, the visible adds of a set, the concurrent assignments of
    /// a multi-value register; a counter reports none (its value sums every increment).
    pub fn observed(&self) -> Vec<OpId> {
        match &self.state {
            State::Lww { winner, .. } => winner.iter().map(|(_, id)| *id).collect(),
            State::Counter { .. } => Vec::new(),
            State::Set { elems } => {
                let mut ids: Vec<OpId> = elems.values().flatten().copied().collect();
                ids.sort();
                ids
            }
            State::MvReg { entries } => entries.keys().copied().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys and values encode as byte strings (`serde_bytes`) exactly as they did as
    /// sequences of u8, in postcard (records, the peer wire) and in JSON (histories), and
    /// JSON arrays of bytes still decode: nothing written before changes meaning.
    #[test]
    fn byte_strings_encode_as_the_sequences_they_were() {
        use crate::ids::Key;
        #[derive(Serialize)]
        struct SeqKey(Vec<u8>);
        #[derive(Serialize)]
        enum SeqEffect {
            _Assign(Vec<u8>),
            _Increment(i64),
            Add { elem: Vec<u8>, replaces: Vec<OpId> },
        }
        let bytes: Vec<u8> = (0..=255)
            .chain(b"key:000000000001".iter().copied())
            .collect();
        let key = Key(bytes.clone());
        let plain = SeqKey(bytes.clone());
        assert_eq!(
            postcard::to_allocvec(&key).unwrap(),
            postcard::to_allocvec(&plain).unwrap()
        );
        let json = serde_json::to_string(&key).unwrap();
        assert_eq!(json, serde_json::to_string(&plain).unwrap());
        assert_eq!(serde_json::from_str::<Key>(&json).unwrap(), key);
        let op = OpId {
            txn: TxnId {
                session: SessionId(3),
                seq: 4,
            },
            index: 1,
        };
        let add = Effect::Add {
            elem: bytes.clone(),
            replaces: vec![op],
        };
        let seq_add = SeqEffect::Add {
            elem: bytes.clone(),
            replaces: vec![op],
        };
        let encoded = postcard::to_allocvec(&add).unwrap();
        assert_eq!(encoded, postcard::to_allocvec(&seq_add).unwrap());
        assert_eq!(postcard::from_bytes::<Effect>(&encoded).unwrap(), add);
        #[derive(Serialize)]
        struct SeqLww(Option<Vec<u8>>);
        for value in [None, Some(bytes.clone())] {
            let lww = crate::api::ObjValue::Lww(value.clone());
            let encoded = postcard::to_allocvec(&lww).unwrap();
            assert_eq!(
                encoded[1..],
                postcard::to_allocvec(&SeqLww(value)).unwrap()[..]
            );
            assert_eq!(
                postcard::from_bytes::<crate::api::ObjValue>(&encoded).unwrap(),
                lww
            );
        }
        let assign = Update::Assign(bytes.clone());
        let json = serde_json::to_string(&assign).unwrap();
        assert_eq!(serde_json::from_str::<Update>(&json).unwrap(), assign);
    }
    use crate::ids::{SessionId, TxnId};

    fn id(seq: u64, index: u32) -> OpId {
        OpId {
            txn: TxnId {
                session: SessionId(seq % 3),
                seq,
            },
            index,
        }
    }

    /// An op applied by value leaves the object as the same op applied by reference,
    /// whichever effect and whether it wins or loses its register.
    #[test]
    fn an_op_applied_by_value_gives_what_it_gives_by_reference() {
        let at = |primary, seq, effect| Op {
            id: id(seq, 0),
            ts: ArbTs {
                primary,
                secondary: primary,
            },
            effect,
        };
        let cases = [
            (ObjType::Lww, at(5, 1, Effect::Assign(b"new".to_vec()))),
            (ObjType::Lww, at(1, 1, Effect::Assign(b"old".to_vec()))),
            (ObjType::Counter, at(5, 1, Effect::Increment(4))),
            (
                ObjType::Set,
                at(
                    5,
                    1,
                    Effect::Add {
                        elem: b"m".to_vec(),
                        replaces: vec![id(2, 0)],
                    },
                ),
            ),
        ];
        for (t, op) in cases {
            let mut by_ref = Object::new(t);
            by_ref.apply_effect(&at(3, 2, first_effect(t)));
            let mut by_value = by_ref.clone();
            by_ref.apply_effect(&op);
            by_value.apply_effect_owned(op.clone());
            assert_eq!(by_value, by_ref, "{op:?}");
        }
    }

    /// An object's state before the op under test: a register at time 3, etc.
    fn first_effect(t: ObjType) -> Effect {
        match t {
            ObjType::Counter => Effect::Increment(1),
            ObjType::Set => Effect::Add {
                elem: b"m".to_vec(),
                replaces: Vec::new(),
            },
            _ => Effect::Assign(b"mid".to_vec()),
        }
    }

    /// `Tags` does what the `BTreeSet` it replaced did, over random inserts and removals
    /// of ascending, unordered and repeated lists, and encodes to the set's bytes (so a
    /// stored state decodes unchanged); decoding unordered, repeated bytes gives the set.
    #[test]
    fn tags_behave_and_encode_as_the_ordered_set_they_replaced() {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let mut tags = Tags::default();
        let mut model = BTreeSet::new();
        for round in 0..2_000 {
            let fresh = id(next(40), next(2) as u32);
            tags.insert(fresh);
            model.insert(fresh);
            let mut ids: Vec<OpId> = (0..next(6)).map(|_| id(next(40), next(2) as u32)).collect();
            if round % 2 == 0 {
                ids.sort();
            }
            tags.remove_all(&ids);
            for i in &ids {
                model.remove(i);
            }
            let want: Vec<OpId> = model.iter().copied().collect();
            assert_eq!(
                tags.iter().copied().collect::<Vec<_>>(),
                want,
                "round {round}"
            );
            assert_eq!(tags.len(), model.len());
            let bytes = postcard::to_allocvec(&tags).expect("encodes");
            assert_eq!(bytes, postcard::to_allocvec(&model).expect("encodes"));
            let back: Tags = postcard::from_bytes(&bytes).expect("decodes");
            assert_eq!(back, tags);
        }
        let messy = vec![id(5, 0), id(1, 0), id(5, 0), id(3, 1)];
        let bytes = postcard::to_allocvec(&messy).expect("encodes");
        let decoded: Tags = postcard::from_bytes(&bytes).expect("decodes");
        let want: BTreeSet<OpId> = messy.into_iter().collect();
        assert_eq!(decoded.iter().copied().collect::<BTreeSet<_>>(), want);
        assert!(decoded.iter().is_sorted() && decoded.len() == want.len());
    }
}
