//! [`Kind::PeakPerVariant`] experiments (UniStore Fig. 5): the sweep once per variant of
//! the setup, one [`Report`] each, and a summary of each protocol's peak against the
//! baseline's peak in the same variant, then the experiment's own findings
//! (`Experiment::findings`). Plotted as throughput-latency curves, one per protocol and
//! variant (latency on a log axis when it spans decades), and, for each sample kept raw
//! (`SimConfig::samples_by_dc`), its CDF at each curve's peak in a second file.

use crate::experiment::{Kind, Plan, Variant};
use crate::plot::{self, Series};
use crate::report::Report;
use serde::Serialize;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// One variant's sweep.
#[derive(Debug, Serialize)]
pub struct VariantReport {
    pub variant: String,
    /// Partitions per DC in this variant (what a scalability experiment scales).
    pub partitions: u32,
    pub report: Report,
}

/// One curve's peak in one variant against linear scaling from the first variant.
#[derive(Debug, Serialize)]
pub struct ScalingRow {
    pub variant: String,
    pub curve: String,
    pub partitions: u32,
    pub peak_txn_per_s: f64,
    /// The first variant's peak times the partition ratio.
    pub linear_txn_per_s: f64,
    /// 1 - peak / linear: how far below linear scaling (negative: above).
    pub drop: f64,
}

/// Each curve's peak in each variant against the first variant's peak scaled by the
/// partitions; empty unless the variants change the partition count.
pub fn scaling_rows(variants: &[VariantReport]) -> Vec<ScalingRow> {
    let Some(first) = variants.first() else {
        return Vec::new();
    };
    if variants.iter().all(|v| v.partitions == first.partitions) {
        return Vec::new();
    }
    let mut rows = Vec::new();
    for (i, c) in first.report.curves.iter().enumerate() {
        let base = c.peak().throughput_txn_per_s;
        for v in variants {
            let Some(curve) = v.report.curves.get(i) else {
                continue;
            };
            let peak = curve.peak().throughput_txn_per_s;
            let linear = base * f64::from(v.partitions) / f64::from(first.partitions.max(1));
            rows.push(ScalingRow {
                variant: v.variant.clone(),
                curve: c.protocol.clone(),
                partitions: v.partitions,
                peak_txn_per_s: peak,
                linear_txn_per_s: linear,
                drop: if linear > 0.0 {
                    1.0 - peak / linear
                } else {
                    0.0
                },
            });
        }
    }
    rows
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
    /// Peaks against linear scaling, when the variants change the partition count.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scaling: Vec<ScalingRow>,
    /// The experiment's own lines (`Experiment::findings`): the paper's comparisons.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<String>,
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
        let mut report = PeaksReport {
            experiment: e.name.to_string(),
            figure: e.figure.to_string(),
            quick: plan.quick,
            peaks: reports.iter().flat_map(peak_rows).collect(),
            scaling: scaling_rows(&reports),
            variants: reports,
            findings: Vec::new(),
        };
        if let Some(findings) = e.findings {
            report.findings = findings(&report);
        }
        Ok(report)
    }

    /// The variant labelled `label`.
    pub fn variant(&self, label: &str) -> Option<&VariantReport> {
        self.variants.iter().find(|v| v.variant == label)
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
        self.scaling_table(&mut out);
        for line in &self.findings {
            let _ = writeln!(out, "{line}");
        }
        out
    }

    /// Peaks against linear scaling, and each curve's drop at the largest variant.
    fn scaling_table(&self, out: &mut String) {
        if self.scaling.is_empty() {
            return;
        }
        let _ = writeln!(
            out,
            "{:<24} {:<12} {:>10} {:>12} {:>12} {:>8}",
            "curve", "variant", "partitions", "peak txn/s", "linear", "drop"
        );
        for r in &self.scaling {
            let _ = writeln!(
                out,
                "{:<24} {:<12} {:>10} {:>12.0} {:>12.0} {:>7.1}%",
                r.curve,
                r.variant,
                r.partitions,
                r.peak_txn_per_s,
                r.linear_txn_per_s,
                r.drop * 100.0
            );
        }
        let most = self.scaling.iter().map(|r| r.partitions).max();
        for r in self.scaling.iter().filter(|r| Some(r.partitions) == most) {
            let _ = writeln!(
                out,
                "drop vs linear of {} at {} partitions/DC: {:.1}%",
                r.curve,
                r.partitions,
                r.drop * 100.0
            );
        }
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

    /// Peak throughput against partitions per DC, one series per curve (scaling
    /// experiments).
    pub fn scaling_series(&self) -> Vec<Series> {
        let mut series: Vec<Series> = Vec::new();
        for r in &self.scaling {
            let point = (f64::from(r.partitions), r.peak_txn_per_s);
            match series.iter_mut().find(|s| s.label == r.curve) {
                Some(s) => s.points.push(point),
                None => series.push(Series {
                    label: r.curve.clone(),
                    points: vec![point],
                }),
            }
        }
        series
    }

    /// Throughput-latency curves per protocol and variant; for a scaling experiment (the
    /// variants change the partitions), peak throughput against partitions instead.
    pub fn plot(&self, path: &Path) -> Result<(), String> {
        if !self.scaling.is_empty() {
            let title = format!(
                "{}: peak throughput vs partitions (simulator)",
                self.experiment
            );
            return plot::plot_on(path, &title, &self.scaling_series(), &plot::SCALING);
        }
        let title = format!(
            "{}: throughput vs mean latency (simulator)",
            self.experiment
        );
        plot::plot_on(path, &title, &self.series(), &plot::THROUGHPUT_LOG_LATENCY)
    }

    /// The raw samples whose CDFs the peaks kept (`Point::cdfs`).
    pub fn cdf_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .variants
            .iter()
            .flat_map(|v| &v.report.curves)
            .flat_map(|c| c.peak().cdfs.keys().cloned())
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// The CDF of sample `name` at each curve's peak, labelled `curve, variant`.
    pub fn cdf_series(&self, name: &str) -> Vec<Series> {
        let mut series = Vec::new();
        for v in &self.variants {
            for c in &v.report.curves {
                if let Some(points) = c.peak().cdfs.get(name) {
                    series.push(Series {
                        label: format!("{}, {}", c.protocol, v.variant),
                        points: points.clone(),
                    });
                }
            }
        }
        series
    }

    /// [`PeaksReport::plot`] into `path`, then one CDF plot per raw sample into
    /// `STEM-SAMPLE.EXT` beside it (e.g. `paris-vs-bpr-visibility.svg`); the paths written.
    pub fn plots(&self, path: &Path) -> Result<Vec<PathBuf>, String> {
        self.plot(path)?;
        let mut written = vec![path.to_path_buf()];
        for name in self.cdf_names() {
            let short = name.trim_end_matches("_ns");
            let file = cdf_path(path, short);
            let title = format!("{}: CDF of {short} at each peak", self.experiment);
            let axes = plot::Axes {
                x: &format!("{short} (ms)"),
                ..plot::CDF
            };
            plot::plot_on(&file, &title, &self.cdf_series(&name), &axes)?;
            written.push(file);
        }
        Ok(written)
    }

    pub fn violations(&self) -> usize {
        self.variants.iter().map(|v| v.report.violations()).sum()
    }
}

