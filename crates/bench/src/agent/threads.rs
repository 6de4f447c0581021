//! `herald bench calls --single-socket --threads N`: N event loops, each on its own thread with
//! its own calls, callee dialogs, timers and statistics, all sending from one UDP socket, so the
//! proxy sees the load of several cores from one peer 4-tuple (issue 21 item 4: capacity from
//! one 4-tuple as the proxy's workers grow; one event loop topped out near 23,000 calls/s).
//!
//! One thread reads the socket and posts each message to the loop whose run id its Call-ID
//! carries ([`super::router`]). The first loop registers every user (to the shared address)
//! before the window and removes the bindings after it; every loop places `rate / N` calls per
//! second on the same arrival process, and their counts and latency histograms are added up
//! into one results file.

use super::driver;
use super::event_loop::{Agent, Mode};
use super::measure;
use super::net::{udp_socket, Endpoint};
use super::options::CallsOptions;
use super::progress::Progress;
use super::router::{Mailbox, Router};
use super::run::{calls_expiry_s, calls_grace_us, result_of, start_call, unregistered, us};
use super::stats::Stats;
use super::stop::StopFlag;
use crate::arrivals::Arrivals;
use crate::results::RunResult;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Threads at most (each an event loop; one more reads the socket).
pub const MAX_THREADS: usize = 64;

/// `herald bench calls`: with `threads` > 1 (one shared UDP socket) as described in the module,
/// else [`super::run::run_calls`]'s one event loop.
pub fn run_calls(opts: &CallsOptions, stop: &StopFlag) -> Result<RunResult, String> {
    if opts.common.threads <= 1 {
        return super::run::run_calls(opts, stop);
    }
    let c = &opts.common;
    let n = c.threads;
    if !(2..=MAX_THREADS).contains(&n) || !c.single_socket || c.users.is_empty() {
        return Err(format!("--threads {n} needs --single-socket, users, and at most {MAX_THREADS} threads"));
    }
    // Each loop runs the same process at rate / N; a trace's gaps cannot be split that way.
    if matches!(opts.arrivals, Arrivals::Trace { .. }) {
        return Err("--threads takes poisson or uniform arrivals, not a trace".into());
    }
    let what = |e: std::io::Error| format!("udp socket to {}: {e}", c.target);
    let socket = udp_socket(SocketAddr::new(c.local_ip, 0)).map_err(what)?;
    let mut seed_rng = SmallRng::seed_from_u64(c.seed.unwrap_or_else(|| {
        SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1)
            ^ std::process::id() as u64
    }));
    // Distinct run ids: they route every message to its loop.
    let mut run_ids: Vec<u32> = Vec::with_capacity(n);
    while run_ids.len() < n {
        let id = seed_rng.random::<u32>();
        if !run_ids.contains(&id) {
            run_ids.push(id);
        }
    }
    let mailboxes = (0..n).map(|_| Mailbox::new().map(Arc::new)).collect::<Result<Vec<_>, _>>().map_err(what)?;
    let router =
        Router::new(socket.try_clone().map_err(what)?, run_ids.iter().copied().zip(mailboxes.clone()).collect());
    let (ring_us, hold_us) = (us(opts.ring), us(opts.hold));
    let mut agents = Vec::with_capacity(n);
    for (i, mailbox) in mailboxes.iter().enumerate() {
        let caller = Endpoint::routed(socket.try_clone().map_err(what)?, mailbox.clone()).map_err(what)?;
        let callee = Endpoint::routed(socket.try_clone().map_err(what)?, mailbox.clone()).map_err(what)?;
        let rng = SmallRng::seed_from_u64(seed_rng.random());
        let mode = Mode::Calls { ring_us, hold_us };
        let mut agent = Agent::new(caller, callee, c.target, &c.domain, c.users.clone(), mode, rng, run_ids[i]);
        agent.quantum_us = c.quantum_us;
        agent.single_socket = true;
        agents.push(agent);
    }
    let result = std::thread::scope(|s| {
        let named = std::thread::Builder::new().name("bench-router".into()).spawn_scoped(s, || router.run());
        named.map_err(what)?;
        let result = measured(&mut agents, opts, stop);
        router.stop();
        result
    });
    let (first, _) = agents.split_first_mut().expect("two or more");
    Ok(unregistered(first, result?))
}

/// Registers the users from the first loop, runs every loop's window on its own thread, and
/// adds up what they counted. The router must be running.
fn measured(agents: &mut [Agent], opts: &CallsOptions, stop: &StopFlag) -> Result<RunResult, String> {
    let c = &opts.common;
    let n = agents.len();
    let grace = calls_grace_us(opts);
    agents[0].registrations.expires_s = calls_expiry_s(opts);
    driver::register_all(&mut agents[0], stop)?;
    let name = opts.arrivals.name();
    let rate = opts.arrivals.rate() / n as f64;
    let mut arrivals = (0..n)
        .map(|_| Arrivals::parse(&name, rate))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("--threads: {e}"))?;
    let before = measure::begin(c)?;
    let started_unix_ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
    let windows: Vec<driver::Window> = std::thread::scope(|s| {
        let runs: Vec<_> = agents
            .iter_mut()
            .zip(arrivals.iter_mut())
            .enumerate()
            .map(|(i, (agent, arrivals))| {
                let name = format!("bench-loop-{i}");
                std::thread::Builder::new().name(name).spawn_scoped(s, move || {
                    agent.stats = Stats::default();
                    // The first loop shows progress (its share of the calls).
                    let mut progress = Progress::new(c.progress && i == 0, "calls", agent.clock());
                    driver::run_window(agent, us(c.duration), Some((arrivals, start_call)), stop, &mut progress, grace)
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("--threads: {e}"))?;
        Ok::<_, String>(runs.into_iter().map(|r| r.join().expect("an event loop panicked")).collect())
    })?;
    let mut total = Stats::default();
    for agent in agents.iter() {
        total.merge(&agent.stats);
    }
    let after = measure::end(before, c, total.attempted);
    let window = driver::Window {
        length_us: windows.iter().map(|w| w.length_us).max().unwrap_or(0),
        interrupted: windows.iter().any(|w| w.interrupted),
    };
    Ok(result_of(c, &total, &window, name, started_unix_ms, after))
}
