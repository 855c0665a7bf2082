//! Occult's client library (Fig. 3, Listing 3): the client's causal timestamp, the read
//! check with local retries and master fallback (§4.3), single-key writes at the master,
//! and PC-PSI transactions (§6.2): read phase, validation (read set pairwise consistent,
//! lock the write set, read set at least as recent as the overwrite set), commit.

use super::config::{Config, Flavor, Mutation, Shards, OVERWRITES_MAX};
use super::cts::{Bound, Cts, Layout};
use super::msg::{Locked, Msg, ReadItem, Refusal, Written};
use crate::kit::session::{ClientProtocol, SessionCore};
use crate::kit::txn::read_value;
use causeway_core::{
    Addr, Ctx, Error, Key, Nanos, NodeId, ObjType, OpId, Response, TxnKind, Update,
};
use std::collections::BTreeMap;

/// Delay before the `attempt`-th read of a key (§4.3: 0, 1, 2, 4 ms with a 1 ms `base`),
/// at most 8 `base` (a master re-read while a prepared txn holds the shard).
fn backoff_ns(base: Nanos, attempt: u8) -> Nanos {
    match attempt {
        0 | 1 => 0,
        a => base << (a - 2).min(3),
    }
}

/// A read-set or overwrite-set element (Listing 3 `Elem`).
#[derive(Clone, Debug)]
struct Elem {
    shard: u32,
    dc: usize,
    deps: Cts,
    ss: u64,
}

/// One key of a running read: its answer, or when to ask again.
#[derive(Clone, Debug)]
struct KeyRead {
    obj_type: ObjType,
    attempt: u8,
    retry_at: Option<Nanos>,
    got: Option<ReadItem>,
}

#[derive(Debug, Default)]
enum Pending {
    #[default]
    None,
    Read {
        order: Vec<Key>,
        keys: BTreeMap<Key, KeyRead>,
    },
    Write {
        id: OpId,
        shard: u32,
        dc: usize,
    },
    Writes {
        missing: usize,
        error: Option<Error>,
    },
    Lock(Locking),
    Commit {
        missing: usize,
        participants: Vec<NodeId>,
    },
}

/// Validation's second step: locks asked of each master node.
#[derive(Debug)]
struct Locking {
    coord: NodeId,
    groups: BTreeMap<NodeId, Vec<(Key, Update, OpId)>>,
    locked: BTreeMap<NodeId, Vec<Locked>>,
    tries: BTreeMap<NodeId, u32>,
    retry_at: BTreeMap<NodeId, Nanos>,
}

pub struct Client {
    flavor: Flavor,
    mutation: Mutation,
    sect: Config,
    shards: Shards,
    layout: Layout,
    /// The client's causal timestamp (Fig. 3 `cli_ts`).
    cts: Cts,
    /// `cli_ts_save` of Listing 3, restored on abort.
    saved: Option<Cts>,
    read_set: Vec<Elem>,
    pending: Pending,
    overwrites: Vec<(OpId, Option<OpId>)>,
}

impl Client {
    pub fn new(flavor: Flavor, mutation: Mutation, sect: Config, shards: Shards) -> Client {
        let layout = sect.layout(shards.dcs());
        Client {
            flavor,
            mutation,
            cts: layout.zero(),
            layout,
            sect,
            shards,
            saved: None,
            read_set: Vec::new(),
            pending: Pending::None,
            overwrites: Vec::new(),
        }
    }

    fn note_overwrite(&mut self, id: OpId, overwrote: Option<OpId>) {
        if self.overwrites.len() < OVERWRITES_MAX {
            self.overwrites.push((id, overwrote));
        }
    }

    fn local(&self, core: &SessionCore, shard: u32) -> NodeId {
        self.shards.node(core.dc, shard)
    }

    fn master(&self, shard: u32) -> NodeId {
        self.shards.node(self.shards.master_dc(shard), shard)
    }

    fn dc_of(&self, shard: u32) -> usize {
        usize::from(self.shards.master_dc(shard).0)
    }

    /// Listing 3 `validate`: every x of `s1` is at least as recent as every y of `s2`
    /// says about x's shard.
    fn validate(s1: &[Elem], s2: &[Elem]) -> bool {
        let bound = Bound::of(s2.iter().map(|y| &y.deps));
        s1.iter().all(|x| x.ss >= bound.get(x.shard, x.dc))
    }

