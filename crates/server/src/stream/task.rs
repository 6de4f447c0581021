//! The task of one connection: its registration ([`Guard`]), its I/O loop, and how it ended.
//!
//! Memory: an idle connection holds its task, a registry entry and an empty queue; the read
//! buffer is allocated when bytes arrive and released as soon as it is empty again.

use super::framer::{End, Framer};
use crate::conns::Conn;
use crate::shared::Shared;
use crate::stats::Bump;
use bytes::BytesMut;
use herald_core::Transport;
use std::future::{poll_fn, Future};
use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::time::Instant;

/// Bytes read per system call.
pub(crate) const READ_CHUNK: usize = 4096;
/// How long a connection that must close (framing lost) may take to flush its answer.
pub(crate) const CLOSE_FLUSH: Duration = Duration::from_secs(5);
/// Messages gathered into one vectored write.
const WRITE_BATCH: usize = 16;

/// What woke a connection task.
enum Event {
    Overflow,
    Flushed,
    Closed,
    Writable(io::Result<()>),
    Readable(io::Result<()>),
    Idle,
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

pub(crate) fn register(shared: &Arc<Shared>, transport: Transport, peer: SocketAddr, accepted: bool) -> Guard {
    Guard { shared: shared.clone(), conn: shared.registry.open(transport, peer), accepted }
}

/// The life of one TCP connection: read and frame, answer pings, write queued bytes, time out.
pub(crate) async fn run(guard: Guard, worker: usize, stream: TcpStream, local: SocketAddr) {
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
