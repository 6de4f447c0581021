//! Non-INVITE client transaction: RFC 3261 §17.1.2.
//!
//! ```text
//!  Trying ──1xx──▶ Proceeding ──200-699──▶ Completed ──Timer K──▶ Terminated
//!    │ E: retransmit, interval doubles up to T2    │ E: retransmit every T2
//!    │ F: timeout                                   │ F: timeout
//!    └──200-699 (to TU)──▶ Completed
//! ```

use super::actions::{class, terminated, Actions, Class, TuEvent, TxState};
use super::client_request::Sent;
use super::timers::{TimerKind, TimerTable, Timers};
use bytes::Bytes;
use herald_sip::Message;
use std::time::{Duration, Instant};

#[derive(Debug)]
enum State {
    /// Over UDP, Timer E retransmits at T1, 2*T1, 4*T1, ... capped at T2 (§17.1.2.2).
    ///
    /// `request` (as sent, retransmitted) is held only until a final response: a finished
    /// transaction lingers for Timer K and must stay small.
    Trying {
        e_interval: Duration,
        request: Sent,
    },
    /// A provisional arrived: retransmissions continue, every T2 (§17.1.2.2).
    Proceeding {
        request: Sent,
    },
    /// A final response arrived; Timer K absorbs its retransmissions.
    Completed,
    Terminated,
}

/// A non-INVITE client transaction.
#[derive(Debug)]
pub struct ClientNonInvite {
    reliable: bool,
    cfg: Timers,
    timers: TimerTable,
    state: State,
}

impl ClientNonInvite {
    /// Sends `request` and starts Timer F, and Timer E over unreliable transports (§17.1.2.2).
    pub fn new(now: Instant, request: Message, reliable: bool, timers: &Timers) -> (ClientNonInvite, Actions) {
        let mut out = Actions::new();
        (Self::start(now, Sent::Parsed(Box::new(request)), reliable, timers, &mut out), out)
    }

    /// [`ClientNonInvite::new`] for a request the TU wrote itself and hands over unparsed: sent
    /// and resent as is. [`ClientNonInvite::request`] is None for such a transaction.
    pub fn written(now: Instant, request: Bytes, reliable: bool, timers: &Timers) -> (ClientNonInvite, Actions) {
        let mut out = Actions::new();
        (Self::start(now, Sent::Written { bytes: request, ack: None }, reliable, timers, &mut out), out)
    }

    /// Sends `request` (into `out`) and starts the timers (the constructors above, and the
    /// table for the engine's forwarded copies: `Sent::Forwarded`).
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
    ) -> ClientNonInvite {
        let t = TimerTable::client_started(now, timers, reliable, TimerKind::E, TimerKind::F);
        out.send(request.bytes());
        ClientNonInvite { reliable, cfg: *timers, timers: t, state: State::Trying { e_interval: timers.t1, request } }
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
            (State::Trying { request, .. } | State::Proceeding { request }, Class::Provisional) => {
                // Timer E keeps running; from its next firing on it uses T2.
                out.tu(TuEvent::Response(msg));
                State::Proceeding { request }
            }
            (State::Trying { .. } | State::Proceeding { .. }, Class::Success | Class::Failure) => {
                self.timers.clear_pair(TimerKind::E, TimerKind::F);
                out.tu(TuEvent::Response(msg));
                let k = self.cfg.initial(TimerKind::K, self.reliable);
                if k.is_zero() {
                    terminated(&mut self.timers, out);
                    State::Terminated
                } else {
                    self.timers.arm(TimerKind::K, now, k);
                    State::Completed
                }
            }
            // Completed: retransmitted responses are absorbed (§17.1.2.2).
            (s, _) => s,
        };
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
            (State::Trying { e_interval, request }, TimerKind::E) => {
                out.send(request.bytes());
                *e_interval = e_interval.saturating_mul(2).min(self.cfg.t2);
                self.timers.arm_retransmit(TimerKind::E, now, *e_interval);
            }
            (State::Proceeding { request }, TimerKind::E) => {
                out.send(request.bytes());
                self.timers.arm_retransmit(TimerKind::E, now, self.cfg.t2);
            }
            (State::Trying { .. } | State::Proceeding { .. }, TimerKind::F) => {
                out.tu(TuEvent::Timeout);
                self.terminate(out);
            }
            (State::Completed, TimerKind::K) => self.terminate(out),
            _ => {}
        }
    }

    /// The transport failed to send the request (§17.1.2.2): tell the TU, terminate.
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
            State::Trying { .. } => TxState::Trying,
            State::Proceeding { .. } => TxState::Proceeding,
            State::Completed => TxState::Completed,
            State::Terminated => TxState::Terminated,
        }
    }

    /// Bytes of messages this transaction holds: the request until a final response.
    pub fn held_bytes(&self) -> usize {
        match &self.state {
            State::Trying { request, .. } | State::Proceeding { request } => request.bytes().len(),
            State::Completed | State::Terminated => 0,
        }
    }

    /// The request as sent, until a final response arrives; None for one the TU wrote
    /// ([`ClientNonInvite::written`]).
    pub fn request(&self) -> Option<&Message> {
        match &self.state {
            State::Trying { request, .. } | State::Proceeding { request } => request.message(),
            _ => None,
        }
    }
}
