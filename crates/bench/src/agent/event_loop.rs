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

use super::callee::Callee;
use super::caller::{Calls, Plan};
use super::context::Context;
use super::framing::Incoming;
use super::net::{wait, Endpoint};
use super::output::{Measure, Outbox, Output, Owner, SendKind, Side};
use super::registration::Registrations;
use super::stats::Stats;
use super::timers::{Timer, TimerKind, TimerQueue, TIMEOUT_US};
use super::user_workload::UserWorkload;
use super::users::User;
use super::wire::Local;
use crate::workload::UserModel;
use herald_sip::peek::Peek;
use herald_sip::{Limits, Message};
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
    /// callgrind); bounded by [`MAX_RESERVED`] whatever the rate.
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

    /// Writes both sockets' queues and stamps what they carried with the time it was handed to
    /// the kernel (taken just before: on loopback the peer may answer while a long batch is
    /// still being written): the requests, and our callee's answers (how long each was held).
    /// The callee's answers go first: they end transactions the proxy already holds and cost it
    /// little to relay, whereas behind a batch of new INVITEs they waited for the proxy's work on
    /// those (at 300 calls/s with a 10 ms quantum, SDD p50 0.33 ms vs 0.09-0.11 ms with no
    /// quantum, when the caller's batch went first).
    fn flush(&mut self) {
        // Most flushes of a quiet loop find nothing to write (a turn flushes before it waits
        // and after it handled input): then neither the clock nor the sockets are asked (~100
        // instructions a flush). A stream endpoint is always flushed: its flush also drives a
        // TLS handshake and its deadline.
        if !self.queued && self.caller_ep.is_drained() && self.callee_ep.is_drained() {
            return;
        }
        self.queued = false;
        let at = self.clock();
        self.callee_ep.flush();
        let requested_at = if self.unstamped.is_empty() { at } else { self.clock() };
        self.caller_ep.flush();
        for (owner, id) in self.unstamped.drain(..) {
            match owner {
                Owner::Call { slot, .. } => self.calls.stamp(slot, id, requested_at),
                // REGISTERs leave from the callee's socket.
                Owner::Registration(user) => self.registrations.stamp(user, id, at),
            }
        }
        for (key, due_us) in self.unstamped_answers.drain(..) {
            self.ctx.held.record(key, at.saturating_sub(due_us));
        }
    }

    fn receive(&mut self, side: Side) {
        let mut inbox = std::mem::take(&mut self.inbox);
        let limits = self.ctx.limits.clone();
        self.endpoint(side).receive(&mut inbox, &limits);
        let framing = self.endpoint(side).framing();
        let (read_us, realtime_ns) = (self.clock(), herald_sys::realtime_ns());
        for incoming in inbox.drain(..) {
            self.ctx.rx_us = match incoming.kernel_ns {
                Some(ns) => kernel_stamp_us(ns, realtime_ns, read_us),
                None => read_us,
            };
            if self.peeked(side, &incoming.bytes, incoming.from, &limits) {
                continue;
            }
            // Hostile input is simply not ours: anything that does not parse is counted and
            // dropped (a UA may discard a malformed response, RFC 3261 §8.1.3.1).
            match Message::parse_as(incoming.bytes, &self.ctx.limits, framing) {
                Ok(msg) => self.dispatch(side, msg, incoming.from),
                Err(_) => self.stats.stray += 1,
            }
        }
        self.inbox = inbox;
    }

    /// Handles a message its role can handle from a peek ([`peeked`]); true when it did.
    fn peeked(&mut self, side: Side, bytes: &[u8], from: SocketAddr, limits: &Limits) -> bool {
        let to_callee = match (side, self.single_socket) {
            (Side::Callee, false) => true,
            (Side::Caller, false) => false,
            // One socket: requests are the callee's; a REGISTER's responses are never
            // handled from a peek (their Call-ID is not a call's).
            (_, true) => !bytes.starts_with(b"SIP/"),
        };
        let handled = match to_callee {
            true => {
                peeked(bytes, limits, |peek| self.callee.on_peeked_request(&mut self.ctx, peek, from, &mut self.out))
            }
            false => peeked(bytes, limits, |peek| self.calls.on_peeked_response(&mut self.ctx, peek, &mut self.out)),
        };
        if handled {
            self.execute();
        }
        handled
    }

    fn dispatch(&mut self, side: Side, msg: Message, from: SocketAddr) {
        let (ctx, out) = (&mut self.ctx, &mut self.out);
        let side = match self.single_socket {
            // Callees receive the requests and REGISTER's responses, callers the rest.
            true if msg.is_request() || msg.cseq().is_ok_and(|c| c.method.as_str() == "REGISTER") => Side::Callee,
            true => Side::Caller,
            false => side,
        };
        match (side, msg.is_request()) {
            (Side::Callee, true) => self.callee.on_request(ctx, &msg, from, out),
            (Side::Callee, false) => self.registrations.on_response(ctx, msg, out),
            (Side::Caller, false) => self.calls.on_response(ctx, msg, out),
            // Nobody calls the callers: requests there are answered 403 by nobody, just dropped.
            (Side::Caller, true) => out.record(Measure::Stray),
        }
        self.execute();
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

    /// Carries out what the roles asked for, in order, including what that in turn asks for
    /// (a refused send fails its call, whose end lets the user model schedule the next one).
    fn execute(&mut self) {
        while !self.out.is_empty() {
            let mut batch = std::mem::take(&mut self.batch);
            self.out.swap_into(&mut batch);
            for output in batch.drain(..) {
                match output {
                    Output::Send { side, bytes, dest, kind } => self.send(side, bytes, dest, kind),
                    Output::Arm { at_us, timer } => self.timers.arm(at_us, timer),
                    Output::Record(measure) => self.stats.record(measure),
                    Output::CallEnded { caller } => {
                        if let Some(w) = &self.workload {
                            w.after_call(&mut self.ctx, caller, &mut self.out);
                        }
                    }
                }
            }
            self.batch = batch;
        }
    }

    /// Queues one message on `side`'s socket; a refusal is handled as `kind` says.
    fn send(&mut self, side: Side, bytes: bytes::Bytes, dest: SocketAddr, kind: SendKind) {
        let ok = self.endpoint(side).send(bytes, dest);
        self.queued |= ok;
        match kind {
            SendKind::Plain => {}
            SendKind::Answer { key, due_us } => {
                if ok {
                    self.unstamped_answers.push((key, due_us));
                }
            }
            SendKind::Retransmission => self.stats.retransmissions += u64::from(ok),
            SendKind::Request { owner, id } if ok => self.unstamped.push((owner, id)),
            SendKind::Request { owner, .. } | SendKind::Essential(owner) if !ok => self.refused(owner),
            SendKind::Essential(_) | SendKind::Request { .. } => {}
        }
    }

    /// The transport refused a request or 2xx ACK of `owner`: that call or registration fails
    /// with the transport's reason.
    fn refused(&mut self, owner: Owner) {
        let why = self.transport_failure();
        match owner {
            Owner::Call { slot, generation } => self.calls.on_send_refused(slot, generation, &why, &mut self.out),
            Owner::Registration(user) => self.registrations.on_send_refused(user, why, &mut self.out),
        }
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

/// Hands `bytes` to `role` as a [`Peek`] (its start line, and the few headers it reads) when it
/// may be a message a role handles that way: our callee's INVITEs, ACKs and BYEs, our callers'
/// provisionals and 2xx responses, every message of a call (see [`Callee::on_peeked_request`],
/// [`Calls::on_peeked_response`]). True when the role handled it; false for all else, which is
/// then parsed in full. Which messages to try is guessed from their first bytes, so that the
/// others (a CANCEL, a REGISTER's response, ...) do not pay for a peek before their parse: a
/// wrong guess costs only time, the role decides.
pub fn peeked(bytes: &[u8], limits: &Limits, role: impl FnOnce(&Peek<'_>) -> bool) -> bool {
    let worth_it = bytes.starts_with(b"SIP/2.0 1")
        || bytes.starts_with(b"SIP/2.0 2")
        || bytes.starts_with(b"ACK ")
        || bytes.starts_with(b"INVITE ")
        || bytes.starts_with(b"BYE ");
    worth_it && Peek::new(bytes, limits).is_ok_and(|peek| role(&peek))
}

/// Calls and dialogs [`Agent::reserve_calls`] makes room for at most (address space of ~100 MB;
/// its pages are touched only as the tables fill).
pub const MAX_RESERVED: usize = 1 << 18;

/// How many of what starts `rate` times a second over `window_us` and lives `life_us` are alive
/// at once, at most [`MAX_RESERVED`] (0 for a rate that is not a positive number).
pub fn live_at_once(rate: f64, window_us: u64, life_us: u64) -> usize {
    let n = rate * life_us.min(window_us) as f64 / 1e6;
    if n.is_finite() && n > 0.0 {
        (n.ceil() as usize).min(MAX_RESERVED)
    } else {
        0
    }
}

/// How the loop waits at `now` with the next timer (or deadline) at `due`, input last handled at
/// `last_input_us` and a quantum of `quantum_us`: (µs to wait, whether to watch the sockets).
/// Within the quantum it sleeps blind until the quantum ends or `due`, whichever is first;
/// after it, it polls the sockets until `due`. Waits are capped at 100 ms.
pub fn plan_wait(now: u64, due: u64, last_input_us: u64, quantum_us: u64) -> (u64, bool) {
    let quantum_end = last_input_us.saturating_add(quantum_us);
    if now < quantum_end {
        (quantum_end.min(due).saturating_sub(now).min(100_000), false)
    } else {
        (due.saturating_sub(now).min(100_000), true)
    }
}

/// A kernel receive stamp (`kernel_ns`, CLOCK_REALTIME) on the agent's clock, given that the
/// agent read `now_us` when CLOCK_REALTIME said `realtime_ns`: the message is as much older than
/// `now_us` as its stamp is older than `realtime_ns`. A stamp from the future (the wall clock
/// was stepped back) counts as `now_us`; one older than the agent itself as its start.
pub fn kernel_stamp_us(kernel_ns: u64, realtime_ns: u64, now_us: u64) -> u64 {
    now_us.saturating_sub(realtime_ns.saturating_sub(kernel_ns) / 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_reserved_for_what_lives_at_once_and_no_more() {
        // 200 calls/s of 1 s each: 200 alive; a dialog kept 33 s, but a window of 20 s starts
        // only 4,000.
        assert_eq!(live_at_once(200.0, 20_000_000, 1_000_000), 200);
        assert_eq!(live_at_once(200.0, 20_000_000, 33_000_000), 4_000);
        assert_eq!(live_at_once(0.5, 20_000_000, 1_000_000), 1);
        assert_eq!(live_at_once(1e9, u64::MAX, u64::MAX), MAX_RESERVED);
        for rate in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(live_at_once(rate, 20_000_000, 1_000_000), 0, "{rate}");
        }
    }

    #[test]
    fn kernel_stamps_map_onto_the_agent_clock() {
        let real = 1_700_000_000_000_000_000;
        // Received 250.5 µs before the agent read 10 000 µs.
        assert_eq!(kernel_stamp_us(real - 250_500, real, 10_000), 9_750);
        assert_eq!(kernel_stamp_us(real, real, 10_000), 10_000);
        // Wall clock stepped: never in the future, never before the agent's start.
        assert_eq!(kernel_stamp_us(real + 5_000_000, real, 10_000), 10_000);
        assert_eq!(kernel_stamp_us(real - 20_000_000, real, 10_000), 0);
    }

    #[test]
    fn quantum_defers_polling_but_not_timers() {
        // No quantum: poll right away until the timer.
        assert_eq!(plan_wait(1_000, 1_300, 1_000, 0), (300, true));
        // 400 µs into a 1 ms quantum: sleep blind to its end...
        assert_eq!(plan_wait(1_400, 5_000, 1_000, 1_000), (600, false));
        // ...unless a timer falls due first: wake for it exactly.
        assert_eq!(plan_wait(1_400, 1_550, 1_000, 1_000), (150, false));
        assert_eq!(plan_wait(1_400, 1_000, 1_000, 1_000), (0, false));
        // Quantum over: poll until the timer, capped at 100 ms.
        assert_eq!(plan_wait(2_000, 2_700, 1_000, 1_000), (700, true));
        assert_eq!(plan_wait(2_000, u64::MAX, 1_000, 1_000), (100_000, true));
        assert_eq!(plan_wait(0, u64::MAX, 0, u64::MAX), (100_000, false));
    }
}
