//! The closed-loop workload: what each simulated client's next transaction does. A family
//! (`SimConfig::workload`) picks the planner, one module each: `custom` (the ratio-driven
//! generator), `ycsb` (YCSB A/B/C on LWW registers) and `rubis` (the RUBiS bidding mix).
//! The clients see only `Workload::plan` and `Workload::all_keys`.
//!
//! Shared by the families: register values are unique per write (`v1`, `v2`, ...) so that a
//! read names the write it saw even without the op id, padded to `--value-bytes`; keys are
//! drawn by a `KeyPicker`, which with `--remote-ratio` takes a fraction of them from
//! another DC's home range (key index modulo `dcs`) instead of the client's own.
//!
//! Placement (custom and YCSB, [`Locality`]): under partial replication a local-DC
//! transaction (`--local-dc-ratio`, 1 by default) draws its keys only from partitions its
//! client's DC replicates, a multi-DC one from all partitions; with `--partitions-per-txn N`
//! a transaction's keys come from N distinct partitions, Zipf within each partition (PaRiS
//! §V-A). Under full replication with N = 0 there are no extra draws: runs replay as before.

pub(crate) mod custom;
pub mod rubis;
mod ycsb;

use crate::config::{SimConfig, WorkloadFamily};
use crate::rng::{SimRng, Zipf};
use causeway_core::crdt::ObjType;
use causeway_core::crdt::Update;
use causeway_core::{Key, PartitionId, TxnKind};

/// One step of a planned transaction.
#[derive(Clone, Debug)]
pub enum Step {
    Read(Key, ObjType),
    /// Several keys in one request (the final reads after quiescence, RUBiS page views).
    ReadMany(Vec<(Key, ObjType)>),
    Update(Key, Update),
}

/// The next transaction of a client: its kind, its steps and what it is (`custom`,
/// `ycsb`, or the RUBiS transaction's name).
#[derive(Clone, Debug)]
pub struct TxnPlan {
    pub kind: TxnKind,
    pub steps: Vec<Step>,
    pub name: &'static str,
}

impl TxnPlan {
    /// Whether any step updates.
    pub fn updates(&self) -> bool {
        self.steps.iter().any(|s| matches!(s, Step::Update(..)))
    }
}

/// The family's planner.
enum Planner {
    Custom(custom::Custom),
    Ycsb(ycsb::Ycsb),
    Rubis(rubis::Rubis),
}

pub struct Workload {
    planner: Planner,
    picker: KeyPicker,
    locality: Locality,
    values: Values,
    /// `SimConfig::merge_reads`.
    merge_reads: bool,
}

impl Workload {
    pub fn new(config: &SimConfig) -> Workload {
        let planner = match config.workload {
            WorkloadFamily::Custom => Planner::Custom(custom::Custom::new(config)),
            WorkloadFamily::YcsbA => Planner::Ycsb(ycsb::Ycsb::new(0.5, config.txn_ops)),
            WorkloadFamily::YcsbB => Planner::Ycsb(ycsb::Ycsb::new(0.95, config.txn_ops)),
            WorkloadFamily::YcsbC => Planner::Ycsb(ycsb::Ycsb::new(1.0, config.txn_ops)),
            WorkloadFamily::Rubis => Planner::Rubis(rubis::Rubis::new(config.rubis_scale)),
        };
        // RUBiS names its keys by table and row, not `k<i>`: placement does not steer them.
        let locality = match config.workload {
            WorkloadFamily::Rubis => Locality::off(),
            _ => Locality::new(config),
        };
        Workload {
            planner,
            picker: KeyPicker::new(config),
            locality,
            values: Values::new(config.value_bytes),
            merge_reads: config.merge_reads,
        }
    }

    pub fn key(index: u32) -> Key {
        Key::new(format!("k{index}"))
    }

    /// Every key with its type, for the final reads: `k0..kN` (custom, YCSB), the keys
    /// planned so far (RUBiS, whose tables are far larger than what a run touches).
    pub fn all_keys(&self) -> Vec<(Key, ObjType)> {
        match &self.planner {
            Planner::Custom(c) => (0..self.picker.keys)
                .map(|i| (Workload::key(i), c.key_type(i)))
                .collect(),
            Planner::Ycsb(_) => (0..self.picker.keys)
                .map(|i| (Workload::key(i), ObjType::Lww))
                .collect(),
            Planner::Rubis(r) => r.touched_keys(),
        }
    }

