//! Stream connections, TCP and TLS (RFC 3261 §18.3): no central dispatcher. The worker that
//! accepts (or opens) a connection owns it: one task reads, frames, answers keep-alive pings and
//! writes; the messages it reads go, in order, through the owning worker's inbox to that worker's
//! loop. Any worker sends on it by pushing bytes into its bounded write queue, found through the
//! global registry (ConnId → connection, transport and peer address → ConnId for reuse). This
//! module has the registry, the accept loop and the plain-TCP connection task; module `tls` has
//! the TLS one, module `framer` the read side both share.
//!
//! Memory: an idle connection holds its task, a registry entry and an empty queue; the read
//! buffer is allocated when bytes arrive and released as soon as it is empty again.

use crate::framer::{End, Framer};
use crate::stats::Bump;
use crate::worker::{Ctl, Shared};
use bytes::{Bytes, BytesMut};
use herald_core::{ConnId, Peer, Transport};
use std::collections::{HashMap, VecDeque};
use std::future::{poll_fn, Future};
use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

const SHARDS: usize = 64;
/// Bytes read per system call.
pub(crate) const READ_CHUNK: usize = 4096;
/// How long a connection that must close (framing lost) may take to flush its answer.
pub(crate) const CLOSE_FLUSH: Duration = Duration::from_secs(5);
/// How long an outgoing connection may take to establish.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Messages gathered into one vectored write.
const WRITE_BATCH: usize = 16;

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

/// What woke a connection task.
enum Event {
    Overflow,
    Flushed,
    Closed,
    Writable(io::Result<()>),
    Readable(io::Result<()>),
    Idle,
}

type IdShard = Mutex<HashMap<u64, Arc<Conn>>>;
type AddrShard = Mutex<HashMap<(Transport, SocketAddr), u64>>;

/// All connections of the process, sharded so that senders on different workers rarely meet.
pub(crate) struct Registry {
    by_id: Box<[IdShard]>,
    by_addr: Box<[AddrShard]>,
}

impl Registry {
    pub(crate) fn new() -> Registry {
        Registry {
            by_id: (0..SHARDS).map(|_| Mutex::default()).collect(),
            by_addr: (0..SHARDS).map(|_| Mutex::default()).collect(),
        }
    }

    fn addr_shard(&self, a: &SocketAddr) -> &AddrShard {
        let h = match a {
            SocketAddr::V4(v) => u64::from(u32::from(*v.ip())),
            SocketAddr::V6(v) => u128::from(*v.ip()) as u64,
        };
        &self.by_addr[((h ^ u64::from(a.port()).wrapping_mul(0x9e37_79b9)) % SHARDS as u64) as usize]
    }

    fn insert(&self, c: Arc<Conn>) {
        self.addr_shard(&c.peer).lock().expect("registry lock").insert((c.transport, c.peer), c.id.0);
        self.by_id[(c.id.0 % SHARDS as u64) as usize].lock().expect("registry lock").insert(c.id.0, c);
    }

    pub(crate) fn get(&self, id: ConnId) -> Option<Arc<Conn>> {
        self.by_id[(id.0 % SHARDS as u64) as usize].lock().expect("registry lock").get(&id.0).cloned()
    }

    fn by_addr(&self, t: Transport, a: SocketAddr) -> Option<Arc<Conn>> {
        let id = *self.addr_shard(&a).lock().expect("registry lock").get(&(t, a))?;
        self.get(ConnId(id))
    }

    fn remove(&self, c: &Conn) {
        self.by_id[(c.id.0 % SHARDS as u64) as usize].lock().expect("registry lock").remove(&c.id.0);
        let mut m = self.addr_shard(&c.peer).lock().expect("registry lock");
        let key = (c.transport, c.peer);
        if m.get(&key) == Some(&c.id.0) {
            m.remove(&key);
        }
    }
}

/// Keeps the registry and the open-connection gauge right however the task ends (including the
/// runtime being dropped at shutdown).
pub(crate) struct Guard {
    pub shared: Arc<Shared>,
    pub conn: Arc<Conn>,
    /// Accepted connections count against their address (`max_tcp_connections_per_ip`).
    accepted: bool,
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.shared.registry.remove(&self.conn);
        self.conn.close();
        self.shared.stats.tcp_open.fetch_sub(1, Ordering::Relaxed);
        if self.accepted {
            self.shared.per_ip.release(self.conn.peer.ip());
        }
    }
}

fn register(shared: &Arc<Shared>, transport: Transport, peer: SocketAddr, accepted: bool) -> Guard {
    let id = ConnId(shared.next_conn.fetch_add(1, Ordering::Relaxed));
    let conn = Arc::new(Conn::new(id, transport, peer));
    shared.registry.insert(conn.clone());
    Guard { shared: shared.clone(), conn, accepted }
}

