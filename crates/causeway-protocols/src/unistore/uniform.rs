//! UniStore's additions to the engine (UniStore §5, Alg. 1-2 without the strong lines):
//! the STABLEVEC exchange between sibling nodes of different DCs and `uniformVec`
//! (`kit::uniform`), START's snapshot on it with the strong entry (Alg. 1 l.2-7, the
//! engine's `cure/ft.rs` with `uniformVec` where the CureFt baseline has the stable
//! vector), and when UNIFORM_BARRIER and ATTACH (Alg. 1 l.49-52, parked by `ft.rs`) hold.
//!
//! Placement of the paper's per-replica state: `knownVec` is each partition's `pvc`,
//! `localMatrix` the DC gossip behind the GSS (`stableVec` = the GSS), `globalMatrix`
//! the siblings' acknowledgements in `kit::repl` (which drive forwarding, §5.5), and
//! `stableMatrix` / `uniformVec` live in `kit::uniform`, one per node: a node's partitions
//! share its DC's stable vector, so one STABLEVEC per node and sibling DC carries what the
//! paper's per-partition messages would, with fewer messages.

use super::hooks::UniExt;
use crate::cure::msg::Msg;
use crate::cure::node::Node;
use causeway_core::clock::Extra;
use causeway_core::{Addr, Ctx, DcId, NodeId, Vc};

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

impl Node<UniExt> {
    /// A snapshot under UniStore's rules (Alg. 1 l.2-7): the engine's fault-tolerant
    /// snapshot on `uniformVec`, with the strong entry.
    pub(crate) fn unistore_snapshot(&mut self, cvc: &Vc) -> Vc {
        let mut svc = self.ft_snapshot(cvc);
        if self.ext.strong.is_some() {
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

    /// BROADCAST_VECS' STABLEVEC (Alg. 2 l.25): our stable vector to the sibling node of
    /// every other DC, and a recomputation of `uniformVec` with it as our own row.
    pub(crate) fn broadcast_stable(&mut self, ctx: &mut Ctx<Msg>) {
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
        self.work += stable.dcs.len() as u64;
        self.ext.uniform.report(usize::from(from.0), &stable);
        self.recompute_uniform();
        self.uniform_advanced(ctx);
    }

    /// Our own row of the matrix is our DC's stable vector (Alg. 2 l.25 sends it, l.32
    /// stores it): whenever it advances, here on a STABLEVEC or on the DC's gossip between
    /// our stabilization rounds, `uniformVec` is recomputed (l.33-36) at once. Waiting
    /// for the next round would hold every remote txn that just became stable here for
    /// up to a stabilization interval, which the paper's protocol never does (with f = 1
    /// a remote txn is uniform as soon as it is stable here: its origin stores it).
    pub(crate) fn refresh_uniform(&mut self, ctx: &mut Ctx<Msg>) {
        if self.recompute_uniform() {
            self.uniform_advanced(ctx);
        }
    }

    /// `uniformVec` from the matrix with our DC's stable vector as our row (Alg. 2
    /// l.32-36); true if it may have advanced.
    fn recompute_uniform(&mut self) -> bool {
        let own = self.gss.stable().clone();
        let broken = self.mutation.visible_before_uniform;
        let u = &mut self.ext.uniform;
        self.work += own.dcs.len() as u64;
        u.report(self.d, &own);
        let advanced = u.recompute();
        if broken {
            u.force(&own); // visible once stable here, not once in f+1 DCs
        }
        advanced || broken
    }

    /// Remote txns may be uniform now, and the waits on `uniformVec` may hold.
    fn uniform_advanced(&mut self, ctx: &mut Ctx<Msg>) {
        self.note_uniform();
        self.serve_client_waits(ctx);
        self.try_starts(ctx);
        self.serve_strong_barriers(ctx);
    }

    /// Samples how much later than stable remote txns became uniform (Fig. 6).
    fn note_uniform(&mut self) {
        let (d, clock) = (self.d, self.time.clock);
        let uniform = self.ext.uniform.vec().clone();
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

    /// Whether a parked barrier or attach holds (Alg. 1 l.50, l.52).
    pub(crate) fn uniform_wait_holds(&self, past: &Vc, attach: bool) -> bool {
        match attach {
            false => self.ext.uniform.covers_local(past),
            true => self.ext.uniform.covers_remote(past),
        }
    }

    /// The fault tolerance of this node's protocol.
    pub fn tolerated_failures(&self) -> usize {
        self.ext.f
    }
}
