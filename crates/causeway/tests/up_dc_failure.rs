//! UniStore surviving a DC failure on a real `causeway up` cluster (issue 9): 3 DCs (f = 1)
//! under load from clients of every DC; clients of DC 2 (`dc3`) commit, take a token and
//! pass a uniform barrier through each front end (native client, `causeway cli`, RESP
//! `CAUSAL.BARRIER`); then every node process of DC 2 is SIGKILLed. `up` reports the dead
//! nodes and keeps the others running; clients of DCs 0 and 1 keep committing; after the
//! load the two survivors converge and show every write either had made visible before the
//! kill; DC 2's clients attach their tokens at the survivors (native, CLI, RESP
//! `CAUSAL.ATTACH`) and read their own writes; Ctrl-C then leaves no node process behind.

mod up;

use causeway_client::{Client, ClientError};
use causeway_core::crdt::{ObjType, Update};
use causeway_core::{Key, ObjValue};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use up::{cli, resp_command, resp_connect, Up};

/// The keys the load writes: sets (unique members) and counters, shared by every client.
const SETS: [&str; 3] = ["set-0", "set-1", "set-2"];
const COUNTERS: [&str; 2] = ["ctr-0", "ctr-1"];
/// Load threads per DC.
const THREADS_PER_DC: u16 = 2;
/// The DC whose processes are killed (from 0; `up` names it dc3).
const DEAD_DC: u16 = 2;

/// What one load thread had acknowledged.
#[derive(Default)]
struct Acked {
    dc: u16,
    /// Set members whose commit was acknowledged.
    members: Vec<(String, String)>,
    /// Acknowledged increments per counter.
    increments: BTreeMap<String, i64>,
    /// Commits that began after the kill.
    after_kill: usize,
}

/// One causal txn: a unique member into a set and an increment of a counter.
fn load_txn(
    client: &mut Client,
    t: u16,
    j: usize,
) -> Result<(String, String, String), ClientError> {
    let (set, ctr) = (SETS[j % SETS.len()], COUNTERS[j % COUNTERS.len()]);
    let member = format!("w{t}-{j}");
    client.begin()?;
    client.update(set, Update::Add(member.clone().into_bytes()))?;
    client.update(ctr, Update::Increment(1))?;
    client.commit()?;
    Ok((set.into(), member, ctr.into()))
}

/// Commits load txns at `addr` until `stop`; a thread of the dead DC stops at its first
/// error after the kill (its DC is gone).
fn load(addr: String, dc: u16, t: u16, stop: Arc<AtomicBool>, killed: Arc<AtomicBool>) -> Acked {
    let mut acked = Acked {
        dc,
        ..Acked::default()
    };
    let mut client = Client::connect(addr.as_str()).expect("a load client connects");
    let mut j = 0;
    while !stop.load(Ordering::Relaxed) {
        j += 1;
        let after = killed.load(Ordering::Relaxed);
        match load_txn(&mut client, t, j) {
            Ok((set, member, ctr)) => {
                acked.members.push((set, member));
                *acked.increments.entry(ctr).or_default() += 1;
                acked.after_kill += usize::from(after);
            }
            Err(_) if dc == DEAD_DC && killed.load(Ordering::Relaxed) => break,
            Err(ClientError::Aborted(_)) => {}
            Err(e) => panic!("load client of DC {dc}: {e}"),
        }
    }
    acked
}

/// Every load key's value at DC `dc`, in one causal read-only txn.
fn read_all(addr: &str) -> Result<BTreeMap<String, ObjValue>, ClientError> {
    let mut client = Client::connect(addr)?;
    let sets = SETS.iter().map(|k| (Key::from(*k), ObjType::Set));
    let ctrs = COUNTERS.iter().map(|k| (Key::from(*k), ObjType::Counter));
    client.begin()?;
    let values = client.read(sets.chain(ctrs).collect())?;
    client.commit()?;
    Ok(values
        .into_iter()
        .map(|v| (v.key.to_string(), v.value))
        .collect())
}

fn members(values: &BTreeMap<String, ObjValue>, key: &str) -> BTreeSet<Vec<u8>> {
    match &values[key] {
        ObjValue::Set(m) => m.iter().cloned().collect(),
        other => panic!("{key} is a set, not {other:?}"),
    }
}

fn counter(values: &BTreeMap<String, ObjValue>, key: &str) -> i64 {
    match &values[key] {
        ObjValue::Counter(n) => *n,
        other => panic!("{key} is a counter, not {other:?}"),
    }
}

