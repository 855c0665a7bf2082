//! The fault plan of a seed: which faults it draws (swarm testing: with `--faults all` each
//! seed enables a random non-empty subset of kinds) and when they strike during the fault
//! phase. The plan is plain data, drawn up front from its own random stream: the per-node
//! clock skew (offset and drift) the world sets at boot, and a list of timed events (cut,
//! heal, crash, restart, slow node, slowed link, DC failure) that the world queues and
//! applies when their time comes (`World::apply_fault`). Nothing here touches the world,
//! so the plan can be printed (`describe`) and replayed. Partitions heal and crashed nodes
//! restart before the heal-and-quiesce phase; a failed DC never returns.

use crate::config::{FaultKind, FaultSel, SimConfig};
use crate::rng::SimRng;
use crate::world::T0;
use causeway_core::clock::Nanos;
use causeway_core::Topology;

/// Each DC's slave nodes with the read load the workload puts on them as slaves, heaviest
/// first: a key's node in a DC that replicates its partition without being the partition's
/// master DC (`Topology::master_of`) holds it as a slave (Occult §8.3 slows the
/// replication into slave nodes: a master applies its own writes, so slowing the
/// replication into it delays none of them). A key's load is its Zipf weight (`k_i` is
/// drawn in proportion to `1 / (i + 1)^zipf`), found under the protocol's placement
/// (`Entry::partition_of_key`). Ties go to the lower node id.
fn slaves_by_load(config: &SimConfig) -> Result<Vec<Vec<u32>>, String> {
    let entry = causeway_protocols::entry(&config.protocol)?;
    let topology = config.topology();
    let mut load: Vec<std::collections::BTreeMap<u32, f64>> =
        vec![Default::default(); usize::from(config.dcs)];
    for index in 0..config.keys {
        let key = crate::workload::Workload::key(index);
        let partition = entry.partition_of_key(&config.section, &topology, &key)?;
        let weight = (f64::from(index) + 1.0).powf(-config.zipf);
        let master = topology.master_of(partition);
        for dc in topology
            .replicas_of(partition)
            .into_iter()
            .filter(|d| *d != master)
        {
            let node = topology.node_of(dc, partition).0;
            *load[usize::from(dc.0)].entry(node).or_insert(0.0) += weight;
        }
    }
    Ok(load
        .into_iter()
        .map(|nodes| {
            let mut nodes: Vec<(u32, f64)> = nodes.into_iter().collect();
            nodes.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            nodes.into_iter().map(|(n, _)| n).collect()
        })
        .collect())
}

/// The `per_dc` slave nodes of each DC with the most read load ([`slaves_by_load`]), in
/// decreasing order of load (Occult §8.3, Fig. 8c: "in decreasing order of load, starting
/// from the hottest node"); fewer where a DC has fewer slave nodes.
pub fn hot_nodes(config: &SimConfig, per_dc: u32) -> Result<Vec<u32>, String> {
    assert!(per_dc <= config.nodes_per_dc, "more hot nodes than nodes");
    let by_dc = slaves_by_load(config)?;
    let take = |nodes: Vec<u32>| nodes.into_iter().take(per_dc as usize);
    Ok(by_dc.into_iter().flat_map(take).collect())
}

/// The `per_dc` slave nodes of each DC with the least read load ([`slaves_by_load`]),
/// the lightest first: Occult §8.3's tail nodes, whose masters have spare capacity.
pub fn tail_nodes(config: &SimConfig, per_dc: u32) -> Result<Vec<u32>, String> {
    assert!(per_dc <= config.nodes_per_dc, "more tail nodes than nodes");
    let by_dc = slaves_by_load(config)?;
    let take = |nodes: Vec<u32>| nodes.into_iter().rev().take(per_dc as usize);
    Ok(by_dc.into_iter().flat_map(take).collect())
}

