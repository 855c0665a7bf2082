//! Partial Order-Restrictions consistency (PoR, UniStore §3): everything TCC checks, plus
//! Conflict Ordering: two committed strong transactions that conflict (per a
//! [`ConflictRelation`]) are ordered by causality, one in the other's past. Causal
//! transactions conflict freely; PoR restricts strong ones only.
//!
//! The history shows only the causal order that reads reveal (`co = (so ∪ wr)+`, see
//! [`crate::tcc`]); a strong transaction's snapshot can hold a conflicting one that none of
//! its reads names (two storeBuyNow of one RUBiS item read its quantity, a counter, which
//! names no writes). "Neither is in the other's observed past" is therefore no violation
//! by itself. Like TCC's checks, this one flags only what no causal order extending `co`
//! can explain: a pair of conflicting strong transactions that the reads prove unordered.
//!
//! **Evidence.** A committed strong `R` reads key `k` (before writing `k` itself) and a
//! counted strong `W` writes `k`. `W` is provably not in `R`'s past when TCC would reject
//! the read with `W` in that past:
//! - a register (lww, mvreg) read whose shown writes are all by transactions in `W`'s
//!   causal past, or none (the initial value): `W` overwrote what `R` saw;
//! - a set read missing an add of `W`'s, of an element no transaction removes (a remove
//!   could have hidden it), showing no add of that element outside `W`'s causal past (a
//!   re-add replaces the tags it observed, so such an add could have hidden it too).
//!
//! Counter reads name no writes and prove nothing. If `R` and `W` conflict, PoR puts `R` in
//! `W`'s past: a conflict edge `R -cf-> W`.
//!
//! **Checks**, after TCC passed; the first failure is the counterexample:
//! 1. no two edges `R -cf-> W` and `W -cf-> R`: neither can precede the other. When both
//!    read one register at the same version and both wrote it, that is a lost update
//!    (`LostUpdate`: a strong read-modify-write must read the previous strong write of the
//!    key), otherwise `ConflictOrder` (e.g. write skew, or a bid stored concurrently with
//!    the auction's close);
//! 2. `co ∪ cf` is acyclic (`ConflictOrder`), e.g. three strong transactions, each
//!    provably missing the next;
//! 3. TCC's read and arbitration checks hold under `(co ∪ cf)+`, which the real causal
//!    order contains too (failures reported as `ConflictOrder`).
//!
//! The larger past can prove more writes missing, so the round repeats until it adds no
//! edge, at most [`ROUNDS_MAX`] times. Edges between transactions `co` already orders are
//! never added: `R` before `W` is implied, and `W` before `R` with evidence is a stale
//! read TCC rejected.
//!
//! **Which transactions count.** Committed strong ones; strong ones with an unknown
//! outcome whose writes someone observed count as committed (they did commit), as writers
//! only: their reads are not judged, as in TCC. Aborted strong transactions are ignored,
//! and so are unknown-outcome ones nobody observed: they may not have committed, and if
//! they did, no read shows it. This never flags a correct history; it can miss a violation
//! that only such a transaction would reveal.
//!
//! **Cost.** Pairs are formed only between a strong read of `k` and a strong writer of `k`,
//! never between all pairs of strong transactions. Per key, the strong writers are sorted
//! along a topological order of the causal graph. When each is causally before the next,
//! they form a chain (a set sorted by a linear extension is totally ordered iff each
//! consecutive pair is ordered, by transitivity). A reader causally ordered with its two
//! neighbours in the chain (the last writer before it and the first after) is then ordered
//! with every writer (those before the first neighbour are in its past through it, those
//! after the second in its future), so it forms no edge: two bit tests. That is the
//! common case of a correct run where a key's strong writers conflict with each other
//! (read-modify-writes under the default relation). Otherwise (writers that do not
//! conflict with each other, like RUBiS's storeBids of one item's max_bid, or a broken
//! history) the read is compared with every strong writer of its key, as TCC's check 4
//! compares every read with every writer of its key. A round that adds edges recomputes
//! the ancestor sets and runs TCC's read checks again: with conflict edges, a PoR check
//! costs about twice a TCC check (a 30,000-transaction history with 5,000-18,000 of them:
//! 2.2 times), without them about the same. The history size limit is TCC's
//! ([`tcc::CHECK_TXNS_MAX`]). Stopping after [`ROUNDS_MAX`] rounds can only miss a
//! violation, never report a false one.

