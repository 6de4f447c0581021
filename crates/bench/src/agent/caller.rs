//! The calling side (UAC, RFC 3261 §13.2, §12.2.1, §15): INVITE with Timers A/B, provisional
//! and final responses, ACK for 2xx along the dialog's route set, ACK for non-2xx finals on the
//! INVITE's branch (§17.1.1.3), BYE after the hold time, CANCEL while ringing (§9.1), and digest
//! answers to 401/407 (§22.2).

use super::engine::{ClientTx, Engine, Side, T1_US, TIMEOUT_US};
use super::route::{dialog_from_2xx, InDialog};
use super::stats::status_reason;
use super::timers::{Timer, TimerKind};
use super::wire::{ack_for_failure, Request, RING_HEADER, SDP_OFFER};
use bytes::Bytes;
use herald_sip::text::{push_dec, push_hex};
use herald_sip::Message;

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
    pub dialog: Option<InDialog>,
    /// The ACK for the 2xx, resent when the 2xx is retransmitted (§13.2.2.4).
    pub ack: Option<Bytes>,
    pub cancel_wanted: bool,
    /// Final response to the INVITE after CANCEL (487) and 200 for the CANCEL received.
    pub invite_ended: bool,
    pub cancel_answered: bool,
}

impl Engine {
    fn request_uri(&self, user: usize) -> String {
        ["sip:", &self.users[user].name, "@", &self.caller_local.domain].concat()
    }

