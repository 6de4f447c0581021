//! Gateway sets in the runtime (issue 18 items 1 and 5): the OPTIONS prober that keeps each
//! destination's health ([`prober`]), and their families on the metrics endpoint ([`metrics`]).
//! The sets themselves, their selection and the failover are the engine's
//! (`herald_core::gateways`); their configuration is `config::gateways` (`[[gateway_set]]`).

pub mod metrics;
pub mod prober;

pub use metrics::GatewayMetrics;
pub use prober::{ProbeSender, Prober};

mod engine_probes;

use crate::config::GatewaySet as SetConfig;
use crate::shared::Shared;
use herald_core::gateways::Gateways;
use tokio::runtime::Handle;

/// Starts probing every set of `gateways` whose `[gateway_set.probing]` (matched by name in
/// `config`) is enabled, through the engine shards; `None` when no set probes. Stop it (or drop
/// it) when the drain begins.
pub(crate) fn start_prober(
    runtime: &Handle,
    gateways: &Gateways,
    config: &[SetConfig],
    shared: &Shared,
    shards: usize,
) -> Option<Prober> {
    let sets: Vec<_> = gateways
        .iter()
        .filter_map(|set| {
            let c = config.iter().find(|c| c.name == set.name)?;
            c.probing.enabled.then(|| (set.clone(), c.probing.clone()))
        })
        .collect();
    if sets.is_empty() {
        return None;
    }
    let destinations = sets.iter().map(|(s, _)| s.destinations.len()).sum();
    let Some(sender) =
        engine_probes::EngineProbes::new(runtime, &shared.pings, shared.ctl.clone(), shards, destinations)
    else {
        tracing::error!("gateway probing cannot start: no room for another ping client");
        return None;
    };
    tracing::info!(sets = sets.len(), destinations, "gateway probing started");
    Some(Prober::start(runtime, sets, std::sync::Arc::new(sender)))
}
