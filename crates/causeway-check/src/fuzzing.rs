//! The fuzz property of the history reader, shared by the `history` libFuzzer target
//! (`fuzz/fuzz_targets/history.rs`) and the corpus test (`tests/fuzz_corpus.rs`), so the
//! two cannot drift apart. A history file is user input (`causeway check FILE`), so beyond
//! "does not panic" it checks that a history read is written back by [`write_history`] to
//! text that reads as the same history (and writes as the same text), and that every
//! checker judges what was read without panicking: a malformed history is a verdict.

use crate::jsonl::{read_history, write_history};
use crate::{check, Guarantee};

/// Most transactions of a fuzzed history that are also checked: keeps one run fast.
pub const CHECKED_TXNS_MAX: usize = 64;

/// Runs the reader properties on `data`, panicking when one fails.
pub fn history(data: &[u8]) {
    let Ok(history) = read_history(data) else {
        return;
    };
    let mut text = Vec::new();
    write_history(&history, &mut text).expect("writing to memory succeeds");
    let back = read_history(text.as_slice()).expect("a written history reads back");
    assert_eq!(back, history, "read, write, read gives the same history");
    let mut again = Vec::new();
    write_history(&back, &mut again).expect("writing to memory succeeds");
    assert_eq!(again, text, "the written form is stable");
    if history.txns.len() <= CHECKED_TXNS_MAX {
        for guarantee in [
            Guarantee::Tcc,
            Guarantee::Convergence,
            Guarantee::Por,
            Guarantee::PcPsi,
        ] {
            // The verdict may be anything; reaching one is the property.
            let _ = check(&history, guarantee);
        }
    }
}
