//! UniStore's strong transactions on a real `causeway up` cluster (3 DCs of 2 nodes, f = 1,
//! the default protocol): two clients at different DCs race to register the same nickname
//! (a strong txn: read `nick/NAME`, write its own id if empty, commit), started together at
//! a barrier, for several names; exactly one registers each name, the other aborts with a
//! conflict (or reads the winner's id and writes nothing), and every DC then reads the
//! winner. Over RESP a strong txn that a conflicting strong commit overtook answers
//! `TX.COMMIT` with `-TXABORTED transaction aborted: conflict ...`. Then every node process
//! of DC 0, which leads the certification groups, is SIGKILLed: a strong txn at another DC
//! still commits once new leaders are elected (native client and RESP), racing strong txns
//! still register a name exactly once, and causal reads and writes go on.
//!
//! The second test kills the leader DC while a single-partition strong txn's decision is
//! still in flight to it: the orphaned txn is recovered by the new leader and later strong
//! txns become visible everywhere.

mod up;

use causeway_client::{Client, ClientError};
use causeway_core::TxnKind;
use std::io::BufReader;
use std::net::TcpStream;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};
use up::{cli, resp_command, resp_connect, Up};

/// The DC that leads the certification groups (`[protocols.unistore] leader_dc`, default 0).
const LEADER_DC: u16 = 0;
/// How long a strong txn may keep failing after the leader DC dies (elections take ~1 s).
const FAILOVER_PATIENCE: Duration = Duration::from_secs(20);

/// How one "register nickname" attempt ended.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    /// Read no owner, wrote its id, committed.
    Registered,
    /// Read the owner `.0` and wrote nothing (committed or not: it changed nothing).
    Taken(String),
    /// Certification aborted it (the reason names the conflict).
    Aborted(String),
}

/// A failure worth retrying while the certification groups elect new leaders: no leader
/// (Unavailable), an abort that is not a conflict, an unknown outcome (timeout, lost
/// connection; the retry reads whether it took effect).
fn transient(e: &ClientError) -> bool {
    match e {
        ClientError::Server(causeway_core::Error::Unavailable(_)) => true,
        ClientError::Aborted(why) => !why.contains("conflict"),
        ClientError::Timeout { .. } | ClientError::ConnectionLost(_) => true,
        _ => false,
    }
}

/// One strong "register nickname" txn: begin strong, read `nick/NAME`, write `id` if empty.
fn register_once(client: &mut Client, name: &str, id: &str) -> Result<Outcome, ClientError> {
    let key = format!("nick/{name}");
    client.begin_kind(TxnKind::Strong)?;
    if let Some(owner) = client.get(key.as_str())? {
        let owner = String::from_utf8_lossy(&owner).to_string();
        client.commit()?;
        return Ok(if owner == id {
            Outcome::Registered // an earlier attempt of ours with an unknown outcome took
        } else {
            Outcome::Taken(owner)
        });
    }
    client.set(key.as_str(), id.as_bytes().to_vec())?;
    match client.commit() {
        Ok(()) => Ok(Outcome::Registered),
        Err(ClientError::Aborted(why)) if why.contains("conflict") => Ok(Outcome::Aborted(why)),
        Err(e) => Err(e),
    }
}

/// Registers `name` for `id` at `addr`; transient failures are retried (with a new session
/// when the old one is closed) until `patience` runs out, each one logged.
fn register(addr: &str, name: &str, id: &str, start: &Barrier, patience: Duration) -> Outcome {
    let mut client = Client::connect(addr).expect("a client connects");
    start.wait();
    let deadline = Instant::now() + patience;
    loop {
        match register_once(&mut client, name, id) {
            Ok(outcome) => return outcome,
            Err(e) if transient(&e) && Instant::now() < deadline => {
                eprintln!("{id}: {e}; retrying");
                let _ = client.abort();
                std::thread::sleep(Duration::from_millis(200));
                if matches!(
                    e,
                    ClientError::Timeout { .. } | ClientError::ConnectionLost(_)
                ) {
                    client = Client::connect(addr).expect("a client reconnects");
                }
            }
            Err(e) => panic!("{id} registering {name} at {addr}: {e}"),
        }
    }
}

