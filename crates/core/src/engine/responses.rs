//! Responses: matching client transactions, forwarding provisional and 2xx responses at once,
//! collecting the others and sending the best one (RFC 3261 §16.7), Timer C (§16.8), and
//! stateless forwarding of responses that match no transaction (§16.11, §18.1.2).

use super::context::{BranchState, Context, FinalResponse};
use super::fork::take_group;
use super::response_vias::{strip_top_via_owned, top_two_vias, without_top_via};
use super::timer_c::Entry;
use super::Engine;
use crate::hash::IdMap;
use crate::io::Output;
use crate::proxy::respond::via_destination;
use crate::proxy::select::{best_response, status_to_forward};
use crate::transaction::{Actions, TuEvent, TxId};
use herald_sip::headers::Via;
use herald_sip::{Editor, HeaderName, Limits, Message};
use std::time::Instant;

impl Engine {
    pub(super) fn on_response(&mut self, now: Instant, msg: Message, out: &mut Vec<Output>) {
        if let Some(cid) = self.txs.find_client(&msg) {
            let (mut peer, mut actions) = (None, Actions::new());
            self.txs.on_message_into(now, cid, msg, &mut peer, &mut actions);
            self.apply(now, cid, peer, &mut actions, out);
        } else {
            self.forward_response_stateless(&msg, out);
        }
    }

    /// §16.11 / §18.1.2: a response that matches no client transaction (a 2xx retransmission
    /// after the transaction ended, or a response to a statelessly forwarded request) goes to
    /// the next Via, provided the top Via is ours.
    fn forward_response_stateless(&self, msg: &Message, out: &mut Vec<Output>) {
        let Ok(top) = msg.top_via() else { return };
        if !self.cfg.identity.is_own_sent_by(&top.host, top.port) {
            return; // RFC 3261 §18.1.2: not sent by us; discard
        }
        let Some((top, next_value)) = top_two_vias(msg) else { return };
        // Parsed here for where it goes, which also proves it well-formed (§16.7 step 3).
        let Ok(next) = Via::parse(next_value.bytes) else { return };
        let Some(to) = via_destination(&next) else { return };
        let bytes = without_top_via(msg, top, next_value);
        out.push(Output::Send { to, bytes });
    }

    pub(super) fn on_tu_event(&mut self, now: Instant, id: TxId, event: TuEvent, out: &mut Vec<Output>) {
        if self.pings.owns(id) {
            return self.on_ping_event(id, event, out);
        }
        if matches!(event, TuEvent::Terminated) {
            return self.on_terminated(now, id, out);
        }
        if let Some(&(sid, idx)) = self.clients.get(&id) {
            match event {
                // A transaction no branch waits for answers late (`abandoned`).
                TuEvent::Response(resp) if self.abandoned_response(now, id, &resp, out) => {}
                TuEvent::Response(resp) => self.on_branch_response(now, sid, idx, resp, out),
                TuEvent::Timeout => self.branch_failed(now, sid, idx, 408, out),
                TuEvent::TransportError => self.retry_or_fail(now, sid, idx, out),
                TuEvent::Terminated | TuEvent::AckReceived(_) | TuEvent::NoAck => {}
            }
            self.advance(now, sid, out);
            return;
        }
        if let TuEvent::AckReceived(ack) = event {
            if let Some(ctx) = self.contexts.get(&id) {
                let (from, local) = (ctx.source, ctx.local);
                // An ACK is in its dialog: the routing table's verdict plays no part.
                self.forward_stateless(now, from, local, &ack, false, out);
            }
        }
    }

    /// Transaction `id` reached Terminated: four times per proxied call, all of them when a
    /// Timer L, M, J or K fires (issue 21: one lookup each where two or three were made).
    fn on_terminated(&mut self, now: Instant, id: TxId, out: &mut Vec<Output>) {
        let Some((sid, idx)) = self.clients.remove(&id) else {
            return self.end_context(now, id, out);
        };
        self.abandoned.ended(id);
        // A branch whose transaction ended without a final response failed. One that has its
        // final response (the usual end) changes nothing: when it got it, `advance` ran.
        if self.contexts.get(&sid).and_then(|c| c.branches.get(idx)).is_some_and(|b| b.is_pending()) {
            self.branch_failed(now, sid, idx, 408, out);
            self.advance(now, sid, out);
        }
    }

