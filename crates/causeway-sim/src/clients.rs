//! Simulated clients: one slot per closed-loop session. Owns driving the workload (each
//! client plans a transaction, begins it, runs its steps one reply at a time, commits, thinks,
//! and starts the next), interpreting replies, recording every transaction in the history
//! (reads with what they observed, writes with their op ids, the outcome), the final reads
//! after quiescence (one fresh session per surviving DC), and abandoning transactions whose
//! client will never hear back (unknown outcome).
//!
//! After a committed transaction a client may instead ask for a uniform barrier or move to
//! another DC (`crate::barriers`); [`Next`] says which.
//!
//! A transaction whose begin fails, or that the protocol refuses (a strong transaction
//! where the protocol has none: `Error::Unsupported`), is recorded as aborted; refusals are
//! counted. Such a transaction never got an id from its session, so the record carries
//! `seq = NOT_BEGUN_SEQ + its index in the session`, which no session issues.

use crate::workload::Step;
use crate::world::{Ev, Route, World, T0};
use causeway_check::{FinalRead, HOp, Outcome, TxnRecord};
use causeway_core::abort_reasons;
use causeway_core::clock::Nanos;
use causeway_core::{
    Addr, Ctx, DcId, Error, OpId, Output, ReadValue, Request, Response, SessionId, TrueTime, TxnId,
    TxnKind,
};
use causeway_protocols::{new_session, BoxedSession, Msg};
use std::collections::{BTreeMap, VecDeque};

/// Keys per request of the final reads.
const FINAL_READ_CHUNK: usize = 64;
/// Base of the record ids of transactions that never began (sessions count from 1).
pub(crate) const NOT_BEGUN_SEQ: u64 = 1 << 63;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    Idle,
    Beginning,
    Stepping,
    Committing,
    Aborting,
    /// Waiting for `Token` (the first step of a move to another DC).
    Token,
    /// Waiting for a uniform barrier; `then_move`: a move to another DC follows.
    Barrier {
        then_move: bool,
    },
    /// Waiting for `Attach` of the token on the session at the new DC.
    Attach,
}

/// What an idle workload client does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Next {
    Txn,
    Barrier,
    /// Token, barrier, then a new session at another surviving DC that attaches.
    Move,
    /// Retry the attach of a move whose attach failed.
    Attach,
}

pub(crate) struct ClientSlot {
    pub(crate) session: BoxedSession,
    /// The protocol session serving the client now (a move to another DC replaces it).
    pub(crate) id: SessionId,
    /// The history's session: the client's first protocol session, kept across moves.
    pub(crate) logical: SessionId,
    pub dc: u16,
    steps: Vec<Step>,
    next_step: usize,
    /// Transactions this client started, the current one included.
    pub(crate) started: u64,
    record: Option<TxnRecord>,
    pub(crate) phase: Phase,
    pub(crate) next: Next,
    /// The causal token of a move in progress.
    pub(crate) token: Option<Vec<u8>>,
    /// When the running barrier was asked for.
    pub(crate) barrier_start: Nanos,
    /// A session of the final reads, not of the workload.
    final_reader: bool,
    /// A final reader that finished.
    done: bool,
    /// Its DC failed or the run is draining: it starts nothing and ignores replies.
    pub stopped: bool,
    pub(crate) timer_at: Option<Nanos>,
    /// Answers the session gave ahead to promised requests (`submit_ahead`), in order:
    /// the next step takes the first instead of submitting its request.
    answered_ahead: VecDeque<Response>,
}

impl World {
    /// A new protocol session at `dc` for client slot `slot`, with the next free id.
    pub(crate) fn open_session(
        &mut self,
        slot: usize,
        dc: u16,
    ) -> Result<(SessionId, BoxedSession), String> {
        let id = SessionId(self.routes.len() as u64 + 1);
        let cfg = &self.config;
        let (topo, params, section) = (&self.topology, &cfg.params, &cfg.section);
        let session = new_session(&cfg.protocol, id, DcId(dc), topo, params, section)?;
        let route = Route {
            slot,
            dc,
            retired: false,
        };
        self.routes.insert(id, route);
        Ok((id, session))
    }