    /// Starts one call from user `caller` to user `callee`.
    pub fn start_call(&mut self, caller: usize, callee: usize, plan: Plan) {
        self.stats.attempted += 1;
        let mut from = ["<sip:", &self.users[caller].name, "@", &self.caller_local.domain, ">;tag="].concat();
        push_hex(&mut from, rand::RngExt::random::<u64>(&mut self.rng), 0);
        let call = Call {
            call_id: String::new(),
            from,
            caller,
            callee,
            cseq: 0,
            state: CallState::Calling,
            plan,
            invite: None,
            other: None,
            invite_started_us: self.now,
            srd_recorded: false,
            challenged: false,
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
        call_id.push('.');
        push_hex(&mut call_id, u64::from(self.run_id), 0);
        call_id.push_str("@bench");
        if let Some(c) = self.calls.get_mut(slot, generation) {
            c.call_id = call_id;
        }
        if let Some(after) = plan.cancel_after_us {
            self.timers.arm(self.now + after, Timer { kind: TimerKind::CallerCancel, slot, generation });
        }
        self.send_invite(slot, generation, None);
    }

    fn send_invite(&mut self, slot: u32, generation: u32, auth: Option<(&'static str, String)>) {
        let Some(call) = self.calls.get_mut(slot, generation) else { return };
        call.cseq += 1;
        let (cseq, callee, caller, ring_ms) = (call.cseq, call.callee, call.caller, call.plan.ring_us / 1000);
        let (call_id, from) = (call.call_id.clone(), call.from.clone());
        let uri = self.request_uri(callee);
        let (id, branch) = self.new_tx();
        let mut extra = [RING_HEADER, ": "].concat();
        push_dec(&mut extra, ring_ms);
        extra.push_str("\r\n");
        let request = self.caller_local.request(&Request {
            method: "INVITE",
            uri: &uri,
            branch: &branch,
            from: &from,
            to: &["<", &uri, ">"].concat(),
            call_id: &call_id,
            cseq,
            routes: &[],
            contact_user: Some(&self.users[caller].name),
            auth: auth.as_ref().map(|(n, v)| (*n, v.as_str())),
            extra: &extra,
            body: Some(("application/sdp", SDP_OFFER)),
        });
        let tx = ClientTx {
            id,
            method: "INVITE",
            branch,
            request,
            dest: self.proxy,
            sent_us: self.now,
            interval_us: T1_US,
            proceeding: false,
        };
        self.start_caller_tx(slot, generation, tx, |call| &mut call.invite);
    }

    /// Sends BYE (§15.1.1) or CANCEL (§9.1) as the call's second transaction.
    fn send_other(&mut self, slot: u32, generation: u32, method: &'static str, auth: Option<(&'static str, String)>) {
        if self.calls.get_mut(slot, generation).is_none() {
            return;
        }
        let (id, branch) = self.new_tx();
        let call = self.calls.get_mut(slot, generation).expect("checked above");
        let local = &self.caller_local;
        let tx = if method == "CANCEL" {
            // §9.1: same Request-URI, Call-ID, From, To, CSeq number and branch as the INVITE.
            let Some(invite) = &call.invite else { return };
            let uri = format!("sip:{}@{}", self.users[call.callee].name, local.domain);
            let request = local.request(&Request {
                method,
                uri: &uri,
                branch: &invite.branch,
                from: &call.from,
                to: &format!("<{uri}>"),
                call_id: &call.call_id,
                cseq: call.cseq,
                routes: &[],
                contact_user: None,
                auth: None,
                extra: "",
                body: None,
            });
            let branch = invite.branch.clone();
            ClientTx {
                id,
                method,
                branch,
                request,
                dest: invite.dest,
                sent_us: self.now,
                interval_us: T1_US,
                proceeding: false,
            }
        } else {
            let Some(dialog) = &call.dialog else { return };
            call.cseq += 1;
            let request = local.request(&Request {
                method,
                uri: &dialog.request_uri,
                branch: &branch,
                from: &call.from,
                to: &dialog.to,
                call_id: &call.call_id,
                cseq: call.cseq,
                routes: &dialog.routes,
                contact_user: None,
                auth: auth.as_ref().map(|(n, v)| (*n, v.as_str())),
                extra: "",
                body: None,
            });
            ClientTx {
                id,
                method,
                branch,
                request,
                dest: dialog.dest,
                sent_us: self.now,
                interval_us: T1_US,
                proceeding: false,
            }
        };
        self.start_caller_tx(slot, generation, tx, |call| &mut call.other);
    }

    /// Sends the first copy of `tx`, arms its timers, and keeps it in the call's slot that
    /// `place` picks; a send that fails at once ends the call with the transport's reason.
    fn start_caller_tx(
        &mut self,
        slot: u32,
        generation: u32,
        tx: ClientTx,
        place: fn(&mut Call) -> &mut Option<ClientTx>,
    ) {
        let ok = self.start_tx(Side::Caller, &tx, slot, TimerKind::CallerRetransmit, TimerKind::CallerTimeout);
        if let Some(call) = self.calls.get_mut(slot, generation) {
            *place(call) = Some(tx);
        }
        if !ok {
            let why = self.transport_failure();
            self.end_call(slot, generation, Err(&why));
        }
    }

    /// Ends a call: counts it and, for `bench users`, lets its caller think about the next one.
    pub fn end_call(&mut self, slot: u32, generation: u32, result: Result<(), &str>) {
        let Some(call) = self.calls.remove(slot, generation) else { return };
        match result {
            Ok(()) => self.stats.succeed(call.plan.outcome),
            // A call that failed after it was answered is told apart: under overload a server
            // must shed new calls, never those already set up (seed 001).
            Err(reason) if call.dialog.is_some() => self.stats.fail(&format!("after answer: {reason}")),
            Err(reason) => self.stats.fail(reason),
        }
        self.after_call(call.caller);
    }

    pub fn on_caller_response(&mut self, msg: &Message) {
        let Some((slot, generation)) = msg.call_id().ok().and_then(parse_call_id) else {
            self.stats.stray += 1;
            return;
        };
        let (Some(status), Ok(cseq), Ok(via)) = (msg.status(), msg.cseq(), msg.top_via()) else {
            self.stats.stray += 1;
            return;
        };
        let branch = via.branch().unwrap_or("");
        let method = cseq.method.as_str();
        let Some(call) = self.calls.get_mut(slot, generation) else {
            // A late final for a finished call: acknowledge a non-2xx so the far end stops
            // retransmitting it (§17.1.1.3); everything else is a stray.
            if method == "INVITE" && status >= 300 {
                if let Some(ack) = ack_for_failure(msg) {
                    self.send(Side::Caller, ack, self.proxy);
                }
            }
            self.stats.stray += 1;
            return;
        };
        if method == "INVITE" {
            // A 2xx retransmission after the INVITE transaction ended: ACK again (§13.2.2.4).
            if status / 100 == 2 && call.invite.is_none() {
                if let (Some(ack), Some(d)) = (call.ack.clone(), &call.dialog) {
                    let dest = d.dest;
                    self.send(Side::Caller, ack, dest);
                }
                return;
            }
            if call.invite.as_ref().is_none_or(|tx| tx.branch != branch) {
                self.stats.stray += 1;
                return;
            }
            self.on_invite_response(slot, generation, status, msg);
        } else if call.other.as_ref().is_some_and(|tx| tx.branch == branch && tx.method == method) {
            self.on_other_response(slot, generation, status, msg);
        } else {
            self.stats.stray += 1;
        }
    }

    fn on_invite_response(&mut self, slot: u32, generation: u32, status: u16, msg: &Message) {
        let (now, rx) = (self.now, self.rx_us);
        let call = self.calls.get_mut(slot, generation).expect("caller checked");
        let tx = call.invite.as_mut().expect("caller checked");
        if status < 200 {
            if !tx.proceeding {
                tx.proceeding = true;
                // Timer B stops with the first provisional (§17.1.1.2); bound the ringing instead
                // so a callee that never answers cannot hold the call forever.
                let limit = call.plan.ring_us + TIMEOUT_US;
                self.timers.arm(now + limit, Timer { kind: TimerKind::CallerTimeout, slot, generation: tx.id });
            }
            if status > 100 {
                record_srd(&mut self.stats, call, rx);
                if call.state == CallState::Calling {
                    call.state = CallState::Early;
                }
                if call.cancel_wanted && call.other.is_none() {
                    self.send_other(slot, generation, "CANCEL", None);
                }
            }
            return;
        }
        let tx = call.invite.take().expect("caller checked");
        self.stats.response_time("INVITE", rx.saturating_sub(tx.sent_us));
        if status < 300 {
            record_srd(&mut self.stats, call, rx);
            self.stats.transaction(true);
            self.on_invite_2xx(slot, generation, msg);
            return;
        }
        // Non-2xx final: the INVITE transaction ACKs it on the same branch (§17.1.1.3).
        let (challenged, cancelling, caller, callee) =
            (call.challenged, call.state == CallState::Cancelling, call.caller, call.callee);
        if let Some(ack) = ack_for_failure(msg) {
            self.send(Side::Caller, ack, tx.dest);
        }
        if (status == 401 || status == 407) && !challenged && !cancelling {
            self.stats.transaction(true);
            if let Some(call) = self.calls.get_mut(slot, generation) {
                call.challenged = true;
            }
            let uri = self.request_uri(callee);
            match self.credentials(caller, msg, status, "INVITE", &uri) {
                Some(auth) => self.send_invite(slot, generation, Some(auth)),
                None => self.end_call(slot, generation, Err(&status_reason(status))),
            }
            return;
        }
        if status == 487 && cancelling {
            self.stats.transaction(true);
            let Some(call) = self.calls.get_mut(slot, generation) else { return };
            call.invite_ended = true;
            if call.cancel_answered {
                self.end_call(slot, generation, Ok(()));
            }
            return;
        }
        self.stats.transaction(false);
        self.end_call(slot, generation, Err(&status_reason(status)));
    }

    /// 2xx to the INVITE: the dialog is set up (§12.1.2), the ACK goes along its route set
    /// (§13.2.2.4) and the hold time starts.
    fn on_invite_2xx(&mut self, slot: u32, generation: u32, msg: &Message) {
        let Some(dialog) = dialog_from_2xx(msg, self.proxy) else {
            self.end_call(slot, generation, Err("bad 2xx"));
            return;
        };
        let branch = self.new_tx().1;
        let call = self.calls.get_mut(slot, generation).expect("caller checked");
        let ack = self.caller_local.request(&Request {
            method: "ACK",
            uri: &dialog.request_uri,
            branch: &branch,
            from: &call.from,
            to: &dialog.to,
            call_id: &call.call_id,
            cseq: call.cseq,
            routes: &dialog.routes,
            contact_user: None,
            auth: None,
            extra: "",
            body: None,
        });
        let dest = dialog.dest;
        call.dialog = Some(dialog);
        call.ack = Some(ack.clone());
        // A call we tried to cancel but that was answered first is hung up at once.
        let hold = if call.cancel_wanted { 0 } else { call.plan.hold_us };
        call.state = CallState::Confirmed;
        if !self.send(Side::Caller, ack, dest) {
            let why = self.transport_failure();
            self.end_call(slot, generation, Err(&why));
            return;
        }
        self.timers.arm(self.now + hold, Timer { kind: TimerKind::CallerHangUp, slot, generation });
    }

    fn on_other_response(&mut self, slot: u32, generation: u32, status: u16, msg: &Message) {
        let rx = self.rx_us;
        let call = self.calls.get_mut(slot, generation).expect("caller checked");
        let tx = call.other.as_mut().expect("caller checked");
        if status < 200 {
            tx.proceeding = true;
            return;
        }
        let tx = call.other.take().expect("caller checked");
        let method = tx.method;
        self.stats.response_time(method, rx.saturating_sub(tx.sent_us));
        if method == "CANCEL" {
            // 200 for the CANCEL; a 481 means the INVITE was already answered, whose final then
            // decides the call (§9.1).
            self.stats.transaction(status < 300 || status == 481);
            call.cancel_answered = true;
            if call.invite_ended {
                self.end_call(slot, generation, Ok(()));
            }
            return;
        }
        if status < 300 {
            self.stats.sdd.record_us(rx.saturating_sub(tx.sent_us));
            self.stats.transaction(true);
            self.end_call(slot, generation, Ok(()));
        } else if (status == 401 || status == 407) && !call.challenged {
            call.challenged = true;
            self.stats.transaction(true);
            let (caller, uri) = (call.caller, call.dialog.as_ref().map(|d| d.request_uri.clone()).unwrap_or_default());
            match self.credentials(caller, msg, status, "BYE", &uri) {
                Some(auth) => self.send_other(slot, generation, "BYE", Some(auth)),
                None => self.end_call(slot, generation, Err(&status_reason(status))),
            }
        } else {
            self.stats.transaction(false);
            self.end_call(slot, generation, Err(&status_reason(status)));
        }
    }

    pub fn on_caller_timer(&mut self, t: Timer) {
        match t.kind {
            TimerKind::CallerRetransmit | TimerKind::CallerTimeout => self.on_caller_tx_timer(t),
            TimerKind::CallerHangUp => {
                let Some(c) = self.calls.get_mut(t.slot, t.generation) else { return };
                if c.state == CallState::Confirmed {
                    c.state = CallState::Ending;
                    c.challenged = false;
                    self.send_other(t.slot, t.generation, "BYE", None);
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
                        self.send_other(t.slot, t.generation, "CANCEL", None);
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }

    fn on_caller_tx_timer(&mut self, t: Timer) {
        // The generation of a transaction timer is the transaction id, unique across calls.
        let Some(call) = self.calls.get_slot_mut(t.slot) else { return };
        let generation_of_call = call.1;
        let call = call.0;
        let which = if call.invite.as_ref().is_some_and(|tx| tx.id == t.generation) {
            0
        } else if call.other.as_ref().is_some_and(|tx| tx.id == t.generation) {
            1
        } else {
            return;
        };
        if t.kind == TimerKind::CallerTimeout {
            let proceeding_invite = which == 0 && call.invite.as_ref().is_some_and(|tx| tx.proceeding);
            // The Timer B armed at send time is superseded by the ringing bound once proceeding.
            if proceeding_invite && self.now < call.invite_started_us + call.plan.ring_us + TIMEOUT_US {
                return;
            }
            self.stats.transaction(false);
            self.end_call(t.slot, generation_of_call, Err("timeout"));
            return;
        }
        let mut tx = if which == 0 { call.invite.take() } else { call.other.take() }.expect("matched above");
        self.retransmit_tx(Side::Caller, &mut tx, t.slot, TimerKind::CallerRetransmit);
        if let Some(call) = self.calls.get_mut(t.slot, generation_of_call) {
            if which == 0 {
                call.invite = Some(tx);
            } else {
                call.other = Some(tx);
            }
        }
    }

    /// Drain: hang up every held call now instead of at the end of its hold.
    pub fn hang_up_all(&mut self) {
        for (slot, generation) in self.calls.handles() {
            if self.calls.get_mut(slot, generation).is_some_and(|c| c.state == CallState::Confirmed) {
                self.timers.arm(self.now, Timer { kind: TimerKind::CallerHangUp, slot, generation });
            }
        }
    }

    /// Counts every call still running as unfinished.
    pub fn abandon_calls(&mut self) {
        for (slot, generation) in self.calls.handles() {
            self.end_call(slot, generation, Err("unfinished"));
        }
    }
}

fn record_srd(stats: &mut super::stats::Stats, call: &mut Call, rx_us: u64) {
    if !call.srd_recorded {
        call.srd_recorded = true;
        stats.srd.record_us(rx_us.saturating_sub(call.invite_started_us));
    }
}

/// `c{slot}.{generation}.{run}@bench` → (slot, generation).
fn parse_call_id(id: &str) -> Option<(u32, u32)> {
    let rest = id.strip_prefix('c')?;
    let mut parts = rest.splitn(3, '.');
    let slot = parts.next()?.parse().ok()?;
    let generation = parts.next()?.parse().ok()?;
    Some((slot, generation))
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
    }
}
