//! The last grid interval each lane of the timer queue rounded a deadline into, per thread, so
//! that the next deadline of that lane in the same interval is rounded by a few comparisons.
//!
//! Every state-absorbing timer (RFC 3261 Timers D, I, J, K; RFC 6026 L, M) is scheduled on the
//! [`AbsorbGrid`] ([`Timers::scheduled_at`]): rounding one is a subtraction of `Instant`s, a
//! division and an addition (~110 instructions, about four times per proxied call). The
//! deadlines of one lane are of one duration from a clock that moves forward, so they mostly
//! fall into the interval of the one before: `(point - step, point]` rounds to `point`. Per
//! thread, not per table: a worker's 64 engine shards each see a call every second or so, a
//! grid step is a quarter of one, while the thread sees them all. A cache of a function of its
//! inputs (the grid is part of the key): what it answers does not depend on what it holds.

use super::timers::{AbsorbGrid, TimerKind, Timers, LANES};
use std::cell::Cell;
use std::time::Instant;

/// A grid and an interval `(after, point]` of it, every instant of which rounds to `point`.
#[derive(Debug, Clone, Copy)]
struct Interval {
    grid: AbsorbGrid,
    after: Instant,
    point: Instant,
}

thread_local! {
    static LAST: [Cell<Option<Interval>>; LANES] = const { [const { Cell::new(None) }; LANES] };
}

/// [`Timers::scheduled_at`] of `at` and `kind`, a deadline of queue lane `lane`.
#[inline]
pub(crate) fn scheduled_at(timers: &Timers, lane: usize, at: Instant, kind: TimerKind) -> Instant {
    let Some(grid) = timers.absorb_grid.filter(|_| kind.absorbs() && lane < LANES) else {
        return timers.scheduled_at(at, kind);
    };
    LAST.with(|last| {
        let slot = &last[lane];
        if let Some(i) = slot.get() {
            if i.after < at && at <= i.point && i.grid == grid {
                return i.point;
            }
        }
        let Some(point) = timers.grid_point(at) else { return at };
        // Only an interval wholly at or after the epoch: before it, deadlines are not rounded.
        if let Some(after) = point.checked_sub(grid.step).filter(|after| *after >= grid.epoch) {
            slot.set(Some(Interval { grid, after, point }));
        }
        point
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The memo rounds every deadline as the grid itself does, whatever the order of lanes,
    /// kinds, grids and deadlines (forward mostly, sometimes back, before the epoch, on grid
    /// points), for steps that do and do not divide the deadlines' spacing.
    #[test]
    fn the_memo_rounds_as_the_grid() {
        let t0 = Instant::now();
        let epoch = t0 + Duration::from_millis(1_000);
        let grids = [Duration::from_millis(250), Duration::from_nanos(7_919), Duration::from_secs(3), Duration::ZERO]
            .map(|step| Timers { absorb_grid: Some(AbsorbGrid { epoch, step }), ..Timers::default() });
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut now_ns = 0u64;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Mostly one grid for a while, as a thread's tables have; sometimes another.
            let timers = &grids[if x.is_multiple_of(64) { (x >> 6) as usize % grids.len() } else { 0 }];
            now_ns = match x % 16 {
                0 => now_ns.saturating_sub((x >> 8) % 2_000_000_000),
                1 => (x >> 8) % 1_500_000_000,
                2 => 1_000_000_000 + ((x >> 8) % 40) * 250_000_000,
                _ => now_ns + (x >> 8) % 30_000_000,
            };
            let kind = TimerKind::ALL[(x >> 40) as usize % TimerKind::COUNT];
            let lane = (x >> 50) as usize % 7;
            let at = t0 + Duration::from_nanos(now_ns) + Duration::from_secs((x >> 56) % 3 * 16);
            assert_eq!(scheduled_at(timers, lane, at, kind), timers.scheduled_at(at, kind), "{kind:?} {at:?}");
        }
        let exact = Timers::default();
        assert_eq!(scheduled_at(&exact, 2, t0, TimerKind::J), t0, "no grid: on time");
    }
}
