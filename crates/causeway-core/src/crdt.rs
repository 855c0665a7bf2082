//! Op-based CRDTs: last-writer-wins register (which also counts, below), PN counter, add-wins
//! observed-remove set and multi-value register.
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
//!
//! **The register counts** (a Redis string that `INCR` updates, as Redis Active-Active
//! treats a string used as a counter): [`Update::RegisterIncrement`] adds to a register
//! that holds a decimal integer. Its value is the winning assignment plus every increment
//! that assignment did not observe. Each assignment carries the sum of the increments its
//! transaction observed ([`Effect::CountedAssign`]'s `base`), the state the sum of every
//! increment applied (`total`), so the value is `winner + (total - winner's base)`: an
//! increment concurrent with a `SET` survives it, one the `SET` saw is replaced by it. A
//! sum and a maximum commute, so replicas converge whatever the delivery order. A winner
//! that is no decimal integer shows as assigned (the increments are dropped), an absent
//! one counts as 0. A register that never counted keeps [`State::Lww`] and plain
//! [`Effect::Assign`]s; its first increment turns it into [`State::CountedLww`], so
//! states, records and wire messages of registers that never count are unchanged.
//!
//! **A key freed by `DEL` takes any type again.** The stores keep a key's type of its first
//! write (its home). While the key shows nothing ([`TOMBSTONE`] or no value, a counter of 0,
//! no member), an update of another type may take it: [`Update::Part`] wraps it, its effect
//! is an [`Effect::Part`] of the home type (so every store handles it as the key's own), and
//! the state becomes [`State::Parts`]: the home state plus one part per other type written,
//! each with the greatest `(timestamp, id)` of its ops. The key shows the non-empty other part
//! with the greatest of those, else its home ([`shown_type`]). Each part is a CRDT of its own
//! and the choice is a maximum, so replicas agree in any delivery order. The rule this gives:
//! a write of another type after a `DEL` wins over writes of the home type concurrent with
//! them (they stay hidden in the home part until a `DEL` of what shows reaches them too).
//! Keys that never change type keep their states and effects byte for byte.

pub mod hash;
pub mod list;
#[cfg(test)]
mod test_ops;
pub mod zset;

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
    /// A Redis hash ([`hash`]). Last, so the encodings above stay as they were.
    Hash,
    /// A Redis list ([`list`]). Last, like the one above.
    List,
    /// A Redis sorted set ([`zset`]). Last, like the ones above.
    ZSet,
}

impl ObjType {
    /// Every type, in declaration order.
    pub const ALL: [ObjType; 7] = [
        ObjType::Lww,
        ObjType::Counter,
        ObjType::Set,
        ObjType::MvReg,
        ObjType::Hash,
        ObjType::List,
        ObjType::ZSet,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ObjType::Lww => "lww",
            ObjType::Counter => "counter",
            ObjType::Set => "set",
            ObjType::MvReg => "mvreg",
            ObjType::Hash => "hash",
            ObjType::List => "list",
            ObjType::ZSet => "zset",
        }
    }

    pub fn parse(text: &str) -> Option<ObjType> {
        ObjType::ALL.into_iter().find(|t| t.name() == text)
    }
}

/// The value a deleted register holds (`DEL` assigns it; readers show it as absent): a
/// register holding it shows nothing, so a write of another type may take the key.
pub const TOMBSTONE: &[u8] = b"\x00causeway:deleted\x00";

/// Why an increment was refused: it would overflow the counter's observed value.
pub const COUNTER_OVERFLOW: &str = "increment or decrement would overflow";

/// Why a register increment was refused: the register holds no decimal integer (Redis's
/// words for it).
pub const NOT_AN_INTEGER: &str = "value is not an integer or out of range";

/// The integer a register value spells, in Redis's canonical form only (no sign `+`, no
/// leading zeros or spaces, no `-0`): what `INCR` accepts, so that a value printed back
/// after an increment is the one Redis would print.
pub fn decimal(value: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(value).ok()?;
    let n: i64 = text.parse().ok()?;
    (n.to_string() == text).then_some(n)
}

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
    /// Increment of a register holding a decimal integer (absent counts as 0); refused
    /// when it holds something else or the sum would overflow. Last so that encodings of
    /// the variants above stay as they were.
    RegisterIncrement(i64),
    /// `update`, of another type than the key's own (`key_type`, the type of its first
    /// write): allowed while the key shows nothing (a key freed by `DEL` takes any type
    /// again; see the module docs). Last, like the variant above.
    Part {
        key_type: ObjType,
        update: Box<Update>,
    },
    /// `HSET` of one field: a last-writer-wins register per field (see [`hash`]). The
    /// hash variants go last, like the two above.
    HashSet {
        #[serde(with = "serde_bytes")]
        field: Value,
        #[serde(with = "serde_bytes")]
        value: Value,
    },
    /// `HINCRBY` of one field: the field counts (absent counts as 0); refused when it
    /// holds no decimal integer or the sum would overflow.
    HashIncrement {
        #[serde(with = "serde_bytes")]
        field: Value,
        delta: i64,
    },
    /// `HDEL` of one field: removes what of it the transaction observed.
    HashRemove {
        #[serde(with = "serde_bytes")]
        field: Value,
    },
    /// `LPUSH` (`left`) or `RPUSH` of `values`, in command order (see [`list`]). The
    /// list variants go last, like the hash ones.
    ListPush { left: bool, values: Vec<Value> },
    /// `LPOP` (`left`) or `RPOP` of up to `count` elements the transaction observes.
    ListPop { left: bool, count: u64 },
    /// `ZADD` of one member with its score (`f64::to_bits`; see [`zset`]). The sorted-set
    /// variants go last, like the list ones.
    ZAdd {
        #[serde(with = "serde_bytes")]
        member: Value,
        score: u64,
    },
    /// `ZINCRBY` of one member by `delta` (`f64::to_bits`; absent counts as 0).
    ZIncrement {
        #[serde(with = "serde_bytes")]
        member: Value,
        delta: u64,
    },
    /// `ZREM` of members: removes what of each the transaction observed.
    ZRemove { members: Vec<Value> },
}

