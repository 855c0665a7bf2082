//! Tests of the PaRiS machines on the kit's in-memory network: remote reads of a
//! partition the DC does not store, the client cache (read-your-writes before the UST
//! covers a write, pruning after), the UST as a minimum over every DC that freezes while
//! a DC is cut off, Lemma 1 / Proposition 1 on commit times, BPR's blocking reads, and
//! recovery from the records.

use super::{Bpr, Config, Paris};
use crate::kit::testnet::{TestNet, MS};
use crate::params::{NodeConfig, Params};
use crate::registry::Protocol;
use causeway_core::crdt::{ObjType, Update};
use causeway_core::{
    Addr, DcId, Key, NodeId, ObjValue, PartitionId, Request, Response, ServerNode, Topology,
};

const T: u64 = 1_000_000_000;

/// 3 DCs, one node each, 3 partitions, each stored in 2 DCs.
fn topo() -> Topology {
    Topology::partial(3, 1, 3, 2)
}

fn params(mutation: Option<&str>) -> Params {
    Params {
        mutation: mutation.map(str::to_string),
        ..Params::default()
    }
}

fn net<P: Protocol>(mutation: Option<&str>) -> TestNet<P> {
    let mut n = TestNet::new(topo(), params(mutation), T);
    n.run(50); // a few stabilization rounds: the UST leaves 0
    n
}

/// A key whose partition DC `dc` does not store.
fn key_not_in(topo: &Topology, dc: u16) -> Key {
    (0..100)
        .map(|i| Key::new(format!("k{i}")))
        .find(|k| !topo.replicates(DcId(dc), topo.partition_of(k)))
        .expect("some key lives elsewhere")
}

fn write<P: Protocol>(net: &mut TestNet<P>, s: u64, key: &Key, v: &str) {
    let update = Update::Assign(v.as_bytes().to_vec());
    let resp = net.txn(
        s,
        vec![Request::Update {
            key: key.clone(),
            update,
        }],
    );
    assert_eq!(resp.last(), Some(&Response::Committed), "{resp:?}");
}

fn read<P: Protocol>(net: &mut TestNet<P>, s: u64, key: &Key) -> ObjValue {
    let keys = vec![(key.clone(), ObjType::Lww)];
    let resp = net.txn(s, vec![Request::Read { keys }]);
    match &resp[1] {
        Response::Values(v) => v[0].value.clone(),
        other => panic!("read answered {other:?}"),
    }
}

fn lww(v: &str) -> ObjValue {
    ObjValue::Lww(Some(v.as_bytes().to_vec()))
}

fn ust_of(net: &TestNet<Paris>, n: usize) -> u64 {
    net.nodes[n].ust
}

fn cache_len(net: &TestNet<Paris>, s: u64) -> usize {
    net.sessions[&s].client.cache_len()
}

/// Holds every message to or from DC 2 (a cut, as in §III-C).
fn cut_dc2(topo: &Topology, from: Addr, to: Addr, _: &super::Msg) -> bool {
    let dc = |a: Addr| match a {
        Addr::Node(n) => Some(topo.dc_of(n)),
        Addr::Client(_) => None,
    };
    dc(from) == Some(DcId(2)) || dc(to) == Some(DcId(2))
}

#[test]
fn a_remote_partition_is_read_at_its_replica_and_own_writes_come_from_the_cache() {
    let mut net = net::<Paris>(None);
    let key = key_not_in(&net.topo, 0);
    net.session(1, 0);
    net.session(2, 1);
    write(&mut net, 1, &key, "mine");
    // Committed at a replica in another DC; the UST cannot cover it yet (nothing ran).
    assert_eq!(
        cache_len(&net, 1),
        1,
        "the write waits in the client's cache"
    );
    assert_eq!(read(&mut net, 1, &key), lww("mine"), "read-your-writes");
    net.run(100);
    assert_eq!(read(&mut net, 1, &key), lww("mine"));
    assert_eq!(cache_len(&net, 1), 0, "pruned once the UST passed it");
    assert_eq!(
        read(&mut net, 2, &key),
        lww("mine"),
        "visible in another DC"
    );
    net.check_invariants().expect("invariants");
}

