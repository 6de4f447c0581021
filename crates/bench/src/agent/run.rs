//! The three runs: set up both ends, register the callees, measure one window, and assemble
//! the [`RunResult`].

use super::caller::Plan;
use super::driver::{self, OnArrival};
use super::event_loop::{Agent, Mode};
use super::measure;
use super::net::Endpoint;
use super::options::{CallsOptions, CommonOptions, RegisterOptions, TransportKind, UsersOptions};
use super::progress::Progress;
use super::stats::Stats;
use super::stop::StopFlag;
use super::timers::TIMEOUT_US;
use crate::arrivals::Arrivals;
use crate::results::{RunResult, UsersOutcome, SCHEMA_VERSION};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub(super) fn us(d: Duration) -> u64 {
    d.as_micros().min(u64::MAX as u128 / 4) as u64
}

fn agent(opts: &CommonOptions, mode: Mode, stop: &StopFlag) -> Result<Agent, String> {
    if opts.users.is_empty() {
        return Err("no users".into());
    }
    let tls = match opts.transport.uses_tls() {
        true => Some(opts.tls.client(opts.target.ip())?),
        false => None,
    };
    let limits = herald_sip::Limits::default();
    let open = || match opts.transport {
        TransportKind::Udp => Endpoint::udp(opts.local_ip),
        TransportKind::Tcp => Endpoint::tcp(opts.local_ip, opts.target),
        TransportKind::Tls => Endpoint::tls(opts.local_ip, opts.target, tls.as_ref().expect("made above")),
        TransportKind::Ws | TransportKind::Wss => Endpoint::ws(opts.local_ip, opts.target, tls.as_ref(), &limits),
    };
    let what = |e: std::io::Error| format!("{} socket to {}: {e}", opts.transport.name(), opts.target);
    let caller = open().map_err(what)?;
    let callee = match (opts.transport, opts.callee_port) {
        _ if opts.single_socket => caller.shared_udp().ok_or("--single-socket needs UDP")?,
        (TransportKind::Udp, Some(port)) => Endpoint::udp_on(std::net::SocketAddr::new(opts.local_ip, port)),
        _ => open(),
    }
    .map_err(what)?;
    let mut seed_rng = SmallRng::seed_from_u64(opts.seed.unwrap_or_else(|| {
        SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1)
            ^ std::process::id() as u64
    }));
    let run_id = seed_rng.random::<u32>();
    let mut agent = Agent::new(caller, callee, opts.target, &opts.domain, opts.users.clone(), mode, seed_rng, run_id);
    agent.quantum_us = opts.quantum_us;
    agent.single_socket = opts.single_socket;
    driver::connect(&mut agent, stop)?;
    Ok(agent)
}

/// Measures `window` with the agent's registrations already in place.
fn measured(
    agent: &mut Agent,
    opts: &CommonOptions,
    arrivals: Option<(&mut Arrivals, OnArrival)>,
    arrivals_name: String,
    stop: &StopFlag,
    grace_us: u64,
    what: &'static str,
) -> Result<RunResult, String> {
    let before = measure::begin(opts)?;
    let started_unix_ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
    agent.stats = Stats::default();
    let mut progress = Progress::new(opts.progress, what, agent.clock());
    let window = driver::run_window(agent, us(opts.duration), arrivals, stop, &mut progress, grace_us);
    let after = measure::end(before, opts, agent.stats.attempted);
    Ok(result_of(opts, &agent.stats, &window, arrivals_name, started_unix_ms, after))
}

/// The results file of a window that ended as `window` says with `s` counted.
pub(super) fn result_of(
    opts: &CommonOptions,
    s: &Stats,
    window: &driver::Window,
    arrivals_name: String,
    started_unix_ms: u64,
    after: measure::After,
) -> RunResult {
    let seconds = (window.length_us as f64 / 1e6).max(1e-6);
    RunResult {
        schema: SCHEMA_VERSION,
        label: opts.label.clone(),
        target: opts.target.to_string(),
        transport: opts.transport.name().into(),
        arrivals: arrivals_name,
        started_unix_ms,
        duration_s: seconds,
        offered_rate: s.attempted as f64 / seconds,
        achieved_rate: s.succeeded as f64 / seconds,
        attempted: s.attempted,
        succeeded: s.succeeded,
        failed: s.failed,
        failures: s.failures.clone(),
        retransmissions: s.retransmissions,
        srd: s.srd.summary(),
        sdd: s.sdd.summary(),
        response_time: s.response_time.iter().map(|(m, r)| (m.to_string(), r.summary())).collect(),
        generator: after.generator,
        servers: after.servers,
        udp_before: after.udp_before,
        udp_after: after.udp_after,
        server_metrics: after.server_metrics,
        users: None,
        interrupted: window.interrupted,
        quantum_us: opts.quantum_us,
        unregister_failed: 0,
        unregister_error: None,
    }
}

