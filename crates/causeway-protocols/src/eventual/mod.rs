//! `eventual`: the baseline every paper measures against. One version per key, visible at
//! once; last writer wins by (origin clock, origin DC); updates replicated asynchronously
//! to every other DC. A transaction is only a group of operations: reads go to the
//! partitions' current state and writes are applied partition by partition, so nothing is
//! atomic across partitions or causal. It exists to be fast and to prove that the checker
//! can fail. Inside one partition a transaction's writes apply all or none: every effect
//! is prepared (type checks included) before any is applied.
//!
//! Replication (`repl.rs`): each node's writes form an acknowledged stream per sibling
//! (`kit::repl`), pushed once durable, rewound for a sibling that lags, so a lost message
//! (a crash, a reset connection) is sent again.
//!
//! State transfer (`transfer.rs`, issue 15): a sibling back after our log dropped writes
//! it lacks gets our whole store and applied vector; it replaces its store by it and
//! re-applies what it holds beyond it (op-based objects cannot be merged).
//!
//! Log compaction (issue 15, our decision like the other protocols'): a checkpoint at a
//! quiescent moment (every record durable) is the store, the replication log and what
//! the streams delivered ([`Record::State`]), standing for every record before it.

mod repl;
mod sweeps;
mod transfer;

pub use repl::ReplOps;
pub use transfer::keeps_for;

use crate::kit::durability::Durability;
use crate::kit::keys::{KeyOrder, ListAsk};
use crate::kit::repl::{Received, ReplLog, Siblings};
use crate::kit::session::{ClientProtocol, Session, SessionCore};
use crate::kit::timers::Timers;
use crate::kit::txn::{effect_type, prepare_effects, read_value, typed_state};
use crate::params::{NodeConfig, Params};
use crate::registry::{Guarantee, Protocol, Requirements};
use causeway_core::crdt::{ArbTs, ObjType, Object, Op, Update};
use causeway_core::{
    Addr, Ctx, DcId, Error, Key, Lsn, Nanos, NodeId, OpId, Response, ServerNode, SessionId,
    Topology, TxnKind, Vc,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The `eventual` protocol (registry entry).
pub struct Eventual;

mutations! {
    /// Which deliberately broken variant runs, decoded from `Params::mutation`.
    pub struct Mutation for "eventual" {
        /// A node never sends a state transfer, so a sibling back after the log dropped
        /// what it lacks stays behind (caught by `long-outage` with the log max 0).
        no_state_transfer = "no-state-transfer",
    }
    /// Deliberately broken variants the simulator and checker must catch.
    pub const MUTATIONS;
}

/// `[protocols.eventual]`: the replication streams' catch-up (`repl.rs`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// How long a sibling's acknowledgement may lag while it talks before our stream to
    /// it rewinds to what it acknowledged.
    pub lag_grace_ns: Nanos,
    /// A sibling silent this long no longer holds our log back once the log holds more
    /// than `silent_sibling_log_max` writes (it then gets a state transfer when it
    /// returns, `transfer.rs`), unless we are its keeper (`transfer::keeps_for`).
    pub silent_sibling_ns: Nanos,
    pub silent_sibling_log_max: usize,
    /// A keeper keeps its writes for a silent sibling until its log holds this many;
    /// past it the sibling is presumed failed anyway (a DC failed for good must not
    /// hold the log for ever), and if both sides of a cut dropped what the other lacks
    /// they cannot converge (`transfer_refused_keys` samples).
    pub keeper_log_max: usize,
    /// A state transfer to a sibling is not started again sooner than this.
    pub transfer_retry_ns: Nanos,
}

/// Writes a keeper's log holds for a silent sibling at most (`Config::keeper_log_max`).
pub const KEEPER_LOG_MAX: usize = 1 << 21;
/// Samples kept between two `take_samples` at most.
const SAMPLES_MAX: usize = 4_096;

impl Default for Config {
    fn default() -> Config {
        Config {
            lag_grace_ns: crate::cure::LAG_GRACE_NS,
            silent_sibling_ns: 60_000_000_000,
            silent_sibling_log_max: crate::kit::repl::SILENT_SIBLING_LOG_MAX,
            keeper_log_max: KEEPER_LOG_MAX,
            transfer_retry_ns: crate::kit::transfer::TRANSFER_RETRY_NS,
        }
    }
}

