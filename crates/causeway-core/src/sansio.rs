//! The sans-IO contract (DESIGN.md, "The sans-IO contract"): every protocol is a set of
//! deterministic state machines driven by the simulator or by the tokio runtime alike.
//!
//! Inputs are method calls carrying a [`Ctx`] with the true time `now` (for the driver's
//! bookkeeping only, typed [`TrueTime`] so a protocol cannot mix it up with its clock) and
//! the node's physical clock reading `clock` (what the protocol may use). Outputs are
//! pushed into the context and drained by the driver: messages, durable writes and, for
//! client sessions, replies to the application.
//!
//! Timers are deadlines, as in quinn-proto: after every input the driver asks the machine
//! for [`ServerNode::poll_timeout`], its next deadline in the machine's own clock, and
//! calls `handle_timeout` once the machine's clock has reached it. A machine keeps its
//! deadlines in a table keyed by purpose (`causeway_protocols::kit::timers`), so a timer is
//! cancelled by removing its entry and no timer request can be lost: the driver always
//! holds exactly one wake-up per machine, the earliest deadline. After `handle_timeout`
//! the next deadline must lie in the future (drivers check it: a machine that leaves a due
//! deadline behind would be woken forever).
//!
//! Persist before you release: a machine that must not release a message or reply before
//! a record is durable emits [`Output::Persist`] and holds the dependent outputs until the
//! driver calls `handle_persisted(lsn)`; the driver calls it only once the record (and all
//! records with smaller lsn from the same machine) are on stable storage.
//!
//! Invariants: every machine answers `check_invariants`, which the simulator calls after
//! every input of every run; a broken invariant fails the run with its seed.

use crate::api::{Request, Response};
use crate::clock::Nanos;
use crate::ids::{Addr, NodeId, OpId};

/// Log sequence number of a persisted record, increasing per machine.
pub type Lsn = u64;

/// True time (simulated, or the runtime's monotonic time): the driver's time, which a
/// protocol must not read. Protocol time is the clock reading `Ctx::clock` (plain
/// [`Nanos`], skewed and drifting in the simulator).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TrueTime(pub Nanos);

/// Something a machine asks its driver to do.
#[derive(Clone, Debug, PartialEq)]
pub enum Output<M> {
    /// Deliver `msg` to `to` over a reliable FIFO link.
    Send { to: Addr, msg: M },
    /// Write `record` durably, then call `handle_persisted(lsn)`.
    Persist { lsn: Lsn, record: Vec<u8> },
    /// A client session's answer to its application's current request.
    Reply(Response),
}

impl<M> Output<M> {
    /// The same output with its message converted (a protocol's own message type into the
    /// registry's wire enum, for instance).
    pub fn map<N>(self, f: impl FnOnce(M) -> N) -> Output<N> {
        match self {
            Output::Send { to, msg } => Output::Send { to, msg: f(msg) },
            Output::Persist { lsn, record } => Output::Persist { lsn, record },
            Output::Reply(r) => Output::Reply(r),
        }
    }
}

/// The context of one call into a machine: the time and the output buffer.
#[derive(Debug)]
pub struct Ctx<M> {
    /// True time (simulated or monotonic); drivers use it, protocols must not.
    pub now: TrueTime,
    /// The machine's physical clock reading (skewed and drifting in the simulator).
    pub clock: Nanos,
    pub outputs: Vec<Output<M>>,
}

impl<M> Ctx<M> {
    pub fn new(now: TrueTime, clock: Nanos) -> Ctx<M> {
        Ctx {
            now,
            clock,
            outputs: Vec::new(),
        }
    }

    /// A context whose outputs go into `buffer`, an emptied one kept from an earlier call
    /// ([`Ctx::into_buffer`]): a fresh vector per machine call was a tenth of the
    /// allocations of a single-key transaction.
    pub fn with_buffer(now: TrueTime, clock: Nanos, buffer: Vec<Output<M>>) -> Ctx<M> {
        assert!(buffer.is_empty(), "a lent output buffer holds outputs");
        Ctx {
            now,
            clock,
            outputs: buffer,
        }
    }

    /// The drained output buffer, for the next call's [`Ctx::with_buffer`]; an empty one
    /// when it grew past [`crate::limits::LENT_OUTPUTS_MAX`].
    pub fn into_buffer(self) -> Vec<Output<M>> {
        assert!(self.outputs.is_empty(), "outputs lent on before they ran");
        match self.outputs.capacity() <= crate::limits::LENT_OUTPUTS_MAX {
            true => self.outputs,
            false => Vec::new(),
        }
    }

    pub fn send(&mut self, to: Addr, msg: M) {
        self.outputs.push(Output::Send { to, msg });
    }

