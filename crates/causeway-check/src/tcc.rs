//! The transactional causal consistency (TCC) checker, polynomial because every write has
//! a unique id and every read names the ids it observed.
//!
//! Which transactions count: committed ones, and those with an unknown outcome whose
//! writes someone observed (they did commit). Reads are judged for committed transactions
//! only. Session order runs from a committed transaction to the next counted one of its
//! session: after an unknown outcome the session never learned the commit, so its later
//! transactions need not see it.
//!
//! The checks, in order (the first failure is the counterexample):
//! 1. every observed id is a write of the read key by a counted transaction (an aborted
//!    or unknown writer is reported as such), and a register's value is the one written;
//!    no read observes another transaction's write that the writer superseded later in
//!    its own ops (an intermediate read, Adya's G1b: an assignment followed by another
//!    write of the key, an add followed by a remove or re-add of its element; the rule
//!    is PC-PSI's check 2, `pcpsi::check_intermediate`): a transaction's writes become
//!    visible together, so only its final state of a key can be read;
//! 2. causal order `co = (so ∪ wr)+` is acyclic;
//! 3. a read after the transaction's own write of the key shows that write;
//! 4. a register read of `x` from `T1` by `T`: every other writer `T2` of `x` in `T`'s
//!    causal past must be arbitrated before `T1` (`T2 -ar-> T1`); if `T1` is itself in
//!    `T2`'s causal past the read is stale at once. A read of the initial value with a
//!    writer in the causal past is stale. A multi-value register must show, for every
//!    writer in the causal past, that write or one causally after it, and no two
//!    causally ordered writes. This catches causality violations, fractured reads and
//!    non-monotonic reads;
//! 5. a set read is causally closed: it shows every add in its causal past (or its own
//!    earlier adds) that no remove in its view may have observed, and no add outside its
//!    causal past or surely observed by a remove in its causal past. The set is the
//!    optimized OR-set (`causeway_core::crdt`): a re-add replaces the tags of its element
//!    it observed, as a remove does, so a missing add is also excused by a shown add of the
//!    same element that may have observed it (a read showing only the newest tag passes;
//!    one missing the element altogether does not);
//! 6. `co ∪ ar` is acyclic (one total arbitration order can explain every read).
//!
//! A hash (`causeway_core::crdt::hash`) is judged as a set of its fields: an `HSET` or
//! `HINCRBY` of a field is an add of it, an `HDEL` a remove, and a read names the live
//! writes of every field, so check 5 asks the same of it (a shown write of a field may
//! have replaced another, as a re-add does). The value is checked too: a read shows a
//! field exactly when it names a write of it, and a field no transaction increments shows
//! the value of one of the `HSET`s of it the read names.
//!
//! A list (`causeway_core::crdt::list`) is judged as pushes that pops may remove: a read
//! names the pushes with a shown element, and check 5 asks that it names no push outside
//! its view and every push in its view that no pop in its view may have observed (which
//! elements a pop took the history does not say, so a pop that may have observed a push
//! excuses it). The value is checked too: every shown element is a value a named push
//! wrote, each named push shows one at least, and when the values are distinct the order
//! is the list's (left-pushed first; at one end, causal order, reversed on the left).
//!
//! A register that counts (`Update::RegisterIncrement`, `causeway_core::crdt`): a read names
//! the winning assignment alone, and checks 3 and 4 judge the assignments only (an
//! increment is no writer of a register's value). Check 4 then also asks that the value
//! read be the winner plus every increment that the winner surely did not observe and the
//! reader surely did (in its causal past, or its own; causally after the winner), plus
//! some of the increments that may be in the view (concurrent with the reader, or of an
//! unknown outcome) or that the winner may have observed (concurrent with it: a history
//! shows only the causal order reads reveal, and a snapshot may hold more). A winner that
//! is no decimal integer must be read as written. Which optional increments a read saw is
//! not recorded, so it is a subset sum (given up, passing, past [`SUBSET_SUMS_MAX`] sums).
//!
//! A key freed by `DEL` that took another type (`Update::Part`): the history is split first
//! (`crate::parts`), each part of another type being a key of its own for checks 1-6, and
//! the part each read showed is then judged by the rule of `causeway_core::crdt`.

use crate::graph::{BitSet, EdgeKind, Graph};
use crate::history::{HOp, History, Outcome, TxnRecord};
use crate::parts;
use crate::{Violation, ViolationKind};
use causeway_core::crdt::decimal;
use causeway_core::{Key, ObjType, ObjValue, OpId, TxnId, Update};
use std::collections::{BTreeMap, BTreeSet};

/// Most transactions one check accepts (ancestor bitsets are quadratic in memory).
pub const CHECK_TXNS_MAX: usize = 60_000;

/// Most distinct sums of optional increments one counting-register read is checked
/// against; past it the read passes unchecked (module docs).
pub const SUBSET_SUMS_MAX: usize = 4_096;

/// What a check looked at, for reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub txns: usize,
    pub counted: usize,
    pub reads: usize,
    pub causal_edges: usize,
    pub arbitration_edges: usize,
    pub finals: usize,
    /// Counted strong transactions (PoR checks only).
    pub strong: usize,
    /// Conflict-order edges PoR forced between causally unordered strong transactions.
    pub conflict_edges: usize,
    /// Read-write anti-dependency edges (PC-PSI checks only; their `causal_edges` count
    /// the write-read, write-write and session edges).
    pub rw_edges: usize,
}

