//! Certification of strong transactions at one partition (UniStore §6.3, Alg. 3), as a
//! deterministic state machine over the partition's consensus log: every replica of the
//! partition applies the same decided [`CertEntry`]s in the same order and so computes the
//! same votes, strong timestamps and deliveries (a vote the leader computed as it proposed
//! an entry travels in it: [`Certifier::vote`]). A new leader continues from the same
//! state.
//!
//! - **Prepare** (the certification request of one partition's part of a txn): optimistic
//!   concurrency control in the log's (certification) order: a txn commits only if its
//!   snapshot includes every conflicting txn certified before it (§6.3). It is voted down
//!   when it conflicts with a txn still prepared here, or with a committed one whose
//!   commit vector is not `<=` its snapshot (kept per key as the join of the commit
//!   vectors of the committed strong writes and reads). The whole vector counts, not only
//!   the strong entry: a strong txn whose causal dependencies are not yet visible in the
//!   certifying txn's DC is not in its snapshot either (this is what makes a strong txn
//!   committed on non-uniform dependencies block its conflicting successors: §4, Fig. 2).
//!   Otherwise it is prepared with a proposed timestamp
//!   `max(last + 1, proposer's clock, svc[strong] + 1)`: above every timestamp of this log
//!   (so the final timestamp, the max over the participants, orders conflicting txns by
//!   certification order: Property 5) and above its snapshot (so its commit vector
//!   exceeds everything it read).
//! - **Decide**: the coordinator's (or a recovery's) decision, commit at the max of the
//!   participants' proposals or abort.
//! - **Fence**: a recovery coordinator asks for this partition's vote on a txn; if the
//!   txn never arrived here it is voted down now, durably, so a late Prepare cannot
//!   vote commit after the recovery decided abort.
//! - **Heartbeat** (Alg. 3 l.9): moves `last` to the proposer's clock when the partition
//!   has no strong txns, so `knownVec[strong]` advances.
//!
//! `known` is `knownVec[strong]` of the replica (Property 6): every txn this log will
//! ever commit has a timestamp above it, so the committed txns at or below it are
//! delivered (DELIVER_UPDATES, Alg. 3 l.4-8) in timestamp order. It is the lowest
//! prepared proposal minus one, or `last` when nothing is prepared. A decision heard ahead
//! of its log entry (`decide_early`) takes its txn out of the prepared ones but leaves
//! `last` to the log: a Prepare further down the log may propose below that commit, so it
//! is delivered once the log's `last` passes it, one heartbeat or entry later.
//!
//! Conflict relations: `AdHoc` (UniStore's default for ad-hoc strong txns: a common
//! written key, or one reads a key the other writes; with every txn strong this is
//! serializability; RedBlue's too) and `All` (every two strong txns conflict whatever
//! their keys; no registry entry uses it: it stays because the certifier's encoding,
//! in checkpoints and state transfers, carries the relation). Declared relations (`causeway_core::conflict`: rules
//! `A B pattern`, e.g. RUBiS's) are encoded by the coordinator as *conflict tokens*: for
//! each rule naming the txn's type and each key it touches that matches the rule's
//! pattern, a token key `\0conflict/RULE/CAPTURE` (placed on the partition its hash
//! names, which joins the certification), written by type `b` and read by type `a` (both
//! written when `a == b`). Two declared txns conflict only through tokens (so storeBid
//! with storeBid on an item do not, storeBid with closeAuction do; `b` with `b` also
//! conflicts, an over-approximation); a declared txn and an ad-hoc one conflict through
//! their keys by the ad-hoc rule, as in the checker. Limits: decisions are remembered for the last
//! [`DECIDED_KEPT_MAX`] txns (a Prepare of an older one would be certified again; its
//! coordinator stopped retrying long before).

use causeway_core::crdt::Effect;
use causeway_core::{Key, NodeId, OpId, PartitionId, TxnId, Vc};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

/// Decisions remembered per partition (for duplicate Prepares and recovery queries).
pub const DECIDED_KEPT_MAX: usize = 65_536;
/// Most decisions a replica applies ahead of its log's `Decide` entries at once (past
/// that, decisions wait for the log).
pub const EARLY_MAX: usize = 4_096;