/// `SimConfig::slow_replication` with `slow_hot_replication`'s nodes ([`hot_nodes`]) and
/// `slow_tail_replication`'s ([`tail_nodes`]) added: the (node, extra one-way ns) the
/// network slows.
pub fn slowed_replication(config: &SimConfig) -> Result<Vec<(u32, Nanos)>, String> {
    let mut slowed = config.slow_replication.clone();
    if let Some((per_dc, extra_ns)) = config.slow_hot_replication {
        let hot = hot_nodes(config, per_dc)?;
        slowed.extend(hot.into_iter().map(|n| (n, extra_ns)));
    }
    if let Some((per_dc, extra_ns)) = config.slow_tail_replication {
        let tail = tail_nodes(config, per_dc)?;
        slowed.extend(tail.into_iter().map(|n| (n, extra_ns)));
    }
    Ok(slowed)
}

/// Largest clock offset drawn for a node, either way.
const SKEW_OFFSET_MAX_NS: u64 = 50_000_000;
/// Largest clock drift drawn for a node, either way, in parts per million.
const SKEW_DRIFT_MAX_PPM: u64 = 200;

/// How many DCs a plan may fail: one for a protocol that promises nothing about DC
/// failures (or tolerates none); for one that tolerates `f` (UniStore), at most `f` (what
/// its barriers survive) and at most `dcs - f - 1` (the survivors must still number f+1 to
/// make new transactions uniform), which may leave none.
pub fn dc_failures_max(config: &SimConfig) -> usize {
    let dcs = usize::from(config.dcs);
    let entry = causeway_protocols::entry(&config.protocol);
    if entry.as_ref().is_ok_and(|e| !e.requirements().dc_failures) {
        return 0; // not in the protocol's fault model (PaRiS §III-C)
    }
    let f = causeway_protocols::entry(&config.protocol)
        .and_then(|e| e.tolerated_failures(&config.section, config.dcs))
        .unwrap_or(0);
    match f {
        0 => usize::from(dcs >= 2),
        f => f.min(dcs.saturating_sub(f + 1)),
    }
}

/// How often a DC failure is preceded by cuts of the failing DC's links.
const CUT_BEFORE_FAILURE_CHANCE: f64 = 0.6;
/// How long before the failure those cuts start, at least and at most.
const CUT_LEAD_MIN_NS: Nanos = 50_000_000;
const CUT_LEAD_MAX_NS: Nanos = 500_000_000;

/// How often a crash is preceded by a stall of the node's disk.
const STALL_BEFORE_CRASH_CHANCE: f64 = 0.5;
/// How long before the crash the stall starts, at least and at most.
const STALL_LEAD_MIN_NS: Nanos = 50_000_000;
const STALL_LEAD_MAX_NS: Nanos = 300_000_000;
/// What a stall adds to each write, at least and at most.
const STALL_EXTRA_MIN_NS: Nanos = 2_000_000;
const STALL_EXTRA_MAX_NS: Nanos = 20_000_000;

/// One timed fault. DCs and nodes are indices of the topology.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultEvent {
    Cut {
        a: u16,
        b: u16,
    },
    Heal {
        a: u16,
        b: u16,
    },
    /// Heals the cut and drops what its links held (`long-outage-lossy`).
    HealDropping {
        a: u16,
        b: u16,
    },
    Crash {
        node: usize,
    },
    Restart {
        node: usize,
    },
    SlowStart {
        node: usize,
        until: Nanos,
        extra_ns: Nanos,
    },
    /// Until `until`, each message of the link `from -> to` (two nodes of one DC) takes
    /// `extra_ns` more (`slow-links`).
    SlowLink {
        from: usize,
        to: usize,
        until: Nanos,
        extra_ns: Nanos,
    },
    /// Until `until` (the node's crash), each of its disk writes takes `extra_ns` more.
    DiskStall {
        node: usize,
        until: Nanos,
        extra_ns: Nanos,
    },
    FailDc {
        dc: u16,
    },
}

/// A seed's faults, as data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultPlan {
    pub kinds: Vec<FaultKind>,
    /// Per node (offset ns, drift ppm), set at boot; empty without skew.
    pub skew: Vec<(i64, i64)>,
    /// Timed events, sorted by true time (ties keep their drawing order).
    pub events: Vec<(Nanos, FaultEvent)>,
}

