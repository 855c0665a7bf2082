//! Session scopes: the causal past that the connections of one endpoint share.
//!
//! The papers give each client its own session, and a new session starts with an empty
//! past: under UniStore it does not see another client's local write until that write is
//! stored in f+1 DCs (Alg. 1 l.5-6), under PaRiS until the UST covers it. An application
//! that talks through a connection pool (each request may take another connection) then
//! loses its own writes for a while. A scope fixes that without touching any protocol:
//! every session of an endpoint scope (the node's front end, per user) gives its causal
//! past to the scope when a batch of its requests is answered, and takes the scope's past
//! before each request it runs outside a transaction (BEGIN, TOKEN, BARRIER, ATTACH).
//! Both are `ClientSession::join_past`, which each protocol implements for the metadata
//! its client keeps (Cure and UniStore `pastVec`, PaRiS `ust_c` and its write cache,
//! PrompTCC `D_c`, Occult's causal timestamp). So a write acknowledged to any connection
//! of the scope is in the snapshot of every transaction that begins after it on any
//! connection of the scope: the scope behaves as one client whose transactions may run
//! concurrently, which the papers' sessions allow (each connection still is a session).
//!
//! The scope's past lives in a holder: a session machine of the node's protocol that
//! never runs a request. It is volatile: after the node restarts, a scope starts empty.

use causeway_protocols::BoxedSession;
use std::collections::HashMap;
use std::sync::Arc;

/// Most scopes one node keeps (one per endpoint user; a node has one user today).
pub const SCOPES_MAX: usize = 64;

/// One scope's shared past and how often it changed.
struct Scope {
    holder: BoxedSession,
    /// Bumped at every [`Scopes::give`]: a session that took version `v` need not take
    /// it again while the scope is still at `v`.
    version: u64,
}

/// The scopes of one node, by name.
#[derive(Default)]
pub struct Scopes {
    scopes: HashMap<Arc<str>, Scope>,
}

impl Scopes {
    /// Scopes held now.
    pub fn len(&self) -> usize {
        self.scopes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.scopes.is_empty()
    }

    /// Joins `session`'s past into scope `name`'s (a batch of its requests was answered).
    /// The first past given creates the scope's holder with `make`; past
    /// [`SCOPES_MAX`] scopes, or if `make` fails, the past is not kept (an error).
    pub fn give(
        &mut self,
        name: &Arc<str>,
        session: &BoxedSession,
        make: impl FnOnce() -> Result<BoxedSession, String>,
    ) -> Result<(), String> {
        if !self.scopes.contains_key(name) {
            if self.scopes.len() >= SCOPES_MAX {
                return Err(format!("more than {SCOPES_MAX} session scopes on one node"));
            }
            let scope = Scope {
                holder: make()?,
                version: 0,
            };
            self.scopes.insert(name.clone(), scope);
        }
        let scope = self.scopes.get_mut(name).expect("inserted above");
        let joined = scope.holder.join_past(session.as_ref());
        assert!(joined, "a scope's holder runs no request");
        scope.version += 1;
        Ok(())
    }

    /// Joins scope `name`'s past into `session` unless it already took this version
    /// (`seen`, updated when it did; a session inside a transaction takes nothing); a
    /// scope nobody gave to yet has nothing to take.
    pub fn take(&self, name: &str, session: &mut BoxedSession, seen: &mut u64) {
        let Some(scope) = self.scopes.get(name) else {
            return;
        };
        if *seen == scope.version {
            return;
        }
        if session.join_past(scope.holder.as_ref()) {
            *seen = scope.version;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_core::{DcId, SessionId, Topology};
    use causeway_protocols::{new_session, Params};

    fn session(id: u64) -> BoxedSession {
        let topology = Topology::full(3, 1, 2);
        let section = serde_json::Value::Null;
        new_session(
            "unistore",
            SessionId(id),
            DcId(0),
            &topology,
            &Params::default(),
            &section,
        )
        .expect("a unistore session")
    }

    /// A scope exists once a past was given; a session takes each version once; past
    /// `SCOPES_MAX` scopes a past is refused, naming the limit.
    #[test]
    fn sessions_take_each_version_once_and_scopes_are_bounded() {
        let mut scopes = Scopes::default();
        let mut s = session(1);
        let mut seen = 0;
        scopes.take("default", &mut s, &mut seen);
        assert!(
            scopes.is_empty() && seen == 0,
            "nothing given, nothing taken"
        );
        let name: Arc<str> = Arc::from("default");
        scopes.give(&name, &s, || Ok(session(0))).unwrap();
        scopes.take("default", &mut s, &mut seen);
        assert_eq!(seen, 1);
        let mut made = false;
        scopes
            .give(&name, &s, || {
                made = true;
                Ok(session(0))
            })
            .unwrap();
        assert!(!made, "one holder per scope");
        scopes.take("default", &mut s, &mut seen);
        assert_eq!((scopes.len(), seen), (1, 2));
        for i in 1..SCOPES_MAX {
            let name: Arc<str> = Arc::from(format!("user{i}").as_str());
            scopes.give(&name, &s, || Ok(session(0))).unwrap();
        }
        let e = scopes
            .give(&Arc::from("one-more"), &s, || Ok(session(0)))
            .unwrap_err();
        assert!(e.contains(&SCOPES_MAX.to_string()), "{e}");
    }
}
