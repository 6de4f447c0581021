//! The calling side (UAC, RFC 3261 §13.2, §12.2.1, §15): INVITE, provisional and final
//! responses, ACK for 2xx along the dialog's route set, BYE after the hold time, CANCEL while
//! ringing (§9.1), and digest answers to 401/407 (§22.2). The client transactions (Timers A/B/E/F,
//! the ACK of a non-2xx final, §17.1.1.3) are herald-core's, through [`super::client_tx`].
//!
//! [`Calls`] owns every call in flight; each entry point takes the run's [`Context`] and pushes
//! what should happen (sends, timers, measurements) into an [`Outbox`].

use super::client_tx::{ClientTx, NewRequest, Reply, TimerSlot};
use super::context::Context;
use super::held::Answer;
use super::output::{Measure, Outbox, Owner, SendKind, Side};
use super::route::{InDialog, RouteCache};
use super::slab::Slab;
use super::stats::status_reason;
use super::timers::{Timer, TimerKind, TIMEOUT_US};
use super::wire::{ack_for_failure, Request, RING_HEADER, SDP_OFFER};
use bytes::Bytes;
use herald_sip::text::{push_dec, push_hex};
use herald_sip::{HeaderName, Message};

mod peeked;

/// How one call should go, decided by the caller when it starts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plan {
    /// How long the callee rings before answering (told to our callee in [`RING_HEADER`]).
    pub ring_us: u64,
    pub hold_us: u64,
    /// Cancel this long after the INVITE instead of waiting for the answer.
    pub cancel_after_us: Option<u64>,
    /// "answered", "voicemail", "cancelled" for `bench users`.
    pub outcome: Option<&'static str>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallState {
    /// INVITE sent, no provisional yet.
    Calling,
    /// 1xx received.
    Early,
    /// 2xx received and ACKed; holding.
    Confirmed,
    /// BYE sent.
    Ending,
    /// CANCEL sent (or waiting for a provisional to send it).
    Cancelling,
}

pub struct Call {
    pub call_id: String,
    /// The Call-ID's part of the keys of our callee's held answers
    /// ([`super::held::Held::call_key`]).
    pub held_call: u64,
    pub from: String,
    pub caller: usize,
    pub callee: usize,
    pub cseq: u32,
    pub state: CallState,
    pub plan: Plan,
    pub invite: Option<ClientTx>,
    /// BYE or CANCEL.
    pub other: Option<ClientTx>,
    pub invite_started_us: u64,
    pub srd_recorded: bool,
    pub challenged: bool,
    /// When the INVITE's challenge arrived, and how long we then took to send the INVITE again:
    /// the generator's own time inside the SRD, which it leaves out.
    pub challenge_rx_us: u64,
    pub answering_challenge_us: u64,
    pub dialog: Option<InDialog>,
    /// The ACK for the 2xx, resent when the 2xx is retransmitted (§13.2.2.4).
    pub ack: Option<Bytes>,
    pub cancel_wanted: bool,
    /// Final response to the INVITE after CANCEL (487) and 200 for the CANCEL received.
    pub invite_ended: bool,
    pub cancel_answered: bool,
}

/// Which of a call's two transactions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Which {
    Invite,
    /// BYE or CANCEL.
    Other,
}

impl Call {
    fn tx(&mut self, which: Which) -> &mut Option<ClientTx> {
        match which {
            Which::Invite => &mut self.invite,
            Which::Other => &mut self.other,
        }
    }
}

/// Every call in flight, by `(slot, generation)` handle (its Call-ID names the handle).
#[derive(Default)]
pub struct Calls {
    calls: Slab<Call>,
    /// The route sets of the dialogs, by the 2xx lines they come from.
    routes: RouteCache,
    /// The branch of the ACK being written (kept for its allocation).
    ack_branch: String,
}

impl Calls {
    /// Room for `n` calls in flight at once.
    pub fn reserve(&mut self, n: usize) {
        self.calls.reserve(n);
    }

