//! The JSON of `GET /api/cluster`: the cluster's topology (DCs, their links with the
//! emulated round trips, the partitions and how many DCs store each), each node's state and latest figures, and each DC's recent time
//! series. The page and `causeway top` both read it; the types derive `Deserialize` so a
//! Rust reader (`top`, the tests) shares them.
//!
//! A figure with no data in its interval (no node of the DC was read, no transaction
//! committed, the protocol does not report that sample) is `null`, not 0.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The whole answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClusterView {
    pub cluster: String,
    pub protocol: String,
    /// When this answer was made (Unix ms).
    pub now_ms: u64,
    /// Time between two scrapes of every node.
    pub interval_ms: u64,
    /// Most points kept per DC series.
    pub points_max: usize,
    /// Partitions of the key space.
    #[serde(default)]
    pub partitions: u32,
    /// DCs storing each partition (the number of DCs under full replication).
    #[serde(default)]
    pub replication_factor: u16,
    pub dcs: Vec<DcView>,
    pub links: Vec<LinkView>,
    pub nodes: Vec<NodeView>,
}

/// One DC: its nodes, client addresses, the partitions it stores and its series (oldest
/// first).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DcView {
    pub name: String,
    pub nodes: Vec<String>,
    /// How many partitions the DC stores (all of them under full replication; the others
    /// its clients reach at a replica in another DC).
    #[serde(default)]
    pub partitions: u32,
    pub client_addrs: Vec<String>,
    pub series: Vec<DcPoint>,
}

/// The emulated round trip between two DCs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinkView {
    pub a: String,
    pub b: String,
    pub rtt_ms: f64,
}

/// One node's state: `up` (last scrape answered), `down` (it did not: `error` says why),
/// `starting` (not scraped yet) or `unwatched` (no `metrics_addr`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeView {
    pub name: String,
    pub dc: String,
    pub metrics_addr: Option<String>,
    pub state: String,
    /// The last scrape that answered (Unix ms).
    pub last_scrape_ms: Option<u64>,
    pub error: Option<String>,
    pub commits_per_s: Option<f64>,
    pub aborts_per_s: Option<f64>,
    pub latency_mean_ms: Option<f64>,
    /// The node's gauges at the last scrape (`sessions`, `link_queue_depth` summed over
    /// peers, the protocol's own).
    pub gauges: BTreeMap<String, f64>,
}

/// A DC's figures over one scrape interval, every node of the DC together.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DcPoint {
    /// End of the interval (Unix ms).
    pub t_ms: u64,
    /// Nodes of the DC that answered this scrape.
    pub nodes_up: usize,
    pub commits_per_s: Option<f64>,
    pub aborts_per_s: Option<f64>,
    /// Begin-to-Committed latency of the transactions committed in the interval.
    pub latency_mean_ms: Option<f64>,
    pub latency_p99_ms: Option<f64>,
    /// Mean of each `causeway_<stem>_seconds` histogram over the interval, in ms, by stem
    /// (`gss_lag`, `remote_visibility`, `read_wait`, `disk_fsync`, ...).
    pub samples_ms: BTreeMap<String, f64>,
}

/// `points=N` of a query string: how many of the latest points per series to send.
pub fn points_wanted(query: &str, max: usize) -> usize {
    query
        .split('&')
        .filter_map(|kv| kv.strip_prefix("points="))
        .find_map(|v| v.parse::<usize>().ok())
        .map_or(max, |n| n.min(max))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_come_from_the_query_and_stay_bounded() {
        assert_eq!(points_wanted("", 300), 300);
        assert_eq!(points_wanted("points=60", 300), 60);
        assert_eq!(points_wanted("x=1&points=900", 300), 300);
        assert_eq!(points_wanted("points=abc", 300), 300);
    }
}
