//! What the durable copy reports (exported by the runtime's metrics endpoint).

use crate::Mode;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds, in seconds, of the commit latency histogram's buckets (the last is +Inf).
pub const LATENCY_BUCKETS: [f64; 10] = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5, 2.0];

/// Counters and gauges, updated by the writer and the loader with relaxed atomics.
#[derive(Debug)]
pub struct PersistStats {
    pub mode: Mode,
    /// Binding rows in the copy: what the start-up load read, plus the writer's inserts, minus
    /// its deletes (approximate while the load runs).
    pub stored_bindings: AtomicI64,
    /// AoR states written (one per changed AoR per commit).
    pub aor_writes: AtomicU64,
    /// Committed transactions.
    pub commits: AtomicU64,
    /// Commits that failed (retried).
    pub failures: AtomicU64,
    /// AoRs waiting to be written.
    pub queue_depth: AtomicU64,
    /// Bindings restored by the start-up load, and those it dropped as expired.
    pub loaded: AtomicU64,
    pub dropped_expired: AtomicU64,
    /// 1 while the start-up load runs.
    pub loading: AtomicU64,
    /// Commit latency histogram: counts per [`LATENCY_BUCKETS`] bucket (+Inf last), and sum.
    pub latency_counts: [AtomicU64; LATENCY_BUCKETS.len() + 1],
    pub latency_sum_us: AtomicU64,
}

impl PersistStats {
    pub fn new(mode: Mode) -> PersistStats {
        PersistStats {
            mode,
            stored_bindings: AtomicI64::new(0),
            aor_writes: AtomicU64::new(0),
            commits: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            queue_depth: AtomicU64::new(0),
            loaded: AtomicU64::new(0),
            dropped_expired: AtomicU64::new(0),
            loading: AtomicU64::new(0),
            latency_counts: Default::default(),
            latency_sum_us: AtomicU64::new(0),
        }
    }

    pub(crate) fn commit_took(&self, d: Duration) {
        let s = d.as_secs_f64();
        let i = LATENCY_BUCKETS.iter().position(|&b| s <= b).unwrap_or(LATENCY_BUCKETS.len());
        self.latency_counts[i].fetch_add(1, Ordering::Relaxed);
        self.latency_sum_us.fetch_add(d.as_micros() as u64, Ordering::Relaxed);
        self.commits.fetch_add(1, Ordering::Relaxed);
    }
}