use crate::conflict::{Conflict, ConflictRelation, Tokens};
use crate::graph::{BitSet, EdgeKind, Graph};
use crate::history::{HOp, History, Outcome};
use crate::tcc::{self, Analysis, Model, Stats};
use crate::{Violation, ViolationKind};
use causeway_core::{Key, ObjType, OpId, TxnKind, Update};
use std::collections::{BTreeMap, BTreeSet};

/// Most rounds of conflict edges (each round recomputes the ancestor sets).
pub const ROUNDS_MAX: usize = 4;

/// A strong transaction's read that can prove a writer missing: before its own write of
/// the key, of a key some strong transaction writes, not a counter.
struct StrongRead<'a> {
    node: usize,
    key: &'a Key,
    obj: ObjType,
    observed: &'a [OpId],
}

/// Why `R -cf-> W`: `R` read `key` at `version` without `W`'s write; they conflict.
struct Forced<'a> {
    key: &'a Key,
    obj: ObjType,
    version: &'a [OpId],
    conflict: Conflict,
}

type ForcedEdges<'a> = BTreeMap<(usize, usize), Forced<'a>>;

/// The strong transactions of a history, indexed for the check.
struct Strong<'a> {
    is_strong: Vec<bool>,
    declared: Vec<bool>,
    tokens: Vec<Tokens>,
    /// Strong writers of each key, deduplicated.
    writers: BTreeMap<&'a Key, Vec<usize>>,
    /// Set elements some counted or possibly-committed transaction removes.
    removed: BTreeSet<(&'a Key, &'a [u8])>,
    reads: Vec<StrongRead<'a>>,
}

/// The strong writers of each key, deduplicated.
fn strong_writers<'a>(m: &Model<'a>, is_strong: &[bool]) -> BTreeMap<&'a Key, Vec<usize>> {
    let mut writers: BTreeMap<&Key, Vec<usize>> = BTreeMap::new();
    for (v, t) in m.txns.iter().enumerate().filter(|(v, _)| is_strong[*v]) {
        for (key, _, _) in tcc::writes_of(t) {
            let list = writers.entry(key).or_default();
            if list.last() != Some(&v) {
                list.push(v);
            }
        }
    }
    writers
}

/// The set elements a counted (or an unobserved unknown-outcome) transaction removes.
fn removed_elements<'a>(m: &Model<'a>) -> BTreeSet<(&'a Key, &'a [u8])> {
    let mut removed = m.maybe_removes.clone();
    for (key, ops) in &m.removes {
        removed.extend(ops.iter().map(|&(_, _, e)| (*key, e)));
    }
    removed
}

