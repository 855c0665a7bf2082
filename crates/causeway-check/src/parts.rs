//! A key freed by `DEL` takes any type again (`causeway_core::crdt`): how the checker models
//! a key's parts.
//!
//! The store keeps a key's writes of its own type (its home: the type a read asks for) and
//! those of each other type ([`Update::Part`]) as separate CRDTs, and a read shows one of
//! them. [`split`] rewrites a history so that each part is a key of its own: a part's writes,
//! and the reads showing that part (the type of the value read says which part it shows),
//! name [`part_key`]. Checks 1-6 of `tcc` then judge every part as they judge any key.
//!
//! [`check_rule`] judges which part each read showed. The rule: a key shows its non-empty
//! part of another type with the greatest `(timestamp, id)` of its ops, else its home. A
//! history holds neither timestamps nor the whole causal order, so a read is rejected only
//! where the rule surely picks another part:
//! 1. it shows its home (or nothing) while a part of another type is surely non-empty in
//!    its view (a retyping write in its causal past hides the home's concurrent writes);
//! 2. it shows part `S` while part `T` is surely non-empty and an op of `T` in the view
//!    causally follows every op of `S` that may be in the view (`T`'s stamp is greater);
//! 3. it shows a part of another type that holds nothing (the home shows then).
//!
//! A part is surely non-empty when a write that filled it (a register or multi-value
//! assignment other than the tombstone, a set add) is in the view and every op that may
//! have emptied it since (a tombstone assignment, a remove of the element) and may be in
//! the view is causally before that write; a counter part when no sum of the increments
//! that may be in the view cancels those that surely are (given up past
//! `tcc::SUBSET_SUMS_MAX` sums). An op may be in the view unless it causally follows the
//! reader; a write of an unknown outcome nobody observed may always be.

use crate::graph::BitSet;
use crate::history::{HOp, History, Outcome};
use crate::tcc::{subset_sums, Model};
use crate::{Violation, ViolationKind};
use causeway_core::crdt::TOMBSTONE;
use causeway_core::{Key, ObjType, ObjValue, OpId, TxnId, Update};
use std::collections::BTreeMap;

/// A history with each part of another type as a key of its own, and which keys are parts.
pub(crate) struct Split {
    pub(crate) history: History,
    /// Each part key: the key it is a part of, and its type.
    parts: BTreeMap<Key, (Key, ObjType)>,
    /// Each key with parts: its part keys by type.
    of_key: BTreeMap<Key, BTreeMap<ObjType, Key>>,
}

/// The key the checker gives the part of type `t` of `key`: `key`, a byte that no UTF-8
/// key holds (`0xff`), then the type's name.
pub(crate) fn part_key(key: &Key, t: ObjType) -> Key {
    let mut bytes = key.0.clone();
    bytes.push(0xff);
    bytes.extend_from_slice(t.name().as_bytes());
    Key::new(bytes)
}

/// The type a value shows.
fn value_type(value: &ObjValue) -> ObjType {
    match value {
        ObjValue::Lww(_) => ObjType::Lww,
        ObjValue::Counter(_) => ObjType::Counter,
        ObjValue::Set(_) => ObjType::Set,
        ObjValue::MvReg(_) => ObjType::MvReg,
        ObjValue::Hash(_) => ObjType::Hash,
        ObjValue::List(_) => ObjType::List,
        ObjValue::ZSet(_) => ObjType::ZSet,
    }
}

/// The history with parts as keys of their own, or `None` when it has no part (no
/// [`Update::Part`] write, no read showing another type than it asked for): then every
/// check runs on the history as it is.
pub(crate) fn split(history: &History) -> Option<Split> {
    let any = history.txns.iter().flat_map(|t| &t.ops).any(|op| match op {
        HOp::Write { update, .. } => matches!(update, Update::Part { .. }),
        HOp::Read { obj, value, .. } => value_type(value) != *obj,
    });
    let finals = history.finals.iter().any(|f| value_type(&f.value) != f.obj);
    if !any && !finals {
        return None;
    }
    let mut s = Split {
        history: history.clone(),
        parts: BTreeMap::new(),
        of_key: BTreeMap::new(),
    };
    let mut ops: Vec<&mut HOp> = s.history.txns.iter_mut().flat_map(|t| &mut t.ops).collect();
    for op in ops.iter_mut() {
        let (key, t) = match &**op {
            HOp::Write {
                key,
                update: Update::Part { update, .. },
                ..
            } => (key.clone(), update.obj_type()),
            HOp::Read {
                key, obj, value, ..
            } if value_type(value) != *obj => (key.clone(), value_type(value)),
            _ => continue,
        };
        let part = note_part(&mut s.parts, &mut s.of_key, &key, t);
        match &mut **op {
            HOp::Write { key, update, .. } => {
                *key = part;
                *update = update.own().clone();
            }
            HOp::Read { key, obj, .. } => {
                *key = part;
                *obj = t;
            }
        }
    }
    drop_crossing_overwrites(&mut s.history);
    for f in s.history.finals.iter_mut() {
        let t = value_type(&f.value);
        if t != f.obj {
            f.key = note_part(&mut s.parts, &mut s.of_key, &f.key, t);
            f.obj = t;
        }
    }
    Some(s)
}

