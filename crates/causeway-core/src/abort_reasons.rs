//! Abort reasons counted by kind, for the simulator's and `causeway load`'s summaries
//! (`aborts by reason: "lock" 881, ...`): one key per cause, whatever ids the message
//! carries, and a bounded number of keys.

use std::collections::BTreeMap;

/// Most distinct abort reasons a tally keeps (new ones past it count as "other").
pub const ABORT_REASONS_MAX: usize = 64;

/// Abort counts by [`reason_key`].
pub type AbortReasons = BTreeMap<String, u64>;

/// An abort reason as a counting key: its text up to the first `:`, digits dropped (ids
/// and partition numbers would make one cause many lines), at most 80 characters.
pub fn reason_key(reason: &str) -> String {
    let head = reason.split(':').next().unwrap_or(reason);
    let key: String = head
        .chars()
        .filter(|c| !c.is_ascii_digit())
        .take(80)
        .collect();
    key.trim().to_string()
}

/// Counts one abort for `reason` under its key; a new key past [`ABORT_REASONS_MAX`]
/// counts as "other".
pub fn count(reasons: &mut AbortReasons, reason: &str) {
    add(reasons, &reason_key(reason), 1);
}

/// Adds `other`'s counts to `into`, under the same cap.
pub fn merge(into: &mut AbortReasons, other: &AbortReasons) {
    for (key, n) in other {
        add(into, key, *n);
    }
}

/// Adds `n` under `key`, or under "other" when `key` is new and the cap is reached.
fn add(reasons: &mut AbortReasons, key: &str, n: u64) {
    let full = reasons.len() >= ABORT_REASONS_MAX && !reasons.contains_key(key);
    let key = if full { "other" } else { key };
    *reasons.entry(key.to_string()).or_default() += n;
}

/// `aborts by reason: "REASON" N, ...`, most frequent first; `None` when nothing aborted.
pub fn summary_line(reasons: &AbortReasons) -> Option<String> {
    let mut rows: Vec<(&String, &u64)> = reasons.iter().collect();
    rows.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let parts: Vec<String> = rows.iter().map(|(r, n)| format!("{r:?} {n}")).collect();
    (!parts.is_empty()).then(|| format!("aborts by reason: {}", parts.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_do_not_split_a_cause_and_the_summary_is_most_frequent_first() {
        let mut r = AbortReasons::new();
        count(&mut r, "PartitionId(3) refused: lock held by s12.t4");
        count(&mut r, "PartitionId(17) refused: lock held by s9.t1");
        count(&mut r, "prepare timed out");
        assert_eq!(r.get("PartitionId() refused"), Some(&2));
        let line = summary_line(&r).unwrap();
        assert_eq!(
            line,
            "aborts by reason: \"PartitionId() refused\" 2, \"prepare timed out\" 1"
        );
        assert_eq!(summary_line(&AbortReasons::new()), None);
        assert_eq!(reason_key(&"x".repeat(200)).len(), 80);
    }

    #[test]
    fn kinds_past_the_cap_count_as_other_in_counts_and_merges() {
        let mut r = AbortReasons::new();
        for i in 0..ABORT_REASONS_MAX + 5 {
            count(
                &mut r,
                &format!("kind {}", "ab".repeat(i % 40 + 1) + &"z".repeat(i / 40)),
            );
        }
        assert_eq!(r.len(), ABORT_REASONS_MAX + 1, "the cap plus \"other\"");
        let total: u64 = r.values().sum();
        assert_eq!(total, (ABORT_REASONS_MAX + 5) as u64);
        let mut into = r.clone();
        let mut fresh = AbortReasons::new();
        count(&mut fresh, "a brand new kind");
        merge(&mut into, &fresh);
        assert_eq!(into.len(), r.len());
        assert_eq!(into["other"], r["other"] + 1);
    }
}
