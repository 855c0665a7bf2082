//! `causeway top --addr HOST:PORT`: the cluster page's figures in the terminal. Reads
//! `GET /api/cluster` of a `causeway up` (or of a node with an `http_addr`) once a second
//! and redraws one frame in place with plain ANSI escapes: the totals, one row per DC
//! (nodes up, rates, latency, stable-vector lag, remote visibility and a throughput
//! sparkline), the links with their emulated round trips, and one row per node. Ctrl-C
//! exits cleanly; `--once` prints one frame without escapes and exits (1 when the page
//! cannot be read).

use causeway_runtime::dashboard::api::{ClusterView, DcPoint, DcView, NodeView};
use causeway_runtime::dashboard::scrape;
use clap::Args;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write as _};
use std::process::ExitCode;
use std::time::Duration;

/// Time between two frames.
const REFRESH_INTERVAL: Duration = Duration::from_secs(1);
/// How long one read of the API may take.
const READ_TIMEOUT: Duration = Duration::from_secs(3);
/// Points of the throughput sparkline (the last this many seconds).
const SPARK_POINTS_MAX: usize = 40;
const SPARK: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

#[derive(Args)]
pub struct TopArgs {
    /// The cluster page's address, as `causeway up` prints it (default port 9000).
    #[arg(long, default_value = "127.0.0.1:9000")]
    addr: String,
    /// Print one frame (no escape codes) and exit.
    #[arg(long)]
    once: bool,
}

async fn read_view(addr: &str) -> Result<ClusterView, String> {
    let path = format!("/api/cluster?points={SPARK_POINTS_MAX}");
    let body = scrape::get(addr, &path, READ_TIMEOUT).await?;
    serde_json::from_str(&body).map_err(|e| format!("not a cluster page answer: {e}"))
}

pub fn run(args: TopArgs) -> ExitCode {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("build the tokio runtime");
    runtime.block_on(async {
        if args.once {
            return match read_view(&args.addr).await {
                Ok(view) => {
                    print!("{}", frame(&view, false));
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: cannot read http://{}/api/cluster: {e}; fix: start `causeway up` or pass its page's --addr", args.addr);
                    ExitCode::FAILURE
                }
            };
        }
        watch(&args.addr).await
    })
}

/// Redraws every second until Ctrl-C or SIGTERM.
async fn watch(addr: &str) -> ExitCode {
    let color = std::io::stdout().is_terminal();
    let signal = crate::server_cmd::shutdown_signal();
    tokio::pin!(signal);
    let mut ticker = tokio::time::interval(REFRESH_INTERVAL);
    loop {
        tokio::select! {
            _ = &mut signal => break,
            _ = ticker.tick() => {
                let text = match read_view(addr).await {
                    Ok(view) => frame(&view, color),
                    Err(e) => format!("causeway top: cannot read http://{addr}/api/cluster: {e}; retrying\n"),
                };
                redraw(&text);
            }
        }
    }
    println!();
    ExitCode::SUCCESS
}

/// Home, each line cleared to its end, the rest of the screen cleared.
fn redraw(text: &str) {
    let mut out = String::from("\x1b[H");
    for line in text.lines() {
        out.push_str(line);
        out.push_str("\x1b[K\n");
    }
    out.push_str("\x1b[J");
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(out.as_bytes());
    let _ = stdout.flush();
}

fn num(x: Option<f64>) -> String {
    match x {
        None => "-".into(),
        Some(v) if v.abs() >= 100.0 => format!("{v:.0}"),
        Some(v) if v.abs() >= 10.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.2}"),
    }
}

/// `HH:MM:SS` UTC of a Unix time in ms.
fn clock(ms: u64) -> String {
    let s = ms / 1000 % 86_400;
    format!("{:02}:{:02}:{:02} UTC", s / 3600, s / 60 % 60, s % 60)
}

fn sparkline(points: &[DcPoint]) -> String {
    let values: Vec<Option<f64>> = points.iter().map(|p| p.commits_per_s).collect();
    let max = values.iter().flatten().fold(0.0_f64, |a, b| a.max(*b));
    values
        .iter()
        .map(|v| match v {
            None => ' ',
            Some(_) if max <= 0.0 => SPARK[0],
            Some(v) => SPARK[((v / max) * 7.0).round().clamp(0.0, 7.0) as usize],
        })
        .collect()
}

