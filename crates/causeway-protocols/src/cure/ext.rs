//! The engine's extension point: a protocol built on Cure's engine (UniStore,
//! `crate::unistore`) is the engine's [`Node`] with its own state as the type parameter,
//! a type implementing [`Extension`]. The engine calls the hooks where the extension
//! may change or add to what it does: the snapshot of a START and the visible vector,
//! the GC bound of future snapshots, adopting a snapshot's remote entries, uniform
//! barriers, its own messages, timers and invariants, its part of checkpoints and state
//! transfers, and commits of txns the engine does not commit itself (strong ones). Every
//! hook has the behavior of Cure and CureFt as its default, so [`Plain`] (no extension)
//! implements none of them, and the engine knows no protocol beyond them.
//!
//! The hooks are associated functions taking the whole node: an extension reads and
//! changes the engine's state as the engine's own handlers do.

use super::config::Flavor;
use super::msg::Msg;
use super::node::Node;
use super::record::{GroupCheckpoint, Record};
use crate::kit::certify::StrongImage;
use causeway_core::{Addr, Ctx, DcId, Nanos, PartitionId, TxnId, Vc};

/// What a state transfer's receiver adopts beyond the partition's images: an image of
/// the extension's state and the txns whose versions the adopted state brings again.
pub type TransferPlan = Option<(StrongImage, Vec<TxnId>)>;

/// The extension cannot go on with a state transfer (now, or with the image it got).
#[derive(Debug)]
pub struct Refused;

/// Hooks of a protocol built on Cure's engine (module doc). The defaults are Cure's
/// and CureFt's behavior.
pub trait Extension: Sized {
    /// The state of a txn whose commit the extension runs ([`Extension::commit_other`]),
    /// held in the coordinator's txn (`coord.rs`, `Step::Ext`). UniStore: a strong
    /// txn's COMMIT_STRONG; Cure: none (`Infallible`).
    type TxnStep: std::fmt::Debug;