/// A write as the checker indexes it.
#[derive(Clone, Debug)]
pub(crate) struct WriteInfo<'a> {
    pub(crate) node: usize,
    pub(crate) key: &'a Key,
    pub(crate) update: &'a Update,
}

/// A set add or remove: its op id, its transaction's node and the element.
type SetOp<'a> = (OpId, usize, &'a [u8]);

/// The adds a set read shows, by element: (op, node).
type Shown<'a> = BTreeMap<&'a [u8], Vec<(OpId, usize)>>;

/// The counted transactions and their writes.
pub(crate) struct Model<'a> {
    /// The counted transactions; a transaction's index here is its node in the graphs.
    pub(crate) txns: Vec<&'a TxnRecord>,
    node_of: BTreeMap<TxnId, usize>,
    pub(crate) writes: BTreeMap<OpId, WriteInfo<'a>>,
    /// Writes of aborted or unobserved-unknown transactions, for clear messages.
    pub(crate) dropped: BTreeMap<OpId, Outcome>,
    /// Counted writers of each key, deduplicated, in node order.
    writers: BTreeMap<&'a Key, Vec<usize>>,
    /// Set adds and removes of each key: (op, node, element).
    adds: BTreeMap<&'a Key, Vec<SetOp<'a>>>,
    pub(crate) removes: BTreeMap<&'a Key, Vec<SetOp<'a>>>,
    /// Set removes of transactions with an unknown outcome that nobody observed: they
    /// may have committed and hidden adds, though no read reveals them.
    pub(crate) maybe_removes: BTreeSet<(&'a Key, &'a [u8])>,
    /// Register increments of each key: (op, node, amount).
    incs: BTreeMap<&'a Key, Vec<(OpId, usize, i64)>>,
    /// Register increments of transactions with an unknown outcome nobody observed (no
    /// read names an increment): each may be in any read's view.
    maybe_incs: BTreeMap<&'a Key, Vec<i64>>,
    /// Hash fields some transaction (of any outcome) incremented: their values count.
    hash_incs: BTreeSet<(&'a Key, &'a [u8])>,
}

fn observed_ids(history: &History) -> BTreeSet<OpId> {
    let mut ids = BTreeSet::new();
    for t in history
        .txns
        .iter()
        .filter(|t| t.outcome == Outcome::Committed)
    {
        for op in &t.ops {
            if let HOp::Read { observed, .. } = op {
                ids.extend(observed.iter().copied());
            }
        }
    }
    for f in &history.finals {
        ids.extend(f.observed.iter().copied());
    }
    ids
}

pub(crate) fn writes_of(t: &TxnRecord) -> impl Iterator<Item = (&Key, &Update, OpId)> {
    t.ops.iter().filter_map(|op| match op {
        // A history with parts is split first (`parts`): a write left wrapped is one
        // whose key the split did not see, checked as a write of its type.
        HOp::Write { key, update, id } => Some((key, update.own(), *id)),
        HOp::Read { .. } => None,
    })
}

fn is_counted(t: &TxnRecord, observed: &BTreeSet<OpId>) -> bool {
    match t.outcome {
        Outcome::Committed => true,
        Outcome::Aborted => false,
        Outcome::Unknown => writes_of(t).any(|(_, _, id)| observed.contains(&id)),
    }
}

