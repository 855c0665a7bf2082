//! A reusable in-memory network for protocol unit tests: every node and session of one
//! protocol, messages delivered at once in FIFO order (unless a `hold` predicate keeps
//! them back until `release`), every record durable at once, one shared clock advanced by
//! hand, and every node's `poll_timeout` honoured as the clock passes it. Deterministic,
//! sans-IO like the machines it drives; the simulator is where timing and faults live.

use crate::params::{NodeConfig, Params};
use crate::registry::Protocol;
use causeway_core::{
    Addr, ClientSession, Ctx, DcId, NodeId, Output, Request, Response, ServerNode, SessionId,
    Topology, TrueTime, TxnKind,
};
use std::collections::{BTreeMap, VecDeque};

/// One millisecond, in the clock's nanoseconds.
pub const MS: u64 = 1_000_000;
/// Most deliveries one `deliver_all` runs before declaring a message storm.
pub const DELIVERIES_MAX: usize = 1_000_000;

/// Decides whether a message is held back (`from`, `to`, message).
pub type Hold<M> = fn(&Topology, Addr, Addr, &M) -> bool;

pub struct TestNet<P: Protocol> {
    pub topo: Topology,
    pub params: Params,
    pub nodes: Vec<P::Node>,
    /// Every record each node persisted, in order (for recovery tests).
    pub records: Vec<Vec<Vec<u8>>>,
    pub sessions: BTreeMap<u64, P::Session>,
    queue: VecDeque<(Addr, Addr, P::Msg)>,
    held: Vec<(Addr, Addr, P::Msg)>,
    pub hold: Hold<P::Msg>,
    pub clock: u64,
    /// Answers each session got, not yet taken by `request`.
    pub replies: BTreeMap<u64, VecDeque<Response>>,
}

fn no_hold<M>(_: &Topology, _: Addr, _: Addr, _: &M) -> bool {
    false
}

impl<P: Protocol> TestNet<P> {
    /// Every node of `topo` fresh, started at clock `start`.
    pub fn new(topo: Topology, params: Params, start: u64) -> TestNet<P> {
        TestNet::with_config(topo, params, &P::Config::default(), start)
    }

    /// Like [`TestNet::new`], with the protocol's config section.
    pub fn with_config(
        topo: Topology,
        params: Params,
        section: &P::Config,
        start: u64,
    ) -> TestNet<P> {
        let n = topo.node_count();
        let nodes = (0..n)
            .map(|i| {
                let config = NodeConfig::new(NodeId(i), topo.clone(), params.clone());
                P::recover(&config, section, &[]).expect("a fresh node")
            })
            .collect();
        let mut net = TestNet {
            records: vec![Vec::new(); n as usize],
            topo,
            params,
            nodes,
            sessions: BTreeMap::new(),
            queue: VecDeque::new(),
            held: Vec::new(),
            hold: no_hold::<P::Msg>,
            clock: start,
            replies: BTreeMap::new(),
        };
        for i in 0..n as usize {
            net.node_call(i, |m: &mut P::Node, ctx| m.start(ctx));
        }
        net
    }

    /// Opens session `id` in `dc`.
    pub fn session(&mut self, id: u64, dc: u16) {
        let s = P::session(
            SessionId(id),
            DcId(dc),
            &self.topo,
            &self.params,
            &P::Config::default(),
        )
        .expect("a session");
        self.sessions.insert(id, s);
    }

    /// Calls into node `n` and routes its outputs.
    pub fn node_call(&mut self, n: usize, f: impl FnOnce(&mut P::Node, &mut Ctx<P::Msg>)) {
        let mut ctx = Ctx::new(TrueTime(self.clock), self.clock);
        f(&mut self.nodes[n], &mut ctx);
        self.absorb(n, ctx.outputs);
    }

    /// Routes a node's outputs; every persist is durable at once.
    fn absorb(&mut self, n: usize, outputs: Vec<Output<P::Msg>>) {
        let mut lsns = Vec::new();
        for out in outputs {
            match out {
                Output::Send { to, msg } => self.post(Addr::Node(NodeId(n as u32)), to, msg),
                Output::Persist { lsn, record } => {
                    self.records[n].push(record);
                    lsns.push(lsn);
                }
                Output::Reply(_) => panic!("nodes do not reply"),
            }
        }
        for lsn in lsns {
            self.node_call(n, |m, ctx| m.handle_persisted(ctx, lsn));
        }
    }

