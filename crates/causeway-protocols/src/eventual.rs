//! `eventual`: the baseline every paper measures against. One version per key, visible at
//! once; last writer wins by (origin clock, origin DC); updates replicated asynchronously
//! to every other DC. A transaction is only a group of operations: reads go to the
//! partitions' current state and writes are applied partition by partition, so nothing is
//! atomic or causal. It exists to be fast and to prove that the checker can fail.

use crate::common::{
    check_read, effect_type, invalid_in_state, read_value, typed, PersistQueue, TxnBuffer,
};
use crate::{Msg as AnyMsg, NodeConfig, Params};
use causeway_core::crdt::{ArbTs, ObjType, Object, Op, Update};
use causeway_core::{
    Addr, ClientSession, Ctx, DcId, Error, Key, Lsn, NodeId, OpId, Request, Response, ServerNode,
    SessionId, Topology, TxnId, TxnKind,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const MUTATIONS: &[&str] = &[];

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    Read {
        req: u64,
        keys: Vec<(Key, ObjType)>,
    },
    ReadReply {
        req: u64,
        objects: Vec<(Key, Result<Object, Error>)>,
    },
    Write {
        req: u64,
        updates: Vec<(Key, Update, OpId)>,
    },
    WriteReply {
        req: u64,
        result: Result<(), Error>,
    },
    Replicate {
        ops: Vec<(Key, Op)>,
    },
}

fn wrap(m: Msg) -> AnyMsg {
    AnyMsg::Eventual(m)
}

/// A server node: the current object of every key of its partitions.
pub struct Node {
    config: NodeConfig,
    dc: DcId,
    store: BTreeMap<Key, Object>,
    queue: PersistQueue,
}

impl Node {
    /// Rebuilds the store by replaying the records (each a batch of applied ops).
    pub fn recover(config: NodeConfig, records: &[Vec<u8>]) -> Result<Node, String> {
        let dc = config.topology.dc_of(config.node);
        let mut node = Node {
            config,
            dc,
            store: BTreeMap::new(),
            queue: PersistQueue::starting_after(0),
        };
        for (i, record) in records.iter().enumerate() {
            let ops: Vec<(Key, Op)> = postcard::from_bytes(record)
                .map_err(|e| format!("eventual: record {i} is corrupt: {e}"))?;
            node.apply_all(&ops);
        }
        node.queue = PersistQueue::starting_after(records.len() as Lsn);
        Ok(node)
    }

    fn apply_all(&mut self, ops: &[(Key, Op)]) {
        for (key, op) in ops {
            let obj = self
                .store
                .entry(key.clone())
                .or_insert_with(|| Object::new(effect_type(&op.effect)));
            if obj.obj_type() == effect_type(&op.effect) {
                obj.apply(op);
            }
        }
    }

    fn read(&self, keys: Vec<(Key, ObjType)>) -> Vec<(Key, Result<Object, Error>)> {
        keys.into_iter()
            .map(|(k, t)| (k.clone(), typed(self.store.get(&k), t)))
            .collect()
    }

    /// Applies a client's writes with LWW stamp (clock, DC), persists, then acks the
    /// client and replicates to the other DCs.
    fn write(
        &mut self,
        ctx: &mut Ctx<AnyMsg>,
        from: Addr,
        req: u64,
        updates: Vec<(Key, Update, OpId)>,
    ) {
        let ts = ArbTs {
            primary: ctx.clock,
            secondary: u64::from(self.dc.0),
        };
        let mut ops = Vec::with_capacity(updates.len());
        for (key, update, id) in updates {
            let obj = match typed(self.store.get(&key), update.obj_type()) {
                Ok(o) => o,
                Err(e) => {
                    return ctx.send(
                        from,
                        wrap(Msg::WriteReply {
                            req,
                            result: Err(e),
                        }),
                    )
                }
            };
            let effect = match obj.prepare(&update) {
                Ok(e) => e,
                Err(e) => {
                    return ctx.send(
                        from,
                        wrap(Msg::WriteReply {
                            req,
                            result: Err(e),
                        }),
                    )
                }
            };
            let op = Op { id, ts, effect };
            self.apply_all(std::slice::from_ref(&(key.clone(), op.clone())));
            ops.push((key, op));
        }
        let mut then = vec![(
            from,
            wrap(Msg::WriteReply {
                req,
                result: Ok(()),
            }),
        )];
        for dc in self.config.topology.all_dcs().filter(|d| *d != self.dc) {
            let sibling = self.sibling(dc);
            then.push((
                Addr::Node(sibling),
                wrap(Msg::Replicate { ops: ops.clone() }),
            ));
        }
        let record = postcard::to_allocvec(&ops).expect("ops encode");
        self.queue.persist(ctx, record, then);
    }

