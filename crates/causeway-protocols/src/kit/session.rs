//! The session core every protocol's client shares: one request at a time (gating), txn
//! ids, the running request's id and deadline (answered requests leave no timer behind;
//! replies to an older request are stale), the buffer of the open transaction with its
//! input limits, and the "unsupported" and "invalid state" errors. A protocol supplies only
//! its client side as a [`ClientProtocol`]; [`Session`] turns it into a `ClientSession`.
//!
//! Read-then-commit: when a driver promises (`ClientSession::submit_ahead`) that a read is
//! followed by only updates (none, for a read-only txn) and the commit, and the protocol
//! can ship them together ([`ClientProtocol::can_read_commit`]), the core buffers those
//! updates at once (their op ids are the ones they would get one by one), hands the read to
//! [`ClientProtocol::read_commit`], and answers each promised update from its record when
//! it arrives. Any other request ends the promise (the driver stopped after an error).
//! When the read's answer comes with the commit's result already known
//! ([`ClientProtocol::commit_settled`]), the core answers the promised updates and the
//! commit in the same turn, before the driver submits them (the contract of
//! `ClientSession::submit_ahead`): one turn of the driver instead of one per request.

use super::txn::{check_key, check_read, check_update, invalid_in_state, limit, TxnBuffer};
use crate::params::Params;
use causeway_core::crdt::ObjType;
use causeway_core::limits::{TXN_LABEL_MAX, TXN_UPDATES_MAX};
use causeway_core::{
    Addr, ClientSession, Ctx, DcId, Error, Key, Nanos, NodeId, Output, Request, Response,
    SessionId, Topology, TxnId, TxnKind, Update,
};
use std::collections::VecDeque;

/// What every session holds, whatever its protocol.
#[derive(Debug)]
pub struct SessionCore {
    pub id: SessionId,
    pub dc: DcId,
    pub topology: Topology,
    pub params: Params,
    protocol: &'static str,
    seq: u64,
    /// The open transaction's buffered updates (None outside a transaction).
    pub txn: Option<TxnBuffer>,
    /// Id of the running request, or of the last one.
    req: u64,
    /// The running request's deadline; None when no request runs.
    deadline: Option<Nanos>,
    /// The type label of the last BEGIN (declared conflict relations).
    pub label: Option<String>,
    /// Whether read answers carry the ids of the writes they observed
    /// (`ClientSession::skip_observed` turns it off).
    pub observed: bool,
}

impl SessionCore {
    pub fn new(
        protocol: &'static str,
        id: SessionId,
        dc: DcId,
        topology: Topology,
        params: Params,
    ) -> SessionCore {
        SessionCore {
            id,
            dc,
            topology,
            params,
            protocol,
            seq: 0,
            txn: None,
            req: 0,
            deadline: None,
            label: None,
            observed: true,
        }
    }

    /// Whether a request is waiting for an answer from the nodes.
    pub fn running(&self) -> bool {
        self.deadline.is_some()
    }

    /// Starts waiting for the nodes: a fresh request id and the request's deadline.
    pub fn start_request(&mut self, ctx: &Ctx<impl Sized>) -> u64 {
        assert!(!self.running(), "one request at a time");
        self.req += 1;
        self.deadline = Some(ctx.clock + self.params.request_timeout_ns);
        self.req
    }

    /// Whether a reply carrying request id `req` answers the running request.
    pub fn is_current(&self, req: u64) -> bool {
        self.running() && req == self.req
    }

    /// The running request's id.
    pub fn req(&self) -> u64 {
        self.req
    }

    /// Answers the application; the running request (and its timer) ends.
    pub fn answer<M>(&mut self, ctx: &mut Ctx<M>, response: Response) {
        self.deadline = None;
        ctx.reply(response);
    }

    /// Opens a transaction with a fresh id.
    pub fn open_txn(&mut self, kind: TxnKind) -> TxnId {
        self.seq += 1;
        let txn = TxnId {
            session: self.id,
            seq: self.seq,
        };
        self.txn = Some(TxnBuffer::new(txn, kind));
        txn
    }

    /// The open transaction's buffer; callers only ask inside a transaction.
    pub fn buffer(&self) -> &TxnBuffer {
        self.txn.as_ref().expect("a transaction is open")
    }

