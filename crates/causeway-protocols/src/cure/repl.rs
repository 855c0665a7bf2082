//! Replication between sibling partitions of different DCs (Cure Alg. 2 l.18-37) with
//! acknowledgement-driven catch-up and relaying, and the GSS / GC exchange between the
//! nodes of a DC (Alg. 2 l.39-46, §III-D).

use super::msg::{Msg, ReplTxn, Stream};
use super::node::{Deferred, Node};
use super::record::Record;
use causeway_core::limits::REPLICATION_BATCH_MAX;
use causeway_core::{Addr, Ctx, DcId, NodeId, PartitionId, SessionId, TxnId, Vc};
use std::collections::BTreeMap;

const TXN_MIN: TxnId = TxnId {
    session: SessionId(0),
    seq: 0,
};

/// The txns of `log` with `from < ct[origin] <= upto`, at most about
/// `REPLICATION_BATCH_MAX` (cut between two commit times), and the `upto` they complete.
fn stream_of(
    log: Option<&BTreeMap<(u64, TxnId), ReplTxn>>,
    origin: u16,
    from: u64,
    upto: u64,
) -> Stream {
    let mut txns: Vec<ReplTxn> = log
        .map(|l| {
            l.range((from + 1, TXN_MIN)..)
                .take_while(|((t, _), _)| *t <= upto)
                .map(|(_, t)| t.clone())
                .collect()
        })
        .unwrap_or_default();
    let mut upto = upto;
    if txns.len() > REPLICATION_BATCH_MAX {
        let o = usize::from(origin);
        let cut = txns[REPLICATION_BATCH_MAX].ct.get(o);
        if cut - 1 > from {
            upto = cut - 1;
            txns.retain(|t| t.ct.get(o) <= upto);
        }
    }
    Stream {
        origin,
        from,
        upto,
        txns,
    }
}

impl Node {
    /// Every replication interval, per partition and sibling (Alg. 2 l.18-37).
    pub(super) fn replicate(&mut self, ctx: &mut Ctx<Msg>) {
        let pids: Vec<PartitionId> = self.parts.keys().copied().collect();
        for pid in pids {
            let (d, clock, lease) = (self.d, self.time.last, self.time.lease);
            let ignore = self.mutation.pvc_ignores_prepared;
            let part = self.parts.get_mut(&pid).expect("hosted");
            let pvc_d = part.pvc_local(d, clock, lease, ignore); // Alg. 2 l.19-21
            let sibs: Vec<u16> = part.sibs.keys().copied().collect();
            for s in sibs {
                self.replicate_to(ctx, pid, s, pvc_d);
            }
            self.gc_log(pid);
        }
    }

    fn replicate_to(&mut self, ctx: &mut Ctx<Msg>, pid: PartitionId, s: u16, pvc_d: u64) {
        let (d, clock) = (self.d as u16, self.time.clock);
        let to = Addr::Node(self.topo.node_of(DcId(s), pid));
        let restarted = self.announce.remove(&(pid, s));
        let part = self.parts.get_mut(&pid).expect("hosted");
        let relays = lagging(part, d, s, clock, self.cfg.lag_grace_ns);
        let sib = part.sibs.get_mut(&s).expect("sibling");
        let own = match sib.sent_upto {
            // Alg. 2 l.23-31: committed txns with ct[d] <= pvc[d] in commit-time order,
            // or a heartbeat (l.25) when there are none.
            Some(u) if pvc_d > u => Some(stream_of(part.log.get(&d), d, u, pvc_d)),
            _ => None,
        };
        if let Some(st) = &own {
            sib.sent_upto = Some(st.upto);
        }
        let acks = part.pvc.clone();
        let mut msgs = vec![Msg::Repl {
            partition: pid,
            restarted,
            acks: acks.clone(),
            stream: own,
        }];
        for (o, from) in relays {
            let upto = part.pvc.get(usize::from(o));
            let st = stream_of(part.log.get(&o), o, from, upto);
            msgs.push(Msg::Repl {
                partition: pid,
                restarted: false,
                acks: acks.clone(),
                stream: Some(st),
            });
        }
        for m in msgs {
            ctx.send(to, m);
        }
    }

