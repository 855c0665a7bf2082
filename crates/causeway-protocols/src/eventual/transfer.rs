//! State transfer for the `eventual` baseline (issue 15): a sibling that was presumed
//! failed and returns after our log dropped writes of our stream it lacks gets our whole
//! store instead of the stream we can no longer send it. The structure is Occult's
//! (`occult/node/transfer.rs`); what differs is the install.
//!
//! - **The difficulty.** The baseline's objects are op-based CRDTs: a counter is a sum,
//!   with no record of which origin's increments it holds, so an image cannot be merged
//!   into the receiver's state (that would lose or double updates). It must *replace* it,
//!   and the receiver must then get back exactly the ops the image lacks.
//! - **What.** Every key's `Object` as the sender S stores it, with S's applied vector
//!   `V`: per origin the last write of its stream S applied (`Received::have`; for S
//!   itself `seq`). Streams are gapless prefixes and a write is applied in the step that
//!   accepts it, so the image holds exactly, per origin `o`, writes `1..=V[o]`. Its chunks
//!   leave only once all of it is durable at S (`durable_seq`, `durable_have`), so a
//!   receiver never holds a write a crash of S could lose (the streams' rule).
//! - **The install rule.** The receiver R replaces its store by the image and re-applies
//!   every write it has beyond it: per origin `o`, the writes in `(V[o], have_R(o)]`. It
//!   installs only if it still holds all of them: its own from its replication log
//!   (`ReplLog::serves_from`), another origin's from `recent`, the last
//!   `RECENT_PER_ORIGIN_MAX` writes it received of each (`repl.rs`). This generalizes
//!   "`V[o] >= have_R(o)` for every other origin": that stricter rule refuses whenever R
//!   got a third DC's writes a little before S did (the usual case under load, and
//!   after a one-DC outage the sender may lag a third DC by the whole outage until it has
//!   caught up itself), and a replacement would never lose them anyway since R re-applies
//!   them. Objects record applied op ids, so an op applied twice is a no-op; it is never
//!   applied twice here (the image holds exactly the prefixes up to `V`). Otherwise R
//!   refuses (sample `transfer_refused_keys`, nothing persisted but the chunks) and S
//!   tries again after `transfer_retry_ns` with a newer image.
//! - **Why R holds its own writes above `V[R]`.** A long cut makes both sides silent to
//!   each other, and if both dropped their own writes for the other, neither image could
//!   be installed (each lacks the other's dropped writes, which survive only inside
//!   sums). So for each pair of DCs one is the *keeper* ([`keeps_for`]): it never
//!   presumes the other failed for its log GC (up to `keeper_log_max`), and transfers
//!   only flow from the other side to it, whose log holds every write of its own above
//!   what the sender acknowledged, hence above `V[R]` (`repl.rs`, `gc_log`).
//! - **After the install** R's `received[o]` rises to `V[o]` (never falls: the rule
//!   above), and `durable_have[o]` once `Record::TransferDone` is durable (so its
//!   acknowledgements tell S it no longer needs a transfer). S's stream to R restarts at
//!   `V[S]` (`Siblings::restart_stream_at`); pieces cut before it are refused by
//!   `Received::accept` until the install, duplicates after it dropped.
//! - **Recovery.** Each chunk is persisted (`Record::TransferChunk`), then the end
//!   (`Record::TransferDone`) only when installed; replay installs again at the same
//!   point (the logs then hold at least what they held live, so the rule holds). Chunks
//!   without an end are dropped at recovery, and no checkpoint is taken while chunks are
//!   buffered.

use super::{After, Msg, Node, Record};
use causeway_core::crdt::Object;
use causeway_core::{Addr, Ctx, DcId, Key, Vc};

/// One item of an image: a key and its object as the sender stores it.
pub type Item = (Key, Object);
/// A chunk of an image, at the sender's `seq`, claiming its applied vector.
pub type Chunk = crate::kit::transfer::Chunk<u64, Item>;
/// The transfers of a node, both ways (`kit::transfer`).
pub type Transfers = crate::kit::transfer::Transfers<u64, Item>;

/// Whether `me` keeps its own writes for sibling `s` while `s` is silent (below
/// `keeper_log_max`): exactly one DC of each pair does, alternating by the pair's parity
/// so that no DC keeps for every other (with DCs 0, 1, 2: 1 keeps for 0, 0 for 2, 2 for 1).
pub fn keeps_for(me: DcId, s: DcId) -> bool {
    assert!(me != s, "a DC is not its own sibling");
    let (lo, hi) = (me.0.min(s.0), me.0.max(s.0));
    let keeper = if (lo + hi) % 2 == 0 { lo } else { hi };
    keeper == me.0
}

impl Node {
    /// Sender side, every replication interval per sibling: starts a transfer to `s` if
    /// it needs one, and sends the next chunks of one under way once all of it is durable.
    pub(super) fn transfer_to(&mut self, ctx: &mut Ctx<Msg>, s: DcId) {
        if self.no_state_transfer {
            return;
        }
        let (clock, retry) = (self.clock, self.section.transfer_retry_ns);
        let grace = self.section.lag_grace_ns;
        if self.transfers.may_start(s, clock, retry)
            && self.sibs.needs_transfer(s, &self.log, clock, grace)
        {
            let v = self.applied();
            let items: Vec<Item> = self
                .store
                .iter()
                .map(|(k, o)| (k.clone(), o.clone()))
                .collect();
            let keys = items.len() as u64;
            self.work += keys;
            self.sibs.restart_stream_at(s, self.seq);
            self.transfers.start(s, (self.seq, v), items, clock);
            self.sample("transfer_sent_keys", keys);
        }
        let durable = self.transfers.out.get(&s).map(|o| self.durable(&o.claims));
        if durable != Some(true) {
            return;
        }
        let to = Addr::Node(self.sibling(s));
        for chunk in self.transfers.next_chunks(s) {
            ctx.send(to, Msg::Transfer { chunk });
        }
    }