    pub fn persist(&mut self, lsn: Lsn, record: Vec<u8>) {
        self.outputs.push(Output::Persist { lsn, record });
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
    /// Called once after construction or recovery: set up periodic deadlines here.
    fn start(&mut self, ctx: &mut Ctx<Self::Msg>);
    fn handle_message(&mut self, ctx: &mut Ctx<Self::Msg>, from: Addr, msg: Self::Msg);
    /// Called once the clock reached [`ServerNode::poll_timeout`]; runs every due timer.
    fn handle_timeout(&mut self, ctx: &mut Ctx<Self::Msg>);
    fn handle_persisted(&mut self, ctx: &mut Ctx<Self::Msg>, lsn: Lsn);
    /// The next deadline, in this machine's clock (`Ctx::clock`), if any.
    fn poll_timeout(&self) -> Option<Nanos>;
    /// The machine's invariants (e.g. `gss <= min pvc`); the simulator calls this after
    /// every input. An `Err` names the broken invariant and the values that break it.
    fn check_invariants(&self) -> Result<(), String> {
        Ok(())
    }
    /// The machine's state as one record that stands for every record it persisted so
    /// far (log compaction: a driver may store it as the log's snapshot and drop those
    /// records; recovery then replays it first, then the records after it). `None` when
    /// the protocol has no checkpoints or cannot take one now (records still in flight);
    /// drivers try again later.
    fn checkpoint(&self) -> Option<Vec<u8>> {
        None
    }
    /// Whether [`ServerNode::checkpoint`] ever answers (at quiescent moments): drivers
    /// pause a node's inputs to reach one only when it does.
    fn can_checkpoint(&self) -> bool {
        false
    }
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
    /// Work done since the last call, in abstract operations (keys read or written,
    /// versions traversed, vector entries merged): the simulator's CPU model charges
    /// `op_ns` for each. Drivers call it after every input.
    fn take_work(&mut self) -> u64 {
        0
    }
}

/// A client session: runs one application request at a time and answers with
/// [`Output::Reply`].
pub trait ClientSession {
    type Msg;
    fn submit(&mut self, ctx: &mut Ctx<Self::Msg>, request: Request);
    /// [`ClientSession::submit`] with the requests that will follow it, in order, unless
    /// an answer is an error or an abort (a driver's batch). A session may act on the
    /// promise: Cure ships a read followed by only updates and a commit as one message
    /// (`cure::session`). Drivers that cannot promise call `submit`.
    ///
    /// A session may also answer promised requests before they are submitted: in the
    /// turn that answers `request` (or, while `request` runs, the turn that answers it),
    /// every further [`Output::Reply`] answers the next request of `ahead`, in order, and
    /// the driver does not submit the requests so answered (Cure answers a read-then-
    /// commit's read, updates and commit in one turn when the commit's result came with
    /// the read). A driver of `submit_ahead` must take them so; `submit` answers one
    /// request per call, as before.
    ///
    /// And a session may take the next promised request without answering it yet: when
    /// it is [`ClientSession::running`] after a turn that answered every request it was
    /// given, it runs the next one of `ahead` (Cure ships a transaction's commit, or its
    /// read-then-commit, in the turn that answers its BEGIN and updates), and its next
    /// reply answers that request. A driver of `submit_ahead` submits nothing while the
    /// session is running.
    fn submit_ahead(&mut self, ctx: &mut Ctx<Self::Msg>, request: Request, _ahead: &[Request]) {
        self.submit(ctx, request)
    }
    /// Whether a request is running: one the driver submitted and the session has not
    /// answered, or one of `ahead` it took (`submit_ahead`).
    fn running(&self) -> bool {
        false
    }
    fn handle_message(&mut self, ctx: &mut Ctx<Self::Msg>, from: Addr, msg: Self::Msg);
    /// Called once the clock reached [`ClientSession::poll_timeout`].
    fn handle_timeout(&mut self, ctx: &mut Ctx<Self::Msg>);
    /// The next deadline (the running request's timeout), in the session's clock.
    fn poll_timeout(&self) -> Option<Nanos>;
    /// Node `node` restarted: what the session sent to its earlier incarnation is lost or
    /// was taken by a process that died, and no answer to it will come. A session whose
    /// running request waits on that node may end it now as its timeout would, with an
    /// `Unavailable` answer (the outcome is unknown), instead of waiting for the deadline.
    /// Drivers call it for every session once they learn of the restart (the runtime when
    /// its link to the node meets the new incarnation, the simulator when the node starts
    /// again). The default waits for the timeout.
    fn peer_restarted(&mut self, _ctx: &mut Ctx<Self::Msg>, _node: NodeId) {}
    fn check_invariants(&self) -> Result<(), String> {
        Ok(())
    }
    /// (write, the write it overwrote at the key's master) learned since the last call,
    /// for histories that carry the version order (Occult's PC-PSI check); most
    /// protocols have no master per key and report nothing.
    fn take_overwrites(&mut self) -> Vec<(OpId, Option<OpId>)> {
        Vec::new()
    }
    /// The driver needs the values its reads return but not the ids of the writes they
    /// observed ([`crate::ReadValue::observed`]): a session may then answer reads with
    /// `observed` empty and spare the nodes computing and shipping them (a hot set's read
    /// carries a tag per concurrent add). Drivers that keep a history for a checker, and
    /// the native client API, keep them; the RESP front end does not. Protocols that
    /// compute nothing extra for them ignore it.
    fn skip_observed(&mut self) {}
    /// Joins `other`'s causal past (what it committed and observed: Cure's `cvc`, PaRiS's
    /// `ust_c` and write cache, Occult's causal timestamp, ...) into this session's, with
    /// no wait: both sessions are of one DC, so the joined past is already visible here
    /// (UniStore Alg. 1 l.2-3 adopts a client's remote entries for that reason). Drivers
    /// call it on an idle session (no request running, no transaction open); a busy one
    /// ignores the call and answers false. A session scope shared by the connections of
    /// one endpoint is built from it. The default joins nothing: a protocol whose sessions
    /// keep no causal past (`eventual`) needs nothing.
    fn join_past(&mut self, _other: &Self) -> bool
    where
        Self: Sized,
    {
        true
    }
}
