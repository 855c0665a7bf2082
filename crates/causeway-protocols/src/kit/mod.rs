//! The protocol kit: the pieces more than one protocol needs, each owning its state with
//! its own unit tests. A new protocol is a module that composes these (see "Adding a
//! protocol" in docs/ARCHITECTURE.md).
//!
//! - [`testnet`]: an in-memory network for protocol unit tests (instant delivery,
//!   durable-at-once disks, a hand-driven clock, deadlines honoured).
//! - [`timers`]: the timer table behind `poll_timeout` (deadlines keyed by purpose).
//! - [`time_order`]: txns in flight in timestamp order, for the oldest (`pvc[d]`).
//! - [`repl`]: replication streams with acknowledgements, catch-up and relay.
//! - [`wire`]: a stream piece shared by every sibling that gets it, encoded once.
//! - [`session`]: the session core (gating, ids, deadlines, stale replies, the txn buffer,
//!   "unsupported" errors) and the `ClientProtocol` a protocol's client side implements.
//! - [`twopc`]: 2PC with presumed abort: votes, durable decisions until acknowledged,
//!   inquiry answers, re-send pacing.
//! - [`txn`]: the transaction buffer, input limits, the write-set overlay, typed objects.
//! - [`clock`]: the monotonic clock, fresh timestamps and the durable lease on claims.
//! - [`durability`]: lsns and what waits for them (persist before release).
//! - [`lattice`]: the lattice trait (vector clocks, scalars) stabilization and snapshots use.
//! - [`gossip`]: stabilization by gossip of a lattice value in a group (GSS, UST...).
//! - [`uniform`]: UniStore's stable matrix and `uniformVec` (what f+1 DCs store).
//! - [`keys`]: listing a partition's keys for `Request::ListKeys` (the position order, the
//!   messages, both ends).
//! - [`mvstore`]: the multi-version store with checkpoint GC, generic over the snapshot
//!   timestamp (vector or scalar).
//! - [`postcard_form`]: postcard's bytes written by hand for the records every commit
//!   writes (everything else goes through serde).
//! - [`paxos`]: Multi-Paxos for one consensus group (a partition's replicas in all DCs):
//!   ballots, both phases, catch-up, a preferred leader, persist-before-reply, truncation
//!   with snapshots, and its own seeded simulator.

pub mod certify;
pub mod clock;
pub mod durability;
pub mod gossip;
pub mod keys;
pub mod lattice;
pub mod mvstore;
pub mod paxos;
pub mod postcard_form;
pub mod repl;
pub mod session;
pub mod testnet;
pub mod time_order;
pub mod timers;
pub mod transfer;
pub mod twopc;
pub mod txn;
pub mod uniform;
pub mod wire;

/// A seeded xorshift generator for the kit's randomized tests: `next(n)` is in `0..n`.
#[cfg(test)]
pub(crate) fn xorshift(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut rng = seed;
    move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    }
}
