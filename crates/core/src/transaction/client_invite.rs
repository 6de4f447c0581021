//! INVITE client transaction: RFC 3261 §17.1.1 with the Accepted state of RFC 6026 §8.4.
//!
//! ```text
//!  Calling ──1xx──▶ Proceeding ──300-699──▶ Completed ──Timer D──▶ Terminated
//!     │  A: retransmit      │ 1xx: to TU     (ACK sent, final resent → ACK resent)
//!     │  B: timeout         └──2xx──▶ Accepted ──Timer M──▶ Terminated
//!     └──2xx / 300-699 as from Proceeding        (2xx → TU)
//! ```

use super::actions::{class, terminated, Actions, Class, TuEvent, TxState};
use super::client_request::{AckSource, Sent};
use super::timers::{TimerKind, TimerTable, Timers};
use bytes::Bytes;
use herald_sip::Message;
use std::time::{Duration, Instant};

#[derive(Debug)]
enum State {
    /// The INVITE is out; over UDP it is retransmitted with Timer A, doubling each time with no
    /// cap (§17.1.1.2), until Timer B.
    ///
    /// `request` is the INVITE as sent: retransmitted, and its headers build the ACK of a
    /// non-2xx (and a CANCEL). Only the states before a final response hold it: a finished
    /// transaction lingers up to 64*T1 (Timer M) and must stay small.
    Calling {
        a_interval: Duration,
        request: Sent,
    },
    /// A provisional response arrived: no more retransmissions, and Timer B no longer applies
    /// (the proxy's Timer C, §16.6 step 11, bounds this state).
    Proceeding {
        request: Sent,
    },
    /// A non-2xx final response was ACKed; the ACK is kept to answer its retransmissions.
    /// `None` only if the ACK could not be built from a malformed response.
    Completed {
        ack: Option<Bytes>,
    },
    /// A 2xx arrived (RFC 6026 §8.4): later 2xx (retransmissions, forks) go to the TU, which
    /// ACKs them itself (§13.2.2.4).
    Accepted,
    Terminated,
}

/// An INVITE client transaction.
#[derive(Debug)]
pub struct ClientInvite {
    reliable: bool,
    cfg: Timers,
    timers: TimerTable,
    state: State,
}

impl ClientInvite {
    /// Sends `request` (the INVITE) and starts Timer B, and Timer A over unreliable transports
    /// (§17.1.1.2).
    pub fn new(now: Instant, request: Message, reliable: bool, timers: &Timers) -> (ClientInvite, Actions) {
        let mut out = Actions::new();
        (Self::start(now, Sent::Parsed(Box::new(request)), reliable, timers, &mut out), out)
    }

    /// [`ClientInvite::new`] for an INVITE the TU wrote itself and hands over unparsed: `request`
    /// is sent and resent as is, and `ack` gives what the ACK of a non-2xx final copies from it.
    /// [`ClientInvite::request`] is None for such a transaction (the TU has its INVITE).
    pub fn written(
        now: Instant,
        request: Bytes,
        ack: AckSource,
        reliable: bool,
        timers: &Timers,
    ) -> (ClientInvite, Actions) {
        let mut out = Actions::new();
        let request = Sent::Written { bytes: request, ack: Some(Box::new(ack)) };
        (Self::start(now, request, reliable, timers, &mut out), out)
    }

    /// Sends `request` and starts the timers (the constructors above, and the table for
    /// the engine's forwarded copies: `Sent::Forwarded`). The send goes into `out`, which the
    /// table hands on as it is: returning it with the machine moved both once more.
    // Inlined into the table's `begin_client`, whose entry box it is written into: as a call
    // of its own (the server's build did not inline it) the machine came back on the stack
    // and was copied into the box (a call to memcpy, ~75 instructions a forwarded request,
    // issue 21).
    #[inline(always)]
    pub(super) fn start(
        now: Instant,
        request: Sent,
        reliable: bool,
        timers: &Timers,
        out: &mut Actions,
    ) -> ClientInvite {
        let t = TimerTable::client_started(now, timers, reliable, TimerKind::A, TimerKind::B);
        out.send(request.bytes());
        ClientInvite { reliable, cfg: *timers, timers: t, state: State::Calling { a_interval: timers.t1, request } }
    }

    /// A response matched to this transaction (§17.1.3). Requests are ignored.
    pub fn on_message(&mut self, now: Instant, msg: Message) -> Actions {
        let mut out = Actions::new();
        self.on_message_into(now, msg, &mut out);
        out
    }

