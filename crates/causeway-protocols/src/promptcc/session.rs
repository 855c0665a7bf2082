//! The PrompTCC client library (Alg. 1) on the kit's session core: the dependency vector
//! `D_c`, read-only rounds (one, and a second only to the partitions that need it), the
//! write-only commit straight to the participants, Wren's two-round reads, and Eiger's
//! third round (to the partitions that held a partially committed version in round two).

use super::config::{Flavor, Mutation, Wire};
use super::msg::{Msg, ReadKind};
use crate::kit::session::{ClientProtocol, SessionCore};
use crate::kit::txn::read_value;
use causeway_core::crdt::{ObjType, Object};
use causeway_core::{
    Addr, Ctx, DcId, Error, Key, Nanos, NodeId, PartitionId, ReadValue, Response, TxnId, TxnKind,
    Vc,
};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug)]
struct ReadState {
    rid: u64,
    round: u8,
    keys: Vec<(Key, ObjType)>,
    waiting: BTreeSet<PartitionId>,
    objects: BTreeMap<Key, Object>,
    /// `max-read-ts` so far (Alg. 1 l.24), `D_c` included.
    mrt: Vc,
    vis: BTreeMap<PartitionId, u64>,
    /// Round one's `S_i` per partition whose reply carried it (the round-two test).
    svec: BTreeMap<PartitionId, Vc>,
    /// The join of the `S` vectors round one's replies carried (`snapshot_of`).
    stable: Vc,
    /// A read at a fixed snapshot (a later read of the txn, or Wren's second round).
    bounded: bool,
    /// Whether its rounds count (a txn's first read; later ones read at its snapshot).
    counted: bool,
    /// Eiger: the partitions that answered this round "pending" (§II l.82).
    partial: BTreeSet<PartitionId>,
    /// Eiger: round one's effective time (the largest EVT) and each partition's LVT.
    eff: u64,
    lvt: BTreeMap<PartitionId, u64>,
}

/// A read reply's metadata: the timestamps read, the visible frontier, `S` if carried,
/// and Eiger's validity interval (EVT, LVT) if carried.
type ReplyMeta = (Vec<Wire>, u64, Option<Wire>, Option<(u64, u64)>);

/// How a re-read reads at its bound (`Client::bounded`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reread {
    /// Round two, a later read of the txn, Wren's second round.
    Bounded,
    /// Eiger's round two, at its effective time.
    At(u64),
    /// Eiger's round three.
    Wait,
}

#[derive(Debug)]
enum Pending {
    None,
    /// Wren: waiting for the snapshot to read at.
    Snapshot {
        rid: u64,
        keys: Vec<(Key, ObjType)>,
    },
    Read(ReadState),
    Commit {
        waiting: BTreeSet<PartitionId>,
        seqs: BTreeMap<PartitionId, u64>,
        deps: Vc,
    },
}

/// The client side of PrompTCC, its naive wire and Wren.
#[derive(Debug)]
pub struct Client {
    flavor: Flavor,
    mutation: Mutation,
    p: usize,
    txn_timeout_ns: Nanos,
    /// `D_c`.
    pub(super) deps: Vc,
    /// The open txn's snapshot once its first read fixed it.
    snapshot: Option<Vc>,
    txn_start: Nanos,
    next_rid: u64,
    pending: Pending,
    /// Read-only rounds so far: (reads, reads that needed round two, reads that needed
    /// round three).
    pub(super) rounds: (u64, u64, u64),
    /// Eiger: the client's logical clock (Lamport), raised to every logical time a reply
    /// carried (EVT, LVT).
    lamport: u64,
}

impl Client {
    pub fn new(flavor: Flavor, mutation: Mutation, p: usize, txn_timeout_ns: Nanos) -> Client {
        Client {
            flavor,
            mutation,
            p,
            txn_timeout_ns,
            deps: Vc::zero(p),
            snapshot: None,
            txn_start: 0,
            next_rid: 0,
            pending: Pending::None,
            rounds: (0, 0, 0),
            lamport: 0,
        }
    }

    fn node(core: &SessionCore, p: PartitionId) -> Addr {
        Addr::Node(core.topology.node_of(DcId(0), p))
    }

