//! What the four machines share: the actions they return (bytes to send, events for the
//! transaction user), their states, and the status classes they branch on.

use super::timers::TimerTable;
use bytes::Bytes;
use herald_sip::Message;

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
