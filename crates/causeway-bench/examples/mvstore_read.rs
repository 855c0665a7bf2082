//! Times `kit::mvstore` reads of a hot key: with the newest-object cache (the store as
//! inserts left it) and without (the same store after a postcard round trip, which drops
//! the cache, so every read replays the versions). Not a test: run it in release,
//!
//!     cargo run --release -p causeway-bench --example mvstore_read
//!
//! and read the microseconds per read side by side (BENCHMARKS.md).

use causeway_core::crdt::{ArbTs, Effect, ObjType, Op};
use causeway_core::{Key, OpId, SessionId, TxnId};
use causeway_protocols::kit::mvstore::Store;
use std::time::Instant;

/// Reads timed per configuration.
const READS: u32 = 20_000;

fn txn(seq: u64) -> TxnId {
    TxnId {
        session: SessionId(1),
        seq,
    }
}

/// A store whose key "s" holds `versions` re-adds of one member (each replacing the
/// previous tag, as SADD of the same member does) and key "c" as many increments.
fn hot_store(versions: u64) -> Store<u64> {
    let mut s = Store::default();
    let mut last_tag: Option<OpId> = None;
    for seq in 1..=versions {
        let id = OpId {
            txn: txn(seq),
            index: 0,
        };
        let add = Effect::Add {
            elem: b"member".to_vec(),
            replaces: last_tag.into_iter().collect(),
        };
        last_tag = Some(id);
        let ts = ArbTs::PENDING;
        let incr = Op {
            id: OpId { index: 1, ..id },
            ts,
            effect: Effect::Increment(1),
        };
        let ops = [
            (
                Key::from("s"),
                Op {
                    id,
                    ts,
                    effect: add,
                },
            ),
            (Key::from("c"), incr),
        ];
        s.insert(txn(seq), &(seq * 10), &ops);
    }
    s
}

/// Mean microseconds per read of `key` at a snapshot above every version.
fn time_reads(s: &Store<u64>, key: &str, t: ObjType) -> f64 {
    let key = Key::from(key);
    let start = Instant::now();
    for _ in 0..READS {
        let obj = s.read(&key, &u64::MAX, t).expect("read");
        std::hint::black_box(obj);
    }
    start.elapsed().as_secs_f64() * 1e6 / f64::from(READS)
}

fn main() {
    println!("| versions | key | cached us/read | replayed us/read | ratio |");
    println!("|---|---|---|---|---|");
    for versions in [10, 40, 400] {
        let cached = hot_store(versions);
        let bytes = postcard::to_allocvec(&cached).expect("encode");
        let replayed: Store<u64> = postcard::from_bytes(&bytes).expect("decode");
        for (key, t) in [("s", ObjType::Set), ("c", ObjType::Counter)] {
            let a = time_reads(&cached, key, t);
            let b = time_reads(&replayed, key, t);
            println!("| {versions} | {key} | {a:.3} | {b:.3} | {:.1}x |", b / a);
        }
    }
}
