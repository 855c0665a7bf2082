//! postcard's format written by hand, for the records every commit writes (Cure's
//! `Prepare` and `OnePhase`, `cure/record_enc.rs`), the peer messages of a command
//! served at another node of the DC (`cure/msg_enc.rs`) and the pieces of Cure's
//! replication stream (`cure/wire.rs`); everything else, and every read, goes through
//! serde and postcard.
//!
//! Through serde, a SET's one-phase record cost about 1,000 instructions to encode (a
//! `Serializer` call per integer and per element); by hand about 650 (BENCHMARKS.md,
//! issue 14). The bytes are postcard's, so what is on disk does not change and recovery
//! decodes it with postcard: unsigned integers and lengths as LEB128 varints, signed ones
//! zigzagged first, an enum as its variant's index (a varint) then its fields, a struct
//! or tuple as its fields in order, a byte string (`serde_bytes`) as its length and its
//! bytes. The tests check every piece against postcard through serde. (Reading by hand
//! too was tried for replication pieces: no faster than serde, whose cost there is the
//! allocations of the values read, BENCHMARKS.md.)

use causeway_core::clock::Extra;
use causeway_core::crdt::{Effect, ObjType, Update};
use causeway_core::{Key, ObjValue, OpId, ReadValue, TxnId, TxnKind, Vc};
use serde::Serialize;

/// Appends postcard's bytes of values to a vector.
pub struct Writer<'a>(pub &'a mut Vec<u8>);

