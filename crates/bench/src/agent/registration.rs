//! REGISTER client (RFC 3261 §10.2): one registration per user with a constant Call-ID and
//! increasing CSeq across refreshes (§10.2.4), Contact on the callee socket, Timers E/F over UDP,
//! and digest answers to 401/407 (§22.2). Used for the callees of `bench calls`, as the load of
//! `bench register`, and for the periodic registrations of `bench users`.

use super::engine::{ClientTx, Engine, Side, T1_US};
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
    pub fn new(user: usize, run_id: u32, _domain: &str) -> Registration {
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

impl Engine {
    /// Starts (or refreshes) user `user`'s registration; false when one is already in flight.
    pub fn register(&mut self, user: usize) -> bool {
        if self.registrations[user].tx.is_some() {
            return false;
        }
        if self.count_registrations {
            self.stats.attempted += 1;
        }
        self.registrations[user].challenged = false;
        self.registrations[user].retried_brief = false;
        self.send_register(user, None);
        true
    }

    fn send_register(&mut self, user: usize, auth: Option<(&'static str, String)>) {
        let (id, branch) = self.new_tx();
        let local = &self.callee_local;
        let name = &self.users[user].name;
        let reg = &mut self.registrations[user];
        reg.cseq += 1;
        let aor = format!("<sip:{name}@{}>", local.domain);
        let extra = format!("Expires: {}\r\n", self.register_expires_s);
        let request = local.request(&Request {
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
        let tx = ClientTx {
            id,
            method: "REGISTER",
            branch,
            request,
            dest: self.proxy,
            sent_us: self.now,
            interval_us: T1_US,
            proceeding: false,
        };
        let ok =
            self.start_tx(Side::Callee, &tx, user as u32, TimerKind::RegisterRetransmit, TimerKind::RegisterTimeout);
        self.registrations[user].tx = Some(tx);
        if !ok {
            self.registration_done(user, Err(self.transport_failure()));
        }
    }

    pub fn on_register_response(&mut self, msg: &Message) {
        let user = msg.call_id().ok().and_then(parse_call_id).filter(|&u| u < self.registrations.len());
        let (Some(user), Some(status), Ok(via)) = (user, msg.status(), msg.top_via()) else {
            self.stats.stray += 1;
            return;
        };
        let reg = &mut self.registrations[user];
        let Some(tx) = reg.tx.as_mut().filter(|tx| Some(tx.branch.as_str()) == via.branch()) else {
            self.stats.stray += 1;
            return;
        };
        if status < 200 {
            tx.proceeding = true;
            return;
        }
        let sent = tx.sent_us;
        reg.tx = None;
        self.stats.response_time("REGISTER", self.rx_us.saturating_sub(sent));
        if status < 300 {
            self.stats.transaction(true);
            self.registration_done(user, Ok(()));
        } else if (status == 401 || status == 407) && !reg.challenged {
            reg.challenged = true;
            self.stats.transaction(true);
            let uri = format!("sip:{}", self.callee_local.domain);
            match self.credentials(user, msg, status, "REGISTER", &uri) {
                Some(auth) => self.send_register(user, Some(auth)),
                None => self.registration_done(user, Err(status_reason(status))),
            }
        } else if status == 503 && self.setting_up {
            // RFC 3261 §21.5.4: the registrar is overloaded (or the AoR is full for now) and
            // says when to come back. Outside the measurement that is set-up pacing, not a
            // failure: retry after Retry-After (1 s without one, at most 10 s); the caller's
            // deadline still bounds the whole.
            let wait_s = msg.retry_after().ok().flatten().map_or(1, |r| r.seconds.clamp(1, 10));
            let at = self.now + u64::from(wait_s) * 1_000_000;
            self.timers.arm(at, Timer { kind: TimerKind::RegisterRetry, slot: user as u32, generation: 0 });
        } else if let Some(min) = Self::interval_too_brief(status, msg).filter(|_| !reg.retried_brief) {
            // RFC 3261 §10.2.8: 423 Interval Too Brief names the shortest expiry the registrar
            // accepts; retry with it (for every user: the registrar's minimum is the same).
            // Refreshes keep their own schedule, so a time-scaled workload still refreshes as
            // often as its model says.
            self.stats.transaction(true);
            reg.retried_brief = true;
            self.register_expires_s = self.register_expires_s.max(min);
            self.send_register(user, None);
        } else {
            self.stats.transaction(false);
            self.registration_done(user, Err(status_reason(status)));
        }
    }

    /// The Min-Expires of a 423 (retried once per registration: a registrar that refuses its
    /// own minimum would otherwise loop us).
    fn interval_too_brief(status: u16, msg: &Message) -> Option<u32> {
        (status == 423).then(|| msg.min_expires().ok().flatten()).flatten()
    }

    fn registration_done(&mut self, user: usize, result: Result<(), String>) {
        let reg = &mut self.registrations[user];
        reg.tx = None;
        reg.registered = result.is_ok();
        match &result {
            Ok(()) if self.count_registrations => self.stats.succeed(None),
            Err(reason) if self.count_registrations => self.stats.fail(reason),
            _ => {}
        }
        reg.error = result.err();
    }

    pub fn on_register_timer(&mut self, t: Timer) {
        let user = t.slot as usize;
        if t.kind == TimerKind::RegisterRefresh {
            self.on_refresh_timer(user);
            return;
        }
        if t.kind == TimerKind::RegisterRetry {
            if self.setting_up && user < self.registrations.len() {
                self.register(user);
            }
            return;
        }
        let Some(mut tx) = self.registrations.get_mut(user).and_then(|r| r.tx.take()) else { return };
        if tx.id != t.generation {
            self.registrations[user].tx = Some(tx);
            return;
        }
        if t.kind == TimerKind::RegisterTimeout {
            self.stats.transaction(false);
            self.registration_done(user, Err("timeout".into()));
            return;
        }
        self.retransmit_tx(Side::Callee, &mut tx, t.slot, TimerKind::RegisterRetransmit);
        self.registrations[user].tx = Some(tx);
    }

    /// Marks every registration still in flight as unfinished (end of run).
    pub fn abandon_registrations(&mut self) {
        let reason = if self.transport_lost() { self.transport_failure() } else { "unfinished".into() };
        for user in 0..self.registrations.len() {
            if self.registrations[user].tx.is_some() {
                self.registration_done(user, Err(reason.clone()));
            }
        }
    }
}

/// `r{user}.{run}@bench` → user index.
fn parse_call_id(id: &str) -> Option<usize> {
    id.strip_prefix('r')?.split('.').next()?.parse().ok()
}