    /// The kind and steps of the next transaction of a client in DC `dc`.
    pub fn plan(&mut self, dc: u16, rng: &mut SimRng) -> TxnPlan {
        let (picker, values) = (&self.picker, &mut self.values);
        let keys = Keys {
            picker,
            locality: &self.locality,
        };
        let mut plan = match &mut self.planner {
            Planner::Custom(c) => c.plan(dc, &keys, values, rng),
            Planner::Ycsb(y) => y.plan(dc, &keys, values, rng),
            Planner::Rubis(r) => r.plan(dc, picker, values, rng),
        };
        if self.merge_reads {
            plan.steps = merged_reads(std::mem::take(&mut plan.steps));
        }
        plan
    }
}

/// `steps` with every run of two or more consecutive reads (`Read` or `ReadMany`) sent as
/// one `ReadMany`, in order, a key drawn twice asked twice (as `causeway load` sends them).
/// Updates and lone reads stay as they are.
fn merged_reads(steps: Vec<Step>) -> Vec<Step> {
    let mut out: Vec<Step> = Vec::with_capacity(steps.len());
    let mut reads: Vec<Step> = Vec::new();
    for step in steps {
        if matches!(step, Step::Update(..)) {
            out.extend(one_request(std::mem::take(&mut reads)));
            out.push(step);
        } else {
            reads.push(step);
        }
    }
    out.extend(one_request(reads));
    out
}

/// Consecutive read steps as one request: a lone step as it is, several as one `ReadMany`.
fn one_request(mut reads: Vec<Step>) -> Option<Step> {
    if reads.len() <= 1 {
        return reads.pop();
    }
    let mut keys = Vec::new();
    for step in reads {
        match step {
            Step::Read(key, obj) => keys.push((key, obj)),
            Step::ReadMany(many) => keys.extend(many),
            Step::Update(..) => unreachable!("only reads are gathered"),
        }
    }
    Some(Step::ReadMany(keys))
}

/// The key indexes of `0..config.keys` each partition holds under `config`'s topology,
/// ascending, one list per partition.
pub(crate) fn keys_by_partition(config: &SimConfig) -> Vec<Vec<u32>> {
    let topology = config.topology();
    let mut parts = vec![Vec::new(); config.partitions as usize];
    for i in 0..config.keys {
        parts[topology.partition_of(&Workload::key(i)).0 as usize].push(i);
    }
    parts
}

/// Key indexes with a Zipf table over them (rank 0 = the lowest index).
struct KeySet {
    keys: Vec<u32>,
    zipf: Zipf,
}

impl KeySet {
    /// `None` for an empty list (no key to draw).
    fn new(keys: Vec<u32>, s: f64) -> Option<KeySet> {
        let n = u32::try_from(keys.len()).ok().filter(|n| *n > 0)?;
        Some(KeySet {
            zipf: Zipf::new(n, s),
            keys,
        })
    }

    fn sample(&self, rng: &mut SimRng) -> u32 {
        self.keys[self.zipf.sample(rng) as usize]
    }
}

/// Which keys a transaction may take (see [`Locality::scope`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Any key, as the `KeyPicker` draws it (full replication, or a multi-DC transaction
    /// without `--partitions-per-txn`).
    Any,
    /// The keys of the partitions DC `.0` replicates (a local-DC transaction).
    Local(usize),
    /// The keys of these distinct partitions; operation `i` takes one of the
    /// `(i mod N)`-th's.
    Partitions(Vec<u32>),
}

/// Placement of a transaction's keys: local-DC or multi-DC (`SimConfig::local_dc_ratio`),
/// and on how many partitions (`SimConfig::partitions_per_txn`). Off (no tables, no draws)
/// unless the topology is partial with a positive local ratio, or N is set.
pub(crate) struct Locality {
    local_ratio: f64,
    per_txn: usize,
    partitions: usize,
    /// Per partition, its keys (`per_txn > 0` only, else empty).
    parts: Vec<Option<KeySet>>,
    /// Per DC, the partitions it replicates (empty when off).
    local_parts: Vec<Vec<u32>>,
    /// Per DC, the keys of its partitions, for local-DC transactions with `per_txn == 0`
    /// under partial replication; `None` for a DC that replicates every partition (its
    /// local keys are all keys: the picker draws them).
    local_keys: Vec<Option<KeySet>>,
}

/// Draws before the first key collision falls back to the partition's first unused key.
const DISTINCT_TRIES: usize = 32;

impl Locality {
    pub(crate) fn off() -> Locality {
        Locality {
            local_ratio: 1.0,
            per_txn: 0,
            partitions: 0,
            parts: Vec::new(),
            local_parts: Vec::new(),
            local_keys: Vec::new(),
        }
    }

