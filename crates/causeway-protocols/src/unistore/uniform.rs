//! UniStore's additions to the engine (UniStore §5, Alg. 1-2 without the strong lines):
//! the STABLEVEC exchange between sibling nodes of different DCs and `uniformVec`
//! (`kit::uniform`), the snapshot rule of START (Alg. 1 l.2-7, shared with the CureFt
//! baseline, which uses the stable vector where UniStore uses `uniformVec`), and the
//! UNIFORM_BARRIER and ATTACH requests (Alg. 1 l.49-52), parked until they hold.
//!
//! Placement of the paper's per-replica state: `knownVec` is each partition's `pvc`,
//! `localMatrix` the DC gossip behind the GSS (`stableVec` = the GSS), `globalMatrix`
//! the siblings' acknowledgements in `kit::repl` (which drive forwarding, §5.5), and
//! `stableMatrix` / `uniformVec` live in `kit::uniform`, one per node: a node's partitions
//! share its DC's stable vector, so one STABLEVEC per node and sibling DC carries what the
//! paper's per-partition messages would, with fewer messages.

use crate::cure::msg::Msg;
use crate::cure::node::Node;
use crate::cure::Flavor;
use causeway_core::clock::Extra;
use causeway_core::limits::WAITING_REQUESTS_MAX;
use causeway_core::{Addr, Ctx, DcId, Error, NodeId, Vc};

/// A UNIFORM_BARRIER or ATTACH waiting for its condition.
#[derive(Clone, Debug)]
pub struct ClientWait {
    pub client: Addr,
    pub req: u64,
    pub past: Vc,
    pub attach: bool,
}

impl ClientWait {
    pub fn new(client: Addr, req: u64, past: Vc, attach: bool) -> ClientWait {
        ClientWait {
            client,
            req,
            past,
            attach,
        }
    }
}

/// Sample names of the extra delay of uniform visibility, by origin DC (Fig. 6).
const UNIFORM_EXTRA_NS: [&str; 8] = [
    "uniform_extra_ns.from0",
    "uniform_extra_ns.from1",
    "uniform_extra_ns.from2",
    "uniform_extra_ns.from3",
    "uniform_extra_ns.from4",
    "uniform_extra_ns.from5",
    "uniform_extra_ns.from6",
    "uniform_extra_ns.from7",
];

impl Node {
    /// The vector whose remote entries snapshots take: `uniformVec` for UniStore, the
    /// stable vector (GSS) otherwise.
    pub(crate) fn visible_vec(&self) -> &Vc {
        match &self.uniform {
            Some(u) => u.vec(),
            None => self.gss.stable(),
        }
    }

    /// A snapshot under UniStore's rules (Alg. 1 l.2-7): adopt the remote entries of the
    /// client's past (they were visible where it read them), take the visible vector and
    /// the client's own DC entry. No wait: the snapshot is always available.
    pub(crate) fn unistore_snapshot(&mut self, cvc: &Vc) -> Vc {
        self.adopt_remote(cvc); // Alg. 1 l.2-3
        let d = self.d;
        let mut svc = self.visible_vec().clone(); // Alg. 1 l.5
        svc.extra.clear(); // uniformVec has no strong entry (§6.1)
        svc.set(d, cvc.get(d).max(svc.get(d))); // Alg. 1 l.6
        if self.strong.is_some() {
            // Alg. 1 l.7: strong txns stored in the DC, and the client's own.
            let strong = cvc.get_extra(Extra::Strong).max(self.stable_strong());
            svc.set_extra(Extra::Strong, strong);
        }
        svc
    }

    /// `stableVec[strong]`: every partition of the DC has delivered the strong txns up to
    /// it (Property 7; the GSS carries the partitions' `knownVec[strong]`).
    pub(crate) fn stable_strong(&self) -> u64 {
        self.gss.stable().get_extra(Extra::Strong)
    }

    /// Adopts the remote entries of a snapshot (Alg. 1 l.2-3, l.19-20, l.37-38). For
    /// CureFt the stable vector is the DC-wide GSS, which may adopt them the same way.
    pub(crate) fn adopt_remote(&mut self, v: &Vc) {
        if !self.flavor.unistore_rules() {
            return;
        }
        self.work += v.dcs.len() as u64;
        match &mut self.uniform {
            Some(u) => u.adopt_remote(v),
            None => {
                let mut remote = v.clone();
                remote.set(self.d, 0);
                self.gss.adopt(&remote);
                self.raise_to_gss();
            }
        }
    }

    /// BROADCAST_VECS' STABLEVEC (Alg. 2 l.25): our stable vector to the sibling node of
    /// every other DC, and a recomputation of `uniformVec` with it as our own row.
    pub(crate) fn broadcast_stable(&mut self, ctx: &mut Ctx<Msg>) {
        if self.uniform.is_none() {
            return;
        }
        let stable = self.gss.stable().clone();
        for s in self.siblings() {
            let m = Msg::StableVec {
                stable: stable.clone(),
            };
            ctx.send(Addr::Node(s), m);
        }
        self.on_stable_vec(ctx, DcId(self.d as u16), stable);
    }

