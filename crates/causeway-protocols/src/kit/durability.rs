//! Durability bookkeeping (persist before you release): one place for a machine's lsns
//! and for what waits on them. A machine persists a record with the messages that may
//! leave only once it is durable, or parks an action of its own until everything
//! persisted so far is durable; the driver's `handle_persisted(lsn)` releases them in lsn
//! order (records become durable in order).

use causeway_core::{Addr, Ctx, Lsn};
use std::collections::VecDeque;

/// Most records in flight (persisted, not yet durable) before the machine must be
/// considered stuck: a disk that never answers is a bug or a dead node.
pub const RECORDS_IN_FLIGHT_MAX: usize = 1 << 20;

/// Something waiting on a durable lsn: a message or an action of the machine's own.
#[derive(Debug)]
pub enum Held<M, A> {
    Send(Addr, M),
    Run(A),
}

/// Lsns handed out, the durable prefix, and what waits for it.
#[derive(Debug)]
pub struct Durability<M, A> {
    last_lsn: Lsn,
    durable_lsn: Lsn,
    /// What waits, each with the lsn it waits for, in lsn order: every hold is taken at
    /// the last lsn handed out, which never goes down, so a queue keeps the order and a
    /// release pops a prefix (no tree to split per durable batch).
    held: VecDeque<(Lsn, Held<M, A>)>,
}

impl<M, A> Durability<M, A> {
    /// Continues numbering after `last_lsn` (every recovered record is durable).
    pub fn starting_after(last_lsn: Lsn) -> Self {
        Durability {
            last_lsn,
            durable_lsn: last_lsn,
            held: VecDeque::new(),
        }
    }

    /// Emits `record` for persistence; `then` is sent once it is durable.
    pub fn persist(&mut self, ctx: &mut Ctx<M>, record: Vec<u8>, then: Vec<(Addr, M)>) -> Lsn {
        assert!(
            self.last_lsn - self.durable_lsn < RECORDS_IN_FLIGHT_MAX as u64,
            "too many records in flight: the disk stopped answering"
        );
        self.last_lsn += 1;
        ctx.persist(self.last_lsn, record);
        if !then.is_empty() {
            let lsn = self.last_lsn;
            let held = then.into_iter().map(|(to, m)| (lsn, Held::Send(to, m)));
            self.held.extend(held);
        }
        self.last_lsn
    }

    /// Runs `action` once everything persisted so far is durable: returns it at once if
    /// that is already so, else holds it.
    pub fn after_durable(&mut self, action: A) -> Option<A> {
        if self.durable_lsn >= self.last_lsn {
            return Some(action);
        }
        self.held.push_back((self.last_lsn, Held::Run(action)));
        None
    }

    /// Sends `msg` once everything persisted so far is durable.
    pub fn send_after_durable(&mut self, ctx: &mut Ctx<M>, to: Addr, msg: M) {
        if self.durable_lsn >= self.last_lsn {
            return ctx.send(to, msg);
        }
        self.held.push_back((self.last_lsn, Held::Send(to, msg)));
    }

    /// Every record up to `lsn` is durable: sends the held messages and returns the held
    /// actions for the machine to run, in lsn order.
    pub fn persisted(&mut self, ctx: &mut Ctx<M>, lsn: Lsn) -> Vec<A> {
        assert!(lsn <= self.last_lsn, "lsn {lsn} was never handed out");
        self.durable_lsn = self.durable_lsn.max(lsn);
        let mut actions = Vec::new();
        while self.held.front().is_some_and(|(at, _)| *at <= lsn) {
            let (_, held) = self.held.pop_front().expect("a front");
            match held {
                Held::Send(to, m) => ctx.send(to, m),
                Held::Run(a) => actions.push(a),
            }
        }
        actions
    }

    pub fn last_lsn(&self) -> Lsn {
        self.last_lsn
    }

    /// Every record handed out is durable and nothing waits: the machine's state is
    /// exactly what replaying its records gives (the moment for a checkpoint).
    pub fn quiescent(&self) -> bool {
        self.durable_lsn == self.last_lsn && self.held.is_empty()
    }

    pub fn durable_lsn(&self) -> Lsn {
        self.durable_lsn
    }

