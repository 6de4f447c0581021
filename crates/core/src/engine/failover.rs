//! Serial failover between the attempts of a call to a gateway set (issue 18; the plan comes
//! from `gateway_plan`, the semantics are in `crate::gateways`). The attempts are branches of
//! one response context, started one at a time (`fork::take_group`); this module adds what a
//! branch to a gateway needs beyond ordinary sequential forking:
//!
//! * a final response that is not a failover status (486, 404, 3xx, 6xx; 2xx always) ends the
//!   call's attempts: it goes to the caller, no further destination is tried;
//! * the per-attempt timeout: an attempt that heard nothing at all (not even 100 Trying)
//!   within `failover.attempt_timeout` is abandoned - counted as 408, the next attempt starts.
//!   Its client transaction lives on (module `abandoned`): RFC 3261 §9.1 forbids a CANCEL before a provisional,
//!   so a provisional that comes later is answered with CANCEL (and not relayed), even after
//!   the call's response context is gone, and the transaction is dropped 64*T1 after the CANCEL
//!   if no final response comes; a late 2xx is relayed like any 2xx (§16.7 step 4, the caller
//!   sees two and ends one, as with any forking); any other late final response is absorbed;
//! * the destination's health: each attempt counts as a call there, failed when it ends in a
//!   failover status, a timeout, a transport error or no route (`Health::record_call`; M in a
//!   row take it down); a CANCEL from the caller is nobody's failure;
//! * its active calls: an INVITE attempt counts from its start to its final response; a 2xx
//!   makes it an established call, counted until a BYE with its Call-ID passes this engine
//!   (the shard of the Call-ID sees every request of the dialog) or, if none ever does
//!   (`record_route = "never"`, a lost BYE), for `gateway_calls::ESTABLISHED_TTL` (4 h). At
//!   most `gateway_calls::MAX_ESTABLISHED` (65536) are remembered per engine: beyond, a call is counted only while
//!   its INVITE is in flight.

use super::context::{BranchState, FinalResponse};
use super::Engine;
use crate::gateways::{GatewayLeg, HealthState};
use crate::io::Output;
use crate::transaction::TxId;
use herald_sip::{Message, Method};
use std::time::Instant;

impl Engine {
    /// A branch of `sid` was just created for a gateway attempt: count the call at its
    /// destination and arm its per-attempt timeout.
    pub(super) fn gateway_attempt_started(&mut self, now: Instant, sid: TxId, idx: usize) {
        let Some(ctx) = self.contexts.get(&sid) else { return };
        let Some(leg) = ctx.branches.get(idx).and_then(|b| b.planned.gateway.as_ref()) else { return };
        let health = &leg.destination().health;
        health.call_started();
        if ctx.is_invite {
            health.active_inc();
        }
        if let Some(t) = leg.set.failover.attempt_timeout {
            self.gateway_calls.arm(now + t, sid, idx);
        }
    }

    /// A response to a gateway attempt, before the ordinary handling (`responses`): a final
    /// response updates the destination's health and, when it is not a failover status, ends
    /// the call's attempts. A late 2xx of an attempt given up makes its call established.
    pub(super) fn gateway_response(&mut self, now: Instant, sid: TxId, idx: usize, resp: &Message, status: u16) {
        let Some(ctx) = self.contexts.get_mut(&sid) else { return };
        let is_invite = ctx.is_invite;
        let Some(b) = ctx.branches.get_mut(idx) else { return };
        let Some(leg) = b.planned.gateway.clone() else { return };
        let established = is_invite && (200..300).contains(&status);
        if b.abandoned {
            // Only a 2xx gets here (`abandoned_response`): the call exists after all.
            if established && !matches!(b.state, BranchState::Done(_)) {
                leg.destination().health.active_inc();
                self.gateway_call_established(now, &leg, resp.call_id().unwrap_or_default());
            }
            return;
        }
        if status < 200 || !b.is_pending() {
            return;
        }
        let fails_over = leg.set.fails_over(status);
        if !fails_over {
            // The destination's answer is the call's (a 500 after a 502 that failed over goes
            // to the caller, not the 502): no further attempt, and the earlier failed
            // attempts' responses no longer compete for best (§16.7 step 6).
            ctx.stop_forking = true;
            ctx.waiting.clear();
            let freed: usize = ctx.finals.drain(..).filter_map(|f| f.msg).map(|m| m.as_bytes().len()).sum();
            self.context_bytes -= freed;
        }
        attempt_ended(now, &leg, !fails_over, is_invite && !established);
        if established {
            self.gateway_call_established(now, &leg, resp.call_id().unwrap_or_default());
        }
    }