    pub(crate) fn new(config: &SimConfig) -> Locality {
        let topology = config.topology();
        let partial = topology.replication_factor < topology.dcs;
        let per_txn = config.partitions_per_txn as usize;
        if per_txn == 0 && !(partial && config.local_dc_ratio > 0.0) {
            return Locality::off();
        }
        let by_partition = keys_by_partition(config);
        let local_parts: Vec<Vec<u32>> = topology
            .all_dcs()
            .map(|dc| {
                (0..config.partitions)
                    .filter(|p| topology.replicates(dc, PartitionId(*p)))
                    .collect()
            })
            .collect();
        let everything = |dc: usize| local_parts[dc].len() == config.partitions as usize;
        let local_keys = if per_txn == 0 {
            (0..local_parts.len())
                .map(|dc| {
                    if everything(dc) {
                        return None;
                    }
                    let mut keys: Vec<u32> = local_parts[dc]
                        .iter()
                        .flat_map(|p| by_partition[*p as usize].iter().copied())
                        .collect();
                    keys.sort_unstable();
                    KeySet::new(keys, config.zipf)
                })
                .collect()
        } else {
            Vec::new()
        };
        let parts = if per_txn > 0 {
            by_partition
                .into_iter()
                .map(|keys| KeySet::new(keys, config.zipf))
                .collect()
        } else {
            Vec::new()
        };
        Locality {
            local_ratio: config.local_dc_ratio,
            per_txn,
            partitions: config.partitions as usize,
            parts,
            local_parts,
            local_keys,
        }
    }

    /// Draws where the next transaction of a client in DC `dc` takes its keys: local-DC
    /// with probability `local_ratio` (no draw when the DC replicates every partition or
    /// the ratio is 0 or 1), then `per_txn` distinct partitions uniformly among the allowed
    /// ones. No draw at all when off.
    pub(crate) fn scope(&self, dc: u16, rng: &mut SimRng) -> Scope {
        if self.local_parts.is_empty() {
            return Scope::Any;
        }
        let dc = usize::from(dc);
        let everything = self.local_parts[dc].len() == self.partitions;
        let local = everything
            || self.local_ratio >= 1.0
            || (self.local_ratio > 0.0 && rng.chance(self.local_ratio));
        if self.per_txn == 0 {
            return if local && !everything {
                Scope::Local(dc)
            } else {
                Scope::Any
            };
        }
        let mut pool: Vec<u32> = if local {
            self.local_parts[dc].clone()
        } else {
            (0..self.partitions as u32).collect()
        };
        // A partial Fisher-Yates shuffle: the first `per_txn` are a uniform draw.
        let n = self.per_txn.min(pool.len());
        for i in 0..n {
            let j = rng.range(i as u64, pool.len() as u64) as usize;
            pool.swap(i, j);
        }
        pool.truncate(n);
        Scope::Partitions(pool)
    }

    /// A key index for operation `op` of a transaction in `scope`.
    fn key(&self, scope: &Scope, op: usize, picker: &KeyPicker, dc: u16, rng: &mut SimRng) -> u32 {
        match scope {
            Scope::Any => picker.pick(dc, rng),
            Scope::Local(d) => self.local_keys[*d]
                .as_ref()
                .expect("validated: every DC with local-DC transactions stores a key")
                .sample(rng),
            Scope::Partitions(ps) => self.part(ps[op % ps.len()]).sample(rng),
        }
    }

    fn part(&self, p: u32) -> &KeySet {
        self.parts[p as usize]
            .as_ref()
            .expect("validated: every partition holds keys under --partitions-per-txn")
    }

    /// Like [`Locality::key`] but not one of `used`: redrawn on a collision, and after
    /// [`DISTINCT_TRIES`] the partition's first unused key (or the last draw when the
    /// scope has no unused one, which validation rules out for `Partitions`).
    fn distinct_key(
        &self,
        scope: &Scope,
        op: usize,
        used: &[u32],
        picker: &KeyPicker,
        dc: u16,
        rng: &mut SimRng,
    ) -> u32 {
        let mut key = self.key(scope, op, picker, dc, rng);
        for _ in 1..DISTINCT_TRIES {
            if !used.contains(&key) {
                return key;
            }
            key = self.key(scope, op, picker, dc, rng);
        }
        if let Scope::Partitions(ps) = scope {
            let part = self.part(ps[op % ps.len()]);
            if let Some(k) = part.keys.iter().find(|k| !used.contains(k)) {
                key = *k;
            }
        }
        key
    }
}