impl<'a> Model<'a> {
    pub(crate) fn build(history: &'a History) -> Result<Model<'a>, Violation> {
        let observed = observed_ids(history);
        let mut m = Model {
            txns: Vec::new(),
            node_of: BTreeMap::new(),
            writes: BTreeMap::new(),
            dropped: BTreeMap::new(),
            writers: BTreeMap::new(),
            adds: BTreeMap::new(),
            removes: BTreeMap::new(),
            maybe_removes: BTreeSet::new(),
            incs: BTreeMap::new(),
            maybe_incs: BTreeMap::new(),
            hash_incs: BTreeSet::new(),
        };
        let mut ids = BTreeSet::new();
        for t in &history.txns {
            if !ids.insert(t.id) {
                return Err(Violation::new(
                    ViolationKind::Malformed,
                    vec![t.id],
                    format!("transaction {} appears twice", t.id),
                ));
            }
            if !is_counted(t, &observed) {
                m.drop_txn(t);
                continue;
            }
            m.add_txn(t)?;
        }
        Ok(m)
    }

    fn drop_txn(&mut self, t: &'a TxnRecord) {
        for (key, update, id) in writes_of(t) {
            self.dropped.insert(id, t.outcome);
            match (update, t.outcome) {
                (Update::Remove(e) | Update::HashRemove { field: e }, Outcome::Unknown) => {
                    self.maybe_removes.insert((key, e));
                }
                (Update::ListPop { .. }, Outcome::Unknown) => {
                    self.maybe_removes.insert((key, LIST_ELEM));
                }
                (Update::ZRemove { members }, Outcome::Unknown) => {
                    for m in members {
                        self.maybe_removes.insert((key, m.as_slice()));
                    }
                }
                (Update::HashIncrement { field, .. }, _) => {
                    self.hash_incs.insert((key, field));
                }
                (Update::RegisterIncrement(d), Outcome::Unknown) => {
                    self.maybe_incs.entry(key).or_default().push(*d);
                }
                _ => {}
            }
        }
    }

    fn add_txn(&mut self, t: &'a TxnRecord) -> Result<(), Violation> {
        let node = self.txns.len();
        self.txns.push(t);
        self.node_of.insert(t.id, node);
        for (key, update, id) in writes_of(t) {
            if id.txn != t.id || self.writes.contains_key(&id) {
                return Err(Violation::new(
                    ViolationKind::Malformed,
                    vec![t.id],
                    format!("write id {id} in {} is not unique to it", t.id),
                ));
            }
            self.writes.insert(id, WriteInfo { node, key, update });
            if let Update::RegisterIncrement(d) = update {
                // No writer of the register's value: counted by `check_counted`.
                self.incs.entry(key).or_default().push((id, node, *d));
                continue;
            }
            let list = self.writers.entry(key).or_default();
            if list.last() != Some(&node) {
                list.push(node);
            }
            match update {
                Update::Add(e)
                | Update::HashSet { field: e, .. }
                | Update::HashIncrement { field: e, .. }
                | Update::ZAdd { member: e, .. }
                | Update::ZIncrement { member: e, .. } => {
                    self.adds.entry(key).or_default().push((id, node, e))
                }
                Update::ZRemove { members } => {
                    let removes = self.removes.entry(key).or_default();
                    removes.extend(members.iter().map(|m| (id, node, m.as_slice())));
                }
                Update::Remove(e) | Update::HashRemove { field: e } => {
                    self.removes.entry(key).or_default().push((id, node, e))
                }
                Update::ListPush { .. } => self
                    .adds
                    .entry(key)
                    .or_default()
                    .push((id, node, LIST_ELEM)),
                Update::ListPop { .. } => self
                    .removes
                    .entry(key)
                    .or_default()
                    .push((id, node, LIST_ELEM)),
                _ => {}
            }
            if let Update::HashIncrement { field, .. } = update {
                self.hash_incs.insert((key, field));
            }
        }
        Ok(())
    }

    /// The node of a counted transaction.
    pub(crate) fn node(&self, txn: TxnId) -> Option<usize> {
        self.node_of.get(&txn).copied()
    }

    pub(crate) fn id(&self, node: usize) -> TxnId {
        self.txns[node].id
    }

    /// Whether `key` is a register some transaction incremented.
    pub(crate) fn counts(&self, key: &Key) -> bool {
        self.incs.contains_key(key) || self.maybe_incs.contains_key(key)
    }
}

/// Checks every committed read's observed ids against the writes (check 1), and the
/// final reads' ids too.
pub(crate) fn check_observed(m: &Model, history: &History) -> Result<(), Violation> {
    for t in m.txns.iter().filter(|t| t.outcome == Outcome::Committed) {
        for op in &t.ops {
            if let HOp::Read {
                key,
                value,
                observed,
                ..
            } = op
            {
                check_ids(m, Some(t.id), key, observed)?;
                check_register_value(m, t.id, key, value, observed)?;
            }
        }
    }
    for f in &history.finals {
        check_ids(m, None, &f.key, &f.observed)?;
    }
    Ok(())
}

fn check_ids(m: &Model, reader: Option<TxnId>, key: &Key, ids: &[OpId]) -> Result<(), Violation> {
    let who = reader.map_or("a final read".to_string(), |r| r.to_string());
    for id in ids {
        let (kind, why) = match (m.writes.get(id), m.dropped.get(id)) {
            (Some(w), _) if w.key == key => continue,
            (Some(w), _) => (
                ViolationKind::Malformed,
                format!("{who} of {key} observed {id}, a write of {}", w.key),
            ),
            (None, Some(outcome)) => (
                ViolationKind::ReadFromAborted,
                format!(
                    "{who} of {key} observed {id}, written by a transaction that ended {outcome:?}"
                ),
            ),
            (None, None) => (
                ViolationKind::Malformed,
                format!("{who} of {key} observed {id}, which no transaction wrote"),
            ),
        };
        let mut txns: Vec<TxnId> = reader.into_iter().collect();
        txns.push(id.txn);
        return Err(Violation::new(kind, txns, why));
    }
    Ok(())
}

fn check_register_value(
    m: &Model,
    reader: TxnId,
    key: &Key,
    value: &ObjValue,
    observed: &[OpId],
) -> Result<(), Violation> {
    let ObjValue::Lww(read) = value else {
        return Ok(());
    };
    if m.counts(key) {
        return Ok(()); // the winner plus increments: `Walk::check_counted`
    }
    let written = match observed {
        [] => None,
        [id] => match m.writes.get(id).map(|w| w.update) {
            Some(Update::Assign(v)) => Some(v),
            _ => return Ok(()), // the transaction's own write: checked with its ops
        },
        many => {
            return Err(Violation::new(
                ViolationKind::Malformed,
                vec![reader],
                format!("register read of {key} observed {} writes", many.len()),
            ))
        }
    };
    if read.as_ref() != written {
        return Err(Violation::new(
            ViolationKind::BadValue,
            vec![reader],
            format!("{reader} read {key} = {read:?} but the write it names holds {written:?}"),
        ));
    }
    Ok(())
}

/// Every sum of a subset of `items` (wrapping, as the register adds), or `None` past
/// [`SUBSET_SUMS_MAX`] distinct sums.
pub(crate) fn subset_sums(items: &[i64]) -> Option<BTreeSet<i64>> {
    let mut sums = BTreeSet::from([0i64]);
    for d in items {
        let more: Vec<i64> = sums.iter().map(|s| s.wrapping_add(*d)).collect();
        sums.extend(more);
        if sums.len() > SUBSET_SUMS_MAX {
            return None;
        }
    }
    Some(sums)
}

/// Builds `so ∪ wr` (check 2's graph).
pub(crate) fn causal_graph(m: &Model) -> Graph {
    let mut g = Graph::new(m.txns.len());
    let mut last_committed: BTreeMap<_, usize> = BTreeMap::new();
    // Session order as `history::session_order` has it: by time, not by txn id, since a
    // session that moved DCs (ATTACH) continues with the ids of a new protocol session.
    let mut by_session: Vec<usize> = (0..m.txns.len()).collect();
    by_session.sort_by_key(|&v| {
        let t = m.txns[v];
        (t.session, t.start_ns, t.end_ns, t.id.seq, t.id.session)
    });
    for v in by_session {
        let t = m.txns[v];
        if let Some(prev) = last_committed.get(&t.session) {
            g.add(*prev, v, EdgeKind::Session);
        }
        if t.outcome == Outcome::Committed {
            last_committed.insert(t.session, v);
        }
    }
    for (v, t) in m.txns.iter().enumerate() {
        if t.outcome != Outcome::Committed {
            continue;
        }
        for op in &t.ops {
            if let HOp::Read { observed, .. } = op {
                for id in observed {
                    g.add(m.writes[id].node, v, EdgeKind::WriteRead);
                }
            }
        }
    }
    g
}

pub(crate) fn describe_cycle(
    m: &Model,
    cycle: &[(usize, usize, EdgeKind)],
) -> (Vec<TxnId>, String) {
    let txns: Vec<TxnId> = cycle.iter().map(|(from, _, _)| m.id(*from)).collect();
    let path: Vec<String> = cycle
        .iter()
        .map(|(from, to, kind)| format!("{} -{}-> {}", m.id(*from), kind.name(), m.id(*to)))
        .collect();
    (txns, path.join(", "))
}

/// The state of one committed transaction's walk through its ops.
struct Walk<'m, 'a> {
    m: &'m Model<'a>,
    anc: &'m [BitSet],
    node: usize,
    /// This transaction's writes so far, in order.
    own: Vec<(&'a Key, &'a Update, OpId)>,
}

/// Runs checks 3-5 over every committed read, collecting arbitration edges.
pub(crate) fn check_reads(
    m: &Model,
    anc: &[BitSet],
    ar: &mut Vec<(usize, usize)>,
    stats: &mut Stats,
) -> Result<(), Violation> {
    for (node, t) in m.txns.iter().enumerate() {
        if t.outcome != Outcome::Committed {
            continue;
        }
        let mut walk = Walk {
            m,
            anc,
            node,
            own: Vec::new(),
        };
        for op in &t.ops {
            match op {
                HOp::Write { key, update, id } => walk.own.push((key, update, *id)),
                HOp::Read {
                    key,
                    obj,
                    observed,
                    value,
                } => {
                    stats.reads += 1;
                    walk.check_read(key, *obj, observed, ar)?;
                    if *obj == ObjType::Lww && m.counts(key) {
                        walk.check_counted(key, value, observed)?;
                    }
                    if *obj == ObjType::Hash {
                        walk.check_hash_value(key, value, observed)?;
                    }
                    if *obj == ObjType::List {
                        walk.check_list_value(key, value, observed)?;
                    }
                }
            }
        }
    }
    Ok(())
}

impl<'m, 'a> Walk<'m, 'a> {
    fn me(&self) -> TxnId {
        self.m.id(self.node)
    }

