//! REGISTER client (RFC 3261 §10.2): one registration per user with a constant Call-ID and
//! increasing CSeq across refreshes (§10.2.4), Contact on the callee socket, and digest answers to
//! 401/407 (§22.2); the REGISTER transactions (Timers E/F) are herald-core's, through
//! [`super::client_tx`]. Used for the callees of `bench calls`, as the load of `bench register`,
//! and for the periodic registrations of `bench users`.
//!
//! [`Registrations`] owns every user's registration; each entry point takes the run's
//! [`Context`] and pushes what should happen into an [`Outbox`].

use super::client_tx::{ClientTx, NewRequest, Reply, TimerSlot};
use super::context::Context;
use super::output::{Measure, Outbox, Owner, Side};
use super::stats::status_reason;
use super::timers::{Timer, TimerKind};
use super::wire::Request;
use herald_sip::Message;

pub struct Registration {
    pub call_id: String,
    pub cseq: u32,
    pub tx: Option<ClientTx>,
    challenged: bool,
    /// A 423 was answered by retrying with its Min-Expires (§10.2.8), once per registration.
    retried_brief: bool,
    /// The latest registration succeeded.
    pub registered: bool,
    /// Why the latest registration failed, if it did.
    pub error: Option<String>,
}

impl Registration {
    pub fn new(user: usize, run_id: u32) -> Registration {
        Registration {
            call_id: format!("r{user}.{run_id:x}@bench"),
            cseq: 0,
            tx: None,
            challenged: false,
            retried_brief: false,
            registered: false,
            error: None,
        }
    }
}

/// One registration per user (index = user).
pub struct Registrations {
    list: Vec<Registration>,
    /// Registrations count as the run's attempts (`bench register`), not as set-up.
    pub count_attempts: bool,
    /// Registering or unregistering the users around a window (not measured): a 503 is retried
    /// after its Retry-After instead of failing the run.
    pub setting_up: bool,
    /// Expires of every REGISTER sent.
    pub expires_s: u32,
}

impl Registrations {
    pub fn new(users: usize, run_id: u32) -> Registrations {
        Registrations {
            list: (0..users).map(|u| Registration::new(u, run_id)).collect(),
            count_attempts: false,
            setting_up: false,
            expires_s: 3600,
        }
    }

    pub fn get(&self, user: usize) -> Option<&Registration> {
        self.list.get(user)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Registration> + '_ {
        self.list.iter()
    }

    /// REGISTERs in flight.
    pub fn in_flight(&self) -> usize {
        self.list.iter().filter(|r| r.tx.is_some()).count()
    }

    /// Forgets the outcome of `user`'s latest registration (before unregistering it).
    pub fn reset(&mut self, user: usize) {
        if let Some(reg) = self.list.get_mut(user) {
            reg.registered = false;
            reg.error = None;
        }
    }

    /// Starts (or refreshes) user `user`'s registration; false when one is already in flight.
    pub fn register(&mut self, ctx: &mut Context, user: usize, out: &mut Outbox) -> bool {
        let Some(reg) = self.list.get_mut(user) else { return false };
        if reg.tx.is_some() {
            return false;
        }
        if self.count_attempts {
            out.record(Measure::Attempt);
        }
        reg.challenged = false;
        reg.retried_brief = false;
        self.send(ctx, user, None, out);
        true
    }