/// One partition's part of a strong txn, as its coordinator submits it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CertTxn {
    pub txn: TxnId,
    pub coord: NodeId,
    /// The snapshot: the commit vector copies its DC entries (§6.3).
    pub svc: Vc,
    /// Keys of this partition the txn read (its read set, Alg. 1 l.14).
    pub reads: Vec<Key>,
    /// Keys of this partition the txn wrote, and the effects to deliver.
    pub writes: Vec<Key>,
    pub ops: Vec<(Key, OpId, Effect)>,
    /// Every partition the txn touches (a recovery asks them all).
    pub participants: Vec<PartitionId>,
    /// Its type is named by a declared conflict rule: against other declared txns it
    /// conflicts only through `tokens_read` / `tokens_write` (module doc).
    pub declared: bool,
    pub tokens_read: Vec<Key>,
    pub tokens_write: Vec<Key>,
}

/// One decided entry of a partition's certification log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CertEntry {
    /// `vote`: the leader's vote, computed as it proposed the entry ([`Certifier::vote`]
    /// on its speculative state) and applied as is by every replica, so `f + 1`
    /// acceptances of the entry are the vote ([19]); `None`: computed as it is applied.
    Prepare {
        t: Box<CertTxn>,
        clock: u64,
        vote: Option<Result<u64, String>>,
    },
    Decide {
        txn: TxnId,
        commit: Option<u64>,
    },
    Fence {
        txn: TxnId,
        asker: NodeId,
    },
    Heartbeat {
        clock: u64,
    },
}

/// What the leader tells a coordinator or recovery after applying an entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// This partition's vote: `Ok(proposed timestamp)` or why it votes abort.
    Vote {
        txn: TxnId,
        to: NodeId,
        vote: Result<u64, String>,
    },
    /// The txn is decided already (`Some(ts)` = committed at `ts`).
    Decided {
        txn: TxnId,
        to: NodeId,
        commit: Option<u64>,
    },
}

/// A committed strong txn ready to be applied to this replica's store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivery {
    pub txn: TxnId,
    pub ts: u64,
    pub svc: Vc,
    pub ops: Vec<(Key, OpId, Effect)>,
}

/// Which strong txns conflict.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Relation {
    /// A common written key, or one reads a key the other writes.
    #[default]
    AdHoc,
    /// Every two strong txns conflict, whatever their keys (no registry entry uses it).
    All,
}

/// A txn prepared here, with its proposed timestamp and when it was proposed.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Pending {
    pub t: CertTxn,
    pub ts: u64,
    pub proposed_at: u64,
}

/// The joins of the commit vectors of the committed strong writes and reads of one key.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Marks {
    writes: Vc,
    reads: Vc,
}

/// One replica's certification state (see the module doc). It serializes whole: a
/// node's checkpoint holds it beside the consensus log's slot it covers.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Certifier {
    relation: Relation,
    /// The `certify-ignores-conflicts` mutation: every txn is voted commit.
    ignore_conflicts: bool,
    /// The `early-raises-last` mutation (`decide_early`).
    early_raises_last: bool,
    last: u64,
    prepared: BTreeMap<TxnId, Pending>,
    decided: BTreeMap<TxnId, Option<u64>>,
    decided_order: VecDeque<TxnId>,
    /// Real keys, by every committed strong txn.
    marks: BTreeMap<Key, Marks>,
    /// Real keys, by ad-hoc committed strong txns only.
    adhoc: BTreeMap<Key, Marks>,
    /// Conflict tokens, by declared committed strong txns.
    tokens: BTreeMap<Key, Marks>,
    /// The join of every committed commit vector (the `All` relation's single mark).
    committed: Vc,
    ready: BTreeMap<(u64, TxnId), Delivery>,
    /// Decisions applied ahead of the log's `Decide` (`decide_early`), until it applies
    /// it: a replica that leads later makes sure the log gets them (`unistore/early.rs`).
    early: BTreeMap<TxnId, Option<u64>>,
    applied: u64,
    /// A decision no agreeing log could hold (see `decide`), reported by the invariants.
    diverged: Option<String>,
}

