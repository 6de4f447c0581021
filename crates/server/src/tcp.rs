//! TCP connections (RFC 3261 §18.3): no central dispatcher. The worker that accepts (or opens) a
//! connection owns it: one task reads, frames, answers keep-alive pings and writes; the messages
//! it reads go, in order, through the owning worker's inbox to that worker's loop. Any worker
//! sends on it by pushing bytes into its bounded write queue, found through the global registry
//! (ConnId → connection, peer address → ConnId for reuse).
//!
//! Memory: an idle connection holds its task, a registry entry and an empty queue; the read
//! buffer is allocated when bytes arrive and released as soon as it is empty again.

use crate::inbound::{self, Dropped, Inbound};
use crate::stats::Bump;
use crate::worker::{Ctl, Incoming, Shared};
use bytes::{Bytes, BytesMut};
use herald_core::{ConnId, Peer, Transport};
use herald_sip::framing::{next_frame, Frame};
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
const READ_CHUNK: usize = 4096;
/// How long a connection that must close (framing lost) may take to flush its answer.
const CLOSE_FLUSH: Duration = Duration::from_secs(5);
/// How long an outgoing connection may take to establish.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Messages gathered into one vectored write.
const WRITE_BATCH: usize = 16;

/// One connection as seen by senders.
pub(crate) struct Conn {
    pub id: ConnId,
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
    fn new(id: ConnId, peer: SocketAddr) -> Conn {
        Conn { id, peer, queue: Mutex::new(WriteQueue::default()) }
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

    fn close(&self) {
        let mut q = self.queue.lock().expect("queue lock");
        q.closed = true;
        let waker = q.wake();
        drop(q);
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// The queue's state, registering the task to be woken by the next push or close.
    fn poll_state(&self, cx: &mut Context<'_>) -> QueueState {
        let mut q = self.queue.lock().expect("queue lock");
        if !q.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            q.waker = Some(cx.waker().clone());
        }
        QueueState { pending: !q.items.is_empty(), closed: q.closed, overflow: q.overflow }
    }
}

struct QueueState {
    pending: bool,
    closed: bool,
    overflow: bool,
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
type AddrShard = Mutex<HashMap<SocketAddr, u64>>;

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
        self.addr_shard(&c.peer).lock().expect("registry lock").insert(c.peer, c.id.0);
        self.by_id[(c.id.0 % SHARDS as u64) as usize].lock().expect("registry lock").insert(c.id.0, c);
    }

    pub(crate) fn get(&self, id: ConnId) -> Option<Arc<Conn>> {
        self.by_id[(id.0 % SHARDS as u64) as usize].lock().expect("registry lock").get(&id.0).cloned()
    }

    fn by_addr(&self, a: SocketAddr) -> Option<Arc<Conn>> {
        let id = *self.addr_shard(&a).lock().expect("registry lock").get(&a)?;
        self.get(ConnId(id))
    }

    fn remove(&self, c: &Conn) {
        self.by_id[(c.id.0 % SHARDS as u64) as usize].lock().expect("registry lock").remove(&c.id.0);
        let mut m = self.addr_shard(&c.peer).lock().expect("registry lock");
        if m.get(&c.peer) == Some(&c.id.0) {
            m.remove(&c.peer);
        }
    }
}

/// Keeps the registry and the open-connection gauge right however the task ends (including the
/// runtime being dropped at shutdown).
struct Guard {
    shared: Arc<Shared>,
    conn: Arc<Conn>,
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

fn register(shared: &Arc<Shared>, peer: SocketAddr, accepted: bool) -> Guard {
    let id = ConnId(shared.next_conn.fetch_add(1, Ordering::Relaxed));
    let conn = Arc::new(Conn::new(id, peer));
    shared.registry.insert(conn.clone());
    Guard { shared: shared.clone(), conn, accepted }
}

/// Accepts on one listener until the task is aborted (drain) or the runtime stops.
pub(crate) async fn accept_loop(shared: Arc<Shared>, worker: usize, listener: TcpListener) {
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
                let guard = register(&shared, peer, true);
                tokio::spawn(run(guard, worker, stream, local));
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

/// Sends on a stream connection: `conn` when given, else a connection to `to.addr` (reused, or
/// opened and owned by this worker; from an ephemeral port, as RFC 3261 §18.1.1 allows).
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
    if let Some(c) = shared.registry.by_addr(to.addr) {
        match pushed(&c, bytes.clone()) {
            Ok(()) => return true,
            Err(PushError::Full) => return false,
            Err(PushError::Closed) => {} // closing under us: open a new one
        }
    }
    shared.stats.tcp_open.fetch_add(1, Ordering::Relaxed);
    let guard = register(shared, to.addr, false);
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
        run(guard, worker, stream, local).await;
    });
    true
}