    fn in_past(&self, node: usize) -> bool {
        self.anc[self.node].contains(node)
    }

    fn fail(&self, kind: ViolationKind, mut txns: Vec<TxnId>, why: String) -> Violation {
        txns.insert(0, self.me());
        txns.dedup();
        Violation::new(kind, txns, why)
    }

    fn check_read(
        &self,
        key: &Key,
        obj: ObjType,
        observed: &[OpId],
        ar: &mut Vec<(usize, usize)>,
    ) -> Result<(), Violation> {
        // An own increment writes no register value: the last own assignment counts.
        let last_own = self
            .own
            .iter()
            .rev()
            .find(|(k, u, _)| *k == key && !matches!(u, Update::RegisterIncrement(_)));
        match (obj, last_own) {
            (ObjType::Set | ObjType::Hash | ObjType::ZSet, _) => self.check_set(key, observed),
            (ObjType::Counter, _) => Ok(()),
            (ObjType::List, _) => self.check_list(key, observed),
            (_, Some((_, _, id))) => self.check_own(key, *id, observed),
            (ObjType::Lww, None) => self.check_register(key, observed, ar),
            (ObjType::MvReg, None) => self.check_mvreg(key, observed, ar),
        }
    }

    /// Check 3 for registers: the last own write is what the read shows, alone.
    fn check_own(&self, key: &Key, own: OpId, observed: &[OpId]) -> Result<(), Violation> {
        if observed == [own] {
            return Ok(());
        }
        Err(self.fail(
            ViolationKind::ReadYourWrites,
            Vec::new(),
            format!(
                "{} wrote {key} ({own}) then read it and observed {observed:?}",
                self.me()
            ),
        ))
    }

