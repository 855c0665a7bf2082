//! The YCSB core workloads A (50% reads, 50% updates), B (95/5) and C (reads only) as
//! transactions of `--txn-ops` operations on LWW registers `k0..kN` (Zipf 0.99 unless
//! `--zipf` says otherwise, resolved by the CLI). Every transaction is causal.
//!
//! Two shapes. Without `--partitions-per-txn` (the default) each operation is drawn on its
//! own: a key, then a read with the family's probability, else an update, one step each.
//! With `--partitions-per-txn N` a transaction has PaRiS's shape (§V-A): exactly
//! `round(ops x read share)` reads (A and B write at least once) on distinct keys of N
//! distinct partitions, all reads in one parallel request (`Step::ReadMany`), then the
//! writes; `--workload ycsb-b --txn-ops 20 --partitions-per-txn 4` is the paper's default
//! transaction, 19 reads and 1 write over 4 partitions (10 and 10 for ycsb-a). Under partial
//! replication the partitions of a local-DC transaction are ones its DC replicates
//! (`--local-dc-ratio`, see `Locality`).

use super::{Keys, Scope, Step, TxnPlan, Values, Workload};
use crate::rng::SimRng;
use causeway_core::crdt::{ObjType, Update};
use causeway_core::TxnKind;

pub(crate) struct Ycsb {
    read_ratio: f64,
    txn_ops: u32,
}

impl Ycsb {
    pub(crate) fn new(read_ratio: f64, txn_ops: u32) -> Ycsb {
        Ycsb {
            read_ratio,
            txn_ops,
        }
    }

    pub(crate) fn plan(
        &self,
        dc: u16,
        keys: &Keys<'_>,
        values: &mut Values,
        rng: &mut SimRng,
    ) -> TxnPlan {
        let scope = keys.scope(dc, rng);
        if matches!(scope, Scope::Partitions(_)) {
            return self.plan_grouped(dc, &scope, keys, values, rng);
        }
        let steps = (0..self.txn_ops as usize)
            .map(|i| {
                let key = Workload::key(keys.pick(&scope, i, dc, rng));
                // C draws no coin: it cannot update, whatever the stream says.
                if self.read_ratio >= 1.0 || rng.chance(self.read_ratio) {
                    Step::Read(key, ObjType::Lww)
                } else {
                    Step::Update(key, Update::Assign(values.next()))
                }
            })
            .collect();
        TxnPlan {
            kind: TxnKind::Causal,
            steps,
            name: "ycsb",
        }
    }

    /// How many of a grouped transaction's operations read: `round(ops x read share)`,
    /// leaving at least one write unless the family only reads (C).
    pub(crate) fn grouped_reads(&self) -> u32 {
        let reads = (f64::from(self.txn_ops) * self.read_ratio).round() as u32;
        if self.read_ratio < 1.0 {
            reads.min(self.txn_ops.saturating_sub(1))
        } else {
            self.txn_ops
        }
    }

