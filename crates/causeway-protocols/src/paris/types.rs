//! The types every part of the PaRiS node shares: what waits on durability, the DC's
//! root, a partition's transfers. A lower floor: it imports none of the node's parts, so
//! `coord.rs`, `ust.rs` and `transfer.rs` take them from here, not from `node.rs`.

use causeway_core::{DcId, NodeId, PartitionId, Topology, TxnId};

/// Something to do once every record up to an lsn is durable.
#[derive(Debug)]
pub enum Deferred {
    Lease(u64),
    Remote {
        partition: PartitionId,
        origin: DcId,
        upto: u64,
    },
    Commit {
        partition: PartitionId,
        txn: TxnId,
        ct: u64,
    },
    Decision(TxnId),
    Abort {
        partition: PartitionId,
        txn: TxnId,
    },
    /// A state transfer's end is durable: `VV` claims it.
    Transfer {
        partition: PartitionId,
        claims: causeway_core::Vc,
    },
}

/// The DC's root: its first node (aggregates the GST and exchanges it with other roots).
pub fn root_of(topo: &Topology, dc: DcId) -> NodeId {
    topo.nodes_in_dc(dc).next().expect("a DC has nodes")
}

/// One partition's transfers, both ways (`kit::transfer`).
pub type Transfers = crate::kit::transfer::Transfers<u64>;