/// Drops the version-order entries (`History::overwrites`, Occult's master order of a key)
/// between two parts of a key: each part is a key of its own here, so such an entry is
/// left out of both orders (the PC-PSI check then derives fewer edges).
fn drop_crossing_overwrites(history: &mut History) {
    let mut key_of = BTreeMap::new();
    for op in history.txns.iter().flat_map(|t| &t.ops) {
        if let HOp::Write { key, id, .. } = op {
            key_of.insert(*id, key.clone());
        }
    }
    history.overwrites.retain(|w, prev| match prev {
        Some(v) => key_of.get(w) == key_of.get(v),
        None => true,
    });
}

/// Records the part of type `t` of `key`, and returns its key.
fn note_part(
    parts: &mut BTreeMap<Key, (Key, ObjType)>,
    of_key: &mut BTreeMap<Key, BTreeMap<ObjType, Key>>,
    key: &Key,
    t: ObjType,
) -> Key {
    let part = part_key(key, t);
    parts.insert(part.clone(), (key.clone(), t));
    of_key
        .entry(key.clone())
        .or_default()
        .insert(t, part.clone());
    part
}

/// One write of a part: its id, its transaction's node (`None`: an unknown outcome nobody
/// observed, not in the model) and its update.
type PartWrite<'a> = (OpId, Option<usize>, &'a Update);

/// Checks the rule for which part every committed read of a key with parts showed (module
/// docs); `m` and `anc` are those of checks 1-6 on the split history.
pub(crate) fn check_rule(s: &Split, m: &Model, anc: &[BitSet]) -> Result<(), Violation> {
    let writes = part_writes(s, m);
    for (node, t) in m.txns.iter().enumerate() {
        if t.outcome != Outcome::Committed {
            continue;
        }
        let mut own = Vec::new();
        for op in &t.ops {
            match op {
                HOp::Write { id, .. } => own.push(*id),
                HOp::Read { key, value, .. } => {
                    let reader = Reader {
                        anc,
                        node,
                        own: &own,
                        me: t.id,
                    };
                    reader.check(s, &writes, key, value)?;
                }
            }
        }
    }
    Ok(())
}

/// The writes of each part key, counted ones (with their node) and those of unknown
/// outcomes nobody observed.
fn part_writes<'a>(s: &'a Split, m: &Model) -> BTreeMap<&'a Key, Vec<PartWrite<'a>>> {
    let mut writes: BTreeMap<&Key, Vec<PartWrite>> = BTreeMap::new();
    for t in &s.history.txns {
        for op in &t.ops {
            let HOp::Write { key, update, id } = op else {
                continue;
            };
            if !s.parts.contains_key(key) {
                continue;
            }
            let node = m.node(t.id);
            if node.is_some() || m.dropped.get(id) == Some(&Outcome::Unknown) {
                writes.entry(key).or_default().push((*id, node, update));
            }
        }
    }
    writes
}

/// One committed read: its transaction's node, causal past and own earlier writes.
struct Reader<'r> {
    anc: &'r [BitSet],
    node: usize,
    own: &'r [OpId],
    me: TxnId,
}

