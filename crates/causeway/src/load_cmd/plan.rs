//! What each `causeway load` client's next transaction does. The YCSB core workloads A
//! (50% reads, 50% updates), B (95/5) and C (read-only) become transactions of `--txn-ops`
//! operations on registers; `ro-wo` is PrompTCC's split, where each transaction is either
//! read-only or write-only (90% read-only). Keys are drawn with Zipf skew from one seeded
//! stream per client, so a `--seed` draws the same keys again.

use causeway_core::Key;
use causeway_sim::rng::{SimRng, Zipf};
use std::sync::Arc;

/// The operation mix of a workload.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mix {
    /// Each operation is a read with this probability, else an update.
    Ycsb { read_ratio: f64 },
    /// Each transaction is read-only with this probability, else write-only.
    ReadOnlyWriteOnly { read_only: f64 },
}

impl Mix {
    pub fn parse(text: &str) -> Result<Mix, String> {
        match text {
            "ycsb-a" => Ok(Mix::Ycsb { read_ratio: 0.5 }),
            "ycsb-b" => Ok(Mix::Ycsb { read_ratio: 0.95 }),
            "ycsb-c" => Ok(Mix::Ycsb { read_ratio: 1.0 }),
            "ro-wo" => Ok(Mix::ReadOnlyWriteOnly { read_only: 0.9 }),
            other => Err(format!(
                "--workload {other} is unknown; use ycsb-a, ycsb-b, ycsb-c or ro-wo"
            )),
        }
    }
}

/// One request of a planned transaction. Consecutive reads share one request, as a client
/// that knows its keys would send them: one round trip instead of several.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Read these keys (indices into the key space).
    Read(Vec<u32>),
    /// Assign a fresh value to this key.
    Write(u32),
}

/// The keys and values of a run, shared by its clients.
pub struct KeySpace {
    /// Prepended to every key, so that a run's history holds every write its reads can see.
    prefix: String,
    keys: u32,
    zipf: Zipf,
    value_size: usize,
}

impl KeySpace {
    pub fn new(prefix: String, keys: u32, zipf: f64, value_size: usize) -> KeySpace {
        KeySpace {
            prefix,
            keys,
            zipf: Zipf::new(keys, zipf),
            value_size,
        }
    }

    pub fn keys(&self) -> u32 {
        self.keys
    }

    pub fn key(&self, index: u32) -> Key {
        Key::new(format!("{}k{index}", self.prefix))
    }

    /// A value of exactly `value_size` bytes: `tag` (who wrote it, truncated if longer)
    /// padded with dots, so that a history shows the writer at a glance.
    pub fn value(&self, tag: &str) -> Vec<u8> {
        let mut value: Vec<u8> = tag.bytes().take(self.value_size).collect();
        value.resize(self.value_size, b'.');
        value
    }
}

/// One client's planner: its own seeded stream over the shared key space.
pub struct Planner {
    space: Arc<KeySpace>,
    mix: Mix,
    txn_ops: u32,
    rng: SimRng,
}

impl Planner {
    /// `stream` tells clients apart: each gets its own sequence from the same seed.
    pub fn new(space: Arc<KeySpace>, mix: Mix, txn_ops: u32, seed: u64, stream: u64) -> Planner {
        Planner {
            space,
            mix,
            txn_ops,
            rng: SimRng::new(seed, stream),
        }
    }

    /// The requests of the next transaction.
    pub fn plan(&mut self) -> Vec<Step> {
        let reads_only = match self.mix {
            Mix::Ycsb { .. } => None,
            Mix::ReadOnlyWriteOnly { read_only } => Some(self.rng.chance(read_only)),
        };
        let mut steps = Vec::new();
        for _ in 0..self.txn_ops {
            let key = self.space.zipf.sample(&mut self.rng);
            let read = match (reads_only, self.mix) {
                (Some(r), _) => r,
                (None, Mix::Ycsb { read_ratio }) => self.rng.chance(read_ratio),
                (None, Mix::ReadOnlyWriteOnly { .. }) => unreachable!("ro-wo decides per txn"),
            };
            match (read, steps.last_mut()) {
                (true, Some(Step::Read(keys))) => keys.push(key),
                (true, _) => steps.push(Step::Read(vec![key])),
                (false, _) => steps.push(Step::Write(key)),
            }
        }
        steps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planner(workload: &str, seed: u64) -> Planner {
        let space = Arc::new(KeySpace::new("t-".into(), 100, 0.99, 8));
        Planner::new(space, Mix::parse(workload).unwrap(), 4, seed, 0)
    }

    fn ops(steps: &[Step]) -> (usize, usize) {
        steps.iter().fold((0, 0), |(r, w), s| match s {
            Step::Read(keys) => (r + keys.len(), w),
            Step::Write(_) => (r, w + 1),
        })
    }

    #[test]
    fn mixes_have_their_read_ratios_and_ro_wo_txns_are_pure() {
        let count = |workload: &str| {
            let mut p = planner(workload, 1);
            (0..2000).map(|_| ops(&p.plan())).collect::<Vec<_>>()
        };
        assert!(count("ycsb-c").iter().all(|(r, w)| *r == 4 && *w == 0));
        let b = count("ycsb-b");
        let writes: usize = b.iter().map(|(_, w)| w).sum();
        assert!((250..550).contains(&writes), "ycsb-b: {writes} of 8000 ops");
        let ro_wo = count("ro-wo");
        assert!(ro_wo.iter().all(|(r, w)| *r == 0 || *w == 0), "mixed txn");
        let read_only = ro_wo.iter().filter(|(_, w)| *w == 0).count();
        assert!((1700..1900).contains(&read_only), "{read_only} of 2000");
        assert!(Mix::parse("ycsb-z").unwrap_err().contains("--workload"));
    }

    #[test]
    fn same_seed_same_plan_and_reads_share_requests() {
        let (mut a, mut b, mut c) = (
            planner("ycsb-a", 7),
            planner("ycsb-a", 7),
            planner("ycsb-a", 8),
        );
        let xs: Vec<_> = (0..50).map(|_| a.plan()).collect();
        let ys: Vec<_> = (0..50).map(|_| b.plan()).collect();
        let zs: Vec<_> = (0..50).map(|_| c.plan()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs, zs);
        assert!(xs.iter().all(|t| t
            .windows(2)
            .all(|w| !matches!(w, [Step::Read(_), Step::Read(_)]))));
        let mut p = planner("ycsb-c", 1);
        assert_eq!(p.plan().len(), 1, "four reads in one request");
    }

    #[test]
    fn values_have_the_asked_size_and_keys_the_prefix() {
        let space = KeySpace::new("run1-".into(), 10, 0.0, 6);
        assert_eq!(space.value("c1.2"), b"c1.2..".to_vec());
        assert_eq!(space.value("c123456789"), b"c12345".to_vec());
        assert_eq!(space.key(3), Key::from("run1-k3"));
    }
}
