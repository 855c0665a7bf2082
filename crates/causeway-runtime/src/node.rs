//! The node task: one tokio task owns the node's state machine and the client sessions
//! hosted on this process, feeds them their inputs (network messages, client requests,
//! timer expiries, durable lsns) and executes their outputs (sends, persists, timers,
//! replies). Nothing else touches the machines, so they need no locks.
//!
//! Time: `Ctx::clock` is the system clock in nanoseconds since the Unix epoch, made
//! monotonic per process; `Ctx::now` is the task's monotonic time. Both are read once per
//! turn of the loop ([`Reading`]). Timers are deadlines:
//! after every call into a machine the task asks it for `poll_timeout` and keeps at most
//! one wake-up per machine (node or hosted session), never later than that deadline; at
//! most `TIMERS_MAX` are armed. A deadline that goes away or moves later keeps the
//! wake-up it had (a request answered before its timeout, the next request's timeout):
//! that wake-up, once due, finds nothing or re-arms at the deadline then in force, so a
//! request costs two hash-map updates instead of a B-tree insertion and removal.
//! A wake-up that finds the node's clock still short of its deadline (the system clock
//! was set back) re-arms for the rest. tokio's timer wheel
//! has a 1 ms resolution, so a deadline less than `TIMER_SPIN_NS` away is waited for by
//! yielding to the scheduler (other inputs still run) instead of sleeping: a prepare that
//! waits 50 µs for `svc[d] <= Clock` is served after about that long, not after 1-2 ms.
//!
//! Turns: each input is a turn of its own (its clock reading, then the local messages it
//! caused, a due checkpoint, its samples). Peer messages and client batches already
//! waiting are taken up to `INPUTS_PER_SELECT_MAX` at a time without another pass through
//! the `select!`, whose earlier branches register their wakers again on every pass.
//!
//! Batches: a `Control::Submit` carries up to `BATCH_REQUESTS_MAX` requests of one
//! session; the task submits the next one as soon as the session answers the previous
//! one, stops after the first `Error` or `Aborted`, and answers the whole batch at once.
//!
//! Gauges: the task keeps the latest value of every sample the node machine reports
//! (`take_samples`, after every input) and every `GAUGES_INTERVAL` publishes them beside
//! the machine's `gauges()` on the [`SharedGauges`] board the gateway reads, for RESP
//! `INFO` (the naming rule is in [`crate::samples`]).
//!
//! Metrics ([`crate::telemetry`]): every sample also feeds its histogram, the machine's
//! gauges are exported at the same interval, and each hosted session's transaction is
//! timed from the submission of its `Begin` to its `Committed`, and counted by outcome.
//!
//! Records: the machine's `Persist` outputs are held and handed to the storage thread
//! when no input is ready (the end of a burst; at most `UNSENT_RECORDS_MAX` records or
//! `UNSENT_TURNS_MAX` turns later), so a burst of requests costs one wake-up of that
//! thread and one fdatasync instead of a sync for its first record and another for the
//! rest. Nothing waits on a record before it is durable, so holding it changes no outcome.
//! With `[storage] group_commit = "node"` the task appends and fsyncs the held records
//! itself at that point (Redis's event loop with `appendfsync always`): the persisted
//! event comes back through the same channel, so the rest of the task is the same. With
//! `"auto"` (the default) it does so while the disk is fast and the thread holds nothing,
//! and hands them to the thread otherwise ([`crate::storage::Shared`]).
//!
//! The task talks to the gateway only through [`crate::control`].

use crate::control::{session_host, stops, Control, SharedGauges, BATCH_REQUESTS_MAX};
use crate::samples::LatestSamples;
use crate::scope::Scopes;
use crate::storage::{DiskEvent, PersistReq, Shared, SharedDiskStats, Writer};
use crate::telemetry::{MachineMetrics, NodeMetrics, TxnMetrics};
use crate::transport::{InboxShare, Link, NetMsg};
use causeway_core::{
    Addr, Ctx, DcId, Error, Lsn, Nanos, NodeId, Output, Request, Response, SessionId, Topology,
    TrueTime, TxnKind,
};
use causeway_protocols::{new_session, BoxedNode, BoxedSession, Msg, Params};
use foldhash::fast::FixedState;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

/// Most timer deadlines armed at once on one node (node and hosted sessions together).
pub const TIMERS_MAX: usize = 1 << 20;
/// A deadline closer than this is awaited by yielding rather than sleeping (short, so the
/// spin costs little CPU; a farther one sleeps and may fire up to 1 ms late).
const TIMER_SPIN_NS: u64 = 250_000;
/// A timer firing this late is logged (the process did not get the CPU in time).
const TIMER_LATE_WARN: Duration = Duration::from_millis(100);
/// How often the node publishes its gauges to the gateway.
const GAUGES_INTERVAL: Duration = Duration::from_millis(500);
/// Most messages a machine may send to its own process while handling one input.
pub const LOCAL_QUEUE_MAX: usize = 1 << 20;
/// Most records the task holds back before handing them to the storage thread, and most
/// turns it holds the first of them: records are handed over when no input is ready
/// (the end of a burst), so that one wake-up of the storage thread finds the whole burst
/// and syncs it in one batch; these bound the wait when inputs never stop coming.
const UNSENT_RECORDS_MAX: usize = 256;
const UNSENT_TURNS_MAX: u32 = 64;
/// Most inputs of one kind (peer messages, or client batches) the task takes per pass
/// through its `select!` when they are already waiting; each is still a turn of its own.
/// It bounds how long the other inputs (disk, timers) wait behind a burst.
const INPUTS_PER_SELECT_MAX: usize = 16;

