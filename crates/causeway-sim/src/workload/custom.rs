//! The custom family (the default): keys `k0..kN` drawn with Zipf skew, key `i`'s object
//! type from the object mix. A transaction is strong with probability `strong_ratio`,
//! read-only with `read_only_ratio`, write-only with `write_only_ratio`, else causal and
//! mixed (a strong one is mixed too): in a mixed transaction each operation is a read with
//! probability `read_ratio`, else an update. A strong transaction's update is a
//! read-modify-write: a read of the key comes first unless the transaction already touched
//! it (strong transactions then form checkable PoR chains; contend with few `--keys` or a
//! high `--zipf`). With `hot_partition_ratio` set, that fraction of strong transactions
//! takes its first key from the keys of partition 0, the designated partition (UniStore
//! Fig. 4's contended variant). Its draws are exactly those of the generator
//! before the families existed, so default runs keep their trace hashes. Placement
//! (`--local-dc-ratio`, `--partitions-per-txn`, see `Locality`) steers operation `i`'s key;
//! the operations keep their one-by-one shape (keys may repeat).

use super::{Keys, Step, TxnPlan, Values, Workload};
use crate::config::{ObjectMix, SimConfig};
use crate::rng::SimRng;
use causeway_core::crdt::{ObjType, Update};
use causeway_core::{Key, TxnKind};

/// Which operations a transaction holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// Reads and updates, by `read_ratio`.
    Mixed,
    ReadOnly,
    WriteOnly,
}

pub(crate) struct Custom {
    objects: ObjectMix,
    read_ratio: f64,
    strong_ratio: f64,
    read_only_ratio: f64,
    write_only_ratio: f64,
    txn_ops: u32,
    /// `SimConfig::hot_partition_ratio`.
    hot_ratio: f64,
    /// The key indexes of partition 0, when `hot_ratio` is positive (else empty).
    hot_keys: Vec<u32>,
}

/// The indexes in `0..keys` of the keys that partition 0 holds under `config`'s topology.
pub(crate) fn hot_keys(config: &SimConfig) -> Vec<u32> {
    let topology = config.topology();
    (0..config.keys)
        .filter(|i| topology.partition_of(&Workload::key(*i)).0 == 0)
        .collect()
}

/// Set elements are drawn from a small domain so adds and removes collide.
const SET_ELEMENTS: u64 = 4;
/// The types of `--objects mixed`: the first six of `ObjType::ALL`.
const MIXED_TYPES: usize = 6;
/// Hash fields too; the first half only take `HSET`s and `HDEL`s (the checker then
/// judges their values), the others `HINCRBY`s as well.
const HASH_FIELDS: u64 = 4;

/// Under `--objects retype`, the fraction of updates that retype their key or delete a
/// part of another type instead ([`retype`]).
const RETYPE_RATIO: f64 = 0.04;

impl Custom {
    pub(crate) fn new(config: &SimConfig) -> Custom {
        Custom {
            objects: config.objects,
            read_ratio: config.read_ratio,
            strong_ratio: config.strong_ratio,
            read_only_ratio: config.read_only_ratio,
            write_only_ratio: config.write_only_ratio,
            txn_ops: config.txn_ops,
            hot_ratio: config.hot_partition_ratio,
            hot_keys: if config.hot_partition_ratio > 0.0 {
                hot_keys(config)
            } else {
                Vec::new()
            },
        }
    }

    pub(crate) fn key_type(&self, index: u32) -> ObjType {
        match self.objects {
            ObjectMix::Lww => ObjType::Lww,
            ObjectMix::Counter => ObjType::Counter,
            ObjectMix::Set => ObjType::Set,
            ObjectMix::MvReg => ObjType::MvReg,
            ObjectMix::Hash => ObjType::Hash,
            ObjectMix::List => ObjType::List,
            ObjectMix::ZSet => ObjType::ZSet,
            // The first six types: sorted sets run alone (`--objects zset`), so mixed
            // runs keep their trace hashes.
            ObjectMix::Mixed | ObjectMix::Strings | ObjectMix::Retype => {
                ObjType::ALL[(index % MIXED_TYPES as u32) as usize]
            }
        }
    }

