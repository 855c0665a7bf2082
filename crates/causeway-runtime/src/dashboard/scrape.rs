//! One scrape of one node: an HTTP GET of its `/metrics` (bounded in time and size) and
//! the figures the cluster page needs, read from the Prometheus text by `prometheus-parse`
//! into a [`Reading`]. Nothing here knows a protocol: every `causeway_*_seconds` histogram
//! is kept by its stem (`gss_lag`, `remote_visibility`, ...), every gauge by its name.

use prometheus_parse::{Scrape, Value};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long one scrape (connect, request, whole answer) may take.
pub const SCRAPE_TIMEOUT: Duration = Duration::from_millis(900);
/// Largest metrics answer read; a longer one is refused.
pub const ANSWER_BYTES_MAX: usize = 4 * 1024 * 1024;
/// Most histogram stems and gauge names kept from one scrape (each); the rest are ignored.
pub const NAMES_MAX: usize = 64;

/// Sum (seconds) and count of one histogram.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SumCount {
    pub sum_seconds: f64,
    pub count: f64,
}

/// The figures of one scrape, all cumulative since the node started except the gauges.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reading {
    /// `causeway_txn_commits_total`, every kind.
    pub commits: f64,
    /// `causeway_txn_aborts_total`, every reason.
    pub aborts: f64,
    /// `causeway_txn_latency_seconds`.
    pub latency: SumCount,
    /// Cumulative buckets of `causeway_txn_latency_seconds`: (upper bound s, count).
    pub latency_buckets: Vec<(f64, f64)>,
    /// Every other `causeway_<stem>_seconds` histogram, by stem.
    pub samples: BTreeMap<String, SumCount>,
    /// Every `causeway_<name>` gauge by name, series of one name (link queues) added up.
    pub gauges: BTreeMap<String, f64>,
}

const PREFIX: &str = "causeway_";
const LATENCY: &str = "txn_latency";

/// GETs `http://addr/metrics` and returns the body.
pub async fn fetch(addr: SocketAddr) -> Result<String, String> {
    get(&addr.to_string(), "/metrics", SCRAPE_TIMEOUT).await
}

/// GETs `http://addr/path` (`addr` is `host:port`) within `timeout`; the body of a 200
/// answer of at most [`ANSWER_BYTES_MAX`] bytes.
pub async fn get(addr: &str, path: &str, timeout: Duration) -> Result<String, String> {
    tokio::time::timeout(timeout, get_now(addr, path))
        .await
        .map_err(|_| format!("no answer within {timeout:?}"))?
}

async fn get_now(addr: &str, path: &str) -> Result<String, String> {
    let mut stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    let mut limited = (&mut stream).take(ANSWER_BYTES_MAX as u64 + 1);
    limited
        .read_to_end(&mut answer)
        .await
        .map_err(|e| e.to_string())?;
    if answer.len() > ANSWER_BYTES_MAX {
        return Err(format!("answer over {ANSWER_BYTES_MAX} bytes"));
    }
    let text = String::from_utf8(answer).map_err(|_| "answer is not UTF-8".to_string())?;
    let (head, body) = text.split_once("\r\n\r\n").ok_or("answer without a head")?;
    let status = head.lines().next().unwrap_or_default();
    if !status.contains(" 200 ") {
        return Err(format!("answered {status}"));
    }
    Ok(body.to_string())
}

/// The figures of one metrics text.
pub fn read(text: &str) -> Result<Reading, String> {
    let lines = text.lines().map(|l| Ok(l.to_string()));
    let scrape = Scrape::parse(lines).map_err(|e| e.to_string())?;
    let mut r = Reading::default();
    for s in &scrape.samples {
        let Some(name) = s.metric.strip_prefix(PREFIX) else {
            continue;
        };
        match &s.value {
            Value::Counter(v) => add_counter(&mut r, name, *v),
            Value::Gauge(v) => add_gauge(&mut r, name, *v),
            Value::Untyped(v) => add_sum_or_count(&mut r, name, *v),
            Value::Histogram(buckets) if name == "txn_latency_seconds" => {
                r.latency_buckets = buckets.iter().map(|b| (b.less_than, b.count)).collect();
                r.latency_buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
            }
            _ => {}
        }
    }
    Ok(r)
}

fn add_counter(r: &mut Reading, name: &str, v: f64) {
    match name {
        "txn_commits_total" => r.commits += v,
        "txn_aborts_total" => r.aborts += v,
        _ => {}
    }
}

fn add_gauge(r: &mut Reading, name: &str, v: f64) {
    if r.gauges.len() < NAMES_MAX || r.gauges.contains_key(name) {
        *r.gauges.entry(name.to_string()).or_default() += v;
    }
}

/// `causeway_<stem>_seconds_sum` / `_count` lines (the parser leaves them untyped).
fn add_sum_or_count(r: &mut Reading, name: &str, v: f64) {
    let (stem, is_sum) = if let Some(stem) = name.strip_suffix("_seconds_sum") {
        (stem, true)
    } else if let Some(stem) = name.strip_suffix("_seconds_count") {
        (stem, false)
    } else {
        return;
    };
    let slot = if stem == LATENCY {
        &mut r.latency
    } else if r.samples.len() < NAMES_MAX || r.samples.contains_key(stem) {
        r.samples.entry(stem.to_string()).or_default()
    } else {
        return;
    };
    if is_sum {
        slot.sum_seconds += v;
    } else {
        slot.count += v;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# TYPE causeway_txn_commits_total counter
causeway_txn_commits_total{dc="dc1",kind="causal"} 10
causeway_txn_commits_total{dc="dc1",kind="strong"} 2
# TYPE causeway_txn_aborts_total counter
causeway_txn_aborts_total{dc="dc1",reason="conflict"} 1
# TYPE causeway_link_queue_depth gauge
causeway_link_queue_depth{peer="a"} 3
causeway_link_queue_depth{peer="b"} 4
# TYPE causeway_sessions gauge
causeway_sessions 5
# TYPE causeway_txn_latency_seconds histogram
causeway_txn_latency_seconds_bucket{le="0.001"} 4
causeway_txn_latency_seconds_bucket{le="0.01"} 12
causeway_txn_latency_seconds_bucket{le="+Inf"} 12
causeway_txn_latency_seconds_sum 0.05
causeway_txn_latency_seconds_count 12
# TYPE causeway_gss_lag_seconds histogram
causeway_gss_lag_seconds_bucket{le="+Inf"} 3
causeway_gss_lag_seconds_sum 0.3
causeway_gss_lag_seconds_count 3
# TYPE other_thing gauge
other_thing 9
"#;

    #[test]
    fn reads_counters_histograms_and_gauges_by_stem() {
        let r = read(TEXT).unwrap();
        assert_eq!((r.commits, r.aborts), (12.0, 1.0));
        assert_eq!(r.latency.count, 12.0);
        assert!((r.latency.sum_seconds - 0.05).abs() < 1e-12);
        assert_eq!(r.latency_buckets.len(), 3);
        assert_eq!(r.latency_buckets[0], (0.001, 4.0));
        assert_eq!(r.samples["gss_lag"].count, 3.0);
        assert_eq!(r.gauges["link_queue_depth"], 7.0);
        assert_eq!(r.gauges["sessions"], 5.0);
        assert!(!r.gauges.contains_key("other_thing"));
    }

    #[tokio::test]
    async fn fetch_reports_a_closed_port() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        assert!(fetch(addr).await.is_err());
    }
}
