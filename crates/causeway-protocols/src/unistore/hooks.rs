//! UniStore's state on the Cure engine and the hooks through which the engine runs it
//! ([`Extension`]): uniformity (`uniform.rs`) and strong transactions (`strong.rs`,
//! `strong_gc.rs`, `strong_transfer.rs`) on `Node<UniExt>`.

use super::state::{Strong, StrongConfig, StrongStep};
use crate::cure::ext::{Extension, Refused, TransferPlan};
use crate::cure::msg::Msg;
use crate::cure::node::Node;
use crate::cure::part::Waiting;
use crate::cure::record::{GroupCheckpoint, Record};
use crate::cure::types::Timer;
use crate::cure::{Flavor, UNISTORE_MUTATIONS};
use crate::kit::certify::StrongImage;
use crate::kit::uniform::Uniform;
use causeway_core::clock::Extra;
use causeway_core::{Addr, Ctx, DcId, Nanos, PartitionId, TxnId, Vc};

/// UniStore's state in a node of the engine.
#[derive(Debug)]
pub struct UniExt {
    /// DC failures tolerated.
    pub(crate) f: usize,
    /// The stable matrix and `uniformVec`.
    pub(crate) uniform: Uniform,
    /// Strong txns: certification groups and recoveries (`None` with strong txns off).
    pub(crate) strong: Option<Strong>,
    /// The strong-transaction tunables.
    pub(crate) cfg: StrongConfig,
}

impl UniExt {
    /// The state of a node of DC `d` of `dcs`, tolerating `f` DC failures (which needs
    /// more than `f` DCs).
    pub fn new(dcs: usize, d: usize, f: usize, cfg: StrongConfig) -> Result<UniExt, String> {
        if f >= dcs {
            return Err(format!(
                "unistore: f = {f} needs at least f+1 = {} DCs, the cluster has {dcs}",
                f + 1
            ));
        }
        Ok(UniExt {
            f,
            uniform: Uniform::new(dcs, d, f),
            strong: cfg.enabled.then(Default::default),
            cfg,
        })
    }
}

impl Extension for UniExt {
    type TxnStep = StrongStep;

