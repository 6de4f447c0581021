//! The capacity search: step the offered rate up geometrically until a step fails, then bisect
//! between the last passing and the first failing rate.
//!
//! Seeds 000 and 002 define a server's capacity as the highest load at which 99.99% of calls
//! succeed (a failed-call ratio under 0.01%) over a full measurement window. This module finds
//! that rate without knowing how a step is run: the caller passes a closure that offers a rate
//! for one window and returns what it measured, so the search is tested against simulated
//! servers and driven by the real load generator in `herald bench capacity`.
//!
//! # When a step passes
//!
//! A step at offered rate λ passes when all of these hold:
//! 1. it was not interrupted (a cut-short window is not a full measurement window);
//! 2. something was attempted (an empty window proves nothing);
//! 3. `failure_ratio() <= max_failure`;
//! 4. the achieved (successful) rate is at least `(1 − tolerance)·λ`, with
//!    `tolerance = RATE_TOLERANCE + 3/√(λ·duration)`. The first term catches a generator or
//!    server that silently fell behind the schedule (calls never attempted are not counted as
//!    failures, so the ratio alone would pass); the second allows three standard deviations of
//!    the Poisson count of arrivals in the window (a count of mean N has SD √N).
//!
//! The criterion can only be met meaningfully when a window holds at least `1/max_failure`
//! calls (10,000 for 0.01%): below that, a single failed call already exceeds the threshold.
//! Choose the window length so that `rate · duration` clears it at the rates of interest.
//!
//! # Why the final lower bound is the capacity
//!
//! Every rate the up-steps ran below the first failure passed; every bisection midpoint becomes
//! the new lower (passing) or upper (failing) bound. So the final lower bound is the highest
//! passing rate among all steps, even when noise makes pass/fail non-monotone in the rate.

use crate::results::{CapacityResult, RunResult, SCHEMA_VERSION};

/// The achieved rate may fall this far (fraction) below the offered rate, plus Poisson noise.
pub const RATE_TOLERANCE: f64 = 0.05;

/// How the search steps and when it stops.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchOptions {
    /// First offered rate, calls per second.
    pub start_rate: f64,
    /// Never offer more than this; if it passes, it is the reported capacity.
    pub max_rate: f64,
    /// Each up-step multiplies the rate by this (> 1), each down-step divides by it.
    pub step_factor: f64,
    /// Stop bisecting when `hi - lo <= precision * lo`.
    pub precision: f64,
    /// Highest failed-call ratio a passing step may have (0.0001 = 0.01%, the seeds' criterion).
    pub max_failure: f64,
    /// Most steps to run in total (up, down and bisection).
    pub max_steps: usize,
}

impl Default for SearchOptions {
    /// 50 cps doubling up to 100,000 cps, 2% precision, 0.01% failures, at most 30 steps
    /// (doubling from 50 reaches 100,000 in 11 steps; bisecting a factor-2 interval to 2%
    /// takes 6 more).
    fn default() -> Self {
        SearchOptions {
            start_rate: 50.0,
            max_rate: 100_000.0,
            step_factor: 2.0,
            precision: 0.02,
            max_failure: 0.0001,
            max_steps: 30,
        }
    }
}

impl SearchOptions {
    /// Says what is wrong with the options, if anything.
    pub fn check(&self) -> Result<(), String> {
        let positive = |v: f64| v.is_finite() && v > 0.0;
        if !positive(self.start_rate) {
            return Err(format!("start rate must be positive, not {}", self.start_rate));
        }
        if !(self.max_rate.is_finite() && self.max_rate >= self.start_rate) {
            return Err(format!("max rate {} is below the start rate {}", self.max_rate, self.start_rate));
        }
        if !(self.step_factor.is_finite() && self.step_factor > 1.0) {
            return Err(format!("step factor must be greater than 1, not {}", self.step_factor));
        }
        if !positive(self.precision) {
            return Err(format!("precision must be positive, not {}", self.precision));
        }
        if !(self.max_failure.is_finite() && (0.0..1.0).contains(&self.max_failure)) {
            return Err(format!("max failure must be in [0, 1), not {}", self.max_failure));
        }
        if self.max_steps == 0 {
            return Err("max steps must be at least 1".into());
        }
        Ok(())
    }
}

