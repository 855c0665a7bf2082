//! Decisions of strong txns applied where they are heard, before the log applies them.
//!
//! The coordinator decides once every participant's vote is in `f + 1` logs (§6.3, [19]):
//! commit iff every participant voted commit. That outcome can no longer change, so the
//! coordinator sends it to every replica of every participant (not to the leaders alone),
//! and a replica whose log has applied the txn's Prepare applies the decision at once:
//! DELIVER_UPDATES (Alg. 3 l.4-8) delivers the txn and `knownVec[strong]` passes its
//! timestamp one message delay after the commit, where the leader's `Decide` entry takes a
//! message to the leader and a consensus round more. The client's next transaction reads
//! the strong txn it just committed in its own DC without waiting for that round.
//!
//! The `Decide` entry is still appended by the leader, for durability: a replica that
//! restarts replays its log and finds the txn prepared again until the entry arrives
//! (its reads wait meanwhile, nothing it served is contradicted: the outcome is fixed).
//! Applying the entry after the early decision changes nothing (`Certifier::decide_early`).
//!
//! # Decisions where the paper is silent
//!
//! - A decision heard before the Prepare is applied waits in `early.heard` (at most
//!   `EARLY_HEARD_MAX`; past that, the oldest is dropped: the log brings it anyway).
//! - The certifier keeps the decisions it applied early until its log applies their
//!   `Decide` (`Certifier::early`, at most `kit::certify::EARLY_MAX`; past that, decisions
//!   wait for the log); it is checkpointed and transferred with them. A leader proposes
//!   the `Decide` of every one still there a `strong_retry_ns` check later: the recovery
//!   of orphaned txns looks for *prepared* txns, which an early decision removed, so a
//!   leader that heard a decision its old leader never appended makes sure the log gets
//!   it, and the replicas that missed the early message learn it.
//! - A state transfer replaces the certifier: the decisions applied early to the old one
//!   apply again to the image's prepared txns, so `knownVec[strong]` does not go back.

use super::hooks::UniExt;
use super::state::EARLY_HEARD_MAX;
use crate::cure::msg::Msg;
use crate::cure::node::Node;
use crate::kit::certify::CertEntry;
use causeway_core::{Ctx, PartitionId, TxnId};
use std::collections::BTreeSet;

impl Node<UniExt> {
    /// A decision heard from a coordinator (or recovery): applied now if our log applied
    /// the Prepare, else kept until it does.
    pub(crate) fn decide_early(
        &mut self,
        ctx: &mut Ctx<Msg>,
        p: PartitionId,
        txn: TxnId,
        commit: Option<u64>,
    ) {
        let Some(g) = self.ext.strong.as_mut().and_then(|s| s.groups.get_mut(&p)) else {
            return;
        };
        if g.cert.decision(&txn).is_some() {
            return;
        }
        if g.cert.prepared_ts(&txn).is_none() {
            if g.early.heard.len() >= EARLY_HEARD_MAX {
                g.early.heard.pop_first();
            }
            g.early.heard.insert(txn, commit);
            return;
        }
        if g.cert.decide_early(txn, commit) {
            self.deliver(p);
            self.serve_waiting(ctx);
        }
    }

    /// After the log (or a state transfer) applied entries: applies the decisions heard
    /// for txns now prepared, and forgets those the log decided.
    pub(crate) fn early_after_log(&mut self, p: PartitionId) {
        let Some(g) = self.ext.strong.as_mut().and_then(|s| s.groups.get_mut(&p)) else {
            return;
        };
        let heard = std::mem::take(&mut g.early.heard);
        for (txn, commit) in heard {
            if g.cert.prepared_ts(&txn).is_some() {
                g.cert.decide_early(txn, commit);
            } else if g.cert.decision(&txn).is_none() {
                g.early.heard.insert(txn, commit); // its Prepare is still to come
            }
        }
    }

    /// As leader, every `strong_retry_ns`: proposes the `Decide` of the txns decided here
    /// early at the previous check and still not decided by the log (module doc).
    pub(crate) fn early_to_log(&mut self) {
        let (clock, every) = (self.time.clock, self.ext.cfg.retry_ns);
        let Some(st) = self.ext.strong.as_mut() else {
            return;
        };
        let mut due = Vec::new();
        for (p, g) in st.groups.iter_mut() {
            if !g.px.is_leader() || clock < g.early.seen.1 + every {
                continue;
            }
            let now: BTreeSet<TxnId> = g.cert.early().keys().copied().collect();
            let early = g.cert.early();
            let old = now.intersection(&g.early.seen.0);
            due.extend(old.map(|txn| (*p, *txn, early[txn])));
            g.early.seen = (now, clock);
        }
        for (p, txn, commit) in due {
            self.propose(p, CertEntry::Decide { txn, commit });
        }
    }
}
