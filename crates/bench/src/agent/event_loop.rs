//! The single-threaded event loop that plays both ends: [`Agent`] owns the caller and callee
//! sockets, the timer heap, the statistics and the protocol roles ([`Calls`], [`Callee`],
//! [`Registrations`], the [`UserWorkload`]). It hands every received message and every due timer
//! to the role it belongs to, then carries out what the role asked for ([`Output`]): sends, timers,
//! measurements. The roles hold no socket, clock or statistics, and do not know each other. One
//! thread keeps the generator's CPU per call low and measurements free of lock contention.
//!
//! CPU: measured against herald at 300 calls/s, the generator spent ~85% of its CPU in the
//! kernel, because the loop woke for nearly every datagram (~13 per call) and paid a ppoll, a
//! recvmmsg per socket (often just EAGAIN) and a sendmmsg for each. The loop therefore runs on a
//! scheduling quantum (`--quantum-us`, like SIPp's `-timer_resol`; 10 ms by default): after a
//! wake that found input it does not wait for the sockets again before one quantum has passed
//! (timers and arrivals still fire on time, and such a wake-up also reads what has arrived), so
//! one wake drains and answers everything that arrived meanwhile, with one recvmmsg per readable
//! socket and one sendmmsg per socket. The cost: our callee (and caller)
//! answers up to one quantum later than it could, which is part of what the proxy sees. The
//! measurements do not suffer: a received message is timed by its kernel receive stamp
//! (SO_TIMESTAMPNS), a sent request by the moment its datagram is handed to the kernel, and the
//! time our callee held an answer (from its request's stamp to its own flush) is left out of
//! what the callers measure ([`super::held`]). What the batching does change is the load's
//! shape: a wake-up's messages reach the proxy together, and a message's latency includes the
//! proxy's work on those ahead of it (SIPp's loop sends in bursts too).

mod execute;
pub(super) mod input;
mod pacing;

use pacing::{live_at_once, plan_wait};

use super::callee::Callee;
use super::caller::{Calls, Plan};
use super::context::Context;
use super::framing::Incoming;
use super::net::{wait, Endpoint};
use super::output::{Outbox, Output, Owner, Side};
use super::registration::Registrations;
use super::stats::Stats;
use super::timers::{Timer, TimerKind, TimerQueue, TIMEOUT_US};
use super::user_workload::UserWorkload;
use super::users::User;
use super::wire::Local;
use crate::workload::UserModel;
use rand::rngs::SmallRng;
use std::net::SocketAddr;

/// What the run does besides answering.
pub enum Mode {
    /// `bench calls`: fixed ring and hold.
    Calls { ring_us: u64, hold_us: u64 },
    /// `bench register`: registrations with this expiry, counted as the run's attempts.
    Register { expires_s: u32 },
    /// `bench users`: the SPEC SIP user model.
    Users { model: UserModel },
}

pub struct Agent {
    pub ctx: Context,
    caller_ep: Endpoint,
    callee_ep: Endpoint,
    timers: TimerQueue,
    pub calls: Calls,
    pub callee: Callee,
    pub registrations: Registrations,
    workload: Option<UserWorkload>,
    pub mode: Mode,
    pub stats: Stats,
    /// What the roles asked for and the loop has not yet carried out.
    out: Outbox,
    /// The batch being carried out (kept for its allocation).
    batch: Vec<Output>,
    inbox: Vec<Incoming>,
    /// Scheduling quantum, µs (0: wake for every datagram).
    pub quantum_us: u64,
    /// When the sockets last had input to handle.
    last_input_us: u64,
    /// Requests queued but not yet flushed: (owner, transaction id), stamped at the flush.
    unstamped: Vec<(Owner, u32)>,
    /// Our callee's answers queued but not yet flushed: (held key, due), recorded at the flush.
    unstamped_answers: Vec<(u64, u64)>,
    /// Something was queued since the last flush (a stream's unwritten backlog does not count:
    /// that waits for the socket to be writable).
    queued: bool,
    /// Round-robin position for calls and registrations.
    next_user: usize,
    /// Caller and callee read one UDP socket (`--single-socket`): a message goes to its role by
    /// what it is, not by the side that read it.
    pub single_socket: bool,
}