    pub fn txn_id(&self) -> TxnId {
        self.buffer().txn
    }

    /// The error for a capability this protocol lacks, naming both.
    pub fn unsupported(&self, capability: &str) -> Error {
        Error::Unsupported {
            protocol: self.protocol.into(),
            capability: capability.into(),
        }
    }
}

/// A protocol's client side. The core has checked the request's state (inside or outside
/// a transaction) and its limits before any of these is called; each must answer the
/// application at once (`core.answer`) or start a request (`core.start_request`) and
/// answer once the nodes replied.
pub trait ClientProtocol {
    type Msg;
    /// Opens a transaction (`core.open_txn`) or refuses `kind`.
    fn begin(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Self::Msg>, kind: TxnKind);
    fn read(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Self::Msg>, keys: Vec<(Key, ObjType)>);
    /// Whether [`ClientProtocol::read_commit`] may run now (default: never).
    fn can_read_commit(&self, _core: &SessionCore) -> bool {
        false
    }
    /// Reads `keys`, then commits with the updates `core.buffer().updates[then_from..]`
    /// (buffered by the core ahead of their requests; the read must not see them), in one
    /// exchange with the nodes. Answers like [`ClientProtocol::read`]; the `Commit` that
    /// follows is answered by [`ClientProtocol::commit`]. Only called when
    /// [`ClientProtocol::can_read_commit`] said yes.
    fn read_commit(
        &mut self,
        core: &mut SessionCore,
        ctx: &mut Ctx<Self::Msg>,
        _keys: Vec<(Key, ObjType)>,
        _then_from: usize,
    ) {
        let e = core.unsupported("read-then-commit");
        core.answer(ctx, Response::Error(e));
    }
    /// Commits the open transaction; the protocol clears `core.txn` when it ends.
    fn commit(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Self::Msg>);
    /// Whether the commit of a read-then-commit whose read was just answered has its
    /// result already, so that [`ClientProtocol::commit`] answers it at once.
    fn commit_settled(&self, _core: &SessionCore) -> bool {
        false
    }
    /// Aborts the open transaction (the core clears it and answers afterwards).
    fn abort(&mut self, _core: &mut SessionCore, _ctx: &mut Ctx<Self::Msg>) {}
    fn token(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Self::Msg>) {
        let e = core.unsupported("causal tokens");
        core.answer(ctx, Response::Error(e));
    }
    fn attach(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Self::Msg>, _token: Vec<u8>) {
        let e = core.unsupported("causal tokens");
        core.answer(ctx, Response::Error(e));
    }
    fn barrier(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Self::Msg>) {
        let e = core.unsupported("barriers");
        core.answer(ctx, Response::Error(e));
    }
    /// `Request::ListKeys` (`kit::keys`): send `keys::ask`'s ask in the protocol's message
    /// and answer with `keys::answered`. Default: unsupported.
    fn list_keys(
        &mut self,
        core: &mut SessionCore,
        ctx: &mut Ctx<Self::Msg>,
        _ask: (causeway_core::PartitionId, u64, u32),
    ) {
        let e = core.unsupported("listing keys");
        core.answer(ctx, Response::Error(e));
    }
    /// Joins `other`'s causal past into this client's (`ClientSession::join_past`; called
    /// only outside a transaction, with no request running). Default: nothing to join.
    fn join_past(&mut self, _core: &mut SessionCore, _other: &Self)
    where
        Self: Sized,
    {
    }
    /// A message from a node; stale ones (`!core.is_current(req)`) are ignored.
    fn on_message(
        &mut self,
        core: &mut SessionCore,
        ctx: &mut Ctx<Self::Msg>,
        from: Addr,
        msg: Self::Msg,
    );
    /// The running request timed out: forget what it was waiting for.
    fn on_timeout(&mut self, _core: &mut SessionCore) {}
    /// See `ClientSession::take_overwrites`.
    fn take_overwrites(&mut self) -> Vec<(causeway_core::OpId, Option<causeway_core::OpId>)> {
        Vec::new()
    }
    /// The client's own next deadline (a retry's backoff, Occult §4.3), if any.
    fn poll_timeout(&self) -> Option<Nanos> {
        None
    }
    /// The client's own deadline passed (`ctx.clock >= poll_timeout()`).
    fn on_wake(&mut self, _core: &mut SessionCore, _ctx: &mut Ctx<Self::Msg>) {}
    fn check_invariants(&self, _core: &SessionCore) -> Result<(), String> {
        Ok(())
    }
}

