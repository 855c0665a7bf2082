//! The key space (`KEYS`, `SCAN`, `DBSIZE`, `FLUSHALL`) over RESP on a real `causeway up`
//! cluster of every protocol family: keys of every type written on one DC are listed
//! there and in the other DCs once their nodes store them (at once where the DC committed
//! them; Occult's slave shards and other DCs once replicated), deleted keys are not, a
//! `SCAN` walk returns each key, and `FLUSHALL` empties the key space, after which writes
//! work.

mod up;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use up::{resp_command, resp_connect, Up};

/// One reply, arrays included: a line for a status, error or integer, a bulk's text,
/// `(nil)`, or `[a, b, ...]` for an array.
fn reply(conn: &mut BufReader<TcpStream>) -> String {
    let mut header = String::new();
    conn.read_line(&mut header).expect("a RESP reply");
    let header = header.trim_end().to_string();
    if let Some(n) = header.strip_prefix('*') {
        let n: usize = n.parse().expect("an array length");
        let items: Vec<String> = (0..n).map(|_| reply(conn)).collect();
        return format!("[{}]", items.join(", "));
    }
    let Some(len) = header.strip_prefix('$') else {
        return header;
    };
    let Ok(len) = len.parse::<usize>() else {
        return "(nil)".into();
    };
    let mut body = vec![0; len + 2];
    conn.read_exact(&mut body).expect("a bulk string body");
    String::from_utf8_lossy(&body[..len]).to_string()
}

fn command(conn: &mut BufReader<TcpStream>, args: &[&str]) -> String {
    let mut frame = format!("*{}\r\n", args.len());
    for a in args {
        frame.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    conn.get_mut()
        .write_all(frame.as_bytes())
        .expect("send a command");
    reply(conn)
}

/// The keys of a `[a, b]` reply, sorted.
fn listed(text: &str) -> Vec<String> {
    let inner = text
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .unwrap_or_else(|| panic!("an array, got {text}"));
    let mut keys: Vec<String> = match inner.is_empty() {
        true => Vec::new(),
        false => inner.split(", ").map(str::to_string).collect(),
    };
    keys.sort();
    keys
}

/// Every key a `SCAN` walk with `opts` returns, sorted and deduplicated.
fn scan_all(conn: &mut BufReader<TcpStream>, opts: &[&str]) -> Vec<String> {
    let (mut cursor, mut all) = ("0".to_string(), Vec::new());
    for _ in 0..10_000 {
        let mut args = vec!["SCAN", &cursor];
        args.extend_from_slice(opts);
        let page = command(conn, &args);
        let inner = &page[1..page.len() - 1];
        let (next, keys) = inner.split_once(", ").expect("a cursor and keys");
        all.extend(listed(keys));
        if next == "0" {
            all.sort();
            all.dedup();
            return all;
        }
        cursor = next.to_string();
    }
    panic!("the walk did not end");
}

/// Until `want` is what `KEYS *` lists on `addr` (10 s at most).
fn wait_listed(addr: &str, want: &[String]) {
    wait_for(addr, &["KEYS", "*"], |reply| listed(reply) == want);
}

/// Until `cmd` on `addr` answers what `ok` accepts (10 s at most).
fn wait_for(addr: &str, cmd: &[&str], ok: impl Fn(&str) -> bool) {
    let mut conn = resp_connect(addr);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = command(&mut conn, cmd);
        if ok(&got) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{addr} answers {got:?} to {cmd:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn key_space_works(up: &Up, protocol: &str, dcs: u16) {
    let mut conn = resp_connect(&up.resp_addr(0));
    let strings: Vec<String> = (0..12).map(|i| format!("{protocol}:s{i}")).collect();
    for k in &strings {
        assert_eq!(resp_command(&mut conn, &["SET", k, "v"]), "+OK");
    }
    let set = format!("{protocol}:set");
    let counter = format!("{protocol}:n");
    assert_eq!(resp_command(&mut conn, &["SADD", &set, "m"]), ":1");
    assert_eq!(resp_command(&mut conn, &["INCR", &counter]), ":1");
    assert_eq!(resp_command(&mut conn, &["DEL", &strings[0]]), ":1");
    let mut want: Vec<String> = strings[1..].to_vec();
    want.extend([set.clone(), counter]);
    want.sort();
    // Occult: a key of a shard whose master is another DC is listed here once replicated.
    wait_listed(&up.resp_addr(0), &want);
    assert_eq!(scan_all(&mut conn, &["COUNT", "3"]), want, "{protocol}");
    let dbsize = format!(":{}", want.len());
    assert_eq!(resp_command(&mut conn, &["DBSIZE"]), dbsize, "{protocol}");
    let sets = scan_all(&mut conn, &["TYPE", "set"]);
    assert_eq!(sets, std::slice::from_ref(&set), "{protocol}");
    let matched = scan_all(&mut conn, &["MATCH", "*:s1?", "COUNT", "1000"]);
    assert_eq!(
        matched,
        [format!("{protocol}:s10"), format!("{protocol}:s11")]
    );
    for dc in 1..dcs {
        wait_listed(&up.resp_addr(dc), &want);
    }
    assert_eq!(resp_command(&mut conn, &["FLUSHALL"]), "+OK", "{protocol}");
    wait_for(&up.resp_addr(0), &["DBSIZE"], |r| r == ":0");
    assert_eq!(resp_command(&mut conn, &["SET", "after", "1"]), "+OK");
    assert_eq!(resp_command(&mut conn, &["GET", "after"]), "1");
    let after = vec!["after".to_string()];
    for dc in 0..dcs {
        wait_listed(&up.resp_addr(dc), &after);
    }
}

#[test]
fn every_protocol_lists_scans_counts_and_flushes_its_keys() {
    let runs: [(&str, u16, u16, &[&str]); 6] = [
        ("unistore", 2, 2, &[]),
        ("cure", 2, 2, &[]),
        ("paris", 3, 1, &["--replication", "2"]),
        ("promptcc", 1, 2, &[]),
        ("occult", 2, 2, &[]),
        ("eventual", 2, 1, &[]),
    ];
    for (protocol, dcs, nodes, extra) in runs {
        let mut args = vec!["--protocol", protocol];
        args.extend_from_slice(extra);
        let up = Up::start(&format!("keyspace-{protocol}"), dcs, nodes, &args);
        key_space_works(&up, protocol, dcs);
    }
}
