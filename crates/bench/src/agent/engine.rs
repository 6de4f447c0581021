//! The single-threaded event loop that plays both ends: it owns the caller and callee sockets,
//! the timer heap, the calls, callee dialogs and registrations, and dispatches every received
//! message to the caller ([`super::caller`]), callee ([`super::callee`]) or registration
//! ([`super::registration`]) logic. One thread keeps the generator's CPU per call low and
//! measurements free of lock contention.
//!
//! CPU: measured against herald at 300 calls/s, the generator spent ~85% of its CPU in the
//! kernel, because the loop woke for nearly every datagram (~13 per call) and paid a ppoll, a
//! recvmmsg per socket (often just EAGAIN) and a sendmmsg for each. The loop therefore runs on a
//! scheduling quantum (`--quantum-us`, like SIPp's `-timer_resol`): after a wake that found
//! input it does not look at the sockets again before one quantum has passed (timers still fire
//! on time), so one wake drains and answers everything that arrived meanwhile, with one
//! recvmmsg per readable socket and one sendmmsg per socket. The cost: our callee (and caller)
//! answers up to one quantum later than it could, which is part of what the proxy sees. The
//! measurements do not suffer: a received message is timed by its kernel receive stamp
//! (SO_TIMESTAMPNS), a sent request by the moment its datagram is handed to the kernel.

use super::callee::Dialog;
use super::caller::Call;
use super::net::{wait, Endpoint, Incoming};
use super::registration::Registration;
use super::slab::Slab;
use super::stats::Stats;
use super::timers::{next_interval, Timer, TimerKind, TimerQueue};
use super::users::User;
use super::wire::Local;
use crate::workload::UserModel;
use bytes::Bytes;
use herald_sip::text::push_hex;
use herald_sip::{Framing, Limits, Message};
use rand::rngs::SmallRng;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Instant;

/// RFC 3261 §17.1.1.1 defaults.
pub const T1_US: u64 = 500_000;
pub const T2_US: u64 = 4_000_000;
/// Timer B / F / H: 64·T1.
pub const TIMEOUT_US: u64 = 64 * T1_US;
/// Callee dialogs held at once; an INVITE beyond this gets 503 (bounded memory under floods).
pub const MAX_DIALOGS: usize = 1 << 20;

/// Which of the generator's two sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Caller,
    Callee,
}

/// What the run does besides answering.
pub enum Mode {
    /// `bench calls`: fixed ring and hold.
    Calls { ring_us: u64, hold_us: u64 },
    /// `bench register`: registrations with this expiry, counted as the run's attempts.
    Register { expires_s: u32 },
    /// `bench users`: the SPEC SIP user model.
    Users { model: UserModel },
}

/// A client transaction in flight (RFC 3261 §17.1): the request kept for retransmission.
pub struct ClientTx {
    /// Unique per transaction; timers carry it, so a stale timer never touches a newer one.
    pub id: u32,
    pub method: &'static str,
    pub branch: String,
    pub request: Bytes,
    pub dest: SocketAddr,
    pub sent_us: u64,
    pub interval_us: u64,
    /// A provisional response arrived (stops Timer A; Timer E continues at T2, §17.1.2.2).
    pub proceeding: bool,
}

pub struct Engine {
    epoch: Instant,
    pub now: u64,
    pub timers: TimerQueue,
    pub caller_ep: Endpoint,
    pub callee_ep: Endpoint,
    pub caller_local: Local,
    pub callee_local: Local,
    pub proxy: SocketAddr,
    pub users: Vec<User>,
    pub user_index: HashMap<String, usize>,
    pub calls: Slab<Call>,
    pub dialogs: Slab<Dialog>,
    pub dialog_ids: HashMap<String, (u32, u32)>,
    pub registrations: Vec<Registration>,
    pub stats: Stats,
    pub rng: SmallRng,
    pub run_id: u32,
    next_tx: u32,
    pub limits: Limits,
    pub mode: Mode,
    /// New calls, registrations and refreshes may start (false while draining).
    pub accepting: bool,
    /// Registrations count as the run's attempts (`bench register`), not as set-up.
    pub count_registrations: bool,
    /// Registering or unregistering the users around a window (not measured): a 503 is retried
    /// after its Retry-After instead of failing the run.
    pub setting_up: bool,
    /// Round-robin position for calls and registrations.
    pub next_user: usize,
    /// Expires of every REGISTER sent.
    pub register_expires_s: u32,
    inbox: Vec<Incoming>,
    /// Scheduling quantum, µs (0: wake for every datagram).
    pub quantum_us: u64,
    /// When the sockets last had input to handle.
    last_input_us: u64,
    /// Receive time (engine clock) of the message being dispatched: its kernel stamp when there
    /// is one, else the time it was read. Latencies end here.
    pub rx_us: u64,
    /// Requests queued but not yet flushed: (side, slot, transaction id), stamped at the flush.
    unstamped: Vec<(Side, u32, u32)>,
}