    /// Check 4 for last-writer-wins registers.
    fn check_register(
        &self,
        key: &Key,
        observed: &[OpId],
        ar: &mut Vec<(usize, usize)>,
    ) -> Result<(), Violation> {
        let read_from = observed.first().map(|id| self.m.writes[id].node);
        for &w in self.m.writers.get(key).map_or(&[][..], |v| &v[..]) {
            if !self.in_past(w) || Some(w) == read_from {
                continue;
            }
            let Some(src) = read_from else {
                return Err(self.fail(
                    ViolationKind::CausalViolation,
                    vec![self.m.id(w)],
                    format!(
                        "{} read the initial value of {key}, but {} wrote it in its causal past",
                        self.me(),
                        self.m.id(w)
                    ),
                ));
            };
            if self.anc[w].contains(src) {
                return Err(self.stale(key, src, w));
            }
            ar.push((w, src));
        }
        Ok(())
    }

    fn stale(&self, key: &Key, src: usize, newer: usize) -> Violation {
        let (s, n) = (self.m.id(src), self.m.id(newer));
        self.fail(
            ViolationKind::CausalViolation,
            vec![s, n],
            format!(
                "{} read {key} from {s}, but {n}, which causally follows {s} and also wrote {key}, is in the reader's causal past",
                self.me()
            ),
        )
    }

    /// Check 4 for multi-value registers. The history shows only the causal order that
    /// reads reveal, a subset of the real one (a write's snapshot may include writes it
    /// never read), so a write in the causal past may be hidden by any shown write that
    /// could have seen it: one not causally before it. With a single shown write, that
    /// write must come after the hidden one in the visibility order, an edge of check 6.
    fn check_mvreg(
        &self,
        key: &Key,
        observed: &[OpId],
        ar: &mut Vec<(usize, usize)>,
    ) -> Result<(), Violation> {
        let shown: Vec<usize> = observed.iter().map(|id| self.m.writes[id].node).collect();
        for &a in &shown {
            if let Some(&b) = shown.iter().find(|&&b| self.anc[b].contains(a)) {
                return Err(self.stale(key, a, b));
            }
        }
        for &w in self.m.writers.get(key).map_or(&[][..], |v| &v[..]) {
            if !self.in_past(w) || shown.contains(&w) {
                continue;
            }
            if shown.iter().all(|&s| self.anc[w].contains(s)) {
                return Err(self.fail(
                    ViolationKind::CausalViolation,
                    vec![self.m.id(w)],
                    format!(
                        "{} read mvreg {key} without {}'s write in its causal past, and no shown write could have overwritten it",
                        self.me(),
                        self.m.id(w)
                    ),
                ));
            }
            if let [single] = shown[..] {
                ar.push((w, single));
            }
        }
        Ok(())
    }

    /// Check 4 for a register that counts (module docs): the value read is the winner plus
    /// the increments the read must see and the winner did not observe, plus a subset of
    /// those it may see or the winner may have observed.
    fn check_counted(
        &self,
        key: &Key,
        value: &ObjValue,
        observed: &[OpId],
    ) -> Result<(), Violation> {
        let ObjValue::Lww(read) = value else {
            return Ok(());
        };
        let winner = observed.first().map(|id| (*id, self.m.writes[id].node));
        let assigned = winner.and_then(|(id, _)| match self.m.writes[&id].update {
            Update::Assign(v) => Some(v),
            _ => None,
        });
        let base = match assigned {
            None => 0,
            Some(v) => match decimal(v) {
                Some(n) => n,
                None if read.as_ref() == Some(v) => return Ok(()),
                None => return Err(self.bad_count(key, read, "the text assigned")),
            },
        };
        let (must, optional) = self.counted_increments(key, winner);
        let got = match read {
            None if assigned.is_none() => 0,
            Some(r) => match decimal(r) {
                Some(n) => n,
                None => return Err(self.bad_count(key, read, "no integer")),
            },
            None => return Err(self.bad_count(key, read, "nothing")),
        };
        let rest = got.wrapping_sub(base).wrapping_sub(must);
        match subset_sums(&optional) {
            Some(sums) if !sums.contains(&rest) => Err(self.bad_count(
                key,
                read,
                &format!("{base} plus {must} it must count, plus any of {optional:?}"),
            )),
            _ => Ok(()),
        }
    }

