//! UniStore's strong transactions (§6, Alg. 3 and the strong lines of Alg. 1-2) on the
//! engine: the coordinator's COMMIT_STRONG and the certification service.
//!
//! - **Execution** (§6.2): a strong txn runs like a causal one on a snapshot whose strong
//!   entry is `max(V[strong], stableVec[strong])` (Alg. 1 l.7, `uniform.rs`); reads wait
//!   for `knownVec[strong]` too (l.21, `node.rs`); the coordinator records its read set
//!   (l.14).
//! - **COMMIT_STRONG** (Alg. 3 l.1-3): the coordinator waits for the snapshot's own-DC
//!   entry to be uniform (UNIFORM_BARRIER, l.2: the liveness argument of §4, Figure 2)
//!   while the partitions of its DC compute the effects of its updates at the snapshot
//!   (where the snapshot is readable), then sends each touched partition's part (read
//!   keys, written keys, effects, snapshot) to that partition's group leader: CERTIFY.
//! - **Certification service** (§6.3, [19]): each partition is a consensus group
//!   (`kit::paxos`) of its replicas in every DC, led by the replica in the configured
//!   leader DC while it is up. The leader votes as it appends the request to the group's
//!   log ([19]): OCC against conflicting txns certified after the snapshot, on its
//!   speculative certifier (`spec`), and a proposed strong timestamp, both carried in the
//!   entry; every replica applies the decided log to the same `kit::certify::Certifier`.
//!   Each member whose acceptance of the entry is durable sends it to the coordinator
//!   (`CertAck`): `f + 1` acceptances of one ballot are the partition's vote, one message
//!   delay before the leader learns the entry is decided. The
//!   coordinator commits when every participant voted commit, at the max of the
//!   proposals (the strong timestamp, consistent with the certification order: Property
//!   5), with a commit vector copying the snapshot's DC entries; it answers the client at
//!   once (the votes in the logs fix the outcome) and sends the decision to every replica
//!   of every participant: the leader appends it to its log, and each replica applies it
//!   as soon as its log has the Prepare, ahead of that entry (`early.rs`).
//! - **DELIVER_UPDATES** (Alg. 3 l.4-8): every replica applies committed txns to its
//!   store in strong-timestamp order up to `known` and sets `knownVec[strong]` (the strong
//!   entry of `pvc`), which the DC's stabilization turns into `stableVec[strong]`.
//!   Strong txns do not enter the causal replication streams.
//! - **Heartbeats** (Alg. 3 l.9): a leader whose group proposed nothing for
//!   `strong_heartbeat_ns` appends a heartbeat carrying its clock. Every replica learns a
//!   decided entry from the acceptances (`kit::paxos`'s `learn_from_acceptances`), so the
//!   replicas of a DC see a heartbeat one message delay after the acceptors do.
//!
//! # Decisions where the paper is silent
//!
//! - **Effects** (set removes, mvreg assignments capture what the txn observed) are
//!   computed in the coordinator's DC, whose partitions can read the snapshot, not by the
//!   leaders, which may lack the snapshot's own-DC txns.
//! - **Coordinator failure**: the outcome is fixed by the votes in the participants' logs
//!   (commit iff all voted commit). A leader holding a txn prepared for
//!   `strong_recover_ns` becomes its recovery coordinator: it asks every other
//!   participant's group, whose leader appends a *fence* (a txn that never arrived is
//!   voted down for good) and answers with the logged vote or decision; the recovery then
//!   decides like the coordinator would and appends the decision everywhere.
//! - **Retries**: a coordinator missing votes re-sends to every member of the group every
//!   `strong_retry_ns` (members answer from their applied log, the leader appends); past
//!   `strong_timeout_ns` it answers "outcome unknown" and the recovery finishes the txn.
//! - **Logs** are truncated below what every member decided and checkpointed with the
//!   certifier and the store (`strong_gc.rs`): recovery replays the records after the
//!   checkpoint to rebuild the certification state and the delivered strong txns.
//! - **Baselines**: `strong` runs every txn strong (serializability by the ad-hoc
//!   relation), `redblue` conflicts every two strong txns that share a key, whatever their
//!   types (the ad-hoc relation with no declared rules, as the authors' baseline: one
//!   conflict label for every red txn, checked key by key), and makes partition 0's group
//!   a participant of every strong txn (one central certification service).

use super::hooks::UniExt;
use super::state::{
    conflict_tokens, Group, Ops, Phase, Recovery, Strong, StrongConfig, StrongStep,
    ACK_TALLIES_MAX, RECOVERIES_MAX,
};
use crate::cure::coord_state::{Step, Txn};
use crate::cure::msg::Msg;
use crate::cure::node::Node;
use crate::cure::part::Part;
use crate::kit::certify::{CertEntry, CertTxn, Certifier, Delivery, Reply};
use crate::kit::paxos::{self, Output, Paxos};
use crate::kit::twopc::{Retry, Votes};
use causeway_core::clock::Extra;
use causeway_core::crdt::Op;
use causeway_core::{Addr, Ctx, DcId, Error, Key, Nanos, NodeId, PartitionId, TxnId, Vc};
use std::collections::{BTreeMap, BTreeSet};

