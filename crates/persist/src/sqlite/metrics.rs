//! The SQLite copy on the metrics endpoint (`herald_location_*`): read at scrape time from the
//! writer's and loader's atomics (see the server's `endpoint` module for the pattern).

use crate::stats::LATENCY_BUCKETS;
use crate::PersistStats;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// Register with `stats.export_collector(SqliteMetrics(location.stats().clone()))`.
#[derive(Debug, Clone)]
pub struct SqliteMetrics(pub Arc<PersistStats>);

impl Collector for SqliteMetrics {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let s = &self.0;
        let gauge = |enc: &mut DescriptorEncoder, name: &str, help: &str, v: i64| {
            ConstGauge::new(v).encode(enc.encode_descriptor(name, help, None, MetricType::Gauge)?)
        };
        let counter = |enc: &mut DescriptorEncoder, name: &str, help: &str, v: u64| {
            ConstCounter::new(v).encode(enc.encode_descriptor(name, help, None, MetricType::Counter)?)
        };
        let mut m = enc.encode_descriptor(
            "herald_location_mode",
            "The [location] mode of the database copy (1 for the mode in use)",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(1).encode(m.encode_family(&[("mode", s.mode.as_str())])?)?;
        gauge(
            &mut enc,
            "herald_location_bindings_stored",
            "Binding rows in the location database (expired ones included until deleted)",
            s.stored_bindings.load(Relaxed),
        )?;
        counter(
            &mut enc,
            "herald_location_writes",
            "AoR states written to the location database",
            s.aor_writes.load(Relaxed),
        )?;
        counter(
            &mut enc,
            "herald_location_write_failures",
            "Location database transactions that failed (their changes were queued again)",
            s.failures.load(Relaxed),
        )?;
        gauge(
            &mut enc,
            "herald_location_queued",
            "AoRs whose latest change waits to be written to the location database",
            i64::try_from(s.queue_depth.load(Relaxed)).unwrap_or(i64::MAX),
        )?;
        gauge(&mut enc, "herald_location_loading", "1 while the start-up load runs", s.loading.load(Relaxed) as i64)?;
        counter(
            &mut enc,
            "herald_location_loaded_bindings",
            "Bindings restored from the database at start-up",
            s.loaded.load(Relaxed),
        )?;
        counter(
            &mut enc,
            "herald_location_expired_on_load",
            "Stored bindings that had expired while herald was down (not restored)",
            s.dropped_expired.load(Relaxed),
        )?;
        let buckets: Vec<(f64, u64)> = LATENCY_BUCKETS
            .iter()
            .copied()
            .chain([f64::MAX])
            .zip(s.latency_counts.iter().map(|b| b.load(Relaxed)))
            .collect();
        // Per-bucket counts: the encoder makes them cumulative.
        let total: u64 = buckets.iter().map(|b| b.1).sum();
        let mut m = enc.encode_descriptor(
            "herald_location_commit_seconds",
            "Time of one location database transaction (all changes waiting, one fsync)",
            None,
            MetricType::Histogram,
        )?;
        m.encode_histogram::<NoLabelSet>(s.latency_sum_us.load(Relaxed) as f64 / 1e6, total, &buckets, None)
    }
}
