//! The node task: one tokio task owns the node's state machine and the client sessions
//! hosted on this process, feeds them their inputs (network messages, client requests,
//! timer expiries, durable lsns) and executes their outputs (sends, persists, timers,
//! replies). Nothing else touches the machines, so they need no locks.
//!
//! Time: `Ctx::now` and `Ctx::clock` are the system clock in nanoseconds since the Unix
//! epoch, made monotonic per process. Timers are relative; a requested delay is rounded
//! up to a tick of at least 1 ms (1/64 of the delay for long ones) so that equal wake-ups
//! coalesce, and at most `TIMERS_MAX` stay armed.

use crate::storage::{DiskEvent, PersistReq};
use crate::transport::{Link, NetMsg};
use causeway_core::{
    Addr, Ctx, DcId, Error, Nanos, NodeId, Output, Request, Response, SessionId, Topology,
};
use causeway_protocols::{new_session, BoxedNode, BoxedSession, Msg, Params};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

/// Most timer deadlines armed at once on one node (node and hosted sessions together).
pub const TIMERS_MAX: usize = 1 << 20;
/// Most messages a machine may send to its own process while handling one input.
pub const LOCAL_QUEUE_MAX: usize = 1 << 20;

/// A request from the gateway to the node task.
pub enum Control {
    Submit {
        session: SessionId,
        request: Request,
        reply: oneshot::Sender<Response>,
    },
    Close {
        session: SessionId,
    },
}

/// Who a timer wakes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Target {
    Node,
    Session(SessionId),
}

struct Hosted {
    machine: BoxedSession,
    waiting: Option<oneshot::Sender<Response>>,
}

/// What the node task needs to know about its place in the cluster.
pub struct NodeSetup {
    pub id: NodeId,
    pub dc: DcId,
    pub protocol: String,
    pub topology: Topology,
    pub params: Params,
}

/// Which node hosts a session: the id's top 16 bits hold the node id plus one.
pub fn session_host(session: SessionId) -> Option<NodeId> {
    let high = session.0 >> 48;
    (high > 0).then(|| NodeId((high - 1) as u32))
}

/// The node's physical clock: system time in ns since the Unix epoch, never going back.
fn system_ns() -> Nanos {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as Nanos)
}

