//! The runtime's fuzz properties (`causeway_runtime::fuzzing`) on stable Rust: every input
//! of `fuzz/corpus/{client_frame,peer_frame,cluster_file}/` and a few thousand seeded
//! mutations of them, so the default test run keeps the properties the libFuzzer targets
//! check (docs/OPERATIONS.md).

use causeway_core::fuzzing::exercise;
use causeway_runtime::fuzzing;
use std::path::Path;

/// Mutated inputs per target and run, spread over the target's corpus.
const MUTATIONS_TOTAL: usize = 4000;

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| std::fs::read(p).expect("a corpus file"))
        .collect()
}

fn run(target: &str, seed: u64, property: fn(&[u8])) {
    let corpus = corpus(target);
    assert!(corpus.len() >= 3, "the seeds of {target} are in the corpus");
    let per_input = MUTATIONS_TOTAL / corpus.len() + 1;
    let runs = exercise(&corpus, per_input, seed, property);
    assert!(runs > MUTATIONS_TOTAL, "{target}: {runs} runs");
}

#[test]
fn client_frames_keep_their_properties() {
    run("client_frame", 0x5eed_0003, fuzzing::client_frame);
}

#[test]
fn peer_frames_keep_their_properties() {
    run("peer_frame", 0x5eed_0004, fuzzing::peer_frame);
}

#[test]
fn cluster_files_keep_their_properties() {
    run("cluster_file", 0x5eed_0005, fuzzing::cluster_file);
}
