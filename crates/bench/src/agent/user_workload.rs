//! `bench users`: the SPEC SIP Infrastructure user model (seed 002, [`crate::workload`]) driven
//! per user: a registration refresh every interval, and after each call an exponential think
//! time before the next; each call answered, sent to voicemail or cancelled as the model draws.
//!
//! [`UserWorkload`] owns only the model; the calls and registrations it starts belong to
//! [`Calls`] and [`Registrations`], lent to it by the event loop.

use super::caller::{Calls, Plan};
use super::context::Context;
use super::output::Outbox;
use super::registration::Registrations;
use super::timers::{Timer, TimerKind, TIMEOUT_US};
use crate::workload::{CallPlan, UserModel};
use rand::RngExt;

fn us(d: std::time::Duration) -> u64 {
    d.as_micros().min(u64::MAX as u128) as u64
}

pub struct UserWorkload {
    model: UserModel,
}

impl UserWorkload {
    pub fn new(model: UserModel) -> UserWorkload {
        UserWorkload { model }
    }

    /// Starts the user model: each user's first refresh at a uniformly random point of the
    /// interval (spreading the registrations as phones booted at random times would), and its
    /// first call after a think time.
    pub fn start(&self, ctx: &mut Context, out: &mut Outbox) {
        let interval = us(self.model.register_interval()).max(1);
        for user in 0..ctx.users.len() {
            let first = ctx.now + ctx.rng.random_range(0..interval);
            out.arm(first, Timer { kind: TimerKind::RegisterRefresh, slot: user as u32, generation: 0 });
            self.schedule_call(ctx, user, out);
        }
    }

    fn schedule_call(&self, ctx: &mut Context, user: usize, out: &mut Outbox) {
        let think = us(self.model.think_time(&mut ctx.rng));
        out.arm(ctx.now + think, Timer { kind: TimerKind::UserCall, slot: user as u32, generation: 0 });
    }

    /// A call of `caller` ended: the next one follows a think time.
    pub fn after_call(&self, ctx: &mut Context, caller: usize, out: &mut Outbox) {
        if ctx.accepting {
            self.schedule_call(ctx, caller, out);
        }
    }

    /// Refreshes `user`'s registration and schedules the next refresh.
    pub fn on_refresh_timer(&self, ctx: &mut Context, user: usize, regs: &mut Registrations, out: &mut Outbox) {
        if !ctx.accepting || user >= ctx.users.len() {
            return;
        }
        let next = ctx.now + us(self.model.register_interval()).max(1);
        out.arm(next, Timer { kind: TimerKind::RegisterRefresh, slot: user as u32, generation: 0 });
        regs.register(ctx, user, out);
    }

    /// `caller`'s think time is over: it calls someone, as the model draws.
    pub fn on_call_timer(&self, ctx: &mut Context, caller: usize, calls: &mut Calls, out: &mut Outbox) {
        if !ctx.accepting || caller >= ctx.users.len() {
            return;
        }
        let n = ctx.users.len();
        // Anyone but the caller (a single user calls itself).
        let callee = if n == 1 { 0 } else { (caller + 1 + ctx.rng.random_range(0..n - 1)) % n };
        let call = self.model.call(&mut ctx.rng);
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
        calls.start(ctx, caller, callee, plan, out);
    }
}