/// The records the task holds back from the storage thread until the end of a burst.
#[derive(Default)]
struct Held {
    records: Vec<PersistReq>,
    /// Turns of the loop ended since the first of them was held.
    turns: u32,
    /// Some of them were written in a turn that did not begin with a request of a client
    /// this node hosts (a peer's message, a timer, a durable batch).
    not_clients: bool,
}

impl Held {
    fn hold(&mut self, req: PersistReq, client_turn: bool) {
        self.records.push(req);
        self.not_clients |= !client_turn;
    }

    fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Ends a turn of the loop; true when the records must go now although inputs are
    /// still coming (`UNSENT_RECORDS_MAX` of them, or held for `UNSENT_TURNS_MAX` turns).
    fn turn_ended(&mut self) -> bool {
        if self.records.is_empty() {
            return false;
        }
        self.turns += 1;
        self.records.len() >= UNSENT_RECORDS_MAX || self.turns >= UNSENT_TURNS_MAX
    }

    /// The held records, in the order they were held.
    fn take(&mut self) -> Vec<PersistReq> {
        self.turns = 0;
        self.not_clients = false;
        std::mem::take(&mut self.records)
    }
}

/// Who appends and fsyncs the records the node task hands over (`[storage] group_commit`).
pub enum DiskPath {
    /// The storage thread, through the persist channel.
    Thread,
    /// The node task itself (`"node"`).
    Node(Box<Writer>),
    /// The node task while the disk is fast and the thread idle, else the thread (`"auto"`).
    Auto(Shared),
}

/// Which inputs [`NodeTask::more`] takes.
#[derive(Clone, Copy)]
enum Kind {
    Net,
    Control,
}

/// One input [`NodeTask::more`] took.
enum Input {
    Net(NetMsg),
    Control(Control),
}

/// A machine's wake-up and its deadline: the clock reading and the instant it maps to.
/// The wake-up is never later than the deadline; `None` when the deadline went away
/// after the wake-up was armed.
struct Armed {
    wake: Instant,
    deadline: Option<(Nanos, Instant)>,
}

/// The node task's timers: at most one wake-up per machine, never later than its
/// deadline. A deadline that goes away or moves later keeps the wake-up it had, which
/// once due finds nothing ([`Wakeups::pop_due`] drops it) or re-arms at the deadline then
/// in force: a request's timeout set and cleared costs two hash-map updates, not a
/// B-tree insertion and removal.
#[derive(Default)]
struct Wakeups {
    /// Ordered by time, and by machine.
    timers: BTreeSet<(Instant, Target)>,
    armed: HashMap<Target, Armed, FixedState>,
}

impl Wakeups {
    /// `target`'s deadline (a clock reading) is `deadline` already: nothing to do.
    fn unchanged(&self, target: Target, deadline: Option<Nanos>) -> bool {
        let armed = self.armed.get(&target);
        armed.and_then(|a| a.deadline.map(|(d, _)| d)) == deadline
    }

    /// Sets `target`'s deadline (`at`: the instant of clock reading `deadline`); false
    /// when it needs a new wake-up and `TIMERS_MAX` are armed.
    fn set(&mut self, target: Target, deadline: Option<(Nanos, Instant)>) -> bool {
        if let Some(a) = self.armed.get_mut(&target) {
            a.deadline = deadline;
            if let Some((_, at)) = deadline.filter(|(_, at)| *at < a.wake) {
                self.timers.remove(&(a.wake, target));
                a.wake = at;
                self.timers.insert((at, target));
            }
            return true;
        }
        let Some((_, at)) = deadline else {
            return true;
        };
        if self.timers.len() >= TIMERS_MAX {
            return false;
        }
        self.timers.insert((at, target));
        self.armed.insert(target, Armed { wake: at, deadline });
        true
    }

    /// The first wake-up.
    fn first(&self) -> Option<Instant> {
        self.timers.first().map(|(at, _)| *at)
    }

    /// Takes the next wake-up due at `now`: `Some(Some(target))` when its deadline is due
    /// too, `Some(None)` when it was early (re-armed at the deadline) or stale (dropped),
    /// `None` when nothing is due.
    fn pop_due(&mut self, now: Instant) -> Option<Option<Target>> {
        let (wake, target) = *self.timers.first().filter(|(wake, _)| *wake <= now)?;
        self.timers.pop_first();
        let armed = self.armed.get_mut(&target).expect("a wake-up is armed");
        assert!(armed.wake == wake, "one wake-up per machine");
        match armed.deadline {
            Some((_, at)) if at > now => {
                armed.wake = at;
                self.timers.insert((at, target));
                Some(None)
            }
            Some(_) => {
                self.armed.remove(&target);
                Some(Some(target))
            }
            None => {
                self.armed.remove(&target);
                Some(None)
            }
        }
    }

    /// Forgets `target`'s wake-up and deadline (a session closed).
    fn disarm(&mut self, target: Target) {
        if let Some(armed) = self.armed.remove(&target) {
            self.timers.remove(&(armed.wake, target));
        }
    }
}

/// Who a timer wakes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Target {
    Node,
    Session(SessionId),
}

struct Hosted {
    machine: BoxedSession,
    /// The scope it shares its past with (`crate::scope`), as its last batch said.
    scope: Option<Arc<str>>,
    /// The version of its scope's past it last took.
    seen: u64,
    running: Option<Batch>,
    /// When the open transaction's `Begin` was submitted, and its kind.
    began: Option<(Instant, &'static str)>,
}

/// Whether `request` runs outside a transaction, where a session takes its scope's past.
fn outside_txn(request: &Request) -> bool {
    matches!(
        request,
        Request::Begin { .. } | Request::Token | Request::Barrier | Request::Attach { .. }
    )
}

/// The `kind` label of a transaction.
fn kind_label(kind: &TxnKind) -> &'static str {
    match kind {
        TxnKind::Causal => "causal",
        TxnKind::Strong => "strong",
    }
}

