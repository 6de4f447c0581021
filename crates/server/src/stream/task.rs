//! The task of one stream connection, whatever its codec (module `codec`): its registration
//! ([`Guard`]), its I/O loop ([`run`]), and how it ended.
//!
//! Memory: an idle connection holds its task, a registry entry and an empty queue; the read
//! buffer is allocated when bytes arrive and released as soon as it is empty again. Plain TCP's
//! codec is a zero-sized type, so its task is no larger than one written for TCP alone.

use super::codec::Codec;
use super::conn_timer::Timer;
use super::framer::{Backlog, End, Framer, Stop};
use super::socket::Socket;
use crate::conns::Conn;
use crate::local_timers::Sleep;
use crate::shared::Shared;
use crate::stats::Bump;
use herald_core::Transport;
use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;
use std::time::Instant;
use tokio::io::Interest;
use tokio::net::TcpStream;

/// How long a connection that must close (framing lost) may take to flush its answer.
const CLOSE_FLUSH: Duration = Duration::from_secs(5);
/// How long a closing connection may take to send its codec's last bytes (TLS close_notify):
/// the peer may be gone.
const CLOSE_NOTIFY: Duration = Duration::from_millis(200);
/// Queued messages offered to the codec per write.
const WRITE_BATCH: usize = super::codec::WRITE_BATCH;

/// Why the connection loop's wait ended (reads are taken within the wait: see `serve`).
enum Event<'a> {
    Overflow,
    Flushed,
    Closed,
    /// The socket can take bytes (`bool`: the codec was handshaking).
    Writable(io::Result<()>, bool),
    /// The timer fired (`bool`: the connection was closing).
    Timer(bool),
    /// A read met a full inbox: the rest of it waits for room (read at the instant given).
    Full(Backlog<'a>, Instant),
    /// The connection ends.
    End(End),
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
        // Closed before it leaves the registry: a sender that remembers it (`RecentConns`)
        // then finds it refusing, as one that looks it up finds it gone.
        self.conn.close();
        self.shared.registry.remove(&self.conn);
        self.shared.stats.tcp_open.fetch_sub(1, Ordering::Relaxed);
        if self.accepted {
            self.shared.per_ip.release(self.conn.peer.ip());
        }
    }
}

pub(crate) fn register(shared: &Arc<Shared>, transport: Transport, peer: SocketAddr, accepted: bool) -> Guard {
    Guard { shared: shared.clone(), conn: shared.registry.open(transport, peer), accepted }
}

/// The life of one connection: handshake (if the codec has one), then read and frame, answer
/// pings, write queued bytes, time out; then the codec's closing bytes. Returns how it ended
/// (counted already).
pub(crate) async fn run<C: Codec>(
    guard: Guard,
    worker: usize,
    stream: TcpStream,
    local: SocketAddr,
    mut codec: C,
) -> End {
    let shared = guard.shared.clone();
    let conn = guard.conn.clone();
    let stream = Arc::new(stream);
    if C::SIP_AS_IS {
        conn.attach(stream.clone());
    }
    let end = serve(&shared, worker, &stream, &conn, local, &mut codec).await;
    if !matches!(end, End::Error(_)) {
        codec.close();
        if codec.wants_write() {
            let flush = poll_fn(|cx| loop {
                if let Err(e) = std::task::ready!(stream.poll_write_ready(cx)) {
                    return Poll::Ready(Err(e));
                }
                match codec.flush(&mut Socket::new(&stream)) {
                    Ok(()) if codec.wants_write() => continue, // WouldBlock: wait for readiness
                    done => return Poll::Ready(done),
                }
            });
            let _ = crate::local_timers::timeout(CLOSE_NOTIFY, flush).await;
        }
    }
    ended::<C>(&shared, worker, &conn, &end);
    drop(guard);
    end
}

