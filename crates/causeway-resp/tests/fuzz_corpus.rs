//! The `resp_command` fuzz property (`causeway_resp::fuzzing`) on stable Rust: every input
//! of `fuzz/corpus/resp_command/` and a few thousand seeded mutations of them, so the
//! default test run keeps the property the libFuzzer target checks (docs/OPERATIONS.md).

use causeway_core::fuzzing::exercise;
use std::path::Path;

/// Mutated inputs per run, spread over the corpus.
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

#[test]
fn the_corpus_and_its_mutations_keep_the_parser_properties() {
    let corpus = corpus("resp_command");
    assert!(corpus.len() >= 5, "the seeds are in the corpus");
    let per_input = MUTATIONS_TOTAL / corpus.len() + 1;
    let runs = exercise(
        &corpus,
        per_input,
        0x5eed_0001,
        causeway_resp::fuzzing::resp_command,
    );
    assert!(runs > MUTATIONS_TOTAL, "{runs} runs");
}