    fn add_client(&mut self, dc: u16, final_reader: bool) -> Result<usize, String> {
        let (id, session) = self.open_session(self.clients.len(), dc)?;
        self.clients.push(ClientSlot {
            session,
            id,
            logical: id,
            dc,
            steps: Vec::new(),
            next_step: 0,
            started: 0,
            record: None,
            phase: Phase::Idle,
            next: Next::Txn,
            token: None,
            barrier_start: 0,
            final_reader,
            done: false,
            stopped: false,
            timer_at: None,
            answered_ahead: VecDeque::new(),
        });
        Ok(self.clients.len() - 1)
    }

    /// The workload clients, each starting within the first millisecond, the first think
    /// time (`SimConfig::think_time_exponential`) or `SimConfig::start_spread_ms`.
    pub(crate) fn boot_clients(&mut self) -> Result<(), String> {
        for dc in 0..self.config.dcs {
            for _ in 0..self.config.clients_per_dc {
                let c = self.add_client(dc, false)?;
                let spread = if self.config.think_time_exponential {
                    self.config.think_time_ns.max(1_000_000)
                } else {
                    (self.config.start_spread_ms * 1_000_000).max(1_000_000)
                };
                let delay = self.work_rng.range(0, spread);
                self.schedule(T0 + delay, Ev::ClientNext { client: c });
            }
        }
        Ok(())
    }

    /// Runs one input of client `c`'s session, then re-arms its timer and routes its
    /// outputs (messages to the network, replies to `on_reply`).
    pub(crate) fn with_client(
        &mut self,
        c: usize,
        f: impl FnOnce(&mut BoxedSession, &mut Ctx<Msg>),
    ) {
        let mut ctx = Ctx::new(TrueTime(self.now), self.now);
        f(&mut self.clients[c].session, &mut ctx);
        if self.config.check_invariants {
            if let Err(e) = self.clients[c].session.check_invariants() {
                self.invariant_broken(format!("client {c}: {e}"));
            }
        }
        // Sessions read true time as their clock: the deadline is a true time.
        let at = self.clients[c]
            .session
            .poll_timeout()
            .map(|d| d.max(self.now));
        if at != self.clients[c].timer_at {
            self.clients[c].timer_at = at;
            if let Some(at) = at {
                self.schedule(at, Ev::ClientTimer { client: c, at });
            }
        }
        let mut replies = Vec::new();
        for out in ctx.outputs {
            match out {
                Output::Send { to, msg } => self.send(Addr::Client(self.clients[c].id), to, msg),
                Output::Reply(resp) => replies.push(resp),
                Output::Persist { .. } => panic!("a client session asked to persist"),
            }
        }
        // Replies after the first answer promised requests ahead (`submit_ahead`).
        let mut replies = replies.into_iter();
        if let Some(first) = replies.next() {
            self.clients[c].answered_ahead.extend(replies);
            self.on_reply(c, first);
        }
    }

    /// Submits `request` with `ahead` promised after it, unless the session answered it
    /// ahead already (then that answer is taken as the reply).
    ///
    /// A session running a request it took ahead answers it with a later message: nothing
    /// is submitted meanwhile.
    fn submit_or_take(&mut self, c: usize, request: Request, ahead: Vec<Request>) {
        match self.clients[c].answered_ahead.pop_front() {
            Some(resp) => self.on_reply(c, resp),
            None if self.clients[c].session.running() => {}
            None => self.with_client(c, |s, ctx| s.submit_ahead(ctx, request, &ahead)),
        }
    }

    /// A client's timer: stale ones (re-armed since) are ignored.
    pub(crate) fn client_timer(&mut self, c: usize, at: Nanos) {
        if self.clients[c].timer_at == Some(at) {
            self.clients[c].timer_at = None;
            self.with_client(c, |s, ctx| s.handle_timeout(ctx));
        }
    }

    pub(crate) fn submit(&mut self, c: usize, request: Request) {
        self.with_client(c, |s, ctx| s.submit(ctx, request));
    }