    /// The sum of the increments of `key` a read with this winner must count, and those
    /// it may count (module docs).
    fn counted_increments(&self, key: &Key, winner: Option<(OpId, usize)>) -> (i64, Vec<i64>) {
        let mut must = 0i64;
        let mut optional: Vec<i64> = self.m.maybe_incs.get(key).cloned().unwrap_or_default();
        for &(id, node, d) in self.m.incs.get(key).map_or(&[][..], |v| &v[..]) {
            let (seen_by_winner, missed_by_winner) = match winner {
                None => (false, true),
                Some((a, an)) if an == node => (id.index < a.index, id.index > a.index),
                Some((_, an)) => (self.anc[an].contains(node), self.anc[node].contains(an)),
            };
            let surely_visible = match node == self.node {
                true => self.own.iter().any(|(_, _, o)| *o == id),
                false => self.in_past(node),
            };
            let maybe_visible = node != self.node && !self.anc[node].contains(self.node);
            if seen_by_winner || !(surely_visible || maybe_visible) {
                continue;
            }
            if surely_visible && missed_by_winner {
                must = must.wrapping_add(d);
            } else {
                optional.push(d);
            }
        }
        (must, optional)
    }

    fn bad_count(&self, key: &Key, read: &Option<Vec<u8>>, want: &str) -> Violation {
        let shown = read.as_deref().map(String::from_utf8_lossy);
        self.fail(
            ViolationKind::BadValue,
            Vec::new(),
            format!(
                "{} read counting register {key} = {shown:?}, but its view gives {want}",
                self.me()
            ),
        )
    }

    /// Whether the op `(id, node)` is in this read's view: written in the causal past, or
    /// by this transaction before the read.
    fn visible(&self, id: OpId, node: usize) -> bool {
        self.in_past(node) || self.own.iter().any(|(_, _, o)| *o == id)
    }

    /// The removes of `elem` in `key` by counted transactions.
    fn removes_of<'s>(
        &'s self,
        key: &Key,
        elem: &'s [u8],
    ) -> impl Iterator<Item = (OpId, usize)> + 's {
        let removes = self.m.removes.get(key).map_or(&[][..], |v| &v[..]);
        removes
            .iter()
            .filter(move |&&(_, _, e)| e == elem)
            .map(|&(r, r_node, _)| (r, r_node))
    }

    /// Whether the remove may be in this read's view: an own earlier op, or another
    /// transaction's that does not causally follow this one.
    fn may_see(&self, r: OpId, r_node: usize) -> bool {
        if r_node == self.node {
            return self.own.iter().any(|(_, _, o)| *o == r);
        }
        !self.anc[r_node].contains(self.node)
    }

    /// Whether the remove `(r, r_node)` certainly observed the add: the add is in its
    /// causal past (or earlier in the same transaction).
    fn surely_observed(&self, r: OpId, r_node: usize, add: OpId, add_node: usize) -> bool {
        self.anc[r_node].contains(add_node) || (r_node == add_node && add < r)
    }

    /// Whether the remove certainly did not observe the add: it causally precedes it.
    fn surely_missed(&self, r: OpId, r_node: usize, add: OpId, add_node: usize) -> bool {
        self.anc[add_node].contains(r_node) || (r_node == add_node && r < add)
    }

    /// An add the read must hide: a remove in its view surely observed it.
    fn must_hide(&self, key: &Key, elem: &[u8], add: OpId, node: usize) -> bool {
        self.removes_of(key, elem)
            .any(|(r, rn)| self.visible(r, rn) && self.surely_observed(r, rn, add, node))
    }

    /// An add the read must show: in its view, and no remove that may be in the view
    /// may have observed it. The history reveals only part of the real causal order, so
    /// a remove that is neither surely before the add nor surely after the reader may
    /// hide it, and so may a remove whose transaction's outcome is unknown. A re-add
    /// replaces the tags it observed: a shown add of the element that may have observed
    /// this one (not surely before it) hides it too. Only shown re-adds count: two adds
    /// that each may have observed the other cannot both have replaced the other.
    fn must_show(&self, key: &Key, elem: &[u8], add: OpId, node: usize, shown: &Shown) -> bool {
        self.visible(add, node)
            && !self.m.maybe_removes.contains(&(key, elem))
            && self
                .removes_of(key, elem)
                .all(|(r, rn)| !self.may_see(r, rn) || self.surely_missed(r, rn, add, node))
            && shown.get(elem).is_none_or(|readds| {
                readds
                    .iter()
                    .all(|&(a, an)| a == add || self.surely_missed(a, an, add, node))
            })
    }

    /// Check 5 (and check 3 for sets): the read shows every visible add that no visible
    /// remove could have observed, and no add outside the view or surely removed.
    fn check_set(&self, key: &Key, observed: &[OpId]) -> Result<(), Violation> {
        let ids: BTreeSet<OpId> = observed.iter().copied().collect();
        let adds = self.m.adds.get(key).map_or(&[][..], |v| &v[..]);
        let mut shown = Shown::new();
        for &(add, node, elem) in adds.iter().filter(|(a, _, _)| ids.contains(a)) {
            shown.entry(elem).or_default().push((add, node));
        }
        for &(add, node, elem) in adds {
            let is_shown = ids.contains(&add);
            let ok = if is_shown {
                self.visible(add, node) && !self.must_hide(key, elem, add, node)
            } else {
                !self.must_show(key, elem, add, node, &shown)
            };
            if ok {
                continue;
            }
            let should = !is_shown;
            let kind = if node == self.node {
                ViolationKind::ReadYourWrites
            } else {
                ViolationKind::SetNotCausallyClosed
            };
            let why = if should {
                format!(
                    "{} read {key} without the add {add} (a member, or a hash field's write), which is in its causal past and no visible remove or shown re-add may have observed",
                    self.me()
                )
            } else {
                format!(
                    "{} read {key} showing the add {add} (a member, or a hash field's write), which is outside its causal past or removed by a visible remove",
                    self.me()
                )
            };
            return Err(self.fail(kind, vec![add.txn], why));
        }
        Ok(())
    }
}

