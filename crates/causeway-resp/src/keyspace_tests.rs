//! Tests of the key-space commands (`crate::keyspace`) through [`Conn::execute`] against
//! the in-memory backend, alone and across DCs.

use crate::conn::{Conn, Shared};
use crate::memory::{MemoryCluster, MemoryFactory, MemoryOptions};
use crate::reply::Reply;
use bytes::Bytes;
use std::collections::BTreeSet;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

fn cluster(dcs: usize) -> MemoryCluster {
    MemoryCluster::new(MemoryOptions {
        dcs,
        ..MemoryOptions::default()
    })
}

fn connect(cluster: &MemoryCluster, dc: usize) -> Conn<MemoryFactory> {
    let shared = Arc::new(Shared {
        factory: cluster.factory(dc),
        password: None,
        clients: AtomicUsize::new(1),
    });
    Conn::new(shared, dc as u64 + 1)
}

async fn run_args(c: &mut Conn<MemoryFactory>, args: Vec<Bytes>) -> Reply {
    c.execute(args).await.reply
}

async fn run(c: &mut Conn<MemoryFactory>, cmd: &str) -> Reply {
    let args = cmd.split(' ').map(|w| Bytes::from(w.to_string())).collect();
    run_args(c, args).await
}

fn texts(reply: &Reply) -> Vec<String> {
    let Reply::Array(items) = reply else {
        panic!("an array, got {reply:?}");
    };
    items
        .iter()
        .map(|i| match i {
            Reply::Bulk(b) => String::from_utf8(b.to_vec()).expect("utf-8"),
            other => panic!("a bulk, got {other:?}"),
        })
        .collect()
}

/// `KEYS pattern`, sorted.
async fn keys(c: &mut Conn<MemoryFactory>, pattern: &str) -> Vec<String> {
    let mut listed = texts(&run(c, &format!("KEYS {pattern}")).await);
    listed.sort();
    listed
}

/// One `SCAN` call: the next cursor and the keys.
async fn scan(c: &mut Conn<MemoryFactory>, args: &str) -> (String, Vec<String>) {
    let Reply::Array(parts) = run(c, &format!("SCAN {args}")).await else {
        panic!("SCAN answers an array");
    };
    let Reply::Bulk(cursor) = &parts[0] else {
        panic!("the cursor is a bulk string");
    };
    let cursor = String::from_utf8(cursor.to_vec()).expect("digits");
    (cursor, texts(&parts[1]))
}

/// A whole `SCAN` walk with `opts`, calling `between` after each page; every key returned.
async fn scan_all(
    c: &mut Conn<MemoryFactory>,
    opts: &str,
    mut between: impl FnMut(usize) -> Vec<String>,
    other: &mut Conn<MemoryFactory>,
) -> Vec<String> {
    let (mut cursor, mut all) = ("0".to_string(), Vec::new());
    for page in 0..100_000 {
        let (next, found) = scan(c, &format!("{cursor} {opts}")).await;
        all.extend(found);
        if next == "0" {
            return all;
        }
        for cmd in between(page) {
            assert!(!run(other, &cmd).await.is_error(), "{cmd}");
        }
        cursor = next;
    }
    panic!("the walk did not end");
}

fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

#[tokio::test]
async fn written_keys_of_every_type_are_listed_and_deleted_ones_are_not() {
    let c = cluster(1);
    let mut conn = connect(&c, 0);
    for cmd in ["SET a 1", "SADD s m", "HSET h f v", "INCR n", "SET b 2"] {
        assert!(!run(&mut conn, cmd).await.is_error(), "{cmd}");
    }
    assert_eq!(keys(&mut conn, "*").await, ["a", "b", "h", "n", "s"]);
    assert_eq!(run(&mut conn, "DBSIZE").await, Reply::Int(5));
    assert_eq!(run(&mut conn, "DEL a s nothing").await, Reply::Int(2));
    assert_eq!(keys(&mut conn, "*").await, ["b", "h", "n"]);
    assert_eq!(keys(&mut conn, "[bn]").await, ["b", "n"]);
    assert_eq!(keys(&mut conn, "?").await, ["b", "h", "n"]);
    assert_eq!(keys(&mut conn, "x*").await, Vec::<String>::new());
    assert_eq!(run(&mut conn, "DBSIZE").await, Reply::Int(3));
    // A key freed by DEL and written again is listed again, in one transaction too.
    assert_eq!(run(&mut conn, "SET a 3").await, Reply::Ok);
    run(&mut conn, "MULTI").await;
    for cmd in ["SET m 1", "DEL m", "SET m 2"] {
        assert_eq!(run(&mut conn, cmd).await, Reply::Simple("QUEUED"));
    }
    assert!(!run(&mut conn, "EXEC").await.is_error());
    assert_eq!(keys(&mut conn, "*").await, ["a", "b", "h", "m", "n"]);
}

