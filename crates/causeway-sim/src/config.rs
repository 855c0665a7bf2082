//! Simulation parameters: topology, workload, faults, latencies. Every field has a default
//! that reproduces the default topology of the docs (3 DCs: N. Virginia, Oregon, Ireland).

use causeway_check::ConflictRelation;
use causeway_core::clock::Nanos;
use causeway_core::topology::{paris_rtt_ms, Topology};
use causeway_core::DcId;
use causeway_protocols::{Guarantee, Params};
use serde::Serialize;

/// Fault kinds the simulator can inject.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum FaultKind {
    Partitions,
    Crashes,
    Skew,
    Slow,
    DcFailure,
    /// One DC cut from every other for most of the fault phase, then healed: with the
    /// protocol's horizons set short (`--set silent_sibling_ns=...`), an outage far longer
    /// than every timeout and GC horizon. Not part of `all`, so `all` plans stay as drawn.
    LongOutage,
    /// `long-outage` whose heal drops what the cut links held instead of delivering it
    /// (the senders' connections were reset and their link queues lost, as in a real
    /// outage longer than the link queues): the protocols' catch-up must recover it,
    /// by state transfer where the logs dropped it. Not part of `all` either.
    LongOutageLossy,
    /// Some links between two nodes of one DC delay every message for a while (a
    /// connection retransmitting): a node's message to another can then arrive after a
    /// later one that went through a third party (a coordinator's commit to a partition
    /// overtaken by the client's next request to that partition). Not part of `all`, so
    /// `all` plans stay as drawn.
    SlowLinks,
}

impl FaultKind {
    pub const ALL: [FaultKind; 5] = [
        FaultKind::Partitions,
        FaultKind::Crashes,
        FaultKind::Skew,
        FaultKind::Slow,
        FaultKind::DcFailure,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Partitions => "partitions",
            FaultKind::Crashes => "crashes",
            FaultKind::Skew => "skew",
            FaultKind::Slow => "slow",
            FaultKind::DcFailure => "dc-failure",
            FaultKind::LongOutage => "long-outage",
            FaultKind::LongOutageLossy => "long-outage-lossy",
            FaultKind::SlowLinks => "slow-links",
        }
    }
}

/// Which faults a run may draw: none, exactly one kind, or `all` (swarm testing: each seed
/// enables a random non-empty subset of kinds).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum FaultSel {
    None,
    One(FaultKind),
    All,
}

impl FaultSel {
    pub fn parse(text: &str) -> Result<FaultSel, String> {
        match text {
            "none" => Ok(FaultSel::None),
            "all" => Ok(FaultSel::All),
            "long-outage" => Ok(FaultSel::One(FaultKind::LongOutage)),
            "long-outage-lossy" => Ok(FaultSel::One(FaultKind::LongOutageLossy)),
            "slow-links" => Ok(FaultSel::One(FaultKind::SlowLinks)),
            _ => FaultKind::ALL.iter().find(|k| k.name() == text).map(|k| FaultSel::One(*k)).ok_or_else(|| {
                format!("unknown fault kind '{text}'; use none|partitions|crashes|skew|slow|dc-failure|long-outage|long-outage-lossy|slow-links|all")
            }),
        }
    }
}

pub use causeway_core::topology::{DC_NAMES, PARIS_RTT_MS};

/// Object types the workload puts on keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum ObjectMix {
    Lww,
    Counter,
    Set,
    MvReg,
    /// Redis hashes (`ObjType::Hash`).
    Hash,
    /// Redis lists (`ObjType::List`).
    List,
    /// Redis sorted sets (`ObjType::ZSet`).
    ZSet,
    /// Key i holds the (i mod 6)th type of `ObjType::ALL`: registers, counters, sets,
    /// multi-value registers, hashes and lists.
    Mixed,
    /// As `Mixed`, with registers that count (Redis strings): a register update assigns a
    /// decimal integer or increments it (`Update::RegisterIncrement`). Not the default, so
    /// default runs keep their trace hashes.
    Strings,
    /// As `Mixed`, where a few updates free a key and write it with another type (a key
    /// freed by `DEL` takes any type again: `Update::Part`), or delete such a part. Not the
    /// default, so default runs keep their trace hashes.
    Retype,
}

impl ObjectMix {
    pub fn parse(text: &str) -> Result<ObjectMix, String> {
        match text {
            "lww" => Ok(ObjectMix::Lww),
            "counter" => Ok(ObjectMix::Counter),
            "set" => Ok(ObjectMix::Set),
            "mvreg" => Ok(ObjectMix::MvReg),
            "mixed" => Ok(ObjectMix::Mixed),
            "hash" => Ok(ObjectMix::Hash),
            "list" => Ok(ObjectMix::List),
            "zset" => Ok(ObjectMix::ZSet),
            "strings" => Ok(ObjectMix::Strings),
            "retype" => Ok(ObjectMix::Retype),
            _ => Err(format!(
                "unknown object type '{text}'; use lww|counter|set|mvreg|hash|list|zset|mixed|strings|retype"
            )),
        }
    }
}

