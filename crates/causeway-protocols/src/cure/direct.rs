//! The direct read-then-commit: a causal txn whose first read comes with only updates and
//! its commit after it (`First::ReadCommit`: RESP's standalone INCR and its kin), all on one
//! partition of the coordinator's own node, is read and prepared in one step at that
//! partition, and the session gets one answer (`Msg::ReadCommitResult`) once the commit's
//! one record is durable.
//!
//! It is the general path (Cure Alg. 1 l.16-21 read, l.23-36 commit) with the steps that
//! have nothing to do left out: no READ_KEY groups or read id (the one partition is here),
//! no 2PC grouping (its one participant commits it in one phase, docs/ARCHITECTURE.md),
//! and the read's answer held for the commit's, which the session waits for anyway. The
//! read waits as `Waiting::Read` with `direct` (`Node::serve_waiting`): the prepare time
//! is issued above Clock in the same step, so it exceeds `svc[d]` (Alg. 2 l.8).
//!
//! A read followed by only the commit (RESP's GET, a one-partition read-only txn) takes
//! this path too: served at its partition, answered with the commit's result (the
//! snapshot, Cure's read-only commit) in one message, with no READ_KEY and READ_REPLY
//! through this node's own queue and no ABORT from the session to free the txn. Having
//! no record after it, its read waits as any read does (`Direct::writes`, Alg. 2 l.2).

use super::coord_state::{commit_answer, Step, Txn};
use super::ext::Extension;
use super::msg::{Msg, Updates};
use super::node::Node;
use super::part::{Direct, Phase, Waiting};
use super::types::Participant;
use crate::kit::twopc::Votes;
use crate::kit::txn::{read_value, ReadId};
use causeway_core::crdt::ObjType;
use causeway_core::{Ctx, DcId, Error, Key, Object, PartitionId, TxnId, TxnKind, Vc};

impl<X: Extension> Node<X> {
    /// The partition where the read-then-commit `txn` reading `keys` is read and committed
    /// in one step, if it is: a causal txn whose keys and updates (those shipped so far
    /// and those after the read) are all on one partition of this node.
    pub(crate) fn direct_partition(
        &self,
        txn: TxnId,
        keys: &[(Key, ObjType)],
    ) -> Option<PartitionId> {
        let t = self.coord.txns.get(&txn)?;
        let then = t.then.as_ref()?;
        if t.kind != TxnKind::Causal || !self.cfg.one_phase {
            return None;
        }
        let first = &keys.first()?.0;
        let partition = self.topo.partition_of(first);
        // The same key (INCR's read and update) needs no second hash.
        let here = |k: &Key| k == first || self.topo.partition_of(k) == partition;
        let all_here = keys.iter().all(|(k, _)| here(k))
            && t.buffer.updates.iter().chain(then).all(|(k, _, _)| here(k))
            && self.topo.node_of(DcId(self.d as u16), partition) == self.me;
        all_here.then_some(partition)
    }

    /// Parks the read of a direct read-then-commit at its partition.
    pub(crate) fn read_here(
        &mut self,
        ctx: &mut Ctx<Msg>,
        (txn, req): (TxnId, u64),
        partition: PartitionId,
        keys: Vec<(Key, ObjType)>,
    ) {
        let t = self
            .coord
            .txns
            .get_mut(&txn)
            .expect("checked by direct_partition");
        t.step = Step::ReadingHere { req };
        let then = t.then.as_ref().expect("checked by direct_partition");
        let writes = !(t.buffer.updates.is_empty() && then.is_empty());
        let w = Waiting::Read {
            coord: self.me,
            // A direct read is answered by `direct`, not by its id.
            rid: ReadId { txn, req },
            svc: t.svc.clone(),
            keys,
            arrived: self.time.clock,
            direct: Some(Direct { txn, writes }),
        };
        self.park(ctx, partition, w);
    }

    /// The read of a direct read-then-commit is served (or refused): the values with the
    /// txn's writes overlaid (Alg. 1 l.20-21) are held for the commit's answer, and the
    /// commit is prepared now, on the state just read. A read that failed commits
    /// nothing: answered at once, the txn goes on as an ordinary one (or ends, aborted).
    pub(crate) fn read_here_served(
        &mut self,
        ctx: &mut Ctx<Msg>,
        txn: TxnId,
        partition: PartitionId,
        objects: Vec<(Key, Result<Object, Error>)>,
    ) {
        let Some(t) = self.coord.txns.get_mut(&txn) else {
            // Dropped meanwhile (idle past `txn_idle_ns`, `coord_tick`): nothing is
            // answered, and the session's request times out, as for a general read.
            return;
        };
        let Step::ReadingHere { req } = t.step else {
            return;
        };
        t.step = Step::Idle;
        let values: Result<Vec<_>, Error> = objects
            .into_iter()
            .map(|(key, obj)| obj.and_then(|o| read_value(&t.buffer, key, o, t.observed)))
            .collect();
        let then = t.then.take().expect("a direct read has its commit");
        let client = t.client;
        match values {
            Ok(values) => t.held = Some((values, t.svc.clone())),
            Err(e) => {
                if matches!(e, Error::Aborted(_)) {
                    self.coord.txns.remove(&txn); // the session ends it too (session.rs)
                }
                let result = Err(e);
                return ctx.send(client, Msg::ReadResult { txn, req, result });
            }
        }
        self.commit_here(ctx, (txn, req), partition, then);
    }

    /// The commit of a direct read-then-commit: one phase at `partition` (Alg. 1 l.23-36
    /// over its one participant), prepared in this step.
    fn commit_here(
        &mut self,
        ctx: &mut Ctx<Msg>,
        (txn, req): (TxnId, u64),
        partition: PartitionId,
        then: Updates,
    ) {
        if let Err(e) = self.take_updates(txn, then) {
            let t = self
                .coord
                .txns
                .remove(&txn)
                .expect("checked by read_here_served");
            return answer_commit(ctx, (txn, req), *t, Err(e));
        }
        let deadline = self.time.clock + self.cfg.prepare_timeout_ns;
        let t = self
            .coord
            .txns
            .get_mut(&txn)
            .expect("checked by take_updates");
        if t.buffer.updates.is_empty() {
            // Read-only: the snapshot is the txn's place in causality.
            let t = self.coord.txns.remove(&txn).expect("present");
            let svc = t.svc.clone();
            return answer_commit(ctx, (txn, req), *t, Ok(svc));
        }
        t.step = Step::Preparing {
            req,
            votes: Votes::new([partition], deadline),
            phase: Phase::One,
        };
        // Prepared once, as it is: nothing reads a preparing txn's buffer.
        let updates = std::mem::take(&mut t.buffer.updates);
        let svc = t.svc.clone();
        let to = Participant {
            partition,
            coord: self.me,
            txn,
            phase: Phase::One,
        };
        self.prepare(ctx, to, svc, updates);
    }
}

/// Answers the commit of `t`, which ended before its prepare, with its held read.
fn answer_commit<S>(
    ctx: &mut Ctx<Msg>,
    (txn, req): (TxnId, u64),
    t: Txn<S>,
    result: Result<Vc, Error>,
) {
    let answer = commit_answer((txn, req), t.held, result);
    ctx.send(t.client, answer);
}
