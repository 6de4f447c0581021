//! The types the parts of the runtime send each other, and the runtime's clock tick: a leaf
//! module (it imports nothing of this crate), so that every transport, the dispatcher and the
//! worker loop can share them without importing one another.

use herald_core::Peer;
use herald_sip::Message;
use std::net::SocketAddr;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

/// The coalescing period of timers: a worker runs its shards' due timers at most once per tick
/// (so a timer fires at most this late), and a shedding UDP receiver blocks at most this long.
/// Nothing wakes on it while idle (module `shard_timers`).
pub(crate) const TICK: Duration = Duration::from_millis(10);

/// A message for the worker's loop: read by one of its TCP connection tasks, or handed over by
/// a busy UDP receiver of any worker (module `dispatch`, "Balancing").
#[derive(Debug)]
pub(crate) struct InboxMessage {
    pub from: Peer,
    pub local: SocketAddr,
    pub msg: Message,
    pub handed: Option<Handed>,
}

/// A UDP message a busy receiver passed on, already admitted (protections checked) and assigned
/// to engine shard `shard`, which this worker owns. `origin` counts the receiver's messages not
/// yet handled and sent: decremented only after this worker's sendmmsg, so that the receiver
/// can tell when it may handle that shard's messages itself again without overtaking one.
#[derive(Debug)]
pub(crate) struct Handed {
    pub shard: usize,
    pub origin: Arc<AtomicUsize>,
}

/// Control messages to a worker (unbounded: their number is bounded by outstanding lookups and
/// connection attempts, and by the two shutdown steps).
#[derive(Debug)]
pub(crate) enum Ctl {
    /// The answer to an `Output::Resolve` of engine shard `shard`.
    Resolved {
        shard: usize,
        token: u64,
        result: herald_core::Resolution,
    },
    /// Sending to `to` failed: tell the shard that asked, or every shard when it is not known
    /// (an outgoing TCP connection that other shards may have queued on too).
    TransportError {
        shard: Option<usize>,
        to: Peer,
    },
    /// A UDP receiver thread of this worker ended: at shutdown expected, else a failure.
    ReceiverExited {
        local: SocketAddr,
    },
    /// Send an OPTIONS of herald's own (module `pings`) from engine shard `shard`, the shard of
    /// its Call-ID.
    Ping {
        shard: usize,
        token: u64,
        ping: herald_core::Ping,
    },
    /// The location database committed changes: run the due shards' timers, which send the
    /// REGISTER answers that waited for them (`crate::location`). The flag is cleared first.
    Durable(Arc<std::sync::atomic::AtomicBool>),
    /// Stop accepting connections (shutdown has begun).
    Drain,
    Stop,
}
