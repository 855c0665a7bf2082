//! `causeway bench --real`: the experiment's quick real sweep starts a local cluster per
//! protocol, drives it, and reports one curve per protocol with committed transactions at
//! every point; the clusters' processes and temporary directories are gone afterwards.

use std::process::Command;

#[test]
fn the_quick_real_sweep_measures_both_protocols_on_real_clusters() {
    let dir = std::env::temp_dir().join(format!("causeway-it-bench-real-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create the test directory");
    let json = dir.join("real.json");
    let out = Command::new(env!("CARGO_BIN_EXE_causeway"))
        .args([
            "bench",
            "--real",
            "--experiment",
            "cure-vs-eventual",
            "--quick",
            "--json",
        ])
        .arg(&json)
        .env("TMPDIR", &dir)
        .output()
        .expect("run causeway");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "bench --real failed:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("real cluster") && stdout.contains("differs:"),
        "{stdout}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("the --json file"))
            .expect("json");
    assert_eq!(report["source"], "real cluster");
    let curves = report["curves"].as_array().expect("curves");
    let protocols: Vec<&str> = curves
        .iter()
        .map(|c| c["protocol"].as_str().unwrap())
        .collect();
    assert_eq!(protocols, ["eventual", "cure"]);
    for c in curves {
        let points = c["points"].as_array().expect("points");
        let clients: Vec<u64> = points
            .iter()
            .map(|p| p["clients_per_dc"].as_u64().unwrap())
            .collect();
        assert_eq!(clients, [1, 8], "the quick real sweep");
        for p in points {
            assert!(p["committed"].as_u64().unwrap() > 0, "{p}");
            assert!(p["throughput_txn_per_s"].as_f64().unwrap() > 0.0, "{p}");
            assert!(
                p["cpu_utilization"].is_null(),
                "no CPU model on a real cluster"
            );
        }
    }
    // The bench made its clusters' directories under TMPDIR, our directory: all removed.
    let left: Vec<String> = std::fs::read_dir(&dir)
        .expect("list the test directory")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n != "real.json")
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn real_flags_need_real_and_are_bounded() {
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_causeway"))
            .args(args)
            .output()
            .expect("run causeway");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (ok, err) = run(&["bench", "--experiment", "cure-vs-eventual", "--also-sim"]);
    assert!(!ok && err.contains("--real"), "{err}");
    let (ok, err) = run(&[
        "bench",
        "--real",
        "--experiment",
        "cure-vs-eventual",
        "--real-clients",
        "100000",
    ]);
    assert!(
        !ok && err.contains("--real-clients") && err.contains("fix"),
        "{err}"
    );
}