/// Clients of DCs `a` and `b` register `name` at the same moment; exactly one succeeds. The
/// winner's id.
fn race(up: &Up, name: &str, a: u16, b: u16, patience: Duration) -> String {
    let start = Arc::new(Barrier::new(2));
    let racers: Vec<_> = [a, b]
        .into_iter()
        .map(|dc| {
            let (addr, name, start) = (up.client_addr(dc), name.to_string(), start.clone());
            let id = format!("dc{}-{name}", dc + 1);
            std::thread::spawn(move || {
                let outcome = register(&addr, &name, &id, &start, patience);
                (id, outcome)
            })
        })
        .collect();
    let results: Vec<(String, Outcome)> = racers
        .into_iter()
        .map(|h| h.join().expect("a racer"))
        .collect();
    eprintln!("race for {name} between DCs {a} and {b}: {results:?}");
    let winners: Vec<&String> = results
        .iter()
        .filter(|(_, o)| *o == Outcome::Registered)
        .map(|(id, _)| id)
        .collect();
    assert_eq!(
        winners.len(),
        1,
        "exactly one registers {name}: {results:?}"
    );
    let winner = winners[0].clone();
    for (id, outcome) in &results {
        match outcome {
            Outcome::Registered => {}
            Outcome::Taken(owner) => assert_eq!(owner, &winner, "{id} read another owner"),
            Outcome::Aborted(why) => assert!(why.contains("conflict"), "{id}: {why}"),
        }
    }
    winner
}

/// `nick/NAME` at DC `dc`, in a causal txn.
fn owner_at(addr: &str, name: &str) -> Option<String> {
    let mut c = Client::connect(addr).expect("a reader connects");
    c.begin().expect("begin");
    let v = c.get(format!("nick/{name}").as_str()).expect("read");
    c.commit().expect("a read-only commit");
    v.map(|v| String::from_utf8_lossy(&v).to_string())
}

