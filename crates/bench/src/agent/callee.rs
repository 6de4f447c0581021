//! The answering side (UAS, RFC 3261 §13.3, §15.1.2, §9.2): 180 at once, 200 after the ring
//! time with To-tag, Contact and the copied Record-Route (§12.1.1), 2xx retransmitted until the
//! ACK arrives (§13.3.1.4), 200 for BYE, 200 + 487 for CANCEL while ringing, and retransmitted
//! requests answered with the last response instead of starting anew (§17.2).

use super::engine::{Engine, Mode, Side, MAX_DIALOGS, T1_US, T2_US, TIMEOUT_US};
use super::timers::{Timer, TimerKind};
use super::wire::{echo, RING_HEADER};
use bytes::Bytes;
use herald_sip::Message;
use std::net::SocketAddr;

/// Longest ring a caller may ask for in [`RING_HEADER`]: one hour.
const MAX_RING_MS: u64 = 3_600_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DialogState {
    Ringing,
    /// 200 sent, waiting for the ACK.
    Answering,
    /// ACKed (or the ACK never came: §13.3.1.4 gives up after 64·T1); waiting for BYE.
    Confirmed,
    /// CANCELled: 487 sent, waiting for its ACK (Timer G/H of §17.2.1).
    Cancelled,
    /// BYE answered; kept a while to answer retransmitted BYEs.
    Ended,
}

pub struct Dialog {
    pub call_id: String,
    pub state: DialogState,
    pub user: usize,
    /// Lines the INVITE's responses copy (Via, From, Call-ID, CSeq, Record-Route).
    pub echo: String,
    /// The To line with our tag.
    pub to_line: String,
    /// Where the INVITE came from: responses go back there (the proxy's socket).
    pub peer: SocketAddr,
    /// The last response sent for the INVITE (or BYE), resent on retransmissions.
    pub last: Bytes,
    pub interval_us: u64,
}

impl Engine {
    pub fn on_callee_request(&mut self, msg: &Message, from: SocketAddr) {
        let (Some(method), Ok(call_id)) = (msg.method(), msg.call_id()) else {
            self.stats.stray += 1;
            return;
        };
        let handle = self.dialog_ids.get(call_id).copied();
        match (method.as_str(), handle) {
            ("INVITE", None) => self.on_new_invite(msg, from),
            ("INVITE", Some((slot, generation))) => {
                // A retransmission (§17.2.1): repeat the last response.
                if let Some(d) = self.dialogs.get_mut(slot, generation) {
                    let last = d.last.clone();
                    self.send(Side::Callee, last, from);
                }
            }
            ("ACK", Some((slot, generation))) => {
                let Some(d) = self.dialogs.get_mut(slot, generation) else { return };
                match d.state {
                    DialogState::Answering => d.state = DialogState::Confirmed,
                    DialogState::Cancelled => self.forget(slot, generation),
                    _ => {}
                }
            }
            ("BYE", Some((slot, generation))) => self.on_bye(msg, from, slot, generation),
            ("CANCEL", Some((slot, generation))) => self.on_cancel(msg, from, slot, generation),
            ("ACK", None) => self.stats.stray += 1,
            ("BYE" | "CANCEL", None) => self.reply(msg, from, 481, "Call/Transaction Does Not Exist"),
            ("OPTIONS", _) => self.reply(msg, from, 200, "OK"),
            _ => self.reply(msg, from, 501, "Not Implemented"),
        }
    }

    /// A stateless response (RFC 3261 §8.2.6) with a fresh To tag.
    fn reply(&mut self, msg: &Message, to: SocketAddr, status: u16, reason: &str) {
        let (lines, to_line) = echo(msg, false, "bench");
        let response = self.callee_local.response(status, reason, &lines, &to_line, None);
        self.send(Side::Callee, response, to);
    }

    fn on_new_invite(&mut self, msg: &Message, from: SocketAddr) {
        // The Request-URI is the Contact we registered: its user part names the user.
        let user = msg
            .request_uri()
            .ok()
            .and_then(|u| u.as_sip().and_then(|s| s.user).and_then(|name| self.user_index.get(name).copied()));
        let Some(user) = user else {
            self.reply(msg, from, 404, "Not Found");
            return;
        };
        if self.dialogs.len() >= MAX_DIALOGS || !msg.to_tag().is_ok_and(|t| t.is_none()) {
            // Over the memory bound, or a re-INVITE this generator never sends.
            self.reply(msg, from, 503, "Service Unavailable");
            return;
        }
        let ring_us = msg
            .get_by_name(RING_HEADER)
            .and_then(|v| std::str::from_utf8(v).ok()?.trim().parse::<u64>().ok())
            .map(|ms| ms.min(MAX_RING_MS) * 1000)
            .unwrap_or(match self.mode {
                Mode::Calls { ring_us, .. } => ring_us,
                _ => 0,
            });
        let mut tag = String::with_capacity(16);
        herald_sip::text::push_hex(&mut tag, rand::RngExt::random::<u64>(&mut self.rng), 0);
        let (lines, to_line) = echo(msg, true, &tag);
        let ringing = self.callee_local.response(180, "Ringing", &lines, &to_line, Some(&self.users[user].name));
        let call_id = msg.call_id().unwrap_or_default().to_string();
        let dialog = Dialog {
            call_id: call_id.clone(),
            state: DialogState::Ringing,
            user,
            echo: lines,
            to_line,
            peer: from,
            last: ringing.clone(),
            interval_us: T1_US,
        };
        let (slot, generation) = self.dialogs.insert(dialog);
        self.dialog_ids.insert(call_id, (slot, generation));
        self.send(Side::Callee, ringing, from);
        self.timers.arm(self.now + ring_us, Timer { kind: TimerKind::CalleeAnswer, slot, generation });
    }

