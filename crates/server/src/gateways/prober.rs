//! The gateway prober (issue 18 item 1): every `[gateway_set.probing] interval_ms`, one OPTIONS
//! (RFC 3261 §11) to each destination of every set that probes, sent by an engine shard as a
//! real client transaction (the engine's ping API, `herald_core::ping`), its outcome fed to the
//! destination's health (`herald_core::gateways::Health`): any final response proves a SIP
//! stack that answers, except the set's `failed_statuses` (408 and 503 by default: "cannot take
//! calls now"); no answer within `timeout_ms`, a transport error or a name that does not
//! resolve is a failed probe.
//!
//! It runs as tasks of the main thread's runtime, never on a worker: a worker's only cost is
//! handling the OPTIONS and its response like any other transaction. One task per destination,
//! their first probes spread over the first interval so that a set of many destinations does
//! not send in bursts; at most one probe per destination is outstanding (`timeout_ms` ≤
//! `interval_ms`). A state change made by a probe is logged at info with set, destination,
//! old → new and why (the engine logs those made by failed calls, the admin API a forced
//! state); the health counts every one (`herald_gateway_state_changes_total`). Stopping (`Prober::stop`, at the start of the drain)
//! ends every task before its next probe, so no new transaction holds up the drain.

use crate::config::GatewayProbing;
use herald_core::gateways::{Destination, GatewaySet, HealthRules};
use herald_core::ping::PingOutcome;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::runtime::Handle;
use tokio::sync::watch;

/// Sends one OPTIONS probe to a destination URI through an engine shard and completes with
/// its outcome ([`super::engine_probes::EngineProbes`]; tests script one).
pub trait ProbeSender: Send + Sync + 'static {
    /// Reported as timed out after `timeout` (the engine's own deadline, shorter than Timer F).
    fn probe(&self, uri: String, timeout: Duration) -> impl Future<Output = PingOutcome> + Send;
}

/// Running probe tasks; [`Prober::stop`] ends them.
#[derive(Debug)]
pub struct Prober {
    stop: watch::Sender<bool>,
}

impl Prober {
    /// Starts one task per destination of every set in `sets` whose `probing` is enabled, on
    /// `runtime`.
    pub fn start<P: ProbeSender>(
        runtime: &Handle,
        sets: Vec<(Arc<GatewaySet>, GatewayProbing)>,
        pinger: Arc<P>,
    ) -> Prober {
        let (stop, stopped) = watch::channel(false);
        for (set, probing) in sets.into_iter().filter(|(_, p)| p.enabled) {
            let n = set.destinations.len() as u32;
            for index in 0..set.destinations.len() {
                let stagger = probing.interval() * index as u32 / n.max(1);
                let task = Probe { set: set.clone(), index, probing: probing.clone(), pinger: pinger.clone() };
                let stopped = stopped.clone();
                runtime.spawn(task.run(stagger, stopped));
            }
        }
        Prober { stop }
    }

    /// Ends every probe task: none sends another probe (an outstanding one still ends in its
    /// engine by its timeout).
    pub fn stop(&self) {
        let _ = self.stop.send(true);
    }
}

impl Drop for Prober {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One destination's probe loop.
struct Probe<P> {
    set: Arc<GatewaySet>,
    index: usize,
    probing: GatewayProbing,
    pinger: Arc<P>,
}

impl<P: ProbeSender> Probe<P> {
    fn destination(&self) -> &Destination {
        &self.set.destinations[self.index]
    }

    async fn run(self, first: Duration, mut stopped: watch::Receiver<bool>) {
        let start = tokio::time::Instant::now() + first;
        let mut ticks = tokio::time::interval_at(start, self.probing.interval());
        // A probe that took its whole timeout delays the next, never doubles it.
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                _ = stopped.wait_for(|s| *s) => return,
            }
            let outcome = tokio::select! {
                o = self.probe() => o,
                _ = stopped.wait_for(|s| *s) => return,
            };
            self.record(outcome);
        }
    }

    /// One OPTIONS; a ping whose outcome never comes (an engine that lost it) fails a little
    /// after its own timeout instead of stopping the loop.
    async fn probe(&self) -> PingOutcome {
        let timeout = self.probing.timeout();
        let probe = self.pinger.probe(self.destination().uri.clone(), timeout);
        tokio::time::timeout(timeout + Duration::from_secs(1), probe).await.unwrap_or(PingOutcome::TimedOut)
    }

    fn record(&self, outcome: PingOutcome) {
        let ok = matches!(outcome, PingOutcome::Answered(s) if self.probing.alive(s));
        let rules: HealthRules = self.set.health;
        let health = &self.destination().health;
        let before = health.snapshot();
        if let Some(new) = health.record_probe(Instant::now(), ok, &rules) {
            let why = if ok {
                format!("{} in a row (last: {})", probes(rules.probe_successes_up, "good"), describe(outcome))
            } else {
                format!("{} in a row (last: {})", probes(rules.probe_failures_down, "failed"), describe(outcome))
            };
            tracing::info!(
                set = %self.set.name,
                destination = %self.destination().uri,
                from = before.state.as_str(),
                to = new.as_str(),
                why = %why,
                "gateway state changed"
            );
        } else if !ok {
            tracing::debug!(set = %self.set.name, destination = %self.destination().uri, outcome = %describe(outcome), "probe failed");
        }
    }
}

/// "1 good probe", "3 failed probes".
fn probes(n: u32, kind: &str) -> String {
    format!("{n} {kind} probe{}", if n == 1 { "" } else { "s" })
}

/// A probe's outcome in words, for the log.
fn describe(outcome: PingOutcome) -> String {
    match outcome {
        PingOutcome::Answered(s) => format!("answered {s}"),
        PingOutcome::TimedOut => "no answer in time".into(),
        PingOutcome::TransportError => "transport error".into(),
        PingOutcome::Unresolved(why) => format!("name not resolved: {why}"),
        PingOutcome::NotSent(why) => format!("not sent: {why}"),
    }
}

#[cfg(test)]
#[path = "prober_tests.rs"]
mod tests;