/// Accepts on one listener (`transport` TCP or TLS) until the task is aborted (drain) or the
/// runtime stops. A TLS connection's handshake runs in its own task: a slow client holds no
/// other.
pub(crate) async fn accept_loop(shared: Arc<Shared>, worker: usize, listener: TcpListener, transport: Transport) {
    let stats = &shared.stats.workers[worker];
    let max = shared.config.limits.max_tcp_connections;
    let per_ip = shared.config.limits.max_tcp_connections_per_ip;
    let mut last_warn: Option<Instant> = None;
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                if shared.stats.tcp_open.fetch_add(1, Ordering::Relaxed) >= max {
                    // Accept and close at once: the peer learns now instead of timing out in the
                    // backlog, and the backlog stays free for others.
                    shared.stats.tcp_open.fetch_sub(1, Ordering::Relaxed);
                    stats.tcp_rejected.bump();
                    drop(stream);
                    continue;
                }
                if !shared.per_ip.acquire(peer.ip(), per_ip) {
                    shared.stats.tcp_open.fetch_sub(1, Ordering::Relaxed);
                    stats.tcp_rejected_per_ip.bump();
                    drop(stream);
                    continue;
                }
                stats.tcp_accepted.bump();
                let _ = stream.set_nodelay(true);
                let local = stream.local_addr().unwrap_or_else(|_| listener.local_addr().expect("bound"));
                let guard = register(&shared, transport, peer, true);
                if transport == Transport::Tls {
                    tokio::spawn(crate::tls::run_accepted(guard, worker, stream, local));
                } else {
                    tokio::spawn(run(guard, worker, stream, local));
                }
            }
            Err(e) => {
                if last_warn.is_none_or(|t| t.elapsed() > Duration::from_secs(10)) {
                    tracing::warn!(worker, error = %e, "accept failed");
                    last_warn = Some(Instant::now());
                }
                // EMFILE and friends: back off instead of spinning on a full descriptor table.
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Sends on a stream connection: `conn` when given, else a `to.transport` (TCP or TLS)
/// connection to `to.addr` (reused, or opened and owned by this worker; from an ephemeral port,
/// as RFC 3261 §18.1.1 allows).
/// `false` when it cannot be sent: the caller reports a transport error.
pub(crate) fn send(
    shared: &Arc<Shared>,
    worker: usize,
    ctl: &mpsc::UnboundedSender<Ctl>,
    to: Peer,
    bytes: Bytes,
) -> bool {
    let cap = shared.config.limits.tcp_write_queue_bytes;
    let stats = &shared.stats.workers[worker];
    let pushed = |c: &Conn, b: Bytes| match c.push(b, cap) {
        Ok(()) => {
            stats.tcp_sent.bump();
            Ok(())
        }
        Err(e) => {
            if e == PushError::Full {
                stats.tcp_write_queue_full.bump();
            }
            Err(e)
        }
    };
    if let Some(id) = to.conn {
        return shared.registry.get(id).is_some_and(|c| pushed(&c, bytes).is_ok());
    }
    if let Some(c) = shared.registry.by_addr(to.transport, to.addr) {
        match pushed(&c, bytes.clone()) {
            Ok(()) => return true,
            Err(PushError::Full) => return false,
            Err(PushError::Closed) => {} // closing under us: open a new one
        }
    }
    shared.stats.tcp_open.fetch_add(1, Ordering::Relaxed);
    let guard = register(shared, to.transport, to.addr, false);
    if pushed(&guard.conn, bytes).is_err() {
        return false;
    }
    let ctl = ctl.clone();
    tokio::spawn(async move {
        let stream = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(to.addr)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                tracing::debug!(peer = %to.addr, error = %e, "TCP connect failed");
                drop(guard);
                let _ = ctl.send(Ctl::TransportError { shard: None, to });
                return;
            }
            Err(_) => {
                tracing::debug!(peer = %to.addr, "TCP connect timed out");
                drop(guard);
                let _ = ctl.send(Ctl::TransportError { shard: None, to });
                return;
            }
        };
        let _ = stream.set_nodelay(true);
        let Ok(local) = stream.local_addr() else { return };
        if to.transport == Transport::Tls {
            crate::tls::run_connected(guard, worker, stream, local, ctl, to).await;
        } else {
            run(guard, worker, stream, local).await;
        }
    });
    true
}

/// The life of one TCP connection: read and frame, answer pings, write queued bytes, time out.
async fn run(guard: Guard, worker: usize, stream: TcpStream, local: SocketAddr) {
    let shared = guard.shared.clone();
    let conn = guard.conn.clone();
    let end = serve(&shared, worker, &stream, &conn, local).await;
    ended(&shared, worker, &conn, &end);
    drop(guard);
}

/// Counts how a stream connection ended.
pub(crate) fn ended(shared: &Shared, worker: usize, conn: &Conn, end: &End) {
    let stats = &shared.stats.workers[worker];
    match end {
        End::Idle => stats.tcp_idle_closed.bump(),
        End::Incomplete => stats.tcp_incomplete_timeouts.bump(),
        End::FramingLost => stats.tcp_framing_errors.bump(),
        End::Handshake(e) => {
            stats.tls_handshake_failures.bump();
            tracing::debug!(peer = %conn.peer, error = %e, "TLS handshake failed");
        }
        End::Error(e) => {
            tracing::debug!(peer = %conn.peer, transport = %conn.transport, error = %e, "connection error")
        }
        End::PeerClosed | End::Overflow => {}
    }
    tracing::trace!(peer = %conn.peer, id = conn.id.0, transport = %conn.transport, ?end, "connection closed");
}

