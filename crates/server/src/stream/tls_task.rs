//! The I/O loop of one TLS connection after its handshake: the same events as a TCP connection
//! (write queue, readable bytes, idle and incomplete-message deadlines, module `tcp`), driven
//! through rustls's `AsyncRead`/`AsyncWrite` in one `poll_fn` so that one task owns the stream
//! without splitting it.

use super::framer::{End, Framer};
use super::task::{self, Guard, CLOSE_FLUSH, READ_CHUNK};
use crate::conns::Conn;
use crate::runtime::Ctl;
use crate::shared::Shared;
use crate::stats::Bump;
use crate::tls::shown;
use herald_core::Peer;
use std::future::{poll_fn, Future};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// An accepted connection: handshake (bounded by `handshake_timeout_s`), then the TLS loop.
pub(crate) async fn run_accepted(guard: Guard, worker: usize, stream: TcpStream, local: SocketAddr) {
    let shared = guard.shared.clone();
    let conn = guard.conn.clone();
    let Some(tls) = shared.tls.as_ref() else { return };
    let Some(acceptor) = tls.acceptor.clone() else { return };
    let end = match tokio::time::timeout(tls.handshake_timeout, acceptor.accept(stream)).await {
        Ok(Ok(s)) => {
            shared.stats.workers[worker].tls_handshakes.bump();
            serve(&shared, worker, s, &conn, local).await
        }
        Ok(Err(e)) => End::Handshake(e.to_string()),
        Err(_) => End::Handshake("timed out".into()),
    };
    task::ended(&shared, worker, &conn, &end);
    drop(guard);
}

/// A connection herald opened to `to`: handshake with the name check, then the TLS loop. A
/// failed handshake is a transport error for every shard that queued on it (RFC 3261 §18.4).
pub(crate) async fn run_connected(
    guard: Guard,
    worker: usize,
    stream: TcpStream,
    local: SocketAddr,
    ctl: mpsc::UnboundedSender<Ctl>,
    to: Peer,
) {
    let shared = guard.shared.clone();
    let conn = guard.conn.clone();
    let Some(tls) = shared.tls.as_ref() else { return };
    let name = tls.server_name(to.addr);
    let end = match tokio::time::timeout(tls.handshake_timeout, tls.connector.connect(name.clone(), stream)).await {
        Ok(Ok(s)) => {
            shared.stats.workers[worker].tls_handshakes.bump();
            serve(&shared, worker, s, &conn, local).await
        }
        Ok(Err(e)) => End::Handshake(format!("to {} as {}: {e}", to.addr, shown(&name))),
        Err(_) => End::Handshake(format!("to {}: timed out", to.addr)),
    };
    let failed = matches!(end, End::Handshake(_));
    if let End::Handshake(why) = &end {
        tracing::warn!(peer = %to.addr, "TLS connection to next hop failed: {why}");
    }
    task::ended(&shared, worker, &conn, &end);
    drop(guard);
    if failed {
        let _ = ctl.send(Ctl::TransportError { shard: None, to });
    }
}

/// Messages handed to rustls per turn before the loop looks at the socket again.
const WRITE_BATCH: usize = 16;

enum Event {
    Overflow,
    Flushed,
    Closed,
    Wrote,
    Read(usize),
    Failed(io::Error),
    Timer,
}

