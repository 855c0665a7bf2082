//! Pipelined RESP commands over a real two-node Cure DC: a pipeline's commands share one
//! transaction, and a group whose writes need no read goes to the nodes with its read
//! and commit in one batch (`causeway_resp::plan`, Cure's read-then-commit). Keys spread
//! over both nodes, so groups span partitions and a key's node is often not the one
//! serving RESP. Each reply must be what the command answers alone. The node processes
//! also run with transparent huge pages off (`[runtime] transparent_huge_pages`).

mod up;

use up::{resp_command, resp_connect, resp_pipeline, Up};

#[test]
fn pipelines_over_a_two_node_cure_dc_answer_what_each_command_answers_alone() {
    let up = Up::start("pipeline", 1, 2, &["--protocol", "cure"]);
    assert_transparent_huge_pages_off(&up);
    let addr = up.resp_addr(0);
    let mut conn = resp_connect(&addr);
    // One key, again and again: each group reads it once and adds the member once.
    let sadds: Vec<[&str; 3]> = vec![["SADD", "myset", "m"]; 16];
    let sadds: Vec<&[&str]> = sadds.iter().map(|c| &c[..]).collect();
    let mut want = vec![":0".to_string(); 16];
    want[0] = ":1".into();
    assert_eq!(resp_pipeline(&mut conn, &sadds), want);
    assert_eq!(resp_pipeline(&mut conn, &sadds), vec![":0"; 16]);
    // Many keys, both nodes: counters, sets, registers, reads of the group's own writes.
    let keys: Vec<String> = (0..8).map(|i| i.to_string()).collect();
    for round in 1..=3 {
        let mut cmds: Vec<Vec<String>> = Vec::new();
        let mut want: Vec<String> = Vec::new();
        for k in &keys {
            let v = format!("v{round}-{k}");
            let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
            cmds.push(words(&["INCR", &format!("c{k}")]));
            want.push(format!(":{round}"));
            cmds.push(words(&["SADD", &format!("s{k}"), &format!("m{round}")]));
            want.push(":1".into());
            cmds.push(words(&["GET", &format!("k{k}")]));
            want.push(if round == 1 {
                "(nil)".into()
            } else {
                format!("v{}-{k}", round - 1)
            });
            cmds.push(words(&["SET", &format!("k{k}"), &v]));
            want.push("+OK".into());
            cmds.push(words(&["GET", &format!("k{k}")]));
            want.push(v);
            cmds.push(words(&["SCARD", &format!("s{k}")]));
            want.push(format!(":{round}"));
        }
        let cmds: Vec<Vec<&str>> = cmds
            .iter()
            .map(|c| c.iter().map(String::as_str).collect())
            .collect();
        let refs: Vec<&[&str]> = cmds.iter().map(|c| &c[..]).collect();
        assert_eq!(resp_pipeline(&mut conn, &refs), want, "round {round}");
    }
    // A group the store refuses (a set used as a counter) runs each command alone.
    let refused = resp_pipeline(
        &mut conn,
        &[&["INCR", "c0"], &["INCR", "s0"], &["INCR", "c0"]],
    );
    assert_eq!(refused[0], ":4");
    assert!(refused[1].starts_with("-WRONGTYPE"), "{refused:?}");
    assert_eq!(refused[2], ":5");
    // Another connection sees everything.
    let mut other = resp_connect(&addr);
    assert_eq!(resp_command(&mut other, &["SCARD", "myset"]), ":1");
    for k in &keys {
        let get = resp_command(&mut other, &["GET", &format!("k{k}")]);
        assert_eq!(get, format!("v3-{k}"));
        assert_eq!(resp_command(&mut other, &["SCARD", &format!("s{k}")]), ":3");
    }
    assert_eq!(resp_command(&mut other, &["GET", "c0"]), "5");
}

/// Each node process turned transparent huge pages off for itself (the default), where
/// the kernel reports it (`THP_enabled` in /proc/PID/status, Linux 6.x).
fn assert_transparent_huge_pages_off(up: &Up) {
    for (name, _, pid) in &up.pids {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let Some(line) = status.lines().find(|l| l.starts_with("THP_enabled:")) else {
            continue;
        };
        assert!(line.ends_with('0'), "{name}: {line}");
    }
}
