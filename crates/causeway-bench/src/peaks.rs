//! [`Kind::PeakPerVariant`] experiments (UniStore Fig. 5): the sweep once per variant of
//! the setup, one [`Report`] each, and a summary of each protocol's peak against the
//! baseline's peak in the same variant. Plotted as throughput-latency curves, one per
//! protocol and variant.

use crate::experiment::{Kind, Plan, Variant};
use crate::plot::{self, Series};
use crate::report::Report;
use serde::Serialize;
use std::fmt::Write;
use std::path::Path;

/// One variant's sweep.
#[derive(Debug, Serialize)]
pub struct VariantReport {
    pub variant: String,
    pub report: Report,
}

/// One protocol's peak in one variant, against the baseline's.
#[derive(Debug, Serialize)]
pub struct PeakRow {
    pub variant: String,
    pub protocol: String,
    pub peak_txn_per_s: f64,
    pub clients_per_dc: u32,
    pub baseline_peak_txn_per_s: f64,
    /// Peak over the baseline's peak.
    pub ratio: f64,
}

/// Everything a peak-per-variant run produced (the `--json` document).
#[derive(Debug, Serialize)]
pub struct PeaksReport {
    pub experiment: String,
    pub figure: String,
    pub quick: bool,
    pub variants: Vec<VariantReport>,
    pub peaks: Vec<PeakRow>,
}

impl PeaksReport {
    /// Runs the plan's sweep once per variant; `tick` is called after each run.
    pub fn run(plan: &Plan, tick: &mut dyn FnMut(&str, u32)) -> Result<PeaksReport, String> {
        let e = plan.experiment;
        let Kind::PeakPerVariant(variants) = e.kind else {
            return Err(format!("{} is not a peak-per-variant experiment", e.name));
        };
        let mut reports = Vec::new();
        for v in variants {
            reports.push(variant_report(plan, v, tick)?);
        }
        Ok(PeaksReport {
            experiment: e.name.to_string(),
            figure: e.figure.to_string(),
            quick: plan.quick,
            peaks: reports.iter().flat_map(peak_rows).collect(),
            variants: reports,
        })
    }

    /// Each variant's table, then the peaks side by side.
    pub fn table(&self) -> String {
        let mut out = String::new();
        for v in &self.variants {
            out.push_str(&v.report.table());
        }
        let quick = if self.quick { " (quick)" } else { "" };
        let _ = writeln!(
            out,
            "experiment {}{quick}: {}",
            self.experiment, self.figure
        );
        let _ = writeln!(
            out,
            "{:<10} {:<10} {:>12} {:>10} {:>12} {:>8} {:>8}",
            "variant", "protocol", "peak txn/s", "clients/dc", "base txn/s", "ratio", "change"
        );
        for r in &self.peaks {
            let _ = writeln!(
                out,
                "{:<10} {:<10} {:>12.0} {:>10} {:>12.0} {:>8.3} {:>7.1}%",
                r.variant,
                r.protocol,
                r.peak_txn_per_s,
                r.clients_per_dc,
                r.baseline_peak_txn_per_s,
                r.ratio,
                (r.ratio - 1.0) * 100.0
            );
        }
        self.mean_changes(&mut out);
        out
    }

    /// Each compared protocol's mean change over the variants.
    fn mean_changes(&self, out: &mut String) {
        let Some(first) = self.variants.first() else {
            return;
        };
        for c in first.report.curves.iter().skip(1) {
            let ratios: Vec<f64> = self
                .peaks
                .iter()
                .filter(|r| r.protocol == c.protocol)
                .map(|r| r.ratio)
                .collect();
            let mean = ratios.iter().sum::<f64>() / ratios.len().max(1) as f64;
            let _ = writeln!(
                out,
                "mean peak change of {} over {} variants: {:+.1}%",
                c.protocol,
                ratios.len(),
                (mean - 1.0) * 100.0
            );
        }
    }

    /// Throughput-latency curves, labelled `protocol, variant`.
    pub fn series(&self) -> Vec<Series> {
        self.variants
            .iter()
            .flat_map(|v| v.report.series_labelled(&format!(", {}", v.variant)))
            .collect()
    }

    pub fn plot(&self, path: &Path) -> Result<(), String> {
        let title = format!(
            "{}: throughput vs mean latency (simulator)",
            self.experiment
        );
        plot::plot(path, &title, &self.series())
    }

    pub fn violations(&self) -> usize {
        self.variants.iter().map(|v| v.report.violations()).sum()
    }
}

/// The sweep of one variant, as a report named `experiment [variant]`.
fn variant_report(
    plan: &Plan,
    v: &Variant,
    tick: &mut dyn FnMut(&str, u32),
) -> Result<VariantReport, String> {
    let curves = plan.run_variant(Some(v), tick)?;
    let mut report = Report::new(plan.experiment, plan.quick, curves);
    report.experiment = format!("{} [{}]", plan.experiment.name, v.label);
    Ok(VariantReport {
        variant: v.label.to_string(),
        report,
    })
}

fn peak_rows(v: &VariantReport) -> Vec<PeakRow> {
    let base = v.report.curves[0].peak().throughput_txn_per_s;
    v.report
        .curves
        .iter()
        .zip(&v.report.peak_ratios)
        .map(|(c, (_, ratio))| PeakRow {
            variant: v.variant.clone(),
            protocol: c.protocol.clone(),
            peak_txn_per_s: c.peak().throughput_txn_per_s,
            clients_per_dc: c.peak().clients_per_dc,
            baseline_peak_txn_per_s: base,
            ratio: *ratio,
        })
        .collect()
}