#[derive(Debug)]
enum End {
    PeerClosed,
    Idle,
    /// A message began but did not arrive whole in time (slow sender).
    Incomplete,
    Overflow,
    FramingLost,
    Error(io::Error),
}

/// The life of one connection: read and frame, answer pings, write queued bytes, time out.
async fn run(guard: Guard, worker: usize, stream: TcpStream, local: SocketAddr) {
    let shared = guard.shared.clone();
    let conn = guard.conn.clone();
    let end = serve(&shared, worker, &stream, &conn, local).await;
    let stats = &shared.stats.workers[worker];
    match &end {
        End::Idle => stats.tcp_idle_closed.bump(),
        End::Incomplete => stats.tcp_incomplete_timeouts.bump(),
        End::FramingLost => stats.tcp_framing_errors.bump(),
        End::Error(e) => tracing::debug!(peer = %conn.peer, error = %e, "TCP connection error"),
        End::PeerClosed | End::Overflow => {}
    }
    tracing::trace!(peer = %conn.peer, id = conn.id.0, ?end, "TCP connection closed");
    drop(guard);
}

/// The connection loop. It awaits one `poll_fn` over the write queue, socket readiness and one
/// timer, so the task stores no readiness futures (the socket keeps one waker per direction)
/// and stays small: an idle connection's whole task is a few hundred bytes.
///
/// The timer serves two deadlines: idleness (no byte either way for `tcp_idle_timeout_s`) and an
/// incomplete message (bytes of a message that has not arrived whole `tcp_incomplete_message_timeout_s`
/// after its first byte): a slow sender (slowloris) trickling a byte now and then resets the
/// first but never the second, so it cannot hold the connection and its read buffer.
async fn serve(shared: &Arc<Shared>, worker: usize, stream: &TcpStream, conn: &Arc<Conn>, local: SocketAddr) -> End {
    let idle = Duration::from_secs(shared.config.limits.tcp_idle_timeout_s);
    let incomplete = Duration::from_secs(shared.config.limits.tcp_incomplete_message_timeout_s);
    let mut idle_at = Instant::now() + idle;
    // When the partial message at the front of `rbuf` must be complete.
    let mut partial_at: Option<Instant> = None;
    let sleep = tokio::time::sleep_until(idle_at);
    tokio::pin!(sleep);
    let mut rbuf = BytesMut::new();
    let mut written = 0usize; // bytes of the front queued item already written
    let mut closing = false;
    loop {
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
                if partial_at.is_some_and(|t| t <= now) {
                    return End::Incomplete;
                }
                if idle_at <= now {
                    return End::Idle;
                }
                sleep.as_mut().reset(first(idle_at, partial_at));
            }
            Event::Writable(r) => {
                if let Err(e) = r.and_then(|()| write_some(stream, conn, &mut written)) {
                    return End::Error(e);
                }
                if !closing {
                    idle_at = Instant::now() + idle;
                    sleep.as_mut().reset(first(idle_at, partial_at));
                }
            }
            Event::Readable(r) => {
                if let Err(e) = r {
                    return End::Error(e);
                }
                match read_some(stream, &mut rbuf) {
                    Ok(0) => return End::PeerClosed,
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    Err(e) => return End::Error(e),
                }
                idle_at = Instant::now() + idle;
                let before = rbuf.len();
                loop {
                    match next_message(shared, worker, conn, &mut rbuf, local) {
                        Step::More => continue,
                        Step::NeedBytes => break,
                        Step::Close => {
                            closing = true;
                            break;
                        }
                        Step::Deliver(item) => {
                            // To this worker's loop, in order (the connection's messages are
                            // handled by this worker only). Streams wait for room (back-pressure)
                            // instead of dropping; the wait is boxed so that the task of every
                            // connection does not carry it.
                            let inbox = &shared.inboxes[worker];
                            match inbox.try_send(item) {
                                Ok(()) => {}
                                Err(mpsc::error::TrySendError::Full(item)) => {
                                    if Box::pin(inbox.send(item)).await.is_err() {
                                        return End::PeerClosed;
                                    }
                                }
                                Err(mpsc::error::TrySendError::Closed(_)) => return End::PeerClosed,
                            }
                        }
                    }
                }
                if rbuf.is_empty() || closing {
                    // Idle connections keep no buffer.
                    rbuf = BytesMut::new();
                    partial_at = None;
                } else if partial_at.is_none() || rbuf.len() < before {
                    // A partial message is waiting: it began with this read, or right after the
                    // message(s) this read completed (read the clock again: handing those to a
                    // full inbox may have waited).
                    partial_at = Some(Instant::now() + incomplete);
                }
                if closing {
                    sleep.as_mut().reset(Instant::now() + CLOSE_FLUSH.min(idle));
                } else {
                    sleep.as_mut().reset(first(idle_at, partial_at));
                }
            }
        }
    }
}