impl Node<UniExt> {
    fn strong_cfg(&self) -> &StrongConfig {
        &self.ext.cfg
    }

    fn strong_state(&mut self) -> &mut Strong {
        self.ext
            .strong
            .as_mut()
            .expect("strong state under UniStore")
    }

    /// Builds every hosted partition's group from its recovered records (at `start`).
    pub(crate) fn start_strong(&mut self, ctx: &mut Ctx<Msg>) {
        let clock = self.time.clock;
        let (dcs, d) = (usize::from(self.topo.dcs), self.d);
        let leader = usize::from(self.strong_cfg().leader_dc).min(dcs - 1);
        let mut pcfg = paxos::Config::new(dcs, d, leader);
        pcfg.mutations.no_majority = self.mutation.paxos_no_majority;
        // Every replica learns its group's decisions from the acceptances, one message
        // delay after them: a heartbeat's (or a Prepare's) decision reaches the replicas
        // of the coordinator's DC as its acceptances reach the coordinator, not a round
        // trip to a majority later, so `knownVec[strong]` of a partition a strong txn did
        // not touch passes its timestamp about when the client hears the commit.
        pcfg.learn_from_acceptances = true;
        let relation = self.strong_cfg().relation;
        let ignore = self.mutation.certify_ignores_conflicts;
        let raises = self.mutation.early_raises_last;
        let pids: Vec<PartitionId> = self.parts.keys().copied().collect();
        let Some(st) = self.ext.strong.as_mut() else {
            return;
        };
        for p in &pids {
            let records = st.recovered.remove(p).unwrap_or_default();
            let px = Paxos::recover(pcfg.clone(), &records, clock)
                .expect("the certification log replays");
            let mut g = Group {
                px,
                cert: Certifier::new(relation, ignore).with_early_raises_last(raises),
                last_proposal: clock,
                gc_below: 0,
                gc_sent_ns: 0,
                spec: None,
                early: Default::default(),
            };
            if let Some(ck) = st.restored.remove(p) {
                g.px.skip_delivery(ck.delivered); // already in the store and certifier
                g.cert = ck.cert;
                g.gc_below = ck.gc_below;
            }
            if let Some((delivered, cert)) = st.xfer.adopted.remove(p) {
                g.cert = cert; // a state transfer adopted after the checkpoint
                g.px.redeliver_from(clock, delivered);
            }
            g.px.boot(clock);
            st.groups.insert(*p, g);
        }
        st.recovered.clear();
        st.restored.clear();
        st.xfer.adopted.clear();
        for p in pids {
            self.deliver(p); // knownVec[strong] of a restored certifier
        }
        self.pump_strong(ctx);
    }

    /// The earliest deadline of the groups.
    pub(crate) fn strong_deadline(&self) -> Option<Nanos> {
        let st = self.ext.strong.as_ref()?;
        st.groups.values().filter_map(|g| g.px.poll_timeout()).min()
    }

    /// Runs the groups' due deadlines.
    pub(crate) fn strong_timeouts(&mut self) {
        let clock = self.time.clock;
        let Some(st) = self.ext.strong.as_mut() else {
            return;
        };
        for g in st.groups.values_mut() {
            if g.px.poll_timeout().is_some_and(|t| t <= clock) {
                g.px.handle_timeout(clock);
            }
        }
    }

    /// A record of a group is durable.
    pub(crate) fn strong_persisted(&mut self, partition: PartitionId, seq: u64) {
        let clock = self.time.clock;
        if let Some(g) = self
            .ext
            .strong
            .as_mut()
            .and_then(|s| s.groups.get_mut(&partition))
        {
            g.px.handle_persisted(clock, seq);
        }
    }

    /// Drains every group: messages, records, decided entries (applied, answered by the
    /// leader, delivered up to `known`).
    pub(crate) fn pump_strong(&mut self, ctx: &mut Ctx<Msg>) {
        let Some(pids) = self.ext.strong.as_ref().map(|s| {
            let v: Vec<PartitionId> = s.groups.keys().copied().collect();
            v
        }) else {
            return;
        };
        for p in pids {
            self.pump_group(ctx, p);
        }
    }