    /// A gateway attempt failed without a response (`Engine::branch_failed`: Timer B/F/C, a
    /// transport error, no route; 487 when cancelled, which is nobody's failure).
    pub(super) fn gateway_attempt_failed(&mut self, now: Instant, leg: &GatewayLeg, status: u16, is_invite: bool) {
        attempt_ended(now, leg, status == 487, is_invite);
    }

    /// A 2xx from a gateway attempt of an INVITE: the call is established there.
    pub(super) fn gateway_call_established(&mut self, now: Instant, leg: &GatewayLeg, call_id: &str) {
        let health = &leg.destination().health;
        if !self.gateway_calls.established(now, call_id, health) {
            // One dialog per Call-ID counted; beyond the bound the call stops counting now.
            health.active_dec();
        }
    }

    /// A request entering the engine: a BYE ends the established gateway call of its Call-ID.
    pub(super) fn gateway_call_request(&mut self, msg: &Message) {
        if msg.method() != Some(Method::Bye) {
            return;
        }
        if let Some(health) = msg.call_id().ok().and_then(|id| self.gateway_calls.ended(id)) {
            health.active_dec();
        }
    }

    /// Per-attempt timeouts that are due, and established calls to forget.
    pub(super) fn gateway_timeouts(&mut self, now: Instant, out: &mut Vec<Output>) {
        while let Some((sid, idx)) = self.gateway_calls.pop_due(now) {
            self.abandon_attempt(now, sid, idx, out);
        }
        self.gateway_calls.expire(now);
    }

    /// The per-attempt timeout of branch `idx` of `sid` passed: if it heard nothing at all, it
    /// is abandoned (module docs) and the next attempt starts.
    fn abandon_attempt(&mut self, now: Instant, sid: TxId, idx: usize, out: &mut Vec<Output>) {
        let Some(ctx) = self.contexts.get_mut(&sid) else { return };
        let is_invite = ctx.is_invite;
        let Some(b) = ctx.branches.get_mut(idx) else { return };
        let Some(leg) = b.planned.gateway.clone() else { return };
        match b.state {
            BranchState::Trying if !b.abandoned => {
                b.abandoned = true;
                self.timer_c.disarm(&mut b.timer_c, sid, idx);
                b.cancel_when_provisional = false;
                if let Some(cid) = b.client {
                    self.abandoned.abandon(cid);
                }
                ctx.finals.push(FinalResponse { status: 408, msg: None });
                tracing::debug!(set = %leg.set.name, destination = %leg.destination().uri, "gateway attempt timed out");
                attempt_ended(now, &leg, false, is_invite);
            }
            // Still looking the name up: that lookup is the attempt's failure.
            BranchState::Resolving(_) => self.branch_failed(now, sid, idx, 408, out),
            _ => return,
        }
        self.advance(now, sid, out);
    }
}

/// The end of one attempt at `leg`'s destination: its health learns the outcome (`ok`), and an
/// INVITE attempt that is not established (`ends_call`) stops counting as active.
fn attempt_ended(now: Instant, leg: &GatewayLeg, ok: bool, ends_call: bool) {
    let d = leg.destination();
    if ends_call {
        d.health.active_dec();
    }
    if let Some(state) = d.health.record_call(now, ok, &leg.set.health) {
        if state == HealthState::Down {
            tracing::warn!(
                set = %leg.set.name,
                destination = %d.uri,
                failed_calls = leg.set.health.call_failures_down,
                "gateway down: failed calls in a row"
            );
        }
    }
}