/// What a planner draws keys with: the picker and the placement.
pub(crate) struct Keys<'a> {
    pub(crate) picker: &'a KeyPicker,
    pub(crate) locality: &'a Locality,
}

impl Keys<'_> {
    pub(crate) fn scope(&self, dc: u16, rng: &mut SimRng) -> Scope {
        self.locality.scope(dc, rng)
    }

    /// A key index for operation `op` of a transaction of DC `dc` in `scope`.
    pub(crate) fn pick(&self, scope: &Scope, op: usize, dc: u16, rng: &mut SimRng) -> u32 {
        self.locality.key(scope, op, self.picker, dc, rng)
    }

    /// Like [`Keys::pick`], avoiding the indexes in `used`.
    pub(crate) fn pick_distinct(
        &self,
        scope: &Scope,
        op: usize,
        used: &[u32],
        dc: u16,
        rng: &mut SimRng,
    ) -> u32 {
        self.locality
            .distinct_key(scope, op, used, self.picker, dc, rng)
    }
}

/// Unique register values, padded to `value_bytes`.
pub(crate) struct Values {
    /// Counter making register values unique across the run.
    next: u64,
    pad_to: usize,
}

impl Values {
    fn new(value_bytes: u32) -> Values {
        Values {
            next: 0,
            pad_to: value_bytes as usize,
        }
    }

    /// `v<n>` then `.` up to `pad_to` bytes: the digits end at the first `.`, so padded
    /// values stay as unique as the counter (a longer counter is never cut).
    pub(crate) fn next(&mut self) -> Vec<u8> {
        self.next += 1;
        let mut value = format!("v{}", self.next).into_bytes();
        if value.len() < self.pad_to {
            value.resize(self.pad_to, b'.');
        }
        value
    }
}

/// Draws key indexes: Zipf over `0..keys`, or, with a remote ratio, Zipf within one DC's
/// home range (`index % dcs == home`), the client's own unless a remote draw says another.
pub(crate) struct KeyPicker {
    keys: u32,
    dcs: u32,
    remote_ratio: f64,
    all: Zipf,
    /// One table per home DC; empty when `remote_ratio` is 0 (no extra draws then).
    homes: Vec<Zipf>,
}

impl KeyPicker {
    fn new(config: &SimConfig) -> KeyPicker {
        let dcs = u32::from(config.dcs);
        let homes = if config.remote_ratio > 0.0 {
            (0..dcs)
                .map(|h| Zipf::new(home_size(config.keys, dcs, h), config.zipf))
                .collect()
        } else {
            Vec::new()
        };
        KeyPicker {
            keys: config.keys,
            dcs,
            remote_ratio: config.remote_ratio,
            all: Zipf::new(config.keys, config.zipf),
            homes,
        }
    }

    /// A skewed key index for a client in DC `dc`.
    pub(crate) fn pick(&self, dc: u16, rng: &mut SimRng) -> u32 {
        if self.homes.is_empty() {
            return self.all.sample(rng);
        }
        let home = self.home(dc, rng);
        home + self.homes[home as usize].sample(rng) * self.dcs
    }

    /// A uniform index in `0..n` homed by the same rule (RUBiS users and items).
    pub(crate) fn pick_uniform(&self, n: u32, dc: u16, rng: &mut SimRng) -> u32 {
        if self.homes.is_empty() || n < self.dcs {
            return rng.range(0, u64::from(n)) as u32;
        }
        let home = self.home(dc, rng);
        let rank = rng.range(0, u64::from(home_size(n, self.dcs, home))) as u32;
        home + rank * self.dcs
    }

    /// The client's own DC, or with probability `remote_ratio` one of the others.
    fn home(&self, dc: u16, rng: &mut SimRng) -> u32 {
        let own = u32::from(dc) % self.dcs;
        if !rng.chance(self.remote_ratio) {
            return own;
        }
        let other = rng.range(0, u64::from(self.dcs - 1)) as u32;
        if other >= own {
            other + 1
        } else {
            other
        }
    }

    /// The DC whose home range holds key `index`.
    #[cfg(test)]
    pub(crate) fn home_of(&self, index: u32) -> u32 {
        index % self.dcs
    }
}

