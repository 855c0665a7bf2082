//! Session scopes on real `causeway up` clusters (docs/REDIS.md, "Session scopes"): with the
//! default endpoint scope, a write acknowledged to one connection is read by the next new
//! connection of the same node, 100 times in a row, over RESP and the native protocol, for
//! unistore (3 DCs of 2 nodes, where a fresh session alone would not see a local write
//! until it is stored in 2 DCs) and one protocol of each other family (cure, paris,
//! promptcc, occult); the README's strong transaction run ten times back to back from new
//! connections never aborts; `CLIENT SESSION` reports and switches a connection's scope.
//! Each run prints the median and 99th percentile of a GET on a new connection (connect
//! included), once in the endpoint scope and once in the connection scope, to compare.

mod up;

use causeway_client::Client;
use causeway_core::TxnKind;
use std::time::{Duration, Instant};
use up::{resp_command, resp_connect, Up};

/// SET-then-GET rounds per protocol.
const ROUNDS: u32 = 100;

/// `SET key i` on a new RESP connection of DC `dc`, then `GET key` on another new one
/// (`CLIENT SESSION scope` first, unless `None`), `ROUNDS` times: each GET's latency, and
/// the rounds whose GET did not read `i`.
fn set_then_get(up: &Up, dc: u16, key: &str, scope: Option<&str>) -> (Vec<Duration>, Vec<u32>) {
    let addr = up.resp_addr(dc);
    let (mut took, mut missed) = (Vec::new(), Vec::new());
    for i in 0..ROUNDS {
        let value = i.to_string();
        let mut writer = resp_connect(&addr);
        assert_eq!(resp_command(&mut writer, &["SET", key, &value]), "+OK");
        drop(writer);
        let began = Instant::now();
        let mut reader = resp_connect(&addr);
        if let Some(scope) = scope {
            assert_eq!(
                resp_command(&mut reader, &["CLIENT", "SESSION", scope]),
                "+OK"
            );
        }
        let got = resp_command(&mut reader, &["GET", key]);
        took.push(began.elapsed());
        if got != value {
            missed.push(i);
        }
    }
    (took, missed)
}

/// The same over the native protocol: a SET txn on one new client, a GET txn on another.
fn native_set_then_get(up: &Up, dc: u16, key: &str) {
    let addr = up.client_addr(dc);
    for i in 0..ROUNDS / 4 {
        let value = i.to_string().into_bytes();
        let mut writer = Client::connect(addr.as_str()).expect("a writer connects");
        writer.begin().expect("begin");
        writer.set(key, value.clone()).expect("set");
        writer.commit().expect("commit");
        drop(writer);
        let mut reader = Client::connect(addr.as_str()).expect("a reader connects");
        reader.begin().expect("begin");
        let got = reader.get(key).expect("get");
        reader.commit().expect("a read-only commit");
        assert_eq!(got, Some(value), "native round {i}: the last write is read");
    }
}

/// "median X ms, p99 Y ms" of `took`.
fn summary(took: &mut [Duration]) -> String {
    took.sort();
    let at = |q: f64| took[((took.len() - 1) as f64 * q).round() as usize];
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    format!("median {:.3} ms, p99 {:.3} ms", ms(at(0.5)), ms(at(0.99)))
}

/// Every round of the endpoint scope reads its write, RESP and native; then the
/// connection scope's latency for comparison (its misses are expected, not asserted).
fn reads_its_writes_on_new_connections(up: &Up, protocol: &str, dc: u16) {
    let (mut took, missed) = set_then_get(up, dc, "scope-k", None);
    assert!(
        missed.is_empty(),
        "{protocol}: rounds {missed:?} read another value"
    );
    native_set_then_get(up, dc, "scope-native");
    eprintln!(
        "{protocol}: GET on a new connection, endpoint scope: {}",
        summary(&mut took)
    );
    let (mut took, missed) = set_then_get(up, dc, "scope-c", Some("CONNECTION"));
    eprintln!(
        "{protocol}: GET on a new connection, connection scope: {} ({} of {ROUNDS} missed the write)",
        summary(&mut took),
        missed.len()
    );
}

/// The README's strong transaction at DC `dc`, ten times back to back, each from a new
/// connection (native and RESP in turn): none aborts, each reads the one before.
fn strong_txns_from_new_connections_never_abort(up: &Up, dc: u16) {
    let mut last: Option<String> = None;
    for i in 0..10 {
        let me = format!("owner-{i}");
        let read = if i % 2 == 0 {
            let mut c = Client::connect(up.client_addr(dc).as_str()).expect("connects");
            c.begin_kind(TxnKind::Strong).expect("begin strong");
            let read = c.get("nick/ann").expect("get");
            c.set("nick/ann", me.clone().into_bytes()).expect("set");
            c.commit()
                .unwrap_or_else(|e| panic!("strong txn {i} failed: {e}"));
            read.map(|v| String::from_utf8_lossy(&v).to_string())
        } else {
            let mut c = resp_connect(&up.resp_addr(dc));
            assert_eq!(resp_command(&mut c, &["TX.BEGIN", "STRONG"]), "+OK");
            let read = resp_command(&mut c, &["GET", "nick/ann"]);
            assert_eq!(resp_command(&mut c, &["SET", "nick/ann", &me]), "+OK");
            let reply = resp_command(&mut c, &["TX.COMMIT"]);
            assert_eq!(reply, "+OK", "strong txn {i} over RESP");
            (read != "(nil)").then_some(read)
        };
        assert_eq!(read, last, "strong txn {i} reads the one before it");
        last = Some(me);
    }
}

/// `CLIENT SESSION` answers the connection's scope and switches it.
fn client_session_reports_and_switches(up: &Up) {
    let mut c = resp_connect(&up.resp_addr(0));
    assert_eq!(resp_command(&mut c, &["CLIENT", "SESSION"]), "endpoint");
    assert_eq!(
        resp_command(&mut c, &["CLIENT", "SESSION", "connection"]),
        "+OK"
    );
    assert_eq!(resp_command(&mut c, &["CLIENT", "SESSION"]), "connection");
    let bad = resp_command(&mut c, &["CLIENT", "SESSION", "cluster"]);
    assert!(bad.starts_with("-ERR CLIENT SESSION takes"), "{bad}");
}

#[test]
fn unistore_endpoint_scope_reads_its_writes_and_strong_txns_never_abort() {
    let up = Up::start("scope-unistore", 3, 2, &[]);
    assert!(
        up.banner.contains("running protocol unistore"),
        "{}",
        up.banner
    );
    client_session_reports_and_switches(&up);
    reads_its_writes_on_new_connections(&up, "unistore", 0);
    strong_txns_from_new_connections_never_abort(&up, 1);
}

#[test]
fn every_family_reads_its_writes_on_new_connections() {
    let runs: [(&str, u16, u16, &[&str]); 4] = [
        ("cure", 3, 1, &[]),
        ("paris", 3, 1, &["--replication", "2"]),
        ("promptcc", 1, 2, &[]),
        ("occult", 2, 2, &[]),
    ];
    for (protocol, dcs, nodes, extra) in runs {
        let mut args = vec!["--protocol", protocol];
        args.extend_from_slice(extra);
        let up = Up::start(&format!("scope-{protocol}"), dcs, nodes, &args);
        reads_its_writes_on_new_connections(&up, protocol, 0);
    }
}