impl Update {
    pub fn obj_type(&self) -> ObjType {
        match self {
            Update::Assign(_) | Update::RegisterIncrement(_) => ObjType::Lww,
            Update::Increment(_) => ObjType::Counter,
            Update::Add(_) | Update::Remove(_) => ObjType::Set,
            Update::MvAssign(_) => ObjType::MvReg,
            Update::Part { key_type, .. } => *key_type,
            Update::HashSet { .. } | Update::HashIncrement { .. } | Update::HashRemove { .. } => {
                ObjType::Hash
            }
            Update::ListPush { .. } | Update::ListPop { .. } => ObjType::List,
            Update::ZAdd { .. } | Update::ZIncrement { .. } | Update::ZRemove { .. } => {
                ObjType::ZSet
            }
        }
    }

    /// The update itself, or the one a [`Update::Part`] wraps.
    pub fn own(&self) -> &Update {
        match self {
            Update::Part { update, .. } => update,
            plain => plain,
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
    /// Register increment (see the module docs: the register counts).
    RegisterIncrement(i64),
    /// Register assignment that observed increments summing to `base` (a plain
    /// [`Effect::Assign`] observed none, or a sum of 0).
    CountedAssign {
        #[serde(with = "serde_bytes")]
        value: Value,
        base: i64,
    },
    /// `effect` applied to the key's part of its type, on a key whose own type is
    /// `key_type` ([`Update::Part`]). Last, so the encodings above stay as they were.
    Part {
        key_type: ObjType,
        effect: Box<Effect>,
    },
    /// `HSET` of `field`, replacing the live writes of it the transaction observed and
    /// the increments they sum to (`base`, the field's total it observed). The hash
    /// variants go last, like the one above.
    HashSet {
        #[serde(with = "serde_bytes")]
        field: Value,
        #[serde(with = "serde_bytes")]
        value: Value,
        base: i64,
        replaces: Vec<OpId>,
    },
    /// `HINCRBY` of `field`, replacing the tags of the increments it observed.
    HashIncrement {
        #[serde(with = "serde_bytes")]
        field: Value,
        delta: i64,
        replaces: Vec<OpId>,
    },
    /// `HDEL` of `field`: removes the live writes it observed (`tags`) and resets the
    /// increments they sum to (`base`).
    HashRemove {
        #[serde(with = "serde_bytes")]
        field: Value,
        base: i64,
        tags: Vec<OpId>,
    },
    /// A push of `values` at the left (`left`) or right end; element `i` has id
    /// `(op id, i)` (see [`list`]). The list variants go last, like the hash ones.
    ListPush {
        left: bool,
        values: Vec<Value>,
    },
    /// A pop: removes the elements `ids` the popping transaction observed; `ts[i]` is the
    /// timestamp it saw element `i` pushed at (how a replica finds it without a scan).
    ListRemove {
        ids: Vec<list::ElemId>,
        ts: Vec<ArbTs>,
    },
    /// `ZADD` of `member` with `score` (`f64::to_bits`), replacing the live writes of it
    /// the transaction observed and the increments they sum to (`base`). The sorted-set
    /// variants go last, like the list ones.
    ZAdd {
        #[serde(with = "serde_bytes")]
        member: Value,
        score: u64,
        base: i128,
        replaces: Vec<OpId>,
    },
    /// `ZINCRBY` of `member` by `delta` (64.64 fixed point), replacing the tags of the
    /// increments it observed.
    ZIncrement {
        #[serde(with = "serde_bytes")]
        member: Value,
        delta: i128,
        replaces: Vec<OpId>,
    },
    /// `ZREM` of members: of each, the live writes it observed and their increment sum.
    ZRemove {
        members: Vec<zset::ZRemoved>,
    },
}

impl Effect {
    /// The effect itself, or the one a [`Effect::Part`] wraps.
    pub fn own(&self) -> &Effect {
        match self {
            Effect::Part { effect, .. } => effect,
            plain => plain,
        }
    }

    /// The type of object the effect applies to.
    pub fn obj_type(&self) -> ObjType {
        match self {
            Effect::Assign(_) | Effect::RegisterIncrement(_) | Effect::CountedAssign { .. } => {
                ObjType::Lww
            }
            Effect::Increment(_) => ObjType::Counter,
            Effect::Add { .. } | Effect::Remove { .. } => ObjType::Set,
            Effect::MvAssign { .. } => ObjType::MvReg,
            Effect::Part { key_type, .. } => *key_type,
            Effect::HashSet { .. } | Effect::HashIncrement { .. } | Effect::HashRemove { .. } => {
                ObjType::Hash
            }
            Effect::ListPush { .. } | Effect::ListRemove { .. } => ObjType::List,
            Effect::ZAdd { .. } | Effect::ZIncrement { .. } | Effect::ZRemove { .. } => {
                ObjType::ZSet
            }
        }
    }

    /// Whether this applies to a part of another type than the key's own.
    pub fn is_part(&self) -> bool {
        matches!(self, Effect::Part { .. })
    }

    /// The ids of the ops this effect deletes.
    pub fn deleted_ids(&self) -> &[OpId] {
        match self {
            Effect::Add { replaces, .. } => replaces,
            Effect::Remove { tags, .. } => tags,
            Effect::MvAssign { dominated, .. } => dominated,
            Effect::Part { effect, .. } => effect.deleted_ids(),
            Effect::HashSet { replaces, .. } | Effect::HashIncrement { replaces, .. } => replaces,
            Effect::HashRemove { tags, .. } => tags,
            Effect::ZAdd { replaces, .. } | Effect::ZIncrement { replaces, .. } => replaces,
            // A pop deletes elements, not whole pushes: `list` keeps its own record.
            Effect::Assign(_)
            | Effect::Increment(_)
            | Effect::RegisterIncrement(_)
            | Effect::CountedAssign { .. }
            | Effect::ListPush { .. }
            | Effect::ListRemove { .. } => &[],
            // A remove names the tags of many members: `zset` keeps its own record of the
            // ones it deletes before they arrive (`zset::Member::gone`).
            Effect::ZRemove { .. } => &[],
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

    pub fn has(&self, id: &OpId) -> bool {
        self.0.binary_search(id).is_ok()
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
    /// A register that counted: [`State::Lww`] plus the winner's `base` and the sum of
    /// every increment applied (`total`). Last, so stored states of the others decode.
    CountedLww {
        #[serde(with = "serde_bytes")]
        value: Option<Value>,
        winner: Option<(ArbTs, OpId)>,
        base: i64,
        total: i64,
    },
    /// A key that took other types after it showed nothing: its own type's state
    /// (`home`) and one part per other type written since, each with the greatest
    /// `(timestamp, id)` of the ops applied to it. Last, so stored states decode.
    Parts {
        home: Box<State>,
        parts: BTreeMap<ObjType, Part>,
    },
    /// A hash: its fields ([`hash`]). Last, like the one above.
    Hash {
        fields: BTreeMap<Value, hash::Field>,
    },
    /// A list ([`list`]). Last, like the ones above.
    List(list::ListState),
    /// A sorted set: its members ([`zset`]). Last, like the ones above.
    ZSet {
        members: BTreeMap<Value, zset::Member>,
    },
}

/// One part of [`State::Parts`]: a state of another type than the key's own.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Part {
    pub state: State,
    pub last: (ArbTs, OpId),
}

/// A fresh state of `obj_type`.
fn new_state(obj_type: ObjType) -> State {
    match obj_type {
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
        ObjType::Hash => State::Hash {
            fields: BTreeMap::new(),
        },
        ObjType::List => State::List(list::ListState::default()),
        ObjType::ZSet => State::ZSet {
            members: BTreeMap::new(),
        },
    }
}

/// The type of a state (of its own part, for [`State::Parts`]).
fn state_type(state: &State) -> ObjType {
    match state {
        State::Lww { .. } | State::CountedLww { .. } => ObjType::Lww,
        State::Counter { .. } => ObjType::Counter,
        State::Set { .. } => ObjType::Set,
        State::MvReg { .. } => ObjType::MvReg,
        State::Hash { .. } => ObjType::Hash,
        State::List(_) => ObjType::List,
        State::ZSet { .. } => ObjType::ZSet,
        State::Parts { home, .. } => state_type(home),
    }
}

/// The type a state shows, `None` when it shows nothing (no value, a counter of 0, no
/// member): then a write of any type may take the key.
///
/// Of a [`State::Parts`]: the non-empty part of another type with the greatest `last`,
/// else its own part if non-empty. Each part converges (its ops reach it in any order)
/// and `last` is a maximum, so every replica shows the same type.
fn shown_type(state: &State) -> Option<ObjType> {
    let gone = |v: Option<&Value>| v.is_none_or(|v| v.as_slice() == TOMBSTONE);
    let empty = match state {
        State::Lww { value, .. } => gone(value.as_ref()),
        State::CountedLww {
            value, base, total, ..
        } => gone(counted_value(value, total.wrapping_sub(*base)).as_ref()),
        State::Counter { value } => *value == 0,
        State::Set { elems } => elems.is_empty(),
        State::MvReg { entries } => entries.values().all(|v| gone(Some(v))),
        State::Hash { fields } => !fields.values().any(hash::Field::shows),
        State::List(l) => l.is_empty(),
        State::ZSet { members } => !members.values().any(zset::Member::shows),
        State::Parts { home, parts } => {
            let newest = parts
                .iter()
                .filter(|(_, p)| shown_type(&p.state).is_some())
                .max_by_key(|(_, p)| p.last);
            return newest.map(|(t, _)| *t).or_else(|| shown_type(home));
        }
    };
    (!empty).then(|| state_type(state))
}

/// The part of `state` a read or write of `t` sees: its own for `t` of its type, the
/// part of `t` of a [`State::Parts`], else `None` (a fresh state of `t`).
fn part_of(state: &State, t: ObjType) -> Option<&State> {
    match state {
        State::Parts { home, parts } if state_type(home) != t => parts.get(&t).map(|p| &p.state),
        State::Parts { home, .. } => Some(home),
        s if state_type(s) == t => Some(s),
        _ => None,
    }
}

/// The value a counted register shows: the winner plus the increments it did not observe
/// (`delta`); a winner that is no decimal integer as assigned, an absent one as 0.
fn counted_value(value: &Option<Value>, delta: i64) -> Option<Value> {
    match value {
        _ if delta == 0 => value.clone(),
        None => Some(delta.to_string().into_bytes()),
        Some(v) => match decimal(v) {
            Some(n) => Some(n.wrapping_add(delta).to_string().into_bytes()),
            None => Some(v.clone()),
        },
    }
}

/// A register's state as a counted one (a no-op if it is one already).
fn make_counted(state: &mut State) {
    if let State::Lww { value, winner } = state {
        *state = State::CountedLww {
            value: value.take(),
            winner: winner.take(),
            base: 0,
            total: 0,
        };
    }
}

/// One object replica: its state plus the ids of the operations already applied.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Object {
    pub state: State,
    seen: BTreeSet<OpId>,
}

impl Object {
    pub fn new(obj_type: ObjType) -> Object {
        Object {
            state: new_state(obj_type),
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

    /// The key's own type (the type of its first write), whatever it shows now.
    pub fn obj_type(&self) -> ObjType {
        state_type(&self.state)
    }

    /// The type the object shows, `None` when it shows nothing: a write of another type
    /// is allowed then ([`Update::Part`]).
    pub fn shown_type(&self) -> Option<ObjType> {
        shown_type(&self.state)
    }

    /// Whether the key holds parts of other types ([`State::Parts`]).
    pub fn has_parts(&self) -> bool {
        matches!(self.state, State::Parts { .. })
    }

    /// Whether this is a register that counted ([`State::CountedLww`]), or a key with
    /// parts of other types: its assignments then depend on the state they observe (the
    /// increments they replace, the type the key shows), so none is blind.
    pub fn counts(&self) -> bool {
        matches!(self.state, State::CountedLww { .. } | State::Parts { .. })
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
        if matches!(update, Update::Part { .. }) || self.has_parts() {
            return self.prepare_part(update);
        }
        Ok(match (update, &self.state) {
            // An assignment replaces the increments it observed (their sum, `base`).
            (Update::Assign(v), State::CountedLww { total, .. }) if *total != 0 => {
                Effect::CountedAssign {
                    value: v.clone(),
                    base: *total,
                }
            }
            (Update::Assign(v), _) => Effect::Assign(v.clone()),
            (Update::RegisterIncrement(d), _) => self.prepare_register_increment(*d)?,
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
            (u, State::Hash { fields }) => hash::prepare(fields, u)?,
            (u, State::List(l)) => list::prepare(l, u)?,
            (u, State::ZSet { members }) => zset::prepare(members, u)?,
            _ => unreachable!("type checked above"),
        })
    }

    /// Generator of an update of a key with parts, or of a part of another type: the key
    /// must show nothing or the update's type, and the update is prepared against the
    /// part of its type (wrapped in [`Effect::Part`] when that is not the key's own).
    fn prepare_part(&self, update: &Update) -> Result<Effect, Error> {
        let inner = match update {
            Update::Part { update, .. } => update.as_ref(),
            plain => plain,
        };
        if matches!(inner, Update::Part { .. }) {
            return Err(Error::InvalidState("a part of a part".into()));
        }
        let t = inner.obj_type();
        match self.shown_type() {
            Some(shown) if shown != t => {
                return Err(Error::WrongType {
                    expected: shown,
                    found: t,
                })
            }
            _ => {}
        }
        let part = Object {
            state: part_of(&self.state, t)
                .cloned()
                .unwrap_or_else(|| new_state(t)),
            seen: BTreeSet::new(),
        };
        let effect = part.prepare(inner)?;
        Ok(match t == self.obj_type() {
            true => effect,
            false => Effect::Part {
                key_type: self.obj_type(),
                effect: Box::new(effect),
            },
        })
    }

    /// Generator of a register increment: the register must hold a decimal integer
    /// (absent: 0) that the increment does not overflow.
    fn prepare_register_increment(&self, d: i64) -> Result<Effect, Error> {
        let shown = match self.value() {
            crate::api::ObjValue::Lww(v) => v,
            other => unreachable!("a register shows {other:?}"),
        };
        let current = match shown {
            None => 0,
            Some(v) => decimal(&v).ok_or_else(|| Error::InvalidState(NOT_AN_INTEGER.into()))?,
        };
        match current.checked_add(d) {
            Some(_) => Ok(Effect::RegisterIncrement(d)),
            None => Err(Error::InvalidState(COUNTER_OVERFLOW.into())),
        }
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
            if let Some(fields) = hash_fields(&mut self.state, &op.effect) {
                hash::apply_late(
                    fields,
                    &Op {
                        id: op.id,
                        ts: op.ts,
                        effect: op.effect.own().clone(),
                    },
                );
            }
            if let Some(members) = zset_members(&mut self.state, &op.effect) {
                zset::apply_late(members, op);
            }
            self.apply_deletions(op);
            return false;
        }
        if let Some(fields) = hash_fields(&mut self.state, &op.effect) {
            let seen = &self.seen;
            hash::note_early_deletions(fields, op.effect.own(), |id| seen.contains(id));
        }
        if let Some(l) = list_state(&mut self.state, &op.effect) {
            let seen = &self.seen;
            list::note_early_removals(l, op.effect.own(), |id| seen.contains(id));
        }
        if let Some(members) = zset_members(&mut self.state, &op.effect) {
            let seen = &self.seen;
            zset::note_early_deletions(members, op.effect.own(), |id| seen.contains(id));
        }
        self.apply_effect(op);
        self.seen.extend(op.effect.deleted_ids().iter().copied());
        true
    }

    /// The deletions of `op` alone (the ids it replaces, removes or dominates).
    fn apply_deletions(&mut self, op: &Op) {
        delete_in(&mut self.state, &op.effect);
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
        apply_to(&mut self.state, op, &op.effect);
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
        state_value(shown_part(&self.state))
    }

    /// The ids of the writes a read of this state observes, for histories: the winning
    /// assignment of a register, the visible adds of a set, the concurrent assignments of
    /// a multi-value register; a counter reports none (its value sums every increment).
    /// Of a key with parts, the shown part's.
    pub fn observed(&self) -> Vec<OpId> {
        match shown_part(&self.state) {
            State::Lww { winner, .. } | State::CountedLww { winner, .. } => {
                winner.iter().map(|(_, id)| *id).collect()
            }
            State::Counter { .. } => Vec::new(),
            State::Set { elems } => {
                let mut ids: Vec<OpId> = elems.values().flatten().copied().collect();
                ids.sort();
                ids
            }
            State::MvReg { entries } => entries.keys().copied().collect(),
            State::Hash { fields } => hash::observed(fields),
            State::List(l) => l.observed(),
            State::ZSet { members } => zset::observed(members),
            State::Parts { .. } => unreachable!("a shown part has no parts"),
        }
    }
}

/// The fields of the hash a hash effect (or a part wrapping one) applies to, if it exists.
fn hash_fields<'s>(
    state: &'s mut State,
    effect: &Effect,
) -> Option<&'s mut BTreeMap<Value, hash::Field>> {
    hash::field_of(effect.own())?;
    let target = match (state, effect) {
        (State::Parts { parts, .. }, Effect::Part { .. }) => {
            &mut parts.get_mut(&ObjType::Hash)?.state
        }
        (State::Parts { home, .. }, _) => home.as_mut(),
        (s, _) => s,
    };
    match target {
        State::Hash { fields } => Some(fields),
        _ => None,
    }
}

/// The members of the sorted set a sorted-set effect (or a part wrapping one) applies
/// to, if it exists.
fn zset_members<'s>(
    state: &'s mut State,
    effect: &Effect,
) -> Option<&'s mut BTreeMap<Value, zset::Member>> {
    if !zset::is_zset(effect.own()) {
        return None;
    }
    let target = match (state, effect) {
        (State::Parts { parts, .. }, Effect::Part { .. }) => {
            &mut parts.get_mut(&ObjType::ZSet)?.state
        }
        (State::Parts { home, .. }, _) => home.as_mut(),
        (s, _) => s,
    };
    match target {
        State::ZSet { members } => Some(members),
        _ => None,
    }
}