    fn abort(
        &mut self,
        core: &mut SessionCore,
        ctx: &mut Ctx<Msg>,
        reason: &str,
        nodes: &[NodeId],
    ) {
        let txn = core.txn_id();
        for n in nodes {
            ctx.send(Addr::Node(*n), Msg::Release { txn });
        }
        if let Some(saved) = self.saved.take() {
            self.cts = saved; // Listing 3 l.35
        }
        self.pending = Pending::None;
        self.read_set.clear();
        core.txn = None;
        let reason = reason.to_string();
        core.answer(ctx, Response::Aborted { reason });
    }

    fn finish(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>, response: Response) {
        self.pending = Pending::None;
        self.saved = None;
        self.read_set.clear();
        core.txn = None;
        core.answer(ctx, response);
    }

    fn send_read(&self, core: &SessionCore, ctx: &mut Ctx<Msg>, key: &Key, r: &KeyRead) {
        let shard = self.shards.of(key);
        let fallback = r.attempt > self.sect.read_retries;
        let node = if fallback {
            self.master(shard)
        } else {
            self.local(core, shard)
        };
        let msg = Msg::Read {
            req: core.req(),
            keys: vec![(key.clone(), r.obj_type)],
            attempt: if fallback {
                r.attempt - 1 - self.sect.read_retries
            } else {
                r.attempt
            },
            fallback,
        };
        ctx.send(Addr::Node(node), msg);
    }

    /// Fig. 3 l.13-14: a slave's answer is stale if its shardstamp is below the client's
    /// entry for the shard (never under `eventual-ms` or the `no-read-check` mutation).
    /// Fig. 3 exempts masters; we check a master too while a prepared txn holds the shard
    /// (`ReadItem::held`): a client that depends on that txn through a write another
    /// master applied must not read the old version here (found by the simulator).
    fn stale(&self, item: &ReadItem) -> bool {
        let exempt = item.master && !item.held;
        if self.flavor == Flavor::EventualMs || self.mutation.no_read_check || exempt {
            return false;
        }
        let shard = self.shards.of(&item.key);
        item.obj.is_ok() && item.ss < self.cts.get(shard, self.dc_of(shard))
    }

    fn on_read_reply(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>, items: Vec<ReadItem>) {
        let clock = ctx.clock;
        let mut retry_now = Vec::new();
        let (retries, base) = (self.sect.read_retries, self.sect.retry_backoff_ns);
        for item in items {
            let stale = self.stale(&item);
            let Pending::Read { keys, .. } = &mut self.pending else {
                return;
            };
            let Some(r) = keys.get_mut(&item.key).filter(|r| r.got.is_none()) else {
                continue;
            };
            if !stale {
                r.got = Some(item);
                continue;
            }
            r.attempt = r.attempt.saturating_add(1);
            if r.attempt == retries.saturating_add(1) {
                retry_now.push((item.key.clone(), r.clone())); // to the master at once
            } else {
                r.retry_at = Some(clock + backoff_ns(base, r.attempt));
            }
        }
        for (key, r) in retry_now {
            self.send_read(core, ctx, &key, &r);
        }
        self.wake(core, ctx);
        self.maybe_finish_read(core, ctx);
    }

    fn maybe_finish_read(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>) {
        let Pending::Read { keys, .. } = &self.pending else {
            return;
        };
        if keys.values().any(|r| r.got.is_none()) {
            return;
        }
        let Pending::Read { order, mut keys } = std::mem::take(&mut self.pending) else {
            return;
        };
        let mut values = Vec::with_capacity(order.len());
        for key in order {
            // A key asked twice in one READ has one answer (and one read-set entry).
            let Some(item) = keys.remove(&key).and_then(|r| r.got) else {
                let again = values
                    .iter()
                    .find(|v: &&causeway_core::ReadValue| v.key == key);
                let v = again.cloned().expect("a key answered once is answered");
                values.push(v);
                continue;
            };
            let shard = self.shards.of(&key);
            let obj = match item.obj {
                Ok(o) => o,
                Err(e) => return core.answer(ctx, Response::Error(e)),
            };
            if let Some(deps) = item.deps {
                self.cts.merge(&self.layout, &deps); // Listing 3 l.24
                self.read_set.push(Elem {
                    shard,
                    dc: self.dc_of(shard),
                    deps,
                    ss: item.ss,
                });
            }
            match read_value(core.buffer(), key, obj, core.observed) {
                Ok(v) => values.push(v),
                Err(e) => return core.answer(ctx, Response::Error(e)),
            }
        }
        core.answer(ctx, Response::Values(values));
    }

