//! PrompTCC on a real `causeway up` cluster: one DC of three nodes and twelve partitions
//! (PrompTCC §IV is a one-DC design: many logical partitions over few servers). A write-only
//! transaction over keys of different partitions is never seen half-applied; a session
//! reads its own writes; the native client, `causeway cli` and RESP all work; the values
//! survive a restart of the whole cluster from its data; `causeway load` runs with a
//! history that `causeway check` passes for TCC; and `--dcs 2` is refused with the reason.

mod up;

use causeway_client::Client;
use causeway_core::{Key, ObjType, ObjValue, Topology};
use up::{causeway, cli, resp_command, resp_connect, Up};

const NODES: u16 = 3;
const PARTITIONS: u32 = 12;

/// `count` keys `PREFIX-i`, each in a different partition.
fn keys_on_distinct_partitions(prefix: &str, count: usize) -> Vec<String> {
    let t = Topology::full(1, u32::from(NODES), PARTITIONS);
    let mut seen = Vec::new();
    let mut keys = Vec::new();
    for i in 0.. {
        let k = format!("{prefix}-{i}");
        let p = t.partition_of(&Key::from(k.as_str()));
        if !seen.contains(&p) {
            seen.push(p);
            keys.push(k);
        }
        if keys.len() == count {
            break;
        }
    }
    keys
}

/// The values of `keys` read in one READ of one transaction of a fresh session. (PrompTCC
/// fixes a transaction's snapshot at its first READ: a later READ of the same transaction
/// reads at that snapshot, which need not include writes concurrent with what the first
/// one read; docs/ARCHITECTURE.md.)
fn read_all(up: &Up, keys: &[String]) -> Vec<Option<Vec<u8>>> {
    let mut c = Client::connect(up.client_addr(0).as_str()).expect("a reader connects");
    c.begin().expect("begin");
    let wanted = keys
        .iter()
        .map(|k| (Key::from(k.as_str()), ObjType::Lww))
        .collect();
    let values = c.read(wanted).expect("a read");
    c.commit().expect("a read-only commit");
    values
        .into_iter()
        .map(|v| match v.value {
            ObjValue::Lww(v) => v,
            other => panic!("a register, got {other:?}"),
        })
        .collect()
}

/// Writers move several keys on distinct partitions from one generation to the next in
/// one transaction each, while readers read them all in one: every read shows one
/// generation for all keys (or none yet).
fn no_read_sees_half_a_transaction(up: &Up) {
    let keys = keys_on_distinct_partitions("atomic", 4);
    let mut w = Client::connect(up.client_addr(0).as_str()).expect("a writer connects");
    for generation in 1..=30u32 {
        w.begin().expect("begin");
        for k in &keys {
            w.set(k.as_str(), generation.to_string().into_bytes())
                .expect("set");
        }
        w.commit().expect("commit");
        let seen = read_all(up, &keys);
        let first = &seen[0];
        assert!(
            seen.iter().all(|v| v == first),
            "generation {generation}: a read saw {seen:?}"
        );
    }
    // The writer's own session reads its last write (read-your-writes).
    w.begin().expect("begin");
    let v = w.get(keys[0].as_str()).expect("read back");
    assert_eq!(v.as_deref(), Some(&b"30"[..]));
    w.commit().expect("commit");
}

#[test]
fn promptcc_in_one_dc_is_atomic_survives_a_restart_and_passes_the_checker() {
    let partitions = PARTITIONS.to_string();
    let extra = ["--protocol", "promptcc", "--partitions", &partitions];
    let mut up = Up::start("promptcc", 1, NODES, &extra);
    assert!(
        up.banner.contains("running protocol promptcc"),
        "{}",
        up.banner
    );
    no_read_sees_half_a_transaction(&up);

    let script = "begin; set cli-k c1; commit; begin; get cli-k; commit";
    let out = cli(&up.client_addr(0), script);
    assert!(out.contains("cli-k = c1"), "{out}");

    let mut resp = resp_connect(&up.resp_addr(0));
    assert_eq!(resp_command(&mut resp, &["SET", "resp-k", "r1"]), "+OK");
    assert_eq!(resp_command(&mut resp, &["GET", "resp-k"]), "r1");
    assert_eq!(resp_command(&mut resp, &["INCR", "resp-n"]), ":1");
    assert_eq!(resp_command(&mut resp, &["INCR", "resp-n"]), ":2");
    drop(resp);

    up.restart();
    let keys = ["cli-k".to_string(), "resp-k".to_string()];
    let want = [Some(b"c1".to_vec()), Some(b"r1".to_vec())];
    // A fresh session sees them once stabilization has run after the restart.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while read_all(&up, &keys) != want && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(read_all(&up, &keys), want);
    let mut resp = resp_connect(&up.resp_addr(0));
    assert_eq!(resp_command(&mut resp, &["GET", "resp-n"]), "2");
    drop(resp);

    up.load_and_check(&[up.client_addr(0)], "ycsb-b", 3, "tcc");
    let (status, rest) = up.interrupt();
    assert!(status.success(), "up exited with {status}: {rest:?}");
}

#[test]
fn promptcc_refuses_two_dcs_and_says_why() {
    let dir = std::env::temp_dir().join(format!("causeway-it-promptcc2-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let base = up::free_base(2, 2).to_string();
    let (ok, out) = causeway(&[
        "up",
        "--protocol",
        "promptcc",
        "--dcs",
        "2",
        "--data",
        dir.to_str().expect("a UTF-8 path"),
        "--port-base",
        &base,
        "--http-port",
        "0",
    ]);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!ok, "up with two DCs must fail: {out}");
    assert!(out.contains("runs in one DC"), "{out}");
}
