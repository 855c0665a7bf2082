//! The live cluster page as a person sees it: `causeway up` starts 3 DCs, `causeway load`
//! drives them; meanwhile a node's `/metrics` parses as Prometheus text (prometheus-parse)
//! with a commit counter that moves, `up`'s `/api/cluster` lists the DCs, their links and
//! a non-zero throughput, `causeway top --once` prints them, and headless Chromium renders
//! the page (the DOM shows every DC and a non-zero total throughput) and saves a
//! screenshot (`CAUSEWAY_SCREENSHOT=FILE` to choose where; default in the target dir).
//!
//! Chromium is Debian's `chromium` (`.ci/install-extras` installs it). Without it the test
//! fails, saying so; `CAUSEWAY_SKIP_BROWSER=1` skips the browser part on a machine
//! without it, except under CI (`CI` set), where it is refused.

mod http;

use causeway_runtime::dashboard::api::ClusterView;
use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const DCS: u16 = 3;
/// How long chromium may take for one page.
const BROWSER_TIMEOUT: Duration = Duration::from_secs(45);

/// The ports `up` uses from `base`: clients, peers, RESP, metrics, the page.
fn ports(base: u16) -> Vec<u16> {
    let mut p = Vec::new();
    for i in 0..DCS {
        p.extend([base + 1 + i, base + 100 + i, base + 51 + i, base + 61 + i]);
    }
    p.push(base + 70);
    p
}

/// A port base whose ports are all free now.
fn free_base() -> u16 {
    let mut base = 20_000 + (std::process::id() % 90) as u16 * 100;
    loop {
        let held: Vec<_> = ports(base)
            .iter()
            .filter_map(|p| TcpListener::bind(("127.0.0.1", *p)).ok())
            .collect();
        if held.len() == ports(base).len() {
            return base;
        }
        base = if base > 28_800 { 20_000 } else { base + 100 };
    }
}

/// `up` and `load`, stopped (SIGINT, then waited for) even when an assertion fails.
struct Running {
    up: Child,
    load: Option<Child>,
    data: PathBuf,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut load) = self.load.take() {
            let _ = load.kill();
            let _ = load.wait();
        }
        // SAFETY: kill(2) on our own child.
        unsafe {
            libc::kill(self.up.id() as libc::pid_t, libc::SIGINT);
        }
        let _ = self.up.wait();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.data);
        }
    }
}