    fn on_bye(&mut self, msg: &Message, from: SocketAddr, slot: u32, generation: u32) {
        let stream = self.stream();
        let Some(d) = self.dialogs.get_mut(slot, generation) else { return };
        if d.state != DialogState::Ended {
            let (lines, to_line) = echo(msg, false, "bench");
            d.last = self.callee_local.response(200, "OK", &lines, &to_line, None);
            d.state = DialogState::Ended;
            if !stream {
                // Absorb BYE retransmissions for 64·T1 (Timer J of §17.2.2).
                self.timers.arm(self.now + TIMEOUT_US, Timer { kind: TimerKind::CalleeForget, slot, generation });
            }
        }
        let last = d.last.clone();
        self.send(Side::Callee, last, from);
        if stream {
            self.forget(slot, generation);
        }
    }

    fn on_cancel(&mut self, msg: &Message, from: SocketAddr, slot: u32, generation: u32) {
        let stream = self.stream();
        self.reply(msg, from, 200, "OK");
        let Some(d) = self.dialogs.get_mut(slot, generation) else { return };
        if d.state != DialogState::Ringing {
            return; // already answered: the CANCEL has no effect (§9.2)
        }
        d.state = DialogState::Cancelled;
        d.last = self.callee_local.response(487, "Request Terminated", &d.echo, &d.to_line, None);
        let (last, peer) = (d.last.clone(), d.peer);
        self.send(Side::Callee, last, peer);
        self.arm_final_timers(slot, generation, stream);
    }

    /// Timer G (or the 2xx retransmission of §13.3.1.4) over UDP, and the 64·T1 bound.
    fn arm_final_timers(&mut self, slot: u32, generation: u32, stream: bool) {
        if !stream {
            self.timers.arm(self.now + T1_US, Timer { kind: TimerKind::CalleeRetransmit, slot, generation });
        }
        self.timers.arm(self.now + TIMEOUT_US, Timer { kind: TimerKind::CalleeAckTimeout, slot, generation });
    }

    fn forget(&mut self, slot: u32, generation: u32) {
        if let Some(d) = self.dialogs.remove(slot, generation) {
            self.dialog_ids.remove(&d.call_id);
        }
    }

    pub fn on_callee_timer(&mut self, t: Timer) {
        let stream = self.stream();
        let (slot, generation) = (t.slot, t.generation);
        let Some(d) = self.dialogs.get_mut(slot, generation) else { return };
        match (t.kind, d.state) {
            (TimerKind::CalleeAnswer, DialogState::Ringing) => {
                d.state = DialogState::Answering;
                let user = &self.users[d.user].name;
                d.last = self.callee_local.response(200, "OK", &d.echo, &d.to_line, Some(user));
                let (last, peer) = (d.last.clone(), d.peer);
                self.send(Side::Callee, last, peer);
                self.arm_final_timers(slot, generation, stream);
            }
            (TimerKind::CalleeRetransmit, DialogState::Answering | DialogState::Cancelled) => {
                let (last, peer) = (d.last.clone(), d.peer);
                d.interval_us = (d.interval_us * 2).min(T2_US);
                let next = self.now + d.interval_us;
                if self.send(Side::Callee, last, peer) {
                    self.stats.retransmissions += 1;
                }
                self.timers.arm(next, Timer { kind: TimerKind::CalleeRetransmit, slot, generation });
            }
            // §13.3.1.4: no ACK within 64·T1. The caller's BYE may still come (and a BYE
            // implies the 2xx arrived), so keep the dialog; a 487 without ACK is just dropped.
            (TimerKind::CalleeAckTimeout, DialogState::Answering) => d.state = DialogState::Confirmed,
            (TimerKind::CalleeAckTimeout, DialogState::Cancelled) | (TimerKind::CalleeForget, DialogState::Ended) => {
                self.forget(slot, generation)
            }
            _ => {}
        }
    }

    /// Dialogs held by the callee side (ended ones included until forgotten).
    pub fn callee_dialogs(&self) -> usize {
        self.dialogs.len()
    }
}
