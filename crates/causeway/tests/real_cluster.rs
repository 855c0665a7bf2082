//! Real multi-process clusters on loopback, driven through the client library: the
//! photo-then-comment scenario across DCs, SIGKILL and restart of a node under load with
//! nothing committed lost, a history recorded by real clients that passes the checker, and
//! the `causeway up` quickstart.

mod cluster;

use causeway_check::{
    check, write_history, FinalRead, Guarantee, HOp, History, Outcome, TxnRecord,
};
use causeway_client::{Client, ClientError};
use causeway_core::crdt::{ObjType, Update};
use causeway_core::{DcId, Key, ObjValue, TxnKind};
use cluster::{eventually, Cluster};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn read_two(c: &mut Client) -> (Option<Vec<u8>>, Vec<Vec<u8>>) {
    c.begin().expect("begin");
    let values = c
        .read(vec![
            (Key::from("photo"), ObjType::Lww),
            (Key::from("comments"), ObjType::Set),
        ])
        .expect("read");
    c.commit().expect("commit a read-only txn");
    match (&values[0].value, &values[1].value) {
        (ObjValue::Lww(p), ObjValue::Set(s)) => (p.clone(), s.clone()),
        other => panic!("unexpected values {other:?}"),
    }
}

#[test]
fn photo_then_comment_is_never_seen_without_the_photo_in_another_dc() {
    let mut c = Cluster::start("photo", "cure", 3, 2, 40.0);
    let mut alice = Client::connect(c.client_addr(0)).expect("alice connects");
    alice.begin().unwrap();
    alice.set("photo", b"p1".to_vec()).unwrap();
    alice.commit().unwrap();
    alice.begin().unwrap();
    alice
        .update("comments", Update::Add(b"nice photo".to_vec()))
        .unwrap();
    alice.commit().unwrap();
    let token = alice.token().expect("cure sessions export tokens");
    let mut bob = Client::connect(c.client_addr(1)).expect("bob connects");
    let mut polls = 0;
    let seen = eventually(Duration::from_secs(20), || {
        polls += 1;
        let (photo, comments) = read_two(&mut bob);
        if comments.is_empty() {
            return None;
        }
        assert_eq!(
            photo.as_deref(),
            Some(&b"p1"[..]),
            "bob saw the comment without the photo"
        );
        Some(())
    });
    assert!(
        seen.is_some(),
        "the comment never reached DC2 ({polls} polls)"
    );
    let mut carol = Client::connect(c.client_addr(2)).expect("carol connects");
    carol.attach(token).expect("attach alice's token");
    let (photo, comments) = read_two(&mut carol);
    assert_eq!(
        photo.as_deref(),
        Some(&b"p1"[..]),
        "carol attached alice's past"
    );
    assert_eq!(comments, vec![b"nice photo".to_vec()]);
    c.stop();
}

