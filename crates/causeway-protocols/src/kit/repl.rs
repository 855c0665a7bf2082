//! Replication streams between sibling replicas of a partition in different DCs, with
//! acknowledgements, catch-up and relay (Cure Alg. 2 l.18-37 and the decisions of
//! `cure/mod.rs`; UniStore and PaRiS replicate the same way).
//!
//! Each origin DC's committed txns form a stream ordered by their time at the origin; a
//! [`Stream`] piece claims "you now have every txn of `origin` with time in `(from, upto]`".
//! The [`ReplLog`] keeps txns (own ones to stream, others' to relay) until every live
//! sibling acknowledged them; [`Siblings`] tracks what each sibling acknowledged (its
//! stable vector, sent with every message), how far our own stream to it got, and which
//! origins it lags on for longer than a grace period while it keeps talking (then we
//! rewind our stream, or relay a third DC's txns from our log). [`Received`] accepts only
//! pieces that continue what we have, so there are no gaps.

use super::wire::{reuse_or_make, SharedStream, WireForm};
use causeway_core::{DcId, Nanos, TxnId, Vc};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

/// A replicated txn: its id and its time in its origin's stream.
pub trait Replicated: Clone {
    fn id(&self) -> TxnId;
    fn time_at(&self, origin: DcId) -> u64;
}

/// A contiguous piece of one origin's stream; empty `txns` is a heartbeat.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stream<T> {
    pub origin: DcId,
    pub from: u64,
    pub upto: u64,
    pub txns: Vec<T>,
}

/// Txns of one origin a partition's log keeps for a silent sibling: while the origin's
/// log holds no more, a sibling away for any time (a partition, a frozen or restarted DC)
/// is not presumed failed and catches up from the log alone when it returns. Beyond it,
/// silent siblings stop holding the log back (memory stays bounded) and one that returns
/// needs a state transfer (`kit::transfer`; Cure, PaRiS, Occult and the `eventual`
/// baseline have one: docs/ARCHITECTURE.md).
pub const SILENT_SIBLING_LOG_MAX: usize = 1 << 18;

/// One origin's txns in the log, each under its (time at origin, id), sorted by it.
type OriginLog<T> = VecDeque<((u64, TxnId), T)>;

/// Drops the txns at the front of origin `o`'s log with time `<= bound`, and raises
/// `dropped[o]` (its highest time dropped) to theirs.
fn drop_through<T>(log: &mut OriginLog<T>, dropped: &mut BTreeMap<DcId, u64>, o: DcId, bound: u64) {
    while let Some(((t, _), _)) = log.front().filter(|((t, _), _)| *t <= bound) {
        let floor = dropped.entry(o).or_default();
        *floor = (*floor).max(*t);
        log.pop_front();
    }
}

/// Committed txns per origin, by (time at origin, id), until acknowledged everywhere.
///
/// Each origin's txns are a queue sorted by that key: they are added nearly in order (a
/// commit or a stream piece) and dropped from the front, so both ends cost O(1) where a
/// B-tree's insertions and removals were a tenth of a replica's CPU. Serialized as the
/// map it replaces (a sequence of key-value pairs is a map's encoding in postcard).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplLog<T> {
    per_origin: BTreeMap<DcId, OriginLog<T>>,
    /// Per origin, the highest time of a txn dropped: a piece starting below it would
    /// claim txns the log no longer has, so none is sent ([`ReplLog::serves_from`]); a
    /// sibling that lacks them gets a state transfer instead (`cure/transfer.rs`).
    dropped: BTreeMap<DcId, u64>,
}

impl<T> Default for ReplLog<T> {
    fn default() -> Self {
        ReplLog {
            per_origin: BTreeMap::new(),
            dropped: BTreeMap::new(),
        }
    }
}

impl<T: Replicated> ReplLog<T> {
    /// Adds a txn, replacing one with the same key (a txn replayed and received again).
    pub fn add(&mut self, origin: DcId, t: T) {
        let key = (t.time_at(origin), t.id());
        let log = self.per_origin.entry(origin).or_default();
        if log.back().is_none_or(|(last, _)| *last < key) {
            log.push_back((key, t));
            return;
        }
        match log.binary_search_by(|(k, _)| k.cmp(&key)) {
            Ok(at) => log[at].1 = t,
            Err(at) => log.insert(at, (key, t)),
        }
    }

