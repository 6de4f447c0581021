//! Sending on a stream connection, opening one when none to the peer exists.

use super::codec::Plain;
use super::framer::End;
use super::task::{self, register};
use super::tls::TlsCodec;
use crate::conns::{Conn, RecentConns, Refused};
use crate::runtime::Ctl;
use crate::shared::Shared;
use crate::stats::Bump;
use crate::tls::shown;
use bytes::Bytes;
use herald_core::{Peer, Transport};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

/// How long an outgoing connection may take to establish.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Sends on a stream connection: `conn` when given, else a `to.transport` (TCP or TLS)
/// connection to `to.addr` (reused, or opened and owned by this worker; from an ephemeral port,
/// as RFC 3261 §18.1.1 allows).
/// `false` when it cannot be sent: the caller reports a transport error. `now`: when the
/// caller last read the clock (see `Conn::push`). `recent`: the sending thread's connections
/// found by id and by address lately.
pub(crate) fn send(
    shared: &Arc<Shared>,
    worker: usize,
    ctl: &mpsc::UnboundedSender<Ctl>,
    to: Peer,
    bytes: Bytes,
    now: Instant,
    recent: &mut RecentConns,
) -> bool {
    let cap = shared.config.limits.tcp_write_queue_bytes;
    let stats = &shared.stats.workers[worker];
    let pushed = |c: &Conn, b: Bytes| {
        let r = c.push(b, cap, now);
        match r {
            Ok(()) => stats.tcp_sent.bump(),
            Err(Refused::Full) => stats.tcp_write_queue_full.bump(),
            Err(Refused::Closed(_)) => {}
        }
        r
    };
    if let Some(id) = to.conn {
        let Some(c) = recent.get(&shared.registry, id) else { return false };
        return match pushed(c, bytes) {
            Ok(()) => true,
            Err(Refused::Closed(_)) => {
                recent.forget(id);
                false
            }
            Err(Refused::Full) => false,
        };
    }
    let mut bytes = bytes;
    if let Some(c) = recent.by_addr(&shared.registry, to.transport, to.addr) {
        match pushed(c, bytes) {
            Ok(()) => return true,
            Err(Refused::Full) => return false,
            // Closing under us: open a new one, with the bytes handed back.
            Err(Refused::Closed(b)) => {
                let id = c.id;
                recent.forget(id);
                bytes = b;
            }
        }
    }
    // A WebSocket peer is a browser reached only over the connection it opened (RFC 7118 §5):
    // herald opens none.
    if matches!(to.transport, Transport::Ws | Transport::Wss) {
        return false;
    }
    shared.stats.tcp_open.fetch_add(1, Ordering::Relaxed);
    let guard = register(shared, to.transport, to.addr, false);
    if pushed(&guard.conn, bytes).is_err() {
        return false;
    }
    let ctl = ctl.clone();
    tokio::spawn(async move {
        let stream = match crate::local_timers::timeout(CONNECT_TIMEOUT, TcpStream::connect(to.addr)).await {
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
        if to.transport != Transport::Tls {
            task::run(guard, worker, stream, local, Plain).await;
            return;
        }
        // RFC 5922 §7: the next hop must prove the name it was looked up by.
        let Some(tls) = guard.shared.tls.clone() else { return };
        let name = tls.server_name(to.addr);
        let codec = match TlsCodec::connect(tls.client.clone(), name.clone(), tls.handshake_timeout) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(peer = %to.addr, error = %e, "cannot start a TLS connection");
                drop(guard);
                let _ = ctl.send(Ctl::TransportError { shard: None, to });
                return;
            }
        };
        // A failed handshake is a transport error for every shard that queued on the connection
        // (RFC 3261 §18.4).
        if let End::Handshake(why) = task::run(guard, worker, stream, local, codec).await {
            tracing::warn!(peer = %to.addr, "TLS connection to next hop failed: to {} as {}: {why}", to.addr, shown(&name));
            let _ = ctl.send(Ctl::TransportError { shard: None, to });
        }
    });
    true
}