    fn by_partition(
        core: &SessionCore,
        keys: &[(Key, ObjType)],
    ) -> BTreeMap<PartitionId, Vec<(Key, ObjType)>> {
        let mut m: BTreeMap<PartitionId, Vec<(Key, ObjType)>> = BTreeMap::new();
        for (k, t) in keys {
            m.entry(core.topology.partition_of(k))
                .or_default()
                .push((k.clone(), *t));
        }
        m
    }

    fn rid(&mut self) -> u64 {
        self.next_rid += 1;
        self.next_rid
    }

    /// Round one (Alg. 1 l.14-22): each partition's keys with `D_c` (compressed: `D_c[i]`
    /// and `min(D_c)`, §V).
    fn round_one(&mut self, core: &SessionCore, ctx: &mut Ctx<Msg>, keys: Vec<(Key, ObjType)>) {
        let rid = self.rid();
        let groups = Self::by_partition(core, &keys);
        let full = self.flavor.full_vectors();
        let min = (0..self.p).map(|i| self.deps.get(i)).min().unwrap_or(0);
        for (i, (p, ks)) in groups.iter().enumerate() {
            let deps = if full {
                Wire::of(&self.deps, self.p, true)
            } else {
                let own = self.deps.get(p.0 as usize);
                let entries = if own > min {
                    vec![(p.0, own)]
                } else {
                    Vec::new()
                };
                Wire::Above { min, entries }
            };
            let kind = if self.flavor.validity_intervals() {
                let time = self.lamport;
                ReadKind::Clocked { deps, time }
            } else {
                ReadKind::Latest { deps }
            };
            let m = Msg::Read {
                rid,
                partition: *p,
                keys: ks.clone(),
                kind,
                first: i == 0,
            };
            ctx.send(Self::node(core, *p), m);
        }
        self.pending = Pending::Read(ReadState {
            rid,
            round: 1,
            waiting: groups.keys().copied().collect(),
            keys,
            objects: BTreeMap::new(),
            mrt: self.deps.clone(),
            vis: BTreeMap::new(),
            svec: BTreeMap::new(),
            stable: Vc::default(),
            bounded: false,
            counted: true,
            partial: BTreeSet::new(),
            eff: 0,
            lvt: BTreeMap::new(),
        });
    }

    /// A read at `bound` (Alg. 2 l.45-53) of `keys` at the partitions `only` (all if
    /// None): round two, a later read of the txn, Wren's second round, or Eiger's second
    /// or third (`how`).
    #[allow(clippy::too_many_arguments)]
    fn bounded(
        &mut self,
        core: &SessionCore,
        ctx: &mut Ctx<Msg>,
        keys: &[(Key, ObjType)],
        bound: &Vc,
        only: Option<&BTreeSet<PartitionId>>,
        (count, how): (bool, Reread),
    ) -> (u64, BTreeSet<PartitionId>) {
        let rid = self.rid();
        let wire = Wire::of(bound, self.p, self.flavor.full_vectors());
        let mut sent = BTreeSet::new();
        for (p, ks) in Self::by_partition(core, keys) {
            if only.is_some_and(|o| !o.contains(&p)) {
                continue;
            }
            let bound = wire.clone();
            let kind = match how {
                Reread::Bounded => ReadKind::Bounded { bound },
                Reread::At(time) => ReadKind::At { bound, time },
                Reread::Wait => ReadKind::Wait { bound },
            };
            let m = Msg::Read {
                rid,
                partition: p,
                keys: ks,
                kind,
                first: count && sent.is_empty(),
            };
            ctx.send(Self::node(core, p), m);
            sent.insert(p);
        }
        (rid, sent)
    }

    fn start_bounded(
        &mut self,
        core: &SessionCore,
        ctx: &mut Ctx<Msg>,
        keys: Vec<(Key, ObjType)>,
        bound: Vc,
        count: bool,
    ) {
        let how = (count, Reread::Bounded);
        let (rid, waiting) = self.bounded(core, ctx, &keys, &bound, None, how);
        self.pending = Pending::Read(ReadState {
            rid,
            round: 2,
            keys,
            waiting,
            objects: BTreeMap::new(),
            mrt: bound,
            vis: BTreeMap::new(),
            svec: BTreeMap::new(),
            stable: Vc::default(),
            bounded: true,
            counted: count,
            partial: BTreeSet::new(),
            eff: 0,
            lvt: BTreeMap::new(),
        });
    }