impl Agent {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        caller_ep: Endpoint,
        callee_ep: Endpoint,
        proxy: SocketAddr,
        domain: &str,
        users: Vec<User>,
        mode: Mode,
        rng: SmallRng,
        run_id: u32,
    ) -> Agent {
        let local = |ep: &Endpoint| Local::new(ep.via_transport(), ep.sent_by(), ep.uri_param(), domain.to_string());
        let default_ring_us = match mode {
            Mode::Calls { ring_us, .. } => ring_us,
            _ => 0,
        };
        let workload = match mode {
            Mode::Users { model } => Some(UserWorkload::new(model)),
            _ => None,
        };
        let callee = Callee::new(&users, default_ring_us);
        let registrations = Registrations::new(users.len(), run_id);
        let reliable = caller_ep.is_stream();
        let mut ctx = Context::new(local(&caller_ep), local(&callee_ep), proxy, reliable, users, rng, run_id);
        ctx.callee_ring_us = default_ring_us;
        Agent {
            ctx,
            caller_ep,
            callee_ep,
            timers: TimerQueue::default(),
            calls: Calls::default(),
            callee,
            registrations,
            workload,
            mode,
            stats: Stats::default(),
            out: Outbox::default(),
            batch: Vec::new(),
            inbox: Vec::with_capacity(64),
            quantum_us: 0,
            last_input_us: 0,
            unstamped: Vec::new(),
            unstamped_answers: Vec::new(),
            queued: false,
            next_user: 0,
            single_socket: false,
        }
    }

    /// Microseconds since the agent was created.
    pub fn clock(&mut self) -> u64 {
        self.ctx.clock()
    }

    pub fn now(&self) -> u64 {
        self.ctx.now
    }

    pub fn users(&self) -> &[User] {
        &self.ctx.users
    }

    pub fn proxy(&self) -> SocketAddr {
        self.ctx.proxy
    }

    fn endpoint(&mut self, side: Side) -> &mut Endpoint {
        match side {
            Side::Caller => &mut self.caller_ep,
            Side::Callee => &mut self.callee_ep,
        }
    }

    /// Ends both stream connections politely (see [`Endpoint::close`]): the run is over.
    pub fn close(&mut self) {
        self.caller_ep.close();
        self.callee_ep.close();
    }

    /// Room for what a run placing `rate` calls per second over `window_us`, each ringing and
    /// holding `call_us`, holds at once: its calls in flight, and our callee's dialogs, kept
    /// 64·T1 after their BYE over UDP (Timer J, §17.2.2). Grown a call at a time instead, the
    /// tables were copied and rehashed as they grew (~400 instructions per call over a 20-s run,
    /// callgrind); bounded by `pacing::MAX_RESERVED` whatever the rate.
    pub fn reserve_calls(&mut self, rate: f64, window_us: u64, call_us: u64) {
        self.calls.reserve(live_at_once(rate, window_us, call_us + 1_000_000));
        self.callee.reserve(live_at_once(rate, window_us, call_us + TIMEOUT_US + 1_000_000));
    }

    /// Starts one call from user `caller` to user `callee`.
    pub fn start_call(&mut self, caller: usize, callee: usize, plan: Plan) {
        self.calls.start(&mut self.ctx, caller, callee, plan, &mut self.out);
        self.execute();
    }

    /// Starts (or refreshes) user `user`'s registration; false when one is already in flight.
    pub fn register(&mut self, user: usize) -> bool {
        let started = self.registrations.register(&mut self.ctx, user, &mut self.out);
        self.execute();
        started
    }

    /// Starts the user model (`bench users`; nothing otherwise).
    pub fn start_users(&mut self) {
        if let Some(w) = &self.workload {
            w.start(&mut self.ctx, &mut self.out);
        }
        self.execute();
    }

    /// Drain: hang up every held call now instead of at the end of its hold.
    pub fn hang_up_all(&mut self) {
        self.calls.hang_up_all(&self.ctx, &mut self.out);
        self.execute();
    }

    /// Ends every call and registration still in flight: failed with the transport's reason
    /// when the connection is gone, else as unfinished.
    pub fn fail_in_flight(&mut self) {
        let reason = if self.transport_lost() { self.transport_failure() } else { "unfinished".into() };
        self.calls.fail_all(&reason, &mut self.out);
        self.registrations.fail_all(&reason, &mut self.out);
        self.execute();
    }

    /// Runs due timers, flushes, waits for input until `until_us` at the latest, and handles what
    /// arrived. Within one quantum of the last input, it only sleeps (until the quantum ends or a
    /// timer or `until_us` falls due) and returns, unless a timer ran or something was queued
    /// (an arrival): then it reads what has arrived without blocking and flushes it all at once;
    /// the caller loops.
    pub fn step(&mut self, until_us: u64) {
        let start = self.clock();
        let fired = self.run_due_timers();
        let due = self.timers.next_wake().unwrap_or(u64::MAX).min(until_us);
        // The clock again only when timers ran (their work takes time): read twice back to back,
        // it cost ~80 instructions a wake-up (callgrind).
        let now = if fired { self.clock() } else { start };
        let (sleep_us, poll) = plan_wait(now, due, self.last_input_us, self.quantum_us);
        if !poll && (fired || self.queued) {
            // Awake for a timer or an arrival anyway: a look at the sockets that does not block
            // costs no context switch (what dominates), what it finds leaves in the same flush
            // as the arrival's INVITE (the proxy is woken once, not once for the INVITE and
            // again at the quantum's end), and it starts a new quantum.
            self.last_input_us = now;
            self.handle(self.wait_input(0));
            self.flush();
            return;
        }
        self.flush();
        if !poll {
            if sleep_us > 0 {
                wait([], sleep_us);
            }
            return;
        }
        let readable = self.wait_input(sleep_us);
        if readable.contains(&true) {
            self.last_input_us = self.clock();
            self.handle(readable);
        }
    }

    /// Waits up to `timeout_us` for input: which of (caller, callee) is readable. With one
    /// socket behind both endpoints (`--single-socket`) it is polled and read once, as the
    /// caller's ([`Agent::dispatch`] hands each message to its role): polling it as both made
    /// every wake-up read the socket twice, the second recvmmsg finding nothing.
    fn wait_input(&self, timeout_us: u64) -> [bool; 2] {
        if self.single_socket {
            let [readable] = wait([&self.caller_ep], timeout_us);
            [readable, false]
        } else {
            wait([&self.caller_ep, &self.callee_ep], timeout_us)
        }
    }

    /// Runs every timer due by the clock as last read; true when one ran.
    fn run_due_timers(&mut self) -> bool {
        let mut fired = false;
        while let Some(t) = self.timers.pop_due(self.ctx.now) {
            self.on_timer(t);
            fired = true;
        }
        fired
    }

    /// Reads and handles the sockets flagged readable, runs the timers due by then, and sends
    /// what all that queued. The timers include those the input armed for "now" (a callee that
    /// answers without ringing, a caller that hangs up without holding) and lax ones waiting
    /// for a wake-up: their messages leave in the same sendmmsg as the rest, instead of in a
    /// second one that could wake the proxy a second time.
    fn handle(&mut self, [caller, callee]: [bool; 2]) {
        if caller {
            self.receive(Side::Caller);
        }
        if callee {
            self.receive(Side::Callee);
        }
        if caller || callee {
            self.run_due_timers();
            self.flush();
        }
    }

    fn on_timer(&mut self, t: Timer) {
        use TimerKind::*;
        let (ctx, out) = (&mut self.ctx, &mut self.out);
        match t.kind {
            CallerTransaction | CallerRingLimit | CallerCancel | CallerHangUp => self.calls.on_timer(ctx, t, out),
            CalleeAnswer | CalleeRetransmit | CalleeAckTimeout | CalleeForget => self.callee.on_timer(ctx, t, out),
            RegisterTransaction | RegisterRetry => self.registrations.on_timer(ctx, t, out),
            RegisterRefresh => {
                if let Some(w) = &self.workload {
                    w.on_refresh_timer(ctx, t.slot as usize, &mut self.registrations, out);
                }
            }
            UserCall => {
                if let Some(w) = &self.workload {
                    w.on_call_timer(ctx, t.slot as usize, &mut self.calls, out);
                }
            }
        }
        self.execute();
    }

    /// Nothing of the run is still in flight (callee dialogs lingering to absorb retransmissions
    /// do not count).
    pub fn idle(&self) -> bool {
        self.calls.is_empty() && self.registrations.in_flight() == 0
    }

    /// Calls and REGISTERs in flight.
    pub fn in_flight(&self) -> usize {
        self.calls.len() + self.registrations.in_flight()
    }

    /// Both connections are ready to carry SIP (TLS handshakes and WebSocket upgrades done; at
    /// once for UDP and TCP).
    pub fn is_connecting(&self) -> bool {
        self.caller_ep.is_connecting() || self.callee_ep.is_connecting()
    }

    /// A stream transport (TCP, TLS) broke; it cannot recover, so every later send fails.
    pub fn transport_lost(&self) -> bool {
        self.caller_ep.is_closed() || self.callee_ep.is_closed()
    }

    /// The failure reason of work lost to the transport: "transport", followed by the
    /// connection's own error when it has one (a TLS handshake or certificate error as rustls
    /// words it), so that a results file says *why* and not just *that* calls failed. Either
    /// side's error explains a lost call: a call needs both connections.
    pub fn transport_failure(&self) -> String {
        match self.caller_ep.error().or(self.callee_ep.error()) {
            Some(error) => format!("transport: {error}"),
            None => "transport".into(),
        }
    }

    /// Picks the next user round-robin.
    pub fn round_robin(&mut self) -> usize {
        let u = self.next_user % self.ctx.users.len();
        self.next_user = self.next_user.wrapping_add(1);
        u
    }
}
