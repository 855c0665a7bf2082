//! Replication of the `eventual` baseline (issue 15): each node's writes form one stream
//! per sibling, in the order they were made, pushed as soon as they are durable (so the
//! baseline keeps its visibility latency) and acknowledged; the streams, log, rewind and
//! GC are `kit::repl`'s, as in Cure and Occult.
//!
//! Before, a write was sent once to every sibling after its record was durable: a crash
//! of the receiver, a reset connection or a full link queue lost it for good and the DCs
//! diverged (the simulator's `crashes` fault showed it). Now a receiver takes only pieces
//! that continue what it has (`Received::accept`), every message carries the sender's
//! acknowledgements, a sibling that lags while it keeps talking gets our stream again from
//! what it acknowledged, and the log keeps a write until every live sibling acknowledged
//! it. A sibling silent for `silent_sibling_ns` stops holding the log back once it holds
//! more than `silent_sibling_log_max` writes, except for a sibling we are the *keeper*
//! of (`transfer::keeps_for`: one DC of each pair), which holds it up to
//! `keeper_log_max` writes.
//!
//! **State transfer** (`transfer.rs`). A sibling that returns after our log dropped writes
//! it lacks is never sent a gapped piece (`ReplLog::serves_from`); it gets our whole store
//! and applied vector instead, replaces its store by it and re-applies the writes it has
//! beyond it: its own from its log (it is our keeper: the log holds every write of its
//! own we did not acknowledge) and other origins' from `recent`, the last
//! `RECENT_PER_ORIGIN_MAX` writes it received of each. The baseline's objects are
//! op-based (a counter is a sum, with no record of which origin's increments it holds),
//! so an image cannot be merged into another replica's state, only replace it.

use super::{After, Msg, Node, Record};
use crate::kit::repl::Replicated;
use crate::kit::wire::{SharedStream, WireForm};
use causeway_core::crdt::Op;
use causeway_core::limits::REPLICATION_BATCH_MAX;
use causeway_core::{Addr, Ctx, DcId, Key, Nanos, SessionId, TxnId, Vc};
use serde::{Deserialize, Serialize};

/// Writes of each other origin a node keeps after applying them (`Node::recent`): an
/// install re-applies those above the image's vector, so a sender that got a third DC's
/// writes a little later than we did (under load, the usual case) is not refused.
pub const RECENT_PER_ORIGIN_MAX: u64 = 1 << 12;

/// One write of a node's stream: its sequence number there and its applied ops.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplOps {
    pub seq: u64,
    pub ops: Vec<(Key, Op)>,
}

/// A piece goes on the wire in its own encoding, once for every sibling (`kit::wire`).
impl WireForm for ReplOps {}

impl Replicated for ReplOps {
    fn id(&self) -> TxnId {
        let session = SessionId(0);
        TxnId {
            session,
            seq: self.seq,
        }
    }

    fn time_at(&self, _: DcId) -> u64 {
        self.seq
    }
}

impl Node {
    /// What we hold durably: every sibling's stream and our own, as acknowledgements.
    pub(super) fn acks(&self) -> Vc {
        let mut v = Vc::zero(self.durable_have.len());
        for (i, h) in self.durable_have.iter().enumerate() {
            v.set(i, *h);
        }
        v.set(usize::from(self.dc.0), self.durable_seq);
        v
    }

    /// Sends each sibling the next piece of our stream, if there is one (after a write
    /// became durable); `heartbeat`: a message to every sibling even without one.
    /// The siblings that go on from the same point share one piece, encoded once.
    pub(super) fn push(&mut self, ctx: &mut Ctx<Msg>, heartbeat: bool) {
        let mut made = None;
        for s in self.sibs.ids() {
            self.push_to(ctx, s, heartbeat, &mut made);
        }
    }

    /// `made`: the piece this round made for another sibling, reused if `s` goes on from
    /// the same point.
    fn push_to(
        &mut self,
        ctx: &mut Ctx<Msg>,
        s: DcId,
        heartbeat: bool,
        made: &mut Option<SharedStream<ReplOps>>,
    ) {
        let stream =
            self.sibs
                .own_piece(s, &self.log, self.durable_seq, REPLICATION_BATCH_MAX, made);
        if stream.is_none() && !heartbeat {
            return;
        }
        let restarted = self.announce.remove(&s);
        let msg = Msg::Repl {
            restarted,
            acks: self.acks(),
            stream,
        };
        ctx.send(Addr::Node(self.sibling(s)), msg);
    }

