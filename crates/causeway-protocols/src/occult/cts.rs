//! Occult's causal timestamps (§4.2) and their three compressions (§5): a vector of
//! shardstamps, one per logical shard in principle, kept in `n` entries.
//!
//! - `structural`: shard `s` maps to entry `s % n` (§5, "a first attempt");
//! - `temporal`: the `n - 1` shards with the highest shardstamps observed are tracked
//!   explicitly with their ids, every other shard shares the catch-all last entry (§5,
//!   after Adya and Liskov);
//! - `dc-isolate`: one temporal timestamp per DC that hosts masters, `n / dcs` entries
//!   each (§5, "Isolating datacenters"); a shard's entry lives in its master DC's part.
//!
//! Every compression over-approximates: `get(s)` is never below the exact entry of shard
//! `s`, so a compressed check can only be more cautious (a spurious stale read or abort),
//! never unsafe. `merge` keeps that: an explicit entry of one side absorbs the other's
//! catch-all, which bounds that shard too.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How a causal timestamp is compressed (`[protocols.occult] compression`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scheme {
    Structural,
    Temporal,
    DcIsolate,
}

impl Scheme {
    pub fn parse(text: &str) -> Option<Scheme> {
        match text {
            "structural" => Some(Scheme::Structural),
            "temporal" => Some(Scheme::Temporal),
            "dc-isolate" => Some(Scheme::DcIsolate),
            _ => None,
        }
    }
}

/// What every timestamp of a cluster shares: the scheme, its size and the shard layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub scheme: Scheme,
    /// Entries per timestamp (`n`), all groups together.
    pub entries: usize,
    /// DCs hosting masters (groups under `dc-isolate`).
    pub dcs: usize,
}

impl Layout {
    /// The smallest `n` the scheme accepts for `dcs` DCs (§8.2.1: temporal needs two,
    /// dc-isolate two per DC).
    pub fn entries_min(scheme: Scheme, dcs: usize) -> usize {
        match scheme {
            Scheme::Structural => 1,
            Scheme::Temporal => 2,
            Scheme::DcIsolate => 2 * dcs,
        }
    }

    fn groups(&self) -> usize {
        match self.scheme {
            Scheme::DcIsolate => self.dcs,
            _ => 1,
        }
    }

    fn per_group(&self) -> usize {
        self.entries / self.groups()
    }

    /// An all-zero timestamp.
    pub fn zero(&self) -> Cts {
        let group = match self.scheme {
            Scheme::Structural => Group::Slots(vec![0; self.entries]),
            _ => Group::Recent {
                explicit: Vec::new(),
                catch_all: 0,
            },
        };
        Cts {
            groups: vec![group; self.groups()],
        }
    }
}

/// One group of entries: structural slots, or temporal explicit entries plus catch-all.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Group {
    Slots(Vec<u64>),
    Recent {
        /// (shard, shardstamp), at most `per_group - 1`, each at least `catch_all`.
        explicit: Vec<(u32, u64)>,
        catch_all: u64,
    },
}

/// A causal timestamp. `master_dc` arguments name the DC of the shard's master (the
/// group under `dc-isolate`; ignored otherwise).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cts {
    pub groups: Vec<Group>,
}

impl Cts {
    fn group_of(&self, master_dc: usize) -> usize {
        if self.groups.len() == 1 {
            0
        } else {
            master_dc
        }
    }

    /// The (over-approximated) shardstamp of `shard` (Listing 1, `getSS`).
    pub fn get(&self, shard: u32, master_dc: usize) -> u64 {
        match &self.groups[self.group_of(master_dc)] {
            Group::Slots(v) => v[shard as usize % v.len()],
            Group::Recent {
                explicit,
                catch_all,
            } => explicit
                .iter()
                .find(|(s, _)| *s == shard)
                .map_or(*catch_all, |(_, ss)| *ss),
        }
    }

    /// The highest entry of the group of `master_dc` (Listing 1 `maxSS`, per DC under
    /// dc-isolate so that one DC's clock never inflates another's shardstamps).
    pub fn max_in(&self, master_dc: usize) -> u64 {
        group_max(&self.groups[self.group_of(master_dc)])
    }

    /// The highest entry of all.
    pub fn max(&self) -> u64 {
        self.groups.iter().map(group_max).max().unwrap_or(0)
    }

    /// Raises the entry of `shard` to `ss` (Listing 1 `updateSS`; §5: under temporal, a
    /// shard not tracked joins the explicit entries and the smallest one is conflated).
    pub fn update(&mut self, layout: &Layout, shard: u32, master_dc: usize, ss: u64) {
        let g = self.group_of(master_dc);
        match &mut self.groups[g] {
            Group::Slots(v) => {
                let n = v.len();
                let slot = &mut v[shard as usize % n];
                *slot = (*slot).max(ss);
            }
            Group::Recent {
                explicit,
                catch_all,
            } => {
                match explicit.iter_mut().find(|(s, _)| *s == shard) {
                    Some(e) => e.1 = e.1.max(ss),
                    None => explicit.push((shard, ss.max(*catch_all))),
                }
                truncate(explicit, catch_all, layout.per_group());
            }
        }
    }