/// What the clients of DC 2 wrote before the failure, to attach at a survivor.
struct Migrant {
    native: Vec<u8>,
    cli: String,
    resp: String,
}

/// A native client, the CLI and a RESP connection of DC 2 each write, pass a uniform
/// barrier and take their token.
fn dc2_clients_write_and_barrier(up: &Up) -> Migrant {
    let mut c = Client::connect(up.client_addr(DEAD_DC).as_str()).expect("DC 2 client");
    c.begin().expect("begin");
    for m in ["n1", "n2", "n3"] {
        c.update("mine", Update::Add(m.into())).expect("sadd");
    }
    c.set("mine-reg", b"native".to_vec()).expect("set");
    c.commit().expect("commit at DC 2");
    let native = c.token().expect("token");
    let began = Instant::now();
    c.barrier().expect("a uniform barrier at DC 2");
    eprintln!("native barrier took {:?}", began.elapsed());
    let out = cli(
        &up.client_addr(DEAD_DC),
        "begin; sadd cli-mine c1 c2; commit; barrier; token",
    );
    assert!(out.contains("barrier done"), "{out}");
    let cli_token = out.lines().last().expect("a token line").trim().to_string();
    let mut r = resp_connect(&up.resp_addr(DEAD_DC));
    assert_eq!(resp_command(&mut r, &["SADD", "resp-mine", "r1"]), ":1");
    assert_eq!(resp_command(&mut r, &["CAUSAL.BARRIER"]), "+OK");
    let resp = resp_command(&mut r, &["CAUSAL.TOKEN"]);
    Migrant {
        native,
        cli: cli_token,
        resp,
    }
}

/// DC 2's clients continue at the survivors: each attaches its token in a new session
/// (native and RESP at DC 0, CLI at DC 1) and reads its own writes.
fn migrants_attach_and_read_their_writes(up: &Up, m: &Migrant) {
    let began = Instant::now();
    let mut c = Client::connect(up.client_addr(0).as_str()).expect("DC 0 client");
    c.attach(m.native.clone())
        .expect("attach DC 2's token at DC 0");
    eprintln!("native attach at DC 0 took {:?}", began.elapsed());
    c.begin().expect("begin");
    let mine = c.members("mine").expect("read");
    let reg = c.get("mine-reg").expect("read");
    c.commit().expect("commit");
    let want: Vec<Vec<u8>> = ["n1", "n2", "n3"].map(|s| s.into()).to_vec();
    assert_eq!(mine, want, "DC 2's client reads its own writes at DC 0");
    assert_eq!(reg.as_deref(), Some(&b"native"[..]));
    let script = format!("attach {}; smembers cli-mine", m.cli);
    let out = cli(&up.client_addr(1), &script);
    assert!(
        out.contains("attached") && out.contains("{c1, c2}"),
        "{out}"
    );
    let mut r = resp_connect(&up.resp_addr(0));
    assert_eq!(resp_command(&mut r, &["CAUSAL.ATTACH", &m.resp]), "+OK");
    assert_eq!(
        resp_command(&mut r, &["SISMEMBER", "resp-mine", "r1"]),
        ":1"
    );
}

/// Starts `THREADS_PER_DC` load threads in every DC.
fn start_load(up: &Up, stop: &Arc<AtomicBool>, killed: &Arc<AtomicBool>) -> Vec<JoinHandle<Acked>> {
    (0..3 * THREADS_PER_DC)
        .map(|t| {
            let dc = t % 3;
            let (addr, stop, killed) = (up.client_addr(dc), stop.clone(), killed.clone());
            std::thread::spawn(move || load(addr, dc, t, stop, killed))
        })
        .collect()
}

