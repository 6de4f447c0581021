//! The admin API's own metrics (changes by method and outcome, refused tokens).

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

/// The admin API's metrics: changes by method and outcome, and requests refused for their
/// token. prometheus-client's own counters (off the hot path: an operator's calls), exported by
/// [`AdminCounters::export`].
#[derive(Debug, Default)]
pub struct AdminCounters {
    changes: Family<Vec<(String, String)>, Counter>,
    /// Requests refused before any method ran: no or a wrong bearer token.
    pub(crate) unauthorized: Counter,
}

impl AdminCounters {
    /// Registers them with the metrics endpoint as `herald_admin_changes_total{method,
    /// outcome}` and `herald_admin_unauthorized_total`.
    pub fn export(&self, stats: &crate::stats::Stats) {
        stats.export_metric(
            "herald_admin_changes",
            "Changes asked through the admin API (herald ctl, SIGHUP), by method and outcome: done or refused",
            self.changes.clone(),
        );
        stats.export_metric(
            "herald_admin_unauthorized",
            "Admin API requests refused (401) for a missing or unknown bearer token",
            self.unauthorized.clone(),
        );
    }

    /// How many `method` calls ended with `outcome` (`"done"` or `"refused"`).
    pub fn changes(&self, method: &str, outcome: &str) -> u64 {
        self.changes.get_or_create(&labels(method, outcome)).get()
    }

    pub(super) fn count(&self, method: &str, outcome: &str) {
        self.changes.get_or_create(&labels(method, outcome)).inc();
    }
}

fn labels(method: &str, outcome: &str) -> Vec<(String, String)> {
    vec![("method".into(), method.into()), ("outcome".into(), outcome.into())]
}
