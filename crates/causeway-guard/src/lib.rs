//! Causeway guard: repository-wide guard tests, and nothing else.
//!
//! The tests in `tests/` walk the workspace's sources and manifests and fail when a rule of
//! DESIGN.md is broken: the pure layers (every crate whose directory name contains `core`,
//! `protocols`, `check` or `sim`) must not read the system clock, spawn threads, use an
//! unseeded random generator or hash-seeded maps, nor depend on tokio or getrandom; and no
//! source file under `crates/` may leave a placeholder macro behind. The crate has no
//! code of its own: it exists so that `cargo test` runs these checks with the rest.

#![forbid(unsafe_code)]
