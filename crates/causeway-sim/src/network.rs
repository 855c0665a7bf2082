//! The simulated network: reliable FIFO links between addresses (nodes and client
//! sessions). A message takes the link's one-way latency (intra-DC, or the inter-DC
//! matrix of [`SimConfig::one_way_ns`](crate::config::SimConfig::one_way_ns)) plus seeded
//! jitter, plus the extra delay of a slow receiver, and never overtakes the previous message
//! of its link. A cut between two DCs holds its links' messages, in order, until it heals.
//! Messages to a node carry the incarnation they were sent to: one that reaches a node that
//! crashed since (or is down) is lost, as a broken connection would lose it. When a DC
//! fails, the messages its links still hold across a cut are lost with it.
//! A message between nodes of two DCs goes through its wire encoding (postcard, as the
//! runtime's peer links send it) and arrives decoded, so replication reaches a sibling
//! as the runtime delivers it (a piece of its own, with the bytes it came in).

use crate::cpu::NodeInput;
use crate::rng::SimRng;
use crate::world::{Ev, World};
use causeway_core::clock::Nanos;
use causeway_core::{Addr, NodeId, SessionId};
use causeway_protocols::Msg;
use std::collections::{BTreeMap, VecDeque};

/// The random stream of the network, derived from the seed.
const NETWORK_STREAM: u64 = 1;
/// Most messages one link holds across a cut. A cut lasts at most a third of the fault
/// phase, so a run that reaches this has a protocol flooding a link: it fails rather than
/// exhausting memory.
pub(crate) const HELD_PER_LINK_MAX: usize = 200_000;

/// `msg` encoded as a peer link sends it and decoded as the receiver reads it.
fn over_the_wire(msg: &Msg) -> Result<Msg, String> {
    let bytes = postcard::to_allocvec(msg).map_err(|e| format!("does not encode: {e}"))?;
    postcard::from_bytes(&bytes).map_err(|e| format!("does not decode: {e}"))
}

/// Links, cuts and held messages. Ordered maps: released links are re-sent in key order.
pub(crate) struct Network {
    /// Per link, the arrival time of its last message: a later one never arrives earlier.
    link_free: BTreeMap<(Addr, Addr), Nanos>,
    /// Active cuts per DC pair (lower id first); overlapping cuts of a pair are counted.
    cuts: BTreeMap<(u16, u16), u32>,
    /// Messages held on links that cross a cut, in send order, with their incarnation.
    held: BTreeMap<(Addr, Addr), VecDeque<(Msg, u32)>>,
    /// Slowed node-to-node links (`FaultEvent::SlowLink`): until when, and what each
    /// message takes more.
    slow_links: BTreeMap<(u32, u32), (Nanos, Nanos)>,
    /// Jitter draws. Disk latencies draw from this stream too (see `crate::disk`): moving
    /// them to a stream of their own would change every trace hash.
    pub(crate) rng: SimRng,
}

impl Network {
    pub(crate) fn new(seed: u64) -> Network {
        Network {
            link_free: BTreeMap::new(),
            cuts: BTreeMap::new(),
            held: BTreeMap::new(),
            slow_links: BTreeMap::new(),
            rng: SimRng::new(seed, NETWORK_STREAM),
        }
    }

    pub(crate) fn cut(&mut self, a: u16, b: u16) {
        *self.cuts.entry((a.min(b), a.max(b))).or_insert(0) += 1;
    }

    /// Heals one cut of the pair; held messages wait for `World::release_held`.
    pub(crate) fn heal(&mut self, a: u16, b: u16) {
        if let Some(count) = self.cuts.get_mut(&(a.min(b), a.max(b))) {
            *count = count.saturating_sub(1);
        }
    }

    pub(crate) fn heal_all(&mut self) {
        self.cuts.clear();
        self.slow_links.clear();
    }

    /// Slows the link `from -> to` until `until` (`FaultEvent::SlowLink`).
    pub(crate) fn slow_link(&mut self, from: usize, to: usize, until: Nanos, extra_ns: Nanos) {
        self.slow_links
            .insert((from as u32, to as u32), (until, extra_ns));
    }

    /// What a message leaving now on `from -> to` takes more on a slowed link.
    fn link_extra_ns(&self, from: Addr, to: Addr, now: Nanos) -> Nanos {
        let (Addr::Node(f), Addr::Node(t)) = (from, to) else {
            return 0;
        };
        match self.slow_links.get(&(f.0, t.0)) {
            Some(&(until, extra_ns)) if until > now => extra_ns,
            _ => 0,
        }
    }