/// A key whose only write is in the client's cache refuses a read as another type, as
/// the store refuses one (`WRONGTYPE` naming the key's type), and the txn goes on.
#[test]
fn a_cached_write_of_another_type_refuses_the_read_as_the_store_does() {
    let mut net = net::<Paris>(None);
    let key = key_not_in(&net.topo, 0);
    net.session(1, 0);
    let add = Request::Update {
        key: key.clone(),
        update: Update::Add(b"m".to_vec()),
    };
    assert_eq!(net.txn(1, vec![add]).last(), Some(&Response::Committed));
    assert_eq!(cache_len(&net, 1), 1, "the add waits in the client's cache");
    let as_string = Request::Read {
        keys: vec![(key.clone(), ObjType::Lww)],
    };
    let as_set = Request::Read {
        keys: vec![(key.clone(), ObjType::Set)],
    };
    let resp = net.txn(1, vec![as_string, as_set]);
    let wrong = causeway_core::Error::WrongType {
        expected: ObjType::Set,
        found: ObjType::Lww,
    };
    assert_eq!(resp[1], Response::Error(wrong), "{resp:?}");
    let Response::Values(values) = &resp[2] else {
        panic!("the txn stays open and reads the set: {resp:?}");
    };
    assert_eq!(values[0].value, ObjValue::Set(vec![b"m".to_vec()]));
}

#[test]
fn without_the_client_cache_a_fresh_write_is_missed() {
    let mut net = net::<Paris>(Some("no-client-cache"));
    let key = key_not_in(&net.topo, 0);
    net.session(1, 0);
    write(&mut net, 1, &key, "mine");
    assert_eq!(
        read(&mut net, 1, &key),
        ObjValue::Lww(None),
        "read-your-writes broken"
    );
}

#[test]
fn the_ust_is_a_minimum_over_every_dc_and_freezes_while_one_is_cut_off() {
    let mut net = net::<Paris>(None);
    let before = ust_of(&net, 0);
    assert!(before > T, "the UST follows the clocks: {before}");
    net.hold = cut_dc2;
    net.run(20); // in-flight reports drain
    let frozen = ust_of(&net, 0);
    net.run(200);
    assert_eq!(ust_of(&net, 0), frozen, "frozen while DC 2 is unreachable");
    // Transactions still run (on the frozen snapshot); the cache keeps own writes.
    let key = key_not_in(&net.topo, 2);
    net.session(1, 0);
    write(&mut net, 1, &key, "during");
    net.run(50);
    assert_eq!(read(&mut net, 1, &key), lww("during"));
    assert_eq!(
        cache_len(&net, 1),
        1,
        "not prunable while the UST is frozen"
    );
    net.release();
    net.run(100);
    assert!(
        ust_of(&net, 0) > frozen + 100 * MS,
        "the UST moves again after healing"
    );
    assert_eq!(read(&mut net, 1, &key), lww("during"));
    assert_eq!(cache_len(&net, 1), 0);
    net.check_invariants().expect("invariants");
}

#[test]
fn commit_times_grow_along_a_session_and_exceed_the_snapshot() {
    let mut net = net::<Paris>(None);
    net.session(1, 0);
    let key = key_not_in(&net.topo, 0);
    let mut last = 0;
    for i in 0..5 {
        write(&mut net, 1, &key, &format!("v{i}"));
        let hwt = net.sessions[&1].client.hwt;
        assert!(hwt > last, "Proposition 1: {hwt} after {last}");
        assert!(hwt > net.sessions[&1].client.ust, "Lemma 1");
        last = hwt;
    }
    net.run(100);
    assert_eq!(read(&mut net, 1, &key), lww("v4"), "the last write wins");
}

