//! INVITE server transaction: RFC 3261 §17.2.1 with the Accepted state of RFC 6026 §8.5-8.7.
//!
//! ```text
//!  Proceeding ──300-699 from TU──▶ Completed ──ACK──▶ Confirmed ──Timer I──▶ Terminated
//!    │ INVITE: resend last 1xx     │ G: resend final (doubling up to T2)
//!    │                             │ H: no ACK → TU, Terminated
//!    └──2xx from TU──▶ Accepted ──Timer L──▶ Terminated
//!                        2xx from TU: sent; ACK: to TU; INVITE: absorbed
//! ```

use super::ack::build_trying;
use super::actions::{class, terminated, Actions, Class, TuEvent, TxState};
use super::timers::{TimerKind, TimerTable, Timers};
use bytes::Bytes;
use herald_sip::{Message, Method};
use std::time::{Duration, Instant};

#[derive(Debug)]
enum State {
    /// Waiting for the TU. A retransmitted INVITE is answered with the most recent provisional
    /// response, if any (§17.2.1).
    Proceeding {
        last_provisional: Option<Bytes>,
    },
    /// A non-2xx final response was sent; over UDP Timer G resends it (T1, 2*T1, ... capped at
    /// T2) until the ACK comes or Timer H gives up.
    Completed {
        response: Bytes,
        g_interval: Duration,
    },
    /// The ACK came; Timer I absorbs ACK retransmissions.
    Confirmed,
    /// A 2xx was sent (RFC 6026 §8.5). The TU retransmits 2xx itself through this state; ACKs
    /// are passed to it (§8.7); retransmitted INVITEs are absorbed (§8.6).
    Accepted,
    Terminated,
}

/// An INVITE server transaction.
#[derive(Debug)]
pub struct ServerInvite {
    reliable: bool,
    cfg: Timers,
    timers: TimerTable,
    state: State,
}

impl ServerInvite {
    /// A new transaction for `request` (an INVITE). With `send_trying`, the transaction answers
    /// 100 (Trying) itself, as §17.2.1 requires unless the TU will respond within 200 ms; the 100
    /// then counts as the provisional to resend on retransmissions.
    pub fn new(
        now: Instant,
        request: &Message,
        reliable: bool,
        timers: &Timers,
        send_trying: bool,
    ) -> (ServerInvite, Actions) {
        let mut out = Actions::new();
        (Self::start(now, request, reliable, timers, send_trying, &mut out), out)
    }

    /// [`ServerInvite::new`] with the 100 (Trying) sent into `out` (the table's way: returning
    /// the actions with the machine moved both once more).
    pub(super) fn start(
        now: Instant,
        request: &Message,
        reliable: bool,
        timers: &Timers,
        send_trying: bool,
        out: &mut Actions,
    ) -> ServerInvite {
        let _ = now; // no timer runs in Proceeding
        let trying = if send_trying { build_trying(request) } else { None };
        if let Some(t) = &trying {
            out.send(t);
        }
        ServerInvite {
            reliable,
            cfg: *timers,
            timers: TimerTable::default(),
            state: State::Proceeding { last_provisional: trying },
        }
    }

    /// A request matched to this transaction (§17.2.3): a retransmitted INVITE or an ACK.
    /// Responses are ignored.
    pub fn on_message(&mut self, now: Instant, msg: Message) -> Actions {
        let mut out = Actions::new();
        self.on_message_into(now, msg, &mut out);
        out
    }