impl Protocol for Eventual {
    const NAME: &'static str = "eventual";
    const GUARANTEE: Guarantee = Guarantee::Convergence;
    const MUTATIONS: &'static [&'static str] = MUTATIONS;
    const SWEEPS: &'static [crate::sweep::Sweep] = sweeps::SWEEPS;
    const REQUIREMENTS: Requirements = Requirements {
        full_replication: true,
        failed_dc_writes_may_vanish: true,
        uniform_barrier: false,
        dc_failures: true,
        token_moves: false,
        final_registers: false,
        atomic_unknowns: false,
        causal_commits_without_faults: true,
    };
    type Msg = Msg;
    type Config = Config;
    type Node = Node;
    type Session = Session<Client>;

    fn recover(config: &NodeConfig, c: &Config, records: &[Vec<u8>]) -> Result<Node, String> {
        Node::recover_with(config.clone(), c.clone(), records)
    }

    fn session(
        id: SessionId,
        dc: DcId,
        topology: &Topology,
        params: &Params,
        _: &Config,
    ) -> Result<Session<Client>, String> {
        // A session has no broken variant, but refuses a name the nodes would refuse.
        Mutation::parse(params.mutation.as_deref())?;
        let core = SessionCore::new(Self::NAME, id, dc, topology.clone(), params.clone());
        Ok(Session::new(core, Client::default()))
    }
}

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
    /// A sibling's acknowledgements (what it holds durably of every stream) and maybe a
    /// piece of its own stream (`repl.rs`).
    Repl {
        restarted: bool,
        acks: Vc,
        /// Shared by every sibling that gets the piece, and encoded once (`kit::wire`).
        stream: Option<crate::kit::wire::SharedStream<ReplOps>>,
    },
    /// A chunk of a state transfer to a sibling that lacks writes our log dropped
    /// (`transfer.rs`).
    Transfer {
        chunk: transfer::Chunk,
    },
    /// `Request::ListKeys`, session to the node listing a partition (`kit::keys`).
    ListKeys(crate::kit::keys::ListAsk),
    /// The answer to `ListKeys`.
    KeysListed(crate::kit::keys::ListAnswer),
}

/// What a node persists. `Ops` and `Checkpoint` are an earlier build's records (no
/// streams), still read; this build writes the others.
#[derive(Debug, Serialize, Deserialize)]
pub enum Record {
    Ops(Vec<(Key, Op)>),
    Checkpoint(Vec<(Key, Object)>),
    /// One of our writes, numbered in our stream.
    Write(ReplOps),
    /// A piece of `origin`'s stream: we now have it up to `upto`.
    Remote {
        origin: DcId,
        upto: u64,
        writes: Vec<ReplOps>,
    },
    /// A checkpoint standing for every record before it (an earlier build's: no
    /// `recent` writes).
    State(Box<Checkpoint>),
    /// A chunk of a state transfer from `from`, buffered until the last.
    TransferChunk {
        from: DcId,
        chunk: transfer::Chunk,
    },
    /// The transfer's last chunk arrived and it was installed (replay installs it again).
    TransferDone {
        from: DcId,
        id: u64,
    },
    /// A checkpoint standing for every record before it, with the recent writes received.
    Snapshot {
        ck: Box<Checkpoint>,
        recent: ReplLog<ReplOps>,
    },
}

/// What replaying a node's records up to a quiescent moment gives.
#[derive(Debug, Serialize, Deserialize)]
pub struct Checkpoint {
    store: Vec<(Key, Object)>,
    seq: u64,
    log: ReplLog<ReplOps>,
    received: Received,
    durable_have: Vec<u64>,
}

/// What waits for a durable record.
#[derive(Debug)]
pub enum After {
    /// `origin`'s stream is durable here up to `upto`.
    Have { origin: DcId, upto: u64 },
    /// Our own stream is durable up to here (only durable writes replicate).
    Own(u64),
    /// A state transfer's install at this applied vector is durable.
    Installed(Vc),
}

impl Record {
    fn encode(&self) -> Vec<u8> {
        postcard::to_allocvec(self).expect("an eventual record always encodes")
    }
}

/// A server node: the current object of every key of its partitions.
pub struct Node {
    config: NodeConfig,
    section: Config,
    dc: DcId,
    store: BTreeMap<Key, Object>,
    /// The store's keys in listing order (`kit::keys`), a cache.
    listed: KeyOrder,
    durability: Durability<Msg, After>,
    /// Keys read and ops applied since the last `take_work` (CPU model).
    work: u64,
    /// Our stream: the last write's number, and the last durable one.
    seq: u64,
    durable_seq: u64,
    log: ReplLog<ReplOps>,
    sibs: Siblings,
    received: Received,
    durable_have: Vec<u64>,
    /// The last `RECENT_PER_ORIGIN_MAX` writes received of each other origin: what an
    /// install re-applies when the image lags us on that origin (`transfer.rs`).
    recent: ReplLog<ReplOps>,
    /// State transfers to siblings and from them (`transfer.rs`).
    transfers: transfer::Transfers,
    /// The `no-state-transfer` mutation.
    no_state_transfer: bool,
    samples: Vec<(&'static str, u64)>,
    /// Siblings to tell we restarted (they resend from what we acknowledge).
    announce: BTreeSet<DcId>,
    timers: Timers<()>,
    clock: Nanos,
}

impl Node {
    /// Rebuilds the store by replaying the records, with the default settings.
    pub fn recover(config: NodeConfig, records: &[Vec<u8>]) -> Result<Node, String> {
        Node::recover_with(config, Config::default(), records)
    }

