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
//! - **Not covered.** UniStore with strong txns (its certification log has no snapshot:
//!   a strong txn in an image would be applied again when its certification delivers it).
//!
//! [`Siblings::needs_transfer`]: crate::kit::repl::Siblings::needs_transfer
//! [`Store::installable`]: crate::kit::mvstore::Store::installable

use super::msg::Msg;
use super::node::{Deferred, Node};
use super::record::Record;
use crate::kit::mvstore::KeyImage;
use causeway_core::{Addr, Ctx, DcId, Nanos, PartitionId, TxnId, Vc};
use std::collections::{BTreeMap, VecDeque};

/// Encoded bytes of one transfer chunk at most (well below `FRAME_LEN_MAX`).
pub const TRANSFER_CHUNK_BYTES_MAX: usize = 1 << 20;
/// Chunks of one transfer sent per replication interval at most (the link queue and
/// the receiver's persist queue stay short).
pub const TRANSFER_CHUNKS_PER_TICK_MAX: usize = 4;
/// Txns remembered from transfers' versions at most; past it the oldest are forgotten
/// (a stream would deliver them again only if its claim were still behind them).
pub const TRANSFERRED_MAX: usize = 1 << 16;
/// A transfer not tried again for this long after one was sent.
pub const TRANSFER_RETRY_NS: Nanos = 2_000_000_000;

/// A transfer being sent to one sibling.
#[derive(Debug)]
pub struct OutTransfer {
    pub id: u64,
    pub at: Vc,
    pub chunks: VecDeque<Vec<KeyImage<Vc>>>,
    pub next: u32,
}

/// A transfer being received.
#[derive(Debug)]
pub struct InTransfer {
    pub from: DcId,
    pub id: u64,
    pub at: Vc,
    pub next: u32,
    pub images: Vec<KeyImage<Vc>>,
}

/// One partition's transfers, both ways.
#[derive(Debug, Default)]
pub struct Transfers {
    pub out: BTreeMap<DcId, OutTransfer>,
    /// When the last transfer to each sibling started (for `transfer_retry_ns`).
    pub started: BTreeMap<DcId, Nanos>,
    pub incoming: Option<InTransfer>,
    /// Txns added from images' versions, with their commit vectors, until the received
    /// streams cover them.
    pub transferred: BTreeMap<TxnId, Vc>,
}

impl Transfers {
    /// Remembers txns added by an install, within [`TRANSFERRED_MAX`].
    pub fn remember(&mut self, added: Vec<(TxnId, Vc)>) {
        self.transferred.extend(added);
        while self.transferred.len() > TRANSFERRED_MAX {
            self.transferred.pop_first();
        }
    }

    /// Forgets the txns every origin's stream claim now covers (`have`, ours excepted).
    pub fn prune(&mut self, d: usize, have: impl Fn(usize) -> u64) {
        self.transferred
            .retain(|_, ct| (0..ct.dcs.len()).any(|k| k != d && ct.get(k) > have(k)));
    }
}

/// Splits images into chunks of about [`TRANSFER_CHUNK_BYTES_MAX`] encoded bytes.
fn chunked(images: Vec<KeyImage<Vc>>) -> VecDeque<Vec<KeyImage<Vc>>> {
    let mut chunks = VecDeque::new();
    let (mut chunk, mut bytes) = (Vec::new(), 0usize);
    for image in images {
        let len = postcard::to_allocvec(&image).map_or(0, |b| b.len());
        if !chunk.is_empty() && bytes + len > TRANSFER_CHUNK_BYTES_MAX {
            chunks.push_back(std::mem::take(&mut chunk));
            bytes = 0;
        }
        bytes += len;
        chunk.push(image);
    }
    chunks.push_back(chunk); // the last one, maybe empty: it says "done"
    chunks
}

impl Node {
    /// Sender side, every replication interval per sibling: starts a transfer to `s` if
    /// it needs one, and sends the next chunks of one under way.
    pub(super) fn transfer_to(&mut self, ctx: &mut Ctx<Msg>, pid: PartitionId, s: DcId) {
        if self.strong.is_some() || self.mutation.no_state_transfer {
            return;
        }
        let (d, clock, retry) = (self.d, self.time.clock, self.cfg.transfer_retry_ns);
        let part = self.parts.get_mut(&pid).expect("hosted");
        let due = part
            .transfers
            .started
            .get(&s)
            .is_none_or(|t| clock.saturating_sub(*t) >= retry);
        if !part.transfers.out.contains_key(&s) && due && part.sibs.needs_transfer(s, &part.log) {
            let at = part.pvc.clone();
            let Ok(images) = part.store.images_at(&at) else {
                return; // cannot happen: GC folds below pvc; tried again next interval
            };
            let keys = images.len() as u64;
            let out = OutTransfer {
                id: clock,
                at: at.clone(),
                chunks: chunked(images),
                next: 0,
            };
            part.transfers.out.insert(s, out);
            part.transfers.started.insert(s, clock);
            part.sibs.restart_stream_at(s, at.get(d));
            self.sample("transfer_sent_keys", keys);
        }
        self.send_chunks(ctx, pid, s);
    }

