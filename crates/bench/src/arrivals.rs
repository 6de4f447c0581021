//! When calls start: open-loop arrival processes (seed 003 patched SIPp for Poisson arrivals).
//!
//! A generator asks for the gap to the next arrival and adds it to the *scheduled* time of the
//! previous one, never to "now": a late tick does not slow the offered rate down, which is what
//! makes the load open-loop.

use rand::Rng;
use rand_distr::{Distribution, Exp};
use std::time::Duration;

/// An arrival process.
#[derive(Debug, Clone)]
pub enum Arrivals {
    /// Exponential gaps with mean 1/rate (a Poisson process).
    Poisson { rate: f64, exp: Exp<f64> },
    /// Fixed gaps of 1/rate.
    Uniform { rate: f64 },
    /// Gaps replayed from a file, one per line, cycling when the file ends.
    Trace { path: String, gaps: Vec<Duration>, next: usize },
}

impl Arrivals {
    /// Parses `poisson`, `uniform` or `file:PATH`; `rate` (per second) is ignored for `file:`.
    ///
    /// A trace file holds one inter-arrival time per line: a number of seconds (`0.0125`) or a
    /// number with a unit (`12.5ms`, `12500us`, `1s`). Blank lines and `#` comments are skipped.
    pub fn parse(spec: &str, rate: f64) -> Result<Arrivals, String> {
        if let Some(path) = spec.strip_prefix("file:") {
            let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
            return Arrivals::from_trace(path, &text);
        }
        if !(rate.is_finite() && rate > 0.0) {
            return Err(format!("rate must be a positive number of arrivals per second, not {rate}"));
        }
        match spec {
            "poisson" => Ok(Arrivals::Poisson { rate, exp: Exp::new(rate).map_err(|e| e.to_string())? }),
            "uniform" => Ok(Arrivals::Uniform { rate }),
            other => Err(format!("unknown arrival process '{other}': use poisson, uniform or file:PATH")),
        }
    }

    /// A trace from the text of a file (`path` only names it in errors).
    pub fn from_trace(path: &str, text: &str) -> Result<Arrivals, String> {
        let mut gaps = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let gap = parse_gap(line).ok_or_else(|| format!("{path}:{}: not a duration: '{line}'", n + 1))?;
            gaps.push(gap);
        }
        if gaps.is_empty() || gaps.iter().all(|g| g.is_zero()) {
            return Err(format!("{path}: no positive inter-arrival times"));
        }
        Ok(Arrivals::Trace { path: path.to_string(), gaps, next: 0 })
    }

    /// The gap between the previous arrival and the next one.
    pub fn next_gap<R: Rng + ?Sized>(&mut self, rng: &mut R) -> Duration {
        match self {
            Arrivals::Poisson { exp, .. } => Duration::from_secs_f64(exp.sample(rng)),
            Arrivals::Uniform { rate } => Duration::from_secs_f64(1.0 / *rate),
            Arrivals::Trace { gaps, next, .. } => {
                let gap = gaps[*next];
                *next = (*next + 1) % gaps.len();
                gap
            }
        }
    }

    /// Mean arrivals per second.
    pub fn rate(&self) -> f64 {
        match self {
            Arrivals::Poisson { rate, .. } | Arrivals::Uniform { rate } => *rate,
            Arrivals::Trace { gaps, .. } => {
                let total: f64 = gaps.iter().map(Duration::as_secs_f64).sum();
                gaps.len() as f64 / total
            }
        }
    }

    /// How a results file names this process: "poisson", "uniform" or "file:PATH".
    pub fn name(&self) -> String {
        match self {
            Arrivals::Poisson { .. } => "poisson".into(),
            Arrivals::Uniform { .. } => "uniform".into(),
            Arrivals::Trace { path, .. } => format!("file:{path}"),
        }
    }
}

fn parse_gap(text: &str) -> Option<Duration> {
    let (number, scale) = if let Some(n) = text.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = text.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1.0)
    } else {
        (text, 1.0)
    };
    let value: f64 = number.trim().parse().ok()?;
    (value.is_finite() && value >= 0.0 && value * scale < 86_400.0).then(|| Duration::from_secs_f64(value * scale))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    /// Mean and coefficient of variation of `n` gaps.
    fn mean_and_cv(arrivals: &mut Arrivals, n: usize) -> (f64, f64) {
        let mut rng = SmallRng::seed_from_u64(7);
        let gaps: Vec<f64> = (0..n).map(|_| arrivals.next_gap(&mut rng).as_secs_f64()).collect();
        let mean = gaps.iter().sum::<f64>() / n as f64;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        (mean, var.sqrt() / mean)
    }

    #[test]
    fn poisson_gaps_are_exponential_mean_one_over_rate_cv_one() {
        let mut a = Arrivals::parse("poisson", 250.0).unwrap();
        let (mean, cv) = mean_and_cv(&mut a, 200_000);
        // Standard error of the mean is 1/(250·√200000) ≈ 9e-6 s: 1% tolerance is > 40 sigmas.
        assert!((mean - 0.004).abs() < 0.004 * 0.01, "mean {mean}");
        assert!((cv - 1.0).abs() < 0.02, "cv {cv}");
    }

    #[test]
    fn uniform_gaps_are_constant() {
        let mut a = Arrivals::parse("uniform", 400.0).unwrap();
        let (mean, cv) = mean_and_cv(&mut a, 1000);
        assert!((mean - 0.0025).abs() < 1e-12);
        assert!(cv < 1e-9);
    }

    #[test]
    fn trace_replays_and_cycles_with_units() {
        let mut a = Arrivals::from_trace("t", "# gaps\n0.5\n250ms\n\n250000us\n").unwrap();
        let mut rng = SmallRng::seed_from_u64(1);
        let got: Vec<_> = (0..4).map(|_| a.next_gap(&mut rng)).collect();
        let ms = Duration::from_millis;
        assert_eq!(got, vec![ms(500), ms(250), ms(250), ms(500)]);
        assert!((a.rate() - 3.0).abs() < 1e-9);
        assert_eq!(a.name(), "file:t");
    }

    #[test]
    fn bad_specs_are_errors_with_line_numbers() {
        assert!(Arrivals::parse("gamma", 1.0).unwrap_err().contains("unknown arrival"));
        assert!(Arrivals::parse("poisson", 0.0).is_err());
        assert!(Arrivals::parse("uniform", f64::NAN).is_err());
        assert_eq!(Arrivals::from_trace("f", "0.1\nabc\n").unwrap_err(), "f:2: not a duration: 'abc'");
        assert!(Arrivals::from_trace("f", "0\n0\n").is_err());
        assert!(Arrivals::from_trace("f", "-1\n").is_err());
    }
}