/// A batch of requests running on one session.
struct Batch {
    /// Requests not submitted yet, in order.
    pending: VecDeque<Request>,
    /// Whether a submitted request awaits its answer; a reply without one answers the
    /// next of `pending`, which the session answered ahead (`submit_ahead`'s contract).
    submitted: bool,
    answers: Vec<Response>,
    reply: oneshot::Sender<Vec<Response>>,
}

/// What the node task needs to know about its place in the cluster.
pub struct NodeSetup {
    pub id: NodeId,
    pub dc: DcId,
    pub protocol: String,
    pub topology: Topology,
    pub params: Params,
    /// The protocol's config section (`[protocols.NAME]`).
    pub section: serde_json::Value,
}

/// The node's physical clock: system time in ns since the Unix epoch, never going back.
fn system_ns() -> Nanos {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as Nanos)
}

/// Both clocks, read once per turn of the node task's loop: every input handled in one
/// turn sees the same time, as if it had arrived at the turn's start (the system clock is
/// still monotonic per process, and a later turn reads it again). Two `clock_gettime`
/// calls per machine call were about 3% of a node's CPU under SET.
#[derive(Clone, Copy)]
struct Reading {
    at: Instant,
    system_ns: Nanos,
    /// `at` in nanoseconds since the task's base, the machines' `Ctx::now` (computed
    /// once per turn: a turn makes a context per machine call).
    since_base_ns: Nanos,
}

pub struct NodeTask {
    setup: NodeSetup,
    node: BoxedNode,
    sessions: HashMap<SessionId, Hosted, FixedState>,
    /// The pasts that sessions of one scope share.
    scopes: Scopes,
    links: HashMap<NodeId, Link>,
    /// Each link's `Link::restarts` when last looked at (`notice_restarts`).
    peer_restarts_seen: HashMap<NodeId, u64>,
    local: VecDeque<NetMsg>,
    /// At most one wake-up per machine, never later than its deadline.
    timers: Wakeups,
    base: Instant,
    last_clock: Nanos,
    /// The clocks read for this turn of the loop ([`NodeTask::reading`]).
    reading: Option<Reading>,
    persist: mpsc::Sender<PersistReq>,
    /// Who appends and fsyncs the records handed over at the end of each burst
    /// ([`NodeTask::hand_over`]).
    disk_path: DiskPath,
    /// Records not yet handed to the storage thread.
    unsent: Held,
    /// This turn began with a request of a client this node hosts ([`DiskPath::Auto`]).
    client_turn: bool,
    gauges: SharedGauges,
    samples: LatestSamples,
    gauges_at: Instant,
    txn_metrics: TxnMetrics,
    machine_metrics: MachineMetrics,
    disk_stats: SharedDiskStats,
    /// Set when the disk failed: the node refuses writes and persists nothing more.
    disk_failed: Option<String>,
    /// Records the machine asked to persist after the disk failed (never durable).
    records_refused: u64,
    /// Log compaction (see [`NodeTask::with_checkpoints`]).
    checkpoints: Checkpoints,
    /// The emptied output buffer of the last machine call, lent to the next context
    /// ([`NodeTask::ctx`], `Ctx::with_buffer`): one allocation fewer per call.
    spare_outputs: Vec<Output<Msg>>,
}

/// When and where the node task takes checkpoints.
#[derive(Debug, Default)]
struct Checkpoints {
    /// The log's lsn of the machine's lsn 0 (the records a snapshot replaced).
    lsn_offset: Lsn,
    /// The machine's last lsn handed to the storage thread.
    last_lsn: Lsn,
    /// Records between two checkpoints (`[storage] checkpoint_records`; 0: never).
    every_records: u64,
    records_since: u64,
    /// A checkpoint is due: the node's inputs pause until the machine is quiescent.
    draining_since: Option<Instant>,
}

/// The longest a node pauses its inputs waiting for a quiescent moment; past it the
/// checkpoint is put off for another `checkpoint_records` records.
const CHECKPOINT_DRAIN_MAX: Duration = Duration::from_millis(500);

/// The channels the node task reads.
pub struct Inputs {
    pub net: mpsc::Receiver<NetMsg>,
    pub control: mpsc::UnboundedReceiver<Control>,
    pub disk: mpsc::UnboundedReceiver<DiskEvent>,
    pub stop: watch::Receiver<bool>,
}

impl NodeTask {
    pub fn new(
        setup: NodeSetup,
        node: BoxedNode,
        links: HashMap<NodeId, Link>,
        persist: mpsc::Sender<PersistReq>,
        gauges: SharedGauges,
        metrics: &NodeMetrics,
    ) -> NodeTask {
        NodeTask {
            setup,
            node,
            sessions: HashMap::default(),
            scopes: Scopes::default(),
            links,
            peer_restarts_seen: HashMap::new(),
            local: VecDeque::new(),
            timers: Wakeups::default(),
            base: Instant::now(),
            last_clock: 0,
            reading: None,
            persist,
            disk_path: DiskPath::Thread,
            unsent: Held::default(),
            client_turn: false,
            gauges,
            samples: LatestSamples::default(),
            gauges_at: Instant::now(),
            txn_metrics: metrics.txn(),
            machine_metrics: metrics.machine(),
            disk_stats: SharedDiskStats::default(),
            disk_failed: None,
            records_refused: 0,
            checkpoints: Checkpoints::default(),
            spare_outputs: Vec::new(),
        }
    }

