//! State transfer under UniStore's strong txns (issue 15): the certification part that
//! travels with a partition's image (`transfer.rs`), so a DC away for any time catches up
//! on its strong txns as on its causal ones, and the certification logs stay bounded.
//!
//! The paper keeps every certification log whole and says nothing of a replica that
//! returns after the others stopped keeping what it lacks. Our decision:
//!
//! - **Why the certifier travels.** Strong txns reach a store through DELIVER_UPDATES
//!   (Alg. 3 l.4-8), never through the causal streams, so an image of the store holds
//!   every strong txn its sender delivered. Installed on its own, it would make the
//!   receiver's certification deliver some of them again (a counter increment counted
//!   twice). So the image's sender adds, from the same instant, its certifier and the
//!   slot below which it delivered every decided entry ([`StrongImage`]); the receiver
//!   *adopts* them with the images: its certifier becomes the sender's and its group
//!   member delivers from that slot on (`Paxos::redeliver_from`). The store and the
//!   certifier then agree again: each strong txn is in the store exactly when the adopted
//!   certifier delivered it.
//! - **A receiver ahead of the sender.** It may have delivered strong txns the image
//!   lacks: those the sender's certifier had decided but not yet delivered
//!   (`Certifier::pending_txns`) and those decided in the slots from the image's on. They
//!   are versions above the image's vector (their strong timestamp is above the sender's
//!   `known`; a checkpoint holding one makes the install refused), so the receiver drops
//!   their versions after the install and its member delivers them again, once each.
//!   The dropped txns are in the [`Record::TransferAdopted`] record, so a replay drops
//!   the same ones and rebuilds the same store. The slots from the image's on must still
//!   be in the receiver's group log; if it forgot them, the transfer is refused at its
//!   first chunk, before any chunk is persisted (sample `transfer_refused_strong`), and
//!   the sender retries later with a newer image.
//! - **A member the group no longer keeps slots for.** A leader lets the members forget
//!   (in memory) what a majority decided once a member lags by more than
//!   `strong_log_kept_max` slots (`strong_gc.rs`); the laggard's catch-up is then answered
//!   `Truncated` (kit::paxos `Output::SnapshotNeeded`) and it asks the member that
//!   truncated for a transfer ([`Msg::TransferAsk`]). Its adoption jumps its member past
//!   the truncation point (`Paxos::install_snapshot`).
//! - **Replay.** The certification part is persisted as received (`Record::StrongImage`,
//!   before the first chunk's record) and adopted at `TransferAdopted`; the groups are
//!   built after the replay (`start_strong`), which then takes the last adopted state.
//!   A checkpoint (never taken while a transfer is being received) stands for both.
//!
//! [`Record::TransferAdopted`]: crate::cure::record::Record::TransferAdopted
//! [`Msg::TransferAsk`]: crate::cure::msg::Msg::TransferAsk

use super::hooks::UniExt;
use super::state::Refusal;
use crate::cure::msg::Msg;
use crate::cure::node::Node;
use crate::cure::record::Record;
use crate::kit::certify::{CertEntry, StrongImage};
use causeway_core::{Ctx, DcId, PartitionId, TxnId};
use std::collections::BTreeSet;

impl Node<UniExt> {
    /// Whether sibling `s` asked for a transfer of `pid` (forgotten once asked).
    pub(crate) fn take_transfer_wanted(&mut self, pid: PartitionId, s: DcId) -> bool {
        let st = self.ext.strong.as_mut();
        st.is_some_and(|st| st.xfer.wanted.remove(&(pid, s)))
    }

    /// A sibling's group member needs a snapshot of `pid`'s group.
    pub(crate) fn on_transfer_ask(&mut self, pid: PartitionId, s: DcId) {
        if let Some(st) = self.ext.strong.as_mut() {
            if st.groups.contains_key(&pid) {
                st.xfer.wanted.insert((pid, s));
            }
        }
    }

    /// Sender side: the group's state now, for the images taken now. `Err` while the
    /// groups are not built yet, or while decided entries wait to be applied (no
    /// transfer then: tried again next interval); `Ok` without strong txns.
    pub(crate) fn take_strong_image(
        &mut self,
        pid: PartitionId,
        s: DcId,
        id: u64,
    ) -> Result<(), ()> {
        let Some(st) = self.ext.strong.as_mut() else {
            return Ok(());
        };
        let g = st.groups.get(&pid).ok_or(())?;
        if g.px.delivered() != g.px.decided_upto() {
            return Err(()); // the store and certifier lag the decided log until pumped
        }
        let image = StrongImage {
            id,
            delivered: g.px.delivered(),
            cert: g.cert.clone(),
        };
        st.xfer.out.insert((pid, s), image);
        Ok(())
    }

    /// The certification part to send with chunk `index` of transfer `id`.
    pub(crate) fn strong_part(
        &mut self,
        pid: PartitionId,
        s: DcId,
        id: u64,
        index: u32,
    ) -> Option<Box<StrongImage>> {
        let st = self.ext.strong.as_mut()?;
        if index != 0 || st.xfer.out.get(&(pid, s)).is_none_or(|i| i.id != id) {
            return None;
        }
        st.xfer.out.remove(&(pid, s)).map(Box::new)
    }

