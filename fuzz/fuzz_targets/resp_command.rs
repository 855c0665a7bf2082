//! libFuzzer target `resp_command`: the property lives in `causeway_resp::fuzzing::resp_command`, which the
//! crate's corpus test runs on stable too (fuzz/corpus/resp_command/ holds the seeds).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| causeway_resp::fuzzing::resp_command(data));
