//! Property and unit tests for the op-based CRDTs of `causeway_core::crdt`.
//!
//! The property tests build a random causal history over three replicas of one object:
//! each replica prepares updates against its own state, stamps them with a unique
//! [`OpId`] and a Lamport [`ArbTs`] (primary = highest primary seen + 1, secondary =
//! replica), applies them locally, and later receives the other replicas' ops in a random
//! order that respects causality (an op is delivered only after every op its origin had
//! applied when preparing it). Checked on every history:
//!
//! - convergence: once every replica has every op, `value()` and `observed()` agree, and
//!   match the sequential specification of the type computed from the history alone;
//! - idempotence: re-applying an op already applied returns false and changes nothing;
//! - commutativity: two causally concurrent ops applied in either order to the state that
//!   holds exactly their causal pasts give the same object.
//!
//! The unit tests pin down the add-wins, multi-value, last-writer-wins and counter
//! semantics on small hand-written scenarios, and the type check of `prepare`.

use causeway_core::crdt::{Effect, State};
use causeway_core::{
    ArbTs, Error, ObjType, ObjValue, Object, Op, OpId, SessionId, TxnId, Update, Value,
};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

/// Replicas in every generated history.
const REPLICAS: usize = 3;

/// Cases per property: enough to find ordering bugs, few enough to keep the suite fast.
const CASES: u32 = 96;

// ---------------------------------------------------------------------------------------
// Helpers shared by the property and unit tests.
// ---------------------------------------------------------------------------------------

/// The op id of the `seq`-th op of `replica` (one op per transaction).
fn op_id(replica: u64, seq: u64) -> OpId {
    OpId {
        txn: TxnId {
            session: SessionId(replica),
            seq,
        },
        index: 0,
    }
}

fn ts(primary: u64, secondary: u64) -> ArbTs {
    ArbTs { primary, secondary }
}

/// Prepares `update` against `object` and wraps the effect in an op.
fn make_op(object: &Object, update: &Update, id: OpId, ts: ArbTs) -> Op {
    let effect = object
        .prepare(update)
        .expect("update matches the object type");
    Op { id, ts, effect }
}

/// Applies `op` and asserts it was new.
fn apply_new(object: &mut Object, op: &Op) {
    assert!(object.apply(op), "op {} applied for the first time", op.id);
}

/// Asserts that applying `op` again is refused and leaves `object` untouched.
fn assert_duplicate_is_noop(object: &Object, op: &Op) {
    let mut again = object.clone();
    assert!(!again.apply(op), "duplicate of op {} was applied", op.id);
    assert_eq!(
        &again, object,
        "duplicate of op {} changed the state",
        op.id
    );
}

fn bytes(v: u8) -> Value {
    vec![v]
}

// ---------------------------------------------------------------------------------------
// The random causal history.
// ---------------------------------------------------------------------------------------

/// One step of a random schedule.
#[derive(Clone, Debug)]
enum Step {
    /// `replica` prepares and applies an update derived from `choice` and `value`.
    Generate {
        replica: usize,
        choice: u8,
        value: u8,
    },
    /// `replica` receives the `pick`-th (modulo) op it may causally receive, if any.
    Deliver { replica: usize, pick: usize },
}

/// An op of the history, with its origin and causal past.
#[derive(Clone, Debug)]
struct Logged {
    op: Op,
    /// Log indices of every op the origin had applied when it prepared this one.
    deps: BTreeSet<usize>,
}

/// One replica: its object, Lamport clock, op counter and the log indices it applied.
#[derive(Clone, Debug)]
struct Replica {
    object: Object,
    lamport: u64,
    seq: u64,
    applied: BTreeSet<usize>,
}

/// A run of the replicated object: replicas plus the log of every op generated.
#[derive(Clone, Debug)]
struct Run {
    obj_type: ObjType,
    replicas: Vec<Replica>,
    log: Vec<Logged>,
}

/// The update a replica issues for a random `choice` and small `value`.
fn update_for(obj_type: ObjType, choice: u8, value: u8) -> Update {
    match obj_type {
        ObjType::Lww => Update::Assign(bytes(value)),
        ObjType::Counter => Update::Increment(i64::from(value) - 1),
        ObjType::Set if choice & 1 == 0 => Update::Add(bytes(value)),
        ObjType::Set => Update::Remove(bytes(value)),
        ObjType::MvReg => Update::MvAssign(bytes(value)),
        ObjType::Hash => hash_update(choice, value),
        ObjType::List if choice % 4 == 3 => Update::ListPop {
            left: choice & 4 == 0,
            count: u64::from(value % 3),
        },
        ObjType::List => Update::ListPush {
            left: choice & 1 == 0,
            values: vec![bytes(value); usize::from(choice % 3)],
        },
        ObjType::ZSet => zset_update(choice, value),
    }
}

