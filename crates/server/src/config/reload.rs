//! The engine configuration of a reloaded file (`herald ctl reload`, SIGHUP; module `admin`):
//! as at start, with what must survive the reload carried over from the configuration in use.

use super::schema::Config;
use herald_core::engine::{EngineConfig, Listener, SourceRoute};
use herald_core::Seed;
use std::sync::Arc;

impl Config {
    /// [`Config::engine_config`] for a reload: the gateway destinations whose set name and URI
    /// stay keep the health they have in `previous` (state, counters, active calls), so a
    /// reload neither revives a dead gateway nor forgets a forced state. `bound`, `routes` and
    /// `seed` are those the engines were started with.
    pub fn reloaded_engine_config(
        &self,
        bound: &[Listener],
        routes: Arc<dyn SourceRoute>,
        seed: Seed,
        previous: &EngineConfig,
    ) -> EngineConfig {
        let mut next = self.engine_config(bound, routes, seed);
        next.gateways = Arc::new(super::gateways::to_core(&self.gateway_set, Some(&previous.gateways)));
        // The grid's epoch is the process's (set by the caller once): transactions already
        // scheduled on it stay aligned with the new ones.
        next.timers.absorb_grid = previous.timers.absorb_grid;
        next
    }
}
