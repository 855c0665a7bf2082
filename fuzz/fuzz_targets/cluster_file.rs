//! libFuzzer target `cluster_file`: the property lives in `causeway_runtime::fuzzing::cluster_file`, which the
//! crate's corpus test runs on stable too (fuzz/corpus/cluster_file/ holds the seeds).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| causeway_runtime::fuzzing::cluster_file(data));
