//! Event counts per key (a source, an (address, user) pair, an account) over a sliding window,
//! in bounded memory.
//!
//! Two fixed windows, the current one and the one before, give a sliding estimate
//! `current + previous × (time left of the previous window)` (the approximation of Kamailio's pike
//! module and of many rate limiters): no per-event timestamps, O(1) per event, and expiry is the
//! drop of the previous map when a window ends, never a sweep over live entries.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

/// Event counts per key over a sliding `window`, tracking at most `capacity` keys.
#[derive(Debug)]
pub(crate) struct SlidingCounts<K> {
    window: Duration,
    capacity: usize,
    started: Instant,
    current: HashMap<K, u32>,
    previous: HashMap<K, u32>,
}

/// What [`SlidingCounts::add`] saw.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Count {
    /// The sliding estimate of events in the last window, this one included.
    Estimate(f64),
    /// The table is full of other keys: this one is not tracked (and not limited).
    Untracked,
}

impl<K: Hash + Eq + Copy> SlidingCounts<K> {
    pub(crate) fn new(window: Duration, capacity: usize, now: Instant) -> SlidingCounts<K> {
        SlidingCounts {
            window: window.max(Duration::from_millis(1)),
            capacity,
            started: now,
            current: HashMap::new(),
            previous: HashMap::new(),
        }
    }

    /// Counts one event of `key` at `now` and returns the sliding estimate, this one included.
    pub(crate) fn add(&mut self, key: K, now: Instant) -> Count {
        self.add_up_to(key, now, f64::INFINITY)
    }

    /// Counts one event of `key` only if the estimate with it stays at or below `limit`, and
    /// returns that estimate either way (above `limit`: not counted). A rate limiter that
    /// counts only what it let through admits `limit` per window from a source sending faster,
    /// instead of shutting it out while it keeps sending.
    pub(crate) fn add_up_to(&mut self, key: K, now: Instant, limit: f64) -> Count {
        self.rotate(now);
        let elapsed = now.saturating_duration_since(self.started).as_secs_f64() / self.window.as_secs_f64();
        let previous = self.previous.get(&key).copied().unwrap_or(0) as f64 * (1.0 - elapsed).max(0.0);
        let len = self.current.len();
        let count = match self.current.get_mut(&key) {
            Some(c) => c,
            None if len >= self.capacity => return Count::Untracked,
            None => self.current.entry(key).or_insert(0),
        };
        let estimate = count.saturating_add(1) as f64 + previous;
        if estimate <= limit {
            *count = count.saturating_add(1);
        } else if *count == 0 {
            // Not counted: do not keep an entry that holds nothing.
            self.current.remove(&key);
        }
        Count::Estimate(estimate)
    }

    /// Forgets `key` (after it was banned, its counts no longer matter).
    pub(crate) fn forget(&mut self, key: &K) {
        self.current.remove(key);
        self.previous.remove(key);
    }

    /// Keys tracked now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.current.len() + self.previous.len()
    }

    fn rotate(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.started);
        if elapsed < self.window {
            return;
        }
        if elapsed < self.window * 2 {
            // One window passed: the current one becomes the previous one.
            self.previous = std::mem::take(&mut self.current);
            self.started += self.window;
        } else {
            // Two or more passed: nothing recent is left.
            self.previous.clear();
            self.current.clear();
            self.started = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 2));

    fn estimate(c: Count) -> f64 {
        match c {
            Count::Estimate(e) => e,
            Count::Untracked => panic!("untracked"),
        }
    }

    #[test]
    fn counts_within_a_window_and_slides_across_it() {
        let t0 = Instant::now();
        let mut w = SlidingCounts::new(Duration::from_secs(2), 100, t0);
        for i in 1..=10 {
            assert_eq!(estimate(w.add(A, t0)), i as f64);
        }
        assert_eq!(estimate(w.add(B, t0)), 1.0);
        // Half-way through the next window, half of the previous 10 still count.
        let e = estimate(w.add(A, t0 + Duration::from_secs(3)));
        assert!((e - (1.0 + 10.0 * 0.5)).abs() < 1e-9, "{e}");
        // Long after, nothing is left.
        assert_eq!(estimate(w.add(A, t0 + Duration::from_secs(60))), 1.0);
        assert_eq!(w.len(), 1);
    }

    #[test]
    fn capacity_bounds_the_table() {
        let t0 = Instant::now();
        let mut w = SlidingCounts::new(Duration::from_secs(1), 2, t0);
        w.add(A, t0);
        w.add(B, t0);
        let c = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 3));
        assert_eq!(w.add(c, t0), Count::Untracked);
        assert_eq!(estimate(w.add(A, t0)), 2.0, "known sources are still counted");
        w.forget(&A);
        assert_eq!(estimate(w.add(c, t0)), 1.0, "room again after forget");
    }

    #[test]
    fn add_up_to_counts_only_what_it_admits() {
        let t0 = Instant::now();
        let mut w = SlidingCounts::new(Duration::from_secs(2), 100, t0);
        let admitted = (0..50).filter(|_| estimate(w.add_up_to(A, t0, 10.0)) <= 10.0).count();
        assert_eq!(admitted, 10, "exactly the limit passes, however many are sent");
        assert_eq!(estimate(w.add_up_to(A, t0, 10.0)), 11.0, "the refused ones were not counted");
        // A refused first event leaves no entry behind.
        assert_eq!(estimate(w.add_up_to(B, t0, 0.0)), 1.0);
        assert_eq!(w.len(), 1);
        // Next window: the previous 10 weigh less as it slides, so some pass again.
        let mid = t0 + Duration::from_secs(3);
        let admitted = (0..50).filter(|_| estimate(w.add_up_to(A, mid, 10.0)) <= 10.0).count();
        assert_eq!(admitted, 5, "10 x half a window left = 5 still count");
    }
}
