//! Starting the workers, waiting for shutdown, draining, joining.

use crate::admin::{self, AdminApi, AdminCounters};
use crate::bind::{self, BoundAddr, WorkerSockets};
use crate::config::{Config, ListenTransport};
use crate::conn_limit::PerIp;
use crate::conns::Registry;
use crate::endpoint;
use crate::error::ServerError;
use crate::protect::FloodGuard;
use crate::runtime::Ctl;
use crate::shards::{shard_count, Shards};
use crate::shared::Shared;
use crate::source_budget::SourceBudgets;
use crate::stats::Stats;
use crate::tls::TlsContext;
use crate::worker::Worker;
use herald_core::{SipHandler, Transport};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// A bound, not yet running server. Binding first lets a caller learn the real ports (config port
/// 0) and read [`Stats`] before and while [`Server::run`] runs.
pub struct Server {
    config: Config,
    workers: usize,
    sockets: Vec<WorkerSockets>,
    bound: Vec<BoundAddr>,
    stats: Stats,
    /// The metrics endpoint's listener, when `[metrics] listen` is set.
    metrics: Option<std::net::TcpListener>,
    /// Certificates and verifiers, when herald listens on TLS or `[tls]` names a certificate.
    tls: Option<Arc<TlsContext>>,
    /// The admin endpoint's listener (`[admin] listen`), and what it serves ([`Server::with_admin`]).
    admin: (Option<std::net::TcpListener>, Option<AdminApi>, Arc<AdminCounters>),
    /// Where the engines' gateway sets are published, probed while running ([`Server::with_gateways`]).
    gateways: Option<(Arc<herald_core::engine::ConfigUpdates>, crate::gateways::ProbingSettings)>,
    /// The location store whose NATed UDP bindings get keep-alives, and the flows registered
    /// elsewhere through herald ([`Server::with_nat_keepalives`]).
    nat_store: Option<(Arc<herald_core::registrar::Location>, Arc<herald_core::nat::EdgeFlows>)>,
    /// The location database ([`Server::with_durable_location`]).
    location: Option<crate::location::DurableLocation>,
}

impl Server {
    /// Creates every socket (`workers` × listen entries × transports, SO_REUSEPORT).
    pub fn bind(config: Config) -> Result<Server, ServerError> {
        let workers = config.server.effective_workers();
        let (sockets, bound) = bind::bind_all(&config, workers)?;
        for b in &bound {
            tracing::info!(transport = %b.transport, addr = %b.addr, workers, "listening");
        }
        let metrics = match config.metrics.listen {
            Some(addr) => {
                let l = endpoint::bind(addr).map_err(|source| ServerError::MetricsBind { addr, source })?;
                tracing::info!(addr = %l.local_addr().unwrap_or(addr), "metrics endpoint: GET /metrics");
                Some(l)
            }
            None => None,
        };
        let admin = (admin::bind(&config.admin)?, None, Arc::default());
        let flood = config.flood.enabled.then(|| {
            // The other nodes of a shared location forward their callers' requests here at any rate.
            let mut settings = config.flood.settings();
            settings.trusted.extend(config.location.cluster_nodes());
            Arc::new(FloodGuard::new(settings, std::time::Instant::now()))
        });
        let tls_listener = bound.iter().any(|b| matches!(b.transport, Transport::Tls | Transport::Wss));
        config
            .tls
            .validate(tls_listener)
            .map_err(|(key, message)| ServerError::Tls(format!("[tls] {key}: {message}")))?;
        let tls = if tls_listener || config.tls.certificate.is_some() {
            Some(Arc::new(TlsContext::new(&config.tls).map_err(ServerError::Tls)?))
        } else {
            None
        };
        Ok(Server {
            config,
            workers,
            sockets,
            bound,
            stats: Stats::new(workers, flood),
            metrics,
            tls,
            gateways: None,
            admin,
            nat_store: None,
            location: None,
        })
    }

    /// The per-source guard (`[flood]`), shared by the workers; `None` when disabled. Give it
    /// to the authenticator (`Authenticator::with_failure_sink`) so that failed
    /// authentications count against their source.
    pub fn flood_guard(&self) -> Option<Arc<FloodGuard>> {
        self.stats.flood.clone()
    }

    /// The metrics endpoint's address (port resolved), when configured.
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.metrics.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// The addresses listened on, ports resolved.
    pub fn local_addrs(&self) -> &[BoundAddr] {
        &self.bound
    }

    /// The first bound address for `transport` whose family is IPv6 (`v6`) or IPv4.
    pub fn local_addr(&self, transport: Transport, v6: bool) -> Option<std::net::SocketAddr> {
        self.bound.iter().find(|b| b.transport == transport && b.addr.is_ipv6() == v6).map(|b| b.addr)
    }

    pub fn workers(&self) -> usize {
        self.workers
    }

    /// How many engine shards (handlers) [`Server::run`] creates.
    pub fn shards(&self) -> usize {
        shard_count(self.workers)
    }