/// The list a list pop (or a part wrapping one) applies to, if it exists.
fn list_state<'s>(state: &'s mut State, effect: &Effect) -> Option<&'s mut list::ListState> {
    if !matches!(effect.own(), Effect::ListRemove { .. }) {
        return None;
    }
    let target = match (state, effect) {
        (State::Parts { parts, .. }, Effect::Part { .. }) => {
            &mut parts.get_mut(&ObjType::List)?.state
        }
        (State::Parts { home, .. }, _) => home.as_mut(),
        (s, _) => s,
    };
    match target {
        State::List(l) => Some(l),
        _ => None,
    }
}

/// The part of `state` a reader sees: the part of the type it shows (see [`shown_type`]),
/// its own part when it shows nothing.
fn shown_part(state: &State) -> &State {
    match state {
        State::Parts { home, .. } => shown_type(state)
            .and_then(|t| part_of(state, t))
            .unwrap_or(home),
        s => s,
    }
}

/// The value a state of one type shows.
fn state_value(state: &State) -> crate::api::ObjValue {
    use crate::api::ObjValue;
    match state {
        State::Lww { value, .. } => ObjValue::Lww(value.clone()),
        State::CountedLww {
            value, base, total, ..
        } => ObjValue::Lww(counted_value(value, total.wrapping_sub(*base))),
        State::Counter { value } => ObjValue::Counter(*value),
        State::Set { elems } => ObjValue::Set(elems.keys().cloned().collect()),
        State::MvReg { entries } => {
            let mut values: Vec<Value> = entries.values().cloned().collect();
            values.sort();
            values.dedup();
            ObjValue::MvReg(values)
        }
        State::Hash { fields } => ObjValue::Hash(hash::shown(fields)),
        State::List(l) => ObjValue::List(l.values()),
        State::ZSet { members } => ObjValue::ZSet(zset::shown(members)),
        State::Parts { .. } => state_value(shown_part(state)),
    }
}

