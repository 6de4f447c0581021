//! One worker: a thread with a current-thread tokio runtime that owns TCP listeners (and the
//! connections they accept), an inbox for the messages its connections read (those that need
//! not wait in it are handled by the connection's task, module `stream::handler`), and a timer
//! for the engine shards it services; plus one UDP receiver thread per UDP socket (module
//! `udp_receiver`), which reads and handles datagrams without going through the runtime.
//!
//! The loop waits until something is ready - inbox items, control messages, the timer - and
//! handles all of it before flushing queued UDP output with sendmmsg. A message is handled right
//! here, under the lock of its engine shard (module `shards`), and its outputs are carried out by
//! this worker (module `dispatch`): UDP from the worker's socket, TCP through the connection
//! registry. The only locks on this path are the shard's (held for the `handle` call alone) and a
//! TCP connection's write queue.
//!
//! Timers: shard `s` is serviced by worker `s % workers`, which runs `handle_timeouts` on those
//! of its shards whose cached deadline has passed. It sleeps until the earliest of them; a call
//! on another thread that brings one earlier wakes it (module `shard_timers`). To coalesce the
//! many deadlines of a busy server (a few per call) it runs timers at most once per [`TICK`]:
//! after a run that found work it looks again at the next deadline but no sooner than one
//! [`TICK`] later, so at most 1/[`TICK`] wake-ups per second under load, none when idle. A timer
//! fires up to [`TICK`] late, which is small next to SIP's timers (T1 = 500 ms; only the
//! zero-length timers of reliable transports, which merely free state, are delayed relatively).

use crate::dispatch::Dispatcher;
use crate::local_timers::Sleep;
use crate::metrics::{BatchClock, MsgType, Wire};
use crate::runtime::{Ctl, HandedBatch, HandedItem, InboxMessage, TICK};
use crate::shard_timers::NO_DEADLINE;
use crate::shards::Shards;
use crate::shared::{Shared, WorkerCommon};
use crate::stream;
use crate::udp_receiver::UdpReceiver;
use herald_core::{Input, Peer, SipHandler, Transport};
use herald_sip::Message;
use lookout::Lookout;
use std::future::{poll_fn, Future};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Instant;
use tokio::sync::futures::OwnedNotified;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use wakes::{Source, Wakes};

mod lookout;
mod wakes;

/// Inbox messages per loop turn.
const INBOX_TURN: usize = 256;

pub(crate) struct Worker<H> {
    d: Dispatcher<H>,
    /// The shards whose timers this worker services: `id`, `id + workers`, ...: `workers`.
    step: usize,
    accept_tasks: Vec<JoinHandle<()>>,
    receivers: Vec<std::thread::JoinHandle<()>>,
    inbox: mpsc::Receiver<InboxMessage>,
    ctl_rx: mpsc::UnboundedReceiver<Ctl>,
    inbox_buf: Vec<InboxMessage>,
    /// The origins of the handed messages handled this turn, and how many of each, released
    /// after the flush.
    handed: Vec<(Arc<AtomicUsize>, usize)>,
    ctl_buf: Vec<Ctl>,
    /// Set to `sleep_at` while that is not [`NO_DEADLINE`].
    timer: Sleep,
    timer_fired: bool,
    /// The deadline published in `shard_timers` (encoded as it does): what the worker will be
    /// woken for. `sleep_at` follows it in [`Worker::arm`].
    armed: u64,
    /// The deadline the timer is set to (encoded).
    sleep_at: u64,
    /// Ready when another thread brought one of this worker's deadlines earlier than `armed`.
    woken: Pin<Box<OwnedNotified>>,
    was_woken: bool,
    /// The earliest deadline of this worker's shards as far as it is known (module `lookout`):
    /// what [`Worker::arm`] starts from. Between walks a deadline only comes earlier through a
    /// call, which notes it for the next look and wakes this worker when it is more than a
    /// [`TICK`] earlier (module `shard_timers`); looking at every shard on every loop turn was
    /// 15k instructions per call over TCP, whose messages this thread handles (callgrind, issue
    /// 21).
    lookout: Lookout,
    /// When timers last had work (encoded).
    last_work: Option<u64>,
    /// Which sources woke the loop: a look polls those alone (module `wakes`).
    wakes: Wakes,
}

