//! Reports of an experiment: the table (each protocol at each client count, with ratios
//! against the baseline at the same load, then each protocol's peak against the
//! baseline's peak and its own figures there), the JSON, and the plot's series. A report
//! comes from the simulator or from a real cluster (`causeway bench --real`); the latter
//! has no CPU model and no checked histories, and says how its setup differs.

use crate::experiment::{Curve, Experiment, Point};
use crate::plot::Series;
use serde::Serialize;
use std::fmt::Write;

const SIMULATOR: &str = "simulator";

/// Aborted over finished (committed + aborted) transactions of a point; 0 when none.
pub fn abort_rate(p: &Point) -> f64 {
    let finished = p.committed + p.aborted;
    if finished == 0 {
        0.0
    } else {
        p.aborted as f64 / finished as f64
    }
}
const REAL: &str = "real cluster";

/// Everything an experiment run produced (the `--json` document).
#[derive(Debug, Serialize)]
pub struct Report {
    pub experiment: String,
    pub figure: String,
    pub quick: bool,
    /// Where the curves were measured: `simulator` or `real cluster`.
    pub source: String,
    /// How the setup differs from the experiment's (real cluster only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    pub curves: Vec<Curve>,
    /// Each protocol's peak throughput over the baseline's peak.
    pub peak_ratios: Vec<(String, f64)>,
}

impl Report {
    pub fn new(e: &Experiment, quick: bool, curves: Vec<Curve>) -> Report {
        assert!(
            !curves.is_empty(),
            "an experiment compares at least one protocol"
        );
        let base = curves[0].peak().throughput_txn_per_s.max(1e-9);
        let peak_ratios = curves
            .iter()
            .map(|c| (c.protocol.clone(), c.peak().throughput_txn_per_s / base))
            .collect();
        Report {
            experiment: e.name.to_string(),
            figure: e.figure.to_string(),
            quick,
            source: SIMULATOR.to_string(),
            notes: Vec::new(),
            curves,
            peak_ratios,
        }
    }

    /// A report of curves measured on a real cluster; `notes` say what differs from the
    /// experiment's simulated setup.
    pub fn real(e: &Experiment, quick: bool, curves: Vec<Curve>, notes: Vec<String>) -> Report {
        Report {
            source: REAL.to_string(),
            notes,
            ..Report::new(e, quick, curves)
        }
    }

    fn is_real(&self) -> bool {
        self.source == REAL
    }

    /// Throughput vs mean latency, one series per protocol, labelled with the protocol
    /// and, for a real cluster, ` (real)`.
    pub fn series(&self) -> Vec<Series> {
        let suffix = if self.is_real() { " (real)" } else { "" };
        self.series_labelled(suffix)
    }

    /// [`Report::series`] with `suffix` after each protocol's name (e.g. ` (sim)` when
    /// simulated and real curves share a figure).
    pub fn series_labelled(&self, suffix: &str) -> Vec<Series> {
        let points = |c: &Curve| {
            c.points
                .iter()
                .map(|p| (p.throughput_txn_per_s, p.latency.mean_ms))
                .collect()
        };
        self.curves
            .iter()
            .map(|c| Series {
                label: format!("{}{suffix}", c.protocol),
                points: points(c),
            })
            .collect()
    }

    pub fn table(&self) -> String {
        let mut out = String::new();
        let quick = if self.quick { " (quick)" } else { "" };
        let _ = writeln!(
            out,
            "experiment {}{quick}, {}: {}",
            self.experiment, self.source, self.figure
        );
        let _ = writeln!(
            out,
            "{:>10} {:<10} {:>10} {:>8} {:>8} {:>8} {:>7} {:>6} {:>7} {:>7} {:>4}",
            "clients/dc",
            "protocol",
            "txn/s",
            "mean_ms",
            "p50_ms",
            "p99_ms",
            "aborts",
            "cpu%",
            "tput_x",
            "lat_x",
            "viol"
        );
        self.rows(&mut out);
        self.peaks(&mut out);
        self.violation_lines(&mut out);
        for note in &self.notes {
            let _ = writeln!(out, "differs: {note}");
        }
        let unchecked: usize = self
            .curves
            .iter()
            .flat_map(|c| &c.points)
            .map(|p| p.unchecked)
            .sum();
        if unchecked > 0 {
            let _ = writeln!(
                out,
                "viol '-': {unchecked} run(s) recorded more transactions than the checker takes; \
                 their invariants were checked after every input, their history was not"
            );
        }
        out
    }