impl Reader<'_> {
    /// Judges the part the read of `key` (a key, or a part key) showed.
    fn check(
        &self,
        s: &Split,
        writes: &BTreeMap<&Key, Vec<PartWrite>>,
        key: &Key,
        value: &ObjValue,
    ) -> Result<(), Violation> {
        let (home, shown) = match s.parts.get(key) {
            Some((home, t)) => (home, Some(*t)),
            None => (key, None),
        };
        let Some(parts) = s.of_key.get(home) else {
            return Ok(());
        };
        let ops = |t: ObjType| writes.get(&parts[&t]).map_or(&[][..], |v| &v[..]);
        if let Some(t) = shown {
            if !shows_something(value) {
                return Err(self.fail(
                    ViolationKind::BadValue,
                    Vec::new(),
                    format!("{} read {home}'s {} part holding nothing, where the key shows its own type", self.me, t.name()),
                ));
            }
        }
        for (&t, _) in parts.iter().filter(|(t, _)| Some(**t) != shown) {
            let Some(filled_by) = self.surely_filled(t, ops(t)) else {
                continue;
            };
            let later = match shown {
                None => true,
                Some(s) => self.surely_later(ops(t), ops(s)),
            };
            if later {
                let what = shown.map_or("its own type".to_string(), |s| {
                    format!("its {} part", s.name())
                });
                return Err(self.fail(
                    ViolationKind::CausalViolation,
                    vec![filled_by.txn],
                    format!(
                        "{} read {home} showing {what}, but its {} part, written by {} in its view, must show (a key freed by DEL shows its newest part of another type)",
                        self.me,
                        t.name(),
                        filled_by.txn
                    ),
                ));
            }
        }
        Ok(())
    }

    fn fail(&self, kind: ViolationKind, mut txns: Vec<TxnId>, why: String) -> Violation {
        txns.insert(0, self.me);
        txns.dedup();
        Violation::new(kind, txns, why)
    }

    /// Whether the write is surely in the view: in the causal past, or an own earlier one.
    fn surely_sees(&self, id: OpId, node: Option<usize>) -> bool {
        match node {
            Some(n) if n == self.node => self.own.contains(&id),
            Some(n) => self.anc[self.node].contains(n),
            None => false,
        }
    }

    /// Whether the write may be in the view: not after the reader (an own later write, one
    /// causally after it).
    fn may_see(&self, id: OpId, node: Option<usize>) -> bool {
        match node {
            Some(n) if n == self.node => self.own.contains(&id),
            Some(n) => !self.anc[n].contains(self.node),
            None => true,
        }
    }

    /// Whether the write `a` is surely causally before the write `b`.
    fn before(&self, a: (OpId, Option<usize>), b: (OpId, Option<usize>)) -> bool {
        match (a.1, b.1) {
            (Some(x), Some(y)) if x == y => a.0.index < b.0.index,
            (Some(x), Some(y)) => self.anc[y].contains(x),
            _ => false,
        }
    }

    /// A write that surely keeps the part of type `t` non-empty in this read's view (module
    /// docs), if any (for a counter part, any increment surely in view).
    fn surely_filled(&self, t: ObjType, ops: &[PartWrite]) -> Option<OpId> {
        if t == ObjType::Counter {
            return self.counter_surely_nonzero(ops);
        }
        let in_view: Vec<&PartWrite> = ops.iter().filter(|w| self.may_see(w.0, w.1)).collect();
        in_view
            .iter()
            .filter(|w| self.surely_sees(w.0, w.1) && fills(w.2))
            .find(|w| {
                in_view
                    .iter()
                    .filter(|e| empties(e.2, w.2))
                    .all(|e| self.before((e.0, e.1), (w.0, w.1)))
            })
            .map(|w| w.0)
    }

    /// An increment of a counter part surely in view, if no sum of the increments that
    /// may be in the view cancels those that surely are.
    fn counter_surely_nonzero(&self, ops: &[PartWrite]) -> Option<OpId> {
        let (mut must, mut optional, mut first) = (0i64, Vec::new(), None);
        for &(id, node, update) in ops.iter().filter(|w| self.may_see(w.0, w.1)) {
            let Update::Increment(d) = update else {
                return None; // not a counter's op: nothing is sure
            };
            if self.surely_sees(id, node) {
                must = must.wrapping_add(*d);
                first.get_or_insert(id);
            } else {
                optional.push(*d);
            }
        }
        let sums = subset_sums(&optional)?;
        match sums.contains(&must.wrapping_neg()) {
            true => None,
            false => first,
        }
    }

    /// Whether an op of part `t`'s `ops` surely in view causally follows every op of
    /// `shown`'s that may be in view (then `t`'s greatest stamp is the greater).
    fn surely_later(&self, ops: &[PartWrite], shown: &[PartWrite]) -> bool {
        let shown: Vec<&PartWrite> = shown.iter().filter(|w| self.may_see(w.0, w.1)).collect();
        ops.iter()
            .filter(|w| self.surely_sees(w.0, w.1))
            .any(|w| shown.iter().all(|x| self.before((x.0, x.1), (w.0, w.1))))
    }
}

/// Whether a write fills its part: an assignment of anything but the tombstone, an add.
fn fills(update: &Update) -> bool {
    match update {
        Update::Assign(v) | Update::MvAssign(v) => v.as_slice() != TOMBSTONE,
        Update::Add(_) => true,
        _ => false,
    }
}

/// Whether `update` may empty what `filler` put in its part: a tombstone assignment of a
/// register, a remove of the element added. An increment of a register never empties it.
fn empties(update: &Update, filler: &Update) -> bool {
    match (update, filler) {
        (Update::Assign(v), Update::Assign(_)) | (Update::MvAssign(v), Update::MvAssign(_)) => {
            v.as_slice() == TOMBSTONE
        }
        (Update::Remove(e), Update::Add(a)) => e == a,
        (Update::RegisterIncrement(_), _) => false,
        // Another op of the part than those above: an unexpected shape, so not sure.
        (u, _) => !fills(u),
    }
}

/// Whether a read shows something: a register other than absent or the tombstone, a
/// counter other than 0, a member.
fn shows_something(value: &ObjValue) -> bool {
    let live = |v: &Vec<u8>| v.as_slice() != TOMBSTONE;
    match value {
        ObjValue::Lww(v) => v.as_ref().is_some_and(live),
        ObjValue::Counter(n) => *n != 0,
        ObjValue::Set(elems) => !elems.is_empty(),
        ObjValue::MvReg(values) => values.iter().any(live),
        ObjValue::Hash(fields) => !fields.is_empty(),
        ObjValue::List(elems) => !elems.is_empty(),
        ObjValue::ZSet(members) => !members.is_empty(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_key_is_no_utf8_key_and_names_its_type() {
        let k = part_key(&Key::from("k3"), ObjType::Set);
        assert!(std::str::from_utf8(&k.0).is_err());
        assert_eq!(k.to_string(), "k3\\xffset");
        assert!(split(&History::default()).is_none());
    }
}
