//! Times a protocol's machines alone on single-key RESP-shaped transactions: one server
//! node and `SESSIONS` client sessions in one process, driven as the runtime's node task
//! drives them (local messages delivered in order, a batch's next request submitted when
//! the session answers), with no sockets, no storage thread and no tokio. A round submits
//! one transaction per session, the clock advancing `ROUND_NS / SESSIONS` before each,
//! then makes every record of the round durable at once (a group commit of up to
//! `SESSIONS` records).
//!
//! With `DCS` above 1 (one node per DC, the sessions at DC 1), every DC's node runs in
//! the same process: messages between DCs arrive `WAN_ONE_WAY_NS` later on the clock (the
//! round trips of `causeway up --dcs 3` are 76-145 ms), each node's records become
//! durable with the round's group commit, and the table gives each node's CPU per
//! transaction: DC 1's (its sessions included, as its node task hosts them) and the
//! replicas'.
//!
//! The driver speaks the Cure family's conversation (cure, cureft, unistore); the other
//! protocols answer some requests in ways it does not model, and are refused.
//!
//! What it measures is the CPU the protocol itself costs per command, apart from the
//! kernel's loopback and the runtime's glue, which `perf` on a live node cannot separate
//! from this machine's noise. Not a test: run it in release and compare builds side by
//! side (BENCHMARKS.md, issue 14),
//!
//!     [MT_PARTITIONS=N] cargo run --release -p causeway-bench --example machine_txn [-- PROTOCOL [COMMAND [DCS [ROUNDS]]]]
//!
//! (COMMAND `all` runs them all: `set`, `get`, `incr`, `sadd`, `mset4` (an `MSET` of 4
//! keys), and `set16`, `incr16`, `sadd16`, a pipelined group of 16 of them in one txn,
//! batched as the RESP front end batches it (`batches`); fewer ROUNDS for `valgrind
//! --tool=callgrind`, whose instruction counts do not move with the machine as its
//! timings do.)

use causeway_core::crdt::{ObjType, Update};
use causeway_core::{
    Addr, Ctx, DcId, Key, Lsn, NodeId, Output, Request, Response, SessionId, Topology, TrueTime,
    TxnKind,
};
use causeway_protocols::{new_node, new_session, BoxedNode, BoxedSession, Msg, NodeConfig, Params};
use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

/// The protocols whose conversation the driver models.
const CURE_FAMILY: [&str; 3] = ["cure", "cureft", "unistore"];
/// Client sessions, each with one transaction in flight (redis-benchmark's `-c 50`).
const SESSIONS: u64 = 50;
/// Rounds timed per command (after as many untimed ones), unless given.
const ROUNDS: u64 = 4_000;
/// Rounds given at most.
const ROUNDS_MAX: u64 = 1_000_000;
/// Clock advance per round (one transaction per session): 50k transactions per second.
const ROUND_NS: u64 = 1_000_000;
/// A message's delay between two DCs: half the 88 ms round trip of DC 1 and DC 2 in
/// `causeway up`'s default matrix (PaRiS Fig. 1).
const WAN_ONE_WAY_NS: u64 = 44_000_000;
/// DCs driven at most.
const DCS_MAX: u16 = 5;
/// Partitions given at most (`MT_PARTITIONS`).
const PARTITIONS_MAX: u32 = 64;

/// The node's partitions: `MT_PARTITIONS` (default 1; `causeway up` has 4 per node, over
/// which an `mset4`'s keys spread).
fn partitions() -> u32 {
    match std::env::var("MT_PARTITIONS").map(|p| p.parse()) {
        Err(_) => 1,
        Ok(Ok(p)) if (1..=PARTITIONS_MAX).contains(&p) => p,
        Ok(_) => {
            eprintln!("MT_PARTITIONS is 1 to {PARTITIONS_MAX}");
            std::process::exit(2);
        }
    }
}