/// Which generator plans the transactions (`--workload`); see `workload`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum WorkloadFamily {
    /// The ratio-driven generator (`--read-ratio`, `--objects`, kind ratios).
    Custom,
    /// YCSB core workloads on LWW registers: A 50/50, B 95/5, C read-only.
    YcsbA,
    YcsbB,
    YcsbC,
    /// The RUBiS bidding mix (UniStore §8.1).
    Rubis,
}

impl WorkloadFamily {
    pub fn parse(text: &str) -> Result<WorkloadFamily, String> {
        match text {
            "custom" => Ok(WorkloadFamily::Custom),
            "ycsb-a" => Ok(WorkloadFamily::YcsbA),
            "ycsb-b" => Ok(WorkloadFamily::YcsbB),
            "ycsb-c" => Ok(WorkloadFamily::YcsbC),
            "rubis" => Ok(WorkloadFamily::Rubis),
            _ => Err(format!(
                "unknown --workload '{text}'; use custom|ycsb-a|ycsb-b|ycsb-c|rubis"
            )),
        }
    }

    /// The Zipf exponent when `--zipf` is not given: YCSB's 0.99, else today's 0.8.
    pub fn default_zipf(self) -> f64 {
        match self {
            WorkloadFamily::YcsbA | WorkloadFamily::YcsbB | WorkloadFamily::YcsbC => 0.99,
            WorkloadFamily::Custom | WorkloadFamily::Rubis => 0.8,
        }
    }
}

/// `barrier_ratio` of a protocol with uniform barriers, unless set.
pub const BARRIER_RATIO_DEFAULT: f64 = 0.05;
/// `migrate_ratio` of a protocol with uniform barriers, unless set.
pub const MIGRATE_RATIO_DEFAULT: f64 = 0.02;

/// Largest `--value-bytes`: a register value stays a small message payload.
pub const VALUE_BYTES_MAX: u32 = 1 << 20;
/// Largest `--rubis-scale` (10 000 users, 50 000 items).
pub const RUBIS_SCALE_MAX: u32 = 100;
/// Most sample names `SimConfig::samples_by_dc` may keep per DC.
pub const SAMPLES_BY_DC_MAX: usize = 16;

