//! Any of the four machines, as the table stores them: one enum that passes each event to the
//! machine it holds.

use super::actions::{Actions, TxState};
use super::client_invite::ClientInvite;
use super::client_non_invite::ClientNonInvite;
use super::server_invite::ServerInvite;
use super::server_non_invite::ServerNonInvite;
use super::timers::TimerKind;
use bytes::Bytes;
use herald_sip::Message;
use std::time::Instant;

/// Any of the four machines, as the table stores them.
#[derive(Debug)]
pub enum Transaction {
    ClientInvite(ClientInvite),
    ClientNonInvite(ClientNonInvite),
    ServerInvite(ServerInvite),
    ServerNonInvite(ServerNonInvite),
}

macro_rules! each {
    ($self:expr, $t:ident => $e:expr) => {
        match $self {
            Transaction::ClientInvite($t) => $e,
            Transaction::ClientNonInvite($t) => $e,
            Transaction::ServerInvite($t) => $e,
            Transaction::ServerNonInvite($t) => $e,
        }
    };
}

impl Transaction {
    /// A message matched to this transaction: a response for a client, a request
    /// retransmission or ACK for a server.
    pub fn on_message(&mut self, now: Instant, msg: Message) -> Actions {
        each!(self, t => t.on_message(now, msg))
    }

    /// A response from the TU; only servers take one (clients return no actions).
    pub fn on_tu_response(&mut self, now: Instant, response: Bytes, status: u16) -> Actions {
        match self {
            Transaction::ServerInvite(t) => t.on_tu_response(now, response, status),
            Transaction::ServerNonInvite(t) => t.on_tu_response(now, response, status),
            Transaction::ClientInvite(_) | Transaction::ClientNonInvite(_) => Actions::new(),
        }
    }

    /// [`Self::on_message`] into `out` (empty), as the machines' `on_message_into`.
    pub(crate) fn on_message_into(&mut self, now: Instant, msg: Message, out: &mut Actions) {
        each!(self, t => t.on_message_into(now, msg, out))
    }

    /// [`Self::on_tu_response`] into `out` (empty).
    pub(crate) fn on_tu_response_into(&mut self, now: Instant, response: Bytes, status: u16, out: &mut Actions) {
        match self {
            Transaction::ServerInvite(t) => t.on_tu_response_into(now, response, status, out),
            Transaction::ServerNonInvite(t) => t.on_tu_response_into(now, response, status, out),
            Transaction::ClientInvite(_) | Transaction::ClientNonInvite(_) => {}
        }
    }

    pub fn on_timer(&mut self, now: Instant, kind: TimerKind) -> Actions {
        each!(self, t => t.on_timer(now, kind))
    }

    /// [`Self::on_timer`] into `out` (empty), as the machines' `on_timer_into`.
    pub(crate) fn on_timer_into(&mut self, now: Instant, kind: TimerKind, out: &mut Actions) {
        each!(self, t => t.on_timer_into(now, kind, out))
    }

    pub fn on_transport_error(&mut self) -> Actions {
        each!(self, t => t.on_transport_error())
    }

    pub fn next_deadline(&self) -> Option<(Instant, TimerKind)> {
        each!(self, t => t.next_deadline())
    }

    /// What the table keeps current after every change, in one dispatch instead of three
    /// (issue 21: they were a few hundred instructions per proxied call): `None` once
    /// terminated, else [`Self::held_bytes`] and [`Self::next_deadline`].
    pub(crate) fn bookkeeping(&self) -> Option<(usize, Option<(Instant, TimerKind)>)> {
        each!(self, t => (!t.is_terminated()).then(|| (t.held_bytes(), t.next_deadline())))
    }

    pub fn is_terminated(&self) -> bool {
        each!(self, t => t.is_terminated())
    }

    pub fn state(&self) -> TxState {
        each!(self, t => t.state())
    }

    /// Bytes of the messages this transaction holds now (requests it may retransmit, responses
    /// it resends): what `limits.max_held_bytes` bounds.
    pub fn held_bytes(&self) -> usize {
        each!(self, t => t.held_bytes())
    }

    /// A client transaction's request as sent, until its final response.
    pub fn request(&self) -> Option<&Message> {
        match self {
            Transaction::ClientInvite(t) => t.request(),
            Transaction::ClientNonInvite(t) => t.request(),
            Transaction::ServerInvite(_) | Transaction::ServerNonInvite(_) => None,
        }
    }

    pub fn is_client(&self) -> bool {
        matches!(self, Transaction::ClientInvite(_) | Transaction::ClientNonInvite(_))
    }
}