impl FaultPlan {
    pub fn draw(config: &SimConfig, topology: &Topology) -> FaultPlan {
        let mut rng = SimRng::new(config.seed, 3);
        let kinds = match config.faults {
            FaultSel::None => Vec::new(),
            FaultSel::One(k) => vec![k],
            FaultSel::All => loop {
                let ks: Vec<FaultKind> = FaultKind::ALL
                    .into_iter()
                    .filter(|_| rng.chance(0.5))
                    .collect();
                if !ks.is_empty() {
                    break ks;
                }
            },
        };
        let mut plan = FaultPlan {
            kinds: kinds.clone(),
            skew: Vec::new(),
            events: Vec::new(),
        };
        let span = config.duration_ms * 1_000_000;
        for kind in kinds {
            match kind {
                FaultKind::Partitions => plan.draw_partitions(&mut rng, config.dcs, span),
                FaultKind::Crashes => {
                    plan.draw_crashes(&mut rng, topology.node_count() as usize, span)
                }
                FaultKind::Skew => plan.draw_skew(&mut rng, topology.node_count() as usize),
                FaultKind::Slow => plan.draw_slow(&mut rng, topology.node_count() as usize, span),
                FaultKind::DcFailure => {
                    let max = dc_failures_max(config);
                    plan.draw_dc_failures(&mut rng, config.dcs, max, span)
                }
                FaultKind::LongOutage => plan.draw_long_outage(&mut rng, config.dcs, span, false),
                FaultKind::LongOutageLossy => {
                    plan.draw_long_outage(&mut rng, config.dcs, span, true)
                }
                FaultKind::SlowLinks => plan.draw_slow_links(&mut rng, topology, span),
            }
        }
        // Drawn after every kind, so that each kind draws what it drew before stalls existed.
        plan.draw_stalls_before_crashes(&mut rng);
        plan.events.sort_by_key(|(at, _)| *at);
        plan.add_dc_offsets(config, topology);
        plan
    }

    /// 1..=`max` DC failures at distinct DCs, each at a time in the middle three fifths
    /// of the fault phase (one failure draws exactly what a single-failure plan drew).
    fn draw_dc_failures(&mut self, rng: &mut SimRng, dcs: u16, max: usize, span: Nanos) {
        if max == 0 || dcs < 2 {
            return;
        }
        let count = if max > 1 {
            rng.range(1, max as u64 + 1) as usize
        } else {
            1
        };
        let mut alive: Vec<u16> = (0..dcs).collect();
        for _ in 0..count {
            let dc = alive.remove(rng.range(0, alive.len() as u64) as usize);
            let at = T0 + span / 5 + rng.range(0, span * 3 / 5);
            self.events.push((at, FaultEvent::FailDc { dc }));
            self.draw_cut_before_failure(rng, dcs, dc, at);
        }
    }

    /// Often a failing DC first loses its links to the others: to all of them (isolated),
    /// or to one. What it sent across the cut dies with it (`World::fail_dc`), so its last
    /// transactions reach only some DCs, or none (UniStore §5.5-5.6: what forwarding and
    /// barriers are for). The cuts heal when it fails (nothing is left to deliver).
    fn draw_cut_before_failure(&mut self, rng: &mut SimRng, dcs: u16, dc: u16, at: Nanos) {
        if !rng.chance(CUT_BEFORE_FAILURE_CHANCE) {
            return;
        }
        let lead = rng.range(CUT_LEAD_MIN_NS, CUT_LEAD_MAX_NS);
        let start = at.saturating_sub(lead).max(T0);
        let others: Vec<u16> = (0..dcs).filter(|o| *o != dc).collect();
        let cut = if rng.chance(0.5) {
            others
        } else {
            vec![rng.pick(&others)]
        };
        for b in cut {
            self.events.push((start, FaultEvent::Cut { a: dc, b }));
            self.events.push((at, FaultEvent::Heal { a: dc, b }));
        }
    }

