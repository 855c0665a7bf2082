//! The catalogue: every experiment `causeway bench --experiment NAME` runs, in the order
//! `list` shows them, each defined in the module of its paper (`cure`, `unistore`,
//! `unistore_strong`, `paris`, `promptcc`, `occult`).

use crate::experiment::Experiment;

/// Every experiment, by paper.
pub const EXPERIMENTS: &[Experiment] = &[
    crate::cure::VS_EVENTUAL,
    crate::cure::CRDT_SETS,
    crate::cure::SCALE,
    crate::unistore::UNIFORMITY_COST,
    crate::unistore::VISIBILITY,
    crate::unistore_strong::RUBIS,
    crate::unistore_strong::SCALABILITY,
    crate::paris::VS_BPR,
    crate::paris::LOCALITY,
    crate::paris::SCALE,
    crate::promptcc::VALUE_SIZE,
    crate::promptcc::SKEW,
    crate::promptcc::READSET,
    crate::promptcc::WRITE_RATIO,
    crate::promptcc::SCALE,
    crate::occult::OVERHEAD,
    crate::occult::TXN,
    crate::occult::SLOW_NODES,
    crate::occult::HOT_NODES,
    crate::occult::WRITE_HEAVY,
];

/// The experiment called `name`, or an error listing them.
pub fn find(name: &str) -> Result<&'static Experiment, String> {
    EXPERIMENTS.iter().find(|e| e.name == name).ok_or_else(|| {
        let names: Vec<&str> = EXPERIMENTS.iter().map(|e| e.name).collect();
        format!(
            "no experiment '{name}'; known: {} (or `list`)",
            names.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::EXPERIMENTS;
    use crate::experiment::{Experiment, Kind, Variant};
    use crate::plot::SERIES_MAX;

    /// The partitions of `e`'s configuration under each variant.
    fn partitions(e: &Experiment, variants: &[Variant]) -> Vec<u32> {
        variants
            .iter()
            .map(|v| {
                let mut c = (e.config)();
                (v.apply)(&mut c);
                c.partitions
            })
            .collect()
    }

    /// `scripts/reproduce` plots every full run, and a plot draws at most `SERIES_MAX`
    /// series: a peaks plot one per curve and variant (one per curve when the variants
    /// change the partitions: peaks against partitions), its CDF plots one per curve and
    /// variant; a CDF experiment's plot one per variant, protocol and DC.
    #[test]
    fn every_full_runs_plots_fit() {
        for e in EXPERIMENTS {
            let curves = e.curves().len();
            let series = match e.kind {
                Kind::Sweep => curves,
                Kind::PeakPerVariant(variants) => {
                    let parts = partitions(e, variants);
                    let scaling = parts.iter().any(|p| *p != parts[0]);
                    let cdfs = (e.config)().samples_by_dc.len().min(1) * curves * variants.len();
                    let peaks = if scaling {
                        curves
                    } else {
                        curves * variants.len()
                    };
                    peaks.max(cdfs)
                }
                // One CDF per variant, protocol and reported DC (`CdfReport::series`).
                Kind::Cdf(spec) => spec.variants.len() * e.protocols.len() * spec.dcs.len(),
            };
            assert!(series <= SERIES_MAX, "{}: {series} series", e.name);
        }
    }

    /// The test loop can judge every experiment: its quick report has lines to require and
    /// to show, and the names are unique.
    #[test]
    fn every_experiment_declares_its_quick_check() {
        for e in EXPERIMENTS {
            assert!(
                !e.quick_check.must.is_empty(),
                "{}: nothing required",
                e.name
            );
            assert!(!e.quick_check.show.is_empty(), "{}: nothing shown", e.name);
            let tabs = e.quick_check.must.iter().chain([&e.quick_check.show]);
            assert!(tabs.into_iter().all(|p| !p.contains('\t')), "{}", e.name);
            assert_eq!(EXPERIMENTS.iter().filter(|o| o.name == e.name).count(), 1);
        }
    }
}
