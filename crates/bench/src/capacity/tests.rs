//! The search against simulated servers whose knee is known.

use super::*;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use rand_distr::{Binomial, Distribution, Normal};

const WINDOW_S: f64 = 60.0;

/// A step of `duration` seconds at `rate` in which `failed` of `attempted` calls failed and
/// the rest succeeded.
fn step(rate: f64, attempted: u64, failed: u64) -> RunResult {
    RunResult {
        offered_rate: rate,
        duration_s: WINDOW_S,
        attempted,
        failed,
        succeeded: attempted - failed,
        achieved_rate: (attempted - failed) as f64 / WINDOW_S,
        ..RunResult::default()
    }
}

/// A server that loses 1% of calls above 1234 cps and none at or below.
fn sharp_knee(rate: f64) -> Result<RunResult, String> {
    let attempted = (rate * WINDOW_S).round() as u64;
    let failed = if rate > 1234.0 { attempted / 100 } else { 0 };
    Ok(step(rate, attempted, failed))
}

fn opts(start: f64, max: f64, precision: f64) -> SearchOptions {
    SearchOptions { start_rate: start, max_rate: max, step_factor: 2.0, precision, ..SearchOptions::default() }
}

fn offered(result: &CapacityResult) -> Vec<f64> {
    result.steps.iter().map(|s| s.offered_rate).collect()
}

#[test]
fn finds_a_sharp_knee_and_records_every_step_in_order() {
    let result = search(&opts(100.0, 100_000.0, 0.01), "sim", "127.0.0.1:5060", sharp_knee).unwrap();
    // By hand: doubling 100, 200, 400, 800 pass, 1600 fails; bisect [800, 1600]: 1200 pass,
    // 1400 fail, 1300 fail, 1250 fail, 1225 pass, 1237.5 fail, 1231.25 pass; then
    // hi − lo = 6.25 <= 1% of 1231.25, so it stops.
    let want = [100.0, 200.0, 400.0, 800.0, 1600.0, 1200.0, 1400.0, 1300.0, 1250.0, 1225.0, 1237.5, 1231.25];
    assert_eq!(offered(&result), want);
    assert_eq!(result.capacity_rate, 1231.25);
    assert!(1234.0 - result.capacity_rate <= 0.01 * result.capacity_rate);
    assert_eq!((result.label.as_str(), result.target.as_str()), ("sim", "127.0.0.1:5060"));
    assert_eq!(result.schema, SCHEMA_VERSION);
    assert_eq!(result.max_failure, 0.0001);
    assert!(!was_interrupted(&result));
}

#[test]
fn finds_a_noisy_knee_within_precision_for_many_seeds() {
    for seed in 0..20 {
        let mut rng = SmallRng::seed_from_u64(seed);
        // From 1000 cps up, a background failure probability of 2e-5 (a fifth of the
        // threshold: 1.2 to 1.5 expected failures where 6 to 7 would break it), rising by 5% per
        // 100% of overload above 1234 cps; arrivals per window are Poisson (normal approx.).
        // Below 1000 cps the server is clean: a 60 s window there holds fewer than 1/max_failure
        // calls, so one unlucky failure would already break 0.01% (see the module doc).
        let server = |rate: f64| -> Result<RunResult, String> {
            let mean = rate * WINDOW_S;
            let attempted = Normal::new(mean, mean.sqrt()).unwrap().sample(&mut rng).max(1.0).round() as u64;
            let background = if rate >= 1000.0 { 2e-5 } else { 0.0 };
            let p = background + if rate > 1234.0 { 0.05 * (rate - 1234.0) / 1234.0 } else { 0.0 };
            let failed = Binomial::new(attempted, p.min(1.0)).unwrap().sample(&mut rng);
            Ok(step(rate, attempted, failed))
        };
        let result = search(&opts(100.0, 100_000.0, 0.01), "noisy", "t", server).unwrap();
        // The threshold is crossed where 2e-5 + 0.05·x/1234 = 1e-4, i.e. 2 cps above the knee;
        // 1% precision puts the answer at most ~12 cps below. Allow Poisson luck on both sides.
        let c = result.capacity_rate;
        assert!((1200.0..=1250.0).contains(&c), "seed {seed}: capacity {c}, steps {:?}", offered(&result));
        // Every recorded step above the capacity failed, the capacity step passed.
        let o = SearchOptions { max_failure: 0.0001, ..SearchOptions::default() };
        for s in &result.steps {
            assert_eq!(judge_step(&o, s).is_ok(), s.offered_rate <= c, "seed {seed} step {}", s.offered_rate);
        }
    }
}