#[test]
fn bpr_reads_block_until_every_replica_applied_the_snapshot() {
    let mut net = net::<Bpr>(None);
    let key = key_not_in(&net.topo, 0);
    net.session(1, 0);
    write(&mut net, 1, &key, "x");
    // Cut DC 2: a partition stored in DC 2 and another DC stops hearing its sibling's
    // heartbeats there, so a read at a fresh snapshot blocks where DC 2 is a replica.
    let p = net.topo.partition_of(&key);
    let replica = super::target_dc(&net.topo, DcId(0), p);
    assert!(net.topo.replicas_of(p).contains(&DcId(2)) || replica != DcId(2));
    net.hold = cut_dc2;
    net.run(10);
    let begin = Request::Begin {
        kind: causeway_core::TxnKind::Causal,
        label: None,
    };
    assert!(matches!(net.request(1, begin), Response::Begun { .. }));
    let keys = vec![(key.clone(), ObjType::Lww)];
    net.session_call(1, |m, ctx| {
        causeway_core::ClientSession::submit(m, ctx, Request::Read { keys })
    });
    net.run(100);
    let blocked = net.replies.get(&1).is_none_or(|q| q.is_empty());
    let both_replicas_reachable = !net.topo.replicas_of(p).contains(&DcId(2));
    assert!(
        blocked || both_replicas_reachable,
        "the read must block while cut"
    );
    net.release();
    net.run(100);
    let r = net.replies.get_mut(&1).and_then(|q| q.pop_front());
    match r {
        Some(Response::Values(v)) => assert_eq!(v[0].value, lww("x")),
        other => panic!("read answered {other:?}"),
    }
}

#[test]
fn a_node_recovers_its_partitions_from_its_records() {
    let mut net = net::<Paris>(None);
    let key = key_not_in(&net.topo, 0);
    net.session(1, 0);
    write(&mut net, 1, &key, "durable");
    net.run(50);
    net.session(3, 1);
    assert_eq!(read(&mut net, 3, &key), lww("durable"), "before the crash");
    let p: PartitionId = net.topo.partition_of(&key);
    let n = net.topo.node_of(super::target_dc(&net.topo, DcId(0), p), p);
    let idx = n.0 as usize;
    let config = NodeConfig::new(NodeId(n.0), net.topo.clone(), params(None));
    let node = Paris::recover(&config, &Config::default(), &net.records[idx]).expect("recovers");
    net.nodes[idx] = node;
    net.node_call(idx, |m, ctx| m.start(ctx));
    net.run(100);
    net.session(2, 1);
    assert_eq!(read(&mut net, 2, &key), lww("durable"));
    net.check_invariants().expect("invariants");
}

/// Heartbeats write no record, so a node restarted from its records has its remote `VV`
/// entries back at the streams' last txns, below the UST; the UST it is handed raises them
/// and the stream marks to it (every txn below the UST is durable there), so the UST stays
/// at or below what its partitions installed.
#[test]
fn a_restarted_node_raises_its_remote_vv_to_the_ust_it_adopts() {
    let mut net = net::<Paris>(None);
    net.run(100);
    let config = NodeConfig::new(NodeId(0), net.topo.clone(), params(None));
    let node = Paris::recover(&config, &Config::default(), &net.records[0]).expect("recovers");
    net.nodes[0] = node;
    let ust = T + 10 * MS;
    let remote_min = |net: &TestNet<Paris>| {
        let n = &net.nodes[0];
        let remote = n.parts.values().flat_map(|p| {
            let me = p.me;
            let r = p.replicas.iter().filter(move |r| **r != me);
            r.map(|r| (p.vv.get(usize::from(r.0)), p.received.have(*r)))
        });
        remote.fold((u64::MAX, u64::MAX), |(a, b), (v, h)| (a.min(v), b.min(h)))
    };
    assert!(remote_min(&net).0 < ust, "no heartbeat mark was recovered");
    net.node_call(0, |m, ctx| {
        m.start(ctx);
        let msg = super::msg::Msg::Ust { ust, gc: 0 };
        m.handle_message(ctx, Addr::Node(NodeId(0)), msg);
    });
    assert_eq!(net.nodes[0].ust, ust);
    let (vv, have) = remote_min(&net);
    assert!(vv >= ust && have >= ust, "VV {vv}, stream mark {have}");
    assert_eq!(net.nodes[0].check_invariants(), Ok(()));
}

