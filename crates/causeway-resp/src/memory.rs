//! An in-memory Causeway for tests, demos and measuring the front end alone: one process,
//! one or more DCs, typed CRDT objects from `causeway_core::crdt`, and sessions that keep
//! their causal past across transactions and DCs.
//!
//! Model: every committed transaction is appended to one cluster log, in an order that
//! extends causality (a transaction is appended after everything its DC had applied when
//! it committed). A DC applies its own commits at once and other DCs' commits when
//! replicated ([`MemoryCluster::replicate`], or a periodic task of the demo server).
//! A session carries the per-origin commit counts it has observed (its causal token); a
//! DC that is behind a session's past catches up before serving it, as a causal protocol
//! would wait. Reads see the DC's latest state plus the transaction's own writes (read
//! committed, not snapshots): enough for a test double, not a protocol.
//!
//! The log keeps only the entries some DC has not applied yet, and at most
//! [`LOG_ENTRIES_MAX`] of them (past that every DC catches up at once). Sets are core's
//! optimized OR-set: a re-add replaces the tags its transaction observed, so a set's tags
//! do not grow with repeated adds; the cluster log's order extends causality, which is the
//! delivery that set needs.
//!
//! Capabilities can be switched off ([`MemoryOptions`]) to exercise the front end's
//! `Unsupported` errors.

use crate::session::{ServerInfo, SessionFactory, SessionHandle};
use causeway_core::keyorder::key_position;
use causeway_core::limits::{
    KEY_LEN_MAX, LIST_KEYS_MAX, READ_KEYS_MAX, TXN_UPDATES_MAX, VALUE_LEN_MAX,
};
use causeway_core::{
    ArbTs, Error, Key, KeyPage, ObjType, Object, Op, OpId, ReadValue, Request, Response, SessionId,
    SessionScope, TxnId, TxnKind, Update,
};
use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};

/// What the simulated cluster offers.
#[derive(Clone, Debug)]
pub struct MemoryOptions {
    /// Protocol name reported by `INFO` and in `Unsupported` errors.
    pub protocol: String,
    /// Number of DCs (at least 1).
    pub dcs: usize,
    /// Whether strong transactions are supported.
    pub strong: bool,
    /// Whether causal tokens, attach and barriers are supported.
    pub tokens: bool,
    /// Fault injection: the next this-many reads (cluster-wide) answer `Aborted`
    /// ("snapshot too old") and end their transaction, as a protocol's session does when
    /// its coordinator drops the transaction.
    pub aborted_reads: usize,
}

impl Default for MemoryOptions {
    fn default() -> MemoryOptions {
        MemoryOptions {
            protocol: "memory".into(),
            dcs: 1,
            strong: true,
            tokens: true,
            aborted_reads: 0,
        }
    }
}

/// Most log entries kept for DCs that have not applied them; past this the cluster
/// replicates everything at once.
pub const LOG_ENTRIES_MAX: usize = 65_536;

/// One committed transaction in the cluster log.
struct Entry {
    origin: usize,
    seq: u64,
    ops: Vec<(Key, Op)>,
}

struct Dc {
    objects: BTreeMap<Key, Object>,
    /// Per origin DC, how many of its commits this DC has applied.
    applied: Vec<u64>,
}

struct Cluster {
    options: MemoryOptions,
    dcs: Vec<Dc>,
    log: VecDeque<Entry>,
    /// Commits so far, cluster-wide: the arbitration order of LWW writes.
    commits: u64,
    next_session: u64,
}

/// A whole in-memory cluster; hands out one [`MemoryFactory`] per DC.
#[derive(Clone)]
pub struct MemoryCluster {
    inner: Arc<Mutex<Cluster>>,
}

impl MemoryCluster {
    pub fn new(options: MemoryOptions) -> MemoryCluster {
        let n = options.dcs.max(1);
        let dcs = (0..n)
            .map(|_| Dc {
                objects: BTreeMap::new(),
                applied: vec![0; n],
            })
            .collect();
        let cluster = Cluster {
            options,
            dcs,
            log: VecDeque::new(),
            commits: 0,
            next_session: 1,
        };
        MemoryCluster {
            inner: Arc::new(Mutex::new(cluster)),
        }
    }