impl<'a> Strong<'a> {
    fn build(m: &Model<'a>, relation: &ConflictRelation) -> Strong<'a> {
        let is_strong: Vec<bool> = m.txns.iter().map(|t| t.kind == TxnKind::Strong).collect();
        let strong = |v: usize| is_strong[v];
        let mut s = Strong {
            declared: (0..m.txns.len())
                .map(|v| strong(v) && relation.is_declared(m.txns[v]))
                .collect(),
            tokens: (0..m.txns.len())
                .map(|v| {
                    if strong(v) {
                        relation.tokens(m.txns[v])
                    } else {
                        Tokens::new()
                    }
                })
                .collect(),
            writers: strong_writers(m, &is_strong),
            removed: removed_elements(m),
            is_strong,
            reads: Vec::new(),
        };
        s.reads = s.collect_reads(m);
        s
    }

    fn collect_reads(&self, m: &Model<'a>) -> Vec<StrongRead<'a>> {
        let mut reads = Vec::new();
        for (node, t) in m.txns.iter().enumerate() {
            if !self.is_strong[node] || t.outcome != Outcome::Committed {
                continue;
            }
            let mut own: BTreeSet<&Key> = BTreeSet::new();
            for op in &t.ops {
                match op {
                    HOp::Write { key, .. } => {
                        own.insert(key);
                    }
                    HOp::Read {
                        key, obj, observed, ..
                    } if *obj != ObjType::Counter
                        && !own.contains(key)
                        && self.writers.contains_key(key) =>
                    {
                        reads.push(StrongRead {
                            node,
                            key,
                            obj: *obj,
                            observed,
                        });
                    }
                    HOp::Read { .. } => {}
                }
            }
        }
        reads
    }

    fn count(&self) -> usize {
        self.is_strong.iter().filter(|s| **s).count()
    }
}

/// A key's strong writers along the current topological order, and whether each is
/// causally before the next (a chain).
struct Chain {
    writers: Vec<usize>,
    ordered: bool,
}

/// The current causal order: each node's position in a topological order, and its
/// strict ancestors.
struct Order<'r> {
    anc: &'r [BitSet],
    pos: Vec<usize>,
}

impl<'r> Order<'r> {
    fn new(order: &[usize], anc: &'r [BitSet]) -> Order<'r> {
        let mut pos = vec![0; order.len()];
        for (i, &v) in order.iter().enumerate() {
            pos[v] = i;
        }
        Order { anc, pos }
    }

    fn chain(&self, writers: &[usize]) -> Chain {
        let mut sorted = writers.to_vec();
        sorted.sort_by_key(|&w| self.pos[w]);
        let ordered = sorted.windows(2).all(|p| self.anc[p[1]].contains(p[0]));
        Chain {
            writers: sorted,
            ordered,
        }
    }

    fn concurrent(&self, x: usize, y: usize) -> bool {
        x != y && !self.anc[x].contains(y) && !self.anc[y].contains(x)
    }

    /// Whether `r` is causally ordered with its neighbours in a chain of writers, hence
    /// with all of them (module docs, Cost).
    fn ordered_with_neighbours(&self, chain: &Chain, r: usize) -> bool {
        let ws = &chain.writers;
        let i = ws.partition_point(|&w| self.pos[w] < self.pos[r]);
        let after = if ws.get(i) == Some(&r) { i + 1 } else { i };
        let before_ok = i == 0 || self.anc[r].contains(ws[i - 1]);
        before_ok && ws.get(after).is_none_or(|&w| self.anc[w].contains(r))
    }

    /// The writers of a chain that are causally concurrent with `r`.
    fn candidates(&self, chain: &Chain, r: usize) -> Vec<usize> {
        if chain.ordered && self.ordered_with_neighbours(chain, r) {
            return Vec::new();
        }
        let ws = chain.writers.iter().copied();
        ws.filter(|&w| self.concurrent(r, w)).collect()
    }
}

/// What one round looks at: the model, the strong transactions, the current order.
struct Round<'r, 'a> {
    m: &'r Model<'a>,
    s: &'r Strong<'a>,
    order: Order<'r>,
}

impl Round<'_, '_> {
    /// Whether the read proves `w` is not in the reader's past (module docs, Evidence).
    fn evidence(&self, read: &StrongRead, w: usize) -> bool {
        let mut updates = self.m.txns[w].ops.iter().filter_map(|op| match op {
            HOp::Write { key, update, id } if key == read.key => Some((update, *id)),
            _ => None,
        });
        match read.obj {
            ObjType::Lww | ObjType::MvReg => {
                // An increment writes no register value a read could show.
                updates.any(|(u, _)| {
                    u.obj_type() == read.obj && !matches!(u, Update::RegisterIncrement(_))
                }) && read.observed.iter().all(|id| {
                    let v = self.m.writes[id].node;
                    v != w && self.order.anc[w].contains(v)
                })
            }
            ObjType::Set | ObjType::Hash | ObjType::ZSet => updates.any(|(u, id)| match u {
                Update::Add(e)
                | Update::HashSet { field: e, .. }
                | Update::ZAdd { member: e, .. } => {
                    !read.observed.contains(&id)
                        && !self.s.removed.contains(&(read.key, e.as_slice()))
                        && !self.shows_readd(read, e, w)
                }
                _ => false,
            }),
            // A pop removes some of the elements it observed, not all: which ones the
            // history does not say, so a list read gives no evidence.
            ObjType::Counter | ObjType::List => false,
        }
    }

    /// Whether the set read shows an add of `elem` that may have replaced `w`'s add of
    /// it: one by a transaction outside `w`'s causal past.
    fn shows_readd(&self, read: &StrongRead, elem: &[u8], w: usize) -> bool {
        read.observed.iter().any(|id| {
            let shown = &self.m.writes[id];
            let same = match shown.update {
                Update::Add(e)
                | Update::HashSet { field: e, .. }
                | Update::HashIncrement { field: e, .. }
                | Update::ZAdd { member: e, .. }
                | Update::ZIncrement { member: e, .. } => e.as_slice() == elem,
                _ => false,
            };
            same && (shown.node == w || !self.order.anc[w].contains(shown.node))
        })
    }

