//! The PaRiS client (Alg. 1) on the kit's session core: `ust_c`, `hwt_c` and the private
//! cache `WC_c` of the client's own committed writes that the UST does not cover yet.
//! Reads and the commit go to the txn's coordinator, a node of the session's DC; START
//! rides with the first of them. A read's objects get the cached writes of their key
//! applied before the txn's own buffered updates (Alg. 1 l.11: write set, read set,
//! cache); a read-only txn commits here.

use super::config::{Flavor, Mutation};
use super::msg::{CommitAnswer, Msg, ReadAnswer, Start};
use crate::kit::session::{ClientProtocol, SessionCore};
use crate::kit::txn::{effect_type, read_value};
use causeway_core::crdt::{ObjType, Object, Op};
use causeway_core::{Addr, Ctx, Error, Key, NodeId, ReadValue, Response, TxnKind};
use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Pending {
    None,
    Read,
    Commit,
}

/// The client side of PaRiS, BPR and NoCC.
#[derive(Debug)]
pub struct Client {
    flavor: Flavor,
    mutation: Mutation,
    cache_ops_max: usize,
    /// `ust_c` (PaRiS); the highest snapshot or commit time seen (BPR).
    pub(super) ust: u64,
    /// `hwt_c`: the commit time of the client's last update txn.
    pub(super) hwt: u64,
    /// `WC_c`: per key, the client's committed ops with their commit time.
    cache: BTreeMap<Key, Vec<(u64, Op)>>,
    cache_len: usize,
    coord: NodeId,
    /// The open txn's START went out.
    started: bool,
    pending: Pending,
}

impl Client {
    pub fn new(flavor: Flavor, mutation: Mutation, cache_ops_max: usize) -> Client {
        Client {
            flavor,
            mutation,
            cache_ops_max,
            ust: 0,
            hwt: 0,
            cache: BTreeMap::new(),
            cache_len: 0,
            coord: NodeId(0),
            started: false,
            pending: Pending::None,
        }
    }

    /// Writes in the cache (for tests and measurements).
    pub fn cache_len(&self) -> usize {
        self.cache_len
    }

    /// The START riding with the txn's first request, once.
    fn start(&mut self) -> Option<Start> {
        if self.started {
            return None;
        }
        self.started = true;
        Some(Start {
            ust: self.ust,
            cache_len: self.cache_len.min(u32::MAX as usize) as u32,
        })
    }

    /// The txn's snapshot is known (Alg. 1 l.4-5): `ust_c` rises to it and the cache
    /// forgets every write the snapshot covers.
    fn on_snapshot(&mut self, snapshot: u64) {
        if self.flavor == Flavor::Nocc {
            return; // no snapshot: "latest" is not a time
        }
        self.ust = self.ust.max(snapshot);
        let ust = self.ust;
        self.cache.retain(|_, ops| {
            ops.retain(|(ct, _)| *ct > ust);
            !ops.is_empty()
        });
        self.cache_len = self.cache.values().map(Vec::len).sum();
    }

    /// The object read at the snapshot, with the client's cached writes of the key on
    /// top (Alg. 1 l.11), then the txn's own updates. A cached write names the key's own
    /// type (a part's effect names it too); one of another type than the object read means
    /// the snapshot has no write of the key yet, and the read is refused as the store
    /// refuses a key of another type (`WRONGTYPE` naming the key's type), not answered
    /// as an empty object of the type asked (a client's `EXISTS` of its own new set).
    fn value(&self, core: &SessionCore, key: &Key, mut obj: Object) -> Result<ReadValue, Error> {
        if !self.mutation.no_client_cache {
            for (_, op) in self.cache.get(key).into_iter().flatten() {
                let own = effect_type(&op.effect);
                if own != obj.obj_type() {
                    return Err(Error::WrongType {
                        expected: own,
                        found: obj.obj_type(),
                    });
                }
                obj.apply(op);
            }
        }
        read_value(core.buffer(), key.clone(), obj, core.observed)
    }

    fn on_read_result(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>, result: ReadAnswer) {
        self.pending = Pending::None;
        let values = result.and_then(|(snapshot, objects)| {
            self.on_snapshot(snapshot);
            objects
                .into_iter()
                .map(|(k, o)| o.and_then(|o| self.value(core, &k, o)))
                .collect::<Result<Vec<_>, Error>>()
        });
        let response = match values {
            Ok(values) => Response::Values(values),
            Err(Error::Aborted(reason)) => {
                core.txn = None; // the coordinator dropped the txn
                Response::Aborted { reason }
            }
            Err(e) => Response::Error(e),
        };
        core.answer(ctx, response);
    }

    /// COMMIT answered (Alg. 1 l.28-31): `hwt_c = ct`, the writes move to the cache.
    fn on_commit_result(
        &mut self,
        core: &mut SessionCore,
        ctx: &mut Ctx<Msg>,
        result: CommitAnswer,
    ) {
        self.pending = Pending::None;
        core.txn = None;
        match result {
            Ok((ct, snapshot, ops)) => {
                self.on_snapshot(snapshot);
                self.hwt = self.hwt.max(ct);
                match self.flavor {
                    Flavor::Paris => self.cache_ops(ct, ops),
                    // BPR reads at or above the client's highest seen time: its writes.
                    Flavor::Bpr => self.ust = self.ust.max(ct),
                    Flavor::Nocc => {}
                }
                core.answer(ctx, Response::Committed);
            }
            Err(Error::Aborted(reason)) => core.answer(ctx, Response::Aborted { reason }),
            // Not an abort: the outcome may be unknown ("timed out").
            Err(e) => core.answer(ctx, Response::Error(e)),
        }
    }