    /// One DC cut from every other DC from a tenth of the fault phase to nine tenths, then
    /// healed (the DC keeps running: its clients keep committing locally); `lossy`: what
    /// the cut links held is dropped at the heal.
    fn draw_long_outage(&mut self, rng: &mut SimRng, dcs: u16, span: Nanos, lossy: bool) {
        if dcs < 2 {
            return;
        }
        let dc = rng.range(0, u64::from(dcs)) as u16;
        let (start, end) = (T0 + span / 10, T0 + span * 9 / 10);
        for b in (0..dcs).filter(|b| *b != dc) {
            self.events.push((start, FaultEvent::Cut { a: dc, b }));
            let heal = match lossy {
                true => FaultEvent::HealDropping { a: dc, b },
                false => FaultEvent::Heal { a: dc, b },
            };
            self.events.push((end, heal));
        }
    }

    fn draw_partitions(&mut self, rng: &mut SimRng, dcs: u16, span: Nanos) {
        if dcs < 2 {
            return;
        }
        for _ in 0..rng.range(1, 4) {
            let a = rng.range(0, u64::from(dcs)) as u16;
            let b = (a + 1 + rng.range(0, u64::from(dcs) - 1) as u16) % dcs;
            let start = T0 + rng.range(0, span * 4 / 5);
            let length = rng.range(100_000_000, (span / 3).max(100_000_001));
            self.events.push((start, FaultEvent::Cut { a, b }));
            self.events
                .push((start + length, FaultEvent::Heal { a, b }));
        }
    }

    fn draw_crashes(&mut self, rng: &mut SimRng, nodes: usize, span: Nanos) {
        for _ in 0..rng.range(1, 4) {
            let node = rng.range(0, nodes as u64) as usize;
            let start = T0 + rng.range(0, span * 4 / 5);
            let down = rng.range(50_000_000, 1_000_000_000);
            self.events.push((start, FaultEvent::Crash { node }));
            self.events
                .push((start + down, FaultEvent::Restart { node }));
        }
    }

    /// Before some crashes, the node's disk stalls (`crate::disk`): from 50-300 ms before
    /// the crash until it, each write takes 2-20 ms more.
    fn draw_stalls_before_crashes(&mut self, rng: &mut SimRng) {
        let crashes: Vec<(Nanos, usize)> = self
            .events
            .iter()
            .filter_map(|(at, ev)| match ev {
                FaultEvent::Crash { node } => Some((*at, *node)),
                _ => None,
            })
            .collect();
        for (at, node) in crashes {
            if !rng.chance(STALL_BEFORE_CRASH_CHANCE) {
                continue;
            }
            let lead = rng.range(STALL_LEAD_MIN_NS, STALL_LEAD_MAX_NS);
            let extra_ns = rng.range(STALL_EXTRA_MIN_NS, STALL_EXTRA_MAX_NS);
            let stall = FaultEvent::DiskStall {
                node,
                until: at,
                extra_ns,
            };
            self.events.push((at.saturating_sub(lead).max(T0), stall));
        }
    }

    /// `SimConfig::dc_clock_offsets_ms` on top of the drawn skew (none: zero).
    fn add_dc_offsets(&mut self, config: &SimConfig, topology: &Topology) {
        if config.dc_clock_offsets_ms.is_empty() {
            return;
        }
        let nodes = topology.node_count() as usize;
        self.skew.resize(nodes, (0, 0));
        for (n, skew) in self.skew.iter_mut().enumerate() {
            let dc = topology.dc_of(causeway_core::NodeId(n as u32));
            let ms = config.dc_clock_offsets_ms.get(usize::from(dc.0)).copied();
            skew.0 += (ms.unwrap_or(0.0) * 1e6) as i64;
        }
    }