    /// The conflict between reader `r` and writer `w` of `key`: by the declared rules
    /// when both are declared, else by the default rule (`r` reads what `w` writes).
    fn conflict(
        &self,
        relation: &ConflictRelation,
        r: usize,
        w: usize,
        key: &Key,
    ) -> Option<Conflict> {
        let (s, txns) = (self.s, &self.m.txns);
        if s.declared[r] && s.declared[w] {
            return relation.declared_conflict((txns[r], &s.tokens[r]), (txns[w], &s.tokens[w]));
        }
        Some(Conflict {
            key: key.to_string(),
            why: format!("{} reads {key}, which {} writes", txns[r].id, txns[w].id),
        })
    }
}

/// The conflict edges the current order proves, beyond those in `known`.
fn find_forced<'a>(
    m: &Model<'a>,
    s: &Strong<'a>,
    a: (&[usize], &[BitSet]),
    relation: &ConflictRelation,
    known: &ForcedEdges<'a>,
) -> ForcedEdges<'a> {
    let round = Round {
        m,
        s,
        order: Order::new(a.0, a.1),
    };
    let chains: BTreeMap<&Key, Chain> = s
        .writers
        .iter()
        .map(|(k, ws)| (*k, round.order.chain(ws)))
        .collect();
    let mut found = ForcedEdges::new();
    for read in &s.reads {
        let r = read.node;
        for w in round.order.candidates(&chains[read.key], r) {
            if known.contains_key(&(r, w))
                || found.contains_key(&(r, w))
                || !round.evidence(read, w)
            {
                continue;
            }
            if let Some(conflict) = round.conflict(relation, r, w, read.key) {
                let forced = Forced {
                    key: read.key,
                    obj: read.obj,
                    version: read.observed,
                    conflict,
                };
                found.insert((r, w), forced);
            }
        }
    }
    found
}

fn version_text(version: &[OpId]) -> String {
    match version {
        [] => "its initial value".into(),
        ids => {
            let ids: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
            format!("version [{}]", ids.join(", "))
        }
    }
}

/// `R read k at v without W's write of it`.
fn reason(m: &Model, (r, w): (usize, usize), f: &Forced) -> String {
    format!(
        "{} read {} at {} without {}'s write of it",
        m.id(r),
        f.key,
        version_text(f.version),
        m.id(w)
    )
}

fn same_version(a: &[OpId], b: &[OpId]) -> bool {
    let (mut a, mut b) = (a.to_vec(), b.to_vec());
    a.sort();
    b.sort();
    a == b
}

/// Check 1: two conflicting strong transactions that each provably missed the other.
fn check_mutual(m: &Model, forced: &ForcedEdges) -> Result<(), Violation> {
    for (&(x, y), there) in forced {
        if let Some(back) = forced.get(&(y, x)).filter(|_| x < y) {
            return Err(mutual_violation(m, (x, y), there, back));
        }
    }
    Ok(())
}

/// A lost update when both read one register at one version, else a conflict order.
fn mutual_violation(m: &Model, (x, y): (usize, usize), there: &Forced, back: &Forced) -> Violation {
    let (a, b) = (m.id(x), m.id(y));
    let c = &there.conflict;
    let register = matches!(there.obj, ObjType::Lww | ObjType::MvReg);
    if register && there.key == back.key && same_version(there.version, back.version) {
        return Violation::new(
            ViolationKind::LostUpdate,
            vec![a, b],
            format!(
                "lost update on {}: strong transactions {a} and {b} both read it at {} and both wrote it; they conflict on {} ({}), so one must see the other's write",
                there.key,
                version_text(there.version),
                c.key,
                c.why
            ),
        );
    }
    Violation::new(
        ViolationKind::ConflictOrder,
        vec![a, b],
        format!(
            "strong transactions {a} and {b} conflict on {} ({}) but neither can precede the other: {}; {}",
            c.key,
            c.why,
            reason(m, (x, y), there),
            reason(m, (y, x), back)
        ),
    )
}

/// `so ∪ wr ∪ cf`.
fn ordered_graph(base: &Graph, forced: &ForcedEdges) -> Graph {
    let mut g = base.clone();
    for &(r, w) in forced.keys() {
        g.add(r, w, EdgeKind::Conflict);
    }
    g
}

/// Check 2's counterexample: the cycle, with the reason of each conflict edge.
fn cycle_violation(
    m: &Model,
    cycle: &[(usize, usize, EdgeKind)],
    forced: &ForcedEdges,
) -> Violation {
    let txns = cycle.iter().map(|(from, _, _)| m.id(*from)).collect();
    let path: Vec<String> = cycle
        .iter()
        .map(|&(from, to, kind)| {
            let edge = format!("{} -{}-> {}", m.id(from), kind.name(), m.id(to));
            match forced
                .get(&(from, to))
                .filter(|_| kind == EdgeKind::Conflict)
            {
                Some(f) => format!(
                    "{edge} ({}; conflict on {})",
                    reason(m, (from, to), f),
                    f.conflict.key
                ),
                None => edge,
            }
        })
        .collect();
    Violation::new(
        ViolationKind::ConflictOrder,
        txns,
        format!(
            "conflicting strong transactions cannot be ordered by causality: {}",
            path.join(", ")
        ),
    )
}

