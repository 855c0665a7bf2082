//! Replication between the replicas of a partition (Alg. 4 l.5-33, on `kit::repl`'s
//! streams with acknowledgements and catch-up) and the Universal Stable Time (Alg. 4
//! l.34-38): each node's minimum `VV` entry gossiped inside its DC (the GST), the DC
//! roots' exchange of GSTs (the UST is their meet), and the same exchange of the oldest
//! snapshot in use, which bounds garbage collection.

use super::config::Flavor;
use super::msg::{Msg, Record, ReplTxn, Stream};
use super::node::Node;
use super::types::{root_of, Deferred};
use crate::kit::wire::SharedStream;
use causeway_core::limits::REPLICATION_BATCH_MAX;
use causeway_core::{Addr, Ctx, DcId, NodeId, PartitionId, Vc};

/// BPR and NoCC run no stabilization; their GC exchange runs every this many intervals.
const BASELINE_GC_EVERY: u64 = 10;

pub(super) fn wire_len(m: &Msg) -> u64 {
    postcard::to_allocvec(m).map_or(0, |b| b.len() as u64)
}

impl Node {
    /// Every Δ_R, per partition and sibling replica: our committed txns up to `VV[own]`
    /// in commit-time order, or a heartbeat (Alg. 4 l.10-21), plus any catch-up.
    pub(super) fn replicate(&mut self, ctx: &mut Ctx<Msg>) {
        let pids: Vec<PartitionId> = self.parts.keys().copied().collect();
        for pid in pids {
            let sibs = self.parts[&pid].sibs.ids();
            let mut made = None;
            for s in sibs {
                self.replicate_to(ctx, pid, s, &mut made);
                self.transfer_to(ctx, pid, s);
            }
            let (clock, silent) = (self.time.clock, self.cfg.silent_sibling_ns);
            let kept_max = self.cfg.silent_sibling_log_max;
            let part = self.part(pid);
            let sibs = &part.sibs;
            part.log.gc_acknowledged(sibs, clock, silent, kept_max);
        }
    }

    /// `made`: the piece this round made for another sibling, reused if `s` goes on from
    /// the same point.
    fn replicate_to(
        &mut self,
        ctx: &mut Ctx<Msg>,
        pid: PartitionId,
        s: DcId,
        made: &mut Option<SharedStream<ReplTxn>>,
    ) {
        let (clock, grace) = (self.time.clock, self.cfg.lag_grace_ns);
        let to = Addr::Node(self.topo.node_of(s, pid));
        let restarted = self.announce.remove(&(pid, s));
        let own = usize::from(self.d.0);
        let part = self.parts.get_mut(&pid).expect("hosted");
        let relays = part.sibs.lagging(s, &part.vv, clock, grace);
        let upto = part.vv.get(own);
        let stream = part
            .sibs
            .own_piece(s, &part.log, upto, REPLICATION_BATCH_MAX, made);
        let acks = part.vv.clone();
        let mut msgs = vec![Msg::Repl {
            partition: pid,
            restarted,
            acks: acks.clone(),
            stream,
        }];
        // A relay from below what the log dropped would claim txns it no longer has (a
        // replica that lacks them gets a state transfer instead, `transfer.rs`).
        for (o, from) in relays
            .into_iter()
            .filter(|(o, f)| part.log.serves_from(*o, *f))
        {
            let upto = part.vv.get(usize::from(o.0));
            let st = part.log.stream(o, from, upto, REPLICATION_BATCH_MAX);
            msgs.push(Msg::Repl {
                partition: pid,
                restarted: false,
                acks: acks.clone(),
                stream: Some(SharedStream::new(st)),
            });
        }
        for m in msgs {
            self.traffic.replication += wire_len(&m);
            ctx.send(to, m);
        }
    }

    pub(super) fn on_repl(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: NodeId,
        pid: PartitionId,
        restarted: bool,
        acks: Vc,
        stream: Option<SharedStream<ReplTxn>>,
    ) {
        let s = self.topo.dc_of(from);
        let clock = self.time.clock;
        let Some(part) = self.parts.get_mut(&pid) else {
            return;
        };
        if !part.sibs.heard(s, acks, restarted, clock) {
            return;
        }
        if let Some(piece) = stream {
            self.accept(ctx, pid, piece.into_stream());
        }
    }

