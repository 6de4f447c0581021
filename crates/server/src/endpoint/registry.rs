//! The metric families other areas of herald add to the scrape (the location store, Redis,
//! gateways, the admin API, ...): a `prometheus-client` [`Registry`] shared by every clone of a
//! [`Stats`]. See the module doc of `endpoint` for the pattern.
//!
//! The lock is taken by a registration (at start) and by a scrape (a reader), never by a worker:
//! what the hot path counts lives in the area's own atomics, which its collector reads.

use crate::stats::Stats;
use prometheus_client::collector::Collector;
use prometheus_client::registry::{Metric, Registry};
use std::sync::PoisonError;

impl Stats {
    /// Adds a collector's families to every scrape of the metrics endpoint: its
    /// [`Collector::encode`] runs at each scrape and reads the area's own counters (atomics the
    /// hot path bumps without a lock). Family names start with `herald_<area>_` and are not
    /// used by another area. Every clone of this `Stats` sees it.
    pub fn export_collector(&self, collector: impl Collector) {
        self.with_families(|r| r.register_collector(Box::new(collector)));
    }

    /// Adds one of `prometheus-client`'s own metrics (a `Counter`, a `Gauge`, a `Family` of
    /// them, a `Histogram`), kept by whoever holds its clone. For events off the hot path only
    /// (admin actions, reloads, resyncs): a `Family` looks its labels up under a lock, and every
    /// clone of a `Counter` shares one atomic. `help` gets a final period; a counter's `name`
    /// is given without `_total`, which its samples get.
    pub fn export_metric(&self, name: &str, help: &str, metric: impl Metric) {
        self.with_families(|r| r.register(name, help, metric));
    }

    /// Appends the registered families' text to a scrape (OpenMetrics, without `# EOF`).
    pub(crate) fn encode_families(&self, out: &mut String) -> std::fmt::Result {
        let registry = self.families.read().unwrap_or_else(PoisonError::into_inner);
        prometheus_client::encoding::text::encode_registry(out, &registry)
    }

    fn with_families(&self, f: impl FnOnce(&mut Registry)) {
        f(&mut self.families.write().unwrap_or_else(PoisonError::into_inner));
    }
}
