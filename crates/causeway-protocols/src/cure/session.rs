//! The Cure client session: holds `cvc` (the session's causal past), buffers updates
//! (it assigns op ids, so `Update` is answered at once) and ships them to the coordinator
//! with the next read or the commit. Each txn picks a coordinator of the session's DC in
//! turn, so the START wait (Alg. 1 l.2-3) matters whenever coordinators' GSS differ.

use super::msg::Msg;
use super::wrap;
use crate::common::{check_read, invalid_in_state, TxnBuffer};
use crate::{Msg as AnyMsg, Params};
use causeway_core::crdt::ObjType;
use causeway_core::{
    Addr, ClientSession, Ctx, DcId, Error, Key, NodeId, Request, Response, SessionId, Topology,
    TxnId, TxnKind, Vc,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    None,
    Begin,
    Read,
    Commit,
}

struct Open {
    coord: NodeId,
    buffer: TxnBuffer,
    /// Updates already shipped to the coordinator.
    shipped: usize,
}

pub struct Session {
    id: SessionId,
    dc: DcId,
    topology: Topology,
    params: Params,
    cvc: Vc,
    seq: u64,
    txn: Option<Open>,
    pending: Pending,
    req: u64,
    deadline: u64,
}

impl Session {
    pub fn new(id: SessionId, dc: DcId, topology: Topology, params: Params) -> Session {
        let cvc = Vc::zero(usize::from(topology.dcs));
        Session {
            id,
            dc,
            topology,
            params,
            cvc,
            seq: 0,
            txn: None,
            pending: Pending::None,
            req: 0,
            deadline: 0,
        }
    }

    /// The session's causal past (for tests and tokens).
    pub fn cvc(&self) -> &Vc {
        &self.cvc
    }

    fn arm(&mut self, ctx: &mut Ctx<AnyMsg>, pending: Pending) {
        self.req += 1;
        self.pending = pending;
        self.deadline = ctx.clock + self.params.request_timeout_ns;
        ctx.timer(self.params.request_timeout_ns);
    }

    fn send(&self, ctx: &mut Ctx<AnyMsg>, m: Msg) {
        let coord = self.txn.as_ref().expect("a txn is open").coord;
        ctx.send(Addr::Node(coord), wrap(m));
    }

    fn txn_id(&self) -> TxnId {
        self.txn.as_ref().expect("a txn is open").buffer.txn
    }

    fn begin(&mut self, ctx: &mut Ctx<AnyMsg>, kind: TxnKind) {
        if kind == TxnKind::Strong {
            return ctx.reply(Response::Error(unsupported("strong transactions")));
        }
        self.seq += 1;
        let txn = TxnId {
            session: self.id,
            seq: self.seq,
        };
        let n = self.topology.nodes_per_dc;
        let index = ((self.id.0 + self.seq) % u64::from(n)) as u32;
        let coord = NodeId(u32::from(self.dc.0) * n + index);
        self.txn = Some(Open {
            coord,
            buffer: TxnBuffer::new(txn, kind),
            shipped: 0,
        });
        self.arm(ctx, Pending::Begin);
        self.send(
            ctx,
            Msg::Start {
                txn,
                cvc: self.cvc.clone(),
            },
        ); // Alg. 1 l.1
    }

    /// Updates buffered since the last request.
    fn unshipped(&mut self) -> Vec<(Key, causeway_core::Update, causeway_core::OpId)> {
        let open = self.txn.as_mut().expect("a txn is open");
        let out = open.buffer.updates[open.shipped..].to_vec();
        open.shipped = open.buffer.updates.len();
        out
    }

    fn read(&mut self, ctx: &mut Ctx<AnyMsg>, keys: Vec<(Key, ObjType)>) {
        if let Err(e) = check_read(&keys) {
            return ctx.reply(Response::Error(e));
        }
        let updates = self.unshipped();
        self.arm(ctx, Pending::Read);
        let m = Msg::Read {
            txn: self.txn_id(),
            req: self.req,
            keys,
            updates,
        };
        self.send(ctx, m);
    }

    fn commit(&mut self, ctx: &mut Ctx<AnyMsg>) {
        let updates = self.unshipped();
        self.arm(ctx, Pending::Commit);
        let m = Msg::Commit {
            txn: self.txn_id(),
            req: self.req,
            updates,
        };
        self.send(ctx, m);
    }