/// Counts how a stream connection ended.
fn ended<C: Codec>(shared: &Shared, worker: usize, conn: &Conn, end: &End) {
    let stats = &shared.stats.workers[worker];
    match end {
        End::Idle => stats.tcp_idle_closed.bump(),
        End::Incomplete => stats.tcp_incomplete_timeouts.bump(),
        End::FramingLost => stats.tcp_framing_errors.bump(),
        End::Handshake(e) => {
            if let Some((_, failed)) = C::handshake_counters(stats) {
                failed.bump();
            }
            tracing::debug!(peer = %conn.peer, transport = %conn.transport, error = %e, "handshake failed");
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
/// and stays small: the future of a plain TCP connection is 800 bytes (release build, rustc 1.95).
///
/// The timer serves four deadlines: the handshake (`[tls] handshake_timeout_s`, while the
/// codec has one under way), idleness (no byte either way for `tcp_idle_timeout_s`), an
/// incomplete message (see [`Framer::timed_out`]) and the codec's own ([`Codec::deadline`]:
/// WebSocket keep-alive).
async fn serve<C: Codec>(
    shared: &Arc<Shared>,
    worker: usize,
    stream: &TcpStream,
    conn: &Arc<Conn>,
    local: SocketAddr,
    codec: &mut C,
) -> End {
    let idle = Duration::from_secs(shared.config.limits.tcp_idle_timeout_s);
    let handshake_at = codec.handshaking().then(|| Instant::now() + codec.handshake_timeout());
    let mut at = Deadlines { idle, idle_at: Instant::now() + idle, handshake_at };
    let mut sleep = Sleep::until(handshake_at.map_or(at.idle_at, |h| h.min(at.idle_at)));
    // The timer has been polled since it was last set, and so holds this task's waker until it
    // fires (see [`Timer`]).
    let mut timer = Timer::default();
    let mut framer = Framer::new(shared);
    // The loop has waited (returned `Pending`) since it last took the socket's read readiness
    // without `poll_read_ready` (below).
    let mut waited = true;
    let mut written = 0usize; // bytes of the front queued item already taken by the codec
    loop {
        // Reads are taken within the one `poll_fn`, which goes on looking after each: a read
        // returned as an event and the loop's next `poll_fn` built and awaited anew cost a
        // turn of the task's state machine per message read (~15 instructions a read,
        // callgrind, issue 21). The looks, their order and what they answer are as before.
        let event = poll_fn(|cx| loop {
            let closing = framer.closing;
            let (wants_write, handshaking, finished) = (codec.wants_write(), codec.handshaking(), codec.finished());
            let q = conn.poll_state(cx);
            if q.overflow {
                return Poll::Ready(Event::Overflow);
            }
            if finished && !wants_write {
                return Poll::Ready(Event::Closed);
            }
            if closing && !q.pending && !wants_write {
                return Poll::Ready(Event::Flushed);
            }
            if q.closed && !closing {
                return Poll::Ready(Event::Closed);
            }
            if (q.pending && !handshaking) || wants_write {
                if let Poll::Ready(r) = stream.poll_write_ready(cx) {
                    return Poll::Ready(Event::Writable(r, handshaking));
                }
            }
            if !closing && !finished {
                // Woken by the socket, the first look reads the readiness tokio holds as
                // `try_io` does, without `poll_read_ready`: that one also charges the task's
                // cooperative budget, and it is the call that registers the waker, work for
                // when the socket is not ready (~110 instructions a message read, callgrind,
                // issue 21). Any readiness this misses, `poll_read_ready` finds. Later looks
                // until the loop waits again go through it, so a peer that keeps the socket
                // full still spends the budget and the task yields to the others as before.
                let readable = if std::mem::take(&mut waited) && stream.try_io(Interest::READABLE, || Ok(())).is_ok() {
                    Poll::Ready(Ok(()))
                } else {
                    stream.poll_read_ready(cx)
                };
                if let Poll::Ready(r) = readable {
                    let read = r.map_err(|e| failed(e, handshaking)).and_then(|()| {
                        read_and_deliver(shared, worker, stream, conn, local, codec, &mut framer, handshaking, &mut at)
                    });
                    match read {
                        Ok(Delivered::All) => {
                            at.after_delivery(&framer, &mut timer, &mut sleep, codec);
                            continue;
                        }
                        Ok(Delivered::Nothing) => continue,
                        Ok(Delivered::Partly { backlog, now }) => return Poll::Ready(Event::Full(backlog, now)),
                        Err(end) => return Poll::Ready(Event::End(end)),
                    }
                }
            }
            if timer.must_poll(&sleep) {
                if sleep.poll_elapsed(cx).is_ready() {
                    return Poll::Ready(Event::Timer(closing));
                }
                timer.polled();
            }
            waited = true;
            return Poll::Pending;
        })
        .await;
        match event {
            Event::Overflow => return End::Overflow,
            Event::Flushed => return End::FramingLost,
            Event::Closed => return End::PeerClosed,
            Event::End(end) => return end,
            Event::Timer(true) => return End::Idle,
            Event::Timer(false) => {
                let now = Instant::now();
                if at.handshake_at.is_some_and(|h| h <= now) {
                    return End::Handshake("timed out".into());
                }
                if framer.timed_out(now) {
                    return End::Incomplete;
                }
                // Bytes a sender wrote to the socket itself (`Conn::push`) count as traffic too.
                if let Some(wrote_at) = conn.take_wrote_at() {
                    at.idle_at = at.idle_at.max(wrote_at + idle);
                }
                if at.idle_at <= now {
                    return End::Idle;
                }
                if codec.deadline().is_some_and(|d| d <= now) {
                    if let Err(e) = codec.on_deadline(now) {
                        return End::Error(e);
                    }
                }
                timer.reset(&mut sleep, at.next(&framer, codec));
            }
            Event::Writable(r, handshaking) => {
                if let Err(e) = r.and_then(|()| write_some(stream, conn, codec, &mut written)) {
                    return failed(e, handshaking);
                }
                if !framer.closing {
                    at.idle_at = Instant::now() + idle;
                    timer.earlier(&mut sleep, at.next(&framer, codec));
                }
            }
            Event::Full(backlog, now) => {
                // The worker's inbox is full: wait for room and deliver the rest of the read.
                let consumed =
                    framer.consume_rest(backlog, |f| f.deliver_here(shared, worker, conn, local, codec, now)).await;
                if let Err(end) = consumed {
                    return end;
                }
                at.after_delivery(&framer, &mut timer, &mut sleep, codec);
            }
        }
    }
}

/// What [`read_and_deliver`] did with a readable socket.
enum Delivered<'a> {
    /// Nothing read (`WouldBlock`): look again.
    Nothing,
    /// Read, and all of it framed and handed on.
    All,
    /// Read at `now`; the worker's inbox is full, and [`Framer::consume_rest`] delivers the rest.
    Partly { backlog: Backlog<'a>, now: Instant },
}

/// The connection loop's deadlines other than the framer's and the codec's own.
struct Deadlines {
    /// `tcp_idle_timeout_s`.
    idle: Duration,
    /// When the connection is idle: pushed back by every byte either way.
    idle_at: Instant,
    /// The handshake's deadline, while one is under way.
    handshake_at: Option<Instant>,
}

impl Deadlines {
    /// When the connection's timer must fire: the earliest of the handshake's deadline, the
    /// idle and incomplete-message deadlines ([`Framer::deadline`]) and the codec's own.
    fn next<C: Codec>(&self, framer: &Framer, codec: &C) -> Instant {
        let at = self.handshake_at.map_or(framer.deadline(self.idle_at), |h| h.min(framer.deadline(self.idle_at)));
        codec.deadline().map_or(at, |c| c.min(at))
    }

    /// After a read's messages are delivered: a connection whose framing is lost gets its last
    /// deadline to flush its answer in; any other has its timer brought forward if a deadline
    /// came nearer (see [`Timer::earlier`]). Inline: once per read.
    #[inline]
    fn after_delivery<C: Codec>(&self, framer: &Framer, timer: &mut Timer, sleep: &mut Sleep, codec: &C) {
        if framer.closing {
            timer.reset(sleep, Instant::now() + CLOSE_FLUSH.min(self.idle));
        } else {
            timer.earlier(sleep, self.next(framer, codec));
        }
    }
}

/// Reads what the socket has and delivers the messages it completes (`handshaking`: the codec's
/// handshake was under way before the read); a read pushes the idle deadline back and may end
/// the handshake's. `Err`: the connection ends.
#[allow(clippy::too_many_arguments)]
fn read_and_deliver<'a, C: Codec>(
    shared: &'a Shared,
    worker: usize,
    stream: &TcpStream,
    conn: &Conn,
    local: SocketAddr,
    codec: &mut C,
    framer: &mut Framer,
    handshaking: bool,
    at: &mut Deadlines,
) -> Result<Delivered<'a>, End> {
    let mut wire = Socket::new(stream);
    match codec.read(&mut wire, &mut framer.rbuf) {
        Ok(0) if handshaking => return Err(End::Handshake("closed by the peer".into())),
        Ok(0) => return Err(End::PeerClosed),
        Ok(_) => wire.forget_readable_if_drained(),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Delivered::Nothing),
        Err(e) => return Err(failed(e, handshaking)),
    }
    let now = Instant::now();
    at.idle_at = now + at.idle;
    if at.handshake_at.is_some() && !codec.handshaking() {
        at.handshake_at = None;
        if let Some((done, _)) = C::handshake_counters(&shared.stats.workers[worker]) {
            done.bump();
        }
    }
    match framer.consume(|f| f.deliver_here(shared, worker, conn, local, codec, now)) {
        Ok(()) => Ok(Delivered::All),
        Err(Stop::End(end)) => Err(end),
        Err(Stop::Full(backlog)) => Ok(Delivered::Partly { backlog, now }),
    }
}

/// An I/O or codec error ends the connection; during a handshake it is a failed handshake.
fn failed(e: io::Error, handshaking: bool) -> End {
    if handshaking {
        End::Handshake(e.to_string())
    } else {
        End::Error(e)
    }
}

/// Hands as much of the write queue to the codec as the socket takes now, several messages per
/// system call, and flushes the codec's own bytes.
fn write_some<C: Codec>(stream: &TcpStream, conn: &Conn, codec: &mut C, written: &mut usize) -> io::Result<()> {
    let mut wire = Socket::new(stream);
    loop {
        let batch = if codec.handshaking() { Vec::new() } else { conn.front(WRITE_BATCH) };
        if !batch.is_empty() {
            match codec.write(&batch, *written, &mut wire) {
                Ok(0) => return Ok(()),
                // More queued: offer it now (the socket took all of this).
                Ok(n) if conn.advance(n, written) => continue,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        return match codec.flush(&mut wire) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(()),
            other => other,
        };
    }
}

#[cfg(test)]
#[path = "task_tests.rs"]
mod tests;
