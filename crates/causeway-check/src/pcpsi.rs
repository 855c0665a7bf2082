//! The PC-PSI checker (Occult, §6.1): per-client parallel snapshot isolation, judged on
//! the direct serialization graph DSG(H) over the counted transactions (as in [`crate::tcc`]:
//! committed ones, and unknown-outcome ones whose writes someone observed).
//!
//! DSG(H) has four kinds of edges:
//! - `wr`: the target read a write of the source;
//! - `ww`: the target's write of a key directly follows the source's in the key's version
//!   order, which the history carries as [`History::overwrites`] (the key's master reports
//!   which version each write overwrote);
//! - `rw` (anti-dependency): the source read a version of a key and the target wrote the
//!   next one (a read of the initial value precedes the key's first version);
//! - `sd`: session dependency, from a committed transaction to the next counted one of its
//!   session (session order by start time, [`crate::session_order`]).
//!
//! The checks, in order (the first failure is the counterexample):
//! 1. observed ids name counted writes of the read key, a register shows the value written
//!    (`Malformed`, `BadValue`), and no committed read observes an aborted write
//!    (`ReadFromAborted`: Aborted Reads);
//! 2. no committed read observes another transaction's write that the writer itself
//!    superseded later in its ops (`IntermediateRead`). Superseded: a register assignment
//!    followed by another write of the key, or a set add followed by a remove or a re-add
//!    of the same element (the re-add replaces the earlier tag); counters name no writes
//!    and set adds of other elements supersede nothing;
//! 3. the version order is well formed: an overwritten write is a write of the same key
//!    and no version is overwritten twice (`Malformed`);
//! 4. `wr ∪ ww ∪ sd` is acyclic (`CircularFlow`: Circular Information Flow);
//! 5. no cycle has exactly one `rw` edge (`MissedEffect`: Missed Effects): for each
//!    `rw` edge `T1 -> T2`, `T2` must not reach `T1` over `wr ∪ ww ∪ sd`.
//!
//! What the check derives, and what it leaves out (it is then weaker, never wrong):
//! - `ww` and `rw` edges come only from [`History::overwrites`]; a write the protocol did
//!   not report is in no version order (empty for protocols without a master per key, so
//!   only checks 1, 2 and a `wr ∪ sd` cycle check remain). Entries naming writes of
//!   transactions that do not count (aborted, or unknown and unobserved) are skipped.
//! - `rw` edges come from register reads only: an lww read names the version it read (its
//!   one observed id, or none for the initial value); an mvreg read names the latest of its
//!   observed ids in the version order (skipped when one of them has no position there).
//!   Counter reads name no writes and set reads name only visible adds, so neither says
//!   which version it read: they give no `rw` edge. Nor does a read of a register that
//!   counts (`Update::RegisterIncrement`): it names the winning assignment, not which of
//!   the increments after it (versions too) it added up.
//!
//! Check 5 walks, per `rw` target, forward over `wr ∪ ww ∪ sd` in a topological order kept
//! close to commit time, visiting only nodes no later in that order than the farthest
//! source it looks for; a history's anti-dependencies mostly point forward in time, so the
//! walks stay short.

use crate::graph::{EdgeKind, Graph};
use crate::history::{HOp, History, Outcome};
use crate::tcc::{causal_graph, check_observed, writes_of, Model, Stats};
use crate::{Violation, ViolationKind};
use causeway_core::{Key, ObjType, OpId, TxnId, Update};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

/// A key's version: `None` is the initial value, `Some(w)` the version write `w` made.
type Version = Option<OpId>;

/// The version order of the reported writes.
struct Versions<'a> {
    /// For a key's version, the write that directly overwrote it.
    next: BTreeMap<(&'a Key, Version), OpId>,
    /// Each write's place in its key's chain, for chains that start at the initial value.
    pos: BTreeMap<OpId, usize>,
}

/// Checks `history` for PC-PSI (checks 1-5 above); convergence is separate.
pub fn check_pcpsi(history: &History) -> Result<Stats, Violation> {
    // Each part of another type of a key is a key of its own (`crate::parts`).
    let split = crate::parts::split(history);
    let history = split.as_ref().map_or(history, |s| &s.history);
    let m = Model::build(history)?;
    check_observed(&m, history)?;
    check_intermediate(&m)?;
    let versions = version_order(&m, history)?;
    let mut g = causal_graph(&m);
    for (&(_, prev), &w) in &versions.next {
        if let Some(v) = prev {
            g.add(m.writes[&v].node, m.writes[&w].node, EdgeKind::WriteWrite);
        }
    }
    if let Err(cycle) = g.topo_order() {
        let (txns, path) = describe(&m, &cycle);
        return Err(Violation::new(
            ViolationKind::CircularFlow,
            txns,
            format!("wr/ww/sd edges form a cycle: {path}"),
        ));
    }
    let rw = anti_dependencies(&m, &versions);
    check_missed_effects(&m, &g, &rw)?;
    let reads = m
        .txns
        .iter()
        .filter(|t| t.outcome == Outcome::Committed)
        .flat_map(|t| &t.ops)
        .filter(|op| matches!(op, HOp::Read { .. }))
        .count();
    Ok(Stats {
        txns: history.txns.len(),
        counted: m.txns.len(),
        reads,
        causal_edges: g.edge_count(),
        rw_edges: rw.len(),
        finals: history.finals.len(),
        ..Stats::default()
    })
}

