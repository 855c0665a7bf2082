//! Replication between sibling partitions of different DCs (Cure Alg. 2 l.18-37) with
//! acknowledgement-driven catch-up and relaying (the streams, log and sibling bookkeeping
//! are `kit::repl`), and the GSS / GC exchange between the nodes of a DC (Alg. 2 l.39-46,
//! §III-D; the gossip is `kit::gossip`).

use super::ext::Extension;
use super::msg::{Msg, Stream};
use super::node::Node;
use super::record::Record;
use super::types::Deferred;
use super::wire::{CompactTxns, SharedStream};
use causeway_core::limits::REPLICATION_BATCH_MAX;
use causeway_core::{Addr, Ctx, DcId, NodeId, PartitionId, Vc};

impl<X: Extension> Node<X> {
    /// Every replication interval, per partition and sibling (Alg. 2 l.18-37).
    pub(crate) fn replicate(&mut self, ctx: &mut Ctx<Msg>) {
        let pids: Vec<PartitionId> = self.parts.keys().copied().collect();
        for pid in pids {
            let (d, clock, lease) = (self.d, self.time.last, self.time.lease);
            let ignore = self.mutation.pvc_ignores_prepared;
            let part = self.parts.get_mut(&pid).expect("hosted");
            let pvc_d = part.pvc_local(d, clock, lease, ignore); // Alg. 2 l.19-21
            let mut made = None;
            for s in part.sibs.ids() {
                self.replicate_to(ctx, pid, s, pvc_d, &mut made);
                self.transfer_to(ctx, pid, s);
            }
            self.gc_log(pid);
        }
    }

    /// Our stream (or a heartbeat) to sibling `s`, plus any catch-up it needs
    /// (`kit::repl`): every message carries our `pvc` as acknowledgement. `made` is the
    /// piece of our stream this tick made for another sibling, reused if `s` goes on from
    /// the same point (the usual case: then the piece is encoded once for all, `wire.rs`).
    fn replicate_to(
        &mut self,
        ctx: &mut Ctx<Msg>,
        pid: PartitionId,
        s: DcId,
        pvc_d: u64,
        made: &mut Option<SharedStream>,
    ) {
        let (clock, grace) = (self.time.clock, self.cfg.lag_grace_ns);
        let to = Addr::Node(self.topo.node_of(s, pid));
        let restarted = self.announce.remove(&(pid, s));
        let part = self.parts.get_mut(&pid).expect("hosted");
        let mut relays = part.sibs.lagging(s, &part.pvc, clock, grace);
        if self.mutation.no_forwarding {
            relays.clear(); // relays are a third DC's txns: forwarding (§5.5)
        }
        // Alg. 2 l.23-31: committed txns with ct[d] <= pvc[d] in commit-time order, or a
        // heartbeat (l.25) when there are none.
        let own = part
            .sibs
            .own_piece(s, &part.log, pvc_d, REPLICATION_BATCH_MAX, made);
        let acks = part.pvc.clone();
        let mut msgs = vec![Msg::Repl {
            partition: pid,
            restarted,
            acks: acks.clone(),
            stream: own,
        }];
        // A relay from below what the log dropped would claim txns it no longer has.
        relays.retain(|(o, from)| part.log.serves_from(*o, *from));
        for (o, from) in relays {
            let upto = part.pvc.get(usize::from(o.0));
            let st = part.log.stream(o, from, upto, REPLICATION_BATCH_MAX);
            msgs.push(Msg::Repl {
                partition: pid,
                restarted: false,
                acks: acks.clone(),
                stream: Some(SharedStream::new(st)),
            });
        }
        for m in msgs {
            ctx.send(to, m);
        }
    }

    /// Drops log entries every live sibling acknowledged (the origin itself excepted).
    fn gc_log(&mut self, pid: PartitionId) {
        let (clock, silent) = (self.time.clock, self.cfg.silent_sibling_ns);
        let kept_max = self.cfg.silent_sibling_log_max;
        let part = self.parts.get_mut(&pid).expect("hosted");
        let sibs = &part.sibs;
        part.log.gc_acknowledged(sibs, clock, silent, kept_max);
    }