    pub fn len(&self) -> usize {
        self.calls.len()
    }

    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// Starts one call from user `caller` to user `callee`.
    pub fn start(&mut self, ctx: &mut Context, caller: usize, callee: usize, plan: Plan, out: &mut Outbox) {
        out.record(Measure::Attempt);
        // `<sip:user@domain>` as written once per run, and the tag; room for the tag too:
        // growing the string afterwards would copy it.
        let aor = ctx.user_to(caller);
        let mut from = String::with_capacity(aor.len() + ";tag=".len() + 16);
        from.push_str(aor);
        from.push_str(";tag=");
        push_hex(&mut from, rand::RngExt::random::<u64>(&mut ctx.rng), 0);
        let call = Call {
            call_id: String::new(),
            held_call: 0,
            from,
            caller,
            callee,
            cseq: 0,
            state: CallState::Calling,
            plan,
            invite: None,
            other: None,
            invite_started_us: ctx.now,
            srd_recorded: false,
            challenged: false,
            challenge_rx_us: 0,
            answering_challenge_us: 0,
            dialog: None,
            ack: None,
            cancel_wanted: false,
            invite_ended: false,
            cancel_answered: false,
        };
        let (slot, generation) = self.calls.insert(call);
        let mut call_id = String::with_capacity(40);
        call_id.push('c');
        push_dec(&mut call_id, u64::from(slot));
        call_id.push('.');
        push_dec(&mut call_id, u64::from(generation));
        call_id.push_str(&ctx.call_id_suffix);
        if let Some(c) = self.calls.get_mut(slot, generation) {
            c.held_call = ctx.held.call_key(&call_id);
            c.call_id = call_id;
        }
        if let Some(after) = plan.cancel_after_us {
            out.arm(ctx.now + after, Timer { kind: TimerKind::CallerCancel, slot, generation });
        }
        self.send_invite(ctx, slot, generation, None, out);
    }

