//! Causeway's Redis-protocol front end (layer 7 of DESIGN.md): every DC serves RESP2, and
//! RESP3 after `HELLO 3`, so `redis-cli`, `redis-py` and `redis-benchmark` work unchanged.
//!
//! A connection is one Causeway session ([`session`]): its causal past travels with it from
//! transaction to transaction. A host (the runtime's DC gateway, or the in-memory backend
//! of [`memory`]) implements [`SessionFactory`] and calls [`serve`]:
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use causeway_resp::memory::{MemoryCluster, MemoryOptions};
//! let cluster = MemoryCluster::new(MemoryOptions::default());
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:7001").await?;
//! causeway_resp::serve(listener, cluster.factory(0), causeway_resp::RespConfig::default()).await
//! # }
//! ```
//!
//! Modules: [`parse`] takes requests off the wire, [`commands`] is the command table,
//! [`conn`] the per-connection state machine, [`data`] and [`txn`] run data commands in
//! transactions, [`plan`] runs a pipelined group in one exchange where it can, [`admin`] answers connection commands, [`reply`] encodes RESP2/RESP3,
//! [`server`] owns the sockets, [`limits`] bounds everything, [`keyspace`] lists and
//! flushes the key space (with [`glob`]'s patterns).

#![forbid(unsafe_code)]

pub mod admin;
pub mod cluster;
pub mod commands;
pub mod conn;
pub mod data;
#[doc(hidden)]
pub mod fuzzing;
pub mod glob;
pub mod hash;
pub mod keyspace;
pub mod limits;
pub mod list;
pub mod memory;
pub mod parse;
pub mod plan;
pub mod reply;
pub mod server;
pub mod session;
pub mod txn;
pub mod zset;

pub use reply::{Proto, Reply};
pub use server::{serve, RespConfig};
pub use session::{ServerInfo, SessionFactory, SessionHandle};

#[cfg(test)]
mod conn_tests;
#[cfg(test)]
mod keyspace_tests;