    pub(crate) fn pump_group(&mut self, ctx: &mut Ctx<Msg>, p: PartitionId) {
        let g = self.strong_state().groups.get_mut(&p).expect("a group");
        let outputs = g.px.take_outputs();
        let decided = g.px.take_decided();
        let leader = g.px.is_leader();
        for out in outputs {
            match out {
                Output::Send { to, msg } => {
                    let node = self.topo.node_of(DcId(to as u16), p);
                    ctx.send(Addr::Node(node), Msg::Paxos { partition: p, msg });
                }
                Output::Persist { seq, record } => {
                    let r = crate::cure::record::Record::Paxos {
                        partition: p,
                        record,
                    };
                    self.persist(ctx, r, Vec::new());
                    self.after_durable(crate::cure::types::Deferred::Paxos { partition: p, seq });
                }
                // Our catch-up was answered `Truncated`: the member that truncated
                // sends a state transfer (strong_transfer.rs).
                Output::SnapshotNeeded { source, .. } => {
                    self.sample("strong_snapshot_needed", 1);
                    let node = self.topo.node_of(DcId(source as u16), p);
                    ctx.send(Addr::Node(node), Msg::TransferAsk { partition: p });
                }
                Output::Accepted { ballot, values } => send_acks(ctx, p, ballot, values),
            }
        }
        if decided.is_empty() {
            return;
        }
        self.work += decided.len() as u64;
        let mut replies = Vec::new();
        for (_, entry) in decided {
            if let CertEntry::Decide { txn, .. } = &entry {
                let txn = *txn;
                self.strong_state().recovering.remove(&txn);
            }
            // A vote the leader put in the entry reached the coordinator with its
            // acceptances (`send_acks`); one computed here goes as before.
            let acked = matches!(&entry, CertEntry::Prepare { vote: Some(_), .. });
            let g = self.strong_state().groups.get_mut(&p).expect("a group");
            let reply = g.cert.apply(entry);
            replies.extend(reply.filter(|_| !acked));
        }
        if leader {
            for r in replies {
                send_reply(ctx, p, r);
            }
        }
        self.early_after_log(p);
        self.deliver(p);
        self.serve_waiting(ctx);
    }

    /// DELIVER_UPDATES (Alg. 3 l.4-8): committed txns up to `known` into the store, in
    /// strong-timestamp order, then `knownVec[strong]`.
    pub(crate) fn deliver(&mut self, p: PartitionId) {
        let g = self.strong_state().groups.get_mut(&p).expect("a group");
        let deliveries = g.cert.take_deliveries();
        let known = g.cert.known();
        let part = self.part(p);
        for d in deliveries {
            apply_delivery(part, d);
        }
        if known > part.pvc.get_extra(Extra::Strong) {
            part.pvc.set_extra(Extra::Strong, known); // Alg. 3 l.8
        }
    }

    /// Appends `entry` as leader (else nothing: the coordinator's retry finds the leader).
    /// A Prepare gets its vote here, on the speculative certifier ([19]: the leader votes
    /// as it proposes, and its followers' acceptances carry the vote to the coordinator).
    pub(super) fn propose(&mut self, p: PartitionId, entry: CertEntry) {
        let clock = self.time.clock;
        let Some(spec) = self.spec(p) else {
            return;
        };
        let entry = match entry {
            CertEntry::Prepare { t, clock, vote } => {
                let vote = Some(vote.unwrap_or_else(|| spec.vote(&t, clock)));
                CertEntry::Prepare { t, clock, vote }
            }
            e => e,
        };
        spec.apply(entry.clone());
        spec.take_deliveries(); // the decided certifier delivers
        let g = self.strong_state().groups.get_mut(&p).expect("a group");
        match g.px.propose(clock, entry) {
            Ok(_) => g.last_proposal = clock,
            Err(_) => g.spec = None, // too busy: the entry is not in the log after all
        }
    }

    /// The leader's speculative certifier: its decided certifier with every value its
    /// log will apply next in this ballot (`Paxos::pending_values`), rebuilt when the
    /// ballot changed. Within one ballot every proposed slot is decided with the
    /// leader's value unless it loses the ballot, so the votes it computes here are the
    /// ones its log will hold. None unless leading.
    fn spec(&mut self, p: PartitionId) -> Option<&mut Certifier> {
        let g = self.ext.strong.as_mut()?.groups.get_mut(&p)?;
        let (ballot, pending) = g.px.pending_values()?;
        if g.spec.as_ref().is_none_or(|(b, _)| *b != ballot) {
            let mut c = g.cert.clone();
            for v in pending {
                c.apply(v.clone());
            }
            c.take_deliveries();
            g.spec = Some((ballot, c));
        }
        g.spec.as_mut().map(|(_, c)| c)
    }

    /// Whether this leader's log holds or will hold an entry about `txn`.
    fn spec_knows(&mut self, p: PartitionId, txn: TxnId) -> bool {
        let me = self.me;
        self.spec(p).is_some_and(|c| c.answer(txn, me).is_some())
    }

    fn group(&self, p: PartitionId) -> Option<&Group> {
        self.ext.strong.as_ref().and_then(|s| s.groups.get(&p))
    }