    /// Alg. 4 l.23-33: a gapless piece of a sibling's stream; new txns join the store and
    /// are persisted, and `VV[origin]` rises to the piece's claim once durable.
    fn accept(&mut self, ctx: &mut Ctx<Msg>, pid: PartitionId, st: Stream) {
        let (origin, upto) = (st.origin, st.upto);
        let clock = self.time.clock;
        let part = self.parts.get_mut(&pid).expect("hosted");
        let Some(mut new) = part.received.accept(st) else {
            return;
        };
        // Txns a state transfer already brought (`transfer.rs`).
        let transferred = &part.transfers.transferred;
        new.retain(|t| !transferred.contains_key(&t.txn));
        let covered = part
            .replicas
            .iter()
            .filter(|k| **k != part.me)
            .map(|k| part.received.have(*k))
            .min()
            .unwrap_or(u64::MAX);
        part.transfers.prune(|ct| *ct <= covered);
        self.work += new.iter().map(|t| t.ops.len() as u64).sum::<u64>();
        for t in &new {
            part.add_remote(origin, t.clone(), clock);
        }
        let then = Deferred::Remote {
            partition: pid,
            origin,
            upto,
        };
        if new.is_empty() {
            // A heartbeat: no record, as Cure's (docs/ARCHITECTURE.md, Cure section). Its
            // `VV[origin]` waits only for the records before it; a restarted node's marks
            // go back to its last durable record, and PaRiS's UST raises them again
            // (`raise_to_ust`).
            self.after_durable(ctx, then);
            return;
        }
        let record = Record::Remote {
            partition: pid,
            origin,
            upto,
            txns: new,
        };
        self.persist(ctx, record, Vec::new());
        self.after_durable(ctx, then);
    }

    /// A restarted node's streams are back at their last durable records (a heartbeat
    /// writes none: `accept`), and the UST it adopts (from the DC's root, a client or a
    /// snapshot) may be above them. Every txn with a commit time at or below the UST is
    /// here, durably: the UST is the minimum of every partition's reported `VV`, ours
    /// from before the crash included, and every txn below a `VV` entry was durable (a
    /// heartbeat's entry waits for the records before it). So the remote entries of `VV`
    /// and the streams' marks go up to the UST. Without a restart this changes nothing.
    /// PaRiS only: BPR has no UST.
    pub(super) fn raise_to_ust(&mut self) {
        if self.flavor != Flavor::Paris || self.mutation.ust_ignores_remote_dc {
            return;
        }
        let ust = self.ust;
        for part in self.parts.values_mut() {
            let me = part.me;
            for &r in part.replicas.iter().filter(|r| **r != me) {
                let o = usize::from(r.0);
                if part.vv.get(o) < ust {
                    part.vv.set(o, ust);
                    part.received.recovered(r, ust);
                }
            }
        }
    }

    /// Every Δ_G: our minimum `VV` entry and oldest snapshot to the DC (Alg. 4 l.35);
    /// at the root, the DC's GST to the other roots and the UST to the DC (l.36-38).
    pub(super) fn stabilize(&mut self, ctx: &mut Ctx<Msg>) {
        self.stabilize_ticks += 1;
        let ust_on = self.flavor == Flavor::Paris;
        if !ust_on && !self.stabilize_ticks.is_multiple_of(BASELINE_GC_EVERY) {
            // Visibility is still sampled every interval, as PaRiS's is (at the GC
            // exchange's pace BPR's would read up to 10 intervals late).
            self.note_visible();
            return self.gc_store();
        }
        let vv_min = self.parts.values().map(|p| p.vv_min()).min();
        let oldest = self.oldest_snapshot();
        let vv_report = if ust_on { vv_min } else { None };
        self.dc_vv.report(self.me, vv_report);
        self.dc_oldest.report(self.me, Some(oldest));
        let others: Vec<NodeId> = self
            .topo
            .nodes_in_dc(self.d)
            .filter(|n| *n != self.me)
            .collect();
        for n in others {
            let m = Msg::Stable {
                vv_min: vv_report,
                oldest,
            };
            self.traffic.ust_intra_dc += wire_len(&m);
            ctx.send(Addr::Node(n), m);
        }
        if self.me == root_of(&self.topo, self.d) {
            self.root_round(ctx);
        }
        if ust_on && self.ust > 0 {
            let lag = self.time.clock.saturating_sub(self.ust);
            self.sample("ust_lag_ns", lag);
        }
        self.note_visible();
        self.gc_store();
    }

