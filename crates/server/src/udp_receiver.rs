//! A UDP receiver: one thread per UDP socket of a worker, blocked in recvmmsg(2) until datagrams
//! arrive, which it hands to the runtime's ingress (module `ingress`), admits and handles itself
//! (module `dispatch`) and answers with one sendmmsg(2) (module `egress`). While it is too busy
//! to keep up (module `dispatch::balance`) it hands a trusted source's datagrams of other
//! workers' shards to them unparsed, found by their Call-ID alone, one batch per owner per read.
//!
//! Why a plain blocking thread and not the worker's tokio reactor: at a moderate load datagrams
//! arrive one at a time, and through the reactor each one cost an epoll_wait, the recvmmsg that
//! read it and a second recvmmsg that found the socket empty (strace at 500 calls/s: 3.3 system
//! calls per datagram received, against Kamailio's 2: one recvfrom, one sendto). Blocked in
//! recvmmsg with MSG_WAITFORONE the thread wakes straight into the read, takes everything that is
//! queued by then, and sends what it produced in one call. That is also the model of seed 000's
//! fastest UDP configuration: one socket per core (SO_REUSEPORT), each read by its own thread.
//!
//! Idle, the thread blocks with no time-out: an idle herald makes no system call here. Shutdown
//! wakes it with shutdown(2) on the socket ([`wake_to_stop`]). Only while shedding does
//! SO_RCVTIMEO ([`TICK`]) bound the block: a tick window with nothing read is a wait of zero for
//! the overload detector, so that shedding ends when UDP traffic stops. A read that blocked for
//! a second on an empty queue is one too, so that a streak of long waits before a quiet spell
//! does not count as a standing queue after it.

use crate::dispatch::{Balance, Dispatcher};
use crate::ingress::{self, Arrival};
use crate::metrics::{BatchClock, DropTracker, MsgType, Wire};
use crate::protect::OverloadDetector;
use crate::runtime::{Ctl, HandedItem, TICK};
use crate::shared::WorkerCommon;
use crate::udp;
use bytes::Bytes;
use herald_core::inbound::{self, Inbound};
use herald_core::{Peer, SipHandler};
use herald_sip::Framing;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A block this long with an empty queue ends a streak of long waits (see `idle_before`).
const IDLE: Duration = Duration::from_secs(1);

pub(crate) struct UdpReceiver<H> {
    d: Dispatcher<H>,
    /// Which of the worker's UDP sockets this thread reads.
    index: usize,
    sock: Arc<UdpSocket>,
    local: SocketAddr,
    recv: herald_sys::RecvBatch,
    drops: DropTracker,
    /// Kernel receive timestamps are on: metrics or overload control need them.
    stamps: bool,
    /// This socket's load, from its datagrams' socket-queue waits (`[overload]`).
    overload: OverloadDetector,
    /// What this receiver last added to the worker's shedding count.
    shedding: bool,
    /// Overload control is on: a long block is a zero wait for the detector.
    watch_idle: bool,
    /// A datagram was observed since the last tick (see [`UdpReceiver::tick`]).
    observed: bool,
    /// When the next tick is due: a comparison per read, where the time since the last tick
    /// was a subtraction of two instants (std's checked `sub_timespec`, ~40 instructions a
    /// batch, callgrind, issue 21).
    next_tick: Instant,
}

/// Tells the worker's tokio thread that a receiver ended (normally at shutdown, or by panic).
struct ExitNotice {
    common: Arc<WorkerCommon>,
    local: SocketAddr,
}

impl Drop for ExitNotice {
    fn drop(&mut self) {
        let _ = self.common.ctl_tx.send(Ctl::ReceiverExited { local: self.local });
    }
}

impl<H: SipHandler> UdpReceiver<H> {
    /// Starts the thread for UDP socket `index` of the worker.
    pub(crate) fn spawn(mut d: Dispatcher<H>, index: usize) -> io::Result<std::thread::JoinHandle<()>> {
        let sock = d.common.udp[index].clone();
        let local = d.common.udp_local[index];
        sock.set_nonblocking(false)?;
        sock.set_read_timeout(None)?;
        let stamps = d.shared.config.metrics.listen.is_some() || d.shared.config.overload.enabled;
        if stamps {
            if let Err(e) = udp::enable_rx_metadata(&sock) {
                tracing::warn!(worker = d.id(), %local, error = %e, "no kernel timestamps: queue wait not measured");
            }
        }
        let slot = d.shared.limits.max_message_size.min(65_535) + 1;
        let overload = OverloadDetector::new(d.shared.config.overload.settings());
        let watch_idle = d.shared.config.overload.enabled;
        let name = format!("herald-w{}-udp{index}", d.id());
        if d.shared.workers > 1 {
            d.balance = Some(Balance::new(Instant::now(), index, d.shared.workers));
        }
        let r = UdpReceiver {
            d,
            index,
            sock,
            local,
            recv: herald_sys::RecvBatch::new(slot),
            drops: DropTracker::default(),
            stamps,
            overload,
            shedding: false,
            watch_idle,
            observed: false,
            next_tick: Instant::now() + TICK,
        };
        std::thread::Builder::new().name(name).spawn(move || r.run())
    }