    /// The node leading `p`'s group as this member knows it.
    fn leader_node(&self, p: PartitionId) -> Option<NodeId> {
        let m = self.group(p)?.px.leader()?;
        Some(self.topo.node_of(DcId(m as u16), p))
    }

    // ---- member side ----

    pub(crate) fn on_paxos(
        &mut self,
        from: NodeId,
        partition: PartitionId,
        msg: paxos::Msg<CertEntry>,
    ) {
        let clock = self.time.clock;
        let member = usize::from(self.topo.dc_of(from).0);
        if let Some(g) = self
            .ext
            .strong
            .as_mut()
            .and_then(|s| s.groups.get_mut(&partition))
        {
            g.px.handle_message(clock, member, msg);
        }
    }

    /// CERTIFY at a member: answer from the applied log, append as leader, or forward.
    pub(crate) fn on_cert_prepare(
        &mut self,
        ctx: &mut Ctx<Msg>,
        partition: PartitionId,
        t: Box<CertTxn>,
        forwarded: bool,
    ) {
        let Some(g) = self.group(partition) else {
            return;
        };
        if let Some(r) = g.cert.answer(t.txn, t.coord) {
            return send_reply(ctx, partition, r);
        }
        if g.px.is_leader() {
            if self.spec_knows(partition, t.txn) {
                return; // in our log already: its acceptances or decision answer
            }
            let clock = self.time.clock;
            let entry = CertEntry::Prepare {
                t,
                clock,
                vote: None,
            };
            return self.propose(partition, entry);
        }
        match self.leader_node(partition) {
            Some(l) if !forwarded && l != self.me => {
                let m = Msg::CertPrepare {
                    partition,
                    t,
                    forwarded: true,
                };
                ctx.send(Addr::Node(l), m);
            }
            _ => {}
        }
    }

    /// A decision for a txn prepared in our group: the leader appends it.
    pub(crate) fn on_cert_decide(
        &mut self,
        ctx: &mut Ctx<Msg>,
        txn: TxnId,
        partition: PartitionId,
        commit: Option<u64>,
        forwarded: bool,
    ) {
        let Some(g) = self.group(partition) else {
            return;
        };
        // A commit needs our Prepare applied (we voted); an abort may come first (the
        // coordinator saw another participant's abort vote): appended before the Prepare,
        // it fences it, so the late Prepare is answered "aborted".
        let open = |c: &Certifier| match commit {
            Some(_) => c.prepared_ts(&txn).is_some(),
            None => c.decision(&txn).is_none(),
        };
        if g.px.is_leader() {
            // The leader's log may hold the Prepare before its decision is applied here
            // (the coordinator heard the acceptances first): ask the speculative state.
            if self.spec(partition).is_some_and(|c| open(c)) {
                self.propose(partition, CertEntry::Decide { txn, commit });
            }
            return self.decide_early(ctx, partition, txn, commit);
        }
        if g.cert.decision(&txn).is_some() {
            return; // applied here: the leader has it too (our Prepare may still be due)
        }
        self.decide_early(ctx, partition, txn, commit);
        match self.leader_node(partition) {
            Some(l) if !forwarded && l != self.me => {
                let m = Msg::CertDecide {
                    txn,
                    partition,
                    commit,
                    forwarded: true,
                };
                ctx.send(Addr::Node(l), m);
            }
            _ => {}
        }
    }

    /// A recovery asks for our vote: answer from the log, or fence it as leader.
    pub(crate) fn on_cert_query(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: NodeId,
        txn: TxnId,
        partition: PartitionId,
    ) {
        let Some(g) = self.group(partition) else {
            return;
        };
        if let Some(r) = g.cert.answer(txn, from) {
            return send_reply(ctx, partition, r);
        }
        if g.px.is_leader() && !self.spec_knows(partition, txn) {
            self.propose(partition, CertEntry::Fence { txn, asker: from });
        }
    }

    /// Every `strong_heartbeat_ns`: heartbeats of idle groups we lead (Alg. 3 l.9),
    /// recoveries of orphaned txns, coordinator retries and timeouts.
    pub(crate) fn strong_tick(&mut self, ctx: &mut Ctx<Msg>) {
        let clock = self.time.clock;
        let every = self.strong_cfg().heartbeat_ns;
        let idle: Vec<PartitionId> = match self.ext.strong.as_ref() {
            Some(s) => s
                .groups
                .iter()
                .filter(|(_, g)| g.px.is_leader() && clock >= g.last_proposal + every)
                .map(|(p, _)| *p)
                .collect(),
            None => return,
        };
        for p in idle {
            self.propose(p, CertEntry::Heartbeat { clock });
        }
        self.strong_gc(ctx);
        self.early_to_log();
        self.start_recoveries();
        self.retry_recoveries(ctx);
        self.coordinator_retries(ctx);
        self.pump_strong(ctx);
    }

    // ---- recovery of orphaned txns ----

