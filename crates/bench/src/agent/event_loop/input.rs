//! What the loop does with what it read: each message goes to its role, from a peek when the role
//! can handle it so (the usual messages of a call), parsed in full otherwise; a message that does
//! not parse is counted and dropped (RFC 3261 §8.1.3.1).

use super::pacing::kernel_stamp_us;
use super::Agent;
use crate::agent::output::{Measure, Side};
use herald_sip::peek::Peek;
use herald_sip::{Limits, Message};
use std::net::SocketAddr;

impl Agent {
    pub(super) fn receive(&mut self, side: Side) {
        let mut inbox = std::mem::take(&mut self.inbox);
        let limits = self.ctx.limits.clone();
        self.endpoint(side).receive(&mut inbox, &limits);
        let framing = self.endpoint(side).framing();
        let (read_us, realtime_ns) = (self.clock(), herald_sys::realtime_ns());
        for incoming in inbox.drain(..) {
            self.ctx.rx_us = match incoming.kernel_ns {
                Some(ns) => kernel_stamp_us(ns, realtime_ns, read_us),
                None => read_us,
            };
            if self.peeked(side, &incoming.bytes, incoming.from, &limits) {
                continue;
            }
            // Hostile input is simply not ours: anything that does not parse is counted and
            // dropped (a UA may discard a malformed response, RFC 3261 §8.1.3.1).
            match Message::parse_as(incoming.bytes, &self.ctx.limits, framing) {
                Ok(msg) => self.dispatch(side, msg, incoming.from),
                Err(_) => self.stats.stray += 1,
            }
        }
        self.inbox = inbox;
    }

    /// Handles a message its role can handle from a peek ([`peeked`]); true when it did.
    fn peeked(&mut self, side: Side, bytes: &[u8], from: SocketAddr, limits: &Limits) -> bool {
        let to_callee = match (side, self.single_socket) {
            (Side::Callee, false) => true,
            (Side::Caller, false) => false,
            // One socket: requests are the callee's; a REGISTER's responses are never
            // handled from a peek (their Call-ID is not a call's).
            (_, true) => !bytes.starts_with(b"SIP/"),
        };
        let handled = match to_callee {
            true => {
                peeked(bytes, limits, |peek| self.callee.on_peeked_request(&mut self.ctx, peek, from, &mut self.out))
            }
            false => peeked(bytes, limits, |peek| self.calls.on_peeked_response(&mut self.ctx, peek, &mut self.out)),
        };
        if handled {
            self.execute();
        }
        handled
    }

    fn dispatch(&mut self, side: Side, msg: Message, from: SocketAddr) {
        let (ctx, out) = (&mut self.ctx, &mut self.out);
        let side = match self.single_socket {
            // Callees receive the requests and REGISTER's responses, callers the rest.
            true if msg.is_request() || msg.cseq().is_ok_and(|c| c.method.as_str() == "REGISTER") => Side::Callee,
            true => Side::Caller,
            false => side,
        };
        match (side, msg.is_request()) {
            (Side::Callee, true) => self.callee.on_request(ctx, &msg, from, out),
            (Side::Callee, false) => self.registrations.on_response(ctx, msg, out),
            (Side::Caller, false) => self.calls.on_response(ctx, msg, out),
            // Nobody calls the callers: requests there are answered 403 by nobody, just dropped.
            (Side::Caller, true) => out.record(Measure::Stray),
        }
        self.execute();
    }
}

/// Hands `bytes` to `role` as a [`Peek`] (its start line, and the few headers it reads) when it
/// may be a message a role handles that way: our callee's INVITEs, ACKs and BYEs, our callers'
/// provisionals and 2xx responses, every message of a call (see [`Callee::on_peeked_request`],
/// [`Calls::on_peeked_response`]). True when the role handled it; false for all else, which is
/// then parsed in full. Which messages to try is guessed from their first bytes, so that the
/// others (a CANCEL, a REGISTER's response, ...) do not pay for a peek before their parse: a
/// wrong guess costs only time, the role decides.
pub fn peeked(bytes: &[u8], limits: &Limits, role: impl FnOnce(&Peek<'_>) -> bool) -> bool {
    let worth_it = bytes.starts_with(b"SIP/2.0 1")
        || bytes.starts_with(b"SIP/2.0 2")
        || bytes.starts_with(b"ACK ")
        || bytes.starts_with(b"INVITE ")
        || bytes.starts_with(b"BYE ");
    worth_it && Peek::new(bytes, limits).is_ok_and(|peek| role(&peek))
}