    fn on_read_reply(
        &mut self,
        core: &mut SessionCore,
        ctx: &mut Ctx<Msg>,
        partition: PartitionId,
        objects: super::msg::Objects,
        (ts, vis, stable, validity): ReplyMeta,
    ) {
        let Pending::Read(st) = &mut self.pending else {
            return;
        };
        if !st.waiting.remove(&partition) {
            return;
        }
        for (k, o) in objects {
            match o {
                Ok(o) => {
                    st.objects.insert(k, o);
                }
                Err(e) => return self.fail(core, ctx, e),
            }
        }
        if !st.bounded || st.round == 1 {
            for w in &ts {
                st.mrt.join(&w.to_vc(self.p)); // Alg. 1 l.24
            }
        }
        st.vis.insert(partition, vis);
        if let Some((evt, lvt)) = validity {
            st.eff = st.eff.max(evt);
            st.lvt.insert(partition, lvt);
            self.lamport = self.lamport.max(lvt); // Lamport's receive rule
        }
        // Only round one's: `snapshot_of` fixes the snapshot from them when it ends.
        if let Some(w) = stable.filter(|_| st.round == 1 && !st.bounded) {
            let s = w.to_vc(self.p);
            st.stable.join(&s);
            st.svec.insert(partition, s);
        }
        if st.waiting.is_empty() {
            self.read_round_done(core, ctx);
        }
    }

    /// Every partition answered the round: done, or round two to the partitions that may
    /// have missed a version in `max-read-ts` (Alg. 1 l.26-31, `behind`).
    fn read_round_done(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>) {
        let Pending::Read(st) = &mut self.pending else {
            return;
        };
        if st.round == 1 {
            // The snapshot is fixed now: a round two reads at it, as do later reads.
            st.stable = snapshot_of(st, self.p, self.mutation);
            let behind = behind(st, self.mutation);
            self.rounds.0 += 1;
            if !behind.is_empty() && !self.mutation.single_round_always {
                self.rounds.1 += 1;
                st.mrt = st.stable.clone();
                let (keys, mrt) = (st.keys.clone(), st.mrt.clone());
                let how = if self.flavor.validity_intervals() {
                    Reread::At(st.eff)
                } else {
                    Reread::Bounded
                };
                let only = Some(&behind);
                let (rid, waiting) = self.bounded(core, ctx, &keys, &mrt, only, (true, how));
                let Pending::Read(st) = &mut self.pending else {
                    unreachable!("still reading");
                };
                st.rid = rid;
                st.round = 2;
                st.waiting = waiting;
                return;
            }
        }
        if matches!(&self.pending, Pending::Read(st) if !st.partial.is_empty()) {
            return self.round_three(core, ctx);
        }
        let Pending::Read(st) = std::mem::replace(&mut self.pending, Pending::None) else {
            unreachable!("reading");
        };
        self.deps.join(&st.mrt); // Alg. 1 l.25
        let mut snapshot = st.mrt.clone();
        snapshot.join(&st.stable);
        self.snapshot = Some(snapshot);
        let values: Result<Vec<ReadValue>, Error> = st
            .keys
            .iter()
            .map(|(k, t)| {
                let o = st
                    .objects
                    .get(k)
                    .cloned()
                    .unwrap_or_else(|| Object::new(*t));
                read_value(core.buffer(), k.clone(), o, core.observed)
            })
            .collect();
        let response = values.map_or_else(Response::Error, Response::Values);
        core.answer(ctx, response);
    }

    /// A partition answered round two "pending" (Eiger, §II l.82): it holds a partially
    /// committed version the read may need.
    fn on_read_pending(
        &mut self,
        core: &mut SessionCore,
        ctx: &mut Ctx<Msg>,
        rid: u64,
        partition: PartitionId,
    ) {
        let Pending::Read(st) = &mut self.pending else {
            return;
        };
        if st.rid != rid || !st.waiting.remove(&partition) {
            return;
        }
        st.partial.insert(partition);
        if st.waiting.is_empty() {
            self.read_round_done(core, ctx);
        }
    }