/// A `ZADD`, a `ZINCRBY` (by quarters, so sums are fractional) or a `ZREM` of one or two
/// of three members (so they collide).
fn zset_update(choice: u8, value: u8) -> Update {
    let member = vec![b'a' + value % 3];
    match choice % 4 {
        0 => Update::ZAdd {
            member,
            score: (f64::from(value) - 100.0).to_bits(),
        },
        1 | 2 => Update::ZIncrement {
            member,
            delta: ((f64::from(value) - 100.0) / 4.0).to_bits(),
        },
        _ => Update::ZRemove {
            members: vec![member, vec![b'a' + choice % 3]],
        },
    }
}

/// An `HSET` of a decimal value, an `HINCRBY` or an `HDEL` of one of three fields (so
/// they collide); a field set to text now and then, which drops concurrent increments.
fn hash_update(choice: u8, value: u8) -> Update {
    let field = vec![b'a' + value % 3];
    match choice % 4 {
        0 => Update::HashSet {
            field,
            value: value.to_string().into_bytes(),
        },
        1 if value.is_multiple_of(7) => Update::HashSet {
            field,
            value: b"text".to_vec(),
        },
        1 | 2 => Update::HashIncrement {
            field,
            delta: i64::from(value) - 100,
        },
        _ => Update::HashRemove { field },
    }
}

impl Run {
    fn new(obj_type: ObjType) -> Run {
        let replica = Replica {
            object: Object::new(obj_type),
            lamport: 0,
            seq: 0,
            applied: BTreeSet::new(),
        };
        Run {
            obj_type,
            replicas: vec![replica; REPLICAS],
            log: Vec::new(),
        }
    }

    fn step(&mut self, step: &Step) {
        match *step {
            Step::Generate {
                replica,
                choice,
                value,
            } => self.generate(replica, choice, value),
            Step::Deliver { replica, pick } => {
                let ready = self.deliverable(replica);
                if !ready.is_empty() {
                    self.deliver(replica, ready[pick % ready.len()]);
                }
            }
        }
    }

    /// `replica` prepares an update against its state, stamps, logs and applies it.
    fn generate(&mut self, replica: usize, choice: u8, value: u8) {
        let update = update_for(self.obj_type, choice, value);
        // A hash refuses to increment text: the client gets an error and nothing is sent.
        let refused = self.replicas[replica].object.prepare(&update).is_err();
        if refused && self.obj_type == ObjType::Hash {
            return;
        }
        let r = &mut self.replicas[replica];
        r.lamport += 1;
        r.seq += 1;
        let id = op_id(replica as u64, r.seq);
        let op = make_op(&r.object, &update, id, ts(r.lamport, replica as u64));
        let deps = r.applied.clone();
        self.log.push(Logged { op, deps });
        self.deliver(replica, self.log.len() - 1);
    }

    /// Log indices `replica` lacks whose causal past it has fully applied.
    fn deliverable(&self, replica: usize) -> Vec<usize> {
        let applied = &self.replicas[replica].applied;
        (0..self.log.len())
            .filter(|k| !applied.contains(k) && self.log[*k].deps.is_subset(applied))
            .collect()
    }

    /// Applies log entry `k` at `replica`, checking that a duplicate is a no-op.
    fn deliver(&mut self, replica: usize, k: usize) {
        let op = &self.log[k].op;
        let r = &mut self.replicas[replica];
        assert!(self.log[k].deps.is_subset(&r.applied), "causal delivery");
        apply_new(&mut r.object, op);
        assert_duplicate_is_noop(&r.object, op);
        r.lamport = r.lamport.max(op.ts.primary);
        r.applied.insert(k);
        self.assert_tags_concurrent(replica);
    }

    /// The set stays small: no tag of an element is in the causal past of another of its
    /// tags (a re-add replaced every tag it observed), so an element holds one tag per
    /// add concurrent with the others, however often it was re-added.
    fn assert_tags_concurrent(&self, replica: usize) {
        let State::Set { elems } = &self.replicas[replica].object.state else {
            return;
        };
        for tags in elems.values() {
            let logged: Vec<usize> = tags.iter().map(|id| self.index_of(*id)).collect();
            for &a in &logged {
                for &b in &logged {
                    assert!(
                        !self.happened_before(a, b),
                        "replica {replica} keeps tag {} that {} replaced",
                        self.log[a].op.id,
                        self.log[b].op.id
                    );
                }
            }
        }
    }

    /// The log index of the op with id `id`.
    fn index_of(&self, id: OpId) -> usize {
        self.log
            .iter()
            .position(|l| l.op.id == id)
            .expect("every tag is a logged op")
    }

