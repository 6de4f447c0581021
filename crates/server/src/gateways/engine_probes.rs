//! The prober's probes sent by the engine shards: a [`ProbeSender`] over the runtime's ping
//! client (`crate::pings`), which reports outcomes by token on one channel; this adapter hands
//! each outcome to the probe that waits for it.

use super::prober::ProbeSender;
use crate::pings::{PingReport, PingRouter, Pinger};
use crate::runtime::Ctl;
use herald_core::{PingOutcome, PingTarget};
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::runtime::Handle;
use tokio::sync::{mpsc, oneshot};

/// Probes waiting for their outcome, by token: at most one per destination.
type Waiting = Arc<Mutex<HashMap<u64, oneshot::Sender<PingOutcome>>>>;

pub(crate) struct EngineProbes {
    pinger: Pinger,
    waiting: Waiting,
}

impl EngineProbes {
    /// A ping client of `router` whose reports a task on `runtime` hands out; room for
    /// `in_flight` reports queued (the number of destinations probed). `None` when the router
    /// has no room for another client.
    pub(crate) fn new(
        runtime: &Handle,
        router: &Arc<PingRouter>,
        ctl: Vec<mpsc::UnboundedSender<Ctl>>,
        shards: usize,
        in_flight: usize,
    ) -> Option<EngineProbes> {
        let (pinger, mut reports) = router.client(ctl, shards, in_flight + 16)?;
        let waiting: Waiting = Arc::default();
        let handed = waiting.clone();
        runtime.spawn(async move {
            while let Some(PingReport { token, outcome }) = reports.recv().await {
                let waiter = handed.lock().unwrap_or_else(PoisonError::into_inner).remove(&token);
                if let Some(tx) = waiter {
                    let _ = tx.send(outcome);
                }
            }
        });
        Some(EngineProbes { pinger, waiting })
    }
}

/// Forgets a probe's token when its waiter goes (answered, timed out, or stopped).
struct Forget(Waiting, u64);

impl Drop for Forget {
    fn drop(&mut self) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.1);
    }
}

impl ProbeSender for EngineProbes {
    fn probe(&self, uri: String, timeout: Duration) -> impl Future<Output = PingOutcome> + Send {
        let (tx, rx) = oneshot::channel();
        let token = {
            // Held across the send, so that the report cannot come before the waiter is in.
            let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
            // Max-Forwards 0: the destination answers itself, as RFC 3261 §16.3 step 3 allows
            // a proxy for an OPTIONS (§11); a gateway's UA answers anyway.
            let token = self.pinger.ping(PingTarget::Uri(uri), None, 0, Some(timeout));
            if let Some(t) = token {
                waiting.insert(t, tx);
            }
            token
        };
        let waiting = self.waiting.clone();
        async move {
            let Some(token) = token else { return PingOutcome::NotSent("herald is stopping") };
            let _forget = Forget(waiting, token);
            rx.await.unwrap_or(PingOutcome::TimedOut)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ping the prober's probe handed to the workers, as `Ctl::Ping`.
    fn sent(ctl: &mut mpsc::UnboundedReceiver<Ctl>) -> (u64, herald_core::Ping) {
        match ctl.try_recv() {
            Ok(Ctl::Ping { token, ping, .. }) => (token, ping),
            _ => panic!("no ping handed to a worker"),
        }
    }

    #[tokio::test]
    async fn each_probe_gets_the_outcome_of_its_own_ping() {
        let router = Arc::new(PingRouter::default());
        let (tx, mut ctl) = mpsc::unbounded_channel();
        let probes = Arc::new(EngineProbes::new(&Handle::current(), &router, vec![tx], 4, 8).unwrap());
        let probe = |uri: &str| {
            let (probes, uri) = (probes.clone(), uri.to_string());
            tokio::spawn(async move { probes.probe(uri, Duration::from_millis(500)).await })
        };
        let first = probe("sip:192.0.2.1");
        let second = probe("sip:192.0.2.2;transport=tcp");
        tokio::task::yield_now().await;
        let (t1, p1) = sent(&mut ctl);
        let (t2, p2) = sent(&mut ctl);
        // The destination answers itself (Max-Forwards 0), within the set's timeout.
        assert_eq!((p1.max_forwards, p1.timeout), (0, Some(Duration::from_millis(500))));
        assert_eq!(p2.target, PingTarget::Uri("sip:192.0.2.2;transport=tcp".into()));
        assert_eq!(p1.target, PingTarget::Uri("sip:192.0.2.1".into()));
        router.deliver(t2, PingOutcome::Answered(404));
        router.deliver(t1, PingOutcome::TimedOut);
        assert_eq!(first.await.unwrap(), PingOutcome::TimedOut);
        assert_eq!(second.await.unwrap(), PingOutcome::Answered(404));
        // A report for a probe no longer waiting (or never sent) is dropped, and nothing is kept.
        router.deliver(t1, PingOutcome::Answered(200));
        tokio::task::yield_now().await;
        assert!(probes.waiting.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_probe_given_up_forgets_its_token() {
        let router = Arc::new(PingRouter::default());
        let (tx, _ctl) = mpsc::unbounded_channel();
        let probes = EngineProbes::new(&Handle::current(), &router, vec![tx], 1, 8).unwrap();
        let gave_up =
            tokio::time::timeout(Duration::from_millis(20), probes.probe("sip:192.0.2.9".into(), Duration::ZERO)).await;
        assert!(gave_up.is_err(), "no report came");
        assert!(probes.waiting.lock().unwrap().is_empty(), "the waiter is gone with its probe");
        // Without workers (herald stopping), a probe is not sent and says so.
        let (tx, rx) = mpsc::unbounded_channel();
        drop(rx);
        let stopping = EngineProbes::new(&Handle::current(), &router, vec![tx], 1, 8).unwrap();
        let outcome = stopping.probe("sip:192.0.2.9".into(), Duration::from_millis(10)).await;
        assert!(matches!(outcome, PingOutcome::NotSent(_)), "{outcome:?}");
    }
}