    /// Checkpoints every `every_records` records (0: never); `lsn_offset` maps the
    /// machine's lsns to the log's ([`crate::storage::Recovered::lsn_offset`]).
    pub fn with_checkpoints(mut self, lsn_offset: Lsn, every_records: u64) -> NodeTask {
        self.checkpoints.lsn_offset = lsn_offset;
        self.checkpoints.every_records = every_records;
        self
    }

    /// Who appends and fsyncs the node's records (`[storage] group_commit`).
    pub fn with_disk_path(mut self, disk_path: DiskPath) -> NodeTask {
        self.disk_path = disk_path;
        self
    }

    /// Where the storage thread publishes its counters (for the `disk_*` gauges).
    pub fn with_disk_stats(mut self, disk_stats: SharedDiskStats) -> NodeTask {
        self.disk_stats = disk_stats;
        self
    }

    /// Runs until `stop` turns true. A disk failure does not stop it: the node turns
    /// read-only (see [`NodeTask::disk_failed`]).
    pub async fn run(mut self, mut inputs: Inputs) -> Result<(), String> {
        let mut ctx = self.ctx();
        self.node.start(&mut ctx);
        self.node_outputs(ctx);
        let sleep = tokio::time::sleep_until(self.base);
        tokio::pin!(sleep);
        let mut armed_at: Option<Instant> = None;
        loop {
            // Read the clocks again on first use after this turn's input arrives.
            self.reading = None;
            self.client_turn = false;
            let deadline = self.timers.first();
            if deadline != armed_at {
                if let Some(at) = deadline {
                    sleep.as_mut().reset(at);
                }
                armed_at = deadline;
            }
            let near = deadline.is_some_and(|at| {
                at.saturating_duration_since(Instant::now()) < Duration::from_nanos(TIMER_SPIN_NS)
            });
            // While a checkpoint waits for a quiescent moment, only the disk is heard.
            let open = self.checkpoints.draining_since.is_none();
            tokio::select! {
                biased;
                _ = inputs.stop.changed() => {
                    if let DiskPath::Node(w) = std::mem::replace(&mut self.disk_path, DiskPath::Thread) {
                        let name = w.name().to_string();
                        crate::storage::report(&name, &w.finish());
                    }
                    return Ok(());
                }
                ev = inputs.disk.recv(), if self.disk_failed.is_none() => match ev {
                    Some(DiskEvent::Persisted(lsns)) => self.persisted(lsns),
                    Some(DiskEvent::Failed(e)) => self.disk_failed(e),
                    None => self.disk_failed("the storage thread stopped".into()),
                },
                // Lazy: the select evaluates a disabled branch's future too, and a sleep
                // reads the clock and builds a timer entry on every turn.
                _ = async { tokio::time::sleep(Duration::from_millis(5)).await }, if !open => {}
                _ = &mut sleep, if open && deadline.is_some() && !near => self.fire_timers(),
                _ = tokio::task::yield_now(), if open && near => self.fire_timers(),
                Some(c) = inputs.control.recv(), if open => {
                    self.client_turn = true;
                    self.control(c);
                    self.more(&mut inputs, Kind::Control).await;
                }
                Some(m) = inputs.net.recv(), if open => {
                    self.deliver(m);
                    self.more(&mut inputs, Kind::Net).await;
                }
                // Nothing else is ready: the burst ended.
                _ = std::future::ready(()), if !self.unsent.is_empty() => self.hand_over().await,
            }
            self.end_turn().await;
        }
    }

    /// What follows every input: the messages it sent to this process, a due checkpoint,
    /// its samples, and the held records if they waited long enough.
    async fn end_turn(&mut self) {
        self.drain_local();
        self.try_checkpoint().await;
        self.collect_samples();
        self.hand_over_if_held_long().await;
    }

    /// Whether the task may take another waiting input without going back through the
    /// `select!`: not while a checkpoint waits for a quiescent moment.
    fn takes_more(&self) -> bool {
        self.checkpoints.draining_since.is_none()
    }

    /// Inputs of `kind` already waiting, each its own turn, without another pass through
    /// the `select!` (whose earlier branches register their wakers again on every pass).
    async fn more(&mut self, inputs: &mut Inputs, kind: Kind) {
        for _ in 1..INPUTS_PER_SELECT_MAX {
            if !self.takes_more() {
                return;
            }
            let input = match kind {
                Kind::Net => inputs.net.try_recv().ok().map(Input::Net),
                Kind::Control => inputs.control.try_recv().ok().map(Input::Control),
            };
            let Some(input) = input else { return };
            self.end_turn().await; // the previous input's; the loop ends the last one's
            self.reading = None;
            self.client_turn = matches!(input, Input::Control(_));
            match input {
                Input::Net(m) => self.deliver(m),
                Input::Control(c) => self.control(c),
            }
        }
    }

    /// Hands the held records to the storage thread, in lsn order (or, with a writer of
    /// its own, appends and fsyncs them now).
    async fn hand_over(&mut self) {
        let batch = match &mut self.disk_path {
            DiskPath::Node(w) => return w.write_now(self.unsent.take()),
            // Only the records of the node's own clients' requests: those have nothing to
            // overlap with the fsync, and the hand-over costs them more than it saves.
            // A peer's message is one stage of a pipeline whose other stages go on while
            // this node fsyncs, and a timer's record (a clock lease) waits in no
            // client's path. With the timers' records inline too, the two-node INCR of
            // BENCHMARKS.md lost 8% (how the stalls added up to that is not pinned down).
            DiskPath::Auto(shared) if self.unsent.not_clients => {
                shared.hand_to_thread(self.unsent.take())
            }
            DiskPath::Auto(shared) => match shared.write_or_hand_back(self.unsent.take()) {
                Some(batch) => batch,
                None => return,
            },
            DiskPath::Thread => self.unsent.take(),
        };
        self.send_to_thread(batch).await;
    }