    fn on_branch_response(&mut self, now: Instant, sid: TxId, idx: usize, resp: Message, out: &mut Vec<Output>) {
        let Some(status) = resp.status() else { return };
        let resp = match self.fix_nated_response(sid, idx, &resp) {
            Some(fixed) => fixed,
            None => resp,
        };
        self.gateway_response(now, sid, idx, &resp, status);
        let Some(ctx) = self.contexts.get_mut(&sid) else {
            // The server transaction is gone: a late 2xx must still reach the caller (RFC 6026).
            if (200..300).contains(&status) {
                self.forward_response_stateless(&resp, out);
            }
            return;
        };
        let is_invite = ctx.is_invite;
        let Some(branch) = ctx.branches.get_mut(idx) else { return };
        if status < 200 {
            if branch.is_pending() {
                branch.state = BranchState::Proceeding;
            }
            if is_invite {
                // §16.7 step 2: a provisional response resets Timer C.
                let pending = branch.is_pending();
                self.timer_c.reset(&mut branch.timer_c, pending, (now + self.cfg.timer_c, sid, idx));
            }
            if std::mem::take(&mut branch.cancel_when_provisional) {
                self.cancel_branch(now, sid, idx, out);
            }
            if status > 100 {
                self.send_upstream(now, sid, resp, status, out);
            }
            return;
        }
        branch.state = BranchState::Done(status);
        self.timer_c.disarm(&mut branch.timer_c, sid, idx);
        if status < 300 {
            // §16.7 step 4/5: every 2xx goes upstream at once; other branches are cancelled.
            ctx.answered = true;
            ctx.stop_forking = true;
            ctx.waiting.clear();
            self.send_upstream(now, sid, resp, status, out);
            self.cancel_pending(now, sid, out);
            return;
        }
        if status >= 600 {
            ctx.stop_forking = true;
            ctx.waiting.clear();
        }
        self.context_bytes += resp.as_bytes().len();
        ctx.finals.push(FinalResponse { status, msg: Some(resp) });
        if status >= 600 {
            self.cancel_pending(now, sid, out);
        }
    }

    fn cancel_pending(&mut self, now: Instant, sid: TxId, out: &mut Vec<Output>) {
        let pending: Vec<usize> = self
            .contexts
            .get(&sid)
            .map(|c| (0..c.branches.len()).filter(|i| c.branches[*i].is_pending()).collect())
            .unwrap_or_default();
        for idx in pending {
            self.cancel_branch(now, sid, idx, out);
        }
    }

    /// A branch failed without a response (timeout, transport error, no route): it counts as
    /// that status in the best-response choice (§16.7 step 6, §16.8).
    pub(super) fn branch_failed(&mut self, _now: Instant, sid: TxId, idx: usize, status: u16, _out: &mut [Output]) {
        let Some(ctx) = self.contexts.get_mut(&sid) else { return };
        let Some(b) = ctx.branches.get_mut(idx) else { return };
        if !b.is_pending() {
            return;
        }
        b.state = BranchState::Done(status);
        self.timer_c.disarm(&mut b.timer_c, sid, idx);
        let leg = b.planned.gateway.clone();
        let is_invite = ctx.is_invite;
        ctx.finals.push(FinalResponse { status, msg: None });
        if let Some(leg) = leg {
            self.gateway_attempt_failed(_now, &leg, status, is_invite);
        }
    }

    /// When no branch is pending: start the next group (sequential forking) or send the best
    /// final response upstream.
    pub(super) fn advance(&mut self, now: Instant, sid: TxId, out: &mut Vec<Output>) {
        let Some(ctx) = self.contexts.get_mut(&sid) else { return };
        if ctx.pending() > 0 {
            return;
        }
        if ctx.answered {
            self.context_bytes -= ctx.compact();
            return;
        }
        if !ctx.stop_forking && !ctx.waiting.is_empty() {
            let group = take_group(&mut ctx.waiting, self.cfg.forking);
            self.start_branches(now, sid, group, out);
            return;
        }
        ctx.answered = true;
        self.send_best(now, sid, out);
        // The context may be gone already (a response that ended the server transaction at
        // once: over a reliable transport Timer J is zero).
        if let Some(ctx) = self.contexts.get_mut(&sid) {
            self.context_bytes -= ctx.compact();
        }
    }

    /// §16.7 step 6: the best final response collected (or 480 when none was) goes upstream.
    fn send_best(&mut self, now: Instant, sid: TxId, out: &mut Vec<Output>) {
        let Some(ctx) = self.contexts.get(&sid) else { return };
        let statuses: Vec<u16> = ctx.finals.iter().map(|f| f.status).collect();
        let Some(best) = best_response(&statuses) else {
            if let Some(req) = ctx.request.clone() {
                self.respond(now, sid, &req, (480, "Temporarily Unavailable"), &[], out);
            }
            return;
        };
        let chosen = &ctx.finals[best];
        let status = chosen.status;
        match (&chosen.msg, status_to_forward(status) == status) {
            (Some(resp), true) => {
                let resp = resp.clone();
                let extra = merged_challenges(&ctx.finals, best);
                let resp = if extra.is_empty() { resp } else { with_headers(&resp, &extra) };
                self.send_upstream(now, sid, resp, status, out);
            }
            _ => {
                if let Some(req) = ctx.request.clone() {
                    let forwarded = status_to_forward(status);
                    self.respond(now, sid, &req, (forwarded, reason_for(forwarded)), &[], out);
                }
            }
        }
    }