    /// The oldest snapshot a txn coordinated here reads at, else what a new one would.
    fn oldest_snapshot(&self) -> u64 {
        let fresh = match self.flavor {
            Flavor::Paris => self.ust,
            Flavor::Bpr => self.time.claimable(),
            Flavor::Nocc => u64::MAX,
        };
        self.coord.oldest().map_or(fresh, |o| o.min(fresh))
    }

    /// The root's part: GST and oldest snapshot to the other roots, UST and GC point to
    /// the DC (the `ust-ignores-remote-dc` mutation takes the DC's own GST as the UST).
    fn root_round(&mut self, ctx: &mut Ctx<Msg>) {
        let hosts_any = (0..self.topo.partitions)
            .any(|p| self.topo.replicates(self.d, causeway_core::PartitionId(p)));
        let gst = (hosts_any && self.flavor == Flavor::Paris).then(|| *self.dc_vv.stable());
        let oldest = self.dc_oldest.meet_of_reports().unwrap_or(0);
        self.dc_gst.report(self.me, gst);
        self.dc_gc.report(self.me, Some(oldest));
        let roots: Vec<NodeId> = self
            .topo
            .all_dcs()
            .filter(|x| *x != self.d)
            .map(|x| root_of(&self.topo, x))
            .collect();
        for r in roots {
            let m = Msg::Gst { gst, oldest };
            self.traffic.ust_inter_dc += wire_len(&m);
            ctx.send(Addr::Node(r), m);
        }
        let ust = match (self.mutation.ust_ignores_remote_dc, gst) {
            (true, Some(g)) => g,
            _ => *self.dc_gst.stable(),
        };
        let gc = self.dc_gc.meet_of_reports().unwrap_or(0);
        for n in self.topo.nodes_in_dc(self.d).collect::<Vec<_>>() {
            let m = Msg::Ust { ust, gc };
            if n == self.me {
                self.on_ust(ust, gc);
            } else {
                self.traffic.ust_intra_dc += wire_len(&m);
                ctx.send(Addr::Node(n), m);
            }
        }
    }

    pub(super) fn on_stable(&mut self, from: NodeId, vv_min: Option<u64>, oldest: u64) {
        self.work += 2;
        self.dc_vv.report(from, vv_min);
        self.dc_oldest.report(from, Some(oldest));
    }

    pub(super) fn on_gst(&mut self, from: NodeId, gst: Option<u64>, oldest: u64) {
        self.work += 2;
        self.dc_gst.report(from, gst);
        self.dc_gc.report(from, Some(oldest));
    }

    /// The root's UST and GC point (Alg. 4 l.38: `ust` only grows).
    pub(super) fn on_ust(&mut self, ust: u64, gc: u64) {
        if self.flavor == Flavor::Paris {
            self.ust = self.ust.max(ust);
        }
        self.gc_point = gc;
    }

    /// Samples how long applied txns took to become visible to new snapshots here
    /// (Fig. 5): PaRiS once the UST covers them; BPR once every replica's txns up to
    /// them are applied (a read at their time no longer blocks); NoCC at once.
    fn note_visible(&mut self) {
        let (clock, ust, flavor) = (self.time.clock, self.ust, self.flavor);
        let mut seen = Vec::new();
        for part in self.parts.values_mut() {
            let bound = match flavor {
                Flavor::Paris => ust,
                Flavor::Bpr => part.vv_min(),
                Flavor::Nocc => u64::MAX,
            };
            part.unseen.retain(|(at, ct)| {
                let visible = *ct <= bound;
                if visible {
                    seen.push(clock.saturating_sub(*at));
                }
                !visible
            });
        }
        for v in seen {
            self.sample("visibility_ns", v);
        }
    }

    /// Folds versions at or below the global oldest snapshot (never above what the
    /// partition installed, so nothing can still arrive below the fold).
    fn gc_store(&mut self) {
        for part in self.parts.values_mut() {
            let installed = part.vv_min();
            // Fold only what every sibling replica installed too: a checkpoint then never
            // holds a version a state transfer lacks (`transfer.rs`).
            let mut point = self.gc_point;
            if let Some(all) = part.sibs.acked_by_all() {
                let others = part.replicas.iter().filter(|k| **k != part.me);
                let acked = others.map(|k| all.get(usize::from(k.0))).min();
                point = point.min(acked.unwrap_or(u64::MAX));
            }
            part.store.gc(&point, &installed);
        }
    }
}
