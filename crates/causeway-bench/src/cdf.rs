//! [`Kind::Cdf`] experiments (UniStore Fig. 6): each protocol once per variant at one
//! load, keeping one node sample per destination DC (`SimConfig::samples_by_dc`); the
//! report gives its percentiles (p50, p90, p99) and CDF per (variant, DC), with each run's
//! throughput and checks for context, and plots the CDFs.

use crate::experiment::{pool, CdfSpec, Kind, Plan, Point, Variant};
use crate::plot::{self, Series, CDF};
use causeway_sim::run;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

/// Most points of one CDF in the report and the plot (evenly spaced fractions).
pub const CDF_POINTS: usize = 200;

/// One run (pooled over seeds) of a protocol in a variant.
#[derive(Debug, Serialize)]
pub struct RunRow {
    pub variant: String,
    pub protocol: String,
    pub point: Point,
}

/// The sample's distribution at one DC, in one variant.
#[derive(Debug, Serialize)]
pub struct CdfRow {
    pub variant: String,
    pub protocol: String,
    pub dc: u16,
    pub dc_name: String,
    pub count: usize,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// (delay ms, fraction of samples at or below it), at most [`CDF_POINTS`] + 1.
    pub cdf: Vec<(f64, f64)>,
}

/// Everything a CDF run produced (the `--json` document).
#[derive(Debug, Serialize)]
pub struct CdfReport {
    pub experiment: String,
    pub figure: String,
    pub quick: bool,
    pub sample: String,
    pub measure: String,
    pub clients_per_dc: u32,
    pub duration_ms: u64,
    pub runs: Vec<RunRow>,
    pub rows: Vec<CdfRow>,
}

impl CdfReport {
    /// Runs each protocol once per variant (over the plan's seeds); `tick` is called
    /// after each simulator run.
    pub fn run(plan: &Plan, tick: &mut dyn FnMut(&str, u32)) -> Result<CdfReport, String> {
        let e = plan.experiment;
        let Kind::Cdf(spec) = e.kind else {
            return Err(format!("{} is not a CDF experiment", e.name));
        };
        let clients = plan.clients()[0];
        let mut report = CdfReport {
            experiment: e.name.to_string(),
            figure: e.figure.to_string(),
            quick: plan.quick,
            sample: spec.sample.to_string(),
            measure: spec.measure.to_string(),
            clients_per_dc: clients,
            duration_ms: plan.config(None, e.protocols[0], clients, 1).duration_ms,
            runs: Vec::new(),
            rows: Vec::new(),
        };
        for v in spec.variants {
            for p in e.protocols {
                report.run_one(plan, spec, v, p, tick)?;
            }
        }
        Ok(report)
    }

    /// Protocol `p` in variant `v`: its seeds pooled, one CDF per reported DC.
    fn run_one(
        &mut self,
        plan: &Plan,
        spec: &CdfSpec,
        v: &Variant,
        p: &str,
        tick: &mut dyn FnMut(&str, u32),
    ) -> Result<(), String> {
        let mut results = Vec::new();
        let mut by_dc: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        for seed in 1..=plan.seeds() {
            let mut c = plan.config(Some(v), p, self.clients_per_dc, seed);
            if !c.samples_by_dc.iter().any(|s| s == spec.sample) {
                c.samples_by_dc.push(spec.sample.to_string());
            }
            let mut r = run(&c)?;
            r.history = Default::default();
            for (k, values) in std::mem::take(&mut r.samples_by_dc) {
                by_dc.entry(k).or_default().extend(values);
            }
            results.push(r);
            tick(p, self.clients_per_dc);
        }
        self.runs.push(RunRow {
            variant: v.label.to_string(),
            protocol: p.to_string(),
            point: pool(self.clients_per_dc, &results, self.duration_ms),
        });
        for (dc, name) in spec.dcs {
            let key = format!("{}@dc{dc}", spec.sample);
            let values = by_dc.remove(&key).unwrap_or_default();
            self.rows.push(cdf_row(v.label, p, (*dc, name), values));
        }
        Ok(())
    }

    pub fn table(&self) -> String {
        let mut out = String::new();
        let quick = if self.quick { " (quick)" } else { "" };
        let _ = writeln!(
            out,
            "experiment {}{quick}, simulator: {}",
            self.experiment, self.figure
        );
        self.run_lines(&mut out);
        let _ = writeln!(out, "{} ({}):", self.sample, self.measure);
        let _ = writeln!(
            out,
            "{:<8} {:<10} {:<10} {:>7} {:>8} {:>8} {:>8} {:>8} {:>8}",
            "variant", "protocol", "dc", "n", "mean_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms"
        );
        for r in &self.rows {
            let _ = writeln!(
                out,
                "{:<8} {:<10} {:<10} {:>7} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2}",
                r.variant,
                r.protocol,
                r.dc_name,
                r.count,
                r.mean_ms,
                r.p50_ms,
                r.p90_ms,
                r.p99_ms,
                r.max_ms
            );
        }
        out
    }

