//! What the cluster page knows: the topology from the cluster file, each node's last
//! [`Reading`] and state, and per DC a ring of at most [`POINTS_MAX`] points made at each
//! scrape from the differences between a node's last two readings (rates per second,
//! interval means of the histograms, a p99 from the latency buckets).
//!
//! A counter that went down (the node restarted) counts from zero again: its whole value
//! is the interval's.

use super::api::{ClusterView, DcPoint, DcView, LinkView, NodeView};
use super::scrape::{Reading, SumCount};
use crate::ClusterConfig;
use causeway_core::{DcId, PartitionId};
use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;

/// Most points kept per DC: five minutes at one scrape a second.
pub const POINTS_MAX: usize = 300;
/// Longest scrape error kept for a node.
pub const ERROR_CHARS_MAX: usize = 200;

/// A node's figures over one interval.
#[derive(Clone, Debug, Default)]
struct Delta {
    seconds: f64,
    commits: f64,
    aborts: f64,
    latency: SumCount,
    buckets: Vec<(f64, f64)>,
    samples: BTreeMap<String, SumCount>,
}

/// One node as the board follows it.
struct Track {
    view: NodeView,
    addr: Option<SocketAddr>,
    dc: usize,
    /// The last reading that answered and when (Unix ms).
    last: Option<(u64, Reading)>,
}

/// The cluster page's state.
pub struct Board {
    cluster: String,
    protocol: String,
    partitions: u32,
    replication_factor: u16,
    interval_ms: u64,
    links: Vec<LinkView>,
    dcs: Vec<DcView>,
    series: Vec<VecDeque<DcPoint>>,
    nodes: Vec<Track>,
}

fn counter_diff(now: f64, before: f64) -> f64 {
    if now >= before {
        now - before
    } else {
        now
    }
}

fn sum_count_diff(now: SumCount, before: SumCount) -> SumCount {
    if now.count < before.count {
        return now;
    }
    SumCount {
        sum_seconds: now.sum_seconds - before.sum_seconds,
        count: now.count - before.count,
    }
}

fn delta(now: &Reading, before: &Reading, seconds: f64) -> Delta {
    let same_bounds = now.latency_buckets.len() == before.latency_buckets.len()
        && now.latency.count >= before.latency.count;
    let buckets = if same_bounds {
        let pairs = now.latency_buckets.iter().zip(&before.latency_buckets);
        pairs.map(|(n, b)| (n.0, n.1 - b.1)).collect()
    } else {
        now.latency_buckets.clone()
    };
    let samples = now
        .samples
        .iter()
        .map(|(k, v)| {
            let b = before.samples.get(k).copied().unwrap_or_default();
            (k.clone(), sum_count_diff(*v, b))
        })
        .collect();
    Delta {
        seconds,
        commits: counter_diff(now.commits, before.commits),
        aborts: counter_diff(now.aborts, before.aborts),
        latency: sum_count_diff(now.latency, before.latency),
        buckets,
        samples,
    }
}

/// The `q` quantile of cumulative buckets, interpolated inside its bucket (as Prometheus'
/// `histogram_quantile`); in the same unit as the bounds.
pub fn quantile(buckets: &[(f64, f64)], q: f64) -> Option<f64> {
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let mut lower = (0.0, 0.0);
    for &(bound, count) in buckets {
        if count >= rank {
            if bound.is_infinite() {
                return Some(lower.0);
            }
            let inside = count - lower.1;
            let frac = if inside > 0.0 {
                (rank - lower.1) / inside
            } else {
                1.0
            };
            return Some(lower.0 + (bound - lower.0) * frac);
        }
        lower = (bound, count);
    }
    Some(lower.0)
}

fn mean_ms(sc: SumCount) -> Option<f64> {
    (sc.count > 0.0).then(|| sc.sum_seconds / sc.count * 1000.0)
}

fn add(into: &mut SumCount, d: SumCount) {
    into.sum_seconds += d.sum_seconds;
    into.count += d.count;
}