    /// Eiger's round three (§II l.82: "a third round if partially committed versions were
    /// read on the second round"): the same read at the same bound, to the partitions that
    /// answered "pending"; they answer once the txn resolved there. The values the other
    /// partitions sent in round two stand (they were exact at the bound).
    fn round_three(&mut self, core: &SessionCore, ctx: &mut Ctx<Msg>) {
        let Pending::Read(st) = &mut self.pending else {
            return;
        };
        let only = std::mem::take(&mut st.partial);
        let (keys, bound, counted) = (st.keys.clone(), st.mrt.clone(), st.counted);
        self.rounds.2 += u64::from(counted);
        let how = (counted, Reread::Wait);
        let (rid, waiting) = self.bounded(core, ctx, &keys, &bound, Some(&only), how);
        let Pending::Read(st) = &mut self.pending else {
            unreachable!("still reading");
        };
        st.rid = rid;
        st.round = 3;
        st.waiting = waiting;
    }

    fn fail(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>, e: Error) {
        self.pending = Pending::None;
        let response = match e {
            Error::Aborted(reason) => {
                core.txn = None;
                Response::Aborted { reason }
            }
            e => Response::Error(e),
        };
        core.answer(ctx, response);
    }

    fn on_committed(
        &mut self,
        core: &mut SessionCore,
        ctx: &mut Ctx<Msg>,
        p: PartitionId,
        seq: u64,
    ) {
        let Pending::Commit { waiting, seqs, .. } = &mut self.pending else {
            return;
        };
        if !waiting.remove(&p) {
            return;
        }
        seqs.insert(p, seq);
        if !waiting.is_empty() {
            return;
        }
        let Pending::Commit { seqs, mut deps, .. } =
            std::mem::replace(&mut self.pending, Pending::None)
        else {
            unreachable!("committing");
        };
        for (p, s) in seqs {
            let i = p.0 as usize;
            deps.set(i, deps.get(i).max(s)); // Alg. 1 l.10: D_c = final-ts
        }
        self.deps.join(&deps);
        core.txn = None;
        core.answer(ctx, Response::Committed);
    }

    fn current(&self, core: &SessionCore, txn: TxnId, req: u64) -> bool {
        core.txn.as_ref().is_some_and(|b| b.txn == txn) && core.is_current(req)
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
        self.snapshot = None;
        self.txn_start = ctx.clock;
        core.answer(ctx, Response::Begun { txn });
    }

    fn read(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>, keys: Vec<(Key, ObjType)>) {
        core.start_request(ctx);
        match (self.snapshot.clone(), self.flavor) {
            (Some(s), _) => self.start_bounded(core, ctx, keys, s, false),
            (None, Flavor::Wren) => {
                let rid = self.rid();
                let n = core.topology.nodes_per_dc;
                let node = NodeId((core.id.0 % u64::from(n)) as u32);
                ctx.send(Addr::Node(node), Msg::Snapshot { rid });
                self.pending = Pending::Snapshot { rid, keys };
            }
            (None, _) => self.round_one(core, ctx, keys),
        }
    }

    fn commit(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>) {
        let updates = core.buffer().updates.clone();
        if updates.is_empty() {
            core.txn = None;
            return core.answer(ctx, Response::Committed);
        }
        if ctx.clock.saturating_sub(self.txn_start) > self.txn_timeout_ns {
            core.txn = None; // §VII: its snapshot's versions may be gone
            let reason = "transaction older than the GC timeout; restart it".to_string();
            return core.answer(ctx, Response::Aborted { reason });
        }
        let req = core.start_request(ctx);
        let txn = core.txn_id();
        let mut groups: BTreeMap<PartitionId, super::msg::Updates> = BTreeMap::new();
        for u in updates {
            groups
                .entry(core.topology.partition_of(&u.0))
                .or_default()
                .push(u);
        }
        let parts: Vec<PartitionId> = groups.keys().copied().collect();
        let mut deps = self.deps.clone();
        if let Some(s) = &self.snapshot {
            deps.join(s);
        }
        let full = self.flavor.full_vectors();
        let deps_wire = Wire::of(&deps, self.p, full);
        let snapshot = self.snapshot.as_ref().map(|s| Wire::of(s, self.p, full));
        for (p, updates) in groups {
            let m = Msg::Write {
                txn,
                req,
                partition: p,
                updates,
                parts: parts.clone(),
                coord: parts[0],
                deps: deps_wire.clone(),
                snapshot: snapshot.clone(),
            };
            ctx.send(Self::node(core, p), m);
        }
        self.pending = Pending::Commit {
            waiting: parts.iter().copied().collect(),
            seqs: BTreeMap::new(),
            deps,
        };
    }

