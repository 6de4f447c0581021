//! The stream connections of the process as senders see them (RFC 3261 §18.3): each
//! connection's bounded write queue, and the registry that finds a connection by id or by
//! transport and peer address (for reuse). Any worker sends on any connection by pushing bytes
//! into its queue; the connection's own task (module `stream`) writes them. On plain TCP a push
//! to an empty queue writes straight to the socket instead, and queues only what the socket
//! does not take.
//!
//! Memory: an idle connection holds a registry entry and an empty queue (no allocation).

use bytes::Bytes;
use herald_core::{ConnId, Transport};
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Waker};
use std::time::Instant;
use tokio::io::Interest;
use tokio::net::TcpStream;

const SHARDS: usize = 64;

/// One connection as seen by senders.
pub(crate) struct Conn {
    pub id: ConnId,
    /// TCP or TLS.
    pub transport: Transport,
    pub peer: SocketAddr,
    queue: Mutex<WriteQueue>,
    /// The queue's state as [`QueueState`] reports it, and whether a task's waker is registered
    /// (bits: [`PENDING`], [`CLOSED`], [`OVERFLOW`], [`UNREGISTERED`]), written under the
    /// queue's lock whenever one changes, for [`Conn::poll_state`]'s look without the lock.
    state: AtomicU8,
}

const PENDING: u8 = 1;
const CLOSED: u8 = 2;
const OVERFLOW: u8 = 4;
/// No waker registered: a push or close has taken it (or none was ever given).
const UNREGISTERED: u8 = 8;

/// The connection's outgoing bytes and the waker of its task, under one lock so that a push can
/// never slip between the task's check and its sleep.
#[derive(Default)]
struct WriteQueue {
    items: VecDeque<Bytes>,
    bytes: usize,
    closed: bool,
    overflow: bool,
    waker: Option<Waker>,
    /// Plain TCP, once connected: the socket, which a push writes to while nothing is queued
    /// (module `stream` writes what is queued). Dropped when the connection closes.
    socket: Option<Arc<TcpStream>>,
    /// When a push last wrote to the socket itself, for the task's idle deadline; taken by the
    /// task.
    wrote_at: Option<Instant>,
}

impl WriteQueue {
    fn wake(&mut self) -> Option<Waker> {
        self.waker.take()
    }
}

/// Why [`Conn::push`] did not take the bytes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The connection is closed (or closing): the bytes, untouched, for another connection.
    Closed(Bytes),
    /// The queue overflowed: the connection is closed now, and the bytes are dropped.
    Full,
}

impl Conn {
    fn new(id: ConnId, transport: Transport, peer: SocketAddr) -> Conn {
        Conn { id, transport, peer, queue: Mutex::new(WriteQueue::default()), state: AtomicU8::new(UNREGISTERED) }
    }

    /// Publishes `q`'s state (called under its lock, after a change).
    fn mirror(&self, q: &WriteQueue) {
        let bits = u8::from(!q.items.is_empty()) * PENDING
            + u8::from(q.closed) * CLOSED
            + u8::from(q.overflow) * OVERFLOW
            + u8::from(q.waker.is_none()) * UNREGISTERED;
        self.state.store(bits, Ordering::Release);
    }

    /// Queues bytes for writing. A full queue means the peer is not reading: the connection is
    /// closed (RFC 3261 leaves reliable transports no retransmission to fall back on).
    ///
    /// On a plain TCP connection with nothing queued the bytes are written to the socket here
    /// and now, and only what it does not take is queued (whole, it is not: the task is not
    /// woken). Handing every message to the connection's task cost a wake-up and a turn of its
    /// loop per message sent, about 2k instructions each (callgrind, issue 21). The write is
    /// made under the queue's lock, so bytes leave in the order they were pushed, whichever
    /// thread pushes: the task writes only what is queued, and a non-empty queue is never
    /// overtaken.
    /// `now`: when the caller read its clock last (what a write here counts as traffic at: a
    /// clock read per message sent was ~40 instructions, callgrind, issue 21).
    ///
    /// A closed connection hands the bytes back, so that a sender which then opens another one
    /// needs no copy of them kept in case (a clone of a message that owns its buffer promotes it
    /// to a shared one: an allocation and its free per message sent by address, callgrind,
    /// issue 21).
    pub(crate) fn push(&self, mut bytes: Bytes, cap: usize, now: Instant) -> Result<(), Refused> {
        let mut q = self.queue.lock().expect("queue lock");
        if q.closed {
            return Err(Refused::Closed(bytes));
        }
        if q.items.is_empty() {
            if let Some(socket) = &q.socket {
                // An error other than WouldBlock is the task's to meet on its own write.
                // As `try_write`, through herald-sys's send (no libc cancellation-point brackets).
                if let Ok(n) = socket.try_io(Interest::WRITABLE, || herald_sys::send(&**socket, &bytes)) {
                    q.wrote_at = Some(now);
                    if n == bytes.len() {
                        return Ok(());
                    }
                    bytes = bytes.slice(n..);
                }
            }
        }
        let full = q.bytes + bytes.len() > cap;
        if full {
            q.closed = true;
            q.overflow = true;
        } else {
            q.bytes += bytes.len();
            q.items.push_back(bytes);
        }
        let waker = q.wake();
        self.mirror(&q);
        drop(q);
        if let Some(w) = waker {
            w.wake();
        }
        if full {
            Err(Refused::Full)
        } else {
            Ok(())
        }
    }

