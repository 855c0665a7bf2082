//! A DC frozen far longer than every timeout and GC horizon catches up (issue 15): a
//! 3-DC `causeway up --protocol cure` with `silent_sibling_ns` at 2 s; every node process of
//! DC 2 (`dc3`) is SIGSTOPped for 8 s while clients of DC 0 and DC 1 keep adding unique
//! members to a set; after SIGCONT, DC 2 shows every acknowledged member, as the others do,
//! and its own clients write again. Twice: with the log kept for the silent DC (it
//! catches up from the senders' logs) and with no log kept for it at all
//! (`silent_sibling_log_max = 0`: it catches up by state transfer, cure/transfer.rs), and
//! the latter with `eventual` (eventual/transfer.rs) and with `unistore` running strong
//! txns too, whose certification groups forget what a majority decided while DC 2 is away
//! (`strong_log_kept_max`), so its transfer carries the certification state
//! (unistore/strong_transfer.rs) and DC 2 commits strong txns again.

mod up;

use causeway_client::Client;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use up::{add_member, members_at, Up};

/// The DC frozen (from 0; `up` names it dc3).
const FROZEN_DC: u16 = 2;
/// The protocol's GC horizon for a silent sibling, and the outage, 4x longer.
const SILENT_SIBLING_NS: u64 = 2_000_000_000;
const OUTAGE: Duration = Duration::from_secs(8);
/// How long DC 2 may take to catch up after it resumes.
const CATCH_UP_MAX: Duration = Duration::from_secs(60);
const SET: &str = "members";
/// The log limits of the two runs: the default (catch-up from the log) and 0 (the log
/// drops everything the silent DC lacks: state transfer; before it existed, DC 2 lacked
/// thousands of members for good).
const LOG_KEPT: &str = "--set=silent_sibling_log_max=262144";
const LOG_DROPPED: &str = "--set=silent_sibling_log_max=0";

/// Adds members `{tag}-0`, `{tag}-1`, ... at `addr` for `length`; the acknowledged ones.
fn add_members(addr: &str, tag: &str, length: Duration) -> Vec<String> {
    let mut client = Client::connect(addr).expect("a client connects");
    let began = Instant::now();
    let mut acked = Vec::new();
    for j in 0.. {
        if began.elapsed() >= length {
            break;
        }
        let member = format!("{tag}-{j}");
        if add_member(&mut client, SET, &member) {
            acked.push(member);
        }
    }
    acked
}

/// Sends `signal` to every node process of DC `dc`.
fn signal_dc(up: &Up, dc: u16, signal: i32) {
    let name = format!("dc{}", dc + 1);
    for (_, node_dc, pid) in &up.pids {
        if *node_dc == name {
            // SAFETY: kill(2) on a node process our `up` child started.
            assert_eq!(unsafe { libc::kill(*pid, signal) }, 0, "signal {pid}");
        }
    }
}

/// How many state transfers node `k` installed, from its `/metrics` (the histogram of
/// the machine's `transfer_installed_keys` samples: one per transfer).
fn transfers_installed(up: &Up, k: u16) -> u64 {
    samples_count(up, k, "causeway_transfer_installed_keys_count")
}

