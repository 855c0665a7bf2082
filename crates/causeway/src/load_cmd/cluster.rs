//! What `causeway load` does with the cluster besides the timed run: finding out which DC
//! each `--addr` serves (one session per address, before anything else, so a wrong address
//! fails before the run with the flag named), preloading every key once (YCSB's load phase),
//! and the final reads of every key at every DC once the replicas agree, which the history
//! needs for the checker's convergence check.

use super::driver::{Tally, Worker};
use super::plan::{KeySpace, Step};
use causeway_check::{FinalRead, Outcome};
use causeway_client::{Client, Options};
use causeway_core::crdt::ObjType;
use causeway_core::limits::READ_KEYS_MAX;
use causeway_core::DcId;
use std::time::{Duration, Instant};

/// Keys written by one preload transaction.
const PRELOAD_TXN_KEYS: u32 = 256;
/// Attempts at one preload transaction before the run gives up.
const PRELOAD_ATTEMPTS_MAX: u32 = 3;
/// How long the final reads wait for the DCs to agree.
const FINAL_WAIT: Duration = Duration::from_secs(30);

/// The cluster behind the addresses: its name and protocol, and each address's DC.
pub struct Endpoints {
    pub cluster: String,
    pub protocol: String,
    /// Per address: (address, DC index, DC name); DCs are numbered in order of appearance.
    pub addrs: Vec<(String, DcId, String)>,
}

impl Endpoints {
    /// The first address of each DC.
    pub fn one_per_dc(&self) -> Vec<(String, DcId)> {
        let mut seen = Vec::new();
        for (addr, dc, _) in &self.addrs {
            if !seen.iter().any(|(_, d)| d == dc) {
                seen.push((addr.clone(), *dc));
            }
        }
        seen
    }
}

/// Opens one session per address to learn its cluster and DC; every address must belong
/// to the same cluster.
pub fn probe(addrs: &[String], options: &Options) -> Result<Endpoints, String> {
    let mut found = Endpoints {
        cluster: String::new(),
        protocol: String::new(),
        addrs: Vec::new(),
    };
    let mut dc_names: Vec<String> = Vec::new();
    for addr in addrs {
        let client = Client::connect_with(addr.as_str(), options.clone()).map_err(|e| {
            format!("--addr {addr}: {e}; fix: start the cluster (causeway up) or pass the client address of a running DC")
        })?;
        let w = client.welcome();
        if found.addrs.is_empty() {
            found.cluster = w.cluster.clone();
            found.protocol = w.protocol.clone();
        } else if w.cluster != found.cluster {
            return Err(format!(
                "--addr {addr} serves cluster '{}' but {} serves '{}'; fix: pass addresses of one cluster",
                w.cluster, found.addrs[0].0, found.cluster
            ));
        }
        let index = dc_names.iter().position(|d| *d == w.dc).unwrap_or_else(|| {
            dc_names.push(w.dc.clone());
            dc_names.len() - 1
        });
        found
            .addrs
            .push((addr.clone(), DcId(index as u16), w.dc.clone()));
    }
    Ok(found)
}

/// Writes every key once through `worker`, a few hundred keys per transaction; a chunk
/// whose outcome is not known committed is written again with a fresh session.
pub fn preload(worker: &mut Worker) -> Result<Tally, String> {
    let mut tally = Tally::new();
    let keys = worker.space.keys();
    let mut first = 0;
    while first < keys {
        let chunk: Vec<Step> = (first..keys.min(first + PRELOAD_TXN_KEYS))
            .map(Step::Write)
            .collect();
        let mut attempts = 0;
        loop {
            attempts += 1;
            let mut client = worker.connect()?;
            let (done, _) = worker.run_txn(&mut client, &chunk);
            tally.records.extend(done.record);
            if done.outcome == Outcome::Committed {
                tally.committed += 1;
                break;
            }
            if attempts >= PRELOAD_ATTEMPTS_MAX {
                return Err(format!(
                    "preloading keys {first}.. at {} ended {:?} {attempts} times; fix: check the cluster's logs, or pass --no-preload",
                    worker.addr, done.outcome
                ));
            }
        }
        first += PRELOAD_TXN_KEYS;
    }
    Ok(tally)
}