    pub(crate) fn plan(
        &self,
        dc: u16,
        keys: &Keys<'_>,
        values: &mut Values,
        rng: &mut SimRng,
    ) -> TxnPlan {
        let (kind, shape) = self.draw_kind(rng);
        let scope = keys.scope(dc, rng);
        let mut steps = Vec::with_capacity(self.txn_ops as usize);
        // No draw unless the option is on and the txn strong: other runs replay as before.
        let mut hot =
            kind == TxnKind::Strong && !self.hot_keys.is_empty() && rng.chance(self.hot_ratio);
        for op in 0..self.txn_ops as usize {
            let index = if hot {
                hot = false;
                self.hot_keys[rng.range(0, self.hot_keys.len() as u64) as usize]
            } else {
                keys.pick(&scope, op, dc, rng)
            };
            let key = Workload::key(index);
            let obj = self.key_type(index);
            let read = match shape {
                Shape::Mixed => rng.chance(self.read_ratio),
                Shape::ReadOnly => true,
                Shape::WriteOnly => false,
            };
            if read {
                steps.push(Step::Read(key, obj));
                continue;
            }
            // A strong update is a read-modify-write: the key is read first (unless the
            // transaction already touched it), so that the PoR check sees which version
            // each strong write replaced. No extra draw: causal plans are unchanged.
            if kind == TxnKind::Strong && !touches(&steps, &key) {
                steps.push(Step::Read(key.clone(), obj));
            }
            // No draw unless the mix retypes: other runs replay as before.
            if self.objects == ObjectMix::Retype && rng.chance(RETYPE_RATIO) {
                retype(&mut steps, key, obj, values, rng);
                continue;
            }
            let counting = self.objects == ObjectMix::Strings;
            steps.push(Step::Update(key, update(obj, counting, values, rng)));
        }
        TxnPlan {
            kind,
            steps,
            name: "custom",
        }
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
}

/// Whether a step so far reads or updates `key`.
fn touches(steps: &[Step], key: &Key) -> bool {
    steps.iter().any(|s| match s {
        Step::Read(k, _) | Step::Update(k, _) => k == key,
        Step::ReadMany(keys) => keys.iter().any(|(k, _)| k == key),
    })
}

/// An update of an `obj` key. Every update takes a value number, registers or not, as the
/// generator always did (the numbers, hence the messages, stay those of earlier runs).
/// A `counting` register (`--objects strings`) is assigned the value number in decimal or
/// incremented, as a Redis string is by `SET` and `INCRBY`.
fn update(obj: ObjType, counting: bool, values: &mut Values, rng: &mut SimRng) -> Update {
    let unique = values.next();
    match obj {
        ObjType::Lww if counting => {
            if rng.chance(0.6) {
                Update::RegisterIncrement(rng.range(1, 6) as i64 - 2)
            } else {
                let digits = unique[1..].iter().take_while(|b| b.is_ascii_digit());
                Update::Assign(digits.copied().collect())
            }
        }
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
        ObjType::Hash => hash_update(&unique, rng),
        ObjType::List => list_update(unique, rng),
        ObjType::ZSet => zset_update(rng),
    }
}

/// A `ZADD` (of a small integer score), `ZINCRBY` or `ZREM` of one or two of
/// [`SET_ELEMENTS`] members.
fn zset_update(rng: &mut SimRng) -> Update {
    let member = |rng: &mut SimRng| format!("m{}", rng.range(0, SET_ELEMENTS)).into_bytes();
    match rng.range(0, 10) {
        0..=4 => Update::ZAdd {
            member: member(rng),
            score: (rng.range(0, 8) as f64).to_bits(),
        },
        5..=6 => Update::ZIncrement {
            member: member(rng),
            delta: (rng.range(1, 6) as f64 - 2.5).to_bits(),
        },
        _ => Update::ZRemove {
            members: (0..rng.range(1, 3)).map(|_| member(rng)).collect(),
        },
    }
}

/// An `LPUSH` or `RPUSH` of one or two values (distinct across the run, so the checker
/// judges the order), or an `LPOP` or `RPOP` of one or two elements.
fn list_update(unique: Vec<u8>, rng: &mut SimRng) -> Update {
    let left = rng.chance(0.5);
    if rng.chance(0.4) {
        return Update::ListPop {
            left,
            count: rng.range(1, 3),
        };
    }
    let n = rng.range(1, 3);
    let values = (0..n)
        .map(|i| {
            let mut v = unique.clone();
            v.extend_from_slice(format!(".{i}").as_bytes());
            v
        })
        .collect();
    Update::ListPush { left, values }
}

/// An `HSET` (of a decimal value, so an `HINCRBY` of the field is not refused),
/// `HINCRBY` or `HDEL` of one of [`HASH_FIELDS`] fields.
fn hash_update(unique: &[u8], rng: &mut SimRng) -> Update {
    let n = rng.range(0, HASH_FIELDS);
    let field = format!("f{n}").into_bytes();
    let counts = n >= HASH_FIELDS / 2;
    let draw = rng.range(0, 10);
    match draw {
        0..=4 => {
            let digits = unique[1..].iter().take_while(|b| b.is_ascii_digit());
            Update::HashSet {
                field,
                value: digits.copied().collect(),
            }
        }
        5..=7 if counts => Update::HashIncrement {
            field,
            delta: rng.range(1, 6) as i64 - 2,
        },
        _ => Update::HashRemove { field },
    }
}

/// Instead of an update of a key of type `home` (`--objects retype`), one of:
/// - (30%) a retype: `DEL` of the key ([`delete`] of its own type; none for a counter, which
///   shows nothing at 0), then a write of another type (`Update::Part`);
/// - (70%) a `DEL` of the key's part of another type.
///
/// The planner does not know what the key shows: a `DEL` of a type it does not show is
/// refused with `WRONGTYPE`, and the transaction aborts, as it does for a plain update
/// of a key that shows another type. Counters are never a part (their `DEL` needs the
/// value read).
fn retype(steps: &mut Vec<Step>, key: Key, home: ObjType, values: &mut Values, rng: &mut SimRng) {
    let others: Vec<ObjType> = [ObjType::Lww, ObjType::Set, ObjType::MvReg]
        .into_iter()
        .filter(|t| *t != home)
        .collect();
    let t = others[rng.range(0, others.len() as u64) as usize];
    let part = |update: Update| Update::Part {
        key_type: home,
        update: Box::new(update),
    };
    // Mostly deletes: a retyped key refuses every plain update until its part is deleted.
    if rng.chance(0.7) {
        for u in delete(t) {
            steps.push(Step::Update(key.clone(), part(u)));
        }
        return;
    }
    if home != ObjType::Counter {
        for u in delete(home) {
            steps.push(Step::Update(key.clone(), u));
        }
    }
    let fill = match t {
        ObjType::Set => Update::Add(format!("e{}", rng.range(0, SET_ELEMENTS)).into_bytes()),
        ObjType::MvReg => Update::MvAssign(values.next()),
        _ => Update::Assign(values.next()),
    };
    steps.push(Step::Update(key, part(fill)));
}

/// The updates of a `DEL` of an object of type `t` (not a counter): a register assigned
/// the tombstone (`causeway_core::crdt::TOMBSTONE`, as RESP's `DEL` does), every element
/// of a set removed.
fn delete(t: ObjType) -> Vec<Update> {
    let tombstone = causeway_core::crdt::TOMBSTONE.to_vec();
    match t {
        ObjType::Lww => vec![Update::Assign(tombstone)],
        ObjType::MvReg => vec![Update::MvAssign(tombstone)],
        ObjType::Set => (0..SET_ELEMENTS)
            .map(|e| Update::Remove(format!("e{e}").into_bytes()))
            .collect(),
        ObjType::Hash => (0..HASH_FIELDS)
            .map(|f| Update::HashRemove {
                field: format!("f{f}").into_bytes(),
            })
            .collect(),
        // Every element observed, as RESP's `DEL` pops them.
        ObjType::List => vec![Update::ListPop {
            left: true,
            count: causeway_core::limits::LIST_ELEMS_MAX as u64,
        }],
        ObjType::ZSet => vec![Update::ZRemove {
            members: (0..SET_ELEMENTS)
                .map(|e| format!("m{e}").into_bytes())
                .collect(),
        }],
        ObjType::Counter => unreachable!("a counter's DEL needs its value"),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::plans;
    use super::*;

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
        let custom = Custom::new(&plain);
        let picker = super::super::KeyPicker::new(&plain);
        let mut values = Values::new(0);
        let mut rng = SimRng::new(plain.seed, 2);
        let index = crate::rng::Zipf::new(plain.keys, plain.zipf).sample(&mut rng);
        let obj = custom.key_type(index);
        let by_hand = if rng.chance(plain.read_ratio) {
            Step::Read(Workload::key(index), obj)
        } else {
            Step::Update(
                Workload::key(index),
                update(obj, false, &mut values, &mut rng),
            )
        };
        assert_eq!(format!("{:?}", ps[0].steps[0]), format!("{by_hand:?}"));
        assert!(
            picker.homes.is_empty(),
            "no home tables without a remote ratio"
        );
        assert!(plans(&reads_only, 50)
            .iter()
            .all(|p| p.steps.iter().all(|s| matches!(s, Step::Read(..)))));
    }

    #[test]
    fn the_hot_fraction_of_strong_txns_starts_on_partition_0() {
        let c = SimConfig {
            strong_ratio: 0.5,
            hot_partition_ratio: 0.2,
            partitions: 16,
            keys: 10_000,
            zipf: 0.0,
            ..SimConfig::default()
        };
        let topology = c.topology();
        let first_on_0 = |p: &TxnPlan| match &p.steps[0] {
            Step::Read(k, _) | Step::Update(k, _) => topology.partition_of(k).0 == 0,
            Step::ReadMany(_) => false,
        };
        let ps = plans(&c, 8_000);
        let (strong, causal): (Vec<&TxnPlan>, Vec<&TxnPlan>) =
            ps.iter().partition(|p| p.kind == TxnKind::Strong);
        let hot = strong.iter().filter(|p| first_on_0(p)).count() as f64;
        // 20% by choice plus 1/16 of the other 80% by chance.
        let expected = 0.2 + 0.8 / 16.0;
        let share = hot / strong.len() as f64;
        assert!((share - expected).abs() < 0.03, "strong share {share}");
        let share = causal.iter().filter(|p| first_on_0(p)).count() as f64 / causal.len() as f64;
        assert!((share - 1.0 / 16.0).abs() < 0.02, "causal share {share}");
        assert!(hot_keys(&c).len() > 500, "about 1/16 of the keys");
    }

    #[test]
    fn placement_steers_custom_keys_to_local_partitions_and_n_of_them() {
        let c = SimConfig {
            dcs: 5,
            partitions: 10,
            replication_factor: Some(2),
            keys: 500,
            txn_ops: 6,
            partitions_per_txn: 3,
            ..SimConfig::default()
        };
        assert_eq!(c.validate(), Ok(()));
        let t = c.topology();
        let mut w = Workload::new(&c);
        let mut rng = SimRng::new(c.seed, 2);
        for i in 0..2_000 {
            let dc = (i % 5) as u16;
            let p = w.plan(dc, &mut rng);
            let parts: Vec<_> = p
                .steps
                .iter()
                .map(|s| match s {
                    Step::Read(k, _) | Step::Update(k, _) => t.partition_of(k),
                    Step::ReadMany(_) => panic!("custom reads one key per step"),
                })
                .collect();
            // Op i on the (i mod 3)-th partition: 3 distinct ones, each twice.
            assert_eq!(parts.len(), 6);
            assert_eq!(&parts[..3], &parts[3..]);
            let distinct: std::collections::BTreeSet<_> = parts.iter().collect();
            assert_eq!(distinct.len(), 3);
            assert!(parts
                .iter()
                .all(|p| t.replicates(causeway_core::DcId(dc), *p)));
        }
    }

    #[test]
    fn strong_updates_read_their_key_first() {
        let c = SimConfig {
            strong_ratio: 1.0,
            read_ratio: 0.3,
            keys: 5,
            ..SimConfig::default()
        };
        let ps = plans(&c, 500);
        let mut updates = 0;
        for p in &ps {
            assert_eq!(p.kind, TxnKind::Strong);
            for (i, step) in p.steps.iter().enumerate() {
                if let Step::Update(k, _) = step {
                    updates += 1;
                    assert!(
                        touches(&p.steps[..i], k),
                        "{k} updated before it was read: {:?}",
                        p.steps
                    );
                }
            }
        }
        assert!(updates > 500, "updates {updates}");
    }

    /// `--objects retype`: a few updates retype their key (a `DEL` of its own type, then a
    /// write of another type) or delete a part of another type; `mixed` has none.
    #[test]
    fn retype_frees_keys_and_writes_them_with_another_type() {
        let c = SimConfig {
            objects: ObjectMix::Retype,
            read_ratio: 0.0,
            ..SimConfig::default()
        };
        let (mut retypes, mut part_dels, mut updates) = (0, 0, 0);
        for p in plans(&c, 2_000) {
            for (i, step) in p.steps.iter().enumerate() {
                let Step::Update(k, u) = step else { continue };
                updates += 1;
                let Update::Part { key_type, update } = u else {
                    continue;
                };
                let index: u32 = k.to_string()[1..].parse().unwrap();
                assert_eq!(*key_type, Custom::new(&c).key_type(index));
                assert_ne!(update.obj_type(), *key_type, "a part of another type");
                let tombstone = causeway_core::crdt::TOMBSTONE;
                match update.as_ref() {
                    Update::Assign(v) | Update::MvAssign(v) if v == tombstone => part_dels += 1,
                    Update::Remove(_) => part_dels += 1,
                    _ => {
                        retypes += 1;
                        // The DEL of the key's own type comes first (a counter has none).
                        let before = &p.steps[..i];
                        assert!(
                            *key_type == ObjType::Counter
                                || matches!(before.last(), Some(Step::Update(b, _)) if b == k),
                            "{:?}",
                            p.steps
                        );
                    }
                }
            }
        }
        assert!(
            retypes > 50 && part_dels > 50,
            "{retypes} {part_dels} of {updates}"
        );
        let mixed = plans(&SimConfig::default(), 2_000);
        assert!(mixed
            .iter()
            .flat_map(|p| &p.steps)
            .all(|s| !matches!(s, Step::Update(_, Update::Part { .. }))));
    }

    /// `--objects strings`: the register keys of the mixed layout are assigned decimal
    /// integers and incremented; the other keys draw as in `mixed`.
    #[test]
    fn strings_assign_integers_and_increment_registers() {
        let c = SimConfig {
            objects: ObjectMix::Strings,
            read_ratio: 0.0,
            ..SimConfig::default()
        };
        let (mut assigns, mut incs) = (0, 0);
        for p in plans(&c, 400) {
            for s in &p.steps {
                match s {
                    Step::Update(_, Update::Assign(v)) => {
                        assert!(causeway_core::crdt::decimal(v).is_some(), "{v:?}");
                        assigns += 1;
                    }
                    Step::Update(_, Update::RegisterIncrement(d)) => {
                        assert!((-1..=3).contains(d));
                        incs += 1;
                    }
                    _ => {}
                }
            }
        }
        assert!(
            assigns > 50 && incs > assigns,
            "{assigns} assigns, {incs} increments"
        );
    }
}