    /// Per origin, the last write of its stream applied here (ours: `seq`).
    pub(super) fn applied(&self) -> Vc {
        let mut v = Vc::zero(self.durable_have.len());
        for i in 0..self.durable_have.len() {
            v.set(i, self.received.have(DcId(i as u16)));
        }
        v.set(usize::from(self.dc.0), self.seq);
        v
    }

    /// Whether every write `v` claims is durable here.
    fn durable(&self, v: &Vc) -> bool {
        let me = usize::from(self.dc.0);
        (0..self.durable_have.len()).all(|i| match i == me {
            true => v.get(i) <= self.durable_seq,
            false => v.get(i) <= self.durable_have[i],
        })
    }

    /// Receiver side: a chunk of a transfer from the sibling in DC `s`.
    pub(super) fn on_transfer(&mut self, ctx: &mut Ctx<Msg>, s: DcId, chunk: Chunk) {
        if s == self.dc {
            return;
        }
        let Some(chunk) = self.transfers.receive(s, chunk) else {
            return;
        };
        let last = chunk.last;
        let record = Record::TransferChunk { from: s, chunk };
        self.durability.persist(ctx, record.encode(), Vec::new());
        if !last {
            return;
        }
        let t = self.transfers.take_incoming(s);
        let keys = t.images.len() as u64;
        if !self.adds_something(&t.claims) {
            return; // stale: we have every write it holds
        }
        if !self.installable(&t.claims) {
            return self.sample("transfer_refused_keys", keys);
        }
        let done = Record::TransferDone { from: s, id: t.id };
        self.durability.persist(ctx, done.encode(), Vec::new());
        self.install(&t.claims, t.images);
        if let Some(a) = self.durability.after_durable(After::Installed(t.claims)) {
            self.run_after(ctx, a);
        }
        self.sample("transfer_installed_keys", keys);
    }

    /// Whether an image at `v` holds a write of another origin we lack.
    fn adds_something(&self, v: &Vc) -> bool {
        let others = (0..self.durable_have.len()).filter(|i| *i != usize::from(self.dc.0));
        others
            .into_iter()
            .any(|i| v.get(i) > self.received.have(DcId(i as u16)))
    }

    /// The install rule (module doc): we still hold every write we have beyond `v`.
    pub(super) fn installable(&self, v: &Vc) -> bool {
        (0..self.durable_have.len()).all(|i| {
            let o = DcId(i as u16);
            let (have, log) = match o == self.dc {
                true => (self.seq, &self.log),
                false => (self.received.have(o), &self.recent),
            };
            v.get(i) >= have || log.serves_from(o, v.get(i))
        })
    }

    /// Replaces the store by an image at `v` and re-applies what we have beyond it (live
    /// and in replay); `received` rises to `v`.
    pub(super) fn install(&mut self, v: &Vc, items: Vec<Item>) {
        assert!(self.installable(v), "an install would lose writes we hold");
        let me = usize::from(self.dc.0);
        assert!(
            v.get(me) <= self.seq,
            "an image holds writes of ours we never made"
        );
        self.work += items.len() as u64;
        self.store = items.into_iter().collect();
        self.listed.invalidate();
        for i in 0..self.durable_have.len() {
            let o = DcId(i as u16);
            let log = if i == me { &self.log } else { &self.recent };
            let beyond: Vec<_> = log.entries_after(o, v.get(i)).cloned().collect();
            beyond.iter().for_each(|w| self.apply_all(&w.ops));
            if i != me {
                self.received.recovered(o, v.get(i));
            }
        }
    }

    /// Replay of a `TransferDone` record: the buffered transfer is installed again.
    pub(super) fn replay_transfer_done(&mut self, s: DcId, id: u64) {
        let Some(t) = self.transfers.replay_done(s, id) else {
            return;
        };
        self.install(&t.claims, t.images);
        self.raise_durable_have(&t.claims);
    }

    /// `durable_have` rises to `v` for every other origin (an install is durable).
    pub(super) fn raise_durable_have(&mut self, v: &Vc) {
        let me = usize::from(self.dc.0);
        for (i, h) in self.durable_have.iter_mut().enumerate() {
            if i != me {
                *h = (*h).max(v.get(i));
            }
        }
    }

    pub(super) fn sample(&mut self, name: &'static str, value: u64) {
        if self.samples.len() < super::SAMPLES_MAX {
            self.samples.push((name, value));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_one_dc_of_each_pair_keeps_its_writes_for_the_other() {
        for a in 0..6u16 {
            for b in (0..6u16).filter(|b| *b != a) {
                let (x, y) = (keeps_for(DcId(a), DcId(b)), keeps_for(DcId(b), DcId(a)));
                assert!(x != y, "pair {a} {b}");
            }
        }
        assert!(keeps_for(DcId(1), DcId(0)) && keeps_for(DcId(0), DcId(2)));
        assert!(keeps_for(DcId(2), DcId(1)));
    }
}
