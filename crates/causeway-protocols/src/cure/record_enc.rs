//! The records every commit writes (`Record::Prepare`, `Record::OnePhase`), encoded by
//! hand (`kit::postcard_form`) into exactly the bytes postcard writes for them, so a log
//! reads back as before and recovery keeps decoding with postcard.
//!
//! postcard through serde spent about a thousand instructions on a SET's one-phase record
//! (a varint per integer behind the `Serializer` calls, a length and loop per vector),
//! 4% of all the node does for the command (BENCHMARKS.md, issue 14). The tests check
//! the bytes against postcard's for every effect.

use super::record::Record;
use crate::kit::postcard_form::Writer;
use causeway_core::crdt::Effect;
use causeway_core::{Key, NodeId, OpId, PartitionId, TxnId};

/// `Record::Prepare`'s variant index (the enum's order is pinned by record.rs's tests).
const PREPARE_TAG: u64 = 1;
/// `Record::OnePhase`'s variant index.
const ONE_PHASE_TAG: u64 = 4;

/// Bytes reserved for an encoded record: a one-key commit record fits.
const ENCODE_CAPACITY: usize = 256;

impl Record {
    /// The record's bytes. The buffer starts at `ENCODE_CAPACITY`: growing it from empty
    /// (postcard's `to_allocvec`) cost several reallocations per commit record.
    /// A commit's records (`Prepare`, `OnePhase`) are written by hand, in postcard's
    /// bytes (this file's `encode_into`).
    pub fn encode(&self) -> Vec<u8> {
        let capacity = match self {
            Record::RemotePiece { piece, .. } => piece.len() + 16,
            _ => ENCODE_CAPACITY,
        };
        let mut out = Vec::with_capacity(capacity);
        if encode_into(self, &mut out) {
            return out;
        }
        postcard::to_extend(self, out).expect("a cure record always encodes")
    }
}

/// Writes `record` to `out` if it is one of the records this module encodes.
pub(crate) fn encode_into(record: &Record, out: &mut Vec<u8>) -> bool {
    let mut w = Writer(out);
    match record {
        Record::Prepare {
            partition,
            txn,
            coord,
            svc,
            prep_time,
            ops,
        } => {
            w.varint(PREPARE_TAG);
            head(&mut w, *partition, txn, *coord);
            w.vc(svc);
            w.varint(*prep_time);
            write_ops(&mut w, ops);
        }
        Record::OnePhase {
            partition,
            txn,
            coord,
            ct,
            ops,
        } => {
            w.varint(ONE_PHASE_TAG);
            head(&mut w, *partition, txn, *coord);
            w.vc(ct);
            write_ops(&mut w, ops);
        }
        _ => return false,
    }
    true
}

/// A record's head: its partition, txn and coordinator.
fn head(w: &mut Writer, partition: PartitionId, txn: &TxnId, coord: NodeId) {
    w.varint(u64::from(partition.0));
    w.txn(txn);
    w.varint(u64::from(coord.0));
}

fn write_ops(w: &mut Writer, ops: &[(Key, OpId, Effect)]) {
    w.len(ops.len());
    for (key, id, effect) in ops {
        w.bytes(&key.0);
        w.op_id(id);
        w.effect(effect);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_core::clock::Extra;
    use causeway_core::{SessionId, Vc};

    fn txn(session: u64, seq: u64) -> TxnId {
        TxnId {
            session: SessionId(session),
            seq,
        }
    }

    fn id(session: u64, index: u32) -> OpId {
        OpId {
            txn: txn(session, 7),
            index,
        }
    }

    /// Every effect, integers at the varint's edges (0, 127, 128, the largest), negative
    /// and positive increments, empty and long byte strings.
    fn effects() -> Vec<Effect> {
        let long = vec![0xAB; 300];
        vec![
            Effect::Assign(Vec::new()),
            Effect::Assign(long.clone()),
            Effect::Increment(0),
            Effect::Increment(-1),
            Effect::Increment(i64::MIN),
            Effect::Increment(i64::MAX),
            Effect::Increment(64),
            Effect::Add {
                elem: b"m".to_vec(),
                replaces: vec![id(u64::MAX, u32::MAX), id(0, 0)],
            },
            Effect::Add {
                elem: long.clone(),
                replaces: Vec::new(),
            },
            Effect::Remove {
                elem: b"gone".to_vec(),
                tags: vec![id(128, 127)],
            },
            Effect::MvAssign {
                value: long,
                dominated: vec![id(1, 128), id(16_384, 2)],
            },
        ]
    }

    fn vcs() -> Vec<Vc> {
        vec![
            Vc::zero(1),
            Vc {
                dcs: vec![u64::MAX, 127, 128, 1 << 50],
                extra: vec![(Extra::Strong, 300)],
            },
        ]
    }

    fn records() -> Vec<Record> {
        let mut out = Vec::new();
        let key = |i: usize| Key(format!("key:{i}").repeat(i * 20 + 1).into_bytes());
        for (i, vc) in vcs().into_iter().enumerate() {
            let ops: Vec<(Key, OpId, Effect)> = effects()
                .into_iter()
                .enumerate()
                .map(|(j, e)| (key(j), id(j as u64 * 1_000_003, j as u32), e))
                .collect();
            for ops in [Vec::new(), ops[..1].to_vec(), ops] {
                out.push(Record::OnePhase {
                    partition: PartitionId(i as u32 * 200),
                    txn: txn(u64::MAX - i as u64, 129),
                    coord: NodeId(u32::MAX),
                    ct: vc.clone(),
                    ops: ops.clone(),
                });
                out.push(Record::Prepare {
                    partition: PartitionId(3),
                    txn: txn(i as u64, 0),
                    coord: NodeId(i as u32),
                    svc: vc.clone(),
                    prep_time: 1 << (i * 40),
                    ops,
                });
            }
        }
        out
    }

    /// The bytes are postcard's, so recovery decodes them as before.
    #[test]
    fn the_records_of_a_commit_are_encoded_as_postcard_encodes_them() {
        for record in records() {
            let mut by_hand = Vec::new();
            assert!(encode_into(&record, &mut by_hand), "{record:?}");
            let by_postcard = postcard::to_allocvec(&record).expect("encodes");
            assert_eq!(by_hand, by_postcard, "{record:?}");
            assert_eq!(
                record.encode(),
                by_postcard,
                "Record::encode takes this path"
            );
            let back = Record::decode(0, &by_hand).expect("decodes");
            assert_eq!(format!("{back:?}"), format!("{record:?}"));
        }
    }

    /// Any other record is left to postcard.
    #[test]
    fn other_records_are_not_encoded_here() {
        let mut out = Vec::new();
        assert!(!encode_into(&Record::Lease { until: 1 }, &mut out));
        assert!(out.is_empty());
    }
}