/// The deletions of `effect` alone in `state` (see [`Object::apply`]).
fn delete_in(state: &mut State, effect: &Effect) {
    match (state, effect) {
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
        (State::Hash { fields }, e) => hash::delete_in(fields, e),
        (State::ZSet { members }, e) => zset::delete_in(members, e),
        (State::List(l), e @ Effect::ListRemove { .. }) => {
            list::note_early_removals(l, e, |_| true)
        }
        (State::Parts { home, .. }, e) if !e.is_part() => delete_in(home, e),
        (State::Parts { parts, .. }, Effect::Part { effect, .. }) => {
            if let Some(p) = parts.get_mut(&effect.obj_type()) {
                delete_in(&mut p.state, effect);
            }
        }
        _ => {}
    }
}

/// Applies `effect` (`op`'s, or the effect a part wraps) to `state`.
fn apply_to(state: &mut State, op: &Op, effect: &Effect) {
    match (state, effect) {
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
        (
            State::CountedLww {
                value,
                winner,
                base,
                ..
            },
            Effect::Assign(v),
        ) => {
            let candidate = (op.ts, op.id);
            if winner.is_none_or(|w| candidate > w) {
                *value = Some(v.clone());
                *winner = Some(candidate);
                *base = 0;
            }
        }
        (state, Effect::Part { effect, .. }) => apply_part(state, op, effect),
        (State::Hash { fields }, effect) => hash::apply(fields, op, effect),
        (State::List(l), effect) => list::apply(l, op, effect),
        (State::ZSet { members }, effect) => zset::apply(members, op, effect),
        (State::Parts { home, .. }, effect) => apply_to(home, op, effect),
        (state @ (State::Lww { .. } | State::CountedLww { .. }), effect) => {
            apply_counted(state, op, effect)
        }
        (state, effect) => {
            panic!("effect {effect:?} applied to {state:?}: type invariant broken")
        }
    }
}

