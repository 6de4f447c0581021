//! The Redis mode on the metrics endpoint (`herald_location_redis_*`): read at scrape time from
//! the task's atomics and the queue's gauges (see the server's `endpoint` module for the pattern).

use super::queue::Pending;
use super::stats::{RedisStats, LATENCY_BUCKETS_US};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// Made by `RedisLocation::metrics`; register with `stats.export_collector(..)`.
#[derive(Clone)]
pub struct RedisMetrics {
    pub stats: Arc<RedisStats>,
    pub pending: Arc<Pending>,
}

impl std::fmt::Debug for RedisMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RedisMetrics")
    }
}

impl Collector for RedisMetrics {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let s = &self.stats;
        let q = &self.pending;
        let gauge = |enc: &mut DescriptorEncoder, name: &str, help: &str, v: i64| {
            ConstGauge::new(v).encode(enc.encode_descriptor(name, help, None, MetricType::Gauge)?)
        };
        let counter = |enc: &mut DescriptorEncoder, name: &str, help: &str, v: u64| {
            ConstCounter::new(v).encode(enc.encode_descriptor(name, help, None, MetricType::Counter)?)
        };
        gauge(
            &mut enc,
            "herald_location_redis_up",
            "1 while connected to Redis (changes reach it), 0 while it is unreachable (serving from the local store)",
            i64::from(s.up.load(Relaxed)),
        )?;
        counter(&mut enc, "herald_location_redis_writes", "AoR values written to Redis", s.writes.load(Relaxed))?;
        counter(
            &mut enc,
            "herald_location_redis_write_errors",
            "Write pipelines that failed (their changes were queued again)",
            s.write_errors.load(Relaxed),
        )?;
        counter(
            &mut enc,
            "herald_location_redis_imports",
            "AoR values read from Redis into the local store (other nodes' changes, resyncs)",
            s.imports.load(Relaxed),
        )?;
        counter(
            &mut enc,
            "herald_location_redis_resyncs",
            "Resynchronizations with Redis (one per connection)",
            s.resyncs.load(Relaxed),
        )?;
        gauge(
            &mut enc,
            "herald_location_redis_queued",
            "AoRs whose changes wait to be written to Redis",
            i64::try_from(q.queued()).unwrap_or(i64::MAX),
        )?;
        counter(
            &mut enc,
            "herald_location_redis_queue_overflows",
            "Changes not queued because the queue was full (the next resync writes the whole store)",
            q.overflows(),
        )?;
        let buckets: Vec<(f64, u64)> = LATENCY_BUCKETS_US
            .iter()
            .map(|&us| us as f64 / 1e6)
            .chain([f64::MAX])
            .zip(s.latency_buckets.iter().map(|b| b.load(Relaxed)))
            .collect();
        // The count is the buckets' sum: a scrape between two bumps sees them agree.
        let count: u64 = buckets.iter().map(|b| b.1).sum();
        let mut m = enc.encode_descriptor(
            "herald_location_redis_write_seconds",
            "Time of one write pipeline to Redis (up to 256 AoRs)",
            None,
            MetricType::Histogram,
        )?;
        m.encode_histogram::<NoLabelSet>(s.latency_sum_us.load(Relaxed) as f64 / 1e6, count, &buckets, None)
    }
}