    fn sibling(&self, dc: DcId) -> NodeId {
        let index = self.config.node.0 % self.config.topology.nodes_per_dc;
        NodeId(u32::from(dc.0) * self.config.topology.nodes_per_dc + index)
    }
}

impl ServerNode for Node {
    type Msg = AnyMsg;

    fn start(&mut self, _ctx: &mut Ctx<AnyMsg>) {}

    fn handle_message(&mut self, ctx: &mut Ctx<AnyMsg>, from: Addr, msg: AnyMsg) {
        let AnyMsg::Eventual(msg) = msg else {
            return; // another protocol's message: not ours to answer
        };
        match msg {
            Msg::Read { req, keys } => {
                let objects = self.read(keys);
                ctx.send(from, wrap(Msg::ReadReply { req, objects }));
            }
            Msg::Write { req, updates } => self.write(ctx, from, req, updates),
            Msg::Replicate { ops } => {
                self.apply_all(&ops);
                let record = postcard::to_allocvec(&ops).expect("ops encode");
                self.queue.persist(ctx, record, Vec::new());
            }
            Msg::ReadReply { .. } | Msg::WriteReply { .. } => {}
        }
    }

    fn handle_timeout(&mut self, _ctx: &mut Ctx<AnyMsg>) {}

    fn handle_persisted(&mut self, ctx: &mut Ctx<AnyMsg>, lsn: Lsn) {
        self.queue.persisted(ctx, lsn);
    }
}

/// What the session is waiting for.
#[derive(Debug)]
enum Pending {
    None,
    Read {
        keys: Vec<Key>,
        missing: usize,
        got: BTreeMap<Key, Result<Object, Error>>,
    },
    Commit {
        missing: usize,
        error: Option<Error>,
    },
}

/// A client session: buffers writes, reads partition by partition, writes at commit.
pub struct Session {
    id: SessionId,
    dc: DcId,
    topology: Topology,
    params: Params,
    seq: u64,
    txn: Option<TxnBuffer>,
    req: u64,
    pending: Pending,
    deadline: u64,
}

impl Session {
    pub fn new(id: SessionId, dc: DcId, topology: Topology, params: Params) -> Session {
        Session {
            id,
            dc,
            topology,
            params,
            seq: 0,
            txn: None,
            req: 0,
            pending: Pending::None,
            deadline: 0,
        }
    }

    fn node_for(&self, key: &Key) -> NodeId {
        self.topology
            .node_of(self.dc, self.topology.partition_of(key))
    }

    fn arm(&mut self, ctx: &mut Ctx<AnyMsg>) {
        self.req += 1;
        self.deadline = ctx.clock + self.params.request_timeout_ns;
        ctx.timer(self.params.request_timeout_ns);
    }

    fn begin(&mut self, ctx: &mut Ctx<AnyMsg>, kind: TxnKind) {
        if kind == TxnKind::Strong {
            let capability = "strong transactions".to_string();
            return ctx.reply(Response::Error(Error::Unsupported {
                protocol: "eventual".into(),
                capability,
            }));
        }
        self.seq += 1;
        let txn = TxnId {
            session: self.id,
            seq: self.seq,
        };
        self.txn = Some(TxnBuffer::new(txn, kind));
        ctx.reply(Response::Begun { txn });
    }

    fn read(&mut self, ctx: &mut Ctx<AnyMsg>, keys: Vec<(Key, ObjType)>) {
        if let Err(e) = check_read(&keys) {
            return ctx.reply(Response::Error(e));
        }
        let mut groups: BTreeMap<NodeId, Vec<(Key, ObjType)>> = BTreeMap::new();
        for (k, t) in &keys {
            groups
                .entry(self.node_for(k))
                .or_default()
                .push((k.clone(), *t));
        }
        self.arm(ctx);
        let order = keys.into_iter().map(|(k, _)| k).collect();
        self.pending = Pending::Read {
            keys: order,
            missing: groups.len(),
            got: BTreeMap::new(),
        };
        for (node, keys) in groups {
            ctx.send(
                Addr::Node(node),
                wrap(Msg::Read {
                    req: self.req,
                    keys,
                }),
            );
        }
        if groups_empty(&self.pending) {
            self.finish_read(ctx);
        }
    }