/// The connection loop. It awaits one `poll_fn` over the write queue, socket readiness and one
/// timer, so the task stores no readiness futures (the socket keeps one waker per direction)
/// and stays small: an idle connection's whole task is a few hundred bytes.
///
/// The timer serves two deadlines: idleness (no byte either way for `tcp_idle_timeout_s`) and an
/// incomplete message (see [`Framer::timed_out`]).
async fn serve(shared: &Arc<Shared>, worker: usize, stream: &TcpStream, conn: &Arc<Conn>, local: SocketAddr) -> End {
    let idle = Duration::from_secs(shared.config.limits.tcp_idle_timeout_s);
    let mut idle_at = Instant::now() + idle;
    let sleep = tokio::time::sleep_until(idle_at);
    tokio::pin!(sleep);
    let mut framer = Framer::new(shared);
    let mut written = 0usize; // bytes of the front queued item already written
    loop {
        let closing = framer.closing;
        let event = poll_fn(|cx| {
            let q = conn.poll_state(cx);
            if q.overflow {
                return Poll::Ready(Event::Overflow);
            }
            if closing && !q.pending {
                return Poll::Ready(Event::Flushed);
            }
            if q.closed && !closing {
                return Poll::Ready(Event::Closed);
            }
            if q.pending {
                if let Poll::Ready(r) = stream.poll_write_ready(cx) {
                    return Poll::Ready(Event::Writable(r));
                }
            }
            if !closing {
                if let Poll::Ready(r) = stream.poll_read_ready(cx) {
                    return Poll::Ready(Event::Readable(r));
                }
            }
            if sleep.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Event::Idle);
            }
            Poll::Pending
        })
        .await;
        match event {
            Event::Overflow => return End::Overflow,
            Event::Flushed => return End::FramingLost,
            Event::Closed => return End::PeerClosed,
            Event::Idle if closing => return End::Idle,
            Event::Idle => {
                let now = Instant::now();
                if framer.timed_out(now) {
                    return End::Incomplete;
                }
                if idle_at <= now {
                    return End::Idle;
                }
                sleep.as_mut().reset(framer.deadline(idle_at));
            }
            Event::Writable(r) => {
                if let Err(e) = r.and_then(|()| write_some(stream, conn, &mut written)) {
                    return End::Error(e);
                }
                if !closing {
                    idle_at = Instant::now() + idle;
                    sleep.as_mut().reset(framer.deadline(idle_at));
                }
            }
            Event::Readable(r) => {
                if let Err(e) = r {
                    return End::Error(e);
                }
                match read_some(stream, &mut framer.rbuf) {
                    Ok(0) => return End::PeerClosed,
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    Err(e) => return End::Error(e),
                }
                idle_at = Instant::now() + idle;
                if let Err(end) = framer.consume(shared, worker, conn, local).await {
                    return end;
                }
                if framer.closing {
                    sleep.as_mut().reset(Instant::now() + CLOSE_FLUSH.min(idle));
                } else {
                    sleep.as_mut().reset(framer.deadline(idle_at));
                }
            }
        }
    }
}

/// One non-blocking read appended to `rbuf`. An empty buffer is not allocated until bytes have
/// arrived (a spurious wake-up or a closed peer costs nothing), and then only as large as needed.
fn read_some(stream: &TcpStream, rbuf: &mut BytesMut) -> io::Result<usize> {
    if rbuf.is_empty() {
        let mut first = [0u8; READ_CHUNK];
        let n = stream.try_read(&mut first)?;
        if n > 0 {
            *rbuf = BytesMut::with_capacity(n);
            rbuf.extend_from_slice(&first[..n]);
        }
        return Ok(n);
    }
    let old = rbuf.len();
    if rbuf.capacity() - old < READ_CHUNK / 2 {
        rbuf.reserve(READ_CHUNK);
    }
    let room = rbuf.capacity() - old;
    rbuf.resize(old + room, 0);
    let r = stream.try_read(&mut rbuf[old..]);
    rbuf.truncate(old + *r.as_ref().unwrap_or(&0));
    r
}

/// Writes as much of the queue as the socket takes now, several messages per system call.
fn write_some(stream: &TcpStream, conn: &Conn, written: &mut usize) -> io::Result<()> {
    loop {
        let batch = conn.front(WRITE_BATCH);
        if batch.is_empty() {
            return Ok(());
        }
        let slices: Vec<IoSlice> =
            batch.iter().enumerate().map(|(i, b)| IoSlice::new(if i == 0 { &b[*written..] } else { b })).collect();
        match stream.try_write_vectored(&slices) {
            Ok(n) => conn.advance(n, written),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}