/// Every hosted key's value at the end of time, with `Committed` applied first (a replay
/// leaves its own commits there until the first `apply_upto`).
fn values_at_end(node: &mut super::node::Node, keys: &[Key]) -> Vec<String> {
    let mut out = Vec::new();
    for part in node.parts.values_mut() {
        let last = part.committed.keys().map(|(ct, _)| *ct).max().unwrap_or(0);
        part.apply_upto(last, 0);
    }
    for k in keys {
        for part in node.parts.values() {
            if let Ok(o) = part.store.read(k, &u64::MAX, ObjType::Lww) {
                out.push(format!("{k:?}={:?}", o.value()));
            }
        }
    }
    out
}

#[test]
fn a_checkpoint_plus_the_later_records_recovers_what_a_full_replay_does() {
    let mut net = net::<Paris>(None);
    let keys: Vec<Key> = (0..24).map(|i| Key::new(format!("k{i}"))).collect();
    net.session(1, 0);
    net.session(2, 1);
    for (i, k) in keys.iter().enumerate() {
        write(&mut net, 1 + (i as u64 % 2), k, &format!("a{i}"));
    }
    net.run(100);
    let ck = net.nodes[0].checkpoint().expect("quiescent after run");
    let covered = net.records[0].len();
    for (i, k) in keys.iter().enumerate().step_by(3) {
        write(&mut net, 2 - (i as u64 % 2), k, &format!("b{i}"));
    }
    net.run(100);
    let mut compacted = vec![ck];
    compacted.extend_from_slice(&net.records[0][covered..]);
    let config = NodeConfig::new(NodeId(0), net.topo.clone(), params(None));
    let recover = |records: &[Vec<u8>]| {
        Paris::recover(&config, &Config::default(), records).expect("recovers")
    };
    let (mut full, mut from_ck) = (recover(&net.records[0]), recover(&compacted));
    // Heartbeats write no record, so the records alone recover each stream's mark at its
    // last txn; the checkpoint also holds the heartbeats' marks of its time: at least as far.
    for (p, part) in &full.parts {
        let other = &from_ck.parts[p];
        for k in [1, 2] {
            let origin = causeway_core::DcId(k as u16);
            let (have, ck_have) = (part.received.have(origin), other.received.have(origin));
            assert!(ck_have >= have, "{p:?} stream {k}: {ck_have} < {have}");
            assert!(other.vv.get(k) >= part.vv.get(k), "{p:?} VV[{k}]");
        }
        assert_eq!(part.prepared.len(), other.prepared.len(), "{p:?}");
    }
    assert!(from_ck.check_invariants().is_ok());
    let values = values_at_end(&mut full, &keys);
    assert!(
        values.len() >= keys.len() / 2,
        "node 0 hosts most keys: {values:?}"
    );
    assert_eq!(values, values_at_end(&mut from_ck, &keys));
    assert!(compacted.len() < net.records[0].len() / 2, "it compacts");
}