    /// Plain TCP: the connected socket, which pushes may write to while nothing is queued.
    pub(crate) fn attach(&self, socket: Arc<TcpStream>) {
        self.queue.lock().expect("queue lock").socket = Some(socket);
    }

    /// When a push last wrote to the socket itself, if it did since the last call.
    pub(crate) fn take_wrote_at(&self) -> Option<Instant> {
        self.queue.lock().expect("queue lock").wrote_at.take()
    }

    pub(crate) fn close(&self) {
        let mut q = self.queue.lock().expect("queue lock");
        q.closed = true;
        q.socket = None;
        let waker = q.wake();
        self.mirror(&q);
        drop(q);
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// The queue's state, registering the task to be woken by the next push or close.
    ///
    /// An empty open queue with a waker registered is read without the lock (with it, two per
    /// message, this was ~650 instructions per call over TCP, without ~340: callgrind, issue
    /// 21). Only the connection's task polls, with the one waker it keeps for its life, so the
    /// waker registered is its own; a push or close takes it and changes the state under the
    /// lock, then wakes the task, so a state read as quiet either comes before them (and their
    /// wake follows) or is not quiet, and this takes the lock and registers again.
    ///
    /// The quiet look is inlined into the connection loop, which makes it twice per message
    /// read; the locked path is a function of its own, whose register saves the quiet look then
    /// does not pay (about 40 instructions a call when it was one function, callgrind, issue 21).
    #[inline]
    pub(crate) fn poll_state(&self, cx: &mut Context<'_>) -> QueueState {
        if self.state.load(Ordering::Acquire) == 0 {
            return QueueState { pending: false, closed: false, overflow: false };
        }
        self.poll_state_locked(cx)
    }

    #[inline(never)]
    fn poll_state_locked(&self, cx: &mut Context<'_>) -> QueueState {
        let mut q = self.queue.lock().expect("queue lock");
        if !q.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            q.waker = Some(cx.waker().clone());
        }
        self.mirror(&q);
        QueueState { pending: !q.items.is_empty(), closed: q.closed, overflow: q.overflow }
    }
}

pub(crate) struct QueueState {
    pub pending: bool,
    pub closed: bool,
    pub overflow: bool,
}

impl Conn {
    /// Up to `max` queued items from the front, the first of which `written` bytes are sent.
    pub(crate) fn front(&self, max: usize) -> Vec<Bytes> {
        let q = self.queue.lock().expect("queue lock");
        q.items.iter().take(max).cloned().collect()
    }

    /// `n` more bytes of the queue have been written; `written` is the offset into the front.
    /// Whether the queue still holds bytes to write.
    pub(crate) fn advance(&self, mut n: usize, written: &mut usize) -> bool {
        let mut q = self.queue.lock().expect("queue lock");
        while n > 0 {
            let front = q.items.front().expect("written items are queued").len() - *written;
            if n >= front {
                n -= front;
                *written = 0;
                let done = q.items.pop_front().expect("front");
                q.bytes -= done.len();
            } else {
                *written += n;
                n = 0;
            }
        }
        if q.items.is_empty() {
            q.items = VecDeque::new(); // an idle connection keeps no queue allocation
            self.mirror(&q);
            return false;
        }
        true
    }
}

type IdShard = Mutex<HashMap<u64, Arc<Conn>, BuildHasherDefault<IdHasher>>>;