    /// The txns of `origin` with `from < time <= upto`, cut to about `batch_max` between
    /// two times (so the piece still claims a complete prefix), and the `upto` they reach.
    /// The caller checks [`ReplLog::serves_from`] first: a piece never claims a dropped txn.
    pub fn stream(&self, origin: DcId, from: u64, upto: u64, batch_max: usize) -> Stream<T> {
        assert!(
            self.serves_from(origin, from),
            "a stream piece would claim txns the log dropped"
        );
        let piece = |n: usize| -> Vec<T> {
            let txns = self.entries_after(origin, from);
            let txns = txns.take_while(|t| t.time_at(origin) <= upto).take(n);
            txns.cloned().collect()
        };
        // One more than a batch tells where to cut (sorted by time, nothing after it can
        // be below the cut).
        let mut txns = piece(batch_max.saturating_add(1));
        let mut upto = upto;
        if txns.len() > batch_max {
            let cut = txns[batch_max].time_at(origin);
            if cut - 1 > from {
                upto = cut - 1;
                txns.retain(|t| t.time_at(origin) <= upto);
            } else {
                // More than a batch share the first time: the piece takes them all.
                txns = piece(usize::MAX);
            }
        }
        Stream {
            origin,
            from,
            upto,
            txns,
        }
    }

    /// Drops, per origin, the txns at or below `bound(origin)`.
    pub fn gc(&mut self, bound: impl Fn(DcId) -> u64) {
        for (o, log) in self.per_origin.iter_mut() {
            drop_through(log, &mut self.dropped, *o, bound(*o));
        }
    }

    /// The highest time of a txn of `origin` this log dropped (0: none).
    pub fn dropped(&self, origin: DcId) -> u64 {
        self.dropped.get(&origin).copied().unwrap_or(0)
    }

    /// Whether a piece of `origin`'s stream starting after `from` can be served: no txn
    /// above `from` was dropped. A sibling presumed failed that returns below it needs a
    /// state transfer.
    pub fn serves_from(&self, origin: DcId, from: u64) -> bool {
        from >= self.dropped(origin)
    }

    /// Drops what every sibling acknowledged ([`Siblings::gc_bound`]); a sibling silent for
    /// `silent` is presumed failed only for an origin whose log holds more than
    /// `kept_max` txns ([`SILENT_SIBLING_LOG_MAX`] in the protocols).
    pub fn gc_acknowledged(
        &mut self,
        sibs: &Siblings,
        clock: Nanos,
        silent: Nanos,
        kept_max: usize,
    ) {
        for (o, log) in self.per_origin.iter_mut() {
            let silent = if log.len() > kept_max {
                silent
            } else {
                Nanos::MAX
            };
            let b = sibs.gc_bound(*o, clock, silent);
            drop_through(log, &mut self.dropped, *o, b);
        }
    }

    /// The txns of `origin` with time above `after`, in order.
    pub fn entries_after(&self, origin: DcId, after: u64) -> impl Iterator<Item = &T> {
        self.per_origin.get(&origin).into_iter().flat_map(move |l| {
            let start = l.partition_point(|((t, _), _)| *t <= after);
            l.range(start..).map(|(_, t)| t)
        })
    }