    fn draw_skew(&mut self, rng: &mut SimRng, nodes: usize) {
        self.skew = (0..nodes)
            .map(|_| {
                let offset =
                    rng.range(0, 2 * SKEW_OFFSET_MAX_NS) as i64 - SKEW_OFFSET_MAX_NS as i64;
                let drift = rng.range(0, 2 * SKEW_DRIFT_MAX_PPM) as i64 - SKEW_DRIFT_MAX_PPM as i64;
                (offset, drift)
            })
            .collect();
    }

    fn draw_slow(&mut self, rng: &mut SimRng, nodes: usize, span: Nanos) {
        for _ in 0..rng.range(1, 3) {
            let node = rng.range(0, nodes as u64) as usize;
            let start = T0 + rng.range(0, span * 4 / 5);
            let until = start + rng.range(200_000_000, 1_000_000_000);
            let extra_ns = rng.range(5_000_000, 50_000_000);
            self.events.push((
                start,
                FaultEvent::SlowStart {
                    node,
                    until,
                    extra_ns,
                },
            ));
        }
    }

    /// 4-12 episodes, each a link from one node to another of its DC (a DC of one node has
    /// none) slowed by 2-20 ms per message for 100-800 ms, somewhere in the fault phase.
    /// Longer than the DC's round trips, so a slowed message is overtaken by later ones on
    /// other paths; the link stays FIFO (`Network::arrival`), as a TCP connection does.
    fn draw_slow_links(&mut self, rng: &mut SimRng, topology: &Topology, span: Nanos) {
        let nodes = topology.node_count() as usize;
        let dc_of = |n: usize| topology.dc_of(causeway_core::NodeId(n as u32));
        for _ in 0..rng.range(4, 13) {
            let from = rng.range(0, nodes as u64) as usize;
            let peers: Vec<usize> = (0..nodes)
                .filter(|&n| n != from && dc_of(n) == dc_of(from))
                .collect();
            if peers.is_empty() {
                return;
            }
            let to = rng.pick(&peers);
            let start = T0 + rng.range(0, span * 4 / 5);
            let until = start + rng.range(100_000_000, 800_000_000);
            let extra_ns = rng.range(2_000_000, 20_000_000);
            let ev = FaultEvent::SlowLink {
                from,
                to,
                until,
                extra_ns,
            };
            self.events.push((start, ev));
        }
    }