    /// Sends records to the storage thread, in lsn order.
    async fn send_to_thread(&mut self, batch: Vec<PersistReq>) {
        for req in batch {
            if self.persist.send(req).await.is_err() {
                self.disk_failed("the storage thread is gone".into());
                return;
            }
        }
    }

    /// Hands the held records over when they are many, or were held for many turns.
    async fn hand_over_if_held_long(&mut self) {
        if self.unsent.turn_ended() {
            self.hand_over().await;
        }
    }

    /// Keeps the latest value of every sample and publishes the gauges every
    /// `GAUGES_INTERVAL` (the machine buffers samples only until this call, so it runs
    /// after every input; publishing is rarer because it takes the board's lock).
    fn collect_samples(&mut self) {
        let samples = self.node.take_samples();
        crate::samples::log_events(&samples);
        self.machine_metrics.samples(&samples);
        self.samples.record(samples);
        // The turn's reading, not another clock read per input.
        let now = self.reading().at;
        if now.saturating_duration_since(self.gauges_at) < GAUGES_INTERVAL {
            return;
        }
        self.gauges_at = now;
        let gauges = self.node.gauges(self.last_clock);
        self.machine_metrics.gauges(&gauges);
        let mut board = self.samples.gauges(gauges);
        board.extend(self.disk_stats.read().gauges());
        board.push(("disk_records_refused".into(), self.records_refused as f64));
        self.gauges.publish(board);
    }

    /// This turn's clock readings, read on first use.
    fn reading(&mut self) -> Reading {
        let base = self.base;
        *self.reading.get_or_insert_with(|| {
            let at = Instant::now();
            Reading {
                at,
                system_ns: system_ns(),
                since_base_ns: at.saturating_duration_since(base).as_nanos() as Nanos,
            }
        })
    }

    fn ctx(&mut self) -> Ctx<Msg> {
        let reading = self.reading();
        self.last_clock = self.last_clock.max(reading.system_ns);
        let now = TrueTime(reading.since_base_ns);
        let spare = std::mem::take(&mut self.spare_outputs);
        Ctx::with_buffer(now, self.last_clock, spare)
    }

    /// Takes back a context's drained output buffer for the next call.
    fn recycle(&mut self, ctx: Ctx<Msg>) {
        self.spare_outputs = ctx.into_buffer();
    }

    /// The disk failed: nothing the machine persists from now on becomes durable, so
    /// nothing that waits for it is ever acknowledged; the node stays up for reads that
    /// need no new record, and refuses client writes with the reason ([`Self::submit`]).
    fn disk_failed(&mut self, e: String) {
        tracing::error!(
            node = self.setup.id.0,
            "disk failure: this node is now read-only (client writes are refused, reads are \
             served while they need no disk); fix the disk and restart the node: {e}"
        );
        self.disk_failed = Some(e);
    }

    /// A checkpoint is due and the machine is quiescent: hands it to the storage thread
    /// as the snapshot up to the last record (which the thread truncates), and resumes.
    async fn try_checkpoint(&mut self) {
        let Some(since) = self.checkpoints.draining_since else {
            return;
        };
        let Some(checkpoint) = self.node.checkpoint() else {
            if since.elapsed() > CHECKPOINT_DRAIN_MAX {
                tracing::warn!(
                    node = self.setup.id.0,
                    "no quiescent moment for a checkpoint within {CHECKPOINT_DRAIN_MAX:?}; put off"
                );
                self.checkpoints.draining_since = None;
                self.checkpoints.records_since = 0;
            }
            return;
        };
        self.checkpoints.draining_since = None;
        self.checkpoints.records_since = 0;
        self.machine_metrics
            .samples(&[("checkpoint_pause_ns", since.elapsed().as_nanos() as u64)]);
        if checkpoint.len() > causeway_storage::SNAPSHOT_LEN_MAX {
            tracing::warn!(
                node = self.setup.id.0,
                bytes = checkpoint.len(),
                "checkpoint larger than the snapshot limit; the log is not truncated"
            );
            return;
        }
        let upto = self.checkpoints.last_lsn + self.checkpoints.lsn_offset;
        let req = PersistReq::snapshot(upto, checkpoint);
        // The records it covers go first.
        self.hand_over().await;
        let batch = match &mut self.disk_path {
            DiskPath::Node(w) => return w.write_now(vec![req]),
            // A checkpoint is large and its truncation slow: the thread stores it.
            DiskPath::Auto(shared) => shared.hand_to_thread(vec![req]),
            DiskPath::Thread => vec![req],
        };
        self.send_to_thread(batch).await;
    }

    /// Counts a record handed to the storage thread; starts draining for a checkpoint
    /// once enough went by.
    fn count_record(&mut self, lsn: Lsn) {
        let c = &mut self.checkpoints;
        c.last_lsn = lsn;
        c.records_since += 1;
        let due = c.every_records > 0 && c.records_since >= c.every_records;
        if due && c.draining_since.is_none() && self.node.can_checkpoint() {
            c.draining_since = Some(Instant::now());
        }
    }

    /// A batch of records is durable. One log takes them in lsn order and a machine's
    /// `handle_persisted(lsn)` releases everything up to `lsn`, so one call with the
    /// batch's last lsn does what a call per record did, without a turn per record.
    fn persisted(&mut self, lsns: Vec<u64>) {
        let Some(&last) = lsns.last() else {
            return;
        };
        assert!(
            lsns.windows(2).all(|w| w[0] < w[1]),
            "a durable batch's lsns ascend"
        );
        let mut ctx = self.ctx();
        let lsn = last - self.checkpoints.lsn_offset;
        self.node.handle_persisted(&mut ctx, lsn);
        self.node_outputs(ctx);
    }