impl<H: SipHandler> Worker<H> {
    /// Must be called inside the worker's runtime (listeners register with its reactor). Starts
    /// the UDP receiver threads.
    pub(crate) fn new(
        id: usize,
        shared: Arc<Shared>,
        shards: Arc<Shards<H>>,
        udp: Vec<std::net::UdpSocket>,
        tcp: Vec<(std::net::TcpListener, Transport)>,
        inbox: mpsc::Receiver<InboxMessage>,
        ctl_rx: mpsc::UnboundedReceiver<Ctl>,
    ) -> io::Result<Worker<H>> {
        let udp_local = udp.iter().map(|s| s.local_addr()).collect::<io::Result<Vec<_>>>()?;
        let common = Arc::new(WorkerCommon {
            id,
            udp: udp.into_iter().map(Arc::new).collect(),
            udp_local,
            ctl_tx: shared.ctl[id].clone(),
            rt: tokio::runtime::Handle::current(),
            resolver: OnceLock::new(),
            shedding: AtomicUsize::new(0),
            transactions: AtomicUsize::new(0),
            held_bytes: AtomicUsize::new(0),
        });
        let mut accept_tasks = Vec::new();
        for (l, transport) in tcp {
            let l = tokio::net::TcpListener::from_std(l)?;
            accept_tasks.push(tokio::spawn(stream::accept_loop(shared.clone(), id, l, transport)));
        }
        let step = shared.workers;
        let mut receivers = Vec::new();
        for i in 0..common.udp.len() {
            let d = Dispatcher::new(shared.clone(), shards.clone(), common.clone());
            receivers.push(UdpReceiver::spawn(d, i)?);
        }
        let woken = Box::pin(shards.timers().woken(id));
        Ok(Worker {
            d: Dispatcher::new(shared, shards, common),
            step,
            accept_tasks,
            receivers,
            inbox,
            ctl_rx,
            inbox_buf: Vec::with_capacity(INBOX_TURN),
            handed: Vec::with_capacity(INBOX_TURN),
            ctl_buf: Vec::new(),
            timer: Sleep::until(Instant::now() + TICK),
            timer_fired: false,
            armed: NO_DEADLINE,
            sleep_at: NO_DEADLINE,
            lookout: Lookout::new(NO_DEADLINE),
            woken,
            was_woken: false,
            last_work: None,
            wakes: Wakes::new(),
        })
    }

    /// Runs until told to stop; an error when a UDP receiver ended before that.
    pub(crate) async fn run(mut self) -> io::Result<()> {
        let mut turns: u32 = 0;
        let mut failure = None;
        // This worker's connections hand it messages on this thread while its inbox is empty.
        let d = &self.d;
        let here = Dispatcher::new(d.shared.clone(), d.shards.clone(), d.common.clone());
        let _handler = stream::install(d.id(), Box::new(StreamHandler { d: here }));
        // The thread's timers (module `local_timers`): without them no engine timer would run.
        crate::local_timers::start()?;
        self.lookout.walked(self.scan_earliest());
        self.arm();
        loop {
            poll_fn(|cx| self.poll_ready(cx)).await;
            let fired = std::mem::take(&mut self.timer_fired);
            let woken = std::mem::take(&mut self.was_woken);
            if fired || woken {
                self.run_timers();
            }
            let mut items = std::mem::take(&mut self.inbox_buf);
            // One clock read for the turn: what its messages are handled at.
            let now = Instant::now();
            let mut clock = (self.d.measure && !items.is_empty()).then(BatchClock::start);
            for it in items.drain(..) {
                let kind = clock.is_some().then(|| MsgType::of(&it.msg));
                self.d.route(it.from, it.local, it.msg, now);
                if let (Some(c), Some(kind)) = (clock.as_mut(), kind) {
                    // Stream messages carry no kernel timestamp: service time only.
                    let (service, _) = c.lap(None);
                    self.d.metrics().handled(kind, Wire::Tcp, service, None);
                }
            }
            self.inbox_buf = items;
            let mut stop = false;
            let mut ctl = std::mem::take(&mut self.ctl_buf);
            for c in ctl.drain(..) {
                match c {
                    Ctl::Resolved { shard, token, result } => {
                        self.d.handle(shard, Input::Resolved { token, result }, now);
                    }
                    Ctl::TransportError { shard: Some(shard), to } => {
                        self.d.handle(shard, Input::TransportError { to }, now);
                    }
                    Ctl::TransportError { shard: None, to } => {
                        for shard in 0..self.d.shards.len() {
                            self.d.handle(shard, Input::TransportError { to }, now);
                        }
                    }
                    Ctl::ReceiverExited { local } => {
                        if !self.d.shared.stopped.load(Ordering::Relaxed) {
                            tracing::error!(worker = self.d.id(), %local, "UDP receiver stopped");
                            failure = Some(io::Error::other(format!("the UDP receiver of {local} stopped")));
                            stop = true;
                        }
                    }
                    Ctl::Ping { shard, token, ping } => self.d.handle(shard, Input::Ping { token, ping }, now),
                    Ctl::Handed(batch) => self.handle_handed(batch, now),
                    Ctl::Durable(pending) => {
                        pending.store(false, Ordering::Release);
                        let now = Instant::now();
                        self.run_due_shards(now, self.d.shards.timers().encode(Some(now)));
                    }
                    Ctl::Drain => self.start_drain(),
                    Ctl::Stop => stop = true,
                }
            }
            self.ctl_buf = ctl;
            self.d.egress.flush();
            self.arm();
            // Sent: the receivers that handed these messages over may overtake them now.
            for (origin, n) in self.handed.drain(..) {
                origin.fetch_sub(n, Ordering::Release);
            }
            if stop {
                break;
            }
            turns += 1;
            if turns == 32 {
                turns = 0;
                // Let this thread's connection tasks run even under a constant TCP load.
                tokio::task::yield_now().await;
            }
        }
        for t in &self.accept_tasks {
            t.abort();
        }
        // A failing worker takes the server down: its other receivers must not wait for the
        // main thread, which waits for this one.
        if failure.is_some() {
            self.d.shared.stopped.store(true, Ordering::Relaxed);
        }
        for sock in &self.d.common.udp {
            crate::udp_receiver::wake_to_stop(sock);
        }
        for r in self.receivers.drain(..) {
            if r.join().is_err() {
                failure.get_or_insert_with(|| io::Error::other("a UDP receiver panicked"));
            }
        }
        failure.map_or(Ok(()), Err)
    }

