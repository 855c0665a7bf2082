//! `SimConfig::samples_by_dc`: a named node sample is also kept per DC of the node that
//! reported it (raw, and summarized as `NAME@dcN`); other names and default runs keep
//! none. Samples of the warm-up (`sample_warmup_ms`) are dropped.

mod common;

const NAME: &str = "remote_visibility_ns";

#[test]
fn a_named_sample_is_kept_per_dc_and_adds_up_to_the_total() {
    let r = common::cure_run(2, |c| c.samples_by_dc = vec![NAME.into()]);
    let total = r.samples[NAME].count;
    assert!(total > 0, "remote txns became visible");
    let per_dc: Vec<usize> = (0..3)
        .map(|dc| r.samples_by_dc[&format!("{NAME}@dc{dc}")].len())
        .collect();
    assert!(
        per_dc.iter().all(|n| *n > 0),
        "every DC saw remote txns: {per_dc:?}"
    );
    assert_eq!(per_dc.iter().sum::<usize>(), total);
    assert_eq!(r.samples[&format!("{NAME}@dc1")].count, per_dc[1]);
    assert_eq!(r.samples_by_dc.len(), 3, "only the named sample");
}

#[test]
fn by_default_no_sample_is_kept_per_dc() {
    let r = common::cure_run(2, |_| {});
    assert!(r.samples_by_dc.is_empty());
    assert!(
        r.samples.keys().all(|k| !k.contains('@')),
        "{:?}",
        r.samples.keys()
    );
}

#[test]
fn samples_of_the_warm_up_are_dropped_and_the_run_is_the_same() {
    let all = common::cure_run(2, |_| {});
    let late = common::cure_run(2, |c| c.sample_warmup_ms = 500);
    assert_eq!(all.trace_hash, late.trace_hash, "only the keeping changes");
    let (n_all, n_late) = (all.samples[NAME].count, late.samples[NAME].count);
    assert!(
        n_late > 0 && n_late < n_all,
        "{n_late} of {n_all} after the warm-up"
    );
}

/// `slow_hot_replication` slows the replication into each DC's node holding the hottest
/// key: Cure's stable snapshot waits for its slowest partition, so every remote txn turns
/// visible about the delay later (the slowdown cascade Occult Fig. 8 contrasts with).
#[test]
fn slowing_the_hot_nodes_replication_delays_cures_remote_visibility() {
    const EXTRA_MS: f64 = 100.0;
    let base = common::cure_run(2, |_| {});
    let slowed = common::cure_run(2, |c| {
        c.slow_hot_replication = Some((1, (EXTRA_MS * 1e6) as u64));
    });
    let (b, s) = (base.samples[NAME].mean_ms, slowed.samples[NAME].mean_ms);
    assert!(
        s > b + EXTRA_MS / 2.0,
        "visibility {b:.1} ms, slowed {s:.1} ms"
    );
}
