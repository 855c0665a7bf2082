//! Causeway protocols (layer 2): every protocol as sans-IO state machines, a server node
//! and a client session per protocol, and the registry that lets the simulator and the
//! runtime run any of them by name.
//!
//! A protocol is a type implementing [`Protocol`]: its name, guarantee, mutations, its own
//! message type, its own config section (`[protocol.NAME]` in the cluster file, typed,
//! with defaults), its topology requirements, and its node and session constructors
//! (recovery included). The one `registry!` line per protocol at the bottom of this file
//! generates the wire enum [`Msg`], [`PROTOCOLS`], the factories and the mutation lookup.
//! Drivers hold machines as [`BoxedNode`] / [`BoxedSession`], which speak [`Msg`]; a
//! message of another protocol is a [`WrongProtocol`] error the driver sees.
//!
//! [`kit`] holds the pieces protocols share. [`params`] is the ground floor: [`Params`] and
//! [`NodeConfig`], which every protocol, the kit and the registry import from there, not
//! from this file; this file holds only module declarations, re-exports and the registry.

#![forbid(unsafe_code)]

// The lower floors' macros first: `#[macro_use]` puts `mutations!`, the `sweep_*!` shapes
// and `flavor_protocol!` in scope of every module declared after them, which then name no
// path through this file.
#[macro_use]
pub mod mutation;
#[macro_use]
pub mod sweep;
#[macro_use]
pub mod registry;

pub mod cure;
pub mod cureft;
pub mod eventual;
pub mod kit;
pub mod occult;
pub mod params;
pub mod paris;
pub mod promptcc;
pub mod unistore;

pub use params::{NodeConfig, Params};
pub use registry::{AnyNode, AnySession, Guarantee, Protocol, Requirements, WrongProtocol};

registry! {
    Eventual => eventual::Eventual,
    Cure => cure::Cure,
    CureFt => cureft::CureFt,
    UniStore => unistore::UniStore,
    Strong => unistore::StrongBaseline,
    RedBlue => unistore::RedBlue,
    Paris => paris::Paris,
    Bpr => paris::Bpr,
    Nocc => paris::Nocc,
    PrompTcc => promptcc::PrompTcc,
    PrompTccNaive => promptcc::PrompTccNaive,
    Wren => promptcc::Wren,
    Eiger => promptcc::Eiger,
    Occult => occult::Occult,
    EventualMs => occult::EventualMs,
}