    /// The engines' configuration slot, whose gateway sets (`EngineConfig::gateways`, replaced
    /// by a reload) [`Server::run`] probes as `settings` (`[[gateway_set]]`, also replaced by a
    /// reload) say and the metrics endpoint shows.
    pub fn with_gateways(
        &mut self,
        updates: Arc<herald_core::engine::ConfigUpdates>,
        settings: crate::gateways::ProbingSettings,
    ) {
        let latest = updates.clone();
        self.stats.export_collector(crate::gateways::GatewayMetrics::new(move || latest.latest().gateways.clone()));
        self.gateways = Some((updates, settings));
    }

    /// The location store the engines register into: [`Server::run`] sends keep-alives to its
    /// UDP bindings behind NAT as `[nat]` says (`crate::nat`), and to the flows of NATed phones
    /// it registered with other registrars as their edge proxy (`Registrar::edge_flows`).
    pub fn with_nat_keepalives(
        &mut self,
        store: Arc<herald_core::registrar::Location>,
        edge: Arc<herald_core::nat::EdgeFlows>,
    ) {
        self.nat_store = Some((store, edge));
    }

    /// The location database (`[location]`, [`crate::location::open`]): its commits wake the
    /// workers (write-through answers), its metrics are exported, and it is written one last
    /// time when [`Server::run`] returns.
    pub fn with_durable_location(&mut self, location: crate::location::DurableLocation) {
        location.export(&self.stats);
        self.location = Some(location);
    }

    /// What the admin API (`[admin]`, `herald ctl`) and SIGHUP's reload work on. Without it, the
    /// endpoint (when configured) serves the runtime's own view only: stats and flood bans.
    pub fn with_admin(&mut self, api: AdminApi) {
        self.admin.1 = Some(api);
    }

