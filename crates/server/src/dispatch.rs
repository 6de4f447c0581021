//! What both threads of a worker do with a message once it is read: the runtime's protections,
//! the engine shard's `handle`, and carrying out its outputs (UDP sends queued for sendmmsg, TCP
//! sends through the connection registry, name lookups as tasks of the worker's runtime).
//!
//! A worker has a UDP receiver thread per UDP socket (module `udp_receiver`: blocking recvmmsg,
//! no event loop) and a tokio thread for TCP, control messages and timers (module `worker`).
//! Each owns a [`Dispatcher`]; the two share the worker's sockets, resolver and load state.
//! Both run inside the worker's runtime context (the receivers enter it), so outputs that need a
//! task - a TCP connect, a DNS lookup - start one on the worker's runtime.
//!
//! # Balancing
//!
//! SO_REUSEPORT spreads UDP over the workers' sockets by the hash of the source address, so
//! traffic from few peers - an SBC trunk, a load generator - can land on one socket and one
//! core while the others idle (seen here: two peers, both on worker 0, 725 against 2 ticks of
//! CPU). A receiver that finds its socket backing up (a read of [`BUSY_BATCH`] or more
//! datagrams) therefore hands the messages of engine shards it does not own (shard `s` is owned
//! by worker `s % workers`, which also runs its timers) to the owner's loop, through the inbox,
//! for the next [`BALANCE_HOLD`]. Every message of a dialog lives in one shard, so:
//! * while handing over, a shard's messages from this socket all go one way (its owner), in
//!   order;
//! * to go back to handling them itself, the receiver waits until every message it handed over
//!   has been handled and sent (`Balance::pending` is released after the owner's sendmmsg), so
//!   it never overtakes one of its own.
//!
//! Protections (flood guard, overload, limits) are applied by the receiver before it hands a
//! message over, exactly as if it handled it. Only messages from `[flood] trusted` sources (or
//! any, without `[flood]`) are handed over: an untrusted source is rate-limited far below a
//! worker's capacity, and its requests must pass the guard after its earlier ones were handled
//! (an authentication failure bans before the next guess is admitted).

use crate::dns;
use crate::metrics::{MsgType, Wire, WorkerMetrics};
use crate::protect::FloodVerdict;
use crate::runtime::{Ctl, Handed, Incoming};
use crate::shards::Shards;
use crate::shared::{Shared, WorkerCommon};
use crate::source_budget;
use crate::stats::{Bump, WorkerStats};
use crate::stream;
use crate::udp::{self, Outgoing};
use bytes::Bytes;
use herald_core::inbound;
use herald_core::{Input, Output, Peer, ResolveRequest, SipHandler, Transport};
use herald_sip::{Message, Method};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// How long a full UDP send buffer may hold a thread before the queued datagrams are dropped.
const SEND_STALL: Duration = Duration::from_millis(100);
/// A read of this many datagrams means the socket is backing up: balance (see the module docs).
pub(crate) const BUSY_BATCH: usize = 8;
/// How long a receiver keeps handing over after its last busy read.
pub(crate) const BALANCE_HOLD: Duration = Duration::from_millis(100);

/// A UDP receiver's hand-over state (module docs, "Balancing").
pub(crate) struct Balance {
    /// Handing the messages of other workers' shards to them, for this batch.
    pub on: bool,
    /// Messages this receiver handed over that are not yet handled and sent.
    pub pending: Arc<AtomicUsize>,
    /// The last read of [`BUSY_BATCH`] or more datagrams.
    busy_at: Option<Instant>,
}

impl Balance {
    pub(crate) fn new() -> Balance {
        Balance { on: false, pending: Arc::new(AtomicUsize::new(0)), busy_at: None }
    }

    /// Decides, before a batch of `read` datagrams read at `now` is handled, whether it hands
    /// over. It stops only once nothing it handed over is still pending.
    pub(crate) fn before_batch(&mut self, read: usize, now: Instant) {
        if read >= BUSY_BATCH {
            self.busy_at = Some(now);
        }
        let busy = self.busy_at.is_some_and(|at| now.duration_since(at) < BALANCE_HOLD);
        self.on = busy || self.pending.load(Ordering::Acquire) > 0;
    }
}