pub struct NodeTask {
    setup: NodeSetup,
    node: BoxedNode,
    sessions: BTreeMap<SessionId, Hosted>,
    links: HashMap<NodeId, Link>,
    local: VecDeque<NetMsg>,
    timers: BTreeSet<(Instant, Target)>,
    base: Instant,
    last_clock: Nanos,
    persist: mpsc::Sender<PersistReq>,
}

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
    ) -> NodeTask {
        NodeTask {
            setup,
            node,
            sessions: BTreeMap::new(),
            links,
            local: VecDeque::new(),
            timers: BTreeSet::new(),
            base: Instant::now(),
            last_clock: 0,
            persist,
        }
    }

    /// Runs until `stop` turns true or the disk fails.
    pub async fn run(mut self, mut inputs: Inputs) -> Result<(), String> {
        let mut ctx = self.ctx();
        self.node.start(&mut ctx);
        self.node_outputs(ctx).await;
        loop {
            let deadline = self.timers.first().map(|(t, _)| *t);
            tokio::select! {
                biased;
                _ = inputs.stop.changed() => return Ok(()),
                ev = inputs.disk.recv() => match ev {
                    Some(DiskEvent::Persisted(lsns)) => self.persisted(lsns).await,
                    Some(DiskEvent::Failed(e)) => return Err(e),
                    None => return Err("the storage thread stopped".into()),
                },
                _ = tokio::time::sleep_until(deadline.unwrap_or(self.base)), if deadline.is_some() => {
                    self.fire_timers().await;
                }
                Some(c) = inputs.control.recv() => self.control(c).await,
                Some(m) = inputs.net.recv() => self.deliver(m).await,
            }
            self.drain_local().await;
        }
    }

    fn ctx(&mut self) -> Ctx<Msg> {
        self.last_clock = self.last_clock.max(system_ns());
        Ctx::new(self.last_clock, self.last_clock)
    }

    async fn persisted(&mut self, lsns: Vec<u64>) {
        for lsn in lsns {
            let mut ctx = self.ctx();
            self.node.handle_persisted(&mut ctx, lsn);
            self.node_outputs(ctx).await;
        }
    }

    async fn fire_timers(&mut self) {
        let now = Instant::now();
        let mut due = BTreeSet::new();
        while let Some(first) = self.timers.first().copied() {
            if first.0 > now {
                break;
            }
            self.timers.pop_first();
            due.insert(first.1);
        }
        for target in due {
            let mut ctx = self.ctx();
            match target {
                Target::Node => {
                    self.node.handle_timeout(&mut ctx);
                    self.node_outputs(ctx).await;
                }
                Target::Session(s) => {
                    if let Some(h) = self.sessions.get_mut(&s) {
                        h.machine.handle_timeout(&mut ctx);
                        self.session_outputs(s, ctx);
                    }
                }
            }
        }
    }

    async fn control(&mut self, control: Control) {
        match control {
            Control::Submit {
                session,
                request,
                reply,
            } => self.submit(session, request, reply),
            Control::Close { session } => {
                self.sessions.remove(&session);
            }
        }
    }

    fn submit(&mut self, session: SessionId, request: Request, reply: oneshot::Sender<Response>) {
        if !self.sessions.contains_key(&session) {
            let s = &self.setup;
            match new_session(&s.protocol, session, s.dc, &s.topology, &s.params) {
                Ok(machine) => {
                    let hosted = Hosted {
                        machine,
                        waiting: None,
                    };
                    self.sessions.insert(session, hosted);
                }
                Err(e) => {
                    let _ = reply.send(Response::Error(Error::Unavailable(e)));
                    return;
                }
            }
        }
        let mut ctx = self.ctx();
        let hosted = self.sessions.get_mut(&session).expect("inserted above");
        if hosted.waiting.is_some() {
            let why = "a request is already running on this session".to_string();
            let _ = reply.send(Response::Error(Error::InvalidState(why)));
            return;
        }
        hosted.waiting = Some(reply);
        hosted.machine.submit(&mut ctx, request);
        self.session_outputs(session, ctx);
    }

    async fn deliver(&mut self, m: NetMsg) {
        let mut ctx = self.ctx();
        match m.to {
            Addr::Node(n) if n == self.setup.id => {
                self.node.handle_message(&mut ctx, m.from, m.msg);
                self.node_outputs(ctx).await;
            }
            Addr::Node(n) => tracing::warn!(to = n.0, "dropping a message meant for another node"),
            Addr::Client(s) => {
                if let Some(h) = self.sessions.get_mut(&s) {
                    h.machine.handle_message(&mut ctx, m.from, m.msg);
                    self.session_outputs(s, ctx);
                }
            }
        }
    }

    async fn drain_local(&mut self) {
        while let Some(m) = self.local.pop_front() {
            self.deliver(m).await;
        }
    }

    async fn node_outputs(&mut self, mut ctx: Ctx<Msg>) {
        let from = Addr::Node(self.setup.id);
        for out in ctx.drain() {
            match out {
                Output::Send { to, msg } => self.route(from, to, msg),
                Output::Persist { lsn, record } => {
                    if self.persist.send(PersistReq { lsn, record }).await.is_err() {
                        tracing::error!("the storage thread is gone; a record was not persisted");
                    }
                }
                Output::Timer { after } => self.arm(Target::Node, after),
                Output::Reply(_) => {
                    tracing::error!("the node machine emitted a client reply; ignored")
                }
            }
        }
    }

    fn session_outputs(&mut self, session: SessionId, mut ctx: Ctx<Msg>) {
        let from = Addr::Client(session);
        for out in ctx.drain() {
            match out {
                Output::Send { to, msg } => self.route(from, to, msg),
                Output::Timer { after } => self.arm(Target::Session(session), after),
                Output::Reply(resp) => {
                    let waiting = self
                        .sessions
                        .get_mut(&session)
                        .and_then(|h| h.waiting.take());
                    match waiting {
                        Some(tx) => {
                            let _ = tx.send(resp);
                        }
                        None => tracing::warn!(
                            session = session.0,
                            "a session replied with no request running"
                        ),
                    }
                }
                Output::Persist { .. } => {
                    tracing::error!("a client session asked to persist; ignored")
                }
            }
        }
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
                self.local.push_back(NetMsg { from, to, msg });
            }
            Some(h) => match self.links.get(&h) {
                Some(link) => link.push(from, to, msg),
                None => tracing::warn!(node = h.0, "no link to node: message dropped"),
            },
            None => tracing::warn!(?to, "no route to address: message dropped"),
        }
    }

    fn arm(&mut self, target: Target, after: Nanos) {
        let tick_ns = (after / 64).max(1_000_000);
        let at_ns = (self.base.elapsed().as_nanos() as u64 + after).div_ceil(tick_ns) * tick_ns;
        if self.timers.len() >= TIMERS_MAX {
            tracing::error!("{TIMERS_MAX} timers armed: dropping a timer request");
            return;
        }
        self.timers
            .insert((self.base + Duration::from_nanos(at_ns), target));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_name_their_host_node() {
        assert_eq!(session_host(SessionId((5 << 48) | 77)), Some(NodeId(4)));
        assert_eq!(session_host(SessionId(77)), None);
    }
}