/// The earlier of the idle deadline and the incomplete-message deadline.
fn first(idle_at: Instant, partial_at: Option<Instant>) -> Instant {
    partial_at.map_or(idle_at, |p| p.min(idle_at))
}

/// What one framing step produced.
enum Step {
    /// A ping, keep-alive or answered/dropped message: look for the next frame.
    More,
    NeedBytes,
    /// The framing is lost or a fatal error was answered: flush and close.
    Close,
    /// A message for the worker's loop.
    Deliver(Incoming),
}

/// Cuts one frame off `rbuf` and deals with it (RFC 3261 §18.3, RFC 5626 §3.5.1).
fn next_message(shared: &Shared, worker: usize, conn: &Conn, rbuf: &mut BytesMut, local: SocketAddr) -> Step {
    let limits = &shared.limits;
    let stats = &shared.stats.workers[worker];
    let cap = shared.config.limits.tcp_write_queue_bytes;
    let frame = match next_frame(rbuf, limits) {
        Ok(Some(f)) => f,
        Ok(None) => return Step::NeedBytes,
        Err(e) => {
            // RFC 4475 §3.1.2.3, §3.3.9: framing lost - answer if possible, then close.
            match inbound::answer_unparsed(rbuf, &e, limits) {
                Inbound::Answer { bytes, .. } => {
                    stats.malformed_answered.bump();
                    let _ = conn.push(bytes.freeze(), cap);
                }
                _ => stats.malformed_dropped.bump(),
            }
            return Step::Close;
        }
    };
    let bytes = match frame {
        Frame::Ping => {
            // RFC 5626 §3.5.1: a double-CRLF ping gets a single-CRLF pong.
            stats.tcp_pings.bump();
            let _ = conn.push(Bytes::from_static(b"\r\n"), cap);
            return Step::More;
        }
        Frame::KeepAlive => return Step::More,
        Frame::Message(bytes) => bytes,
    };
    stats.tcp_received.bump();
    match inbound::classify(bytes, limits, herald_sip::Transport::Stream, false) {
        Inbound::Message(msg) => {
            if shared.draining.load(Ordering::Relaxed) && inbound::is_new_request(&msg) {
                stats.drain_dropped.bump();
                return Step::More;
            }
            let from = Peer { transport: Transport::Tcp, addr: conn.peer, conn: Some(conn.id) };
            Step::Deliver(Incoming { from, local, msg })
        }
        Inbound::Answer { bytes, close } => {
            stats.malformed_answered.bump();
            let _ = conn.push(bytes.freeze(), cap);
            if close {
                Step::Close
            } else {
                Step::More
            }
        }
        Inbound::Drop(Dropped::Response) => {
            stats.malformed_responses_dropped.bump();
            Step::More
        }
        Inbound::Drop(_) => {
            stats.malformed_dropped.bump();
            Step::More
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
        let batch: Vec<Bytes> = {
            let q = conn.queue.lock().expect("queue lock");
            q.items.iter().take(WRITE_BATCH).cloned().collect()
        };
        if batch.is_empty() {
            return Ok(());
        }
        let slices: Vec<IoSlice> =
            batch.iter().enumerate().map(|(i, b)| IoSlice::new(if i == 0 { &b[*written..] } else { b })).collect();
        let mut n = match stream.try_write_vectored(&slices) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) => return Err(e),
        };
        let mut q = conn.queue.lock().expect("queue lock");
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