    /// Starts client `c`'s next transaction (a workload client plans it now).
    pub(crate) fn client_next(&mut self, c: usize) {
        let slot = &mut self.clients[c];
        if slot.stopped || slot.done || slot.phase != Phase::Idle {
            return;
        }
        let mut kind = TxnKind::Causal;
        let mut label = None;
        if !slot.final_reader {
            if self.stopping {
                return;
            }
            match slot.next {
                Next::Txn => {}
                Next::Barrier => return self.start_barrier(c, false),
                Next::Move => return self.start_move(c),
                Next::Attach => return self.start_attach(c),
            }
            let plan = self.workload.plan(slot.dc, &mut self.work_rng);
            kind = plan.kind;
            label = Some(plan.name.to_string());
            self.clients[c].steps = plan.steps;
        }
        let slot = &mut self.clients[c];
        slot.next_step = 0;
        slot.phase = Phase::Beginning;
        slot.started += 1;
        slot.record = Some(TxnRecord {
            // Replaced by the session's id once it begins.
            id: TxnId {
                session: slot.logical,
                seq: NOT_BEGUN_SEQ + slot.started,
            },
            session: slot.logical,
            dc: DcId(slot.dc),
            kind,
            label: label.clone(),
            start_ns: self.now,
            end_ns: self.now,
            ops: Vec::new(),
            outcome: Outcome::Unknown,
        });
        // BEGIN promises the plan too (every other transaction, `promised_after`).
        let ahead = Self::promised_after(&self.clients[c]);
        self.submit_or_take(c, Request::Begin { kind, label }, ahead);
    }

    /// Submits client `c`'s next step, or the commit after the last one.
    fn next_step(&mut self, c: usize) {
        let slot = &mut self.clients[c];
        slot.phase = Phase::Stepping;
        let Some(step) = slot.steps.get(slot.next_step).cloned() else {
            slot.phase = Phase::Committing;
            return self.submit_or_take(c, Request::Commit, Vec::new());
        };
        slot.next_step += 1;
        let ahead = Self::promised_after(slot);
        let request = match step {
            Step::Read(key, obj) => Request::Read {
                keys: vec![(key, obj)],
            },
            Step::ReadMany(keys) => Request::Read { keys },
            Step::Update(key, update) => {
                // Recorded now with a placeholder id: the reply names the op id.
                if let Some(r) = slot.record.as_mut() {
                    r.ops.push(HOp::Write {
                        key: key.clone(),
                        update: update.clone(),
                        id: placeholder_op(),
                    });
                }
                Request::Update { key, update }
            }
        };
        self.submit_or_take(c, request, ahead);
    }

    /// What client `c` promises will follow its current step: the rest of its plan and
    /// the commit (every other transaction, so that sessions run both the one-request-at-
    /// a-time path and the read-then-commit one; final readers promise nothing).
    fn promised_after(slot: &ClientSlot) -> Vec<Request> {
        if slot.final_reader || slot.started % 2 == 1 {
            return Vec::new();
        }
        let rest = slot.steps[slot.next_step..].iter().map(|step| match step {
            Step::Read(key, obj) => Request::Read {
                keys: vec![(key.clone(), *obj)],
            },
            Step::ReadMany(keys) => Request::Read { keys: keys.clone() },
            Step::Update(key, update) => Request::Update {
                key: key.clone(),
                update: update.clone(),
            },
        });
        rest.chain([Request::Commit]).collect()
    }

