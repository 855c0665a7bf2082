//! The closed-loop workload: what each simulated client's next transaction does. Keys are
//! `k0..kN`, drawn with Zipf skew; key `i`'s object type comes from the object mix; each
//! operation is a read with probability `read_ratio`, else an update. Register values are
//! unique per write so that a read names the write it saw even without the op id.

use crate::config::{ObjectMix, SimConfig};
use crate::rng::{SimRng, Zipf};
use causeway_core::crdt::{ObjType, Update};
use causeway_core::Key;

/// One step of a planned transaction.
#[derive(Clone, Debug)]
pub enum Step {
    Read(Key, ObjType),
    /// Several keys in one request (the final reads after quiescence).
    ReadMany(Vec<(Key, ObjType)>),
    Update(Key, Update),
}

pub struct Workload {
    zipf: Zipf,
    keys: u32,
    objects: ObjectMix,
    read_ratio: f64,
    txn_ops: u32,
    /// Counter making register values unique across the run.
    next_value: u64,
}

/// Set elements are drawn from a small domain so adds and removes collide.
const SET_ELEMENTS: u64 = 4;

impl Workload {
    pub fn new(config: &SimConfig) -> Workload {
        Workload {
            zipf: Zipf::new(config.keys, config.zipf),
            keys: config.keys,
            objects: config.objects,
            read_ratio: config.read_ratio,
            txn_ops: config.txn_ops,
            next_value: 0,
        }
    }

    pub fn key(index: u32) -> Key {
        Key::new(format!("k{index}"))
    }

    pub fn key_type(&self, index: u32) -> ObjType {
        match self.objects {
            ObjectMix::Lww => ObjType::Lww,
            ObjectMix::Counter => ObjType::Counter,
            ObjectMix::Set => ObjType::Set,
            ObjectMix::MvReg => ObjType::MvReg,
            ObjectMix::Mixed => {
                [ObjType::Lww, ObjType::Counter, ObjType::Set, ObjType::MvReg][(index % 4) as usize]
            }
        }
    }

    /// Every key with its type, for the final reads.
    pub fn all_keys(&self) -> Vec<(Key, ObjType)> {
        (0..self.keys)
            .map(|i| (Workload::key(i), self.key_type(i)))
            .collect()
    }

    /// The steps of the next transaction.
    pub fn plan(&mut self, rng: &mut SimRng) -> Vec<Step> {
        (0..self.txn_ops)
            .map(|_| {
                let index = self.zipf.sample(rng);
                let key = Workload::key(index);
                let obj = self.key_type(index);
                if rng.chance(self.read_ratio) {
                    Step::Read(key, obj)
                } else {
                    Step::Update(key, self.update(obj, rng))
                }
            })
            .collect()
    }

    fn update(&mut self, obj: ObjType, rng: &mut SimRng) -> Update {
        self.next_value += 1;
        let unique = format!("v{}", self.next_value).into_bytes();
        match obj {
            ObjType::Lww => Update::Assign(unique),
            ObjType::MvReg => Update::MvAssign(unique),
            ObjType::Counter => Update::Increment(rng.range(1, 6) as i64 - 2),
            ObjType::Set => {
                let elem = format!("e{}", rng.range(0, SET_ELEMENTS)).into_bytes();
                if rng.chance(0.6) {
                    Update::Add(elem)
                } else {
                    Update::Remove(elem)
                }
            }
        }
    }
}