impl Certifier {
    pub fn new(relation: Relation, ignore_conflicts: bool) -> Certifier {
        Certifier {
            relation,
            ignore_conflicts,
            ..Certifier::default()
        }
    }

    /// `knownVec[strong]` (module doc).
    pub fn known(&self) -> u64 {
        match self.prepared.values().map(|p| p.ts).min() {
            Some(min) => min - 1,
            None => self.last,
        }
    }

    /// Entries applied so far.
    pub fn applied(&self) -> u64 {
        self.applied
    }

    pub fn prepared(&self) -> impl Iterator<Item = (&TxnId, &Pending)> {
        self.prepared.iter()
    }

    pub fn prepared_ts(&self, txn: &TxnId) -> Option<u64> {
        self.prepared.get(txn).map(|p| p.ts)
    }

    /// The decision, if this replica remembers one.
    pub fn decision(&self, txn: &TxnId) -> Option<Option<u64>> {
        self.decided.get(txn).copied()
    }

    /// What this replica can answer about `txn` without a new log entry.
    pub fn answer(&self, txn: TxnId, to: NodeId) -> Option<Reply> {
        if let Some(ts) = self.prepared_ts(&txn) {
            return Some(Reply::Vote {
                txn,
                to,
                vote: Ok(ts),
            });
        }
        self.decision(&txn)
            .map(|commit| Reply::Decided { txn, to, commit })
    }

    /// Applies the next decided entry; the reply the leader sends, if any.
    pub fn apply(&mut self, entry: CertEntry) -> Option<Reply> {
        self.applied += 1;
        match entry {
            CertEntry::Prepare { t, clock, vote } => self.prepare(*t, clock, vote),
            CertEntry::Decide { txn, commit } => {
                self.decide(txn, commit, true);
                None
            }
            CertEntry::Fence { txn, asker } => {
                if self.answer(txn, asker).is_none() {
                    self.remember(txn, None); // never arrived: voted down for good
                }
                self.answer(txn, asker)
            }
            CertEntry::Heartbeat { clock } => {
                self.last = self.last.max(clock);
                None
            }
        }
    }

    /// Applies a decision heard before the log's `Decide` entry (`unistore/early.rs`): the
    /// outcome is fixed by the votes, and the entry, applied later, changes nothing. Only
    /// a txn prepared here: false (nothing done) otherwise.
    pub fn decide_early(&mut self, txn: TxnId, commit: Option<u64>) -> bool {
        if !self.prepared.contains_key(&txn) || self.early.len() >= EARLY_MAX {
            return false;
        }
        self.decide(txn, commit, self.early_raises_last);
        self.early.insert(txn, commit);
        true
    }

    /// The `early-raises-last` mutation: early decisions count as the log's.
    pub fn with_early_raises_last(mut self, on: bool) -> Certifier {
        self.early_raises_last = on;
        self
    }

    /// The decisions applied ahead of the log's `Decide` entries.
    pub fn early(&self) -> &BTreeMap<TxnId, Option<u64>> {
        &self.early
    }