    /// Drops log entries every live sibling acknowledged (the origin itself excepted).
    fn gc_log(&mut self, pid: PartitionId) {
        let clock = self.time.clock;
        let part = self.parts.get_mut(&pid).expect("hosted");
        for (o, log) in part.log.iter_mut() {
            let bound = part
                .sibs
                .iter()
                .filter(|(s, sib)| {
                    **s != *o
                        && !(sib.last_heard > 0
                            && clock.saturating_sub(sib.last_heard) > self.cfg.silent_sibling_ns)
                })
                .map(|(_, sib)| {
                    if sib.last_heard == 0 {
                        0
                    } else {
                        sib.acks.get(usize::from(*o))
                    }
                })
                .min()
                .unwrap_or(u64::MAX);
            while log.first_key_value().is_some_and(|((t, _), _)| *t <= bound) {
                log.pop_first();
            }
        }
    }

    pub(super) fn on_repl(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: NodeId,
        pid: PartitionId,
        restarted: bool,
        acks: Vc,
        stream: Option<Stream>,
    ) {
        let s = self.topo.dc_of(from).0;
        let (d, clock) = (self.d, self.time.clock);
        let Some(part) = self.parts.get_mut(&pid) else {
            return;
        };
        let Some(sib) = part.sibs.get_mut(&s) else {
            return;
        };
        sib.acks = acks;
        sib.last_heard = clock.max(1);
        if restarted || sib.sent_upto.is_none() {
            // It lost what was in flight: stream again from what it has.
            sib.sent_upto = Some(sib.acks.get(d));
            sib.probes.clear();
        }
        if let Some(st) = stream {
            self.accept(ctx, pid, st);
        }
    }

    /// Takes a stream piece if it continues what we have (no gaps); duplicates are dropped,
    /// new txns persisted, and `pvc[origin]` advances once they are durable.
    fn accept(&mut self, ctx: &mut Ctx<Msg>, pid: PartitionId, st: Stream) {
        let o = usize::from(st.origin);
        let part = self.parts.get_mut(&pid).expect("hosted");
        if o == self.d || st.from > part.have[o] || st.upto <= part.have[o] {
            return;
        }
        let have = part.have[o];
        let new: Vec<ReplTxn> = st.txns.into_iter().filter(|t| t.ct.get(o) > have).collect();
        part.have[o] = st.upto;
        for t in &new {
            if part.unseen.len() < super::part::UNSEEN_MAX {
                part.unseen.push((st.origin, t.ct.clone()));
            }
            part.add_committed(st.origin, t.clone()); // Alg. 2 l.33-37
        }
        let record = Record::Remote {
            partition: pid,
            origin: st.origin,
            upto: st.upto,
            txns: new,
        };
        self.persist(ctx, record, Vec::new());
        self.after_durable(Deferred::Remote {
            partition: pid,
            origin: st.origin,
            upto: st.upto,
        });
    }

    /// Every stabilization interval: tell the DC's other nodes our min `pvc` (UPDATE_GSS,
    /// Alg. 2 l.41) and our oldest snapshot; fold versions below the DC's oldest one.
    pub(super) fn stabilize(&mut self, ctx: &mut Ctx<Msg>) {
        let (d, clock, lease) = (self.d, self.time.last, self.time.lease);
        let ignore = self.mutation.pvc_ignores_prepared;
        let mut pvc: Option<Vc> = None;
        for part in self.parts.values_mut() {
            part.pvc_local(d, clock, lease, ignore);
            match &mut pvc {
                Some(v) => v.meet(&part.pvc),
                None => pvc = Some(part.pvc.clone()),
            }
        }
        let oldest = self.oldest_snapshot();
        self.gss.report(self.me, pvc.clone());
        self.oldest.report(self.me, Some(oldest.clone()));
        for n in self.dc_nodes().into_iter().filter(|n| *n != self.me) {
            let m = Msg::Stable {
                pvc: pvc.clone(),
                gss: self.gss.stable().clone(),
                oldest: oldest.clone(),
            };
            ctx.send(Addr::Node(n), m);
        }
        self.after_gossip(ctx);
        // GSS lag: how far the oldest remote entry trails our clock (once all are known).
        let gss = self.gss.stable();
        let remote: Vec<u64> = (0..gss.dcs.len())
            .filter(|k| *k != d)
            .map(|k| gss.get(k))
            .collect();
        if let Some(min) = remote.iter().copied().min().filter(|m| *m > 0) {
            let lag = self.time.clock.saturating_sub(min);
            self.sample("gss_lag_ns", lag);
        }
        self.gc_store();
    }

