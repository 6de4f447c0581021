//! Accepting stream connections.

use super::codec::Plain;
use super::task::{self, register};
use super::tls::TlsCodec;
use super::ws::WsCodec;
use crate::shared::Shared;
use crate::stats::Bump;
use herald_core::Transport;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;
use tokio::net::TcpListener;

/// Accepts on one listener (`transport` TCP, TLS, WS or WSS) until the task is aborted (drain)
/// or the runtime stops. A connection's handshake (TLS, WebSocket upgrade) runs in its own task,
/// the connection's: a slow client holds no other.
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
                match transport {
                    Transport::Tls | Transport::Wss => {}
                    Transport::Ws => {
                        let codec = WsCodec::new(Plain, shared.clone(), worker);
                        tokio::spawn(task::run(guard, worker, stream, local, codec));
                        continue;
                    }
                    Transport::Tcp | Transport::Udp => {
                        tokio::spawn(task::run(guard, worker, stream, local, Plain));
                        continue;
                    }
                }
                let tls = shared.tls.as_ref().and_then(|t| Some((t.server.clone()?, t.handshake_timeout)));
                match tls.map(|(config, timeout)| TlsCodec::accept(config, timeout)) {
                    Some(Ok(codec)) if transport == Transport::Wss => {
                        let codec = WsCodec::new(codec, shared.clone(), worker);
                        tokio::spawn(task::run(guard, worker, stream, local, codec));
                    }
                    Some(Ok(codec)) => {
                        tokio::spawn(task::run(guard, worker, stream, local, codec));
                    }
                    Some(Err(e)) => tracing::warn!(worker, error = %e, "cannot start a TLS connection"),
                    None => {}
                }
            }
            Err(e) => {
                if last_warn.is_none_or(|t| t.elapsed() > Duration::from_secs(10)) {
                    tracing::warn!(worker, error = %e, "accept failed");
                    last_warn = Some(Instant::now());
                }
                // EMFILE and friends: back off instead of spinning on a full descriptor table.
                crate::local_timers::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}