    /// Rebuilds the store, our stream and what we received by replaying the records.
    pub fn recover_with(
        config: NodeConfig,
        section: Config,
        records: &[Vec<u8>],
    ) -> Result<Node, String> {
        let dc = config.topology.dc_of(config.node);
        let dcs = usize::from(config.topology.dcs);
        let no_state_transfer =
            Mutation::parse(config.params.mutation.as_deref())?.no_state_transfer;
        let mut node = Node {
            sibs: Siblings::new(dc, config.topology.all_dcs()),
            config,
            section,
            dc,
            store: BTreeMap::new(),
            listed: KeyOrder::default(),
            durability: Durability::starting_after(records.len() as Lsn),
            work: 0,
            seq: 0,
            durable_seq: 0,
            log: ReplLog::default(),
            received: Received::new(dc, dcs),
            durable_have: vec![0; dcs],
            recent: ReplLog::default(),
            transfers: transfer::Transfers::default(),
            no_state_transfer,
            samples: Vec::new(),
            announce: BTreeSet::new(),
            timers: Timers::default(),
            clock: 0,
        };
        for (i, record) in records.iter().enumerate() {
            let record: Record = postcard::from_bytes(record)
                .map_err(|e| format!("eventual: record {i} is corrupt: {e}"))?;
            node.replay(record);
        }
        // Chunks of a transfer whose end was never persisted: the sender sends it again.
        node.transfers.incoming.clear();
        if !records.is_empty() {
            node.announce = node.sibs.ids().into_iter().collect();
        }
        Ok(node)
    }

    fn replay(&mut self, record: Record) {
        match record {
            Record::Ops(ops) => self.apply_all(&ops),
            Record::Checkpoint(objects) => {
                self.store = objects.into_iter().collect();
                self.listed.invalidate();
            }
            Record::Write(w) => {
                self.seq = self.seq.max(w.seq);
                self.durable_seq = self.seq;
                self.apply_all(&w.ops);
                self.log.add(self.dc, w);
            }
            Record::Remote {
                origin,
                upto,
                writes,
            } => {
                writes.iter().for_each(|w| self.apply_all(&w.ops));
                self.received.recovered(origin, upto);
                self.keep_recent(origin, writes);
                let have = &mut self.durable_have[usize::from(origin.0)];
                *have = (*have).max(upto);
            }
            Record::State(ck) => self.restore(*ck, ReplLog::default()),
            Record::Snapshot { ck, recent } => self.restore(*ck, recent),
            Record::TransferChunk { from, chunk } => self.transfers.replay_chunk(from, chunk),
            Record::TransferDone { from, id } => self.replay_transfer_done(from, id),
        }
    }

    /// Replays a checkpoint (the first record of a compacted log).
    fn restore(&mut self, ck: Checkpoint, recent: ReplLog<ReplOps>) {
        self.store = ck.store.into_iter().collect();
        self.listed.invalidate();
        self.seq = self.seq.max(ck.seq);
        self.durable_seq = self.seq;
        self.log = ck.log;
        self.received = ck.received;
        self.durable_have = ck.durable_have;
        self.recent = recent;
    }