    pub(super) fn on_stable(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: NodeId,
        pvc: Option<Vc>,
        gss: Vc,
        oldest: Vc,
    ) {
        self.gss.report(from, pvc);
        self.oldest.report(from, Some(oldest));
        self.gss.adopt(&gss); // its GSS is a DC-wide claim too
        self.after_gossip(ctx);
    }

    /// The GSS (the entry-wise min of every node's reported pvc, Alg. 2 l.43-46, kept
    /// monotonic by `kit::gossip`) may have advanced: remote txns may be visible now and
    /// START requests may go on.
    fn after_gossip(&mut self, ctx: &mut Ctx<Msg>) {
        self.note_visible();
        self.try_starts(ctx);
    }

    /// Samples how long remote txns took to become visible here (clock vs ct[origin]).
    fn note_visible(&mut self) {
        let (d, clock) = (self.d, self.time.clock);
        let gss = self.gss.stable().clone();
        let mut seen = Vec::new();
        for part in self.parts.values_mut() {
            part.unseen.retain(|(o, ct)| {
                let visible = (0..ct.dcs.len()).all(|k| k == d || ct.get(k) <= gss.get(k));
                if visible {
                    seen.push(clock.saturating_sub(ct.get(usize::from(*o))));
                }
                !visible
            });
        }
        for v in seen {
            self.sample("remote_visibility_ns", v);
        }
    }

    fn gc_store(&mut self) {
        // The DC's oldest snapshot in use: the meet of every node's report.
        let Some(point) = self.oldest.meet_of_reports() else {
            return;
        };
        // Forced folds (past VERSIONS_PER_KEY_MAX) stay below what every partition of the
        // DC has (the GSS): above it a failed DC's txns may never become visible, and a
        // checkpoint there would make every later snapshot "too old".
        let d = self.d;
        for part in self.parts.values_mut() {
            let mut durable = self.gss.stable().clone();
            durable.set(d, part.pvc.get(d));
            durable.meet(&part.pvc);
            part.store.gc(&point, &durable);
        }
    }
}

/// Origins a sibling lags on for longer than the grace period while it keeps talking:
/// for our own origin we rewind our stream to its ack; for a third DC we relay from our
/// log. Returns the relays to send as (origin, from).
fn lagging(
    part: &mut super::part::Part,
    d: u16,
    s: u16,
    clock: u64,
    grace: u64,
) -> Vec<(u16, u64)> {
    let mut relays = Vec::new();
    let pvc = part.pvc.clone();
    let sib = part.sibs.get_mut(&s).expect("sibling");
    if sib.last_heard == 0 {
        return relays;
    }
    let talking = clock.saturating_sub(sib.last_heard) < grace;
    for o in (0..pvc.dcs.len() as u16).filter(|o| *o != s) {
        let ack = sib.acks.get(usize::from(o));
        let level = if o == d {
            sib.sent_upto.unwrap_or(0)
        } else {
            pvc.get(usize::from(o))
        };
        match sib.probes.get(&o).copied() {
            None if ack < level => {
                sib.probes.insert(o, (clock, level));
            }
            Some((_, target)) if ack >= target => {
                sib.probes.remove(&o);
            }
            Some((since, _)) if talking && clock.saturating_sub(since) > grace => {
                sib.probes.remove(&o);
                if o == d {
                    sib.sent_upto = Some(ack);
                } else {
                    relays.push((o, ack));
                }
            }
            _ => {}
        }
    }
    relays
}
