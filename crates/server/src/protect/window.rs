//! Per-source event counts over a sliding window, in bounded memory.
//!
//! Two fixed windows, the current one and the one before, give a sliding estimate
//! `current + previous × (time left of the previous window)` (the approximation of Kamailio's pike
//! module and of many rate limiters): no per-event timestamps, O(1) per event, and expiry is the
//! drop of the previous map when a window ends, never a sweep over live entries.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Event counts per source over a sliding `window`, tracking at most `capacity` sources.
#[derive(Debug)]
pub(crate) struct SlidingCounts {
    window: Duration,
    capacity: usize,
    started: Instant,
    current: HashMap<IpAddr, u32>,
    previous: HashMap<IpAddr, u32>,
}

/// What [`SlidingCounts::add`] saw.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Count {
    /// The sliding estimate of events in the last window, this one included.
    Estimate(f64),
    /// The table is full of other sources: this one is not tracked (and not limited).
    Untracked,
}

impl SlidingCounts {
    pub(crate) fn new(window: Duration, capacity: usize, now: Instant) -> SlidingCounts {
        SlidingCounts {
            window: window.max(Duration::from_millis(1)),
            capacity,
            started: now,
            current: HashMap::new(),
            previous: HashMap::new(),
        }
    }

    /// Counts one event from `ip` at `now` and returns the sliding estimate.
    pub(crate) fn add(&mut self, ip: IpAddr, now: Instant) -> Count {
        self.rotate(now);
        let len = self.current.len();
        let count = match self.current.get_mut(&ip) {
            Some(c) => c,
            None if len >= self.capacity => return Count::Untracked,
            None => self.current.entry(ip).or_insert(0),
        };
        *count = count.saturating_add(1);
        let current = *count as f64;
        let elapsed = now.saturating_duration_since(self.started).as_secs_f64() / self.window.as_secs_f64();
        let previous = self.previous.get(&ip).copied().unwrap_or(0) as f64;
        Count::Estimate(current + previous * (1.0 - elapsed).max(0.0))
    }

    /// Forgets `ip` (after it was banned, its counts no longer matter).
    pub(crate) fn forget(&mut self, ip: &IpAddr) {
        self.current.remove(ip);
        self.previous.remove(ip);
    }

    /// Sources tracked now.
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
}
