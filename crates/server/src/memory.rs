//! Giving memory back to the kernel after a peak (issue 16, item 7).
//!
//! glibc's malloc hands freed memory back to the kernel only from the top of a heap (above
//! `M_TRIM_THRESHOLD`) and when a whole mmapped chunk is freed. A peak of transactions is
//! allocated by the UDP receiver threads in their own arenas, a few survivors (registrations,
//! calls still up, new transactions) sit above the freed ones and pin every heap's top, and
//! after a flood herald's RSS stayed at its peak: 908-948 MB long after the flood's
//! transactions had expired. `malloc_trim(0)` walks every arena and releases (`MADV_DONTNEED`)
//! the whole free pages in the middle of the heaps as well.
//!
//! When: [`Trimmer::check`] runs once a second on the main thread (which handles no SIP), with
//! what the shards report: transactions and the bytes of messages they hold. From those it
//! estimates the memory they take, and trims when the estimate has fallen to a quarter of its
//! peak since the last trim, by at least [`MIN_FREED`]. Each trim lowers the peak to the
//! current level, so a flood that drains away is trimmed a few times (at 1/4, 1/16, ... of its
//! peak, the last one near idle) and a steady load never: trimming under load would only hand
//! the kernel pages that malloc faults back in at once. A trim takes the arenas' locks one at a time, so
//! a worker waits at most for the trim of one arena.
//!
//! Another allocator was not chosen: session 9 measured mimalloc 5-8 % cheaper in CPU at 8,000
//! calls/s but with 22 % more RSS; this keeps glibc's footprint and returns its peaks.

use std::time::{Duration, Instant};

/// How often [`Trimmer::check`] looks.
pub(crate) const CHECK_EVERY: Duration = Duration::from_secs(1);

/// What one transaction costs, held messages aside: its entry, keys, timers and proxy context
/// with the allocator's overhead (issue 16 measured ~1.8 KB per unauthenticated REGISTER).
const TRANSACTION_BYTES: usize = 2048;
/// Less freed than this is not worth a trim (measured, release build: a trim takes ~6 ms for
/// 50 MB of heap, ~25 ms for 130 MB, ~55 ms for 360 MB, on the main thread).
pub(crate) const MIN_FREED: usize = 8 << 20;

/// Decides when to trim; see the module comment.
#[derive(Debug, Default)]
pub(crate) struct Trimmer {
    /// The highest estimate since the last trim (or start).
    peak: usize,
}

impl Trimmer {
    /// Looks at the shards' current load; trims (and logs what came back) when it has fallen
    /// far enough below its peak. Returns whether it trimmed.
    pub(crate) fn check(&mut self, transactions: usize, held_bytes: usize) -> bool {
        if !self.due(estimate(transactions, held_bytes)) {
            return false;
        }
        let before = rss_bytes();
        let start = Instant::now();
        if !herald_sys::malloc_trim() {
            return false;
        }
        let after = rss_bytes();
        tracing::info!(
            transactions,
            held_bytes,
            rss_before_mib = before.map(|b| b >> 20),
            rss_after_mib = after.map(|b| b >> 20),
            took_ms = start.elapsed().as_secs_f64() * 1e3,
            "returned memory freed since the last peak to the kernel"
        );
        true
    }

    /// The policy alone: whether a trim is due at this estimate (and if so, the new peak).
    fn due(&mut self, estimate: usize) -> bool {
        self.peak = self.peak.max(estimate);
        if estimate <= self.peak / 4 && self.peak - estimate >= MIN_FREED {
            self.peak = estimate;
            return true;
        }
        false
    }
}

/// The memory transactions and their held messages take, roughly.
fn estimate(transactions: usize, held_bytes: usize) -> usize {
    transactions.saturating_mul(TRANSACTION_BYTES).saturating_add(held_bytes)
}

/// This process's resident memory (`/proc/self/statm`, in pages).
pub(crate) fn rss_bytes() -> Option<usize> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: usize = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * herald_sys::page_size()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    #[test]
    fn trims_once_the_load_fell_to_a_quarter_of_a_big_enough_peak() {
        let mut t = Trimmer::default();
        // Steady small load, and a small peak: never.
        for e in [MIB, 4 * MIB, 7 * MIB, 0, 0] {
            assert!(!t.due(e));
        }
        // A flood: up to 400 MiB, then draining.
        for e in [100 * MIB, 400 * MIB, 300 * MIB, 101 * MIB] {
            assert!(!t.due(e), "{e}");
        }
        assert!(t.due(100 * MIB));
        // Again at a quarter of the new level, and once more near idle.
        assert!(!t.due(30 * MIB));
        assert!(t.due(25 * MIB));
        assert!(!t.due(7 * MIB), "not yet a quarter");
        assert!(t.due(MIB / 2));
        // Idle: nothing more to give back.
        assert!(!t.due(0));
        // A steady high load never trims.
        for _ in 0..100 {
            assert!(!t.due(200 * MIB));
        }
    }

    #[test]
    fn estimate_counts_transactions_and_held_bytes() {
        assert_eq!(estimate(0, 0), 0);
        assert_eq!(estimate(1000, 5), 1000 * TRANSACTION_BYTES + 5);
        assert_eq!(estimate(usize::MAX, 1), usize::MAX);
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn trimming_returns_freed_memory() {
        // 64 MiB in 4 KiB blocks, the top one kept: without a trim glibc keeps the freed
        // ones below it (the case of a flood's transactions below a survivor).
        let mut blocks: Vec<Vec<u8>> = (0..16 * 1024).map(|i| vec![i as u8 | 1; 4096]).collect();
        let survivor = blocks.pop();
        let full = rss_bytes().unwrap();
        drop(blocks);
        assert!(herald_sys::malloc_trim());
        let trimmed = rss_bytes().unwrap();
        assert!(
            trimmed + 32 * MIB < full,
            "RSS {} MiB with the blocks, {} MiB after freeing and trimming",
            full / MIB,
            trimmed / MIB
        );
        drop(survivor);
    }
}