/// A `ClientSession` made of the core and a protocol's client side.
pub struct Session<C> {
    pub core: SessionCore,
    pub client: C,
    /// Updates buffered ahead of their requests for a read-then-commit, in order, with
    /// the op ids they got (at most `TXN_UPDATES_MAX`).
    promised: VecDeque<(Key, Update, causeway_core::OpId)>,
    /// The nodes the running request sent to (at most [`SENT_TO_MAX`]; empty when none
    /// runs): a restart of one of them ends the request at once (`peer_restarted`).
    sent_to: Vec<NodeId>,
}

/// Most nodes a running request's restart check remembers; a request that reached more
/// (a wide read on a large cluster) waits for its timeout when a node it missed restarts.
pub const SENT_TO_MAX: usize = 64;

impl<C: ClientProtocol> Session<C> {
    pub fn new(core: SessionCore, client: C) -> Session<C> {
        Session {
            core,
            client,
            promised: VecDeque::new(),
            sent_to: Vec::new(),
        }
    }

    /// Notes the nodes the outputs from `mark` on send to, while a request runs; forgets
    /// them once none runs.
    fn note_sends(&mut self, ctx: &Ctx<C::Msg>, mark: usize) {
        if !self.core.running() {
            self.sent_to.clear();
            return;
        }
        for out in &ctx.outputs[mark..] {
            if let Output::Send {
                to: Addr::Node(n), ..
            } = out
            {
                if !self.sent_to.contains(n) && self.sent_to.len() < SENT_TO_MAX {
                    self.sent_to.push(*n);
                }
            }
        }
    }

    /// Ends the running request with `error`, as its timeout does: the protocol forgets
    /// what it waited for and the transaction is gone (its outcome unknown to the client).
    fn end_running(&mut self, ctx: &mut Ctx<C::Msg>, error: Error) {
        self.client.on_timeout(&mut self.core);
        self.core.txn = None;
        self.promised.clear();
        self.sent_to.clear();
        self.core.answer(ctx, Response::Error(error));
    }

    /// The updates of `ahead` if it is only updates then the commit, they are valid, and
    /// the protocol can ship them with the read now.
    fn read_commit_plan(
        &self,
        keys: &[(Key, ObjType)],
        ahead: &[Request],
    ) -> Option<Vec<(Key, Update)>> {
        let (Some(Request::Commit), Some(buffer)) = (ahead.last(), self.core.txn.as_ref()) else {
            return None;
        };
        let updates: Vec<(Key, Update)> = ahead[..ahead.len() - 1]
            .iter()
            .map(|r| match r {
                Request::Update { key, update } => Some((key.clone(), update.clone())),
                _ => None,
            })
            .collect::<Option<_>>()?;
        // No updates is a read-only txn (a GET): the read and the commit go together too.
        let valid = buffer.updates.len() + updates.len() <= TXN_UPDATES_MAX
            && check_read(keys).is_ok()
            && updates
                .iter()
                .all(|(k, u)| check_key(k).is_ok() && check_update(u).is_ok());
        let ready = !self.core.running() && self.promised.is_empty();
        (valid && ready && self.client.can_read_commit(&self.core)).then_some(updates)
    }

    /// Buffers the promised updates and ships the read with the commit.
    fn read_commit(
        &mut self,
        ctx: &mut Ctx<C::Msg>,
        keys: Vec<(Key, ObjType)>,
        then: Vec<(Key, Update)>,
    ) {
        let buffer = self
            .core
            .txn
            .as_mut()
            .expect("planned inside a transaction");
        let then_from = buffer.updates.len();
        for (key, update) in then {
            let op = buffer
                .push(key.clone(), update.clone())
                .expect("checked by read_commit_plan");
            self.promised.push_back((key, update, op));
        }
        self.client
            .read_commit(&mut self.core, ctx, keys, then_from);
    }