    fn name(&self, _: Flavor) -> &'static str {
        "unistore"
    }

    fn mutations(&self, _: Flavor) -> &'static [&'static str] {
        UNISTORE_MUTATIONS
    }

    fn strong_entry(&self) -> bool {
        true
    }

    fn strong_txns(&self) -> bool {
        self.strong.is_some()
    }

    fn uniform(&self) -> bool {
        true
    }

    fn visible_vec(node: &Node<Self>) -> &Vc {
        node.ext.uniform.vec()
    }

    fn snapshot(node: &mut Node<Self>, cvc: &Vc) -> Vc {
        node.unistore_snapshot(cvc)
    }

    fn oldest_bound(node: &Node<Self>, oldest: &mut Vc) {
        if node.ext.strong.is_some() {
            // Future snapshots' strong entry is at least stableVec[strong] (Alg. 1 l.7).
            oldest.set_extra(Extra::Strong, node.stable_strong());
        }
    }

    fn adopt_remote(node: &mut Node<Self>, v: &Vc) {
        node.ext.uniform.adopt_remote(v);
    }

    fn wait_holds(node: &Node<Self>, past: &Vc, attach: bool) -> bool {
        node.uniform_wait_holds(past, attach)
    }

    fn stabilized(node: &mut Node<Self>, ctx: &mut Ctx<Msg>) {
        node.broadcast_stable(ctx);
    }

    fn gossip_heard(node: &mut Node<Self>, ctx: &mut Ctx<Msg>) {
        node.refresh_uniform(ctx);
    }

    fn on_message(node: &mut Node<Self>, ctx: &mut Ctx<Msg>, from: Addr, msg: Msg) {
        let from_node = match from {
            Addr::Node(n) => n,
            Addr::Client(_) => node.me,
        };
        match msg {
            Msg::StableVec { stable } => {
                let from_dc = node.topo.dc_of(from_node);
                node.on_stable_vec(ctx, from_dc, stable)
            }
            Msg::StrongEffects {
                txn,
                partition,
                svc,
                updates,
            } => {
                let w = Waiting::Effects {
                    coord: from_node,
                    txn,
                    svc,
                    updates,
                };
                node.park(ctx, partition, w);
            }
            Msg::Effects {
                txn,
                partition,
                result,
            } => node.on_effects(ctx, txn, partition, result),
            Msg::CertPrepare {
                partition,
                t,
                forwarded,
            } => node.on_cert_prepare(ctx, partition, t, forwarded),
            Msg::CertVote {
                txn,
                partition,
                vote,
            } => {
                let answer = vote.map_err(Err);
                node.on_cert_answer(ctx, from_node, txn, partition, answer)
            }
            Msg::CertDecided {
                txn,
                partition,
                commit,
            } => node.on_cert_answer(ctx, from_node, txn, partition, Err(Ok(commit))),
            Msg::CertAck {
                txn,
                partition,
                ballot,
                vote,
            } => node.on_cert_ack(ctx, from_node, txn, partition, ballot, vote),
            Msg::CertDecide {
                txn,
                partition,
                commit,
                forwarded,
            } => node.on_cert_decide(ctx, txn, partition, commit, forwarded),
            Msg::CertQuery { txn, partition } => node.on_cert_query(ctx, from_node, txn, partition),
            Msg::Paxos { partition, msg } => node.on_paxos(from_node, partition, msg),
            Msg::StrongGc { partition, below } => node.on_strong_gc(partition, below),
            _ => {}
        }
    }

    fn start(node: &mut Node<Self>, ctx: &mut Ctx<Msg>) {
        if node.ext.strong.is_some() {
            let phase_ns = node.params.timer_phase_ns % node.ext.cfg.heartbeat_ns.max(1);
            node.timers.set(Timer::Ext, node.time.clock + phase_ns);
            node.start_strong(ctx);
        }
    }

    fn tick(node: &mut Node<Self>, ctx: &mut Ctx<Msg>) {
        let every = node.ext.cfg.heartbeat_ns;
        node.timers.set(Timer::Ext, node.time.clock + every);
        node.strong_tick(ctx);
    }

    fn timeouts(node: &mut Node<Self>) {
        node.strong_timeouts();
    }

    fn pump(node: &mut Node<Self>, ctx: &mut Ctx<Msg>) {
        node.pump_strong(ctx);
    }

    fn deadline(node: &Node<Self>) -> Option<Nanos> {
        node.strong_deadline()
    }

    fn persisted(node: &mut Node<Self>, partition: PartitionId, seq: u64) {
        node.strong_persisted(partition, seq);
    }

    fn replay(node: &mut Node<Self>, record: Record) {
        match record {
            Record::Paxos { partition, record } => {
                if let Some(st) = node.ext.strong.as_mut() {
                    st.recovered.entry(partition).or_default().push(record);
                }
            }
            Record::StrongImage {
                partition,
                from,
                image,
            } => node.replay_strong_image(partition, from, *image),
            _ => unreachable!("the engine replays its own records"),
        }
    }

    fn check_invariants(node: &Node<Self>) -> Result<(), String> {
        node.check_strong_invariants()
    }

    fn gauges(node: &Node<Self>, out: &mut Vec<(&'static str, f64)>) {
        if node.ext.strong.is_some() {
            out.push(("cert_log_slots", node.cert_log_slots() as f64));
        }
    }

    fn checkpoint(node: &Node<Self>) -> Option<Vec<GroupCheckpoint>> {
        node.strong_checkpoint()
    }

    fn restore(node: &mut Node<Self>, groups: Vec<GroupCheckpoint>) {
        node.restore_strong(groups);
    }

    fn commit_other(node: &mut Node<Self>, ctx: &mut Ctx<Msg>, txn: TxnId, req: u64) {
        node.commit_strong(ctx, txn, req);
    }

    fn transfer_wanted(node: &mut Node<Self>, pid: PartitionId, s: DcId) -> bool {
        node.take_transfer_wanted(pid, s)
    }

    fn on_transfer_ask(node: &mut Node<Self>, pid: PartitionId, s: DcId) {
        node.on_transfer_ask(pid, s);
    }

    fn take_transfer_image(
        node: &mut Node<Self>,
        pid: PartitionId,
        s: DcId,
        id: u64,
    ) -> Result<(), Refused> {
        node.take_strong_image(pid, s, id).map_err(|()| Refused)
    }

    fn transfer_image(
        node: &mut Node<Self>,
        pid: PartitionId,
        s: DcId,
        id: u64,
        index: u32,
    ) -> Option<Box<StrongImage>> {
        node.strong_part(pid, s, id, index)
    }

    fn transfer_refused(node: &Node<Self>, pid: PartitionId, image: Option<&StrongImage>) -> bool {
        node.strong_part_refused(pid, image).is_err()
    }

    fn hold_transfer_image(
        node: &mut Node<Self>,
        ctx: &mut Ctx<Msg>,
        pid: PartitionId,
        s: DcId,
        image: Option<Box<StrongImage>>,
    ) {
        node.hold_strong_image(ctx, pid, s, image);
    }

    fn transfer_plan(
        node: &mut Node<Self>,
        pid: PartitionId,
        s: DcId,
        id: u64,
    ) -> Result<TransferPlan, Refused> {
        node.strong_plan(pid, s, id).map_err(|_| Refused)
    }

    fn adopt_transfer(
        node: &mut Node<Self>,
        ctx: &mut Ctx<Msg>,
        pid: PartitionId,
        image: StrongImage,
    ) {
        node.adopt_strong(ctx, pid, image);
    }

    fn replay_adopted(node: &mut Node<Self>, pid: PartitionId, s: DcId, id: u64) {
        node.replay_adopted(pid, s, id);
    }
}
