//! The latest measurement sample of every name a node machine reports
//! (`ServerNode::take_samples`), and the protocol-agnostic rule that turns them, with the
//! machine's own `gauges()`, into the gauges the node task publishes.
//!
//! Rule: each sample name keeps its latest value; a name ending in `_ns` is published as
//! `_ms` (value / 1e6, milliseconds read better in `INFO`), any other name as it is. A
//! gauge the machine reports itself wins over a sample published under the same name,
//! since it is the machine's current reading. The result is sorted by name. Nothing here
//! knows which protocol or which sample it handles.

use std::collections::BTreeMap;

/// A value per sample name, found by the name's address first: a machine reports its
/// samples under string literals, so one name is nearly always the same pointer, and the
/// node task looks up every sample of every input (a `BTreeMap` of names compared bytes
/// for bytes cost about 150 instructions a sample; BENCHMARKS.md, issue 14's twenty-fifth
/// session). Equal names at different addresses are the same entry.
#[derive(Debug)]
pub struct NameMap<V> {
    entries: Vec<(&'static str, V)>,
}

impl<V> Default for NameMap<V> {
    fn default() -> Self {
        NameMap {
            entries: Vec::new(),
        }
    }
}

impl<V> NameMap<V> {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn position(&self, name: &'static str) -> Option<usize> {
        let same = |(n, _): &(&'static str, V)| std::ptr::eq(*n, name);
        let equal = |(n, _): &(&'static str, V)| *n == name;
        let entries = &self.entries;
        entries
            .iter()
            .position(same)
            .or_else(|| entries.iter().position(equal))
    }

    pub fn get_mut(&mut self, name: &'static str) -> Option<&mut V> {
        let i = self.position(name)?;
        Some(&mut self.entries[i].1)
    }

    /// Adds `name` (not present: callers looked it up first) with `value`.
    pub fn insert_new(&mut self, name: &'static str, value: V) -> &mut V {
        debug_assert!(self.position(name).is_none());
        self.entries.push((name, value));
        &mut self.entries.last_mut().expect("just pushed").1
    }

    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &V)> {
        self.entries.iter().map(|(n, v)| (*n, v))
    }
}

/// Most distinct sample names kept; a machine reporting more has the extra names ignored
/// (names are `&'static str`, so only a machine bug can get here).
pub const SAMPLE_NAMES_MAX: usize = 256;

/// The latest value per sample name.
#[derive(Debug, Default)]
pub struct LatestSamples {
    latest: NameMap<u64>,
    /// Whether a name was refused, so the overflow is logged once, not on every input.
    overflowed: bool,
}

impl LatestSamples {
    /// Keeps each sample as the latest value of its name.
    pub fn record(&mut self, samples: impl IntoIterator<Item = (&'static str, u64)>) {
        for (name, value) in samples {
            if let Some(latest) = self.latest.get_mut(name) {
                *latest = value;
            } else if self.latest.len() < SAMPLE_NAMES_MAX {
                self.latest.insert_new(name, value);
            } else if !self.overflowed {
                self.overflowed = true;
                tracing::warn!(
                    name,
                    "over {SAMPLE_NAMES_MAX} sample names: ignoring new ones"
                );
            }
        }
    }

    /// The machine's `gauges` and the latest samples under the rule of the module doc,
    /// sorted by name.
    pub fn gauges(&self, gauges: Vec<(&'static str, f64)>) -> Vec<(String, f64)> {
        let mut out: BTreeMap<String, f64> = gauges
            .into_iter()
            .map(|(name, value)| (name.to_string(), value))
            .collect();
        for (name, value) in self.latest.iter() {
            let (name, value) = sample_gauge(name, *value);
            out.entry(name).or_insert(value);
        }
        out.into_iter().collect()
    }
}

/// The gauge a sample is published as: `*_ns` becomes `*_ms` in milliseconds.
fn sample_gauge(name: &str, value: u64) -> (String, f64) {
    match name.strip_suffix("_ns") {
        Some(stem) => (format!("{stem}_ms"), value as f64 / 1e6),
        None => (name.to_string(), value as f64),
    }
}

/// Samples that are events an operator should see in the log, not only in metrics: the
/// kit's state transfers (`kit::transfer`; the same names in every protocol that has one),
/// with the line each logs and whether it is a warning.
const EVENTS: [(&str, &str, bool); 4] = [
    (
        "transfer_sent_keys",
        "state transfer started to a sibling back after our log dropped what it lacks",
        false,
    ),
    (
        "transfer_installed_keys",
        "state transfer installed: this replica caught up past what the sender's log dropped",
        false,
    ),
    (
        "transfer_refused_keys",
        "state transfer refused: a checkpoint here holds a version it lacks; the sender retries later",
        true,
    ),
    (
        "transfer_refused_strong",
        "state transfer refused: its certification state is missing or older than what this \
         replica's group log kept; the sender retries later",
        true,
    ),
];

/// The log lines for the event samples among `samples`: (warning, message, keys).
pub fn events(samples: &[(&'static str, u64)]) -> Vec<(bool, &'static str, u64)> {
    samples
        .iter()
        .filter_map(|(name, value)| {
            let (_, line, warn) = EVENTS.iter().find(|(n, _, _)| n == name)?;
            Some((*warn, *line, *value))
        })
        .collect()
}

/// Logs the event samples among `samples` ([`events`]).
pub fn log_events(samples: &[(&'static str, u64)]) {
    let is_event = |(name, _): &(&'static str, u64)| EVENTS.iter().any(|(n, _, _)| n == name);
    if !samples.iter().any(is_event) {
        return; // the common case, without building the list
    }
    for (warn, line, keys) in events(samples) {
        match warn {
            true => tracing::warn!(keys, "{line}"),
            false => tracing::info!(keys, "{line}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfer_samples_are_logged_and_others_are_not() {
        let samples = [
            ("wait_ns", 5),
            ("transfer_installed_keys", 40),
            ("transfer_refused_keys", 3),
            ("transfer_refused_strong", 1),
        ];
        let got = events(&samples);
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!((got[2].0, got[2].2), (true, 1));
        assert!(got[2].1.contains("certification state"));
        assert_eq!((got[0].0, got[0].2), (false, 40));
        assert!(got[0].1.contains("installed"));
        assert_eq!((got[1].0, got[1].2), (true, 3));
    }

    fn owned(gauges: &[(&str, f64)]) -> Vec<(String, f64)> {
        gauges.iter().map(|(n, v)| (n.to_string(), *v)).collect()
    }

    #[test]
    fn latest_sample_per_name_published_beside_gauges_ns_as_ms() {
        let mut samples = LatestSamples::default();
        samples.record([("wait_ns", 1_000_000), ("hops", 4), ("wait_ns", 2_500_000)]);
        samples.record([("hops", 7)]);
        let published = samples.gauges(vec![("versions", 12.0)]);
        let expected = [("hops", 7.0), ("versions", 12.0), ("wait_ms", 2.5)];
        assert_eq!(published, owned(&expected));
    }

    #[test]
    fn a_machine_gauge_wins_over_a_sample_of_the_same_published_name() {
        let mut samples = LatestSamples::default();
        samples.record([("lag_ns", 9_000_000)]);
        assert_eq!(
            samples.gauges(vec![("lag_ms", 1.0)]),
            owned(&[("lag_ms", 1.0)])
        );
    }

    /// A name at another address (built at run time) is the same entry as the literal.
    #[test]
    fn equal_names_at_different_addresses_share_their_entry() {
        let mut samples = LatestSamples::default();
        samples.record([("wait_ns", 1_000_000)]);
        let copy: &'static str = Box::leak("wait_ns".to_string().into_boxed_str());
        assert!(!std::ptr::eq(copy, "wait_ns"));
        samples.record([(copy, 3_000_000)]);
        assert_eq!(samples.gauges(Vec::new()), owned(&[("wait_ms", 3.0)]));
    }

    #[test]
    fn only_the_first_names_up_to_the_limit_are_kept() {
        let names: Vec<&'static str> = (0..=SAMPLE_NAMES_MAX)
            .map(|i| &*Box::leak(format!("s{i:04}").into_boxed_str()))
            .collect();
        let mut samples = LatestSamples::default();
        samples.record(names.iter().map(|n| (*n, 1)));
        samples.record([(names[0], 2), (names[SAMPLE_NAMES_MAX], 2)]);
        let published = samples.gauges(Vec::new());
        assert_eq!(published.len(), SAMPLE_NAMES_MAX);
        assert_eq!(published[0], ("s0000".to_string(), 2.0));
        assert!(published.iter().all(|(n, _)| n != names[SAMPLE_NAMES_MAX]));
    }
}