    /// Committed txns not delivered yet (their timestamp is above `known`).
    pub fn pending_txns(&self) -> impl Iterator<Item = TxnId> + '_ {
        self.ready.keys().map(|(_, txn)| *txn)
    }

    /// Committed txns now at or below `known`, in timestamp order (Alg. 3 l.5).
    pub fn take_deliveries(&mut self) -> Vec<Delivery> {
        let known = self.known();
        let min = TxnId {
            session: causeway_core::SessionId(0),
            seq: 0,
        };
        let later = self.ready.split_off(&(known + 1, min));
        std::mem::replace(&mut self.ready, later)
            .into_values()
            .collect()
    }

    /// This replica's vote on `t` if it were the next entry: abort on a conflict, else
    /// commit at a proposed timestamp above every one of this log and above the snapshot.
    pub fn vote(&self, t: &CertTxn, clock: u64) -> Result<u64, String> {
        if let Some(why) = self.conflict(t) {
            return Err(why);
        }
        let snap = t.svc.get_extra(causeway_core::clock::Extra::Strong);
        Ok((self.last + 1).max(clock).max(snap + 1))
    }

    fn prepare(
        &mut self,
        t: CertTxn,
        clock: u64,
        vote: Option<Result<u64, String>>,
    ) -> Option<Reply> {
        let (txn, to) = (t.txn, t.coord);
        if let Some(reply) = self.answer(txn, to) {
            return Some(reply); // a duplicate: the first one voted
        }
        let ts = match vote.unwrap_or_else(|| self.vote(&t, clock)) {
            Ok(ts) => ts,
            Err(why) => {
                self.remember(txn, None);
                let vote = Err(why);
                return Some(Reply::Vote { txn, to, vote });
            }
        };
        self.last = self.last.max(ts);
        let p = Pending {
            t,
            ts,
            proposed_at: clock,
        };
        self.prepared.insert(txn, p);
        let vote = Ok(ts);
        Some(Reply::Vote { txn, to, vote })
    }

    /// Why `t` cannot commit: a conflicting txn prepared, or committed after its snapshot.
    fn conflict(&self, t: &CertTxn) -> Option<String> {
        if self.ignore_conflicts {
            return None;
        }
        let snap = &t.svc;
        if let Some(p) = self
            .prepared
            .values()
            .find(|p| conflicts(self.relation, t, &p.t))
        {
            let (s, n) = (p.t.txn.session.0, p.t.txn.seq);
            return Some(format!(
                "conflict with strong txn s{s}.t{n}, still being certified"
            ));
        }
        if self.relation == Relation::All && !self.committed.le(snap) {
            return Some("conflict with a strong txn not in the snapshot".into());
        }
        let after = |marks: &BTreeMap<Key, Marks>, k: &Key, writes_only: bool| {
            marks
                .get(k)
                .is_some_and(|m| !m.writes.le(snap) || (!writes_only && !m.reads.le(snap)))
        };
        let missed = |marks, writes: &[Key], reads: &[Key]| {
            let hit = writes.iter().find(|k| after(marks, k, false));
            hit.or_else(|| reads.iter().find(|k| after(marks, k, true)))
                .cloned()
        };
        // A declared txn meets other declared ones through its tokens, ad-hoc ones
        // through its keys; an ad-hoc txn meets every txn through its keys.
        let real = if t.declared { &self.adhoc } else { &self.marks };
        if let Some(k) = missed(real, &t.writes, &t.reads) {
            return Some(format!(
                "conflict on key {k} with a strong txn not in the snapshot"
            ));
        }
        let k = missed(&self.tokens, &t.tokens_write, &t.tokens_read)?;
        Some(format!(
            "conflict on {k} with a strong txn not in the snapshot"
        ))
    }

    /// A decision: from the log (`logged`), or heard ahead of it (`decide_early`). Only
    /// the log's entries raise `last`: the leader proposes above the `last` of its log, so
    /// a Prepare further down the log may carry a timestamp below a commit heard early,
    /// and `known` must stay below it until the log passes the commit (module doc).
    fn decide(&mut self, txn: TxnId, commit: Option<u64>, logged: bool) {
        if logged {
            self.early.remove(&txn);
            if let Some(ts) = commit {
                self.last = self.last.max(ts);
            }
        }
        let Some(p) = self.prepared.remove(&txn) else {
            if self.decision(&txn).is_none() {
                self.remember(txn, commit);
            }
            return;
        };
        self.remember(txn, commit);
        let Some(ts) = commit else {
            return;
        };
        if ts < p.ts {
            // Only a broken consensus (two logs disagreeing) gets here: report it as an
            // invariant violation rather than crash the replica.
            let e = format!("{txn:?} committed at {ts}, below our proposal {}", p.ts);
            self.diverged.get_or_insert(e);
        }
        let mut ct = p.t.svc.clone();
        ct.set_extra(causeway_core::clock::Extra::Strong, ts);
        self.committed.join(&ct);
        mark(&mut self.marks, &p.t.writes, &p.t.reads, &ct);
        if p.t.declared {
            mark(&mut self.tokens, &p.t.tokens_write, &p.t.tokens_read, &ct);
        } else {
            mark(&mut self.adhoc, &p.t.writes, &p.t.reads, &ct);
        }
        let d = Delivery {
            txn,
            ts,
            svc: p.t.svc,
            ops: p.t.ops,
        };
        self.ready.insert((ts, txn), d);
    }

    fn remember(&mut self, txn: TxnId, commit: Option<u64>) {
        if self.decided.insert(txn, commit).is_none() {
            self.decided_order.push_back(txn);
        }
        while self.decided_order.len() > DECIDED_KEPT_MAX {
            if let Some(old) = self.decided_order.pop_front() {
                self.decided.remove(&old);
            }
        }
    }

    /// `known` never passes a prepared proposal; deliveries wait above it.
    pub fn check_invariants(&self) -> Result<(), String> {
        if let Some(e) = &self.diverged {
            return Err(format!("certification logs diverged: {e}"));
        }
        let known = self.known();
        if let Some(p) = self.prepared.values().find(|p| p.ts <= known) {
            return Err(format!("known {known} at or above prepared {}", p.ts));
        }
        if self.prepared.values().any(|p| p.ts > self.last) {
            return Err(format!("a prepared proposal above last {}", self.last));
        }
        Ok(())
    }

    /// Where `self` and `other`, having applied the same entries, would vote differently
    /// (their prepared txns, proposals or `last` differ): a leader's speculative
    /// certifier against its decided one once nothing is pending.
    pub fn differs_from(&self, other: &Certifier) -> Option<String> {
        let mine: Vec<(&TxnId, u64)> = self.prepared.iter().map(|(t, p)| (t, p.ts)).collect();
        let theirs: Vec<(&TxnId, u64)> = other.prepared.iter().map(|(t, p)| (t, p.ts)).collect();
        if mine != theirs || self.last != other.last || self.committed != other.committed {
            return Some(format!(
                "last {} vs {}, prepared {mine:?} vs {theirs:?}",
                self.last, other.last
            ));
        }
        None
    }
}