    fn start_recoveries(&mut self) {
        let clock = self.time.clock;
        let after = self.strong_cfg().recover_ns;
        let st = self.ext.strong.as_ref().expect("strong");
        let mut found = Vec::new();
        for (p, g) in st.groups.iter().filter(|(_, g)| g.px.is_leader()) {
            for (txn, pend) in g.cert.prepared() {
                let old = clock.saturating_sub(pend.proposed_at) >= after;
                let own_coord = self.coord.txns.contains_key(txn);
                if old && !own_coord && !st.recovering.contains_key(txn) {
                    found.push((*p, *txn, pend.ts, pend.t.participants.clone()));
                }
            }
        }
        for (p, txn, ts, participants) in found {
            if self.strong_state().recovering.len() >= RECOVERIES_MAX {
                break;
            }
            let deadline = clock + after;
            let mut votes = Votes::new(participants.iter().copied(), deadline);
            // Our partition alone (a single-partition txn): our vote decides it, and
            // `retry_recoveries` appends the decision at once.
            let decided = votes
                .record(p, ts)
                .then(|| votes.all().and_then(|v| v.into_iter().max()));
            let mut voters = BTreeMap::new();
            voters.insert(p, self.me);
            let r = Recovery {
                partition: p,
                votes,
                voters,
                retry: Retry::default(),
                decided,
            };
            self.strong_state().recovering.insert(txn, r);
        }
    }

    /// Asks the participants that have not answered, or re-proposes a decision not yet
    /// applied (again every `strong_retry_ns`).
    fn retry_recoveries(&mut self, ctx: &mut Ctx<Msg>) {
        let (clock, every) = (self.time.clock, self.ext.cfg.retry_ns);
        let dcs = self.topo.dcs;
        let topo = self.topo.clone();
        let mut proposals = Vec::new();
        let st = self.strong_state();
        for (txn, r) in st.recovering.iter_mut() {
            if !r.retry.due(clock, every) {
                continue;
            }
            if let Some(commit) = r.decided {
                let entry = CertEntry::Decide { txn: *txn, commit };
                proposals.push((r.partition, entry));
                continue;
            }
            let missing: Vec<PartitionId> = r
                .votes
                .participants()
                .filter(|q| !r.voters.contains_key(q))
                .collect();
            for q in missing {
                for dc in 0..dcs {
                    let to = topo.node_of(DcId(dc), q);
                    let m = Msg::CertQuery {
                        txn: *txn,
                        partition: q,
                    };
                    ctx.send(Addr::Node(to), m);
                }
            }
        }
        for (p, entry) in proposals {
            self.propose(p, entry);
        }
    }

    /// A vote or decision for a txn we recover.
    fn recovery_answer(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: NodeId,
        txn: TxnId,
        partition: PartitionId,
        answer: Result<u64, Option<u64>>,
    ) {
        let st = self.strong_state();
        let Some(r) = st.recovering.get_mut(&txn).filter(|r| r.decided.is_none()) else {
            return;
        };
        let decision = match answer {
            Ok(ts) => {
                r.voters.insert(partition, from);
                if !r.votes.record(partition, ts) {
                    return;
                }
                r.votes.all().and_then(|v| v.into_iter().max())
            }
            Err(decided) => decided,
        };
        r.decided = Some(decision); // kept until our log applies it
        let (own, voters) = (r.partition, r.voters.clone());
        for (q, voter) in voters.into_iter().filter(|(q, _)| *q != own) {
            let m = Msg::CertDecide {
                txn,
                partition: q,
                commit: decision,
                forwarded: false,
            };
            ctx.send(Addr::Node(voter), m);
        }
        let entry = CertEntry::Decide {
            txn,
            commit: decision,
        };
        self.propose(own, entry);
    }

    /// CertVote or CertDecided: for our coordinated txn or a recovery.
    pub(crate) fn on_cert_answer(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: NodeId,
        txn: TxnId,
        partition: PartitionId,
        answer: Result<u64, Result<Option<u64>, String>>,
    ) {
        let ours = matches!(
            self.coord.txns.get(&txn).map(|t| &**t),
            Some(Txn {
                step: Step::Ext(_),
                ..
            })
        );
        if !ours {
            let a = match answer {
                Ok(ts) => Ok(ts),
                Err(Ok(decided)) => Err(decided),
                Err(Err(_)) => Err(None),
            };
            return self.recovery_answer(ctx, from, txn, partition, a);
        }
        self.strong_state().leader_hint.insert(partition, from);
        match answer {
            Ok(ts) => self.coordinator_vote(ctx, from, txn, partition, ts),
            Err(Ok(decided)) => self.finish_strong(ctx, txn, decided, "decided by recovery"),
            Err(Err(why)) => self.finish_strong(ctx, txn, None, &why),
        }
    }

    // ---- coordinator side ----