/// Whether one step passed (see the module doc); `Err` says why not.
pub fn judge_step(opts: &SearchOptions, step: &RunResult) -> Result<(), String> {
    if step.interrupted {
        return Err("interrupted".into());
    }
    if step.attempted == 0 {
        return Err("no calls attempted".into());
    }
    let ratio = step.failure_ratio();
    if ratio > opts.max_failure {
        return Err(format!("failed-call ratio {:.4}% > {:.4}%", ratio * 100.0, opts.max_failure * 100.0));
    }
    let expected_arrivals = step.offered_rate * step.duration_s;
    let tolerance =
        if expected_arrivals > 0.0 { RATE_TOLERANCE + 3.0 / expected_arrivals.sqrt() } else { RATE_TOLERANCE };
    if step.achieved_rate < (1.0 - tolerance) * step.offered_rate {
        return Err(format!(
            "achieved {:.1}/s < {:.1}% of offered {:.1}/s",
            step.achieved_rate,
            (1.0 - tolerance) * 100.0,
            step.offered_rate
        ));
    }
    Ok(())
}

/// True when the search stopped because a step was interrupted.
pub fn was_interrupted(result: &CapacityResult) -> bool {
    result.steps.last().is_some_and(|s| s.interrupted)
}

/// Runs the search. `run_step(rate)` offers `rate` for one measurement window; an `Err` from it
/// ends the search with that error. An interrupted step ends it early with what was found so far
/// (see [`was_interrupted`]). The steps are recorded in the order they ran.
pub fn search<F: FnMut(f64) -> Result<RunResult, String>>(
    opts: &SearchOptions,
    label: &str,
    target: &str,
    mut run_step: F,
) -> Result<CapacityResult, String> {
    opts.check()?;
    let mut result = CapacityResult {
        schema: SCHEMA_VERSION,
        label: label.to_string(),
        target: target.to_string(),
        max_failure: opts.max_failure,
        capacity_rate: 0.0,
        steps: Vec::new(),
    };
    // Runs one step, records it; None when the search must stop (interrupted or out of steps).
    let mut run = |rate: f64, result: &mut CapacityResult| -> Result<Option<bool>, String> {
        if result.steps.len() >= opts.max_steps {
            return Ok(None);
        }
        let mut step = run_step(rate).map_err(|e| format!("step {} at {rate:.1}/s: {e}", result.steps.len() + 1))?;
        if step.offered_rate == 0.0 {
            step.offered_rate = rate;
        }
        let interrupted = step.interrupted;
        let passed = judge_step(opts, &step).is_ok();
        result.steps.push(step);
        Ok(if interrupted { None } else { Some(passed) })
    };

    // Up-steps from the start rate (or down-steps when the start rate already fails).
    let (mut lo, mut hi) = (0.0, 0.0);
    let mut rate = opts.start_rate;
    match run(rate, &mut result)? {
        None => return Ok(result),
        Some(true) => {
            lo = rate;
            while rate < opts.max_rate {
                rate = (rate * opts.step_factor).min(opts.max_rate);
                match run(rate, &mut result)? {
                    None => break,
                    Some(true) => lo = rate,
                    Some(false) => {
                        hi = rate;
                        break;
                    }
                }
            }
        }
        Some(false) => {
            hi = rate;
            loop {
                rate /= opts.step_factor;
                match run(rate, &mut result)? {
                    None => break,
                    Some(true) => {
                        lo = rate;
                        break;
                    }
                    Some(false) => hi = rate,
                }
            }
        }
    }
    let stopped = was_interrupted(&result) || result.steps.len() >= opts.max_steps;

    // Bisection between the highest pass and the lowest failure above it.
    if !stopped && lo > 0.0 && hi > lo {
        while hi - lo > opts.precision * lo {
            let mid = (lo + hi) / 2.0;
            match run(mid, &mut result)? {
                None => break,
                Some(true) => lo = mid,
                Some(false) => hi = mid,
            }
        }
    }
    result.capacity_rate = lo;
    Ok(result)
}

#[cfg(test)]
mod tests;