    pub(crate) fn is_cut(&self, a: u16, b: u16) -> bool {
        a != b && self.cuts.get(&(a.min(b), a.max(b))).copied().unwrap_or(0) > 0
    }

    /// The arrival time of a message leaving now on `link` with this delay: FIFO, so not
    /// before the link's previous message.
    fn arrival(&mut self, link: (Addr, Addr), now: Nanos, delay: Nanos) -> Nanos {
        let free = self.link_free.entry(link).or_insert(0);
        let at = (now + delay).max(*free);
        *free = at;
        at
    }
}

impl World {
    pub(crate) fn dc_of_addr(&self, addr: Addr) -> u16 {
        match addr {
            Addr::Node(n) => self.nodes[n.0 as usize].dc,
            Addr::Client(s) => self.routes[&s].dc,
        }
    }

    /// Sends `msg`; under the CPU model a client session's message first takes a turn on
    /// the CPU of the node hosting the session (`World::session_host`).
    pub(crate) fn send(&mut self, from: Addr, to: Addr, msg: Msg) {
        if let Addr::Client(session) = from {
            let host = self.config.cpu.enabled.then(|| self.session_host(session));
            if let Some(Some(host)) = host {
                let input = NodeInput::FromSession { session, to, msg };
                return self.node_input(host, input);
            }
        }
        self.send_direct(from, to, msg);
    }

    /// Sends `msg`: held if the link crosses a cut or already holds messages (FIFO), else
    /// put on the wire.
    pub(crate) fn send_direct(&mut self, from: Addr, to: Addr, msg: Msg) {
        self.metrics.messages += 1;
        let incarnation = match to {
            Addr::Node(n) => self.nodes[n.0 as usize].incarnation,
            Addr::Client(_) => 0,
        };
        let (a, b) = (self.dc_of_addr(from), self.dc_of_addr(to));
        let net = &self.network;
        let held = net.held.get(&(from, to)).map_or(0, VecDeque::len);
        if !net.is_cut(a, b) && held == 0 {
            return self.transmit(from, to, msg, incarnation);
        }
        if held >= HELD_PER_LINK_MAX {
            // The run fails with this (reports are capped); the message is dropped.
            let what = format!("link {from:?} -> {to:?} holds {held} messages across a cut");
            return self.invariant_broken(format!("driver: {what} (HELD_PER_LINK_MAX)"));
        }
        let queue = self.network.held.entry((from, to)).or_default();
        queue.push_back((msg, incarnation));
    }

    /// Puts `msg` on the wire: latency, jitter and a slow receiver's delay.
    fn transmit(&mut self, from: Addr, to: Addr, msg: Msg, incarnation: u32) {
        let (a, b) = (self.dc_of_addr(from), self.dc_of_addr(to));
        let between_dcs = a != b && matches!((from, to), (Addr::Node(_), Addr::Node(_)));
        let msg = if between_dcs {
            match over_the_wire(&msg) {
                Ok(msg) => msg,
                Err(e) => return self.invariant_broken(format!("wire: {from:?} -> {to:?}: {e}")),
            }
        } else {
            msg
        };
        let base = self.config.one_way_ns(a, b);
        let jitter = (base as f64 * self.config.jitter * self.network.rng.unit()) as Nanos;
        let mut delay = base + jitter + self.network.link_extra_ns(from, to, self.now);
        if let Addr::Node(n) = to {
            let slot = &self.nodes[n.0 as usize];
            if slot.slow_until > self.now {
                delay += slot.slow_extra_ns;
            }
            if matches!(from, Addr::Node(_)) && a != b {
                let slow = self.config.slow_replication.iter().find(|(s, _)| *s == n.0);
                delay += slow.map_or(0, |(_, extra)| *extra);
            }
        }
        // A node's output leaves when its handler finishes (CPU model; 0 otherwise).
        let at = self
            .network
            .arrival((from, to), self.now + self.out_delay_ns, delay);
        let ev = Ev::Deliver {
            from,
            to,
            msg,
            incarnation,
        };
        self.schedule(at, ev);
    }

    /// Re-sends the messages held on links that no longer cross a cut.
    pub(crate) fn release_held(&mut self) {
        let links: Vec<(Addr, Addr)> = self.network.held.keys().copied().collect();
        for (from, to) in links {
            let (a, b) = (self.dc_of_addr(from), self.dc_of_addr(to));
            if self.network.is_cut(a, b) {
                continue;
            }
            let queue = self.network.held.remove(&(from, to)).unwrap_or_default();
            for (msg, incarnation) in queue {
                self.transmit(from, to, msg, incarnation);
            }
        }
    }