    /// COMMIT_STRONG (Alg. 3 l.1): effects from the DC's partitions, the uniform barrier,
    /// then CERTIFY.
    pub(crate) fn commit_strong(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, req: u64) {
        let (dc, clock) = (DcId(self.d as u16), self.time.clock);
        let deadline = clock + self.strong_cfg().timeout_ns;
        let central = self.strong_cfg().central;
        let topo = self.topo.clone();
        let t = self.coord.txns.get_mut(&txn).expect("a live txn");
        let writes = t.buffer.group_by(|k| topo.partition_of(k));
        let mut participants: BTreeSet<PartitionId> = writes.keys().copied().collect();
        participants.extend(t.reads.iter().map(|k| topo.partition_of(k)));
        let written = t.buffer.updates.iter().map(|(k, _, _)| k);
        let touched = t.reads.iter().chain(written);
        let tokens = conflict_tokens(&self.ext.cfg.rules, t.label.as_deref(), touched);
        participants.extend(tokens.keys.iter().map(|(k, _)| topo.partition_of(k)));
        if central {
            participants.insert(PartitionId(0)); // RedBlue's central certifier
        }
        if participants.is_empty() {
            let t = self.coord.txns.remove(&txn).expect("present");
            let result = Ok(t.svc);
            return ctx.send(t.client, Msg::CommitResult { txn, req, result });
        }
        let effects = writes.keys().map(|p| (*p, None)).collect();
        for (partition, updates) in writes {
            let m = Msg::StrongEffects {
                txn,
                partition,
                svc: t.svc.clone(),
                updates,
            };
            ctx.send(Addr::Node(topo.node_of(dc, partition)), m);
        }
        t.step = Step::Ext(StrongStep {
            req,
            deadline,
            phase: Phase::Prep {
                effects,
                participants,
                tokens,
            },
        });
        self.try_certify(ctx, txn);
    }

    /// A partition of our DC computed (or failed to compute) a strong txn's effects.
    pub(crate) fn on_effects(
        &mut self,
        ctx: &mut Ctx<Msg>,
        txn: TxnId,
        partition: PartitionId,
        result: Result<Ops, Error>,
    ) {
        let Some(Txn {
            step:
                Step::Ext(StrongStep {
                    phase: Phase::Prep { effects, .. },
                    ..
                }),
            ..
        }) = self.coord.txns.get_mut(&txn).map(|t| &mut **t)
        else {
            return;
        };
        match result {
            Ok(ops) => {
                effects.insert(partition, Some(ops));
                self.try_certify(ctx, txn);
            }
            Err(e) => self.finish_strong(ctx, txn, None, &e.to_string()),
        }
    }

    /// Strong txns whose uniform barrier may hold now (uniformVec advanced).
    pub(crate) fn serve_strong_barriers(&mut self, ctx: &mut Ctx<Msg>) {
        let waiting: Vec<TxnId> = self
            .coord
            .txns
            .iter()
            .filter(|(_, t)| {
                matches!(
                    t.step,
                    Step::Ext(StrongStep {
                        phase: Phase::Prep { .. },
                        ..
                    })
                )
            })
            .map(|(id, _)| *id)
            .collect();
        for txn in waiting {
            self.try_certify(ctx, txn);
        }
    }

    /// UNIFORM_BARRIER(snapVec) (Alg. 3 l.2): our DC's entry of the snapshot is uniform.
    fn barrier_holds(&self, svc: &Vc) -> bool {
        if self.mutation.no_uniform_barrier {
            return true;
        }
        self.ext.uniform.covers_local(svc)
    }

    /// CERTIFY (Alg. 3 l.3) once the barrier holds and every effect is in.
    fn try_certify(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId) {
        let Some(parts) = self.cert_txns(txn) else {
            return;
        };
        let clock = self.time.clock;
        let votes = Votes::new(parts.keys().copied(), clock + self.strong_cfg().timeout_ns);
        for (p, ct) in &parts {
            let to = self.cert_target(*p);
            let m = Msg::CertPrepare {
                partition: *p,
                t: Box::new(ct.clone()),
                forwarded: false,
            };
            ctx.send(Addr::Node(to), m);
        }
        let t = self.coord.txns.get_mut(&txn).expect("present");
        let Step::Ext(s) = &mut t.step else {
            unreachable!("matched in cert_txns")
        };
        s.phase = Phase::Certify {
            parts,
            votes,
            voters: BTreeMap::new(),
            retry: Retry::sent_at(clock),
            acks: BTreeMap::new(),
        };
    }

