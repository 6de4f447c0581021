//! The one way out: every message herald sends - an engine's output, a stateless 503, the
//! answer to a malformed datagram - leaves through an [`Egress`], which sends it over UDP
//! (queued per socket, flushed with one sendmmsg(2) per batch) or over a stream connection (its
//! write queue, found or opened by module `stream`), counts it, and reports what cannot be sent
//! to the engine shard that asked (`Ctl::TransportError`). A stream connection's own replies to
//! its peer (a pong, the answer to a message that broke its framing) go straight into its write
//! queue, the same queue this type pushes to.

use crate::conns::RecentConns;
use crate::metrics::{MsgType, Wire};
use crate::runtime::Ctl;
use crate::send_order::{Flushes, Sender};
use crate::shared::{Shared, WorkerCommon};
use crate::stats::{Bump, WorkerStats};
use crate::stream;
use crate::udp::{self, Outgoing};
use bytes::Bytes;
use herald_core::{Peer, Transport};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a full UDP send buffer may hold a thread before the queued datagrams are dropped.
const SEND_STALL: Duration = Duration::from_millis(100);

/// One thread's send path (each thread of a worker has its own: the datagram queues are not
/// shared).
pub(crate) struct Egress {
    shared: Arc<Shared>,
    common: Arc<WorkerCommon>,
    /// `[metrics] listen` is set: count every message sent by type.
    measure: bool,
    /// Datagrams waiting for the next [`Egress::flush`], per UDP socket of the worker.
    queues: Vec<Vec<Outgoing>>,
    /// The sendmmsg headers every flush fills (prepared once, herald-sys `SendBatch`).
    headers: herald_sys::SendBatch,
    /// The worker's first UDP socket of each address family (IPv4, IPv6), found once: see
    /// [`Egress::udp_socket_for`].
    udp_sockets: [Option<usize>; 2],
    /// Flushes completed, which the shards read to keep their sends in order (module
    /// `send_order`).
    flushes: Arc<Flushes>,
    /// What the next [`Egress::flush`] has to do: send (a datagram was queued since the last
    /// one), count (a shard took that flush's number for output of its, `send_order::Unsent`).
    datagrams_queued: bool,
    count_owed: bool,
    /// The stream connections this thread last sent to by id.
    recent: RecentConns,
}

impl Egress {
    pub(crate) fn new(shared: Arc<Shared>, common: Arc<WorkerCommon>) -> Egress {
        let queues = common.udp.iter().map(|_| Vec::new()).collect();
        let measure = shared.config.metrics.listen.is_some();
        let first = |v4: bool| common.udp_local.iter().position(|l| l.is_ipv4() == v4);
        let udp_sockets = [first(true), first(false)];
        let (flushes, recent) = (Arc::default(), RecentConns::default());
        Egress {
            shared,
            common,
            measure,
            queues,
            headers: herald_sys::SendBatch::new(),
            udp_sockets,
            flushes,
            datagrams_queued: false,
            count_owed: false,
            recent,
        }
    }

    fn stats(&self) -> &WorkerStats {
        &self.shared.stats.workers[self.common.id]
    }

    fn sent(&self, bytes: &[u8], wire: Wire) {
        if self.measure {
            self.shared.stats.metrics[self.common.id].sent(MsgType::of_bytes(bytes), wire);
        }
    }

    /// Sends `bytes` to `to`: for engine shard `origin`, which is told if it cannot be sent, or
    /// for the runtime itself (`None`: a stateless answer, nobody to tell). A datagram leaves
    /// from the worker's first UDP socket of `to`'s address family, at the next flush. `now`:
    /// when the caller last read the clock (a stream write counts as traffic then).
    ///
    /// Inline, the usual case alone (a datagram, not counted by type): queued where the output
    /// is carried out. Everything else is [`Egress::send_any`]'s, out of line. A call per
    /// datagram set up a frame and passed the address and bytes on once more: the dispatch
    /// and the send took 938 instructions a UDP call (seven sends), now 830 (callgrind,
    /// issue 21).
    #[inline(always)]
    pub(crate) fn send(&mut self, to: Peer, bytes: Bytes, origin: Option<usize>, now: Instant) {
        if to.transport == Transport::Udp && !self.measure {
            if let Some(i) = self.udp_socket_for(&to.addr) {
                self.queue_datagram(i, Outgoing { to: to.addr, bytes, origin });
                return;
            }
        }
        self.send_any(to, bytes, origin, now);
    }

    /// [`Egress::send`] of any message.
    #[inline(never)]
    fn send_any(&mut self, to: Peer, bytes: Bytes, origin: Option<usize>, now: Instant) {
        let sent = match to.transport {
            Transport::Udp => match self.udp_socket_for(&to.addr) {
                Some(i) => {
                    self.sent(&bytes, Wire::Udp);
                    self.queue_datagram(i, Outgoing { to: to.addr, bytes, origin });
                    true
                }
                None => false,
            },
            Transport::Tcp | Transport::Tls | Transport::Ws | Transport::Wss if self.can_stream(to.transport) => {
                self.send_stream(to, bytes, now)
            }
            // TLS without [tls] has no connector.
            Transport::Tcp | Transport::Tls | Transport::Ws | Transport::Wss => false,
        };
        if !sent {
            self.transport_error(origin, to);
        }
    }