    /// Delivers every missing op everywhere, interleaving replicas and ops by `picks`.
    fn flush(&mut self, picks: &[usize]) {
        let mut turn = 0;
        loop {
            let pending: Vec<usize> = (0..REPLICAS)
                .filter(|r| !self.deliverable(*r).is_empty())
                .collect();
            if pending.is_empty() {
                return;
            }
            let pick = picks[turn % picks.len()];
            turn += 1;
            let replica = pending[pick % pending.len()];
            let ready = self.deliverable(replica);
            self.deliver(replica, ready[(pick / REPLICAS) % ready.len()]);
        }
    }

    /// Whether log entry `a` is in the causal past of log entry `b`.
    fn happened_before(&self, a: usize, b: usize) -> bool {
        self.log[b].deps.contains(&a)
    }

    fn concurrent(&self, a: usize, b: usize) -> bool {
        a != b && !self.happened_before(a, b) && !self.happened_before(b, a)
    }

    /// A fresh object with exactly the ops of the causally closed set `past` applied,
    /// in log order (which extends causality: deps always precede an op in the log).
    fn state_of(&self, past: &BTreeSet<usize>) -> Object {
        let mut object = Object::new(self.obj_type);
        for k in past {
            apply_new(&mut object, &self.log[*k].op);
        }
        object
    }
}

// ---------------------------------------------------------------------------------------
// The sequential specification each type must converge to, computed from the log.
// ---------------------------------------------------------------------------------------

/// The value and observed ids every replica must show once it has applied `run.log`.
fn specification(run: &Run) -> (ObjValue, Vec<OpId>) {
    match run.obj_type {
        ObjType::Lww => spec_lww(run),
        ObjType::Counter => spec_counter(run),
        ObjType::Set => spec_set(run),
        ObjType::MvReg => spec_mvreg(run),
        ObjType::Hash => spec_hash(run),
        ObjType::List => spec_list(run),
        ObjType::ZSet => spec_zset(run),
    }
}

/// The members a sorted-set effect writes.
fn zset_members(effect: &Effect) -> Vec<&Value> {
    match effect {
        Effect::ZAdd { member, .. } | Effect::ZIncrement { member, .. } => vec![member],
        Effect::ZRemove { members } => members.iter().map(|r| &r.member).collect(),
        _ => Vec::new(),
    }
}

/// The sorted set, from the causal order alone (docs/REDIS.md's rules), as the hash with
/// float scores: a member shows while some `ZADD` or `ZINCRBY` of it is in no later op's
/// past (a `ZINCRBY`'s past hides only increments); its score is the greatest such `ZADD`
/// plus the (fixed-point) increments outside its past, or without one, the increments
/// outside the past of the greatest `ZREM` that had non-zero increments in its past.
fn spec_zset(run: &Run) -> (ObjValue, Vec<OpId>) {
    use causeway_core::crdt::zset::from_fixed;
    let mut members: BTreeMap<Value, Vec<usize>> = BTreeMap::new();
    for (k, l) in run.log.iter().enumerate() {
        for m in zset_members(&l.op.effect) {
            members.entry(m.clone()).or_default().push(k);
        }
    }
    let (mut pairs, mut ids) = (Vec::new(), Vec::new());
    for (member, ops) in members {
        let effect = |k: usize| &run.log[k].op.effect;
        let is_inc = |k: usize| matches!(effect(k), Effect::ZIncrement { .. });
        let hides = |j: usize, k: usize| run.happened_before(k, j) && (!is_inc(j) || is_inc(k));
        let live: Vec<usize> = ops
            .iter()
            .copied()
            .filter(|&k| !matches!(effect(k), Effect::ZRemove { .. }))
            .filter(|&k| !ops.iter().any(|&j| hides(j, k)))
            .collect();
        if live.is_empty() {
            continue;
        }
        let unseen = |by: Option<usize>| -> i128 {
            ops.iter()
                .filter(|&&k| by.is_none_or(|b| !run.happened_before(k, b)))
                .map(|&k| match effect(k) {
                    Effect::ZIncrement { delta, .. } => *delta,
                    _ => 0,
                })
                .fold(0i128, i128::wrapping_add)
        };
        let stamp = |k: usize| (run.log[k].op.ts, run.log[k].op.id);
        let winner = live
            .iter()
            .copied()
            .filter(|&k| !is_inc(k))
            .max_by_key(|&k| stamp(k));
        let score = match winner {
            Some(w) => {
                let Effect::ZAdd { score, .. } = effect(w) else {
                    unreachable!("a live write that is no increment")
                };
                match unseen(Some(w)) {
                    0 => f64::from_bits(*score),
                    more => f64::from_bits(*score) + from_fixed(more),
                }
            }
            None => {
                let reset = ops
                    .iter()
                    .copied()
                    .filter(|&k| matches!(effect(k), Effect::ZRemove { .. }))
                    .filter(|&k| unseen(None).wrapping_sub(unseen(Some(k))) != 0)
                    .max_by_key(|&k| stamp(k));
                from_fixed(unseen(reset))
            }
        };
        pairs.push((member, score.to_bits()));
        ids.extend(live.iter().map(|&k| run.log[k].op.id));
    }
    ids.sort();
    (ObjValue::ZSet(pairs), ids)
}

