//! `causeway up` survives its nodes: a node process that dies (SIGKILL) is reported and
//! started again with backoff while the others keep running, and serves what it had; `causeway
//! ctl` kills a DC by name and it stays dead until `ctl start`; `ctl restart` names one node.
//! (`--no-restart` leaving a dead node dead is what up_dc_failure and up_strong rely on.)

mod up;

use std::time::{Duration, Instant};
use up::{causeway, cli_result, Up};

/// How long a restarted node may take to serve again.
const BACK_PATIENCE: Duration = Duration::from_secs(20);

/// Retries `script` at `addr` until its output contains `want`.
fn eventually_shows(addr: &str, script: &str, want: &str) {
    let began = Instant::now();
    loop {
        let (ok, out) = cli_result(addr, script);
        if ok && out.contains(want) {
            return;
        }
        assert!(
            began.elapsed() < BACK_PATIENCE,
            "{addr} never showed {want:?}: {out}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The pid `up.pids` gives node `name`, once it differs from `old`.
fn new_pid(up: &Up, name: &str, old: i32) -> i32 {
    let began = Instant::now();
    loop {
        let pid = up.read_pids().into_iter().find(|(n, _, _)| n == name);
        let pid = pid.expect("the node is listed").2;
        if pid != old {
            return pid;
        }
        assert!(
            began.elapsed() < BACK_PATIENCE,
            "{name} not restarted: {}",
            up.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn ctl(up: &Up, args: &[&str]) -> (bool, String) {
    let data = up.data.to_string_lossy().to_string();
    let mut all = vec!["ctl", "--data", data.as_str()];
    all.extend_from_slice(args);
    causeway(&all)
}

#[test]
fn a_killed_node_is_restarted_and_ctl_kills_and_starts_nodes_by_name() {
    let mut up = Up::start("restart", 2, 1, &["--protocol", "cure"]);
    let (dc1, dc2) = (up.client_addr(0), up.client_addr(1));
    eventually_shows(&dc1, "begin; set k v1; commit", "committed");
    eventually_shows(&dc2, "begin; get k; commit", "k = v1");
    let old = up.kill_dc("dc2")[0];
    let pid = new_pid(&up, "dc2-n1", old);
    eventually_shows(&dc2, "begin; get k; commit", "k = v1");
    let stderr = up.stderr();
    assert!(
        stderr.contains("node dc2-n1 of DC dc2 exited (signal: 9 (SIGKILL))")
            && stderr.contains("restarting it in 200 ms, the other nodes keep running"),
        "{stderr}"
    );
    assert!(stderr.contains(&format!(
        "node dc2-n1 of DC dc2 restarted (pid {pid}, restart 1)"
    )));

    let (ok, out) = ctl(&up, &["kill", "dc2"]);
    assert!(
        ok && out.contains(&format!("dc2-n1 killed (pid {pid})")),
        "{out}"
    );
    std::thread::sleep(Duration::from_secs(1));
    let (ok, out) = ctl(&up, &["status"]);
    assert!(
        ok && out.contains("dc2-n1 dc2 - killed restarts=1"),
        "{out}"
    );
    assert!(
        !cli_result(&dc2, "begin; get k; commit").0,
        "dc2 stays dead"
    );
    eventually_shows(&dc1, "begin; set k v2; commit", "committed");
    let (ok, out) = ctl(&up, &["start", "dc2"]);
    assert!(ok && out.contains("dc2-n1 started"), "{out}");
    eventually_shows(&dc2, "begin; get k; commit", "k = v2");

    let (ok, out) = ctl(&up, &["restart", "dc1-n1"]);
    assert!(
        ok && out.contains("dc1-n1 killed") && out.contains("dc1-n1 started"),
        "{out}"
    );
    eventually_shows(&dc1, "begin; set k v3; commit", "committed");
    eventually_shows(&dc2, "begin; get k; commit", "k = v3");
    let (ok, out) = ctl(&up, &["kill", "dc9"]);
    assert!(
        !ok && out.contains("no node or DC is named \"dc9\""),
        "{out}"
    );

    let (status, rest) = up.interrupt();
    assert!(status.success(), "up exited with {status}: {rest:?}");
    assert!(
        !up.data.join("up.sock").exists(),
        "up removes its control socket"
    );
    let (ok, out) = ctl(&up, &["status"]);
    assert!(!ok && out.contains("no causeway up answers"), "{out}");
}
