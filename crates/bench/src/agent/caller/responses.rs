//! What the caller does with a response to one of its requests (RFC 3261 §13.2.2: provisional,
//! 2xx and other finals to the INVITE; §15.1.1 and §9.1: the finals to BYE and CANCEL), matched
//! to its call by our own Call-ID and to its transaction by the branch we wrote (§17.1.3).
//! [`super::peeked`] handles the usual responses without a full parse and shares the helpers here.

use super::{in_dialog, Call, CallState, Calls, Which};
use crate::agent::client_tx::{ClientTx, Reply};
use crate::agent::context::Context;
use crate::agent::held::Answer;
use crate::agent::output::{Measure, Outbox, Owner, SendKind, Side};
use crate::agent::route::InDialog;
use crate::agent::stats::status_reason;
use crate::agent::timers::{Timer, TimerKind, TIMEOUT_US};
use crate::agent::wire::ack_for_failure;
use herald_sip::{HeaderName, Message};

impl Calls {
    pub fn on_response(&mut self, ctx: &mut Context, msg: Message, out: &mut Outbox) {
        // Our own Call-ID, read as written (what is not ours does not parse as our handle); its
        // bytes are read directly, without a UTF-8 check (~100 instructions a response).
        let own_call = msg.get(HeaderName::CallId).and_then(parse_call_id);
        let Some((slot, generation)) = own_call else {
            out.record(Measure::Stray);
            return;
        };
        let (Some(status), Ok(cseq)) = (msg.status(), msg.cseq()) else {
            out.record(Measure::Stray);
            return;
        };
        let method = cseq.method.as_str();
        let Some(call) = self.calls.get_mut(slot, generation) else {
            // A late final for a finished call: acknowledge a non-2xx so the far end stops
            // retransmitting it (§17.1.1.3); everything else is a stray.
            if method == "INVITE" && status >= 300 {
                if let Some(ack) = ack_for_failure(&msg) {
                    out.send(Side::Caller, ack, ctx.proxy, SendKind::Plain);
                }
            }
            out.record(Measure::Stray);
            return;
        };
        if method == "INVITE" && status / 100 == 2 && call.invite.is_none() {
            // A 2xx retransmission after the INVITE transaction ended: ACK again (§13.2.2.4).
            if let (Some(ack), Some(d)) = (call.ack.clone(), &call.dialog) {
                out.send(Side::Caller, ack, d.route.dest, SendKind::Plain);
            }
            return;
        }
        let Some(which) = matching_tx(call, ctx, method.as_bytes(), msg.get(HeaderName::Via)) else {
            out.record(Measure::Stray);
            return;
        };
        let tx = call.tx(which).as_mut().expect("matched above");
        let first_provisional = which == Which::Invite && !tx.is_proceeding();
        let reply = match tx.settled(msg) {
            Ok(reply) => reply,
            Err(msg) => tx.on_response(ctx, msg, out),
        };
        match reply {
            Reply::Absorbed => {}
            Reply::Provisional(msg) if which == Which::Invite => {
                let status = msg.status().unwrap_or(0);
                self.on_invite_provisional(ctx, slot, generation, first_provisional, status, out)
            }
            Reply::Provisional(_) => {}
            Reply::Final(msg) => {
                let (method, took, held) = take_final(call, which, ctx, out);
                match which {
                    Which::Invite => self.on_invite_final(ctx, slot, generation, held, &msg, out),
                    Which::Other => {
                        let status = msg.status().unwrap_or(0);
                        self.on_other_final(ctx, slot, generation, method, took, status, Some(&msg), out)
                    }
                }
            }
        }
    }

    pub(super) fn on_invite_provisional(
        &mut self,
        ctx: &mut Context,
        slot: u32,
        generation: u32,
        first: bool,
        status: u16,
        out: &mut Outbox,
    ) {
        let Some(call) = self.calls.get_mut(slot, generation) else { return };
        if first {
            // Timer B stops with the first provisional (§17.1.1.2); bound the ringing instead
            // so a callee that never answers cannot hold the call forever.
            let id = call.invite.as_ref().map_or(0, |tx| tx.id);
            let limit = call.plan.ring_us + TIMEOUT_US;
            out.arm(ctx.now + limit, Timer { kind: TimerKind::CallerRingLimit, slot, generation: id });
        }
        if status > 100 {
            if !call.srd_recorded {
                let held = ctx.held.take(ctx.held.answer_key(call.held_call, "INVITE", Answer::Provisional));
                record_srd(call, ctx.rx_us, held, out);
            }
            if call.state == CallState::Calling {
                call.state = CallState::Early;
            }
            if call.cancel_wanted && call.other.is_none() {
                self.send_other(ctx, slot, generation, "CANCEL", None, out);
            }
        }
    }