    /// What a busy receiver of another worker handed over (module `dispatch::balance`), in the
    /// order it read them. Datagrams are counted and timed here (their receiver only peeked at
    /// their Call-ID); parsed messages were counted by their receiver.
    fn handle_handed(&mut self, batch: HandedBatch, now: Instant) {
        let HandedBatch { origin, reader, items } = batch;
        let n = items.len();
        for item in items {
            match item {
                HandedItem::Datagram { from, local, bytes, wait_ns } => {
                    self.d.handed_datagram(reader, from, local, bytes, wait_ns, now);
                }
                HandedItem::Parsed { from, local, msg, shard } => {
                    self.d.handle(shard, Input::Message { from, local, msg }, now);
                }
            }
        }
        self.handed.push((origin, n));
    }

    /// Ready when any source has something; records which. Polls only the sources that woke
    /// the task or were left ready (module `wakes`).
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        self.wakes.begin(cx);
        let mut any = false;
        if self.wakes.due(Source::Inbox) {
            match self.inbox.poll_recv_many(&mut self.wakes.context(Source::Inbox), &mut self.inbox_buf, INBOX_TURN) {
                Poll::Ready(n) => any |= n > 0,
                Poll::Pending => self.wakes.pending(Source::Inbox),
            }
        }
        if self.wakes.due(Source::Ctl) {
            match self.ctl_rx.poll_recv_many(&mut self.wakes.context(Source::Ctl), &mut self.ctl_buf, 64) {
                Poll::Ready(n) => any |= n > 0,
                Poll::Pending => self.wakes.pending(Source::Ctl),
            }
        }
        if self.sleep_at != NO_DEADLINE && !self.timer_fired && self.wakes.due(Source::Timer) {
            if self.timer.poll_elapsed(&mut self.wakes.context(Source::Timer)).is_ready() {
                self.timer_fired = true;
                any = true;
            } else {
                self.wakes.pending(Source::Timer);
            }
        }
        if self.wakes.due(Source::Woken) {
            // The next future is polled at once, so that it is registered to wake this task (a
            // notification meanwhile is kept as a permit, which makes it ready here).
            while self.woken.as_mut().poll(&mut self.wakes.context(Source::Woken)).is_ready() {
                self.woken.set(self.d.shards.timers().woken(self.d.id()));
                self.was_woken = true;
                any = true;
            }
            self.wakes.pending(Source::Woken);
        }
        if any {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    /// Runs the timers of this worker's due shards (no lock is taken for the others).
    ///
    /// Before the run looks at the deadlines, the worker publishes the earliest it can be armed
    /// for after it (the next look, a [`TICK`] from now), so that nothing published during the
    /// run wakes it. The run's own look is the one that follows the store (module
    /// `shard_timers`, "Memory order"); it walks the shards only when a deadline it knows of
    /// has passed (module `lookout`).
    ///
    /// After a run that found work the next look is at the next deadline, not a [`TICK`] later
    /// whatever the deadline: that look mostly found nothing, a wake-up of the worker for
    /// nothing after each run with work (callgrind, issue 21).
    fn run_timers(&mut self) {
        let now = Instant::now();
        let timers = self.d.shards.timers();
        let now_at = timers.encode(Some(now));
        let next_look = now_at.saturating_add(TICK.as_nanos() as u64);
        if next_look != self.armed {
            self.armed = next_look;
            timers.arm(self.d.id(), next_look);
        }
        if self.lookout.look(timers, self.d.id()) <= now_at && self.run_due_shards(now, now_at) {
            self.last_work = Some(now_at);
        }
    }

    /// `handle_timeouts` on this worker's shards whose deadline has passed; whether there was any.
    /// One pass reads each shard's deadline once: for the check, and (or, for a shard it ran,
    /// the deadline that run left) for the lookout, which a second pass over every shard
    /// read again (64 shards with one worker: ~1k instructions per timer run, issue 21). A
    /// deadline another thread lowers behind the pass is noted for the next look, and wakes
    /// this worker if it sleeps past it (module `shard_timers`). `now_at`: `now` encoded.
    fn run_due_shards(&mut self, now: Instant, now_at: u64) -> bool {
        let mut any = false;
        // Its own handle on the shards: the walk runs the dispatcher (`&mut self.d`).
        let shards = self.d.shards.clone();
        let d = &mut self.d;
        let earliest = shards.run_due(d.id(), self.step, now_at, |shard| {
            d.shards.timers().take_alarm(shard, now_at);
            d.handle_timeouts(shard, now);
            any = true;
        });
        self.lookout.walked(earliest);
        any
    }

    /// The earliest deadline of this worker's shards (encoded), looking at every one.
    fn scan_earliest(&self) -> u64 {
        self.d.shards.earliest(self.d.id(), self.step)
    }

    /// Sets the timer for the next run (see the module comment) and publishes it.
    fn arm(&mut self) {
        let tick = TICK.as_nanos() as u64;
        let mut earliest = self.lookout.earliest();
        loop {
            let next_look = self.last_work.map_or(0, |at| at.saturating_add(tick));
            let at = earliest.max(next_look);
            // Unchanged, unless the timer has fired for it: then it is set again.
            let sleep_set = at == self.sleep_at && (at == NO_DEADLINE || !self.timer.is_elapsed());
            if sleep_set && at == self.armed {
                return;
            }
            let raised = at > self.armed;
            let timers = self.d.shards.timers();
            if at != self.armed {
                self.armed = at;
                timers.arm(self.d.id(), at);
            }
            if !sleep_set {
                self.sleep_at = at;
                if let Some(when) = timers.decode(at) {
                    self.timer.reset(when);
                    // Registered again by the next look (a timer that fired holds no waker).
                    self.wakes.touch(Source::Timer);
                }
            }
            if !raised {
                return;
            }
            // A publisher that read the lower value did not wake this worker: look again now
            // that the new one is visible (module `shard_timers`, "Memory order").
            let again = self.lookout.look(self.d.shards.timers(), self.d.id());
            if again >= earliest {
                return;
            }
            earliest = again;
        }
    }

    fn start_drain(&mut self) {
        // Refuse new connections: the kernel resets what reaches a closed listener.
        for t in self.accept_tasks.drain(..) {
            t.abort();
        }
        tracing::debug!(worker = self.d.id(), "draining");
    }
}

/// What handles this worker's stream messages on its thread between the loop's turns (module
/// `stream::handler`): a dispatcher of its own, as each UDP receiver has.
struct StreamHandler<H> {
    d: Dispatcher<H>,
}

impl<H: SipHandler> stream::Handler for StreamHandler<H> {
    fn handle(&mut self, from: Peer, local: SocketAddr, msg: Message, now: Instant) {
        if !self.d.measure {
            return self.d.route(from, local, msg, now);
        }
        let mut clock = BatchClock::start();
        let kind = MsgType::of(&msg);
        self.d.route(from, local, msg, now);
        // Stream messages carry no kernel timestamp: service time only.
        let (service, _) = clock.lap(None);
        self.d.metrics().handled(kind, Wire::Tcp, service, None);
    }

    fn flush(&mut self) {
        self.d.egress.flush();
    }
}