    /// A promised update arrived: answered with the op id it got ahead of time.
    fn keep_promise(&mut self, ctx: &mut Ctx<C::Msg>, key: Key, update: Update) {
        let front = self.promised.pop_front().expect("called with a promise");
        let response = if front.0 == key && front.1 == update {
            Response::Updated { op: front.2 }
        } else {
            self.promised.clear();
            Response::Error(Error::InvalidState(
                "an update other than the one promised with the read".into(),
            ))
        };
        self.core.answer(ctx, response);
    }

    /// The read of a read-then-commit was just answered: when its commit's result is
    /// known, answers the promised updates (the op ids they got) and the commit now, in
    /// the driver's order, instead of one turn each (`ClientSession::submit_ahead`).
    fn answer_ahead(&mut self, ctx: &mut Ctx<C::Msg>) {
        let in_txn = self.core.txn.is_some();
        // `commit_settled` holds only after a read-then-commit: the driver promised its
        // commit (and perhaps no update: a read-only one).
        if !in_txn || !self.client.commit_settled(&self.core) {
            return;
        }
        for (_, _, op) in self.promised.drain(..) {
            ctx.reply(Response::Updated { op });
        }
        self.client.commit(&mut self.core, ctx);
        assert!(!self.core.running(), "a settled commit answers at once");
    }

    /// After a BEGIN answered at once: the promised updates answered ahead (buffered as
    /// `submit` buffers them), then the promised commit, or read-then-commit, taken and
    /// shipped in the same turn (`ClientSession::submit_ahead`'s contract): a SET is one
    /// session turn instead of three, a 4-key MSET one instead of six.
    fn take_ahead(&mut self, ctx: &mut Ctx<C::Msg>, ahead: &[Request]) {
        if self.core.running() || self.core.txn.is_none() {
            return; // BEGIN not answered at once, or refused
        }
        let mut next = 0;
        while let Some(Request::Update { key, update }) = ahead.get(next) {
            let response = self.push_update(key.clone(), update.clone());
            let refused = matches!(response, Response::Error(_));
            ctx.reply(response);
            if refused {
                return; // an error ends the promise: the driver submits nothing more
            }
            next += 1;
        }
        match ahead.get(next) {
            Some(Request::Commit) => self.client.commit(&mut self.core, ctx),
            Some(Request::Read { keys }) => {
                if let Some(then) = self.read_commit_plan(keys, &ahead[next + 1..]) {
                    self.read_commit(ctx, keys.clone(), then);
                }
            }
            _ => {}
        }
    }

    fn update(&mut self, ctx: &mut Ctx<C::Msg>, key: Key, update: causeway_core::Update) {
        let response = self.push_update(key, update);
        self.core.answer(ctx, response);
    }

    /// Buffers an update of the open transaction; its answer (the op id, or the refusal).
    fn push_update(&mut self, key: Key, update: causeway_core::Update) -> Response {
        let buffer = self.core.txn.as_mut().expect("inside a transaction");
        let pushed = buffer.push(key, update);
        pushed.map_or_else(Response::Error, |op| Response::Updated { op })
    }

    fn abort(&mut self, ctx: &mut Ctx<C::Msg>) {
        self.client.abort(&mut self.core, ctx);
        self.core.txn = None;
        let reason = "aborted by the client".to_string();
        self.core.answer(ctx, Response::Aborted { reason });
    }
}

impl<C: ClientProtocol> ClientSession for Session<C> {
    type Msg = C::Msg;

    fn submit(&mut self, ctx: &mut Ctx<C::Msg>, request: Request) {
        let mark = ctx.outputs.len();
        self.submit_one(ctx, request);
        self.note_sends(ctx, mark);
    }

    fn submit_ahead(&mut self, ctx: &mut Ctx<C::Msg>, request: Request, ahead: &[Request]) {
        let mark = ctx.outputs.len();
        self.submit_with_ahead(ctx, request, ahead);
        self.note_sends(ctx, mark);
    }

    fn running(&self) -> bool {
        self.core.running()
    }

    fn handle_message(&mut self, ctx: &mut Ctx<C::Msg>, from: Addr, msg: C::Msg) {
        let mark = ctx.outputs.len();
        let was_running = self.core.running();
        self.client.on_message(&mut self.core, ctx, from, msg);
        if was_running && !self.core.running() {
            self.answer_ahead(ctx);
        }
        self.note_sends(ctx, mark);
    }

