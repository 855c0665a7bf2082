//! Causeway bench (layer 9 of DESIGN.md): experiments as code and their reports. An
//! experiment names a topology, a workload, the protocols compared (the first is the
//! baseline) and a sweep of closed-loop client counts from idle to past saturation; running
//! it in the simulator (CPU model on) gives one throughput-latency curve per protocol, a
//! table with ratios against the baseline at the same load and at each protocol's peak,
//! JSON, and a plot. Other kinds of experiment (`Kind`) run the sweep once per variant of
//! the setup and compare peaks (`peaks`), or run once per variant and report a sample's
//! distribution per DC (`cdf`); `unistore` defines UniStore's, on the AWS-like round trips
//! of `regions`, and `paris` PaRiS's (Fig. 2 and 4-6), on the simulator's default WAN.

#![forbid(unsafe_code)]

pub mod calibrate;
pub mod catalogue;
pub mod cdf;
pub mod cure;
pub mod experiment;
pub mod occult;
pub mod paris;
pub mod peaks;
pub mod plot;
pub mod promptcc;
pub mod regions;
pub mod report;
pub mod unistore;
pub mod unistore_strong;

pub use catalogue::{find, EXPERIMENTS};
pub use cdf::CdfReport;
pub use experiment::{
    CdfSpec, Curve, CurveSpec, Experiment, Kind, Line, Plan, Point, QuickCheck, Variant,
};
pub use peaks::PeaksReport;
pub use report::Report;