/// One command as the RESP front end batches it: the batches it sends the session in turn
/// (the second, when there is one, after the first is answered).
fn batches(command: &str, key: &Key) -> (Vec<Request>, Vec<Request>) {
    let begin = Request::Begin {
        kind: TxnKind::Causal,
        label: None,
    };
    let update = |update| Request::Update {
        key: key.clone(),
        update,
    };
    let read = |ty| Request::Read {
        keys: vec![(key.clone(), ty)],
    };
    let one = |requests: Vec<Request>| (requests, Vec::new());
    let incr = || update(Update::Increment(1));
    let add = || update(Update::Add(b"element".to_vec()));
    match command {
        "set" => one(vec![
            begin,
            update(Update::Assign(b"xxx".to_vec())),
            Request::Commit,
        ]),
        "get" => one(vec![begin, read(ObjType::Lww), Request::Commit]),
        "incr" => one(vec![begin, read(ObjType::Counter), incr(), Request::Commit]),
        "sadd" => one(vec![begin, read(ObjType::Set), add(), Request::Commit]),
        // A pipelined group of 16 commands (`redis-benchmark -P 16`) is one transaction
        // (`Conn::run_pipelined`): assignments are queued and leave with the commit; the
        // first command that reads sends its read (with a set add: `read_then`), the
        // later ones read what the transaction saw (`Tx::seen`) and queue their updates,
        // a re-add of a member the transaction added is dropped (`Tx::update`).
        "set16" => {
            let mut all = vec![begin];
            all.extend((0..16).map(|_| update(Update::Assign(b"xxx".to_vec()))));
            all.push(Request::Commit);
            one(all)
        }
        "incr16" => {
            let mut commit: Vec<Request> = (0..16).map(|_| incr()).collect();
            commit.push(Request::Commit);
            (vec![begin, read(ObjType::Counter)], commit)
        }
        "sadd16" => (
            vec![begin, read(ObjType::Set), add()],
            vec![Request::Commit],
        ),
        // `MSET` of 4 keys, named after the session's key (so over several partitions).
        "mset4" => {
            let mut all = vec![begin];
            all.extend((0..4u8).map(|i| {
                let mut name = key.0.clone();
                name.extend_from_slice(&[b':', b'a' + i]);
                Request::Update {
                    key: Key(name),
                    update: Update::Assign(b"xxx".to_vec()),
                }
            }));
            all.push(Request::Commit);
            one(all)
        }
        other => panic!("unknown command {other}"),
    }
}

struct Hosted {
    machine: BoxedSession,
    pending: VecDeque<Request>,
    /// The next batch, sent once `pending` is answered.
    later: Vec<Request>,
    /// A batch is running: its last answer has not come.
    running: bool,
    /// A submitted request awaits its answer; a reply without one answers the next of
    /// `pending`, which the session answered ahead (`submit_ahead`).
    submitted: bool,
}

/// A message on its way: from, to, what.
type Envelope = (Addr, Addr, Msg);

/// The node tasks' routing and batching, without IO: one node per DC.
struct Driver {
    topology: Topology,
    nodes: Vec<BoxedNode>,
    sessions: Vec<Hosted>,
    local: VecDeque<Envelope>,
    /// Messages between DCs by (due clock, sequence).
    wan: BTreeMap<(u64, u64), Envelope>,
    sent: u64,
    /// Per node, the lsns of the records it persisted this round.
    durable: Vec<Vec<Lsn>>,
    /// Per node, the time spent in its machine calls; node 0's includes the sessions'.
    busy_ns: Vec<u64>,
    clock: u64,
    committed: u64,
    failed: u64,
    /// The last call's drained output buffer, lent to the next context as the node task
    /// lends it (`NodeTask::ctx`).
    spare: Vec<Output<Msg>>,
}

impl Driver {
    fn new(protocol: &str, dcs: u16) -> Driver {
        let topology = Topology::full(dcs, 1, partitions());
        let clock = 1_000_000_000;
        let mut nodes = Vec::new();
        let mut started = Vec::new();
        for n in 0..u32::from(dcs) {
            let config = NodeConfig::new(NodeId(n), topology.clone(), Params::default());
            let mut node = new_node(protocol, config, &[]).expect("the protocol builds a node");
            let mut ctx = Ctx::new(TrueTime(clock), clock);
            node.start(&mut ctx);
            nodes.push(node);
            started.push(ctx);
        }
        let sessions = (1..=SESSIONS)
            .map(|id| Hosted {
                machine: new_session(
                    protocol,
                    SessionId(id),
                    DcId(0),
                    &topology,
                    &Params::default(),
                    &serde_json::Value::Null,
                )
                .expect("the protocol builds a session"),
                pending: VecDeque::new(),
                later: Vec::new(),
                running: false,
                submitted: false,
            })
            .collect();
        let mut driver = Driver {
            topology,
            nodes,
            sessions,
            local: VecDeque::new(),
            wan: BTreeMap::new(),
            sent: 0,
            durable: vec![Vec::new(); usize::from(dcs)],
            busy_ns: vec![0; usize::from(dcs)],
            clock,
            committed: 0,
            failed: 0,
            spare: Vec::new(),
        };
        for (n, ctx) in started.into_iter().enumerate() {
            driver.node_outputs(n, ctx);
        }
        driver
    }