    /// `D_c` joins `D_c` (what Alg. 1 l.10 and l.25 raise it with), and the Lamport clock
    /// (Eiger) takes the later of the two.
    fn join_past(&mut self, _core: &mut SessionCore, other: &Client) {
        self.deps.join(&other.deps);
        self.lamport = self.lamport.max(other.lamport);
    }

    fn on_message(&mut self, core: &mut SessionCore, ctx: &mut Ctx<Msg>, _from: Addr, msg: Msg) {
        if let Msg::KeysListed(answer) = msg {
            return crate::kit::keys::answered(core, ctx, answer);
        }
        if core.txn.is_none() || !core.running() {
            return; // stale
        }
        match msg {
            Msg::ReadReply {
                rid,
                partition,
                objects,
                ts,
                vis,
                snapshot,
            } => {
                if matches!(&self.pending, Pending::Read(st) if st.rid == rid) {
                    let reply = (ts, vis, snapshot, None);
                    self.on_read_reply(core, ctx, partition, objects, reply);
                }
            }
            Msg::EigerReadReply {
                rid,
                partition,
                objects,
                ts,
                vis,
                snapshot,
                evt,
                lvt,
            } => {
                if matches!(&self.pending, Pending::Read(st) if st.rid == rid) {
                    let reply = (ts, vis, snapshot, Some((evt, lvt)));
                    self.on_read_reply(core, ctx, partition, objects, reply);
                }
            }
            Msg::ReadPending { rid, partition } => {
                self.on_read_pending(core, ctx, rid, partition);
            }
            Msg::SnapshotReply { rid, snapshot } => {
                let Pending::Snapshot { rid: r, keys } = &self.pending else {
                    return;
                };
                if *r != rid {
                    return;
                }
                let keys = keys.clone();
                let mut bound = snapshot.to_vc(self.p);
                bound.join(&self.deps);
                self.rounds.0 += 1;
                self.rounds.1 += 1;
                self.start_bounded(core, ctx, keys, bound, true);
            }
            Msg::Committed {
                txn,
                req,
                partition,
                seq,
            } if self.current(core, txn, req) => self.on_committed(core, ctx, partition, seq),
            Msg::WriteFailed {
                txn, req, error, ..
            } if self.current(core, txn, req) => {
                let reason = format!("a participant refused the transaction: {error}");
                self.fail(core, ctx, Error::Aborted(reason));
            }
            _ => {}
        }
    }

    fn on_timeout(&mut self, _core: &mut SessionCore) {
        self.pending = Pending::None;
    }

    fn check_invariants(&self, core: &SessionCore) -> Result<(), String> {
        let waiting = !matches!(self.pending, Pending::None);
        if waiting != core.running() {
            return Err(format!(
                "pending {:?} but running = {}",
                self.pending,
                core.running()
            ));
        }
        if let Pending::Read(st) = &self.pending {
            if st.round > self.flavor.max_rounds() {
                return Err(format!("a read-only transaction in round {}", st.round));
            }
        }
        Ok(())
    }
}

