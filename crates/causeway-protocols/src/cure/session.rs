//! The Cure client side, on the kit's session core: holds `cvc` (the session's causal
//! past), lets the core buffer updates (it assigns op ids, so `Update` is answered at once)
//! and ships them to the coordinator with the next read or the commit. BEGIN is answered
//! here; the START goes out with the txn's first read or its commit, to the node of the
//! first key's partition, which coordinates the txn (one hop for a single-partition read,
//! a local one-phase commit for a single-partition write). A read-only txn commits here,
//! at the snapshot its reads returned, unless its commit went with its read (below).
//! Consecutive txns of a session on different keys have different coordinators, so the
//! START wait (Alg. 1 l.2-3) still matters.
//!
//! Read-then-commit (`kit::session`): a txn whose first read is followed by only updates
//! and its commit (RESP's standalone INCR, INCRBY, DECR, DECRBY) sends all of it with the START
//! (`First::ReadCommit`); the coordinator answers the read, then commits at once. The
//! `Commit` request is answered with that commit's result, which may arrive first. When
//! the coordinator served the read on its own partition and committed there in one phase,
//! both answers come in one `ReadCommitResult`. A read followed by only the commit (a
//! GET) goes the same way with no updates: a one-partition read is then served at its
//! partition and answered with the commit in one message (`direct.rs`).

use super::config::Flavor;
use super::msg::{First, Msg, Updates};
use crate::kit::session::{ClientProtocol, SessionCore};
use crate::kit::txn::coalesce_updates;
use causeway_core::crdt::{ObjType, Update};
use causeway_core::{
    Addr, Ctx, Error, Key, NodeId, OpId, PartitionId, ReadValue, Response, Topology, TxnId,
    TxnKind, Vc,
};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Pending {
    None,
    Read,
    Commit,
    /// A UNIFORM_BARRIER or an ATTACH (UniStore), with the past it attaches.
    Wait {
        attach: Option<Vc>,
    },
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
    flavor: Flavor,
    /// The open txn's START went out (with its first read or its commit).
    started: bool,
    /// The open txn's snapshot, once a read returned it.
    svc: Option<Vc>,
    /// The open txn's kind, and its type label if strong.
    kind: TxnKind,
    label: Option<String>,
    /// Baselines: run every txn as this kind (`strong`: all strong; `causal`: none).
    pub kind_override: Option<TxnKind>,
    /// The request id of a read-then-commit whose commit result is still to be given.
    combined: Option<u64>,
    /// That commit's result, when it came before the `Commit` request.
    early: Option<Result<Vc, Error>>,
    /// The `keeps-overwritten-assign` mutation: a shipped batch keeps each key's first
    /// assignment ([`coalesce_updates`]), as the partition then does.
    pub keep_first_assign: bool,
    /// The protocol runs strong txns (an extension's capability).
    pub strong_txns: bool,
    /// The protocol serves uniform barriers (an extension's capability).
    pub barriers: bool,
}

impl Client {
    pub fn new(topology: &Topology, flavor: Flavor) -> Client {
        Client {
            cvc: Vc::zero(usize::from(topology.dcs)),
            coord: NodeId(0),
            shipped: 0,
            pending: Pending::None,
            flavor,
            started: false,
            svc: None,
            kind: TxnKind::Causal,
            label: None,
            kind_override: None,
            combined: None,
            early: None,
            keep_first_assign: false,
            strong_txns: false,
            barriers: false,
        }
    }

    /// The node of the session's DC owning `key`'s partition: the coordinator of a txn
    /// whose first request touches `key`, so that a single-partition txn is served where
    /// its data is (one hop for reads, one-phase commits without a remote participant).
    fn owner(core: &SessionCore, key: &Key) -> NodeId {
        let topo = &core.topology;
        topo.node_of(core.dc, topo.partition_of(key))
    }