#[derive(Clone, Debug, Serialize)]
pub struct SimConfig {
    pub protocol: String,
    pub seed: u64,
    pub dcs: u16,
    pub nodes_per_dc: u32,
    pub partitions: u32,
    /// DCs holding each partition, in 1..=dcs; `None` = `dcs` (full replication).
    pub replication_factor: Option<u16>,
    pub clients_per_dc: u32,
    pub keys: u32,
    pub zipf: f64,
    pub read_ratio: f64,
    /// Fraction of transactions that are strong (mixed reads and updates).
    pub strong_ratio: f64,
    /// Fraction of strong transactions whose first key is one of partition 0's (the
    /// designated partition of UniStore Fig. 4's contended variant); custom workload only.
    pub hot_partition_ratio: f64,
    /// Fraction of transactions that only read.
    pub read_only_ratio: f64,
    /// Fraction of transactions that only update.
    pub write_only_ratio: f64,
    pub txn_ops: u32,
    pub objects: ObjectMix,
    /// The transaction generator; `Custom` is driven by the ratios above.
    pub workload: WorkloadFamily,
    /// Register values are padded to at least this many bytes (0: unpadded).
    pub value_bytes: u32,
    /// Fraction of keys a transaction takes from another DC's home range (key index
    /// modulo `dcs`) instead of its own DC's; 0 draws keys over all of them as before.
    pub remote_ratio: f64,
    /// Under partial replication, the fraction of transactions that are local-DC: they
    /// touch only partitions the client's DC replicates; the others (multi-DC) draw from
    /// all partitions, so they may touch partitions only other DCs store (PaRiS §V-A's
    /// local-DC:multi-DC ratio). 1 by default (every transaction local-DC); no effect under
    /// full replication, where every partition is local. Custom and YCSB workloads only.
    pub local_dc_ratio: f64,
    /// When nonzero, a transaction's keys come from this many distinct partitions (drawn
    /// uniformly among the client DC's own for a local-DC transaction, else among all),
    /// operation `i` on the `(i mod N)`-th, Zipf (`zipf`) over that partition's keys; YCSB
    /// transactions then take PaRiS's shape: exactly `round(txn_ops x read share)` reads on
    /// distinct keys in one parallel request, then the writes. 0 (default): keys are drawn
    /// one by one as before. Custom and YCSB workloads only.
    pub partitions_per_txn: u32,
    /// Send a transaction's consecutive reads as one request (`Step::ReadMany`), as
    /// `causeway load` does, so a key drawn twice is asked twice in one request. Off by
    /// default: runs replay as before. It found no bug of its own yet; it would have
    /// caught PaRiS's coordinator aborting such a request (fixed in the thirty-eighth
    /// session), through the rule that a fault-free run aborts no causal transaction.
    pub merge_reads: bool,
    /// RUBiS database size: 100 x scale users, 500 x scale items.
    pub rubis_scale: u32,
    /// Fraction of committed transactions after which the client asks for a uniform
    /// barrier (`Request::Barrier`); `None`: [`BARRIER_RATIO_DEFAULT`] for protocols with
    /// uniform barriers, 0 otherwise. Only protocols with uniform barriers take a nonzero one.
    pub barrier_ratio: Option<f64>,
    /// Fraction of committed transactions after which the client moves to another
    /// surviving DC: `Token`, `Barrier`, then `Attach` on a new protocol session there
    /// (its history session stays the same); `None`: [`MIGRATE_RATIO_DEFAULT`] for
    /// protocols with uniform barriers, 0 otherwise.
    pub migrate_ratio: Option<f64>,
    /// Length of the fault phase, during which clients run.
    pub duration_ms: u64,
    /// Length of the heal-and-quiesce phase before the final reads.
    pub quiesce_ms: u64,
    pub faults: FaultSel,
    pub think_time_ns: Nanos,
    /// Draw each think time from an exponential distribution of mean `think_time_ns`, and
    /// start each client at a uniform time within the first think time (RUBiS's negative
    /// exponential think times). Off by default: fixed think times, clients starting
    /// within the first millisecond (with a long fixed think time they then run in
    /// synchronized waves).
    pub think_time_exponential: bool,
    /// Clients start at uniform times within this many ms (0: within the first
    /// millisecond; `think_time_exponential` spreads them over a think time instead).
    /// Closed-loop clients without think time that all start at once stay in lock-step
    /// at saturation: their txns finish in waves a latency apart (PaRiS at 4096
    /// clients/DC committed 190,000 txn/s in one 100 ms and 1,000 in the next), so a
    /// window of a few waves measures the phase, not the rate.
    pub start_spread_ms: u64,
    pub intra_dc_one_way_ns: Nanos,
    /// One-way latency between DCs; `None` = half the PaRiS matrix (100 ms for DCs past 5).
    pub inter_dc_one_way_ms: Option<Vec<Vec<f64>>>,
    /// Jitter as a fraction of the link latency.
    pub jitter: f64,
    /// (node, extra one-way ns) for every message a node of another DC sends that node:
    /// its replication is slowed, its clients' requests are not (Occult §8.3, Fig. 8).
    pub slow_replication: Vec<(u32, Nanos)>,
    /// (nodes per DC, extra one-way ns): slows, as `slow_replication` does, the replication
    /// into the slave nodes of each DC with the most read load (Occult §8.3, Fig. 8c: hot
    /// nodes slowed in decreasing order of load): a node's load is the Zipf weight of the
    /// keys it holds as a slave (not in the partition's master DC) under the protocol's
    /// placement (`causeway_protocols::Protocol::partition_of_key`; `faults::hot_nodes`).
    pub slow_hot_replication: Option<(u32, Nanos)>,
    /// (nodes per DC, extra one-way ns): as `slow_hot_replication`, the slave nodes of
    /// each DC with the least read load (Occult §8.3, Fig. 8a/8b: tail nodes, whose masters
    /// have spare capacity; `faults::tail_nodes`).
    pub slow_tail_replication: Option<(u32, Nanos)>,
    /// A fixed clock offset per DC in ms (index = DC), added to any drawn skew: NTP-synced
    /// DCs whose clocks differ (Occult §5, §8.2.1: South Carolina about 22 ms ahead).
    pub dc_clock_offsets_ms: Vec<f64>,
    pub params: Params,
    /// The protocol's config section (`[protocol.NAME]`); `Null` means its defaults.
    pub section: serde_json::Value,
    /// Check against this guarantee instead of the protocol's own (a stronger one shows
    /// a baseline violates it: `eventual` against TCC).
    pub guarantee: Option<Guarantee>,
    /// Which strong transactions conflict, for the PoR check (`--conflicts`): `default`
    /// (ad-hoc: a common written key, or a key one reads and the other writes), `rubis`,
    /// or rules `TYPE TYPE PATTERN; ...` (see `causeway_check::conflict`). `None`: `rubis`
    /// under the RUBiS workload, else `default`. See [`SimConfig::conflict_relation`].
    pub conflicts: Option<String>,
    /// Call every machine's `check_invariants` after every input (on by default).
    pub check_invariants: bool,
    /// A history larger than the checker takes (`CHECK_TXNS_MAX`) is not checked instead
    /// of failing the run (load experiments; invariants and liveness checks still run).
    pub allow_unchecked: bool,
    /// The CPU model (off by default; experiments turn it on).
    pub cpu: crate::cpu::CpuModel,
    /// Record a trace hash (cheap) — always on; kept as a knob for very long runs.
    pub trace: bool,
    /// Names of node samples also kept per DC of the node that reported them, raw, in
    /// `SimResult::samples_by_dc` (and summarized in `samples` as `NAME@dcN`). Empty by
    /// default: only the experiments that need a per-DC distribution (UniStore Fig. 6)
    /// pay for the copy.
    pub samples_by_dc: Vec<String>,
    /// Node samples reported in the first `sample_warmup_ms` of virtual time are dropped
    /// (replication and stabilization pipelines still filling; the papers drop their
    /// runs' first minute). 0 by default: every sample is kept.
    pub sample_warmup_ms: u64,
    /// Once a node's durable records reach this many, its next quiescent moment replaces
    /// them with the machine's checkpoint (`ServerNode::checkpoint`, log compaction), so a
    /// restart recovers from the checkpoint plus the records after it, as on a real node.
    /// Small by default so that crashes in every sweep recover from checkpoints; 0 turns
    /// it off (protocols without checkpoints are unaffected either way).
    pub checkpoint_records: usize,
}