    /// The session factory of DC `dc` (numbered from 0).
    pub fn factory(&self, dc: usize) -> MemoryFactory {
        MemoryFactory {
            cluster: self.clone(),
            dc,
        }
    }

    /// Applies at every DC every commit it has not applied yet.
    pub fn replicate(&self) {
        self.lock().replicate_all();
    }

    fn lock(&self) -> MutexGuard<'_, Cluster> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Cluster {
    fn replicate_all(&mut self) {
        for dc in 0..self.dcs.len() {
            self.catch_up(dc);
        }
        self.trim();
    }

    /// Drops the log entries every DC has applied.
    fn trim(&mut self) {
        while let Some(first) = self.log.front() {
            if self.dcs.iter().any(|d| d.applied[first.origin] < first.seq) {
                break;
            }
            self.log.pop_front();
        }
    }

    /// Appends a commit of DC `origin`; keeps the log bounded.
    fn append(&mut self, entry: Entry) {
        self.log.push_back(entry);
        self.trim();
        if self.log.len() > LOG_ENTRIES_MAX {
            self.replicate_all();
        }
        assert!(
            self.log.len() <= LOG_ENTRIES_MAX,
            "the log is trimmed after catching up"
        );
    }

    /// How many logged commits DC `dc` has not applied.
    fn unapplied(&self, dc: usize) -> usize {
        let applied = &self.dcs[dc].applied;
        self.log
            .iter()
            .filter(|e| e.seq > applied[e.origin])
            .count()
    }

    /// Applies at `dc` the log entries it lacks, in log order (which extends causality).
    fn catch_up(&mut self, dc: usize) {
        let Cluster { dcs, log, .. } = self;
        let target = &mut dcs[dc];
        for entry in log.iter() {
            if entry.seq != target.applied[entry.origin] + 1 {
                continue;
            }
            for (key, op) in &entry.ops {
                apply_op(&mut target.objects, key, op);
            }
            target.applied[entry.origin] = entry.seq;
        }
    }

    /// Catches `dc` up if it has not applied everything in `past`.
    fn serve_past(&mut self, dc: usize, past: &[u64]) {
        let behind = self.dcs[dc].applied.iter().zip(past).any(|(a, p)| a < p);
        if behind {
            self.catch_up(dc);
        }
    }
}

/// Applies a replicated op, skipping it if the key was created with another type
/// concurrently elsewhere (the fake's deterministic conflict rule).
fn apply_op(objects: &mut BTreeMap<Key, Object>, key: &Key, op: &Op) {
    let ty = effect_type(&op.effect);
    let obj = objects
        .entry(key.clone())
        .or_insert_with(|| Object::new(ty));
    if obj.obj_type() == ty {
        obj.apply_effect(op);
    }
}

fn effect_type(effect: &causeway_core::Effect) -> ObjType {
    effect.obj_type()
}

/// Opens sessions in one DC of a [`MemoryCluster`].
#[derive(Clone)]
pub struct MemoryFactory {
    cluster: MemoryCluster,
    dc: usize,
}

impl SessionFactory for MemoryFactory {
    type Handle = MemorySession;

    fn open(&self) -> MemorySession {
        let mut c = self.cluster.lock();
        let id = SessionId(c.next_session);
        c.next_session += 1;
        let past = vec![0; c.dcs.len()];
        drop(c);
        MemorySession {
            cluster: self.cluster.clone(),
            dc: self.dc,
            id,
            seq: 0,
            past,
            txn: None,
            scope: SessionScope::Connection,
        }
    }

    fn info(&self) -> ServerInfo {
        let c = self.cluster.lock();
        let lag = c.unapplied(self.dc) as f64;
        ServerInfo {
            protocol: c.options.protocol.clone(),
            dc: self.dc as u32 + 1,
            dcs: (1..=c.dcs.len()).map(|i| format!("dc{i}")).collect(),
            gauges: vec![("unreplicated_txns".into(), lag)],
        }
    }
}

struct MemTxn {
    id: TxnId,
    updates: Vec<(Key, Update)>,
}

/// The partitions a memory DC answers `Request::ListKeys` for.
pub const MEMORY_PARTITIONS: u32 = 3;

