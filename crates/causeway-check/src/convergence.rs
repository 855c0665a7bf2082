//! Convergence: after healing and quiescence every replica of a key holds the same value,
//! built from the same writes. The simulator takes one final read of each key at every
//! surviving DC that replicates it (every surviving DC under full replication); this
//! compares the reads of each key with one another, so a key read at only some DCs (its
//! replicas under partial replication) is compared among those, and a key read at one DC
//! only has nothing to disagree with.

use crate::history::{FinalRead, History};
use crate::{Violation, ViolationKind};
use causeway_core::Key;
use std::collections::BTreeMap;

/// Checks that the final reads of each key agree across DCs (value and observed ids).
pub fn check_convergence(history: &History) -> Result<(), Violation> {
    let mut first: BTreeMap<&Key, &FinalRead> = BTreeMap::new();
    for f in &history.finals {
        let Some(seen) = first.get(&f.key) else {
            first.insert(&f.key, f);
            continue;
        };
        let mut a = seen.observed.clone();
        let mut b = f.observed.clone();
        a.sort();
        b.sort();
        if seen.value != f.value || a != b {
            let mut txns: Vec<_> = a.iter().chain(&b).map(|id| id.txn).collect();
            txns.sort();
            txns.dedup();
            return Err(Violation::new(
                ViolationKind::Divergence,
                txns,
                format!(
                    "key {} diverged after quiescence: DC {} reads {:?} (writes {a:?}), DC {} reads {:?} (writes {b:?})",
                    f.key, seen.dc.0, seen.value, f.dc.0, f.value
                ),
            ));
        }
    }
    Ok(())
}
