//! State transfers between sibling replicas of a partition (issue 15), the part every
//! protocol shares: the transfers being sent (images cut into chunks, sent a few per
//! replication interval), those being received (one per sender: chunks taken only in
//! order, buffered until the last; two siblings sending at once no longer preempt each
//! other), when each sibling last got one (retry pacing) and the txns an
//! install added that a stream may still deliver. What an image is and how it is
//! installed is `kit::mvstore` ([`KeyImage`], `Store::install`); when a sibling needs a
//! transfer is `kit::repl` (`Siblings::needs_transfer`); the protocol decides the vector
//! and persists the chunks (`cure/transfer.rs` has the argument, PaRiS follows it with
//! scalar times).

use crate::kit::mvstore::{KeyImage, SnapshotTs, Store};
use causeway_core::{DcId, Nanos, TxnId, Vc};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

/// Encoded bytes of one transfer chunk at most (well below `FRAME_LEN_MAX`).
pub const TRANSFER_CHUNK_BYTES_MAX: usize = 1 << 20;
/// Chunks of one transfer sent per replication interval at most (the link queue and
/// the receiver's persist queue stay short).
pub const TRANSFER_CHUNKS_PER_TICK_MAX: usize = 4;
/// Txns remembered from transfers' versions at most; past it the oldest are forgotten
/// (a stream would deliver one again only if its claim were still behind it).
pub const TRANSFERRED_MAX: usize = 1 << 16;
/// A transfer to a sibling is not started again for this long after one was.
pub const TRANSFER_RETRY_NS: Nanos = 2_000_000_000;

/// A transfer being sent to one sibling. `I` is one item of the partition's image: a
/// key's [`KeyImage`] for the multi-version stores (the default); Occult, which keeps one
/// version per key, sends its own items.
#[derive(Debug)]
pub struct OutTransfer<T, I = KeyImage<T>> {
    pub id: u64,
    pub at: T,
    /// Per origin, the stream the transfer completes (`received[k]` rises to it).
    pub claims: Vc,
    pub chunks: VecDeque<Vec<I>>,
    pub next: u32,
}

/// A transfer being received.
#[derive(Debug)]
pub struct InTransfer<T, I = KeyImage<T>> {
    pub from: DcId,
    pub id: u64,
    pub at: T,
    pub claims: Vc,
    pub next: u32,
    pub images: Vec<I>,
}

/// One chunk of a transfer, as sent and as persisted by the receiver.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chunk<T, I = KeyImage<T>> {
    /// The transfer (its sender's clock when it started: unique per sender).
    pub id: u64,
    pub index: u32,
    /// The images' vector: each key's object holds every version at or below it.
    pub at: T,
    /// Per origin, the stream the transfer completes.
    pub claims: Vc,
    pub images: Vec<I>,
    /// The last chunk (maybe without images): the transfer is complete.
    pub last: bool,
}

/// One partition's transfers, both ways.
#[derive(Debug)]
pub struct Transfers<T, I = KeyImage<T>> {
    pub out: BTreeMap<DcId, OutTransfer<T, I>>,
    /// When the last transfer to each sibling started (for the retry pacing).
    pub started: BTreeMap<DcId, Nanos>,
    /// The transfer being received from each sender (at most one per sibling DC).
    pub incoming: BTreeMap<DcId, InTransfer<T, I>>,
    /// Txns added from images' versions, with their commit timestamps, until the
    /// received streams cover them.
    pub transferred: BTreeMap<TxnId, T>,
}

impl<T, I> Default for Transfers<T, I> {
    fn default() -> Self {
        Transfers {
            out: BTreeMap::new(),
            started: BTreeMap::new(),
            incoming: BTreeMap::new(),
            transferred: BTreeMap::new(),
        }
    }
}

impl<T: Clone + Serialize, I: Clone + Serialize> Transfers<T, I> {
    /// Whether a transfer to `s` may start now: none under way, none for `retry`.
    pub fn may_start(&self, s: DcId, clock: Nanos, retry: Nanos) -> bool {
        let due = self
            .started
            .get(&s)
            .is_none_or(|t| clock.saturating_sub(*t) >= retry);
        due && !self.out.contains_key(&s)
    }