    /// PaRiS's transaction: distinct keys, operation `i` on the `(i mod N)`-th partition of
    /// the scope; the reads first in one request, then one step per write.
    fn plan_grouped(
        &self,
        dc: u16,
        scope: &Scope,
        keys: &Keys<'_>,
        values: &mut Values,
        rng: &mut SimRng,
    ) -> TxnPlan {
        let mut used: Vec<u32> = Vec::with_capacity(self.txn_ops as usize);
        for i in 0..self.txn_ops as usize {
            let index = keys.pick_distinct(scope, i, &used, dc, rng);
            used.push(index);
        }
        let (reads, writes) = used.split_at(self.grouped_reads() as usize);
        let mut steps = Vec::with_capacity(1 + writes.len());
        if !reads.is_empty() {
            let reads = reads.iter().map(|i| (Workload::key(*i), ObjType::Lww));
            steps.push(Step::ReadMany(reads.collect()));
        }
        for i in writes {
            steps.push(Step::Update(
                Workload::key(*i),
                Update::Assign(values.next()),
            ));
        }
        TxnPlan {
            kind: TxnKind::Causal,
            steps,
            name: "ycsb",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::plans;
    use crate::config::{SimConfig, WorkloadFamily};
    use causeway_core::crdt::Update;

    use super::*;

    fn reads_and_updates(workload: WorkloadFamily) -> (usize, usize) {
        let c = SimConfig {
            workload,
            ..SimConfig::default()
        };
        let steps: Vec<Step> = plans(&c, 2_000)
            .into_iter()
            .flat_map(|p| {
                assert_eq!(p.kind, TxnKind::Causal);
                p.steps
            })
            .collect();
        for s in &steps {
            match s {
                Step::Read(_, obj) => assert_eq!(*obj, ObjType::Lww),
                Step::Update(_, u) => assert!(matches!(u, Update::Assign(_))),
                Step::ReadMany(_) => panic!("YCSB reads one key per step"),
            }
        }
        let reads = steps.iter().filter(|s| matches!(s, Step::Read(..))).count();
        (reads, steps.len() - reads)
    }

    /// PaRiS's setup: 5 DCs, 10 partitions replicated twice (each DC stores 4), YCSB B
    /// transactions of 20 operations on 4 partitions.
    fn paris(local_dc_ratio: f64) -> SimConfig {
        SimConfig {
            workload: WorkloadFamily::YcsbB,
            dcs: 5,
            partitions: 10,
            replication_factor: Some(2),
            keys: 2_000,
            zipf: 0.99,
            txn_ops: 20,
            partitions_per_txn: 4,
            local_dc_ratio,
            ..SimConfig::default()
        }
    }

    /// `n` plans of clients spread over every DC, each with its DC.
    fn plans_by_dc(c: &SimConfig, n: usize) -> Vec<(u16, TxnPlan)> {
        assert_eq!(c.validate(), Ok(()));
        let mut w = Workload::new(c);
        let mut rng = crate::rng::SimRng::new(c.seed, 2);
        (0..n)
            .map(|i| {
                let dc = (i % usize::from(c.dcs)) as u16;
                (dc, w.plan(dc, &mut rng))
            })
            .collect()
    }

    /// Every key a plan reads or writes, in step order.
    fn keys_of(p: &TxnPlan) -> Vec<causeway_core::Key> {
        p.steps
            .iter()
            .flat_map(|s| match s {
                Step::Read(k, _) | Step::Update(k, _) => vec![k.clone()],
                Step::ReadMany(ks) => ks.iter().map(|(k, _)| k.clone()).collect(),
            })
            .collect()
    }

    #[test]
    fn paris_default_txn_reads_19_keys_at_once_then_writes_1_over_4_partitions() {
        let c = paris(1.0);
        let t = c.topology();
        for (dc, p) in plans_by_dc(&c, 500) {
            assert_eq!(p.kind, TxnKind::Causal);
            assert_eq!(p.steps.len(), 2, "{:?}", p.steps);
            let Step::ReadMany(reads) = &p.steps[0] else {
                panic!("reads first, in one request: {:?}", p.steps[0]);
            };
            assert_eq!(reads.len(), 19);
            assert!(reads.iter().all(|(_, o)| *o == ObjType::Lww));
            assert!(matches!(&p.steps[1], Step::Update(_, Update::Assign(_))));
            let keys = keys_of(&p);
            let distinct: std::collections::BTreeSet<_> = keys.iter().collect();
            assert_eq!(distinct.len(), 20, "distinct keys");
            let parts: std::collections::BTreeSet<_> =
                keys.iter().map(|k| t.partition_of(k)).collect();
            assert_eq!(parts.len(), 4, "exactly 4 distinct partitions");
            // Local-DC only: every partition is one the client's DC stores.
            assert!(
                parts
                    .iter()
                    .all(|p| t.replicates(causeway_core::DcId(dc), *p)),
                "DC {dc} touched {parts:?}"
            );
        }
        let a = SimConfig {
            workload: WorkloadFamily::YcsbA,
            ..paris(1.0)
        };
        for (_, p) in plans_by_dc(&a, 50) {
            let Step::ReadMany(reads) = &p.steps[0] else {
                panic!("reads first");
            };
            assert_eq!((reads.len(), p.steps.len() - 1), (10, 10), "A: 10 + 10");
        }
        let c_only = SimConfig {
            workload: WorkloadFamily::YcsbC,
            ..paris(1.0)
        };
        for (_, p) in plans_by_dc(&c_only, 50) {
            assert!(matches!(&p.steps[..], [Step::ReadMany(r)] if r.len() == 20));
        }
    }

    #[test]
    fn the_multi_dc_share_of_txns_touches_partitions_stored_elsewhere() {
        let c = paris(0.95);
        let t = c.topology();
        let plans = plans_by_dc(&c, 4_000);
        let remote = plans
            .iter()
            .filter(|(dc, p)| {
                keys_of(p)
                    .iter()
                    .any(|k| !t.replicates(causeway_core::DcId(*dc), t.partition_of(k)))
            })
            .count();
        // 5% multi-DC; one of those picks only local partitions with chance 1/210.
        assert!((140..260).contains(&remote), "multi-DC {remote} of 4000");
        for (_, p) in &plans {
            let parts: std::collections::BTreeSet<_> =
                keys_of(p).iter().map(|k| t.partition_of(k)).collect();
            assert_eq!(parts.len(), 4);
        }
        // All multi-DC: partitions spread over all 10.
        let all = plans_by_dc(&paris(0.0), 500);
        let parts: std::collections::BTreeSet<_> = all
            .iter()
            .filter(|(dc, _)| *dc == 0)
            .flat_map(|(_, p)| keys_of(p))
            .map(|k| t.partition_of(&k))
            .collect();
        assert_eq!(parts.len(), 10, "DC 0 reaches every partition");
    }

    #[test]
    fn without_partitions_per_txn_local_txns_draw_only_local_keys() {
        let c = SimConfig {
            partitions_per_txn: 0,
            txn_ops: 4,
            ..paris(1.0)
        };
        let t = c.topology();
        let plans = plans_by_dc(&c, 2_000);
        for (dc, p) in &plans {
            assert!(p.steps.iter().all(|s| !matches!(s, Step::ReadMany(_))));
            for k in keys_of(p) {
                assert!(t.replicates(causeway_core::DcId(*dc), t.partition_of(&k)));
            }
        }
        // Under full replication a local ratio changes nothing: not even a draw.
        let full = SimConfig {
            replication_factor: None,
            local_dc_ratio: 1.0,
            ..c.clone()
        };
        let half = SimConfig {
            local_dc_ratio: 0.5,
            ..full.clone()
        };
        let (a, b) = (plans_by_dc(&full, 300), plans_by_dc(&half, 300));
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
    }

    #[test]
    fn each_ycsb_workload_has_its_read_update_mix_on_registers() {
        let (reads, updates) = reads_and_updates(WorkloadFamily::YcsbA);
        assert!((3_800..4_200).contains(&updates), "A: {reads}/{updates}");
        let (reads, updates) = reads_and_updates(WorkloadFamily::YcsbB);
        assert!((300..500).contains(&updates), "B: {reads}/{updates}");
        let (reads, updates) = reads_and_updates(WorkloadFamily::YcsbC);
        assert_eq!((reads, updates), (8_000, 0), "C only reads");
    }
}