/// One session of a [`MemoryCluster`], living in one DC.
pub struct MemorySession {
    cluster: MemoryCluster,
    dc: usize,
    id: SessionId,
    seq: u64,
    /// Per origin DC, the commits this session has observed.
    past: Vec<u64>,
    txn: Option<MemTxn>,
    /// Kept for `CLIENT SESSION`: a DC's writes are visible to its every session at
    /// once here, so both scopes read the same.
    scope: SessionScope,
}

impl SessionHandle for MemorySession {
    fn call(&mut self, req: Request) -> impl Future<Output = Response> + Send {
        std::future::ready(self.handle(req))
    }

    /// The whole batch at once: no await between requests.
    fn call_batch(&mut self, reqs: Vec<Request>) -> impl Future<Output = Vec<Response>> + Send {
        let mut out = Vec::with_capacity(reqs.len());
        for req in reqs {
            let resp = self.handle(req);
            let stop = matches!(resp, Response::Error(_) | Response::Aborted { .. });
            out.push(resp);
            if stop {
                break;
            }
        }
        std::future::ready(out)
    }

    fn scope(&self) -> SessionScope {
        self.scope
    }

    fn set_scope(&mut self, scope: SessionScope) -> bool {
        self.scope = scope;
        true
    }
}

impl MemorySession {
    /// Answers one request synchronously.
    pub fn handle(&mut self, req: Request) -> Response {
        let in_txn = self.txn.is_some();
        let result = match req {
            Request::Begin { kind, .. } if !in_txn => self.begin(kind),
            Request::Read { .. } if in_txn && self.inject_abort() => {
                self.txn = None;
                Ok(Response::Aborted {
                    reason: "snapshot too old".into(),
                })
            }
            Request::Read { keys } if in_txn => self.read(&keys).map(Response::Values),
            Request::Update { key, update } if in_txn => self.update(key, update),
            Request::Commit if in_txn => self.commit(),
            Request::Abort if in_txn => {
                self.txn = None;
                Ok(Response::Aborted {
                    reason: "aborted by the client".into(),
                })
            }
            Request::Token => self.tokens().map(|()| Response::Token(self.token())),
            Request::Attach { token } => self.tokens().and_then(|()| self.attach(&token)),
            Request::Barrier => self.tokens().map(|()| self.barrier()),
            Request::ListKeys {
                partition,
                from,
                max,
            } if !in_txn => Ok(self.list_keys(partition.0, from, max)),
            other => Err(Error::InvalidState(format!(
                "{other:?} {} a transaction",
                if in_txn { "inside" } else { "outside" }
            ))),
        };
        result.unwrap_or_else(Response::Error)
    }

    /// Whether this read is one of the injected aborts ([`MemoryOptions::aborted_reads`]).
    fn inject_abort(&self) -> bool {
        let mut c = self.cluster.lock();
        let left = &mut c.options.aborted_reads;
        if *left == 0 {
            return false;
        }
        *left -= 1;
        true
    }

    fn unsupported(&self, capability: &str) -> Error {
        Error::Unsupported {
            protocol: self.cluster.lock().options.protocol.clone(),
            capability: capability.into(),
        }
    }

    fn tokens(&self) -> Result<(), Error> {
        if self.cluster.lock().options.tokens {
            Ok(())
        } else {
            Err(self.unsupported("causal tokens and barriers"))
        }
    }

    fn begin(&mut self, kind: TxnKind) -> Result<Response, Error> {
        if kind == TxnKind::Strong && !self.cluster.lock().options.strong {
            return Err(self.unsupported("strong transactions"));
        }
        self.seq += 1;
        let id = TxnId {
            session: self.id,
            seq: self.seq,
        };
        self.txn = Some(MemTxn {
            id,
            updates: Vec::new(),
        });
        Ok(Response::Begun { txn: id })
    }

    fn update(&mut self, key: Key, update: Update) -> Result<Response, Error> {
        check_update(&key, &update)?;
        let txn = self.txn.as_mut().expect("checked in a transaction");
        if txn.updates.len() >= TXN_UPDATES_MAX {
            return Err(limit("updates in one transaction", TXN_UPDATES_MAX));
        }
        let op = OpId {
            txn: txn.id,
            index: txn.updates.len() as u32,
        };
        txn.updates.push((key, update));
        Ok(Response::Updated { op })
    }