    fn run(mut self) {
        let _notice = ExitNotice { common: self.d.common.clone(), local: self.local };
        // Outputs start tasks on the worker's runtime (TCP connects, DNS lookups).
        let rt = self.d.common.rt.clone();
        let _rt = rt.enter();
        while !self.d.shared.stopped.load(Ordering::Relaxed) {
            let blocked_at = self.watch_idle.then(Instant::now);
            let read = udp::recv_batch(&self.sock, &mut self.recv);
            let now = Instant::now();
            if self.d.shared.stopped.load(Ordering::Relaxed) {
                break; // woken by `wake_to_stop`
            }
            if let Some(at) = blocked_at.filter(|at| self.idle_before(*at, now)) {
                // No standing queue.
                self.overload.observe(Duration::ZERO, at + TICK);
                self.publish_shedding();
            }
            match read {
                Ok(n) => {
                    if let Some(b) = self.d.balance.as_mut() {
                        b.before_batch(now);
                    }
                    let mut clock = self.stamps.then(BatchClock::start);
                    for i in 0..n {
                        self.take_datagram(i, now, clock.as_mut());
                    }
                    if let Some(b) = self.d.balance.as_mut() {
                        b.send(&self.d.shared, &self.d.common);
                    }
                    self.d.egress.flush();
                    if let Some(b) = self.d.balance.as_mut() {
                        b.after_batch(Instant::now());
                    }
                }
                // SO_RCVTIMEO (while shedding) passed with nothing to read.
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => {}
                Err(e) => tracing::debug!(worker = self.d.id(), error = %e, "UDP receive error"),
            }
            self.tick(now);
        }
        if self.shedding {
            self.set_shedding(false);
        }
    }

    /// Whether a read that blocked from `blocked_at` to `now` (with no time-out: not shedding)
    /// waited through an [`IDLE`] spell of which the queue was empty for a [`TICK`] (the block
    /// minus the first datagram's wait: a process stopped or starved while datagrams arrived
    /// blocked long, but its queue stood). A shorter block proves nothing: the thread may not
    /// have run for most of it (tests/protect.rs stops herald for 150 ms at a time).
    fn idle_before(&self, blocked_at: Instant, now: Instant) -> bool {
        let blocked = now.duration_since(blocked_at);
        match self.recv.get(0) {
            Some(first) if blocked >= IDLE => first.kernel_ns.is_some_and(|arrived| {
                let real = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
                blocked.saturating_sub(Duration::from_nanos(real.saturating_sub(arrived))) >= TICK
            }),
            _ => false,
        }
    }

    /// After every read, once per [`TICK`] (as the thread runs): a receiver that read no
    /// datagram for a whole tick has no socket queue. That is a wait of zero, so that shedding
    /// ends when UDP traffic stops (the reads time out every tick while shedding).
    /// `now`: when the last read returned.
    fn tick(&mut self, now: Instant) {
        if now < self.next_tick {
            return;
        }
        self.next_tick = now + TICK;
        if !std::mem::take(&mut self.observed) {
            self.overload.observe(Duration::ZERO, now);
            self.publish_shedding();
        }
    }

    /// Feeds the socket-queue wait of one datagram read at `read_at` to the overload detector.
    fn observe(&mut self, wait_ns: u64, read_at: Instant) {
        self.observed = true;
        self.overload.observe(Duration::from_nanos(wait_ns), read_at);
        self.publish_shedding();
    }

    fn publish_shedding(&mut self) {
        let now = self.overload.shedding();
        if now != self.shedding {
            self.set_shedding(now);
        }
    }

    /// The worker sheds while any of its receivers does; the server's gauge counts workers.
    fn set_shedding(&mut self, on: bool) {
        self.shedding = on;
        // While shedding, reads time out every tick so that shedding ends when traffic stops.
        if let Err(e) = self.sock.set_read_timeout(on.then_some(TICK)) {
            tracing::warn!(worker = self.d.id(), error = %e, "cannot set the UDP read time-out");
        }
        let wait_ms = self.overload.smoothed_wait_us() / 1000.0;
        let (worker, gauge) = (&self.d.common.shedding, &self.d.shared.stats.shedding);
        if on {
            if worker.fetch_add(1, Ordering::Relaxed) == 0 {
                gauge.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(worker = self.d.id(), wait_ms, "overloaded: new requests get 503");
            }
        } else if worker.fetch_sub(1, Ordering::Relaxed) == 1 {
            gauge.fetch_sub(1, Ordering::Relaxed);
            tracing::info!(worker = self.d.id(), wait_ms, "no longer overloaded");
        }
    }

