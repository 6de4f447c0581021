//! herald-server: the runtime of `herald serve` (docs/design/serve.md). It owns the sockets,
//! threads and timers around the sans-IO engine of herald-core: configuration (`config`),
//! workers, UDP and stream transports (TCP, TLS), DNS (RFC 3263), protections, counters and the
//! metrics endpoint. The engine decides; this crate reads, hands over and sends.
//!
//! * One worker per core, each with its own SO_REUSEPORT UDP socket and TCP listener per listen
//!   address: a thread with a current-thread tokio runtime (stream connections, timers, DNS,
//!   control; module `worker`) and one thread per UDP socket blocked in recvmmsg (module
//!   `udp_receiver`).
//! * The [`SipHandler`](herald_core::SipHandler)s are `S` engine shards shared by all workers
//!   (`S` = 16 × workers, at least 64, a power of two), each behind its own mutex: a message
//!   belongs to shard `hash(Call-ID) % S`. The worker that reads a message handles it in that
//!   shard (the lock is held for the `handle` call only) and carries out the outputs itself. One
//!   peer's messages reach one worker (the reuseport hash by 4-tuple; a TCP connection's owner)
//!   and are handled in arrival order, so every dialog keeps its per-direction order.
//! * Timers: shard `s` is serviced by worker `s % workers`, which looks at its shards' cached
//!   deadlines every 10 ms (so a timer fires up to 10 ms late).
//! * Before a request reaches its shard ([`protect`], module `dispatch::admission`): a banned
//!   source's requests are dropped (`[flood]`); new requests get a stateless 503 while the
//!   worker is overloaded (`[overload]`) or a limit (`limits.max_transactions`,
//!   `max_held_bytes`, per-source budgets) is reached, and are dropped while draining.
//!
//! The path of a datagram: `udp_receiver::UdpReceiver::run` (recvmmsg) → `on_datagram` →
//! `ingress::receive` (`herald_core::inbound::classify`, counters, the answer to a malformed
//! request) → `Dispatcher::route` (`dispatch::admission::admit`: protections and shard) →
//! `Shards::handle` (the engine) → `Dispatcher::dispatch` → `Egress::send` (queued) →
//! `Egress::flush` (sendmmsg). Under load a receiver may hand the message to the shard's owner
//! instead (`dispatch::balance`).
//!
//! The path of a TCP message: `stream::listen::accept_loop` → `stream::task::run` with the
//! `Plain` codec (TLS: `TlsCodec`) → `serve` (the connection loop) → `Codec::read` →
//! `Framer::consume` → `ingress::receive` → the worker's inbox → `Worker::run` →
//! `Dispatcher::route` → `Shards::handle` → `Egress::send` → `stream::send` (the connection's
//! write queue, `conns::Conn::push`) → `serve` → `Codec::write` (writev).
//!
//! Entry point: [`Server`] (bind first, then [`Server::run`] until a shutdown future completes,
//! such as [`shutdown_signal`]; tests learn ports and read [`Stats`]).

// System calls std does not wrap live in herald-sys.
#![forbid(unsafe_code)]

pub mod admin;
mod bind;
mod clock_reading;
pub mod config;
mod conn_limit;
mod conns;
mod dispatch;
pub mod dns;
mod egress;
mod endpoint;
mod error;
pub mod gateways;
mod http;
mod ingress;
mod local_timers;
pub mod location;
pub mod location_redis;
mod metrics;
mod nat;
mod pem;
pub mod pings;
pub mod protect;
pub mod rfc3263;
mod runtime;
mod send_order;
mod server;
mod shard_timers;
mod shards;
mod shared;
mod source_budget;
mod source_route;
mod stats;
mod stream;
mod tls;
mod udp;
mod udp_receiver;
mod worker;

pub use bind::BoundAddr;
pub use config::{Config, ConfigError};
pub use error::ServerError;
pub use server::{shutdown_signal, Server};
pub use source_route::KernelRoutes;
pub use stats::{Stats, StatsSnapshot};

/// Installs the global tracing subscriber: `RUST_LOG` if set, else `level` (a level or a filter).
/// Does nothing if one is installed already.
pub fn init_logging(level: &str) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::builder().parse(level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi).try_init();
}
