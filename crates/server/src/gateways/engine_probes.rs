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