    /// `Request::ListKeys` over the DC's objects, cut into [`MEMORY_PARTITIONS`] by
    /// position, so the front end's walk crosses partitions as on a real cluster.
    fn list_keys(&mut self, partition: u32, from: u64, max: u32) -> Response {
        let c = self.cluster.lock();
        let mut keys: Vec<(u64, &Key, ObjType)> = c.dcs[self.dc]
            .objects
            .iter()
            .map(|(k, o)| (key_position(&k.0), k, o))
            .filter(|(p, _, _)| p % u64::from(MEMORY_PARTITIONS) == u64::from(partition))
            .filter(|(p, _, _)| *p >= from)
            .filter_map(|(p, k, o)| o.shown_type().map(|t| (p, k, t)))
            .collect();
        keys.sort();
        let max = (max as usize).clamp(1, LIST_KEYS_MAX);
        let (mut out, mut next) = (Vec::new(), None);
        for (p, k, t) in keys {
            let last = out.last().map(|(k, _): &(Key, ObjType)| key_position(&k.0));
            if out.len() >= max && last != Some(p) {
                next = Some(p);
                break;
            }
            out.push((k.clone(), t));
        }
        Response::Keys(KeyPage {
            keys: out,
            next,
            partitions: MEMORY_PARTITIONS,
        })
    }

    fn read(&mut self, keys: &[(Key, ObjType)]) -> Result<Vec<ReadValue>, Error> {
        if keys.len() > READ_KEYS_MAX {
            return Err(limit("keys in one read", READ_KEYS_MAX));
        }
        let mut c = self.cluster.lock();
        c.serve_past(self.dc, &self.past);
        let txn = self.txn.as_ref().expect("checked in a transaction");
        let dc = &c.dcs[self.dc];
        let values = keys
            .iter()
            .map(|(key, ty)| read_one(dc.objects.get(key), txn, key, *ty))
            .collect::<Result<Vec<_>, _>>()?;
        merge(&mut self.past, &dc.applied);
        Ok(values)
    }

    fn commit(&mut self) -> Result<Response, Error> {
        let txn = self.txn.take().expect("checked in a transaction");
        let mut c = self.cluster.lock();
        c.serve_past(self.dc, &self.past);
        c.commits += 1;
        let stamp = ArbTs {
            primary: c.commits,
            secondary: self.dc as u64,
        };
        let dc = &mut c.dcs[self.dc];
        check_updates(&dc.objects, &txn)?;
        if !txn.updates.is_empty() {
            let seq = dc.applied[self.dc] + 1;
            let replicas = c.dcs.len();
            let dc = &mut c.dcs[self.dc];
            let ops = prepare_all(&mut dc.objects, &txn, stamp, replicas > 1);
            dc.applied[self.dc] = seq;
            let origin = self.dc;
            if replicas > 1 {
                c.append(Entry { origin, seq, ops });
            }
        }
        merge(&mut self.past, &c.dcs[self.dc].applied);
        Ok(Response::Committed)
    }

    fn token(&self) -> Vec<u8> {
        self.past.iter().flat_map(|n| n.to_le_bytes()).collect()
    }

    fn attach(&mut self, token: &[u8]) -> Result<Response, Error> {
        if token.len() != 8 * self.past.len() {
            return Err(Error::BadToken(format!(
                "expected {} bytes, got {}",
                8 * self.past.len(),
                token.len()
            )));
        }
        let other: Vec<u64> = token
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        merge(&mut self.past, &other);
        Ok(Response::Attached)
    }

    fn barrier(&self) -> Response {
        self.cluster.replicate();
        Response::BarrierDone
    }
}

fn limit(what: &str, max: usize) -> Error {
    Error::LimitExceeded {
        what: what.into(),
        max: max as u64,
    }
}

fn check_update(key: &Key, update: &Update) -> Result<(), Error> {
    if key.0.len() > KEY_LEN_MAX {
        return Err(limit("key length", KEY_LEN_MAX));
    }
    let value_len = match update.own() {
        Update::Assign(v) | Update::Add(v) | Update::Remove(v) | Update::MvAssign(v) => v.len(),
        Update::Increment(_) | Update::RegisterIncrement(_) | Update::Part { .. } => 0,
        Update::HashSet { field, value } => field.len() + value.len(),
        Update::HashIncrement { field, .. } | Update::HashRemove { field } => field.len(),
        Update::ListPush { values, .. } => values.iter().map(Vec::len).sum(),
        Update::ListPop { .. } => 0,
        Update::ZAdd { member, .. } | Update::ZIncrement { member, .. } => member.len(),
        Update::ZRemove { members } => members.iter().map(Vec::len).sum(),
    };
    if value_len > VALUE_LEN_MAX {
        return Err(limit("value length", VALUE_LEN_MAX));
    }
    Ok(())
}