    /// Tells every hosted session of each peer that came back as a new incarnation since
    /// the last look (`ClientSession::peer_restarted`): a request waiting on it ends now
    /// instead of at its timeout (10 s by default). Looked at with the timers, which the
    /// protocols' periodic work fires every few milliseconds.
    fn notice_restarts(&mut self) {
        let mut restarted = Vec::new();
        for (peer, link) in &self.links {
            let now = link.restarts();
            let seen = self.peer_restarts_seen.entry(*peer).or_insert(0);
            if now != *seen {
                *seen = now;
                restarted.push(*peer);
            }
        }
        for peer in restarted {
            let running: Vec<SessionId> = self
                .sessions
                .iter()
                .filter(|(_, h)| h.machine.running())
                .map(|(s, _)| *s)
                .collect();
            for s in running {
                let mut ctx = self.ctx();
                if let Some(h) = self.sessions.get_mut(&s) {
                    h.machine.peer_restarted(&mut ctx, peer);
                }
                self.session_ran(s, ctx);
            }
        }
    }

    fn fire_timers(&mut self) {
        self.notice_restarts();
        let now = self.reading().at;
        if let Some(first) = self.timers.first() {
            let late = now.saturating_duration_since(first);
            if late >= TIMER_LATE_WARN {
                let ms = late.as_millis() as u64;
                tracing::warn!(ms, "a timer fired late: the node task was starved of CPU");
            }
        }
        let mut due = BTreeSet::new();
        while let Some(woken) = self.timers.pop_due(now) {
            due.extend(woken);
        }
        for target in due {
            let mut ctx = self.ctx();
            match target {
                Target::Node => {
                    // A clock set back may wake us early: rearm for the rest.
                    if self.node.poll_timeout().is_some_and(|d| d <= ctx.clock) {
                        self.node.handle_timeout(&mut ctx);
                    }
                    self.node_outputs(ctx);
                }
                Target::Session(s) => {
                    if let Some(h) = self.sessions.get_mut(&s) {
                        h.machine.handle_timeout(&mut ctx);
                        self.session_ran(s, ctx);
                    }
                }
            }
        }
    }

    fn control(&mut self, control: Control) {
        match control {
            Control::Submit {
                session,
                requests,
                reply,
                observed,
                scope,
            } => self.submit(session, requests, reply, (observed, scope)),
            Control::Close { session } => {
                self.sessions.remove(&session);
                self.timers.disarm(Target::Session(session));
            }
        }
    }

    fn submit(
        &mut self,
        session: SessionId,
        requests: Vec<Request>,
        reply: oneshot::Sender<Vec<Response>>,
        (observed, scope): (bool, Option<Arc<str>>),
    ) {
        let answer = |e: Error| vec![Response::Error(e)];
        if requests.is_empty() || requests.len() > BATCH_REQUESTS_MAX {
            let why = format!("a batch holds 1 to {BATCH_REQUESTS_MAX} requests");
            let _ = reply.send(answer(Error::InvalidState(why)));
            return;
        }
        if let Err(e) = self.host(session, observed) {
            let _ = reply.send(answer(Error::Unavailable(e)));
            return;
        }
        if let Some(e) = self.refuses_writes(&requests) {
            let _ = reply.send(answer(e));
            return;
        }
        let hosted = self.sessions.get_mut(&session).expect("hosted above");
        if hosted.running.is_some() {
            let why = "a request is already running on this session".to_string();
            let _ = reply.send(answer(Error::InvalidState(why)));
            return;
        }
        hosted.scope = scope;
        hosted.running = Some(Batch {
            answers: Vec::with_capacity(requests.len()),
            pending: requests.into(),
            submitted: false,
            reply,
        });
        self.next_request(session);
    }

    /// After a disk failure, the error for a batch that writes (an update, or a strong
    /// transaction, which must persist its certification).
    fn refuses_writes(&self, requests: &[Request]) -> Option<Error> {
        let failure = self.disk_failed.as_ref()?;
        let writes = requests.iter().any(|r| {
            matches!(
                r,
                Request::Update { .. }
                    | Request::Begin {
                        kind: TxnKind::Strong,
                        ..
                    }
            )
        });
        writes.then(|| {
            Error::Unavailable(format!(
                "this node is read-only after a disk failure ({failure}); writes are refused, \
                 reads are served where they need no disk"
            ))
        })
    }

    /// Creates the session's machine on its first request.
    fn host(&mut self, session: SessionId, observed: bool) -> Result<(), String> {
        if self.sessions.contains_key(&session) {
            return Ok(());
        }
        let s = &self.setup;
        let (topo, params, section) = (&s.topology, &s.params, &s.section);
        let mut machine = new_session(&s.protocol, session, s.dc, topo, params, section)?;
        if !observed {
            machine.skip_observed();
        }
        let hosted = Hosted {
            machine,
            scope: None,
            seen: 0,
            running: None,
            began: None,
        };
        self.sessions.insert(session, hosted);
        Ok(())
    }

    /// Submits the session's next batched request, and the next after it for as long as
    /// the session answers at once (buffered updates do).
    fn next_request(&mut self, session: SessionId) {
        loop {
            let mut ctx = self.ctx();
            let Some(hosted) = self.sessions.get_mut(&session) else {
                return;
            };
            let Some(batch) = hosted.running.as_mut() else {
                return;
            };
            if hosted.machine.running() {
                return; // it took the next request ahead: its answer comes with a message
            }
            let Some(request) = batch.pending.pop_front() else {
                return;
            };
            batch.submitted = true;
            if let Request::Begin { kind, .. } = &request {
                hosted.began = Some((self.reading.expect("read by ctx").at, kind_label(kind)));
            }
            if let Some(scope) = hosted.scope.as_deref().filter(|_| outside_txn(&request)) {
                self.scopes
                    .take(scope, &mut hosted.machine, &mut hosted.seen);
            }
            // The rest of the batch follows unless an answer stops it (`answered`).
            let ahead = batch.pending.make_contiguous();
            hosted.machine.submit_ahead(&mut ctx, request, ahead);
            if !self.session_outputs(session, ctx) {
                return;
            }
        }
    }