/// Joins `ct` into the marks of `writes` and `reads`.
fn mark(marks: &mut BTreeMap<Key, Marks>, writes: &[Key], reads: &[Key], ct: &Vc) {
    for k in writes {
        marks.entry(k.clone()).or_default().writes.join(ct);
    }
    for k in reads {
        marks.entry(k.clone()).or_default().reads.join(ct);
    }
}

/// Whether two strong txns conflict under `relation` (on this partition's keys): two
/// declared txns through their tokens, any other pair through their keys (a common
/// written key, or one reads what the other writes).
pub fn conflicts(relation: Relation, a: &CertTxn, b: &CertTxn) -> bool {
    if relation == Relation::All {
        return true;
    }
    let overlap = |aw: &[Key], ar: &[Key], bw: &[Key], br: &[Key]| {
        aw.iter().any(|k| bw.contains(k) || br.contains(k)) || ar.iter().any(|k| bw.contains(k))
    };
    if a.declared && b.declared {
        return overlap(
            &a.tokens_write,
            &a.tokens_read,
            &b.tokens_write,
            &b.tokens_read,
        );
    }
    overlap(&a.writes, &a.reads, &b.writes, &b.reads)
}

/// A group member's certification state at the instant of a partition image: what a
/// state transfer carries of a strong partition (UniStore's `strong_transfer.rs`); here,
/// below both the engine that ships it and the extension that makes it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StrongImage {
    /// The transfer it belongs to.
    pub id: u64,
    /// Every decided slot below this is in `cert` and (its committed txns delivered) in
    /// the images.
    pub delivered: crate::kit::paxos::Slot,
    pub cert: Certifier,
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_core::clock::Extra;
    use causeway_core::SessionId;

    fn txn(n: u64) -> TxnId {
        TxnId {
            session: SessionId(n),
            seq: 1,
        }
    }

    fn cert(n: u64, snap: u64, reads: &[&str], writes: &[&str]) -> CertTxn {
        let mut svc = Vc::zero(3);
        svc.set_extra(Extra::Strong, snap);
        let keys = |ks: &[&str]| ks.iter().map(|k| Key::from(*k)).collect();
        CertTxn {
            txn: txn(n),
            coord: NodeId(0),
            svc,
            reads: keys(reads),
            writes: keys(writes),
            ops: Vec::new(),
            participants: vec![PartitionId(0)],
            declared: false,
            tokens_read: Vec::new(),
            tokens_write: Vec::new(),
        }
    }

    fn vote(r: Option<Reply>) -> Result<u64, String> {
        match r {
            Some(Reply::Vote { vote, .. }) => vote,
            other => panic!("expected a vote, got {other:?}"),
        }
    }

    fn prepare(c: &mut Certifier, t: CertTxn, clock: u64) -> Result<u64, String> {
        vote(c.apply(CertEntry::Prepare {
            t: Box::new(t),
            clock,
            vote: None,
        }))
    }

    #[test]
    fn a_conflicting_txn_committed_after_the_snapshot_votes_abort() {
        let mut c = Certifier::new(Relation::AdHoc, false);
        let ts1 = prepare(&mut c, cert(1, 0, &["x"], &["x"]), 10).unwrap();
        c.apply(CertEntry::Decide {
            txn: txn(1),
            commit: Some(ts1),
        });
        // Snapshot before t1: lost update, aborted.
        assert!(prepare(&mut c, cert(2, 0, &["x"], &["x"]), 20).is_err());
        // Snapshot including t1: commits, above t1 (Property 5).
        let ts3 = prepare(&mut c, cert(3, ts1, &["x"], &["x"]), 5).unwrap();
        assert!(ts3 > ts1);
        // A txn on another key never conflicts.
        assert!(prepare(&mut c, cert(4, 0, &["y"], &["y"]), 30).is_ok());
    }

    #[test]
    fn prepared_txns_block_conflicting_ones_and_read_write_conflicts_count() {
        let mut c = Certifier::new(Relation::AdHoc, false);
        prepare(&mut c, cert(1, 0, &[], &["x"]), 10).unwrap();
        assert!(
            prepare(&mut c, cert(2, 0, &["x"], &[]), 11).is_err(),
            "reads x"
        );
        assert!(prepare(&mut c, cert(3, 0, &["y"], &["y"]), 12).is_ok());
        // Two readers of the same key do not conflict.
        let mut r = Certifier::new(Relation::AdHoc, false);
        prepare(&mut r, cert(1, 0, &["x"], &[]), 10).unwrap();
        assert!(prepare(&mut r, cert(2, 0, &["x"], &[]), 11).is_ok());
    }

    #[test]
    fn declared_txns_conflict_through_tokens_and_ad_hoc_ones_through_keys() {
        let declared = |n, key: &str, tr: &[&str], tw: &[&str]| {
            let mut t = cert(n, 0, &[key], &[key]);
            t.declared = true;
            t.tokens_read = tr.iter().map(|k| Key::from(*k)).collect();
            t.tokens_write = tw.iter().map(|k| Key::from(*k)).collect();
            t
        };
        let mut c = Certifier::new(Relation::AdHoc, false);
        // Two bids on item 7 (token read) write the same key but do not conflict.
        prepare(&mut c, declared(1, "items/7/bids", &["tok7"], &[]), 10).unwrap();
        prepare(&mut c, declared(2, "items/7/bids", &["tok7"], &[]), 11).unwrap();
        // closeAuction (token write) conflicts with the prepared bids.
        let close = declared(3, "items/7/closed", &[], &["tok7"]);
        assert!(prepare(&mut c, close, 12).is_err());
        // An ad-hoc txn on the bids key conflicts by the default rule.
        assert!(prepare(&mut c, cert(4, 0, &["items/7/bids"], &[]), 13).is_err());
        // Committed: a later close whose snapshot lacks the bids is voted down.
        for n in [1, 2] {
            let ts = c.prepared_ts(&txn(n)).unwrap();
            c.apply(CertEntry::Decide {
                txn: txn(n),
                commit: Some(ts),
            });
        }
        let late = declared(5, "items/7/closed", &[], &["tok7"]);
        let why = prepare(&mut c, late, 20).unwrap_err();
        assert!(why.contains("tok7"), "{why}");
    }

    #[test]
    fn all_relation_conflicts_everything_and_the_mutation_nothing() {
        let mut c = Certifier::new(Relation::All, false);
        prepare(&mut c, cert(1, 0, &[], &["x"]), 10).unwrap();
        assert!(prepare(&mut c, cert(2, 0, &[], &["y"]), 11).is_err());
        let mut m = Certifier::new(Relation::AdHoc, true);
        prepare(&mut m, cert(1, 0, &[], &["x"]), 10).unwrap();
        assert!(prepare(&mut m, cert(2, 0, &[], &["x"]), 11).is_ok());
    }

    #[test]
    fn an_early_decision_delivers_once_the_logs_last_passes_it_and_its_entry_is_a_no_op() {
        let mut c = Certifier::new(Relation::AdHoc, false);
        let a = prepare(&mut c, cert(1, 0, &[], &["a"]), 100).unwrap();
        // Committed at a timestamp another participant proposed, above our log.
        let commit = a + 50;
        assert!(c.decide_early(txn(1), Some(commit)));
        assert!(
            !c.decide_early(txn(9), Some(commit)),
            "only a txn prepared here"
        );
        assert_eq!(c.early().len(), 1);
        assert_eq!(c.known(), a, "the log's last, not the commit heard early");
        assert!(
            c.take_deliveries().is_empty(),
            "a Prepare down the log may go below it"
        );
        let b = prepare(&mut c, cert(2, 0, &[], &["b"]), 120).unwrap();
        assert!(
            b < commit,
            "the leader proposed without the decision: {b} < {commit}"
        );
        assert_eq!(c.known(), b - 1);
        c.apply(CertEntry::Heartbeat { clock: commit + 10 });
        assert_eq!(c.known(), b - 1, "still below the prepared txn");
        c.apply(CertEntry::Decide {
            txn: txn(2),
            commit: Some(b),
        });
        let order: Vec<TxnId> = c.take_deliveries().into_iter().map(|d| d.txn).collect();
        assert_eq!(
            order,
            vec![txn(2), txn(1)],
            "timestamp order across early and logged"
        );
        c.apply(CertEntry::Decide {
            txn: txn(1),
            commit: Some(commit),
        });
        assert!(
            c.early().is_empty(),
            "the log's entry forgets the early decision"
        );
        assert!(c.take_deliveries().is_empty(), "and delivers nothing twice");
        c.check_invariants().unwrap();
    }

    #[test]
    fn known_stays_below_prepared_and_deliveries_come_in_timestamp_order() {
        let mut c = Certifier::new(Relation::AdHoc, false);
        let a = prepare(&mut c, cert(1, 0, &[], &["a"]), 100).unwrap();
        let b = prepare(&mut c, cert(2, 0, &[], &["b"]), 90).unwrap();
        assert!(b > a, "timestamps grow in log order whatever the clock");
        assert_eq!(c.known(), a - 1);
        c.apply(CertEntry::Decide {
            txn: txn(2),
            commit: Some(b + 5),
        });
        assert!(c.take_deliveries().is_empty(), "t1 still prepared below");
        c.apply(CertEntry::Decide {
            txn: txn(1),
            commit: Some(a),
        });
        let got: Vec<u64> = c.take_deliveries().iter().map(|d| d.ts).collect();
        assert_eq!(got, vec![a, b + 5]);
        assert_eq!(c.known(), b + 5);
        c.apply(CertEntry::Heartbeat { clock: 1_000 });
        assert_eq!(c.known(), 1_000);
        c.check_invariants().unwrap();
    }

    #[test]
    fn duplicates_repeat_the_vote_and_a_fence_votes_down_a_late_prepare() {
        let mut c = Certifier::new(Relation::AdHoc, false);
        let ts = prepare(&mut c, cert(1, 0, &[], &["x"]), 10).unwrap();
        assert_eq!(prepare(&mut c, cert(1, 0, &[], &["x"]), 50), Ok(ts));
        let fenced = c.apply(CertEntry::Fence {
            txn: txn(7),
            asker: NodeId(3),
        });
        assert_eq!(
            fenced,
            Some(Reply::Decided {
                txn: txn(7),
                to: NodeId(3),
                commit: None
            })
        );
        // The fenced txn's Prepare arrives late: decided abort already.
        let late = c.apply(CertEntry::Prepare {
            t: Box::new(cert(7, 0, &[], &["z"])),
            clock: 60,
            vote: None,
        });
        assert!(matches!(late, Some(Reply::Decided { commit: None, .. })));
    }
}