/// One DC's point from the deltas of its nodes read this interval.
fn dc_point(t_ms: u64, deltas: &[&Delta]) -> DcPoint {
    let mut point = DcPoint {
        t_ms,
        nodes_up: deltas.len(),
        ..DcPoint::default()
    };
    if deltas.is_empty() {
        return point;
    }
    let mut latency = SumCount::default();
    let mut buckets: Vec<(f64, f64)> = Vec::new();
    let mut samples: BTreeMap<&str, SumCount> = BTreeMap::new();
    let (mut commits, mut aborts) = (0.0, 0.0);
    for d in deltas {
        let per_s = 1.0 / d.seconds.max(1e-3);
        commits += d.commits * per_s;
        aborts += d.aborts * per_s;
        add(&mut latency, d.latency);
        if buckets.is_empty() {
            buckets = d.buckets.clone();
        } else if buckets.len() == d.buckets.len() {
            buckets
                .iter_mut()
                .zip(&d.buckets)
                .for_each(|(b, n)| b.1 += n.1);
        }
        for (k, v) in &d.samples {
            add(samples.entry(k).or_default(), *v);
        }
    }
    point.commits_per_s = Some(commits);
    point.aborts_per_s = Some(aborts);
    point.latency_mean_ms = mean_ms(latency);
    point.latency_p99_ms = quantile(&buckets, 0.99).map(|s| s * 1000.0);
    point.samples_ms = samples
        .into_iter()
        .filter_map(|(k, v)| Some((k.to_string(), mean_ms(v)?)))
        .collect();
    point
}

impl Board {
    pub fn new(config: &ClusterConfig, interval_ms: u64) -> Board {
        let topology = config.topology();
        let mut stored = vec![0u32; config.dcs.len()];
        for p in (0..topology.partitions).map(PartitionId) {
            for dc in topology.replicas_of(p) {
                stored[usize::from(dc.0)] += 1;
            }
        }
        let mut dcs: Vec<DcView> = config
            .dcs
            .iter()
            .enumerate()
            .map(|(d, name)| DcView {
                name: name.clone(),
                nodes: Vec::new(),
                partitions: stored[d],
                client_addrs: Vec::new(),
                series: Vec::new(),
            })
            .collect();
        let mut nodes = Vec::new();
        for spec in &config.nodes {
            let dc = config.dcs.iter().position(|d| *d == spec.dc).unwrap_or(0);
            dcs[dc].nodes.push(spec.name.clone());
            dcs[dc]
                .client_addrs
                .extend(spec.client_addr.map(|a| a.to_string()));
            nodes.push(Track {
                view: NodeView {
                    name: spec.name.clone(),
                    dc: spec.dc.clone(),
                    metrics_addr: spec.metrics_addr.map(|a| a.to_string()),
                    state: if spec.metrics_addr.is_some() {
                        "starting"
                    } else {
                        "unwatched"
                    }
                    .into(),
                    last_scrape_ms: None,
                    error: None,
                    commits_per_s: None,
                    aborts_per_s: None,
                    latency_mean_ms: None,
                    gauges: BTreeMap::new(),
                },
                addr: spec.metrics_addr,
                dc,
                last: None,
            });
        }
        Board {
            cluster: config.cluster.clone(),
            protocol: config.protocol.clone(),
            partitions: topology.partitions,
            replication_factor: topology.replication_factor,
            interval_ms,
            links: links(config),
            series: vec![VecDeque::new(); dcs.len()],
            dcs,
            nodes,
        }
    }

    /// The metrics address of every node, in the order [`Board::record`] takes results.
    pub fn targets(&self) -> Vec<Option<SocketAddr>> {
        self.nodes.iter().map(|n| n.addr).collect()
    }

