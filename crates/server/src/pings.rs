//! OPTIONS of herald's own from runtime code (the engine's ping API, `herald_core::ping`):
//! the gateway prober's probes and the NAT keep-alives. The runtime glue is this file.
//!
//! How to use it (the prober, the keep-alive loop):
//! 1. [`PingRouter::client`] once, at start-up: a [`Pinger`] and the receiving end of a
//!    bounded channel of [`PingReport`]s. The router lives in `Shared::pings`; `Pinger` needs
//!    the workers' control senders and the shard count (`server.rs` has both).
//! 2. [`Pinger::ping`] for each OPTIONS: it picks a Call-ID, hands `Input::Ping` to the worker
//!    that owns the Call-ID's shard (where the response will be routed, `inbound::shard_of`),
//!    and returns the token.
//! 3. Read the receiver: exactly one report per token (answered with a status, timed out,
//!    transport error, unresolved, not sent). When the channel is full the report is dropped
//!    (logged at debug): size it for the pings you keep in flight, and treat a token never
//!    reported within its timeout plus a second as lost.
//!
//! A client's token carries its index in the top 8 bits (at most 255 clients), so a report
//! goes back to the one that asked without a table of tokens.

use crate::runtime::Ctl;
use herald_core::{inbound, Ping, PingOutcome, PingTarget, Seed};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

/// The top bits of a token: the client's index.
const CLIENT_SHIFT: u32 = 56;
#[allow(dead_code)] // used by `client`
const MAX_CLIENTS: usize = 255;

/// How one ping ended: the token [`Pinger::ping`] returned, and the engine's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PingReport {
    pub token: u64,
    pub outcome: PingOutcome,
}

/// Carries `Output::PingDone` to the client that sent the ping.
#[derive(Debug)]
pub struct PingRouter {
    clients: Mutex<Vec<mpsc::Sender<PingReport>>>,
    /// Starts every Call-ID of this process's pings (random: no two heralds, or two runs of
    /// one, reuse a Call-ID towards the same peer).
    call_id_prefix: String,
}

impl Default for PingRouter {
    fn default() -> PingRouter {
        let [a, b] = Seed::random().keys();
        PingRouter { clients: Mutex::default(), call_id_prefix: format!("hp{:08x}{:08x}-", a as u32, b as u32) }
    }
}

impl PingRouter {
    /// A new client: its [`Pinger`] and where its reports arrive (`capacity` at most queued).
    /// `ctl`: every worker's control sender (`Shared::ctl`); `shards`: the engine shard count.
    /// `None` when 255 clients exist already.
    #[allow(dead_code)] // until the gateway prober and the NAT keep-alives are wired in
    pub(crate) fn client(
        self: &Arc<Self>,
        ctl: Vec<mpsc::UnboundedSender<Ctl>>,
        shards: usize,
        capacity: usize,
    ) -> Option<(Pinger, mpsc::Receiver<PingReport>)> {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        if clients.len() >= MAX_CLIENTS {
            return None;
        }
        let id = clients.len() as u64;
        clients.push(tx);
        let pinger = Pinger { router: self.clone(), id, next: AtomicU64::new(0), ctl, shards: shards.max(1) };
        Some((pinger, rx))
    }

    /// Hands a ping's outcome to the client whose token it is (dispatch, for
    /// `Output::PingDone`).
    pub(crate) fn deliver(&self, token: u64, outcome: PingOutcome) {
        let id = (token >> CLIENT_SHIFT) as usize;
        let clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        let Some(tx) = clients.get(id) else { return };
        if tx.try_send(PingReport { token, outcome }).is_err() {
            tracing::debug!(token, ?outcome, "ping report dropped: its client's channel is full or closed");
        }
    }
}

/// Sends pings for one client (see the module docs).
#[derive(Debug)]
pub struct Pinger {
    router: Arc<PingRouter>,
    id: u64,
    next: AtomicU64,
    ctl: Vec<mpsc::UnboundedSender<Ctl>>,
    shards: usize,
}

impl Pinger {
    /// Sends an OPTIONS to `target` (Request-URI and To: `uri`, or the target's own URI) with
    /// Max-Forwards `max_forwards`, reported as timed out after `timeout` (at most Timer F).
    /// Returns the token its [`PingReport`] will carry; `None` when the runtime is stopping.
    pub fn ping(
        &self,
        target: PingTarget,
        uri: Option<String>,
        max_forwards: u8,
        timeout: Option<Duration>,
    ) -> Option<u64> {
        let n = self.next.fetch_add(1, Ordering::Relaxed) & ((1 << CLIENT_SHIFT) - 1);
        let token = (self.id << CLIENT_SHIFT) | n;
        let call_id = format!("{}{token:x}", self.router.call_id_prefix);
        let shard = inbound::shard_of(call_id.as_bytes(), self.shards);
        let ping = Ping { target, uri, call_id, max_forwards, timeout };
        let owner = self.ctl.get(shard % self.ctl.len().max(1))?;
        owner.send(Ctl::Ping { shard, token, ping }).ok()?;
        Some(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_reaches_the_client_whose_token_it_is() {
        let router = Arc::new(PingRouter::default());
        let (ctl_tx, mut ctl_rx) = mpsc::unbounded_channel();
        let (a, mut a_rx) = router.client(vec![ctl_tx.clone()], 4, 8).unwrap();
        let (b, mut b_rx) = router.client(vec![ctl_tx], 4, 8).unwrap();
        let target = PingTarget::Uri("sip:192.0.2.1".into());
        let ta = a.ping(target.clone(), None, 1, None).unwrap();
        let tb = b.ping(target, None, 1, None).unwrap();
        assert_ne!(ta, tb);
        // Each ping went to its Call-ID's shard, with its token.
        for want in [ta, tb] {
            let Some(Ctl::Ping { shard, token, ping }) = ctl_rx.try_recv().ok() else { panic!("no ping sent") };
            assert_eq!(token, want);
            assert_eq!(shard, inbound::shard_of(ping.call_id.as_bytes(), 4));
            assert_eq!(ping.max_forwards, 1);
        }
        router.deliver(tb, PingOutcome::Answered(200));
        router.deliver(ta, PingOutcome::TimedOut);
        assert_eq!(a_rx.try_recv().unwrap(), PingReport { token: ta, outcome: PingOutcome::TimedOut });
        assert_eq!(b_rx.try_recv().unwrap(), PingReport { token: tb, outcome: PingOutcome::Answered(200) });
        assert!(a_rx.try_recv().is_err() && b_rx.try_recv().is_err());
    }

    #[test]
    fn a_full_channel_drops_reports_instead_of_growing() {
        let router = Arc::new(PingRouter::default());
        let (ctl_tx, _ctl_rx) = mpsc::unbounded_channel();
        let (_a, mut rx) = router.client(vec![ctl_tx], 1, 2).unwrap();
        for t in 0..5 {
            router.deliver(t, PingOutcome::TimedOut);
        }
        assert_eq!((rx.try_recv().unwrap().token, rx.try_recv().unwrap().token), (0, 1));
        assert!(rx.try_recv().is_err());
        // A token of a client that does not exist is ignored.
        router.deliver(7 << CLIENT_SHIFT, PingOutcome::TimedOut);
    }
}
