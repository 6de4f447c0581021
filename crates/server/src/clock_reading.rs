//! An [`Instant`]'s clock reading (whole seconds and nanoseconds of the monotonic clock), read
//! without subtracting instants, for encoding deadlines as nanoseconds since an epoch (module
//! `shard_timers`).
//!
//! Why: `Instant - Instant` is a call into std's compiled `Timespec::sub_timespec` (~37
//! instructions, plus ~25 for the `Duration` into u128 nanoseconds), and a shard publishes its
//! deadline whenever a call changed it: ~3 times a proxied UDP call (callgrind, issue 21). An
//! `Instant` exposes nothing of its reading but `Hash`, which on Unix hashes the `timespec` it
//! holds, seconds (`write_i64`) then nanoseconds (`write_u32`); [`Reading::of`] records those
//! two writes. That is std's implementation, not its promise: a reading whose writes are not
//! exactly those (another platform's `Instant`, a later std) is `None`, and
//! [`Reading::matches`] checks the readings against real subtraction once, when the epoch is
//! taken; where either fails, the caller subtracts as before. The result is the same either way.

use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

/// An instant's clock reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reading {
    secs: i64,
    nanos: u32,
}

impl Reading {
    /// `at`'s reading, or `None` where its `Hash` is not one `i64` and one `u32` below 10^9.
    #[inline]
    pub(crate) fn of(at: Instant) -> Option<Reading> {
        let mut w = Writes::default();
        at.hash(&mut w);
        match w {
            Writes { secs: Some(secs), nanos: Some(nanos), other: false } if nanos < NANOS_PER_SEC => {
                Some(Reading { secs, nanos })
            }
            _ => None,
        }
    }

    /// Nanoseconds from `self` to `later`: 0 where `later` is earlier, as
    /// `Instant::saturating_duration_since`; `None` past `i64` nanoseconds (292 years).
    #[inline]
    pub(crate) fn nanos_until(self, later: Reading) -> Option<u64> {
        let secs = later.secs.checked_sub(self.secs)?;
        let nanos =
            secs.checked_mul(i64::from(NANOS_PER_SEC))?.checked_add(i64::from(later.nanos) - i64::from(self.nanos))?;
        Some(u64::try_from(nanos).unwrap_or(0))
    }

    /// Whether readings taken from instants around `epoch` give the nanoseconds that
    /// subtraction gives: the check that `Hash` still writes what [`Reading::of`] expects.
    pub(crate) fn matches(epoch: Instant) -> bool {
        let Some(base) = Reading::of(epoch) else { return false };
        let offsets = [0, 1, 999_999_999, 1_000_000_000, 1_000_000_001, 1_500_000_001, 86_400_123_456_789];
        let later = offsets.iter().filter_map(|&n| epoch.checked_add(Duration::from_nanos(n)));
        let earlier = offsets.iter().filter_map(|&n| epoch.checked_sub(Duration::from_nanos(n)));
        later.chain(earlier).all(|t| {
            let subtracted = u64::try_from(t.saturating_duration_since(epoch).as_nanos()).ok();
            Reading::of(t).and_then(|r| base.nanos_until(r)) == subtracted
        })
    }
}

const NANOS_PER_SEC: u32 = 1_000_000_000;

/// A hasher that records the writes of an `Instant`'s `Hash` instead of hashing them.
#[derive(Default)]
struct Writes {
    secs: Option<i64>,
    nanos: Option<u32>,
    /// Any write but one `write_i64` and one `write_u32`.
    other: bool,
}

impl Hasher for Writes {
    fn finish(&self) -> u64 {
        0
    }

    // Every write not overridden below comes here (the defaults of `Hasher`).
    fn write(&mut self, _: &[u8]) {
        self.other = true;
    }

    fn write_i64(&mut self, v: i64) {
        self.other |= self.secs.replace(v).is_some();
    }

    fn write_u32(&mut self, v: u32) {
        self.other |= self.nanos.replace(v).is_some();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The general path: what `ShardTimers::encode` computed before readings.
    fn subtracted(epoch: Instant, t: Instant) -> Option<u64> {
        u64::try_from(t.saturating_duration_since(epoch).as_nanos()).ok()
    }

    #[test]
    fn readings_give_the_nanoseconds_that_subtraction_gives() {
        let epoch = Instant::now();
        assert!(Reading::matches(epoch));
        let base = Reading::of(epoch).expect("a Unix Instant hashes its timespec");
        // Offsets on both sides of the epoch: every nanosecond carry near whole seconds, and a
        // pseudo-random sweep up to ~10^6 s.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut offsets: Vec<u64> = (0..2_000).chain(999_998_000..1_000_002_000).collect();
        offsets.extend((0..100_000).map(|_| {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            x >> 14
        }));
        for n in offsets {
            let d = Duration::from_nanos(n);
            for t in [epoch.checked_add(d), epoch.checked_sub(d)].into_iter().flatten() {
                let r = Reading::of(t).expect("reading");
                assert_eq!(base.nanos_until(r), subtracted(epoch, t), "offset {n}");
            }
        }
    }

    #[test]
    fn a_reading_past_i64_nanoseconds_is_none() {
        let a = Reading { secs: 0, nanos: 0 };
        assert_eq!(a.nanos_until(Reading { secs: i64::MAX / 1_000_000_000 + 1, nanos: 0 }), None);
        assert_eq!(a.nanos_until(Reading { secs: i64::MIN, nanos: 0 }), None);
        assert_eq!(a.nanos_until(Reading { secs: -1, nanos: 999_999_999 }), Some(0));
    }

    #[test]
    fn writes_other_than_a_timespec_give_no_reading() {
        let mut w = Writes::default();
        w.write_i64(1);
        w.write_u32(2);
        w.write_u32(3);
        assert!(w.other);
        let mut w = Writes::default();
        w.write_u64(1);
        assert!(w.other);
    }
}