/// Reads DCs 0 and 1 until they agree on every key; their common values.
fn converged(up: &Up) -> BTreeMap<String, ObjValue> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (a, b) = (read_all(&up.client_addr(0)), read_all(&up.client_addr(1)));
        if let (Ok(a), Ok(b)) = (&a, &b) {
            if a == b {
                return a.clone();
            }
        }
        assert!(
            Instant::now() < deadline,
            "DCs 0 and 1 did not converge: {a:?} vs {b:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Members that DC 2's load threads wrote (threads t with t % 3 == 2), among `values`.
fn dead_dc_members(values: &BTreeMap<String, ObjValue>) -> usize {
    let from_dead = |m: &Vec<u8>| {
        let t = String::from_utf8_lossy(m);
        let thread = t[1..].split('-').next().and_then(|n| n.parse::<u16>().ok());
        thread.is_some_and(|t| t % 3 == DEAD_DC)
    };
    SETS.iter()
        .map(|k| members(values, k).iter().filter(|m| from_dead(m)).count())
        .sum()
}

/// Everything visible at a survivor before the kill (DC 2's writes among it), and every
/// write a survivor's client committed, is in the survivors' converged state.
fn nothing_lost(
    before: &[BTreeMap<String, ObjValue>],
    acked: &[Acked],
    last: &BTreeMap<String, ObjValue>,
) {
    for seen in before {
        let n = dead_dc_members(seen);
        eprintln!("a survivor showed {n} members from DC 2 before the kill");
        assert!(
            n > 0,
            "DC 2's writes were visible at the survivors before the kill"
        );
        for key in SETS {
            let lost: Vec<_> = members(seen, key)
                .difference(&members(last, key))
                .cloned()
                .collect();
            assert!(
                lost.is_empty(),
                "{key}: visible before the kill, lost: {lost:?}"
            );
        }
        for key in COUNTERS {
            assert!(counter(last, key) >= counter(seen, key), "{key} went back");
        }
    }
    for a in acked.iter().filter(|a| a.dc != DEAD_DC) {
        for (key, member) in &a.members {
            let held = members(last, key).contains(member.as_bytes());
            assert!(held, "{key}: {member} committed at DC {} but lost", a.dc);
        }
    }
    for key in COUNTERS {
        let survivors: i64 = acked
            .iter()
            .filter(|a| a.dc != DEAD_DC)
            .filter_map(|a| a.increments.get(key))
            .sum();
        assert!(counter(last, key) >= survivors, "{key}: increments lost");
    }
}

/// Each survivor DC's clients committed at least `min` txns after the kill.
fn survivors_kept_committing(acked: &[Acked], min: usize) {
    for dc in 0..2 {
        let after: usize = acked
            .iter()
            .filter(|a| a.dc == dc)
            .map(|a| a.after_kill)
            .sum();
        eprintln!("DC {dc}: {after} txns committed after the kill");
        assert!(
            after >= min,
            "DC {dc} kept committing: only {after} txns after the kill"
        );
    }
}

/// `up` reported both dead nodes of dc3 and kept going; Ctrl-C stops it cleanly and no
/// node process is left.
fn up_reported_the_dead_dc_and_stops_cleanly(up: &mut Up) {
    let stderr = up.stderr();
    for node in ["dc3-n1", "dc3-n2"] {
        let line = format!("node {node} of DC dc3 exited (signal: 9 (SIGKILL))");
        assert!(stderr.contains(&line), "up reports {node}: {stderr}");
    }
    assert!(stderr.contains("the other nodes keep running"), "{stderr}");
    let (status, rest) = up.interrupt();
    assert!(
        status.success(),
        "up exited with {status}: {rest:?} {stderr}"
    );
    assert_eq!(
        up.live_nodes(),
        Vec::<String>::new(),
        "no node left running"
    );
}

#[test]
fn unistore_survives_the_loss_of_a_whole_dc_and_its_clients_move() {
    let began = Instant::now();
    let extra = [
        "--protocol",
        "unistore",
        "--f",
        "1",
        "--rtt-ms",
        "20",
        "--no-restart",
    ];
    let mut up = Up::start("dc-failure", 3, 2, &extra);
    assert!(
        up.banner.contains("running protocol unistore"),
        "{}",
        up.banner
    );
    let (stop, killed) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let loaders = start_load(&up, &stop, &killed);
    std::thread::sleep(Duration::from_millis(1000));
    let migrant = dc2_clients_write_and_barrier(&up);
    std::thread::sleep(Duration::from_millis(500));
    let before: Vec<_> = (0..2)
        .map(|dc| read_all(&up.client_addr(dc)).expect("read before the kill"))
        .collect();
    killed.store(true, Ordering::Relaxed);
    let dead = up.kill_dc("dc3");
    assert_eq!(dead.len(), 2, "both nodes of dc3: {:?}", up.pids);
    migrants_attach_and_read_their_writes(&up, &migrant);
    std::thread::sleep(Duration::from_millis(2500));
    stop.store(true, Ordering::Relaxed);
    let acked: Vec<Acked> = loaders
        .into_iter()
        .map(|h| h.join().expect("load"))
        .collect();
    survivors_kept_committing(&acked, 20);
    nothing_lost(&before, &acked, &converged(&up));
    up_reported_the_dead_dc_and_stops_cleanly(&mut up);
    eprintln!("whole test took {:?}", began.elapsed());
}