    /// Drops the messages held on links from DC `dc` (it failed: what its nodes and
    /// clients had not delivered yet dies with them; what is already on the wire arrives).
    pub(crate) fn drop_held_from(&mut self, dc: u16) {
        let links: Vec<(Addr, Addr)> = self.network.held.keys().copied().collect();
        for (from, to) in links {
            if self.dc_of_addr(from) == dc {
                self.network.held.remove(&(from, to));
            }
        }
    }

    /// Drops the messages held on links between DCs `a` and `b`, both ways (the cut's
    /// connections were reset: what the senders' queues held is lost).
    pub(crate) fn drop_held_between(&mut self, a: u16, b: u16) {
        let links: Vec<(Addr, Addr)> = self.network.held.keys().copied().collect();
        for (from, to) in links {
            let pair = (self.dc_of_addr(from), self.dc_of_addr(to));
            if pair == (a, b) || pair == (b, a) {
                self.network.held.remove(&(from, to));
            }
        }
    }

    /// Hands `msg` to node `n`'s machine, unless that incarnation is gone.
    pub(crate) fn deliver_to_node(&mut self, n: usize, from: Addr, msg: Msg, incarnation: u32) {
        if self.nodes[n].incarnation != incarnation || self.nodes[n].machine.is_none() {
            return; // the connection to that incarnation is gone
        }
        self.hash(n as u64);
        let mut wrong = None;
        self.with_node(n, |m, ctx| wrong = m.handle_message(ctx, from, msg).err());
        if let Some(e) = wrong {
            self.invariant_broken(format!("node {n}: {e}"));
        }
    }

    pub(crate) fn deliver(&mut self, from: Addr, to: Addr, msg: Msg, incarnation: u32) {
        match to {
            Addr::Node(NodeId(n)) if self.config.cpu.enabled => {
                let input = NodeInput::Message {
                    from,
                    msg,
                    incarnation,
                };
                self.node_input(n as usize, input);
            }
            Addr::Node(NodeId(n)) => self.deliver_to_node(n as usize, from, msg, incarnation),
            Addr::Client(session) if self.config.cpu.enabled => match self.session_host(session) {
                Some(host) => self.node_input(host, NodeInput::ToSession { from, session, msg }),
                None => self.deliver_to_session(from, session, msg),
            },
            Addr::Client(session) => self.deliver_to_session(from, session, msg),
        }
    }

    /// Hands `msg` to session `s`'s client, unless the session retired.
    pub(crate) fn deliver_to_session(&mut self, from: Addr, s: SessionId, msg: Msg) {
        let route = self.routes[&s];
        if route.retired {
            return; // its client moved on to a session at another DC
        }
        let c = route.slot;
        let mut wrong = None;
        self.with_client(c, |s, ctx| wrong = s.handle_message(ctx, from, msg).err());
        if let Some(e) = wrong {
            self.invariant_broken(format!("client {c}: {e}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_core::SessionId;

    #[test]
    fn a_link_never_delivers_out_of_order_and_cuts_count() {
        let mut net = Network::new(1);
        let link = (Addr::Node(NodeId(0)), Addr::Client(SessionId(1)));
        assert_eq!(net.arrival(link, 100, 50), 150);
        // A later message with a shorter delay still arrives after the first.
        assert_eq!(net.arrival(link, 110, 10), 150);
        assert_eq!(net.arrival(link, 200, 10), 210);
        net.cut(2, 1);
        net.cut(1, 2);
        assert!(net.is_cut(1, 2) && net.is_cut(2, 1));
        assert!(!net.is_cut(1, 1), "a DC is never cut from itself");
        net.heal(1, 2);
        assert!(net.is_cut(1, 2), "one of two overlapping cuts still holds");
        net.heal(2, 1);
        assert!(!net.is_cut(1, 2));
        net.cut(0, 1);
        net.heal_all();
        assert!(!net.is_cut(0, 1));
    }

    #[test]
    fn a_slowed_link_delays_its_node_to_node_messages_one_way_until_it_recovers() {
        let mut net = Network::new(1);
        let (a, b) = (Addr::Node(NodeId(0)), Addr::Node(NodeId(1)));
        net.slow_link(0, 1, 1_000, 70);
        assert_eq!(net.link_extra_ns(a, b, 999), 70);
        assert_eq!(net.link_extra_ns(b, a, 999), 0, "one way");
        assert_eq!(net.link_extra_ns(a, b, 1_000), 0, "recovered");
        let client = Addr::Client(SessionId(1));
        assert_eq!(net.link_extra_ns(a, client, 10), 0, "node to node only");
        net.heal_all();
        assert_eq!(
            net.link_extra_ns(a, b, 10),
            0,
            "the end of the faults heals links"
        );
    }
}