    fn finish_read(&mut self, ctx: &mut Ctx<AnyMsg>) {
        let Pending::Read { keys, got, .. } = std::mem::replace(&mut self.pending, Pending::None)
        else {
            return;
        };
        let buffer = self.txn.as_ref().expect("read inside a transaction");
        let mut values = Vec::with_capacity(keys.len());
        for key in keys {
            let obj = got.get(&key).cloned().expect("every key answered");
            match obj.and_then(|o| read_value(buffer, &key, o)) {
                Ok(v) => values.push(v),
                Err(e) => return ctx.reply(Response::Error(e)),
            }
        }
        ctx.reply(Response::Values(values));
    }

    fn commit(&mut self, ctx: &mut Ctx<AnyMsg>) {
        let buffer = self.txn.as_ref().expect("commit inside a transaction");
        let groups = buffer.group_by(|k| {
            self.topology
                .node_of(self.dc, self.topology.partition_of(k))
        });
        if groups.is_empty() {
            self.txn = None;
            return ctx.reply(Response::Committed);
        }
        self.arm(ctx);
        self.pending = Pending::Commit {
            missing: groups.len(),
            error: None,
        };
        for (node, updates) in groups {
            ctx.send(
                Addr::Node(node),
                wrap(Msg::Write {
                    req: self.req,
                    updates,
                }),
            );
        }
    }

    fn on_reply(&mut self, ctx: &mut Ctx<AnyMsg>, msg: Msg) {
        match (msg, &mut self.pending) {
            (Msg::ReadReply { req, objects }, Pending::Read { missing, got, .. })
                if req == self.req =>
            {
                got.extend(objects);
                *missing -= 1;
                if *missing == 0 {
                    self.finish_read(ctx);
                }
            }
            (Msg::WriteReply { req, result }, Pending::Commit { missing, error })
                if req == self.req =>
            {
                if let Err(e) = result {
                    error.get_or_insert(e);
                }
                *missing -= 1;
                if *missing == 0 {
                    let error = error.take();
                    self.pending = Pending::None;
                    self.txn = None;
                    ctx.reply(match error {
                        Some(e) => Response::Error(e),
                        None => Response::Committed,
                    });
                }
            }
            _ => {} // stale reply of a request that timed out
        }
    }
}

fn groups_empty(pending: &Pending) -> bool {
    matches!(pending, Pending::Read { missing: 0, .. })
}

impl ClientSession for Session {
    type Msg = AnyMsg;

    fn submit(&mut self, ctx: &mut Ctx<AnyMsg>, request: Request) {
        if !matches!(self.pending, Pending::None) {
            return ctx.reply(Response::Error(Error::InvalidState(
                "a request is already running".into(),
            )));
        }
        let in_txn = self.txn.is_some();
        match request {
            Request::Begin { kind } if !in_txn => self.begin(ctx, kind),
            Request::Read { keys } if in_txn => self.read(ctx, keys),
            Request::Update { key, update } if in_txn => {
                let pushed = self.txn.as_mut().expect("in txn").push(key, update);
                ctx.reply(pushed.map_or_else(Response::Error, |op| Response::Updated { op }));
            }
            Request::Commit if in_txn => self.commit(ctx),
            Request::Abort if in_txn => {
                self.txn = None;
                ctx.reply(Response::Aborted {
                    reason: "aborted by the client".into(),
                });
            }
            Request::Token | Request::Attach { .. } | Request::Barrier => {
                let capability = "causal tokens and barriers".to_string();
                ctx.reply(Response::Error(Error::Unsupported {
                    protocol: "eventual".into(),
                    capability,
                }));
            }
            other => ctx.reply(Response::Error(invalid_in_state(&other, in_txn))),
        }
    }

    fn handle_message(&mut self, ctx: &mut Ctx<AnyMsg>, _from: Addr, msg: AnyMsg) {
        let AnyMsg::Eventual(msg) = msg else {
            return; // another protocol's message
        };
        self.on_reply(ctx, msg);
    }

    fn handle_timeout(&mut self, ctx: &mut Ctx<AnyMsg>) {
        if matches!(self.pending, Pending::None) || ctx.clock < self.deadline {
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
