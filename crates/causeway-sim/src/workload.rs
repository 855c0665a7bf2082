//! The closed-loop workload: what each simulated client's next transaction does. Keys are
//! `k0..kN`, drawn with Zipf skew; key `i`'s object type comes from the object mix. A
//! transaction is strong with probability `strong_ratio`, read-only with `read_only_ratio`,
//! write-only with `write_only_ratio`, else causal and mixed (a strong one is mixed too): in
//! a mixed transaction each operation is a read with probability `read_ratio`, else an
//! update. Register values are unique per write so that a read names the write it saw even
//! without the op id.

use crate::config::{ObjectMix, SimConfig};
use crate::rng::{SimRng, Zipf};
use causeway_core::crdt::{ObjType, Update};
use causeway_core::{Key, TxnKind};

/// One step of a planned transaction.
#[derive(Clone, Debug)]
pub enum Step {
    Read(Key, ObjType),
    /// Several keys in one request (the final reads after quiescence).
    ReadMany(Vec<(Key, ObjType)>),
    Update(Key, Update),
}

/// The next transaction of a client: its kind and its steps.
#[derive(Clone, Debug)]
pub struct TxnPlan {
    pub kind: TxnKind,
    pub steps: Vec<Step>,
}

/// Which operations a transaction holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// Reads and updates, by `read_ratio`.
    Mixed,
    ReadOnly,
    WriteOnly,
}

pub struct Workload {
    zipf: Zipf,
    keys: u32,
    objects: ObjectMix,
    read_ratio: f64,
    strong_ratio: f64,
    read_only_ratio: f64,
    write_only_ratio: f64,
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
            strong_ratio: config.strong_ratio,
            read_only_ratio: config.read_only_ratio,
            write_only_ratio: config.write_only_ratio,
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

    /// The kind and steps of the next transaction.
    pub fn plan(&mut self, rng: &mut SimRng) -> TxnPlan {
        let (kind, shape) = self.draw_kind(rng);
        let steps = (0..self.txn_ops)
            .map(|_| {
                let index = self.zipf.sample(rng);
                let key = Workload::key(index);
                let obj = self.key_type(index);
                let read = match shape {
                    Shape::Mixed => rng.chance(self.read_ratio),
                    Shape::ReadOnly => true,
                    Shape::WriteOnly => false,
                };
                if read {
                    Step::Read(key, obj)
                } else {
                    Step::Update(key, self.update(obj, rng))
                }
            })
            .collect();
        TxnPlan { kind, steps }
    }

    /// Draws the transaction's kind and shape, from one uniform draw split by the ratios.
    fn draw_kind(&self, rng: &mut SimRng) -> (TxnKind, Shape) {
        let ratios = [
            self.strong_ratio,
            self.read_only_ratio,
            self.write_only_ratio,
        ];
        // No draw at all when every ratio is 0: runs without them replay draw for draw
        // (and keep their trace hashes).
        if ratios.iter().all(|r| *r <= 0.0) {
            return (TxnKind::Causal, Shape::Mixed);
        }
        let u = rng.unit();
        let shapes = [
            (TxnKind::Strong, Shape::Mixed),
            (TxnKind::Causal, Shape::ReadOnly),
            (TxnKind::Causal, Shape::WriteOnly),
        ];
        let mut bound = 0.0;
        for (ratio, shape) in ratios.into_iter().zip(shapes) {
            bound += ratio;
            if u < bound {
                return shape;
            }
        }
        (TxnKind::Causal, Shape::Mixed)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn plans(config: &SimConfig, n: usize) -> Vec<TxnPlan> {
        let mut w = Workload::new(config);
        let mut rng = SimRng::new(config.seed, 2);
        (0..n).map(|_| w.plan(&mut rng)).collect()
    }

    #[test]
    fn kinds_follow_the_ratios_and_shapes_hold_their_ops() {
        let c = SimConfig {
            strong_ratio: 0.2,
            read_only_ratio: 0.3,
            write_only_ratio: 0.1,
            ..SimConfig::default()
        };
        let ps = plans(&c, 4_000);
        let reads = |p: &TxnPlan| {
            p.steps
                .iter()
                .filter(|s| matches!(s, Step::Read(..)))
                .count()
        };
        let strong = ps.iter().filter(|p| p.kind == TxnKind::Strong).count();
        let causal: Vec<&TxnPlan> = ps.iter().filter(|p| p.kind == TxnKind::Causal).collect();
        let read_only = causal.iter().filter(|p| reads(p) == p.steps.len()).count();
        let write_only = causal.iter().filter(|p| reads(p) == 0).count();
        // Expected 800; 1200 plus the mixed ones that drew only reads (0.5^4 of 1600 =
        // 100); 400 plus as many mixed ones that drew only updates.
        assert!((700..900).contains(&strong), "strong {strong}");
        assert!((1180..1420).contains(&read_only), "read-only {read_only}");
        assert!((420..600).contains(&write_only), "write-only {write_only}");
    }

    #[test]
    fn without_ratios_the_draws_are_those_of_a_plain_mixed_workload() {
        let plain = SimConfig::default();
        let reads_only = SimConfig {
            read_only_ratio: 1.0,
            ..SimConfig::default()
        };
        let ps = plans(&plain, 50);
        assert!(ps.iter().all(|p| p.kind == TxnKind::Causal));
        // Same stream, same keys and ops as drawn op by op, no kind draw in between.
        let mut w = Workload::new(&plain);
        let mut rng = SimRng::new(plain.seed, 2);
        let first = ps[0]
            .steps
            .iter()
            .map(|s| format!("{s:?}"))
            .collect::<Vec<_>>();
        let index = w.zipf.sample(&mut rng);
        let by_hand = if rng.chance(plain.read_ratio) {
            Step::Read(Workload::key(index), w.key_type(index))
        } else {
            let obj = w.key_type(index);
            Step::Update(Workload::key(index), w.update(obj, &mut rng))
        };
        assert_eq!(first[0], format!("{by_hand:?}"));
        assert!(plans(&reads_only, 50)
            .iter()
            .all(|p| p.steps.iter().all(|s| matches!(s, Step::Read(..)))));
    }
}
