//! The shape of a cluster: DCs, nodes per DC, partitions, and which DCs replicate which
//! partition. A key belongs to the partition whose range of Redis Cluster hash slots holds
//! the key's slot ([`key_slot`]: CRC16 of the key or of its `{hash tag}`, modulo 16384), so
//! a cluster-aware Redis client routes each key to its node (`CLUSTER SLOTS`) and keys
//! sharing a tag share a partition. Partition `p` lives, inside each DC that replicates it,
//! on node `p % nodes_per_dc` of that DC. Node ids are global: DC `d`'s nodes are
//! `d * nodes_per_dc .. (d + 1) * nodes_per_dc`.
//!
//! Placement under partial replication (PaRiS, Occult): partition `p` is replicated by
//! `replication_factor` consecutive DCs starting at `p % dcs`; the first of them is the
//! partition's master (Occult's master DC of a shard), and a DC that does not replicate a
//! partition reaches it at its nearest replica by round-trip time (`nearest_replica`) or at
//! its preferred replica, round-robin across DCs (`preferred_replica`, PaRiS §V-A).

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

/// Round-trip time assumed between DCs outside [`PARIS_RTT_MS`] (past the 5th).
pub const FAR_RTT_MS: f64 = 200.0;

/// Round-trip time in ms from DC `a` to DC `b` in the default WAN: [`PARIS_RTT_MS`], and
/// [`FAR_RTT_MS`] between distinct DCs when either is past the 5th.
pub fn paris_rtt_ms(a: DcId, b: DcId) -> f64 {
    let (i, j) = (usize::from(a.0), usize::from(b.0));
    match () {
        _ if i == j => 0.0,
        _ if i < PARIS_RTT_MS.len() && j < PARIS_RTT_MS.len() => PARIS_RTT_MS[i][j],
        _ => FAR_RTT_MS,
    }
}
use serde::{Deserialize, Serialize};

/// Redis Cluster's hash slots: a key's slot is [`key_slot`], and a cluster has at most
/// this many partitions (each holds a range of at least one slot).
pub const SLOTS: usize = 16384;

/// CRC16/XMODEM tables for four bytes at a time ("slicing by 4"): `CRC16_TABLES[0][x]` is
/// the checksum of byte `x` (the shift-and-xor of [`crc16_bitwise`] over 8 bits), and
/// `CRC16_TABLES[k][x]` that of `x` followed by `k` zero bytes, built at compile time.
/// Four lookups for four bytes, where one byte at a time took a dependent lookup per
/// byte (about 6 instructions per byte): a SET or an INCR hashes its key at the session
/// and again at the node.
const CRC16_TABLES: [[u16; 256]; 4] = {
    let mut tables = [[0u16; 256]; 4];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        tables[0][i] = crc;
        i += 1;
    }
    let mut k = 1;
    while k < 4 {
        let mut i = 0;
        while i < 256 {
            let prev = tables[k - 1][i];
            tables[k][i] = (prev << 8) ^ tables[0][(prev >> 8) as usize];
            i += 1;
        }
        k += 1;
    }
    tables
};

/// CRC16/XMODEM (polynomial 0x1021, initial 0), the checksum Redis Cluster hashes keys with.
/// The checksum is linear and its 16 bits are used up by the next two bytes, so four
/// bytes `b0..b3` fold into `T3[b0 ^ hi] ^ T2[b1 ^ lo] ^ T1[b2] ^ T0[b3]`.
fn crc16(bytes: &[u8]) -> u16 {
    let [t0, t1, t2, t3] = &CRC16_TABLES;
    let mut chunks = bytes.chunks_exact(4);
    let mut crc = 0u16;
    for c in &mut chunks {
        let [hi, lo] = crc.to_be_bytes();
        crc = t3[usize::from(c[0] ^ hi)]
            ^ t2[usize::from(c[1] ^ lo)]
            ^ t1[usize::from(c[2])]
            ^ t0[usize::from(c[3])];
    }
    chunks.remainder().iter().fold(crc, |crc, b| {
        (crc << 8) ^ t0[usize::from((crc >> 8) as u8 ^ *b)]
    })
}