    /// Fig. 3 `write` at the master: one round trip, the client's timestamp as deps.
    fn write_single(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>) {
        let (key, update, id) = core.buffer().updates[0].clone();
        let shard = self.shards.of(&key);
        let dc = self.dc_of(shard);
        let deps = (self.flavor == Flavor::Occult).then(|| self.cts.clone());
        let msg = Msg::Write {
            req: core.start_request(ctx),
            key,
            update,
            id,
            deps,
            max_ss: self.cts.max_in(dc),
        };
        ctx.send(Addr::Node(self.master(shard)), msg);
        self.pending = Pending::Write { id, shard, dc };
    }

    fn on_write_reply(
        &mut self,
        core: &mut SessionCore,
        ctx: &mut Ctx<Msg>,
        result: Result<Written, Error>,
    ) {
        match std::mem::take(&mut self.pending) {
            Pending::Write { id, shard, dc } => match result {
                Ok(w) => {
                    if let Some(prev) = &w.prev {
                        self.cts.merge(&self.layout, prev); // see Written::prev
                    }
                    self.cts.update(&self.layout, shard, dc, w.ss); // Fig. 3 l.7
                    self.note_overwrite(id, w.overwrote);
                    self.finish(core, ctx, Response::Committed);
                }
                Err(e) => self.finish(core, ctx, Response::Error(e)),
            },
            Pending::Writes { missing, error } => {
                let error = error.or(result.err());
                if missing > 1 {
                    self.pending = Pending::Writes {
                        missing: missing - 1,
                        error,
                    };
                    return;
                }
                let response = error.map_or(Response::Committed, Response::Error);
                self.finish(core, ctx, response);
            }
            other => self.pending = other,
        }
    }

    /// `eventual-ms`: every write to its master, nothing atomic (Redis Cluster).
    fn write_all(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>) {
        let req = core.start_request(ctx);
        let updates = core.buffer().updates.clone();
        self.pending = Pending::Writes {
            missing: updates.len(),
            error: None,
        };
        for (key, update, id) in updates {
            let shard = self.shards.of(&key);
            let msg = Msg::Write {
                req,
                key,
                update,
                id,
                deps: None,
                max_ss: 0,
            };
            ctx.send(Addr::Node(self.master(shard)), msg);
        }
    }

    /// Validation, step two (§6.2): lock the write set at the masters.
    fn lock(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>) {
        let mut groups: BTreeMap<NodeId, Vec<(Key, Update, OpId)>> = BTreeMap::new();
        for (k, u, id) in core.buffer().updates.clone() {
            let shard = self.shards.of(&k);
            groups
                .entry(self.master(shard))
                .or_default()
                .push((k, u, id));
        }
        // The coordinator participant (§7): a master in our DC if any, for latency.
        let dc = core.dc;
        let topo = &core.topology;
        let coord = groups
            .keys()
            .copied()
            .find(|n| topo.dc_of(*n) == dc)
            .unwrap_or_else(|| *groups.keys().next().expect("writes"));
        core.start_request(ctx);
        let nodes: Vec<NodeId> = groups.keys().copied().collect();
        self.pending = Pending::Lock(Locking {
            coord,
            groups,
            locked: BTreeMap::new(),
            tries: BTreeMap::new(),
            retry_at: BTreeMap::new(),
        });
        for n in nodes {
            self.send_prepare(core, ctx, n);
        }
    }

    fn send_prepare(&self, core: &SessionCore, ctx: &mut Ctx<Msg>, node: NodeId) {
        let Pending::Lock(l) = &self.pending else {
            return;
        };
        let dc = usize::from(core.topology.dc_of(node).0);
        let msg = Msg::Prepare {
            req: core.req(),
            txn: core.txn_id(),
            coord: l.coord,
            writes: l.groups[&node].clone(),
            max_ss: self.cts.max_in(dc),
        };
        ctx.send(Addr::Node(node), msg);
    }

    fn on_prepare_reply(
        &mut self,
        core: &mut SessionCore,
        ctx: &mut Ctx<Msg>,
        from: NodeId,
        result: Result<Vec<Locked>, Refusal>,
    ) {
        let (lock_retries, backoff) = (self.sect.lock_retries, self.sect.lock_backoff_ns);
        let Pending::Lock(l) = &mut self.pending else {
            return;
        };
        // On abort, every node asked is released: a PREPARE still in flight locks
        // before our RELEASE arrives on the same FIFO link, and RELEASE undoes it.
        let held: Vec<NodeId> = l.groups.keys().copied().collect();
        match result {
            Ok(locked) => {
                l.locked.insert(from, locked);
            }
            Err(Refusal::Locked) => {
                let tries = l.tries.entry(from).or_insert(0);
                *tries += 1;
                if *tries > lock_retries {
                    return self.abort(core, ctx, "lock: a write-set shard stayed locked", &held);
                }
                l.retry_at.insert(from, ctx.clock + backoff);
                return self.wake(core, ctx);
            }
            Err(Refusal::Fenced) => {
                return self.abort(
                    core,
                    ctx,
                    "terminated: the coordinator terminated the txn (§7)",
                    &held,
                )
            }
            Err(Refusal::Error(e)) => {
                let txn = core.txn_id();
                for n in held {
                    ctx.send(Addr::Node(n), Msg::Release { txn });
                }
                if let Some(saved) = self.saved.take() {
                    self.cts = saved;
                }
                return self.finish(core, ctx, Response::Error(e));
            }
        }
        if l.locked.len() == l.groups.len() {
            self.validate_and_commit(core, ctx);
        }
    }

