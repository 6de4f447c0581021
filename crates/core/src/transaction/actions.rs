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

/// The outputs of one input, kept inline so the hot path does not allocate. Every input of every
/// machine yields at most one send, then at most one event for the TU, then Terminated: a
/// non-2xx over TCP sends the ACK, passes the response up and terminates; a timeout reports
/// itself and terminates. So the outputs are three fields in that order, not a list of four:
/// 184 bytes instead of 584, a value moved several times on its way from the machine through
/// the table to the engine (issue 21: memcpy was the top function of a proxied call).
#[derive(Debug, Default)]
pub struct Actions {
    send: Option<Bytes>,
    /// An event for the TU other than [`TuEvent::Terminated`].
    event: Option<TuEvent>,
    /// [`TuEvent::Terminated`], always the last output.
    terminated: bool,
}

impl Actions {
    pub fn new() -> Actions {
        Actions::default()
    }

    pub(crate) fn send(&mut self, bytes: &Bytes) {
        debug_assert!(self.send.is_none() && self.event.is_none() && !self.terminated, "a send comes first, once");
        self.send = Some(bytes.clone());
    }

    /// [`Self::send`] of bytes the machine does not keep: moved, not cloned. The first clone of
    /// a received buffer allocates its shared count (issue 21: a 2xx forwarded through an
    /// INVITE server transaction, which RFC 6026 leaves nothing to retransmit, paid one).
    pub(crate) fn send_owned(&mut self, bytes: Bytes) {
        debug_assert!(self.send.is_none() && self.event.is_none() && !self.terminated, "a send comes first, once");
        self.send = Some(bytes);
    }

    pub(crate) fn tu(&mut self, e: TuEvent) {
        debug_assert!(!self.terminated, "Terminated is the last event");
        if matches!(e, TuEvent::Terminated) {
            self.terminated = true;
        } else {
            debug_assert!(self.event.is_none(), "one event before Terminated");
            self.event = Some(e);
        }
    }

    pub fn len(&self) -> usize {
        usize::from(self.send.is_some()) + usize::from(self.event.is_some()) + usize::from(self.terminated)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes to send, in order.
    pub fn sends(&self) -> impl Iterator<Item = &Bytes> + '_ {
        self.send.iter()
    }

    /// The events for the TU, in order.
    pub fn events(&self) -> impl Iterator<Item = &TuEvent> + '_ {
        self.event.iter().chain(self.terminated.then_some(&TuEvent::Terminated))
    }

    /// Hands the outputs to `push` in their order (the send, the event, Terminated) and leaves
    /// `self` empty; returns whether Terminated was among them. The one place that order is
    /// written: the engine's `apply`, the table's timer run and [`ActionsIter`] all take it
    /// from here. A closure, not an iterator: the timer run's usual firing only terminates, and
    /// an iterator's moves and state tests cost it ~60 instructions (issue 21).
    #[inline(always)]
    pub fn drain(&mut self, mut push: impl FnMut(TxAction)) -> bool {
        if let Some(bytes) = self.send.take() {
            push(TxAction::Send(bytes));
        }
        if let Some(e) = self.event.take() {
            push(TxAction::ToTu(e));
        }
        let terminated = std::mem::take(&mut self.terminated);
        if terminated {
            push(TxAction::ToTu(TuEvent::Terminated));
        }
        terminated
    }
}

impl IntoIterator for Actions {
    type Item = TxAction;
    type IntoIter = ActionsIter;

    fn into_iter(mut self) -> ActionsIter {
        let mut items = [None, None, None];
        let mut slots = items.iter_mut();
        self.drain(|a| {
            // At most three outputs (see `Actions`): a slot for each.
            if let Some(slot) = slots.next() {
                *slot = Some(a);
            }
        });
        ActionsIter(items)
    }
}

/// The outputs of an [`Actions`] in order: the send, the event, Terminated (as
/// [`Actions::drain`] hands them out).
#[derive(Debug)]
pub struct ActionsIter([Option<TxAction>; 3]);

impl Iterator for ActionsIter {
    type Item = TxAction;

    fn next(&mut self) -> Option<TxAction> {
        self.0.iter_mut().find_map(Option::take)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(a: &TxAction) -> &'static str {
        match a {
            TxAction::Send(_) => "send",
            TxAction::ToTu(TuEvent::Terminated) => "terminated",
            TxAction::ToTu(_) => "event",
        }
    }

    /// Every shape an `Actions` can take: `drain` and the iterator give its outputs in the
    /// same order, send, event, Terminated, and `drain` leaves it empty.
    #[test]
    fn drain_and_the_iterator_give_every_shape_in_one_order() {
        for shape in 0..8u8 {
            let fill = || Actions {
                send: (shape & 1 != 0).then(|| Bytes::from_static(b"x")),
                event: (shape & 2 != 0).then_some(TuEvent::Timeout),
                terminated: shape & 4 != 0,
            };
            let want: Vec<&str> = [(1, "send"), (2, "event"), (4, "terminated")]
                .into_iter()
                .filter(|&(bit, _)| shape & bit != 0)
                .map(|(_, t)| t)
                .collect();
            let mut drained = Vec::new();
            let mut a = fill();
            let ended = a.drain(|x| drained.push(tag(&x)));
            assert_eq!(drained, want, "drain, shape {shape}");
            assert_eq!(ended, shape & 4 != 0, "drain's result, shape {shape}");
            assert!(a.is_empty(), "drained, shape {shape}");
            let iterated: Vec<&str> = fill().into_iter().map(|x| tag(&x)).collect();
            assert_eq!(iterated, want, "iterator, shape {shape}");
        }
    }
}
