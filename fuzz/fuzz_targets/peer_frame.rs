//! libFuzzer target `peer_frame`: the property lives in `causeway_runtime::fuzzing::peer_frame`, which the
//! crate's corpus test runs on stable too (fuzz/corpus/peer_frame/ holds the seeds).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| causeway_runtime::fuzzing::peer_frame(data));