/// The same checksum bit by bit, the definition the table is checked against.
#[cfg(test)]
fn crc16_bitwise(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for b in bytes {
        crc ^= u16::from(*b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// A key's Redis Cluster hash slot: CRC16 of the key modulo [`SLOTS`], or of its hash tag
/// (the bytes between the first `{` and the first `}` after it, when not empty), as Redis
/// Cluster specifies, so cluster-aware clients send each key to the node holding it.
pub fn key_slot(key: &[u8]) -> u16 {
    let tagged = memchr::memchr(b'{', key).and_then(|open| {
        let rest = &key[open + 1..];
        let close = memchr::memchr(b'}', rest)?;
        (close > 0).then(|| &rest[..close])
    });
    crc16(tagged.unwrap_or(key)) % SLOTS as u16
}

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
        assert!(
            partitions as usize <= SLOTS,
            "{partitions} partitions: at most one per slot ({SLOTS})"
        );
        Topology {
            dcs,
            nodes_per_dc,
            partitions,
            replication_factor: dcs,
        }
    }

    /// A topology where each partition lives in `replication_factor` of the `dcs` DCs.
    pub fn partial(
        dcs: u16,
        nodes_per_dc: u32,
        partitions: u32,
        replication_factor: u16,
    ) -> Topology {
        assert!(
            (1..=dcs).contains(&replication_factor),
            "replication factor {replication_factor} outside 1..={dcs}"
        );
        Topology {
            replication_factor,
            ..Topology::full(dcs, nodes_per_dc, partitions)
        }
    }

    pub fn node_count(&self) -> u32 {
        u32::from(self.dcs) * self.nodes_per_dc
    }

    /// FNV-1a of the key: stable across platforms and versions, unlike std's hasher.
    /// Occult's shards use it; partitions use [`key_slot`].
    pub fn key_hash(key: &Key) -> u64 {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for b in &key.0 {
            hash ^= u64::from(*b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        hash
    }

    /// The partition holding `key`: the one whose slot range holds its Redis Cluster slot
    /// ([`key_slot`]), so keys sharing a `{hash tag}` share a partition.
    pub fn partition_of(&self, key: &Key) -> PartitionId {
        if self.partitions == 1 {
            return PartitionId(0); // every slot: no checksum of the key (a tenth of a µs)
        }
        self.partition_of_slot(key_slot(&key.0))
    }

    /// Partition `p` holds the slots `p * SLOTS / partitions ..` up to the next one's.
    pub fn partition_of_slot(&self, slot: u16) -> PartitionId {
        assert!(usize::from(slot) < SLOTS, "slot {slot} out of range");
        let p = u64::from(slot) * u64::from(self.partitions) / SLOTS as u64;
        PartitionId(p as u32)
    }

    /// The first and last slot of `partition` (inclusive).
    pub fn slots_of(&self, partition: PartitionId) -> (u16, u16) {
        assert!(
            partition.0 < self.partitions,
            "no partition {}",
            partition.0
        );
        let start = |p: u64| (p * SLOTS as u64).div_ceil(u64::from(self.partitions));
        let first = start(u64::from(partition.0));
        let next = start(u64::from(partition.0) + 1);
        (first as u16, (next - 1) as u16)
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

    /// The master DC of `partition` (Occult's master of a shard): its first replica.
    pub fn master_of(&self, partition: PartitionId) -> DcId {
        DcId((partition.0 % u32::from(self.dcs)) as u16)
    }

    /// The replica of `partition` closest to `from` by `rtt_ms(from, replica)`: `from`
    /// itself if it replicates the partition, ties broken by the lower DC id.
    pub fn nearest_replica(
        &self,
        from: DcId,
        partition: PartitionId,
        rtt_ms: impl Fn(DcId, DcId) -> f64,
    ) -> DcId {
        if self.replicates(from, partition) {
            return from;
        }
        self.replicas_of(partition)
            .into_iter()
            .min_by(|a, b| rtt_ms(from, *a).total_cmp(&rtt_ms(from, *b)).then(a.cmp(b)))
            .expect("a partition has at least one replica")
    }

    /// [`Topology::nearest_replica`] in the default WAN ([`paris_rtt_ms`]).
    pub fn nearest_replica_paris(&self, from: DcId, partition: PartitionId) -> DcId {
        self.nearest_replica(from, partition, paris_rtt_ms)
    }

    /// The replica of `partition` that clients of DC `from` use (PaRiS §V-A): `from` itself
    /// if it replicates the partition, else `replicas_of(partition)[from % replication_factor]`.
    /// Every client of a DC has the same preferred remote replica per partition, and the
    /// choice goes round-robin across DCs to balance the load on the replicas.
    pub fn preferred_replica(&self, from: DcId, partition: PartitionId) -> DcId {
        if self.replicates(from, partition) {
            return from;
        }
        let replicas = self.replicas_of(partition);
        replicas[usize::from(from.0) % usize::from(self.replication_factor)]
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
        let t = Topology::partial(3, 1, 3, 2);
        assert_eq!(t.replicas_of(PartitionId(2)), vec![DcId(2), DcId(0)]);
        assert!(!t.replicates(DcId(1), PartitionId(2)));
        assert_eq!(
            t.partitions_of(NodeId(1)),
            vec![PartitionId(0), PartitionId(1)]
        );
    }

    #[test]
    fn the_master_is_the_first_replica_and_replicates_its_partition() {
        let full = Topology::full(3, 2, 8);
        let partial = Topology::partial(5, 1, 8, 2);
        for p in (0..8).map(PartitionId) {
            for t in [&full, &partial] {
                assert_eq!(t.master_of(p), t.replicas_of(p)[0]);
                assert!(t.replicates(t.master_of(p), p));
            }
        }
        assert_eq!(full.master_of(PartitionId(4)), DcId(1));
        assert_eq!(partial.master_of(PartitionId(7)), DcId(2));
        assert_eq!(
            Topology::partial(3, 1, 3, 1).replicas_of(PartitionId(2)),
            vec![DcId(2)]
        );
    }

    #[test]
    fn the_nearest_replica_is_local_if_any_else_the_closest_then_the_lowest_id() {
        // Partition 2 of 3 DCs with factor 2 lives in DCs 2 and 0.
        let t = Topology::partial(3, 1, 3, 2);
        let p = PartitionId(2);
        // Oregon (1) is 85.72 ms from N. Virginia (0), 144.52 ms from Ireland (2).
        assert_eq!(t.nearest_replica_paris(DcId(1), p), DcId(0));
        // A replica serves itself even if the RTT function says otherwise.
        assert_eq!(t.nearest_replica(DcId(2), p, |_, _| 7.0), DcId(2));
        let local_far = |a: DcId, b: DcId| if a == b { 1e9 } else { 1.0 };
        assert_eq!(t.nearest_replica(DcId(0), p, local_far), DcId(0));
        // A tie goes to the lower DC id, whatever the replica order.
        assert_eq!(t.nearest_replica(DcId(1), p, |_, _| 10.0), DcId(0));
        // The RTT is taken from `from`: make DC 2 the closer one to DC 1.
        let rtt = |a: DcId, b: DcId| f64::from(a.0 * 10 + if b.0 == 2 { 1 } else { 5 });
        assert_eq!(t.nearest_replica(DcId(1), p, rtt), DcId(2));
        // Full replication: always local.
        let full = Topology::full(3, 1, 3);
        for d in full.all_dcs() {
            assert_eq!(full.nearest_replica_paris(d, p), d);
        }
    }

    #[test]
    fn the_preferred_replica_is_local_if_any_else_round_robin_by_dc() {
        // 5 DCs, factor 2: partition 0 lives in DCs 0 and 1, partition 3 in DCs 3 and 4.
        let t = Topology::partial(5, 1, 5, 2);
        let p0 = PartitionId(0);
        assert_eq!(t.replicas_of(p0), vec![DcId(0), DcId(1)]);
        assert_eq!(t.preferred_replica(DcId(0), p0), DcId(0), "local");
        assert_eq!(t.preferred_replica(DcId(1), p0), DcId(1), "local");
        // DC d picks replicas_of(p)[d % 2]: DC 2 the first, DC 3 the second, DC 4 the first.
        assert_eq!(t.preferred_replica(DcId(2), p0), DcId(0));
        assert_eq!(t.preferred_replica(DcId(3), p0), DcId(1));
        assert_eq!(t.preferred_replica(DcId(4), p0), DcId(0));
        let p3 = PartitionId(3);
        assert_eq!(t.preferred_replica(DcId(0), p3), DcId(3));
        assert_eq!(t.preferred_replica(DcId(1), p3), DcId(4));
        // Every DC's choice replicates the partition, and remote DCs spread over replicas.
        for p in (0..5).map(PartitionId) {
            let chosen: std::collections::BTreeSet<DcId> = t
                .all_dcs()
                .filter(|d| !t.replicates(*d, p))
                .map(|d| t.preferred_replica(d, p))
                .collect();
            assert!(chosen.iter().all(|d| t.replicates(*d, p)));
            assert_eq!(
                chosen.len(),
                2,
                "partition {p:?}: both replicas serve remote DCs"
            );
        }
        // Full replication: always local.
        let full = Topology::full(3, 1, 3);
        for d in full.all_dcs() {
            assert_eq!(full.preferred_replica(d, PartitionId(1)), d);
        }
    }

    #[test]
    fn dcs_past_the_fifth_are_200_ms_away_in_the_default_wan() {
        assert_eq!(paris_rtt_ms(DcId(3), DcId(4)), 268.66);
        assert_eq!(paris_rtt_ms(DcId(4), DcId(3)), 307.53, "row = from");
        assert_eq!(paris_rtt_ms(DcId(5), DcId(0)), FAR_RTT_MS);
        assert_eq!(paris_rtt_ms(DcId(6), DcId(6)), 0.0);
        // Partition 5 of 7 DCs with factor 2 lives in DCs 5 and 6: both 200 ms from
        // Mumbai (3), so the lower id wins.
        let t = Topology::partial(7, 1, 7, 2);
        assert_eq!(t.nearest_replica_paris(DcId(3), PartitionId(5)), DcId(5));
        // Partition 4 lives in Sydney (4) and DC 5: Sydney is 268.66 ms from Mumbai.
        assert_eq!(t.nearest_replica_paris(DcId(3), PartitionId(4)), DcId(5));
        // From Oregon (1), Sydney is 157.13 ms: closer than 200.
        assert_eq!(t.nearest_replica_paris(DcId(1), PartitionId(4)), DcId(4));
    }

    #[test]
    fn key_slots_are_redis_cluster_slots() {
        // The CRC16 test vector of the Redis Cluster specification, then slots that
        // `CLUSTER KEYSLOT` of Redis 7 answers.
        assert_eq!(crc16(b"123456789"), 0x31c3);
        let mut bytes: Vec<u8> = (0..=255).collect();
        bytes.extend(b"key:__rand_int__{user1000}".iter().rev());
        for end in 0..bytes.len() {
            for start in [0, end / 2, end] {
                let b = &bytes[start..end];
                assert_eq!(crc16(b), crc16_bitwise(b), "the tables and the bits differ");
            }
        }
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"hello"), 866);
        // Hash tags: the first `{...}` that is not empty.
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"{user1000}.followers"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{bar}{zap}"), 5061);
        assert_eq!(key_slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") % SLOTS as u16);
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
        assert_eq!(key_slot(b"foo{bar"), crc16(b"foo{bar") % SLOTS as u16);
    }

    #[test]
    fn partitions_hold_contiguous_slot_ranges_that_cover_every_slot() {
        for partitions in [1, 3, 8, 100, 16384] {
            let t = Topology::full(1, 1, partitions);
            let mut next = 0u32;
            for p in 0..partitions {
                let (first, last) = t.slots_of(PartitionId(p));
                assert_eq!(u32::from(first), next, "{partitions} partitions, p {p}");
                assert!(first <= last);
                assert_eq!(t.partition_of_slot(first), PartitionId(p));
                assert_eq!(t.partition_of_slot(last), PartitionId(p));
                next = u32::from(last) + 1;
            }
            assert_eq!(next as usize, SLOTS);
        }
        let t = Topology::full(1, 2, 8);
        let tagged = |k: &str| t.partition_of(&Key(k.as_bytes().to_vec()));
        assert_eq!(tagged("{cart:7}.items"), tagged("{cart:7}.total"));
    }
}