    fn rows(&self, out: &mut String) {
        let base = &self.curves[0];
        for (i, b) in base.points.iter().enumerate() {
            for c in &self.curves {
                let p = &c.points[i];
                let cpu = p
                    .cpu_utilization
                    .map_or("-".to_string(), |u| format!("{:.0}", u * 100.0));
                let _ = writeln!(
                    out,
                    "{:>10} {:<10} {:>10.0} {:>8.2} {:>8.2} {:>8.2} {:>7} {:>6} {:>7.3} {:>7.3} {:>4}",
                    p.clients_per_dc,
                    c.protocol,
                    p.throughput_txn_per_s,
                    p.latency.mean_ms,
                    p.latency.p50_ms,
                    p.latency.p99_ms,
                    p.aborted,
                    cpu,
                    p.throughput_txn_per_s / b.throughput_txn_per_s.max(1e-9),
                    p.latency.mean_ms / b.latency.mean_ms.max(1e-9),
                    // A real cluster's histories are not recorded, so nothing was checked.
                    if p.unchecked > 0 || self.is_real() { "-".to_string() } else { p.violations.to_string() }
                );
            }
        }
    }

    fn violation_lines(&self, out: &mut String) {
        for c in &self.curves {
            for p in c.points.iter().filter(|p| p.violation.is_some()) {
                let v = p.violation.as_deref().unwrap_or_default();
                let _ = writeln!(
                    out,
                    "VIOLATION {} at {} clients/DC: {v}",
                    c.protocol, p.clients_per_dc
                );
            }
        }
    }

    fn peaks(&self, out: &mut String) {
        let base = &self.curves[0].protocol;
        for (c, (_, ratio)) in self.curves.iter().zip(&self.peak_ratios) {
            let p = c.peak();
            let _ = writeln!(
                out,
                "peak {}: {:.0} txn/s at {} clients/DC, {:.3}x the baseline's peak; mean {:.2} ms; aborts {:.3}%",
                c.protocol,
                p.throughput_txn_per_s,
                p.clients_per_dc,
                ratio,
                p.latency.mean_ms,
                abort_rate(p) * 100.0
            );
            if c.protocol != *base && *ratio > 0.0 {
                let _ = writeln!(
                    out,
                    "  {base} over {}: {:+.1}% peak throughput",
                    c.protocol,
                    (1.0 / ratio - 1.0) * 100.0
                );
            }
            for (name, s) in &p.latency_by_kind {
                let _ = writeln!(
                    out,
                    "  {name} txns: mean {:.2} ms, p50 {:.2} ms, p99 {:.2} ms (n={})",
                    s.mean_ms, s.p50_ms, s.p99_ms, s.count
                );
            }
            for (name, s) in &p.samples {
                let name = name.trim_end_matches("_ns");
                let _ = writeln!(
                    out,
                    "  {name}: mean {:.3} ms, p50 {:.3} ms, p99 {:.3} ms (n={})",
                    s.mean_ms, s.p50_ms, s.p99_ms, s.count
                );
            }
        }
    }

    /// The curve labelled `label`, if any.
    pub fn curve(&self, label: &str) -> Option<&Curve> {
        self.curves.iter().find(|c| c.protocol == label)
    }

    /// Whether any run violated its protocol's guarantee (its figures are then void).
    pub fn violations(&self) -> usize {
        self.curves
            .iter()
            .flat_map(|c| &c.points)
            .map(|p| p.violations)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_sim::Summary;

    fn point(tput: f64, committed: usize, aborted: usize) -> Point {
        let mean = |ms| Summary {
            count: 10,
            mean_ms: ms,
            ..Summary::default()
        };
        Point {
            clients_per_dc: 4,
            committed,
            aborted,
            throughput_txn_per_s: tput,
            latency: mean(10.0),
            latency_by_kind: [
                ("causal".to_string(), mean(1.5)),
                ("strong@dc0".to_string(), mean(65.0)),
            ]
            .into_iter()
            .collect(),
            ..Point::default()
        }
    }

    #[test]
    fn abort_rates_are_over_finished_txns() {
        assert_eq!(abort_rate(&point(1.0, 0, 0)), 0.0);
        assert_eq!(abort_rate(&point(1.0, 3, 1)), 0.25);
    }

    #[test]
    fn peaks_name_the_baselines_gain_and_each_kinds_latency() {
        let curves = vec![
            Curve {
                protocol: "unistore".into(),
                points: vec![point(2000.0, 999, 1)],
            },
            Curve {
                protocol: "strong".into(),
                points: vec![point(500.0, 90, 10)],
            },
        ];
        let e = crate::find("unistore-rubis").expect("registered");
        let r = Report::new(e, false, curves);
        let table = r.table();
        assert!(table.contains("aborts 0.100%"), "{table}");
        assert!(table.contains("aborts 10.000%"), "{table}");
        assert!(
            table.contains("unistore over strong: +300.0% peak throughput"),
            "{table}"
        );
        assert!(
            table.contains("  strong@dc0 txns: mean 65.00 ms"),
            "{table}"
        );
        assert!(r.curve("strong").is_some() && r.curve("causal").is_none());
    }
}