    /// Entry-wise maximum (Listing 1 `mergeCTS`; §5: under temporal, the highest `n - 1`
    /// shardstamps stay explicit and the others fold into the catch-all).
    pub fn merge(&mut self, layout: &Layout, other: &Cts) {
        assert_eq!(self.groups.len(), other.groups.len(), "one layout");
        for (mine, theirs) in self.groups.iter_mut().zip(&other.groups) {
            merge_group(mine, theirs, layout.per_group());
        }
    }

    /// Bytes of metadata this timestamp adds to a message or an object: 8 per shardstamp,
    /// 4 more per explicit shard id.
    pub fn bytes(&self) -> usize {
        self.groups
            .iter()
            .map(|g| match g {
                Group::Slots(v) => 8 * v.len(),
                Group::Recent { explicit, .. } => 12 * explicit.len() + 8,
            })
            .sum()
    }
}

/// The entry-wise maximum of many timestamps without truncation: `get(s)` is exactly the
/// highest `get(s)` of any of them (explicit entries are at least their own catch-all, so
/// the highest catch-all bounds every shard the others do not track). Validation checks a
/// read set against it in O(n) instead of pairwise (final reads take every key).
#[derive(Clone, Debug, Default)]
pub struct Bound {
    groups: Vec<(BTreeMap<u32, u64>, u64, Vec<u64>)>,
}

impl Bound {
    pub fn of<'a>(all: impl IntoIterator<Item = &'a Cts>) -> Bound {
        let mut b = Bound::default();
        for c in all {
            if b.groups.is_empty() {
                b.groups = vec![Default::default(); c.groups.len()];
            }
            for ((explicit, catch_all, slots), g) in b.groups.iter_mut().zip(&c.groups) {
                match g {
                    Group::Slots(v) => {
                        slots.resize(v.len(), 0);
                        for (x, y) in slots.iter_mut().zip(v) {
                            *x = (*x).max(*y);
                        }
                    }
                    Group::Recent {
                        explicit: e,
                        catch_all: c,
                    } => {
                        *catch_all = (*catch_all).max(*c);
                        for (s, ss) in e {
                            let x = explicit.entry(*s).or_insert(0);
                            *x = (*x).max(*ss);
                        }
                    }
                }
            }
        }
        b
    }

    /// The highest `get(shard)` of the timestamps bounded (0 for none).
    pub fn get(&self, shard: u32, master_dc: usize) -> u64 {
        let g = if self.groups.len() == 1 { 0 } else { master_dc };
        let Some((explicit, catch_all, slots)) = self.groups.get(g) else {
            return 0;
        };
        if !slots.is_empty() {
            return slots[shard as usize % slots.len()];
        }
        explicit.get(&shard).copied().unwrap_or(0).max(*catch_all)
    }
}

fn group_max(g: &Group) -> u64 {
    match g {
        Group::Slots(v) => v.iter().copied().max().unwrap_or(0),
        Group::Recent {
            explicit,
            catch_all,
        } => explicit
            .iter()
            .map(|(_, ss)| *ss)
            .max()
            .unwrap_or(0)
            .max(*catch_all),
    }
}

/// Keeps the `per_group - 1` highest explicit entries; the rest raise the catch-all.
fn truncate(explicit: &mut Vec<(u32, u64)>, catch_all: &mut u64, per_group: usize) {
    let keep = per_group.saturating_sub(1);
    if explicit.len() <= keep {
        return;
    }
    explicit.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    for (_, ss) in explicit.drain(keep..) {
        *catch_all = (*catch_all).max(ss);
    }
    // An explicit entry below the raised catch-all would understate nothing (get returns
    // it only for its own shard, whose exact value it bounds), but keep the invariant
    // `explicit >= catch_all` so merges stay simple.
    for e in explicit.iter_mut() {
        e.1 = e.1.max(*catch_all);
    }
}

