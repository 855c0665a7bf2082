//! The YCSB core workloads A (50% reads, 50% updates), B (95/5) and C (reads only) as
//! transactions of `--txn-ops` operations on LWW registers `k0..kN` (Zipf 0.99 unless
//! `--zipf` says otherwise, resolved by the CLI). Every transaction is causal.

use super::{KeyPicker, Step, TxnPlan, Values, Workload};
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
        picker: &KeyPicker,
        values: &mut Values,
        rng: &mut SimRng,
    ) -> TxnPlan {
        let steps = (0..self.txn_ops)
            .map(|_| {
                let key = Workload::key(picker.pick(dc, rng));
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
