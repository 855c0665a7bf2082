//! The seam between the RESP front end and whatever runs Causeway sessions.
//!
//! The front end needs three things from its host (the tokio runtime in a server process,
//! or the in-memory backend of [`crate::memory`] in tests): a way to open one client
//! session per connection ([`SessionFactory::open`]), a way to run one [`Request`] on that
//! session and await its [`Response`] ([`SessionHandle::call`]), and a few facts about the
//! DC for `INFO` ([`ServerInfo`]).
//!
//! Contract the front end relies on (every protocol session of `causeway-protocols` keeps
//! it):
//! - requests on one handle run one at a time, in order;
//! - a read that fails with `Error::WrongType { expected, .. }` names in `expected` the type
//!   the key holds, and leaves the transaction open (the front end retries the read with
//!   that type to serve `GET` on counters and `DEL`/`EXISTS` on any type);
//! - a failed `Commit` ends the transaction; a failed `Begin` starts none;
//! - a handle is dropped when its connection closes, possibly inside a transaction
//!   (`TX.BEGIN` without `TX.COMMIT`): the host then aborts that transaction and forgets
//!   the session.
//!
//! Hosting RESP (what the runtime's DC gateway does): implement [`SessionFactory`] for the
//! gateway, bind a `tokio::net::TcpListener` on the DC's RESP port and run
//! `causeway_resp::serve(listener, factory, causeway_resp::RespConfig { password, shutdown,
//! ..Default::default() })` on the tokio runtime. `serve` returns once the shutdown signal
//! (a `tokio::sync::watch::Receiver<bool>`) holds `true`.
//!
//! Contract changes (this list says when):
//! - `SessionHandle::scope` and `set_scope` (`CLIENT SESSION`): a host that shares the
//!   causal past of an endpoint's sessions says so; the defaults keep each session's own.
//! - `ServerInfo::stable_vector_lag_ms` is gone: the front end names no protocol's gauge,
//!   so a host reports such a lag among `ServerInfo::gauges` like any other.
//! - [`call_each`], the default `SessionHandle::call_batch`, is public, so a host that
//!   overrides `call_batch` can end with it.
//! - [`SessionFactory::open`] is called when a connection authenticates (at once without a
//!   password), not at its accept: a connection that never authenticates opens no session.

use causeway_core::{Request, Response, SessionScope};
use std::future::Future;

/// One client session, owned by one connection.
pub trait SessionHandle: Send {
    /// Runs one request and answers it.
    fn call(&mut self, req: Request) -> impl Future<Output = Response> + Send;

    /// Runs `reqs` in order and answers each, stopping after the first `Response::Error`
    /// or `Response::Aborted` (which is then the last answer). A host that can submit a
    /// whole batch to its session without a round trip per request should override this;
    /// the front end batches the requests of a standalone command (`Begin`, updates,
    /// `Commit`) through it.
    fn call_batch(&mut self, reqs: Vec<Request>) -> impl Future<Output = Vec<Response>> + Send {
        call_each(self, reqs)
    }

    /// The scope whose causal past the session starts each transaction from
    /// (`CLIENT SESSION`; docs/REDIS.md). Default: its own, the connection's.
    fn scope(&self) -> SessionScope {
        SessionScope::Connection
    }

    /// Switches the scope from the session's next transaction on (what it already took
    /// stays in its past); false when the host has no such scope.
    fn set_scope(&mut self, scope: SessionScope) -> bool {
        scope == SessionScope::Connection
    }
}

/// [`SessionHandle::call_batch`]'s default: one [`SessionHandle::call`] per request, in
/// order, stopping after the first `Response::Error` or `Response::Aborted`. A host that
/// overrides `call_batch` to look at the batch first can end with this.
pub async fn call_each<H: SessionHandle + ?Sized>(
    handle: &mut H,
    reqs: Vec<Request>,
) -> Vec<Response> {
    let mut out = Vec::with_capacity(reqs.len());
    for req in reqs {
        let resp = handle.call(req).await;
        let stop = matches!(resp, Response::Error(_) | Response::Aborted { .. });
        out.push(resp);
        if stop {
            break;
        }
    }
    out
}

/// Opens sessions for new connections and describes the DC they live in. A new session
/// shares its past with the scope the host's setting names ([`SessionHandle::scope`]).
pub trait SessionFactory: Send + Sync + 'static {
    type Handle: SessionHandle + 'static;

    /// A fresh session in this DC, with an empty causal past of its own (in an endpoint
    /// scope, it takes the endpoint's at its first transaction).
    fn open(&self) -> Self::Handle;

    /// The DC's current facts, for `INFO` and `HELLO`.
    fn info(&self) -> ServerInfo;

    /// The DC as a Redis Cluster (`CLUSTER NODES`, `SLOTS`): empty when the front end
    /// has none to show, and `CLUSTER` then says cluster support is disabled.
    fn cluster(&self) -> &[crate::cluster::ClusterNode] {
        &[]
    }
}

/// What `INFO` reports about the DC and its protocol.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServerInfo {
    /// The cluster's protocol (`eventual`, `cure`, ...).
    pub protocol: String,
    /// This DC's number as users see it (from 1).
    pub dc: u32,
    /// Every DC's name or number, in order.
    pub dcs: Vec<String>,
    /// The host's gauges (`name`, value, names ending in their unit), whatever the
    /// protocol reports; `INFO` prints every one, sorted by name.
    pub gauges: Vec<(String, f64)>,
}