fn merge_group(mine: &mut Group, theirs: &Group, per_group: usize) {
    match (mine, theirs) {
        (Group::Slots(a), Group::Slots(b)) => {
            for (x, y) in a.iter_mut().zip(b) {
                *x = (*x).max(*y);
            }
        }
        (
            Group::Recent {
                explicit: ea,
                catch_all: ca,
            },
            Group::Recent {
                explicit: eb,
                catch_all: cb,
            },
        ) => {
            // A shard explicit on one side only is bounded on the other by its catch-all.
            let (ca0, cb0) = (*ca, *cb);
            for e in ea.iter_mut() {
                let theirs = eb.iter().find(|(s, _)| *s == e.0).map_or(cb0, |x| x.1);
                e.1 = e.1.max(theirs);
            }
            for (s, ss) in eb {
                if !ea.iter().any(|(x, _)| x == s) {
                    ea.push((*s, (*ss).max(ca0)));
                }
            }
            *ca = ca0.max(cb0);
            truncate(ea, ca, per_group);
        }
        _ => panic!("causal timestamps of different schemes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(scheme: Scheme, entries: usize) -> Layout {
        Layout {
            scheme,
            entries,
            dcs: 2,
        }
    }

    /// The exact vector as a map, to compare against the compressed one.
    fn exact_ok(cts: &Cts, exact: &[(u32, u64)]) {
        for (shard, ss) in exact {
            let dc = (*shard % 2) as usize;
            assert!(
                cts.get(*shard, dc) >= *ss,
                "shard {shard}: {} < exact {ss} in {cts:?}",
                cts.get(*shard, dc)
            );
        }
    }

    #[test]
    fn structural_conflates_shards_modulo_n() {
        let l = layout(Scheme::Structural, 4);
        let mut c = l.zero();
        c.update(&l, 1, 1, 100);
        c.update(&l, 5, 1, 50);
        assert_eq!(c.get(5, 1), 100, "5 and 1 share entry 1");
        assert_eq!(c.get(2, 0), 0);
        assert_eq!(c.bytes(), 32);
    }

    #[test]
    fn temporal_keeps_the_most_recent_shards_and_conflates_the_rest() {
        let l = layout(Scheme::Temporal, 3);
        let mut c = l.zero();
        c.update(&l, 7, 1, 10);
        c.update(&l, 8, 0, 30);
        c.update(&l, 9, 1, 20);
        // Two explicit entries (n - 1): 8 and 9; 7 fell into the catch-all.
        assert_eq!(c.get(8, 0), 30);
        assert_eq!(c.get(9, 1), 20);
        assert_eq!(c.get(7, 1), 10, "the catch-all took its shardstamp");
        assert_eq!(
            c.get(1234, 0),
            10,
            "every untracked shard reads the catch-all"
        );
        exact_ok(&c, &[(7, 10), (8, 30), (9, 20)]);
    }

    /// Merging never understates any shard that either side bounded, whatever the scheme.
    #[test]
    fn merges_over_approximate_every_input() {
        for (scheme, n) in [
            (Scheme::Structural, 3),
            (Scheme::Temporal, 3),
            (Scheme::DcIsolate, 6),
        ] {
            let l = layout(scheme, n);
            let (mut a, mut b) = (l.zero(), l.zero());
            let xs = [(1u32, 5u64), (2, 9), (3, 2), (4, 7)];
            let ys = [(2u32, 3u64), (5, 11), (6, 1), (3, 8)];
            for (s, ss) in xs {
                a.update(&l, s, (s % 2) as usize, ss);
            }
            for (s, ss) in ys {
                b.update(&l, s, (s % 2) as usize, ss);
            }
            a.merge(&l, &b);
            let mut all: Vec<(u32, u64)> = xs.to_vec();
            all.extend(ys);
            exact_ok(&a, &all);
            assert!(a.bytes() <= 12 * n + 16, "{scheme:?} stays small: {a:?}");
        }
    }

    /// The bound of many timestamps answers exactly the highest of their answers.
    #[test]
    fn the_bound_is_the_highest_answer_of_any_timestamp() {
        for (scheme, n) in [
            (Scheme::Structural, 3),
            (Scheme::Temporal, 3),
            (Scheme::DcIsolate, 4),
        ] {
            let l = layout(scheme, n);
            let mut all = Vec::new();
            for k in 0..6u64 {
                let mut c = l.zero();
                for s in 0..4u32 {
                    let ss = (k * 7 + u64::from(s) * 13) % 29;
                    c.update(&l, (s + k as u32) % 9, ((s + k as u32) % 2) as usize, ss);
                }
                all.push(c);
            }
            let b = Bound::of(&all);
            for s in 0..12u32 {
                let dc = (s % 2) as usize;
                let want = all.iter().map(|c| c.get(s, dc)).max().unwrap();
                assert_eq!(b.get(s, dc), want, "{scheme:?} shard {s}");
            }
        }
    }

    #[test]
    fn dc_isolate_keeps_each_dcs_clock_apart() {
        let l = layout(Scheme::DcIsolate, 4);
        let mut c = l.zero();
        c.update(&l, 2, 0, 1_000_000); // a DC-0 master far ahead
        c.update(&l, 3, 1, 10);
        c.update(&l, 5, 1, 20); // conflates 3 into DC 1's catch-all
        assert_eq!(c.max_in(1), 20, "DC 0's clock does not leak into DC 1");
        assert_eq!(c.get(7, 1), 10);
        assert_eq!(c.get(4, 0), 0, "DC 0 has only shard 2 explicit");
        assert_eq!(c.max(), 1_000_000);
    }
}