    /// Our sibling nodes: the node of each other DC hosting our first partition.
    fn siblings(&self) -> Vec<NodeId> {
        let Some(pid) = self.parts.keys().next().copied() else {
            return Vec::new();
        };
        (0..self.topo.dcs)
            .filter(|dc| usize::from(*dc) != self.d)
            .map(|dc| self.topo.node_of(DcId(dc), pid))
            .collect()
    }

    /// STABLEVEC received (Alg. 2 l.31-36): update the matrix and `uniformVec`.
    pub(crate) fn on_stable_vec(&mut self, ctx: &mut Ctx<Msg>, from: DcId, stable: Vc) {
        let own = self.gss.stable().clone();
        let broken = self.mutation.visible_before_uniform;
        let Some(u) = self.uniform.as_mut() else {
            return;
        };
        self.work += stable.dcs.len() as u64;
        u.report(usize::from(from.0), &stable);
        u.report(self.d, &own);
        u.recompute();
        if broken {
            u.force(&own); // visible once stable here, not once in f+1 DCs
        }
        self.note_uniform();
        self.serve_client_waits(ctx);
        self.try_starts(ctx);
        self.serve_strong_barriers(ctx);
    }

    /// Samples how much later than stable remote txns became uniform (Fig. 6).
    fn note_uniform(&mut self) {
        let (d, clock) = (self.d, self.time.clock);
        let Some(u) = self.uniform.as_ref() else {
            return;
        };
        let uniform = u.vec().clone();
        let mut seen = Vec::new();
        for part in self.parts.values_mut() {
            part.stable_unseen.retain(|(o, ct, stable_at)| {
                let visible = (0..ct.dcs.len()).all(|k| k == d || ct.get(k) <= uniform.get(k));
                if visible {
                    let since_commit = clock.saturating_sub(ct.get(usize::from(o.0)));
                    seen.push((
                        usize::from(o.0),
                        clock.saturating_sub(*stable_at),
                        since_commit,
                    ));
                }
                !visible
            });
        }
        for (o, extra, since_commit) in seen {
            self.sample("remote_visibility_ns", since_commit);
            if let Some(name) = UNIFORM_EXTRA_NS.get(o) {
                self.sample(name, extra);
            }
        }
    }

    /// UNIFORM_BARRIER (Alg. 1 l.49-50) or ATTACH (l.51-52) from a session.
    pub(crate) fn on_client_wait(&mut self, ctx: &mut Ctx<Msg>, w: ClientWait) {
        if !self.flavor.unistore_rules() {
            let e = Error::Unsupported {
                protocol: self.flavor.name().into(),
                capability: "barriers".into(),
            };
            let m = Msg::WaitDone {
                req: w.req,
                result: Err(e),
            };
            return ctx.send(w.client, m);
        }
        if !w.attach && self.uniform.is_none() {
            let e = Error::Unsupported {
                protocol: self.flavor.name().into(),
                capability: "uniform barriers (no uniformity tracking)".into(),
            };
            let m = Msg::WaitDone {
                req: w.req,
                result: Err(e),
            };
            return ctx.send(w.client, m);
        }
        if self.client_waits.len() >= WAITING_REQUESTS_MAX {
            let e = Error::Unavailable("too many barriers and attaches waiting".into());
            let m = Msg::WaitDone {
                req: w.req,
                result: Err(e),
            };
            return ctx.send(w.client, m);
        }
        self.client_waits.push(w);
        self.serve_client_waits(ctx);
    }

    /// Answers every parked barrier or attach whose condition now holds.
    pub(crate) fn serve_client_waits(&mut self, ctx: &mut Ctx<Msg>) {
        if self.client_waits.is_empty() {
            return;
        }
        let no_wait = self.mutation.attach_no_wait;
        let waits = std::mem::take(&mut self.client_waits);
        let (go, stay): (Vec<ClientWait>, Vec<ClientWait>) =
            waits.into_iter().partition(|w| self.wait_holds(w, no_wait));
        self.client_waits = stay;
        for w in go {
            let m = Msg::WaitDone {
                req: w.req,
                result: Ok(()),
            };
            ctx.send(w.client, m);
        }
    }

    fn wait_holds(&self, w: &ClientWait, attach_no_wait: bool) -> bool {
        let d = self.d;
        match (&self.uniform, w.attach) {
            (_, true) if attach_no_wait => true,
            (Some(u), false) => u.covers_local(&w.past), // Alg. 1 l.50
            (Some(u), true) => u.covers_remote(&w.past), // Alg. 1 l.52
            // CureFt: attach waits for the stable vector to cover the remote entries.
            (None, _) => {
                let gss = self.gss.stable();
                (0..w.past.dcs.len()).all(|i| i == d || w.past.get(i) <= gss.get(i))
            }
        }
    }

    /// The fault tolerance of this node's protocol (0 where uniformity is not tracked).
    pub fn tolerated_failures(&self) -> usize {
        match self.flavor {
            Flavor::UniStore { f } => f,
            _ => 0,
        }
    }
}
