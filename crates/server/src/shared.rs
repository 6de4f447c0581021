//! What the threads of the runtime share: [`Shared`] (every worker) and [`WorkerCommon`] (the
//! threads of one worker).

use crate::config::Config;
use crate::conn_limit::PerIp;
use crate::conns::Registry;
use crate::dns;
use crate::pings::PingRouter;
use crate::protect::FloodGuard;
use crate::runtime::{Ctl, InboxMessage};
use crate::source_budget::SourceBudgets;
use crate::stats::Stats;
use crate::tls::TlsContext;
use herald_core::Transport;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, OnceLock};
use tokio::sync::mpsc;

/// What all workers share.
pub(crate) struct Shared {
    pub config: Config,
    pub limits: herald_sip::Limits,
    pub workers: usize,
    /// Per worker: the queue to its loop from its TCP connection tasks (same thread) and from
    /// busy UDP receivers of every worker (messages of shards it owns).
    pub inboxes: Vec<mpsc::Sender<InboxMessage>>,
    pub ctl: Vec<mpsc::UnboundedSender<Ctl>>,
    pub registry: Registry,
    /// Accepted TCP connections per remote address.
    pub per_ip: PerIp,
    /// The per-source guard (`[flood]`), checked for every request before its shard.
    pub flood: Option<Arc<FloodGuard>>,
    /// Per-source budgets of held transactions and bytes (`limits.*_per_source`).
    pub budgets: SourceBudgets,
    pub stats: Stats,
    pub draining: AtomicBool,
    /// Set before the workers are told to stop: UDP receivers end within a [`crate::runtime::TICK`].
    pub stopped: AtomicBool,
    /// Transports herald can send on, in preference order (for RFC 3263 choices).
    pub supported: Vec<Transport>,
    /// TLS acceptor, connector and learned names, when TLS is configured.
    pub tls: Option<Arc<TlsContext>>,
    /// Where the outcomes of herald's own OPTIONS go (module `pings`).
    pub pings: Arc<PingRouter>,
    /// The main thread's runtime, the one with tokio's time driver: DNS lookups run there
    /// (the resolver's timeouts are tokio timers, which the worker runtimes, built without the
    /// driver, cannot serve; module `local_timers`).
    pub main_rt: tokio::runtime::Handle,
}

/// What a worker's threads share besides [`Shared`].
pub(crate) struct WorkerCommon {
    pub id: usize,
    /// The worker's UDP sockets (blocking mode: the receivers block in recvmmsg; every send
    /// passes MSG_DONTWAIT).
    pub udp: Vec<Arc<UdpSocket>>,
    pub udp_local: Vec<SocketAddr>,
    pub ctl_tx: mpsc::UnboundedSender<Ctl>,
    /// The worker's tokio runtime (I/O only): connects run as its tasks.
    pub rt: tokio::runtime::Handle,
    /// One resolver (one DNS cache) per worker, made on first use.
    pub resolver: OnceLock<dns::Resolver>,
    /// UDP receivers of this worker shedding new requests now (`[overload]`).
    pub shedding: AtomicUsize,
    /// Transactions held over all shards, sampled at most once a tick by the threads that admit
    /// messages (`shards::LoadGauges`; `limits.max_transactions`).
    pub transactions: AtomicUsize,
    /// Bytes of messages held over all shards, sampled like `transactions` (`limits.max_held_bytes`).
    pub held_bytes: AtomicUsize,
}
