//! The fault-tolerant snapshot rules of UniStore's Alg. 1 l.2-7, which CureFt runs with the
//! stable vector (the GSS) and UniStore's extension with `uniformVec`
//! ([`Extension::visible_vec`]): START's snapshot without a wait, adopting the remote
//! entries of the snapshots a node sees, and ATTACH (and, where the extension tracks
//! uniformity, UNIFORM_BARRIER) parked until its condition holds (Alg. 1 l.49-52).

use super::ext::Extension;
use super::msg::Msg;
use super::node::Node;
use super::types::ClientWait;
use causeway_core::limits::WAITING_REQUESTS_MAX;
use causeway_core::{Ctx, Error, Vc};

impl<X: Extension> Node<X> {
    /// A snapshot under the fault-tolerant rules (Alg. 1 l.2-7): adopt the remote entries
    /// of the client's past (they were visible where it read them), take the visible
    /// vector and the client's own DC entry. No wait: the snapshot is always available.
    pub(crate) fn ft_snapshot(&mut self, cvc: &Vc) -> Vc {
        self.adopt_remote(cvc); // Alg. 1 l.2-3
        let d = self.d;
        let mut svc = X::visible_vec(self).clone(); // Alg. 1 l.5
        svc.extra.clear(); // uniformVec has no strong entry (§6.1)
        svc.set(d, cvc.get(d).max(svc.get(d))); // Alg. 1 l.6
        svc
    }

    /// Adopts the remote entries of a snapshot (Alg. 1 l.2-3, l.19-20, l.37-38) under the
    /// fault-tolerant rules; Cure's snapshots adopt nothing.
    pub(crate) fn adopt_remote(&mut self, v: &Vc) {
        if !self.flavor.ft_rules() {
            return;
        }
        self.work += v.dcs.len() as u64;
        X::adopt_remote(self, v);
    }

    /// CureFt's adoption: the stable vector is the DC-wide GSS, which may adopt them.
    pub(crate) fn adopt_remote_stable(&mut self, v: &Vc) {
        let mut remote = v.clone();
        remote.set(self.d, 0);
        self.gss.adopt(&remote);
        self.raise_to_gss();
    }

    /// UNIFORM_BARRIER (Alg. 1 l.49-50) or ATTACH (l.51-52) from a session.
    pub(crate) fn on_client_wait(&mut self, ctx: &mut Ctx<Msg>, w: ClientWait) {
        let protocol = self.ext.name(self.flavor);
        if !self.flavor.ft_rules() {
            let e = Error::Unsupported {
                protocol: protocol.into(),
                capability: "barriers".into(),
            };
            return ctx.send(w.client, wait_done(w.req, Err(e)));
        }
        if !w.attach && !self.ext.uniform() {
            let e = Error::Unsupported {
                protocol: protocol.into(),
                capability: "uniform barriers (no uniformity tracking)".into(),
            };
            return ctx.send(w.client, wait_done(w.req, Err(e)));
        }
        if self.client_waits.len() >= WAITING_REQUESTS_MAX {
            let e = Error::Unavailable("too many barriers and attaches waiting".into());
            return ctx.send(w.client, wait_done(w.req, Err(e)));
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
        let (go, stay): (Vec<ClientWait>, Vec<ClientWait>) = waits
            .into_iter()
            .partition(|w| (w.attach && no_wait) || X::wait_holds(self, &w.past, w.attach));
        self.client_waits = stay;
        for w in go {
            ctx.send(w.client, wait_done(w.req, Ok(())));
        }
    }
}

fn wait_done(req: u64, result: Result<(), Error>) -> Msg {
    Msg::WaitDone { req, result }
}