fn paint(text: &str, code: &str, color: bool) -> String {
    if color {
        format!("\x1b[{code}m{text}\x1b[0m")
    } else {
        text.to_string()
    }
}

/// One whole frame.
pub fn frame(view: &ClusterView, color: bool) -> String {
    let mut out = String::new();
    header(&mut out, view, color);
    dcs(&mut out, view);
    let links: Vec<String> = view
        .links
        .iter()
        .map(|l| format!("{}-{} {:.0} ms", l.a, l.b, l.rtt_ms))
        .collect();
    if !links.is_empty() {
        let _ = writeln!(out, "\nlinks (emulated round trip): {}", links.join(" · "));
    }
    nodes(&mut out, view, color);
    out
}

fn header(out: &mut String, view: &ClusterView, color: bool) {
    let up = view.nodes.iter().filter(|n| n.state == "up").count();
    let total = |f: fn(&DcPoint) -> Option<f64>| -> Option<f64> {
        let v: Vec<f64> = view
            .dcs
            .iter()
            .filter_map(|d| d.series.last().and_then(f))
            .collect();
        (!v.is_empty()).then(|| v.iter().sum())
    };
    let title = paint("causeway top", "1", color);
    let _ = writeln!(
        out,
        "{title} · cluster {} · protocol {}{} · {up}/{} nodes up · {}",
        view.cluster,
        view.protocol,
        placement(view),
        view.nodes.len(),
        clock(view.now_ms)
    );
    let _ = writeln!(
        out,
        "total {} txn/s, {} aborts/s (Ctrl-C quits)\n",
        num(total(|p| p.commits_per_s)),
        num(total(|p| p.aborts_per_s))
    );
}

/// ` · P partitions in R of N DCs each` (or `in every DC`); nothing from a page that does
/// not say.
fn placement(view: &ClusterView) -> String {
    let (p, r, n) = (view.partitions, view.replication_factor, view.dcs.len());
    match () {
        _ if p == 0 || r == 0 => String::new(),
        _ if usize::from(r) >= n => format!(" · {p} partitions in every DC"),
        _ => format!(" · {p} partitions in {r} of {n} DCs each"),
    }
}

fn dc_row(dc: &DcView) -> String {
    let p = dc.series.last().cloned().unwrap_or_default();
    let sample = |name: &str| num(p.samples_ms.get(name).copied());
    format!(
        "{:<8} {:>5} {:>6} {:>9} {:>9} {:>8} {:>8} {:>10} {:>10}  {}",
        dc.name,
        format!("{}/{}", p.nodes_up, dc.nodes.len()),
        dc.partitions,
        num(p.commits_per_s),
        num(p.aborts_per_s),
        num(p.latency_mean_ms),
        num(p.latency_p99_ms),
        sample("gss_lag"),
        sample("remote_visibility"),
        sparkline(&dc.series)
    )
}

fn dcs(out: &mut String, view: &ClusterView) {
    let _ = writeln!(
        out,
        "{:<8} {:>5} {:>6} {:>9} {:>9} {:>8} {:>8} {:>10} {:>10}  txn/s, last {}s",
        "DC",
        "up",
        "parts",
        "txn/s",
        "aborts/s",
        "mean ms",
        "p99 ms",
        "GSS lag ms",
        "remote vis",
        SPARK_POINTS_MAX
    );
    for dc in &view.dcs {
        let _ = writeln!(out, "{}", dc_row(dc));
    }
}

