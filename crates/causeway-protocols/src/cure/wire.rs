//! Cure's compact form of its replication stream's txns, on the peer wire (the
//! [`WireForm`] of a piece shared by every sibling, `kit::wire`) and in a replica's
//! records ([`CompactTxns`], `Record::RemoteTxns`).
//!
//! Every op of a txn committed by Cure carries the txn's id in its op id and the
//! arbitration timestamp [`commit_ts`] of the txn's commit vector (`Part::commit`, Alg. 2
//! l.14; UniStore's strong deliveries, `strong.rs`), so a txn whose ops all match goes as
//! `Derived`: per op, only the key, the op's index and its effect; the receiver rebuilds
//! the rest from the txn's id and vector. A txn whose ops do not all match (none that we
//! know of) goes `Full`, op for op, so the form never changes what arrives. On the peer
//! wire since its version 8; a replica's record of a piece it takes whole is the piece's
//! bytes as they came (`Record::RemotePiece`), so this form must keep decoding as
//! written; checkpoints keep `ReplTxn`'s own encoding.

use super::msg::{ReplTxn, Stream};
use crate::kit::postcard_form::Writer;
use crate::kit::wire::{WireForm, ENCODE_BYTES_PER_ITEM};
use causeway_core::crdt::{ArbTs, Effect, Op};
use causeway_core::{DcId, Key, OpId, TxnId, Vc};
use serde::de::{DeserializeSeed, EnumAccess, Error as _, SeqAccess, VariantAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::sync::Arc;

/// The arbitration timestamp of every op of a txn committed at `ct`: its largest entry,
/// ties broken by the sum (a vector above another entry-wise has a larger sum).
pub fn commit_ts(ct: &Vc) -> ArbTs {
    ArbTs {
        primary: ct.max_entry(),
        secondary: ct.sum(),
    }
}

/// A piece of Cure's stream, shared by the messages to every sibling that gets it.
pub type SharedStream = crate::kit::wire::SharedStream<ReplTxn>;

impl WireForm for ReplTxn {
    /// A replica writes a piece it takes whole as the bytes it came in
    /// (`Record::RemotePiece`) instead of encoding its txns again.
    const KEEPS_BYTES: bool = true;

    /// Written by hand (`kit::postcard_form`): the bytes serde writes for [`PieceOut`],
    /// in three quarters of its instructions (a SET's txn 1,142 -> 864, BENCHMARKS.md);
    /// an origin DC encodes each txn once per partition piece, on the node task that
    /// also serves its clients.
    fn encode_piece(st: &Stream) -> Vec<u8> {
        let mut buf = Vec::with_capacity(16 + st.txns.len() * ENCODE_BYTES_PER_ITEM);
        let mut w = Writer(&mut buf);
        w.varint(u64::from(st.origin.0));
        w.varint(st.from);
        w.varint(st.upto);
        w.len(st.txns.len());
        for t in &st.txns {
            write_txn(&mut w, t);
        }
        buf
    }

    fn decode_piece(bytes: &[u8]) -> Result<Stream, String> {
        let piece: PieceIn =
            postcard::from_bytes(bytes).map_err(|e| format!("a stream piece is corrupt: {e}"))?;
        Ok(Stream {
            origin: piece.origin,
            from: piece.from,
            upto: piece.upto,
            txns: piece.txns.into_iter().map(|TxnIn(t)| t).collect(),
        })
    }
}

/// A txn as [`TxnOut`] serializes it: id, vector, then its ops `Derived` (variant 0: key,
/// index and effect each) or `Full` (variant 1, through serde).
fn write_txn(w: &mut Writer, t: &ReplTxn) {
    w.txn(&t.txn);
    w.vc(&t.ct);
    if derived(t) {
        w.varint(0);
        w.len(t.ops.len());
        for (k, op) in t.ops.iter() {
            w.bytes(&k.0);
            w.varint(u64::from(op.id.index));
            w.effect(&op.effect);
        }
    } else {
        w.varint(1);
        w.serde(&t.ops[..]);
    }
}

/// Every op of `t` carries the txn's id and its vector's timestamp: only keys, indexes
/// and effects need to travel.
fn derived(t: &ReplTxn) -> bool {
    let ts = commit_ts(&t.ct);
    t.ops
        .iter()
        .all(|(_, op)| op.id.txn == t.txn && op.ts == ts)
}

/// A piece through serde: what [`WireForm::encode_piece`] writes by hand (its tests
/// compare the two).
#[cfg(test)]
#[derive(Serialize)]
struct PieceOut<'a> {
    origin: DcId,
    from: u64,
    upto: u64,
    txns: TxnsOut<'a>,
}

