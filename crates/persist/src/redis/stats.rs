//! The Redis mode's counters: plain atomics, written by the Redis task only (the journal's
//! queue keeps its own gauge), read by the metrics endpoint without a lock.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds (microseconds) of the write-latency histogram's buckets; the last is +Inf.
pub const LATENCY_BUCKETS_US: [u64; 8] = [250, 500, 1_000, 2_500, 5_000, 10_000, 50_000, 250_000];

#[derive(Debug, Default)]
pub struct RedisStats {
    /// Connected and resynchronized (or resynchronizing): changes reach Redis.
    pub up: AtomicBool,
    /// AoR values written (or deleted) in Redis.
    pub writes: AtomicU64,
    /// Pipelines that failed (their changes went back to the queue).
    pub write_errors: AtomicU64,
    /// Values read from Redis and taken into the local store (other nodes' changes, resyncs).
    pub imports: AtomicU64,
    /// Completed resyncs (one per (re)connection).
    pub resyncs: AtomicU64,
    /// Pipeline latency: count per bucket of [`LATENCY_BUCKETS_US`] (+Inf last), sum in µs.
    pub latency_buckets: [AtomicU64; LATENCY_BUCKETS_US.len() + 1],
    pub latency_sum_us: AtomicU64,
}

impl RedisStats {
    /// One pipeline of `aors` values took `elapsed`.
    pub fn record_write(&self, aors: u64, elapsed: Duration) {
        self.writes.fetch_add(aors, Ordering::Relaxed);
        let us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        let bucket = LATENCY_BUCKETS_US.iter().position(|&b| us <= b).unwrap_or(LATENCY_BUCKETS_US.len());
        self.latency_buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.latency_sum_us.fetch_add(us, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_lands_in_its_latency_bucket() {
        let s = RedisStats::default();
        s.record_write(3, Duration::from_micros(700));
        s.record_write(1, Duration::from_secs(2));
        assert_eq!(s.writes.load(Ordering::Relaxed), 4);
        assert_eq!(s.latency_buckets[2].load(Ordering::Relaxed), 1);
        assert_eq!(s.latency_buckets[LATENCY_BUCKETS_US.len()].load(Ordering::Relaxed), 1);
        assert_eq!(s.latency_sum_us.load(Ordering::Relaxed), 2_000_700);
    }
}