    fn send_chunks(&mut self, ctx: &mut Ctx<Msg>, pid: PartitionId, s: DcId) {
        let to = Addr::Node(self.topo.node_of(s, pid));
        let part = self.parts.get_mut(&pid).expect("hosted");
        let Some(out) = part.transfers.out.get_mut(&s) else {
            return;
        };
        for _ in 0..TRANSFER_CHUNKS_PER_TICK_MAX {
            let Some(images) = out.chunks.pop_front() else {
                break;
            };
            let m = Msg::Transfer {
                partition: pid,
                id: out.id,
                index: out.next,
                at: out.at.clone(),
                images,
                last: out.chunks.is_empty(),
            };
            out.next += 1;
            ctx.send(to, m);
        }
        if out.chunks.is_empty() {
            part.transfers.out.remove(&s);
        }
    }

    /// Receiver side: a chunk of a transfer from DC `s`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_transfer(
        &mut self,
        ctx: &mut Ctx<Msg>,
        s: DcId,
        pid: PartitionId,
        (id, index): (u64, u32),
        at: Vc,
        images: Vec<KeyImage<Vc>>,
        last: bool,
    ) {
        if self.strong.is_some() || !self.parts.contains_key(&pid) {
            return;
        }
        if !self.take_chunk(pid, s, id, index, &at) {
            return;
        }
        let record = Record::TransferChunk {
            partition: pid,
            from: s,
            id,
            at: at.clone(),
            images: images.clone(),
        };
        self.persist(ctx, record, Vec::new());
        let part = self.part(pid);
        let incoming = part.transfers.incoming.as_mut().expect("taken above");
        incoming.images.extend(images);
        if last {
            self.finish_transfer(ctx, pid);
        }
    }

    /// Whether chunk `index` of transfer `(s, id)` continues the one being received (or
    /// starts a new one): anything else is a stale or out-of-order chunk, ignored.
    fn take_chunk(&mut self, pid: PartitionId, s: DcId, id: u64, index: u32, at: &Vc) -> bool {
        let part = self.part(pid);
        let inc = &mut part.transfers.incoming;
        match inc {
            Some(t) if t.from == s && t.id == id && t.next == index => {
                t.next += 1;
                true
            }
            _ if index == 0 => {
                *inc = Some(InTransfer {
                    from: s,
                    id,
                    at: at.clone(),
                    next: 1,
                    images: Vec::new(),
                });
                true
            }
            _ => false,
        }
    }

    /// The last chunk arrived: install, or refuse if a checkpoint of ours holds a version
    /// the transfer lacks (a forced fold; the sender tries again later).
    fn finish_transfer(&mut self, ctx: &mut Ctx<Msg>, pid: PartitionId) {
        let part = self.part(pid);
        let t = part.transfers.incoming.take().expect("being received");
        if part.store.installable(&t.at).is_some() {
            let keys = t.images.len() as u64;
            self.sample("transfer_refused_keys", keys);
            return;
        }
        let keys = t.images.len() as u64;
        self.install(pid, &t.at, t.images);
        let record = Record::TransferDone {
            partition: pid,
            from: t.from,
            id: t.id,
        };
        self.persist(ctx, record, Vec::new());
        self.after_durable(Deferred::Transfer {
            partition: pid,
            at: t.at,
        });
        self.sample("transfer_installed_keys", keys);
        self.serve_waiting(ctx);
    }

    /// Installs images at `at` (live and in replay): the store, the received streams,
    /// and the txns to filter from later stream pieces.
    pub(super) fn install(&mut self, pid: PartitionId, at: &Vc, images: Vec<KeyImage<Vc>>) {
        let d = self.d;
        self.work += images.len() as u64;
        let part = self.part(pid);
        let added = part.store.install(at, images);
        part.transfers.remember(added);
        for k in (0..at.dcs.len()).filter(|k| *k != d) {
            part.received.recovered(DcId(k as u16), at.get(k));
        }
    }

    /// The transfer's record is durable: `pvc` claims what it brought.
    pub(super) fn transfer_durable(&mut self, pid: PartitionId, at: &Vc) {
        let d = self.d;
        let part = self.part(pid);
        for k in (0..at.dcs.len()).filter(|k| *k != d) {
            part.pvc.set(k, part.pvc.get(k).max(at.get(k)));
        }
    }

    /// Replay of a `TransferChunk` record: buffered as live (a chunk index 0 of another
    /// transfer, or of this one again, starts over).
    pub(super) fn replay_chunk(
        &mut self,
        pid: PartitionId,
        s: DcId,
        id: u64,
        at: Vc,
        images: Vec<KeyImage<Vc>>,
    ) {
        let part = self.part(pid);
        let same = part
            .transfers
            .incoming
            .as_ref()
            .is_some_and(|t| t.from == s && t.id == id);
        if !same {
            part.transfers.incoming = Some(InTransfer {
                from: s,
                id,
                at,
                next: 0,
                images: Vec::new(),
            });
        }
        let t = part.transfers.incoming.as_mut().expect("set above");
        t.next += 1;
        t.images.extend(images);
    }

    /// Replay of a `TransferDone` record: the buffered transfer is installed.
    pub(super) fn replay_done(&mut self, pid: PartitionId, s: DcId, id: u64) {
        let part = self.part(pid);
        let Some(t) = part.transfers.incoming.take() else {
            return;
        };
        assert!(
            t.from == s && t.id == id,
            "a transfer's done record without its chunks"
        );
        self.install(pid, &t.at, t.images);
        self.transfer_durable(pid, &t.at);
    }
}