/// The list (`crdt::list`'s rules): every pushed element no pop named, the left-pushed
/// by descending (timestamp, op id, index), then the right-pushed ascending.
fn spec_list(run: &Run) -> (ObjValue, Vec<OpId>) {
    use causeway_core::crdt::list::ElemId;
    let popped: BTreeSet<ElemId> = run
        .log
        .iter()
        .filter_map(|l| match &l.op.effect {
            Effect::ListRemove { ids, .. } => Some(ids.iter().copied()),
            _ => None,
        })
        .flatten()
        .collect();
    let mut elems = Vec::new();
    for l in &run.log {
        let Effect::ListPush { left, values } = &l.op.effect else {
            continue;
        };
        for (i, v) in values.iter().enumerate() {
            let id = ElemId {
                op: l.op.id,
                index: i as u32,
            };
            if !popped.contains(&id) {
                elems.push((*left, (l.op.ts, id), v.clone()));
            }
        }
    }
    elems.sort_by(|a, b| match (a.0, b.0) {
        (true, false) => std::cmp::Ordering::Less,
        (false, true) => std::cmp::Ordering::Greater,
        (true, true) => b.1.cmp(&a.1),
        (false, false) => a.1.cmp(&b.1),
    });
    let mut ids: Vec<OpId> = elems.iter().map(|e| e.1 .1.op).collect();
    ids.sort();
    ids.dedup();
    (
        ObjValue::List(elems.into_iter().map(|e| e.2).collect()),
        ids,
    )
}

/// The field a hash effect writes.
fn hash_field(effect: &Effect) -> Option<&Value> {
    match effect {
        Effect::HashSet { field, .. }
        | Effect::HashIncrement { field, .. }
        | Effect::HashRemove { field, .. } => Some(field),
        _ => None,
    }
}

/// The hash, from the causal order alone (docs/REDIS.md's rules): a field shows while
/// some `HSET` or `HINCRBY` of it is in no later op's past (an `HINCRBY`'s past hides only
/// increments); its value is the greatest such `HSET` plus the increments outside that
/// `HSET`'s past, or without one, the increments outside the past of the greatest `HDEL`
/// that had non-zero increments in its past. A text winner shows as is.
fn spec_hash(run: &Run) -> (ObjValue, Vec<OpId>) {
    let n = run.log.len();
    let mut fields: BTreeMap<Value, Vec<usize>> = BTreeMap::new();
    for k in 0..n {
        if let Some(f) = hash_field(&run.log[k].op.effect) {
            fields.entry(f.clone()).or_default().push(k);
        }
    }
    let (mut pairs, mut ids) = (Vec::new(), Vec::new());
    for (field, ops) in fields {
        let effect = |k: usize| &run.log[k].op.effect;
        let is_inc = |k: usize| matches!(effect(k), Effect::HashIncrement { .. });
        let hides = |j: usize, k: usize| run.happened_before(k, j) && (!is_inc(j) || is_inc(k));
        let live: Vec<usize> = ops
            .iter()
            .copied()
            .filter(|&k| !matches!(effect(k), Effect::HashRemove { .. }))
            .filter(|&k| !ops.iter().any(|&j| hides(j, k)))
            .collect();
        if live.is_empty() {
            continue;
        }
        let unseen = |by: Option<usize>| -> i64 {
            ops.iter()
                .filter(|&&k| by.is_none_or(|b| !run.happened_before(k, b)))
                .map(|&k| match effect(k) {
                    Effect::HashIncrement { delta, .. } => *delta,
                    _ => 0,
                })
                .fold(0i64, i64::wrapping_add)
        };
        let stamp = |k: usize| (run.log[k].op.ts, run.log[k].op.id);
        let winner = live
            .iter()
            .copied()
            .filter(|&k| !is_inc(k))
            .max_by_key(|&k| stamp(k));
        let value = match winner {
            Some(w) => {
                let Effect::HashSet { value, .. } = effect(w) else {
                    unreachable!("a live write that is no increment")
                };
                match std::str::from_utf8(value)
                    .ok()
                    .and_then(|t| t.parse::<i64>().ok())
                {
                    Some(v) => v.wrapping_add(unseen(Some(w))).to_string().into_bytes(),
                    None => value.clone(),
                }
            }
            None => {
                let reset = ops
                    .iter()
                    .copied()
                    .filter(|&k| matches!(effect(k), Effect::HashRemove { .. }))
                    .filter(|&k| unseen(None).wrapping_sub(unseen(Some(k))) != 0)
                    .max_by_key(|&k| stamp(k));
                unseen(reset).to_string().into_bytes()
            }
        };
        pairs.push((field, value));
        ids.extend(live.iter().map(|&k| run.log[k].op.id));
    }
    ids.sort();
    (ObjValue::Hash(pairs), ids)
}