    /// The key whose node coordinates a txn that starts with its commit: one of the node
    /// owning the most of the updated partitions, the first key's on a tie. That node's
    /// partitions commit with the decision's record (one-node commit), so the fewer
    /// partitions elsewhere, the fewer prepare and commit records.
    fn coordinating_key<'u>(core: &SessionCore, updates: &'u Updates) -> &'u Key {
        let topo = &core.topology;
        let first = &updates.first().expect("a commit with updates").0;
        if updates.len() == 1 {
            return first; // a single-key command: no choice to make
        }
        let first_node = Self::owner(core, first);
        if updates[1..]
            .iter()
            .all(|(k, _, _)| Self::owner(core, k) == first_node)
        {
            return first; // one node: no choice to make
        }
        let mut partitions: BTreeMap<NodeId, BTreeSet<PartitionId>> = BTreeMap::new();
        let mut key_of: BTreeMap<NodeId, &Key> = BTreeMap::new();
        for (key, _, _) in updates {
            let p = topo.partition_of(key);
            let node = topo.node_of(core.dc, p);
            partitions.entry(node).or_default().insert(p);
            key_of.entry(node).or_insert(key);
        }
        let most = partitions.values().map(BTreeSet::len).max().unwrap_or(0);
        if partitions.get(&first_node).map_or(0, BTreeSet::len) == most {
            return first;
        }
        let (node, _) = partitions
            .iter()
            .find(|(_, ps)| ps.len() == most)
            .expect("a node with the most partitions");
        key_of[node]
    }

    /// Sends the START with the txn's first request (Alg. 1 l.1 and the request) to
    /// `coord`, the owner of the key it names ([`Client::owner`]: the callers ask before
    /// the request takes their keys, so no key is copied for it).
    fn start_with(&mut self, core: &SessionCore, ctx: &mut Ctx<Msg>, coord: NodeId, first: First) {
        self.coord = coord;
        self.started = true;
        let txn = core.txn_id();
        let cvc = self.cvc.clone();
        let (kind, label) = (self.kind, self.label.clone());
        let observed = core.observed;
        self.send(
            ctx,
            Msg::StartWith {
                txn,
                kind,
                label,
                cvc,
                first,
                observed,
            },
        );
    }

    /// Commits without a message: a txn that never started (nothing read, nothing
    /// written), or a read-only one at its snapshot (what its coordinator would answer).
    fn commit_locally(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>) {
        if self.started {
            let txn = core.txn_id();
            self.send(ctx, Msg::Abort { txn }); // frees its state at the coordinator
        }
        if let Some(svc) = self.svc.take() {
            self.cvc.join(&svc); // Cure: a read-only txn's place in causality is its svc
        }
        core.txn = None;
        core.answer(ctx, Response::Committed);
    }

    /// The node of the session's DC that serves its barriers and attaches.
    fn wait_node(core: &SessionCore) -> NodeId {
        let n = core.topology.nodes_per_dc;
        let index = (core.id.0 % u64::from(n)) as u32;
        NodeId(u32::from(core.dc.0) * n + index)
    }

    /// Sends a UNIFORM_BARRIER (`attach = None`, UniStore Alg. 1 l.49) or an ATTACH of
    /// `past` (l.51) and waits for the node's answer.
    fn start_wait(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>, attach: Option<Vc>) {
        self.coord = Self::wait_node(core);
        let req = core.start_request(ctx);
        let past = match &attach {
            Some(v) => v.clone(),
            None => self.cvc.clone(),
        };
        let m = match attach {
            Some(_) => Msg::Attach { req, past },
            None => Msg::Barrier { req, past },
        };
        self.pending = Pending::Wait { attach };
        self.send(ctx, m);
    }

    fn wait_done(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>, r: Result<(), Error>) {
        let Pending::Wait { attach } = std::mem::replace(&mut self.pending, Pending::None) else {
            return;
        };
        let response = match (r, attach) {
            (Err(e), _) => Response::Error(e),
            (Ok(()), Some(past)) => {
                self.cvc.join(&past); // the attached past is ours now
                Response::Attached
            }
            (Ok(()), None) => Response::BarrierDone,
        };
        core.answer(ctx, response);
    }

    /// Decodes a token of this cluster (a postcard-encoded vector clock).
    fn decode_token(&self, token: &[u8]) -> Result<Vc, Error> {
        match postcard::from_bytes::<Vc>(token) {
            Ok(vc) if vc.dcs.len() == self.cvc.dcs.len() => Ok(vc),
            Ok(vc) => Err(Error::BadToken(format!(
                "a token of {} DCs, this cluster has {}",
                vc.dcs.len(),
                self.cvc.dcs.len()
            ))),
            Err(e) => Err(Error::BadToken(e.to_string())),
        }
    }

    /// The session's causal past (for tests and tokens).
    pub fn cvc(&self) -> &Vc {
        &self.cvc
    }

    fn send(&self, ctx: &mut Ctx<Msg>, m: Msg) {
        ctx.send(Addr::Node(self.coord), m);
    }

    /// Updates buffered since the last request, coalesced ([`coalesce_updates`]).
    fn unshipped(&mut self, core: &SessionCore) -> Updates {
        let updates = &core.buffer().updates;
        let out = self.shippable(&updates[self.shipped..]);
        self.shipped = updates.len();
        out
    }

    /// The updates not shipped yet, for the commit that ships the last of them: moved out
    /// of the buffer, not copied (nothing reads a committing txn's buffer here), and
    /// coalesced ([`coalesce_updates`]).
    fn take_unshipped(&mut self, core: &mut SessionCore) -> Updates {
        let buffer = core.txn.as_mut().expect("a transaction is open");
        let mut out = match self.shipped {
            0 => std::mem::take(&mut buffer.updates),
            n => buffer.updates.split_off(n),
        };
        coalesce_updates(&mut out, self.keep_first_assign);
        out
    }

    /// `updates` as one message carries them: coalesced (the rest of the buffer stays as
    /// it is, for the txn's own reads).
    fn shippable(&self, updates: &[(Key, Update, OpId)]) -> Updates {
        let mut out = updates.to_vec();
        coalesce_updates(&mut out, self.keep_first_assign);
        out
    }

    /// COMMIT's answer: for the running commit, or kept for the `Commit` request of a
    /// read-then-commit when it comes first.
    fn on_commit_result(
        &mut self,
        core: &mut SessionCore,
        ctx: &mut Ctx<Msg>,
        (txn, req): (TxnId, u64),
        result: Result<Vc, Error>,
    ) {
        if core.txn.as_ref().is_none_or(|b| b.txn != txn) {
            return; // stale: a txn that timed out
        }
        let running = self.pending == Pending::Commit;
        if self.combined == Some(req) && !running {
            self.early = Some(result);
        } else if running && (self.combined == Some(req) || core.is_current(req)) {
            self.committed(core, ctx, result);
        }
    }

    fn committed(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>, r: Result<Vc, Error>) {
        self.pending = Pending::None;
        self.combined = None;
        self.early = None;
        core.txn = None;
        match r {
            Ok(ct) => {
                self.cvc.join(&ct); // the session's past now includes the txn
                core.answer(ctx, Response::Committed);
            }
            Err(Error::Aborted(reason)) => core.answer(ctx, Response::Aborted { reason }),
            // Not an abort: the outcome may be unknown ("timed out"); the txn is over here.
            Err(e) => core.answer(ctx, Response::Error(e)),
        }
    }

    /// READ's answer (or a `ReadCommitResult`'s read): the values and the txn's snapshot,
    /// or why it failed.
    fn on_read_result(
        &mut self,
        core: &mut SessionCore,
        ctx: &mut Ctx<Msg>,
        (txn, req): (TxnId, u64),
        result: Result<(Vec<ReadValue>, Vc), Error>,
    ) {
        let current = core.txn.as_ref().is_some_and(|b| b.txn == txn) && core.running();
        if !current || self.pending != Pending::Read || !core.is_current(req) {
            return; // stale: a request that timed out
        }
        self.pending = Pending::None;
        let response = match result {
            Ok((values, svc)) => {
                self.svc = Some(svc);
                Response::Values(values)
            }
            // A read-then-commit whose read failed does not commit.
            Err(e) if self.combined.take().is_some() => {
                self.early = None;
                match e {
                    Error::Aborted(reason) => {
                        core.txn = None;
                        Response::Aborted { reason }
                    }
                    e => Response::Error(e),
                }
            }
            // The coordinator dropped the txn (e.g. "snapshot too old"): it is
            // over here too, so the session is idle again.
            Err(Error::Aborted(reason)) => {
                core.txn = None;
                Response::Aborted { reason }
            }
            Err(e) => Response::Error(e),
        };
        core.answer(ctx, response);
    }
}