/// Default [`SimConfig::checkpoint_records`].
pub const CHECKPOINT_RECORDS_DEFAULT: usize = 256;

impl Default for SimConfig {
    fn default() -> SimConfig {
        SimConfig {
            protocol: "eventual".into(),
            seed: 1,
            dcs: 3,
            nodes_per_dc: 2,
            partitions: 4,
            replication_factor: None,
            clients_per_dc: 4,
            keys: 50,
            zipf: 0.8,
            read_ratio: 0.5,
            strong_ratio: 0.0,
            hot_partition_ratio: 0.0,
            read_only_ratio: 0.0,
            write_only_ratio: 0.0,
            txn_ops: 4,
            objects: ObjectMix::Mixed,
            workload: WorkloadFamily::Custom,
            value_bytes: 0,
            remote_ratio: 0.0,
            local_dc_ratio: 1.0,
            partitions_per_txn: 0,
            merge_reads: false,
            rubis_scale: 1,
            barrier_ratio: None,
            migrate_ratio: None,
            duration_ms: 3_000,
            quiesce_ms: 3_000,
            faults: FaultSel::None,
            think_time_ns: 1_000_000,
            think_time_exponential: false,
            start_spread_ms: 0,
            intra_dc_one_way_ns: 250_000,
            inter_dc_one_way_ms: None,
            jitter: 0.1,
            params: Params::default(),
            section: serde_json::Value::Null,
            guarantee: None,
            conflicts: None,
            check_invariants: true,
            allow_unchecked: false,
            cpu: crate::cpu::CpuModel::default(),
            trace: true,
            samples_by_dc: Vec::new(),
            sample_warmup_ms: 0,
            checkpoint_records: CHECKPOINT_RECORDS_DEFAULT,
            slow_replication: Vec::new(),
            slow_hot_replication: None,
            slow_tail_replication: None,
            dc_clock_offsets_ms: Vec::new(),
        }
    }
}

impl SimConfig {
    /// One-way latency from DC `a` to DC `b`, without jitter.
    pub fn one_way_ns(&self, a: u16, b: u16) -> Nanos {
        if a == b {
            return self.intra_dc_one_way_ns;
        }
        let ms = match &self.inter_dc_one_way_ms {
            Some(m) => m[usize::from(a)][usize::from(b)],
            None => paris_rtt_ms(DcId(a), DcId(b)) / 2.0,
        };
        (ms * 1e6) as Nanos
    }

    /// Each ratio in [0, 1]; the kinds of transactions are exclusive, so theirs sum to at
    /// most 1.
    fn validate_ratios(&self) -> Result<(), String> {
        let kinds = [
            ("--strong-ratio", self.strong_ratio),
            ("--read-only-ratio", self.read_only_ratio),
            ("--write-only-ratio", self.write_only_ratio),
        ];
        let all = [("--read-ratio", self.read_ratio)].into_iter().chain(kinds);
        for (name, ratio) in all {
            if !(0.0..=1.0).contains(&ratio) {
                return Err(format!("{name} must be between 0 and 1, not {ratio}"));
            }
        }
        let sum: f64 = kinds.iter().map(|(_, r)| r).sum();
        // A little slack for decimal fractions that do not add up exactly in binary.
        if sum > 1.0 + 1e-9 {
            return Err(format!(
                "--strong-ratio + --read-only-ratio + --write-only-ratio must be at most 1, not {sum}"
            ));
        }
        Ok(())
    }