/// Every DC in `dcs` reads `winner` as the owner of `name` (waiting for replication).
fn every_dc_reads(up: &Up, dcs: &[u16], name: &str, winner: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    for &dc in dcs {
        loop {
            let owner = owner_at(&up.client_addr(dc), name);
            if owner.as_deref() == Some(winner) {
                break;
            }
            assert!(
                owner.is_none(),
                "DC {dc} reads owner {owner:?} of {name}, not {winner}"
            );
            assert!(
                Instant::now() < deadline,
                "DC {dc} never read {winner} as {name}'s owner"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A RESP command that must answer `want`.
fn resp_ok(conn: &mut BufReader<TcpStream>, args: &[&str], want: &str) {
    assert_eq!(resp_command(conn, args), want, "{args:?}");
}

/// Over RESP, a strong txn of DC 0 reads `nick/resp` (empty); meanwhile one of DC 1 takes
/// the name and commits; DC 0's `TX.COMMIT` then answers the abort with its conflict.
fn resp_strong_conflict_reaches_the_client(up: &Up) {
    let key = "nick/resp";
    let mut late = resp_connect(&up.resp_addr(0));
    let mut early = resp_connect(&up.resp_addr(1));
    resp_ok(&mut late, &["TX.BEGIN", "STRONG"], "+OK");
    resp_ok(&mut late, &["GET", key], "(nil)");
    resp_ok(&mut early, &["TX.BEGIN", "STRONG"], "+OK");
    resp_ok(&mut early, &["GET", key], "(nil)");
    resp_ok(&mut early, &["SET", key, "early"], "+OK");
    resp_ok(&mut early, &["TX.COMMIT"], "+OK");
    resp_ok(&mut late, &["SET", key, "late"], "+OK");
    let reply = resp_command(&mut late, &["TX.COMMIT"]);
    eprintln!("RESP TX.COMMIT of the overtaken strong txn: {reply}");
    assert!(
        reply.starts_with("-TXABORTED transaction aborted: ") && reply.contains("conflict"),
        "{reply}"
    );
    // The connection is idle again and DC 0 comes to read the winner.
    let deadline = Instant::now() + Duration::from_secs(10);
    while resp_command(&mut late, &["GET", key]) != "early" {
        assert!(Instant::now() < deadline, "DC 0 never read early");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A strong txn over RESP at `addr`, retried on `TRYAGAIN` and non-conflict aborts until
/// `patience` runs out: sets `key` to `value`. The connection (its session saw the write).
fn resp_strong_set(addr: &str, key: &str, value: &str, patience: Duration) -> BufReader<TcpStream> {
    let deadline = Instant::now() + patience;
    let mut conn = resp_connect(addr);
    loop {
        let begin = resp_command(&mut conn, &["TX.BEGIN", "STRONG"]);
        let reply = if begin == "+OK" {
            let set = resp_command(&mut conn, &["SET", key, value]);
            if set == "+OK" {
                resp_command(&mut conn, &["TX.COMMIT"])
            } else {
                let _ = resp_command(&mut conn, &["TX.ABORT"]);
                set
            }
        } else {
            begin
        };
        if reply == "+OK" {
            return conn;
        }
        let retry = reply.starts_with("-TRYAGAIN")
            || (reply.starts_with("-TXABORTED") && !reply.contains("conflict"));
        assert!(
            retry && Instant::now() < deadline,
            "strong SET at {addr}: {reply}"
        );
        eprintln!("RESP strong SET at {addr}: {reply}; retrying");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A causal write at DC `from` becomes visible at DC `to`.
fn causal_write_travels(up: &Up, from: u16, to: u16, key: &str) {
    let mut w = Client::connect(up.client_addr(from).as_str()).expect("writer");
    w.begin().expect("begin");
    w.set(key, b"causal".to_vec()).expect("set");
    w.commit().expect("a causal commit after the failure");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut r = Client::connect(up.client_addr(to).as_str()).expect("reader");
    loop {
        r.begin().expect("begin");
        let v = r.get(key).expect("a causal read after the failure");
        r.commit().expect("commit");
        if v.as_deref() == Some(&b"causal"[..]) {
            return;
        }
        assert!(Instant::now() < deadline, "{key} never reached DC {to}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn strong_txns_register_each_name_once_and_survive_the_leader_dcs_failure() {
    let began = Instant::now();
    // No --protocol: unistore is `up`'s default; 3 DCs give f = 1 by default.
    let mut up = Up::start("strong", 3, 2, &["--rtt-ms", "20", "--no-restart"]);
    assert!(
        up.banner.contains("running protocol unistore"),
        "{}",
        up.banner
    );
    let all = [0, 1, 2];
    let mut winners = Vec::new();
    for (name, a, b) in [
        ("alice", 0, 1),
        ("bob", 1, 2),
        ("carol", 2, 0),
        ("dave", 1, 2),
    ] {
        let winner = race(&up, name, a, b, Duration::from_secs(5));
        winners.push((name, winner));
    }
    for (name, winner) in &winners {
        every_dc_reads(&up, &all, name, winner);
    }
    resp_strong_conflict_reaches_the_client(&up);
    let out = cli(&up.client_addr(2), "begin strong; get nick/alice; commit");
    assert!(out.contains("committed"), "{out}");
    eprintln!("before the failure: {:?}", began.elapsed());

    // Let the decisions of the txns above reach their groups' logs (see the module doc).
    std::thread::sleep(Duration::from_millis(300));
    let dead = up.kill_dc(&format!("dc{}", LEADER_DC + 1));
    assert_eq!(dead.len(), 2, "both nodes of the leader DC: {:?}", up.pids);
    let killed = Instant::now();
    let first = race(&up, "erin", 1, 2, FAILOVER_PATIENCE);
    eprintln!("first strong commit {:?} after the kill", killed.elapsed());
    let second = race(&up, "frank", 2, 1, FAILOVER_PATIENCE);
    for (name, winner) in [("erin", &first), ("frank", &second)] {
        every_dc_reads(&up, &[1, 2], name, winner);
    }
    let resp_addr = up.resp_addr(2);
    let mut conn = resp_strong_set(&resp_addr, "nick/resp-after", "dc3", FAILOVER_PATIENCE);
    resp_ok(&mut conn, &["GET", "nick/resp-after"], "dc3");
    every_dc_reads(&up, &[1, 2], "resp-after", "dc3");
    for (name, winner) in &winners {
        every_dc_reads(&up, &[1, 2], name, winner);
    }
    causal_write_travels(&up, 1, 2, "after/causal-1");
    causal_write_travels(&up, 2, 1, "after/causal-2");
    let out = cli(&up.client_addr(1), "begin strong; get nick/erin; commit");
    assert!(out.contains("committed"), "{out}");
    let (status, rest) = up.interrupt();
    assert!(status.success(), "up exited with {status}: {rest:?}");
    eprintln!("whole test took {:?}", began.elapsed());
}

/// A strong txn on one key commits at DC 2 and the leader DC dies at once (its decision is
/// still on the emulated WAN): the new leader recovers the orphaned txn (its own vote
/// decides a single-partition txn) after `strong_recover_ns`, and later strong txns become
/// visible. (This once blocked every later strong txn: the recovery waited for votes of
/// no other participant.)
#[test]
fn a_strong_commit_just_before_the_leader_dc_dies_does_not_block_later_ones() {
    let mut up = Up::start("strong-orphan", 3, 2, &["--rtt-ms", "20", "--no-restart"]);
    let start = Barrier::new(1);
    let patience = FAILOVER_PATIENCE;
    let last = register(&up.client_addr(2), "last", "dc3-last", &start, patience);
    assert_eq!(last, Outcome::Registered);
    up.kill_dc(&format!("dc{}", LEADER_DC + 1));
    let after = register(&up.client_addr(1), "after", "dc2-after", &start, patience);
    assert_eq!(after, Outcome::Registered);
    every_dc_reads(&up, &[1, 2], "last", "dc3-last");
    every_dc_reads(&up, &[1, 2], "after", "dc2-after");
    let (status, rest) = up.interrupt();
    assert!(status.success(), "up exited with {status}: {rest:?}");
}