    fn handle_timeout(&mut self, ctx: &mut Ctx<C::Msg>) {
        let mark = ctx.outputs.len();
        if self.client.poll_timeout().is_some_and(|at| ctx.clock >= at) {
            self.client.on_wake(&mut self.core, ctx);
        }
        self.note_sends(ctx, mark);
        if self.core.deadline.is_none_or(|d| ctx.clock < d) {
            return;
        }
        let e = Error::Unavailable("request timed out".into());
        self.end_running(ctx, e);
    }

    fn peer_restarted(&mut self, ctx: &mut Ctx<C::Msg>, node: NodeId) {
        if !self.core.running() || !self.sent_to.contains(&node) {
            return;
        }
        let e = Error::Unavailable(format!(
            "node {} restarted before it answered; the request's outcome is unknown",
            node.0
        ));
        self.end_running(ctx, e);
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        match (self.core.deadline, self.client.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.client.check_invariants(&self.core)
    }

    fn take_overwrites(&mut self) -> Vec<(causeway_core::OpId, Option<causeway_core::OpId>)> {
        self.client.take_overwrites()
    }
    fn skip_observed(&mut self) {
        self.core.observed = false;
    }
    fn join_past(&mut self, other: &Self) -> bool {
        if self.core.running() || self.core.txn.is_some() {
            return false; // a transaction's snapshot and buffer are fixed until it ends
        }
        self.client.join_past(&mut self.core, &other.client);
        true
    }
}

impl<C: ClientProtocol> Session<C> {
    /// `ClientSession::submit`, before its sends are noted.
    fn submit_one(&mut self, ctx: &mut Ctx<C::Msg>, request: Request) {
        if self.core.running() {
            let e = Error::InvalidState("a request is already running".into());
            return ctx.reply(Response::Error(e));
        }
        let in_txn = self.core.txn.is_some();
        match request {
            Request::Update { key, update } if in_txn && !self.promised.is_empty() => {
                return self.keep_promise(ctx, key, update)
            }
            _ => self.promised.clear(), // any other request ends the promise
        }
        let (core, client) = (&mut self.core, &mut self.client);
        match request {
            Request::Begin { kind, label } if !in_txn => {
                if label.as_ref().is_some_and(|l| l.len() > TXN_LABEL_MAX) {
                    let e = limit("bytes in a transaction label", TXN_LABEL_MAX);
                    return core.answer(ctx, Response::Error(e));
                }
                core.label = label;
                client.begin(core, ctx, kind)
            }
            Request::Read { keys } if in_txn => match check_read(&keys) {
                Ok(()) => client.read(core, ctx, keys),
                Err(e) => core.answer(ctx, Response::Error(e)),
            },
            Request::Update { key, update } if in_txn => self.update(ctx, key, update),
            Request::Commit if in_txn => client.commit(core, ctx),
            Request::Abort if in_txn => self.abort(ctx),
            Request::Token if !in_txn => client.token(core, ctx),
            Request::Attach { token } if !in_txn => client.attach(core, ctx, token),
            Request::Barrier if !in_txn => client.barrier(core, ctx),
            Request::ListKeys {
                partition,
                from,
                max,
            } if !in_txn => client.list_keys(core, ctx, (partition, from, max)),
            other => core.answer(ctx, Response::Error(invalid_in_state(&other, in_txn))),
        }
    }

    /// `ClientSession::submit_ahead`, before its sends are noted.
    fn submit_with_ahead(&mut self, ctx: &mut Ctx<C::Msg>, request: Request, ahead: &[Request]) {
        let plan = match &request {
            Request::Read { keys } => self.read_commit_plan(keys, ahead),
            _ => None,
        };
        match (request, plan) {
            (Request::Read { keys }, Some(then)) => self.read_commit(ctx, keys, then),
            (request @ Request::Begin { .. }, _) => {
                // A BEGIN inside a transaction is refused, and the refusal ends the
                // promise: what follows it must not go into the transaction open.
                let refused = self.core.txn.is_some();
                self.submit_one(ctx, request);
                if !refused {
                    self.take_ahead(ctx, ahead);
                }
            }
            (request, _) => self.submit_one(ctx, request),
        }
    }
}