fn node_row(view: &ClusterView, n: &NodeView, color: bool) -> String {
    let state = match n.state.as_str() {
        "up" => paint(&format!("{:<9}", "up"), "32", color),
        "down" => paint(&format!("{:<9}", "down"), "31;1", color),
        other => format!("{other:<9}"),
    };
    let age = n.last_scrape_ms.map_or("-".into(), |t| {
        format!("{:.1} s ago", view.now_ms.saturating_sub(t) as f64 / 1000.0)
    });
    let gauge = |k: &str| n.gauges.get(k).map_or("-".into(), |v| format!("{v:.0}"));
    let runtime = ["sessions", "client_connections", "link_queue_depth"];
    let protocol: Vec<String> = n
        .gauges
        .iter()
        .filter(|(k, _)| !runtime.contains(&k.as_str()))
        .map(|(k, v)| format!("{k} {v:.0}"))
        .collect();
    let why = n
        .error
        .as_ref()
        .map(|e| format!("  ({e})"))
        .unwrap_or_default();
    format!(
        "{:<12} {:<8} {state} {:>11} {:>9} {:>9} {:>8} {:>8} {:>10}  {}{why}",
        n.name,
        n.dc,
        age,
        num(n.commits_per_s),
        num(n.aborts_per_s),
        num(n.latency_mean_ms),
        gauge("sessions"),
        gauge("link_queue_depth"),
        protocol.join(" ")
    )
}

fn nodes(out: &mut String, view: &ClusterView, color: bool) {
    let _ = writeln!(
        out,
        "\n{:<12} {:<8} {:<9} {:>11} {:>9} {:>9} {:>8} {:>8} {:>10}  protocol gauges",
        "NODE",
        "DC",
        "STATE",
        "LAST SCRAPE",
        "txn/s",
        "aborts/s",
        "mean ms",
        "sessions",
        "link queue"
    );
    for n in &view.nodes {
        let _ = writeln!(out, "{}", node_row(view, n, color));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_runtime::dashboard::api::LinkView;

    fn view() -> ClusterView {
        let point = |c: f64| DcPoint {
            t_ms: 1000,
            nodes_up: 1,
            commits_per_s: Some(c),
            aborts_per_s: Some(0.0),
            latency_mean_ms: Some(2.5),
            latency_p99_ms: Some(20.0),
            samples_ms: [("gss_lag".to_string(), 50.0)].into_iter().collect(),
        };
        let node = |name: &str, state: &str| NodeView {
            name: name.into(),
            dc: "dc1".into(),
            metrics_addr: None,
            state: state.into(),
            last_scrape_ms: Some(500),
            error: (state == "down").then(|| "connection refused".to_string()),
            commits_per_s: Some(12.0),
            aborts_per_s: None,
            latency_mean_ms: None,
            gauges: [("store_versions".to_string(), 7.0)].into_iter().collect(),
        };
        ClusterView {
            cluster: "local".into(),
            protocol: "cure".into(),
            now_ms: 3_600_000 + 1000,
            interval_ms: 1000,
            points_max: 300,
            partitions: 8,
            replication_factor: 1,
            dcs: vec![DcView {
                name: "dc1".into(),
                nodes: vec!["dc1-n1".into(), "dc1-n2".into()],
                partitions: 8,
                client_addrs: vec![],
                series: vec![point(0.0), point(50.0), point(100.0)],
            }],
            links: vec![LinkView {
                a: "dc1".into(),
                b: "dc2".into(),
                rtt_ms: 80.0,
            }],
            nodes: vec![node("dc1-n1", "up"), node("dc1-n2", "down")],
        }
    }

    #[test]
    fn a_frame_shows_totals_dcs_links_and_nodes() {
        let text = frame(&view(), false);
        assert!(
            text.contains("protocol cure · 8 partitions in every DC · 1/2 nodes up · 01:00:01 UTC"),
            "{text}"
        );
        let mut partial = view();
        partial.dcs.push(DcView {
            name: "dc2".into(),
            ..partial.dcs[0].clone()
        });
        let two = frame(&partial, false);
        assert!(two.contains("8 partitions in 1 of 2 DCs each"), "{two}");
        assert!(text.contains("total 100 txn/s"), "{text}");
        let dc_row = text
            .lines()
            .find(|l| l.starts_with("dc1 "))
            .expect("a DC row");
        assert!(dc_row.starts_with("dc1        1/2      8 "), "{text}");
        assert!(text.contains("▁▅█"), "{text}");
        assert!(text.contains("dc1-dc2 80 ms"), "{text}");
        assert!(text.contains("(connection refused)"), "{text}");
        assert!(text.contains("store_versions 7"), "{text}");
        assert!(!text.contains('\x1b'), "no escapes without color");
        assert!(frame(&view(), true).contains("\x1b[32m"));
    }
}