    /// Datagram `i` of the last read (see [`UdpReceiver::on_datagram`]); one without an IP
    /// source is skipped. Its payload is copied out of its slot, which the next read reuses.
    ///
    /// What the slot says is taken field by field, as plain values: gathered into a struct of
    /// their own (with the copied bytes) and handed on, that struct was written to the stack
    /// and copied whole once more. With the classification's message handed on where it lies
    /// (`ingress::screen`), the receiver's loop and `ingress::receive` took 2,506 instructions
    /// a UDP call, now 2,125 (six datagrams, callgrind, issue 21). Taken one at a time as they
    /// are handled, not gathered into a list first (~40 a datagram).
    #[inline(always)]
    fn take_datagram(&mut self, i: usize, read_at: Instant, clock: Option<&mut BatchClock>) {
        let Some(d) = self.recv.get(i) else { return };
        let Some(src) = d.source else { return };
        if let Some(n) = d.drops {
            let new = self.drops.advance(n);
            if new > 0 {
                self.d.metrics().dropped(new);
            }
        }
        let local = d.local.map_or(self.local, |ip| SocketAddr::new(ip, self.local.port()));
        let (truncated, kernel_ns) = (d.truncated, d.kernel_ns);
        let bytes = Bytes::copy_from_slice(d.payload);
        self.on_datagram(src, local, bytes, truncated, kernel_ns, read_at, clock);
    }

    /// One datagram from `src` to `local`; `truncated`: longer than its slot; `kernel_ns`: when
    /// the kernel received it. `read_at`: when its batch was read. `clock`: the batch's clock
    /// when measuring; the datagram's service time ends here.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn on_datagram(
        &mut self,
        src: SocketAddr,
        local: SocketAddr,
        bytes: Bytes,
        truncated: bool,
        kernel_ns: Option<u64>,
        read_at: Instant,
        clock: Option<&mut BatchClock>,
    ) {
        let from = Peer::udp(src);
        if let Some(owner) = (!truncated).then(|| self.d.owner_elsewhere(&from, &bytes)).flatten() {
            // Handed over as read: its owner parses, admits and handles it (module
            // `dispatch::balance`). Its wait is this socket's load all the same.
            let wait_ns = clock.as_deref().and_then(|c| c.wait(kernel_ns));
            if let Some(wait) = wait_ns {
                self.observe(wait, read_at);
            }
            // No lap of the clock: the hand-over's moment counts to the next message this
            // thread handles (its service time, not its wait), one clock read less per message
            // handed over (~90 instructions, callgrind).
            self.d.pass_on(owner, HandedItem::Datagram { from, local, bytes, wait_ns });
            return;
        }
        // `ingress::receive`, with the classification's message handed on where it lies (see
        // `ingress::screen`).
        let (shared, worker) = (&*self.d.shared, self.d.id());
        let arrival = match ingress::screen(shared, worker, &from, &bytes, truncated) {
            Some(stun) => stun,
            None => match inbound::classify(bytes, &shared.limits, Framing::Datagram, truncated) {
                Inbound::Message(msg) => {
                    // The wait decides this very message's fate, so it is fed before routing.
                    if let Some(wait) = clock.as_deref().and_then(|c| c.wait(kernel_ns)) {
                        self.observe(wait, read_at);
                    }
                    let kind = self.d.measure.then(|| MsgType::of(&msg));
                    self.d.route(from, local, msg, read_at);
                    if let Some(c) = clock {
                        let (service, wait) = c.lap(kernel_ns);
                        if let Some(kind) = kind {
                            self.d.metrics().handled(kind, Wire::Udp, service, wait);
                        }
                    }
                    return;
                }
                other => ingress::not_a_message(shared, worker, &from, other),
            },
        };
        match arrival {
            Arrival::Answer { bytes, .. } => self.d.egress.reply(self.index, src, bytes),
            Arrival::Dropped { .. } => {}
            // Neither a STUN keep-alive's outcome nor what was not a message is one.
            Arrival::Message(msg) => self.d.route(from, local, msg, read_at),
        }
        // Not a message of any type: its time is nobody's service time.
        if let Some(c) = clock {
            c.lap(None);
        }
    }
}

/// Wakes the receiver blocked on `sock` for good (at shutdown, after `stopped` is set): with
/// shutdown(2) for reading, a blocked and every later receive return at once with nothing.
/// Linux wakes the readers even of an unconnected UDP socket, for which the call itself fails
/// with ENOTCONN; sending from the socket still works.
pub(crate) fn wake_to_stop(sock: &UdpSocket) {
    let _ = socket2::SockRef::from(sock).shutdown(std::net::Shutdown::Read);
}
