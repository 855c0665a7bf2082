//! The `sim` and `check` commands end to end: exit codes, the summary line, history export
//! and re-checking a saved history.

mod cli;

use cli::causeway;

fn temp_path(name: &str) -> String {
    let dir = std::env::temp_dir().join(format!("causeway-sim-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir.join(name).to_string_lossy().to_string()
}

#[test]
fn eventual_violations_exit_1_and_the_saved_history_fails_check_too() {
    let history = temp_path("eventual.jsonl");
    let (code, out) = causeway(&[
        "sim",
        "--protocol",
        "eventual",
        "--guarantee",
        "tcc",
        "--seeds",
        "3",
        "--duration-ms",
        "1000",
        "--history",
        &history,
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("seed=3 FAILED"), "{out}");
    assert!(
        out.contains(
            "replay: causeway sim --protocol eventual --guarantee tcc --seeds 3 --duration-ms 1000"
        ),
        "{out}"
    );
    let summary = out.lines().last().expect("summary line");
    assert!(
        summary.starts_with("protocol=eventual seeds=1 txns="),
        "{summary}"
    );
    assert!(summary.ends_with("violations=1"), "{summary}");
    let (code, out) = causeway(&["check", "--guarantee", "tcc", "--history", &history]);
    assert_eq!(code, 1, "{out}");
    assert!(out.starts_with("violation: "), "{out}");
}

#[test]
fn a_linearizable_setup_passes_sim_and_check() {
    // One DC, one node, one op per txn: eventual is linearizable, hence causal.
    let history = temp_path("single.jsonl");
    let (code, out) = causeway(&[
        "sim",
        "--protocol",
        "eventual",
        "--seeds",
        "1..3",
        "--dcs",
        "1",
        "--nodes-per-dc",
        "1",
        "--partitions",
        "1",
        "--txn-ops",
        "1",
        "--duration-ms",
        "1000",
        "--history",
        &history,
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(out.trim_end().ends_with("violations=0"), "{out}");
    let (code, out) = causeway(&["check", "--history", &history]);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("ok: "), "{out}");
}

#[test]
fn check_por_rejects_a_lost_update_that_tcc_accepts() {
    let history = temp_path("lost-update.jsonl");
    let txn = |s: u64, label: &str| {
        format!(
            r#"{{"type":"txn","id":"s{s}.t1","session":{s},"dc":0,"kind":"strong","label":"{label}","start_ns":0,"end_ns":1,"outcome":"committed","ops":[{{"op":"read","key":"users/5/name","obj":"lww","value":{{"lww":null}},"observed":[]}},{{"op":"write","key":"users/5/name","update":{{"assign":"me"}},"id":"s{s}.t1.o0"}}]}}"#
        )
    };
    let lines = [txn(1, "registerUser"), txn(2, "registerUser")].join("\n");
    std::fs::write(&history, lines).expect("write the history");
    let (code, out) = causeway(&["check", "--guarantee", "tcc", "--history", &history]);
    assert_eq!(code, 0, "{out}");
    // Under the third relation registerUser is ad-hoc (no rule names it): default rule.
    for conflicts in ["default", "rubis", "storeBid closeAuction items/{}/*"] {
        let args = ["check", "--guarantee", "por", "--conflicts", conflicts];
        let (code, out) = causeway(&[&args[..], &["--history", &history]].concat());
        assert_eq!(code, 1, "{out}");
        assert!(out.starts_with("violation: LostUpdate"), "{out}");
    }
    // Under a relation that declares registerUser but not with itself, nothing is wrong.
    let other = "registerUser closeAuction users/{}/name";
    let args = ["check", "--guarantee", "por", "--conflicts", other];
    let (code, out) = causeway(&[&args[..], &["--history", &history]].concat());
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("2 strong txns, 0 conflict edges"), "{out}");
}

#[test]
fn bad_arguments_are_refused_with_a_clear_error() {
    let (code, out) = causeway(&["check", "--guarantee", "linearizable", "--history", "x"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("unknown guarantee 'linearizable'"), "{out}");
    let (code, out) = causeway(&["check", "--conflicts", "a b", "--history", "x"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("bad --conflicts"), "{out}");
    let (code, out) = causeway(&["check", "--history", "/nonexistent/h.jsonl"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("cannot open history"), "{out}");
    let (code, out) = causeway(&["sim", "--protocol", "nosuch", "--seeds", "1"]);
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("unknown protocol 'nosuch'"), "{out}");
}

/// A file with no transaction checks nothing: refused, not "ok". So is a file that is no
/// history (CSV, a header line of another format).
#[test]
fn check_refuses_an_empty_or_headerless_history() {
    let finals_only =
        r#"{"type":"final","dc":0,"key":"k","obj":"lww","value":{"lww":null},"observed":[]}"#;
    for (name, text) in [
        ("empty.jsonl", ""),
        ("blank.jsonl", "\n\n"),
        ("finals.jsonl", finals_only),
    ] {
        let history = temp_path(name);
        std::fs::write(&history, text).expect("write the history");
        let (code, out) = causeway(&["check", "--history", &history]);
        assert_eq!(code, 2, "{name}: {out}");
        assert!(out.contains("holds no transaction"), "{name}: {out}");
    }
    let csv = temp_path("table.csv");
    std::fs::write(&csv, "id,session,dc\ns1.t1,1,0\n").expect("write the file");
    let (code, out) = causeway(&["check", "--history", &csv]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("is malformed"), "{out}");
}

#[test]
fn workload_families_run_clean_and_rubis_strong_txns_are_refused_by_cure() {
    let (code, out) = causeway(&[
        "sim",
        "--protocol",
        "cure",
        "--workload",
        "rubis",
        "--seeds",
        "1..3",
    ]);
    assert_eq!(code, 0, "{out}");
    let summary = out.lines().last().expect("summary line");
    assert!(summary.contains("violations=0 refused="), "{summary}");
    let (code, out) = causeway(&[
        "sim",
        "--protocol",
        "cure",
        "--workload",
        "ycsb-b",
        "--seeds",
        "1..3",
        "--faults",
        "all",
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(out.trim_end().ends_with("violations=0"), "{out}");
}

#[test]
fn workload_options_are_checked_naming_the_flag() {
    for (args, flag) in [
        (&["--workload", "tpcc"][..], "--workload"),
        (&["--remote-ratio", "1.5"][..], "--remote-ratio"),
        (&["--local-dc-ratio", "2"][..], "--local-dc-ratio"),
        (&["--partitions-per-txn", "9"][..], "--partitions-per-txn"),
        (&["--value-bytes", "99999999"][..], "--value-bytes"),
        (&["--rubis-scale", "0"][..], "--rubis-scale"),
        (&["--conflicts", "a b"][..], "--conflicts"),
        (
            &["--workload", "ycsb-a", "--strong-ratio", "0.1"][..],
            "--strong-ratio",
        ),
    ] {
        let mut all = vec!["sim", "--seeds", "1"];
        all.extend_from_slice(args);
        let (code, out) = causeway(&all);
        assert_eq!(code, 2, "{args:?}: {out}");
        assert!(out.contains(flag), "{args:?}: {out}");
    }
    // `--replication` is `--replication-factor`: cure takes only full replication.
    let (code, out) = causeway(&["sim", "--seeds", "1", "--replication", "2"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("cure needs full replication"), "{out}");
}

#[test]
fn unistore_barriers_moves_and_f_run_and_the_history_keeps_the_barriers() {
    let history = temp_path("unistore.jsonl");
    let (code, out) = causeway(&[
        "sim",
        "--protocol",
        "unistore",
        "--seeds",
        "2",
        "--duration-ms",
        "1000",
        "--faults",
        "dc-failure",
        "--f",
        "1",
        "--barrier-ratio",
        "0.1",
        "--migrate-ratio",
        "0.05",
        "--history",
        &history,
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(out.trim_end().ends_with("violations=0"), "{out}");
    let text = std::fs::read_to_string(&history).expect("history written");
    assert!(text.contains("\"type\":\"barrier\""), "barriers recorded");
    let (code, out) = causeway(&["check", "--guarantee", "tcc", "--history", &history]);
    assert_eq!(code, 0, "the saved history checks too: {out}");
}

#[test]
fn f_and_barrier_options_are_refused_where_the_protocol_lacks_them() {
    for (args, what) in [
        (
            &["--protocol", "cure", "--f", "1"][..],
            "--f: protocol cure",
        ),
        (
            &["--protocol", "cure", "--barrier-ratio", "0.1"][..],
            "--barrier-ratio needs a protocol with uniform barriers",
        ),
        (
            &["--protocol", "cureft", "--migrate-ratio", "0.1"][..],
            "--migrate-ratio needs a protocol with uniform barriers",
        ),
        (
            &["--protocol", "unistore", "--migrate-ratio", "2"][..],
            "--migrate-ratio must be between 0 and 1",
        ),
    ] {
        let mut all = vec!["sim", "--seeds", "1"];
        all.extend_from_slice(args);
        let (code, out) = causeway(&all);
        assert_eq!(code, 2, "{args:?}: {out}");
        assert!(out.contains(what), "{args:?}: {out}");
    }
    // f must leave f+1 DCs: the protocol refuses f = 3 of 3 DCs when the run starts.
    let (code, out) = causeway(&["sim", "--protocol", "unistore", "--seeds", "1", "--f", "3"]);
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("f = 3 needs at least f+1 = 4 DCs"), "{out}");
}
