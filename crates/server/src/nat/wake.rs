//! How the keep-alive loop sleeps while there is nothing to keep alive (issue 21, "idle is
//! idle"): a round that finds no NATed UDP binding and no edge flow leaves the loop waiting on
//! [`Wake::arrival`] instead of its interval, and the location store's binding alarm (every
//! REGISTER, a durable copy's load, replication) and the edge flows' alarm ring it when one is
//! stored. An idle herald with the default config then makes no periodic wake-up for NAT
//! (it made one round every 30 s).
//!
//! The alarms run on the thread that made the change (a worker, under the AoR's shard lock): one
//! atomic load while the loop is not watching, the NAT test of the AoR's bindings while it is.

use herald_core::nat::EdgeFlows;
use herald_core::registrar::Location;
use herald_core::Peer;
use herald_store::Binding;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::sync::Notify;

pub(crate) struct Wake {
    /// The loop is about to look, or has looked and found nothing: arrivals must ring.
    watching: AtomicBool,
    /// Holds one permit when rung with no one waiting, so an arrival between a round's look at
    /// its shard and the wait is not lost (at worst one extra round).
    notify: Notify,
    /// Both alarms are ours; without them the loop must not wait for arrivals it would not hear
    /// of, and keeps its interval.
    installed: bool,
}

impl Wake {
    /// Installs the store's binding alarm, which rings for bindings that `needs` keep-alives,
    /// and the edge flows' alarm (each once only: a second loop over the same store would keep
    /// its interval, never idle).
    pub(crate) fn install(
        store: &Location,
        edge: Option<&EdgeFlows>,
        needs: impl Fn(&Binding<Peer>) -> bool + Send + Sync + 'static,
    ) -> Arc<Wake> {
        let wake = Arc::new(Wake::new(true));
        let w = wake.clone();
        let stored = store.set_binding_alarm(Box::new(move |bindings| {
            if w.watching.load(Ordering::SeqCst) && bindings.iter().any(&needs) {
                w.notify.notify_one();
            }
        }));
        let w = wake.clone();
        let noted = edge.is_none_or(|e| {
            e.set_alarm(Box::new(move || {
                if w.watching.load(Ordering::SeqCst) {
                    w.notify.notify_one();
                }
            }))
            .is_ok()
        });
        if stored.is_ok() && noted {
            return wake;
        }
        tracing::warn!("NAT keep-alives: the store already has a binding alarm; rounds keep their interval");
        Arc::new(Wake::new(false))
    }

    fn new(installed: bool) -> Wake {
        Wake { watching: AtomicBool::new(false), notify: Notify::new(), installed }
    }

    /// From now on an arrival rings (before a round looks, so none falls between the look and
    /// the wait).
    pub(crate) fn watch(&self) {
        self.watching.store(true, Ordering::SeqCst);
    }

    /// The loop keeps its interval again: arrivals cost one load.
    pub(crate) fn unwatch(&self) {
        self.watching.store(false, Ordering::SeqCst);
    }

    /// Whether the loop may wait for arrivals after a round that found nothing.
    pub(crate) fn can_idle(&self) -> bool {
        self.installed
    }

    /// Until a NATed UDP binding or an edge flow is stored (or was, since [`Wake::watch`]).
    pub(crate) async fn arrival(&self) {
        self.notify.notified().await;
    }
}