/// State transfer (transfer.rs): two DCs storing every partition, both writing, cut from
/// each other past the silent-sibling horizon with no log kept for a silent sibling, then
/// healed with what was in flight lost. They converge with every increment counted once,
/// a restart replays the transfer's records into the same state, and without the
/// transfer (the `no-state-transfer` mutation) they stay diverged.
#[test]
fn a_replica_back_after_its_log_was_dropped_converges_by_state_transfer() {
    let (net, cfg) = run_long_outage(None);
    let (at0, at1) = (outage_values(&net.nodes[0]), outage_values(&net.nodes[1]));
    assert_eq!(at0, at1, "the DCs converge");
    assert!(
        at0[0].contains(&format!("{:?}", ObjValue::Counter(1000 + 20 + 2000))),
        "every increment counted once: {}",
        at0[0]
    );
    net.check_invariants().expect("invariants");
    for n in 0..2u32 {
        let config = NodeConfig::new(NodeId(n), net.topo.clone(), params(None));
        let mut again = <Paris as Protocol>::recover(&config, &cfg, &net.records[n as usize])
            .expect("recovers");
        // Own txns committed before the restart apply once the node runs.
        let mut ctx = causeway_core::Ctx::new(causeway_core::TrueTime(net.clock), net.clock);
        again.start(&mut ctx);
        assert_eq!(outage_values(&again), at0, "node {n} after a restart");
    }
    let (net, _) = run_long_outage(Some("no-state-transfer"));
    let (at0, at1) = (outage_values(&net.nodes[0]), outage_values(&net.nodes[1]));
    assert_ne!(at0, at1, "without the transfer they stay diverged");
}

/// The outage of the test above: two DCs increment a counter and write registers apart
/// past the silent-sibling horizon, then heal with what was in flight lost.
fn run_long_outage(mutation: Option<&str>) -> (TestNet<Paris>, Config) {
    let cfg = Config {
        silent_sibling_ns: 100 * MS,
        silent_sibling_log_max: 0,
        transfer_retry_ns: 200 * MS,
        ..Config::default()
    };
    let topo = Topology::partial(2, 1, 2, 2);
    let mut net: TestNet<Paris> = TestNet::with_config(topo, params(mutation), &cfg, T);
    net.run(50);
    net.session(1, 0);
    net.session(2, 1);
    let counter = Key::from("count");
    let incr = |by| Request::Update {
        key: counter.clone(),
        update: Update::Increment(by),
    };
    net.txn(1, vec![incr(1000)]);
    net.run(100);
    net.hold = |topo, from, to, _| match (from, to) {
        (Addr::Node(a), Addr::Node(b)) => topo.dc_of(a) != topo.dc_of(b),
        _ => false,
    };
    for i in 0..20 {
        net.txn(1, vec![incr(1)]);
        let key = Key::new(format!("r{}", i % 5));
        write(&mut net, 2, &key, &format!("dc1-{i}"));
        net.txn(2, vec![incr(100)]);
        net.run(20);
    }
    net.run(400);
    net.drop_held();
    net.run(2000);
    (net, cfg)
}

/// The counter and the five registers of the outage test, as `node` reads them.
fn outage_values(node: &super::node::Node) -> Vec<String> {
    let mut keys = vec![(Key::from("count"), ObjType::Counter)];
    keys.extend((0..5).map(|i| (Key::new(format!("r{i}")), ObjType::Lww)));
    keys.iter()
        .map(|(k, t)| {
            let part = &node.parts[&node.topo.partition_of(k)];
            let got = part.read(u64::MAX, &[(k.clone(), *t)]);
            format!("{k:?} = {:?}", got[0].1.as_ref().map(|o| o.value()))
        })
        .collect()
}

/// The records of node `n`, by variant name.
fn record_kinds(net: &TestNet<Paris>, n: usize) -> Vec<&'static str> {
    use super::msg::Record;
    let kind = |r: Record| match r {
        Record::Prepare { .. } => "Prepare",
        Record::Commit { .. } => "Commit",
        Record::Decision { .. } => "Decision",
        Record::Ended { .. } => "Ended",
        Record::OnePhase { .. } => "OnePhase",
        _ => "other",
    };
    let records = net.records[n].iter().enumerate();
    let decoded = records.map(|(i, b)| kind(Record::decode(i, b).expect("decodes")));
    decoded.filter(|k| *k != "other").collect()
}