fn start_up(base: u16) -> (Running, String) {
    let data = std::env::temp_dir().join(format!("causeway-it-page-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data);
    let port = |off: u16| (base + off).to_string();
    let mut up = Command::new(env!("CARGO_BIN_EXE_causeway"))
        .args(["up", "--dcs", &DCS.to_string(), "--nodes-per-dc", "1"])
        .args(["--protocol", "cure"])
        .args(["--rtt-ms", "40", "--data"])
        .arg(&data)
        .args(["--port-base", &port(0), "--resp-port-base", &port(50)])
        .args(["--metrics-port-base", &port(61), "--http-port", &port(70)])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start causeway up");
    let stdout = up.stdout.take().expect("up's stdout");
    let running = Running {
        up,
        load: None,
        data,
    };
    let mut lines = BufReader::new(stdout).lines();
    let mut banner = String::new();
    for line in lines.by_ref() {
        let line = line.expect("read up's output");
        banner.push_str(&line);
        banner.push('\n');
        if line.contains("press Ctrl-C") {
            break;
        }
    }
    // Keep reading, so `up` can print its last lines when it stops.
    std::thread::spawn(move || lines.for_each(drop));
    (running, banner)
}

fn start_load(base: u16) -> Child {
    let addrs: Vec<String> = (1..=DCS)
        .map(|i| format!("127.0.0.1:{}", base + i))
        .collect();
    Command::new(env!("CARGO_BIN_EXE_causeway"))
        .args(["load", "--addr", &addrs.join(","), "--workload", "ycsb-b"])
        .args(["--clients", "6", "--duration", "40"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start causeway load")
}

/// A GET: the status line and the body.
fn get(addr: SocketAddr, path: &str) -> (String, String) {
    let (status, _, body) = http::get(addr, path);
    (status, body)
}

fn cluster_view(page: SocketAddr) -> ClusterView {
    let (status, body) = get(page, "/api/cluster");
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// The latest committed txn/s of every DC added up.
fn total_tps(view: &ClusterView) -> f64 {
    let last = |d: &causeway_runtime::dashboard::api::DcView| d.series.last()?.commits_per_s;
    view.dcs.iter().filter_map(last).sum()
}

/// Waits until the page reports throughput on every DC (load has warmed up).
fn wait_for_throughput(page: SocketAddr) -> ClusterView {
    let began = Instant::now();
    loop {
        let view = cluster_view(page);
        let busy = |d: &causeway_runtime::dashboard::api::DcView| {
            d.series.last().and_then(|p| p.commits_per_s) > Some(0.0)
        };
        if view.dcs.iter().all(busy) {
            return view;
        }
        assert!(
            began.elapsed() < Duration::from_secs(20),
            "no throughput: {view:?}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The sum of every `name` counter of one scrape, parsed by prometheus-parse.
fn scrape_commits(metrics: SocketAddr) -> (f64, prometheus_parse::Scrape) {
    let (status, body) = get(metrics, "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    let lines = body.lines().map(|l| Ok(l.to_string()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("Prometheus text");
    let commits = scrape
        .samples
        .iter()
        .filter(|s| s.metric == "causeway_txn_commits_total")
        .map(|s| match s.value {
            prometheus_parse::Value::Counter(v) => v,
            ref other => panic!("the commit counter is a counter, not {other:?}"),
        })
        .sum();
    (commits, scrape)
}

fn check_metrics(metrics: SocketAddr) {
    let (before, _) = scrape_commits(metrics);
    std::thread::sleep(Duration::from_millis(1500));
    let (after, scrape) = scrape_commits(metrics);
    assert!(
        after > before && before > 0.0,
        "commits {before} -> {after}"
    );
    let latency = scrape
        .samples
        .iter()
        .find(|s| s.metric == "causeway_txn_latency_seconds")
        .expect("the latency histogram");
    assert!(matches!(latency.value, prometheus_parse::Value::Histogram(ref b) if b.len() > 5));
    assert_eq!(latency.labels.get("dc"), Some("dc1"));
    assert_eq!(latency.labels.get("protocol"), Some("cure"));
    for stem in ["gss_lag", "remote_visibility"] {
        let name = format!("causeway_{stem}_seconds");
        assert!(
            scrape.samples.iter().any(|s| s.metric == name),
            "{name} missing"
        );
    }
}

fn check_api(view: &ClusterView) {
    let names: Vec<&str> = view.dcs.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["dc1", "dc2", "dc3"]);
    assert_eq!(view.protocol, "cure");
    assert_eq!(view.links.len(), 3);
    assert!(
        view.links.iter().all(|l| (l.rtt_ms - 40.0).abs() < 1e-6),
        "{:?}",
        view.links
    );
    assert!(
        view.nodes.iter().all(|n| n.state == "up"),
        "{:?}",
        view.nodes
    );
    assert!(total_tps(view) > 0.0);
    let p = view.dcs[0].series.last().expect("a point");
    assert!(
        p.latency_mean_ms.is_some() && p.samples_ms.contains_key("gss_lag"),
        "{p:?}"
    );
}

fn check_top(page: SocketAddr) {
    let out = Command::new(env!("CARGO_BIN_EXE_causeway"))
        .args(["top", "--once", "--addr", &page.to_string()])
        .output()
        .expect("run causeway top");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("3/3 nodes up"), "{text}");
    for dc in ["dc1", "dc2", "dc3"] {
        assert!(
            text.lines().any(|l| l.starts_with(dc)),
            "{dc} missing: {text}"
        );
    }
    let total: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("total ")?.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no total line: {text}"));
    assert!(total > 0.0, "{text}");
}

/// The chromium binary, `None` when it is missing and skipping was asked for.
fn chromium() -> Option<PathBuf> {
    let found = ["chromium", "chromium-browser"].iter().find_map(|name| {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(name))
                .find(|p| p.is_file())
        })
    });
    if found.is_some() {
        return found;
    }
    let skip = std::env::var_os("CAUSEWAY_SKIP_BROWSER").is_some();
    if skip && std::env::var_os("CI").is_none() {
        eprintln!("chromium not found: skipping the browser checks (CAUSEWAY_SKIP_BROWSER)");
        return None;
    }
    panic!(
        "chromium not found on PATH: the cluster page test opens the page in headless Chromium; \
         fix: run .ci/install-extras (apt-get install chromium), or locally set \
         CAUSEWAY_SKIP_BROWSER=1 to skip the browser checks (refused under CI)"
    );
}

/// Runs headless chromium on `url` with `args`, killing it past [`BROWSER_TIMEOUT`].
fn browse(chromium: &Path, profile: &Path, args: &[String], url: &str) -> String {
    let mut child = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(["--virtual-time-budget=4000", "--window-size=1280,900"])
        .args(args)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromium");
    let mut stdout = child.stdout.take().expect("chromium's stdout");
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        out
    });
    let began = Instant::now();
    while child.try_wait().expect("wait for chromium").is_none() {
        if began.elapsed() > BROWSER_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish {url} within {BROWSER_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    reader.join().expect("chromium's output")
}

/// The number in `data-value="..."` of the element with `id`.
fn data_value(dom: &str, id: &str) -> Option<f64> {
    let at = dom.find(&format!("id=\"{id}\""))?;
    let tag_end = at + dom[at..].find('>')?;
    let tag = &dom[..tag_end];
    let start = tag.rfind('<')?;
    let value = tag[start..].split("data-value=\"").nth(1)?;
    value.split('"').next()?.parse().ok()
}

fn check_browser(page: SocketAddr) {
    let Some(chromium) = chromium() else {
        return;
    };
    let profile = std::env::temp_dir().join(format!("causeway-it-chromium-{}", std::process::id()));
    let url = format!("http://{page}/");
    let dom = browse(&chromium, &profile, &["--dump-dom".into()], &url);
    for dc in ["dc1", "dc2", "dc3"] {
        assert!(
            dom.contains(&format!("data-dc=\"{dc}\"")),
            "{dc} not on the page: {dom}"
        );
    }
    let tps = data_value(&dom, "total-tps").unwrap_or_else(|| panic!("no total: {dom}"));
    assert!(tps > 0.0, "the page shows no throughput: {dom}");
    assert!(dom.contains("40 ms"), "the links' round trip: {dom}");
    let shot = std::env::var_os("CAUSEWAY_SCREENSHOT").map_or_else(
        || PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cluster-page.png"),
        PathBuf::from,
    );
    let _ = std::fs::remove_file(&shot);
    browse(
        &chromium,
        &profile,
        &[format!("--screenshot={}", shot.display())],
        &url,
    );
    let png = std::fs::read(&shot).unwrap_or_else(|e| panic!("no screenshot {shot:?}: {e}"));
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{shot:?}"
    );
    eprintln!("screenshot of the cluster page: {}", shot.display());
    let _ = std::fs::remove_dir_all(&profile);
}

#[test]
fn the_cluster_page_shows_a_loaded_three_dc_cluster_in_api_top_and_browser() {
    let base = free_base();
    let (mut running, banner) = start_up(base);
    let page = SocketAddr::from(([127, 0, 0, 1], base + 70));
    assert!(
        banner.contains(&format!("cluster page at http://{page}/")),
        "{banner}"
    );
    running.load = Some(start_load(base));
    let view = wait_for_throughput(page);
    check_api(&view);
    check_metrics(SocketAddr::from(([127, 0, 0, 1], base + 61)));
    check_top(page);
    check_browser(page);
    let (status, html) = get(page, "/");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(html.contains("<canvas") && !html.contains("http://") && !html.contains("https://"));
    drop(running);
}
