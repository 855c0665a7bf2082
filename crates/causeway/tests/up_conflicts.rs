//! Concurrent conflicting writes of every Redis type in three DCs of a real `causeway up`
//! cluster, through redis-py (`tests/up/conflicts.py`), checked against the conflict rules
//! of docs/REDIS.md once every DC converged: SET/SET (last writer wins), INCRBY in three
//! DCs (they add up), INCR concurrent with SET of a string (the SET plus what it missed),
//! DEL concurrent with SADD and HDEL with HSET (add-wins), HINCRBY in three DCs, and a key
//! retyped after its DEL concurrent with a write of its old type.
//!
//! The DCs are `RTT_MS` apart: two writes sent to two DCs a few ms apart cannot see each
//! other. redis-py comes from `.ci/install-extras`; without it the test skips loudly,
//! except under CI (`CI` set), where it fails.

mod up;

use std::path::PathBuf;
use std::process::Command;
use up::Up;

/// The emulated round trip between DCs: far longer than the few ms between two writes
/// the script sends to two DCs.
const RTT_MS: &str = "200";

fn have_redis_py() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import redis"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "redis-py is missing under CI: .ci/install-extras must install it"
        );
        eprintln!("\n!!!!! SKIPPING: no redis-py here; run .ci/install-extras !!!!!\n");
    }
    ok
}

/// Runs `conflicts.py` against DCs 0-2 of `up`; fails with its output unless it passed.
fn conflicts_hold(up: &Up) {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/up/conflicts.py");
    let ports: Vec<String> = (0..3)
        .map(|dc| {
            up.resp_addr(dc)
                .rsplit(':')
                .next()
                .expect("ip:port")
                .to_string()
        })
        .collect();
    let out = Command::new("python3")
        .arg(script)
        .args(&ports)
        .output()
        .expect("run python3");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "conflicts.py failed:\n{text}");
    assert!(
        text.contains("ok:"),
        "conflicts.py printed no result:\n{text}"
    );
    println!("{}", text.trim());
}

#[test]
fn concurrent_writes_of_every_type_converge_by_the_documented_rules() {
    if !have_redis_py() {
        return;
    }
    let up = Up::start("conflicts", 3, 1, &["--rtt-ms", RTT_MS]);
    conflicts_hold(&up);
}
