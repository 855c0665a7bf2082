//! The README quickstart end to end: `causeway up` starts a local cluster (unistore, the
//! default), the CLI writes at one DC and reads causally at another (through a token), runs
//! a strong txn and a uniform barrier, RESP answers at its port (`INFO causeway` lists the
//! node's gauges; `TX.BEGIN STRONG` ... `TX.COMMIT`), and Ctrl-C (SIGINT) stops everything
//! cleanly. With `--protocol cure --on-node-exit stop`, cure refuses uniform barriers with a
//! clear "unsupported" error (CLI and RESP) and one node killed stops the whole cluster.

mod up;

use std::time::{Duration, Instant};
use up::{cli, cli_result, resp_command, resp_connect, Up};

/// `INFO causeway` over RESP2 (a bulk string reply).
fn resp_info(addr: &str) -> String {
    resp_command(&mut resp_connect(addr), &["INFO", "causeway"])
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

/// The README's RESP strong txn at DC1, right after DC2's strong txn on `nick`: it may
/// abort (DC2's txn is still being decided, or not in DC1's snapshot yet) with
/// `TXABORTED ... conflict ...`; run again, as the README says, it commits.
fn resp_strong_txn_retried_on_abort(addr: &str) {
    let mut resp = resp_connect(addr);
    for attempt in 1.. {
        assert_eq!(resp_command(&mut resp, &["TX.BEGIN", "STRONG"]), "+OK");
        let read = resp_command(&mut resp, &["GET", "nick"]);
        assert!(!read.starts_with('-'), "{read}");
        assert_eq!(resp_command(&mut resp, &["SET", "nick", "you"]), "+OK");
        let reply = resp_command(&mut resp, &["TX.COMMIT"]);
        if reply == "+OK" {
            return;
        }
        let abort = "-TXABORTED transaction aborted: conflict";
        assert!(reply.starts_with(abort) && attempt < 20, "{reply}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Cure has no uniform barrier: the CLI and RESP say so, naming the protocol.
fn cure_refuses_barriers(up: &Up) {
    let (ok, out) = cli_result(&up.client_addr(0), "barrier");
    assert!(!ok, "{out}");
    assert!(
        out.contains("protocol 'cure' does not support uniform barriers"),
        "{out}"
    );
    let reply = resp_command(&mut resp_connect(&up.resp_addr(0)), &["CAUSAL.BARRIER"]);
    assert!(reply.starts_with("-ERR"), "{reply}");
    assert!(
        reply.contains("'cure' does not support uniform barriers"),
        "{reply}"
    );
}

#[test]
fn up_then_cli_writes_at_one_dc_and_reads_causally_at_another_then_ctrl_c_stops() {
    let mut up = Up::start("up", 2, 1, &[]);
    let (dc1, dc2) = (up.client_addr(0), up.client_addr(1));
    let banner = &up.banner;
    assert!(banner.contains("running protocol unistore"), "{banner}");
    assert!(
        banner.contains(&format!("dc1: clients at {dc1}")),
        "{banner}"
    );
    let metrics = format!(
        "dc2-n1: metrics at http://127.0.0.1:{}/metrics",
        up.base + 61
    );
    assert!(banner.contains(&metrics), "{banner}");
    let out = cli(&dc1, "begin; set photo p1; commit; token");
    let token = out.lines().last().expect("a token line").trim().to_string();
    let out = cli(&dc2, &format!("attach {token}; begin; get photo; commit"));
    assert!(out.contains("photo = p1"), "{out}");
    let out = cli(&dc2, "begin strong; get nick; set nick me; commit; barrier");
    assert!(
        out.contains("committed") && out.contains("barrier done"),
        "{out}"
    );
    resp_strong_txn_retried_on_abort(&up.resp_addr(0));
    let gauges = published_gauges(&up.resp_addr(1));
    let names: Vec<&str> = gauges.iter().filter_map(|g| g.split(':').next()).collect();
    assert!(names.windows(2).all(|w| w[0] < w[1]), "sorted: {gauges:?}");
    assert!(names.contains(&"sessions"), "{gauges:?}");
    assert!(!names.iter().any(|n| n.ends_with("_ns")), "{gauges:?}");
    let (status, rest) = up.interrupt();
    assert!(status.success(), "up exited with {status}: {rest:?}");
    assert!(rest.iter().any(|l| l.contains("stopped")), "{rest:?}");
    let log = std::fs::read_to_string(up.data.join("dc1-n1.log")).expect("node log");
    assert!(log.contains("stopped"), "the node shut down cleanly: {log}");
    assert_eq!(
        up.live_nodes(),
        Vec::<String>::new(),
        "no node left running"
    );
    assert!(!up.data.join("up.pids").exists(), "up removes its pid file");
}

#[test]
fn with_on_node_exit_stop_a_dead_node_stops_the_whole_cluster() {
    let extra = ["--protocol", "cure", "--on-node-exit", "stop"];
    let mut up = Up::start("up-stop", 2, 1, &extra);
    assert!(up.banner.contains("running protocol cure"), "{}", up.banner);
    cure_refuses_barriers(&up);
    let killed = up.kill_dc("dc2");
    assert_eq!(killed.len(), 1, "{:?}", up.pids);
    let (status, _) = up.wait_exit();
    assert!(!status.success(), "up fails when a node dies under `stop`");
    let stderr = up.stderr();
    let line = "error: node dc2-n1 of DC dc2 exited (signal: 9 (SIGKILL))";
    assert!(stderr.contains(line), "{stderr}");
    assert!(stderr.contains("stopping the cluster"), "{stderr}");
    assert_eq!(
        up.live_nodes(),
        Vec::<String>::new(),
        "no node left running"
    );
}