    /// Validation, step three, then the commit phase (§6.2, Listing 3 l.49-62).
    fn validate_and_commit(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>) {
        let Pending::Lock(l) = std::mem::take(&mut self.pending) else {
            return;
        };
        let participants: Vec<NodeId> = l.locked.keys().copied().collect();
        let mut ow_set = Vec::new();
        for locked in l.locked.values().flatten() {
            let dc = self.dc_of(locked.shard);
            self.cts.update(&self.layout, locked.shard, dc, locked.ss); // l.51
            ow_set.push(Elem {
                shard: locked.shard,
                dc,
                deps: locked.deps.clone(),
                ss: 0,
            });
        }
        let skip = self.mutation.skip_overwrite_validation;
        if !skip && !Self::validate(&self.read_set, &ow_set) {
            return self.abort(
                core,
                ctx,
                "validation-overwrite-set: read set older than the overwrite set",
                &participants,
            );
        }
        // ts_T also covers the overwrite set: T depends on what it overwrites (§6.2,
        // "Σ_ow captures the updates of all transactions that T would depend on"). §6.3's
        // proof needs a ww edge T* -> T to give ts_T >= ts_T*; Listing 3 as printed merges
        // only the read set, and the simulator finds the missed-effect cycles that leaves.
        for y in &ow_set {
            self.cts.merge(&self.layout, &y.deps);
        }
        let ids: BTreeMap<&Key, Option<OpId>> = l
            .locked
            .values()
            .flatten()
            .map(|x| (&x.key, x.overwrote))
            .collect();
        // The first write of a key overwrote the master's version; later writes of the
        // same key in this txn overwrote the txn's own previous one.
        let mut last: BTreeMap<Key, Option<OpId>> = BTreeMap::new();
        for (k, _, id) in l.groups.values().flatten() {
            let prev = last.get(k).copied().unwrap_or_else(|| ids[k]);
            self.note_overwrite(*id, prev);
            last.insert(k.clone(), Some(*id));
        }
        let msg = Msg::Commit {
            req: core.req(),
            txn: core.txn_id(),
            ts: self.cts.clone(),
            participants: participants.clone(),
        };
        ctx.send(Addr::Node(l.coord), msg);
        self.pending = Pending::Commit {
            missing: participants.len(),
            participants,
        };
    }

    fn on_done(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>) {
        let Pending::Commit { missing, .. } = &mut self.pending else {
            return;
        };
        *missing -= 1;
        if *missing == 0 {
            self.finish(core, ctx, Response::Committed); // l.61: cli_ts = ts_T already
        }
    }

    fn on_refused(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>) {
        let Pending::Commit { participants, .. } = std::mem::take(&mut self.pending) else {
            return;
        };
        self.abort(
            core,
            ctx,
            "terminated: the coordinator terminated the txn (§7)",
            &participants,
        );
    }

    /// Re-sends due reads and lock requests.
    fn wake(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>) {
        let clock = ctx.clock;
        match &mut self.pending {
            Pending::Read { keys, .. } => {
                let due: Vec<(Key, KeyRead)> = keys
                    .iter_mut()
                    .filter(|(_, r)| r.retry_at.is_some_and(|t| t <= clock))
                    .map(|(k, r)| {
                        r.retry_at = None;
                        (k.clone(), r.clone())
                    })
                    .collect();
                for (k, r) in due {
                    self.send_read(core, ctx, &k, &r);
                }
            }
            Pending::Lock(l) => {
                let due: Vec<NodeId> = l
                    .retry_at
                    .iter()
                    .filter(|(_, t)| **t <= clock)
                    .map(|(n, _)| *n)
                    .collect();
                for n in &due {
                    l.retry_at.remove(n);
                }
                for n in due {
                    self.send_prepare(core, ctx, n);
                }
            }
            _ => {}
        }
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
        self.saved = Some(self.cts.clone()); // Listing 3 l.7
        self.read_set.clear();
        let txn = core.open_txn(kind);
        core.answer(ctx, Response::Begun { txn });
    }