    /// One line per fault, for reports.
    pub fn describe(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .kinds
            .iter()
            .map(|k| format!("enabled {}", k.name()))
            .collect();
        for (at, ev) in &self.events {
            lines.push(format!("t={}ms {:?}", (at - T0) / 1_000_000, ev));
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Workload;
    use causeway_core::DcId;
    use causeway_protocols::occult::{Config as OccultConfig, Shards};

    fn two_dcs_of_16(protocol: &str) -> SimConfig {
        SimConfig {
            protocol: protocol.into(),
            dcs: 2,
            nodes_per_dc: 16,
            partitions: 64,
            keys: 10_000,
            ..SimConfig::default()
        }
    }

    /// Whether node `n` of `dc` holds some partition as a slave (not its master DC).
    fn is_slave(t: &Topology, dc: DcId, n: u32) -> bool {
        (0..t.partitions)
            .map(causeway_core::PartitionId)
            .any(|p| t.node_of(dc, p).0 == n && t.master_of(p) != dc)
    }

    #[test]
    fn hot_and_tail_nodes_are_each_dcs_slaves_with_the_most_and_least_read_load() {
        for protocol in ["cure", "occult"] {
            let c = two_dcs_of_16(protocol);
            let t = c.topology();
            let (hot, tail) = (hot_nodes(&c, 3).unwrap(), tail_nodes(&c, 3).unwrap());
            assert_eq!((hot.len(), tail.len()), (6, 6), "{protocol}: 3 per DC");
            for (dc, nodes) in hot.chunks(3).chain(tail.chunks(3)).enumerate() {
                let dc = DcId((dc % 2) as u16);
                for n in nodes {
                    assert_eq!(t.dc_of(causeway_core::NodeId(*n)), dc, "{protocol}");
                    assert!(is_slave(&t, dc, *n), "{protocol}: node {n} is a slave");
                }
            }
            assert!(
                hot.iter().all(|n| !tail.contains(n)),
                "{protocol}: disjoint"
            );
            // The hottest key's slave node leads its DC's hot nodes.
            let entry = causeway_protocols::entry(protocol).unwrap();
            let key = Workload::key(0);
            let p0 = entry.partition_of_key(&c.section, &t, &key).unwrap();
            let dc = t
                .replicas_of(p0)
                .into_iter()
                .find(|d| *d != t.master_of(p0));
            let dc = dc.unwrap();
            assert_eq!(
                hot[usize::from(dc.0) * 3],
                t.node_of(dc, p0).0,
                "{protocol}"
            );
            assert!(hot_nodes(&c, 0).unwrap().is_empty());
        }
    }

    /// Occult places keys by its shards (FNV-1a), not the slot ranges: the hot slave is
    /// the node of k0's shard.
    #[test]
    fn hot_nodes_follow_the_protocols_placement() {
        let o = two_dcs_of_16("occult");
        let t = o.topology();
        let shards = Shards::new(&t, OccultConfig::default().shards);
        let s0 = shards.of(&Workload::key(0));
        let slave_dc = DcId(1 - shards.master_dc(s0).0);
        let hot = hot_nodes(&o, 1).unwrap();
        assert_eq!(hot[usize::from(slave_dc.0)], shards.node(slave_dc, s0).0);
    }

    #[test]
    fn slowed_replication_adds_the_hot_nodes_to_the_named_ones() {
        let mut c = two_dcs_of_16("cure");
        c.slow_replication = vec![(15, 7)];
        assert_eq!(slowed_replication(&c).unwrap(), vec![(15, 7)]);
        c.slow_hot_replication = Some((1, 100));
        let hot = hot_nodes(&c, 1).unwrap();
        assert_eq!(
            slowed_replication(&c).unwrap(),
            vec![(15, 7), (hot[0], 100), (hot[1], 100)]
        );
        c.slow_hot_replication = None;
        c.slow_tail_replication = Some((1, 100));
        let tail = tail_nodes(&c, 1).unwrap();
        assert_eq!(
            slowed_replication(&c).unwrap(),
            vec![(15, 7), (tail[0], 100), (tail[1], 100)]
        );
        c.slow_hot_replication = Some((17, 100));
        assert!(c.validate().unwrap_err().contains("slow_hot_replication"));
        c.slow_hot_replication = None;
        c.slow_tail_replication = Some((17, 100));
        assert!(c.validate().unwrap_err().contains("slow_tail_replication"));
    }

    #[test]
    fn a_plan_is_replayable_data_with_every_cut_healed_every_crash_restarted_and_every_stall_ending_in_a_crash(
    ) {
        let config = |seed| SimConfig {
            seed,
            faults: FaultSel::All,
            ..SimConfig::default()
        };
        let mut stalls = 0;
        for seed in 1..20 {
            let c = config(seed);
            let topology = c.topology();
            let plan = FaultPlan::draw(&c, &topology);
            assert_eq!(plan, FaultPlan::draw(&c, &topology), "seed {seed}");
            assert!(!plan.kinds.is_empty(), "`all` enables at least one kind");
            assert!(plan.events.windows(2).all(|w| w[0].0 <= w[1].0));
            for (at, ev) in &plan.events {
                let later =
                    |want: &FaultEvent| plan.events.iter().any(|(t, e)| t > at && e == want);
                match *ev {
                    FaultEvent::Cut { a, b } => {
                        assert_ne!(a, b);
                        assert!(later(&FaultEvent::Heal { a, b }), "seed {seed}: {ev:?}");
                    }
                    FaultEvent::Crash { node } => {
                        assert!(later(&FaultEvent::Restart { node }), "seed {seed}: {ev:?}")
                    }
                    FaultEvent::DiskStall { node, until, .. } => {
                        let crash = FaultEvent::Crash { node };
                        let ends_in_crash =
                            plan.events.iter().any(|e| e == &(until, crash.clone()));
                        assert!(ends_in_crash && until >= *at, "seed {seed}: {ev:?}");
                        stalls += 1;
                    }
                    _ => {}
                }
            }
        }
        assert!(stalls > 0, "some crashes are preceded by a disk stall");
    }

    #[test]
    fn slow_links_join_two_nodes_of_one_dc_and_only_when_named() {
        let config = |seed, faults, nodes_per_dc| SimConfig {
            seed,
            faults,
            nodes_per_dc,
            ..SimConfig::default()
        };
        assert_eq!(
            FaultSel::parse("slow-links"),
            Ok(FaultSel::One(FaultKind::SlowLinks))
        );
        let slow_links = |c: &SimConfig| -> Vec<(usize, usize, Nanos, Nanos, Nanos)> {
            let plan = FaultPlan::draw(c, &c.topology());
            let links = plan.events.iter().filter_map(|(at, e)| match *e {
                FaultEvent::SlowLink {
                    from,
                    to,
                    until,
                    extra_ns,
                } => Some((from, to, *at, until, extra_ns)),
                _ => None,
            });
            links.collect()
        };
        for seed in 1..20 {
            let c = config(seed, FaultSel::One(FaultKind::SlowLinks), 3);
            let topology = c.topology();
            let links = slow_links(&c);
            assert!((4..=12).contains(&links.len()), "seed {seed}: {links:?}");
            for (from, to, at, until, extra_ns) in links {
                let dc = |n: usize| topology.dc_of(causeway_core::NodeId(n as u32));
                assert!(
                    from != to && dc(from) == dc(to),
                    "seed {seed}: {from} -> {to}"
                );
                assert!((100_000_000..800_000_000).contains(&(until - at)));
                assert!((2_000_000..20_000_000).contains(&extra_ns));
            }
            let alone = config(seed, FaultSel::One(FaultKind::SlowLinks), 1);
            assert!(
                slow_links(&alone).is_empty(),
                "a DC of one node has no link"
            );
            assert!(
                slow_links(&config(seed, FaultSel::All, 3)).is_empty(),
                "not in all"
            );
        }
    }

    fn failed_dcs(c: &SimConfig) -> Vec<u16> {
        let plan = FaultPlan::draw(c, &c.topology());
        let dcs: Vec<u16> = plan
            .events
            .iter()
            .filter_map(|(_, e)| match e {
                FaultEvent::FailDc { dc } => Some(*dc),
                _ => None,
            })
            .collect();
        let distinct: std::collections::BTreeSet<u16> = dcs.iter().copied().collect();
        assert_eq!(distinct.len(), dcs.len(), "distinct DCs: {dcs:?}");
        dcs
    }

    #[test]
    fn dc_failures_go_up_to_what_the_protocol_tolerates() {
        let config = |protocol: &str, dcs, f: Option<usize>, seed| SimConfig {
            protocol: protocol.into(),
            dcs,
            seed,
            faults: FaultSel::One(FaultKind::DcFailure),
            section: f.map_or(serde_json::Value::Null, |f| serde_json::json!({ "f": f })),
            ..SimConfig::default()
        };
        let counts = |protocol, dcs, f| -> Vec<usize> {
            (1..40)
                .map(|seed| failed_dcs(&config(protocol, dcs, f, seed)).len())
                .collect()
        };
        assert!(counts("cure", 5, None).iter().all(|n| *n == 1));
        assert!(counts("unistore", 3, None).iter().all(|n| *n == 1), "f = 1");
        let five = counts("unistore", 5, None);
        assert!(five.iter().all(|n| (1..=2).contains(n)), "f = 2: {five:?}");
        assert!(five.contains(&2), "two failures drawn sometimes: {five:?}");
        // f = 2 of 4 DCs: the survivors must number f+1, so one failure at most.
        assert!(counts("unistore", 4, Some(2)).iter().all(|n| *n == 1));
        // f = 2 of 3 DCs: no failure leaves f+1 DCs to make anything uniform.
        assert!(counts("unistore", 3, Some(2)).iter().all(|n| *n == 0));
    }
}
