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
