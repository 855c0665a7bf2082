//! A replication stream piece as it travels between sibling replicas: shared by the
//! messages to every sibling that gets the same piece, and encoded once for all of them.
//!
//! A replica streams what it committed to each sibling (`kit::repl`), and in steady state
//! every sibling gets the same piece (what became durable or stable since the last one).
//! Encoded per sibling, the piece cost a 3-DC Cure cluster's DC1 about 1,500 instructions
//! per txn and sibling, two thirds of what replication added to a SET (BENCHMARKS.md,
//! issue 14). [`SharedStream`] holds the piece once (`Arc`) and its bytes once
//! (`OnceLock`): the first message to be encoded fills them, the others copy them. How a
//! piece turns into bytes is the item's [`WireForm`]: by default the piece's own encoding;
//! Cure's txns have a compact form (`cure/wire.rs`).

use super::repl::Stream;
use serde::de::{DeserializeOwned, Error as _, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};

/// Bytes reserved for a piece's encoding per item it holds (a one-key SET's Cure txn
/// takes about 40 in the compact form).
pub const ENCODE_BYTES_PER_ITEM: usize = 64;

/// How a piece of a stream of `Self` becomes bytes on the peer wire, and back.
pub trait WireForm: Sized + Serialize + DeserializeOwned {
    /// Whether a received piece keeps the bytes it was decoded from
    /// ([`SharedStream::into_parts`]), for a receiver that writes them as they came
    /// (Cure's replica records): one copy of the piece's bytes per received piece.
    const KEEPS_BYTES: bool = false;

    fn encode_piece(st: &Stream<Self>) -> Vec<u8> {
        let buf = Vec::with_capacity(16 + st.txns.len() * ENCODE_BYTES_PER_ITEM);
        postcard::to_extend(st, buf).expect("a stream piece always encodes")
    }

    fn decode_piece(bytes: &[u8]) -> Result<Stream<Self>, String> {
        postcard::from_bytes(bytes).map_err(|e| format!("a stream piece is corrupt: {e}"))
    }
}

/// A stream piece shared by the messages that carry it, with its encoding once made.
pub struct SharedStream<T>(Arc<Piece<T>>);

struct Piece<T> {
    stream: Stream<T>,
    bytes: OnceLock<Vec<u8>>,
}

impl<T> Clone for SharedStream<T> {
    fn clone(&self) -> SharedStream<T> {
        SharedStream(Arc::clone(&self.0))
    }
}

impl<T: WireForm + Clone> SharedStream<T> {
    pub fn new(stream: Stream<T>) -> SharedStream<T> {
        SharedStream(Arc::new(Piece {
            stream,
            bytes: OnceLock::new(),
        }))
    }

    /// A piece decoded from `bytes`, which it keeps when given.
    fn received(stream: Stream<T>, bytes: Option<Vec<u8>>) -> SharedStream<T> {
        let kept = OnceLock::new();
        if let Some(bytes) = bytes {
            kept.set(bytes).expect("a new cell is empty");
        }
        SharedStream(Arc::new(Piece {
            stream,
            bytes: kept,
        }))
    }

    pub fn stream(&self) -> &Stream<T> {
        &self.0.stream
    }

    /// The piece, moved out when this is its last holder (a received piece always is),
    /// copied otherwise.
    pub fn into_stream(self) -> Stream<T> {
        match Arc::try_unwrap(self.0) {
            Ok(piece) => piece.stream,
            Err(shared) => shared.stream.clone(),
        }
    }

    /// The piece and its bytes when it holds them (a received piece whose form
    /// [`WireForm::KEEPS_BYTES`], or one already encoded), moved out when this is its
    /// last holder; a copy of the piece and no bytes otherwise.
    pub fn into_parts(self) -> (Stream<T>, Option<Vec<u8>>) {
        match Arc::try_unwrap(self.0) {
            Ok(piece) => (piece.stream, piece.bytes.into_inner()),
            Err(shared) => (shared.stream.clone(), None),
        }
    }

    /// Whether `other` is this very piece (not only an equal one): its bytes are shared.
    pub fn same_piece(&self, other: &SharedStream<T>) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The encoding, made by the first caller.
    fn bytes(&self) -> &[u8] {
        self.0.bytes.get_or_init(|| T::encode_piece(&self.0.stream))
    }

    /// Whether the piece's bytes were made (by an encode of any of its holders).
    pub fn encoded(&self) -> bool {
        self.0.bytes.get().is_some()
    }
}

/// Our stream's piece for sibling `s` going on `from`: `made` (this round's piece for
/// another sibling) if it starts there too, else a new one from `make`, kept in `made`.
pub fn reuse_or_make<T: WireForm + Clone>(
    made: &mut Option<SharedStream<T>>,
    from: u64,
    make: impl FnOnce() -> Stream<T>,
) -> SharedStream<T> {
    match made.as_ref() {
        Some(piece) if piece.stream().from == from => piece.clone(),
        _ => made.insert(SharedStream::new(make())).clone(),
    }
}

impl<T: fmt::Debug> fmt::Debug for SharedStream<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.stream.fmt(f)
    }
}

impl<T: PartialEq> PartialEq for SharedStream<T> {
    fn eq(&self, other: &SharedStream<T>) -> bool {
        self.0.stream == other.0.stream
    }
}

impl<T: Eq> Eq for SharedStream<T> {}

impl<T: WireForm + Clone> Serialize for SharedStream<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self.bytes())
    }
}