    /// [`Self::on_message`] into `out`, which is empty: what the table calls, handing down the
    /// engine's own `Actions` instead of moving a new one back up through each layer.
    pub(crate) fn on_message_into(&mut self, now: Instant, msg: Message, out: &mut Actions) {
        let is_ack = match msg.method() {
            None => return,
            Some(m) => m == Method::Ack,
        };
        self.state = match std::mem::replace(&mut self.state, State::Terminated) {
            State::Proceeding { last_provisional } => {
                if !is_ack {
                    if let Some(p) = &last_provisional {
                        out.send(p);
                    }
                }
                State::Proceeding { last_provisional }
            }
            State::Completed { response, g_interval } => {
                if is_ack {
                    // §17.2.1: ACK → Confirmed; stop G and H; I absorbs further ACKs.
                    self.timers.clear_pair(TimerKind::G, TimerKind::H);
                    let i = self.cfg.initial(TimerKind::I, self.reliable);
                    if i.is_zero() {
                        terminated(&mut self.timers, out);
                        State::Terminated
                    } else {
                        self.timers.arm(TimerKind::I, now, i);
                        State::Confirmed
                    }
                } else {
                    // §17.2.1: a retransmitted INVITE gets the final response again.
                    out.send(&response);
                    State::Completed { response, g_interval }
                }
            }
            State::Accepted => {
                if is_ack {
                    out.tu(TuEvent::AckReceived(msg));
                }
                State::Accepted
            }
            s @ (State::Confirmed | State::Terminated) => s,
        };
    }

    /// A response from the TU (`status` is its code, `response` its bytes).
    pub fn on_tu_response(&mut self, now: Instant, response: Bytes, status: u16) -> Actions {
        let mut out = Actions::new();
        self.on_tu_response_into(now, response, status, &mut out);
        out
    }

    /// [`Self::on_tu_response`] into `out`, which is empty: what the table calls, handing down the
    /// engine's own `Actions` instead of moving a new one back up through each layer.
    pub(crate) fn on_tu_response_into(&mut self, now: Instant, response: Bytes, status: u16, out: &mut Actions) {
        let Some(c) = class(status) else {
            return;
        };
        self.state = match (std::mem::replace(&mut self.state, State::Terminated), c) {
            (State::Proceeding { .. }, Class::Provisional) => {
                out.send(&response);
                State::Proceeding { last_provisional: Some(response) }
            }
            (State::Proceeding { .. } | State::Accepted, Class::Success) => {
                // RFC 6026 §8.5: Accepted with Timer L; a 2xx in Accepted is a TU
                // retransmission (or another 2xx) and is sent without changing the state. The
                // transaction keeps nothing to resend: the TU retransmits 2xx (§13.3.1.4).
                out.send_owned(response);
                if self.timers.get(TimerKind::L).is_none() {
                    self.timers.arm(TimerKind::L, now, self.cfg.initial(TimerKind::L, self.reliable));
                }
                State::Accepted
            }
            (State::Proceeding { .. }, Class::Failure) => {
                out.send(&response);
                if !self.reliable {
                    self.timers.arm_retransmit(TimerKind::G, now, self.cfg.initial(TimerKind::G, false));
                }
                self.timers.arm(TimerKind::H, now, self.cfg.initial(TimerKind::H, self.reliable));
                State::Completed { response, g_interval: self.cfg.t1 }
            }
            // After a final response the TU has nothing more to say (§17.2.1).
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
            (State::Completed { response, g_interval }, TimerKind::G) => {
                // §17.2.1: resend, double the interval, at most T2.
                out.send(response);
                *g_interval = g_interval.saturating_mul(2).min(self.cfg.t2);
                self.timers.arm_retransmit(TimerKind::G, now, *g_interval);
            }
            (State::Completed { .. }, TimerKind::H) => {
                // §17.2.1: the ACK never came; a transaction failure for the TU.
                out.tu(TuEvent::NoAck);
                self.terminate(out);
            }
            (State::Confirmed, TimerKind::I) | (State::Accepted, TimerKind::L) => self.terminate(out),
            _ => {}
        }
    }

    /// The transport failed to send a response (§17.2.4, after any RFC 3263 fallback the
    /// transport layer tried): tell the TU, terminate.
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
            State::Proceeding { .. } => TxState::Proceeding,
            State::Completed { .. } => TxState::Completed,
            State::Confirmed => TxState::Confirmed,
            State::Accepted => TxState::Accepted,
            State::Terminated => TxState::Terminated,
        }
    }

    /// Bytes of messages this transaction holds: the last provisional or the non-2xx final it
    /// resends.
    pub fn held_bytes(&self) -> usize {
        match &self.state {
            State::Proceeding { last_provisional } => last_provisional.as_ref().map_or(0, Bytes::len),
            State::Completed { response, .. } => response.len(),
            State::Confirmed | State::Accepted | State::Terminated => 0,
        }
    }
}