    fn ctx(&mut self) -> Ctx<Msg> {
        let spare = std::mem::take(&mut self.spare);
        Ctx::with_buffer(TrueTime(self.clock), self.clock, spare)
    }

    /// Routes node `n`'s outputs: to its own DC at once, to another after the WAN delay.
    fn node_outputs(&mut self, n: usize, mut ctx: Ctx<Msg>) {
        let from = NodeId(n as u32);
        for out in ctx.drain() {
            match out {
                Output::Send { to, msg } => self.route(Addr::Node(from), to, msg),
                Output::Persist { lsn, .. } => self.durable[n].push(lsn),
                Output::Reply(_) => panic!("a node replied to a client"),
            }
        }
        self.spare = ctx.into_buffer();
    }

    fn route(&mut self, from: Addr, to: Addr, msg: Msg) {
        let dc = |a: Addr| match a {
            Addr::Node(n) => self.topology.dc_of(n),
            Addr::Client(_) => DcId(0),
        };
        if dc(from) == dc(to) {
            self.local.push_back((from, to, msg));
        } else {
            self.sent += 1;
            let due = self.clock + WAN_ONE_WAY_NS;
            self.wan.insert((due, self.sent), (from, to, msg));
        }
    }

    /// Runs a session's outputs; submits its next request while it answers at once.
    fn session_outputs(&mut self, s: usize, mut ctx: Ctx<Msg>) {
        let from = Addr::Client(SessionId(s as u64 + 1));
        let mut answered = false;
        for out in ctx.drain() {
            match out {
                Output::Send { to, msg } => self.route(from, to, msg),
                Output::Reply(resp) => answered |= self.answered(s, resp),
                Output::Persist { .. } => panic!("a session persisted"),
            }
        }
        self.spare = ctx.into_buffer();
        if answered {
            self.next_request(s);
        }
    }
    /// Counts an answer; true when the batch goes on.
    fn answered(&mut self, s: usize, resp: Response) -> bool {
        let hosted = &mut self.sessions[s];
        if !std::mem::take(&mut hosted.submitted) {
            hosted
                .pending
                .pop_front()
                .expect("answered ahead of a promised request");
        }
        match resp {
            Response::Committed => self.committed += 1,
            Response::Error(_) | Response::Aborted { .. } => {
                if self.failed == 0 {
                    eprintln!("first failure: {resp:?}");
                }
                self.failed += 1;
                self.sessions[s].pending.clear();
                self.sessions[s].later.clear();
            }
            _ => {}
        }
        let goes_on = !self.sessions[s].pending.is_empty() || !self.sessions[s].later.is_empty();
        self.sessions[s].running = goes_on;
        goes_on
    }

    fn next_request(&mut self, s: usize) {
        let hosted = &mut self.sessions[s];
        if hosted.machine.running() {
            return; // it took the next request ahead (`ClientSession::running`)
        }
        if hosted.pending.is_empty() {
            hosted.pending = std::mem::take(&mut hosted.later).into();
        }
        let Some(request) = self.sessions[s].pending.pop_front() else {
            return;
        };
        let mut ctx = self.ctx();
        let began = Instant::now();
        let hosted = &mut self.sessions[s];
        hosted.submitted = true;
        let ahead = hosted.pending.make_contiguous();
        hosted.machine.submit_ahead(&mut ctx, request, ahead);
        self.busy_ns[0] += began.elapsed().as_nanos() as u64;
        self.session_outputs(s, ctx);
    }

    fn deliver_all(&mut self) {
        while let Some((from, to, msg)) = self.local.pop_front() {
            let mut ctx = self.ctx();
            let began = Instant::now();
            match to {
                Addr::Node(n) => {
                    let n = n.0 as usize;
                    self.nodes[n]
                        .handle_message(&mut ctx, from, msg)
                        .expect("a Cure message");
                    self.busy_ns[n] += began.elapsed().as_nanos() as u64;
                    self.node_outputs(n, ctx);
                }
                Addr::Client(id) => {
                    let s = (id.0 - 1) as usize;
                    let m = &mut self.sessions[s].machine;
                    m.handle_message(&mut ctx, from, msg)
                        .expect("a Cure message");
                    self.busy_ns[0] += began.elapsed().as_nanos() as u64;
                    self.session_outputs(s, ctx);
                }
            }
        }
    }

