//! The Cure client side, on the kit's session core: holds `cvc` (the session's causal
//! past), lets the core buffer updates (it assigns op ids, so `Update` is answered at once)
//! and ships them to the coordinator with the next read or the commit. Each txn picks a
//! coordinator of the session's DC in turn, so the START wait (Alg. 1 l.2-3) matters
//! whenever coordinators' GSS differ.

use super::msg::{Msg, Updates};
use crate::kit::session::{ClientProtocol, SessionCore};
use causeway_core::crdt::ObjType;
use causeway_core::{Addr, Ctx, Error, Key, NodeId, Response, Topology, TxnKind, Vc};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    None,
    Begin,
    Read,
    Commit,
}

/// The client side of Cure.
#[derive(Debug)]
pub struct Client {
    cvc: Vc,
    /// The open txn's coordinator.
    coord: NodeId,
    /// Updates of the open txn already shipped to the coordinator.
    shipped: usize,
    pending: Pending,
}

impl Client {
    pub fn new(topology: &Topology) -> Client {
        Client {
            cvc: Vc::zero(usize::from(topology.dcs)),
            coord: NodeId(0),
            shipped: 0,
            pending: Pending::None,
        }
    }

    /// The session's causal past (for tests and tokens).
    pub fn cvc(&self) -> &Vc {
        &self.cvc
    }

    fn send(&self, ctx: &mut Ctx<Msg>, m: Msg) {
        ctx.send(Addr::Node(self.coord), m);
    }

    /// Updates buffered since the last request.
    fn unshipped(&mut self, core: &SessionCore) -> Updates {
        let updates = &core.buffer().updates;
        let out = updates[self.shipped..].to_vec();
        self.shipped = updates.len();
        out
    }

    fn started(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>, r: Result<(), Error>) {
        self.pending = Pending::None;
        match r {
            Ok(()) => {
                let txn = core.txn_id();
                core.answer(ctx, Response::Begun { txn });
            }
            Err(e) => {
                core.txn = None;
                core.answer(ctx, Response::Error(e));
            }
        }
    }

    fn committed(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>, r: Result<Vc, Error>) {
        self.pending = Pending::None;
        core.txn = None;
        match r {
            Ok(ct) => {
                self.cvc.join(&ct); // the session's past now includes the txn
                core.answer(ctx, Response::Committed);
            }
            Err(e) => {
                let reason = e.to_string();
                core.answer(ctx, Response::Aborted { reason });
            }
        }
    }
}

impl ClientProtocol for Client {
    type Msg = Msg;

    fn begin(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>, kind: TxnKind) {
        if kind == TxnKind::Strong {
            let e = core.unsupported("strong transactions");
            return core.answer(ctx, Response::Error(e));
        }
        let txn = core.open_txn(kind);
        let n = core.topology.nodes_per_dc;
        let index = ((core.id.0 + txn.seq) % u64::from(n)) as u32;
        self.coord = NodeId(u32::from(core.dc.0) * n + index);
        self.shipped = 0;
        self.pending = Pending::Begin;
        core.start_request(ctx);
        let cvc = self.cvc.clone();
        self.send(ctx, Msg::Start { txn, cvc }); // Alg. 1 l.1
    }

    fn read(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>, keys: Vec<(Key, ObjType)>) {
        let updates = self.unshipped(core);
        self.pending = Pending::Read;
        let req = core.start_request(ctx);
        let txn = core.txn_id();
        self.send(
            ctx,
            Msg::Read {
                txn,
                req,
                keys,
                updates,
            },
        );
    }

    fn commit(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>) {
        let updates = self.unshipped(core);
        self.pending = Pending::Commit;
        let req = core.start_request(ctx);
        let txn = core.txn_id();
        self.send(ctx, Msg::Commit { txn, req, updates });
    }

    fn abort(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>) {
        let txn = core.txn_id();
        self.send(ctx, Msg::Abort { txn });
    }

    fn token(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>) {
        let token = postcard::to_allocvec(&self.cvc).expect("a vector clock encodes");
        core.answer(ctx, Response::Token(token));
    }

    fn attach(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>, token: Vec<u8>) {
        match postcard::from_bytes::<Vc>(&token) {
            Ok(vc) if vc.dcs.len() == self.cvc.dcs.len() => {
                self.cvc.join(&vc);
                core.answer(ctx, Response::Attached);
            }
            Ok(vc) => {
                let why = format!(
                    "a token of {} DCs, this cluster has {}",
                    vc.dcs.len(),
                    self.cvc.dcs.len()
                );
                core.answer(ctx, Response::Error(Error::BadToken(why)));
            }
            Err(e) => core.answer(ctx, Response::Error(Error::BadToken(e.to_string()))),
        }
    }

    fn on_message(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>, _from: Addr, msg: Msg) {
        if core.txn.is_none() || !core.running() {
            return; // stale: a request that timed out
        }
        let txn = core.txn_id();
        match (msg, self.pending) {
            (Msg::Started { txn: t, result }, Pending::Begin) if t == txn => {
                self.started(core, ctx, result)
            }
            (
                Msg::ReadResult {
                    txn: t,
                    req,
                    result,
                },
                Pending::Read,
            ) if t == txn && core.is_current(req) => {
                self.pending = Pending::None;
                core.answer(ctx, result.map_or_else(Response::Error, Response::Values));
            }
            (
                Msg::CommitResult {
                    txn: t,
                    req,
                    result,
                },
                Pending::Commit,
            ) if t == txn && core.is_current(req) => self.committed(core, ctx, result),
            _ => {} // stale: a request that timed out
        }
    }

    fn on_timeout(&mut self, _core: &mut SessionCore) {
        self.pending = Pending::None;
    }

    fn check_invariants(&self, core: &SessionCore) -> Result<(), String> {
        if (self.pending != Pending::None) != core.running() {
            return Err(format!(
                "pending {:?} but running = {}",
                self.pending,
                core.running()
            ));
        }
        Ok(())
    }
}
