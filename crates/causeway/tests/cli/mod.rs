//! Shared by the command-line tests: run the built `causeway` binary.

use std::process::Command;

/// Runs `causeway ARGS`; returns the exit code and stdout followed by stderr.
pub fn causeway(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_causeway"))
        .args(args)
        .output()
        .expect("run causeway");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}