    /// One transaction per session, each after a tick of the clock (a machine waiting
    /// for `Clock > t` sees it move, as on a live node), then a group commit per node.
    fn round(&mut self, command: &str, key: &Key) {
        for s in 0..self.sessions.len() {
            self.tick(ROUND_NS / SESSIONS);
            if self.sessions[s].running {
                continue; // still waiting
            }
            self.sessions[s].running = true;
            let (first, later) = batches(command, key);
            self.sessions[s].pending = first.into();
            self.sessions[s].later = later;
            self.next_request(s);
            self.deliver_all();
        }
        for n in 0..self.nodes.len() {
            for lsn in std::mem::take(&mut self.durable[n]) {
                let mut ctx = self.ctx();
                let began = Instant::now();
                self.nodes[n].handle_persisted(&mut ctx, lsn);
                self.busy_ns[n] += began.elapsed().as_nanos() as u64;
                self.node_outputs(n, ctx);
                self.deliver_all();
            }
        }
    }

    /// Advances the clock, runs the timers that fell due and delivers the messages
    /// between DCs that arrived.
    fn tick(&mut self, step_ns: u64) {
        self.clock += step_ns;
        for n in 0..self.nodes.len() {
            if self.nodes[n]
                .poll_timeout()
                .is_some_and(|d| d <= self.clock)
            {
                let mut ctx = self.ctx();
                let began = Instant::now();
                self.nodes[n].handle_timeout(&mut ctx);
                self.busy_ns[n] += began.elapsed().as_nanos() as u64;
                self.node_outputs(n, ctx);
                self.deliver_all();
            }
        }
        while let Some(entry) = self.wan.first_entry() {
            if entry.key().0 > self.clock {
                break;
            }
            self.local.push_back(entry.remove());
        }
        self.deliver_all();
    }
}

/// Runs one command: `ROUNDS` untimed, then `ROUNDS` timed; prints its table row.
fn run(protocol: &str, command: &str, dcs: u16, rounds: u64, key: &Key) {
    let mut driver = Driver::new(protocol, dcs);
    for _ in 0..rounds {
        driver.round(command, key);
    }
    let (done, failed) = (driver.committed, driver.failed);
    let busy_before = driver.busy_ns.clone();
    let started = Instant::now();
    for _ in 0..rounds {
        driver.round(command, key);
    }
    let took_ns = started.elapsed().as_nanos() as u64;
    let committed = (driver.committed - done).max(1);
    let failed = driver.failed - failed;
    let busy: Vec<u64> = driver
        .busy_ns
        .iter()
        .zip(&busy_before)
        .map(|(a, b)| a - b)
        .collect();
    let replicas: Vec<String> = busy[1..]
        .iter()
        .map(|b| (b / committed).to_string())
        .collect();
    let replicas = if replicas.is_empty() {
        "-".to_string()
    } else {
        replicas.join(", ")
    };
    println!(
        "| {command} | {dcs} | {} | {} | {replicas} | {committed} | {failed} |",
        took_ns / committed,
        busy[0] / committed,
    );
}

fn main() {
    let arg = |i| std::env::args().nth(i);
    let protocol = arg(1).unwrap_or_else(|| "cure".into());
    if !CURE_FAMILY.contains(&protocol.as_str()) {
        eprintln!("machine_txn drives the Cure family only: give one of {CURE_FAMILY:?}");
        std::process::exit(2);
    }
    let only = arg(2).filter(|c| c != "all");
    let dcs: u16 = match arg(3).map(|d| d.parse()) {
        None => 1,
        Some(Ok(d)) if (1..=DCS_MAX).contains(&d) => d,
        Some(_) => {
            eprintln!("DCS is 1 to {DCS_MAX}");
            std::process::exit(2);
        }
    };
    let rounds = match arg(4).map(|r| r.parse()) {
        None => ROUNDS,
        Some(Ok(r)) if (1..=ROUNDS_MAX).contains(&r) => r,
        Some(_) => {
            eprintln!("ROUNDS is 1 to {ROUNDS_MAX}");
            std::process::exit(2);
        }
    };
    let key = Key::from("key:__rand_int__");
    let parts = partitions();
    println!(
        "protocol {protocol}, {SESSIONS} sessions, {rounds} rounds per command, {dcs} DCs, \
         {parts} partitions per node"
    );
    println!(
        "| command | DCs | ns per txn, all | DC 1's node | each other DC's | committed | failed |"
    );
    println!("|---|---|---|---|---|---|---|");
    for command in [
        "set", "get", "incr", "sadd", "mset4", "set16", "incr16", "sadd16",
    ] {
        if only.as_deref().is_none_or(|c| c == command) {
            run(&protocol, command, dcs, rounds, &key);
        }
    }
}
