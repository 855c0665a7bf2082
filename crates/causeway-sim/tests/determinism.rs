//! The simulator is a pure function of its configuration: the same seed gives the same
//! trace hash and the same history; another seed gives another trace.

use causeway_sim::{run, FaultSel, SimConfig};

fn config(seed: u64) -> SimConfig {
    SimConfig {
        seed,
        duration_ms: 1_000,
        faults: FaultSel::All,
        ..SimConfig::default()
    }
}

#[test]
fn same_seed_same_trace_and_history() {
    for protocol in causeway_protocols::PROTOCOLS {
        let mut c = config(11);
        c.protocol = protocol.to_string();
        // Each protocol in the shape it runs in: PrompTCC's family in one DC, PaRiS's
        // under partial replication.
        match *protocol {
            "promptcc" | "promptcc-naive" | "wren" | "eiger" => c.dcs = 1,
            "paris" | "bpr" | "nocc" => c.replication_factor = Some(2),
            _ => {}
        }
        let a = run(&c).expect("run a");
        let b = run(&c).expect("run b");
        assert!(
            a.committed > 0,
            "{protocol}: the workload committed nothing"
        );
        assert_eq!(
            a.trace_hash, b.trace_hash,
            "{protocol}: same seed, different trace"
        );
        assert_eq!(
            a.history, b.history,
            "{protocol}: same seed, different history"
        );
        let mut other = c.clone();
        other.seed = 12;
        assert_ne!(
            run(&other).expect("run other").trace_hash,
            a.trace_hash,
            "{protocol}: seeds collide"
        );
    }
}

#[test]
#[ignore]
fn print_one_run() {
    for protocol in causeway_protocols::PROTOCOLS {
        let mut c = config(3);
        c.protocol = protocol.to_string();
        let r = run(&c).expect("run");
        println!("{protocol}: committed={} aborted={} unknown={} lat={:?} events={} msgs={} faults={:?} finals={} violation={:?}",
            r.committed, r.aborted, r.unknown, r.txn_latency, r.events, r.messages, r.faults, r.history.finals.len(), r.violation);
    }
}