    /// Receiver side: the first chunk of a transfer was taken; its certification part is
    /// persisted before the chunk's record and held until the end.
    pub(crate) fn hold_strong_image(
        &mut self,
        ctx: &mut Ctx<Msg>,
        pid: PartitionId,
        s: DcId,
        image: Option<Box<StrongImage>>,
    ) {
        let Some(st) = self.ext.strong.as_mut() else {
            return;
        };
        st.xfer.incoming.remove(&(pid, s));
        let Some(image) = image else {
            return; // refused at the end
        };
        st.xfer.incoming.insert((pid, s), (*image).clone());
        let record = Record::StrongImage {
            partition: pid,
            from: s,
            image,
        };
        self.persist(ctx, record, Vec::new());
    }

    /// Whether the certification part a transfer's first chunk brings can be adopted
    /// (checked again at the end, [`Node::strong_plan`]).
    pub(crate) fn strong_part_refused(
        &self,
        pid: PartitionId,
        image: Option<&StrongImage>,
    ) -> Result<(), Refusal> {
        let Some(st) = self.ext.strong.as_ref() else {
            return Ok(());
        };
        let image = image.ok_or(Refusal::Missing)?;
        let g = st.groups.get(&pid).ok_or(Refusal::Missing)?;
        if g.px.truncated_below() > image.delivered {
            return Err(Refusal::Forgotten);
        }
        Ok(())
    }

    /// Replay of a `StrongImage` record.
    pub(crate) fn replay_strong_image(&mut self, pid: PartitionId, s: DcId, image: StrongImage) {
        if let Some(st) = self.ext.strong.as_mut() {
            st.xfer.incoming.insert((pid, s), image);
        }
    }

    /// At the end of transfer `id` from `s`, before its install: the certification part
    /// to adopt (`None` without strong txns), and the txns whose versions the install
    /// must drop because the adopted certifier delivers them again.
    pub(crate) fn strong_plan(
        &mut self,
        pid: PartitionId,
        s: DcId,
        id: u64,
    ) -> Result<Option<(StrongImage, Vec<TxnId>)>, Refusal> {
        let Some(st) = self.ext.strong.as_mut() else {
            return Ok(None);
        };
        let image = st.xfer.incoming.remove(&(pid, s));
        let image = image.filter(|i| i.id == id).ok_or(Refusal::Missing)?;
        self.strong_part_refused(pid, Some(&image))?;
        let st = self.ext.strong.as_ref().expect("strong txns on");
        let g = st.groups.get(&pid).expect("a group");
        let mut again: BTreeSet<TxnId> = image.cert.pending_txns().collect();
        // Decided here early but prepared in the image: decided early again after the
        // adoption (`adopt_strong`), so delivered again.
        let early = g.cert.early().keys();
        again.extend(early.filter(|t| image.cert.prepared_ts(t).is_some()));
        for slot in image.delivered..g.px.delivered() {
            let entry =
                g.px.decided_value(slot)
                    .expect("kept: above the truncation");
            if let Some(CertEntry::Decide {
                txn,
                commit: Some(_),
            }) = entry
            {
                again.insert(*txn);
            }
        }
        Ok(Some((image, again.into_iter().collect())))
    }

    /// Adopts a transfer's certification part (live, after the images are installed
    /// and the versions of `dropped` removed): delivery restarts at its slot.
    pub(crate) fn adopt_strong(
        &mut self,
        ctx: &mut Ctx<Msg>,
        pid: PartitionId,
        image: StrongImage,
    ) {
        let clock = self.time.clock;
        let st = self.ext.strong.as_mut().expect("adopted under strong txns");
        let g = st.groups.get_mut(&pid).expect("a group");
        // Decisions applied early to the replaced certifier apply again to the image's
        // prepared txns (`early.rs`): knownVec[strong] does not go back.
        let mine: Vec<_> = g.cert.early().iter().map(|(t, c)| (*t, *c)).collect();
        g.early.heard.extend(mine);
        g.cert = image.cert;
        g.spec = None;
        g.px.redeliver_from(clock, image.delivered);
        self.early_after_log(pid);
        self.deliver(pid); // knownVec[strong] of the adopted certifier
        self.pump_group(ctx, pid);
    }

    /// Replay of a `TransferAdopted` record: its certification part waits for
    /// `start_strong` (after the images were installed by `replay_done`).
    pub(crate) fn replay_adopted(&mut self, pid: PartitionId, s: DcId, id: u64) {
        let Some(st) = self.ext.strong.as_mut() else {
            return;
        };
        if let Some(image) = st.xfer.incoming.remove(&(pid, s)).filter(|i| i.id == id) {
            st.xfer.adopted.insert(pid, (image.delivered, image.cert));
        }
    }
}