    /// The protocol's name (errors, sessions): the flavor's by default.
    fn name(&self, flavor: Flavor) -> &'static str {
        flavor.name()
    }

    /// The mutations the protocol runs.
    fn mutations(&self, flavor: Flavor) -> &'static [&'static str] {
        flavor.mutations()
    }

    /// Whether the vectors carry a strong entry (`Extra::Strong`).
    fn strong_entry(&self) -> bool {
        false
    }

    /// Whether START accepts strong txns (they commit by [`Extension::commit_other`]).
    fn strong_txns(&self) -> bool {
        false
    }

    /// Whether uniformity is tracked: remote txns stable here still wait to be visible,
    /// and uniform barriers are served.
    fn uniform(&self) -> bool {
        false
    }

    /// The vector whose remote entries snapshots take (the GSS by default).
    fn visible_vec(node: &Node<Self>) -> &Vc {
        node.gss.stable()
    }

    /// A START's snapshot under the fault-tolerant rules (UniStore Alg. 1 l.2-7).
    fn snapshot(node: &mut Node<Self>, cvc: &Vc) -> Vc {
        node.ft_snapshot(cvc)
    }

    /// Lowers `oldest`, the bound of future snapshots, where the extension's entries
    /// need it.
    fn oldest_bound(_node: &Node<Self>, _oldest: &mut Vc) {}

    /// Adopts a snapshot's remote entries (under the fault-tolerant rules): into the
    /// stable vector by default.
    fn adopt_remote(node: &mut Node<Self>, v: &Vc) {
        node.adopt_remote_stable(v)
    }

    /// Whether a parked barrier (`attach`: false) is covered; attaches by default wait
    /// for the stable vector to cover the token's remote entries.
    fn wait_holds(node: &Node<Self>, past: &Vc, attach: bool) -> bool {
        assert!(attach, "barriers are refused without uniformity tracking");
        let (d, gss) = (node.d, node.gss.stable());
        (0..past.dcs.len()).all(|i| i == d || past.get(i) <= gss.get(i))
    }

    /// The GSS was exchanged (every stabilization interval).
    fn stabilized(_node: &mut Node<Self>, _ctx: &mut Ctx<Msg>) {}

    /// Another node of the DC told us its vectors: the GSS may have advanced between
    /// our own stabilization rounds.
    fn gossip_heard(_node: &mut Node<Self>, _ctx: &mut Ctx<Msg>) {}

    /// A message the engine does not handle.
    fn on_message(_node: &mut Node<Self>, _ctx: &mut Ctx<Msg>, _from: Addr, _msg: Msg) {}

    /// The node starts (after recovery).
    fn start(_node: &mut Node<Self>, _ctx: &mut Ctx<Msg>) {}

    /// The extension's timer (`Timer::Ext`) is due.
    fn tick(_node: &mut Node<Self>, _ctx: &mut Ctx<Msg>) {}

    /// Before the timers run at a timeout.
    fn timeouts(_node: &mut Node<Self>) {}

    /// After every input: moves the extension's work on.
    fn pump(_node: &mut Node<Self>, _ctx: &mut Ctx<Msg>) {}

    /// The extension's earliest deadline besides its timer.
    fn deadline(_node: &Node<Self>) -> Option<Nanos> {
        None
    }

    /// A record the extension asked for (`Deferred::Paxos`) is durable.
    fn persisted(_node: &mut Node<Self>, _partition: PartitionId, _seq: u64) {}

    /// Replays a record of the extension's own (`Record::Paxos`, `Record::StrongImage`).
    fn replay(_node: &mut Node<Self>, _record: Record) {}

    /// The extension's invariants.
    fn check_invariants(_node: &Node<Self>) -> Result<(), String> {
        Ok(())
    }

    /// The extension's gauges.
    fn gauges(_node: &Node<Self>, _out: &mut Vec<(&'static str, f64)>) {}

    /// The extension's part of a checkpoint, `None` while it cannot take one.
    fn checkpoint(_node: &Node<Self>) -> Option<Vec<GroupCheckpoint>> {
        Some(Vec::new())
    }

    /// Restores the extension's part of a replayed checkpoint.
    fn restore(_node: &mut Node<Self>, _groups: Vec<GroupCheckpoint>) {}

    /// Commits a txn of a kind the engine does not commit (a strong one).
    fn commit_other(_node: &mut Node<Self>, _ctx: &mut Ctx<Msg>, txn: TxnId, _req: u64) {
        unreachable!("{txn:?}: START refuses the kinds the engine does not commit");
    }

    /// Sender: whether the receiver asked for a transfer of `pid` (`Msg::TransferAsk`).
    fn transfer_wanted(_node: &mut Node<Self>, _pid: PartitionId, _s: DcId) -> bool {
        false
    }

    /// Sender: DC `s` asks for a transfer of `pid`.
    fn on_transfer_ask(_node: &mut Node<Self>, _pid: PartitionId, _s: DcId) {}

    /// Sender: takes the extension's image for a transfer `id` to `s`; an error defers
    /// the transfer.
    fn take_transfer_image(
        _node: &mut Node<Self>,
        _pid: PartitionId,
        _s: DcId,
        _id: u64,
    ) -> Result<(), Refused> {
        Ok(())
    }

    /// Sender: the image to send with chunk `index` of transfer `id`.
    fn transfer_image(
        _node: &mut Node<Self>,
        _pid: PartitionId,
        _s: DcId,
        _id: u64,
        _index: u32,
    ) -> Option<Box<StrongImage>> {
        None
    }

    /// Receiver: whether the first chunk's image is refused.
    fn transfer_refused(
        _node: &Node<Self>,
        _pid: PartitionId,
        _image: Option<&StrongImage>,
    ) -> bool {
        false
    }

    /// Receiver: keeps the first chunk's image until the transfer ends.
    fn hold_transfer_image(
        _node: &mut Node<Self>,
        _ctx: &mut Ctx<Msg>,
        _pid: PartitionId,
        _s: DcId,
        _image: Option<Box<StrongImage>>,
    ) {
    }

    /// Receiver: what the ended transfer `id` adopts, or an error that refuses it.
    fn transfer_plan(
        _node: &mut Node<Self>,
        _pid: PartitionId,
        _s: DcId,
        _id: u64,
    ) -> Result<TransferPlan, Refused> {
        Ok(None)
    }

    /// Receiver: adopts the image of an installed transfer.
    fn adopt_transfer(
        _node: &mut Node<Self>,
        _ctx: &mut Ctx<Msg>,
        _pid: PartitionId,
        _image: StrongImage,
    ) {
    }

    /// Replay of an adopted transfer's record: its image is kept for `start`.
    fn replay_adopted(_node: &mut Node<Self>, _pid: PartitionId, _s: DcId, _id: u64) {}
}

/// No extension: Cure and CureFt.
#[derive(Clone, Copy, Debug, Default)]
pub struct Plain;

impl Extension for Plain {
    type TxnStep = std::convert::Infallible;
}
