//! The stream connections of the process as senders see them (RFC 3261 §18.3): each
//! connection's bounded write queue, and the registry that finds a connection by id or by
//! transport and peer address (for reuse). Any worker sends on any connection by pushing bytes
//! into its queue; the connection's own task (module `stream`) writes them.
//!
//! Memory: an idle connection holds a registry entry and an empty queue (no allocation).

use bytes::Bytes;
use herald_core::{ConnId, Transport};
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
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
    /// Up to `batch.len()` queued items from the front, cloned into `batch` (the caller's, on
    /// its stack: no allocation per write); how many. The first of them is sent up to the
    /// writer's offset into it.
    pub(crate) fn front(&self, batch: &mut [Bytes]) -> usize {
        let q = self.queue.lock().expect("queue lock");
        let mut n = 0;
        for (slot, item) in batch.iter_mut().zip(q.items.iter()) {
            *slot = item.clone();
            n += 1;
        }
        n
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

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn the_write_queue_hands_out_its_front_in_order_and_frees_what_was_written() {
        let conn = Conn::new(ConnId(1), Transport::Tcp, peer(5060));
        for b in [&b"aaaa"[..], b"bb", b"cccccc"] {
            conn.push(Bytes::copy_from_slice(b), 100).unwrap();
        }
        let mut batch: [Bytes; 2] = Default::default();
        assert_eq!(conn.front(&mut batch), 2, "no more than the batch holds");
        assert_eq!((&batch[0][..], &batch[1][..]), (&b"aaaa"[..], &b"bb"[..]));
        // The socket took the first item and half of the second.
        let mut written = 0;
        assert!(conn.advance(5, &mut written));
        assert_eq!(written, 1);
        assert_eq!(conn.front(&mut batch), 2);
        assert_eq!((&batch[0][1..], &batch[1][..]), (&b"b"[..], &b"cccccc"[..]));
        // The rest: nothing left, and the bytes count against the cap no more.
        assert!(!conn.advance(7, &mut written));
        assert_eq!(written, 0);
        assert_eq!(conn.front(&mut batch), 0);
        assert_eq!(conn.push(Bytes::from(vec![0; 100]), 100), Ok(()));
        assert_eq!(conn.push(Bytes::from_static(b"x"), 100), Err(PushError::Full));
    }

    #[test]
    fn connections_are_found_by_id_and_by_peer_until_removed() {
        let registry = Registry::new();
        // Ids of one registry shard (equal modulo SHARDS) as well as neighbours.
        let conns: Vec<Arc<Conn>> = (0..300).map(|i| registry.open(Transport::Tcp, peer(10_000 + i))).collect();
        for c in &conns {
            assert!(registry.get(c.id).is_some_and(|found| Arc::ptr_eq(&found, c)));
            assert!(registry.by_addr(Transport::Tcp, c.peer).is_some_and(|found| Arc::ptr_eq(&found, c)));
            assert!(registry.by_addr(Transport::Tls, c.peer).is_none());
        }
        for c in conns.iter().step_by(2) {
            registry.remove(c);
        }
        for (i, c) in conns.iter().enumerate() {
            assert_eq!(registry.get(c.id).is_some(), i % 2 == 1);
        }
    }
}
