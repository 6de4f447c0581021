//! What the protocol roles (callers, callee, registrations, the user model) ask of the event loop
//! that drives them: send these bytes to that peer, arm this timer, record this measurement. The
//! roles never touch a socket, the clock or the statistics; they push [`Output`]s into an
//! [`Outbox`] and the loop ([`super::event_loop`]) carries them out in order.

use super::timers::Timer;
use bytes::Bytes;
use std::net::SocketAddr;

/// Which of the generator's two sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Caller,
    Callee,
}

/// Who sent a request, so that the loop can stamp its send time and report a refusal back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// The call in this slab slot and generation.
    Call { slot: u32, generation: u32 },
    /// The registration of this user.
    Registration(usize),
}

/// What a send is, which decides what a refusal by the transport means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendKind {
    /// A response, an ACK for a non-2xx or a stray's answer: a refusal is absorbed (the peer
    /// retransmits, or a timer recovers).
    Plain,
    /// A retransmission: counted when the transport takes it.
    Retransmission,
    /// The first copy of a client transaction's request (transaction `id` of `owner`): stamped
    /// with the moment it is handed to the kernel; a refusal fails the owner.
    Request { owner: Owner, id: u32 },
    /// The ACK for a 2xx (RFC 3261 §13.2.2.4): a refusal fails the call.
    Essential(Owner),
    /// Our callee's first copy of an answer that one of our callers times (`key` in
    /// [`super::held::Held`]), due at `due_us`: how much later it went to the kernel is recorded
    /// there. A refusal is absorbed as for [`SendKind::Plain`].
    Answer { key: u64, due_us: u64 },
}

/// One measurement for the run's [`super::stats::Stats`].
#[derive(Debug, Clone, PartialEq)]
pub enum Measure {
    /// A call (or counted registration) was attempted.
    Attempt,
    /// ...and succeeded, with its `bench users` outcome.
    Success(Option<&'static str>),
    /// ...or failed, for this reason.
    Failure(String),
    /// RFC 6076 §4.2 session request delay, µs.
    Srd(u64),
    /// RFC 6076 §4.3 session disconnect delay, µs.
    Sdd(u64),
    /// Request sent → final response, µs.
    ResponseTime(&'static str, u64),
    /// A client transaction completed as expected (true) or not.
    Transaction(bool),
    /// A message that matched nothing.
    Stray,
}

/// One request of a role to the loop.
#[derive(Debug)]
pub enum Output {
    Send {
        side: Side,
        bytes: Bytes,
        dest: SocketAddr,
        kind: SendKind,
    },
    Arm {
        at_us: u64,
        timer: Timer,
    },
    Record(Measure),
    /// A call of user `caller` ended (the user model schedules that user's next call).
    CallEnded {
        caller: usize,
    },
}

/// The outputs queued so far, in order; the loop drains it after every input.
#[derive(Debug, Default)]
pub struct Outbox {
    items: Vec<Output>,
}

impl Outbox {
    pub fn send(&mut self, side: Side, bytes: Bytes, dest: SocketAddr, kind: SendKind) {
        self.items.push(Output::Send { side, bytes, dest, kind });
    }

    pub fn arm(&mut self, at_us: u64, timer: Timer) {
        self.items.push(Output::Arm { at_us, timer });
    }

    pub fn record(&mut self, measure: Measure) {
        self.items.push(Output::Record(measure));
    }

    pub fn call_ended(&mut self, caller: usize) {
        self.items.push(Output::CallEnded { caller });
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Moves the queued outputs into `into` (which must be empty), leaving this outbox empty
    /// with `into`'s former allocation, so draining allocates nothing in steady state.
    pub fn swap_into(&mut self, into: &mut Vec<Output>) {
        debug_assert!(into.is_empty());
        std::mem::swap(&mut self.items, into);
    }

    /// The queued outputs, for tests.
    pub fn items(&self) -> &[Output] {
        &self.items
    }
}
