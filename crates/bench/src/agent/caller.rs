//! The calling side (UAC, RFC 3261 §13.2, §12.2.1, §15): INVITE, provisional and final
//! responses, ACK for 2xx along the dialog's route set, BYE after the hold time, CANCEL while
//! ringing (§9.1), and digest answers to 401/407 (§22.2). The client transactions (Timers A/B/E/F,
//! the ACK of a non-2xx final, §17.1.1.3) are herald-core's, through [`super::client_tx`].
//!
//! [`Calls`] owns every call in flight; each entry point takes the run's [`Context`] and pushes
//! what should happen (sends, timers, measurements) into an [`Outbox`].

use super::client_tx::{ClientTx, NewRequest, TimerSlot};
use super::context::Context;
use super::output::{Measure, Outbox, Owner, Side};
use super::route::{InDialog, RouteCache};
use super::slab::Slab;
use super::timers::{Timer, TimerKind};
use super::wire::{Request, RING_HEADER, SDP_OFFER};
use bytes::Bytes;
use herald_sip::text::{push_dec, push_hex};

mod peeked;
mod responses;

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
            let auth = auth.as_ref().map(|(n, v)| (*n, v.as_str()));
            let bytes = local.request(&in_dialog(method, &branch, call, dialog, auth));
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

/// A request of `call` inside its dialog (RFC 3261 §12.2.1.1): to the remote target, along the
/// route set, with the dialog's tags and the call's current CSeq.
pub(super) fn in_dialog<'a>(
    method: &'a str,
    branch: &'a str,
    call: &'a Call,
    dialog: &'a InDialog,
    auth: Option<(&'a str, &'a str)>,
) -> Request<'a> {
    Request {
        method,
        uri: &dialog.route.request_uri,
        branch,
        from: &call.from,
        to: &dialog.to,
        call_id: &call.call_id,
        cseq: call.cseq,
        routes: &dialog.route.routes,
        contact_user: None,
        auth,
        extra: "",
        body: None,
    }
}