    /// Lsns with something still waiting on them.
    pub fn held_count(&self) -> usize {
        let mut lsns: Vec<Lsn> = self.held.iter().map(|(lsn, _)| *lsn).collect();
        lsns.dedup();
        lsns.len()
    }

    /// `durable <= last`, what waits is in lsn order, and nothing waits on an lsn that is
    /// durable already.
    pub fn check_invariants(&self) -> Result<(), String> {
        if self.durable_lsn > self.last_lsn {
            return Err(format!(
                "durable lsn {} above last lsn {}",
                self.durable_lsn, self.last_lsn
            ));
        }
        let mut lsns = self.held.iter().map(|(lsn, _)| *lsn);
        if let Some(prev) = lsns.next() {
            if lsns.try_fold(prev, |p, l| (p <= l).then_some(l)).is_none() {
                return Err("held outputs out of lsn order".into());
            }
        }
        match self.held.front().map(|(lsn, _)| lsn) {
            Some(first) if *first <= self.durable_lsn => Err(format!(
                "outputs held on lsn {first}, durable since lsn {}",
                self.durable_lsn
            )),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_core::{NodeId, Output, TrueTime};

    fn ctx() -> Ctx<u32> {
        Ctx::new(TrueTime(0), 0)
    }

    fn sent(ctx: &Ctx<u32>) -> Vec<u32> {
        let msgs = ctx.outputs.iter().filter_map(|o| match o {
            Output::Send { msg, .. } => Some(*msg),
            _ => None,
        });
        msgs.collect()
    }

    #[test]
    fn messages_leave_only_once_their_record_is_durable() {
        let mut d: Durability<u32, &str> = Durability::starting_after(5);
        let mut c = ctx();
        let to = Addr::Node(NodeId(1));
        assert_eq!(d.persist(&mut c, vec![1], vec![(to, 10)]), 6);
        assert_eq!(d.persist(&mut c, vec![2], vec![(to, 20)]), 7);
        assert!(sent(&c).is_empty());
        let mut c = ctx();
        assert!(d.persisted(&mut c, 6).is_empty());
        assert_eq!(sent(&c), vec![10]);
        let mut c = ctx();
        d.persisted(&mut c, 7);
        assert_eq!(sent(&c), vec![20]);
        d.check_invariants().unwrap();
    }

    #[test]
    fn actions_wait_for_everything_persisted_before_them() {
        let mut d: Durability<u32, &str> = Durability::starting_after(0);
        assert_eq!(d.after_durable("now"), Some("now"), "nothing in flight");
        let mut c = ctx();
        d.persist(&mut c, vec![1], Vec::new());
        assert_eq!(d.after_durable("later"), None);
        d.send_after_durable(&mut c, Addr::Node(NodeId(0)), 5);
        assert!(sent(&c).is_empty());
        let mut c = ctx();
        assert_eq!(d.persisted(&mut c, 1), vec!["later"]);
        assert_eq!(sent(&c), vec![5]);
        assert_eq!(d.held_count(), 0);
    }

    #[test]
    fn one_release_of_a_batch_frees_its_prefix_in_lsn_order_and_keeps_the_rest() {
        let mut d: Durability<u32, u32> = Durability::starting_after(0);
        let to = Addr::Node(NodeId(2));
        let mut c = ctx();
        for lsn in 1..=4u32 {
            d.persist(
                &mut c,
                vec![lsn as u8],
                vec![(to, 10 * lsn), (to, 10 * lsn + 1)],
            );
            assert_eq!(d.after_durable(lsn), None);
        }
        assert_eq!(d.held_count(), 4);
        d.check_invariants().unwrap();
        let mut c = ctx();
        assert_eq!(d.persisted(&mut c, 3), vec![1, 2, 3]);
        assert_eq!(sent(&c), vec![10, 11, 20, 21, 30, 31]);
        assert_eq!(d.held_count(), 1, "lsn 4's hold waits");
        d.check_invariants().unwrap();
        let mut c = ctx();
        assert_eq!(d.persisted(&mut c, 4), vec![4]);
        assert_eq!(sent(&c), vec![40, 41]);
        assert!(d.quiescent());
    }

    #[test]
    #[should_panic(expected = "never handed out")]
    fn a_durable_lsn_never_handed_out_is_a_bug() {
        let mut d: Durability<u32, ()> = Durability::starting_after(0);
        d.persisted(&mut ctx(), 3);
    }
}
