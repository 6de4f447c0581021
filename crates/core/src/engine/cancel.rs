//! CANCEL (RFC 3261 §16.10, §9.1): answering a CANCEL, cancelling a request's pending
//! branches (when a CANCEL arrives, and when a final response ends the forking), and the client
//! transactions no branch waits for any more (module `abandoned`).

use super::context::{BranchState, Context};
use super::Engine;
use crate::io::Output;
use crate::peer::Peer;
use crate::proxy::respond::{build_cancel, response_destination};
use crate::transaction::TxId;
use herald_sip::{Limits, Message, Method};
use std::net::SocketAddr;
use std::time::Instant;

impl Engine {
    /// RFC 3261 §16.10: answer the CANCEL, then cancel every pending branch of its INVITE.
    pub(super) fn on_cancel(
        &mut self,
        now: Instant,
        from: Peer,
        local: SocketAddr,
        msg: Message,
        out: &mut Vec<Output>,
    ) {
        let target = self.txs.find_cancel_target(&msg).filter(|sid| self.contexts.contains_key(sid));
        let Some(sid) = target else {
            // No response context: forward statelessly (§16.10), if the policy lets it leave
            // for its target: to a foreign host it would be a relay for a transaction herald
            // never had (issue 16), answered 481 instead.
            if let Some(authenticated) = self.pass_gate(now, from, &msg, out) {
                self.forward_stateless(now, from, local, &msg, authenticated, out);
            }
            return;
        };
        if let Ok((cid, mut actions)) = self.txs.insert_server(now, &msg, response_destination(&msg, from), false) {
            let peer = self.txs.peer(cid);
            self.apply(now, cid, peer, &mut actions, out);
            self.respond(now, cid, &msg, (200, "OK"), &[], out);
        }
        let pending: Vec<usize> = match self.contexts.get_mut(&sid) {
            Some(ctx) => {
                ctx.stop_forking = true;
                ctx.waiting.clear();
                (0..ctx.branches.len()).filter(|i| ctx.branches[*i].is_pending()).collect()
            }
            None => return,
        };
        for idx in pending {
            self.cancel_branch(now, sid, idx, out);
        }
        self.advance(now, sid, out);
    }

    /// Sends CANCEL on a branch once it has a provisional response (RFC 3261 §9.1); a branch
    /// still resolving is simply dropped as 487.
    pub(super) fn cancel_branch(&mut self, now: Instant, sid: TxId, idx: usize, out: &mut Vec<Output>) {
        let Some(b) = self.contexts.get_mut(&sid).and_then(|c| c.branches.get_mut(idx)) else { return };
        match b.state {
            BranchState::Proceeding => {
                if b.cancelled {
                    return; // one CANCEL per branch (§9.1: it is retransmitted by its transaction)
                }
                let Some(cid) = b.client else { return };
                let Some(req) = self.txs.get(cid).and_then(|t| t.request()).cloned() else { return };
                let Some(peer) = self.txs.peer(cid) else { return };
                // §9.1: without a final response 64*T1 after the CANCEL, the INVITE's client
                // transaction is destroyed: Timer C's heap brings the branch back then.
                let give_up_at = now + self.cfg.timers.t1 * 64;
                b.cancelled = true;
                let pending = b.is_pending();
                self.timer_c.arm(&mut b.timer_c, pending, (give_up_at, sid, idx));
                if let Ok(cancel) = Message::parse(build_cancel(&req), &Limits::default()) {
                    if let Ok((id, mut actions)) = self.txs.insert_client(now, cancel, peer) {
                        self.apply(now, id, Some(peer), &mut actions, out);
                    }
                }
            }
            BranchState::Trying => b.cancel_when_provisional = true,
            BranchState::Resolving(_) => self.branch_failed(now, sid, idx, 487, out),
            BranchState::Done(_) => {}
        }
    }

    /// The response context `ctx` has ended (its server transaction did) while INVITE branches
    /// still wait for a final response: their client transactions outlive it, and are handed to
    /// the engine's abandoned client transactions (`abandoned`), which CANCEL one at its first
    /// provisional and drop a CANCELled one 64*T1 after its CANCEL if no final response came
    /// (RFC 3261 §9.1). Without this, a branch whose callee sent a provisional after the call
    /// was answered elsewhere, then never answered the CANCEL, kept its client transaction for
    /// ever: in Proceeding it has no timer of its own, and the Timer C that gives it up is the
    /// context's (found by the engine_pipeline fuzz target).
    pub(super) fn orphan_pending_branches(&mut self, now: Instant, ctx: &Context) {
        if !ctx.is_invite {
            return; // a non-INVITE client transaction ends by its own Timer F
        }
        for b in ctx.branches.iter().filter(|b| b.is_pending()) {
            let Some(cid) = b.client else { continue };
            if self.abandoned.get(cid).is_some() {
                continue;
            }
            self.abandoned.abandon(cid);
            if b.cancelled {
                let give_up_at = b.timer_c.at().unwrap_or(now + self.cfg.timers.t1 * 64);
                self.abandoned.cancelled(cid, give_up_at);
            }
        }
    }

    /// A response on client transaction `id`, before anything else looks at it: absorbed
    /// (true) when `id` is abandoned, unless it is a 2xx (relayed as any 2xx, RFC 3261 §16.7
    /// step 4). Its first provisional gets the CANCEL that §9.1 did not allow before - whether
    /// or not the call's response context still exists.
    pub(super) fn abandoned_response(&mut self, now: Instant, id: TxId, resp: &Message, out: &mut Vec<Output>) -> bool {
        let Some(cancelled) = self.abandoned.get(id) else { return false };
        let status = resp.status().unwrap_or(0);
        if (200..300).contains(&status) {
            return false;
        }
        if status < 200 && !cancelled {
            self.cancel_abandoned(now, id, out);
        }
        true
    }

    /// Sends CANCEL for the abandoned INVITE of client transaction `id` (RFC 3261 §9.1), and
    /// gives the transaction 64*T1 to end.
    fn cancel_abandoned(&mut self, now: Instant, id: TxId, out: &mut Vec<Output>) {
        let Some(invite) = self.txs.get(id).and_then(|t| t.request()).cloned() else { return };
        let Some(peer) = self.txs.peer(id) else { return };
        if invite.method() != Some(Method::Invite) {
            return;
        }
        self.abandoned.cancelled(id, now + self.cfg.timers.t1 * 64);
        if let Ok(cancel) = Message::parse(build_cancel(&invite), &Limits::default()) {
            if let Ok((cid, mut actions)) = self.txs.insert_client(now, cancel, peer) {
                self.apply(now, cid, Some(peer), &mut actions, out);
            }
        }
    }

    /// Drops the abandoned transactions CANCELled 64*T1 ago without a final response: the next
    /// hop is gone (§9.1).
    pub(super) fn abandoned_timeouts(&mut self, now: Instant) {
        while let Some(id) = self.abandoned.pop_give_up(now) {
            self.clients.remove(&id);
            self.txs.remove(id);
        }
    }
}