    /// What each participant certifies of the strong txn `txn`, once the barrier holds
    /// and every effect is in; None before, or when `txn` is not preparing.
    fn cert_txns(&self, txn: TxnId) -> Option<BTreeMap<PartitionId, CertTxn>> {
        let t = self.coord.txns.get(&txn)?;
        let Step::Ext(StrongStep {
            phase:
                Phase::Prep {
                    effects,
                    participants,
                    tokens,
                },
            ..
        }) = &t.step
        else {
            return None;
        };
        if effects.values().any(Option::is_none) || !self.barrier_holds(&t.svc) {
            return None;
        }
        let topo = &self.topo;
        let mut parts = BTreeMap::new();
        for p in participants {
            let ops = effects.get(p).cloned().flatten().unwrap_or_default();
            let mut writes: Vec<Key> = ops.iter().map(|(k, _, _)| k.clone()).collect();
            writes.dedup();
            let reads = t
                .reads
                .iter()
                .filter(|k| topo.partition_of(k) == *p)
                .cloned()
                .collect();
            let here = |w: bool| -> Vec<Key> {
                let mine = tokens
                    .keys
                    .iter()
                    .filter(|(k, tw)| *tw == w && topo.partition_of(k) == *p);
                mine.map(|(k, _)| k.clone()).collect()
            };
            let ct = CertTxn {
                txn,
                coord: self.me,
                svc: t.svc.clone(),
                reads,
                writes,
                ops,
                participants: participants.iter().copied().collect(),
                declared: tokens.declared,
                tokens_read: here(false),
                tokens_write: here(true),
            };
            parts.insert(*p, ct);
        }
        Some(parts)
    }

    /// Where CERTIFY for `p` goes first: the last voter, else the configured leader DC.
    fn cert_target(&self, p: PartitionId) -> NodeId {
        if let Some(n) = self.ext.strong.as_ref().and_then(|s| s.leader_hint.get(&p)) {
            return *n;
        }
        let dc = self.strong_cfg().leader_dc.min(self.topo.dcs - 1);
        self.topo.node_of(DcId(dc), p)
    }

    fn coordinator_vote(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: NodeId,
        txn: TxnId,
        partition: PartitionId,
        ts: u64,
    ) {
        let Some(Txn {
            step:
                Step::Ext(StrongStep {
                    phase: Phase::Certify { votes, voters, .. },
                    ..
                }),
            ..
        }) = self.coord.txns.get_mut(&txn).map(|t| &mut **t)
        else {
            return;
        };
        voters.insert(partition, from);
        if votes.record(partition, ts) {
            let all = votes.all().expect("complete");
            let ts = all.into_iter().max().expect("a participant");
            self.finish_strong(ctx, txn, Some(ts), "");
        }
    }

    /// A member accepted our Prepare with its leader's vote: with `f + 1` acceptances of
    /// one ballot the vote is chosen, the partition's vote ([19]).
    pub(crate) fn on_cert_ack(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: NodeId,
        txn: TxnId,
        partition: PartitionId,
        ballot: paxos::Ballot,
        vote: Result<u64, String>,
    ) {
        let quorum = usize::from(self.topo.dcs) / 2 + 1;
        let member = usize::from(self.topo.dc_of(from).0);
        let Some(Txn {
            step:
                Step::Ext(StrongStep {
                    phase: Phase::Certify { acks, voters, .. },
                    ..
                }),
            ..
        }) = self.coord.txns.get_mut(&txn).map(|t| &mut **t)
        else {
            return;
        };
        if voters.contains_key(&partition) {
            return; // voted already
        }
        let full = acks.len() >= ACK_TALLIES_MAX && !acks.contains_key(&(partition, ballot));
        if full {
            return;
        }
        let tally = acks
            .entry((partition, ballot))
            .or_insert((BTreeSet::new(), vote));
        tally.0.insert(member);
        if tally.0.len() < quorum {
            return;
        }
        let vote = tally.1.clone();
        acks.retain(|(q, _), _| *q != partition);
        let leader = self.topo.node_of(DcId(ballot.member as u16), partition);
        self.strong_state().leader_hint.insert(partition, leader);
        match vote {
            Ok(ts) => self.coordinator_vote(ctx, leader, txn, partition, ts),
            Err(why) => self.finish_strong(ctx, txn, None, &why),
        }
    }

    /// The decision: to every participant's leader, and to the client (commit vector =
    /// the snapshot's DC entries with the strong timestamp, §6.3).
    fn finish_strong(&mut self, ctx: &mut Ctx<Msg>, txn: TxnId, commit: Option<u64>, why: &str) {
        let Some(t) = self.coord.txns.remove(&txn) else {
            return;
        };
        let Step::Ext(s) = t.step else {
            self.coord.txns.insert(txn, t);
            return;
        };
        if let Phase::Certify { parts, .. } = &s.phase {
            // To every replica of every participant (`early.rs`): the leader appends the
            // decision, and each replica applies it as soon as its log has the Prepare.
            for p in parts.keys() {
                for dc in 0..self.topo.dcs {
                    let m = Msg::CertDecide {
                        txn,
                        partition: *p,
                        commit,
                        forwarded: true,
                    };
                    ctx.send(Addr::Node(self.topo.node_of(DcId(dc), *p)), m);
                }
            }
        }
        let result = match commit {
            Some(ts) => {
                let mut ct = t.svc.clone();
                ct.set_extra(Extra::Strong, ts);
                self.sample(
                    "strong_commit_ns",
                    self.time.clock.saturating_sub(t.started),
                );
                Ok(ct)
            }
            None => Err(Error::Aborted(why.to_string())),
        };
        ctx.send(
            t.client,
            Msg::CommitResult {
                txn,
                req: s.req,
                result,
            },
        );
    }

