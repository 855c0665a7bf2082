//! State transfer for PaRiS, `bpr` and `nocc` (issue 15): the mechanism and argument of
//! `cure/transfer.rs` (bookkeeping in `kit::transfer`) over PaRiS's scalar commit times.
//!
//! - A replica that talks again while acknowledging less of our stream than our log
//!   dropped gets the partition as of `at = min VV` over its replicas (every txn of every
//!   replica with `ct <= VV[k]` is applied here, so every version `<= at` is), with the
//!   versions above `at` as they are, and the claims `VV`: its `received[k]` rises to
//!   `VV[k]` at once, its `VV[k]` once the transfer's end is durable (Alg. 4 l.23-33's
//!   rule that `VV` only covers durable txns).
//! - Its checkpoints hold nothing `at` lacks: GC folds only at or below every sibling
//!   replica's acknowledged `min VV` (`ust.rs`, `gc_store`; under PaRiS the UST already
//!   implies it, under BPR it is what makes a transfer installable), except forced folds
//!   past `VERSIONS_PER_KEY_MAX`, which make the receiver refuse and the sender retry.
//! - Txns in `Committed` (committed here, not yet applied) are not in an image: they are
//!   above `VV[own]`, and our stream sends them once applied.

use super::msg::{Msg, Record};
use super::node::Node;
use super::types::Deferred;
use crate::kit::mvstore::KeyImage;
use crate::kit::transfer::Chunk;
use causeway_core::{Addr, Ctx, DcId, PartitionId, TxnId, Vc};
use std::collections::BTreeSet;

impl Node {
    /// Sender side, every Δ_R per sibling replica: starts a transfer to `s` if it needs
    /// one, and sends the next chunks of one under way.
    pub(super) fn transfer_to(&mut self, ctx: &mut Ctx<Msg>, pid: PartitionId, s: DcId) {
        if self.mutation.no_state_transfer {
            return;
        }
        let (own, clock, retry) = (
            usize::from(self.d.0),
            self.time.clock,
            self.cfg.transfer_retry_ns,
        );
        let grace = self.cfg.lag_grace_ns;
        let part = self.parts.get_mut(&pid).expect("hosted");
        if part.transfers.may_start(s, clock, retry)
            && part.sibs.needs_transfer(s, &part.log, clock, grace)
        {
            let at = part.vv_min();
            let Ok(images) = part.store.images_at(&at) else {
                return; // cannot happen: GC folds below min VV; tried again next time
            };
            let keys = images.len() as u64;
            let claims = part.vv.clone();
            part.sibs.restart_stream_at(s, claims.get(own));
            part.transfers.start(s, (at, claims), images, clock);
            self.sample("transfer_sent_keys", keys);
        }
        let to = Addr::Node(self.topo.node_of(s, pid));
        let part = self.parts.get_mut(&pid).expect("hosted");
        for chunk in part.transfers.next_chunks(s) {
            let m = Msg::Transfer {
                partition: pid,
                chunk,
            };
            self.traffic.replication += super::ust::wire_len(&m);
            ctx.send(to, m);
        }
    }

    /// Receiver side: a chunk of a transfer from DC `s`.
    pub(super) fn on_transfer(
        &mut self,
        ctx: &mut Ctx<Msg>,
        s: DcId,
        pid: PartitionId,
        chunk: Chunk<u64>,
    ) {
        if !self.parts.contains_key(&pid) {
            return;
        }
        let Some(chunk) = self.part(pid).transfers.receive(s, chunk) else {
            return;
        };
        let last = chunk.last;
        let record = Record::TransferChunk {
            partition: pid,
            from: s,
            chunk,
        };
        self.persist(ctx, record, Vec::new());
        if last {
            self.finish_transfer(ctx, s, pid);
        }
    }

    /// The last chunk arrived: install, or refuse if a checkpoint of ours holds a version
    /// the transfer lacks (a forced fold; the sender tries again later).
    fn finish_transfer(&mut self, ctx: &mut Ctx<Msg>, s: DcId, pid: PartitionId) {
        let part = self.part(pid);
        let t = match part.transfers.complete(s, &part.store) {
            Ok(t) => t,
            Err(keys) => return self.sample("transfer_refused_keys", keys),
        };
        let keys = t.images.len() as u64;
        self.install(pid, t.at, &t.claims, t.images);
        let record = Record::TransferDone {
            partition: pid,
            from: t.from,
            id: t.id,
        };
        self.persist(ctx, record, Vec::new());
        let then = Deferred::Transfer {
            partition: pid,
            claims: t.claims,
        };
        self.after_durable(ctx, then);
        self.sample("transfer_installed_keys", keys);
    }

    /// Installs images at `at` (live and in replay): the store, the received streams,
    /// and the txns to filter from later stream pieces.
    ///
    /// Our own txns in `Committed` count as ours: one at or below `at` is in the images'
    /// objects (so it leaves the queue), one above is not added from an image's versions
    /// (the queue applies it). Live the queue holds only txns above `VV[own]`, itself at
    /// or above `at`, so this changes nothing; in a replay the queue still holds every
    /// own txn committed before the transfer, applied once the node runs.
    fn install(&mut self, pid: PartitionId, at: u64, claims: &Vc, images: Vec<KeyImage<u64>>) {
        self.work += images.len() as u64;
        let part = self.part(pid);
        let pending: BTreeSet<TxnId> = part.committed.keys().map(|(_, t)| *t).collect();
        let mut images = images;
        for image in &mut images {
            image.versions.retain(|v| !pending.contains(&v.txn));
        }
        part.committed.retain(|(ct, _), _| *ct > at);
        let added = part.store.install(&at, images);
        part.transfers.remember(added);
        for k in part.replicas.clone().into_iter().filter(|k| *k != part.me) {
            part.received.recovered(k, claims.get(usize::from(k.0)));
        }
    }

    /// The transfer's end is durable: `VV` claims what it brought.
    pub(super) fn transfer_durable(&mut self, pid: PartitionId, claims: &Vc) {
        let part = self.part(pid);
        for k in part.replicas.clone().into_iter().filter(|k| *k != part.me) {
            let k = usize::from(k.0);
            part.vv.set(k, part.vv.get(k).max(claims.get(k)));
        }
    }

    /// Replay of a `TransferDone` record: the buffered transfer is installed.
    pub(super) fn replay_done(&mut self, pid: PartitionId, s: DcId, id: u64) {
        if let Some(t) = self.part(pid).transfers.replay_done(s, id) {
            self.install(pid, t.at, &t.claims, t.images);
            self.transfer_durable(pid, &t.claims);
        }
    }
}
