//! libFuzzer target `history`: the property lives in `causeway_check::fuzzing::history`, which the
//! crate's corpus test runs on stable too (fuzz/corpus/history/ holds the seeds).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| causeway_check::fuzzing::history(data));