/// Reads, frames and writes until the connection ends. `S` is a rustls stream (server or
/// client side).
async fn serve<S>(shared: &Arc<Shared>, worker: usize, mut stream: S, conn: &Arc<Conn>, local: SocketAddr) -> End
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let idle = Duration::from_secs(shared.config.limits.tcp_idle_timeout_s);
    let mut idle_at = Instant::now() + idle;
    let sleep = tokio::time::sleep_until(idle_at);
    tokio::pin!(sleep);
    let mut framer = Framer::new(shared);
    let mut chunk = vec![0u8; READ_CHUNK];
    let mut written = 0usize; // bytes of the front queued item already handed to rustls
    let mut unflushed = false; // rustls holds records not yet written to the socket
    let end = loop {
        let closing = framer.closing;
        let event = poll_fn(|cx| {
            let q = conn.poll_state(cx);
            if q.overflow {
                return Poll::Ready(Event::Overflow);
            }
            let mut wrote = false;
            if q.pending || unflushed {
                match write_some(Pin::new(&mut stream), cx, conn, &mut written, &mut unflushed) {
                    Ok(progress) => wrote = progress,
                    Err(e) => return Poll::Ready(Event::Failed(e)),
                }
            }
            if closing && !unflushed && conn.front(1).is_empty() {
                return Poll::Ready(Event::Flushed);
            }
            if q.closed && !closing {
                return Poll::Ready(Event::Closed);
            }
            if !closing {
                let mut buf = ReadBuf::new(&mut chunk);
                match Pin::new(&mut stream).poll_read(cx, &mut buf) {
                    Poll::Ready(Ok(())) => return Poll::Ready(Event::Read(buf.filled().len())),
                    Poll::Ready(Err(e)) => return Poll::Ready(Event::Failed(e)),
                    Poll::Pending => {}
                }
            }
            if wrote {
                return Poll::Ready(Event::Wrote);
            }
            if sleep.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Event::Timer);
            }
            Poll::Pending
        })
        .await;
        match event {
            Event::Overflow => break End::Overflow,
            Event::Flushed => break End::FramingLost,
            Event::Closed => break End::PeerClosed,
            Event::Failed(e) => break End::Error(e),
            Event::Timer if closing => break End::Idle,
            Event::Timer => {
                let now = Instant::now();
                if framer.timed_out(now) {
                    break End::Incomplete;
                }
                if idle_at <= now {
                    break End::Idle;
                }
                sleep.as_mut().reset(framer.deadline(idle_at));
            }
            Event::Wrote => {
                if !closing {
                    idle_at = Instant::now() + idle;
                    sleep.as_mut().reset(framer.deadline(idle_at));
                }
            }
            Event::Read(0) => break End::PeerClosed,
            Event::Read(n) => {
                framer.rbuf.extend_from_slice(&chunk[..n]);
                idle_at = Instant::now() + idle;
                if let Err(end) = framer.consume(shared, worker, conn, local).await {
                    break end;
                }
                if framer.closing {
                    sleep.as_mut().reset(Instant::now() + CLOSE_FLUSH.min(idle));
                } else {
                    sleep.as_mut().reset(framer.deadline(idle_at));
                }
            }
        }
    };
    // Best effort close_notify (RFC 8446 §6.1), bounded: the peer may be gone.
    let _ =
        tokio::time::timeout(Duration::from_millis(200), poll_fn(|cx| Pin::new(&mut stream).poll_shutdown(cx))).await;
    end
}

/// Hands queued messages to rustls and flushes its records to the socket, as far as the socket
/// takes them now. `Ok(true)` when anything moved.
fn write_some<S: AsyncWrite>(
    mut stream: Pin<&mut S>,
    cx: &mut Context<'_>,
    conn: &Conn,
    written: &mut usize,
    unflushed: &mut bool,
) -> io::Result<bool> {
    let mut progress = false;
    'fill: loop {
        let batch = conn.front(WRITE_BATCH);
        if batch.is_empty() {
            break;
        }
        for (i, item) in batch.iter().enumerate() {
            let from = if i == 0 { *written } else { 0 };
            match stream.as_mut().poll_write(cx, &item[from..]) {
                Poll::Ready(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
                Poll::Ready(Ok(n)) => {
                    conn.advance(n, written);
                    *unflushed = true;
                    progress = true;
                    if from + n < item.len() {
                        continue 'fill; // rustls took part: ask again from the new offset
                    }
                }
                Poll::Ready(Err(e)) => return Err(e),
                Poll::Pending => break 'fill,
            }
        }
    }
    if *unflushed {
        match stream.as_mut().poll_flush(cx) {
            Poll::Ready(Ok(())) => *unflushed = false,
            Poll::Ready(Err(e)) => return Err(e),
            Poll::Pending => {}
        }
    }
    Ok(progress)
}