/// Txns in the compact form, as a record holds them (`Record::RemoteTxns`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompactTxns(pub Vec<ReplTxn>);

impl Serialize for CompactTxns {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        TxnsOut(&self.0).serialize(s)
    }
}

impl<'de> Deserialize<'de> for CompactTxns {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<CompactTxns, D::Error> {
        let txns = Vec::<TxnIn>::deserialize(d)?;
        Ok(CompactTxns(txns.into_iter().map(|TxnIn(t)| t).collect()))
    }
}

struct TxnsOut<'a>(&'a [ReplTxn]);

impl Serialize for TxnsOut<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(TxnOut))
    }
}

struct TxnOut<'a>(&'a ReplTxn);

impl Serialize for TxnOut<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let t = self.0;
        let ops = if derived(t) {
            OpsOut::Derived(DerivedOut(&t.ops))
        } else {
            OpsOut::Full(&t.ops)
        };
        (&t.txn, &t.ct, ops).serialize(s)
    }
}

/// The two forms of a txn's ops; `OpsIn` must list them in the same order.
#[derive(Serialize)]
enum OpsOut<'a> {
    Derived(DerivedOut<'a>),
    Full(&'a [(Key, Op)]),
}

struct DerivedOut<'a>(&'a [(Key, Op)]);

impl Serialize for DerivedOut<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|(k, op)| (k, op.id.index, &op.effect)))
    }
}

#[derive(Deserialize)]
struct PieceIn {
    origin: DcId,
    from: u64,
    upto: u64,
    txns: Vec<TxnIn>,
}

/// A txn read straight into its [`ReplTxn`]: a `Derived` op is built as it is read, from
/// the txn's id and vector read before it (no vector of the ops as they came, no second
/// pass to rebuild them).
struct TxnIn(ReplTxn);

/// The most ops a txn's vector reserves before they arrive (the length comes from the
/// bytes, which may be corrupt; the vector still grows to the real count).
const OPS_RESERVE_MAX: usize = 1024;

impl<'de> Deserialize<'de> for TxnIn {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<TxnIn, D::Error> {
        d.deserialize_tuple(3, TxnVisitor)
    }
}

struct TxnVisitor;

impl<'de> Visitor<'de> for TxnVisitor {
    type Value = TxnIn;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a replicated txn: id, commit vector, ops")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<TxnIn, A::Error> {
        let short = |n| A::Error::invalid_length(n, &"3 fields");
        let txn: TxnId = seq.next_element()?.ok_or_else(|| short(0))?;
        let ct: Vc = seq.next_element()?.ok_or_else(|| short(1))?;
        let ts = commit_ts(&ct);
        let ops = seq
            .next_element_seed(OpsSeed { txn, ts })?
            .ok_or_else(|| short(2))?;
        Ok(TxnIn(ReplTxn {
            txn,
            ct,
            ops: Arc::new(ops),
        }))
    }
}

/// The ops of txn `txn` committed with arbitration timestamp `ts`, in either form
/// (`OpsOut`'s variants, in its order).
struct OpsSeed {
    txn: TxnId,
    ts: ArbTs,
}

#[derive(Deserialize)]
#[serde(field_identifier)]
enum Form {
    Derived,
    Full,
}

impl<'de> DeserializeSeed<'de> for OpsSeed {
    type Value = Vec<(Key, Op)>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_enum("OpsOut", &["Derived", "Full"], self)
    }
}