/// Unregisters the run's users (see [`driver::unregister_all`]) and records the outcome.
pub(super) fn unregistered(agent: &mut Agent, mut result: RunResult) -> RunResult {
    let (failed, error) = driver::unregister_all(agent);
    agent.close();
    result.unregister_failed = failed as u64;
    result.unregister_error = error;
    result
}

/// `herald bench calls`: registers every user on the callee socket, then places calls from the
/// caller socket on the arrival schedule for `duration`, and drains.
/// One event loop ([`super::threads::run_calls`] runs several).
pub fn run_calls(opts: &CallsOptions, stop: &StopFlag) -> Result<RunResult, String> {
    let c = &opts.common;
    let (ring_us, hold_us) = (us(opts.ring), us(opts.hold));
    let mut agent = agent(c, Mode::Calls { ring_us, hold_us }, stop)?;
    agent.reserve_calls(opts.arrivals.rate(), us(c.duration), ring_us + hold_us);
    let grace = calls_grace_us(opts);
    agent.registrations.expires_s = calls_expiry_s(opts);
    driver::register_all(&mut agent, stop)?;
    let mut arrivals = opts.arrivals.clone();
    let name = arrivals.name();
    let result = measured(&mut agent, c, Some((&mut arrivals, start_call)), name, stop, grace, "calls")?;
    Ok(unregistered(&mut agent, result))
}

/// How long a calls run drains after its window: a call's ring and hold, a transaction's 64·T1.
pub(super) fn calls_grace_us(opts: &CallsOptions) -> u64 {
    us(opts.ring) + us(opts.hold) + TIMEOUT_US + 2_000_000
}

/// The Expires of a calls run's registrations: they must outlive the window and its drain
/// without refreshing.
pub(super) fn calls_expiry_s(opts: &CallsOptions) -> u32 {
    ((us(opts.common.duration) + calls_grace_us(opts)) / 1_000_000 + 120).min(u32::MAX as u64) as u32
}

/// One arrival of `bench calls`: the next user calls the one after it.
pub(super) fn start_call(a: &mut Agent) {
    let callee = a.round_robin();
    let caller = (callee + 1) % a.users().len();
    let Mode::Calls { ring_us, hold_us } = a.mode else { return };
    a.start_call(caller, callee, Plan { ring_us, hold_us, cancel_after_us: None, outcome: None });
}

/// `herald bench register`: each arrival refreshes the next idle user's registration.
pub fn run_register(opts: &RegisterOptions, stop: &StopFlag) -> Result<RunResult, String> {
    let c = &opts.common;
    let mut agent = agent(c, Mode::Register { expires_s: opts.expires.as_secs().min(u32::MAX as u64) as u32 }, stop)?;
    agent.registrations.expires_s = opts.expires.as_secs().min(u32::MAX as u64) as u32;
    agent.registrations.count_attempts = true;
    let mut arrivals = opts.arrivals.clone();
    let name = arrivals.name();
    let start: OnArrival = |a: &mut Agent| {
        // A user whose previous REGISTER is still open is skipped (§10.2: one at a time per
        // registration); when every user is busy the arrival fails rather than queueing.
        for _ in 0..a.users().len() {
            let user = a.round_robin();
            if a.register(user) {
                return;
            }
        }
        a.stats.attempted += 1;
        a.stats.fail("all users busy");
    };
    let result =
        measured(&mut agent, c, Some((&mut arrivals, start)), name, stop, TIMEOUT_US + 1_000_000, "registrations")?;
    Ok(unregistered(&mut agent, result))
}

/// `herald bench users`: registers every user, then runs the SPEC SIP user model for the window.
pub fn run_users(opts: &UsersOptions, stop: &StopFlag) -> Result<RunResult, String> {
    let c = &opts.common;
    let model = opts.model;
    let mut agent = agent(c, Mode::Users { model }, stop)?;
    agent.registrations.expires_s = model.register_expires().as_secs().max(1).min(u32::MAX as u64) as u32;
    driver::register_all(&mut agent, stop)?;
    agent.clock();
    agent.start_users();
    // Ringing can last 25 s (model time) and a BYE or CANCEL may need 64·T1 after it.
    let grace = 2 * TIMEOUT_US + us(Duration::from_secs_f64(25.0 / model.time_scale()));
    let mut result = measured(&mut agent, c, None, "spec-users".into(), stop, grace, "calls")?;
    let s = &agent.stats;
    result.users = Some(UsersOutcome {
        users: c.users.len() as u64,
        time_scale: model.time_scale(),
        transactions: s.transactions,
        transactions_failed: s.transactions_failed,
        meets_criterion: s.transactions > 0 && (s.transactions_failed as f64) < 0.0001 * s.transactions as f64,
        calls_by_outcome: s.outcomes.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
    });
    Ok(unregistered(&mut agent, result))
}