    fn send_invite(
        &mut self,
        ctx: &mut Context,
        slot: u32,
        generation: u32,
        auth: Option<(&'static str, String)>,
        out: &mut Outbox,
    ) {
        let Some(call) = self.calls.get_mut(slot, generation) else { return };
        call.cseq += 1;
        let (id, branch) = ctx.new_tx();
        // Our callee rings `callee_ring_us` unless told otherwise: a call that rings that long
        // (every call of `bench calls`) needs no header, which saved building it, and parsing it
        // and looking its name up at our callee (~700 instructions a call) and at the proxy.
        let mut extra = String::new();
        if call.plan.ring_us != ctx.callee_ring_us {
            extra.reserve(RING_HEADER.len() + 24);
            extra.push_str(RING_HEADER);
            extra.push_str(": ");
            push_dec(&mut extra, call.plan.ring_us / 1000);
            extra.push_str("\r\n");
        }
        let (bytes, ack) = ctx.caller_local.invite(&Request {
            method: "INVITE",
            uri: ctx.user_uri(call.callee),
            branch: &branch,
            from: &call.from,
            to: ctx.user_to(call.callee),
            call_id: &call.call_id,
            cseq: call.cseq,
            routes: &[],
            contact_user: Some(&ctx.users[call.caller].name),
            auth: auth.as_ref().map(|(n, v)| (*n, v.as_str())),
            extra: &extra,
            body: Some(("application/sdp", SDP_OFFER)),
        });
        let request = NewRequest { id, method: "INVITE", branch, bytes, dest: ctx.proxy, ack: Some(ack) };
        self.start_tx(ctx, slot, generation, Which::Invite, request, out);
    }

    /// Sends BYE (§15.1.1) or CANCEL (§9.1) as the call's second transaction.
    fn send_other(
        &mut self,
        ctx: &mut Context,
        slot: u32,
        generation: u32,
        method: &'static str,
        auth: Option<(&'static str, String)>,
        out: &mut Outbox,
    ) {
        if self.calls.get_mut(slot, generation).is_none() {
            return;
        }
        let (id, branch) = ctx.new_tx();
        let call = self.calls.get_mut(slot, generation).expect("checked above");
        let local = &ctx.caller_local;
        let request = if method == "CANCEL" {
            // §9.1: same Request-URI, Call-ID, From, To, CSeq number and branch as the INVITE.
            let Some(invite) = &call.invite else { return };
            let bytes = local.request(&Request {
                method,
                uri: ctx.user_uri(call.callee),
                branch: &invite.branch,
                from: &call.from,
                to: ctx.user_to(call.callee),
                call_id: &call.call_id,
                cseq: call.cseq,
                routes: &[],
                contact_user: None,
                auth: None,
                extra: "",
                body: None,
            });
            NewRequest { id, method, branch: invite.branch.clone(), bytes, dest: invite.dest, ack: None }
        } else {
            let Some(dialog) = &call.dialog else { return };
            call.cseq += 1;
            let bytes = local.request(&Request {
                method,
                uri: &dialog.route.request_uri,
                branch: &branch,
                from: &call.from,
                to: &dialog.to,
                call_id: &call.call_id,
                cseq: call.cseq,
                routes: &dialog.route.routes,
                contact_user: None,
                auth: auth.as_ref().map(|(n, v)| (*n, v.as_str())),
                extra: "",
                body: None,
            });
            NewRequest { id, method, branch, bytes, dest: dialog.route.dest, ack: None }
        };
        self.start_tx(ctx, slot, generation, Which::Other, request, out);
    }

    /// Starts `request` as the call's `which` transaction. A send the transport refuses ends the
    /// call with its reason (the loop calls [`Calls::on_send_refused`]).
    fn start_tx(
        &mut self,
        ctx: &Context,
        slot: u32,
        generation: u32,
        which: Which,
        request: NewRequest,
        out: &mut Outbox,
    ) {
        let owner = Owner::Call { slot, generation };
        let timer = TimerSlot { kind: TimerKind::CallerTransaction, slot };
        let tx = ClientTx::start(ctx, Side::Caller, owner, timer, request, out);
        if let Some(call) = self.calls.get_mut(slot, generation) {
            *call.tx(which) = Some(tx);
        }
    }

    /// The transport refused a request or the ACK of call `(slot, generation)`: `reason`.
    pub fn on_send_refused(&mut self, slot: u32, generation: u32, reason: &str, out: &mut Outbox) {
        self.end(slot, generation, Err(reason), out);
    }

    /// The request of transaction `id` of the call in `slot` went to the kernel at `at_us`.
    pub fn stamp(&mut self, slot: u32, id: u32, at_us: u64) {
        let Some((call, _)) = self.calls.get_slot_mut(slot) else { return };
        if call.invite.as_ref().is_some_and(|tx| tx.id == id) {
            match call.challenged {
                false => call.invite_started_us = at_us, // SRD starts with the first INVITE out
                true => call.answering_challenge_us = at_us.saturating_sub(call.challenge_rx_us),
            }
        }
        if let Some(tx) = [call.invite.as_mut(), call.other.as_mut()].into_iter().flatten().find(|tx| tx.id == id) {
            tx.sent_us = at_us;
        }
    }

    /// Ends a call: counts it, and tells the user model its caller is free.
    pub fn end(&mut self, slot: u32, generation: u32, result: Result<(), &str>, out: &mut Outbox) {
        let Some(call) = self.calls.remove(slot, generation) else { return };
        out.record(match result {
            Ok(()) => Measure::Success(call.plan.outcome),
            // A call that failed after it was answered is told apart: under overload a server
            // must shed new calls, never those already set up (seed 001).
            Err(reason) if call.dialog.is_some() => Measure::Failure(format!("after answer: {reason}")),
            Err(reason) => Measure::Failure(reason.to_string()),
        });
        out.call_ended(call.caller);
    }

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

    fn on_invite_provisional(
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
    fn confirm(&mut self, ctx: &mut Context, slot: u32, generation: u32, dialog: InDialog, out: &mut Outbox) {
        ctx.new_branch_into(&mut self.ack_branch);
        let call = self.calls.get_mut(slot, generation).expect("caller checked");
        let ack = ctx.caller_local.request(&Request {
            method: "ACK",
            uri: &dialog.route.request_uri,
            branch: &self.ack_branch,
            from: &call.from,
            to: &dialog.to,
            call_id: &call.call_id,
            cseq: call.cseq,
            routes: &dialog.route.routes,
            contact_user: None,
            auth: None,
            extra: "",
            body: None,
        });
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
    fn on_other_final(
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

    pub fn on_timer(&mut self, ctx: &mut Context, t: Timer, out: &mut Outbox) {
        match t.kind {
            TimerKind::CallerTransaction => self.on_transaction_timer(ctx, t, out),
            TimerKind::CallerRingLimit => {
                // The generation is the INVITE transaction's id: a later INVITE of the call (after
                // a challenge) has its own limit.
                let Some((call, generation)) = self.calls.get_slot_mut(t.slot) else { return };
                if call.invite.as_ref().is_some_and(|tx| tx.id == t.generation && tx.is_proceeding()) {
                    out.record(Measure::Transaction(false));
                    self.end(t.slot, generation, Err("timeout"), out);
                }
            }
            TimerKind::CallerHangUp => {
                let Some(c) = self.calls.get_mut(t.slot, t.generation) else { return };
                if c.state == CallState::Confirmed {
                    c.state = CallState::Ending;
                    c.challenged = false;
                    self.send_other(ctx, t.slot, t.generation, "BYE", None, out);
                }
            }
            TimerKind::CallerCancel => {
                let Some(call) = self.calls.get_mut(t.slot, t.generation) else { return };
                call.cancel_wanted = true;
                match call.state {
                    // §9.1: no CANCEL before a provisional; it goes out when one arrives.
                    CallState::Calling => call.state = CallState::Cancelling,
                    CallState::Early => {
                        call.state = CallState::Cancelling;
                        self.send_other(ctx, t.slot, t.generation, "CANCEL", None, out);
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }

    /// A deadline of one of the call's transactions (the timer's generation is the transaction
    /// id, unique across calls): retransmit, or time out (Timer B or F).
    fn on_transaction_timer(&mut self, ctx: &Context, t: Timer, out: &mut Outbox) {
        let Some((call, generation)) = self.calls.get_slot_mut(t.slot) else { return };
        let which = if call.invite.as_ref().is_some_and(|tx| tx.id == t.generation) {
            Which::Invite
        } else if call.other.as_ref().is_some_and(|tx| tx.id == t.generation) {
            Which::Other
        } else {
            return;
        };
        let tx = call.tx(which).as_mut().expect("matched above");
        if tx.on_timer(ctx, out) {
            out.record(Measure::Transaction(false));
            self.end(t.slot, generation, Err("timeout"), out);
        }
    }

    /// Drain: hang up every held call now instead of at the end of its hold.
    pub fn hang_up_all(&mut self, ctx: &Context, out: &mut Outbox) {
        for (slot, generation) in self.calls.handles() {
            if self.calls.get_mut(slot, generation).is_some_and(|c| c.state == CallState::Confirmed) {
                out.arm(ctx.now, Timer { kind: TimerKind::CallerHangUp, slot, generation });
            }
        }
    }

    /// Ends every call still running, failed with `reason`.
    pub fn fail_all(&mut self, reason: &str, out: &mut Outbox) {
        for (slot, generation) in self.calls.handles() {
            self.end(slot, generation, Err(reason), out);
        }
    }
}

/// The transaction of `call` a response with CSeq method `method` and top Via value `via`
/// belongs to (RFC 3261 §17.1.3: the branch this side wrote, and the method), if any.
fn matching_tx(call: &Call, ctx: &Context, method: &[u8], via: Option<&[u8]>) -> Option<Which> {
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
fn take_final(call: &mut Call, which: Which, ctx: &mut Context, out: &mut Outbox) -> (&'static str, u64, u64) {
    let tx = call.tx(which).take().expect("matched by the caller");
    let held = ctx.held.take(ctx.held.answer_key(call.held_call, tx.method, Answer::Final));
    let took = ctx.rx_us.saturating_sub(tx.sent_us + held);
    out.record(Measure::ResponseTime(tx.method, took));
    (tx.method, took, held)
}

/// RFC 6076 §4.2: from the first INVITE out to the first answer other than 100, less the
/// generator's own time in between (answering a challenge, our callee holding the answer).
fn record_srd(call: &mut Call, rx_us: u64, held_us: u64, out: &mut Outbox) {
    if !call.srd_recorded {
        call.srd_recorded = true;
        let own = held_us + call.answering_challenge_us;
        out.record(Measure::Srd(rx_us.saturating_sub(call.invite_started_us + own)));
    }
}

/// `c{slot}.{generation}.{run}@bench` → (slot, generation). Read byte by byte: it runs for
/// every response, and `str::splitn` with a char pattern cost ~250 instructions a call.
fn parse_call_id(id: &(impl AsRef<[u8]> + ?Sized)) -> Option<(u32, u32)> {
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