    /// Takes one round of scrapes made at `t_ms` (one result per [`Board::targets`]
    /// entry, `None` for a node with no address) and adds a point to every DC's series.
    pub fn record(&mut self, t_ms: u64, results: Vec<Option<Result<Reading, String>>>) {
        let mut deltas: Vec<Vec<Delta>> = vec![Vec::new(); self.dcs.len()];
        for (track, result) in self.nodes.iter_mut().zip(results) {
            if let Some(d) = observe(track, t_ms, result) {
                deltas[track.dc].push(d);
            }
        }
        for (ring, ds) in self.series.iter_mut().zip(&deltas) {
            let refs: Vec<&Delta> = ds.iter().collect();
            if ring.len() == POINTS_MAX {
                ring.pop_front();
            }
            ring.push_back(dc_point(t_ms, &refs));
        }
    }

    /// The API answer, with at most `points` latest points per series.
    pub fn view(&self, now_ms: u64, points: usize) -> ClusterView {
        let dcs = self
            .dcs
            .iter()
            .zip(&self.series)
            .map(|(dc, ring)| DcView {
                series: ring
                    .iter()
                    .skip(ring.len().saturating_sub(points))
                    .cloned()
                    .collect(),
                ..dc.clone()
            })
            .collect();
        ClusterView {
            cluster: self.cluster.clone(),
            protocol: self.protocol.clone(),
            now_ms,
            interval_ms: self.interval_ms,
            points_max: POINTS_MAX,
            partitions: self.partitions,
            replication_factor: self.replication_factor,
            dcs,
            links: self.links.clone(),
            nodes: self.nodes.iter().map(|n| n.view.clone()).collect(),
        }
    }
}

/// Updates a node's state from one scrape; its delta when it has two readings in a row.
fn observe(track: &mut Track, t_ms: u64, result: Option<Result<Reading, String>>) -> Option<Delta> {
    let v = &mut track.view;
    match result? {
        Err(e) => {
            v.state = "down".into();
            v.error = Some(e.chars().take(ERROR_CHARS_MAX).collect());
            (v.commits_per_s, v.aborts_per_s, v.latency_mean_ms) = (None, None, None);
            track.last = None;
            None
        }
        Ok(reading) => {
            v.state = "up".into();
            v.error = None;
            v.last_scrape_ms = Some(t_ms);
            v.gauges = reading.gauges.clone();
            let d = track.last.as_ref().map(|(at, before)| {
                let seconds = t_ms.saturating_sub(*at) as f64 / 1000.0;
                delta(&reading, before, seconds)
            });
            if let Some(d) = &d {
                let per_s = 1.0 / d.seconds.max(1e-3);
                v.commits_per_s = Some(d.commits * per_s);
                v.aborts_per_s = Some(d.aborts * per_s);
                v.latency_mean_ms = mean_ms(d.latency);
            }
            track.last = Some((t_ms, reading));
            d
        }
    }
}

