//! Causeway core (layer 1 of DESIGN.md): the vocabulary every other layer speaks.
//!
//! Owns ids, clocks (physical readings, hybrid logical clocks, vector clocks), keys and
//! values, the op-based CRDTs and their operations, the client-facing transaction API
//! types, the sans-IO contract every protocol state machine implements, limits and errors.
//! Nothing here touches IO, the system clock, threads or unseeded randomness.

#![forbid(unsafe_code)]

pub mod abort_reasons;
pub mod api;
pub mod clock;
pub mod conflict;
pub mod crdt;
pub mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod ids;
pub mod keyorder;
pub mod limits;
pub mod sansio;
pub mod secret;
pub mod topology;

pub use api::{KeyPage, ObjValue, ReadValue, Request, Response, SessionScope, TxnKind};
pub use clock::{Hlc, Nanos, Vc};
pub use crdt::{ArbTs, Effect, ObjType, Object, Op, Update};
pub use error::Error;
pub use ids::{Addr, DcId, Key, NodeId, OpId, PartitionId, SessionId, TxnId, Value};
pub use sansio::{ClientSession, Ctx, Lsn, Output, ServerNode, TrueTime};
pub use secret::Secret;
pub use topology::Topology;