impl Writer<'_> {
    /// LEB128: seven bits per byte, low first, the high bit set on all but the last.
    pub fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    pub fn len(&mut self, n: usize) {
        self.varint(n as u64);
    }

    pub fn zigzag(&mut self, v: i64) {
        self.varint(((v << 1) ^ (v >> 63)) as u64);
    }

    pub fn bytes(&mut self, b: &[u8]) {
        self.len(b.len());
        self.0.extend_from_slice(b);
    }

    pub fn txn(&mut self, t: &TxnId) {
        self.varint(t.session.0);
        self.varint(t.seq);
    }

    pub fn op_id(&mut self, id: &OpId) {
        self.txn(&id.txn);
        self.varint(u64::from(id.index));
    }

    pub fn op_ids(&mut self, ids: &[OpId]) {
        self.len(ids.len());
        for id in ids {
            self.op_id(id);
        }
    }

    pub fn vc(&mut self, vc: &Vc) {
        self.len(vc.dcs.len());
        for v in &vc.dcs {
            self.varint(*v);
        }
        self.len(vc.extra.len());
        for (entry, v) in &vc.extra {
            self.varint(match entry {
                Extra::Strong => 0,
            });
            self.varint(*v);
        }
    }

    pub fn bool(&mut self, b: bool) {
        self.0.push(u8::from(b));
    }

    /// An `Option` of a string or of a `serde_bytes` byte string.
    pub fn option_bytes(&mut self, b: Option<&[u8]>) {
        match b {
            None => self.0.push(0),
            Some(b) => {
                self.0.push(1);
                self.bytes(b);
            }
        }
    }

    /// A value of a type this module does not write by hand, through serde (postcard's
    /// bytes are the same either way: a value's bytes do not depend on what precedes it).
    pub fn serde<T: Serialize + ?Sized>(&mut self, v: &T) {
        let out = std::mem::take(self.0);
        *self.0 = postcard::to_extend(v, out).expect("a value of the wire always encodes");
    }

    pub fn txn_kind(&mut self, k: TxnKind) {
        self.varint(match k {
            TxnKind::Causal => 0,
            TxnKind::Strong => 1,
        });
    }

    pub fn obj_type(&mut self, t: ObjType) {
        self.varint(match t {
            ObjType::Lww => 0,
            ObjType::Counter => 1,
            ObjType::Set => 2,
            ObjType::MvReg => 3,
            ObjType::Hash => 4,
            ObjType::List => 5,
            ObjType::ZSet => 6,
        });
    }

    /// Keys to read, with the types the reader expects.
    pub fn typed_keys(&mut self, keys: &[(Key, ObjType)]) {
        self.len(keys.len());
        for (k, t) in keys {
            self.bytes(&k.0);
            self.obj_type(*t);
        }
    }

    /// The matches are exhaustive: a new update does not compile until it is written here.
    pub fn update(&mut self, u: &Update) {
        let (tag, bytes) = match u {
            Update::Assign(v) => (0, v),
            Update::Increment(n) => {
                self.varint(1);
                return self.zigzag(*n);
            }
            Update::Add(v) => (2, v),
            Update::Remove(v) => (3, v),
            Update::MvAssign(v) => (4, v),
            Update::RegisterIncrement(n) => {
                self.varint(5);
                return self.zigzag(*n);
            }
            Update::Part { key_type, update } => {
                self.varint(6);
                self.obj_type(*key_type);
                return self.update(update);
            }
            Update::HashSet { field, value } => {
                self.varint(7);
                self.bytes(field);
                return self.bytes(value);
            }
            Update::HashIncrement { field, delta } => {
                self.varint(8);
                self.bytes(field);
                return self.zigzag(*delta);
            }
            Update::HashRemove { field } => (9, field),
            Update::ListPush { left, values } => {
                self.varint(10);
                self.bool(*left);
                return self.values(values);
            }
            Update::ListPop { left, count } => {
                self.varint(11);
                self.bool(*left);
                return self.varint(*count);
            }
            // Rare next to the commands above: through serde (the same bytes).
            Update::ZAdd { .. } | Update::ZIncrement { .. } | Update::ZRemove { .. } => {
                return self.serde(u)
            }
        };
        self.varint(tag);
        self.bytes(bytes);
    }

    /// A session's buffered updates with their op ids (Cure's `Updates`).
    pub fn updates(&mut self, updates: &[(Key, Update, OpId)]) {
        self.len(updates.len());
        for (k, u, id) in updates {
            self.bytes(&k.0);
            self.update(u);
            self.op_id(id);
        }
    }

    /// A sequence of byte strings (a list push's values).
    pub fn values(&mut self, values: &[Vec<u8>]) {
        self.len(values.len());
        for v in values {
            self.bytes(v);
        }
    }

    pub fn obj_value(&mut self, v: &ObjValue) {
        let (tag, values) = match v {
            ObjValue::Lww(v) => {
                self.varint(0);
                return self.option_bytes(v.as_deref());
            }
            ObjValue::Counter(n) => {
                self.varint(1);
                return self.zigzag(*n);
            }
            ObjValue::Set(values) => (2, values),
            ObjValue::MvReg(values) => (3, values),
            ObjValue::Hash(pairs) => {
                self.varint(4);
                self.len(pairs.len());
                for (f, v) in pairs {
                    self.bytes(f);
                    self.bytes(v);
                }
                return;
            }
            ObjValue::List(values) => (5, values),
            ObjValue::ZSet(_) => return self.serde(v),
        };
        self.varint(tag);
        self.len(values.len());
        for v in values {
            self.bytes(v);
        }
    }

    pub fn read_values(&mut self, values: &[ReadValue]) {
        self.len(values.len());
        for v in values {
            self.bytes(&v.key.0);
            self.obj_value(&v.value);
            self.op_ids(&v.observed);
        }
    }

    /// The matches are exhaustive: a new effect does not compile until it is written here.
    pub fn effect(&mut self, e: &Effect) {
        match e {
            Effect::ZAdd { .. } | Effect::ZIncrement { .. } | Effect::ZRemove { .. } => {
                self.serde(e)
            }
            Effect::Assign(v) => {
                self.varint(0);
                self.bytes(v);
            }
            Effect::Increment(n) => {
                self.varint(1);
                self.zigzag(*n);
            }
            Effect::Add { elem, replaces } => {
                self.varint(2);
                self.bytes(elem);
                self.op_ids(replaces);
            }
            Effect::Remove { elem, tags } => {
                self.varint(3);
                self.bytes(elem);
                self.op_ids(tags);
            }
            Effect::MvAssign { value, dominated } => {
                self.varint(4);
                self.bytes(value);
                self.op_ids(dominated);
            }
            Effect::RegisterIncrement(n) => {
                self.varint(5);
                self.zigzag(*n);
            }
            Effect::CountedAssign { value, base } => {
                self.varint(6);
                self.bytes(value);
                self.zigzag(*base);
            }
            Effect::Part { key_type, effect } => {
                self.varint(7);
                self.obj_type(*key_type);
                self.effect(effect);
            }
            Effect::HashSet {
                field,
                value,
                base,
                replaces,
            } => {
                self.varint(8);
                self.bytes(field);
                self.bytes(value);
                self.zigzag(*base);
                self.op_ids(replaces);
            }
            Effect::HashIncrement {
                field,
                delta,
                replaces,
            } => {
                self.varint(9);
                self.bytes(field);
                self.zigzag(*delta);
                self.op_ids(replaces);
            }
            Effect::HashRemove { field, base, tags } => {
                self.varint(10);
                self.bytes(field);
                self.zigzag(*base);
                self.op_ids(tags);
            }
            Effect::ListPush { left, values } => {
                self.varint(11);
                self.bool(*left);
                self.values(values);
            }
            Effect::ListRemove { ids, ts } => {
                self.varint(12);
                self.len(ids.len());
                for id in ids {
                    self.op_id(&id.op);
                    self.varint(u64::from(id.index));
                }
                self.len(ts.len());
                for t in ts {
                    self.serde(t);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_core::SessionId;
    use serde::Serialize;

    /// A value written by hand is postcard's bytes.
    fn same<T: Serialize + std::fmt::Debug>(v: &T, write: impl Fn(&mut Writer, &T)) {
        let mut by_hand = Vec::new();
        write(&mut Writer(&mut by_hand), v);
        assert_eq!(by_hand, postcard::to_allocvec(v).expect("encodes"), "{v:?}");
    }

    fn edges() -> Vec<u64> {
        vec![
            0,
            1,
            127,
            128,
            16_383,
            16_384,
            u64::from(u32::MAX),
            1 << 50,
            u64::MAX,
        ]
    }

    #[test]
    fn integers_at_the_varints_edges_are_postcards() {
        for v in edges() {
            same(&v, |w, v| w.varint(*v));
            same(&(v as u32), |w, v| w.varint(u64::from(*v)));
            same(&(v as u16), |w, v| w.varint(u64::from(*v)));
            same(&(v as usize), |w, v| w.len(*v));
            for signed in [v as i64, -(v as i64), i64::MIN, i64::MAX] {
                same(&signed, |w, v| w.zigzag(*v));
            }
        }
        same(&serde_bytes::ByteBuf::from(vec![9; 130]), |w, v| w.bytes(v));
    }

    #[test]
    fn ids_vectors_and_effects_are_postcards() {
        let id = |s: u64, i: u32| OpId {
            txn: TxnId {
                session: SessionId(s),
                seq: s / 3,
            },
            index: i,
        };
        for v in edges() {
            same(&id(v, v as u32), |w, v| w.op_id(v));
        }
        let vcs = [
            Vc::zero(0),
            Vc::zero(3),
            Vc {
                dcs: edges(),
                extra: vec![(Extra::Strong, u64::MAX)],
            },
        ];
        for vc in vcs {
            same(&vc, |w, v| w.vc(v));
        }
        let long = vec![7u8; 200];
        let effects = [
            Effect::Assign(Vec::new()),
            Effect::Assign(long.clone()),
            Effect::Increment(-5),
            Effect::Increment(i64::MAX),
            Effect::Add {
                elem: b"m".to_vec(),
                replaces: vec![id(1, 0), id(u64::MAX, u32::MAX)],
            },
            Effect::Remove {
                elem: long.clone(),
                tags: Vec::new(),
            },
            Effect::MvAssign {
                value: long.clone(),
                dominated: vec![id(128, 128)],
            },
            Effect::RegisterIncrement(i64::MIN),
            Effect::RegisterIncrement(3),
            Effect::CountedAssign {
                value: long.clone(),
                base: -7,
            },
            Effect::HashSet {
                field: b"f".to_vec(),
                value: long.clone(),
                base: i64::MIN,
                replaces: vec![id(1, 0), id(300, 2)],
            },
            Effect::HashIncrement {
                field: long.clone(),
                delta: -3,
                replaces: Vec::new(),
            },
            Effect::HashRemove {
                field: b"f".to_vec(),
                base: 9,
                tags: vec![id(5, 5)],
            },
        ];
        for e in effects {
            same(&e, |w, v| w.effect(v));
        }
        let f = || b"field".to_vec();
        let updates = [
            Update::HashSet {
                field: f(),
                value: long.clone(),
            },
            Update::HashIncrement {
                field: f(),
                delta: i64::MIN,
            },
            Update::HashRemove { field: f() },
        ];
        for u in updates {
            same(&u, |w, v| w.update(v));
        }
        let vals = || vec![b"a".to_vec(), long.clone(), Vec::new()];
        let lists = [
            Update::ListPush {
                left: true,
                values: vals(),
            },
            Update::ListPop {
                left: false,
                count: u64::MAX,
            },
        ];
        for u in lists {
            same(&u, |w, v| w.update(v));
        }
        let list_effects = [
            Effect::ListPush {
                left: false,
                values: vals(),
            },
            Effect::ListRemove {
                ids: vec![
                    causeway_core::crdt::list::ElemId {
                        op: id(300, 2),
                        index: 70_000,
                    },
                    causeway_core::crdt::list::ElemId {
                        op: id(1, 0),
                        index: 0,
                    },
                ],
                ts: vec![
                    causeway_core::crdt::ArbTs::PENDING,
                    causeway_core::crdt::ArbTs {
                        primary: 5,
                        secondary: 300,
                    },
                ],
            },
        ];
        for e in list_effects {
            same(&e, |w, v| w.effect(v));
        }
        same(&ObjValue::List(vals()), |w, v| w.obj_value(v));
        same(&ObjType::List, |w, v| w.obj_type(*v));
        let hash = ObjValue::Hash(vec![(f(), long), (b"g".to_vec(), Vec::new())]);
        same(&hash, |w, v| w.obj_value(v));
        same(&ObjType::Hash, |w, v| w.obj_type(*v));
    }
}
