//! `bench users`: the SPEC SIP Infrastructure user model (seed 002, [`crate::workload`]) driven
//! per user: a registration refresh every interval, and after each call an exponential think
//! time before the next; each call answered, sent to voicemail or cancelled as the model draws.

use super::caller::Plan;
use super::engine::{Engine, Mode, TIMEOUT_US};
use super::timers::{Timer, TimerKind};
use crate::workload::CallPlan;
use rand::RngExt;

fn us(d: std::time::Duration) -> u64 {
    d.as_micros().min(u64::MAX as u128) as u64
}

impl Engine {
    /// Starts the user model: each user's first refresh at a uniformly random point of the
    /// interval (spreading the registrations as phones booted at random times would), and its
    /// first call after a think time.
    pub fn start_users(&mut self) {
        let Mode::Users { model } = self.mode else { return };
        let interval = us(model.register_interval()).max(1);
        for user in 0..self.users.len() {
            let first = self.now + self.rng.random_range(0..interval);
            self.timers.arm(first, Timer { kind: TimerKind::RegisterRefresh, slot: user as u32, generation: 0 });
            self.schedule_call(user);
        }
    }

    fn schedule_call(&mut self, user: usize) {
        let Mode::Users { model } = self.mode else { return };
        let think = us(model.think_time(&mut self.rng));
        self.timers.arm(self.now + think, Timer { kind: TimerKind::UserCall, slot: user as u32, generation: 0 });
    }

    /// A call of `caller` ended: in the user model the next one follows a think time.
    pub fn after_call(&mut self, caller: usize) {
        if self.accepting {
            self.schedule_call(caller);
        }
    }

    pub fn on_refresh_timer(&mut self, user: usize) {
        let Mode::Users { model } = self.mode else { return };
        if !self.accepting || user >= self.users.len() {
            return;
        }
        let next = self.now + us(model.register_interval()).max(1);
        self.timers.arm(next, Timer { kind: TimerKind::RegisterRefresh, slot: user as u32, generation: 0 });
        self.register(user);
    }

    pub fn on_user_call_timer(&mut self, t: Timer) {
        let Mode::Users { model } = self.mode else { return };
        let caller = t.slot as usize;
        if !self.accepting || caller >= self.users.len() {
            return;
        }
        let n = self.users.len();
        // Anyone but the caller (a single user calls itself).
        let callee = if n == 1 { 0 } else { (caller + 1 + self.rng.random_range(0..n - 1)) % n };
        let call = model.call(&mut self.rng);
        let plan = match call {
            CallPlan::Answered { ring, hold } | CallPlan::Voicemail { ring, hold } => {
                Plan { ring_us: us(ring), hold_us: us(hold), cancel_after_us: None, outcome: Some(call.outcome_name()) }
            }
            // The callee is told to ring longer than the caller waits, so the CANCEL wins.
            CallPlan::Cancelled { ring } => Plan {
                ring_us: us(ring) + TIMEOUT_US,
                hold_us: 0,
                cancel_after_us: Some(us(ring)),
                outcome: Some(call.outcome_name()),
            },
        };
        self.start_call(caller, callee, plan);
    }
}