/// Every key's value at one DC, read in one transaction of a fresh session.
fn read_all(addr: &str, dc: DcId, space: &KeySpace, options: &Options) -> Option<Vec<FinalRead>> {
    let mut client = Client::connect_with(addr, options.clone()).ok()?;
    client.begin().ok()?;
    let mut finals = Vec::new();
    let indices: Vec<u32> = (0..space.keys()).collect();
    for chunk in indices.chunks(READ_KEYS_MAX) {
        let keys = chunk
            .iter()
            .map(|i| (space.key(*i), ObjType::Lww))
            .collect();
        for v in client.read(keys).ok()? {
            finals.push(FinalRead {
                dc,
                key: v.key,
                obj: ObjType::Lww,
                value: v.value,
                observed: v.observed,
            });
        }
    }
    client.commit().ok()?;
    Some(finals)
}

/// Whether every DC read the same value and writes for every key.
fn agree(per_dc: &[Vec<FinalRead>]) -> bool {
    let same = |a: &FinalRead, b: &FinalRead| {
        let (mut x, mut y) = (a.observed.clone(), b.observed.clone());
        x.sort();
        y.sort();
        a.key == b.key && a.value == b.value && x == y
    };
    per_dc.iter().all(|reads| {
        reads.len() == per_dc[0].len() && reads.iter().zip(&per_dc[0]).all(|(a, b)| same(a, b))
    })
}

/// The final reads once the DCs agree, or each DC's latest after [`FINAL_WAIT`] (the
/// checker then reports the divergence). A DC that fails one round (a node restarting)
/// keeps its last good read, so one bad round at the deadline loses nothing; `Err` only
/// when some DC could not be read at all, and the history is then written without them.
pub fn final_reads(
    dcs: &[(String, DcId)],
    space: &KeySpace,
    options: &Options,
) -> Result<(Vec<FinalRead>, bool), String> {
    let deadline = Instant::now() + FINAL_WAIT;
    let mut latest: Vec<Option<Vec<FinalRead>>> = vec![None; dcs.len()];
    loop {
        let mut fresh = true;
        for ((addr, dc), slot) in dcs.iter().zip(latest.iter_mut()) {
            match read_all(addr, *dc, space, options) {
                Some(reads) => *slot = Some(reads),
                None => fresh = false,
            }
        }
        let all: Option<Vec<Vec<FinalRead>>> = latest.iter().cloned().collect();
        // Agreement counts only when every DC answered in this round.
        let converged = fresh && all.as_deref().is_some_and(agree);
        if converged || Instant::now() > deadline {
            return match all {
                Some(per_dc) => Ok((per_dc.into_iter().flatten().collect(), converged)),
                None => Err(format!(
                    "the final reads failed at some DC for {FINAL_WAIT:?}; the history is written without them"
                )),
            };
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_core::{Key, ObjValue};

    fn read(dc: u16, key: &str, value: &str) -> FinalRead {
        FinalRead {
            dc: DcId(dc),
            key: Key::from(key),
            obj: ObjType::Lww,
            value: ObjValue::Lww(Some(value.as_bytes().to_vec())),
            observed: Vec::new(),
        }
    }

    #[test]
    fn dcs_agree_only_on_equal_reads_of_every_key() {
        let a = vec![read(0, "k0", "x"), read(0, "k1", "y")];
        let b = vec![read(1, "k0", "x"), read(1, "k1", "y")];
        let c = vec![read(2, "k0", "x"), read(2, "k1", "z")];
        assert!(agree(&[a.clone(), b.clone()]));
        assert!(!agree(&[a.clone(), b, c]));
        assert!(!agree(&[a.clone(), a[..1].to_vec()]));
    }

    #[test]
    fn one_address_per_dc_keeps_the_first() {
        let e = Endpoints {
            cluster: "c".into(),
            protocol: "cure".into(),
            addrs: vec![
                ("a:1".into(), DcId(0), "dc1".into()),
                ("a:2".into(), DcId(0), "dc1".into()),
                ("a:3".into(), DcId(1), "dc2".into()),
            ],
        };
        assert_eq!(
            e.one_per_dc(),
            vec![("a:1".to_string(), DcId(0)), ("a:3".to_string(), DcId(1))]
        );
    }
}