    /// The admin endpoint's address (port resolved), when it listens.
    pub fn admin_addr(&self) -> Option<std::net::SocketAddr> {
        self.admin.0.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// The live counters (valid before, during and after [`Server::run`]).
    pub fn stats(&self) -> Stats {
        self.stats.clone()
    }

    /// Runs until `shutdown` completes, then drains: new requests are dropped (responses, ACK,
    /// CANCEL and in-dialog requests still flow), listeners close, and the workers stop when every
    /// handler reports no active transaction or `server.drain_timeout_s` has passed.
    ///
    /// `make_handler(i)` is called once per engine shard `i` (0 ≤ i < [`Server::shards`]), on
    /// the calling thread, before any worker starts. Shard `i`'s handler then runs on any worker,
    /// one call at a time; an `Input::Resolved` goes back to the shard whose `Output::Resolve`
    /// it answers.
    ///
    /// Why drop rather than answer 503: the runtime cannot tell a new request from the
    /// retransmission of one whose transaction is still running; a 503 to the latter would end a
    /// transaction that was about to succeed. A dropped new request times out at its sender, which
    /// then fails over (RFC 3263 §4.3) - the outcome of a server that is going away.
    pub fn run<H, F>(self, make_handler: F, shutdown: impl Future<Output = ()>) -> Result<(), ServerError>
    where
        H: SipHandler,
        F: Fn(usize) -> H + Send + Sync + 'static,
    {
        // Before the threads start: a UDP receiver allocates what a transaction keeps, the
        // worker's timers free it, and mimalloc's default makes each such free into a full page
        // a slow one (see the function).
        herald_sys::keep_full_pages();
        let n = self.workers;
        let shards = Arc::new(Shards::new(shard_count(n), n, &make_handler));
        let mut inbox_rx = Vec::with_capacity(n);
        let mut inboxes = Vec::with_capacity(n);
        let mut ctl_rx = Vec::with_capacity(n);
        let mut ctl = Vec::with_capacity(n);
        for _ in 0..n {
            let (tx, rx) = mpsc::channel(self.config.limits.inbox_capacity);
            inboxes.push(tx);
            inbox_rx.push(rx);
            let (tx, rx) = mpsc::unbounded_channel();
            ctl.push(tx);
            ctl_rx.push(rx);
        }
        let mut supported = Vec::new();
        for t in [ListenTransport::Udp, ListenTransport::Tcp, ListenTransport::Tls] {
            if self.config.listen.iter().any(|l| l.transports.contains(&t)) {
                supported.push(t.to_transport());
            }
        }
        let drain_timeout = Duration::from_secs(self.config.server.drain_timeout_s);
        // This thread's runtime keeps tokio's time driver (the workers' do without, module
        // `local_timers`): the endpoints, probes, keep-alives and DNS lookups run on it.
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(ServerError::Runtime)?;
        let shared = Arc::new(Shared {
            limits: self.config.limits.sip(),
            budgets: SourceBudgets::for_config(&self.config),
            config: self.config,
            workers: n,
            inboxes,
            ctl,
            registry: Registry::new(),
            per_ip: PerIp::new(),
            flood: self.stats.flood.clone(),
            stats: self.stats,
            draining: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            supported,
            tls: self.tls,
            pings: Arc::default(),
            main_rt: rt.handle().clone(),
        });
        if let Some(l) = &self.location {
            l.wake_on_commit(shared.ctl.clone());
        }
        let (exited_tx, mut exited_rx) = mpsc::unbounded_channel::<usize>();
        let mut threads = Vec::with_capacity(n);
        let nat_senders = crate::nat::senders(&self.sockets);
        for (id, ((sockets, inbox), ctl_rx)) in self.sockets.into_iter().zip(inbox_rx).zip(ctl_rx).enumerate() {
            let shared = shared.clone();
            let shards = shards.clone();
            let exited = ExitGuard { tx: exited_tx.clone(), id };
            let t = std::thread::Builder::new()
                .name(format!("herald-w{id}"))
                .spawn(move || {
                    let _exited = exited;
                    // I/O alone: tokio's time driver cost ~500 instructions a reactor turn; the
                    // worker's timers are its own (module `local_timers`).
                    let rt = tokio::runtime::Builder::new_current_thread().enable_io().build()?;
                    rt.block_on(async move {
                        let worker = Worker::new(id, shared, shards, sockets.udp, sockets.tcp, inbox, ctl_rx)?;
                        // A task, not the block_on future itself: a connection task handing it a
                        // message then queues it behind itself, where waking the block_on future
                        // made tokio poll its I/O driver (epoll_wait) first, once per message
                        // (about 10k instructions per TCP call, callgrind, issue 21).
                        match tokio::spawn(worker.run()).await {
                            Ok(outcome) => outcome,
                            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                            Err(e) => Err(std::io::Error::other(e)),
                        }
                    })
                })
                .map_err(ServerError::Runtime)?;
            threads.push(t);
        }
        drop(exited_tx);

        // The endpoint runs on this thread's runtime, off the workers, until `run` returns.
        if let Some(l) = self.metrics {
            rt.spawn(endpoint::serve(l, shared.stats.clone()));
        }
        // Gateway probes go from this thread's runtime through the shards; stopped at the drain.
        let prober = self.gateways.and_then(|(updates, settings)| {
            crate::gateways::start_probing(rt.handle(), updates, settings, &shared, shards.len())
        });
        let keepalives = self.nat_store.and_then(|(store, edge)| {
            crate::nat::start(rt.handle(), &shared.config.nat, store, edge, nat_senders, &shared, shards.len())
        });
        // The admin API and SIGHUP's reload, on this thread's runtime too.
        if self.admin.0.is_some() || self.admin.1.is_some() {
            let (listener, api, counters) = self.admin;
            counters.export(&shared.stats);
            let live = admin::Live::new(&shared, shards.clone());
            rt.spawn(admin::run(listener, shared.config.admin.clone(), api.unwrap_or_default(), live, counters));
        }
        let outcome = rt.block_on(async {
            tokio::pin!(shutdown);
            // Nothing periodic here: the allocator (mimalloc, see src/main.rs) returns freed
            // memory to the kernel by itself, where glibc's needed a malloc_trim every second.
            tokio::select! {
                _ = &mut shutdown => {}
                Some(id) = exited_rx.recv() => return Err(id),
            }
            drop(prober);
            drop(keepalives);
            tracing::info!(timeout_s = drain_timeout.as_secs(), "shutting down: draining transactions");
            shared.draining.store(true, Ordering::Relaxed);
            for tx in &shared.ctl {
                let _ = tx.send(Ctl::Drain);
            }
            let deadline = tokio::time::Instant::now() + drain_timeout;
            loop {
                let active = shards.active_transactions();
                if active == 0 {
                    break;
                }
                if tokio::time::Instant::now() >= deadline {
                    tracing::warn!(transactions = active, "drain timeout: stopping with transactions running");
                    break;
                }
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(10)) => {}
                    Some(id) = exited_rx.recv() => return Err(id),
                }
            }
            Ok(())
        });
        shared.stopped.store(true, Ordering::Relaxed);
        for tx in &shared.ctl {
            let _ = tx.send(Ctl::Stop);
        }
        let mut result = outcome.map_err(|worker| ServerError::WorkerFailed { worker, reason: "stopped early".into() });
        for (worker, t) in threads.into_iter().enumerate() {
            match t.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::error!(worker, error = %e, "worker failed");
                    result = Err(ServerError::WorkerFailed { worker, reason: e.to_string() });
                }
                Err(_) => result = Err(ServerError::WorkerFailed { worker, reason: "panicked".into() }),
            }
        }
        if result.is_ok() {
            tracing::info!(handler_panics = shards.panics(), "stopped");
        }
        // Writes what is still queued (write-back: the last interval's changes).
        drop(self.location);
        result
    }
}

/// Tells the main thread that a worker thread ended (normally, with an error, or by panic).
struct ExitGuard {
    tx: mpsc::UnboundedSender<usize>,
    id: usize,
}

impl Drop for ExitGuard {
    fn drop(&mut self) {
        let _ = self.tx.send(self.id);
    }
}

/// Completes on SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let term = signal(SignalKind::terminate());
    let int = signal(SignalKind::interrupt());
    match (term, int) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM"),
                _ = int.recv() => tracing::info!("SIGINT"),
            }
        }
        (Err(e), _) | (_, Err(e)) => {
            tracing::error!(error = %e, "cannot install signal handlers; stop with SIGKILL");
            std::future::pending::<()>().await
        }
    }
}