impl<'de> Visitor<'de> for OpsSeed {
    type Value = Vec<(Key, Op)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a txn's ops, derived or full")
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Self::Value, A::Error> {
        match data.variant()? {
            (Form::Derived, ops) => ops.newtype_variant_seed(DerivedSeed(self)),
            (Form::Full, ops) => ops.newtype_variant(),
        }
    }
}

/// `Derived` ops: (key, index, effect) each, the rest from the txn.
struct DerivedSeed(OpsSeed);

impl<'de> DeserializeSeed<'de> for DerivedSeed {
    type Value = Vec<(Key, Op)>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for DerivedSeed {
    type Value = Vec<(Key, Op)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a txn's derived ops")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let OpsSeed { txn, ts } = self.0;
        let reserve = seq.size_hint().unwrap_or(0).min(OPS_RESERVE_MAX);
        let mut ops = Vec::with_capacity(reserve);
        while let Some((key, index, effect)) = seq.next_element::<(Key, u32, Effect)>()? {
            let id = OpId { txn, index };
            ops.push((key, Op { id, ts, effect }));
        }
        Ok(ops)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_core::SessionId;

    fn txn(seq: u64) -> TxnId {
        TxnId {
            session: SessionId(7),
            seq,
        }
    }

    fn vc(entries: &[u64]) -> Vc {
        let mut v = Vc::zero(entries.len());
        for (i, e) in entries.iter().enumerate() {
            v.set(i, *e);
        }
        v
    }

    /// A txn as `Part::commit` makes it: every op with the txn's id and `commit_ts`.
    fn committed(seq: u64, ct: Vc, keys: &[&str]) -> ReplTxn {
        let ts = commit_ts(&ct);
        let ops = keys
            .iter()
            .enumerate()
            .map(|(i, k)| {
                let id = OpId {
                    txn: txn(seq),
                    index: i as u32,
                };
                let effect = Effect::Assign(format!("v{seq}").into_bytes());
                (Key(k.as_bytes().to_vec()), Op { id, ts, effect })
            })
            .collect();
        ReplTxn {
            txn: txn(seq),
            ct,
            ops: Arc::new(ops),
        }
    }

    fn piece(txns: Vec<ReplTxn>) -> Stream {
        Stream {
            origin: DcId(1),
            from: 10,
            upto: 40,
            txns,
        }
    }

    fn round_trip(st: &Stream) -> (Stream, usize) {
        let bytes = postcard::to_allocvec(&SharedStream::new(st.clone())).expect("encodes");
        let back: SharedStream = postcard::from_bytes(&bytes).expect("decodes");
        (back.into_stream(), bytes.len())
    }

    #[test]
    fn a_piece_arrives_as_it_left_and_smaller_than_its_txns_encoded_whole() {
        let st = piece(vec![
            committed(1, vc(&[3, 20, 5]), &["a", "b"]),
            committed(2, vc(&[3, 30, 5]), &["c"]),
        ]);
        let (back, len) = round_trip(&st);
        assert_eq!(back, st);
        let whole = postcard::to_allocvec(&st).expect("encodes").len();
        assert!(len < whole, "compact {len} bytes, whole {whole}");
    }

    #[test]
    fn a_txn_whose_ops_do_not_derive_from_it_goes_op_for_op() {
        let mut odd = committed(3, vc(&[1, 25, 2]), &["a", "b"]);
        let mut ops = (*odd.ops).clone();
        ops[1].1.ts.secondary += 1; // not the vector's timestamp
        ops[0].1.id.txn = txn(99); // not the txn's id
        odd.ops = Arc::new(ops);
        let st = piece(vec![committed(1, vc(&[3, 20, 5]), &["x"]), odd]);
        assert_eq!(round_trip(&st).0, st);
    }

    /// Pieces with every effect, ids and vectors across the varints' widths, an extra
    /// entry, both forms of ops, and none (a heartbeat).
    fn pieces() -> Vec<Stream> {
        let big = [0, 1, 127, 128, 16_384, u64::from(u32::MAX), u64::MAX];
        let id = |seq: u64, index: u32| OpId {
            txn: txn(seq),
            index,
        };
        let effects = [
            Effect::Assign(vec![]),
            Effect::Assign(vec![7; 200]),
            Effect::Increment(i64::MIN),
            Effect::Increment(-1),
            Effect::Add {
                elem: b"m".to_vec(),
                replaces: vec![id(1, 0), id(u64::MAX, u32::MAX)],
            },
            Effect::Remove {
                elem: vec![0; 130],
                tags: vec![id(300, 2)],
            },
            Effect::MvAssign {
                value: b"v".to_vec(),
                dominated: vec![],
            },
        ];
        let mut out = vec![piece(vec![])];
        for (i, &e) in big.iter().enumerate() {
            let mut ct = vc(&[e, big[(i + 3) % big.len()], 5]);
            if i % 2 == 1 {
                ct.set_extra(causeway_core::clock::Extra::Strong, e);
            }
            let mut t = committed(e, ct, &["k", "", "a-longer-key"]);
            let mut ops = (*t.ops).clone();
            for (j, (_, op)) in ops.iter_mut().enumerate() {
                op.effect = effects[(i + j) % effects.len()].clone();
                op.id.index = (e as u32).wrapping_add(j as u32);
            }
            t.ops = Arc::new(ops);
            let mut odd = t.clone();
            let mut odd_ops = (*odd.ops).clone();
            odd_ops[0].1.ts.primary ^= 1; // not derived from the txn: `Full`
            odd.ops = Arc::new(odd_ops);
            let mut st = piece(vec![t, odd, committed(e / 2, vc(&[e]), &[])]);
            (st.from, st.upto, st.origin) = (e / 3, e, DcId(e as u16));
            out.push(st);
        }
        out
    }

    #[test]
    fn a_piece_written_by_hand_is_what_serde_writes() {
        for st in pieces() {
            let by_serde = postcard::to_allocvec(&PieceOut {
                origin: st.origin,
                from: st.from,
                upto: st.upto,
                txns: TxnsOut(&st.txns),
            })
            .expect("encodes");
            let by_hand = <ReplTxn as WireForm>::encode_piece(&st);
            assert_eq!(by_hand, by_serde, "{st:?}");
            let back = <ReplTxn as WireForm>::decode_piece(&by_hand).expect("decodes");
            assert_eq!(back, st);
        }
    }

    #[test]
    fn txns_in_a_record_read_back_as_written() {
        let txns = CompactTxns(vec![
            committed(1, vc(&[3, 20, 5]), &["a", "b"]),
            committed(2, vc(&[3, 30, 5]), &["c"]),
        ]);
        let bytes = postcard::to_allocvec(&txns).expect("encodes");
        let back: CompactTxns = postcard::from_bytes(&bytes).expect("decodes");
        assert_eq!(back, txns);
        let whole = postcard::to_allocvec(&txns.0).expect("encodes").len();
        assert!(
            bytes.len() < whole,
            "compact {} bytes, whole {whole}",
            bytes.len()
        );
    }

    #[test]
    fn corrupt_bytes_are_an_error_not_a_panic() {
        let st = piece(vec![committed(1, vc(&[1, 2]), &["k"])]);
        let good = postcard::to_allocvec(&SharedStream::new(st)).expect("encodes");
        for cut in 0..good.len() {
            assert!(
                postcard::from_bytes::<SharedStream>(&good[..cut]).is_err(),
                "{cut}"
            );
        }
        // Well-framed bytes whose piece inside is garbage, or cut short.
        let inner = &good[1..];
        let garbage = vec![0xff; inner.len()];
        for bad in [&garbage[..], &inner[..inner.len() - 1]] {
            let framed = postcard::to_allocvec(serde_bytes::Bytes::new(bad)).expect("encodes");
            assert!(postcard::from_bytes::<SharedStream>(&framed).is_err());
        }
    }
}
