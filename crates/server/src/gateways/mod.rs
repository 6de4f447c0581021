//! Gateway sets in the runtime (issue 18 items 1 and 5): the OPTIONS prober that keeps each
//! destination's health ([`prober`]), and their families on the metrics endpoint ([`metrics`]).
//! The sets themselves, their selection and the failover are the engine's
//! (`herald_core::gateways`); their configuration is `config::gateways` (`[[gateway_set]]`).

pub mod metrics;
pub mod prober;

pub use metrics::GatewayMetrics;
pub use prober::{ProbeSender, Prober};

mod engine_probes;

use crate::config::{GatewayProbing, GatewaySet as SetConfig};
use crate::shared::Shared;
use engine_probes::EngineProbes;
use herald_core::engine::ConfigUpdates;
use herald_core::gateways::Gateways;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::runtime::Handle;
use tokio::sync::{watch, Notify};

/// The `[[gateway_set]]` entries in force, for their `[gateway_set.probing]` settings: the
/// start-up file's, replaced by each reload before the engines get its sets (the reload's
/// engine-configuration builder calls [`ProbingSettings::replace`]).
#[derive(Debug, Clone, Default)]
pub struct ProbingSettings(Arc<Mutex<Vec<SetConfig>>>);

impl ProbingSettings {
    pub fn new(sets: &[SetConfig]) -> ProbingSettings {
        ProbingSettings(Arc::new(Mutex::new(sets.to_vec())))
    }

    /// The sets of a reloaded file.
    pub fn replace(&self, sets: &[SetConfig]) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = sets.to_vec();
    }

    fn get(&self) -> Vec<SetConfig> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

/// Probing that follows the configuration: stop it (or drop it) when the drain begins.
#[derive(Debug)]
pub struct Probing {
    stop: watch::Sender<bool>,
}

impl Drop for Probing {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// Probes every set of the engines' configuration whose `[gateway_set.probing]` is enabled,
/// through the engine shards, and starts again on the sets a reload publishes (`updates`):
/// destinations that stay keep their health, added ones are probed from then on, removed ones
/// no longer, each set with the probing settings of the file in force (`settings`, by set
/// name). `None` when the process has no room for another ping client.
pub(crate) fn start_probing(
    runtime: &Handle,
    updates: Arc<ConfigUpdates>,
    settings: ProbingSettings,
    shared: &Shared,
    shards: usize,
) -> Option<Probing> {
    // Reports are drained as they come; the bound only absorbs a burst of them.
    let most = (2 * settings.get().iter().map(|s| s.destinations.len()).sum::<usize>()).max(1024);
    let Some(sender) = EngineProbes::new(runtime, &shared.pings, shared.ctl.clone(), shards, most) else {
        tracing::error!("gateway probing cannot start: no room for another ping client");
        return None;
    };
    let sender = Arc::new(sender);
    let (stop, mut stopped) = watch::channel(false);
    let handle = runtime.clone();
    // Woken by each reload (a permit is kept if one comes while the sets are compared), not on
    // a period: an idle herald without gateway sets makes no system call for them.
    let reloaded = Arc::new(Notify::new());
    let wake = reloaded.clone();
    updates.on_publish(Box::new(move || wake.notify_one()));
    runtime.spawn(async move {
        let mut current = updates.latest().gateways.clone();
        let mut prober = probe(&handle, &current, &settings.get(), &sender, false);
        loop {
            tokio::select! {
                _ = reloaded.notified() => {}
                _ = stopped.wait_for(|s| *s) => return,
            }
            let latest = updates.latest().gateways.clone();
            if !Arc::ptr_eq(&latest, &current) {
                drop(prober);
                prober = probe(&handle, &latest, &settings.get(), &sender, true);
                current = latest;
            }
        }
    });
    Some(Probing { stop })
}

/// A [`Prober`] for the sets of `gateways` that probe; `None` when none does.
fn probe(
    runtime: &Handle,
    gateways: &Gateways,
    config: &[SetConfig],
    sender: &Arc<EngineProbes>,
    reloaded: bool,
) -> Option<Prober> {
    let sets: Vec<_> = gateways
        .iter()
        .filter_map(|set| {
            // A set without its entry (a builder that did not pass the reloaded file on) is
            // probed as `[gateway_set.probing]` defaults say.
            let probing =
                config.iter().find(|c| c.name == set.name).map_or_else(GatewayProbing::default, |c| c.probing.clone());
            probing.enabled.then(|| (set.clone(), probing))
        })
        .collect();
    let destinations: usize = sets.iter().map(|(s, _)| s.destinations.len()).sum();
    if sets.is_empty() {
        return None;
    }
    let what = if reloaded { "gateway probing restarted on the reloaded sets" } else { "gateway probing started" };
    tracing::info!(sets = sets.len(), destinations, "{what}");
    Some(Prober::start(runtime, sets, sender.clone()))
}
