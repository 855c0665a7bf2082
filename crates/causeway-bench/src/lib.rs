//! Causeway bench (layer 9 of DESIGN.md): experiments as code and their reports. An
//! experiment names a topology, a workload, the protocols compared (the first is the
//! baseline) and a sweep of closed-loop client counts from idle to past saturation; running
//! it in the simulator (CPU model on) gives one throughput-latency curve per protocol, a
//! table with ratios against the baseline at the same load and at each protocol's peak,
//! JSON, and a plot.

pub mod experiment;
pub mod plot;
pub mod report;

pub use experiment::{find, Curve, Experiment, Plan, Point, EXPERIMENTS};
pub use report::Report;
