//! State transfer from a master to a slave (issue 15): a slave that was presumed failed
//! and returns after the master's replication log dropped writes it lacks gets the
//! master's shards as they stand instead of the stream it can no longer be sent.
//!
//! The paper keeps the master/slave replication of Redis Cluster (§4.2, §8.1) and says
//! nothing of a slave that falls behind the master's log. Our decision, the rule of
//! `cure/transfer.rs` made simpler by Occult's shape:
//!
//! - **When.** As in Cure: a slave that talks again while acknowledging less of the
//!   master's stream than its log dropped (`Siblings::needs_transfer`) gets a transfer, one
//!   at a time and not again for `transfer_retry_ns`.
//! - **What.** Every key of the shards this node masters, as stored (one version per key,
//!   Fig. 4), and those shards' shardstamps, at the stream's last sequence number `at`.
//!   The store always holds exactly the writes numbered up to `seq` (a write is numbered,
//!   applied and logged in one step, `stage_write`), so the image *is* the stream's
//!   prefix up to `at` applied. No version above `at` is needed, unlike Cure: a shard has
//!   a single writer (its master), so a slave's state of it is a prefix of the master's,
//!   and nothing the slave holds of those shards is missing from the image.
//! - **Durability.** The image may include writes not yet durable at the master; its
//!   chunks are sent only once `durable_seq` reaches `at`, so a slave never holds a
//!   write a master crash could lose (the stream obeys the same rule).
//! - **Install.** The slave persists each chunk (`Record::TransferChunk`), and at the last
//!   one replaces those keys' versions, raises the shardstamps and `received[master]` to
//!   `at` (`Record::TransferDone`; its acknowledgement follows once that is durable). A
//!   transfer at or below what the slave already has is ignored. A replay rebuilds the
//!   same state, and no checkpoint is taken while chunks are buffered.
//! - **The stream** restarts at `at` (`Siblings::restart_stream_at`); pieces cut before
//!   it are refused by the slave until the install, and duplicates after it are dropped
//!   by `Received::accept`.

use super::{After, Node};
use crate::occult::msg::{Chunk, Item, Msg, Record};
use causeway_core::{Addr, Ctx, DcId, Vc};

/// The transfers of a node's master stream (out) and of the one it receives (`kit`).
pub type Transfers = crate::kit::transfer::Transfers<u64, Item>;

impl Node {
    /// Master side, every replication interval per slave: starts a transfer to `s` if it
    /// needs one, and sends the next chunks of one under way once they are durable.
    pub(super) fn transfer_to(&mut self, ctx: &mut Ctx<Msg>, s: DcId) {
        if self.no_state_transfer {
            return;
        }
        let (clock, retry) = (self.clock, self.sect.transfer_retry_ns);
        let grace = self.sect.lag_grace_ns;
        if self.transfers.may_start(s, clock, retry)
            && self.sibs.needs_transfer(s, &self.log, clock, grace)
        {
            let at = self.seq;
            let items = self.image();
            let keys = items.len() as u64;
            let mut claims = Vc::zero(self.durable_have.len());
            claims.set(usize::from(self.dc.0), at);
            self.sibs.restart_stream_at(s, at);
            self.transfers.start(s, (at, claims), items, clock);
            self.sample("transfer_sent_keys", keys);
        }
        let durable = self.transfers.out.get(&s).map(|o| o.at <= self.durable_seq);
        if durable != Some(true) {
            return;
        }
        let to = Addr::Node(self.sibling(s));
        for chunk in self.transfers.next_chunks(s) {
            ctx.send(to, Msg::Transfer { chunk });
        }
    }

    /// Every key and shardstamp of the shards this node masters.
    fn image(&self) -> Vec<Item> {
        let keys = self
            .store
            .iter()
            .filter(|(k, _)| self.is_master(self.shards.of(k)))
            .map(|(k, v)| Item::Key(k.clone(), v.clone()));
        let stamps = self
            .stamps
            .iter()
            .filter(|(s, _)| self.is_master(**s))
            .map(|(s, ss)| Item::Stamp(*s, *ss));
        keys.chain(stamps).collect()
    }

    /// Slave side: a chunk of a transfer from the master node of DC `s`.
    pub(super) fn on_transfer(&mut self, ctx: &mut Ctx<Msg>, s: DcId, chunk: Chunk) {
        if s == self.dc {
            return;
        }
        let Some(chunk) = self.transfers.receive(s, chunk) else {
            return;
        };
        let last = chunk.last;
        self.persist(ctx, &Record::TransferChunk { from: s, chunk }, Vec::new());
        if !last {
            return;
        }
        let t = self.transfers.take_incoming(s);
        let keys = t.images.len() as u64;
        self.persist(ctx, &Record::TransferDone { from: s, id: t.id }, Vec::new());
        if self.install(s, t.at, t.images) {
            let after = After::Have {
                origin: s,
                upto: t.at,
            };
            if let Some(a) = self.durability.after_durable(after) {
                self.run_after(ctx, a);
            }
            self.sample("transfer_installed_keys", keys);
        }
    }

    /// Installs a transfer from `s` at `at` (live and in replay); false if we already
    /// had the master's stream up to `at` (a stale transfer).
    pub(super) fn install(&mut self, s: DcId, at: u64, items: Vec<Item>) -> bool {
        if at <= self.received.have(s) {
            return false;
        }
        self.work += items.len() as u64;
        for item in items {
            match item {
                Item::Key(k, v) => {
                    self.store.insert(k, v);
                }
                Item::Stamp(shard, ss) => {
                    let st = self.stamps.entry(shard).or_insert(0);
                    *st = (*st).max(ss);
                }
            }
        }
        self.received.recovered(s, at);
        true
    }

    /// Replay of a `TransferDone` record: the buffered transfer is installed again.
    pub(super) fn replay_transfer_done(&mut self, s: DcId, id: u64) {
        if let Some(t) = self.transfers.replay_done(s, id) {
            if self.install(s, t.at, t.images) {
                let have = &mut self.durable_have[usize::from(s.0)];
                *have = (*have).max(t.at);
            }
        }
    }

    fn sample(&mut self, name: &'static str, value: u64) {
        if self.samples.len() < super::SAMPLES_MAX {
            self.samples.push((name, value));
        }
    }
}