#[tokio::test]
async fn scan_returns_every_key_once_and_filters_by_match_and_type() {
    let c = cluster(1);
    let mut conn = connect(&c, 0);
    let mut other = connect(&c, 0);
    let strings = names("str:", 150);
    let sets = names("set:", 50);
    run(
        &mut conn,
        &format!(
            "MSET {}",
            strings
                .iter()
                .map(|k| format!("{k} v"))
                .collect::<Vec<_>>()
                .join(" ")
        ),
    )
    .await;
    for s in &sets {
        run(&mut conn, &format!("SADD {s} m")).await;
    }
    let all = scan_all(&mut conn, "COUNT 7", |_| Vec::new(), &mut other).await;
    let distinct: BTreeSet<String> = all.iter().cloned().collect();
    assert_eq!(distinct.len(), all.len(), "no key twice without writes");
    let want: BTreeSet<String> = strings.iter().chain(&sets).cloned().collect();
    assert_eq!(distinct, want);
    let matched = scan_all(
        &mut conn,
        "MATCH set:1* COUNT 20",
        |_| Vec::new(),
        &mut other,
    )
    .await;
    let want: BTreeSet<String> = sets
        .iter()
        .filter(|s| s.starts_with("set:1"))
        .cloned()
        .collect();
    assert_eq!(matched.into_iter().collect::<BTreeSet<_>>(), want);
    let typed = scan_all(&mut conn, "TYPE set", |_| Vec::new(), &mut other).await;
    assert_eq!(
        typed.into_iter().collect::<BTreeSet<_>>(),
        sets.iter().cloned().collect()
    );
    let (_, none) = scan(&mut conn, "0 TYPE hash COUNT 1000").await;
    assert!(none.is_empty());
}

/// Redis's guarantee: a key present for the whole walk is returned at least once, while
/// other connections write new keys and delete others between pages.
#[tokio::test]
async fn scan_under_concurrent_writes_returns_every_stable_key() {
    let c = cluster(1);
    let mut conn = connect(&c, 0);
    let mut writer = connect(&c, 0);
    let stable = names("stable", 200);
    let doomed = names("doomed", 100);
    for k in stable.iter().chain(&doomed) {
        run(&mut conn, &format!("SET {k} v")).await;
    }
    let between = |page: usize| {
        let mut cmds = vec![format!("SET new{page} v"), format!("SADD newset{page} m")];
        if page < doomed.len() {
            cmds.push(format!("DEL doomed{page}"));
        }
        cmds
    };
    let seen: BTreeSet<String> = scan_all(&mut conn, "COUNT 5", between, &mut writer)
        .await
        .into_iter()
        .collect();
    for k in &stable {
        assert!(seen.contains(k), "{k} was present for the whole scan");
    }
}

#[tokio::test]
async fn a_dc_lists_what_its_session_can_read() {
    let c = cluster(2);
    let (mut dc1, mut dc2) = (connect(&c, 0), connect(&c, 1));
    run(&mut dc1, "SET mine 1").await;
    assert_eq!(keys(&mut dc1, "*").await, ["mine"], "its own write at once");
    assert_eq!(
        keys(&mut dc2, "*").await,
        Vec::<String>::new(),
        "not replicated yet"
    );
    assert_eq!(run(&mut dc2, "DBSIZE").await, Reply::Int(0));
    c.replicate();
    assert_eq!(keys(&mut dc2, "*").await, ["mine"]);
    assert_eq!(run(&mut dc2, "DBSIZE").await, Reply::Int(1));
}

/// FLUSHALL is a series of observed-remove deletes: it empties what its DC sees, and a
/// write concurrent with it in another DC survives it, as with DEL.
#[tokio::test]
async fn flushall_empties_the_dc_and_a_concurrent_write_elsewhere_survives() {
    let c = cluster(2);
    let (mut dc1, mut dc2) = (connect(&c, 0), connect(&c, 1));
    for k in names("k", 150) {
        run(&mut dc1, &format!("SADD {k} a")).await;
    }
    run(&mut dc1, "SET keep-me 1").await;
    c.replicate();
    assert_eq!(run(&mut dc1, "FLUSHALL").await, Reply::Ok);
    assert_eq!(run(&mut dc1, "DBSIZE").await, Reply::Int(0));
    assert_eq!(keys(&mut dc1, "*").await, Vec::<String>::new());
    // Concurrent with the flush: dc2 had not seen it.
    assert_eq!(run(&mut dc2, "SADD k7 b").await, Reply::Int(1));
    c.replicate();
    for conn in [&mut dc1, &mut dc2] {
        assert_eq!(keys(conn, "*").await, ["k7"]);
        assert_eq!(
            run(conn, "SMEMBERS k7").await,
            Reply::Set(vec![Reply::text("b")])
        );
    }
    assert_eq!(run(&mut dc1, "FLUSHDB ASYNC").await, Reply::Ok);
    assert_eq!(run(&mut dc1, "FLUSHALL SYNC").await, Reply::Ok);
    assert_eq!(run(&mut dc1, "SET again 1").await, Reply::Ok);
    assert_eq!(run(&mut dc1, "GET again").await, Reply::text("1"));
    assert_eq!(keys(&mut dc1, "*").await, ["again"]);
}

