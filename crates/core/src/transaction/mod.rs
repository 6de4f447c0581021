//! The RFC 3261 §17 transaction layer with the RFC 6026 corrections, sans-IO.
//!
//! Four state machines, one per transaction kind:
//!
//! | machine | RFC | states |
//! | --- | --- | --- |
//! | [`ClientInvite`] | §17.1.1, RFC 6026 §8.4 | Calling → Proceeding → Completed / Accepted → Terminated |
//! | [`ClientNonInvite`] | §17.1.2 | Trying → Proceeding → Completed → Terminated |
//! | [`ServerInvite`] | §17.2.1, RFC 6026 §8.5-8.7 | Proceeding → Completed → Confirmed / Accepted → Terminated |
//! | [`ServerNonInvite`] | §17.2.2 | Trying → Proceeding → Completed → Terminated |
//!
//! Nothing here reads a clock or touches a socket. Every entry point takes the current time as
//! an [`Instant`] and returns [`Actions`]: bytes to send to the transaction's peer
//! ([`TxAction::Send`]) and events for the transaction user ([`TxAction::ToTu`]). A machine
//! reports its earliest timer with `next_deadline()`; the caller calls `on_timer` when that
//! instant has come. [`TransactionTable`] does this bookkeeping for one worker shard: it matches
//! messages to transactions (§17.1.3, §17.2.3), keeps one heap of deadlines with lazy deletion and
//! drops a transaction as soon as it terminates.
//!
//! Retransmissions (Timers A, E, G) exist only over unreliable transports; over reliable ones
//! the absorbing timers D, I, J and K are zero, so the machine terminates at once (RFC 3261
//! §17.1.1.2, §17.1.2.2, §17.2.1, §17.2.2).
//!
//! The TU is told [`TuEvent::Terminated`] exactly once, as the last event of a transaction.

mod ack;
mod client_invite;
mod client_non_invite;
mod client_request;
mod key;
mod server_invite;
mod server_non_invite;
mod table;
mod timers;

#[cfg(test)]
mod tests_client;
#[cfg(test)]
mod tests_robust;
#[cfg(test)]
mod tests_server;
#[cfg(test)]
mod tests_support;
#[cfg(test)]
mod tests_table;

pub use ack::{build_ack, build_trying};
pub use client_invite::ClientInvite;
pub use client_non_invite::ClientNonInvite;
pub use client_request::AckSource;
pub use key::{stateless_branch, BranchGen, ClientKey, LegacyKey, MethodKey, ServerKey};
pub use server_invite::ServerInvite;
pub use server_non_invite::ServerNonInvite;
pub use table::{TransactionTable, TxError, TxId};
pub use timers::{TimerKind, TimerTable, Timers};

use bytes::Bytes;
use herald_sip::Message;
use std::time::Instant;

/// What a transaction tells its user (the proxy core, registrar or UA logic).
#[derive(Debug, Clone)]
pub enum TuEvent {
    /// Client: a response to pass up (1xx, the first final response, and in the Accepted state
    /// every 2xx: RFC 6026 §8.4 lets forked 2xx and 2xx retransmissions reach the TU).
    Response(Message),
    /// Client: Timer B or F fired. The TU acts as if it had received a 408 (RFC 3261 §8.1.3.1).
    Timeout,
    /// The transport could not deliver a message (RFC 3261 §17.1.1.2, §17.1.2.2, §17.2.4).
    TransportError,
    /// INVITE server in Accepted: an ACK for the 2xx, which the TU (a proxy) forwards
    /// (RFC 6026 §8.7).
    AckReceived(Message),
    /// INVITE server: Timer H fired, no ACK came for the non-2xx final response (§17.2.1).
    NoAck,
    /// The transaction reached Terminated; it matches nothing any more.
    Terminated,
}

/// One output of a transaction.
#[derive(Debug, Clone)]
pub enum TxAction {
    /// Send these bytes to the transaction's peer (for servers: where responses go, §18.2.2).
    Send(Bytes),
    ToTu(TuEvent),
}

/// The state of a transaction, for inspection and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TxState {
    Calling,
    Trying,
    Proceeding,
    Completed,
    Confirmed,
    Accepted,
    Terminated,
}

const MAX_ACTIONS: usize = 4;

/// The outputs of one input: at most a few, kept inline so the hot path does not allocate.
/// The worst case is three (a non-2xx over TCP: send the ACK, pass the response up, terminate).
#[derive(Debug, Default)]
pub struct Actions {
    items: [Option<TxAction>; MAX_ACTIONS],
    len: usize,
}

impl Actions {
    pub fn new() -> Actions {
        Actions::default()
    }

    pub(crate) fn push(&mut self, a: TxAction) {
        if let Some(slot) = self.items.get_mut(self.len) {
            *slot = Some(a);
            self.len += 1;
        } else {
            debug_assert!(false, "more than {MAX_ACTIONS} transaction actions");
        }
    }

    pub(crate) fn send(&mut self, bytes: &Bytes) {
        self.push(TxAction::Send(bytes.clone()));
    }

    pub(crate) fn tu(&mut self, e: TuEvent) {
        self.push(TxAction::ToTu(e));
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn iter(&self) -> impl Iterator<Item = &TxAction> + '_ {
        self.items.iter().flatten()
    }

    /// The bytes to send, in order.
    pub fn sends(&self) -> impl Iterator<Item = &Bytes> + '_ {
        self.iter().filter_map(|a| match a {
            TxAction::Send(b) => Some(b),
            TxAction::ToTu(_) => None,
        })
    }

    /// The events for the TU, in order.
    pub fn events(&self) -> impl Iterator<Item = &TuEvent> + '_ {
        self.iter().filter_map(|a| match a {
            TxAction::ToTu(e) => Some(e),
            TxAction::Send(_) => None,
        })
    }
}

impl IntoIterator for Actions {
    type Item = TxAction;
    type IntoIter = std::iter::Flatten<std::array::IntoIter<Option<TxAction>, MAX_ACTIONS>>;

    fn into_iter(self) -> Self::IntoIter {
        self.items.into_iter().flatten()
    }
}

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

    pub fn on_timer(&mut self, now: Instant, kind: TimerKind) -> Actions {
        each!(self, t => t.on_timer(now, kind))
    }

    pub fn on_transport_error(&mut self) -> Actions {
        each!(self, t => t.on_transport_error())
    }

    pub fn next_deadline(&self) -> Option<(Instant, TimerKind)> {
        each!(self, t => t.next_deadline())
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

/// Shared by the machines: entering Terminated cancels every timer and tells the TU.
pub(crate) fn terminated(timers: &mut TimerTable, out: &mut Actions) {
    timers.clear_all();
    out.tu(TuEvent::Terminated);
}

/// The status classes the machines branch on; codes outside 100..=699 are ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    Provisional,
    Success,
    Failure,
}

pub(crate) fn class(status: u16) -> Option<Class> {
    match status {
        100..=199 => Some(Class::Provisional),
        200..=299 => Some(Class::Success),
        300..=699 => Some(Class::Failure),
        _ => None,
    }
}