/// A txn that writes one partition commits there alone: one `OnePhase` record at its
/// replica, no decision at the coordinator (here on another node, in another DC), and a
/// restart from that record alone brings the write back. With `one_phase` off, the same
/// txn runs 2PC: a prepare and a commit record there, a decision and its end here.
#[test]
fn a_txn_writing_one_partition_commits_at_its_replica_with_one_record() {
    for one_phase in [true, false] {
        let cfg = Config {
            one_phase,
            ..Config::default()
        };
        let mut net = TestNet::<Paris>::with_config(topo(), params(None), &cfg, T);
        net.run(50);
        let key = key_not_in(&net.topo, 0);
        let p: PartitionId = net.topo.partition_of(&key);
        let replica = net.topo.node_of(super::target_dc(&net.topo, DcId(0), p), p);
        let idx = replica.0 as usize;
        assert_ne!(idx, 0, "the coordinator is node 0, the replica another");
        net.session(1, 0);
        write(&mut net, 1, &key, "one");
        net.run(50);
        let (here, there) = (record_kinds(&net, 0), record_kinds(&net, idx));
        match one_phase {
            true => {
                assert_eq!(there, ["OnePhase"], "at the replica");
                assert!(here.is_empty(), "no decision: {here:?}");
            }
            false => {
                assert_eq!(there, ["Prepare", "Commit"], "at the replica");
                assert_eq!(here, ["Decision", "Ended"], "at the coordinator");
            }
        }
        let config = NodeConfig::new(replica, net.topo.clone(), params(None));
        net.nodes[idx] = Paris::recover(&config, &cfg, &net.records[idx]).expect("recovers");
        net.node_call(idx, |m, ctx| m.start(ctx));
        net.run(100);
        net.session(2, 1);
        assert_eq!(read(&mut net, 2, &key), lww("one"), "one_phase {one_phase}");
        net.check_invariants().expect("invariants");
    }
}

/// A network whose nodes run `cfg`, past a few stabilization rounds.
fn net_with(cfg: &Config) -> TestNet<Paris> {
    let mut net = TestNet::<Paris>::with_config(topo(), params(None), cfg, T);
    net.run(50);
    net
}

/// A net whose coordinators give up after 100 ms, with session 1 at DC 0 and a key DC 0
/// does not store (its txns need another DC's replica).
fn net_giving_up_soon() -> (TestNet<Paris>, Key) {
    let cfg = Config {
        prepare_timeout_ns: 100 * MS,
        ..Config::default()
    };
    let mut net = net_with(&cfg);
    let key = key_not_in(&net.topo, 0);
    net.session(1, 0);
    (net, key)
}

/// BEGIN of a causal txn at session `s`, answered.
fn begin(net: &mut TestNet<Paris>, s: u64) {
    let begin = Request::Begin {
        kind: causeway_core::TxnKind::Causal,
        label: None,
    };
    assert!(matches!(net.request(s, begin), Response::Begun { .. }));
}

/// Holds every vote (a slow link from the replicas to the coordinators).
fn hold_votes(_: &Topology, _: Addr, _: Addr, m: &super::Msg) -> bool {
    matches!(m, super::Msg::Prepared { .. })
}

/// A one-phase txn commits at its replica whatever its coordinator does, so a
/// coordinator whose vote came late tells the client the outcome is unknown, not that it
/// aborted; the write is there once the vote's link heals.
#[test]
fn a_late_one_phase_vote_is_an_unknown_outcome_and_the_write_stays() {
    let (mut net, key) = net_giving_up_soon();
    net.hold = hold_votes;
    let update = Update::Assign(b"late".to_vec());
    let resp = net.txn(
        1,
        vec![Request::Update {
            key: key.clone(),
            update,
        }],
    );
    match resp.last() {
        Some(Response::Error(causeway_core::Error::Unavailable(why))) => {
            assert!(why.contains("outcome unknown"), "{why}")
        }
        other => panic!("a late one-phase vote answered {other:?}"),
    }
    net.release();
    net.run(100);
    net.session(2, 1);
    assert_eq!(read(&mut net, 2, &key), lww("late"));
    net.check_invariants().expect("invariants");
}

