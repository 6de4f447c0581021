//! Counters. Each worker increments its own block (no cache line shared on the hot path); a
//! snapshot sums them. The per-type timings of the metrics endpoint live beside them
//! ([`crate::metrics::WorkerMetrics`], one block per worker too). The engines' own counters
//! (digest authentication, registrar, the engines' own responses) live in herald-core and are
//! registered here by whoever builds the engines ([`Stats::export_auth`],
//! [`Stats::export_registrar`], [`Stats::export_responses`]), so that the metrics
//! endpoint and [`Stats::snapshot`] show them too.

use crate::metrics::WorkerMetrics;
use crate::protect::FloodGuard;
use herald_core::auth::{AuthStats, AuthStatsSnapshot};
use herald_core::engine::ResponseStats;
use herald_core::registrar::{RegistrarStats, RegistrarStatsSnapshot};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

macro_rules! counters {
    ($(#[doc = $help:literal] $name:ident),* $(,)?) => {
        /// One worker's counters.
        #[derive(Debug, Default)]
        #[repr(align(128))]
        pub(crate) struct WorkerStats {
            $(pub(crate) $name: AtomicU64,)*
        }

        /// Totals over all workers at one moment.
        #[derive(Debug, Default, Clone, PartialEq, Eq)]
        #[non_exhaustive]
        pub struct StatsSnapshot {
            $(#[doc = $help] pub $name: u64,)*
            /// TCP connections open now (accepted and opened by herald).
            pub tcp_open: u64,
            /// Digest authentication outcomes, when an authenticator was registered
            /// ([`Stats::export_auth`]; none when `[auth] enabled = false`).
            pub auth: Option<AuthStatsSnapshot>,
            /// The registrar's answers, when registered ([`Stats::export_registrar`]).
            pub registrar: Option<RegistrarStatsSnapshot>,
            /// The responses the engines built themselves, `(status, count)` for each status
            /// sent at least once, ascending ([`Stats::export_responses`]; empty when none was
            /// registered).
            pub local_responses: Vec<(u16, u64)>,
        }

        impl WorkerStats {
            fn add_to(&self, s: &mut StatsSnapshot) {
                $(s.$name += self.$name.load(Ordering::Relaxed);)*
            }
        }

        impl StatsSnapshot {
            /// Every per-worker counter as `(name, description, value)`, for the metrics endpoint.
            pub fn counters(&self) -> Vec<(&'static str, &'static str, u64)> {
                vec![$((stringify!($name), $help.trim(), self.$name),)*]
            }
        }
    };
}

counters! {
    /// Datagrams read from UDP sockets.
    udp_received,
    /// Datagrams handed to the kernel.
    udp_sent,
    /// Messages cut from TCP streams.
    tcp_received,
    /// Messages (UDP or TCP) written to TCP connection queues.
    tcp_sent,
    /// Malformed requests answered with the status `ParseError::response()` gives.
    malformed_answered,
    /// Malformed requests that could not be answered (no Via/From/To/Call-ID/CSeq, or ACK).
    malformed_dropped,
    /// Malformed responses (never answered: RFC 4475 §3.1.2.19).
    malformed_responses_dropped,
    /// New requests dropped while draining for shutdown.
    drain_dropped,
    /// TCP connections accepted.
    tcp_accepted,
    /// TCP connections accepted and closed at once: `max_tcp_connections` reached.
    tcp_rejected,
    /// TCP connections closed for idleness.
    tcp_idle_closed,
    /// TCP connections closed because the framing was lost.
    tcp_framing_errors,
    /// TCP connections closed because their write queue overflowed.
    tcp_write_queue_full,
    /// Outputs that could not be sent (reported to the handler as `TransportError`).
    send_errors,
    /// CRLF keep-alive pings answered (RFC 5626 §3.5.1).
    tcp_pings,
    /// TCP connections accepted and closed at once: `max_tcp_connections_per_ip` reached.
    tcp_rejected_per_ip,
    /// TCP connections closed because a message did not arrive whole within `tcp_incomplete_message_timeout_s`.
    tcp_incomplete_timeouts,
    /// New requests answered 503 because their worker was overloaded (`[overload]`).
    overload_rejected,
    /// New requests answered 503: `max_transactions` or `max_held_bytes` reached.
    transactions_rejected,
    /// ACKs for herald's own stateless 503s, absorbed (RFC 3261 §17.2.1: no transaction to match).
    stateless_acks_absorbed,
    /// TLS connections (accepted or opened) whose handshake failed or timed out.
    tls_handshake_failures,
    /// TLS handshakes completed (accepted or opened).
    tls_handshakes,
    /// UDP messages a busy receiver handed to the worker owning their engine shard (balancing).
    udp_handed_over,
    /// Of those, the ones the receiver parsed before handing them over: its peek at the Call-ID read none where the parse did (none expected).
    udp_handed_parsed,
    /// WebSocket upgrades completed (101 sent; on wss after the TLS handshake).
    ws_handshakes,
    /// WebSocket openings that failed: upgrade refused (400, 403, 405, 426, 431), timed out, closed, or (wss) TLS failed.
    ws_handshake_failures,
    /// WebSocket connections closed by the peer's close frame (RFC 6455 §5.5.1).
    ws_closed_by_peer,
    /// WebSocket connections closed with status 1002 or 1007: unmasked or malformed frame, bad opcode or fragments, text not UTF-8.
    ws_closed_protocol_error,
    /// WebSocket connections closed with status 1009: a frame or message over the size limit.
    ws_closed_too_big,
    /// WebSocket connections closed because nothing came back within a ping interval after a ping (the peer vanished).
    ws_closed_dead,
    /// WebSocket keep-alive pings sent (`[websocket] ping_interval_s`).
    ws_pings_sent,
    /// STUN Binding requests on a UDP port answered with their mapped address (RFC 5626 §8 keep-alives).
    stun_requests_answered,
    /// STUN messages on a UDP port not answered: malformed, not a Binding request, bad FINGERPRINT, or over the source's rate.
    stun_dropped,
}

/// The counters of a running server; cheap to clone, readable from any thread.
#[derive(Debug, Clone)]
pub struct Stats {
    pub(crate) workers: Arc<[WorkerStats]>,
    pub(crate) tcp_open: Arc<AtomicUsize>,
    /// Per worker, written only while `[metrics] listen` is set.
    pub(crate) metrics: Arc<[WorkerMetrics]>,
    /// Workers shedding new requests now (`[overload]`).
    pub(crate) shedding: Arc<AtomicUsize>,
    /// The per-source guard, when `[flood] enabled`; its counters are exported with these.
    pub(crate) flood: Option<Arc<FloodGuard>>,
    /// The engines' counters, registered after [`crate::Server::bind`]; shared by every clone.
    pub(crate) engine: Arc<EngineCounters>,
    /// The metric families other areas export ([`Stats::export_collector`]); read by a scrape.
    pub(crate) families: Arc<std::sync::RwLock<prometheus_client::registry::Registry>>,
}

/// Counters kept by herald-core, which the engines update and the scrape reads.
#[derive(Debug, Default)]
pub(crate) struct EngineCounters {
    pub(crate) auth: OnceLock<Arc<AuthStats>>,
    pub(crate) registrar: OnceLock<Arc<RegistrarStats>>,
    pub(crate) responses: OnceLock<Arc<ResponseStats>>,
}

impl Stats {
    pub(crate) fn new(workers: usize, flood: Option<Arc<FloodGuard>>) -> Stats {
        Stats {
            workers: (0..workers).map(|_| WorkerStats::default()).collect(),
            tcp_open: Arc::new(AtomicUsize::new(0)),
            metrics: (0..workers).map(|_| WorkerMetrics::default()).collect(),
            shedding: Arc::new(AtomicUsize::new(0)),
            flood,
            engine: Arc::default(),
            families: Arc::default(),
        }
    }

    /// Exports the authenticator's counters (`Authenticator::shared_stats`) with these: on the
    /// metrics endpoint as `herald_auth_*` and in [`StatsSnapshot::auth`]. Every clone of this
    /// `Stats` (the one [`crate::Server::run`] uses included) sees them. Only the first call
    /// counts (one authenticator per server); it returns whether this one did.
    pub fn export_auth(&self, auth: Arc<AuthStats>) -> bool {
        self.engine.auth.set(auth).is_ok()
    }

    /// Exports the registrar's counters (`Registrar::shared_stats`, shared by the clones the
    /// engine shards hold) as `herald_registrar_*` and in [`StatsSnapshot::registrar`]. Only
    /// the first call counts; it returns whether this one did.
    pub fn export_registrar(&self, registrar: Arc<RegistrarStats>) -> bool {
        self.engine.registrar.set(registrar).is_ok()
    }

    /// Exports the engines' own responses by status (`Engine::with_response_stats`, one table
    /// shared by the shards) as `herald_local_responses_total{status}` and in
    /// [`StatsSnapshot::local_responses`]. Only the first call counts; it returns whether this
    /// one did.
    pub fn export_responses(&self, responses: Arc<ResponseStats>) -> bool {
        self.engine.responses.set(responses).is_ok()
    }

    pub fn snapshot(&self) -> StatsSnapshot {
        let mut s = StatsSnapshot::default();
        for w in self.workers.iter() {
            w.add_to(&mut s);
        }
        s.tcp_open = self.tcp_open.load(Ordering::Relaxed) as u64;
        s.auth = self.engine.auth.get().map(|a| a.snapshot());
        s.registrar = self.engine.registrar.get().map(|r| r.snapshot());
        s.local_responses = self.engine.responses.get().map(|r| r.snapshot()).unwrap_or_default();
        s
    }
}

/// `stats.udp_received.bump()`
pub(crate) trait Bump {
    fn bump(&self);
}

impl Bump for AtomicU64 {
    #[inline]
    fn bump(&self) {
        self.fetch_add(1, Ordering::Relaxed);
    }
}