    fn read(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>, keys: Vec<(Key, ObjType)>) {
        core.start_request(ctx);
        let mut map = BTreeMap::new();
        let mut order = Vec::with_capacity(keys.len());
        for (k, t) in keys {
            order.push(k.clone());
            let r = KeyRead {
                obj_type: t,
                attempt: 0,
                retry_at: None,
                got: None,
            };
            map.entry(k).or_insert(r);
        }
        // First attempts go grouped per local node, one message each.
        let mut groups: BTreeMap<NodeId, Vec<(Key, ObjType)>> = BTreeMap::new();
        for (k, r) in &map {
            let node = self.local(core, self.shards.of(k));
            groups
                .entry(node)
                .or_default()
                .push((k.clone(), r.obj_type));
        }
        self.pending = Pending::Read { order, keys: map };
        if groups.is_empty() {
            return self.maybe_finish_read(core, ctx);
        }
        for (node, keys) in groups {
            let msg = Msg::Read {
                req: core.req(),
                keys,
                attempt: 0,
                fallback: false,
            };
            ctx.send(Addr::Node(node), msg);
        }
    }

    fn commit(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>) {
        let updates = core.buffer().updates.len();
        if self.flavor == Flavor::EventualMs {
            if updates == 0 {
                return self.finish(core, ctx, Response::Committed);
            }
            return self.write_all(core, ctx);
        }
        if !Self::validate(&self.read_set, &self.read_set) {
            return self.abort(
                core,
                ctx,
                "validation-read-set: not pairwise consistent",
                &[],
            ); // l.42-43
        }
        match updates {
            0 => self.finish(core, ctx, Response::Committed),
            1 if self.read_set.is_empty() => self.write_single(core, ctx),
            _ => self.lock(core, ctx),
        }
    }

    fn abort(&mut self, _core: &mut SessionCore, _ctx: &mut Ctx<Msg>) {
        if let Some(saved) = self.saved.take() {
            self.cts = saved;
        }
        self.read_set.clear();
        self.pending = Pending::None;
    }

    /// The client's causal timestamp, for a client that moves on (no server state: §3,
    /// clients need not be sticky).
    fn token(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>) {
        let bytes = postcard::to_allocvec(&self.cts).expect("cts encodes");
        core.answer(ctx, Response::Token(bytes));
    }

    /// Adopts a causal timestamp at once: later reads check against it (no wait).
    fn attach(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>, token: Vec<u8>) {
        match postcard::from_bytes::<Cts>(&token) {
            Ok(c) if c.groups.len() == self.cts.groups.len() => {
                self.cts.merge(&self.layout, &c);
                core.answer(ctx, Response::Attached);
            }
            _ => {
                let e = Error::BadToken("not an occult token of this cluster".into());
                core.answer(ctx, Response::Error(e));
            }
        }
    }

    /// The causal timestamps merge (Listing 1 `mergeCTS`), as an attached token's do.
    fn join_past(&mut self, _core: &mut SessionCore, other: &Client) {
        self.cts.merge(&self.layout, &other.cts);
    }

    fn on_message(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>, from: Addr, msg: Msg) {
        if let Msg::KeysListed(answer) = msg {
            return crate::kit::keys::answered(core, ctx, answer);
        }
        let node = match from {
            Addr::Node(n) => n,
            _ => return,
        };
        match msg {
            Msg::ReadReply { req, items } if core.is_current(req) => {
                self.on_read_reply(core, ctx, items)
            }
            Msg::WriteReply { req, result } if core.is_current(req) => {
                self.on_write_reply(core, ctx, result)
            }
            Msg::PrepareReply { req, result } if core.is_current(req) => {
                self.on_prepare_reply(core, ctx, node, result)
            }
            Msg::Done { req, .. } if core.is_current(req) => self.on_done(core, ctx),
            Msg::Refused { req, .. } if core.is_current(req) => self.on_refused(core, ctx),
            _ => {}
        }
    }

    fn on_timeout(&mut self, _core: &mut SessionCore) {
        self.pending = Pending::None;
        self.read_set.clear();
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        match &self.pending {
            Pending::Read { keys, .. } => keys.values().filter_map(|r| r.retry_at).min(),
            Pending::Lock(l) => l.retry_at.values().copied().min(),
            _ => None,
        }
    }

    fn on_wake(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>) {
        self.wake(core, ctx);
    }

    fn take_overwrites(&mut self) -> Vec<(OpId, Option<OpId>)> {
        std::mem::take(&mut self.overwrites)
    }
}
