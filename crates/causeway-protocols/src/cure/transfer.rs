//! State transfer (issue 15): a sibling that was presumed failed and returns after our
//! replication log dropped txns of our stream it lacks gets a snapshot of the partition
//! instead of the stream it can no longer be sent.
//!
//! The papers assume sibling links never lose a txn; they do not say what happens when a
//! DC comes back after its siblings stopped keeping their logs for it. Our decision:
//!
//! - **When.** `kit::repl` records, per origin, the highest time its log dropped; a stream
//!   piece is never cut below it (`ReplLog::serves_from`), so a piece never claims a txn
//!   the log no longer has. A sibling that talks to us again and acknowledges less of our
//!   own stream than we dropped ([`Siblings::needs_transfer`]) gets a transfer, at most
//!   one at a time and then not again for `transfer_retry_ns`.
//! - **What.** The partition at our `pvc` `S` (every txn of origin `k` with `ct[k] <=
//!   S[k]` is durable here, Cure Alg. 2 l.19-21 and the `Remote` claims): per key, the
//!   object with every version `<= S` applied and the versions above `S` as they are
//!   (`kit::mvstore::KeyImage`). The versions above `S` matter: a txn of origin `k` with
//!   `ct[k] <= S[k]` may depend on a txn not yet covered (`ct > S`), and the receiver's
//!   stream from `k` restarts after `S[k]`, so it must get that txn here.
//! - **Install.** The receiver buffers the chunks (each persisted as a `TransferChunk`
//!   record), then replaces each key's checkpoint by the image, keeps its own versions
//!   above `S`, adds the image's versions it lacks, and raises `received[k]` to `S[k]`;
//!   once its `TransferDone` record is durable, `pvc[k]` follows (acknowledgements only
//!   cover durable txns). Txns added from an image's versions are remembered
//!   (`Part::transferred`) until the streams' claims cover them, so a stream that
//!   delivers one again does not apply it twice.
//! - **Why a checkpoint can be replaced.** Replacing the receiver's folded base loses
//!   nothing only if the base holds nothing `S` lacks. GC therefore folds a version only
//!   once every sibling acknowledged it (`repl.rs`, `gc_store`), so every base is below
//!   every sibling's `pvc`. The exception is a forced fold of a key past
//!   `VERSIONS_PER_KEY_MAX`: then [`Store::installable`] names the key, the receiver
//!   refuses the transfer (sample `transfer_refused_keys`) and the sender tries again
//!   with a later `S` after `transfer_retry_ns`.
//! - **UniStore with strong txns.** The image holds the strong txns its sender delivered,
//!   so the first chunk also carries the sender's certification state at the same
//!   instant, and the receiver adopts it (`strong_transfer.rs`). A member whose group
//!   log was truncated past it asks for a transfer (`Msg::TransferAsk`).
//!
//! The bookkeeping (chunks, order, retry pacing, remembered txns) is `kit::transfer`.
//!
//! [`Siblings::needs_transfer`]: crate::kit::repl::Siblings::needs_transfer
//! [`Store::installable`]: crate::kit::mvstore::Store::installable

use super::ext::Extension;
use super::msg::Msg;
use super::node::Node;
use super::record::Record;
use super::types::Deferred;
use crate::kit::certify::StrongImage;
use crate::kit::mvstore::KeyImage;
use crate::kit::transfer::Chunk;
use causeway_core::{Addr, Ctx, DcId, PartitionId, TxnId, Vc};

impl<X: Extension> Node<X> {
    /// Sender side, every replication interval per sibling: starts a transfer to `s` if
    /// it needs one, and sends the next chunks of one under way.
    pub(crate) fn transfer_to(&mut self, ctx: &mut Ctx<Msg>, pid: PartitionId, s: DcId) {
        if self.mutation.no_state_transfer {
            return;
        }
        let (clock, retry) = (self.time.clock, self.cfg.transfer_retry_ns);
        let grace = self.cfg.lag_grace_ns;
        let part = self.parts.get_mut(&pid).expect("hosted");
        if part.transfers.may_start(s, clock, retry) {
            let lagging = part.sibs.needs_transfer(s, &part.log, clock, grace);
            if X::transfer_wanted(self, pid, s) || lagging {
                self.start_transfer(pid, s);
            }
        }
        let to = Addr::Node(self.topo.node_of(s, pid));
        let part = self.parts.get_mut(&pid).expect("hosted");
        for chunk in part.transfers.next_chunks(s) {
            let strong = X::transfer_image(self, pid, s, chunk.id, chunk.index);
            let m = Msg::Transfer {
                partition: pid,
                chunk,
                strong,
            };
            ctx.send(to, m);
        }
    }

