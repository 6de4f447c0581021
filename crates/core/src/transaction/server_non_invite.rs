//! Non-INVITE server transaction: RFC 3261 §17.2.2.
//!
//! ```text
//!  Trying ──1xx from TU──▶ Proceeding ──200-699 from TU──▶ Completed ──Timer J──▶ Terminated
//!    │ request: absorbed      │ request: resend last 1xx     │ request: resend final
//!    └──200-699 from TU──▶ Completed                        │ TU responses: discarded
//! ```

use super::actions::{class, terminated, Actions, Class, TuEvent, TxState};
use super::timers::{TimerKind, TimerTable, Timers};
use bytes::Bytes;
use herald_sip::Message;
use std::time::Instant;

#[derive(Debug)]
enum State {
    /// Nothing sent yet; request retransmissions are absorbed silently.
    Trying,
    Proceeding {
        last_provisional: Bytes,
    },
    /// Timer J (64*T1 over UDP) keeps the final response for retransmitted requests.
    Completed {
        response: Bytes,
    },
    Terminated,
}

/// A non-INVITE server transaction.
#[derive(Debug)]
pub struct ServerNonInvite {
    reliable: bool,
    cfg: Timers,
    timers: TimerTable,
    state: State,
}

impl ServerNonInvite {
    /// A new transaction in Trying. Nothing is sent: the request goes to the TU (the caller
    /// does that), and the transaction waits for its response (§17.2.2).
    pub fn new(now: Instant, reliable: bool, timers: &Timers) -> (ServerNonInvite, Actions) {
        let _ = now; // no timer runs in Trying
        (Self::start(reliable, timers), Actions::new())
    }

    /// [`ServerNonInvite::new`] without the (empty) actions, for the table.
    pub(super) fn start(reliable: bool, timers: &Timers) -> ServerNonInvite {
        ServerNonInvite { reliable, cfg: *timers, timers: TimerTable::default(), state: State::Trying }
    }

    /// A retransmission of the request (§17.2.3 matched it). Responses are ignored.
    pub fn on_message(&mut self, _now: Instant, msg: Message) -> Actions {
        let mut out = Actions::new();
        self.on_message_into(_now, msg, &mut out);
        out
    }

    /// [`Self::on_message`] into `out`, which is empty: what the table calls, handing down the
    /// engine's own `Actions` instead of moving a new one back up through each layer.
    pub(crate) fn on_message_into(&mut self, _now: Instant, msg: Message, out: &mut Actions) {
        if msg.method().is_none() {
            return;
        }
        match &self.state {
            State::Proceeding { last_provisional: r } | State::Completed { response: r } => out.send(r),
            State::Trying | State::Terminated => {}
        }
    }

    /// A response from the TU.
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
            (State::Trying | State::Proceeding { .. }, Class::Provisional) => {
                out.send(&response);
                State::Proceeding { last_provisional: response }
            }
            (State::Trying | State::Proceeding { .. }, Class::Success | Class::Failure) => {
                let j = self.cfg.initial(TimerKind::J, self.reliable);
                if j.is_zero() {
                    // Nothing to absorb over a reliable transport: sent, not kept.
                    out.send_owned(response);
                    terminated(&mut self.timers, out);
                    State::Terminated
                } else {
                    out.send(&response);
                    self.timers.arm(TimerKind::J, now, j);
                    State::Completed { response }
                }
            }
            // §17.2.2: any further response from the TU is discarded once Completed.
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
        if self.timers.take_due(kind, now) && kind == TimerKind::J && matches!(self.state, State::Completed { .. }) {
            self.terminate(out);
        }
    }

    /// The transport failed to send a response (§17.2.4): tell the TU, terminate.
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
            State::Trying => TxState::Trying,
            State::Proceeding { .. } => TxState::Proceeding,
            State::Completed { .. } => TxState::Completed,
            State::Terminated => TxState::Terminated,
        }
    }

    /// Bytes of messages this transaction holds: the last response it resends.
    pub fn held_bytes(&self) -> usize {
        match &self.state {
            State::Proceeding { last_provisional: response } | State::Completed { response } => response.len(),
            State::Trying | State::Terminated => 0,
        }
    }
}