    /// Each run's load and checks.
    fn run_lines(&self, out: &mut String) {
        for r in &self.runs {
            let p = &r.point;
            let cpu = p
                .cpu_utilization
                .map_or("-".to_string(), |u| format!("{:.0}%", u * 100.0));
            let _ = writeln!(
                out,
                "run {} {}: {} clients/DC for {} ms, {:.0} txn/s, mean latency {:.2} ms, CPU {cpu}, violations {}{}",
                r.variant,
                r.protocol,
                p.clients_per_dc,
                self.duration_ms,
                p.throughput_txn_per_s,
                p.latency.mean_ms,
                p.violations,
                if p.unchecked > 0 { " (history unchecked: too large)" } else { "" }
            );
            if let Some(v) = &p.violation {
                let _ = writeln!(out, "VIOLATION {} {}: {v}", r.variant, r.protocol);
            }
        }
    }

    /// One CDF per (variant, DC), labelled `variant, protocol: DC` (the protocol only when
    /// several are compared).
    pub fn series(&self) -> Vec<Series> {
        let several = self
            .runs
            .iter()
            .any(|r| r.protocol != self.runs[0].protocol);
        self.rows
            .iter()
            .map(|r| Series {
                label: if several {
                    format!("{}, {}: {}", r.variant, r.protocol, r.dc_name)
                } else {
                    format!("{}: {}", r.variant, r.dc_name)
                },
                points: r.cdf.clone(),
            })
            .collect()
    }

    pub fn plot(&self, path: &Path) -> Result<(), String> {
        let title = format!("{}: CDF of {}", self.experiment, self.sample);
        let axes = plot::Axes {
            x: &self.measure,
            ..CDF
        };
        plot::plot_on(path, &title, &self.series(), &axes)
    }

    pub fn violations(&self) -> usize {
        self.runs.iter().map(|r| r.point.violations).sum()
    }
}

/// The value at quantile `q` of `sorted` (nearest rank, as `Summary::of`), in ms.
pub fn percentile_ms(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize] as f64 / 1e6
}

/// The CDF of `sorted` at [`CDF_POINTS`] + 1 evenly spaced fractions.
pub fn cdf_points(sorted: &[u64]) -> Vec<(f64, f64)> {
    if sorted.is_empty() {
        return Vec::new();
    }
    (0..=CDF_POINTS)
        .map(|i| {
            let q = i as f64 / CDF_POINTS as f64;
            (percentile_ms(sorted, q), q)
        })
        .collect()
}

fn cdf_row(variant: &str, protocol: &str, dc: (u16, &str), mut values: Vec<u64>) -> CdfRow {
    values.sort_unstable();
    let mean = values.iter().map(|v| *v as f64).sum::<f64>() / values.len().max(1) as f64 / 1e6;
    CdfRow {
        variant: variant.to_string(),
        protocol: protocol.to_string(),
        dc: dc.0,
        dc_name: dc.1.to_string(),
        count: values.len(),
        mean_ms: mean,
        p50_ms: percentile_ms(&values, 0.5),
        p90_ms: percentile_ms(&values, 0.9),
        p99_ms: percentile_ms(&values, 0.99),
        max_ms: percentile_ms(&values, 1.0),
        cdf: cdf_points(&values),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_the_cdf_follow_the_sorted_samples() {
        let ms: Vec<u64> = (1..=100).map(|i| i * 1_000_000).collect();
        assert_eq!(percentile_ms(&ms, 0.9), 90.0);
        assert_eq!(percentile_ms(&ms, 0.0), 1.0);
        assert_eq!(percentile_ms(&[], 0.5), 0.0);
        let cdf = cdf_points(&ms);
        assert_eq!(cdf.len(), CDF_POINTS + 1);
        assert_eq!(cdf.first(), Some(&(1.0, 0.0)));
        assert_eq!(cdf.last(), Some(&(100.0, 1.0)));
        assert!(cdf.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 < w[1].1));
        let row = cdf_row(
            "f=2",
            "unistore",
            (3, "Brazil"),
            ms.into_iter().rev().collect(),
        );
        assert_eq!((row.count, row.p50_ms, row.p99_ms), (100, 51.0, 99.0));
        assert!((row.mean_ms - 50.5).abs() < 1e-9);
    }
}