    /// Forwards a response received on a branch through the server transaction.
    /// The response is given up: its buffer may become the copy that goes upstream.
    fn send_upstream(&mut self, now: Instant, sid: TxId, resp: Message, status: u16, out: &mut Vec<Output>) {
        let request = self.contexts.get(&sid).and_then(|c| c.request.as_ref());
        let Some(bytes) = strip_top_via_owned(resp, request) else {
            // The next hop's response lost the Vias below ours (§16.7 step 3): it cannot be
            // forwarded. A final one must still end the caller's transaction: with our own.
            if status >= 200 {
                if let Some(req) = self.contexts.get(&sid).and_then(|c| c.request.clone()) {
                    self.respond(now, sid, &req, (502, "Bad Gateway"), &[], out);
                }
            }
            return;
        };
        let (mut peer, mut actions) = (None, Actions::new());
        self.txs.on_tu_response_into(now, sid, (bytes, status), &mut peer, &mut actions);
        self.apply(now, sid, peer, &mut actions, out);
    }

    /// Pops the Timer C entries that no longer apply off the front of the queue
    /// ([`TimerC::drop_stale`]).
    #[inline]
    pub(super) fn drop_stale_timer_c(&mut self) {
        let contexts = &self.contexts;
        self.timer_c.drop_stale(|entry| timer_c_entry_live(contexts, entry));
    }

    /// Timer C fired for a branch (§16.8): with a provisional response, CANCEL it; without
    /// one, it counts as 408.
    pub(super) fn on_timer_c(&mut self, now: Instant, at: Instant, sid: TxId, idx: usize, out: &mut Vec<Output>) {
        let Some(b) = self.contexts.get(&sid).and_then(|c| c.branches.get(idx)) else { return };
        if !b.is_pending() {
            return; // stale: the branch finished
        }
        match b.timer_c.at() {
            Some(t) if t == at => {}
            // Reset by a provisional after this entry was queued: due then.
            Some(t) if t > at => return self.timer_c.requeue((t, sid, idx)),
            _ => return, // stale: moved earlier (a CANCEL's 64*T1), which queued its own
        }
        match b.state {
            BranchState::Proceeding if b.cancelled => {
                // §9.1: CANCELled 64*T1 ago and still no final response: the next hop is gone.
                // The INVITE client transaction (stuck in Proceeding: it has no timer there) is
                // destroyed and the branch fails, so the caller gets a final response.
                if let Some(cid) = self.contexts.get_mut(&sid).and_then(|c| c.branches.get_mut(idx)?.client.take()) {
                    self.clients.remove(&cid);
                    self.txs.remove(cid);
                }
                self.branch_failed(now, sid, idx, 408, out);
            }
            BranchState::Proceeding => self.cancel_branch(now, sid, idx, out),
            _ => self.branch_failed(now, sid, idx, 408, out),
        }
        self.advance(now, sid, out);
    }

    /// The server transaction ended: cancel what is still pending and forget the context.
    fn end_context(&mut self, now: Instant, sid: TxId, out: &mut Vec<Output>) {
        if self.contexts.get(&sid).is_some_and(|c| c.pending() > 0) {
            self.cancel_pending(now, sid, out);
        }
        if let Some(ctx) = self.contexts.remove(&sid) {
            self.timer_c.context_ended(sid);
            self.context_bytes -= ctx.held_bytes();
            self.orphan_pending_branches(now, &ctx);
        }
    }
}

/// §16.7 step 7: a 401/407 sent upstream carries the challenges of every 401/407 received.
fn merged_challenges(finals: &[FinalResponse], chosen: usize) -> Vec<(&'static str, Vec<u8>)> {
    let chosen_status = finals[chosen].status;
    if chosen_status != 401 && chosen_status != 407 {
        return Vec::new();
    }
    let mut extra = Vec::new();
    for (i, f) in finals.iter().enumerate() {
        let Some(m) = f.msg.as_ref().filter(|_| i != chosen && matches!(f.status, 401 | 407)) else { continue };
        for (name, header) in
            [("WWW-Authenticate", HeaderName::WwwAuthenticate), ("Proxy-Authenticate", HeaderName::ProxyAuthenticate)]
        {
            for h in m.fields(header) {
                extra.push((name, m.value_of(h).to_vec()));
            }
        }
    }
    extra
}

fn with_headers(resp: &Message, extra: &[(&'static str, Vec<u8>)]) -> Message {
    let mut e = Editor::new(resp);
    for (name, value) in extra {
        e.append_header(name, value);
    }
    Message::parse(e.finish(), &Limits::default()).unwrap_or_else(|_| resp.clone())
}

fn reason_for(status: u16) -> &'static str {
    match status {
        404 => "Not Found",
        408 => "Request Timeout",
        416 => "Unsupported URI Scheme",
        430 => "Flow Failed",
        480 => "Temporarily Unavailable",
        487 => "Request Terminated",
        500 => "Server Internal Error",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

/// Whether Timer C entry `(at, sid, idx)` still applies: its branch is pending with a Timer C
/// at or after it.
fn timer_c_entry_live(contexts: &IdMap<TxId, Box<Context>>, (at, sid, idx): Entry) -> bool {
    let branch = contexts.get(&sid).and_then(|c| c.branches.get(idx));
    branch.is_some_and(|b| b.timer_c.at().is_some_and(|t| t >= at) && b.is_pending())
}