/// Last writer wins: the assignment with the greatest (timestamp, id).
fn spec_lww(run: &Run) -> (ObjValue, Vec<OpId>) {
    let winner = run
        .log
        .iter()
        .filter_map(|l| match &l.op.effect {
            Effect::Assign(v) => Some(((l.op.ts, l.op.id), v.clone())),
            _ => None,
        })
        .max();
    match winner {
        Some(((_, id), v)) => (ObjValue::Lww(Some(v)), vec![id]),
        None => (ObjValue::Lww(None), Vec::new()),
    }
}

/// A counter is the sum of every increment.
fn spec_counter(run: &Run) -> (ObjValue, Vec<OpId>) {
    let sum = run.log.iter().fold(0i64, |acc, l| match l.op.effect {
        Effect::Increment(d) => acc.wrapping_add(d),
        _ => acc,
    });
    (ObjValue::Counter(sum), Vec::new())
}

/// The element an add or remove effect is about.
fn set_elem(effect: &Effect) -> Option<&Value> {
    match effect {
        Effect::Add { elem, .. } | Effect::Remove { elem, .. } => Some(elem),
        _ => None,
    }
}

/// Add wins, optimized: an add's tag is visible unless some later remove or add of the
/// element had it in its causal past (a re-add replaces the tags it observed).
fn spec_set(run: &Run) -> (ObjValue, Vec<OpId>) {
    let superseded = |k: usize, elem: &Value| {
        run.log
            .iter()
            .enumerate()
            .any(|(j, l)| set_elem(&l.op.effect) == Some(elem) && run.happened_before(k, j))
    };
    let mut elems = BTreeSet::new();
    let mut ids = Vec::new();
    for (k, l) in run.log.iter().enumerate() {
        if let Effect::Add { elem: e, .. } = &l.op.effect {
            if !superseded(k, e) {
                elems.insert(e.clone());
                ids.push(l.op.id);
            }
        }
    }
    ids.sort();
    (ObjValue::Set(elems.into_iter().collect()), ids)
}

/// Multi-value: the assignments no later assignment had in its causal past.
fn spec_mvreg(run: &Run) -> (ObjValue, Vec<OpId>) {
    let maximal: Vec<&Logged> = (0..run.log.len())
        .filter(|k| !(0..run.log.len()).any(|j| run.happened_before(*k, j)))
        .map(|k| &run.log[k])
        .collect();
    let mut values: Vec<Value> = maximal
        .iter()
        .filter_map(|l| match &l.op.effect {
            Effect::MvAssign { value, .. } => Some(value.clone()),
            _ => None,
        })
        .collect();
    values.sort();
    values.dedup();
    let mut ids: Vec<OpId> = maximal.iter().map(|l| l.op.id).collect();
    ids.sort();
    (ObjValue::MvReg(values), ids)
}

// ---------------------------------------------------------------------------------------
// The properties.
// ---------------------------------------------------------------------------------------

/// (a) After full delivery all replicas agree, and agree with the specification.
fn check_convergence(run: &Run) {
    let all: BTreeSet<usize> = (0..run.log.len()).collect();
    let (value, observed) = specification(run);
    for (i, r) in run.replicas.iter().enumerate() {
        assert_eq!(r.applied, all, "replica {i} missed ops");
        assert_eq!(r.object.value(), value, "replica {i} value");
        assert_eq!(r.object.observed(), observed, "replica {i} observed ids");
    }
}

/// (b) Re-delivering any op to any converged replica changes nothing.
fn check_redelivery(run: &Run) {
    for r in &run.replicas {
        for l in &run.log {
            assert_duplicate_is_noop(&r.object, &l.op);
        }
    }
}

/// (c) Concurrent ops commute from the state holding exactly both their causal pasts.
fn check_commutativity(run: &Run) {
    for a in 0..run.log.len() {
        for b in a + 1..run.log.len() {
            if run.concurrent(a, b) {
                check_pair_commutes(run, a, b);
            }
        }
    }
}

fn check_pair_commutes(run: &Run, a: usize, b: usize) {
    let past: BTreeSet<usize> = run.log[a].deps.union(&run.log[b].deps).copied().collect();
    let base = run.state_of(&past);
    let (op_a, op_b) = (&run.log[a].op, &run.log[b].op);
    let mut ab = base.clone();
    apply_new(&mut ab, op_a);
    apply_new(&mut ab, op_b);
    let mut ba = base;
    apply_new(&mut ba, op_b);
    apply_new(&mut ba, op_a);
    assert_eq!(ab, ba, "ops {} and {} do not commute", op_a.id, op_b.id);
    assert_eq!(ab.value(), ba.value());
    assert_eq!(ab.observed(), ba.observed());
}

