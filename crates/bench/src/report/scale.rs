//! Axis scales and their ticks: linear axes with 1-2-5 steps, log axes snapped to whole decades
//! (the way the seed papers draw CCDFs and drop probabilities).

/// Linear or base-10 logarithmic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScaleKind {
    Linear,
    Log,
}

/// The text of a tick label: `mantissa`, or `mantissa`×10^`exponent` drawn with a superscript.
#[derive(Debug, Clone, PartialEq)]
pub struct TickLabel {
    pub mantissa: String,
    pub exponent: Option<i32>,
}

impl TickLabel {
    fn plain(text: String) -> TickLabel {
        TickLabel { mantissa: text, exponent: None }
    }

    /// The label as plain text ("10^-4" for a power), to compare in tests.
    #[cfg(test)]
    pub fn text(&self) -> String {
        match self.exponent {
            Some(e) => format!("{}^{e}", self.mantissa),
            None => self.mantissa.clone(),
        }
    }
}

/// One tick mark; minor ticks have no label.
#[derive(Debug, Clone, PartialEq)]
pub struct Tick {
    pub value: f64,
    pub label: Option<TickLabel>,
}

/// A data range mapped onto 0..=1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scale {
    pub kind: ScaleKind,
    pub lo: f64,
    pub hi: f64,
}

/// Powers of ten this many decades apart or more get power-of-ten labels; below, plain numbers.
const PLAIN_EXPONENTS: std::ops::RangeInclusive<i32> = -3..=4;

impl Scale {
    /// The smallest "nice" range holding every finite value (positive ones only for a log
    /// scale); `None` when there is nothing to show. A linear scale starts at zero when
    /// `from_zero` (rates and ratios are compared against the origin).
    pub fn fit(kind: ScaleKind, values: impl IntoIterator<Item = f64>, from_zero: bool) -> Option<Scale> {
        let usable = values.into_iter().filter(|v| v.is_finite() && (kind == ScaleKind::Linear || *v > 0.0));
        let (mut lo, mut hi) = usable.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
        if lo > hi {
            return None;
        }
        match kind {
            ScaleKind::Linear => {
                if from_zero {
                    lo = lo.min(0.0);
                    hi = hi.max(0.0);
                }
                if hi - lo < f64::EPSILON * hi.abs().max(1.0) {
                    // One value: give it room on both sides.
                    let pad = if hi == 0.0 { 1.0 } else { hi.abs() * 0.5 };
                    hi += pad;
                    if !from_zero || lo != 0.0 {
                        lo -= pad;
                    }
                }
                let step = nice_step((hi - lo) / 5.0);
                Some(Scale { kind, lo: (lo / step).floor() * step, hi: (hi / step).ceil() * step })
            }
            ScaleKind::Log => {
                let lo_exp = lo.log10().floor();
                let mut hi_exp = hi.log10().ceil();
                if hi_exp <= lo_exp {
                    hi_exp = lo_exp + 1.0;
                }
                Some(Scale { kind, lo: 10f64.powf(lo_exp), hi: 10f64.powf(hi_exp) })
            }
        }
    }