    /// Takes the partition's images at our `pvc` (and, under strong txns, the group's
    /// certification state at the same instant) and starts sending them to `s`.
    fn start_transfer(&mut self, pid: PartitionId, s: DcId) {
        let (d, clock) = (self.d, self.time.clock);
        if X::take_transfer_image(self, pid, s, clock).is_err() {
            return; // the groups are not built yet: tried again next interval
        }
        let part = self.parts.get_mut(&pid).expect("hosted");
        let at = part.pvc.clone();
        let Ok(images) = part.store.images_at(&at) else {
            return; // cannot happen: GC folds below pvc; tried again next interval
        };
        let keys = images.len() as u64;
        part.sibs.restart_stream_at(s, at.get(d));
        part.transfers.start(s, (at.clone(), at), images, clock);
        self.sample("transfer_sent_keys", keys);
    }

    /// Receiver side: a chunk of a transfer from DC `s`.
    pub(crate) fn on_transfer(
        &mut self,
        ctx: &mut Ctx<Msg>,
        s: DcId,
        pid: PartitionId,
        chunk: Chunk<Vc>,
        strong: Option<Box<StrongImage>>,
    ) {
        if !self.parts.contains_key(&pid) {
            return;
        }
        if chunk.index == 0 && X::transfer_refused(self, pid, strong.as_deref()) {
            // Refused at once (the end would refuse it too): no chunk is persisted, and
            // the later ones are out of order; the sender retries after its pacing.
            return self.sample("transfer_refused_strong", 1);
        }
        let Some(chunk) = self.part(pid).transfers.receive(s, chunk) else {
            return;
        };
        if chunk.index == 0 {
            X::hold_transfer_image(self, ctx, pid, s, strong);
        }
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
        let strong = match X::transfer_plan(self, pid, s, t.id) {
            Ok(plan) => plan,
            Err(_) => return self.sample("transfer_refused_strong", 1),
        };
        let keys = t.images.len() as u64;
        self.install(pid, &t.at, &t.claims, t.images);
        let (from, id) = (t.from, t.id);
        let record = match &strong {
            None => Record::TransferDone {
                partition: pid,
                from,
                id,
            },
            Some((_, dropped)) => {
                self.drop_redelivered(pid, dropped);
                Record::TransferAdopted {
                    partition: pid,
                    from,
                    id,
                    dropped: dropped.clone(),
                }
            }
        };
        self.persist(ctx, record, Vec::new());
        if let Some((image, _)) = strong {
            X::adopt_transfer(self, ctx, pid, image);
        }
        self.after_durable(Deferred::Transfer {
            partition: pid,
            claims: t.claims,
        });
        self.sample("transfer_installed_keys", keys);
        self.serve_waiting(ctx);
    }

    /// Installs images at `at` (live and in replay): the store, the received streams,
    /// and the txns to filter from later stream pieces.
    fn install(&mut self, pid: PartitionId, at: &Vc, claims: &Vc, images: Vec<KeyImage<Vc>>) {
        let d = self.d;
        self.work += images.len() as u64;
        let part = self.part(pid);
        let added = part.store.install(at, images);
        part.transfers.remember(added);
        for k in (0..claims.dcs.len()).filter(|k| *k != d) {
            part.received.recovered(DcId(k as u16), claims.get(k));
        }
    }

    /// The transfer's record is durable: `pvc` claims what it brought.
    pub(crate) fn transfer_durable(&mut self, pid: PartitionId, claims: &Vc) {
        let d = self.d;
        let part = self.part(pid);
        for k in (0..claims.dcs.len()).filter(|k| *k != d) {
            part.pvc.set(k, part.pvc.get(k).max(claims.get(k)));
        }
    }

    /// Replay of a `TransferDone` record: the buffered transfer is installed.
    pub(crate) fn replay_done(&mut self, pid: PartitionId, s: DcId, id: u64) {
        if let Some(t) = self.part(pid).transfers.replay_done(s, id) {
            self.install(pid, &t.at, &t.claims, t.images);
            self.transfer_durable(pid, &t.claims);
        }
    }

    /// Replay of a `TransferAdopted` record: installed as at `TransferDone`, the same
    /// versions dropped, the certification part kept for `start_strong`.
    pub(crate) fn replay_adopted_transfer(
        &mut self,
        pid: PartitionId,
        s: DcId,
        id: u64,
        dropped: &[TxnId],
    ) {
        self.replay_done(pid, s, id);
        self.drop_redelivered(pid, dropped);
        X::replay_adopted(self, pid, s, id);
    }

    /// Removes the versions of strong txns an adopted certifier delivers again.
    fn drop_redelivered(&mut self, pid: PartitionId, dropped: &[TxnId]) {
        let txns: std::collections::BTreeSet<TxnId> = dropped.iter().copied().collect();
        let n = self.part(pid).store.remove_txns(&txns);
        self.work += n as u64;
    }
}