    /// Every replication interval: rewinds for siblings that lag while they talk, a
    /// heartbeat (with our acknowledgements) to every sibling, state transfers, GC of the
    /// log.
    pub(super) fn replicate(&mut self, ctx: &mut Ctx<Msg>) {
        let (clock, grace) = (self.clock, self.section.lag_grace_ns);
        let acks = self.acks();
        for s in self.sibs.ids() {
            let _ = self.sibs.lagging(s, &acks, clock, grace); // no relays: streams are direct
        }
        self.push(ctx, true);
        for s in self.sibs.ids() {
            self.transfer_to(ctx, s);
        }
        self.gc_log();
    }

    /// Drops our writes every sibling acknowledged. A sibling silent for
    /// `silent_sibling_ns` no longer holds them once the log holds more than
    /// `silent_sibling_log_max` (`ReplLog::gc_acknowledged`'s rule), unless we are its
    /// keeper (then only past `keeper_log_max`): a state transfer from it can then always
    /// be installed here, our writes above its image re-applied (`transfer.rs`).
    fn gc_log(&mut self) {
        let len = self.log.len();
        let over = len > self.section.silent_sibling_log_max;
        let hard = len > self.section.keeper_log_max;
        let (me, clock) = (self.dc, self.clock);
        let silent_ns = self.section.silent_sibling_ns;
        let held = |s: DcId, heard: Option<Nanos>| match heard {
            None => true, // never heard: it holds the log at 0, as in `Siblings::gc_bound`
            Some(h) => {
                let silent = clock.saturating_sub(h) > silent_ns;
                !(over && silent && (hard || !super::keeps_for(me, s)))
            }
        };
        let bound = self
            .sibs
            .ids()
            .into_iter()
            .filter_map(|s| self.sibs.get(s).map(|sib| (s, sib)))
            .filter(|(s, sib)| held(*s, sib.last_heard))
            .map(|(_, sib)| match sib.last_heard {
                None => 0,
                Some(_) => sib.acks.get(usize::from(me.0)),
            })
            .min()
            .unwrap_or(u64::MAX);
        self.log.gc(|o| if o == me { bound } else { 0 });
    }

    /// Keeps `writes` of `origin`, just applied, among the recent ones (live and in
    /// replay, so an install finds the same ones), at most `RECENT_PER_ORIGIN_MAX`.
    pub(super) fn keep_recent(&mut self, origin: DcId, writes: Vec<ReplOps>) {
        assert!(origin != self.dc, "our own writes are in the log");
        writes.into_iter().for_each(|w| self.recent.add(origin, w));
        // A stream's writes are numbered 1, 2, ... without gaps: keep the last ones.
        let floor = self
            .received
            .have(origin)
            .saturating_sub(RECENT_PER_ORIGIN_MAX);
        self.recent.gc(|o| if o == origin { floor } else { 0 });
    }

    /// A sibling's message: its acknowledgements, and maybe a piece of its stream.
    pub(super) fn on_repl(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: Addr,
        restarted: bool,
        acks: Vc,
        stream: Option<SharedStream<ReplOps>>,
    ) {
        let Addr::Node(n) = from else {
            return;
        };
        let s = self.config.topology.dc_of(n);
        if !self.sibs.heard(s, acks, restarted, self.clock) {
            return;
        }
        // What it just told us may let our stream go on (first heard, or a restart).
        self.push_to(ctx, s, false, &mut None);
        let Some(st) = stream.map(SharedStream::into_stream) else {
            return;
        };
        let (origin, upto) = (st.origin, st.upto);
        let Some(writes) = self.received.accept(st) else {
            return;
        };
        writes.iter().for_each(|w| self.apply_all(&w.ops));
        let record = Record::Remote {
            origin,
            upto,
            writes,
        };
        self.durability.persist(ctx, record.encode(), Vec::new());
        let Record::Remote { writes, .. } = record else {
            unreachable!("built above")
        };
        self.keep_recent(origin, writes);
        if let Some(a) = self.durability.after_durable(After::Have { origin, upto }) {
            self.run_after(ctx, a);
        }
    }

    /// A durable record's follow-up: acknowledgements rise, our stream goes out.
    pub(super) fn run_after(&mut self, ctx: &mut Ctx<Msg>, a: After) {
        match a {
            After::Have { origin, upto } => {
                let h = &mut self.durable_have[usize::from(origin.0)];
                *h = (*h).max(upto);
            }
            After::Own(seq) => {
                self.durable_seq = self.durable_seq.max(seq);
                self.push(ctx, false);
            }
            After::Installed(v) => self.raise_durable_have(&v),
        }
    }
}