    /// Where `v` sits, 0 at `lo` and 1 at `hi` (outside 0..=1 when out of range; a log scale
    /// maps non-positive values far below, where clipping hides them).
    pub fn position(&self, v: f64) -> f64 {
        match self.kind {
            ScaleKind::Linear => (v - self.lo) / (self.hi - self.lo),
            ScaleKind::Log => {
                if v <= 0.0 {
                    return -1.0;
                }
                (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
            }
        }
    }

    /// Tick marks from `lo` to `hi`.
    pub fn ticks(&self) -> Vec<Tick> {
        match self.kind {
            ScaleKind::Linear => self.linear_ticks(),
            ScaleKind::Log => self.log_ticks(),
        }
    }

    fn linear_ticks(&self) -> Vec<Tick> {
        let step = nice_step((self.hi - self.lo) / 5.0);
        let decimals = (-step.log10().floor()).max(0.0) as usize;
        // Thousands as "k" keep labels of call rates short (12k rather than 12000).
        let thousands = self.hi.abs().max(self.lo.abs()) >= 10_000.0 && step >= 1000.0;
        let count = ((self.hi - self.lo) / step).round() as i64;
        (0..=count)
            .map(|i| {
                let value = self.lo + i as f64 * step;
                // Exactly "0" at the origin, never "-0" or "0k".
                let text = if value.abs() < step * 1e-9 {
                    "0".to_string()
                } else if thousands {
                    format!("{}k", super::html::sig(value / 1000.0, 6))
                } else {
                    format!("{value:.decimals$}")
                };
                Tick { value, label: Some(TickLabel::plain(text)) }
            })
            .collect()
    }

    fn log_ticks(&self) -> Vec<Tick> {
        let lo_exp = self.lo.log10().round() as i32;
        let hi_exp = self.hi.log10().round() as i32;
        let decades = hi_exp - lo_exp;
        let plain = PLAIN_EXPONENTS.contains(&lo_exp) && PLAIN_EXPONENTS.contains(&hi_exp);
        // Past twelve decades every other power is labelled, so labels never touch.
        let label_every = if decades > 12 { 2 } else { 1 };
        let mut ticks = Vec::new();
        for e in lo_exp..=hi_exp {
            let value = 10f64.powi(e);
            let label = ((e - lo_exp) % label_every == 0).then(|| {
                if plain {
                    TickLabel::plain(super::html::sig(value, 1))
                } else {
                    TickLabel { mantissa: "10".into(), exponent: Some(e) }
                }
            });
            ticks.push(Tick { value, label });
            if e == hi_exp || decades > 6 {
                continue;
            }
            for m in 2..=9 {
                let value = m as f64 * 10f64.powi(e);
                // With only one or two decades, 2 and 5 get labels too, so the reader can still
                // interpolate (an axis from 1 to 10 ms with two labels says little).
                let label =
                    (plain && decades <= 2 && (m == 2 || m == 5)).then(|| TickLabel::plain(super::html::sig(value, 1)));
                ticks.push(Tick { value, label });
            }
        }
        ticks
    }
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    if raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let power = 10f64.powf(raw.log10().floor());
    let fraction = raw / power;
    let nice = if fraction <= 1.0 {
        1.0
    } else if fraction <= 2.0 {
        2.0
    } else if fraction <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * power
}

/// The power of ten at or below `x` (x > 0).
pub fn decade_below(x: f64) -> f64 {
    10f64.powf(x.log10().floor())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(scale: &Scale) -> Vec<String> {
        scale.ticks().iter().filter_map(|t| t.label.as_ref().map(TickLabel::text)).collect()
    }

    #[test]
    fn linear_scale_from_zero_with_nice_steps() {
        let s = Scale::fit(ScaleKind::Linear, [120.0, 870.0], true).unwrap();
        assert_eq!((s.lo, s.hi), (0.0, 1000.0));
        assert_eq!(labels(&s), ["0", "200", "400", "600", "800", "1000"]);
        assert!((s.position(500.0) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn linear_labels_use_k_for_large_rates_and_decimals_for_small() {
        let s = Scale::fit(ScaleKind::Linear, [0.0, 23_000.0], true).unwrap();
        assert_eq!(labels(&s), ["0", "5k", "10k", "15k", "20k", "25k"]);
        let s = Scale::fit(ScaleKind::Linear, [0.0, 0.9], true).unwrap();
        assert_eq!(labels(&s)[1], "0.2");
    }

    #[test]
    fn single_value_gets_a_range() {
        let s = Scale::fit(ScaleKind::Linear, [400.0], true).unwrap();
        assert_eq!((s.lo, s.hi), (0.0, 400.0));
        let s = Scale::fit(ScaleKind::Linear, [400.0], false).unwrap();
        assert!(s.lo < 400.0 && s.hi > 400.0, "{s:?}");
        let s = Scale::fit(ScaleKind::Linear, [0.0], true).unwrap();
        assert_eq!((s.lo, s.hi), (0.0, 1.0));
        let s = Scale::fit(ScaleKind::Log, [3.0], false).unwrap();
        assert_eq!((s.lo, s.hi), (1.0, 10.0));
    }

    #[test]
    fn log_scale_snaps_to_decades_and_ignores_non_positive() {
        let s = Scale::fit(ScaleKind::Log, [0.0, -1.0, 0.003, 42.0, f64::NAN], false).unwrap();
        assert_eq!(s.lo, 0.001);
        assert_eq!(s.hi, 100.0);
        assert_eq!(labels(&s), ["0.001", "0.01", "0.1", "1", "10", "100"]);
        // Minor ticks at 2..9 of each decade below the top one.
        assert_eq!(s.ticks().len(), 6 + 5 * 8);
        assert!((s.position(1.0) - 0.6).abs() < 1e-12);
        assert!(s.position(0.0) < 0.0);
        assert!(Scale::fit(ScaleKind::Log, [0.0, -3.0], false).is_none());
    }

    #[test]
    fn log_scale_uses_powers_outside_the_plain_range() {
        let s = Scale::fit(ScaleKind::Log, [1e-6, 0.5], false).unwrap();
        let l = labels(&s);
        assert_eq!(l.first().unwrap(), "10^-6");
        assert_eq!(l.last().unwrap(), "10^0");
        assert_eq!(l.len(), 7);
    }

    #[test]
    fn narrow_log_range_labels_two_and_five() {
        let s = Scale::fit(ScaleKind::Log, [1.5, 8.0], false).unwrap();
        assert_eq!(labels(&s), ["1", "2", "5", "10"]);
    }

    #[test]
    fn very_wide_log_range_labels_every_other_decade() {
        let s = Scale::fit(ScaleKind::Log, [1e-20, 1.0], false).unwrap();
        let l = labels(&s);
        assert_eq!(l.len(), 11);
        assert_eq!(l[1], "10^-18");
        // No minor ticks past six decades.
        assert_eq!(s.ticks().len(), 21);
    }

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(0.7), 1.0);
        assert_eq!(nice_step(1.3), 2.0);
        assert_eq!(nice_step(3.0), 5.0);
        assert_eq!(nice_step(7.0), 10.0);
        assert_eq!(nice_step(0.0), 1.0);
        assert_eq!(decade_below(0.00034), 0.0001);
    }
}
