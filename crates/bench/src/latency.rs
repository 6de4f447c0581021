//! Latency recording: an HDR histogram (1 µs to 10 min, 3 significant digits) per measured
//! quantity, summarised into [`Latency`] for results files.

use crate::results::Latency;
use hdrhistogram::Histogram;
use std::time::Duration;

/// Highest trackable value: 10 minutes in µs. Longer samples are clamped (and still counted).
const MAX_US: u64 = 600_000_000;

/// Records durations; cheap to record into (no allocation after creation).
#[derive(Debug, Clone)]
pub struct LatencyRecorder {
    histogram: Histogram<u64>,
}

impl Default for LatencyRecorder {
    fn default() -> Self {
        LatencyRecorder::new()
    }
}

impl LatencyRecorder {
    pub fn new() -> LatencyRecorder {
        LatencyRecorder { histogram: Histogram::new_with_bounds(1, MAX_US, 3).expect("valid histogram bounds") }
    }

    /// Records one sample.
    pub fn record(&mut self, d: Duration) {
        self.record_us(d.as_micros().min(MAX_US as u128) as u64);
    }

    /// Records one sample given in microseconds.
    pub fn record_us(&mut self, us: u64) {
        self.histogram.saturating_record(us.clamp(1, MAX_US));
    }

    /// Adds another recorder's samples.
    pub fn merge(&mut self, other: &LatencyRecorder) {
        // Same bounds on both sides, so adding cannot fail.
        let _ = self.histogram.add(&other.histogram);
    }

    pub fn count(&self) -> u64 {
        self.histogram.len()
    }

    /// The value at quantile `q` (0..=1), µs.
    pub fn quantile_us(&self, q: f64) -> u64 {
        self.histogram.value_at_quantile(q)
    }

    /// Percentiles, mean, max and a CCDF with points at 1 - 10^-k steps (down to the last sample).
    pub fn summary(&self) -> Latency {
        let h = &self.histogram;
        if h.is_empty() {
            return Latency::default();
        }
        let mut ccdf = Vec::new();
        // Ten points per decade of the tail fraction, from 1 (everything above the minimum) down
        // to one sample: enough resolution for a log-scale CCDF plot (seed 004, figure 7).
        // The points come from one walk over the recorded buckets (highest value of each, and
        // the samples up to it), which gives what `value_at_quantile` and `count_between` give
        // point by point: those scan the whole histogram (about 57,000 counters) for each of
        // the ~30 points, which made summarising cost more than a run's hundreds of calls.
        let n = h.len() as f64;
        // The mean from the same walk, as `Histogram::mean` adds it up (in the same order, so to
        // the same bits): its own walk over the buckets cost as much again, ~300-900
        // instructions a call of a 20-s run at 50 calls/s, depending on the longest sample
        // (callgrind).
        let mut mean = 0.0_f64;
        let recorded: Vec<(u64, u64)> = h
            .iter_recorded()
            .scan(0u64, |below, v| {
                *below += v.count_at_value();
                mean += h.median_equivalent(v.value_iterated_to()) as f64 * v.count_at_value() as f64 / n;
                Some((v.value_iterated_to(), *below))
            })
            .collect();
        let mut at = 0;
        let mut tail: f64 = 1.0;
        while tail * n >= 1.0 {
            let quantile = 1.0 - tail;
            let (value, above) = if quantile == 0.0 {
                // The lowest value of the first bucket (value_at_quantile's rule for 0), whose
                // bucket may hold values above it.
                let value = h.value_at_quantile(0.0);
                (value, h.count_between(value + 1, MAX_US))
            } else {
                // value_at_quantile: the first bucket whose cumulative count reaches ⌈q·n⌉.
                let target = ((quantile * n).ceil() as u64).max(1);
                while at + 1 < recorded.len() && recorded[at].1 < target {
                    at += 1;
                }
                let (value, upto) = recorded[at];
                (value, h.len() - upto)
            };
            let above = above as f64 / n;
            if ccdf.last().map(|&(v, _)| v != value).unwrap_or(true) {
                ccdf.push((value, above));
            }
            tail /= 10f64.powf(0.1);
        }
        Latency {
            count: h.len(),
            mean_us: mean,
            p50_us: h.value_at_quantile(0.50),
            p90_us: h.value_at_quantile(0.90),
            p99_us: h.value_at_quantile(0.99),
            p999_us: h.value_at_quantile(0.999),
            max_us: h.max(),
            ccdf,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_one_to_ten_thousand() {
        let mut r = LatencyRecorder::new();
        for us in 1..=10_000 {
            r.record_us(us);
        }
        let s = r.summary();
        assert_eq!(s.count, 10_000);
        // 3 significant digits: values are exact to within 0.1%.
        let near = |got: u64, want: u64| (got as f64 - want as f64).abs() <= want as f64 * 0.001 + 1.0;
        assert!(near(s.p50_us, 5_000), "{}", s.p50_us);
        assert!(near(s.p90_us, 9_000), "{}", s.p90_us);
        assert!(near(s.p99_us, 9_900), "{}", s.p99_us);
        assert!(near(s.p999_us, 9_990), "{}", s.p999_us);
        assert!(near(s.max_us, 10_000));
        assert!((s.mean_us - 5_000.5).abs() < 10.0);
        // The CCDF falls from ~1 to ~0 and never rises.
        assert!(s.ccdf.first().unwrap().1 > 0.99);
        assert!(s.ccdf.last().unwrap().1 < 0.001);
        assert!(s.ccdf.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 >= w[1].1));
    }

    /// The one-pass CCDF gives exactly the points of value_at_quantile and count_between.
    #[test]
    fn ccdf_matches_the_histograms_own_queries() {
        let mut r = LatencyRecorder::new();
        let mut x: u64 = 7;
        for _ in 0..5_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            // Spread over six decades, so buckets of every width are hit.
            r.record_us(1 + (x >> 33) % 10u64.pow(1 + (x % 6) as u32));
        }
        let h = &r.histogram;
        let n = h.len() as f64;
        let mut want = Vec::new();
        let mut tail: f64 = 1.0;
        while tail * n >= 1.0 {
            let value = h.value_at_quantile(1.0 - tail);
            let above = h.count_between(value + 1, MAX_US) as f64 / n;
            if want.last().map(|&(v, _)| v != value).unwrap_or(true) {
                want.push((value, above));
            }
            tail /= 10f64.powf(0.1);
        }
        assert!(want.len() > 20);
        assert_eq!(r.summary().ccdf, want);
        assert_eq!(r.summary().mean_us.to_bits(), h.mean().to_bits(), "the mean, to the bit");
    }

    #[test]
    fn empty_and_clamped_samples() {
        let mut r = LatencyRecorder::new();
        assert_eq!(r.summary(), Latency::default());
        r.record(Duration::from_secs(3600));
        r.record(Duration::ZERO);
        assert_eq!(r.count(), 2);
        assert!(r.summary().max_us >= MAX_US);
        let mut other = LatencyRecorder::new();
        other.record_us(42);
        r.merge(&other);
        assert_eq!(r.count(), 3);
    }
}
