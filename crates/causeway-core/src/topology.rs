//! The shape of a cluster: DCs, nodes per DC, partitions, and which DCs replicate which
//! partition. Partition `p` lives, inside each DC that replicates it, on node
//! `p % nodes_per_dc` of that DC. Node ids are global: DC `d`'s nodes are
//! `d * nodes_per_dc .. (d + 1) * nodes_per_dc`.

use crate::ids::{DcId, Key, NodeId, PartitionId};

/// Round-trip times in ms between N. Virginia, Oregon, Ireland, Mumbai, Sydney (PaRiS
/// Fig. 1, reordered so the first three are the paper's 3-DC setup). Row = from, col = to.
/// The default WAN of the simulator and of the runtime's emulated links, halved one way.
pub const PARIS_RTT_MS: [[f64; 5]; 5] = [
    [0.0, 88.28, 80.4, 190.13, 207.98],
    [85.72, 0.0, 144.52, 238.11, 157.13],
    [76.47, 139.32, 0.0, 137.53, 279.75],
    [190.42, 253.07, 132.74, 0.0, 268.66],
    [224.0, 148.69, 291.34, 307.53, 0.0],
];

/// Names of the DCs in [`PARIS_RTT_MS`] order.
pub const DC_NAMES: [&str; 5] = ["nvirginia", "oregon", "ireland", "mumbai", "sydney"];
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    pub dcs: u16,
    pub nodes_per_dc: u32,
    pub partitions: u32,
    /// DCs holding each partition; equal to `dcs` for full replication.
    pub replication_factor: u16,
}

impl Topology {
    pub fn full(dcs: u16, nodes_per_dc: u32, partitions: u32) -> Topology {
        assert!(
            dcs > 0 && nodes_per_dc > 0 && partitions > 0,
            "empty topology"
        );
        Topology {
            dcs,
            nodes_per_dc,
            partitions,
            replication_factor: dcs,
        }
    }

    pub fn node_count(&self) -> u32 {
        u32::from(self.dcs) * self.nodes_per_dc
    }

    /// FNV-1a: stable across platforms and versions, unlike std's hasher.
    pub fn partition_of(&self, key: &Key) -> PartitionId {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for b in &key.0 {
            hash ^= u64::from(*b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        PartitionId((hash % u64::from(self.partitions)) as u32)
    }

    pub fn dc_of(&self, node: NodeId) -> DcId {
        DcId((node.0 / self.nodes_per_dc) as u16)
    }

    pub fn node_of(&self, dc: DcId, partition: PartitionId) -> NodeId {
        NodeId(u32::from(dc.0) * self.nodes_per_dc + partition.0 % self.nodes_per_dc)
    }

    pub fn nodes_in_dc(&self, dc: DcId) -> impl Iterator<Item = NodeId> {
        let first = u32::from(dc.0) * self.nodes_per_dc;
        (first..first + self.nodes_per_dc).map(NodeId)
    }

    /// Partitions that `node` hosts (in DCs that replicate them).
    pub fn partitions_of(&self, node: NodeId) -> Vec<PartitionId> {
        let dc = self.dc_of(node);
        (0..self.partitions)
            .map(PartitionId)
            .filter(|p| self.node_of(dc, *p) == node && self.replicates(dc, *p))
            .collect()
    }

    /// DCs replicating `partition`: `replication_factor` consecutive DCs from `p % dcs`.
    pub fn replicas_of(&self, partition: PartitionId) -> Vec<DcId> {
        let start = partition.0 % u32::from(self.dcs);
        (0..u32::from(self.replication_factor))
            .map(|i| DcId(((start + i) % u32::from(self.dcs)) as u16))
            .collect()
    }

    pub fn replicates(&self, dc: DcId, partition: PartitionId) -> bool {
        self.replicas_of(partition).contains(&dc)
    }

    pub fn all_dcs(&self) -> impl Iterator<Item = DcId> {
        (0..self.dcs).map(DcId)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_and_partitions_map_both_ways() {
        let t = Topology::full(3, 2, 8);
        assert_eq!(t.node_count(), 6);
        assert_eq!(t.dc_of(NodeId(3)), DcId(1));
        assert_eq!(t.node_of(DcId(2), PartitionId(5)), NodeId(5));
        assert_eq!(
            t.partitions_of(NodeId(2)),
            (0..8).step_by(2).map(PartitionId).collect::<Vec<_>>()
        );
        assert_eq!(
            t.nodes_in_dc(DcId(1)).collect::<Vec<_>>(),
            vec![NodeId(2), NodeId(3)]
        );
        let p = t.partition_of(&Key::from("photo"));
        assert!(p.0 < 8);
        assert_eq!(p, t.partition_of(&Key::from("photo")));
    }

    #[test]
    fn partial_replication_places_each_partition_on_r_dcs() {
        let mut t = Topology::full(3, 1, 3);
        t.replication_factor = 2;
        assert_eq!(t.replicas_of(PartitionId(2)), vec![DcId(2), DcId(0)]);
        assert!(!t.replicates(DcId(1), PartitionId(2)));
        assert_eq!(
            t.partitions_of(NodeId(1)),
            vec![PartitionId(0), PartitionId(1)]
        );
    }
}