/// Every pair of DCs with its emulated round trip (both one-way latencies added).
fn links(config: &ClusterConfig) -> Vec<LinkView> {
    let n = config.dcs.len();
    let mut out = Vec::new();
    for a in 0..n {
        for b in a + 1..n {
            let (da, db) = (DcId(a as u16), DcId(b as u16));
            let ns = config.one_way_ns(da, db) + config.one_way_ns(db, da);
            out.push(LinkView {
                a: config.dcs[a].clone(),
                b: config.dcs[b].clone(),
                rtt_ms: ns as f64 / 1e6,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(commits: f64, latency_count: f64, lag_sum_seconds: f64) -> Reading {
        let mut r = Reading {
            commits,
            latency: SumCount {
                sum_seconds: latency_count * 0.002,
                count: latency_count,
            },
            latency_buckets: vec![
                (0.001, 0.0),
                (0.01, latency_count),
                (f64::INFINITY, latency_count),
            ],
            ..Reading::default()
        };
        let lag = SumCount {
            sum_seconds: lag_sum_seconds,
            count: 10.0 * commits,
        };
        r.samples.insert("gss_lag".into(), lag);
        r.gauges.insert("sessions".into(), 3.0);
        r
    }

    fn config() -> ClusterConfig {
        let mut c = crate::local_cluster("cure", 2, 1, "/tmp/x".into(), 7100, 7000).unwrap();
        c.rtt_ms = Some(vec![vec![0.0, 40.0], vec![40.0, 0.0]]);
        for (k, n) in c.nodes.iter_mut().enumerate() {
            n.metrics_addr = Some(SocketAddr::from(([127, 0, 0, 1], 9100 + k as u16)));
        }
        c
    }

    #[test]
    fn rates_means_and_states_come_from_two_readings() {
        let mut b = Board::new(&config(), 1000);
        assert_eq!(b.targets().len(), 2);
        b.record(
            1_000,
            vec![
                Some(Ok(reading(10.0, 10.0, 1.0))),
                Some(Err("refused".into())),
            ],
        );
        b.record(
            3_000,
            vec![
                Some(Ok(reading(30.0, 30.0, 3.0))),
                Some(Err("refused".into())),
            ],
        );
        let v = b.view(3_000, 300);
        assert_eq!(
            v.links,
            vec![LinkView {
                a: "dc1".into(),
                b: "dc2".into(),
                rtt_ms: 40.0
            }]
        );
        let p = v.dcs[0].series.last().unwrap();
        assert_eq!(p.commits_per_s, Some(10.0), "20 commits in 2 s");
        assert!((p.latency_mean_ms.unwrap() - 2.0).abs() < 1e-9);
        let p99 = p.latency_p99_ms.unwrap();
        assert!(p99 > 1.0 && p99 <= 10.0, "{p99}");
        assert!(
            (p.samples_ms["gss_lag"] - 10.0).abs() < 1e-9,
            "2 s over 200 samples"
        );
        assert_eq!(v.dcs[1].series.last().unwrap().commits_per_s, None);
        assert_eq!(
            (v.nodes[0].state.as_str(), v.nodes[1].state.as_str()),
            ("up", "down")
        );
        assert_eq!(v.nodes[1].error.as_deref(), Some("refused"));
        assert_eq!(v.nodes[0].gauges["sessions"], 3.0);
        assert_eq!(b.view(3_000, 1).dcs[0].series.len(), 1);
        assert_eq!((v.partitions, v.replication_factor), (4, 2));
        assert_eq!((v.dcs[0].partitions, v.dcs[1].partitions), (4, 4));
    }

    #[test]
    fn each_dc_counts_the_partitions_it_stores() {
        let mut c = crate::local_cluster("eventual", 3, 1, "/tmp/x".into(), 7100, 7000).unwrap();
        (c.partitions_per_node, c.partitions) = (None, Some(7));
        c.replication_factor = Some(2);
        let v = Board::new(&c, 1000).view(0, 0);
        assert_eq!((v.partitions, v.replication_factor), (7, 2));
        // Partition p lives in DCs p % 3 and p % 3 + 1: DC 0 stores 0, 2, 3, 5, 6.
        let stored: Vec<u32> = v.dcs.iter().map(|d| d.partitions).collect();
        assert_eq!(stored, vec![5, 5, 4]);
    }

    #[test]
    fn the_series_stay_bounded_and_a_restart_counts_from_zero() {
        let mut b = Board::new(&config(), 1000);
        for i in 0..POINTS_MAX as u64 + 20 {
            let commits = if i == 100 { 5.0 } else { i as f64 * 100.0 };
            b.record(i * 1000, vec![Some(Ok(reading(commits, 0.0, 0.0))), None]);
        }
        let v = b.view(0, usize::MAX);
        assert_eq!(v.dcs[0].series.len(), POINTS_MAX);
        assert!(v.dcs[0]
            .series
            .iter()
            .all(|p| p.commits_per_s.unwrap() >= 0.0));
    }

    #[test]
    fn quantiles_interpolate_inside_the_bucket() {
        let b = [(1.0, 50.0), (2.0, 100.0), (f64::INFINITY, 100.0)];
        assert_eq!(quantile(&b, 0.5), Some(1.0));
        assert_eq!(quantile(&b, 0.75), Some(1.5));
        assert_eq!(quantile(&[(1.0, 0.0)], 0.99), None);
        assert_eq!(
            quantile(&[(1.0, 1.0), (f64::INFINITY, 2.0)], 0.99),
            Some(1.0)
        );
    }
}