/// The writes each counted transaction superseded later in its own ops, mapped to the
/// write that superseded them (check 2's rule).
fn superseded(m: &Model) -> BTreeMap<OpId, OpId> {
    let mut out = BTreeMap::new();
    for t in &m.txns {
        let mut earlier: BTreeMap<&Key, Vec<(OpId, &Update)>> = BTreeMap::new();
        for (key, update, id) in writes_of(t) {
            let list = earlier.entry(key).or_default();
            for (old, old_update) in list.iter() {
                let hides = match (update, old_update) {
                    (Update::Assign(_) | Update::MvAssign(_), _) => true,
                    (Update::Remove(e) | Update::Add(e), Update::Add(a)) => e == a,
                    _ => false,
                };
                if hides {
                    out.entry(*old).or_insert(id);
                }
            }
            list.push((id, update));
        }
    }
    out
}

/// Check 2: no committed read observes another transaction's superseded write (also
/// TCC's: a transaction's writes become visible together, as its final state).
pub(crate) fn check_intermediate(m: &Model) -> Result<(), Violation> {
    let superseded = superseded(m);
    if superseded.is_empty() {
        return Ok(());
    }
    for t in m.txns.iter().filter(|t| t.outcome == Outcome::Committed) {
        for op in &t.ops {
            let HOp::Read { key, observed, .. } = op else {
                continue;
            };
            let hit = observed
                .iter()
                .filter(|id| id.txn != t.id)
                .find_map(|id| superseded.get(id).map(|later| (id, later)));
            if let Some((id, later)) = hit {
                return Err(Violation::new(
                    ViolationKind::IntermediateRead,
                    vec![t.id, id.txn],
                    format!(
                        "{} read {key} from {id}, which {} later superseded with {later}",
                        t.id, id.txn
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn malformed(txns: Vec<TxnId>, why: String) -> Violation {
    Violation::new(ViolationKind::Malformed, txns, why)
}

/// Check 3: indexes [`History::overwrites`] by overwritten version, skipping writes of
/// transactions that do not count.
fn version_order<'a>(m: &Model<'a>, history: &History) -> Result<Versions<'a>, Violation> {
    let mut next: BTreeMap<(&'a Key, Version), OpId> = BTreeMap::new();
    for (&w, &prev) in &history.overwrites {
        let Some(wi) = m.writes.get(&w) else {
            if m.dropped.contains_key(&w) {
                continue;
            }
            return Err(malformed(
                vec![w.txn],
                format!("the version order names {w}, which no transaction wrote"),
            ));
        };
        if let Some(v) = prev {
            match m.writes.get(&v) {
                Some(vi) if vi.key == wi.key && v != w => {}
                None if m.dropped.contains_key(&v) => continue,
                _ => {
                    return Err(malformed(
                        vec![w.txn, v.txn],
                        format!("{w}, a write of {}, cannot overwrite {v}", wi.key),
                    ))
                }
            }
        }
        if let Some(other) = next.insert((wi.key, prev), w) {
            let what = prev.map_or("the initial value".to_string(), |v| v.to_string());
            return Err(malformed(
                vec![other.txn, w.txn],
                format!("{other} and {w} both overwrote {what} of {}", wi.key),
            ));
        }
    }
    let mut pos = BTreeMap::new();
    for (&(key, prev), &first) in &next {
        if prev.is_some() {
            continue;
        }
        let mut at = Some(first);
        while let Some(w) = at {
            pos.insert(w, pos.len());
            at = next.get(&(key, Some(w))).copied();
        }
    }
    Ok(Versions { next, pos })
}

/// The version a committed read of a register names, if it names one (see the module
/// docs); `None` when it does not.
fn read_version(obj: ObjType, observed: &[OpId], versions: &Versions) -> Option<Version> {
    match (obj, observed) {
        (ObjType::Lww | ObjType::MvReg, []) => Some(None),
        (ObjType::Lww, [v]) => Some(Some(*v)),
        (ObjType::MvReg, many) => {
            let placed: Option<Vec<(usize, OpId)>> = many
                .iter()
                .map(|id| versions.pos.get(id).map(|p| (*p, *id)))
                .collect();
            placed?.into_iter().max().map(|(_, id)| Some(id))
        }
        _ => None,
    }
}

/// The `rw` edges: a committed reader to the writer of the version after the one it read.
fn anti_dependencies(m: &Model, versions: &Versions) -> BTreeSet<(usize, usize)> {
    let mut rw = BTreeSet::new();
    for (node, t) in m.txns.iter().enumerate() {
        if t.outcome != Outcome::Committed {
            continue;
        }
        for op in &t.ops {
            let HOp::Read {
                key, obj, observed, ..
            } = op
            else {
                continue;
            };
            if m.counts(key) {
                continue; // no version named (module docs)
            }
            let Some(version) = read_version(*obj, observed, versions) else {
                continue;
            };
            if let Some(w) = versions.next.get(&(key, version)) {
                let writer = m.writes[w].node;
                if writer != node {
                    rw.insert((node, writer));
                }
            }
        }
    }
    rw
}

/// A topological order of the acyclic `g` that prefers transactions that ended earlier,
/// as each node's place in it.
fn timed_order(m: &Model, g: &Graph) -> Vec<usize> {
    let n = g.len();
    let mut indegree = vec![0usize; n];
    for v in 0..n {
        for &(to, _) in g.successors(v) {
            indegree[to] += 1;
        }
    }
    let key = |v: usize| Reverse((m.txns[v].end_ns, m.txns[v].start_ns, v));
    let mut ready: BinaryHeap<_> = (0..n).filter(|v| indegree[*v] == 0).map(key).collect();
    let mut place = vec![usize::MAX; n];
    let mut at = 0;
    while let Some(Reverse((_, _, v))) = ready.pop() {
        place[v] = at;
        at += 1;
        for &(to, _) in g.successors(v) {
            indegree[to] -= 1;
            if indegree[to] == 0 {
                ready.push(key(to));
            }
        }
    }
    place
}

/// Check 5: for each `rw` edge `a -> b`, `b` must not reach `a` over `g`.
fn check_missed_effects(
    m: &Model,
    g: &Graph,
    rw: &BTreeSet<(usize, usize)>,
) -> Result<(), Violation> {
    if rw.is_empty() {
        return Ok(());
    }
    let place = timed_order(m, g);
    let mut sources: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for &(a, b) in rw {
        // In a topological order a path from b to a needs b placed before a.
        if place[b] < place[a] {
            sources.entry(b).or_default().push(a);
        }
    }
    let mut walk = Walk::new(g.len());
    for (b, list) in sources {
        let bound = list.iter().map(|a| place[*a]).max().unwrap_or(0);
        walk.run(g, &place, b, bound);
        if let Some(&a) = list.iter().find(|a| walk.reached(**a)) {
            let mut cycle = walk.path_to(a);
            cycle.push((a, b, EdgeKind::ReadWrite));
            let (txns, path) = describe(m, &cycle);
            return Err(Violation::new(
                ViolationKind::MissedEffect,
                txns,
                format!("a cycle with one rw edge: {path}"),
            ));
        }
    }
    Ok(())
}

/// A breadth-first walk over `g`, reusable across starts (visits are stamped by round).
struct Walk {
    round: u32,
    seen: Vec<u32>,
    parent: Vec<(usize, EdgeKind)>,
    start: usize,
}

impl Walk {
    fn new(n: usize) -> Walk {
        Walk {
            round: 0,
            seen: vec![0; n],
            parent: vec![(usize::MAX, EdgeKind::Session); n],
            start: 0,
        }
    }

    /// Visits what `start` reaches among nodes placed at most `bound`.
    fn run(&mut self, g: &Graph, place: &[usize], start: usize, bound: usize) {
        self.round += 1;
        self.start = start;
        self.seen[start] = self.round;
        let mut queue = std::collections::VecDeque::from([start]);
        while let Some(v) = queue.pop_front() {
            for &(to, kind) in g.successors(v) {
                if place[to] <= bound && self.seen[to] != self.round {
                    self.seen[to] = self.round;
                    self.parent[to] = (v, kind);
                    queue.push_back(to);
                }
            }
        }
    }

    fn reached(&self, v: usize) -> bool {
        self.seen[v] == self.round
    }

    /// The edges from the start to the reached `v`.
    fn path_to(&self, mut v: usize) -> Vec<(usize, usize, EdgeKind)> {
        let mut path = Vec::new();
        while v != self.start {
            let (from, kind) = self.parent[v];
            path.push((from, v, kind));
            v = from;
        }
        path.reverse();
        path
    }
}

/// The transactions of a cycle and its edges as text, with PC-PSI's edge names.
fn describe(m: &Model, cycle: &[(usize, usize, EdgeKind)]) -> (Vec<TxnId>, String) {
    let txns: Vec<TxnId> = cycle.iter().map(|(from, _, _)| m.id(*from)).collect();
    let path: Vec<String> = cycle
        .iter()
        .map(|(from, to, kind)| {
            let name = match kind {
                EdgeKind::Session => "sd",
                other => other.name(),
            };
            format!("{} -{name}-> {}", m.id(*from), m.id(*to))
        })
        .collect();
    (txns, path.join(", "))
}