    fn abort(&mut self, ctx: &mut Ctx<AnyMsg>) {
        let txn = self.txn_id();
        self.send(ctx, Msg::Abort { txn });
        self.txn = None;
        ctx.reply(Response::Aborted {
            reason: "aborted by the client".into(),
        });
    }

    fn attach(&mut self, ctx: &mut Ctx<AnyMsg>, token: &[u8]) {
        match postcard::from_bytes::<Vc>(token) {
            Ok(vc) => {
                self.cvc.join(&vc);
                ctx.reply(Response::Attached);
            }
            Err(e) => ctx.reply(Response::Error(Error::BadToken(e.to_string()))),
        }
    }

    fn on_reply(&mut self, ctx: &mut Ctx<AnyMsg>, msg: Msg) {
        let Some(open) = &self.txn else { return };
        let txn = open.buffer.txn;
        match (msg, self.pending) {
            (Msg::Started { txn: t, result }, Pending::Begin) if t == txn => {
                self.pending = Pending::None;
                match result {
                    Ok(()) => ctx.reply(Response::Begun { txn }),
                    Err(e) => {
                        self.txn = None;
                        ctx.reply(Response::Error(e));
                    }
                }
            }
            (
                Msg::ReadResult {
                    txn: t,
                    req,
                    result,
                },
                Pending::Read,
            ) if t == txn && req == self.req => {
                self.pending = Pending::None;
                ctx.reply(result.map_or_else(Response::Error, Response::Values));
            }
            (
                Msg::CommitResult {
                    txn: t,
                    req,
                    result,
                },
                Pending::Commit,
            ) if t == txn && req == self.req => {
                self.pending = Pending::None;
                self.txn = None;
                match result {
                    Ok(ct) => {
                        self.cvc.join(&ct); // the session's past now includes the txn
                        ctx.reply(Response::Committed);
                    }
                    Err(e) => ctx.reply(Response::Aborted {
                        reason: e.to_string(),
                    }),
                }
            }
            _ => {} // stale: a request that timed out
        }
    }
}

fn unsupported(capability: &str) -> Error {
    Error::Unsupported {
        protocol: "cure".into(),
        capability: capability.into(),
    }
}

impl ClientSession for Session {
    type Msg = AnyMsg;

    fn submit(&mut self, ctx: &mut Ctx<AnyMsg>, request: Request) {
        if self.pending != Pending::None {
            let e = Error::InvalidState("a request is already running".into());
            return ctx.reply(Response::Error(e));
        }
        let in_txn = self.txn.is_some();
        match request {
            Request::Begin { kind } if !in_txn => self.begin(ctx, kind),
            Request::Read { keys } if in_txn => self.read(ctx, keys),
            Request::Update { key, update } if in_txn => {
                let pushed = self.txn.as_mut().expect("in txn").buffer.push(key, update);
                ctx.reply(pushed.map_or_else(Response::Error, |op| Response::Updated { op }));
            }
            Request::Commit if in_txn => self.commit(ctx),
            Request::Abort if in_txn => self.abort(ctx),
            Request::Token if !in_txn => {
                let token = postcard::to_allocvec(&self.cvc).expect("a vector clock encodes");
                ctx.reply(Response::Token(token));
            }
            Request::Attach { token } if !in_txn => self.attach(ctx, &token),
            Request::Barrier => ctx.reply(Response::Error(unsupported("barriers"))),
            other => ctx.reply(Response::Error(invalid_in_state(&other, in_txn))),
        }
    }

    fn handle_message(&mut self, ctx: &mut Ctx<AnyMsg>, _from: Addr, msg: AnyMsg) {
        let AnyMsg::Cure(msg) = msg else {
            return; // another protocol's message
        };
        self.on_reply(ctx, msg);
    }

    fn handle_timeout(&mut self, ctx: &mut Ctx<AnyMsg>) {
        if self.pending == Pending::None || ctx.clock < self.deadline {
            return;
        }
        self.pending = Pending::None;
        self.txn = None;
        self.req += 1; // late replies are now stale
        ctx.reply(Response::Error(Error::Unavailable(
            "request timed out".into(),
        )));
    }
}
