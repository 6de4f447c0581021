//! The stream connections of the process as senders see them (RFC 3261 §18.3): each
//! connection's bounded write queue, and the registry that finds a connection by id or by
//! transport and peer address (for reuse). Any worker sends on any connection by pushing bytes
//! into its queue; the connection's own task (module `stream`) writes them.
//!
//! Memory: an idle connection holds a registry entry and an empty queue (no allocation).

use bytes::Bytes;
use herald_core::{ConnId, Transport};
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Waker};

const SHARDS: usize = 64;

/// One connection as seen by senders.
pub(crate) struct Conn {
    pub id: ConnId,
    /// TCP or TLS.
    pub transport: Transport,
    pub peer: SocketAddr,
    queue: Mutex<WriteQueue>,
}

/// The connection's outgoing bytes and the waker of its task, under one lock so that a push can
/// never slip between the task's check and its sleep.
#[derive(Default)]
struct WriteQueue {
    items: VecDeque<Bytes>,
    bytes: usize,
    closed: bool,
    overflow: bool,
    waker: Option<Waker>,
}

impl WriteQueue {
    fn wake(&mut self) -> Option<Waker> {
        self.waker.take()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PushError {
    Closed,
    Full,
}

impl Conn {
    fn new(id: ConnId, transport: Transport, peer: SocketAddr) -> Conn {
        Conn { id, transport, peer, queue: Mutex::new(WriteQueue::default()) }
    }

    /// Queues bytes for writing. A full queue means the peer is not reading: the connection is
    /// closed (RFC 3261 leaves reliable transports no retransmission to fall back on).
    pub(crate) fn push(&self, bytes: Bytes, cap: usize) -> Result<(), PushError> {
        let mut q = self.queue.lock().expect("queue lock");
        if q.closed {
            return Err(PushError::Closed);
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
        drop(q);
        if let Some(w) = waker {
            w.wake();
        }
        if full {
            Err(PushError::Full)
        } else {
            Ok(())
        }
    }

    pub(crate) fn close(&self) {
        let mut q = self.queue.lock().expect("queue lock");
        q.closed = true;
        let waker = q.wake();
        drop(q);
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// The queue's state, registering the task to be woken by the next push or close.
    pub(crate) fn poll_state(&self, cx: &mut Context<'_>) -> QueueState {
        let mut q = self.queue.lock().expect("queue lock");
        if !q.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            q.waker = Some(cx.waker().clone());
        }
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
    pub(crate) fn advance(&self, mut n: usize, written: &mut usize) {
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
        }
    }
}

type IdShard = Mutex<HashMap<u64, Arc<Conn>>>;
type AddrShard = Mutex<HashMap<(Transport, SocketAddr), u64>>;

/// All connections of the process, sharded so that senders on different workers rarely meet.
pub(crate) struct Registry {
    by_id: Box<[IdShard]>,
    by_addr: Box<[AddrShard]>,
    /// The next connection's id.
    next: AtomicU64,
}

impl Registry {
    pub(crate) fn new() -> Registry {
        Registry {
            by_id: (0..SHARDS).map(|_| Mutex::default()).collect(),
            by_addr: (0..SHARDS).map(|_| Mutex::default()).collect(),
            next: AtomicU64::new(1),
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
        self.addr_shard(&c.peer).lock().expect("registry lock").insert((c.transport, c.peer), c.id.0);
        self.by_id[(c.id.0 % SHARDS as u64) as usize].lock().expect("registry lock").insert(c.id.0, c);
    }

    pub(crate) fn get(&self, id: ConnId) -> Option<Arc<Conn>> {
        self.by_id[(id.0 % SHARDS as u64) as usize].lock().expect("registry lock").get(&id.0).cloned()
    }

    pub(crate) fn by_addr(&self, t: Transport, a: SocketAddr) -> Option<Arc<Conn>> {
        let id = *self.addr_shard(&a).lock().expect("registry lock").get(&(t, a))?;
        self.get(ConnId(id))
    }

    pub(crate) fn remove(&self, c: &Conn) {
        self.by_id[(c.id.0 % SHARDS as u64) as usize].lock().expect("registry lock").remove(&c.id.0);
        let mut m = self.addr_shard(&c.peer).lock().expect("registry lock");
        let key = (c.transport, c.peer);
        if m.get(&key) == Some(&c.id.0) {
            m.remove(&key);
        }
    }
}
