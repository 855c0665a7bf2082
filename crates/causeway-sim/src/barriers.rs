//! Uniform barriers and client moves (UniStore §5.6) in the workload, for protocols with
//! `Requirements::uniform_barrier`; moves alone (token, then attach elsewhere, no barrier)
//! for protocols with `Requirements::token_moves` (Occult §3). After a committed transaction a client may, instead of
//! its next transaction, ask for a barrier (`barrier_ratio`) or move to another surviving
//! DC (`migrate_ratio`): `Token`, `Barrier`, then a NEW protocol session at the other DC
//! whose first request is `Attach { token }`. The client keeps its history session, so the
//! checker's session order spans the move; its old session is retired (messages to it are
//! dropped) and its transactions take ids of the new session.
//!
//! A completed barrier is recorded in the history (`BarrierRecord`): the liveness check
//! requires what preceded it to survive a failure of its DC. A barrier that fails (timeout,
//! unavailable) is not recorded and the client stays where it is; an attach that fails is
//! retried after the think time (the client has already moved: without the attach its
//! session would not see its own past).

use crate::clients::{Next, Phase};
use crate::world::World;
use causeway_check::BarrierRecord;
use causeway_core::{DcId, Request, Response};

impl World {
    /// What a client does after a committed transaction: a barrier, a move, or the next
    /// transaction. Draws nothing when both ratios are 0 (runs without barriers keep
    /// their traces).
    pub(crate) fn next_after_commit(&mut self, c: usize) -> Next {
        let (barrier, migrate) = (self.config.barrier_ratio(), self.config.migrate_ratio());
        if barrier + migrate <= 0.0 {
            return Next::Txn;
        }
        let u = self.work_rng.unit();
        if u < migrate && !self.move_targets(c).is_empty() {
            Next::Move
        } else if u < migrate + barrier {
            Next::Barrier
        } else {
            Next::Txn
        }
    }

    /// The surviving DCs other than client `c`'s.
    fn move_targets(&self, c: usize) -> Vec<u16> {
        let here = self.clients[c].dc;
        (0..self.config.dcs)
            .filter(|dc| *dc != here && !self.failed_dcs.contains(dc))
            .collect()
    }

    /// Asks for a uniform barrier (a move's second step when `then_move`).
    pub(crate) fn start_barrier(&mut self, c: usize, then_move: bool) {
        let slot = &mut self.clients[c];
        slot.phase = Phase::Barrier { then_move };
        slot.barrier_start = self.now;
        self.submit(c, Request::Barrier);
    }

    /// A move's first step: the session's causal token.
    pub(crate) fn start_move(&mut self, c: usize) {
        self.clients[c].phase = Phase::Token;
        self.submit(c, Request::Token);
    }

    /// Attaches the move's token on the client's (new) session.
    pub(crate) fn start_attach(&mut self, c: usize) {
        let Some(token) = self.clients[c].token.clone() else {
            self.clients[c].next = Next::Txn;
            return self.client_next(c);
        };
        self.clients[c].phase = Phase::Attach;
        self.submit(c, Request::Attach { token });
    }

    /// A reply to a token, barrier or attach request.
    pub(crate) fn on_barrier_reply(&mut self, c: usize, phase: Phase, resp: Response) {
        match (phase, resp) {
            (Phase::Token, Response::Token(token)) => {
                self.clients[c].token = Some(token);
                if !self.config.has_barriers() {
                    return self.move_client(c); // the token alone carries the past
                }
                self.start_barrier(c, true);
            }
            (Phase::Barrier { then_move }, Response::BarrierDone) => {
                self.record_barrier(c);
                if then_move {
                    return self.move_client(c);
                }
                self.clients[c].next = Next::Txn;
                self.idle_then_next(c);
            }
            (Phase::Attach, Response::Attached) => {
                self.clients[c].token = None;
                self.clients[c].next = Next::Txn;
                self.idle_then_next(c);
            }
            (Phase::Attach, _) => {
                self.clients[c].next = Next::Attach; // retried after the think time
                self.idle_then_next(c);
            }
            // A failed token or barrier: the client stays and goes on.
            (_, _) => {
                self.clients[c].token = None;
                self.clients[c].next = Next::Txn;
                self.idle_then_next(c);
            }
        }
    }

    /// Records client `c`'s barrier that just completed.
    fn record_barrier(&mut self, c: usize) {
        let slot = &self.clients[c];
        self.history.barriers.push(BarrierRecord {
            session: slot.logical,
            dc: DcId(slot.dc),
            start_ns: slot.barrier_start,
            end_ns: self.now,
            txns: slot.started as usize,
        });
    }

    /// Moves client `c` to another surviving DC on a new protocol session, which attaches
    /// the token first. With no other surviving DC the client stays.
    fn move_client(&mut self, c: usize) {
        let targets = self.move_targets(c);
        if targets.is_empty() {
            self.clients[c].token = None;
            self.clients[c].next = Next::Txn;
            return self.idle_then_next(c);
        }
        let dc = self.work_rng.pick(&targets);
        let (id, session) = match self.open_session(c, dc) {
            Ok(s) => s,
            Err(e) => return self.metrics.liveness.push(format!("client {c}: {e}")),
        };
        let old = self.clients[c].id;
        if let Some(route) = self.routes.get_mut(&old) {
            route.retired = true;
        }
        let slot = &mut self.clients[c];
        slot.session = session;
        slot.id = id;
        slot.dc = dc;
        slot.timer_at = None; // the old session's timer is gone with it
        self.start_attach(c);
    }
}
