//! Prometheus metrics of a real cluster: after `causeway load` runs transactions at a DC,
//! that DC's node answers `GET /metrics` with well-formed Prometheus text whose commit
//! counter and latency histogram moved, beside the machine's sample histograms, the
//! group-commit, link and inbox series; any other path gets 404.

mod cluster;
mod http;

use cluster::Cluster;
use http::get;
use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// One sample line: metric name, labels, value.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// `k="v",k2="v2"` with `\"`, `\\` and `\n` escapes.
fn parse_labels(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut labels = BTreeMap::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (key, after) = rest.split_once("=\"").ok_or(format!("no =\" in {text}"))?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars
                .next()
                .ok_or(format!("unterminated value in {text}"))?
            {
                (i, '"') => break i,
                (_, '\\') => match chars.next().map(|(_, c)| c) {
                    Some('n') => value.push('\n'),
                    Some(c) => value.push(c),
                    None => return Err(format!("dangling escape in {text}")),
                },
                (_, c) => value.push(c),
            }
        };
        labels.insert(key.to_string(), value);
        rest = after[end + 1..].trim_start_matches(',');
    }
    Ok(labels)
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// Every non-comment line must be `name{labels} value` or `name value`.
fn parse_exposition(text: &str) -> Result<Vec<Sample>, String> {
    let mut samples = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let (series, value) = line.rsplit_once(' ').ok_or(format!("no value: {line}"))?;
        let value: f64 = value.parse().map_err(|_| format!("bad value: {line}"))?;
        let (name, labels) = match series.split_once('{') {
            Some((name, labels)) => {
                let labels = labels.strip_suffix('}').ok_or(format!("no }}: {line}"))?;
                (name, parse_labels(labels)?)
            }
            None => (series, BTreeMap::new()),
        };
        if !valid_name(name) {
            return Err(format!("bad metric name: {line}"));
        }
        let name = name.to_string();
        samples.push(Sample {
            name,
            labels,
            value,
        });
    }
    Ok(samples)
}

fn scrape(addr: SocketAddr) -> Vec<Sample> {
    let (status, headers, body) = get(addr, "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK", "{headers}\n{body}");
    assert!(
        headers.contains("Content-Type: text/plain; version=0.0.4"),
        "{headers}"
    );
    parse_exposition(&body).unwrap_or_else(|e| panic!("{e}\n{body}"))
}

/// The sum of every series named `name`.
fn total(samples: &[Sample], name: &str) -> f64 {
    samples
        .iter()
        .filter(|s| s.name == name)
        .map(|s| s.value)
        .sum()
}

fn run_load(addr: SocketAddr) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_causeway"))
        .args(["load", "--addr", &addr.to_string(), "--workload", "ycsb-b"])
        .args(["--clients", "4", "--duration", "2"])
        .output()
        .expect("run causeway load");
    assert!(
        out.status.success(),
        "causeway load failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Waits for the node's endpoint to answer (the node is starting).
fn wait_for(addr: SocketAddr) {
    let began = Instant::now();
    while TcpStream::connect(addr).is_err() {
        assert!(
            began.elapsed() < Duration::from_secs(30),
            "{addr} never opened"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_node_exposes_prometheus_metrics_that_move_with_load() {
    let mut c = Cluster::start("metrics", "cure", 2, 1, 10.0);
    let metrics = c.config.nodes[0].metrics_addr.expect("a metrics address");
    wait_for(metrics);
    wait_for(c.client_addr(0));
    let before = scrape(metrics);
    let latency = "causeway_txn_latency_seconds_count";
    let latency_before = total(&before, latency);
    run_load(c.client_addr(0));
    let after = scrape(metrics);
    assert!(total(&after, "causeway_txn_commits_total") > 0.0);
    assert!(
        total(&after, latency) > latency_before,
        "the latency count moved"
    );
    let commit = after
        .iter()
        .find(|s| s.name == "causeway_txn_commits_total")
        .expect("a commit series");
    assert_eq!(commit.labels["protocol"], "cure");
    assert_eq!(commit.labels["dc"], "dc1");
    assert_eq!(commit.labels["node"], "dc1-n1");
    assert_eq!(commit.labels["kind"], "causal");
    for name in [
        "causeway_disk_batch_records_count",
        "causeway_disk_fsync_seconds_count",
        "causeway_sessions",
        "causeway_client_connections",
        "causeway_link_queue_depth",
        "causeway_link_dropped_total",
        "causeway_link_dead_total",
        "causeway_inbox_bytes",
        // Samples and gauges of the cure machine, exported by the generic rule.
        "causeway_gss_lag_seconds_count",
        "causeway_store_versions",
    ] {
        assert!(after.iter().any(|s| s.name == name), "{name} missing");
    }
    assert!(total(&after, "causeway_disk_batch_records_count") > 0.0);
    // A healthy 2-DC cluster on loopback: no link declared dead, nothing dropped.
    assert_eq!(total(&after, "causeway_link_dead_total"), 0.0);
    assert_eq!(total(&after, "causeway_link_dropped_total"), 0.0);
    let (status, _, _) = get(metrics, "/");
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    c.stop();
}

#[test]
fn the_test_parser_refuses_malformed_lines() {
    assert!(parse_exposition("# HELP x y\nx{a=\"b\\\"c\"} 1.5\ny 2\n").is_ok());
    assert!(parse_exposition("x{a=\"b\" 1\n").is_err());
    assert!(parse_exposition("1x 1\n").is_err());
    assert!(parse_exposition("x one\n").is_err());
}
