//! The types the parts of the runtime send each other, and the runtime's clock tick: a leaf
//! module (it imports nothing of this crate), so that every transport, the dispatcher and the
//! worker loop can share them without importing one another.

use bytes::Bytes;
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

/// A message for the worker's loop, read by one of its TCP connection tasks. (Busy UDP receivers
/// hand theirs over in batches on the control channel, [`Ctl::Handed`].)
#[derive(Debug)]
pub(crate) struct InboxMessage {
    pub from: Peer,
    pub local: SocketAddr,
    pub msg: Message,
}

/// What a busy UDP receiver passed on to the owner of their shards in one read of its socket
/// (module `dispatch::balance`): one channel operation and at most one wake-up per owner per
/// read, not per message. Bounded not by the channel but by `origin`: a receiver waits while
/// it has `[limits] inbox_capacity` messages handed and not yet sent.
#[derive(Debug)]
pub(crate) struct HandedBatch {
    /// The receiver's messages handed over and not yet sent (its `Balance::pending`),
    /// decremented only after the owner's sendmmsg, so that the receiver can tell when it may
    /// handle that shard's messages itself again without overtaking one.
    pub origin: Arc<AtomicUsize>,
    pub reader: Reader,
    /// In the order they were read.
    pub items: Vec<HandedItem>,
}

/// The receiver that read a [`HandedBatch`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reader {
    /// Its worker (which counts the datagrams received).
    pub worker: usize,
    /// Which of that worker's UDP sockets it reads: an answer to a malformed datagram leaves
    /// from the owner's socket of the same index (the same local address, SO_REUSEPORT).
    pub socket: usize,
    /// Its worker was shedding when it sent the batch: the owner's admission refuses the
    /// batch's new requests as the reader's would have.
    pub shedding: bool,
}

/// One message of a [`HandedBatch`].
#[derive(Debug)]
pub(crate) enum HandedItem {
    /// A datagram as read: its Call-ID (peeked, `herald_sip::peek`) named a shard of the
    /// owner. The owner classifies, admits and handles it. `wait_ns`: its socket-queue wait, for
    /// the metrics.
    Datagram { from: Peer, local: SocketAddr, bytes: Bytes, wait_ns: Option<u64> },
    /// A message the receiver parsed and admitted whose engine shard `shard` the owner owns:
    /// the peek read no Call-ID where the parse did. Not expected (the peek reads the parse's
    /// Call-ID in every message the parse accepts, `crates/sip/tests/peek.rs`): what keeps a
    /// dialog in order should a shape slip through, counted (`udp_handed_parsed`).
    Parsed { from: Peer, local: SocketAddr, msg: Message, shard: usize },
}

/// Control messages to a worker (unbounded: their number is bounded by outstanding lookups and
/// connection attempts, by the two shutdown steps, and for [`Ctl::Handed`] by the senders'
/// pending counts).
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
    /// Messages a busy UDP receiver of another worker passed on (module `dispatch::balance`).
    Handed(HandedBatch),
    /// Stop accepting connections (shutdown has begun).
    Drain,
    Stop,
}