    fn cache_ops(&mut self, ct: u64, ops: Vec<(Key, Op)>) {
        if ct <= self.ust || self.mutation.no_client_cache {
            return; // already in every snapshot the client will take
        }
        for (k, op) in ops {
            self.cache.entry(k).or_default().push((ct, op));
            self.cache_len += 1;
        }
    }

    fn send(&self, ctx: &mut Ctx<Msg>, m: Msg) {
        ctx.send(Addr::Node(self.coord), m);
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

    fn begin(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>, kind: TxnKind) {
        if kind == TxnKind::Strong {
            let e = core.unsupported("strong transactions");
            return core.answer(ctx, Response::Error(e));
        }
        let txn = core.open_txn(kind);
        // The co-located coordinator of the paper (§V-A): one node of the session's DC.
        let n = core.topology.nodes_per_dc;
        let index = (core.id.0 % u64::from(n)) as u32;
        self.coord = NodeId(u32::from(core.dc.0) * n + index);
        self.started = false;
        core.answer(ctx, Response::Begun { txn });
    }

    fn read(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>, keys: Vec<(Key, ObjType)>) {
        self.pending = Pending::Read;
        let req = core.start_request(ctx);
        let start = self.start();
        let txn = core.txn_id();
        self.send(
            ctx,
            Msg::Read {
                txn,
                req,
                start,
                keys,
            },
        );
    }

    fn commit(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>) {
        let updates = core.buffer().updates.clone();
        if updates.is_empty() {
            // Read-only: nothing to do at the nodes but free the txn's context.
            if self.started {
                let txn = core.txn_id();
                self.send(ctx, Msg::Abort { txn });
            }
            core.txn = None;
            return core.answer(ctx, Response::Committed);
        }
        if self.flavor == Flavor::Paris && self.cache_len + updates.len() > self.cache_ops_max {
            if self.started {
                let txn = core.txn_id();
                self.send(ctx, Msg::Abort { txn });
            }
            core.txn = None;
            let reason = format!(
                "client cache full ({} writes not yet in the UST; is a DC unreachable?)",
                self.cache_len
            );
            return core.answer(ctx, Response::Aborted { reason });
        }
        let cached: Vec<(Key, Op)> = if self.mutation.no_client_cache {
            Vec::new()
        } else {
            let keys: std::collections::BTreeSet<&Key> = updates.iter().map(|u| &u.0).collect();
            keys.into_iter()
                .flat_map(|k| {
                    self.cache
                        .get(k)
                        .into_iter()
                        .flatten()
                        .map(|(_, op)| (k.clone(), op.clone()))
                })
                .collect()
        };
        self.pending = Pending::Commit;
        let req = core.start_request(ctx);
        let start = self.start();
        let txn = core.txn_id();
        let hwt = self.hwt;
        self.send(
            ctx,
            Msg::Commit {
                txn,
                req,
                start,
                hwt,
                updates,
                cached,
            },
        );
    }

    fn abort(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>) {
        if self.started {
            let txn = core.txn_id();
            self.send(ctx, Msg::Abort { txn });
        }
    }

    /// `ust_c` and `hwt_c` take the later of the two and the caches `WC_c` unite (Alg. 1
    /// l.28-31 fill them; a write in both, by op id, is kept once), then the writes the
    /// joined `ust_c` covers leave (l.4-5): a session sees the other's writes before the
    /// UST does, as their writer does.
    fn join_past(&mut self, _core: &mut SessionCore, other: &Client) {
        self.ust = self.ust.max(other.ust);
        self.hwt = self.hwt.max(other.hwt);
        for (key, theirs) in &other.cache {
            let mine = self.cache.entry(key.clone()).or_default();
            for (ct, op) in theirs {
                if !mine.iter().any(|(_, o)| o.id == op.id) {
                    mine.push((*ct, op.clone()));
                }
            }
            // Applied in commit order, as the writer's own cache is (its commits' times
            // increase), ties by op id.
            mine.sort_by_key(|(ct, op)| (*ct, op.id));
        }
        self.on_snapshot(self.ust);
        self.cache_len = self.cache.values().map(Vec::len).sum();
    }

    fn on_message(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>, _from: Addr, msg: Msg) {
        if let Msg::KeysListed(answer) = msg {
            return crate::kit::keys::answered(core, ctx, answer);
        }
        if core.txn.is_none() || !core.running() {
            return; // stale: a request that timed out
        }
        let txn = core.txn_id();
        match (msg, self.pending.clone()) {
            (
                Msg::ReadResult {
                    txn: t,
                    req,
                    result,
                },
                Pending::Read,
            ) if t == txn && core.is_current(req) => self.on_read_result(core, ctx, result),
            (
                Msg::CommitResult {
                    txn: t,
                    req,
                    result,
                },
                Pending::Commit,
            ) if t == txn && core.is_current(req) => self.on_commit_result(core, ctx, result),
            _ => {}
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
        let len: usize = self.cache.values().map(Vec::len).sum();
        if len != self.cache_len {
            return Err(format!(
                "cache holds {len} writes, counted {}",
                self.cache_len
            ));
        }
        // Alg. 1 l.5: after a START nothing at or below ust_c stays cached.
        if let Some((k, (ct, _))) = self
            .cache
            .iter()
            .flat_map(|(k, ops)| ops.iter().map(move |o| (k, o)))
            .find(|(_, (ct, _))| *ct <= self.ust)
        {
            return Err(format!("{k:?} cached at {ct} <= ust_c {}", self.ust));
        }
        Ok(())
    }
}
