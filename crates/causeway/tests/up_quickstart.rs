//! The README quickstart end to end: `causeway up` starts a local cluster, the CLI writes
//! at one DC and reads causally at another (through a token), RESP answers at its port
//! (`INFO causeway` lists the node's gauges), and Ctrl-C (SIGINT) stops everything cleanly.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A port base whose client, peer and RESP ports (for 2 DCs of 1 node) are all free now.
fn free_base() -> u16 {
    let mut base = 30_000 + (std::process::id() % 250) as u16 * 100;
    loop {
        let ports = [
            base + 1,
            base + 2,
            base + 100,
            base + 101,
            base + 51,
            base + 52,
            base + 60,
            base + 61,
        ];
        let held: Vec<_> = ports
            .iter()
            .filter_map(|p| TcpListener::bind(("127.0.0.1", *p)).ok())
            .collect();
        if held.len() == ports.len() {
            return base;
        }
        base = if base > 55_000 { 30_000 } else { base + 100 };
    }
}

fn cli(addr: &str, script: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_causeway"))
        .args(["cli", "--addr", addr, "-c", script])
        .output()
        .expect("run causeway cli");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "cli {script}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// `INFO causeway` over RESP2 (a bulk string reply).
fn resp_info(addr: &str) -> String {
    let mut stream = TcpStream::connect(addr).expect("connect to RESP");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("read timeout");
    stream
        .write_all(b"*2\r\n$4\r\nINFO\r\n$8\r\ncauseway\r\n")
        .expect("send INFO");
    let mut reader = BufReader::new(stream);
    let mut header = String::new();
    reader.read_line(&mut header).expect("INFO header");
    let len: usize = header
        .trim()
        .strip_prefix('$')
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("INFO answers a bulk string, not {header:?}"));
    let mut body = vec![0; len];
    reader.read_exact(&mut body).expect("INFO body");
    String::from_utf8(body).expect("INFO is text")
}

/// The `name:value` lines after `dc_count`, which are the gauges; waits (the node
/// publishes them twice a second) until a sample-derived `gss_lag_ms` is among them.
fn published_gauges(addr: &str) -> Vec<String> {
    let began = Instant::now();
    loop {
        let text = resp_info(addr);
        let gauges: Vec<String> = text
            .lines()
            .skip_while(|l| !l.starts_with("dc_count:"))
            .skip(1)
            .take_while(|l| !l.is_empty())
            .map(str::to_string)
            .collect();
        if gauges.iter().any(|g| g.starts_with("gss_lag_ms:")) {
            return gauges;
        }
        assert!(began.elapsed() < Duration::from_secs(10), "{text}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn up_then_cli_writes_at_one_dc_and_reads_causally_at_another_then_ctrl_c_stops() {
    let base = free_base();
    let data = std::env::temp_dir().join(format!("causeway-it-up-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data);
    let mut up = Command::new(env!("CARGO_BIN_EXE_causeway"))
        .args(["up", "--dcs", "2", "--nodes-per-dc", "1", "--data"])
        .arg(&data)
        .args([
            "--port-base",
            &base.to_string(),
            "--resp-port-base",
            &(base + 50).to_string(),
            "--metrics-port-base",
            &(base + 60).to_string(),
            // The cluster page has its own test (cluster_page.rs); its default port could clash.
            "--http-port",
            "0",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start causeway up");
    let mut lines = BufReader::new(up.stdout.take().expect("stdout")).lines();
    let mut banner = String::new();
    for line in lines.by_ref() {
        let line = line.expect("read up's output");
        banner.push_str(&line);
        banner.push('\n');
        if line.contains("press Ctrl-C") {
            break;
        }
    }
    let (dc1, dc2) = (
        format!("127.0.0.1:{}", base + 1),
        format!("127.0.0.1:{}", base + 2),
    );
    assert!(
        banner.contains(&format!("dc1: clients at {dc1}")),
        "{banner}"
    );
    let metrics = format!("dc2-n1: metrics at http://127.0.0.1:{}/metrics", base + 61);
    assert!(banner.contains(&metrics), "{banner}");
    let out = cli(&dc1, "begin; set photo p1; commit; token");
    let token = out.lines().last().expect("a token line").trim().to_string();
    let out = cli(&dc2, &format!("attach {token}; begin; get photo; commit"));
    assert!(out.contains("photo = p1"), "{out}");
    let gauges = published_gauges(&format!("127.0.0.1:{}", base + 51));
    let names: Vec<&str> = gauges.iter().filter_map(|g| g.split(':').next()).collect();
    assert!(names.windows(2).all(|w| w[0] < w[1]), "sorted: {gauges:?}");
    assert!(names.contains(&"sessions"), "{gauges:?}");
    assert!(!names.iter().any(|n| n.ends_with("_ns")), "{gauges:?}");
    // SAFETY: kill(2) on our child.
    unsafe {
        libc::kill(up.id() as libc::pid_t, libc::SIGINT);
    }
    let status = up.wait().expect("wait for up");
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(status.success(), "up exited with {status}: {rest:?}");
    assert!(rest.iter().any(|l| l.contains("stopped")), "{rest:?}");
    let log = std::fs::read_to_string(data.join("dc1-n1.log")).expect("node log");
    assert!(log.contains("stopped"), "the node shut down cleanly: {log}");
    let _ = std::fs::remove_dir_all(&data);
}