    /// [`Egress::send`] over a stream connection; whether it was queued. Out of line: inlined,
    /// the stream path made every datagram's send pay for its registers and set-up (~15
    /// instructions a send, ~100 per UDP call, callgrind, issue 21).
    #[inline(never)]
    fn send_stream(&mut self, to: Peer, bytes: Bytes, now: Instant) -> bool {
        // A stream send leaves now, datagrams at the next flush: flush them first, so that
        // what this thread sends leaves in the order the engine produced it. Otherwise a
        // 100 Trying queued for a UDP caller could leave after the INVITE forwarded over
        // TCP, and after the 180 that came back on it (seen with SIPp, which rejects a
        // 100 after a 180). Mixed-transport output only: UDP batches stay whole. Not
        // counted as a flush (module `send_order`): this stream send is still to come.
        if self.queues.iter().any(|q| !q.is_empty()) {
            self.send_queued();
        }
        let kind = self.measure.then(|| MsgType::of_bytes(&bytes));
        let sent = stream::send(&self.shared, self.common.id, &self.common.ctl_tx, to, bytes, now, &mut self.recent);
        if let (true, Some(kind)) = (sent, kind) {
            self.shared.stats.metrics[self.common.id].sent(kind, Wire::Tcp);
        }
        sent
    }

    /// Answers a datagram read from UDP socket `socket` from that same socket (a malformed
    /// request's answer; nobody to tell if it cannot be sent).
    pub(crate) fn reply(&mut self, socket: usize, to: SocketAddr, bytes: Bytes) {
        self.sent(&bytes, Wire::Udp);
        self.queue_datagram(socket, Outgoing { to, bytes, origin: None });
    }

    /// Queues a datagram for UDP socket `socket`, for the next [`Egress::flush`] to send: the
    /// one place a queue grows, so the flush never skips a queue with something in it.
    #[inline(always)]
    fn queue_datagram(&mut self, socket: usize, datagram: Outgoing) {
        self.queues[socket].push(datagram);
        self.datagrams_queued = true;
    }

    /// The UDP socket to send to `to` from: the worker's first of the same address family.
    fn udp_socket_for(&self, to: &SocketAddr) -> Option<usize> {
        self.udp_sockets[usize::from(to.is_ipv6())]
    }

    /// Whether stream output on `transport` can be carried out (TLS needs `[tls]`; WebSocket
    /// goes only over the connections browsers opened, which `stream::send` finds).
    fn can_stream(&self, transport: Transport) -> bool {
        match transport {
            Transport::Tcp | Transport::Ws | Transport::Wss => true,
            Transport::Tls => self.shared.tls.is_some(),
            Transport::Udp => false,
        }
    }

    /// Reported to the shard (`None`: the runtime's own message, nobody to tell) by the worker's
    /// tokio thread on its next loop turn (never re-entrantly).
    fn transport_error(&self, shard: Option<usize>, to: Peer) {
        self.stats().send_errors.bump();
        if shard.is_some() {
            let _ = self.common.ctl_tx.send(Ctl::TransportError { shard, to });
        }
    }

    /// Sends every queued datagram, batched with sendmmsg. A full send buffer holds this thread
    /// for up to [`SEND_STALL`] (poll(2) for room); what is still unsent then is dropped and
    /// reported to the shards that sent it. Counted as done afterwards, whatever was sent: a
    /// thread that waits for this flush (module `send_order`) waits no longer.
    ///
    /// Only what is owed is done. The queues are walked only when a datagram was queued: a
    /// stream connection's loop flushes after every read, which queues none, and the walk over
    /// empty queues was ~100 instructions a proxied TCP call (callgrind, issue 21). The flush
    /// is counted only when a shard took its number (`Shards::guarded`): nobody waits for
    /// another, and a shard that takes the number later is served by the next counted flush.
    pub(crate) fn flush(&mut self) {
        if std::mem::take(&mut self.datagrams_queued) {
            self.send_queued();
        }
        if std::mem::take(&mut self.count_owed) {
            self.flushes.completed();
        }
    }

    fn send_queued(&mut self) {
        for i in 0..self.queues.len() {
            if self.queues[i].is_empty() {
                continue;
            }
            // Sent from where it lies and cleared after (not taken out and put back: the
            // put-back's drop of the empty vector was a call per flush, callgrind, issue 21).
            let queue = &self.queues[i];
            let sock = &self.common.udp[i];
            let mut at = 0;
            while at < queue.len() {
                let (n, failed) = udp::send_batch_with(&mut self.headers, sock, &queue[at..]);
                at += n;
                self.stats().udp_sent.fetch_add(n as u64, Ordering::Relaxed);
                let Some(e) = failed else { continue };
                if e.kind() == io::ErrorKind::WouldBlock {
                    if !udp::wait_writable(sock, SEND_STALL) {
                        tracing::warn!(worker = self.common.id, dropped = queue.len() - at, "UDP send buffer full");
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
                    tracing::debug!(worker = self.common.id, to = %queue[at].to, error = %e, "UDP send failed");
                    self.transport_error(queue[at].origin, Peer::udp(queue[at].to));
                    at += 1;
                }
            }
            self.queues[i].clear(); // keeps the allocation
        }
    }
}

impl Sender for Egress {
    fn flushes(&self) -> &Arc<Flushes> {
        &self.flushes
    }

    fn worker(&self) -> usize {
        self.common.id
    }

    fn owe_flush(&mut self) {
        self.count_owed = true;
    }

    fn flush(&mut self) {
        Egress::flush(self);
    }
}