/// Check 3's counterexample: TCC's, under the conflict order.
fn under_forced(m: &Model, v: Violation, forced: &ForcedEdges) -> Violation {
    const SHOWN: usize = 3;
    let edges: Vec<String> = forced
        .iter()
        .take(SHOWN)
        .map(|(&(r, w), f)| format!("{} -cf-> {} ({})", m.id(r), m.id(w), reason(m, (r, w), f)))
        .collect();
    let more = forced.len().saturating_sub(SHOWN);
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    let mut txns = v.txns;
    for &(r, w) in forced.keys().take(SHOWN) {
        txns.extend([m.id(r), m.id(w)]);
    }
    txns.dedup();
    Violation::new(
        ViolationKind::ConflictOrder,
        txns,
        format!(
            "{:?} once conflicting strong transactions are ordered ({}{more}): {}",
            v.kind,
            edges.join(", "),
            v.detail
        ),
    )
}

/// Checks 2 and 3 under `forced`; on success, the new order and ancestor sets.
fn reorder(a: &mut Analysis, forced: &ForcedEdges) -> Result<(), Violation> {
    let g = ordered_graph(&a.g, forced);
    let order = g
        .topo_order()
        .map_err(|cycle| cycle_violation(&a.m, &cycle, forced))?;
    let anc = g.ancestors(&order);
    let mut ar = Vec::new();
    let mut scratch = Stats::default();
    tcc::check_reads(&a.m, &anc, &mut ar, &mut scratch)
        .and_then(|()| tcc::check_arbitration(&a.m, g, &ar))
        .map_err(|v| under_forced(&a.m, v, forced))?;
    a.order = order;
    a.anc = anc;
    Ok(())
}

/// Checks `history` for PoR under `relation`: TCC, then Conflict Ordering (checks 1-3
/// above). Convergence is separate.
pub fn check_por(history: &History, relation: &ConflictRelation) -> Result<Stats, Violation> {
    let split = crate::parts::split(history);
    let history = split.as_ref().map_or(history, |s| &s.history);
    let mut a = tcc::analyze(history, split.as_ref())?;
    let s = Strong::build(&a.m, relation);
    let mut forced = ForcedEdges::new();
    for _ in 0..ROUNDS_MAX {
        let found = find_forced(&a.m, &s, (&a.order, &a.anc), relation, &forced);
        if found.is_empty() {
            break;
        }
        forced.extend(found);
        check_mutual(&a.m, &forced)?;
        reorder(&mut a, &forced)?;
    }
    let mut stats = a.stats;
    stats.strong = s.count();
    stats.conflict_edges = forced.len();
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic pseudo-random graph: node `v` gets an edge from each earlier node
    /// with probability about `1 / sparsity`.
    fn graph(n: usize, sparsity: u64, seed: u64) -> Graph {
        let mut g = Graph::new(n);
        let mut x = seed;
        for to in 1..n {
            for from in 0..to {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                if (x >> 33).is_multiple_of(sparsity) {
                    g.add(from, to, EdgeKind::WriteRead);
                }
            }
        }
        g
    }

    #[test]
    fn the_chain_shortcut_skips_only_readers_with_no_concurrent_writer() {
        let mut shortcuts = 0;
        for seed in 0..40 {
            let g = graph(24, 2 + seed % 5, seed);
            let topo = g.topo_order().expect("a dag");
            let anc = g.ancestors(&topo);
            let order = Order::new(&topo, &anc);
            for start in 0..6 {
                let writers: Vec<usize> = (start..24).step_by(3 + start % 3).collect();
                let chain = order.chain(&writers);
                for r in 0..24 {
                    let brute: Vec<usize> = chain
                        .writers
                        .iter()
                        .copied()
                        .filter(|&w| order.concurrent(r, w))
                        .collect();
                    assert_eq!(order.candidates(&chain, r), brute, "seed {seed} r {r}");
                    let skipped = chain.ordered && order.ordered_with_neighbours(&chain, r);
                    shortcuts += usize::from(skipped);
                }
            }
        }
        assert!(shortcuts > 100, "the shortcut was taken {shortcuts} times");
    }
}