    fn apply_all(&mut self, ops: &[(Key, Op)]) {
        self.work += ops.len() as u64;
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

    /// `Request::ListKeys` (`kit::keys`): a page of one of this node's partitions, from
    /// the store as it is (remote writes applied so far).
    fn on_list_keys(&mut self, ctx: &mut Ctx<Msg>, from: Addr, ask: ListAsk) {
        let topo = &self.config.topology;
        let held = topo.node_of(self.dc, ask.partition) == self.config.node;
        let list = held.then(|| {
            let (store, p) = (&self.store, ask.partition.0);
            let all = || store.keys().map(|k| (topo.partition_of(k).0, k)).collect();
            let shown = |k: &Key| store.get(k).and_then(Object::shown_type);
            self.listed
                .list(store.len(), all, shown, (p, ask.from, ask.max))
        });
        let answer = crate::kit::keys::answer(&ask, topo.partitions, list);
        ctx.send(from, Msg::KeysListed(answer));
    }

    fn read(&self, keys: Vec<(Key, ObjType)>) -> Vec<(Key, Result<Object, Error>)> {
        keys.into_iter()
            .map(|(k, t)| (k.clone(), typed_state(self.store.get(&k), t)))
            .collect()
    }

    /// Applies a client's writes with LWW stamp (clock, DC), all or none; persists, then
    /// acks the client and replicates to the other DCs.
    fn write(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: Addr,
        req: u64,
        updates: Vec<(Key, Update, OpId)>,
    ) {
        let ts = ArbTs {
            primary: ctx.clock,
            secondary: u64::from(self.dc.0),
        };
        let ops = match prepare_effects(|k| self.store.get(k), ts, &updates) {
            Ok(ops) => ops,
            Err(e) => {
                return ctx.send(
                    from,
                    Msg::WriteReply {
                        req,
                        result: Err(e),
                    },
                )
            }
        };
        self.apply_all(&ops);
        let then = vec![(
            from,
            Msg::WriteReply {
                req,
                result: Ok(()),
            },
        )];
        self.seq += 1;
        let w = ReplOps { seq: self.seq, ops };
        self.log.add(self.dc, w.clone());
        self.durability
            .persist(ctx, Record::Write(w).encode(), then);
        if let Some(a) = self.durability.after_durable(After::Own(self.seq)) {
            self.run_after(ctx, a);
        }
    }

    fn sibling(&self, dc: DcId) -> NodeId {
        let index = self.config.node.0 % self.config.topology.nodes_per_dc;
        NodeId(u32::from(dc.0) * self.config.topology.nodes_per_dc + index)
    }

    /// The stored object of `key` (for tests).
    pub fn object(&self, key: &Key) -> Option<&Object> {
        self.store.get(key)
    }
}

impl ServerNode for Node {
    type Msg = Msg;

    fn start(&mut self, ctx: &mut Ctx<Msg>) {
        self.clock = ctx.clock;
        let first = ctx.clock + self.config.params.timer_phase_ns;
        self.timers.set((), first);
    }

    fn handle_message(&mut self, ctx: &mut Ctx<Msg>, from: Addr, msg: Msg) {
        self.clock = self.clock.max(ctx.clock);
        match msg {
            Msg::Read { req, keys } => {
                self.work += keys.len() as u64;
                let objects = self.read(keys);
                ctx.send(from, Msg::ReadReply { req, objects });
            }
            Msg::Write { req, updates } => self.write(ctx, from, req, updates),
            Msg::Repl {
                restarted,
                acks,
                stream,
            } => self.on_repl(ctx, from, restarted, acks, stream),
            Msg::Transfer { chunk } => {
                if let Addr::Node(n) = from {
                    let s = self.config.topology.dc_of(n);
                    self.on_transfer(ctx, s, chunk);
                }
            }
            Msg::ListKeys(ask) => self.on_list_keys(ctx, from, ask),
            Msg::ReadReply { .. } | Msg::WriteReply { .. } | Msg::KeysListed(_) => {}
        }
    }

    fn handle_timeout(&mut self, ctx: &mut Ctx<Msg>) {
        self.clock = self.clock.max(ctx.clock);
        if !self.timers.take_due(ctx.clock).is_empty() {
            self.replicate(ctx);
            let every = self.config.params.replication_interval_ns;
            self.timers.set((), ctx.clock + every);
        }
    }

    fn handle_persisted(&mut self, ctx: &mut Ctx<Msg>, lsn: Lsn) {
        for a in self.durability.persisted(ctx, lsn) {
            self.run_after(ctx, a);
        }
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        self.timers.next() // the replication interval (writes are pushed once durable)
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.durability.check_invariants()
    }

    /// The store and the streams, once every record handed out is durable (then it is
    /// exactly what a replay of the records gives) and no transfer's chunks are
    /// buffered (their records must stay for the install's replay).
    fn checkpoint(&self) -> Option<Vec<u8>> {
        let receiving = self.transfers.receiving();
        if !self.durability.quiescent() || self.seq != self.durable_seq || receiving {
            return None;
        }
        let objects = self.store.iter().map(|(k, o)| (k.clone(), o.clone()));
        let ck = Checkpoint {
            store: objects.collect(),
            seq: self.seq,
            log: self.log.clone(),
            received: self.received.clone(),
            durable_have: self.durable_have.clone(),
        };
        let recent = self.recent.clone();
        let ck = Box::new(ck);
        Some(Record::Snapshot { ck, recent }.encode())
    }

    fn can_checkpoint(&self) -> bool {
        true
    }

    fn take_work(&mut self) -> u64 {
        std::mem::take(&mut self.work)
    }