impl<'de, T: WireForm + Clone> Deserialize<'de> for SharedStream<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<SharedStream<T>, D::Error> {
        d.deserialize_bytes(PieceVisitor(PhantomData))
    }
}

/// Reads a piece's bytes: borrowed or owned (postcard), or a sequence of numbers (JSON).
struct PieceVisitor<T>(PhantomData<T>);

impl<'de, T: WireForm + Clone> Visitor<'de> for PieceVisitor<T> {
    type Value = SharedStream<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an encoded replication stream piece")
    }

    fn visit_bytes<E: serde::de::Error>(self, bytes: &[u8]) -> Result<SharedStream<T>, E> {
        let stream = T::decode_piece(bytes).map_err(E::custom)?;
        Ok(SharedStream::received(
            stream,
            T::KEEPS_BYTES.then(|| bytes.to_vec()),
        ))
    }

    fn visit_byte_buf<E: serde::de::Error>(self, bytes: Vec<u8>) -> Result<SharedStream<T>, E> {
        let stream = T::decode_piece(&bytes).map_err(E::custom)?;
        Ok(SharedStream::received(
            stream,
            T::KEEPS_BYTES.then_some(bytes),
        ))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<SharedStream<T>, A::Error> {
        let mut bytes = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
        while let Some(b) = seq.next_element::<u8>()? {
            bytes.push(b);
        }
        let stream = T::decode_piece(&bytes).map_err(A::Error::custom)?;
        Ok(SharedStream::received(
            stream,
            T::KEEPS_BYTES.then_some(bytes),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_core::DcId;

    /// An item with the default form.
    #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
    struct Item(u64, Vec<u8>);

    impl WireForm for Item {}

    fn piece(from: u64) -> Stream<Item> {
        Stream {
            origin: DcId(1),
            from,
            upto: from + 30,
            txns: vec![
                Item(from + 1, b"a".to_vec()),
                Item(from + 2, b"bc".to_vec()),
            ],
        }
    }

    #[test]
    fn a_piece_arrives_as_it_left_in_postcard_and_json() {
        let st = piece(10);
        let bytes = postcard::to_allocvec(&SharedStream::new(st.clone())).expect("encodes");
        let back: SharedStream<Item> = postcard::from_bytes(&bytes).expect("decodes");
        assert_eq!(back.into_stream(), st);
        let json = serde_json::to_string(&SharedStream::new(st.clone())).expect("encodes");
        let back: SharedStream<Item> = serde_json::from_str(&json).expect("decodes");
        assert_eq!(back.into_stream(), st);
    }

    #[test]
    fn the_messages_to_every_sibling_share_one_encoding() {
        let mut made = None;
        let first = reuse_or_make(&mut made, 10, || piece(10));
        let second = reuse_or_make(&mut made, 10, || unreachable!("made once"));
        assert!(first.same_piece(&second));
        let a = postcard::to_allocvec(&first).expect("encodes");
        assert!(second.encoded(), "the first encode fills the shared bytes");
        assert_eq!(a, postcard::to_allocvec(&second).expect("encodes"));
        assert_eq!(second.into_stream(), piece(10), "a copy while shared");
        // A sibling that goes on from elsewhere gets a piece of its own.
        let other = reuse_or_make(&mut made, 20, || piece(20));
        assert!(!other.same_piece(&first));
        assert_eq!(*other.stream(), piece(20));
    }

    /// An item whose received pieces keep their bytes.
    #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
    struct Kept(u64);

    impl WireForm for Kept {
        const KEEPS_BYTES: bool = true;
    }

    #[test]
    fn a_received_piece_keeps_its_bytes_only_when_its_form_asks() {
        let st = Stream {
            origin: DcId(1),
            from: 4,
            upto: 9,
            txns: vec![Kept(5), Kept(9)],
        };
        let sent = SharedStream::new(st.clone());
        let framed = postcard::to_allocvec(&sent).expect("encodes");
        let got: SharedStream<Kept> = postcard::from_bytes(&framed).expect("decodes");
        let (back, bytes) = got.into_parts();
        assert_eq!(back, st);
        let bytes = bytes.expect("kept");
        assert_eq!(
            Kept::decode_piece(&bytes).expect("the piece's own bytes"),
            st
        );
        let json = serde_json::to_string(&sent).expect("encodes");
        let got: SharedStream<Kept> = serde_json::from_str(&json).expect("decodes");
        assert_eq!(got.into_parts().1, Some(bytes), "from a JSON sequence too");
        let items = postcard::to_allocvec(&SharedStream::new(piece(3))).expect("encodes");
        let got: SharedStream<Item> = postcard::from_bytes(&items).expect("decodes");
        assert_eq!(got.into_parts(), (piece(3), None), "the default keeps none");
        let fresh = SharedStream::new(st.clone());
        assert_eq!(fresh.clone().into_parts(), (st, None), "shared: a copy");
    }

    #[test]
    fn corrupt_bytes_are_an_error_not_a_panic() {
        let good = postcard::to_allocvec(&SharedStream::new(piece(10))).expect("encodes");
        for cut in 0..good.len() {
            let back = postcard::from_bytes::<SharedStream<Item>>(&good[..cut]);
            assert!(back.is_err(), "{cut}");
        }
        let inner = &good[1..];
        let garbage = vec![0xff; inner.len()];
        for bad in [&garbage[..], &inner[..inner.len() - 1]] {
            let framed = postcard::to_allocvec(serde_bytes::Bytes::new(bad)).expect("encodes");
            assert!(postcard::from_bytes::<SharedStream<Item>>(&framed).is_err());
        }
    }
}