    /// The workload family's own options: value size, remote ratio, RUBiS scale; the
    /// kind ratios belong to the custom generator only (the families fix their kinds).
    fn validate_family(&self) -> Result<(), String> {
        if self.value_bytes > VALUE_BYTES_MAX {
            return Err(format!("--value-bytes must be at most {VALUE_BYTES_MAX}"));
        }
        if !(1..=RUBIS_SCALE_MAX).contains(&self.rubis_scale) {
            return Err(format!(
                "--rubis-scale must be between 1 and {RUBIS_SCALE_MAX}, not {}",
                self.rubis_scale
            ));
        }
        let r = self.remote_ratio;
        if !(0.0..=1.0).contains(&r) {
            return Err(format!("--remote-ratio must be between 0 and 1, not {r}"));
        }
        if r > 0.0 && self.dcs < 2 {
            return Err("--remote-ratio needs at least 2 DCs (--dcs)".into());
        }
        if r > 0.0 && self.keys < u32::from(self.dcs) {
            return Err("--remote-ratio needs at least one key per DC (--keys >= --dcs)".into());
        }
        let hot = self.hot_partition_ratio;
        if !(0.0..=1.0).contains(&hot) {
            return Err(format!(
                "the hot-partition ratio must be between 0 and 1, not {hot}"
            ));
        }
        if hot > 0.0 && crate::workload::custom::hot_keys(self).is_empty() {
            return Err("the hot-partition ratio needs a key on partition 0 (more --keys)".into());
        }
        let kinds = self.strong_ratio + self.read_only_ratio + self.write_only_ratio + hot;
        if self.workload != WorkloadFamily::Custom && kinds > 0.0 {
            return Err(
                "--strong-ratio, --read-only-ratio and --write-only-ratio apply to --workload custom only"
                    .into(),
            );
        }
        Ok(())
    }

    /// Placement of transactions (`local_dc_ratio`, `partitions_per_txn`): the ratio in
    /// [0, 1], N within the partitions and the operations, every partition holding enough
    /// keys for N, every DC with local-DC transactions replicating enough partitions.
    fn validate_locality(&self) -> Result<(), String> {
        let (ratio, n) = (self.local_dc_ratio, self.partitions_per_txn);
        if !(0.0..=1.0).contains(&ratio) {
            return Err(format!(
                "--local-dc-ratio must be between 0 and 1, not {ratio}"
            ));
        }
        let topology = self.topology();
        let partial = topology.replication_factor < topology.dcs;
        let placed = n > 0 || ratio < 1.0;
        if placed && self.workload == WorkloadFamily::Rubis {
            return Err(
                "--local-dc-ratio and --partitions-per-txn apply to --workload custom and ycsb-* only"
                    .into(),
            );
        }
        // RUBiS ignores placement (refused above when asked for); the others use tables
        // of keys by partition when N is set or local-DC transactions are partial.
        let needs_tables =
            self.workload != WorkloadFamily::Rubis && (n > 0 || (partial && ratio > 0.0));
        if self.remote_ratio > 0.0 && needs_tables {
            return Err(
                "--remote-ratio draws keys by DC home ranges under full replication; with \
                 --partitions-per-txn, or local-DC transactions under a --replication-factor \
                 below --dcs, use --local-dc-ratio"
                    .into(),
            );
        }
        if n > self.partitions {
            return Err(format!(
                "--partitions-per-txn {n} exceeds --partitions ({})",
                self.partitions
            ));
        }
        if n > self.txn_ops {
            return Err(format!(
                "--partitions-per-txn {n} needs at least {n} operations per transaction, not --txn-ops {}",
                self.txn_ops
            ));
        }
        if !needs_tables {
            return Ok(());
        }
        let by_partition = crate::workload::keys_by_partition(self);
        if n > 0 {
            // Operation i goes to the (i mod N)-th partition: at most ceil(ops / N) each,
            // on distinct keys (YCSB), so every partition must hold that many.
            let per_part = self.txn_ops.div_ceil(n) as usize;
            if let Some((p, keys)) = by_partition
                .iter()
                .enumerate()
                .find(|(_, keys)| keys.len() < per_part)
            {
                return Err(format!(
                    "--partitions-per-txn {n} with --txn-ops {} takes up to {per_part} distinct keys \
                     from each partition, but partition {p} holds only {} of the {} --keys; raise --keys",
                    self.txn_ops,
                    keys.len(),
                    self.keys
                ));
            }
        }
        if ratio == 0.0 {
            return Ok(());
        }
        for dc in topology.all_dcs() {
            let local: Vec<usize> = (0..self.partitions)
                .filter(|p| topology.replicates(dc, causeway_core::PartitionId(*p)))
                .map(|p| p as usize)
                .collect();
            if local.len() < n as usize {
                return Err(format!(
                    "--partitions-per-txn {n}: DC {} replicates only {} of the {} partitions \
                     (replication factor {}), too few for its local-DC transactions; lower \
                     --partitions-per-txn, raise --partitions or set --local-dc-ratio 0",
                    dc.0,
                    local.len(),
                    self.partitions,
                    topology.replication_factor
                ));
            }
            if local.iter().all(|p| by_partition[*p].is_empty()) {
                return Err(format!(
                    "DC {} replicates no partition holding a key, so it cannot run local-DC \
                     transactions; raise --keys or --partitions, or set --local-dc-ratio 0",
                    dc.0
                ));
            }
        }
        Ok(())
    }

