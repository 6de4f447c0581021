//! One worker: a thread with a current-thread tokio runtime that owns UDP sockets, TCP listeners
//! (and the connections they accept), an inbox for the messages its connections read, and a timer
//! for the engine shards it services.
//!
//! The loop waits until something is ready - a socket readable, inbox items, control messages,
//! the timer - and handles all of it before flushing queued UDP output with sendmmsg. A message is
//! handled right here, under the lock of its engine shard (module `shards`), and its outputs are
//! carried out by this worker: UDP from its own socket, TCP through the connection registry. The
//! only locks on this path are the shard's (held for the `handle` call alone) and a TCP
//! connection's write queue.
//!
//! Timers: shard `s` is serviced by worker `s % workers`, every [`TICK`]: the worker runs
//! `handle_timeouts` on those of its shards whose cached deadline has passed. Any worker may set a
//! timer on any shard (by handling a message of that shard), so the owner cannot sleep until the
//! deadlines it knows of; and a fixed tick also coalesces the many deadlines of a busy server (a
//! few per call) into at most 1/[`TICK`] wake-ups per second. A timer therefore fires up to
//! [`TICK`] late, which is small next to SIP's timers (T1 = 500 ms; only the zero-length timers
//! of reliable transports, which merely free state, are delayed relatively).

use crate::config::Config;
use crate::conn_limit::PerIp;
use crate::dns;
use crate::inbound::{self, Dropped, Inbound};
use crate::metrics::{BatchClock, DropTracker, MsgType, Wire, WorkerMetrics};
use crate::protect::{FloodGuard, OverloadDetector, Verdict};
use crate::shards::Shards;
use crate::stats::{Bump, Stats, WorkerStats};
use crate::tcp::{self, Registry};
use crate::tls::TlsContext;
use crate::udp::{self, Outgoing, Received, RecvBuffers, BATCH};
use bytes::Bytes;
use herald_core::{Input, Output, Peer, ResolveRequest, SipHandler, Target, Transport};
use herald_sip::Message;
use std::future::{poll_fn, Future};
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::Interest;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Sleep;

/// A message read by one of the worker's TCP connection tasks, queued for the worker's loop.
#[derive(Debug)]
pub(crate) struct Incoming {
    pub from: Peer,
    pub local: SocketAddr,
    pub msg: Message,
}

/// Control messages to a worker (unbounded: their number is bounded by outstanding lookups and
/// connection attempts, and by the two shutdown steps).
#[derive(Debug)]
pub(crate) enum Ctl {
    /// The answer to an `Output::Resolve` of engine shard `shard`.
    Resolved {
        shard: usize,
        token: u64,
        result: Result<Vec<Target>, String>,
    },
    /// Sending to `to` failed: tell the shard that asked, or every shard when it is not known
    /// (an outgoing TCP connection that other shards may have queued on too).
    TransportError {
        shard: Option<usize>,
        to: Peer,
    },
    /// Stop accepting connections (shutdown has begun).
    Drain,
    Stop,
}

/// What all workers share.
pub(crate) struct Shared {
    pub config: Config,
    pub limits: herald_sip::Limits,
    pub workers: usize,
    /// Per worker: the queue from its TCP connection tasks to its loop (same thread).
    pub inboxes: Vec<mpsc::Sender<Incoming>>,
    pub ctl: Vec<mpsc::UnboundedSender<Ctl>>,
    pub registry: Registry,
    /// Accepted TCP connections per remote address.
    pub per_ip: PerIp,
    /// The per-source guard (`[flood]`), checked for every request before its shard.
    pub flood: Option<Arc<FloodGuard>>,
    pub stats: Stats,
    pub draining: AtomicBool,
    pub next_conn: AtomicU64,
    /// Transports herald can send on, in preference order (for RFC 3263 choices).
    pub supported: Vec<Transport>,
    /// TLS acceptor, connector and learned names, when TLS is configured.
    pub tls: Option<Arc<TlsContext>>,
}

struct UdpSock {
    sock: UdpSocket,
    local: SocketAddr,
    queue: Vec<Outgoing>,
    drops: DropTracker,
}

