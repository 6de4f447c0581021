//! Running the event loop over a measurement window: open-loop arrivals on their own schedule
//! (each scheduled from the previous *scheduled* time, never from "now", so a late loop does not
//! lower the offered rate), then a bounded drain, then leftovers counted as unfinished.
//!
//! A stream connection (TCP, TLS) that breaks does not end the window early: the load is open
//! loop, so every arrival the schedule still holds is offered and fails at once with the
//! transport's reason (a send on a closed connection fails without waiting). Ending early would
//! count only the calls that happened to be in flight, and a connection lost between two calls
//! (or a TLS 1.3 server that rejects our client certificate just after the handshake) would
//! leave a clean-looking run with exit status 0.

use super::event_loop::{Agent, Mode};
use super::progress::Progress;
use super::stop::StopFlag;
use super::timers::TIMEOUT_US;
use crate::arrivals::Arrivals;

/// How a window ended.
pub struct Window {
    /// Length of the window actually run, µs (shorter when stopped early).
    pub length_us: u64,
    pub interrupted: bool,
}

/// REGISTERs in flight at most while registering or unregistering every user.
pub const REGISTER_WINDOW: usize = 64;

/// What an arrival starts.
pub type OnArrival = fn(&mut Agent);

/// Runs arrivals for `length_us` (or until `stop`), then drains for at most `grace_us`.
pub fn run_window(
    agent: &mut Agent,
    length_us: u64,
    mut arrivals: Option<(&mut Arrivals, OnArrival)>,
    stop: &StopFlag,
    progress: &mut Progress,
    grace_us: u64,
) -> Window {
    let start = agent.clock();
    let end = start + length_us;
    let mut next_arrival = match &mut arrivals {
        Some((a, _)) => start + a.next_gap(&mut agent.ctx.rng).as_micros() as u64,
        None => u64::MAX,
    };
    let mut drain_until: Option<u64> = None;
    let mut window = Window { length_us, interrupted: false };
    let mut lost = false;
    loop {
        let now = agent.clock();
        if !lost && agent.transport_lost() {
            // Nothing in flight can complete now: fail it with the reason at once rather
            // than after its 64·T1 timeout.
            lost = true;
            agent.fail_in_flight();
        }
        if drain_until.is_none() && (now >= end || stop.is_stopped()) {
            window.interrupted = now < end;
            window.length_us = now.min(end) - start;
            agent.ctx.accepting = false;
            if window.interrupted || matches!(agent.mode, Mode::Users { .. }) {
                agent.hang_up_all();
            }
            drain_until = Some(now + grace_us);
        }
        if drain_until.is_none() {
            if let Some((a, on_arrival)) = &mut arrivals {
                while next_arrival <= now && next_arrival < end {
                    on_arrival(agent);
                    next_arrival += (a.next_gap(&mut agent.ctx.rng).as_micros() as u64).max(1);
                }
            }
        }
        if let Some(until) = drain_until {
            if agent.idle() || now >= until || agent.transport_lost() {
                break;
            }
        }
        progress.tick(now, &agent.stats, || agent.in_flight());
        // Draining, arrivals are over: only the drain deadline (and timers) wake the loop.
        let wake = match drain_until {
            Some(until) => until,
            None => next_arrival.min(end),
        };
        let wake = wake.min(progress.next_due());
        agent.step(wake);
    }
    agent.fail_in_flight();
    progress.finish();
    window
}

/// Waits until both connections are ready to carry SIP (the TLS handshakes are done; at once
/// for UDP and TCP), so that a handshake is set-up, not part of the first measured response
/// time, and a handshake or certificate failure ends the run before it starts, with the
/// rustls error, instead of leaving a window with nothing attempted.
pub fn connect(agent: &mut Agent, stop: &StopFlag) -> Result<(), String> {
    let deadline = agent.clock() + TIMEOUT_US;
    while agent.is_connecting() {
        if agent.transport_lost() {
            break;
        }
        if stop.is_stopped() || agent.now() > deadline {
            return Err(format!("connecting to {} did not finish", agent.proxy()));
        }
        agent.step(agent.now() + 100_000);
    }
    if agent.transport_lost() {
        return Err(format!("connecting to {} failed: {}", agent.proxy(), agent.transport_failure()));
    }
    Ok(())
}