impl ClientProtocol for Client {
    type Msg = Msg;

    fn list_keys(
        &mut self,
        core: &mut SessionCore,
        ctx: &mut Ctx<Msg>,
        ask: (causeway_core::PartitionId, u64, u32),
    ) {
        crate::kit::keys::start(core, ctx, ask, Msg::ListKeys)
    }

    /// BEGIN opens the txn at the session only: its START goes out with the first read
    /// or the commit, to the node of the first key's partition.
    fn begin(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>, kind: TxnKind) {
        if kind == TxnKind::Strong && !self.strong_txns {
            let e = core.unsupported("strong transactions");
            return core.answer(ctx, Response::Error(e));
        }
        let kind = self.kind_override.unwrap_or(kind);
        let txn = core.open_txn(kind);
        self.kind = kind;
        self.label = core.label.clone().filter(|_| kind == TxnKind::Strong);
        self.shipped = 0;
        self.started = false;
        self.svc = None;
        self.combined = None;
        self.early = None;
        core.answer(ctx, Response::Begun { txn });
    }

    fn read(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>, keys: Vec<(Key, ObjType)>) {
        let updates = self.unshipped(core);
        self.pending = Pending::Read;
        let req = core.start_request(ctx);
        if !self.started {
            let coord = Self::owner(core, &keys[0].0);
            return self.start_with(core, ctx, coord, First::Read { req, keys, updates });
        }
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

    /// The read came with the commit's result (`ReadCommitResult`, or a `CommitResult`
    /// ahead of the `ReadResult`): the promised commit answers at once.
    fn commit_settled(&self, _core: &SessionCore) -> bool {
        self.combined.is_some() && self.early.is_some()
    }

    /// A causal txn's first read, when only updates and the commit follow.
    fn can_read_commit(&self, _core: &SessionCore) -> bool {
        !self.started && self.kind == TxnKind::Causal
    }

    fn read_commit(
        &mut self,
        core: &mut SessionCore,
        ctx: &mut Ctx<Msg>,
        keys: Vec<(Key, ObjType)>,
        then_from: usize,
    ) {
        let buffered = &core.buffer().updates;
        let updates = self.shippable(&buffered[self.shipped..then_from]);
        let then = self.shippable(&buffered[then_from..]);
        self.shipped = buffered.len();
        self.pending = Pending::Read;
        let req = core.start_request(ctx);
        self.combined = Some(req);
        self.early = None;
        let coord = Self::owner(core, &keys[0].0);
        let first = First::ReadCommit {
            req,
            keys,
            updates,
            then,
        };
        self.start_with(core, ctx, coord, first);
    }

    fn commit(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>) {
        if self.combined.is_some() {
            // The commit went with the read: its result came, or is awaited.
            return match self.early.take() {
                Some(r) => self.committed(core, ctx, r),
                None => {
                    self.pending = Pending::Commit;
                    core.start_request(ctx);
                }
            };
        }
        // A strong txn that read anything is certified, even read-only (UniStore §6.2).
        let certify = self.kind == TxnKind::Strong && self.started;
        if core.buffer().updates.is_empty() && (!self.started || self.svc.is_some()) && !certify {
            return self.commit_locally(core, ctx);
        }
        let updates = self.take_unshipped(core);
        self.pending = Pending::Commit;
        let req = core.start_request(ctx);
        if !self.started {
            let coord = Self::owner(core, Self::coordinating_key(core, &updates));
            return self.start_with(core, ctx, coord, First::Commit { req, updates });
        }
        let txn = core.txn_id();
        self.send(ctx, Msg::Commit { txn, req, updates });
    }

    fn abort(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>) {
        if self.started {
            let txn = core.txn_id();
            self.send(ctx, Msg::Abort { txn });
        }
    }

    fn token(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>) {
        let token = postcard::to_allocvec(&self.cvc).expect("a vector clock encodes");
        core.answer(ctx, Response::Token(token));
    }

    /// Cure joins the token into `cvc` (START then waits for it); under UniStore's rules
    /// START does not wait, so ATTACH waits at a node until the past is visible here.
    fn attach(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>, token: Vec<u8>) {
        match self.decode_token(&token) {
            Ok(vc) if self.flavor.ft_rules() => self.start_wait(core, ctx, Some(vc)),
            Ok(vc) => {
                self.cvc.join(&vc);
                core.answer(ctx, Response::Attached);
            }
            Err(e) => core.answer(ctx, Response::Error(e)),
        }
    }

    fn barrier(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>) {
        if self.barriers {
            return self.start_wait(core, ctx, None);
        }
        let e = core.unsupported("uniform barriers");
        core.answer(ctx, Response::Error(e));
    }

    /// `cvc` joins `cvc`, strong entry included (UniStore's `pastVec`, §6.1): the next
    /// START takes its own-DC and strong entries from it (Alg. 1 l.6; Alg. 3).
    fn join_past(&mut self, _core: &mut SessionCore, other: &Client) {
        self.cvc.join(&other.cvc);
    }

    fn on_message(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>, _from: Addr, msg: Msg) {
        if let Msg::KeysListed(answer) = msg {
            return crate::kit::keys::answered(core, ctx, answer);
        }
        if let Msg::WaitDone { req, result } = msg {
            if matches!(self.pending, Pending::Wait { .. }) && core.is_current(req) {
                self.wait_done(core, ctx, result);
            }
            return;
        }
        if let Msg::CommitResult { txn, req, result } = msg {
            return self.on_commit_result(core, ctx, (txn, req), result);
        }
        if let Msg::ReadCommitResult {
            txn,
            req,
            read,
            commit,
        } = msg
        {
            // As the two messages it replaces, in their order.
            self.on_read_result(core, ctx, (txn, req), Ok(read));
            return self.on_commit_result(core, ctx, (txn, req), commit);
        }
        if let Msg::ReadResult { txn, req, result } = msg {
            self.on_read_result(core, ctx, (txn, req), result);
        }
    }

    fn on_timeout(&mut self, _core: &mut SessionCore) {
        self.pending = Pending::None;
        self.combined = None;
        self.early = None;
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
