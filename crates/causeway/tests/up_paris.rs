//! PaRiS under partial replication on a real `causeway up` cluster: 3 DCs of one node, 3
//! partitions, each stored in 2 of the DCs (`--replication 2`; partition p in DCs p % 3 and
//! p % 3 + 1, so DC 0 stores partitions 0 and 2, not 1). A client of DC 0 reads a key of
//! partition 1 (served by a replica in another DC, PaRiS §V-A), writes it and reads its
//! write back in its next transaction (read-your-writes through the client cache, before
//! UST covers the write); the native client, `causeway cli` and RESP all do; every DC then
//! reads the value, also after the whole cluster restarts from its data. Finally `causeway
//! load` runs over the three DCs recording a history, and `causeway check` passes it.

mod up;

use causeway_client::Client;
use causeway_core::{DcId, Key, PartitionId, Topology};
use std::time::{Duration, Instant};
use up::{cli, resp_command, resp_connect, Up};

const DCS: u16 = 3;
const PARTITIONS: u32 = 3;
const REPLICATION: u16 = 2;

/// The placement `up` runs: one node per DC.
fn topology() -> Topology {
    Topology::partial(DCS, 1, PARTITIONS, REPLICATION)
}

/// The first `PREFIX-i` key of a partition DC `dc` does not store.
fn key_not_stored_at(dc: DcId, prefix: &str) -> String {
    let t = topology();
    (0..)
        .map(|i| format!("{prefix}-{i}"))
        .find(|k| !t.replicates(dc, t.partition_of(&Key::from(k.as_str()))))
        .expect("some key lives elsewhere")
}

/// `key` at DC `dc` in a causal transaction of a fresh session.
fn read_at(up: &Up, dc: u16, key: &str) -> Option<Vec<u8>> {
    let mut c = Client::connect(up.client_addr(dc).as_str()).expect("a reader connects");
    c.begin().expect("begin");
    let v = c.get(key).expect("a read");
    c.commit().expect("a read-only commit");
    v
}

/// Every DC reads `want` as `key` within 10 s (replication and UST catch up).
fn every_dc_reads(up: &Up, key: &str, want: &[u8]) {
    let deadline = Instant::now() + Duration::from_secs(10);
    for dc in 0..DCS {
        loop {
            let v = read_at(up, dc, key);
            if v.as_deref() == Some(want) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "DC {dc} reads {key} = {v:?}, never {:?}",
                String::from_utf8_lossy(want)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The committed count of `causeway load`'s table row (after the `clients ...` header).
fn committed(stdout: &str) -> u64 {
    let mut lines = stdout.lines().skip_while(|l| !l.starts_with("clients"));
    lines.next().expect("the table header");
    let row = lines.next().expect("a table row");
    let field = row.split_whitespace().nth(1).expect("a committed column");
    field
        .parse()
        .unwrap_or_else(|_| panic!("a number in {row:?}"))
}

#[test]
fn paris_reads_its_own_writes_of_a_remote_partition_and_passes_the_checker_under_load() {
    let partitions = PARTITIONS.to_string();
    let replication = REPLICATION.to_string();
    let extra = [
        "--protocol",
        "paris",
        "--replication",
        &replication,
        "--partitions",
        &partitions,
        "--rtt-ms",
        "40",
    ];
    let mut up = Up::start("paris", DCS, 1, &extra);
    let banner = &up.banner;
    assert!(banner.contains("running protocol paris"), "{banner}");
    assert!(
        banner.contains("3 partitions, each stored in 2 of the 3 DCs"),
        "{banner}"
    );
    let dc0 = DcId(0);
    assert_eq!(topology().replicas_of(PartitionId(1)), [DcId(1), DcId(2)]);

    // The native client: read (nothing yet), write, and read the write back next txn.
    let key = key_not_stored_at(dc0, "remote");
    let mut c = Client::connect(up.client_addr(0).as_str()).expect("a client of DC 0");
    c.begin().expect("begin");
    assert_eq!(c.get(key.as_str()).expect("a remote read"), None);
    c.set(key.as_str(), b"v1".to_vec()).expect("set");
    c.commit().expect("commit");
    c.begin().expect("begin");
    let v = c.get(key.as_str()).expect("read back");
    assert_eq!(v.as_deref(), Some(&b"v1"[..]), "read-your-writes of {key}");
    c.commit().expect("commit");
    every_dc_reads(&up, &key, b"v1");

    // `causeway cli`: one session writes and reads back in two transactions.
    let cli_key = key_not_stored_at(dc0, "cli");
    let script = format!("begin; set {cli_key} c1; commit; begin; get {cli_key}; commit");
    let out = cli(&up.client_addr(0), &script);
    assert!(out.contains(&format!("{cli_key} = c1")), "{out}");

    // RESP: SET then GET on one connection (one session), each its own transaction.
    let resp_key = key_not_stored_at(dc0, "resp");
    let mut resp = resp_connect(&up.resp_addr(0));
    assert_eq!(resp_command(&mut resp, &["GET", &resp_key]), "(nil)");
    assert_eq!(resp_command(&mut resp, &["SET", &resp_key, "r1"]), "+OK");
    assert_eq!(resp_command(&mut resp, &["GET", &resp_key]), "r1");
    drop(resp);

    // Every node recovers its partitions from its log; DC 0 still reaches the others.
    up.restart();
    every_dc_reads(&up, &key, b"v1");
    every_dc_reads(&up, &cli_key, b"c1");
    every_dc_reads(&up, &resp_key, b"r1");

    // Load over the three DCs, its history checked for TCC.
    let addrs: Vec<String> = (0..DCS).map(|dc| up.client_addr(dc)).collect();
    let (out, checked) = up.load_and_check(&addrs, "ycsb-a", 4, "tcc");
    eprintln!("{out}");
    assert!(committed(&out) > 20, "too few committed txns: {out}");
    assert!(checked.contains("final reads"), "{checked}");
    let (status, rest) = up.interrupt();
    assert!(status.success(), "up exited with {status}: {rest:?}");
}
