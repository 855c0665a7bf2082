//! The sans-IO contract (DESIGN.md, "The sans-IO contract"): every protocol is a set of
//! deterministic state machines driven by the simulator or by the tokio runtime alike.
//!
//! Inputs are method calls carrying a [`Ctx`] with the true time `now` (for the driver's
//! bookkeeping only) and the node's physical clock reading `clock` (what the protocol may
//! use). Outputs are pushed into the context and drained by the driver: messages, durable
//! writes, timer requests and, for client sessions, replies to the application.
//!
//! Persist before you release: a machine that must not release a message or reply before
//! a record is durable emits [`Output::Persist`] and holds the dependent outputs until the
//! driver calls `handle_persisted(lsn)`; the driver calls it only once the record (and all
//! records with smaller lsn from the same machine) are on stable storage.

use crate::api::{Request, Response};
use crate::clock::Nanos;
use crate::ids::Addr;

/// Log sequence number of a persisted record, increasing per machine.
pub type Lsn = u64;

/// Something a machine asks its driver to do.
#[derive(Clone, Debug, PartialEq)]
pub enum Output<M> {
    /// Deliver `msg` to `to` over a reliable FIFO link.
    Send { to: Addr, msg: M },
    /// Write `record` durably, then call `handle_persisted(lsn)`.
    Persist { lsn: Lsn, record: Vec<u8> },
    /// Call `handle_timeout` after `after` nanoseconds of true time (at the latest).
    Timer { after: Nanos },
    /// A client session's answer to its application's current request.
    Reply(Response),
}

/// The context of one call into a machine: the time and the output buffer.
#[derive(Debug)]
pub struct Ctx<M> {
    /// True time (simulated or monotonic); drivers use it, protocols should not.
    pub now: Nanos,
    /// The machine's physical clock reading (skewed and drifting in the simulator).
    pub clock: Nanos,
    pub outputs: Vec<Output<M>>,
}

impl<M> Ctx<M> {
    pub fn new(now: Nanos, clock: Nanos) -> Ctx<M> {
        Ctx {
            now,
            clock,
            outputs: Vec::new(),
        }
    }

    pub fn send(&mut self, to: Addr, msg: M) {
        self.outputs.push(Output::Send { to, msg });
    }

    pub fn persist(&mut self, lsn: Lsn, record: Vec<u8>) {
        self.outputs.push(Output::Persist { lsn, record });
    }

    pub fn timer(&mut self, after: Nanos) {
        self.outputs.push(Output::Timer { after });
    }

    pub fn reply(&mut self, response: Response) {
        self.outputs.push(Output::Reply(response));
    }

    pub fn drain(&mut self) -> std::vec::Drain<'_, Output<M>> {
        self.outputs.drain(..)
    }
}

/// A server node: hosts partitions and coordinates transactions.
pub trait ServerNode {
    type Msg;
    /// Called once after construction or recovery: arm periodic timers here.
    fn start(&mut self, ctx: &mut Ctx<Self::Msg>);
    fn handle_message(&mut self, ctx: &mut Ctx<Self::Msg>, from: Addr, msg: Self::Msg);
    fn handle_timeout(&mut self, ctx: &mut Ctx<Self::Msg>);
    fn handle_persisted(&mut self, ctx: &mut Ctx<Self::Msg>, lsn: Lsn);
    /// Short human-readable gauges for reports (`name`, value), e.g. stable-vector lag.
    fn gauges(&self, _clock: Nanos) -> Vec<(&'static str, f64)> {
        Vec::new()
    }
    /// Measurement samples taken since the last call (`name`, value), names ending in
    /// their unit (`read_wait_ns`). Drivers call it after every input; a machine keeps at
    /// most a bounded number between two calls.
    fn take_samples(&mut self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

/// A client session: runs one application request at a time and answers with
/// [`Output::Reply`].
pub trait ClientSession {
    type Msg;
    fn submit(&mut self, ctx: &mut Ctx<Self::Msg>, request: Request);
    fn handle_message(&mut self, ctx: &mut Ctx<Self::Msg>, from: Addr, msg: Self::Msg);
    fn handle_timeout(&mut self, ctx: &mut Ctx<Self::Msg>);
}