    fn deliver(&mut self, m: NetMsg) {
        let mut ctx = self.ctx();
        match m.to {
            Addr::Node(n) if n == self.setup.id => {
                if let Err(e) = self.node.handle_message(&mut ctx, m.from, m.msg) {
                    tracing::error!(from = ?m.from, "dropping a message: {e}");
                }
                self.node_outputs(ctx);
            }
            Addr::Node(n) => tracing::warn!(to = n.0, "dropping a message meant for another node"),
            Addr::Client(s) => {
                if let Some(h) = self.sessions.get_mut(&s) {
                    if let Err(e) = h.machine.handle_message(&mut ctx, m.from, m.msg) {
                        tracing::error!(session = s.0, "dropping a message: {e}");
                    }
                    self.session_ran(s, ctx);
                }
            }
        }
    }

    fn drain_local(&mut self) {
        while let Some(m) = self.local.pop_front() {
            self.deliver(m);
        }
    }

    fn node_outputs(&mut self, mut ctx: Ctx<Msg>) {
        let deadline = self.node.poll_timeout();
        self.rearm(Target::Node, deadline, ctx.clock);
        let from = Addr::Node(self.setup.id);
        for out in ctx.drain() {
            match out {
                Output::Send { to, msg } => self.route(from, to, msg),
                Output::Persist { lsn, record } => {
                    if self.disk_failed.is_some() {
                        self.records_refused += 1;
                    } else {
                        self.count_record(lsn);
                        let log_lsn = lsn + self.checkpoints.lsn_offset;
                        let req = PersistReq::record(log_lsn, record);
                        self.unsent.hold(req, self.client_turn);
                    }
                }
                Output::Reply(_) => {
                    tracing::error!("the node machine emitted a client reply; ignored")
                }
            }
        }
        self.recycle(ctx);
    }

    /// Executes a session's outputs after a message or timer; a reply may let its batch
    /// go on.
    fn session_ran(&mut self, session: SessionId, ctx: Ctx<Msg>) {
        if self.session_outputs(session, ctx) {
            self.next_request(session);
        }
    }

    /// Executes a session's outputs; true when it answered and its batch goes on.
    fn session_outputs(&mut self, session: SessionId, mut ctx: Ctx<Msg>) -> bool {
        let deadline = self
            .sessions
            .get(&session)
            .and_then(|h| h.machine.poll_timeout());
        self.rearm(Target::Session(session), deadline, ctx.clock);
        let from = Addr::Client(session);
        let mut go_on = false;
        for out in ctx.drain() {
            match out {
                Output::Send { to, msg } => self.route(from, to, msg),
                Output::Reply(resp) => go_on = self.answered(session, resp),
                Output::Persist { .. } => {
                    tracing::error!("a client session asked to persist; ignored")
                }
            }
        }
        self.recycle(ctx);
        go_on
    }

    /// Records a session's answer; replies to the gateway once the batch is done. True
    /// when more requests of the batch are waiting.
    fn answered(&mut self, session: SessionId, resp: Response) -> bool {
        let Some(hosted) = self.sessions.get_mut(&session) else {
            return false;
        };
        let Some(batch) = hosted.running.as_mut() else {
            tracing::warn!(
                session = session.0,
                "a session replied with no request running"
            );
            return false;
        };
        match &resp {
            Response::Committed => {
                let began = hosted.began.take();
                let kind = began.map_or("unknown", |(_, kind)| kind);
                let now = self.reading.map_or_else(Instant::now, |r| r.at);
                let took = began.map(|(at, _)| now.saturating_duration_since(at));
                self.txn_metrics.committed(kind, took);
            }
            Response::Aborted { reason } => {
                hosted.began = None;
                self.txn_metrics.aborted(reason);
            }
            _ => {}
        }
        if !std::mem::take(&mut batch.submitted) && batch.pending.pop_front().is_none() {
            tracing::warn!(
                session = session.0,
                "a session answered a request never sent"
            );
            return false;
        }
        let stop = stops(&resp);
        batch.answers.push(resp);
        if !stop && !batch.pending.is_empty() {
            return true;
        }
        let batch = hosted.running.take().expect("checked above");
        if let Some(scope) = &hosted.scope {
            // Before the answer leaves: a connection that learns of it and opens a
            // transaction on another session of the scope must find this past there.
            let s = &self.setup;
            let make = || {
                new_session(
                    &s.protocol,
                    SessionId(0),
                    s.dc,
                    &s.topology,
                    &s.params,
                    &s.section,
                )
            };
            if let Err(e) = self.scopes.give(scope, &hosted.machine, make) {
                tracing::warn!(scope = %scope, "a session's past is not shared: {e}");
            }
        }
        let _ = batch.reply.send(batch.answers);
        false
    }

    fn route(&mut self, from: Addr, to: Addr, msg: Msg) {
        let host = match to {
            Addr::Node(n) => Some(n),
            Addr::Client(s) => session_host(s),
        };
        match host {
            Some(h) if h == self.setup.id => {
                assert!(
                    self.local.len() < LOCAL_QUEUE_MAX,
                    "a machine keeps messaging itself"
                );
                self.local.push_back(NetMsg {
                    from,
                    to,
                    msg,
                    held: InboxShare::default(),
                });
            }
            Some(h) => match self.links.get(&h) {
                Some(link) => link.push(from, to, msg),
                None => tracing::warn!(node = h.0, "no link to node: message dropped"),
            },
            None => tracing::warn!(?to, "no route to address: message dropped"),
        }
    }