/// Registers every user before a calls run, at most [`REGISTER_WINDOW`] at a time; Err names
/// the first user whose registration failed.
pub fn register_all(agent: &mut Agent, stop: &StopFlag) -> Result<(), String> {
    agent.registrations.setting_up = true;
    let result = register_all_now(agent, stop);
    agent.registrations.setting_up = false;
    result
}

fn register_all_now(agent: &mut Agent, stop: &StopFlag) -> Result<(), String> {
    let users = agent.users().len();
    let deadline = agent.clock() + 4 * TIMEOUT_US + users as u64 * 1000;
    let all: Vec<usize> = (0..users).collect();
    let mut next = 0;
    loop {
        let all_started = fill_register_window(agent, &all, &mut next);
        if let Some((user, reg)) = agent.registrations.iter().enumerate().find(|(_, r)| r.error.is_some()) {
            let error = reg.error.clone().unwrap_or_default();
            return Err(format!("registering {} at {} failed: {error}", agent.users()[user].name, agent.proxy()));
        }
        if all_started && agent.registrations.iter().all(|r| r.registered) {
            return Ok(());
        }
        if agent.transport_lost() {
            return Err(format!("registering users at {} failed: {}", agent.proxy(), agent.transport_failure()));
        }
        if stop.is_stopped() || agent.now() > deadline {
            return Err(format!("registering {users} users at {} did not finish", agent.proxy()));
        }
        agent.step(agent.now() + 100_000);
    }
}

/// Removes the bindings this run registered, at the end of a run: REGISTER with Expires: 0
/// for the same Contact, Call-ID and the next CSeq (RFC 3261 §10.2.2), at most
/// [`REGISTER_WINDOW`] at a time. Without it the registrar would go on routing calls for these
/// users to sockets that close with this process, and the next run against it would fork its
/// calls to dead contacts. Best effort and bounded (a few seconds): the measurement is already
/// taken. Returns the users whose removal failed, with the first reason.
pub fn unregister_all(agent: &mut Agent) -> (usize, Option<String>) {
    let count = agent.users().len();
    let regs = &mut agent.registrations;
    regs.expires_s = 0;
    regs.count_attempts = false;
    regs.setting_up = true;
    let users: Vec<usize> = (0..count).filter(|&u| regs.get(u).is_some_and(|r| r.registered)).collect();
    for &u in &users {
        regs.reset(u);
    }
    // Time for a 503's longest honoured Retry-After (10 s) or for UDP retransmissions, plus
    // the window's pace; an answered removal ends the wait at once.
    let deadline = agent.clock() + 12_000_000 + users.len() as u64 * 200;
    let mut next = 0;
    while !agent.transport_lost() && agent.now() <= deadline {
        let all_started = fill_register_window(agent, &users, &mut next);
        if all_started && agent.registrations.in_flight() == 0 {
            break;
        }
        agent.step(agent.now() + 100_000);
    }
    agent.registrations.setting_up = false;
    let registered = |u: usize| agent.registrations.get(u).is_some_and(|r| r.registered);
    let failed: Vec<usize> = users.into_iter().filter(|&u| !registered(u)).collect();
    let reason = failed.first().map(|&u| match agent.registrations.get(u).and_then(|r| r.error.clone()) {
        Some(e) => e,
        None if agent.transport_lost() => agent.transport_failure(),
        None => "no answer in time".into(),
    });
    (failed.len(), reason)
}

/// Starts the registrations of `users[*next..]` until [`REGISTER_WINDOW`] REGISTERs are in
/// flight (set-up and tear-down pace themselves instead of bursting every user at once);
/// returns whether every one of `users` has been started.
fn fill_register_window(agent: &mut Agent, users: &[usize], next: &mut usize) -> bool {
    for _ in agent.registrations.in_flight()..REGISTER_WINDOW {
        let Some(&user) = users.get(*next) else { break };
        agent.register(user);
        *next += 1;
    }
    *next == users.len()
}