impl Engine {
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
    ) -> Engine {
        let local = |ep: &Endpoint| Local {
            transport: ep.via_transport(),
            hostport: ep.local_addr().to_string(),
            uri_param: ep.uri_param(),
            domain: domain.to_string(),
        };
        let user_index = users.iter().enumerate().map(|(i, u)| (u.name.clone(), i)).collect();
        let registrations = (0..users.len()).map(|i| Registration::new(i, run_id, domain)).collect();
        Engine {
            epoch: Instant::now(),
            now: 0,
            timers: TimerQueue::default(),
            caller_local: local(&caller_ep),
            callee_local: local(&callee_ep),
            caller_ep,
            callee_ep,
            proxy,
            users,
            user_index,
            calls: Slab::default(),
            dialogs: Slab::default(),
            dialog_ids: HashMap::new(),
            registrations,
            stats: Stats::default(),
            rng,
            run_id,
            next_tx: 1,
            limits: Limits::default(),
            mode,
            accepting: true,
            count_registrations: false,
            setting_up: false,
            next_user: 0,
            register_expires_s: 3600,
            inbox: Vec::with_capacity(64),
            quantum_us: 0,
            last_input_us: 0,
            rx_us: 0,
            unstamped: Vec::new(),
        }
    }

    /// Microseconds since the engine was created.
    pub fn clock(&mut self) -> u64 {
        self.now = self.epoch.elapsed().as_micros() as u64;
        self.now
    }

    pub fn stream(&self) -> bool {
        self.caller_ep.is_stream()
    }

    pub fn endpoint(&mut self, side: Side) -> &mut Endpoint {
        match side {
            Side::Caller => &mut self.caller_ep,
            Side::Callee => &mut self.callee_ep,
        }
    }

    pub fn local(&self, side: Side) -> &Local {
        match side {
            Side::Caller => &self.caller_local,
            Side::Callee => &self.callee_local,
        }
    }

    /// Queues a message; false when the transport refused it.
    pub fn send(&mut self, side: Side, bytes: Bytes, dest: SocketAddr) -> bool {
        self.endpoint(side).send(bytes, dest)
    }

    /// A fresh RFC 3261 branch (§8.1.1.7: starts with the magic cookie, unique per transaction).
    pub fn new_tx(&mut self) -> (u32, String) {
        let id = self.next_tx;
        self.next_tx = self.next_tx.wrapping_add(1).max(1);
        let mut branch = String::from("z9hG4bK");
        push_hex(&mut branch, u64::from(self.run_id), 0);
        branch.push('.');
        push_hex(&mut branch, u64::from(id), 0);
        (id, branch)
    }

    /// Sends a new client transaction's request and arms its timers: A/E (UDP only, RFC 3261
    /// §17.1.1.2, §17.1.2.2) and B/F (all transports). False on a transport error.
    pub fn start_tx(
        &mut self,
        side: Side,
        tx: &ClientTx,
        slot: u32,
        retransmit: TimerKind,
        timeout: TimerKind,
    ) -> bool {
        if !self.send(side, tx.request.clone(), tx.dest) {
            return false;
        }
        self.unstamped.push((side, slot, tx.id));
        if !self.stream() {
            self.timers.arm(self.now + tx.interval_us, Timer { kind: retransmit, slot, generation: tx.id });
        }
        self.timers.arm(self.now + TIMEOUT_US, Timer { kind: timeout, slot, generation: tx.id });
        true
    }

    /// A retransmission timer of `tx` fired: resend unless a provisional stopped Timer A, and arm
    /// the next one.
    pub fn retransmit_tx(&mut self, side: Side, tx: &mut ClientTx, slot: u32, kind: TimerKind) {
        let invite = tx.method == "INVITE";
        if invite && tx.proceeding {
            return;
        }
        if self.send(side, tx.request.clone(), tx.dest) {
            self.stats.retransmissions += 1;
        }
        tx.interval_us = if tx.proceeding { T2_US } else { next_interval(tx.interval_us, !invite, T2_US) };
        self.timers.arm(self.now + tx.interval_us, Timer { kind, slot, generation: tx.id });
    }

    /// Runs due timers, flushes, waits for input until `until_us` at the latest, and handles what
    /// arrived. Within one quantum of the last input, it only sleeps (until the quantum ends or a
    /// timer or `until_us` falls due) and returns; the caller loops.
    pub fn step(&mut self, until_us: u64) {
        self.clock();
        let mut fired = false;
        while let Some(t) = self.timers.pop_due(self.now) {
            self.on_timer(t);
            fired = true;
        }
        self.flush();
        let due = self.timers.next_due().unwrap_or(u64::MAX).min(until_us);
        let now = self.clock();
        let (sleep_us, poll) = plan_wait(now, due, self.last_input_us, self.quantum_us);
        if !poll && fired {
            // Awake for a timer anyway: a look at the sockets that does not block costs no
            // context switch (what dominates), and starts a new quantum.
            self.last_input_us = now;
            self.handle(wait([&self.caller_ep, &self.callee_ep], 0));
            return;
        }
        if !poll {
            if sleep_us > 0 {
                wait([], sleep_us);
            }
            return;
        }
        let readable = wait([&self.caller_ep, &self.callee_ep], sleep_us);
        if readable.contains(&true) {
            self.last_input_us = self.clock();
            self.handle(readable);
        }
    }

    /// Reads and handles the sockets flagged readable, then sends what that queued.
    fn handle(&mut self, [caller, callee]: [bool; 2]) {
        if caller {
            self.receive(Side::Caller);
        }
        if callee {
            self.receive(Side::Callee);
        }
        if caller || callee {
            self.flush();
        }
    }

    /// Writes both sockets' queues and stamps the requests among them with the time they were
    /// handed to the kernel (taken just before: on loopback the peer may answer while a long
    /// batch is still being written).
    fn flush(&mut self) {
        let at = self.clock();
        self.caller_ep.flush();
        self.callee_ep.flush();
        for (side, slot, id) in std::mem::take(&mut self.unstamped) {
            let tx = match side {
                Side::Caller => self.calls.get_slot_mut(slot).and_then(|(call, _)| {
                    if call.invite.as_ref().is_some_and(|tx| tx.id == id) && !call.challenged {
                        call.invite_started_us = at; // SRD starts with the first INVITE out
                    }
                    [call.invite.as_mut(), call.other.as_mut()].into_iter().flatten().find(|tx| tx.id == id)
                }),
                Side::Callee => self.registrations.get_mut(slot as usize).and_then(|r| r.tx.as_mut()),
            };
            if let Some(tx) = tx.filter(|tx| tx.id == id) {
                tx.sent_us = at;
            }
        }
    }

    fn receive(&mut self, side: Side) {
        let mut inbox = std::mem::take(&mut self.inbox);
        let limits = self.limits.clone();
        self.endpoint(side).receive(&mut inbox, &limits);
        let transport = if self.stream() { Framing::Stream } else { Framing::Datagram };
        let (read_us, realtime_ns) = (self.clock(), realtime_ns());
        for incoming in inbox.drain(..) {
            self.rx_us = match incoming.kernel_ns {
                Some(ns) => kernel_stamp_us(ns, realtime_ns, read_us),
                None => read_us,
            };
            // Hostile input is simply not ours: anything that does not parse is counted and
            // dropped (a UA may discard a malformed response, RFC 3261 §8.1.3.1).
            match Message::parse_as(incoming.bytes, &self.limits, transport) {
                Ok(msg) => self.dispatch(side, msg, incoming.from),
                Err(_) => self.stats.stray += 1,
            }
        }
        self.inbox = inbox;
    }

    fn dispatch(&mut self, side: Side, msg: Message, from: SocketAddr) {
        match (side, msg.is_request()) {
            (Side::Callee, true) => self.on_callee_request(&msg, from),
            (Side::Callee, false) => self.on_register_response(&msg),
            (Side::Caller, false) => self.on_caller_response(&msg),
            // Nobody calls the callers: requests there are answered 403 by nobody, just dropped.
            (Side::Caller, true) => self.stats.stray += 1,
        }
    }

    fn on_timer(&mut self, t: Timer) {
        use TimerKind::*;
        match t.kind {
            CallerRetransmit | CallerTimeout | CallerCancel | CallerHangUp => self.on_caller_timer(t),
            CalleeAnswer | CalleeRetransmit | CalleeAckTimeout | CalleeForget => self.on_callee_timer(t),
            RegisterRetransmit | RegisterTimeout | RegisterRefresh | RegisterRetry => self.on_register_timer(t),
            UserCall => self.on_user_call_timer(t),
        }
    }

    /// Nothing of the run is still in flight (callee dialogs lingering to absorb retransmissions
    /// do not count).
    pub fn idle(&self) -> bool {
        self.calls.is_empty() && self.registrations.iter().all(|r| r.tx.is_none())
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
        let u = self.next_user % self.users.len();
        self.next_user = self.next_user.wrapping_add(1);
        u
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

/// CLOCK_REALTIME in ns since the epoch, the clock of SO_TIMESTAMPNS.
fn realtime_ns() -> u64 {
    // SAFETY: clock_gettime writes one timespec.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A kernel receive stamp (`kernel_ns`, CLOCK_REALTIME) on the engine clock, given that the
/// engine read `now_us` when CLOCK_REALTIME said `realtime_ns`: the message is as much older than
/// `now_us` as its stamp is older than `realtime_ns`. A stamp from the future (the wall clock
/// was stepped back) counts as `now_us`; one older than the engine itself as its start.
pub fn kernel_stamp_us(kernel_ns: u64, realtime_ns: u64, now_us: u64) -> u64 {
    now_us.saturating_sub(realtime_ns.saturating_sub(kernel_ns) / 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_stamps_map_onto_the_engine_clock() {
        let real = 1_700_000_000_000_000_000;
        // Received 250.5 µs before the engine read 10 000 µs.
        assert_eq!(kernel_stamp_us(real - 250_500, real, 10_000), 9_750);
        assert_eq!(kernel_stamp_us(real, real, 10_000), 10_000);
        // Wall clock stepped: never in the future, never before the engine's start.
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