/// (d) A transaction's copy of the state ([`Object::clone_state`]) reads and generates
/// exactly like the replica it came from, though it holds no applied ids.
fn check_state_copy(run: &Run, obj_type: ObjType) {
    for r in &run.replicas {
        let copy = r.object.clone_state();
        assert_eq!(copy.value(), r.object.value());
        assert_eq!(copy.observed(), r.object.observed());
        for l in &run.log {
            assert!(!copy.has_seen(&l.op.id), "a state copy carries applied ids");
        }
        for choice in 0..4u8 {
            let update = update_for(obj_type, choice, 1);
            assert_eq!(copy.prepare(&update), r.object.prepare(&update));
        }
    }
}

/// Runs a random schedule to full delivery and checks every property.
fn check_history(obj_type: ObjType, steps: &[Step], picks: &[usize]) {
    let mut run = Run::new(obj_type);
    for step in steps {
        run.step(step);
    }
    run.flush(picks);
    check_convergence(&run);
    check_redelivery(&run);
    check_commutativity(&run);
    check_state_copy(&run, obj_type);
}

fn step_strategy() -> impl Strategy<Value = Step> {
    let generate =
        (0..REPLICAS, any::<u8>(), 0..3u8).prop_map(|(replica, choice, value)| Step::Generate {
            replica,
            choice,
            value,
        });
    let deliver =
        (0..REPLICAS, any::<usize>()).prop_map(|(replica, pick)| Step::Deliver { replica, pick });
    prop_oneof![generate, deliver]
}

fn steps_strategy() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(step_strategy(), 1..48)
}

fn picks_strategy() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(any::<usize>(), 1..16)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn lww_histories_converge_dedup_and_commute(
        steps in steps_strategy(),
        picks in picks_strategy(),
    ) {
        check_history(ObjType::Lww, &steps, &picks);
    }

    #[test]
    fn counter_histories_converge_dedup_and_commute(
        steps in steps_strategy(),
        picks in picks_strategy(),
    ) {
        check_history(ObjType::Counter, &steps, &picks);
    }

    #[test]
    fn set_histories_converge_dedup_and_commute(
        steps in steps_strategy(),
        picks in picks_strategy(),
    ) {
        check_history(ObjType::Set, &steps, &picks);
    }

    #[test]
    fn hash_histories_converge_dedup_and_commute(
        steps in steps_strategy(),
        picks in picks_strategy(),
    ) {
        check_history(ObjType::Hash, &steps, &picks);
    }

    #[test]
    fn list_histories_converge_dedup_and_commute(
        steps in steps_strategy(),
        picks in picks_strategy(),
    ) {
        check_history(ObjType::List, &steps, &picks);
    }

    #[test]
    fn zset_histories_converge_dedup_and_commute(
        steps in steps_strategy(),
        picks in picks_strategy(),
    ) {
        check_history(ObjType::ZSet, &steps, &picks);
    }

    #[test]
    fn mvreg_histories_converge_dedup_and_commute(
        steps in steps_strategy(),
        picks in picks_strategy(),
    ) {
        check_history(ObjType::MvReg, &steps, &picks);
    }
}

// ---------------------------------------------------------------------------------------
// Hand-written scenarios.
// ---------------------------------------------------------------------------------------

/// Applies `ops` in order to a fresh object of `obj_type`.
fn replay(obj_type: ObjType, ops: &[&Op]) -> Object {
    let mut object = Object::new(obj_type);
    for op in ops {
        apply_new(&mut object, op);
    }
    object
}

#[test]
fn set_concurrent_add_and_remove_of_unseen_add_keeps_element() {
    let empty = Object::new(ObjType::Set);
    let add = make_op(&empty, &Update::Add(bytes(7)), op_id(0, 1), ts(1, 0));
    let remove = make_op(&empty, &Update::Remove(bytes(7)), op_id(1, 1), ts(1, 1));
    for order in [[&add, &remove], [&remove, &add]] {
        let object = replay(ObjType::Set, &order);
        assert_eq!(object.value(), ObjValue::Set(vec![bytes(7)]));
        assert_eq!(object.observed(), vec![add.id]);
    }
}

#[test]
fn set_concurrent_readd_wins_over_remove_of_older_add() {
    let first = make_op(
        &Object::new(ObjType::Set),
        &Update::Add(bytes(7)),
        op_id(0, 1),
        ts(1, 0),
    );
    let shared = replay(ObjType::Set, &[&first]);
    let readd = make_op(&shared, &Update::Add(bytes(7)), op_id(0, 2), ts(2, 0));
    let remove = make_op(&shared, &Update::Remove(bytes(7)), op_id(1, 1), ts(2, 1));
    for order in [[&readd, &remove], [&remove, &readd]] {
        let mut object = shared.clone();
        order.iter().for_each(|op| apply_new(&mut object, op));
        assert_eq!(object.value(), ObjValue::Set(vec![bytes(7)]));
        assert_eq!(object.observed(), vec![readd.id]);
    }
}