impl Walk<'_, '_> {
    /// The value of a hash read (module docs): the fields shown are those of the writes
    /// it names, and a field no transaction increments shows one of its named `HSET`s.
    fn check_hash_value(
        &self,
        key: &Key,
        value: &ObjValue,
        observed: &[OpId],
    ) -> Result<(), Violation> {
        let ObjValue::Hash(pairs) = value else {
            return Ok(());
        };
        let mut named: BTreeMap<&[u8], Vec<&[u8]>> = BTreeMap::new();
        for id in observed {
            match self.m.writes[id].update {
                Update::HashSet { field, value } => named.entry(field).or_default().push(value),
                Update::HashIncrement { field, .. } => {
                    named.entry(field).or_default();
                }
                _ => {}
            }
        }
        let shown: BTreeSet<&[u8]> = pairs.iter().map(|(f, _)| f.as_slice()).collect();
        let fields: BTreeSet<&[u8]> = named.keys().copied().collect();
        if shown != fields {
            return Err(self.bad_hash(
                key,
                format!("shows fields {shown:?}, names writes of {fields:?}"),
            ));
        }
        for (f, v) in pairs {
            let counts = self.m.hash_incs.contains(&(key, f.as_slice()));
            let sets = &named[f.as_slice()];
            if !counts && !sets.contains(&v.as_slice()) {
                return Err(self.bad_hash(
                    key,
                    format!("shows {v:?} for field {f:?}, which no named HSET wrote"),
                ));
            }
        }
        Ok(())
    }

    fn bad_hash(&self, key: &Key, why: String) -> Violation {
        self.fail(
            ViolationKind::BadValue,
            Vec::new(),
            format!("{} read hash {key}: it {why}", self.me()),
        )
    }
}

/// The one "element" every list push adds and every pop removes, in the model's adds
/// and removes (module docs: a list read is judged as pushes a pop may have removed).
const LIST_ELEM: &[u8] = b"\x00causeway:list\x00";

impl Walk<'_, '_> {
    /// Check 5 for lists (module docs): the read names only pushes in its view, and
    /// every push in its view that no pop in its view may have observed.
    fn check_list(&self, key: &Key, observed: &[OpId]) -> Result<(), Violation> {
        let ids: BTreeSet<OpId> = observed.iter().copied().collect();
        let adds = self.m.adds.get(key).map_or(&[][..], |v| &v[..]);
        let none = Shown::new();
        for &(push, node, _) in adds.iter().filter(|(_, _, e)| *e == LIST_ELEM) {
            let is_shown = ids.contains(&push);
            let ok = match is_shown {
                true => self.visible(push, node),
                false => !self.must_show(key, LIST_ELEM, push, node, &none),
            };
            if ok {
                continue;
            }
            let kind = match node == self.node {
                true => ViolationKind::ReadYourWrites,
                false => ViolationKind::SetNotCausallyClosed,
            };
            let why = match is_shown {
                false => format!(
                    "{} read list {key} without the push {push}, which is in its causal past and no pop in its view may have observed",
                    self.me()
                ),
                true => format!(
                    "{} read list {key} showing the push {push}, which is outside its causal past",
                    self.me()
                ),
            };
            return Err(self.fail(kind, vec![push.txn], why));
        }
        Ok(())
    }

    /// The value of a list read: each named push shows some of its values, every value
    /// shown is one a named push wrote (as often as they wrote it), and, when the named
    /// pushes wrote distinct values, the order is the list's: left-pushed before
    /// right-pushed, a push's values in its order, and of two pushes at one end in
    /// causal order the later one outside the earlier one.
    fn check_list_value(
        &self,
        key: &Key,
        value: &ObjValue,
        observed: &[OpId],
    ) -> Result<(), Violation> {
        let ObjValue::List(shown) = value else {
            return Ok(());
        };
        let mut pool: BTreeMap<&[u8], Vec<(OpId, bool, usize)>> = BTreeMap::new();
        for id in observed {
            if let Update::ListPush { left, values } = self.m.writes[id].update {
                for (i, v) in values.iter().enumerate() {
                    pool.entry(v).or_default().push((*id, *left, i));
                }
            }
        }
        if shown.len() < observed.len() {
            let why = format!(
                "names {} pushes but shows {} elements",
                observed.len(),
                shown.len()
            );
            return Err(self.bad_list(key, why));
        }
        let unique = pool.values().all(|w| w.len() == 1);
        let mut placed = Vec::with_capacity(shown.len());
        for v in shown {
            let Some(w) = pool.get_mut(v.as_slice()).and_then(Vec::pop) else {
                let why = format!("shows {v:?}, which no named push wrote (or not as often)");
                return Err(self.bad_list(key, why));
            };
            placed.push(w);
        }
        match unique {
            true => self.check_list_order(key, &placed),
            false => Ok(()),
        }
    }

