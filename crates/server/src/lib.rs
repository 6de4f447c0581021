//! herald-server: the runtime of `herald serve` (docs/design/serve.md).
//!
//! * One worker per core, each with its own SO_REUSEPORT UDP socket and TCP listener per listen
//!   address: a thread with a current-thread tokio runtime (TCP, timers, DNS, control) and one
//!   thread per UDP socket blocked in recvmmsg (module `udp_receiver`).
//! * The [`SipHandler`]s are `S` engine shards shared by all workers (`S` = 16 × workers, at least
//!   64, a power of two), each behind its own mutex: a message belongs to shard
//!   `hash(Call-ID) % S`. The worker that reads a message handles it in that shard (the lock is
//!   held for the `handle` call only) and carries out the outputs itself. One peer's messages
//!   reach one worker (the reuseport hash by 4-tuple; a TCP connection's owner) and are handled in
//!   arrival order, so every dialog keeps its per-direction order. There is no handoff between
//!   threads and no central dispatcher.
//! * Timers: shard `s` is serviced by worker `s % workers`, which looks at its shards' cached
//!   deadlines every 10 ms (so a timer fires up to 10 ms late).
//! * TCP connections belong to the worker that accepted or opened them; any worker writes to one
//!   through its bounded write queue (module `tcp`).
//! * `Output::Resolve` runs RFC 3263 ([`rfc3263`], [`dns`]) in a task of the asking worker; the
//!   answer goes back to the asking shard.
//! * Before a request reaches its shard ([`protect`]): a banned source's requests are dropped
//!   (`[flood]`, one guard shared by all workers, also fed by the authenticator's failures); new
//!   requests get a stateless 503 while the worker is overloaded (`[overload]`, each worker
//!   judging its own socket-queue wait) or `limits.max_transactions` or `limits.max_held_bytes` is
//!   reached.
//!
//! Entry points: [`run`] (signals), [`run_with_shutdown`] (any future), [`Server`] (bind first,
//! then run: tests learn ports and read [`Stats`]), [`serve_main`] (what `herald serve` calls).

// System calls std does not wrap live in herald-sys.
#![forbid(unsafe_code)]

mod bind;
pub mod config;
mod conn_limit;
mod conns;
mod dispatch;
pub mod dns;
mod egress;
mod endpoint;
mod ingress;
mod metrics;
mod pem;
pub mod protect;
pub mod rfc3263;
mod runtime;
mod server;
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
pub use server::{shutdown_signal, Server};
pub use source_route::KernelRoutes;
pub use stats::{Stats, StatsSnapshot};

use herald_core::SipHandler;
use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;

/// Why the server could not start or stopped abnormally.
#[derive(Debug)]
pub enum ServerError {
    Config(ConfigError),
    /// A listen address could not be bound.
    Bind {
        addr: SocketAddr,
        transport: herald_core::Transport,
        source: std::io::Error,
    },
    /// A thread or runtime could not be created.
    Runtime(std::io::Error),
    /// The metrics endpoint (`[metrics] listen`) could not be bound.
    MetricsBind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    /// `[tls]` material could not be used (the message names the file).
    Tls(String),
    /// A worker stopped with an error or panicked.
    WorkerFailed {
        worker: usize,
        reason: String,
    },
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerError::Config(e) => e.fmt(f),
            ServerError::Bind { addr, transport, source } => write!(f, "cannot listen on {transport} {addr}: {source}"),
            ServerError::Runtime(e) => write!(f, "cannot start worker threads: {e}"),
            ServerError::MetricsBind { addr, source } => write!(f, "cannot listen for metrics on {addr}: {source}"),
            ServerError::Tls(e) => write!(f, "TLS: {e}"),
            ServerError::WorkerFailed { worker, reason } => write!(f, "worker {worker} failed: {reason}"),
        }
    }
}

impl std::error::Error for ServerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ServerError::Config(e) => Some(e),
            ServerError::Bind { source, .. }
            | ServerError::Runtime(source)
            | ServerError::MetricsBind { source, .. } => Some(source),
            ServerError::Tls(_) | ServerError::WorkerFailed { .. } => None,
        }
    }
}

impl From<ConfigError> for ServerError {
    fn from(e: ConfigError) -> Self {
        ServerError::Config(e)
    }
}

/// Runs herald until SIGTERM or SIGINT, then drains and returns `Ok`.
/// `make_handler(i)` builds engine shard `i`'s handler (see [`Server::run`]).
pub fn run<H, F>(config: Config, make_handler: F) -> Result<(), ServerError>
where
    H: SipHandler,
    F: Fn(usize) -> H + Send + Sync + 'static,
{
    Server::bind(config)?.run(make_handler, shutdown_signal())
}

/// [`run`] with any future in place of the signals.
pub fn run_with_shutdown<H, F>(
    config: Config,
    make_handler: F,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServerError>
where
    H: SipHandler,
    F: Fn(usize) -> H + Send + Sync + 'static,
{
    Server::bind(config)?.run(make_handler, shutdown)
}

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

/// Everything `herald serve [--config FILE]` does, as an exit status: 0 after a clean shutdown,
/// 1 when the server fails, 2 when the configuration is wrong (printed as
/// `FILE:LINE: key 'a.b': message`).
pub fn serve_main<H, F>(config_path: Option<&Path>, make_handler: F) -> u8
where
    H: SipHandler,
    F: Fn(usize) -> H + Send + Sync + 'static,
{
    serve_main_with(config_path, make_handler, shutdown_signal())
}

/// [`serve_main`] with any shutdown future.
pub fn serve_main_with<H, F>(config_path: Option<&Path>, make_handler: F, shutdown: impl Future<Output = ()>) -> u8
where
    H: SipHandler,
    F: Fn(usize) -> H + Send + Sync + 'static,
{
    let config = match Config::load_or_default(config_path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return 2;
        }
    };
    init_logging(&config.log.level);
    match run_with_shutdown(config, make_handler, shutdown) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("herald: {e}");
            1
        }
    }
}