#[test]
fn set_remove_after_observing_add_removes_element() {
    let add = make_op(
        &Object::new(ObjType::Set),
        &Update::Add(bytes(3)),
        op_id(0, 1),
        ts(1, 0),
    );
    let seen = replay(ObjType::Set, &[&add]);
    let remove = make_op(&seen, &Update::Remove(bytes(3)), op_id(1, 1), ts(2, 1));
    assert_eq!(
        remove.effect,
        Effect::Remove {
            elem: bytes(3),
            tags: vec![add.id]
        }
    );
    let object = replay(ObjType::Set, &[&add, &remove]);
    assert_eq!(object.value(), ObjValue::Set(Vec::new()));
    assert!(object.observed().is_empty());
}

#[test]
fn set_readds_of_one_member_keep_one_tag() {
    let mut object = Object::new(ObjType::Set);
    let mut last = None;
    for seq in 1..=100 {
        let op = make_op(&object, &Update::Add(bytes(5)), op_id(0, seq), ts(seq, 0));
        let expected: Vec<OpId> = last.into_iter().collect();
        assert_eq!(
            op.effect,
            Effect::Add {
                elem: bytes(5),
                replaces: expected
            }
        );
        apply_new(&mut object, &op);
        last = Some(op.id);
    }
    assert_eq!(object.value(), ObjValue::Set(vec![bytes(5)]));
    assert_eq!(object.observed(), vec![op_id(0, 100)]);
    let remove = make_op(&object, &Update::Remove(bytes(5)), op_id(1, 1), ts(101, 1));
    apply_new(&mut object, &remove);
    assert_eq!(object.value(), ObjValue::Set(Vec::new()));
}

#[test]
fn set_concurrent_readds_keep_their_tags_until_one_observes_both() {
    let first = make_op(
        &Object::new(ObjType::Set),
        &Update::Add(bytes(2)),
        op_id(0, 1),
        ts(1, 0),
    );
    let shared = replay(ObjType::Set, &[&first]);
    let left = make_op(&shared, &Update::Add(bytes(2)), op_id(0, 2), ts(2, 0));
    let right = make_op(&shared, &Update::Add(bytes(2)), op_id(1, 1), ts(2, 1));
    let both = replay(ObjType::Set, &[&first, &left, &right]);
    assert_eq!(both, replay(ObjType::Set, &[&first, &right, &left]));
    assert_eq!(both.observed(), vec![left.id, right.id]);
    let joined = make_op(&both, &Update::Add(bytes(2)), op_id(2, 1), ts(3, 2));
    let last = replay(ObjType::Set, &[&first, &right, &left, &joined]);
    assert_eq!(last.value(), ObjValue::Set(vec![bytes(2)]));
    assert_eq!(last.observed(), vec![joined.id]);
}

#[test]
fn mvreg_concurrent_assigns_keep_both_values_until_overwritten() {
    let empty = Object::new(ObjType::MvReg);
    let a = make_op(&empty, &Update::MvAssign(bytes(1)), op_id(0, 1), ts(1, 0));
    let b = make_op(&empty, &Update::MvAssign(bytes(2)), op_id(1, 1), ts(1, 1));
    let both = replay(ObjType::MvReg, &[&a, &b]);
    assert_eq!(both, replay(ObjType::MvReg, &[&b, &a]));
    assert_eq!(both.value(), ObjValue::MvReg(vec![bytes(1), bytes(2)]));
    assert_eq!(both.observed(), vec![a.id, b.id]);
    let c = make_op(&both, &Update::MvAssign(bytes(3)), op_id(2, 1), ts(2, 2));
    let last = replay(ObjType::MvReg, &[&a, &b, &c]);
    assert_eq!(last.value(), ObjValue::MvReg(vec![bytes(3)]));
    assert_eq!(last.observed(), vec![c.id]);
}

#[test]
fn lww_greater_timestamp_then_greater_id_wins_in_any_order() {
    let empty = Object::new(ObjType::Lww);
    let old = make_op(&empty, &Update::Assign(bytes(1)), op_id(0, 1), ts(5, 0));
    let new = make_op(&empty, &Update::Assign(bytes(2)), op_id(0, 2), ts(9, 0));
    // Same timestamp as `new`, greater op id (session 1 > session 0): wins the tie.
    let tie = make_op(&empty, &Update::Assign(bytes(3)), op_id(1, 1), ts(9, 0));
    assert_eq!(
        replay(ObjType::Lww, &[&new, &old]).value(),
        ObjValue::Lww(Some(bytes(2)))
    );
    for order in [[&old, &new, &tie], [&tie, &new, &old], [&new, &tie, &old]] {
        let object = replay(ObjType::Lww, &order);
        assert_eq!(object.value(), ObjValue::Lww(Some(bytes(3))));
        assert_eq!(object.observed(), vec![tie.id]);
    }
}