/// Applies `effect` to the part of its type, making `state` a [`State::Parts`] first.
fn apply_part(state: &mut State, op: &Op, effect: &Effect) {
    assert!(!effect.is_part(), "a part of a part: {op:?}");
    if !matches!(state, State::Parts { .. }) {
        let home = std::mem::replace(state, new_state(ObjType::Lww));
        *state = State::Parts {
            home: Box::new(home),
            parts: BTreeMap::new(),
        };
    }
    let State::Parts { home, parts } = state else {
        unreachable!("made parts above")
    };
    let t = effect.obj_type();
    assert!(
        t != state_type(home),
        "a part of the key's own type: {op:?}"
    );
    let stamp = (op.ts, op.id);
    let part = parts.entry(t).or_insert_with(|| Part {
        state: new_state(t),
        last: stamp,
    });
    part.last = part.last.max(stamp);
    apply_to(&mut part.state, op, effect);
}

/// Applies a register increment or counted assignment to a register, which counts from
/// then on. Panics on any other effect (the type invariant).
fn apply_counted(state: &mut State, op: &Op, effect: &Effect) {
    make_counted(state);
    let State::CountedLww {
        value,
        winner,
        base,
        total,
    } = state
    else {
        unreachable!("made counted above")
    };
    match effect {
        Effect::RegisterIncrement(d) => *total = total.wrapping_add(*d),
        Effect::CountedAssign { value: v, base: b } => {
            let candidate = (op.ts, op.id);
            if winner.is_none_or(|w| candidate > w) {
                *value = Some(v.clone());
                *winner = Some(candidate);
                *base = *b;
            }
        }
        other => panic!("effect {other:?} applied to a register: type invariant broken"),
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

    /// A register op at arbitration time `t` (op id `seq`), prepared against `at`.
    fn reg_op(at: &Object, t: u64, seq: u64, update: Update) -> Op {
        let effect = at.prepare(&update).expect("prepares");
        Op {
            id: id(seq, 0),
            ts: ArbTs {
                primary: t,
                secondary: 0,
            },
            effect,
        }
    }

    fn shown(obj: &Object) -> Option<String> {
        match obj.value() {
            crate::api::ObjValue::Lww(v) => v.map(|v| String::from_utf8(v).expect("utf-8")),
            other => panic!("a register shows {other:?}"),
        }
    }

    /// Applies `ops` to `start` in every order of `orders` (indexes), asserting every order
    /// shows `want`.
    fn converges(start: &Object, ops: &[Op], orders: &[&[usize]], want: Option<&str>) {
        for order in orders {
            let mut r = start.clone();
            for &i in *order {
                assert!(r.apply(&ops[i]));
            }
            assert_eq!(shown(&r).as_deref(), want, "order {order:?}: {r:?}");
        }
    }

    fn set(v: &str) -> Update {
        Update::Assign(v.as_bytes().to_vec())
    }

    /// `SET cnt 10` then `INCR cnt` (the example) counts, and a register that never
    /// counted keeps its plain state and plain assignments.
    #[test]
    fn a_register_holding_an_integer_counts() {
        let mut r = Object::new(ObjType::Lww);
        let a = reg_op(&r, 1, 1, set("10"));
        assert_eq!(a.effect, Effect::Assign(b"10".to_vec()));
        r.apply(&a);
        assert!(!r.counts());
        let i = reg_op(&r, 2, 2, Update::RegisterIncrement(5));
        assert_eq!(i.effect, Effect::RegisterIncrement(5));
        r.apply(&i);
        assert!(r.counts());
        assert_eq!(shown(&r).as_deref(), Some("15"));
        assert_eq!(
            r.observed(),
            vec![a.id],
            "a read names the winning assignment"
        );
        // An assignment now names the increments it replaces.
        let b = reg_op(&r, 3, 3, set("7"));
        assert_eq!(
            b.effect,
            Effect::CountedAssign {
                value: b"7".to_vec(),
                base: 5
            }
        );
        r.apply(&b);
        assert_eq!(shown(&r).as_deref(), Some("7"));
        // Absent counts as 0, as in Redis.
        let fresh = Object::new(ObjType::Lww);
        let mut f = fresh.clone();
        f.apply(&reg_op(&fresh, 1, 9, Update::RegisterIncrement(-4)));
        assert_eq!(shown(&f).as_deref(), Some("-4"));
    }

    /// The rule for a `SET` concurrent with `INCR`s: the value is the winning assignment
    /// plus every increment it did not observe, in either delivery order.
    #[test]
    fn a_set_concurrent_with_increments_keeps_them() {
        let mut base = Object::new(ObjType::Lww);
        base.apply(&reg_op(&base.clone(), 1, 1, set("10")));
        // DC A increments twice; DC B concurrently sets 20 (it saw neither increment).
        let mut a = base.clone();
        let i1 = reg_op(&a, 2, 2, Update::RegisterIncrement(3));
        a.apply(&i1);
        let i2 = reg_op(&a, 3, 3, Update::RegisterIncrement(4));
        let s = reg_op(&base, 2, 4, set("20"));
        let ops = [i1.clone(), i2.clone(), s.clone()];
        converges(
            &base,
            &ops,
            &[&[0, 1, 2], &[2, 0, 1], &[0, 2, 1]],
            Some("27"),
        );
        // B's set arbitrated after A's increments changes nothing: they were concurrent.
        let late = reg_op(&base, 9, 5, set("20"));
        let ops = [i1.clone(), i2.clone(), late];
        converges(&base, &ops, &[&[0, 1, 2], &[2, 0, 1]], Some("27"));
        // A set that observed the first increment replaces it, and keeps the second.
        let mut seen = base.clone();
        seen.apply(&i1);
        let s1 = reg_op(&seen, 4, 6, set("20"));
        let ops = [i1, i2, s1];
        converges(&base, &ops, &[&[0, 1, 2], &[0, 2, 1]], Some("24"));
    }

    /// A winner that is no integer shows as assigned (concurrent increments are dropped);
    /// an increment of it is refused, as is one that would overflow.
    #[test]
    fn a_register_that_holds_text_drops_concurrent_increments() {
        let mut base = Object::new(ObjType::Lww);
        base.apply(&reg_op(&base.clone(), 1, 1, set("10")));
        let inc = reg_op(&base, 2, 2, Update::RegisterIncrement(1));
        let text = reg_op(&base, 3, 3, set("abc"));
        converges(
            &base,
            &[inc.clone(), text.clone()],
            &[&[0, 1], &[1, 0]],
            Some("abc"),
        );
        let mut r = base.clone();
        r.apply(&text);
        let refused = r.prepare(&Update::RegisterIncrement(1));
        assert_eq!(refused, Err(Error::InvalidState(NOT_AN_INTEGER.into())));
        let mut big = Object::new(ObjType::Lww);
        big.apply(&reg_op(&big.clone(), 1, 4, set(&i64::MAX.to_string())));
        let refused = big.prepare(&Update::RegisterIncrement(1));
        assert_eq!(refused, Err(Error::InvalidState(COUNTER_OVERFLOW.into())));
        for not in ["+1", "01", " 1", "-0", "1.5", ""] {
            assert_eq!(decimal(not.as_bytes()), None, "{not:?}");
        }
        assert_eq!(decimal(b"-12"), Some(-12));
    }

    /// An op of `update` prepared against `at`, at arbitration time `t` (op id `seq`).
    fn op_at(at: &Object, t: u64, seq: u64, update: Update) -> Op {
        reg_op(at, t, seq, update)
    }

    fn part(key_type: ObjType, update: Update) -> Update {
        Update::Part {
            key_type,
            update: Box::new(update),
        }
    }

    fn applied(start: &Object, ops: &[&Op]) -> Object {
        let mut r = start.clone();
        for op in ops {
            assert!(r.apply(op));
        }
        r
    }

    /// `SADD k a`, `DEL k`, `SET k v`: the key freed by the `DEL` takes a string, shows it,
    /// refuses a set while it does, and takes a set again once the string is deleted.
    #[test]
    fn a_key_freed_by_del_takes_another_type() {
        let empty = Object::new(ObjType::Set);
        let add = op_at(&empty, 1, 1, Update::Add(b"a".to_vec()));
        let k = applied(&empty, &[&add]);
        // While the set shows a member, a string is refused, naming the set.
        let refused = k.prepare(&part(ObjType::Set, set("v")));
        assert_eq!(
            refused,
            Err(Error::WrongType {
                expected: ObjType::Set,
                found: ObjType::Lww
            })
        );
        let del = op_at(&k, 2, 2, Update::Remove(b"a".to_vec()));
        let k = applied(&empty, &[&add, &del]);
        assert_eq!(k.shown_type(), None, "a freed key shows nothing");
        let s = op_at(&k, 3, 3, part(ObjType::Set, set("v")));
        assert!(s.effect.is_part() && s.effect.obj_type() == ObjType::Set);
        let k = applied(&empty, &[&add, &del, &s]);
        assert_eq!(k.obj_type(), ObjType::Set, "the store's type stays");
        assert_eq!(k.shown_type(), Some(ObjType::Lww));
        assert_eq!(shown(&k).as_deref(), Some("v"));
        assert_eq!(k.observed(), vec![s.id]);
        let sadd = k.prepare(&Update::Add(b"b".to_vec()));
        assert_eq!(
            sadd,
            Err(Error::WrongType {
                expected: ObjType::Lww,
                found: ObjType::Set
            })
        );
        // DEL of the string (a tombstone), then SADD: a set again, without the old member.
        let gone = op_at(&k, 4, 4, part(ObjType::Set, set_bytes(TOMBSTONE)));
        let k2 = applied(&empty, &[&add, &del, &s, &gone]);
        assert_eq!(k2.shown_type(), None);
        let b = op_at(&k2, 5, 5, Update::Add(b"b".to_vec()));
        let k3 = applied(&empty, &[&add, &del, &s, &gone, &b]);
        assert_eq!(k3.value(), crate::api::ObjValue::Set(vec![b"b".to_vec()]));
        // An increment after the DEL makes a counter part, which GET shows in decimal.
        let inc = op_at(&k2, 6, 6, part(ObjType::Set, Update::Increment(3)));
        let k4 = applied(&empty, &[&add, &del, &s, &gone, &inc]);
        assert_eq!(k4.value(), crate::api::ObjValue::Counter(3));
        // The state with parts encodes and decodes; earlier states keep their tags.
        let bytes = postcard::to_allocvec(&k4).unwrap();
        assert_eq!(bytes[0], 5, "Parts is the sixth state");
        assert_eq!(postcard::from_bytes::<Object>(&bytes).unwrap(), k4);
        let tag = |b: Vec<u8>| b[0];
        assert_eq!(
            tag(postcard::to_allocvec(&part(ObjType::Set, set("v"))).unwrap()),
            6
        );
        assert_eq!(tag(postcard::to_allocvec(&s.effect).unwrap()), 7);
    }

    fn set_bytes(v: &[u8]) -> Update {
        Update::Assign(v.to_vec())
    }

    /// The rule for a write of the key's own type concurrent with the `DEL` and the write
    /// of another type after it: the other type shows (the write that retyped the key
    /// wins), in every delivery order; the concurrent member stays hidden in the set part
    /// until a `DEL` of the key removes it too. Two concurrent writes of two other types:
    /// the later by arbitration timestamp shows, in either order.
    #[test]
    fn a_retyping_write_wins_over_concurrent_writes_of_the_old_type() {
        let empty = Object::new(ObjType::Set);
        let add = op_at(&empty, 1, 1, Update::Add(b"a".to_vec()));
        let base = applied(&empty, &[&add]);
        // DC 1: DEL, then SET v. DC 2, concurrently: SADD b (late timestamp: still loses).
        let del = op_at(&base, 2, 2, Update::Remove(b"a".to_vec()));
        let freed = applied(&base, &[&del]);
        let s = op_at(&freed, 3, 3, part(ObjType::Set, set("v")));
        let b = op_at(&base, 9, 4, Update::Add(b"b".to_vec()));
        let orders: [&[&Op]; 3] = [&[&del, &s, &b], &[&b, &del, &s], &[&del, &b, &s]];
        for order in orders {
            let r = applied(&base, order);
            assert_eq!(shown(&r).as_deref(), Some("v"), "{order:?}");
        }
        // Concurrent retypes after the DEL: a string at 5, a counter at 6; the counter shows.
        let str5 = op_at(&freed, 5, 5, part(ObjType::Set, set("x")));
        let cnt6 = op_at(&freed, 6, 6, part(ObjType::Set, Update::Increment(2)));
        for order in [[&del, &str5, &cnt6], [&del, &cnt6, &str5]] {
            let r = applied(&base, &order);
            assert_eq!(r.value(), crate::api::ObjValue::Counter(2));
            // DEL of the counter shows the string, and DEL of that shows nothing.
            let minus = op_at(&r, 7, 7, part(ObjType::Set, Update::Increment(-2)));
            let r = applied(&r, &[&minus]);
            assert_eq!(shown(&r).as_deref(), Some("x"));
        }
    }

    /// The new variants go last: every earlier update, effect and state keeps its postcard
    /// tag (records and peer messages written before decode unchanged), and a counted
    /// register's state round-trips.
    #[test]
    fn counting_registers_keep_the_older_encodings() {
        let tag = |bytes: Vec<u8>| bytes[0];
        assert_eq!(
            tag(postcard::to_allocvec(&Update::MvAssign(vec![])).unwrap()),
            4
        );
        assert_eq!(
            tag(postcard::to_allocvec(&Update::RegisterIncrement(1)).unwrap()),
            5
        );
        let mv = Effect::MvAssign {
            value: vec![],
            dominated: vec![],
        };
        assert_eq!(tag(postcard::to_allocvec(&mv).unwrap()), 4);
        assert_eq!(
            tag(postcard::to_allocvec(&Effect::RegisterIncrement(1)).unwrap()),
            5
        );
        let mut r = Object::new(ObjType::Lww);
        assert_eq!(tag(postcard::to_allocvec(&r.state).unwrap()), 0);
        r.apply(&reg_op(&r.clone(), 1, 1, Update::RegisterIncrement(2)));
        let bytes = postcard::to_allocvec(&r).unwrap();
        assert_eq!(bytes[0], 4, "CountedLww is the fifth state");
        assert_eq!(postcard::from_bytes::<Object>(&bytes).unwrap(), r);
    }
}
