//! The types the engine's parts share: the node's timers, what waits on durability, a
//! PREPARE's participant and a parked client wait. A lower floor of the folder: it imports
//! none of the parts that hold `impl Node`, so they take these from here and `node.rs`
//! imports none of them back.

use super::part::Phase;
use causeway_core::{Addr, DcId, NodeId, PartitionId, TxnId, Vc};

/// What the node's timers are for (its timer table's keys).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Timer {
    /// Ship committed txns or a heartbeat to the siblings (Alg. 2 l.18-37).
    Replicate,
    /// Exchange the GSS, inquire about old prepares, expire coordinator txns.
    Stabilize,
    /// The earliest clock wait of a parked PREPARE (`svc[d] <= Clock`, Alg. 2 l.7).
    ClockWait,
    /// The extension's (UniStore: strong heartbeats, recoveries, coordinator retries).
    Ext,
}

/// Where a PREPARE is for and who coordinates it.
#[derive(Clone, Copy, Debug)]
pub struct Participant {
    pub partition: PartitionId,
    pub coord: NodeId,
    pub txn: TxnId,
    pub phase: Phase,
}

/// Something to do once every record up to an lsn is durable.
#[derive(Debug)]
pub enum Deferred {
    Lease(u64),
    Remote {
        partition: PartitionId,
        origin: DcId,
        upto: u64,
    },
    Decision(TxnId),
    /// A record of a partition's certification group is durable (the extension's).
    Paxos {
        partition: PartitionId,
        seq: u64,
    },
    /// A one-phase commit's record is durable: the txn commits at its partition, and
    /// its coordinator learns it: without a message when it is this node (`here`).
    OnePhase {
        partition: PartitionId,
        txn: TxnId,
        ct: Vc,
        here: bool,
    },
    /// A one-node commit's record is durable: the txn commits at each of its partitions.
    NodeCommit {
        partitions: Vec<PartitionId>,
        txn: TxnId,
        ct: Vc,
    },
    /// A state transfer's `TransferDone` is durable: `pvc` claims it.
    Transfer {
        partition: PartitionId,
        claims: Vc,
    },
}

/// A UNIFORM_BARRIER or ATTACH waiting for its condition.
#[derive(Clone, Debug)]
pub struct ClientWait {
    pub client: Addr,
    pub req: u64,
    pub past: Vc,
    pub attach: bool,
}

impl ClientWait {
    pub fn new(client: Addr, req: u64, past: Vc, attach: bool) -> ClientWait {
        ClientWait {
            client,
            req,
            past,
            attach,
        }
    }
}