    /// The order part of [`Walk::check_list_value`], over the elements shown, each as
    /// (push, left, index in its push).
    fn check_list_order(&self, key: &Key, placed: &[(OpId, bool, usize)]) -> Result<(), Violation> {
        let before = |a: &(OpId, bool, usize), b: &(OpId, bool, usize)| -> Option<bool> {
            match (a.1, b.1) {
                (true, false) => return Some(true),
                (false, true) => return Some(false),
                _ => {}
            }
            let (an, bn) = (self.m.writes[&a.0].node, self.m.writes[&b.0].node);
            // `a` causally precedes `b` (or precedes it in one transaction).
            let a_first = match a.0 == b.0 {
                true => a.2 < b.2,
                false if an == bn => a.0 < b.0,
                false if self.anc[bn].contains(an) => true,
                false if self.anc[an].contains(bn) => false,
                false => return None,
            };
            // Right pushes keep causal order; left pushes reverse it.
            Some(a_first != a.1)
        };
        for (i, a) in placed.iter().enumerate().take(LIST_ORDER_CHECKED_MAX) {
            for b in placed.iter().skip(i + 1).take(LIST_ORDER_CHECKED_MAX) {
                if before(a, b) == Some(false) {
                    let why = format!(
                        "shows an element of {} before one of {} out of list order",
                        a.0, b.0
                    );
                    return Err(self.bad_list(key, why));
                }
            }
        }
        Ok(())
    }

    fn bad_list(&self, key: &Key, why: String) -> Violation {
        self.fail(
            ViolationKind::BadValue,
            Vec::new(),
            format!("{} read list {key}: it {why}", self.me()),
        )
    }
}

/// Most elements of one list read whose pairwise order the checker judges (quadratic).
const LIST_ORDER_CHECKED_MAX: usize = 512;

/// Check 6: arbitration must be explainable by one order extending causality.
pub(crate) fn check_arbitration(
    m: &Model,
    mut g: Graph,
    ar: &[(usize, usize)],
) -> Result<usize, Violation> {
    let before = g.edge_count();
    for &(from, to) in ar {
        g.add(from, to, EdgeKind::Arbitration);
    }
    let added = g.edge_count() - before;
    match g.topo_order() {
        Ok(_) => Ok(added),
        Err(cycle) => {
            let (txns, path) = describe_cycle(m, &cycle);
            Err(Violation::new(
                ViolationKind::ArbitrationCycle,
                txns,
                format!("no last-writer order explains the reads: {path}"),
            ))
        }
    }
}

/// What a passed TCC check built, for checks layered on it ([`crate::por`]).
pub(crate) struct Analysis<'a> {
    pub(crate) m: Model<'a>,
    /// `so ∪ wr`.
    pub(crate) g: Graph,
    /// A topological order of `g` and the strict ancestors of each node along it.
    pub(crate) order: Vec<usize>,
    pub(crate) anc: Vec<BitSet>,
    pub(crate) stats: Stats,
}

/// Checks `history` for TCC (checks 1-6 above); convergence is separate.
pub fn check_tcc(history: &History) -> Result<Stats, Violation> {
    let split = parts::split(history);
    let history = split.as_ref().map_or(history, |s| &s.history);
    analyze(history, split.as_ref()).map(|a| a.stats)
}

/// Runs checks 1-6 and keeps what they built. A history with parts of other types on a
/// key is given split (`split`, [`parts::split`]), and its reads are also judged by the
/// rule for which part a key shows.
pub(crate) fn analyze<'a>(
    history: &'a History,
    split: Option<&parts::Split>,
) -> Result<Analysis<'a>, Violation> {
    if history.txns.len() > CHECK_TXNS_MAX {
        return Err(Violation::new(
            ViolationKind::Malformed,
            Vec::new(),
            format!(
                "history has {} transactions; the checker takes at most {CHECK_TXNS_MAX}",
                history.txns.len()
            ),
        ));
    }
    let m = Model::build(history)?;
    check_observed(&m, history)?;
    crate::pcpsi::check_intermediate(&m)?;
    let g = causal_graph(&m);
    let order = g.topo_order().map_err(|cycle| {
        let (txns, path) = describe_cycle(&m, &cycle);
        Violation::new(
            ViolationKind::CausalCycle,
            txns,
            format!("causal order has a cycle: {path}"),
        )
    })?;
    let anc = g.ancestors(&order);
    let mut stats = Stats {
        txns: history.txns.len(),
        counted: m.txns.len(),
        causal_edges: g.edge_count(),
        finals: history.finals.len(),
        ..Stats::default()
    };
    let mut ar = Vec::new();
    check_reads(&m, &anc, &mut ar, &mut stats)?;
    if let Some(s) = split {
        parts::check_rule(s, &m, &anc)?;
    }
    stats.arbitration_edges = check_arbitration(&m, g.clone(), &ar)?;
    Ok(Analysis {
        m,
        g,
        order,
        anc,
        stats,
    })
}