fn hold_slices(_: &Topology, _: Addr, _: Addr, m: &super::Msg) -> bool {
    matches!(m, super::Msg::ReadSlice { .. })
}

/// A read whose slice never comes back (its replica crashed) ends with an abort after the
/// prepare timeout, and its txn's snapshot stops holding the GC point back.
#[test]
fn a_read_whose_slice_never_returns_aborts_and_frees_its_snapshot() {
    let (mut net, key) = net_giving_up_soon();
    net.hold = hold_slices;
    begin(&mut net, 1);
    let read = Request::Read {
        keys: vec![(key, ObjType::Lww)],
    };
    net.session_call(1, |m, ctx| {
        causeway_core::ClientSession::submit(m, ctx, read)
    });
    net.run(10);
    assert!(
        net.nodes[0].coord.oldest().is_some(),
        "the reading txn holds a snapshot"
    );
    net.run(200);
    let answer = net.replies.get_mut(&1).and_then(|q| q.pop_front());
    match answer {
        Some(Response::Aborted { reason }) => {
            assert!(reason.contains("read timed out"), "{reason}")
        }
        other => panic!("a read with a lost slice answered {other:?}"),
    }
    assert_eq!(net.nodes[0].coord.oldest(), None, "its snapshot is free");
    net.check_invariants().expect("invariants");
}

fn hold_prepares(_: &Topology, _: Addr, _: Addr, m: &super::Msg) -> bool {
    matches!(m, super::Msg::Prepare { .. })
}

fn hold_nothing(_: &Topology, _: Addr, _: Addr, _: &super::Msg) -> bool {
    false
}

/// A PREPARE lost on the way (as to a participant that crashed before its record was
/// durable) is sent again after the inquiry interval, so the txn commits then instead of
/// aborting at the prepare timeout while it holds the other participant's `VV` back.
#[test]
fn a_lost_prepare_is_sent_again_and_the_txn_commits() {
    let cfg = Config {
        inquire_after_ns: 50 * MS,
        ..Config::default()
    };
    let mut net = net_with(&cfg);
    let a = Key::from("a");
    let b = (0..100)
        .map(|i| Key::new(format!("b{i}")))
        .find(|k| net.topo.partition_of(k) != net.topo.partition_of(&a))
        .expect("another partition");
    net.session(1, 0);
    begin(&mut net, 1);
    for k in [&a, &b] {
        let update = Update::Assign(b"x".to_vec());
        let key = k.clone();
        let r = net.request(1, Request::Update { key, update });
        assert!(matches!(r, Response::Updated { .. }), "{r:?}");
    }
    net.hold = hold_prepares;
    net.session_call(1, |m, ctx| {
        causeway_core::ClientSession::submit(m, ctx, Request::Commit)
    });
    net.run(5);
    net.drop_held();
    net.hold = hold_nothing;
    net.run(200);
    let answer = net.replies.get_mut(&1).and_then(|q| q.pop_front());
    assert_eq!(
        answer,
        Some(Response::Committed),
        "well before the 3 s timeout"
    );
    net.session(2, 1);
    net.run(100);
    assert_eq!(read(&mut net, 2, &a), lww("x"));
    assert_eq!(read(&mut net, 2, &b), lww("x"));
    net.check_invariants().expect("invariants");
}