/// Datagrams per socket per loop turn before the other sources get their turn.
const UDP_TURN: usize = 4 * BATCH;
/// Inbox messages per loop turn.
const INBOX_TURN: usize = 256;
/// How long a full UDP send buffer may hold the worker before the queued datagrams are dropped.
const SEND_STALL: Duration = Duration::from_millis(100);
/// How often a worker looks at its shards' deadlines.
const TICK: Duration = Duration::from_millis(10);

pub(crate) struct Worker<H> {
    id: usize,
    shared: Arc<Shared>,
    shards: Arc<Shards<H>>,
    /// The shards whose timers this worker services: `id`, `id + workers`, ...
    own: Vec<usize>,
    udp: Vec<UdpSock>,
    accept_tasks: Vec<JoinHandle<()>>,
    inbox: mpsc::Receiver<Incoming>,
    ctl_rx: mpsc::UnboundedReceiver<Ctl>,
    ctl_tx: mpsc::UnboundedSender<Ctl>,
    out: Vec<Output>,
    recv: RecvBuffers,
    received: Vec<Received>,
    inbox_buf: Vec<Incoming>,
    ctl_buf: Vec<Ctl>,
    udp_ready: Vec<usize>,
    /// The [`TICK`].
    timer: Pin<Box<Sleep>>,
    timer_fired: bool,
    resolver: Option<dns::Resolver>,
    /// `[metrics] listen` is set: time every message and count it by type.
    measure: bool,
    /// Kernel receive timestamps are on: metrics or overload control need them.
    stamps: bool,
    /// This worker's load, from its datagrams' socket-queue waits (`[overload]`).
    overload: OverloadDetector,
    /// What the shedding gauge was last told.
    shedding: bool,
    /// A datagram was observed since the last [`TICK`].
    observed: bool,
    /// Transactions held over all shards, sampled every [`TICK`] (`limits.max_transactions`).
    transactions: usize,
}

impl<H: SipHandler> Worker<H> {
    /// Must be called inside the worker's runtime (sockets register with its reactor).
    pub(crate) fn new(
        id: usize,
        shared: Arc<Shared>,
        shards: Arc<Shards<H>>,
        udp: Vec<std::net::UdpSocket>,
        tcp: Vec<(std::net::TcpListener, Transport)>,
        inbox: mpsc::Receiver<Incoming>,
        ctl_rx: mpsc::UnboundedReceiver<Ctl>,
    ) -> io::Result<Worker<H>> {
        let measure = shared.config.metrics.listen.is_some();
        let stamps = measure || shared.config.overload.enabled;
        let udp = udp
            .into_iter()
            .map(|s| {
                let local = s.local_addr()?;
                if stamps {
                    if let Err(e) = udp::enable_rx_metadata(s.as_raw_fd()) {
                        tracing::warn!(worker = id, %local, error = %e, "no kernel timestamps: queue wait not measured");
                    }
                }
                Ok(UdpSock { sock: UdpSocket::from_std(s)?, local, queue: Vec::new(), drops: DropTracker::default() })
            })
            .collect::<io::Result<Vec<_>>>()?;
        let mut accept_tasks = Vec::new();
        for (l, transport) in tcp {
            let l = tokio::net::TcpListener::from_std(l)?;
            accept_tasks.push(tokio::spawn(tcp::accept_loop(shared.clone(), id, l, transport)));
        }
        let slot = shared.limits.max_message_size.min(65_535) + 1;
        let ctl_tx = shared.ctl[id].clone();
        let own = (id..shards.len()).step_by(shared.workers).collect();
        Ok(Worker {
            id,
            shards,
            own,
            udp,
            accept_tasks,
            inbox,
            ctl_rx,
            ctl_tx,
            out: Vec::new(),
            recv: RecvBuffers::new(slot),
            received: Vec::with_capacity(BATCH),
            inbox_buf: Vec::with_capacity(INBOX_TURN),
            ctl_buf: Vec::new(),
            udp_ready: Vec::new(),
            timer: Box::pin(tokio::time::sleep(TICK)),
            timer_fired: false,
            resolver: None,
            measure,
            stamps,
            overload: OverloadDetector::new(shared.config.overload.settings()),
            shedding: false,
            observed: false,
            transactions: 0,
            shared,
        })
    }