    /// The INVITE's final response (its transaction already ACKed a non-2xx, §17.1.1.3), which
    /// our callee held `held_us` (when it was ours).
    fn on_invite_final(
        &mut self,
        ctx: &mut Context,
        slot: u32,
        generation: u32,
        held_us: u64,
        msg: &Message,
        out: &mut Outbox,
    ) {
        let status = msg.status().unwrap_or(0);
        let call = self.calls.get_mut(slot, generation).expect("caller checked");
        if status < 300 {
            record_srd(call, ctx.rx_us, held_us, out);
            out.record(Measure::Transaction(true));
            self.on_invite_2xx(ctx, slot, generation, msg, out);
            return;
        }
        let (challenged, cancelling, caller, callee) =
            (call.challenged, call.state == CallState::Cancelling, call.caller, call.callee);
        if (status == 401 || status == 407) && !challenged && !cancelling {
            out.record(Measure::Transaction(true));
            call.challenged = true;
            call.challenge_rx_us = ctx.rx_us;
            let uri = ctx.user_uri(callee).to_string();
            match ctx.credentials(caller, msg, status, "INVITE", &uri) {
                Some(auth) => self.send_invite(ctx, slot, generation, Some(auth), out),
                None => self.end(slot, generation, Err(&status_reason(status)), out),
            }
            return;
        }
        if status == 487 && cancelling {
            out.record(Measure::Transaction(true));
            call.invite_ended = true;
            if call.cancel_answered {
                self.end(slot, generation, Ok(()), out);
            }
            return;
        }
        out.record(Measure::Transaction(false));
        self.end(slot, generation, Err(&status_reason(status)), out);
    }

    /// 2xx to the INVITE: the dialog is set up (§12.1.2), the ACK goes along its route set
    /// (§13.2.2.4) and the hold time starts.
    fn on_invite_2xx(&mut self, ctx: &mut Context, slot: u32, generation: u32, msg: &Message, out: &mut Outbox) {
        let Some(dialog) = self.routes.dialog(msg, ctx.proxy) else {
            self.end(slot, generation, Err("bad 2xx"), out);
            return;
        };
        self.confirm(ctx, slot, generation, dialog, out);
    }

    /// The dialog of a 2xx to the INVITE is set up: the ACK goes along its route set and the
    /// hold time starts (§13.2.2.4).
    pub(super) fn confirm(
        &mut self,
        ctx: &mut Context,
        slot: u32,
        generation: u32,
        dialog: InDialog,
        out: &mut Outbox,
    ) {
        ctx.new_branch_into(&mut self.ack_branch);
        let call = self.calls.get_mut(slot, generation).expect("caller checked");
        // The ACK of a 2xx has the INVITE's CSeq number (§13.2.2.4).
        let ack = ctx.caller_local.request(&in_dialog("ACK", &self.ack_branch, call, &dialog, None));
        let dest = dialog.route.dest;
        call.dialog = Some(dialog);
        call.ack = Some(ack.clone());
        // A call we tried to cancel but that was answered first is hung up at once.
        let hold = if call.cancel_wanted { 0 } else { call.plan.hold_us };
        call.state = CallState::Confirmed;
        out.send(Side::Caller, ack, dest, SendKind::Essential(Owner::Call { slot, generation }));
        out.arm(ctx.now + hold, Timer { kind: TimerKind::CallerHangUp, slot, generation });
    }

    /// The final response (`status`; the message itself when it was parsed in full, which a
    /// challenge needs) to the call's BYE or CANCEL, which took `took_us` (our callee's hold of
    /// it left out).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_other_final(
        &mut self,
        ctx: &mut Context,
        slot: u32,
        generation: u32,
        method: &'static str,
        took_us: u64,
        status: u16,
        msg: Option<&Message>,
        out: &mut Outbox,
    ) {
        let call = self.calls.get_mut(slot, generation).expect("caller checked");
        if method == "CANCEL" {
            // 200 for the CANCEL; a 481 means the INVITE was already answered, whose final then
            // decides the call (§9.1).
            out.record(Measure::Transaction(status < 300 || status == 481));
            call.cancel_answered = true;
            if call.invite_ended {
                self.end(slot, generation, Ok(()), out);
            }
            return;
        }
        if status < 300 {
            out.record(Measure::Sdd(took_us));
            out.record(Measure::Transaction(true));
            self.end(slot, generation, Ok(()), out);
        } else if (status == 401 || status == 407) && !call.challenged {
            call.challenged = true;
            out.record(Measure::Transaction(true));
            let (caller, uri) =
                (call.caller, call.dialog.as_ref().map(|d| d.route.request_uri.clone()).unwrap_or_default());
            match msg.and_then(|msg| ctx.credentials(caller, msg, status, "BYE", &uri)) {
                Some(auth) => self.send_other(ctx, slot, generation, "BYE", Some(auth), out),
                None => self.end(slot, generation, Err(&status_reason(status)), out),
            }
        } else {
            out.record(Measure::Transaction(false));
            self.end(slot, generation, Err(&status_reason(status)), out);
        }
    }
}

