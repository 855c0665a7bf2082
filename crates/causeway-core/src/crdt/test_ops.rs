//! Test helpers shared by the CRDT modules' unit tests: op ids and ops prepared against a
//! replica at a chosen arbitration time.

use super::{ArbTs, Object, Op, Update};
use crate::ids::{OpId, SessionId, TxnId};

/// Op id number `seq` (of one of three sessions).
pub(super) fn id(seq: u64) -> OpId {
    OpId {
        txn: TxnId {
            session: SessionId(seq % 3),
            seq,
        },
        index: 0,
    }
}

/// An op of `update` prepared against `at`, at arbitration time `t` (op id `seq`).
pub(super) fn op(at: &Object, t: u64, seq: u64, update: Update) -> Op {
    let effect = at.prepare(&update).expect("prepares");
    Op {
        id: id(seq),
        ts: ArbTs {
            primary: t,
            secondary: 0,
        },
        effect,
    }
}