/// A read that names a key twice gets its value twice, in the request's order, and the
/// txn goes on (it used to abort as "unknown at its coordinator": the reply kept one
/// object per key; `causeway load` merges consecutive reads and hit it on 3.5% of YCSB-A
/// txns over 500 Zipf keys).
#[test]
fn a_key_read_twice_in_one_request_answers_twice_and_the_txn_commits() {
    let mut net = net::<Paris>(None);
    let (a, b) = (Key::new("a"), key_not_in(&net.topo, 0));
    net.session(1, 0);
    write(&mut net, 1, &a, "x");
    write(&mut net, 1, &b, "y");
    let keys = [&a, &b, &a]
        .iter()
        .map(|k| ((*k).clone(), ObjType::Lww))
        .collect();
    let resp = net.txn(1, vec![Request::Read { keys }]);
    let Response::Values(v) = &resp[1] else {
        panic!("read answered {resp:?}");
    };
    let got: Vec<(&Key, &ObjValue)> = v.iter().map(|r| (&r.key, &r.value)).collect();
    assert_eq!(got, vec![(&a, &lww("x")), (&b, &lww("y")), (&a, &lww("x"))]);
    assert_eq!(resp.last(), Some(&Response::Committed), "{resp:?}");
}

fn hold_slice_replies(_: &Topology, _: Addr, _: Addr, m: &super::Msg) -> bool {
    matches!(m, super::Msg::ReadSliceReply { .. })
}

/// A slice's reply that reaches the coordinator's next incarnation answers no read there:
/// reads are named by txn and request (`kit::txn::ReadId`), where a counter the restart
/// set back took the stale reply, read at the old snapshot, as the answer to the new
/// incarnation's first read (as in Cure, `cure::tests`).
#[test]
fn a_slice_reply_meant_for_a_crashed_coordinator_answers_nothing_after_its_restart() {
    let mut net = net::<Paris>(None);
    let key = key_not_in(&net.topo, 0);
    let read_key = Request::Read {
        keys: vec![(key.clone(), ObjType::Lww)],
    };
    net.session(1, 0);
    net.hold = hold_slice_replies;
    begin(&mut net, 1);
    let first = read_key.clone();
    net.session_call(1, |m, ctx| {
        causeway_core::ClientSession::submit(m, ctx, first)
    });
    net.deliver_all();
    // DC 0's node, the coordinator, restarts; then DC 1 writes the key.
    let config = NodeConfig::new(NodeId(0), net.topo.clone(), params(None));
    net.nodes[0] = Paris::recover(&config, &Config::default(), &net.records[0]).expect("recovers");
    net.node_call(0, |m, ctx| m.start(ctx));
    net.run(100);
    net.session(3, 1);
    write(&mut net, 3, &key, "w");
    net.run(200); // the UST covers the write
    net.session(2, 0);
    begin(&mut net, 2);
    net.session_call(2, |m, ctx| {
        causeway_core::ClientSession::submit(m, ctx, read_key)
    });
    net.deliver_all();
    net.release(); // the old reply first
    net.run(100);
    match net.take_reply(2) {
        Some(Response::Values(v)) => assert_eq!(v[0].value, lww("w")),
        other => panic!("the read answered {other:?}"),
    }
    net.check_invariants().expect("invariants");
}

/// Each flavor's mutations parse to their own flag alone, and the node and session refuse
/// a name the flavor does not run, listing those it does (PaRiS once took any unknown
/// name for none).
#[test]
fn mutations_parse_to_one_flag_and_unknown_ones_are_refused() {
    use super::{Flavor, Mutation, Nocc, BPR_MUTATIONS, MUTATIONS};
    use crate::mutation::{assert_constructors_refuse, assert_parses};
    let all = [MUTATIONS, BPR_MUTATIONS].concat();
    assert_parses(&all, |n| Mutation::parse(n).map(|m| m.active()));
    for flavor in [Flavor::Paris, Flavor::Bpr, Flavor::Nocc] {
        assert_parses(flavor.mutations(), |n| {
            flavor.mutation(n).map(|m| m.active())
        });
    }
    assert!(Flavor::Paris.mutation(Some("no-read-block")).is_err());
    assert_constructors_refuse::<Paris>(topo());
    assert_constructors_refuse::<Bpr>(topo());
    assert_constructors_refuse::<Nocc>(topo());
}
