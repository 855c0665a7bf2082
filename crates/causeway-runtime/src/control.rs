//! The contract between the client-facing gateway ([`crate::gateway`]) and the node task
//! ([`crate::node`]): the [`Control`] requests the gateway sends, the batch limit and stop
//! rule both sides apply, the session-id layout the gateway writes and the node routes by,
//! and the [`SharedGauges`] board the node task writes and the gateway reads.
//!
//! It is a leaf: the gateway and the node task both depend on it and never on each other,
//! so either side can change without the other as long as this contract holds.

use causeway_core::{NodeId, Request, Response, SessionId};
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// Most requests one [`Control::Submit`] carries; the gateway sends longer batches in
/// chunks of this size and the node task refuses a larger one.
pub const BATCH_REQUESTS_MAX: usize = 256;
/// Sessions one boot of a node can open (the 28 counter bits of a session id).
pub const SESSIONS_PER_BOOT_MAX: u64 = (1 << 28) - 1;
/// Boot epochs a session id can tell apart (its 20 epoch bits).
const EPOCHS_MAX: u64 = 1 << 20;

/// A request from the gateway to the node task.
pub enum Control {
    /// Run these requests (at most [`BATCH_REQUESTS_MAX`]) back to back, stopping after
    /// the first answer for which [`stops`] holds; answer them all at once.
    Submit {
        session: SessionId,
        requests: Vec<Request>,
        reply: oneshot::Sender<Vec<Response>>,
        /// Whether the session's reads answer with the ids of the writes they observed
        /// (`ClientSession::skip_observed`); applied when the node task creates the
        /// session's machine, at its first batch.
        observed: bool,
        /// The session scope whose past the session shares (`crate::scope`), by name;
        /// `None`: its own past only (one connection, one session, as in the papers).
        scope: Option<Arc<str>>,
    },
    /// The session is gone: drop its machine and its timer.
    Close { session: SessionId },
}

/// Whether a batch stops after this answer (both sides must agree, or the gateway would
/// send the rest of a batch the node task already ended).
pub fn stops(response: &Response) -> bool {
    matches!(response, Response::Error(_) | Response::Aborted { .. })
}

/// The high bits of every session id node `node` opens during boot `epoch`.
///
/// Session ids are unique cluster-wide and across restarts: bits 63..48 hold the node id
/// plus one (so nodes route replies to the host, and 0 means "no host"), bits 47..28 the
/// node's boot epoch (persisted, bumped at every boot), bits 27..0 a counter of at most
/// [`SESSIONS_PER_BOOT_MAX`].
pub fn session_prefix(node: NodeId, epoch: u64) -> u64 {
    assert!(epoch < EPOCHS_MAX, "boot epoch fits 20 bits");
    assert!(node.0 < (1 << 16) - 1, "node id fits 16 bits");
    ((u64::from(node.0) + 1) << 48) | (epoch << 28)
}

/// Which node hosts a session: the id's top 16 bits hold the node id plus one.
pub fn session_host(session: SessionId) -> Option<NodeId> {
    let high = session.0 >> 48;
    (high > 0).then(|| NodeId((high - 1) as u32))
}

/// The gauges the node task publishes for the gateway (`name`, value), sorted by name.
/// Cheap to clone: clones share one board.
#[derive(Clone, Debug, Default)]
pub struct SharedGauges(Arc<Mutex<Vec<(String, f64)>>>);

impl SharedGauges {
    /// Replaces every gauge with `gauges`.
    pub fn publish(&self, gauges: Vec<(String, f64)>) {
        *self.0.lock().expect("gauges lock") = gauges;
    }

    /// The gauges last published.
    pub fn read(&self) -> Vec<(String, f64)> {
        self.0.lock().expect("gauges lock").clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_name_their_host_node() {
        assert_eq!(session_host(SessionId((5 << 48) | 77)), Some(NodeId(4)));
        assert_eq!(session_host(SessionId(77)), None);
        let prefix = session_prefix(NodeId(3), 9);
        let id = SessionId(prefix | SESSIONS_PER_BOOT_MAX);
        assert_eq!(session_host(id), Some(NodeId(3)));
        assert_eq!((id.0 >> 28) & (EPOCHS_MAX - 1), 9);
    }

    #[test]
    fn batches_stop_at_errors_and_aborts_only() {
        let error = Response::Error(causeway_core::Error::Unavailable("down".into()));
        let aborted = Response::Aborted {
            reason: "conflict".into(),
        };
        assert!(stops(&error) && stops(&aborted));
        assert!(!stops(&Response::Committed));
    }

    #[test]
    fn readers_see_the_last_publication() {
        let board = SharedGauges::default();
        let reader = board.clone();
        assert!(reader.read().is_empty());
        board.publish(vec![("a".into(), 1.0)]);
        board.publish(vec![("b".into(), 2.0)]);
        assert_eq!(reader.read(), vec![("b".to_string(), 2.0)]);
    }
}