    /// [`Self::on_message`] into `out`, which is empty: what the table calls, handing down the
    /// engine's own `Actions` instead of moving a new one back up through each layer.
    pub(crate) fn on_message_into(&mut self, now: Instant, msg: Message, out: &mut Actions) {
        let Some(c) = msg.status().and_then(class) else {
            return;
        };
        self.state = match (std::mem::replace(&mut self.state, State::Terminated), c) {
            (State::Calling { request, .. } | State::Proceeding { request }, Class::Provisional) => {
                // §17.1.1.2: stop retransmitting; the response goes up.
                self.timers.clear_pair(TimerKind::A, TimerKind::B);
                out.tu(TuEvent::Response(msg));
                State::Proceeding { request }
            }
            (State::Calling { .. } | State::Proceeding { .. }, Class::Success) => {
                // RFC 6026 §8.4: Accepted, Timer M; the TU sends the ACK for a 2xx.
                self.timers.clear_pair(TimerKind::A, TimerKind::B);
                self.timers.arm(TimerKind::M, now, self.cfg.initial(TimerKind::M, self.reliable));
                out.tu(TuEvent::Response(msg));
                State::Accepted
            }
            (State::Calling { request, .. } | State::Proceeding { request }, Class::Failure) => {
                // §17.1.1.2/§17.1.1.3: ACK it here (hop by hop), pass it up, wait Timer D for
                // retransmissions of the response.
                self.timers.clear_pair(TimerKind::A, TimerKind::B);
                let ack = request.ack(&msg);
                if let Some(a) = &ack {
                    out.send(a);
                }
                out.tu(TuEvent::Response(msg));
                let d = self.cfg.initial(TimerKind::D, self.reliable);
                if d.is_zero() {
                    terminated(&mut self.timers, out);
                    State::Terminated
                } else {
                    self.timers.arm(TimerKind::D, now, d);
                    State::Completed { ack }
                }
            }
            (State::Completed { ack }, Class::Failure) => {
                // §17.1.1.2: a retransmitted final response is ACKed again, not passed up.
                if let Some(a) = &ack {
                    out.send(a);
                }
                State::Completed { ack }
            }
            (State::Accepted, Class::Success) => {
                // RFC 6026 §8.4: 2xx retransmissions and forked 2xx go to the TU.
                out.tu(TuEvent::Response(msg));
                State::Accepted
            }
            // Anything else (a 1xx after a final, a 2xx in Completed, a non-2xx in Accepted)
            // is stale and absorbed.
            (s, _) => s,
        };
    }

    /// A provisional response the TU matched and read by its status alone (a load generator
    /// that peeks at it instead of taking the full parse [`ClientInvite::on_message`] needs):
    /// the change of state `on_message` makes for one (§17.1.1.2: Calling or Proceeding to
    /// Proceeding, Timers A and B stopped), without the TU event (the TU has read it). False,
    /// nothing changed, in the states where `on_message` absorbs a provisional.
    pub fn on_provisional_read(&mut self) -> bool {
        match std::mem::replace(&mut self.state, State::Terminated) {
            State::Calling { request, .. } | State::Proceeding { request } => {
                self.timers.clear_pair(TimerKind::A, TimerKind::B);
                self.state = State::Proceeding { request };
                true
            }
            other => {
                self.state = other;
                false
            }
        }
    }

    pub fn on_timer(&mut self, now: Instant, kind: TimerKind) -> Actions {
        let mut out = Actions::new();
        self.on_timer_into(now, kind, &mut out);
        out
    }

    /// [`Self::on_timer`] into `out`, which is empty: what the table calls, handing down the
    /// engine's own `Actions` instead of moving a new one back up through each layer.
    pub(crate) fn on_timer_into(&mut self, now: Instant, kind: TimerKind, out: &mut Actions) {
        if !self.timers.take_due(kind, now) {
            return;
        }
        match (&mut self.state, kind) {
            (State::Calling { a_interval, request }, TimerKind::A) => {
                // §17.1.1.2: retransmit and double the interval (no T2 cap for INVITE).
                out.send(request.bytes());
                *a_interval = a_interval.saturating_mul(2);
                self.timers.arm_retransmit(TimerKind::A, now, *a_interval);
            }
            (State::Calling { .. }, TimerKind::B) => {
                out.tu(TuEvent::Timeout);
                self.terminate(out);
            }
            (State::Completed { .. }, TimerKind::D) | (State::Accepted, TimerKind::M) => self.terminate(out),
            _ => {}
        }
    }

    /// The transport failed to send the INVITE or an ACK (§17.1.1.2): tell the TU, terminate.
    pub fn on_transport_error(&mut self) -> Actions {
        let mut out = Actions::new();
        if !self.is_terminated() {
            out.tu(TuEvent::TransportError);
            self.terminate(&mut out);
        }
        out
    }

    fn terminate(&mut self, out: &mut Actions) {
        self.state = State::Terminated;
        terminated(&mut self.timers, out);
    }

    pub fn next_deadline(&self) -> Option<(Instant, TimerKind)> {
        self.timers.next()
    }

    pub fn is_terminated(&self) -> bool {
        matches!(self.state, State::Terminated)
    }

    pub fn state(&self) -> TxState {
        match self.state {
            State::Calling { .. } => TxState::Calling,
            State::Proceeding { .. } => TxState::Proceeding,
            State::Completed { .. } => TxState::Completed,
            State::Accepted => TxState::Accepted,
            State::Terminated => TxState::Terminated,
        }
    }

    /// Bytes of messages this transaction holds: the INVITE until a final response, then the
    /// ACK of a non-2xx (`limits.max_held_bytes`).
    pub fn held_bytes(&self) -> usize {
        match &self.state {
            State::Calling { request, .. } | State::Proceeding { request } => request.bytes().len(),
            State::Completed { ack } => ack.as_ref().map_or(0, Bytes::len),
            State::Accepted | State::Terminated => 0,
        }
    }

    /// The INVITE this transaction sends (for CANCEL construction, §9.1), until a final
    /// response arrives; None for one the TU wrote ([`ClientInvite::written`]).
    pub fn request(&self) -> Option<&Message> {
        match &self.state {
            State::Calling { request, .. } | State::Proceeding { request } => request.message(),
            _ => None,
        }
    }

    /// Whether the transport is reliable (no retransmissions).
    pub fn is_reliable(&self) -> bool {
        self.reliable
    }
}