/// The hash of a connection id in [`Registry`]'s by-id map: herald numbers connections itself
/// (no peer chooses an id, so no peer can make them collide), and SipHash, the map's default,
/// was the larger part of a lookup on every message sent over a stream (callgrind, issue 21).
/// The ids of one registry shard share their low bits (`id % SHARDS`): the product's high half,
/// folded in, spreads them over the table.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(self.0 ^ u64::from(b));
        }
    }

    fn write_u64(&mut self, id: u64) {
        let product = u128::from(id).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = (product as u64) ^ ((product >> 64) as u64);
    }
}
/// The by-address map is keyed by what peers choose (their address and port), so its hash is
/// keyed too, with a random seed per map: foldhash rather than the default SipHash, which cost
/// about 1k instructions per call proxied over TCP, three lookups of ~340 (callgrind, issue 21).
/// It holds the connection itself, not its id: a lookup by address is one map's lookup, not two.
type AddrShard = Mutex<HashMap<(Transport, SocketAddr), Arc<Conn>, foldhash::fast::RandomState>>;

/// All connections of the process, sharded so that senders on different workers rarely meet.
pub(crate) struct Registry {
    by_id: Box<[IdShard]>,
    by_addr: Box<[AddrShard]>,
    /// The next connection's id.
    next: AtomicU64,
    /// Bumped whenever the by-address map changes (under its shard's lock): a sender's memo of
    /// the connection it last found by address ([`RecentConns`]) holds while this has not moved.
    addr_epoch: AtomicU64,
}

impl Registry {
    pub(crate) fn new() -> Registry {
        Registry {
            by_id: (0..SHARDS).map(|_| Mutex::default()).collect(),
            by_addr: (0..SHARDS).map(|_| Mutex::default()).collect(),
            next: AtomicU64::new(1),
            addr_epoch: AtomicU64::new(0),
        }
    }

    fn addr_shard(&self, a: &SocketAddr) -> &AddrShard {
        let h = match a {
            SocketAddr::V4(v) => u64::from(u32::from(*v.ip())),
            SocketAddr::V6(v) => u128::from(*v.ip()) as u64,
        };
        &self.by_addr[((h ^ u64::from(a.port()).wrapping_mul(0x9e37_79b9)) % SHARDS as u64) as usize]
    }

    /// A new connection to or from `peer`, registered under a fresh id.
    pub(crate) fn open(&self, transport: Transport, peer: SocketAddr) -> Arc<Conn> {
        let id = ConnId(self.next.fetch_add(1, Ordering::Relaxed));
        let conn = Arc::new(Conn::new(id, transport, peer));
        self.insert(conn.clone());
        conn
    }

    fn insert(&self, c: Arc<Conn>) {
        let mut m = self.addr_shard(&c.peer).lock().expect("registry lock");
        m.insert((c.transport, c.peer), c.clone());
        self.addr_epoch.fetch_add(1, Ordering::Release);
        drop(m);
        self.by_id[(c.id.0 % SHARDS as u64) as usize].lock().expect("registry lock").insert(c.id.0, c);
    }

    pub(crate) fn get(&self, id: ConnId) -> Option<Arc<Conn>> {
        self.by_id[(id.0 % SHARDS as u64) as usize].lock().expect("registry lock").get(&id.0).cloned()
    }

    /// Where the by-address map stands: equal readings mean no change to it in between.
    fn addr_epoch(&self) -> u64 {
        self.addr_epoch.load(Ordering::Acquire)
    }

    pub(crate) fn by_addr(&self, t: Transport, a: SocketAddr) -> Option<Arc<Conn>> {
        self.addr_shard(&a).lock().expect("registry lock").get(&(t, a)).cloned()
    }

    pub(crate) fn remove(&self, c: &Conn) {
        self.by_id[(c.id.0 % SHARDS as u64) as usize].lock().expect("registry lock").remove(&c.id.0);
        let mut m = self.addr_shard(&c.peer).lock().expect("registry lock");
        let key = (c.transport, c.peer);
        if m.get(&key).is_some_and(|found| found.id == c.id) {
            m.remove(&key);
            self.addr_epoch.fetch_add(1, Ordering::Release);
        }
    }
}

#[path = "conns_recent.rs"]
mod recent;
pub(crate) use recent::RecentConns;

#[cfg(test)]
#[path = "conns_tests.rs"]
pub(crate) mod tests;