/// How many of `0..n` are homed at `home` (`i % dcs == home`); `n >= dcs` keeps it >= 1.
fn home_size(n: u32, dcs: u32, home: u32) -> u32 {
    (n - home).div_ceil(dcs)
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn plans(config: &SimConfig, n: usize) -> Vec<TxnPlan> {
        let mut w = Workload::new(config);
        let mut rng = SimRng::new(config.seed, 2);
        (0..n).map(|i| w.plan((i % 3) as u16, &mut rng)).collect()
    }

    fn keys_of(step: &Step) -> Vec<Key> {
        match step {
            Step::Read(k, _) | Step::Update(k, _) => vec![k.clone()],
            Step::ReadMany(keys) => keys.iter().map(|(k, _)| k.clone()).collect(),
        }
    }

    #[test]
    fn merged_reads_send_each_run_of_reads_as_one_request_in_order() {
        let read = |i| Step::Read(Workload::key(i), ObjType::Lww);
        let write = |i| Step::Update(Workload::key(i), Update::Assign(b"x".to_vec()));
        let steps = vec![
            read(1),
            read(2),
            read(1),
            write(3),
            read(4),
            write(5),
            read(6),
        ];
        let merged = merged_reads(steps);
        let shapes: Vec<(&str, Vec<Key>)> = merged
            .iter()
            .map(|s| {
                let kind = match s {
                    Step::Read(..) => "read",
                    Step::ReadMany(..) => "many",
                    Step::Update(..) => "update",
                };
                (kind, keys_of(s))
            })
            .collect();
        let k = Workload::key;
        assert_eq!(
            shapes,
            vec![
                ("many", vec![k(1), k(2), k(1)]),
                ("update", vec![k(3)]),
                ("read", vec![k(4)]),
                ("update", vec![k(5)]),
                ("read", vec![k(6)]),
            ],
            "a key drawn twice is asked twice; a lone read stays a read"
        );
    }

    #[test]
    fn merge_reads_keeps_the_draws_and_only_regroups_them() {
        let base = SimConfig {
            workload: WorkloadFamily::YcsbA,
            keys: 5,
            ..SimConfig::default()
        };
        let merged = SimConfig {
            merge_reads: true,
            ..base.clone()
        };
        let (a, b) = (plans(&base, 200), plans(&merged, 200));
        let mut repeated = 0;
        for (x, y) in a.iter().zip(&b) {
            let flat = |p: &TxnPlan| p.steps.iter().flat_map(keys_of).collect::<Vec<_>>();
            assert_eq!(flat(x), flat(y), "same keys in the same order");
            assert!(y.steps.len() <= x.steps.len());
            for s in &y.steps {
                if let Step::ReadMany(keys) = s {
                    let distinct: std::collections::BTreeSet<_> = keys.iter().collect();
                    repeated += usize::from(distinct.len() < keys.len());
                }
            }
        }
        assert!(repeated > 0, "over 5 keys some request asks a key twice");
    }

    #[test]
    fn values_are_padded_to_value_bytes_and_stay_unique() {
        let mut v = Values::new(64);
        let xs: Vec<Vec<u8>> = (0..200).map(|_| v.next()).collect();
        assert!(xs.iter().all(|x| x.len() == 64));
        let distinct: std::collections::BTreeSet<_> = xs.iter().collect();
        assert_eq!(distinct.len(), xs.len());
        assert_eq!(Values::new(0).next(), b"v1".to_vec(), "unpadded by default");
        let c = SimConfig {
            workload: WorkloadFamily::YcsbA,
            value_bytes: 100,
            ..SimConfig::default()
        };
        let assigned = plans(&c, 50)
            .iter()
            .flat_map(|p| p.steps.clone())
            .filter_map(|s| match s {
                Step::Update(_, Update::Assign(v)) => Some(v.len()),
                _ => None,
            })
            .collect::<Vec<_>>();
        assert!(!assigned.is_empty() && assigned.iter().all(|n| *n == 100));
    }

    #[test]
    fn remote_ratio_takes_that_fraction_of_keys_from_other_homes() {
        let c = SimConfig {
            workload: WorkloadFamily::YcsbC,
            remote_ratio: 0.25,
            keys: 300,
            ..SimConfig::default()
        };
        let picker = KeyPicker::new(&c);
        let mut rng = SimRng::new(3, 2);
        let remote = (0..4_000)
            .filter(|_| picker.home_of(picker.pick(1, &mut rng)) != 1)
            .count();
        assert!((850..1150).contains(&remote), "remote {remote} of 4000");
        let local = SimConfig {
            remote_ratio: 0.0,
            ..c.clone()
        };
        let picker = KeyPicker::new(&local);
        // Without a remote ratio keys come from every home, as before.
        let homes: std::collections::BTreeSet<u32> = (0..100)
            .map(|_| picker.home_of(picker.pick(1, &mut rng)))
            .collect();
        assert_eq!(homes.len(), 3);
    }
}