    /// Whether the protocol answers uniform barriers (false for an unknown protocol).
    pub(crate) fn has_barriers(&self) -> bool {
        causeway_protocols::entry(&self.protocol).is_ok_and(|e| e.requirements().uniform_barrier)
    }

    /// Whether clients may move to another DC: with a barrier first, or with the token
    /// alone (`Requirements::token_moves`).
    fn has_moves(&self) -> bool {
        self.has_barriers()
            || causeway_protocols::entry(&self.protocol).is_ok_and(|e| e.requirements().token_moves)
    }

    /// The barrier ratio in effect (the protocol's default unless set).
    pub fn barrier_ratio(&self) -> f64 {
        let default = if self.has_barriers() {
            BARRIER_RATIO_DEFAULT
        } else {
            0.0
        };
        self.barrier_ratio.unwrap_or(default)
    }

    /// The migration ratio in effect (the protocol's default unless set).
    pub fn migrate_ratio(&self) -> f64 {
        let default = if self.has_moves() {
            MIGRATE_RATIO_DEFAULT
        } else {
            0.0
        };
        self.migrate_ratio.unwrap_or(default)
    }

    /// Barriers and migrations: ratios in [0, 1] summing to at most 1, and only for a
    /// protocol with uniform barriers.
    fn validate_barriers(&self) -> Result<(), String> {
        let (b, m) = (self.barrier_ratio(), self.migrate_ratio());
        let allowed = [self.has_barriers(), self.has_moves()];
        for ((name, r), ok) in [("--barrier-ratio", b), ("--migrate-ratio", m)]
            .into_iter()
            .zip(allowed)
        {
            if !(0.0..=1.0).contains(&r) {
                return Err(format!("{name} must be between 0 and 1, not {r}"));
            }
            if r > 0.0 && !ok {
                return Err(format!(
                    "{name} needs a protocol with uniform barriers (unistore) or token moves (occult), not {}",
                    self.protocol
                ));
            }
        }
        if b + m > 1.0 + 1e-9 {
            return Err(format!(
                "--barrier-ratio + --migrate-ratio must be at most 1, not {}",
                b + m
            ));
        }
        Ok(())
    }

    /// The conflict relation of the PoR check: `conflicts` parsed, or the workload's
    /// default (RUBiS's declared relation under `--workload rubis`, else ad-hoc).
    pub fn conflict_relation(&self) -> Result<ConflictRelation, String> {
        match self.conflicts.as_deref() {
            Some(text) => ConflictRelation::parse(text).map_err(|e| format!("--conflicts: {e}")),
            None if self.workload == WorkloadFamily::Rubis => Ok(ConflictRelation::rubis()),
            None => Ok(ConflictRelation::ad_hoc()),
        }
    }

    /// The cluster's shape: full replication unless `replication_factor` says otherwise.
    pub fn topology(&self) -> Topology {
        let factor = self.replication_factor.unwrap_or(self.dcs);
        Topology::partial(self.dcs, self.nodes_per_dc, self.partitions, factor)
    }

