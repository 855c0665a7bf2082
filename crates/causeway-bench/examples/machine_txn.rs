//! Times a protocol's machines alone on single-key RESP-shaped transactions: one server
//! node and `SESSIONS` client sessions in one process, driven as the runtime's node task
//! drives them (local messages delivered in order, a batch's next request submitted when
//! the session answers), with no sockets, no storage thread and no tokio. A round submits
//! one transaction per session, the clock advancing `ROUND_NS / SESSIONS` before each,
//! then makes every record of the round durable at once (a group commit of up to
//! `SESSIONS` records).
//!
//! The driver speaks the Cure family's conversation (cure, cureft, unistore); the other
//! protocols answer some requests in ways it does not model, and are refused.
//!
//! What it measures is the CPU the protocol itself costs per command, apart from the
//! kernel's loopback and the runtime's glue, which `perf` on a live node cannot separate
//! from this machine's noise. Not a test: run it in release and compare builds side by
//! side (BENCHMARKS.md, issue 14),
//!
//!     cargo run --release -p causeway-bench --example machine_txn [-- PROTOCOL [COMMAND]]

use causeway_core::crdt::{ObjType, Update};
use causeway_core::{
    Addr, Ctx, DcId, Key, Lsn, NodeId, Output, Request, Response, SessionId, Topology, TrueTime,
    TxnKind,
};
use causeway_protocols::{new_node, new_session, BoxedNode, BoxedSession, Msg, NodeConfig, Params};
use std::collections::VecDeque;
use std::time::Instant;

/// The protocols whose conversation the driver models.
const CURE_FAMILY: [&str; 3] = ["cure", "cureft", "unistore"];
/// Client sessions, each with one transaction in flight (redis-benchmark's `-c 50`).
const SESSIONS: u64 = 50;
/// Rounds timed per command (after as many untimed ones).
const ROUNDS: u64 = 4_000;
/// Clock advance per round (one transaction per session): 50k transactions per second.
const ROUND_NS: u64 = 1_000_000;

/// One command as the RESP front end batches it when it stands alone.
fn batch(command: &str, key: &Key) -> Vec<Request> {
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
    match command {
        "set" => vec![
            begin,
            update(Update::Assign(b"xxx".to_vec())),
            Request::Commit,
        ],
        "get" => vec![begin, read(ObjType::Lww), Request::Commit],
        "incr" => vec![
            begin,
            read(ObjType::Counter),
            update(Update::Increment(1)),
            Request::Commit,
        ],
        "sadd" => vec![
            begin,
            read(ObjType::Set),
            update(Update::Add(b"element".to_vec())),
            Request::Commit,
        ],
        other => panic!("unknown command {other}"),
    }
}

struct Hosted {
    machine: BoxedSession,
    pending: VecDeque<Request>,
    /// A batch is running: its last answer has not come.
    running: bool,
}

/// The node task's routing and batching, without IO.
struct Driver {
    node: BoxedNode,
    sessions: Vec<Hosted>,
    local: VecDeque<(Addr, Addr, Msg)>,
    durable: Vec<Lsn>,
    clock: u64,
    committed: u64,
    failed: u64,
}