    /// Starts sending `images` at `at` to `s` (its id is the clock: unique per sender).
    pub fn start(&mut self, s: DcId, (at, claims): (T, Vc), images: Vec<I>, clock: Nanos) {
        let out = OutTransfer {
            id: clock,
            at,
            claims,
            chunks: chunked(images),
            next: 0,
        };
        self.out.insert(s, out);
        self.started.insert(s, clock);
    }

    /// The next chunks for `s`, at most [`TRANSFER_CHUNKS_PER_TICK_MAX`].
    pub fn next_chunks(&mut self, s: DcId) -> Vec<Chunk<T, I>> {
        let Some(out) = self.out.get_mut(&s) else {
            return Vec::new();
        };
        let mut chunks = Vec::new();
        for _ in 0..TRANSFER_CHUNKS_PER_TICK_MAX {
            let Some(images) = out.chunks.pop_front() else {
                break;
            };
            chunks.push(Chunk {
                id: out.id,
                index: out.next,
                at: out.at.clone(),
                claims: out.claims.clone(),
                images,
                last: out.chunks.is_empty(),
            });
            out.next += 1;
        }
        if out.chunks.is_empty() {
            self.out.remove(&s);
        }
        chunks
    }

    /// Whether chunk `index` of transfer `(s, id)` continues the one being received (or
    /// starts a new one, index 0): anything else is stale or out of order, ignored.
    pub fn take_chunk(&mut self, s: DcId, c: &Chunk<T, I>) -> bool {
        match self.incoming.get_mut(&s) {
            Some(t) if t.id == c.id && t.next == c.index => {
                t.next += 1;
                true
            }
            _ if c.index == 0 => {
                let t = InTransfer {
                    from: s,
                    id: c.id,
                    at: c.at.clone(),
                    claims: c.claims.clone(),
                    next: 1,
                    images: Vec::new(),
                };
                self.incoming.insert(s, t);
                true
            }
            _ => false,
        }
    }

    /// Whether any transfer is being received (a checkpoint waits for its end: its
    /// chunk records must stay).
    pub fn receiving(&self) -> bool {
        !self.incoming.is_empty()
    }

    /// The transfer from `s` whose last chunk arrived.
    pub fn take_incoming(&mut self, s: DcId) -> InTransfer<T, I> {
        self.incoming
            .remove(&s)
            .expect("a transfer being received from s")
    }

    /// Takes chunk `c` from `s` if it continues the transfer being received (or starts
    /// one): its images join the buffer, and it comes back for the protocol to persist.
    pub fn receive(&mut self, s: DcId, c: Chunk<T, I>) -> Option<Chunk<T, I>> {
        if !self.take_chunk(s, &c) {
            return None;
        }
        self.push_images(s, c.images.clone());
        Some(c)
    }

    /// Adds a taken chunk's images to the transfer being received from `s`.
    pub fn push_images(&mut self, s: DcId, images: Vec<I>) {
        let t = self.incoming.get_mut(&s).expect("a chunk was taken");
        t.images.extend(images);
    }

    /// Replay of a persisted chunk: buffered as when it arrived (a chunk of another
    /// transfer starts over).
    pub fn replay_chunk(&mut self, s: DcId, c: Chunk<T, I>) {
        let same = self.incoming.get(&s).is_some_and(|t| t.id == c.id);
        if !same {
            let t = InTransfer {
                from: s,
                id: c.id,
                at: c.at,
                claims: c.claims,
                next: 0,
                images: Vec::new(),
            };
            self.incoming.insert(s, t);
        }
        let t = self.incoming.get_mut(&s).expect("set above");
        t.next += 1;
        t.images.extend(c.images);
    }

    /// Replay of a transfer's end: the buffered transfer, to install again.
    pub fn replay_done(&mut self, s: DcId, id: u64) -> Option<InTransfer<T, I>> {
        let t = self.incoming.remove(&s)?;
        assert!(t.id == id, "a transfer's end without its chunks");
        Some(t)
    }

    /// Remembers txns an install added, within [`TRANSFERRED_MAX`].
    pub fn remember(&mut self, added: Vec<(TxnId, T)>) {
        self.transferred.extend(added);
        while self.transferred.len() > TRANSFERRED_MAX {
            self.transferred.pop_first();
        }
    }

    /// Forgets the remembered txns the received streams now cover.
    pub fn prune(&mut self, covered: impl Fn(&T) -> bool) {
        self.transferred.retain(|_, ct| !covered(ct));
    }
}