    fn on_reply(&mut self, c: usize, resp: Response) {
        self.hash(c as u64);
        for (id, overwrote) in self.clients[c].session.take_overwrites() {
            self.history.overwrites.insert(id, overwrote);
        }
        if self.clients[c].stopped {
            self.clients[c].answered_ahead.clear();
            return; // its DC failed or the run ended: nobody is listening
        }
        let phase = self.clients[c].phase;
        if matches!(phase, Phase::Token | Phase::Barrier { .. } | Phase::Attach) {
            return self.on_barrier_reply(c, phase, resp);
        }
        match (phase, resp) {
            (Phase::Beginning, Response::Begun { txn }) => {
                if let Some(r) = self.clients[c].record.as_mut() {
                    r.id = txn;
                }
                self.next_step(c);
            }
            (Phase::Stepping, Response::Values(values)) => {
                self.record_reads(c, values);
                self.next_step(c);
            }
            (Phase::Stepping, Response::Updated { op }) => {
                self.confirm_write(c, op);
                self.next_step(c);
            }
            (Phase::Committing, Response::Committed) => self.finish(c, Outcome::Committed),
            (Phase::Committing, Response::Aborted { reason }) => {
                self.count_abort(c, &reason);
                self.note_final_failure(c, &format!("aborted: {reason}"));
                self.finish_noted(c, Outcome::Aborted)
            }
            (Phase::Aborting, _) => self.finish_noted(c, Outcome::Aborted),
            // The commit may have happened: the client cannot tell.
            (Phase::Committing, Response::Error(Error::Unavailable(_))) => {
                self.finish(c, Outcome::Unknown)
            }
            (Phase::Committing, Response::Error(_)) => self.finish(c, Outcome::Aborted),
            (Phase::Beginning, Response::Error(Error::Unsupported { .. })) => {
                self.metrics.refused += 1;
                self.finish(c, Outcome::Aborted)
            }
            (Phase::Beginning, Response::Error(_)) => self.finish(c, Outcome::Aborted),
            // Any other error, `Unavailable` of a read or an update included, ends the
            // txn with an ABORT: a request that timed out ended it at the session (the
            // ABORT is then refused, and ends it here), but a node's refusal of a read
            // ("partition overloaded") leaves it open, and the next BEGIN would be refused.
            (_, Response::Error(e)) => {
                self.note_final_failure(c, &e.to_string());
                self.clients[c].phase = Phase::Aborting;
                self.submit(c, Request::Abort);
            }
            (_, Response::Aborted { reason }) => {
                self.count_abort(c, &reason);
                self.note_final_failure(c, &format!("aborted: {reason}"));
                self.finish_noted(c, Outcome::Aborted)
            }
            (phase, other) => panic!("client {c} in {phase:?} got unexpected {other:?}"),
        }
    }

    /// The session confirmed the last update: its placeholder id becomes the real one.
    fn confirm_write(&mut self, c: usize, op: OpId) {
        let last = self.clients[c]
            .record
            .as_mut()
            .and_then(|r| r.ops.last_mut());
        if let Some(HOp::Write { id, .. }) = last {
            *id = op;
        }
    }

    /// Counts a workload transaction's abort by kind (`causeway_core::abort_reasons`).
    fn count_abort(&mut self, c: usize, reason: &str) {
        if !self.clients[c].final_reader {
            abort_reasons::count(&mut self.metrics.abort_reasons, reason);
        }
    }

    fn note_final_failure(&mut self, c: usize, why: &str) {
        if self.clients[c].final_reader {
            let dc = self.clients[c].dc;
            self.metrics
                .liveness
                .push(format!("final read at DC {dc} failed: {why}"));
        }
    }

    /// Records the values of a read step: in the transaction, or as final reads.
    fn record_reads(&mut self, c: usize, values: Vec<ReadValue>) {
        let slot = &mut self.clients[c];
        let types: BTreeMap<_, _> = match &slot.steps[slot.next_step - 1] {
            Step::Read(k, t) => [(k.clone(), *t)].into_iter().collect(),
            Step::ReadMany(keys) => keys.iter().cloned().collect(),
            Step::Update(..) => BTreeMap::new(),
        };
        for v in values {
            let obj = types[&v.key];
            if slot.final_reader {
                let dc = DcId(slot.dc);
                self.history.finals.push(FinalRead {
                    dc,
                    key: v.key,
                    obj,
                    value: v.value,
                    observed: v.observed,
                });
            } else if let Some(r) = slot.record.as_mut() {
                r.ops.push(HOp::Read {
                    key: v.key,
                    obj,
                    value: v.value,
                    observed: v.observed,
                });
            }
        }
    }

    /// Ends client `c`'s transaction with `outcome`: recorded, and the next one follows
    /// after the think time (a final reader is done instead).
    fn finish(&mut self, c: usize, outcome: Outcome) {
        if outcome != Outcome::Committed {
            self.note_final_failure(c, &format!("{outcome:?}"));
        }
        self.finish_noted(c, outcome);
    }

