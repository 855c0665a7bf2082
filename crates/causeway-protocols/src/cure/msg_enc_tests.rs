//! Tests of `msg_enc.rs`: the hand-written encoding of a peer command's messages gives
//! exactly postcard's bytes, alone and under each registry variant that carries them.

use super::msg::{First, Msg};
use super::msg_enc::encode_into;
use causeway_core::clock::Extra;
use causeway_core::crdt::{ObjType, Update};
use causeway_core::{Error, ReadValue, TxnId, Vc};
use causeway_core::{Key, ObjValue, OpId, SessionId, TxnKind};

fn id(session: u64, seq: u64) -> TxnId {
    TxnId {
        session: SessionId(session),
        seq,
    }
}

fn op(session: u64, index: u32) -> OpId {
    OpId {
        txn: id(session, session / 3),
        index,
    }
}

fn vcs() -> Vec<Vc> {
    vec![
        Vc::zero(0),
        Vc {
            dcs: vec![0, 127, 128, u64::MAX],
            extra: vec![(Extra::Strong, 1 << 40)],
        },
    ]
}

fn updates() -> Vec<(Key, Update, OpId)> {
    let long = vec![0xff; 200];
    vec![
        (Key(b"k".to_vec()), Update::Assign(Vec::new()), op(1, 0)),
        (Key(long.clone()), Update::Assign(long.clone()), op(128, 1)),
        (
            Key(Vec::new()),
            Update::Increment(i64::MIN),
            op(u64::MAX, 2),
        ),
        (
            Key(b"s".to_vec()),
            Update::Add(b"m".to_vec()),
            op(7, u32::MAX),
        ),
        (Key(b"s".to_vec()), Update::Remove(long.clone()), op(7, 4)),
        (Key(b"r".to_vec()), Update::MvAssign(long), op(9, 5)),
    ]
}

fn keys() -> Vec<(Key, ObjType)> {
    [ObjType::Lww, ObjType::Counter, ObjType::Set, ObjType::MvReg]
        .into_iter()
        .enumerate()
        .map(|(i, t)| (Key(vec![b'k'; i * 70]), t))
        .collect()
}

fn values() -> Vec<ReadValue> {
    let objects = [
        ObjValue::Lww(None),
        ObjValue::Lww(Some(vec![1; 130])),
        ObjValue::Counter(-1),
        ObjValue::Counter(i64::MAX),
        ObjValue::Set(Vec::new()),
        ObjValue::Set(vec![b"a".to_vec(), vec![2; 300]]),
        ObjValue::MvReg(vec![Vec::new()]),
    ];
    objects
        .into_iter()
        .enumerate()
        .map(|(i, value)| ReadValue {
            key: Key(vec![b'v'; i]),
            value,
            observed: (0..i as u32).map(|j| op(j.into(), j)).collect(),
        })
        .collect()
}

fn firsts() -> Vec<First> {
    vec![
        First::Read {
            req: 0,
            keys: keys(),
            updates: Vec::new(),
        },
        First::Read {
            req: 300,
            keys: Vec::new(),
            updates: updates(),
        },
        First::Commit {
            req: u64::MAX,
            updates: updates(),
        },
        First::ReadCommit {
            req: 1,
            keys: keys(),
            updates: updates(),
            then: updates()[2..].to_vec(),
        },
    ]
}

/// Every message this module writes, in every shape of its fields.
fn messages() -> Vec<Msg> {
    let mut msgs = Vec::new();
    let errors = [
        Error::Aborted("prepare timed out".into()),
        Error::Unavailable("a partition is down".into()),
    ];
    for (i, first) in firsts().into_iter().enumerate() {
        let label = [None, Some("storeBid".to_string()), Some(String::new())][i % 3].clone();
        for (cvc, kind) in vcs().into_iter().zip([TxnKind::Causal, TxnKind::Strong]) {
            msgs.push(Msg::StartWith {
                txn: id(i as u64 * 1000, 5),
                kind,
                label: label.clone(),
                cvc,
                first: first.clone(),
                observed: i % 2 == 0,
            });
        }
    }
    for svc in vcs() {
        let txn = id(3, 1 << 35);
        let read = (values(), svc.clone());
        msgs.push(Msg::ReadResult {
            txn,
            req: 2,
            result: Ok(read.clone()),
        });
        msgs.push(Msg::CommitResult {
            txn,
            req: 128,
            result: Ok(svc.clone()),
        });
        msgs.push(Msg::ReadCommitResult {
            txn,
            req: 3,
            read: read.clone(),
            commit: Ok(svc),
        });
        for e in &errors {
            msgs.push(Msg::ReadResult {
                txn,
                req: 4,
                result: Err(e.clone()),
            });
            msgs.push(Msg::CommitResult {
                txn,
                req: 5,
                result: Err(e.clone()),
            });
            msgs.push(Msg::ReadCommitResult {
                txn,
                req: 6,
                read: read.clone(),
                commit: Err(e.clone()),
            });
        }
    }
    msgs
}

#[test]
fn the_messages_written_by_hand_are_postcards_bytes() {
    let msgs = messages();
    assert_eq!(msgs.len(), 8 + 2 * 9);
    for msg in msgs {
        let mut by_hand = vec![0xab]; // what an outer frame wrote before is kept
        assert!(encode_into(&msg, &mut by_hand), "{msg:?}");
        let serde = postcard::to_allocvec(&msg).expect("encodes");
        assert_eq!(by_hand[0], 0xab);
        assert_eq!(by_hand[1..], serde[..], "{msg:?}");
        let back: Msg = postcard::from_bytes(&by_hand[1..]).expect("decodes");
        assert_eq!(format!("{back:?}"), format!("{msg:?}"));
    }
}

#[test]
fn other_messages_are_left_to_serde() {
    let mut out = vec![1, 2];
    let abort = Msg::Abort { txn: id(1, 1) };
    assert!(!encode_into(&abort, &mut out));
    assert_eq!(out, vec![1, 2]);
    let mut out = vec![3];
    assert!(!crate::Msg::Cure(abort).encode_by_hand(&mut out));
    assert_eq!(out, vec![3], "the variant's index is taken back");
}

/// Each protocol sharing Cure's messages writes them under its own variant of the
/// registry's message, as serde numbers them.
#[test]
fn every_flavor_writes_them_under_its_own_variant() {
    type Wrap = fn(Msg) -> crate::Msg;
    let flavors: [Wrap; 5] = [
        crate::Msg::Cure,
        crate::Msg::CureFt,
        crate::Msg::UniStore,
        crate::Msg::Strong,
        crate::Msg::RedBlue,
    ];
    for msg in messages() {
        for wrap in flavors {
            let msg = wrap(msg.clone());
            let mut by_hand = Vec::new();
            assert!(msg.encode_by_hand(&mut by_hand), "{msg:?}");
            let serde = postcard::to_allocvec(&msg).expect("encodes");
            assert_eq!(by_hand, serde, "{msg:?}");
        }
    }
}