    /// Rejects configurations the simulator cannot run, naming the field.
    pub fn validate(&self) -> Result<(), String> {
        self.cpu.validate()?;
        let positive = [
            ("--dcs", u64::from(self.dcs)),
            ("--nodes-per-dc", u64::from(self.nodes_per_dc)),
            ("--partitions", u64::from(self.partitions)),
            ("--keys", u64::from(self.keys)),
            ("--txn-ops", u64::from(self.txn_ops)),
            ("--duration-ms", self.duration_ms),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(format!("{name} must be at least 1"));
        }
        let limits = [
            ("--dcs", u64::from(self.dcs), 16),
            ("--keys", u64::from(self.keys), 1_000_000),
        ];
        if let Some((name, _, max)) = limits.iter().find(|(_, v, max)| v > max) {
            return Err(format!("{name} must be at most {max}"));
        }
        if let Some(r) = self
            .replication_factor
            .filter(|r| !(1..=self.dcs).contains(r))
        {
            return Err(format!(
                "--replication-factor must be between 1 and --dcs ({}), not {r}",
                self.dcs
            ));
        }
        self.validate_ratios()?;
        self.validate_family()?;
        self.validate_locality()?;
        self.validate_barriers()?;
        self.conflict_relation()?;
        if self.samples_by_dc.len() > SAMPLES_BY_DC_MAX {
            return Err(format!(
                "at most {SAMPLES_BY_DC_MAX} sample names may be kept per DC"
            ));
        }
        if !(0.0..=5.0).contains(&self.zipf) {
            return Err("--zipf must be between 0 and 5".into());
        }
        for (name, slowed) in [
            ("slow_hot_replication", self.slow_hot_replication),
            ("slow_tail_replication", self.slow_tail_replication),
        ] {
            if let Some((n, _)) = slowed.filter(|(n, _)| *n > self.nodes_per_dc) {
                return Err(format!(
                    "{name} slows {n} nodes per DC of {}",
                    self.nodes_per_dc
                ));
            }
        }
        if let Some(m) = &self.inter_dc_one_way_ms {
            let n = usize::from(self.dcs);
            if m.len() != n || m.iter().any(|row| row.len() != n) {
                return Err(format!("the latency matrix must be {n}x{n}"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_core::PartitionId;

    #[test]
    fn the_replication_factor_defaults_to_dcs_and_is_validated() {
        let mut c = SimConfig {
            dcs: 5,
            ..SimConfig::default()
        };
        assert_eq!(c.topology().replication_factor, 5, "full by default");
        c.replication_factor = Some(2);
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(c.topology().replicas_of(PartitionId(4)).len(), 2);
        for bad in [0, 6] {
            c.replication_factor = Some(bad);
            let e = c.validate().expect_err("out of range");
            assert!(e.contains("--replication-factor"), "{e}");
        }
    }

    #[test]
    fn placement_options_are_validated_with_what_to_change() {
        // PaRiS's default: 5 DCs, factor 2, 19 + 1 operations over 4 partitions.
        let paris = SimConfig {
            workload: WorkloadFamily::YcsbB,
            dcs: 5,
            partitions: 45,
            replication_factor: Some(2),
            keys: 10_000,
            txn_ops: 20,
            partitions_per_txn: 4,
            local_dc_ratio: 0.95,
            ..SimConfig::default()
        };
        assert_eq!(paris.validate(), Ok(()));
        let err = |c: SimConfig| c.validate().expect_err("refused");
        let e = err(SimConfig {
            local_dc_ratio: -0.1,
            ..paris.clone()
        });
        assert!(
            e.starts_with("--local-dc-ratio must be between 0 and 1"),
            "{e}"
        );
        let e = err(SimConfig {
            partitions_per_txn: 46,
            txn_ops: 50,
            ..paris.clone()
        });
        assert!(e.contains("exceeds --partitions (45)"), "{e}");
        let e = err(SimConfig {
            txn_ops: 3,
            ..paris.clone()
        });
        assert!(e.contains("needs at least 4 operations"), "{e}");
        let e = err(SimConfig {
            keys: 100,
            ..paris.clone()
        });
        assert!(
            e.contains("distinct keys") && e.contains("raise --keys"),
            "{e}"
        );
        // 5 DCs, 5 partitions, factor 2: each DC stores 2 partitions, too few for 4 local.
        let few = SimConfig {
            partitions: 5,
            ..paris.clone()
        };
        let e = err(few.clone());
        assert!(
            e.contains("DC 0 replicates only 2 of the 5 partitions") && e.contains("local-DC"),
            "{e}"
        );
        // All multi-DC: no local partitions needed.
        assert_eq!(
            SimConfig {
                local_dc_ratio: 0.0,
                ..few
            }
            .validate(),
            Ok(())
        );
        let e = err(SimConfig {
            remote_ratio: 0.3,
            ..paris.clone()
        });
        assert!(e.starts_with("--remote-ratio"), "{e}");
        let e = err(SimConfig {
            workload: WorkloadFamily::Rubis,
            ..paris.clone()
        });
        assert!(e.contains("custom and ycsb-* only"), "{e}");
        // Without N, partial replication still needs a key stored in every DC.
        let e = err(SimConfig {
            partitions: 2,
            replication_factor: Some(1),
            partitions_per_txn: 0,
            ..paris.clone()
        });
        assert!(
            e.contains("DC 2 replicates no partition holding a key"),
            "{e}"
        );
        // Full replication ignores the local ratio.
        let full = SimConfig {
            replication_factor: None,
            partitions: 5,
            ..paris
        };
        assert_eq!(full.validate(), Ok(()));
    }

    #[test]
    fn transaction_kind_ratios_are_validated_naming_the_flag() {
        let ok = SimConfig {
            strong_ratio: 0.3,
            read_only_ratio: 0.3,
            write_only_ratio: 0.4,
            ..SimConfig::default()
        };
        assert_eq!(ok.validate(), Ok(()));
        let e = SimConfig {
            read_only_ratio: 1.5,
            ..SimConfig::default()
        }
        .validate()
        .expect_err("above 1");
        assert!(e.starts_with("--read-only-ratio"), "{e}");
        let e = SimConfig {
            write_only_ratio: f64::NAN,
            ..SimConfig::default()
        }
        .validate()
        .expect_err("not a number");
        assert!(e.starts_with("--write-only-ratio"), "{e}");
        let e = SimConfig {
            strong_ratio: 0.6,
            read_only_ratio: 0.5,
            ..SimConfig::default()
        }
        .validate()
        .expect_err("sum above 1");
        assert!(e.contains("--strong-ratio + --read-only-ratio"), "{e}");
    }

    #[test]
    fn a_protocol_that_needs_full_replication_refuses_a_smaller_factor() {
        let c = SimConfig {
            protocol: "cure".into(),
            replication_factor: Some(2),
            ..SimConfig::default()
        };
        let e = crate::run(&c).expect_err("refused, not run");
        assert!(e.contains("cure needs full replication"), "{e}");
    }

    #[test]
    fn barriers_and_moves_default_by_protocol_and_are_validated() {
        let uni = SimConfig {
            protocol: "unistore".into(),
            ..SimConfig::default()
        };
        assert_eq!(uni.barrier_ratio(), BARRIER_RATIO_DEFAULT);
        assert_eq!(uni.migrate_ratio(), MIGRATE_RATIO_DEFAULT);
        let cure = SimConfig {
            protocol: "cure".into(),
            ..SimConfig::default()
        };
        assert_eq!((cure.barrier_ratio(), cure.migrate_ratio()), (0.0, 0.0));
        let e = SimConfig {
            barrier_ratio: Some(0.1),
            ..cure.clone()
        }
        .validate()
        .expect_err("cure has no uniform barriers");
        assert!(
            e.starts_with("--barrier-ratio needs a protocol with uniform barriers"),
            "{e}"
        );
        let e = SimConfig {
            migrate_ratio: Some(0.7),
            barrier_ratio: Some(0.5),
            ..uni.clone()
        }
        .validate()
        .expect_err("sum above 1");
        assert!(e.contains("--barrier-ratio + --migrate-ratio"), "{e}");
        let e = SimConfig {
            migrate_ratio: Some(-0.1),
            ..uni
        }
        .validate()
        .expect_err("negative");
        assert!(
            e.starts_with("--migrate-ratio must be between 0 and 1"),
            "{e}"
        );
    }

    #[test]
    fn the_conflict_relation_defaults_by_workload_and_is_validated() {
        let custom = SimConfig::default();
        assert_eq!(custom.conflict_relation(), Ok(ConflictRelation::ad_hoc()));
        let rubis = SimConfig {
            workload: WorkloadFamily::Rubis,
            ..SimConfig::default()
        };
        assert_eq!(rubis.conflict_relation(), Ok(ConflictRelation::rubis()));
        let given = |text: &str, workload| SimConfig {
            conflicts: Some(text.into()),
            workload,
            ..SimConfig::default()
        };
        // An explicit relation wins over the workload's.
        let adhoc = given("default", WorkloadFamily::Rubis);
        assert_eq!(adhoc.conflict_relation(), Ok(ConflictRelation::ad_hoc()));
        assert_eq!(adhoc.validate(), Ok(()));
        let rules = given("custom custom {}; a b items/{}/*", WorkloadFamily::Custom);
        let rel = rules.conflict_relation().expect("two rules");
        assert_eq!(rel.rules().len(), 2);
        assert_eq!(rel.to_string(), "custom custom {}; a b items/{}/*");
        assert_eq!(
            given("rubis", WorkloadFamily::Custom).conflict_relation(),
            Ok(ConflictRelation::rubis())
        );
        for bad in ["", "a b", "a b items/*", "a b c d"] {
            let e = given(bad, WorkloadFamily::Custom)
                .validate()
                .expect_err("refused");
            assert!(e.starts_with("--conflicts: "), "{bad}: {e}");
        }
    }
}