/// The `_count` of a sample histogram on node `k`'s `/metrics`.
fn samples_count(up: &Up, k: u16, metric: &str) -> u64 {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", up.base + 60 + k)).expect("metrics");
    conn.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .expect("a request");
    let mut body = String::new();
    conn.read_to_string(&mut body).expect("an answer");
    body.lines()
        .filter(|l| l.starts_with(metric))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

#[test]
fn a_dc_frozen_past_every_horizon_catches_up_and_converges() {
    frozen_dc_catches_up("outage", "cure", &[LOG_KEPT]);
}

#[test]
fn a_dc_frozen_after_its_siblings_dropped_their_logs_converges_by_state_transfer() {
    let up = frozen_dc_catches_up("transfer", "cure", &[LOG_DROPPED]);
    // Only a state transfer can have healed it: its siblings kept no log for it.
    let installed = transfers_installed(&up, FROZEN_DC);
    assert!(installed > 0, "DC 2's node installed no state transfer");
    eprintln!("DC 2 installed {installed} state transfers");
}

/// The `eventual` baseline too (eventual/transfer.rs): DC 1 drops its log for the frozen
/// DC 2, which keeps its own writes for DC 1 (`keeps_for`), so DC 1 sends it an image
/// that replaces its store; DC 0 keeps its log for DC 2 and streams the rest.
#[test]
fn eventual_a_dc_frozen_after_a_sibling_dropped_its_log_converges_by_state_transfer() {
    let up = frozen_dc_catches_up("transfer-eventual", "eventual", &[LOG_DROPPED]);
    let installed = transfers_installed(&up, FROZEN_DC);
    assert!(installed > 0, "DC 2's node installed no state transfer");
    eprintln!("DC 2 installed {installed} state transfers");
}

/// UniStore with strong txns: the groups' heartbeats (every 10 ms) put DC 2 more than
/// `strong_log_kept_max` slots behind within a second of the outage, so its group member
/// needs the certification state a transfer carries; afterwards it commits strong txns.
#[test]
fn unistore_a_dc_frozen_past_its_groups_log_catches_up_on_causal_and_strong_txns() {
    let kept = "--set=strong_log_kept_max=64";
    let up = frozen_dc_catches_up("transfer-unistore", "unistore", &[LOG_DROPPED, kept]);
    let installed = transfers_installed(&up, FROZEN_DC);
    assert!(installed > 0, "DC 2's node installed no state transfer");
    let asked = samples_count(&up, FROZEN_DC, "causeway_strong_snapshot_needed_count");
    assert!(
        asked > 0,
        "DC 2's group member never found its log truncated"
    );
    let mut client = Client::connect(up.client_addr(FROZEN_DC)).expect("a client connects");
    let strong = (|| {
        client.begin_kind(causeway_core::TxnKind::Strong)?;
        client.set("after-outage", b"strong".to_vec())?;
        client.commit()
    })();
    strong.expect("DC 2 commits a strong txn after catching up");
    eprintln!("DC 2 installed {installed} state transfers");
}

fn frozen_dc_catches_up(name: &str, protocol: &str, sets: &[&str]) -> Up {
    let set = format!("--set=silent_sibling_ns={SILENT_SIBLING_NS}");
    // A short link queue: the messages for the frozen DC overflow it (they are dropped,
    // with an error line), so only the protocol's catch-up from its log can heal.
    let queue = "--cluster-set=limits.link_queue_max=256";
    let mut args = vec!["--protocol", protocol, &set, queue];
    args.extend_from_slice(sets);
    let up = Up::start(name, 3, 1, &args);
    let before = add_members(&up.client_addr(FROZEN_DC), "before", Duration::from_secs(1));
    assert!(!before.is_empty(), "DC 2 takes writes before the outage");
    signal_dc(&up, FROZEN_DC, libc::SIGSTOP);
    let writers: Vec<_> = (0..2u16)
        .map(|dc| {
            let addr = up.client_addr(dc);
            std::thread::spawn(move || add_members(&addr, &format!("dc{dc}"), OUTAGE))
        })
        .collect();
    let mut acked: BTreeSet<String> = before.into_iter().collect();
    for w in writers {
        acked.extend(w.join().expect("a writer"));
    }
    signal_dc(&up, FROZEN_DC, libc::SIGCONT);
    assert!(
        acked.len() > 50,
        "the other DCs kept committing: {}",
        acked.len()
    );
    let resumed = Instant::now();
    loop {
        let seen = members_at(&up, FROZEN_DC, SET);
        let missing: Vec<&String> = acked.difference(&seen).collect();
        if missing.is_empty() {
            break;
        }
        assert!(
            resumed.elapsed() < CATCH_UP_MAX,
            "DC 2 still lacks {} of {} acknowledged members, e.g. {:?}",
            missing.len(),
            acked.len(),
            &missing[..missing.len().min(5)]
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    eprintln!("DC 2 caught up after {:?}", resumed.elapsed());
    let after = add_members(
        &up.client_addr(FROZEN_DC),
        "after",
        Duration::from_millis(500),
    );
    assert!(!after.is_empty(), "DC 2 takes writes again");
    for dc in 0..3 {
        let seen = members_at(&up, dc, SET);
        assert!(
            acked.is_subset(&seen),
            "DC {dc} shows every acknowledged member"
        );
    }
    up
}