    /// [`Self::finish`] when a final reader's failure, if any, was already noted (with its
    /// reason).
    fn finish_noted(&mut self, c: usize, outcome: Outcome) {
        let now = self.now;
        let slot = &mut self.clients[c];
        slot.phase = Phase::Idle;
        // An answer ahead is only ever to a request of this txn's promise.
        assert!(
            slot.answered_ahead.is_empty(),
            "client {c}: answers ahead left over at {outcome:?}: {:?}",
            slot.answered_ahead
        );
        if slot.final_reader {
            self.clients[c].done = true;
            return;
        }
        if let Some(mut r) = slot.record.take() {
            r.end_ns = now;
            r.outcome = outcome;
            // Updates the session never confirmed did not happen.
            r.ops
                .retain(|op| !matches!(op, HOp::Write { id, .. } if *id == placeholder_op()));
            if outcome == Outcome::Committed {
                self.metrics.latencies_ns.push(r.end_ns - r.start_ns);
            }
            self.history.txns.push(r);
        }
        if outcome == Outcome::Committed {
            self.clients[c].next = self.next_after_commit(c);
        }
        self.idle_then_next(c);
    }

    /// The client is idle; its next action follows after the think time.
    pub(crate) fn idle_then_next(&mut self, c: usize) {
        self.clients[c].phase = Phase::Idle;
        let at = self.now + self.think_time();
        self.schedule(at, Ev::ClientNext { client: c });
    }

    /// The next think time: fixed, or exponential of that mean
    /// (`SimConfig::think_time_exponential`, capped at 20 means).
    fn think_time(&mut self) -> Nanos {
        let mean = self.config.think_time_ns;
        if !self.config.think_time_exponential || mean == 0 {
            return mean;
        }
        let u = self.work_rng.unit();
        let draw = -(1.0 - u).ln() * mean as f64;
        draw.min(20.0 * mean as f64) as Nanos
    }

    /// Records a transaction the client will never finish (its DC failed, or the run
    /// ended) with an unknown outcome.
    pub(crate) fn abandon(&mut self, c: usize) {
        let slot = &mut self.clients[c];
        slot.phase = Phase::Idle;
        slot.stopped = true;
        if let Some(mut r) = slot.record.take() {
            r.end_ns = self.now;
            r.outcome = Outcome::Unknown;
            self.history.txns.push(r);
        }
    }

    /// Whether a live workload client is still inside a transaction.
    pub(crate) fn clients_busy(&self) -> bool {
        self.clients
            .iter()
            .any(|c| !c.final_reader && !c.stopped && c.phase != Phase::Idle)
    }

    /// Gives up on every transaction still open (the drain took too long).
    pub(crate) fn abandon_unfinished(&mut self) {
        for c in 0..self.clients.len() {
            if self.clients[c].phase != Phase::Idle {
                self.abandon(c);
            }
        }
    }

    /// A fresh session in each surviving DC reads, in chunks, every key of the partitions
    /// that DC replicates (every key under full replication); keys no surviving DC
    /// replicates are counted, not read.
    pub(crate) fn start_final(&mut self) {
        self.final_started = true;
        let keys = self.workload.all_keys();
        let survivors: Vec<u16> = (0..self.config.dcs)
            .filter(|dc| !self.failed_dcs.contains(dc))
            .collect();
        let mut split = crate::liveness::final_read_keys(&self.topology, &keys, &survivors);
        self.metrics.unreplicated_keys = split.unreplicated;
        for dc in survivors {
            let c = match self.add_client(dc, true) {
                Ok(c) => c,
                Err(e) => return self.metrics.liveness.push(e),
            };
            let keys = split.by_dc.remove(&dc).unwrap_or_default();
            self.clients[c].steps = keys
                .chunks(FINAL_READ_CHUNK)
                .map(|ch| Step::ReadMany(ch.to_vec()))
                .collect();
            self.client_next(c);
        }
    }

    pub(crate) fn final_reads_done(&self) -> bool {
        self.clients
            .iter()
            .filter(|c| c.final_reader)
            .all(|c| c.done)
    }

    /// At the end of the run: open workload transactions get an unknown outcome, and
    /// final reads that never completed are a liveness failure.
    pub(crate) fn close_open_txns(&mut self) {
        for c in 0..self.clients.len() {
            if !self.clients[c].final_reader {
                self.abandon(c);
            } else if !self.clients[c].done {
                let dc = self.clients[c].dc;
                self.metrics
                    .liveness
                    .push(format!("final reads at DC {dc} did not complete"));
            }
        }
    }
}

/// Marks a write whose op id the session has not confirmed yet.
fn placeholder_op() -> OpId {
    OpId {
        txn: TxnId {
            session: SessionId(0),
            seq: 0,
        },
        index: u32::MAX,
    }
}