#[test]
fn a_generator_that_falls_behind_fails_the_step() {
    // No failures at all, but nothing above 800 cps is ever attempted: capacity ~800, not max.
    let capped = |rate: f64| Ok(step(rate, (rate.min(800.0) * WINDOW_S) as u64, 0));
    let result = search(&opts(100.0, 10_000.0, 0.02), "capped", "t", capped).unwrap();
    // Pass needs 800 >= (0.95 − 3/√(60λ))·λ, true up to λ ≈ 854 (at 854: 3/√51240 = 0.01325,
    // 0.93675·854 = 799.99). By hand: 100..800 pass, 1600 fails; bisecting, 1200, 1000, 900
    // fail, 850 passes (0.93673·850 = 796.2), 875 and 862.5 fail; 12.5 <= 2% of 850, stop.
    assert_eq!(offered(&result)[5..], [1200.0, 1000.0, 900.0, 850.0, 875.0, 862.5]);
    assert_eq!(result.capacity_rate, 850.0);
    let slow = step(1000.0, 48_000, 0);
    assert!(judge_step(&SearchOptions::default(), &slow).unwrap_err().contains("achieved 800.0/s"));
}

#[test]
fn starting_above_the_knee_steps_down() {
    let result = search(&opts(5000.0, 100_000.0, 0.01), "down", "t", sharp_knee).unwrap();
    // 5000, 2500 fail, 1250 fail, 625 pass, then bisect [625, 1250] to 1%.
    assert_eq!(&offered(&result)[..4], &[5000.0, 2500.0, 1250.0, 625.0]);
    assert!(result.capacity_rate <= 1234.0 && 1234.0 - result.capacity_rate <= 0.01 * 1234.0);
}

#[test]
fn a_server_that_never_fails_is_reported_at_max_rate() {
    let perfect = |rate: f64| Ok(step(rate, (rate * WINDOW_S) as u64, 0));
    let result = search(&opts(100.0, 1000.0, 0.01), "perfect", "t", perfect).unwrap();
    assert_eq!(offered(&result), [100.0, 200.0, 400.0, 800.0, 1000.0]);
    assert_eq!(result.capacity_rate, 1000.0);
}

#[test]
fn a_server_that_always_fails_has_capacity_zero_after_max_steps() {
    let broken = |rate: f64| Ok(step(rate, (rate * WINDOW_S).max(1.0) as u64, 1));
    let o = SearchOptions { max_steps: 6, ..opts(100.0, 1000.0, 0.01) };
    let result = search(&o, "broken", "t", broken).unwrap();
    assert_eq!(offered(&result), [100.0, 50.0, 25.0, 12.5, 6.25, 3.125]);
    assert_eq!(result.capacity_rate, 0.0);
}

#[test]
fn an_interrupted_step_stops_the_search_and_keeps_the_curve() {
    let mut calls = 0;
    let interrupt_third = |rate: f64| {
        calls += 1;
        let mut s = sharp_knee(rate)?;
        s.interrupted = calls == 3;
        Ok(s)
    };
    let result = search(&opts(100.0, 100_000.0, 0.01), "int", "t", interrupt_third).unwrap();
    assert_eq!(offered(&result), [100.0, 200.0, 400.0]);
    assert_eq!(result.capacity_rate, 200.0);
    assert!(was_interrupted(&result));
}

#[test]
fn a_step_error_ends_the_search_with_it() {
    let failing = |rate: f64| if rate > 300.0 { Err("cannot bind".to_string()) } else { sharp_knee(rate) };
    let err = search(&opts(100.0, 100_000.0, 0.01), "e", "t", failing).unwrap_err();
    assert_eq!(err, "step 3 at 400.0/s: cannot bind");
}

#[test]
fn bad_options_and_empty_or_interrupted_steps() {
    let bad = [
        SearchOptions { start_rate: 0.0, ..SearchOptions::default() },
        SearchOptions { max_rate: 10.0, ..SearchOptions::default() },
        SearchOptions { step_factor: 1.0, ..SearchOptions::default() },
        SearchOptions { precision: f64::NAN, ..SearchOptions::default() },
        SearchOptions { max_failure: 1.0, ..SearchOptions::default() },
        SearchOptions { max_steps: 0, ..SearchOptions::default() },
    ];
    for o in &bad {
        assert!(search(o, "", "", sharp_knee).is_err(), "{o:?}");
    }
    let o = SearchOptions::default();
    assert_eq!(judge_step(&o, &RunResult::default()), Err("no calls attempted".into()));
    let interrupted = RunResult { interrupted: true, ..step(10.0, 600, 0) };
    assert_eq!(judge_step(&o, &interrupted), Err("interrupted".into()));
    // 1 failure in 10,000 is exactly the threshold and passes; 2 do not.
    assert!(judge_step(&o, &step(10_000.0 / WINDOW_S, 10_000, 1)).is_ok());
    assert!(judge_step(&o, &step(10_000.0 / WINDOW_S, 10_000, 2)).unwrap_err().contains("0.0200% > 0.0100%"));
}