pub(crate) struct Dispatcher<H> {
    pub shared: Arc<Shared>,
    pub shards: Arc<Shards<H>>,
    pub common: Arc<WorkerCommon>,
    /// `[metrics] listen` is set: count every message sent by type.
    pub measure: bool,
    /// A UDP receiver's, when there are other workers to balance with.
    pub balance: Option<Balance>,
    out: Vec<Output>,
    /// Datagrams waiting for the next [`Dispatcher::flush_udp`], per UDP socket.
    queues: Vec<Vec<Outgoing>>,
}

impl<H: SipHandler> Dispatcher<H> {
    pub(crate) fn new(shared: Arc<Shared>, shards: Arc<Shards<H>>, common: Arc<WorkerCommon>) -> Dispatcher<H> {
        let queues = common.udp.iter().map(|_| Vec::new()).collect();
        let measure = shared.config.metrics.listen.is_some();
        Dispatcher { shared, shards, common, measure, balance: None, out: Vec::new(), queues }
    }

    pub(crate) fn id(&self) -> usize {
        self.common.id
    }

    pub(crate) fn stats(&self) -> &WorkerStats {
        &self.shared.stats.workers[self.common.id]
    }

    pub(crate) fn metrics(&self) -> &WorkerMetrics {
        &self.shared.stats.metrics[self.common.id]
    }

    /// Whether new requests are refused now: a UDP receiver's socket-queue wait says so, or
    /// (TCP's signal, which has no kernel timestamps) this worker's inbox - its connections'
    /// messages and those handed over to it - is over half full.
    fn overloaded(&self) -> bool {
        if self.common.shedding.load(Ordering::Relaxed) > 0 {
            return true;
        }
        let inbox = &self.shared.inboxes[self.common.id];
        self.shared.config.overload.enabled
            && inbox.max_capacity() - inbox.capacity() > self.shared.config.limits.inbox_capacity / 2
    }

    /// Hands `input` to engine shard `shard` (under its lock) and carries out what it asks for.
    pub(crate) fn handle(&mut self, shard: usize, input: Input) {
        self.shards.handle(shard, input, &mut self.out);
        self.dispatch(shard);
    }

    /// Runs shard `shard`'s due timers and carries out what they ask for.
    pub(crate) fn handle_timeouts(&mut self, shard: usize, now: Instant) {
        self.shards.handle_timeouts(shard, now, &mut self.out);
        self.dispatch(shard);
    }