    /// Re-sends CERTIFY to every member of groups that have not voted; past the
    /// deadline, answers "outcome unknown" (the recovery finishes the txn).
    fn coordinator_retries(&mut self, ctx: &mut Ctx<Msg>) {
        let (clock, every) = (self.time.clock, self.ext.cfg.retry_ns);
        let dcs = self.topo.dcs;
        let mut expired = Vec::new();
        for (txn, t) in self.coord.txns.iter_mut() {
            let Step::Ext(s) = &mut t.step else {
                continue;
            };
            if clock > s.deadline {
                expired.push((*txn, t.client, s.req));
                continue;
            }
            let Phase::Certify {
                parts,
                voters,
                retry,
                ..
            } = &mut s.phase
            else {
                continue;
            };
            if !retry.due(clock, every) {
                continue;
            }
            for (p, ct) in parts.iter().filter(|(p, _)| !voters.contains_key(p)) {
                for dc in 0..dcs {
                    let to = self.topo.node_of(DcId(dc), *p);
                    let m = Msg::CertPrepare {
                        partition: *p,
                        t: Box::new(ct.clone()),
                        forwarded: true,
                    };
                    ctx.send(Addr::Node(to), m);
                }
            }
        }
        for (txn, client, req) in expired {
            self.coord.txns.remove(&txn);
            let e = Error::Unavailable("strong commit outcome unknown (timed out)".into());
            let m = Msg::CommitResult {
                txn,
                req,
                result: Err(e),
            };
            ctx.send(client, m);
        }
    }

    /// Certification invariants of every group.
    pub(crate) fn check_strong_invariants(&self) -> Result<(), String> {
        let Some(st) = self.ext.strong.as_ref() else {
            return Ok(());
        };
        for (p, g) in &st.groups {
            g.px.check_invariants()
                .map_err(|e| format!("{p:?} paxos: {e}"))?;
            g.cert
                .check_invariants()
                .map_err(|e| format!("{p:?}: {e}"))?;
            let known = self.parts[p].pvc.get_extra(Extra::Strong);
            if known > g.cert.known() {
                return Err(format!("{p:?}: knownVec[strong] {known} above the log's"));
            }
            // The votes a leader proposed are the ones its log computes.
            let settled = g.px.pending_values().filter(|(_, v)| v.is_empty());
            if let (Some((ballot, _)), Some((b, spec))) = (settled, &g.spec) {
                if *b == ballot {
                    if let Some(e) = spec.differs_from(&g.cert) {
                        return Err(format!("{p:?}: the leader's votes diverged: {e}"));
                    }
                }
            }
        }
        Ok(())
    }
}

/// A member's durable acceptances of Prepares that carry their leader's vote, each to
/// its txn's coordinator ([19]).
fn send_acks(
    ctx: &mut Ctx<Msg>,
    partition: PartitionId,
    ballot: paxos::Ballot,
    values: Vec<(paxos::Slot, CertEntry)>,
) {
    for (_, entry) in values {
        if let CertEntry::Prepare {
            t,
            vote: Some(vote),
            ..
        } = entry
        {
            let m = Msg::CertAck {
                txn: t.txn,
                partition,
                ballot,
                vote,
            };
            ctx.send(Addr::Node(t.coord), m);
        }
    }
}

/// A leader's answer to a coordinator or recovery.
fn send_reply(ctx: &mut Ctx<Msg>, partition: PartitionId, r: Reply) {
    match r {
        Reply::Vote { txn, to, vote } => {
            let m = Msg::CertVote {
                txn,
                partition,
                vote,
            };
            ctx.send(Addr::Node(to), m);
        }
        Reply::Decided { txn, to, commit } => {
            let m = Msg::CertDecided {
                txn,
                partition,
                commit,
            };
            ctx.send(Addr::Node(to), m);
        }
    }
}

/// Applies a committed strong txn to a replica's store (Alg. 3 l.6-7): commit vector =
/// snapshot's DC entries + strong timestamp, arbitration from it as for causal txns.
fn apply_delivery(part: &mut Part, d: Delivery) {
    let mut ct = d.svc;
    ct.set_extra(Extra::Strong, d.ts);
    let ts = crate::cure::wire::commit_ts(&ct);
    let ops: Vec<(Key, Op)> = d
        .ops
        .into_iter()
        .map(|(k, id, effect)| (k, Op { id, ts, effect }))
        .collect();
    part.store.insert(d.txn, &ct, &ops);
}
