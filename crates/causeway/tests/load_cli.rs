//! `causeway load` against a real cluster: closed-loop YCSB-B clients over two DCs print a
//! table with throughput and latency, and the history they record passes `causeway check`.

mod cluster;

use cluster::Cluster;
use std::process::Command;

fn causeway(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_causeway"))
        .args(args)
        .output()
        .expect("run causeway");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// The numbers of the table row after the header line.
fn table_row(stdout: &str) -> Vec<f64> {
    let mut lines = stdout.lines().skip_while(|l| !l.starts_with("clients"));
    lines.next().expect("the table header");
    let row = lines.next().expect("a table row");
    row.split_whitespace()
        .map(|n| n.parse().unwrap_or_else(|_| panic!("a number in {row:?}")))
        .collect()
}

#[test]
fn load_drives_two_dcs_and_its_history_passes_the_tcc_checker() {
    let mut c = Cluster::start("load", "cure", 2, 2, 20.0);
    let history = c.dir.join("load.jsonl");
    let json = c.dir.join("load.json");
    let addrs = format!("{},{}", c.client_addr(0), c.client_addr(1));
    let (ok, out, err) = causeway(&[
        "load",
        "--addr",
        &addrs,
        "--workload",
        "ycsb-b",
        "--clients",
        "4",
        "--duration",
        "3",
        "--history",
        history.to_str().expect("utf-8 path"),
        "--json",
        json.to_str().expect("utf-8 path"),
    ]);
    assert!(ok, "causeway load failed:\n{out}\n{err}");
    eprintln!("{out}");
    // clients committed aborted unknown txn/s mean p50 p99 max
    let row = table_row(&out);
    assert_eq!(row.len(), 9, "{out}");
    assert_eq!(row[0], 4.0, "the client count");
    assert!(row[1] > 50.0, "too few committed txns: {out}");
    assert!(row[4] > 10.0, "throughput: {out}");
    assert!(row[7] > 0.0 && row[7] <= row[8], "p99 within max: {out}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("the --json file"))
            .expect("json");
    assert_eq!(report["rows"][0]["committed"].as_f64(), Some(row[1]));
    let (ok, checked, err) = causeway(&[
        "check",
        "--guarantee",
        "tcc",
        "--history",
        history.to_str().expect("utf-8 path"),
    ]);
    assert!(ok, "causeway check: {checked}{err}");
    assert!(
        checked.starts_with("ok:") && checked.contains("final reads"),
        "{checked}"
    );
    c.stop();
}

#[test]
fn load_refuses_an_out_of_range_flag_naming_it_and_the_fix() {
    let (ok, _, err) = causeway(&["load", "--addr", "127.0.0.1:1", "--clients", "0"]);
    assert!(!ok);
    assert!(err.contains("--clients") && err.contains("fix"), "{err}");
}