    fn stats(&self) -> &WorkerStats {
        &self.shared.stats.workers[self.id]
    }

    fn metrics(&self) -> &WorkerMetrics {
        &self.shared.stats.metrics[self.id]
    }

    pub(crate) async fn run(mut self) {
        let mut turns: u32 = 0;
        loop {
            poll_fn(|cx| self.poll_ready(cx)).await;
            if std::mem::take(&mut self.timer_fired) {
                self.run_timers();
            }
            let ready = std::mem::take(&mut self.udp_ready);
            for &i in &ready {
                self.read_udp(i);
            }
            self.udp_ready = ready;
            self.udp_ready.clear();
            let mut items = std::mem::take(&mut self.inbox_buf);
            let mut clock = (self.measure && !items.is_empty()).then(BatchClock::start);
            for it in items.drain(..) {
                let kind = clock.is_some().then(|| MsgType::of(&it.msg));
                self.route(it.from, it.local, it.msg);
                if let (Some(c), Some(kind)) = (clock.as_mut(), kind) {
                    // Stream messages carry no kernel timestamp: service time only.
                    let (service, _) = c.lap(None);
                    self.metrics().handled(kind, Wire::Tcp, service, None);
                }
            }
            self.inbox_buf = items;
            let mut stop = false;
            let mut ctl = std::mem::take(&mut self.ctl_buf);
            for c in ctl.drain(..) {
                match c {
                    Ctl::Resolved { shard, token, result } => self.handle(shard, Input::Resolved { token, result }),
                    Ctl::TransportError { shard: Some(shard), to } => {
                        self.handle(shard, Input::TransportError { to });
                    }
                    Ctl::TransportError { shard: None, to } => {
                        for shard in 0..self.shards.len() {
                            self.handle(shard, Input::TransportError { to });
                        }
                    }
                    Ctl::Drain => self.start_drain(),
                    Ctl::Stop => stop = true,
                }
            }
            self.ctl_buf = ctl;
            self.flush_udp().await;
            if stop {
                break;
            }
            turns += 1;
            if turns == 32 {
                turns = 0;
                // Let this thread's connection tasks run even under a constant UDP load.
                tokio::task::yield_now().await;
            }
        }
        for t in &self.accept_tasks {
            t.abort();
        }
        if self.shedding {
            self.shared.stats.shedding.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Ready when any source has something; records which.
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let mut any = false;
        for (i, u) in self.udp.iter().enumerate() {
            if u.sock.poll_recv_ready(cx).is_ready() {
                self.udp_ready.push(i);
                any = true;
            }
        }
        if let Poll::Ready(n) = self.inbox.poll_recv_many(cx, &mut self.inbox_buf, INBOX_TURN) {
            any |= n > 0;
        }
        if let Poll::Ready(n) = self.ctl_rx.poll_recv_many(cx, &mut self.ctl_buf, 64) {
            any |= n > 0;
        }
        if !self.timer_fired && self.timer.as_mut().poll(cx).is_ready() {
            self.timer_fired = true;
            any = true;
        }
        if any {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    /// Runs the timers of this worker's due shards (no lock is taken for the others), then
    /// waits for the next [`TICK`].
    fn run_timers(&mut self) {
        let now = Instant::now();
        for k in 0..self.own.len() {
            let shard = self.own[k];
            if self.shards.deadline(shard).is_some_and(|at| at <= now) {
                self.shards.handle_timeouts(shard, now, &mut self.out);
                self.dispatch(shard);
            }
        }
        self.timer.as_mut().reset(tokio::time::Instant::from_std(now + TICK));
        // A worker that read no datagram for a whole tick has no socket queue: that is a wait of
        // zero, so that shedding ends when UDP traffic stops (TCP still sees the inbox).
        if !std::mem::take(&mut self.observed) {
            self.overload.observe(Duration::ZERO);
            self.publish_shedding();
        }
        self.transactions = self.shards.transactions();
    }

    /// Feeds one datagram's socket-queue wait to the overload detector.
    fn observe(&mut self, wait_ns: u64) {
        self.observed = true;
        self.overload.observe(Duration::from_nanos(wait_ns));
        self.publish_shedding();
    }

    fn publish_shedding(&mut self) {
        let now = self.overload.shedding();
        if now == self.shedding {
            return;
        }
        self.shedding = now;
        let wait_ms = self.overload.smoothed_wait_us() / 1000.0;
        if now {
            self.shared.stats.shedding.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(worker = self.id, wait_ms, "overloaded: new requests get 503");
        } else {
            self.shared.stats.shedding.fetch_sub(1, Ordering::Relaxed);
            tracing::info!(worker = self.id, wait_ms, "no longer overloaded");
        }
    }

    /// Whether new requests are refused now: the socket queue wait says so, or (TCP's signal,
    /// which has no kernel timestamps) the inbox from this worker's connections is over half full.
    fn overloaded(&self) -> bool {
        self.shedding
            || (self.shared.config.overload.enabled && self.inbox.len() > self.shared.config.limits.inbox_capacity / 2)
    }

    /// Hands `input` to engine shard `shard` (under its lock) and carries out what it asks for.
    fn handle(&mut self, shard: usize, input: Input) {
        self.shards.handle(shard, input, &mut self.out);
        self.dispatch(shard);
    }

    /// Reads and routes up to [`UDP_TURN`] datagrams from socket `i`.
    fn read_udp(&mut self, i: usize) {
        let mut done = 0;
        while done < UDP_TURN {
            let Worker { udp, recv, received, .. } = self;
            let sock = &udp[i].sock;
            let fd = sock.as_raw_fd();
            match sock.try_io(Interest::READABLE, || udp::recv_batch(fd, recv, received)) {
                Ok(n) => {
                    done += n;
                    let mut clock = self.stamps.then(BatchClock::start);
                    let mut batch = std::mem::take(&mut self.received);
                    for d in batch.drain(..) {
                        self.on_datagram(i, d, clock.as_mut());
                    }
                    self.received = batch;
                    if n < BATCH {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    tracing::debug!(worker = self.id, error = %e, "UDP receive error");
                    break;
                }
            }
        }
    }

    /// `clock`: the batch's clock when measuring; the datagram's service time ends here.
    fn on_datagram(&mut self, i: usize, d: Received, clock: Option<&mut BatchClock>) {
        self.stats().udp_received.bump();
        if let Some(n) = d.drops {
            let new = self.udp[i].drops.advance(n);
            if new > 0 {
                self.metrics().dropped(new);
            }
        }
        let sock_local = self.udp[i].local;
        let local = d.dst.map_or(sock_local, |ip| SocketAddr::new(ip, sock_local.port()));
        match inbound::classify(d.bytes, &self.shared.limits, herald_sip::Transport::Datagram, d.truncated) {
            Inbound::Message(msg) => {
                // The wait decides this very message's fate, so it is fed before routing.
                if let Some(wait) = clock.as_deref().and_then(|c| c.wait(d.kernel_ns)) {
                    self.observe(wait);
                }
                let kind = self.measure.then(|| MsgType::of(&msg));
                self.route(Peer::udp(d.src), local, msg);
                if let Some(c) = clock {
                    let (service, wait) = c.lap(d.kernel_ns);
                    if let Some(kind) = kind {
                        self.metrics().handled(kind, Wire::Udp, service, wait);
                    }
                }
                return;
            }
            Inbound::Answer { bytes, .. } => {
                // RFC 3261 §18.2.2 would use the Via; a malformed request's Via is not trusted,
                // so the answer goes back where the datagram came from (as rport does).
                self.stats().malformed_answered.bump();
                if self.measure {
                    self.metrics().sent(MsgType::of_bytes(&bytes), Wire::Udp);
                }
                self.udp[i].queue.push(Outgoing { to: d.src, bytes: bytes.freeze(), origin: None });
            }
            Inbound::Drop(Dropped::KeepAlive) => {}
            Inbound::Drop(Dropped::Response) => self.stats().malformed_responses_dropped.bump(),
            Inbound::Drop(Dropped::Request) => self.stats().malformed_dropped.bump(),
        }
        // Not a message of any type: its time is nobody's service time.
        if let Some(c) = clock {
            c.lap(None);
        }
    }

    /// Handles a message in its engine shard. One peer's messages reach one worker (the
    /// reuseport hash for UDP, the owning worker for a TCP connection) and are handled here in
    /// arrival order, so each dialog keeps its per-direction order.
    ///
    /// Before that, the runtime's protections (responses are never limited: they belong to
    /// transactions herald started): a banned source's requests are dropped unanswered; new
    /// requests (not ACK, CANCEL or in-dialog: those finish what is running, seed 001) are
    /// dropped while draining, and answered 503 while this worker is overloaded or the
    /// transaction limit is reached.
    fn route(&mut self, from: Peer, local: SocketAddr, msg: Message) {
        if msg.is_request() {
            if let Some(flood) = &self.shared.flood {
                if flood.check_request(from.addr.ip(), Instant::now()) == Verdict::Drop {
                    return; // counted by the guard
                }
            }
            let draining = self.shared.draining.load(Ordering::Relaxed);
            let overloaded = self.overloaded();
            let full = self.transactions >= self.shared.config.limits.max_transactions;
            if (draining || overloaded || full) && inbound::is_new_request(&msg) {
                if draining {
                    self.stats().drain_dropped.bump();
                    return;
                }
                if overloaded {
                    self.stats().overload_rejected.bump();
                } else {
                    self.stats().transactions_rejected.bump();
                }
                let bytes = inbound::busy(&msg, self.shared.config.overload.retry_after_s);
                self.send_direct(from, bytes);
                return;
            }
            if inbound::is_ack_of_busy(&msg) {
                self.stats().stateless_acks_absorbed.bump();
                return;
            }
        }
        let shard = inbound::shard(&msg, &from.addr, self.shards.len());
        self.handle(shard, Input::Message { from, local, msg });
    }

    /// Carries out what engine shard `shard` asked for.
    fn dispatch(&mut self, shard: usize) {
        let mut out = std::mem::take(&mut self.out);
        for o in out.drain(..) {
            match o {
                Output::Send { to, bytes } => match to.transport {
                    Transport::Udp => match self.udp.iter().position(|u| u.local.is_ipv4() == to.addr.is_ipv4()) {
                        Some(i) => {
                            if self.measure {
                                self.metrics().sent(MsgType::of_bytes(&bytes), Wire::Udp);
                            }
                            self.udp[i].queue.push(Outgoing { to: to.addr, bytes, origin: Some(shard) })
                        }
                        None => self.transport_error(Some(shard), to),
                    },
                    Transport::Tcp | Transport::Tls if self.can_stream(to.transport) => {
                        let kind = self.measure.then(|| MsgType::of_bytes(&bytes));
                        if !tcp::send(&self.shared, self.id, &self.ctl_tx, to, bytes) {
                            self.transport_error(Some(shard), to);
                        } else if let Some(kind) = kind {
                            self.metrics().sent(kind, Wire::Tcp);
                        }
                    }
                    // WebSocket is not implemented yet; TLS without [tls] has no connector.
                    Transport::Tcp | Transport::Tls | Transport::Ws | Transport::Wss => {
                        self.transport_error(Some(shard), to)
                    }
                },
                Output::Resolve { token, request } => self.resolve(shard, token, request),
            }
        }
        self.out = out;
    }

    /// Sends a response the runtime made itself (no shard to tell if it fails). It goes back to
    /// where the request came from, as rport (RFC 3581) would have it: the request's Via is not
    /// worth a DNS lookup for a stateless refusal.
    fn send_direct(&mut self, to: Peer, bytes: Bytes) {
        let kind = self.measure.then(|| MsgType::of_bytes(&bytes));
        let sent = match to.transport {
            Transport::Udp => match self.udp.iter().position(|u| u.local.is_ipv4() == to.addr.is_ipv4()) {
                Some(i) => {
                    self.udp[i].queue.push(Outgoing { to: to.addr, bytes, origin: None });
                    Some(Wire::Udp)
                }
                None => None,
            },
            Transport::Tcp | Transport::Tls if self.can_stream(to.transport) => {
                tcp::send(&self.shared, self.id, &self.ctl_tx, to, bytes).then_some(Wire::Tcp)
            }
            Transport::Tcp | Transport::Tls | Transport::Ws | Transport::Wss => None,
        };
        match (sent, kind) {
            (Some(wire), Some(kind)) => self.metrics().sent(kind, wire),
            (Some(_), None) => {}
            (None, _) => self.transport_error(None, to),
        }
    }

    /// Whether stream output on `transport` can be carried out (TLS needs `[tls]`).
    fn can_stream(&self, transport: Transport) -> bool {
        transport == Transport::Tcp || (transport == Transport::Tls && self.shared.tls.is_some())
    }

    /// Reported to the shard (`None`: the runtime's own datagram, nobody to tell) on the next
    /// loop turn (never re-entrantly).
    fn transport_error(&mut self, shard: Option<usize>, to: Peer) {
        self.stats().send_errors.bump();
        if shard.is_some() {
            let _ = self.ctl_tx.send(Ctl::TransportError { shard, to });
        }
    }

    /// Looks `request` up in a task of this worker; the answer goes back to `shard`.
    fn resolve(&mut self, shard: usize, token: u64, request: ResolveRequest) {
        let supported = self.shared.supported.clone();
        let resolver = self.resolver.get_or_insert_with(|| dns::Resolver::system(supported)).clone();
        let tx = self.ctl_tx.clone();
        let tls = self.shared.tls.clone();
        tokio::spawn(async move {
            let result = resolver.resolve(&request).await;
            // RFC 5922 §7.1: a TLS next hop must prove the name it was looked up by.
            if let (Some(tls), Ok(targets)) = (&tls, &result) {
                tls.learn(&request.host, targets);
            }
            let _ = tx.send(Ctl::Resolved { shard, token, result });
        });
    }

    /// Sends every queued datagram, batched with sendmmsg.
    async fn flush_udp(&mut self) {
        for i in 0..self.udp.len() {
            if self.udp[i].queue.is_empty() {
                continue;
            }
            let queue = std::mem::take(&mut self.udp[i].queue);
            let mut at = 0;
            while at < queue.len() {
                let sock = &self.udp[i].sock;
                let fd = sock.as_raw_fd();
                let r = sock.try_io(Interest::WRITABLE, || match udp::send_batch(fd, &queue[at..]) {
                    (0, Some(e)) => Err(e),
                    (n, e) => Ok((n, e)),
                });
                let failed = match r {
                    Ok((n, e)) => {
                        at += n;
                        self.stats().udp_sent.fetch_add(n as u64, Ordering::Relaxed);
                        e
                    }
                    Err(e) => Some(e),
                };
                let Some(e) = failed else { continue };
                if e.kind() == io::ErrorKind::WouldBlock {
                    if tokio::time::timeout(SEND_STALL, self.udp[i].sock.writable()).await.is_err() {
                        tracing::warn!(worker = self.id, dropped = queue.len() - at, "UDP send buffer full");
                        // One report per shard and destination, however many datagrams.
                        let mut told = std::collections::HashSet::new();
                        for o in &queue[at..] {
                            if told.insert((o.origin, o.to)) {
                                self.transport_error(o.origin, Peer::udp(o.to));
                            } else {
                                self.stats().send_errors.bump();
                            }
                        }
                        break;
                    }
                } else {
                    tracing::debug!(worker = self.id, to = %queue[at].to, error = %e, "UDP send failed");
                    self.transport_error(queue[at].origin, Peer::udp(queue[at].to));
                    at += 1;
                }
            }
            let mut queue = queue;
            queue.clear();
            if self.udp[i].queue.is_empty() {
                self.udp[i].queue = queue; // keep the allocation
            }
        }
    }

    fn start_drain(&mut self) {
        // Refuse new connections: the kernel resets what reaches a closed listener.
        for t in self.accept_tasks.drain(..) {
            t.abort();
        }
        tracing::debug!(worker = self.id, "draining");
    }
}