    /// Calls into session `s` and routes its outputs.
    pub fn session_call(&mut self, s: u64, f: impl FnOnce(&mut P::Session, &mut Ctx<P::Msg>)) {
        let mut ctx = Ctx::new(TrueTime(self.clock), self.clock);
        f(self.sessions.get_mut(&s).expect("session"), &mut ctx);
        for out in ctx.outputs {
            match out {
                Output::Send { to, msg } => self.post(Addr::Client(SessionId(s)), to, msg),
                Output::Reply(r) => self.replies.entry(s).or_default().push_back(r),
                Output::Persist { .. } => panic!("sessions do not persist"),
            }
        }
    }

    fn post(&mut self, from: Addr, to: Addr, msg: P::Msg) {
        if (self.hold)(&self.topo, from, to, &msg) {
            self.held.push((from, to, msg));
        } else {
            self.queue.push_back((from, to, msg));
        }
    }

    /// Delivers every queued message, and what they cause, in FIFO order.
    pub fn deliver_all(&mut self) {
        let mut delivered = 0;
        while let Some((from, to, msg)) = self.queue.pop_front() {
            delivered += 1;
            assert!(delivered <= DELIVERIES_MAX, "message storm");
            match to {
                Addr::Node(n) => {
                    self.node_call(n.0 as usize, |m, ctx| m.handle_message(ctx, from, msg))
                }
                Addr::Client(s) => {
                    self.session_call(s.0, |m, ctx| m.handle_message(ctx, from, msg))
                }
            }
        }
    }

    /// Advances `ms` milliseconds, one at a time, firing every deadline that passed.
    pub fn run(&mut self, ms: u64) {
        for _ in 0..ms {
            self.clock += MS;
            self.fire_due();
            self.deliver_all();
        }
    }

    fn fire_due(&mut self) {
        for n in 0..self.nodes.len() {
            if self.nodes[n]
                .poll_timeout()
                .is_some_and(|d| d <= self.clock)
            {
                self.node_call(n, |m, ctx| m.handle_timeout(ctx));
            }
        }
        let due: Vec<u64> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.poll_timeout().is_some_and(|d| d <= self.clock))
            .map(|(id, _)| *id)
            .collect();
        for s in due {
            self.session_call(s, |m, ctx| m.handle_timeout(ctx));
        }
    }

    /// Stops holding messages and queues the held ones.
    pub fn release(&mut self) {
        self.hold = no_hold::<P::Msg>;
        self.queue.extend(std::mem::take(&mut self.held));
    }

    /// Drops the held messages (a link that lost them) and stops holding.
    pub fn drop_held(&mut self) {
        self.hold = no_hold::<P::Msg>;
        self.held.clear();
    }

    /// Submits a request and runs until it is answered (panics after 2 s).
    /// Session `s`'s oldest reply not taken yet.
    pub fn take_reply(&mut self, s: u64) -> Option<Response> {
        self.replies.get_mut(&s).and_then(VecDeque::pop_front)
    }

    pub fn request(&mut self, s: u64, req: Request) -> Response {
        self.session_call(s, |m, ctx| m.submit(ctx, req));
        for _ in 0..2000 {
            self.deliver_all();
            if let Some(r) = self.replies.get_mut(&s).and_then(VecDeque::pop_front) {
                return r;
            }
            self.run(1);
        }
        panic!("session {s} got no answer");
    }

    /// BEGIN (causal), the steps, COMMIT: every answer in order.
    pub fn txn(&mut self, s: u64, steps: Vec<Request>) -> Vec<Response> {
        let begin = Request::Begin {
            kind: TxnKind::Causal,
            label: None,
        };
        let mut out = vec![self.request(s, begin)];
        for step in steps {
            out.push(self.request(s, step));
        }
        out.push(self.request(s, Request::Commit));
        out
    }

    /// Every node's invariants hold.
    pub fn check_invariants(&self) -> Result<(), String> {
        for (i, n) in self.nodes.iter().enumerate() {
            n.check_invariants().map_err(|e| format!("node {i}: {e}"))?;
        }
        Ok(())
    }
}