    fn take_samples(&mut self) -> Vec<(&'static str, u64)> {
        std::mem::take(&mut self.samples)
    }
}

/// What the client side is waiting for.
#[derive(Debug, Default)]
pub enum Pending {
    #[default]
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

/// The client side: buffers writes, reads partition by partition, writes at commit.
#[derive(Debug, Default)]
pub struct Client {
    pending: Pending,
}

fn node_for(core: &SessionCore, key: &Key) -> NodeId {
    let topo = &core.topology;
    topo.node_of(core.dc, topo.partition_of(key))
}

impl Client {
    fn finish_read(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>) {
        let Pending::Read { keys, got, .. } = std::mem::take(&mut self.pending) else {
            return;
        };
        let mut values = Vec::with_capacity(keys.len());
        for key in keys {
            let obj = got.get(&key).cloned().expect("every key answered");
            match obj.and_then(|o| read_value(core.buffer(), key, o, core.observed)) {
                Ok(v) => values.push(v),
                Err(e) => return core.answer(ctx, Response::Error(e)),
            }
        }
        core.answer(ctx, Response::Values(values));
    }

    fn on_write_reply(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>, r: Result<(), Error>) {
        let Pending::Commit { missing, error } = &mut self.pending else {
            return;
        };
        if let Err(e) = r {
            error.get_or_insert(e);
        }
        *missing -= 1;
        if *missing > 0 {
            return;
        }
        let error = error.take();
        self.pending = Pending::None;
        core.txn = None;
        core.answer(ctx, error.map_or(Response::Committed, Response::Error));
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
        core.answer(ctx, Response::Begun { txn });
    }

    fn read(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>, keys: Vec<(Key, ObjType)>) {
        let mut groups: BTreeMap<NodeId, Vec<(Key, ObjType)>> = BTreeMap::new();
        for (k, t) in &keys {
            groups
                .entry(node_for(core, k))
                .or_default()
                .push((k.clone(), *t));
        }
        let req = core.start_request(ctx);
        self.pending = Pending::Read {
            keys: keys.into_iter().map(|(k, _)| k).collect(),
            missing: groups.len(),
            got: BTreeMap::new(),
        };
        if groups.is_empty() {
            return self.finish_read(core, ctx);
        }
        for (node, keys) in groups {
            ctx.send(Addr::Node(node), Msg::Read { req, keys });
        }
    }

    fn commit(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>) {
        let groups = core.buffer().group_by(|k| node_for(core, k));
        if groups.is_empty() {
            core.txn = None;
            return core.answer(ctx, Response::Committed);
        }
        let req = core.start_request(ctx);
        self.pending = Pending::Commit {
            missing: groups.len(),
            error: None,
        };
        for (node, updates) in groups {
            ctx.send(Addr::Node(node), Msg::Write { req, updates });
        }
    }

    fn on_message(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>, _from: Addr, msg: Msg) {
        if let Msg::KeysListed(answer) = msg {
            return crate::kit::keys::answered(core, ctx, answer);
        }
        match msg {
            Msg::ReadReply { req, objects } if core.is_current(req) => {
                let Pending::Read { missing, got, .. } = &mut self.pending else {
                    return;
                };
                got.extend(objects);
                *missing -= 1;
                if *missing == 0 {
                    self.finish_read(core, ctx);
                }
            }
            Msg::WriteReply { req, result } if core.is_current(req) => {
                self.on_write_reply(core, ctx, result)
            }
            _ => {} // stale reply of a request that timed out
        }
    }