    /// Keeps a wake-up for `target` no later than its machine's `deadline` (a clock
    /// reading, converted with the reading `clock` taken for the call that produced it).
    /// An unchanged deadline costs one lookup (most calls: a replication tick).
    fn rearm(&mut self, target: Target, deadline: Option<Nanos>, clock: Nanos) {
        if self.timers.unchanged(target, deadline) {
            return;
        }
        let deadline = deadline.map(|d| {
            let at = self.reading().at + Duration::from_nanos(d.saturating_sub(clock));
            (d, at)
        });
        if !self.timers.set(target, deadline) {
            tracing::error!("{TIMERS_MAX} timers armed: dropping a timer request");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lsns(records: Vec<PersistReq>) -> Vec<Lsn> {
        records.into_iter().map(|r| r.lsn).collect()
    }

    /// Every wake-up due at `now`, and the machines due with them.
    fn due(w: &mut Wakeups, now: Instant) -> (usize, Vec<Target>) {
        let (mut woken, mut due) = (0, Vec::new());
        while let Some(d) = w.pop_due(now) {
            woken += 1;
            due.extend(d);
        }
        (woken, due)
    }

    #[test]
    fn a_cleared_deadline_leaves_a_wake_up_that_finds_nothing_and_goes() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let s = Target::Session(SessionId(7));
        let mut w = Wakeups::default();
        assert!(w.set(s, Some((10, ms(10)))));
        assert!(w.unchanged(s, Some(10)) && !w.unchanged(s, None));
        assert!(w.set(s, None));
        assert!(w.unchanged(s, None), "the deadline is gone");
        assert_eq!(w.first(), Some(ms(10)), "its wake-up stays");
        assert_eq!(due(&mut w, ms(9)), (0, vec![]));
        assert_eq!(due(&mut w, ms(10)), (1, vec![]), "woken for nothing");
        assert_eq!(w.first(), None);
        assert!(w.armed.is_empty());
    }

    #[test]
    fn a_later_deadline_keeps_the_wake_up_which_re_arms_and_an_earlier_one_moves_it() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let (a, b) = (Target::Session(SessionId(1)), Target::Node);
        let mut w = Wakeups::default();
        w.set(a, Some((10, ms(10))));
        w.set(a, Some((30, ms(30))));
        assert_eq!(w.first(), Some(ms(10)), "still the earlier wake-up");
        assert_eq!(due(&mut w, ms(12)), (1, vec![]), "early: re-armed at 30");
        assert_eq!(w.first(), Some(ms(30)));
        w.set(b, Some((20, ms(20))));
        w.set(b, Some((15, ms(15))));
        assert_eq!(w.timers.len(), 2, "one wake-up per machine");
        assert_eq!(w.first(), Some(ms(15)), "moved earlier");
        assert_eq!(due(&mut w, ms(30)), (2, vec![b, a]));
        assert_eq!(w.first(), None);
    }

    #[test]
    fn a_disarmed_machine_has_no_wake_up_and_the_limit_holds() {
        let t0 = Instant::now();
        let s = Target::Session(SessionId(3));
        let mut w = Wakeups::default();
        w.set(s, Some((5, t0)));
        w.disarm(s);
        assert_eq!((w.first(), w.armed.len()), (None, 0));
        assert_eq!(due(&mut w, t0 + Duration::from_secs(1)), (0, vec![]));
        for i in 0..TIMERS_MAX as u64 {
            w.timers.insert((t0, Target::Session(SessionId(1_000 + i))));
        }
        assert!(!w.set(s, Some((5, t0))), "refused at TIMERS_MAX");
        assert!(w.set(s, None), "nothing to arm");
    }

    #[test]
    fn held_records_wait_for_the_burst_to_end_but_at_most_the_turn_limit() {
        let mut held = Held::default();
        assert!(!held.turn_ended(), "nothing held, nothing to hand over");
        held.hold(PersistReq::record(1, vec![1]), true);
        assert!(!held.not_clients);
        held.hold(PersistReq::record(2, vec![2]), false);
        held.hold(PersistReq::record(3, vec![3]), true);
        assert!(
            held.not_clients,
            "one record of another turn marks the burst"
        );
        assert_eq!(lsns(held.take()), vec![1, 2, 3]);
        assert!(!held.not_clients, "the mark goes with the records");
        held.hold(PersistReq::record(1, vec![1]), false);
        held.hold(PersistReq::record(2, vec![2]), false);
        for turn in 1..UNSENT_TURNS_MAX {
            assert!(!held.turn_ended(), "handed over after only {turn} turns");
        }
        assert!(held.turn_ended(), "held past the turn limit");
        assert_eq!(lsns(held.take()), vec![1, 2]);
        assert!(held.is_empty());
        held.hold(PersistReq::record(3, vec![3]), false);
        assert!(
            !held.turn_ended(),
            "the turn count starts again after a hand-over"
        );
    }

    #[test]
    fn held_records_go_at_once_when_they_reach_the_record_limit() {
        let mut held = Held::default();
        for lsn in 1..UNSENT_RECORDS_MAX as Lsn {
            held.hold(PersistReq::record(lsn, Vec::new()), false);
        }
        assert!(!held.turn_ended());
        held.hold(
            PersistReq::record(UNSENT_RECORDS_MAX as Lsn, Vec::new()),
            false,
        );
        assert!(held.turn_ended(), "the record limit forces a hand-over");
        let taken = lsns(held.take());
        assert_eq!(taken.len(), UNSENT_RECORDS_MAX);
        assert!(taken.windows(2).all(|w| w[0] < w[1]), "lsn order kept");
    }
}