    /// Handles a message in its engine shard. One peer's messages reach one thread (the
    /// reuseport hash for UDP, the owning worker for a TCP connection) and are handled in arrival
    /// order - there, or, from a backed-up UDP receiver, by the shard's owner (module docs,
    /// "Balancing") - so each dialog keeps its per-direction order.
    ///
    /// Before that, the runtime's protections (responses are never limited: they belong to
    /// transactions herald started): a banned source's requests are dropped unanswered; new
    /// requests (not ACK, CANCEL or in-dialog: those finish what is running, seed 001) are
    /// dropped while draining, and answered 503 while this worker is overloaded, the
    /// transaction limit is reached, or their source holds its own budget
    /// (`limits.*_per_source`, module `source_budget`).
    pub(crate) fn route(&mut self, from: Peer, local: SocketAddr, msg: Message) {
        // The source whose budget this request is charged to (None: exempt, or a response).
        let mut budgeted = None;
        if msg.is_request() {
            let now = Instant::now();
            if let Some(flood) = &self.shared.flood {
                if flood.check_request(&from, now) == FloodVerdict::Drop {
                    return; // counted by the guard
                }
                // An ACK starts no transaction; trusted sources have no per-source budget.
                budgeted = (msg.method() != Some(Method::Ack) && !flood.trusted(from.addr.ip())).then_some(now);
            }
            let draining = self.shared.draining.load(Ordering::Relaxed);
            let limits = &self.shared.config.limits;
            let full = self.common.transactions.load(Ordering::Relaxed) >= limits.max_transactions
                || self.common.held_bytes.load(Ordering::Relaxed) >= limits.max_held_bytes
                || budgeted.is_some_and(|now| self.shared.budgets.over(from.addr.ip(), now));
            let overloaded = self.overloaded();
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
        let owner = shard % self.shared.workers;
        if let Some(b) = self.balance.as_ref().filter(|b| b.on) {
            if owner != self.common.id && self.may_hand_over(&from) {
                let handed = Some(Handed { shard, origin: b.pending.clone() });
                self.hand_over(owner, Incoming { from, local, msg, handed }, &b.pending);
                return;
            }
        }
        let Some(now) = budgeted else {
            self.handle(shard, Input::Message { from, local, msg });
            return;
        };
        // What the engine made of the request is in `out` before it is carried out: charge it.
        let len = msg.as_bytes().len();
        self.shards.handle(shard, Input::Message { from, local, msg }, &mut self.out);
        let cost = source_budget::Cost::of(&self.out, &from, len);
        if !self.shared.budgets.charge(from.addr.ip(), cost, now) {
            tracing::debug!(source = %from.addr.ip(), "per-source budget table full: request not charged");
        }
        self.dispatch(shard);
    }

    /// Only a trusted source's messages are handed over (or anyone's without `[flood]`). An
    /// untrusted source is held to `[flood] max_requests`, far below what one worker can serve,
    /// so it never needs balancing; and handing its requests over would let its later requests
    /// pass the guard before its earlier ones were handled - a password guesser would get tries
    /// in after the failure that bans it.
    fn may_hand_over(&self, from: &Peer) -> bool {
        self.shared.flood.as_ref().is_none_or(|f| f.trusted(from.addr.ip()))
    }

    /// Queues `it` (a handed-over message of a shard worker `owner` owns) for that worker's
    /// loop, counting it in `pending`, its receiver's count. A full inbox holds this thread until
    /// there is room: dropping or handling the message here could lose it or reorder it. Only a
    /// stopping server drops it.
    fn hand_over(&self, owner: usize, mut it: Incoming, pending: &AtomicUsize) {
        self.stats().udp_handed_over.bump();
        pending.fetch_add(1, Ordering::Relaxed);
        loop {
            match self.shared.inboxes[owner].try_send(it) {
                Ok(()) => return,
                Err(mpsc::error::TrySendError::Full(back)) if !self.shared.stopped.load(Ordering::Relaxed) => {
                    it = back;
                    std::thread::yield_now();
                }
                Err(mpsc::error::TrySendError::Full(_) | mpsc::error::TrySendError::Closed(_)) => {
                    pending.fetch_sub(1, Ordering::Release);
                    return;
                }
            }
        }
    }

    /// The UDP socket to send to `to` from: the worker's first of the same address family.
    fn udp_socket_for(&self, to: &SocketAddr) -> Option<usize> {
        self.common.udp_local.iter().position(|l| l.is_ipv4() == to.is_ipv4())
    }

    /// Carries out what engine shard `shard` asked for.
    fn dispatch(&mut self, shard: usize) {
        let mut out = std::mem::take(&mut self.out);
        for o in out.drain(..) {
            match o {
                Output::Send { to, bytes } => match to.transport {
                    Transport::Udp => match self.udp_socket_for(&to.addr) {
                        Some(i) => {
                            if self.measure {
                                self.metrics().sent(MsgType::of_bytes(&bytes), Wire::Udp);
                            }
                            self.queues[i].push(Outgoing { to: to.addr, bytes, origin: Some(shard) })
                        }
                        None => self.transport_error(Some(shard), to),
                    },
                    Transport::Tcp | Transport::Tls if self.can_stream(to.transport) => {
                        let kind = self.measure.then(|| MsgType::of_bytes(&bytes));
                        if !stream::send(&self.shared, self.common.id, &self.common.ctl_tx, to, bytes) {
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

    /// Queues a datagram on UDP socket `i` that the runtime made itself (a malformed request's
    /// answer): nobody to tell if it cannot be sent.
    pub(crate) fn queue_answer(&mut self, i: usize, to: SocketAddr, bytes: Bytes) {
        self.queues[i].push(Outgoing { to, bytes, origin: None });
    }

    /// Sends a response the runtime made itself (no shard to tell if it fails). It goes back to
    /// where the request came from, as rport (RFC 3581) would have it: the request's Via is not
    /// worth a DNS lookup for a stateless refusal.
    fn send_direct(&mut self, to: Peer, bytes: Bytes) {
        let kind = self.measure.then(|| MsgType::of_bytes(&bytes));
        let sent = match to.transport {
            Transport::Udp => self.udp_socket_for(&to.addr).map(|i| {
                self.queues[i].push(Outgoing { to: to.addr, bytes, origin: None });
                Wire::Udp
            }),
            Transport::Tcp | Transport::Tls if self.can_stream(to.transport) => {
                stream::send(&self.shared, self.common.id, &self.common.ctl_tx, to, bytes).then_some(Wire::Tcp)
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

    /// Reported to the shard (`None`: the runtime's own datagram, nobody to tell) by the worker's
    /// tokio thread on its next loop turn (never re-entrantly).
    fn transport_error(&mut self, shard: Option<usize>, to: Peer) {
        self.stats().send_errors.bump();
        if shard.is_some() {
            let _ = self.common.ctl_tx.send(Ctl::TransportError { shard, to });
        }
    }

    /// Looks `request` up in a task of the worker's runtime; the answer goes back to `shard`.
    fn resolve(&mut self, shard: usize, token: u64, request: ResolveRequest) {
        let supported = &self.shared.supported;
        let resolver = self.common.resolver.get_or_init(|| dns::Resolver::system(supported.clone())).clone();
        let tx = self.common.ctl_tx.clone();
        let tls = self.shared.tls.clone();
        tokio::spawn(async move {
            // The engine is told the kind of failure; the resolver already logged its detail.
            let result = resolver.resolve(&request).await.map_err(|f| f.error);
            // RFC 5922 §7.1: a TLS next hop must prove the name it was looked up by.
            if let (Some(tls), Ok(targets)) = (&tls, &result) {
                tls.learn(&request.host, targets);
            }
            let _ = tx.send(Ctl::Resolved { shard, token, result });
        });
    }

    /// Sends every queued datagram, batched with sendmmsg. A full send buffer holds this thread
    /// for up to [`SEND_STALL`] (poll(2) for room); what is still unsent then is dropped and
    /// reported to the shards that sent it.
    pub(crate) fn flush_udp(&mut self) {
        for i in 0..self.queues.len() {
            if self.queues[i].is_empty() {
                continue;
            }
            let queue = std::mem::take(&mut self.queues[i]);
            let sock = self.common.udp[i].clone();
            let mut at = 0;
            while at < queue.len() {
                let (n, failed) = udp::send_batch(&sock, &queue[at..]);
                at += n;
                self.stats().udp_sent.fetch_add(n as u64, Ordering::Relaxed);
                let Some(e) = failed else { continue };
                if e.kind() == io::ErrorKind::WouldBlock {
                    if !udp::wait_writable(&sock, SEND_STALL) {
                        tracing::warn!(worker = self.id(), dropped = queue.len() - at, "UDP send buffer full");
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
                    tracing::debug!(worker = self.id(), to = %queue[at].to, error = %e, "UDP send failed");
                    self.transport_error(queue[at].origin, Peer::udp(queue[at].to));
                    at += 1;
                }
            }
            let mut queue = queue;
            queue.clear();
            self.queues[i] = queue; // keep the allocation
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn balancing_starts_on_a_busy_read_and_ends_only_when_nothing_handed_over_is_pending() {
        let t0 = Instant::now();
        let mut b = Balance::new();
        b.before_batch(BUSY_BATCH - 1, t0);
        assert!(!b.on, "a short read: the socket is keeping up");
        b.before_batch(BUSY_BATCH, t0);
        assert!(b.on, "a long read: the socket is backing up");
        b.before_batch(1, t0 + BALANCE_HOLD / 2);
        assert!(b.on, "held after the last busy read");
        b.pending.fetch_add(2, Ordering::Relaxed);
        b.before_batch(1, t0 + BALANCE_HOLD * 2);
        assert!(b.on, "two handed messages not yet sent: handling their shards here could overtake them");
        b.pending.fetch_sub(2, Ordering::Release);
        b.before_batch(1, t0 + BALANCE_HOLD * 2);
        assert!(!b.on, "idle and nothing pending: back to handling everything where it is read");
    }
}