    /// Txns kept (for gauges and tests).
    pub fn len(&self) -> usize {
        self.per_origin.values().map(OriginLog::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What one sibling told us and what we sent it.
#[derive(Clone, Debug, Default)]
pub struct Sibling {
    /// Its stable vector: every txn of origin `k` with time `<= acks[k]` is durable there.
    pub acks: Vc,
    /// Our own stream to it is complete up to here; `None` until it first talks to us.
    pub sent_upto: Option<u64>,
    /// Per origin it lags on: (clock when noticed, the level it must reach).
    probes: BTreeMap<DcId, (Nanos, u64)>,
    pub last_heard: Option<Nanos>,
}

/// The siblings of one partition replica (same partition, other DCs).
#[derive(Clone, Debug)]
pub struct Siblings {
    me: DcId,
    map: BTreeMap<DcId, Sibling>,
}

impl Siblings {
    pub fn new(me: DcId, dcs: impl IntoIterator<Item = DcId>) -> Siblings {
        let map = dcs
            .into_iter()
            .filter(|d| *d != me)
            .map(|d| (d, Sibling::default()))
            .collect();
        Siblings { me, map }
    }

    pub fn ids(&self) -> Vec<DcId> {
        self.map.keys().copied().collect()
    }

    pub fn get(&self, s: DcId) -> Option<&Sibling> {
        self.map.get(&s)
    }

    /// Sibling `s` sent its acknowledgements; a restarted one (or one we never heard)
    /// lost what was in flight, so our stream restarts from what it has. False for a
    /// DC that is not a sibling.
    pub fn heard(&mut self, s: DcId, acks: Vc, restarted: bool, clock: Nanos) -> bool {
        let me = usize::from(self.me.0);
        let Some(sib) = self.map.get_mut(&s) else {
            return false;
        };
        sib.acks = acks;
        sib.last_heard = Some(clock);
        if restarted || sib.sent_upto.is_none() {
            sib.sent_upto = Some(sib.acks.get(me));
            sib.probes.clear();
        }
        true
    }

    /// The next piece of our own stream to `s` (Alg. 2 l.23-31: txns with time `<=
    /// upto` in time order), if it has not been sent `upto` yet and the log still holds
    /// every txn after where it starts ([`ReplLog::serves_from`]); a piece shared by every
    /// sibling that goes on from the same point (`kit::wire`): `made` holds the piece this
    /// round made for another sibling, with the same `upto`, and is reused when `s`
    /// starts where it does.
    pub fn own_piece<T: Replicated + WireForm + Clone>(
        &mut self,
        s: DcId,
        log: &ReplLog<T>,
        upto: u64,
        batch_max: usize,
        made: &mut Option<SharedStream<T>>,
    ) -> Option<SharedStream<T>> {
        let from = self.own_from(s, log).filter(|from| upto > *from)?;
        let piece = reuse_or_make(made, from, || log.stream(self.me, from, upto, batch_max));
        assert!(
            piece.stream().upto <= upto,
            "a piece made for another round"
        );
        self.sent_through(s, piece.stream().upto);
        Some(piece)
    }

    /// Where our stream to `s` goes on from, if the log still serves it.
    fn own_from<T: Replicated>(&self, s: DcId, log: &ReplLog<T>) -> Option<u64> {
        let sib = self.map.get(&s)?;
        let from = sib.sent_upto?;
        if log.serves_from(self.me, from) {
            return Some(from);
        }
        // A rewind went below what the log dropped; a state transfer may have brought the
        // sibling past it since: go on from what it acknowledged (it holds that).
        let from = from.max(sib.acks.get(usize::from(self.me.0)));
        log.serves_from(self.me, from).then_some(from)
    }

    /// Our stream to `s` was sent through `upto`.
    fn sent_through(&mut self, s: DcId, upto: u64) {
        if let Some(sib) = self.map.get_mut(&s) {
            sib.sent_upto = Some(upto);
        }
    }

    /// Origins `s` lags on for longer than `grace` while it keeps talking: for our own
    /// origin our stream rewinds to its ack; for a third DC we relay from our log.
    /// Returns the relays to send as (origin, from). `have` is our stable vector.
    pub fn lagging(&mut self, s: DcId, have: &Vc, clock: Nanos, grace: Nanos) -> Vec<(DcId, u64)> {
        let me = self.me;
        let Some(sib) = self.map.get_mut(&s) else {
            return Vec::new();
        };
        let Some(heard) = sib.last_heard else {
            return Vec::new();
        };
        let talking = clock.saturating_sub(heard) < grace;
        let mut relays = Vec::new();
        for o in (0..have.dcs.len() as u16).map(DcId).filter(|o| *o != s) {
            let ack = sib.acks.get(usize::from(o.0));
            let level = if o == me {
                sib.sent_upto.unwrap_or(0)
            } else {
                have.get(usize::from(o.0))
            };
            match sib.probes.get(&o).copied() {
                None if ack < level => {
                    sib.probes.insert(o, (clock, level));
                }
                Some((_, target)) if ack >= target => {
                    sib.probes.remove(&o);
                }
                Some((since, _)) if talking && clock.saturating_sub(since) > grace => {
                    sib.probes.remove(&o);
                    if o == me {
                        sib.sent_upto = Some(ack);
                    } else {
                        relays.push((o, ack));
                    }
                }
                _ => {}
            }
        }
        relays
    }

    /// Whether `s`, heard from within `heard_ns` of `clock`, lacks txns of our own stream
    /// that `log` dropped: the sibling was presumed failed and came back, and only a state
    /// transfer can bring it up to date (`cure/transfer.rs`). A sibling not heard lately
    /// is not sent one: its chunks would only wait in a link queue, or be lost.
    pub fn needs_transfer<T: Replicated>(
        &self,
        s: DcId,
        log: &ReplLog<T>,
        clock: Nanos,
        heard_ns: Nanos,
    ) -> bool {
        let me = usize::from(self.me.0);
        let recent = |h: Nanos| clock.saturating_sub(h) < heard_ns;
        self.map
            .get(&s)
            .filter(|sib| sib.last_heard.is_some_and(recent))
            .is_some_and(|sib| !log.serves_from(self.me, sib.acks.get(me)))
    }

    /// The entry-wise meet of every sibling's acknowledgement (zero for a sibling never
    /// heard), or `None` without siblings: what every other DC is known to hold durably.
    pub fn acked_by_all(&self) -> Option<Vc> {
        let mut all: Option<Vc> = None;
        for sib in self.map.values() {
            let acks = match sib.last_heard {
                Some(_) => sib.acks.clone(),
                None => Vc::zero(sib.acks.dcs.len().max(1)),
            };
            match &mut all {
                Some(v) => v.meet(&acks),
                None => all = Some(acks),
            }
        }
        all
    }

    /// Our own stream to `s` goes on from `upto` (after a state transfer at `upto`).
    pub fn restart_stream_at(&mut self, s: DcId, upto: u64) {
        if let Some(sib) = self.map.get_mut(&s) {
            sib.sent_upto = Some(upto);
            sib.probes.clear();
        }
    }

    /// How far every live sibling other than `origin` acknowledged `origin`'s stream: the
    /// log may drop txns at or below it. A sibling silent for `silent` is presumed failed
    /// and no longer holds the log back; one never heard from holds it at 0.
    pub fn gc_bound(&self, origin: DcId, clock: Nanos, silent: Nanos) -> u64 {
        let live = self.map.iter().filter(|(s, sib)| {
            **s != origin
                && sib
                    .last_heard
                    .is_none_or(|h| clock.saturating_sub(h) <= silent)
        });
        live.map(|(_, sib)| match sib.last_heard {
            None => 0,
            Some(_) => sib.acks.get(usize::from(origin.0)),
        })
        .min()
        .unwrap_or(u64::MAX)
    }
}

/// How far each origin's stream has been accepted here (durable or being persisted).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Received {
    me: DcId,
    have: Vec<u64>,
}

impl Received {
    pub fn new(me: DcId, dcs: usize) -> Received {
        Received {
            me,
            have: vec![0; dcs],
        }
    }

    pub fn have(&self, origin: DcId) -> u64 {
        self.have[usize::from(origin.0)]
    }

    /// A recovered piece: we had everything of `origin` up to `upto`.
    pub fn recovered(&mut self, origin: DcId, upto: u64) {
        let h = &mut self.have[usize::from(origin.0)];
        *h = (*h).max(upto);
    }

    /// Takes `st` if it continues what we have (no gap) and adds something: returns the
    /// txns new to us (duplicates dropped); `None` to ignore the piece.
    pub fn accept<T: Replicated>(&mut self, st: Stream<T>) -> Option<Vec<T>> {
        let o = usize::from(st.origin.0);
        let have = *self.have.get(o)?;
        if st.origin == self.me || st.from > have || st.upto <= have {
            return None;
        }
        self.have[o] = st.upto;
        Some(
            st.txns
                .into_iter()
                .filter(|t| t.time_at(st.origin) > have)
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_core::SessionId;

    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    struct T(u64);

    impl WireForm for T {}

    /// The piece for `s` alone (no other sibling's piece to reuse this round).
    fn own_stream(
        sibs: &mut Siblings,
        s: DcId,
        log: &ReplLog<T>,
        upto: u64,
        batch_max: usize,
    ) -> Option<Stream<T>> {
        let piece = sibs.own_piece(s, log, upto, batch_max, &mut None)?;
        Some(piece.into_stream())
    }

    impl Replicated for T {
        fn id(&self) -> TxnId {
            TxnId {
                session: SessionId(1),
                seq: self.0,
            }
        }
        fn time_at(&self, _: DcId) -> u64 {
            self.0
        }
    }

    fn vc(v: &[u64]) -> Vc {
        Vc {
            dcs: v.to_vec(),
            extra: Vec::new(),
        }
    }

    #[test]
    fn streams_are_cut_between_times_and_claim_a_prefix() {
        let mut log = ReplLog::default();
        for t in [10, 20, 30, 40] {
            log.add(DcId(0), T(t));
        }
        let st = log.stream(DcId(0), 10, 100, 2);
        assert_eq!(st.txns, vec![T(20), T(30)]);
        assert_eq!(st.upto, 39, "cut just below the first txn left out");
        log.gc(|_| 25);
        assert_eq!(log.len(), 2);
    }

    /// A txn at `time` with id `seq` (times shared by several txns).
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    struct Tt(u64, u64);

    impl Replicated for Tt {
        fn id(&self) -> TxnId {
            TxnId {
                session: SessionId(1),
                seq: self.1,
            }
        }
        fn time_at(&self, _: DcId) -> u64 {
            self.0
        }
    }

    #[test]
    fn the_log_sorts_late_adds_replaces_repeats_and_keeps_the_maps_encoding() {
        let mut log = ReplLog::default();
        for t in [Tt(30, 1), Tt(10, 2), Tt(20, 4), Tt(20, 3), Tt(40, 5)] {
            log.add(DcId(0), t);
        }
        log.add(DcId(0), Tt(20, 3)); // received again after a replay
        log.add(DcId(2), Tt(7, 6));
        let order: Vec<_> = log.entries_after(DcId(0), 0).cloned().collect();
        assert_eq!(
            order,
            [Tt(10, 2), Tt(20, 3), Tt(20, 4), Tt(30, 1), Tt(40, 5)]
        );
        assert_eq!(log.len(), 6);
        let after: Vec<_> = log.entries_after(DcId(0), 20).cloned().collect();
        assert_eq!(after, [Tt(30, 1), Tt(40, 5)]);
        log.gc(|o| if o == DcId(0) { 20 } else { 0 });
        assert_eq!((log.len(), log.dropped(DcId(0))), (3, 20));
        // Checkpoints written with the B-tree log still decode: same bytes.
        #[derive(Serialize)]
        struct MapLog {
            per_origin: BTreeMap<DcId, BTreeMap<(u64, TxnId), Tt>>,
            dropped: BTreeMap<DcId, u64>,
        }
        let by_origin = |o| log.per_origin[&o].iter().cloned().collect();
        let map = MapLog {
            per_origin: [(DcId(0), by_origin(DcId(0))), (DcId(2), by_origin(DcId(2)))].into(),
            dropped: log.dropped.clone(),
        };
        let bytes = postcard::to_allocvec(&map).expect("encodes");
        assert_eq!(postcard::to_allocvec(&log).expect("encodes"), bytes);
        let back: ReplLog<Tt> = postcard::from_bytes(&bytes).expect("decodes");
        assert_eq!(back, log);
    }

    #[test]
    fn a_piece_takes_every_txn_of_a_time_shared_by_more_than_a_batch() {
        let mut log = ReplLog::default();
        for seq in 1..=5 {
            log.add(DcId(0), Tt(10, seq));
        }
        log.add(DcId(0), Tt(20, 6));
        let st = log.stream(DcId(0), 0, 100, 2);
        assert_eq!(
            (st.txns.len(), st.upto),
            (0, 9),
            "cut below the shared time"
        );
        let st = log.stream(DcId(0), 9, 100, 2);
        assert_eq!((st.txns.len(), st.upto), (6, 100), "no cut within a time");
        let st = log.stream(DcId(0), 10, 100, 2);
        assert_eq!((st.txns, st.upto), (vec![Tt(20, 6)], 100));
    }

    #[test]
    fn received_accepts_only_gapless_pieces_and_drops_duplicates() {
        let mut r = Received::new(DcId(1), 3);
        let piece = |from, upto, txns: Vec<T>| Stream {
            origin: DcId(0),
            from,
            upto,
            txns,
        };
        assert_eq!(r.accept(piece(5, 10, vec![T(7)])), None, "a gap: we have 0");
        assert_eq!(r.accept(piece(0, 10, vec![T(7)])), Some(vec![T(7)]));
        assert_eq!(r.accept(piece(5, 20, vec![T(7), T(15)])), Some(vec![T(15)]));
        assert_eq!(r.accept(piece(0, 20, vec![])), None, "nothing new");
        assert_eq!(r.have(DcId(0)), 20);
    }

    #[test]
    fn a_lagging_sibling_gets_our_stream_again_or_a_relay() {
        let mut sibs = Siblings::new(DcId(0), [DcId(0), DcId(1), DcId(2)]);
        assert!(sibs.heard(DcId(1), vc(&[5, 0, 0]), false, 1_000));
        let mut log = ReplLog::default();
        log.add(DcId(0), T(8));
        let own = own_stream(&mut sibs, DcId(1), &log, 10, 100).expect("from its ack");
        assert_eq!((own.from, own.upto, own.txns), (5, 10, vec![T(8)]));
        let have = vc(&[10, 0, 30]);
        assert!(
            sibs.lagging(DcId(1), &have, 1_000, 100).is_empty(),
            "noticed"
        );
        sibs.heard(DcId(1), vc(&[5, 0, 0]), false, 1_150);
        let relays = sibs.lagging(DcId(1), &have, 1_200, 100);
        assert_eq!(relays, vec![(DcId(2), 0)], "relay DC 2's txns from 0");
        assert_eq!(
            sibs.get(DcId(1)).unwrap().sent_upto,
            Some(5),
            "own stream rewound"
        );
    }

    #[test]
    fn siblings_at_the_same_point_share_one_piece_and_the_others_get_their_own() {
        let mut sibs = Siblings::new(DcId(0), [DcId(0), DcId(1), DcId(2), DcId(3)]);
        sibs.heard(DcId(1), vc(&[2, 0, 0, 0]), false, 10);
        sibs.heard(DcId(2), vc(&[2, 0, 0, 0]), false, 10);
        sibs.heard(DcId(3), vc(&[4, 0, 0, 0]), false, 10);
        let mut log = ReplLog::default();
        for t in [3, 5, 8] {
            log.add(DcId(0), T(t));
        }
        let mut made = None;
        let one = sibs.own_piece(DcId(1), &log, 9, 100, &mut made).unwrap();
        let two = sibs.own_piece(DcId(2), &log, 9, 100, &mut made).unwrap();
        assert!(one.same_piece(&two), "both go on from 2: one piece");
        let three = sibs.own_piece(DcId(3), &log, 9, 100, &mut made).unwrap();
        assert!(!three.same_piece(&one), "DC 3 goes on from 4");
        assert_eq!(one.stream().txns, vec![T(3), T(5), T(8)]);
        assert_eq!(three.stream().txns, vec![T(5), T(8)]);
        let again = sibs.own_piece(DcId(1), &log, 9, 100, &mut None);
        assert_eq!(again, None, "sent through 9 already");
    }

    #[test]
    fn silent_siblings_stop_holding_the_log() {
        let mut sibs = Siblings::new(DcId(0), [DcId(0), DcId(1), DcId(2)]);
        assert_eq!(
            sibs.gc_bound(DcId(0), 0, 100),
            0,
            "never heard: hold everything"
        );
        sibs.heard(DcId(1), vc(&[7, 0, 0]), false, 10);
        sibs.heard(DcId(2), vc(&[3, 0, 0]), false, 10);
        assert_eq!(sibs.gc_bound(DcId(0), 50, 100), 3);
        sibs.heard(DcId(1), vc(&[9, 0, 0]), false, 500);
        assert_eq!(sibs.gc_bound(DcId(0), 500, 100), 9, "DC 2 silent for 490");
    }

    #[test]
    fn a_silent_sibling_holds_the_log_until_it_outgrows_its_limit() {
        let mut sibs = Siblings::new(DcId(0), [DcId(0), DcId(1), DcId(2)]);
        sibs.heard(DcId(1), vc(&[0, 0, 0]), false, 10);
        sibs.heard(DcId(2), vc(&[0, 0, 0]), false, 10);
        let mut log = ReplLog::default();
        for t in 1..=6 {
            log.add(DcId(0), T(t));
        }
        sibs.heard(DcId(1), vc(&[6, 0, 0]), false, 10_000);
        log.gc_acknowledged(&sibs, 10_000, 100, 8);
        assert_eq!(
            log.len(),
            6,
            "DC 2, silent for long, still holds its 6 txns"
        );
        for t in 7..=9 {
            log.add(DcId(0), T(t));
        }
        sibs.heard(DcId(1), vc(&[9, 0, 0]), false, 10_000);
        log.gc_acknowledged(&sibs, 10_000, 100, 8);
        assert_eq!(log.len(), 0, "past the limit DC 2 is presumed failed");
        log.add(DcId(0), T(10));
        sibs.heard(DcId(2), vc(&[10, 0, 0]), false, 10_001);
        log.gc_acknowledged(&sibs, 10_001, 100, 8);
        assert_eq!(log.len(), 1, "DC 1 has not acknowledged T(10) yet");
    }

    #[test]
    fn a_log_never_streams_below_what_it_dropped_and_says_who_needs_a_transfer() {
        let mut sibs = Siblings::new(DcId(0), [DcId(0), DcId(1), DcId(2)]);
        let mut log = ReplLog::default();
        for t in 1..=6 {
            log.add(DcId(0), T(t));
        }
        assert!(!sibs.needs_transfer(DcId(1), &log, 10, 5), "never heard");
        sibs.heard(DcId(1), vc(&[2, 0, 0]), false, 10);
        sibs.heard(DcId(2), vc(&[6, 0, 0]), false, 10);
        assert!(
            !sibs.needs_transfer(DcId(1), &log, 10, 5),
            "nothing dropped yet"
        );
        log.gc(|_| 4); // DC 1 presumed failed: its txns 3 and 4 are gone
        assert_eq!(log.dropped(DcId(0)), 4);
        assert!(log.serves_from(DcId(0), 4) && !log.serves_from(DcId(0), 2));
        assert!(sibs.needs_transfer(DcId(1), &log, 10, 5));
        assert!(
            !sibs.needs_transfer(DcId(1), &log, 20, 5),
            "not heard lately: no transfer into a cut"
        );
        assert!(!sibs.needs_transfer(DcId(2), &log, 10, 5));
        assert_eq!(
            own_stream(&mut sibs, DcId(1), &log, 6, 100),
            None,
            "a piece from 2 would claim txns 3 and 4"
        );
        sibs.restart_stream_at(DcId(1), 5); // a state transfer at 5 was sent
        let st = own_stream(&mut sibs, DcId(1), &log, 6, 100).expect("from 5");
        assert_eq!((st.from, st.txns), (5, vec![T(6)]));
        sibs.heard(DcId(1), vc(&[5, 0, 0]), false, 20);
        assert!(
            !sibs.needs_transfer(DcId(1), &log, 10, 5),
            "it installed the transfer"
        );
        // A rewind to an acknowledgement from before the install (a transfer slower than
        // the lag grace) must not leave the stream stuck below what the log dropped.
        sibs.heard(DcId(1), vc(&[2, 0, 0]), true, 30);
        assert_eq!(
            own_stream(&mut sibs, DcId(1), &log, 6, 100),
            None,
            "still behind"
        );
        sibs.heard(DcId(1), vc(&[5, 0, 0]), false, 40);
        let st = own_stream(&mut sibs, DcId(1), &log, 6, 100).expect("from its ack");
        assert_eq!((st.from, st.txns), (5, vec![T(6)]));
    }

    #[test]
    fn acked_by_all_is_the_meet_of_every_siblings_acknowledgement() {
        let mut sibs = Siblings::new(DcId(0), [DcId(0), DcId(1), DcId(2)]);
        sibs.heard(DcId(1), vc(&[5, 9, 4]), false, 10);
        assert_eq!(
            sibs.acked_by_all(),
            Some(vc(&[0, 0, 0])),
            "DC 2 never heard: nothing is acknowledged by all"
        );
        sibs.heard(DcId(2), vc(&[7, 3, 8]), false, 10);
        assert_eq!(sibs.acked_by_all(), Some(vc(&[5, 3, 4])));
    }
}