/// `dir/stem.ext` -> `dir/stem-suffix.ext`.
fn cdf_path(path: &Path, suffix: &str) -> PathBuf {
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("plot");
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("svg");
    path.with_file_name(format!("{stem}-{suffix}.{ext}"))
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
        partitions: plan.config(Some(v), "", 1, 1).partitions,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::{Curve, Point};

    fn curve(label: &str, peak: f64) -> Curve {
        let point = |clients, tput| Point {
            clients_per_dc: clients,
            throughput_txn_per_s: tput,
            ..Point::default()
        };
        Curve {
            protocol: label.to_string(),
            points: vec![point(1, peak / 2.0), point(2, peak), point(3, peak * 0.9)],
        }
    }

    fn variant(label: &str, partitions: u32, peaks: [f64; 2]) -> VariantReport {
        let report = Report {
            experiment: "x".into(),
            figure: "y".into(),
            quick: true,
            source: "simulator".into(),
            notes: Vec::new(),
            curves: vec![curve("a", peaks[0]), curve("b", peaks[1])],
            peak_ratios: vec![("a".into(), 1.0), ("b".into(), peaks[1] / peaks[0])],
        };
        VariantReport {
            variant: label.to_string(),
            partitions,
            report,
        }
    }

    #[test]
    fn scaling_rows_compare_each_peak_with_the_first_scaled_by_partitions() {
        let vs = [
            variant("1 node", 8, [1000.0, 500.0]),
            variant("2 nodes", 16, [1800.0, 1000.0]),
            variant("4 nodes", 32, [5000.0, 1500.0]),
        ];
        let rows = scaling_rows(&vs);
        assert_eq!(rows.len(), 6, "a row per curve and variant");
        let row = |curve: &str, partitions| {
            rows.iter()
                .find(|r| r.curve == curve && r.partitions == partitions)
                .expect("row")
        };
        assert_eq!(row("a", 8).drop, 0.0, "the first variant is the reference");
        assert_eq!(row("a", 16).linear_txn_per_s, 2000.0);
        assert!((row("a", 16).drop - 0.1).abs() < 1e-9);
        assert!((row("a", 32).drop + 0.25).abs() < 1e-9, "above linear");
        assert!((row("b", 32).drop - 0.25).abs() < 1e-9);
        let same = [variant("x", 8, [1.0, 1.0]), variant("y", 8, [2.0, 2.0])];
        assert!(scaling_rows(&same).is_empty(), "nothing scaled");
        assert!(scaling_rows(&[]).is_empty());
    }

    #[test]
    fn the_table_ends_with_the_drop_at_the_most_partitions() {
        let variants = vec![
            variant("1 node", 8, [1000.0, 500.0]),
            variant("2 nodes", 16, [1800.0, 1000.0]),
        ];
        let report = PeaksReport {
            experiment: "x".into(),
            figure: "y".into(),
            quick: false,
            peaks: variants.iter().flat_map(peak_rows).collect(),
            scaling: scaling_rows(&variants),
            variants,
            findings: vec!["a finding".into()],
        };
        let table = report.table();
        assert!(
            table.contains("drop vs linear of a at 16 partitions/DC: 10.0%"),
            "{table}"
        );
        assert!(
            table.contains("drop vs linear of b at 16 partitions/DC: 0.0%"),
            "{table}"
        );
        assert!(table.ends_with("a finding\n"), "findings last: {table}");
        assert_eq!(
            cdf_path(Path::new("docs/figures/x.svg"), "visibility"),
            Path::new("docs/figures/x-visibility.svg")
        );
        let series = report.scaling_series();
        assert_eq!(series.len(), 2, "one per curve");
        assert_eq!(series[0].points, vec![(8.0, 1000.0), (16.0, 1800.0)]);
    }
}