/// One writer: adds unique values to a few sets at `addr` until `stop`; returns the values
/// whose commit was acknowledged.
fn writer(addr: std::net::SocketAddr, t: usize, stop: Arc<AtomicBool>) -> Vec<(String, String)> {
    let mut committed = Vec::new();
    let mut client = Client::connect(addr).expect("writer connects");
    let mut j = 0usize;
    while !stop.load(Ordering::Relaxed) {
        j += 1;
        let key = format!("set-{}", j % 4);
        let value = format!("w{t}-{j}");
        let result = client
            .begin()
            .and_then(|_| client.update(key.as_str(), Update::Add(value.clone().into_bytes())))
            .and_then(|_| client.commit());
        match result {
            Ok(()) => committed.push((key, value)),
            Err(ClientError::ConnectionLost(_) | ClientError::Timeout { .. }) => {
                client = Client::connect(addr).expect("writer reconnects");
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    committed
}

#[test]
fn a_node_killed_under_load_restarts_and_loses_no_committed_txn() {
    let mut c = Cluster::start("kill", "cure", 2, 2, 20.0);
    let stop = Arc::new(AtomicBool::new(false));
    let began = Instant::now();
    let writers: Vec<_> = (0..4)
        .map(|t| {
            let (addr, stop) = (c.client_addr(t % 2), stop.clone());
            std::thread::spawn(move || writer(addr, t, stop))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    c.kill("dc1-n2");
    std::thread::sleep(Duration::from_millis(500));
    c.restart("dc1-n2");
    std::thread::sleep(Duration::from_millis(2500));
    stop.store(true, Ordering::Relaxed);
    let committed: Vec<(String, String)> = writers
        .into_iter()
        .flat_map(|w| w.join().expect("writer"))
        .collect();
    let secs = began.elapsed().as_secs_f64();
    eprintln!(
        "{} txns committed in {secs:.1} s ({:.0} txns/s)",
        committed.len(),
        committed.len() as f64 / secs
    );
    assert!(committed.len() > 50, "too few commits: {}", committed.len());
    for dc in 0..2 {
        let mut reader = Client::connect(c.client_addr(dc)).expect("reader connects");
        let complete = eventually(Duration::from_secs(30), || {
            let mut missing = 0;
            for s in 0..4 {
                let key = format!("set-{s}");
                reader.begin().ok()?;
                let members = reader.members(key.as_str()).ok()?;
                reader.commit().ok()?;
                let want = committed.iter().filter(|(k, _)| *k == key);
                missing += want
                    .filter(|(_, v)| !members.contains(&v.as_bytes().to_vec()))
                    .count();
            }
            (missing == 0).then_some(())
        });
        assert!(complete.is_some(), "DC{} lost committed txns", dc + 1);
    }
    assert!(
        c.log("dc1-n2").contains("epoch=2"),
        "the restarted node recovered"
    );
    c.stop();
}

const KEYS: [(&str, ObjType); 6] = [
    ("r0", ObjType::Lww),
    ("r1", ObjType::Lww),
    ("s0", ObjType::Set),
    ("s1", ObjType::Set),
    ("c0", ObjType::Counter),
    ("c1", ObjType::Counter),
];

struct Recorder {
    base: Instant,
    txns: Mutex<Vec<TxnRecord>>,
}

/// Runs one transaction of two reads and one or two writes, recording it.
fn recorded_txn(
    client: &mut Client,
    dc: u16,
    rng: &mut u64,
    rec: &Recorder,
) -> Result<(), ClientError> {
    let mut next = || {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        *rng as usize
    };
    let start_ns = rec.base.elapsed().as_nanos() as u64;
    let id = client.begin()?;
    let mut ops = Vec::new();
    let mut outcome = Outcome::Aborted;
    let result = (|| {
        for _ in 0..2 {
            let (k, t) = KEYS[next() % KEYS.len()];
            for v in client.read(vec![(Key::from(k), t)])? {
                ops.push(HOp::Read {
                    key: v.key,
                    obj: t,
                    value: v.value,
                    observed: v.observed,
                });
            }
        }
        for _ in 0..1 + next() % 2 {
            let (k, t) = KEYS[next() % KEYS.len()];
            let update = match t {
                ObjType::Lww => Update::Assign(format!("v{}", next() % 1000).into_bytes()),
                ObjType::Set if next() % 3 == 0 => {
                    Update::Remove(format!("e{}", next() % 4).into_bytes())
                }
                ObjType::Set => Update::Add(format!("e{}", next() % 4).into_bytes()),
                _ => Update::Increment(1),
            };
            let op = client.update(k, update.clone())?;
            ops.push(HOp::Write {
                key: Key::from(k),
                update,
                id: op,
            });
        }
        outcome = Outcome::Unknown;
        client.commit()?;
        outcome = Outcome::Committed;
        Ok(())
    })();
    if matches!(result, Err(ClientError::Aborted(_))) {
        outcome = Outcome::Aborted;
    }
    let record = TxnRecord {
        id,
        session: id.session,
        dc: DcId(dc),
        kind: TxnKind::Causal,
        label: None,
        start_ns,
        end_ns: rec.base.elapsed().as_nanos() as u64,
        ops,
        outcome,
    };
    rec.txns.lock().expect("recorder").push(record);
    result
}

fn final_reads(c: &Cluster, dcs: u16) -> Vec<FinalRead> {
    let read_all = |dc: u16| -> Option<Vec<FinalRead>> {
        let mut client = Client::connect(c.client_addr(usize::from(dc))).ok()?;
        client.begin().ok()?;
        let keys = KEYS.iter().map(|(k, t)| (Key::from(*k), *t)).collect();
        let values = client.read(keys).ok()?;
        client.commit().ok()?;
        let finals = values.into_iter().zip(KEYS).map(|(v, (_, obj))| FinalRead {
            dc: DcId(dc),
            key: v.key,
            obj,
            value: v.value,
            observed: v.observed,
        });
        Some(finals.collect())
    };
    eventually(Duration::from_secs(20), || {
        let all: Vec<Vec<FinalRead>> = (0..dcs).map(read_all).collect::<Option<_>>()?;
        let same = all
            .iter()
            .all(|f| f.iter().zip(&all[0]).all(|(a, b)| a.value == b.value));
        same.then(|| all.into_iter().flatten().collect())
    })
    .expect("the DCs converge after the load")
}

#[test]
fn a_history_recorded_by_real_clients_passes_the_tcc_checker() {
    let mut c = Cluster::start("history", "cure", 2, 2, 20.0);
    let rec = Arc::new(Recorder {
        base: Instant::now(),
        txns: Mutex::new(Vec::new()),
    });
    let deadline = Instant::now() + Duration::from_millis(2500);
    let clients: Vec<_> = (0..4u16)
        .map(|i| {
            let (addr, rec) = (c.client_addr(usize::from(i % 2)), rec.clone());
            std::thread::spawn(move || {
                let mut client = Client::connect(addr).expect("client connects");
                let mut rng = 0x9e37_79b9_7f4a_7c15u64 + u64::from(i);
                while Instant::now() < deadline {
                    if let Err(e) = recorded_txn(&mut client, i % 2, &mut rng, &rec) {
                        assert!(!matches!(e, ClientError::ConnectionLost(_)), "{e}");
                    }
                }
            })
        })
        .collect();
    clients
        .into_iter()
        .for_each(|t| t.join().expect("client thread"));
    let history = History {
        txns: std::mem::take(&mut *rec.txns.lock().expect("recorder")),
        finals: final_reads(&c, 2),
        ..History::default()
    };
    let committed = history
        .txns
        .iter()
        .filter(|t| t.outcome == Outcome::Committed)
        .count();
    assert!(committed > 50, "too few committed txns: {committed}");
    let stats = check(&history, Guarantee::Tcc).unwrap_or_else(|v| panic!("TCC violation: {v}"));
    eprintln!("checked {committed} committed txns: {stats:?}");
    let path = c.dir.join("history.jsonl");
    let mut file = std::fs::File::create(&path).expect("history file");
    write_history(&history, &mut file).expect("write the history");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_causeway"))
        .args(["check", "--guarantee", "tcc", "--history"])
        .arg(&path)
        .output()
        .expect("run causeway check");
    assert!(
        out.status.success(),
        "causeway check: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    c.stop();
}
