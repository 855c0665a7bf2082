//! Final reads under partial replication: each surviving DC reads the keys of the
//! partitions it replicates, convergence and liveness judge each key at the DCs that read
//! it, and keys no surviving DC replicates are counted and left out. Full replication is
//! unchanged: every survivor reads every key, in the same order.

use causeway_check::{FinalRead, HOp, History, Outcome, TxnRecord};
use causeway_core::{
    DcId, Key, ObjType, ObjValue, OpId, PartitionId, SessionId, Topology, TxnId, TxnKind, Update,
};
use causeway_sim::liveness::{check_final_state, final_read_keys, FinalStateRules};
use causeway_sim::workload::Workload;

fn keys(n: u32, obj: ObjType) -> Vec<(Key, ObjType)> {
    (0..n).map(|i| (Workload::key(i), obj)).collect()
}

#[test]
fn full_replication_reads_every_key_everywhere_in_order() {
    let t = Topology::full(3, 2, 4);
    let all = keys(40, ObjType::Lww);
    let split = final_read_keys(&t, &all, &[0, 2]);
    assert_eq!(split.unreplicated, 0);
    assert_eq!(split.by_dc.keys().copied().collect::<Vec<_>>(), vec![0, 2]);
    assert!(split.by_dc.values().all(|ks| *ks == all));
}

#[test]
fn each_survivor_reads_exactly_the_keys_it_replicates() {
    let t = Topology::partial(5, 2, 10, 2);
    let all = keys(200, ObjType::Counter);
    let survivors: Vec<u16> = (0..5).collect();
    let split = final_read_keys(&t, &all, &survivors);
    assert_eq!(split.unreplicated, 0);
    for (dc, ks) in &split.by_dc {
        let expected: Vec<_> = all
            .iter()
            .filter(|(k, _)| t.replicates(DcId(*dc), t.partition_of(k)))
            .cloned()
            .collect();
        assert_eq!(*ks, expected, "DC {dc}");
        assert!(!ks.is_empty() && ks.len() < all.len(), "DC {dc}");
    }
    // Every key is read at exactly its 2 replicas.
    let reads: usize = split.by_dc.values().map(Vec::len).sum();
    assert_eq!(reads, 2 * all.len());
}

#[test]
fn keys_whose_replicas_all_failed_are_counted_not_read() {
    // Factor 1: partition p lives only in DC p % 3. DC 2 failed.
    let t = Topology::partial(3, 1, 3, 1);
    let all = keys(90, ObjType::Set);
    let on_2 = all
        .iter()
        .filter(|(k, _)| t.partition_of(k) == PartitionId(2))
        .count();
    assert!(on_2 > 0);
    let split = final_read_keys(&t, &all, &[0, 1]);
    assert_eq!(split.unreplicated, on_2);
    let read: usize = split.by_dc.values().map(Vec::len).sum();
    assert_eq!(read + on_2, all.len());
}

fn oid(session: u64, seq: u64) -> OpId {
    OpId {
        txn: TxnId {
            session: SessionId(session),
            seq,
        },
        index: 0,
    }
}

fn counter(dc: u16, key: &Key, value: i64) -> FinalRead {
    FinalRead {
        dc: DcId(dc),
        key: key.clone(),
        obj: ObjType::Counter,
        value: ObjValue::Counter(value),
        observed: Vec::new(),
    }
}

/// A committed increment must show at every replica that read the key; DCs that do not
/// replicate it read nothing and are asked nothing.
#[test]
fn liveness_judges_a_key_at_the_replicas_that_read_it() {
    let t = Topology::partial(3, 1, 3, 2);
    let key = Workload::key(0);
    let replicas = t.replicas_of(t.partition_of(&key));
    let other = t
        .all_dcs()
        .find(|d| !replicas.contains(d))
        .expect("R < dcs");
    let txn = TxnRecord {
        id: oid(1, 1).txn,
        session: SessionId(1),
        // Written by a client of a DC that does not store the key (a remote write).
        dc: other,
        kind: TxnKind::Causal,
        label: None,
        start_ns: 0,
        end_ns: 5,
        ops: vec![HOp::Write {
            key: key.clone(),
            update: Update::Increment(3),
            id: oid(1, 1),
        }],
        outcome: Outcome::Committed,
    };
    let split = final_read_keys(&t, &[(key.clone(), ObjType::Counter)], &[0, 1, 2]);
    let readers: Vec<u16> = split
        .by_dc
        .iter()
        .filter(|(_, ks)| !ks.is_empty())
        .map(|(d, _)| *d)
        .collect();
    assert_eq!(readers, replicas.iter().map(|d| d.0).collect::<Vec<_>>());
    let mut h = History {
        txns: vec![txn],
        finals: readers.iter().map(|d| counter(*d, &key, 3)).collect(),
        ..History::default()
    };
    check_final_state(&h, &FinalStateRules::default()).expect("both replicas count it");
    h.finals[1] = counter(readers[1], &key, 0);
    let e = check_final_state(&h, &FinalStateRules::default()).expect_err("a replica lost it");
    assert!(e.contains(&format!("at DC {}", readers[1])), "{e}");
}