impl Driver {
    fn new(protocol: &str) -> Driver {
        let topology = Topology::full(1, 1, 1);
        let config = NodeConfig::new(NodeId(0), topology.clone(), Params::default());
        let mut node = new_node(protocol, config, &[]).expect("the protocol builds a node");
        let clock = 1_000_000_000;
        let mut ctx = Ctx::new(TrueTime(clock), clock);
        node.start(&mut ctx);
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
                running: false,
            })
            .collect();
        let mut driver = Driver {
            node,
            sessions,
            local: VecDeque::new(),
            durable: Vec::new(),
            clock,
            committed: 0,
            failed: 0,
        };
        driver.node_outputs(ctx);
        driver
    }

    fn ctx(&self) -> Ctx<Msg> {
        Ctx::new(TrueTime(self.clock), self.clock)
    }

    fn node_outputs(&mut self, mut ctx: Ctx<Msg>) {
        for out in ctx.drain() {
            match out {
                Output::Send { to, msg } => self.local.push_back((Addr::Node(NodeId(0)), to, msg)),
                Output::Persist { lsn, .. } => self.durable.push(lsn),
                Output::Reply(_) => panic!("a node replied to a client"),
            }
        }
    }

    /// Runs a session's outputs; submits its next request while it answers at once.
    fn session_outputs(&mut self, s: usize, mut ctx: Ctx<Msg>) {
        let from = Addr::Client(SessionId(s as u64 + 1));
        let mut answered = false;
        for out in ctx.drain() {
            match out {
                Output::Send { to, msg } => self.local.push_back((from, to, msg)),
                Output::Reply(resp) => answered |= self.answered(s, resp),
                Output::Persist { .. } => panic!("a session persisted"),
            }
        }
        if answered {
            self.next_request(s);
        }
    }

    /// Counts an answer; true when the batch goes on.
    fn answered(&mut self, s: usize, resp: Response) -> bool {
        match resp {
            Response::Committed => self.committed += 1,
            Response::Error(_) | Response::Aborted { .. } => {
                if self.failed == 0 {
                    eprintln!("first failure: {resp:?}");
                }
                self.failed += 1;
                self.sessions[s].pending.clear();
            }
            _ => {}
        }
        let goes_on = !self.sessions[s].pending.is_empty();
        self.sessions[s].running = goes_on;
        goes_on
    }

    fn next_request(&mut self, s: usize) {
        let Some(request) = self.sessions[s].pending.pop_front() else {
            return;
        };
        let mut ctx = self.ctx();
        let hosted = &mut self.sessions[s];
        let ahead = hosted.pending.make_contiguous();
        hosted.machine.submit_ahead(&mut ctx, request, ahead);
        self.session_outputs(s, ctx);
    }

    fn deliver_all(&mut self) {
        while let Some((from, to, msg)) = self.local.pop_front() {
            let mut ctx = self.ctx();
            match to {
                Addr::Node(_) => {
                    self.node
                        .handle_message(&mut ctx, from, msg)
                        .expect("a Cure message");
                    self.node_outputs(ctx);
                }
                Addr::Client(id) => {
                    let s = (id.0 - 1) as usize;
                    let m = &mut self.sessions[s].machine;
                    m.handle_message(&mut ctx, from, msg)
                        .expect("a Cure message");
                    self.session_outputs(s, ctx);
                }
            }
        }
    }

    /// One transaction per session, each after a tick of the clock (a machine waiting
    /// for `Clock > t` sees it move, as on a live node), then a group commit.
    fn round(&mut self, command: &str, key: &Key) {
        for s in 0..self.sessions.len() {
            self.tick(ROUND_NS / SESSIONS);
            if self.sessions[s].running {
                continue; // still waiting
            }
            self.sessions[s].running = true;
            self.sessions[s].pending = batch(command, key).into();
            self.next_request(s);
            self.deliver_all();
        }
        for lsn in std::mem::take(&mut self.durable) {
            let mut ctx = self.ctx();
            self.node.handle_persisted(&mut ctx, lsn);
            self.node_outputs(ctx);
            self.deliver_all();
        }
    }

    /// Advances the clock and runs the node's timers that fell due.
    fn tick(&mut self, step_ns: u64) {
        self.clock += step_ns;
        if self.node.poll_timeout().is_some_and(|d| d <= self.clock) {
            let mut ctx = self.ctx();
            self.node.handle_timeout(&mut ctx);
            self.node_outputs(ctx);
            self.deliver_all();
        }
    }
}

fn main() {
    let protocol = std::env::args().nth(1).unwrap_or_else(|| "cure".into());
    if !CURE_FAMILY.contains(&protocol.as_str()) {
        eprintln!("machine_txn drives the Cure family only: give one of {CURE_FAMILY:?}");
        std::process::exit(2);
    }
    let only = std::env::args().nth(2);
    let key = Key::from("key:__rand_int__");
    println!("protocol {protocol}, {SESSIONS} sessions, {ROUNDS} rounds per command");
    println!("| command | ns per txn | committed | failed |");
    println!("|---|---|---|---|");
    for command in ["set", "get", "incr", "sadd"] {
        if only.as_deref().is_some_and(|c| c != command) {
            continue;
        }
        let mut driver = Driver::new(&protocol);
        for _ in 0..ROUNDS {
            driver.round(command, &key);
        }
        let (done, failed) = (driver.committed, driver.failed);
        let started = Instant::now();
        for _ in 0..ROUNDS {
            driver.round(command, &key);
        }
        let took_ns = started.elapsed().as_nanos() as u64;
        let committed = driver.committed - done;
        let per_txn_ns = took_ns / committed.max(1);
        let failed = driver.failed - failed;
        println!("| {command} | {per_txn_ns} | {committed} | {failed} |");
    }
}