/// The partitions round one may have read inconsistently, to read again in round two
/// (Alg. 1 l.27: `{i : S_i < max-read-ts}`; §IV-F, l.343 of the paper's text: the values
/// are from a consistent snapshot if every `S_i >= max-read-ts`), and under Eiger also
/// those whose validity interval ends before the read's effective time (the largest EVT;
/// module doc, Eiger's metadata). The first is what makes the snapshot consistent; the
/// second is Eiger's scalar check, which cannot tell a dependency from a txn that merely
/// committed later elsewhere (its spurious second rounds, §I l.44).
fn behind(st: &ReadState, mutation: Mutation) -> BTreeSet<PartitionId> {
    let stale = st
        .vis
        .keys()
        .filter(|p| !consistent(st, **p, mutation))
        .map(|p| (p, &0));
    let short = st.lvt.iter().filter(|(_, lvt)| **lvt < st.eff);
    stale.chain(short).map(|(p, _)| *p).collect()
}

/// Whether partition `p`'s round-one answer is exact at `max-read-ts`: no version it
/// missed can be in it. Two sound tests, either enough: the paper's, `S_p >=
/// max-read-ts` (Alg. 1 l.27: a txn with a timestamp below `S_p` had every participant
/// commit it as `S_p` knows, so it was visible, Alg. 2 l.32), where the reply carried
/// `S_p`; and §V's scalar, the visible frontier `vis_p >= max-read-ts[p]` (every txn
/// numbered up to it at `p` was visible). A reply without `S_p` has `vis_p = S_p[p]`
/// (`node.rs` `read_reply`), where the scalar passes whenever the vector does. Under
/// `own-entry-only` the vector test looks at `S_p[p]` alone: a txn held invisible at `p`
/// by another participant whose commit the read saw elsewhere is missed.
fn consistent(st: &ReadState, p: PartitionId, mutation: Mutation) -> bool {
    let i = p.0 as usize;
    let vector = st.svec.get(&p).is_some_and(|s| {
        if mutation.own_entry_only {
            s.get(i) >= st.mrt.get(i)
        } else {
            st.mrt.le(s)
        }
    });
    frontier_covers(st, p) || vector
}

/// §V's scalar test: `p`'s visible frontier reaches `max-read-ts[p]`.
fn frontier_covers(st: &ReadState, p: PartitionId) -> bool {
    let i = p.0 as usize;
    st.vis.get(&p).is_some_and(|v| *v >= st.mrt.get(i))
}

/// The snapshot of a txn whose first read finished round one: `max-read-ts` (Alg. 1 l.24)
/// raised, for each partition the read touched, to its visible frontier `vis_i`, and for
/// every other partition to the `S` entries the replies carried; then lowered to `S_i`
/// for each partition that passed the round-two test by its vector alone.
///
/// Alg. 1 reads once per txn, so its snapshot is `max-read-ts`: the join of what the
/// read saw. Our txns read again (interactive), at the snapshot, and `max-read-ts` alone
/// would pin those later reads to whatever versions the first one happened to see: a
/// fresh session whose first read finds an unwritten key reads nothing afterwards, ever.
/// The snapshot keeps the first read's values: a partition that passed by its scalar has
/// entry `i` at most `vis_i`, and every txn at or below it was visible when it answered
/// (Alg. 2 l.32-34), so round one already applied those of them that wrote its keys; one
/// that passed by its vector has the whole snapshot at most `S_i`, and every txn below
/// that was visible there; round two reads at the snapshot. The lowering keeps it at or
/// above `max-read-ts` (`S_i >= max-read-ts`). Every entry is a committed, durable prefix
/// (`vis_i <= S[i]`; `S` holds only such), so a node may merge them into its own `S` when
/// it serves a read at the snapshot (Alg. 2 l.46), which makes visible every txn the
/// snapshot covers.
fn snapshot_of(st: &ReadState, p: usize, mutation: Mutation) -> Vc {
    let mut x = st.mrt.clone();
    for i in (0..p).filter(|_| !mutation.stale_snapshot) {
        let raise = match st.vis.get(&PartitionId(i as u32)) {
            Some(vis) if !mutation.snapshot_from_s => *vis,
            Some(vis) => st.stable.get(i).max(*vis),
            None => st.stable.get(i),
        };
        if raise > x.get(i) {
            x.set(i, raise);
        }
    }
    for (q, s) in &st.svec {
        if !frontier_covers(st, *q) && st.mrt.le(s) {
            x.meet(s);
        }
    }
    assert!(
        st.mrt.le(&x),
        "a txn's snapshot covers what its first read saw"
    );
    x
}