/// The transaction of `call` a response with CSeq method `method` and top Via value `via`
/// belongs to (RFC 3261 §17.1.3: the branch this side wrote, and the method), if any.
pub(super) fn matching_tx(call: &Call, ctx: &Context, method: &[u8], via: Option<&[u8]>) -> Option<Which> {
    let ours = |tx: &ClientTx| ctx.caller_local.wrote_via(via, &tx.branch);
    if method == b"INVITE" {
        call.invite.as_ref().is_some_and(ours).then_some(Which::Invite)
    } else {
        call.other.as_ref().is_some_and(|tx| tx.method.as_bytes() == method && ours(tx)).then_some(Which::Other)
    }
}

/// Ends the call's `which` transaction at its final response: its method, how long the
/// response took (our callee's hold of the answer is the generator's time, not the proxy's,
/// and is left out) and that hold, with the response time recorded.
pub(super) fn take_final(
    call: &mut Call,
    which: Which,
    ctx: &mut Context,
    out: &mut Outbox,
) -> (&'static str, u64, u64) {
    let tx = call.tx(which).take().expect("matched by the caller");
    let held = ctx.held.take(ctx.held.answer_key(call.held_call, tx.method, Answer::Final));
    let took = ctx.rx_us.saturating_sub(tx.sent_us + held);
    out.record(Measure::ResponseTime(tx.method, took));
    (tx.method, took, held)
}

/// RFC 6076 §4.2: from the first INVITE out to the first answer other than 100, less the
/// generator's own time in between (answering a challenge, our callee holding the answer).
pub(super) fn record_srd(call: &mut Call, rx_us: u64, held_us: u64, out: &mut Outbox) {
    if !call.srd_recorded {
        call.srd_recorded = true;
        let own = held_us + call.answering_challenge_us;
        out.record(Measure::Srd(rx_us.saturating_sub(call.invite_started_us + own)));
    }
}

/// `c{slot}.{generation}.{run}@bench` → (slot, generation). Read byte by byte: it runs for
/// every response, and `str::splitn` with a char pattern cost ~250 instructions a call.
pub(super) fn parse_call_id(id: &(impl AsRef<[u8]> + ?Sized)) -> Option<(u32, u32)> {
    let rest = id.as_ref().strip_prefix(b"c")?;
    let (slot, rest) = leading_u32(rest)?;
    let rest = rest.strip_prefix(b".")?;
    let (generation, rest) = leading_u32(rest)?;
    (rest.is_empty() || rest[0] == b'.').then_some((slot, generation))
}

/// The decimal number at the start of `s` (at least one digit, no overflow) and what follows.
/// One pass, a digit at a time (counting the digits first and then converting them cost ~160
/// instructions a response, callgrind).
fn leading_u32(s: &[u8]) -> Option<(u32, &[u8])> {
    let mut n: u32 = 0;
    let mut digits = 0;
    while let Some(d) = s.get(digits).map(|b| b.wrapping_sub(b'0')).filter(|d| *d <= 9) {
        n = n.checked_mul(10)?.checked_add(u32::from(d))?;
        digits += 1;
    }
    (digits > 0).then_some((n, &s[digits..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_ids_round_trip_and_reject_garbage() {
        assert_eq!(parse_call_id("c12.3.ff@bench"), Some((12, 3)));
        assert_eq!(parse_call_id("r1.ff@bench"), None);
        assert_eq!(parse_call_id("c.1.x"), None);
        assert_eq!(parse_call_id("c99999999999.1.x"), None);
        assert_eq!(parse_call_id("c4294967295.0.x"), Some((u32::MAX, 0)));
        assert_eq!(parse_call_id("c1.2"), Some((1, 2)));
        assert_eq!(parse_call_id("c1.2x.y"), None);
        assert_eq!(parse_call_id("c+1.2.y"), None);
    }
}
