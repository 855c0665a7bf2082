//! `causeway bench --experiment`: listing, unknown names, refused flags (runs are tested in
//! `causeway-bench`'s own tests).

mod cli;

use cli::causeway;

#[test]
fn experiments_are_listed_with_their_paper_figure() {
    let (code, out) = causeway(&["bench", "--experiment", "list"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("cure-vs-eventual") && out.contains("Cure Fig. 2a"),
        "{out}"
    );
    assert!(
        out.contains("unistore-uniformity-cost") && out.contains("UniStore Fig. 5"),
        "{out}"
    );
    assert!(
        out.contains("unistore-visibility") && out.contains("UniStore Fig. 6"),
        "{out}"
    );
}

#[test]
fn real_is_refused_for_an_experiment_that_is_not_a_sweep() {
    let started = std::time::Instant::now();
    let (code, out) = causeway(&["bench", "--experiment", "unistore-visibility", "--real"]);
    assert_ne!(code, 0, "{out}");
    assert!(
        out.contains("--real runs throughput-latency sweeps only"),
        "{out}"
    );
    assert!(started.elapsed().as_secs() < 5, "refused at once");
}

#[test]
fn an_unknown_experiment_is_refused_with_the_known_ones() {
    let (code, out) = causeway(&["bench", "--experiment", "nope"]);
    assert_ne!(code, 0);
    assert!(
        out.contains("no experiment 'nope'") && out.contains("cure-vs-eventual"),
        "{out}"
    );
}

#[test]
fn a_plot_file_of_another_format_is_refused_before_the_sweep() {
    let started = std::time::Instant::now();
    let (code, out) = causeway(&[
        "bench",
        "--experiment",
        "cure-vs-eventual",
        "--plot",
        "x.jpg",
    ]);
    assert_ne!(code, 0, "{out}");
    assert!(out.contains(".svg or .png"), "{out}");
    assert!(
        started.elapsed().as_secs() < 5,
        "refused at once, not after the sweep"
    );
}