fn merge(into: &mut [u64], other: &[u64]) {
    for (a, b) in into.iter_mut().zip(other) {
        *a = (*a).max(*b);
    }
}

/// The type `key` holds, or will hold after the updates before it in the transaction.
fn stored_type(stored: Option<&Object>, prior: &[(Key, Update)], key: &Key) -> Option<ObjType> {
    stored.map(Object::obj_type).or_else(|| {
        prior
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, u)| u.obj_type())
    })
}

/// A key's value as the transaction sees it: the DC's state plus its own updates.
fn read_one(
    stored: Option<&Object>,
    txn: &MemTxn,
    key: &Key,
    ty: ObjType,
) -> Result<ReadValue, Error> {
    if let Some(held) = stored_type(stored, &txn.updates, key) {
        if held != ty {
            return Err(Error::WrongType {
                expected: held,
                found: ty,
            });
        }
    }
    if let Some(obj) = stored.filter(|_| txn.updates.iter().all(|(k, _)| k != key)) {
        return Ok(ReadValue {
            key: key.clone(),
            value: obj.value(),
            observed: obj.observed(),
        });
    }
    let mut obj = stored.cloned().unwrap_or_else(|| Object::new(ty));
    for (index, (k, update)) in txn.updates.iter().enumerate() {
        if k != key {
            continue;
        }
        overlay(&mut obj, txn, index, update)?;
    }
    Ok(ReadValue {
        key: key.clone(),
        value: obj.value(),
        observed: obj.observed(),
    })
}

/// Rejects the commit if an update cannot be prepared against what it would observe: a
/// type its key does not hold, or an increment that overflows (a dry run on copies of
/// the keys it touches, so that [`prepare_all`] cannot fail half-way).
fn check_updates(objects: &BTreeMap<Key, Object>, txn: &MemTxn) -> Result<(), Error> {
    let mut scratch: BTreeMap<&Key, Object> = BTreeMap::new();
    for (index, (key, update)) in txn.updates.iter().enumerate() {
        let obj = scratch
            .entry(key)
            .or_insert_with(|| match objects.get(key) {
                Some(held) => held.clone(),
                None => Object::new(update.obj_type()),
            });
        overlay(obj, txn, index, update)?;
    }
    Ok(())
}

/// Applies the transaction's update number `index` to a private copy of its key, as not
/// yet committed (the pending timestamp).
fn overlay(obj: &mut Object, txn: &MemTxn, index: usize, update: &Update) -> Result<(), Error> {
    let effect = obj.prepare(update)?;
    let id = OpId {
        txn: txn.id,
        index: index as u32,
    };
    obj.apply_effect(&Op {
        id,
        ts: ArbTs::PENDING,
        effect,
    });
    Ok(())
}

/// Prepares and applies the (type-checked) updates at the origin DC; returns the ops.
/// `stamp` is the transaction's position in the cluster log, which grows along causality.
/// With `log` false (one DC: nobody replicates them) the ops are applied, not returned.
fn prepare_all(
    objects: &mut BTreeMap<Key, Object>,
    txn: &MemTxn,
    stamp: ArbTs,
    log: bool,
) -> Vec<(Key, Op)> {
    let mut ops = Vec::with_capacity(txn.updates.len());
    for (index, (key, update)) in txn.updates.iter().enumerate() {
        if !objects.contains_key(key) {
            objects.insert(key.clone(), Object::new(update.obj_type()));
        }
        let obj = objects.get_mut(key).expect("inserted above");
        let id = OpId {
            txn: txn.id,
            index: index as u32,
        };
        let effect = obj.prepare(update).expect("checked by check_updates");
        let op = Op {
            id,
            ts: stamp,
            effect,
        };
        obj.apply_effect(&op);
        if log {
            ops.push((key.clone(), op));
        }
    }
    ops
}