    pub(crate) fn on_repl(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: NodeId,
        pid: PartitionId,
        restarted: bool,
        acks: Vc,
        stream: Option<SharedStream>,
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
            let (st, bytes) = piece.into_parts();
            self.accept(ctx, pid, st, bytes);
        }
    }

    /// Takes a stream piece if it continues what we have (no gaps); duplicates are dropped,
    /// new txns persisted, and `pvc[origin]` advances once they are durable. `bytes`: the
    /// piece as it came, if it kept them (a piece taken whole is written as them).
    fn accept(&mut self, ctx: &mut Ctx<Msg>, pid: PartitionId, st: Stream, bytes: Option<Vec<u8>>) {
        let (origin, upto, sent) = (st.origin, st.upto, st.txns.len());
        let part = self.parts.get_mut(&pid).expect("hosted");
        let Some(mut new) = part.received.accept(st) else {
            return;
        };
        // Txns a state transfer already brought (`transfer.rs`).
        let transferred = &part.transfers.transferred;
        new.retain(|t| !transferred.contains_key(&t.txn));
        let d = self.d;
        let received = &part.received;
        part.transfers.prune(|ct| {
            (0..ct.dcs.len()).all(|k| k == d || ct.get(k) <= received.have(DcId(k as u16)))
        });
        self.work += new.iter().map(|t| t.ops.len() as u64).sum::<u64>();
        if new.is_empty() {
            // A heartbeat (Alg. 2 l.25): no record. Its `pvc[origin]` waits only for the
            // records before it (the stream's earlier txns) to be durable. A crash takes
            // the mark back to the stream's last durable record, and that is safe: the
            // origin promised no txn of this stream in between, so a snapshot the DC's GSS
            // already gave out still reads every txn it covers here; the stream resumes
            // from the durable mark, and the origin's log serves it (it drops only txns
            // every sibling acknowledged, and we acknowledged none above a durable record
            // holding it). An idle node writes nothing: before, it synced every tick.
            self.after_durable(Deferred::Remote {
                partition: pid,
                origin,
                upto,
            });
            return;
        }
        // Taken whole: `received.accept` keeps a suffix and `retain` a subset, so the same
        // count is the same txns.
        let broken = self.mutation.piece_record_whole;
        let whole = bytes.filter(|_| new.len() == sent || broken);
        self.persist_remote(ctx, pid, (origin, upto), new, whole);
    }

    /// Persists what a stream piece brought and applies it (Alg. 2 l.33-37); `pvc[origin]`
    /// advances once it is durable (so a crash cannot take back a `pvc` the DC's GSS
    /// already used). The txns are encoded into the record, then moved into the store and
    /// the log, not copied (a copy cost each txn an allocation of its commit vector); a
    /// piece taken whole (`piece`: its bytes as they came) is written as those bytes, not
    /// encoded again (`Record::RemotePiece`: a replica's record encode was a tenth of
    /// what a replicated txn cost it, BENCHMARKS.md).
    fn persist_remote(
        &mut self,
        ctx: &mut Ctx<Msg>,
        pid: PartitionId,
        (origin, upto): (DcId, u64),
        txns: Vec<super::msg::ReplTxn>,
        piece: Option<Vec<u8>>,
    ) {
        let (bytes, txns) = match piece {
            Some(piece) => {
                let piece = serde_bytes::ByteBuf::from(piece);
                let record = Record::RemotePiece {
                    partition: pid,
                    piece,
                };
                (record.encode(), txns)
            }
            None => Self::remote_txns_record(pid, origin, upto, txns),
        };
        let part = self.parts.get_mut(&pid).expect("hosted");
        for t in txns {
            if part.unseen.len() < super::part::UNSEEN_MAX {
                part.unseen.push((origin, t.ct.clone()));
            }
            part.add_committed(origin, t); // Alg. 2 l.33-37
        }
        self.durability.persist(ctx, bytes, Vec::new());
        self.after_durable(Deferred::Remote {
            partition: pid,
            origin,
            upto,
        });
    }

    /// A `RemoteTxns` record of `txns` and the txns back, moved through the record.
    fn remote_txns_record(
        pid: PartitionId,
        origin: DcId,
        upto: u64,
        txns: Vec<super::msg::ReplTxn>,
    ) -> (Vec<u8>, Vec<super::msg::ReplTxn>) {
        let record = Record::RemoteTxns {
            partition: pid,
            origin,
            upto,
            txns: CompactTxns(txns),
        };
        let bytes = record.encode();
        let Record::RemoteTxns {
            txns: CompactTxns(txns),
            ..
        } = record
        else {
            unreachable!("the record just built");
        };
        (bytes, txns)
    }

    /// Every stabilization interval: tell the DC's other nodes our min `pvc` (UPDATE_GSS,
    /// Alg. 2 l.41) and our oldest snapshot; fold versions below the DC's oldest one.
    pub(crate) fn stabilize(&mut self, ctx: &mut Ctx<Msg>) {
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
        X::stabilized(self, ctx);
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

    pub(crate) fn on_stable(
        &mut self,
        ctx: &mut Ctx<Msg>,
        from: NodeId,
        pvc: Option<Vc>,
        gss: Vc,
        oldest: Vc,
    ) {
        self.work += 3 * self.gss.stable().dcs.len() as u64; // three vectors merged
        self.gss.report(from, pvc);
        self.oldest.report(from, Some(oldest));
        self.gss.adopt(&gss); // its GSS is a DC-wide claim too
        self.after_gossip(ctx);
        X::gossip_heard(self, ctx);
    }

    /// The GSS (the entry-wise min of every node's reported pvc, Alg. 2 l.43-46, kept
    /// monotonic by `kit::gossip`) may have advanced: remote txns may be visible now and
    /// START, ATTACH and UNIFORM_BARRIER requests may go on.
    fn after_gossip(&mut self, ctx: &mut Ctx<Msg>) {
        self.raise_to_gss();
        self.note_visible();
        self.try_starts(ctx);
        self.serve_client_waits(ctx);
    }

    /// A restarted node's streams are back at their last durable records (a heartbeat
    /// writes none: `accept`), and the DC's GSS, adopted from the others, may be above
    /// them. Every txn of origin `k` at or below `gss[k]` is here, durably: the GSS is at
    /// most the `pvc` we reported before the crash, and every txn at or below a `pvc` was
    /// durable (a heartbeat's `pvc` waits for the records before it). So the partition's
    /// `pvc[k]` and its stream's mark go up to the GSS (the origin has no txn of the stream
    /// in between). Without a restart this changes nothing: the GSS is a minimum of `pvc`s.
    pub(crate) fn raise_to_gss(&mut self) {
        let (d, gss) = (self.d, self.gss.stable());
        for part in self.parts.values_mut() {
            for k in (0..gss.dcs.len()).filter(|k| *k != d) {
                let g = gss.get(k);
                if g > part.pvc.get(k) {
                    part.pvc.set(k, g);
                    part.received.recovered(DcId(k as u16), g);
                }
            }
        }
    }

    /// Samples how long remote txns took to become visible here (clock vs ct[origin]).
    /// Under UniStore a txn stable here waits for uniformity (`uniform.rs` samples it).
    fn note_visible(&mut self) {
        let (d, clock) = (self.d, self.time.clock);
        let uni = self.ext.uniform();
        let gss = self.gss.stable().clone();
        let mut seen = Vec::new();
        for part in self.parts.values_mut() {
            let mut stable = Vec::new();
            part.unseen.retain(|(o, ct)| {
                let visible = (0..ct.dcs.len()).all(|k| k == d || ct.get(k) <= gss.get(k));
                if visible && uni {
                    stable.push((*o, ct.clone(), clock));
                } else if visible {
                    seen.push(clock.saturating_sub(ct.get(usize::from(o.0))));
                }
                !visible
            });
            let room = super::part::UNSEEN_MAX.saturating_sub(part.stable_unseen.len());
            part.stable_unseen.extend(stable.into_iter().take(room));
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
            // Fold only what every sibling acknowledged: a checkpoint then never holds a
            // txn a sibling's state transfer lacks (`transfer.rs`). Forced folds (a key
            // past VERSIONS_PER_KEY_MAX) still use `durable`, so memory stays bounded.
            let mut point = point.clone();
            if let Some(all) = part.sibs.acked_by_all() {
                for k in 0..point.dcs.len() {
                    point.set(k, point.get(k).min(all.get(k)));
                }
            }
            part.store.gc(&point, &durable);
        }
    }
}