impl<T: Clone + Serialize + SnapshotTs> Transfers<T> {
    /// The transfer whose last chunk arrived, if `store` can install it: else it is
    /// dropped and `Err` says how many keys it had (a checkpoint of ours holds a version
    /// the transfer lacks, `Store::installable`; the sender tries again later).
    pub fn complete(&mut self, s: DcId, store: &Store<T>) -> Result<InTransfer<T>, u64> {
        let t = self.take_incoming(s);
        match store.installable(&t.at) {
            Some(_) => Err(t.images.len() as u64),
            None => Ok(t),
        }
    }
}

/// Splits images into chunks of about [`TRANSFER_CHUNK_BYTES_MAX`] encoded bytes; the
/// last one, maybe empty, says "done".
pub fn chunked<I: Serialize>(images: Vec<I>) -> VecDeque<Vec<I>> {
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
    chunks.push_back(chunk);
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_core::Key;

    fn image(key: &str, pad: usize) -> KeyImage<u64> {
        let obj = causeway_core::crdt::Object::new(causeway_core::crdt::ObjType::Counter);
        let mut k = key.to_string();
        k.push_str(&"x".repeat(pad));
        KeyImage {
            key: Key::new(k),
            base: Some((obj, 1)),
            versions: Vec::new(),
        }
    }

    #[test]
    fn chunks_are_bounded_and_the_last_one_says_done() {
        let images: Vec<KeyImage<u64>> = (0..6).map(|i| image(&format!("k{i}"), 400_000)).collect();
        let chunks = chunked(images);
        assert_eq!(chunks.len(), 3, "two images of 400 kB per 1 MiB chunk");
        assert!(
            chunked::<KeyImage<u64>>(Vec::new()).len() == 1,
            "an empty transfer still ends"
        );
        let mut t: Transfers<u64> = Transfers::default();
        let s = DcId(1);
        assert!(t.may_start(s, 0, 100));
        t.start(
            s,
            (7, Vc::zero(2)),
            (0..20).map(|i| image(&format!("k{i}"), 300_000)).collect(),
            0,
        );
        assert!(!t.may_start(s, 50, 100), "under way");
        let first = t.next_chunks(s);
        assert_eq!(first.len(), TRANSFER_CHUNKS_PER_TICK_MAX);
        assert!(first.iter().all(|c| !c.last), "not the last yet");
        let rest = t.next_chunks(s);
        assert!(
            rest.last().is_some_and(|c| c.last),
            "the last chunk ends it"
        );
        assert!(!t.may_start(s, 50, 100) && t.may_start(s, 150, 100));
    }

    #[test]
    fn a_receiver_takes_chunks_only_in_order() {
        let mut t: Transfers<u64> = Transfers::default();
        let s = DcId(2);
        let c = |id, index| Chunk {
            id,
            index,
            at: 5u64,
            claims: Vc::zero(2),
            images: Vec::new(),
            last: false,
        };
        assert!(!t.take_chunk(s, &c(9, 1)), "a transfer starts at chunk 0");
        assert!(t.take_chunk(s, &c(9, 0)));
        t.push_images(s, vec![image("a", 0)]);
        assert!(
            !t.take_chunk(s, &c(9, 2)),
            "chunk 1 was lost: the rest is ignored"
        );
        assert!(t.take_chunk(s, &c(9, 1)));
        assert!(t.take_chunk(s, &c(11, 0)), "a new transfer starts over");
        assert_eq!(t.incoming.get(&s).map(|i| i.images.len()), Some(0));
        // Another sender's transfer is buffered beside it, not in its place.
        let other = DcId(1);
        assert!(t.take_chunk(other, &c(4, 0)));
        t.push_images(other, vec![image("b", 0)]);
        assert!(t.take_chunk(s, &c(11, 1)), "s's transfer goes on");
        assert_eq!(t.take_incoming(other).images.len(), 1);
        assert!(t.receiving());
        t.remember(vec![(
            TxnId {
                session: causeway_core::SessionId(1),
                seq: 1,
            },
            8,
        )]);
        t.prune(|ct| *ct <= 7);
        assert_eq!(t.transferred.len(), 1);
        t.prune(|ct| *ct <= 8);
        assert!(t.transferred.is_empty());
    }
}