    fn on_timeout(&mut self, _core: &mut SessionCore) {
        self.pending = Pending::None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_core::{ObjValue, Output, Request, TrueTime, TxnId};

    fn node() -> Node {
        let topo = Topology::full(1, 1, 1);
        let config = NodeConfig::new(NodeId(0), topo, Params::default());
        Node::recover(config, &[]).expect("node")
    }

    /// The one mutation parses to its flag alone, and the node and session refuse a name
    /// they do not know, listing the one they do.
    #[test]
    fn mutations_parse_to_one_flag_and_unknown_ones_are_refused() {
        use crate::mutation::{assert_constructors_refuse, assert_parses};
        assert_eq!(MUTATIONS, ["no-state-transfer"]);
        assert_parses(MUTATIONS, |n| Mutation::parse(n).map(|m| m.active()));
        assert_constructors_refuse::<Eventual>(Topology::full(2, 1, 1));
    }

    fn op(index: u32) -> OpId {
        let txn = TxnId {
            session: SessionId(1),
            seq: 1,
        };
        OpId { txn, index }
    }

    /// A transaction whose second update hits a key of another type writes nothing: not
    /// the first update either, in memory or on disk, and nothing is replicated.
    #[test]
    fn a_wrongtype_update_leaves_the_whole_transaction_unapplied() {
        let mut n = node();
        let mut ctx = Ctx::new(TrueTime(1), 1);
        let client = Addr::Client(SessionId(1));
        let set = Msg::Write {
            req: 1,
            updates: vec![(Key::from("s"), Update::Add("x".into()), op(0))],
        };
        n.handle_message(&mut ctx, client, set);
        let mut ctx = Ctx::new(TrueTime(2), 2);
        let mixed = Msg::Write {
            req: 2,
            updates: vec![
                (Key::from("a"), Update::Assign("1".into()), op(1)),
                (Key::from("s"), Update::Assign("2".into()), op(2)),
            ],
        };
        n.handle_message(&mut ctx, client, mixed);
        assert!(
            n.object(&Key::from("a")).is_none(),
            "first update not applied"
        );
        assert!(!ctx
            .outputs
            .iter()
            .any(|o| matches!(o, Output::Persist { .. })));
        let replied = ctx.outputs.iter().any(|o| {
            matches!(
                o,
                Output::Send {
                    msg: Msg::WriteReply {
                        req: 2,
                        result: Err(Error::WrongType { .. })
                    },
                    ..
                }
            )
        });
        assert!(replied, "the client hears WRONGTYPE: {:?}", ctx.outputs);
    }

    /// A read reply carries the key's state, not the ids of every write it applied: its
    /// size does not grow with the key's history (it did, and a hot key's reads cost
    /// grew with every write).
    #[test]
    fn a_read_reply_does_not_grow_with_the_keys_history() {
        let mut n = node();
        let client = Addr::Client(SessionId(1));
        let reply_bytes = |n: &mut Node, req: u64| {
            let mut ctx = Ctx::new(TrueTime(req), req);
            let read = Msg::Read {
                req,
                keys: vec![(Key::from("k"), ObjType::Lww)],
            };
            n.handle_message(&mut ctx, client, read);
            let reply = ctx.outputs.iter().find_map(|o| match o {
                Output::Send {
                    msg: msg @ Msg::ReadReply { .. },
                    ..
                } => Some(postcard::to_allocvec(msg).expect("encodes").len()),
                _ => None,
            });
            reply.expect("a read reply")
        };
        let mut sizes = Vec::new();
        for i in 0..200u32 {
            let mut ctx = Ctx::new(TrueTime(10 + u64::from(i)), 10 + u64::from(i));
            let w = Msg::Write {
                req: u64::from(i) + 1,
                updates: vec![(Key::from("k"), Update::Assign("v".into()), op(i))],
            };
            n.handle_message(&mut ctx, client, w);
            if i == 0 || i == 199 {
                sizes.push(reply_bytes(&mut n, 1_000 + u64::from(i)));
            }
        }
        let obj = n.object(&Key::from("k")).expect("stored");
        assert!(
            obj.has_seen(&op(0)) && obj.has_seen(&op(199)),
            "the store keeps them"
        );
        // The winner's stamp and id may take a few more varint bytes; 200 ids would take
        // over a kilobyte.
        assert!(
            sizes[1] < sizes[0] + 16,
            "reply bytes after 1 and 200 writes: {sizes:?}"
        );
    }

    /// Through the kit's test network: a write at DC 0 reaches DC 1 once replicated, and
    /// no node breaks an invariant.
    #[test]
    fn a_write_replicates_to_the_other_dc() {
        use crate::kit::testnet::TestNet;
        let mut net: TestNet<Eventual> =
            TestNet::new(Topology::full(2, 1, 1), Params::default(), 1);
        net.session(1, 0);
        net.session(2, 1);
        let k = Key::from("k");
        let set = Request::Update {
            key: k.clone(),
            update: Update::Assign("v".into()),
        };
        let answers = net.txn(1, vec![set]);
        assert_eq!(answers.last(), Some(&Response::Committed));
        net.run(1);
        let read = Request::Read {
            keys: vec![(k, ObjType::Lww)],
        };
        let answers = net.txn(2, vec![read]);
        let Response::Values(v) = &answers[1] else {
            panic!("{answers:?}")
        };
        assert_eq!(v[0].value, ObjValue::Lww(Some("v".into())));
        net.check_invariants().unwrap();
    }

    const TRANSFER_MS: u64 = crate::kit::testnet::MS;

    fn transfer_cfg() -> Config {
        Config {
            silent_sibling_ns: 100 * TRANSFER_MS,
            silent_sibling_log_max: 0,
            transfer_retry_ns: 200 * TRANSFER_MS,
            lag_grace_ns: 100 * TRANSFER_MS,
            ..Config::default()
        }
    }

    fn keys_and_counter() -> Vec<Key> {
        let mut all: Vec<Key> = (0..4).map(|i| Key::new(format!("k{i}"))).collect();
        all.push(Key::from("c"));
        all
    }

    /// Two DCs write registers and increment `c` while cut past the horizon with no log
    /// kept for a silent sibling, then heal with what was in flight lost.
    fn cut_outage(mutation: Option<&str>) -> crate::kit::testnet::TestNet<Eventual> {
        use crate::kit::testnet::TestNet;
        let params = Params {
            mutation: mutation.map(str::to_string),
            ..Params::default()
        };
        let topo = Topology::full(2, 1, 1);
        let mut net: TestNet<Eventual> = TestNet::with_config(topo, params, &transfer_cfg(), 1);
        let w = |k: usize, v: String, n: i64| {
            let set = Request::Update {
                key: Key::new(format!("k{k}")),
                update: Update::Assign(v.into_bytes()),
            };
            let incr = Request::Update {
                key: Key::from("c"),
                update: Update::Increment(n),
            };
            vec![set, incr]
        };
        net.session(1, 0);
        net.session(2, 1);
        net.txn(1, w(0, "before".into(), 1));
        net.run(100);
        net.hold = |topo, from, to, _| match (from, to) {
            (Addr::Node(a), Addr::Node(b)) => topo.dc_of(a) != topo.dc_of(b),
            _ => false,
        };
        for i in 0..12 {
            net.txn(1, w(i % 4, format!("dc0-{i}"), 10));
            net.txn(2, w((i + 1) % 4, format!("dc1-{i}"), 100));
            net.run(20);
        }
        net.run(400);
        net.drop_held();
        net.run(2000);
        net
    }

    fn values(n: &Node) -> Vec<Option<ObjValue>> {
        keys_and_counter()
            .iter()
            .map(|k| n.object(k).map(|o| o.value()))
            .collect()
    }

    /// State transfer (transfer.rs), after `cut_outage`: DC 0 dropped its writes for DC 1
    /// (DC 1 is the pair's keeper and streams its own again), so DC 1 gets DC 0's store
    /// by state transfer, re-applies its own writes above it, and both end with every
    /// increment counted once; a restart replays the transfer into the same objects;
    /// without it (the `no-state-transfer` mutation) they stay diverged.
    #[test]
    fn a_sibling_back_after_the_log_was_dropped_converges_by_state_transfer() {
        let mut net = cut_outage(None);
        let sent = net.nodes[0].take_samples();
        let got = net.nodes[1].take_samples();
        let has = |v: &[(&str, u64)], name: &str| v.iter().any(|(n, _)| *n == name);
        assert!(has(&sent, "transfer_sent_keys"), "{sent:?}");
        assert!(has(&got, "transfer_installed_keys"), "{got:?}");
        assert!(
            !has(&got, "transfer_refused_keys"),
            "the keeper holds its writes"
        );
        let live = values(&net.nodes[0]);
        assert!(live.iter().all(Option::is_some), "every key written");
        assert_eq!(live, values(&net.nodes[1]), "the DCs converge");
        let total = ObjValue::Counter(1 + 12 * 10 + 12 * 100);
        assert_eq!(live.last(), Some(&Some(total)), "each increment once");
        net.check_invariants().expect("invariants");
        for n in 0..2u32 {
            let config = NodeConfig::new(NodeId(n), net.topo.clone(), Params::default());
            let records = &net.records[n as usize];
            let back = Eventual::recover(&config, &transfer_cfg(), records).expect("recovers");
            assert_eq!(values(&back), values(&net.nodes[n as usize]), "node {n}");
        }
        let net = cut_outage(Some("no-state-transfer"));
        let (v0, v1) = (values(&net.nodes[0]), values(&net.nodes[1]));
        assert_ne!(v0, v1, "without the transfer they stay diverged");
    }

    /// Whether a message between nodes goes from DC `a` to DC `b`.
    fn between(topo: &Topology, from: Addr, to: Addr, a: u16, b: u16) -> bool {
        match (from, to) {
            (Addr::Node(x), Addr::Node(y)) => (topo.dc_of(x).0, topo.dc_of(y).0) == (a, b),
            _ => false,
        }
    }

    /// Whether `m` carries a piece of a stream (its acknowledgements alone do not).
    fn piece(m: &Msg) -> bool {
        matches!(
            m,
            Msg::Repl {
                stream: Some(_),
                ..
            }
        )
    }

    /// Three DCs. DC 0 and DC 1 are cut from each other past the horizon with no log kept
    /// (DC 1 is their keeper, so DC 0 sends it a transfer); then DC 2 writes while its
    /// stream reaches DC 1 but not DC 0 (its acknowledgements still do), so DC 0's image
    /// lacks DC 2's writes that DC 1 already applied. DC 1 installs it anyway, re-applying
    /// DC 2's writes above the image from its `recent` buffer, and once DC 2's stream
    /// reaches DC 0 all three hold every increment once.
    #[test]
    fn a_transfer_lagging_a_third_dc_is_installed_and_its_writes_reapplied() {
        use crate::kit::testnet::TestNet;
        assert!(transfer::keeps_for(DcId(1), DcId(0)), "DC 1 keeps for DC 0");
        let topo = Topology::full(3, 1, 1);
        let mut net: TestNet<Eventual> =
            TestNet::with_config(topo, Params::default(), &transfer_cfg(), 1);
        let incr = |n: i64| {
            vec![Request::Update {
                key: Key::from("c"),
                update: Update::Increment(n),
            }]
        };
        for dc in 0..3u16 {
            net.session(u64::from(dc) + 1, dc);
        }
        net.txn(1, incr(1));
        net.run(100);
        net.hold = |t, f, to, _| between(t, f, to, 0, 1) || between(t, f, to, 1, 0);
        for _ in 0..10 {
            net.txn(1, incr(10));
            net.txn(2, incr(100));
            net.run(20);
        }
        net.run(400);
        net.hold = |t, f, to, m| {
            between(t, f, to, 0, 1)
                || between(t, f, to, 1, 0)
                || between(t, f, to, 2, 0) && piece(m)
        };
        for _ in 0..10 {
            net.txn(3, incr(1000));
            net.run(20);
        }
        net.drop_held();
        // DC 0 and DC 1 talk again; DC 2's writes still do not reach DC 0.
        net.hold = |t, f, to, m| between(t, f, to, 2, 0) && piece(m);
        net.run(1000);
        let got = net.nodes[1].take_samples();
        let has = |name: &str| got.iter().any(|(n, _)| *n == name);
        assert!(has("transfer_installed_keys"), "DC 1 installed: {got:?}");
        assert!(!has("transfer_refused_keys"), "nothing refused: {got:?}");
        let c = |net: &TestNet<Eventual>, n: usize| {
            net.nodes[n].object(&Key::from("c")).map(|o| o.value())
        };
        let all = Some(ObjValue::Counter(1 + 10 * (10 + 100 + 1000)));
        assert_eq!(
            c(&net, 1),
            all,
            "DC 1: the image plus DC 2's writes re-applied"
        );
        assert_ne!(c(&net, 0), all, "DC 0 still lacks DC 2's writes");
        net.hold = |_, _, _, _| false;
        net.run(2000);
        for n in 0..3 {
            assert_eq!(c(&net, n), all, "DC {n} holds every increment once");
        }
        net.check_invariants().expect("invariants");
    }

    /// A checkpoint stands for the records before it: it plus the later records recover
    /// the same objects as a full replay, and none is taken while a record is in flight.
    #[test]
    fn a_checkpoint_plus_the_later_records_recovers_what_a_full_replay_does() {
        use crate::kit::testnet::TestNet;
        let topo = Topology::full(2, 1, 1);
        let mut net: TestNet<Eventual> = TestNet::new(topo.clone(), Params::default(), 1);
        net.session(1, 0);
        net.session(2, 1);
        let keys: Vec<Key> = (0..6).map(|i| Key::new(format!("k{i}"))).collect();
        let write = |k: &Key, v: String| Request::Update {
            key: k.clone(),
            update: Update::Assign(v.into_bytes()),
        };
        let counter = Key::from("c");
        let incr = Request::Update {
            key: counter.clone(),
            update: Update::Increment(3),
        };
        for (i, k) in keys.iter().enumerate() {
            net.txn(
                1 + i as u64 % 2,
                vec![write(k, format!("a{i}")), incr.clone()],
            );
        }
        net.run(1);
        let ck = net.nodes[0].checkpoint().expect("quiescent");
        let covered = net.records[0].len();
        for (i, k) in keys.iter().enumerate().step_by(2) {
            net.txn(
                2 - i as u64 % 2,
                vec![write(k, format!("b{i}")), incr.clone()],
            );
        }
        net.run(1);
        let mut compacted = vec![ck];
        compacted.extend_from_slice(&net.records[0][covered..]);
        let config = NodeConfig::new(NodeId(0), topo, Params::default());
        let full = Node::recover(config.clone(), &net.records[0]).expect("replays");
        let from_ck = Node::recover(config, &compacted).expect("replays");
        let mut all = keys.clone();
        all.push(counter.clone());
        for k in &all {
            assert_eq!(full.object(k), from_ck.object(k), "{k:?}");
            assert_eq!(full.object(k), net.nodes[0].object(k), "{k:?} as live");
        }
        assert_eq!(
            from_ck.object(&counter).map(|o| o.value()),
            Some(ObjValue::Counter(27))
        );
        assert!(compacted.len() < net.records[0].len());
        // With a write's record in flight there is no checkpoint.
        let mut n = node();
        let mut ctx = Ctx::new(TrueTime(1), 1);
        let w = Msg::Write {
            req: 1,
            updates: vec![(Key::from("a"), Update::Assign("1".into()), op(0))],
        };
        n.handle_message(&mut ctx, Addr::Client(SessionId(1)), w);
        assert!(n.checkpoint().is_none(), "a record is in flight");
        n.handle_persisted(&mut ctx, 1);
        assert!(n.checkpoint().is_some());
    }
}