#[test]
fn counter_sums_increments_and_decrements() {
    let empty = Object::new(ObjType::Counter);
    let ops: Vec<Op> = [5i64, -2, 10, -1]
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let seq = i as u64 + 1;
            make_op(
                &empty,
                &Update::Increment(*d),
                op_id(i as u64 % 2, seq),
                ts(seq, 0),
            )
        })
        .collect();
    let refs: Vec<&Op> = ops.iter().rev().collect();
    let object = replay(ObjType::Counter, &refs);
    assert_eq!(object.value(), ObjValue::Counter(12));
    assert!(object.observed().is_empty());
}

#[test]
fn prepare_on_wrong_type_is_an_error() {
    let types = [ObjType::Lww, ObjType::Counter, ObjType::Set, ObjType::MvReg];
    let updates = [
        Update::Assign(bytes(1)),
        Update::Increment(1),
        Update::Add(bytes(1)),
        Update::Remove(bytes(1)),
        Update::MvAssign(bytes(1)),
    ];
    for expected in types {
        let object = Object::new(expected);
        for update in &updates {
            let found = update.obj_type();
            let result = object.prepare(update);
            if found == expected {
                assert!(result.is_ok(), "{update:?} on {expected:?}");
            } else {
                assert_eq!(result, Err(Error::WrongType { expected, found }));
            }
        }
    }
}

/// Without causal delivery (the `eventual` baseline), a remove of a tag can arrive before
/// the add it removes: the add must stay removed, at the replica that saw the remove first
/// as at the one that saw the add first, or the replicas keep different tags for ever.
#[test]
fn an_add_delivered_after_the_remove_that_observed_it_stays_removed() {
    let empty = Object::new(ObjType::Set);
    let add = make_op(&empty, &Update::Add(bytes(7)), op_id(0, 1), ts(1, 0));
    let mut origin = empty.clone();
    apply_new(&mut origin, &add);
    let remove = make_op(&origin, &Update::Remove(bytes(7)), op_id(1, 1), ts(2, 0));
    let readd = make_op(&origin, &Update::Add(bytes(7)), op_id(2, 1), ts(2, 1));
    let mut in_order = empty.clone();
    for op in [&add, &remove] {
        apply_new(&mut in_order, op);
    }
    let mut reordered = empty.clone();
    apply_new(&mut reordered, &remove);
    assert!(
        !reordered.apply(&add),
        "the removed add is not applied late"
    );
    assert_eq!(reordered.value(), in_order.value());
    assert_eq!(reordered.observed(), in_order.observed());
    let mut late_readd = empty;
    apply_new(&mut late_readd, &readd);
    assert!(
        !late_readd.apply(&add),
        "the replaced add is not applied late"
    );
    assert_eq!(late_readd.observed(), vec![op_id(2, 1)]);
}

/// Without causal delivery, a chain of re-adds can arrive out of order: `a1`, then `a2`
/// replacing `a1`, then `a3` replacing `a2`; a replica that gets `a3`, then `a1`, then
/// `a2` must still drop `a1` when `a2` arrives (though `a2` itself is not applied, `a3`
/// having replaced it), or it keeps `a1` for ever where the others do not. The same for
/// a multi-value register's dominated entries.
#[test]
fn a_late_replaced_op_still_applies_its_own_replacements() {
    for (t, update) in [
        (ObjType::Set, Update::Add(bytes(7))),
        (ObjType::MvReg, Update::MvAssign(bytes(7))),
    ] {
        let mut origin = Object::new(t);
        let a1 = make_op(&origin, &update, op_id(0, 1), ts(1, 0));
        apply_new(&mut origin, &a1);
        let a2 = make_op(&origin, &update, op_id(1, 1), ts(2, 1));
        apply_new(&mut origin, &a2);
        let a3 = make_op(&origin, &update, op_id(2, 1), ts(3, 2));
        apply_new(&mut origin, &a3);
        let mut reordered = Object::new(t);
        apply_new(&mut reordered, &a3);
        apply_new(&mut reordered, &a1); // a3 replaced a2 only: a1 is news here
        assert!(!reordered.apply(&a2), "{t:?}: a2 was replaced by a3");
        assert_eq!(reordered.observed(), origin.observed(), "{t:?}");
        assert_eq!(reordered.value(), origin.value(), "{t:?}");
        assert_duplicate_is_noop(&reordered, &a2);
    }
}