/// They list the nodes' stores, not a snapshot: refused in `MULTI` (which then
/// discards its `EXEC`) and in `TX.BEGIN` (which stays open).
#[tokio::test]
async fn key_space_commands_are_refused_inside_transactions() {
    let c = cluster(1);
    let mut conn = connect(&c, 0);
    run(&mut conn, "SET a 1").await;
    run(&mut conn, "MULTI").await;
    let Reply::Error(e) = run(&mut conn, "KEYS *").await else {
        panic!("KEYS in MULTI is refused");
    };
    assert!(e.contains("not allowed in a transaction"), "{e}");
    assert!(run(&mut conn, "EXEC").await.is_error(), "EXEC discarded");
    assert_eq!(run(&mut conn, "TX.BEGIN").await, Reply::Ok);
    for cmd in ["SCAN 0", "DBSIZE", "FLUSHALL"] {
        assert!(run(&mut conn, cmd).await.is_error(), "{cmd}");
    }
    assert_eq!(run(&mut conn, "TX.COMMIT").await, Reply::Ok);
    assert_eq!(keys(&mut conn, "*").await, ["a"]);
}

#[tokio::test]
async fn a_strong_transactions_keys_are_listed_after_its_commit() {
    let c = cluster(1);
    let mut conn = connect(&c, 0);
    assert_eq!(run(&mut conn, "TX.BEGIN STRONG").await, Reply::Ok);
    assert_eq!(run(&mut conn, "SET strong 1").await, Reply::Ok);
    assert_eq!(run(&mut conn, "SADD strongset m").await, Reply::Int(1));
    assert_eq!(run(&mut conn, "TX.COMMIT").await, Reply::Ok);
    assert_eq!(keys(&mut conn, "*").await, ["strong", "strongset"]);
}

#[tokio::test]
async fn bad_arguments_are_refused_with_the_limit_named() {
    let c = cluster(1);
    let mut conn = connect(&c, 0);
    let err = |r: Reply| match r {
        Reply::Error(e) => e,
        other => panic!("an error, got {other:?}"),
    };
    assert_eq!(err(run(&mut conn, "SCAN x").await), "ERR invalid cursor");
    assert_eq!(err(run(&mut conn, "SCAN -1").await), "ERR invalid cursor");
    assert!(err(run(&mut conn, "SCAN 0 COUNT 0").await).contains("syntax error"));
    assert!(err(run(&mut conn, "SCAN 0 COUNT 4097").await).contains("SCAN_COUNT_MAX"));
    assert!(err(run(&mut conn, "SCAN 0 COUNT").await).contains("syntax error"));
    assert!(err(run(&mut conn, "SCAN 0 LIMIT 3").await).contains("syntax error"));
    assert!(err(run(&mut conn, "FLUSHALL LATER").await).contains("syntax error"));
    let long = "a".repeat(crate::glob::PATTERN_LEN_MAX + 1);
    assert!(err(run(&mut conn, &format!("KEYS {long}")).await).contains("PATTERN_LEN_MAX"));
    assert!(err(run(&mut conn, "DBSIZE x").await).contains("wrong number"));
}

/// A cursor is a page boundary of one partition, resumed by any connection; the walk
/// crosses the memory DC's partitions and ends at 0.
#[tokio::test]
async fn a_cursor_is_resumed_by_another_connection_and_crosses_partitions() {
    let c = cluster(1);
    let (mut a, mut b) = (connect(&c, 0), connect(&c, 0));
    for k in names("key", 30) {
        run(&mut a, &format!("SET {k} v")).await;
    }
    let (mut cursor, mut seen, mut partitions) =
        ("0".to_string(), BTreeSet::new(), BTreeSet::new());
    for turn in 0.. {
        let conn = if turn % 2 == 0 { &mut a } else { &mut b };
        let (next, found) = scan(conn, &format!("{cursor} COUNT 4")).await;
        assert!(found.len() <= 4 + 1, "COUNT bounds a page: {found:?}");
        seen.extend(found);
        partitions.insert(next.parse::<u64>().unwrap() >> 48);
        if next == "0" {
            break;
        }
        cursor = next;
    }
    assert_eq!(seen, names("key", 30).into_iter().collect());
    assert!(
        partitions.len() >= 3,
        "the cursor named every partition: {partitions:?}"
    );
}