    fn send(&mut self, ctx: &mut Context, user: usize, auth: Option<(&'static str, String)>, out: &mut Outbox) {
        let (id, branch) = ctx.new_tx();
        let local = &ctx.callee_local;
        let name = &ctx.users[user].name;
        let reg = &mut self.list[user];
        reg.cseq += 1;
        let aor = format!("<sip:{name}@{}>", local.domain);
        let extra = format!("Expires: {}\r\n", self.expires_s);
        let bytes = local.request(&Request {
            method: "REGISTER",
            uri: &format!("sip:{}", local.domain),
            branch: &branch,
            from: &format!("{aor};tag={id:x}"),
            to: &aor,
            call_id: &reg.call_id,
            cseq: reg.cseq,
            routes: &[],
            contact_user: Some(name),
            auth: auth.as_ref().map(|(n, v)| (*n, v.as_str())),
            extra: &extra,
            body: None,
        });
        let request = NewRequest { id, method: "REGISTER", branch, bytes, dest: ctx.proxy, ack: None };
        let timer = TimerSlot { kind: TimerKind::RegisterTransaction, slot: user as u32 };
        reg.tx = Some(ClientTx::start(ctx, Side::Callee, Owner::Registration(user), timer, request, out));
    }

    /// The transport refused `user`'s REGISTER: `reason`.
    pub fn on_send_refused(&mut self, user: usize, reason: String, out: &mut Outbox) {
        self.done(user, Err(reason), out);
    }

    /// The REGISTER of transaction `id` of `user` went to the kernel at `at_us`.
    pub fn stamp(&mut self, user: usize, id: u32, at_us: u64) {
        if let Some(tx) = self.list.get_mut(user).and_then(|r| r.tx.as_mut()).filter(|tx| tx.id == id) {
            tx.sent_us = at_us;
        }
    }

    pub fn on_response(&mut self, ctx: &mut Context, msg: Message, out: &mut Outbox) {
        let user = msg.call_id().ok().and_then(parse_call_id).filter(|&u| u < self.list.len());
        let (Some(user), Some(status), Ok(via)) = (user, msg.status(), msg.top_via()) else {
            out.record(Measure::Stray);
            return;
        };
        let reg = &mut self.list[user];
        let Some(tx) = reg.tx.as_mut().filter(|tx| Some(tx.branch.as_str()) == via.branch()) else {
            out.record(Measure::Stray);
            return;
        };
        let Reply::Final(msg) = tx.on_response(ctx, msg, out) else { return };
        let sent = tx.sent_us;
        reg.tx = None;
        out.record(Measure::ResponseTime("REGISTER", ctx.rx_us.saturating_sub(sent)));
        if status < 300 {
            out.record(Measure::Transaction(true));
            self.done(user, Ok(()), out);
        } else if (status == 401 || status == 407) && !reg.challenged {
            reg.challenged = true;
            out.record(Measure::Transaction(true));
            let uri = format!("sip:{}", ctx.callee_local.domain);
            match ctx.credentials(user, &msg, status, "REGISTER", &uri) {
                Some(auth) => self.send(ctx, user, Some(auth), out),
                None => self.done(user, Err(status_reason(status)), out),
            }
        } else if status == 503 && self.setting_up {
            // RFC 3261 §21.5.4: the registrar is overloaded (or the AoR is full for now) and
            // says when to come back. Outside the measurement that is set-up pacing, not a
            // failure: retry after Retry-After (1 s without one, at most 10 s); the caller's
            // deadline still bounds the whole.
            let wait_s = msg.retry_after().ok().flatten().map_or(1, |r| r.seconds.clamp(1, 10));
            let at = ctx.now + u64::from(wait_s) * 1_000_000;
            out.arm(at, Timer { kind: TimerKind::RegisterRetry, slot: user as u32, generation: 0 });
        } else if let Some(min) = interval_too_brief(status, &msg).filter(|_| !reg.retried_brief) {
            // RFC 3261 §10.2.8: 423 Interval Too Brief names the shortest expiry the registrar
            // accepts; retry with it (for every user: the registrar's minimum is the same).
            // Refreshes keep their own schedule, so a time-scaled workload still refreshes as
            // often as its model says.
            out.record(Measure::Transaction(true));
            reg.retried_brief = true;
            self.expires_s = self.expires_s.max(min);
            self.send(ctx, user, None, out);
        } else {
            out.record(Measure::Transaction(false));
            self.done(user, Err(status_reason(status)), out);
        }
    }

    fn done(&mut self, user: usize, result: Result<(), String>, out: &mut Outbox) {
        let reg = &mut self.list[user];
        reg.tx = None;
        reg.registered = result.is_ok();
        match &result {
            Ok(()) if self.count_attempts => out.record(Measure::Success(None)),
            Err(reason) if self.count_attempts => out.record(Measure::Failure(reason.clone())),
            _ => {}
        }
        reg.error = result.err();
    }

    pub fn on_timer(&mut self, ctx: &mut Context, t: Timer, out: &mut Outbox) {
        let user = t.slot as usize;
        if t.kind == TimerKind::RegisterRetry {
            if self.setting_up && user < self.list.len() {
                self.register(ctx, user, out);
            }
            return;
        }
        let Some(tx) = self.list.get_mut(user).and_then(|r| r.tx.as_mut()).filter(|tx| tx.id == t.generation) else {
            return;
        };
        if tx.on_timer(ctx, out) {
            out.record(Measure::Transaction(false));
            self.done(user, Err("timeout".into()), out);
        }
    }

    /// Marks every registration still in flight as failed with `reason` (end of run).
    pub fn fail_all(&mut self, reason: &str, out: &mut Outbox) {
        for user in 0..self.list.len() {
            if self.list[user].tx.is_some() {
                self.done(user, Err(reason.to_string()), out);
            }
        }
    }
}

/// The Min-Expires of a 423 (retried once per registration: a registrar that refuses its own
/// minimum would otherwise loop us).
fn interval_too_brief(status: u16, msg: &Message) -> Option<u32> {
    (status == 423).then(|| msg.min_expires().ok().flatten()).flatten()
}

/// `r{user}.{run}@bench` → user index.
fn parse_call_id(id: &str) -> Option<usize> {
    id.strip_prefix('r')?.split('.').next()?.parse().ok()
}
