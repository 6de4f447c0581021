//! Closed-form queueing results used by seed 003 (and their textbook special cases).
//!
//! All functions take rates per second and times in seconds, and never panic: inputs outside a
//! formula's domain give `None` (waiting times) or NaN (probabilities).

/// Mean waiting time in queue of an M/G/1 queue, seconds: the Pollaczek–Khinchine formula,
/// seed 003 equation (4.2), `W = λ·E[X²] / (2(1 − ρ))` with `ρ = λ·E[X]`.
///
/// `None` when the queue is unstable (ρ ≥ 1: the infinite-queue model has no steady state, the
/// "N/A" cells of table 4.4) or an input is negative or not finite.
pub fn mg1_wait(lambda: f64, mean_s: f64, second_moment_s2: f64) -> Option<f64> {
    if ![lambda, mean_s, second_moment_s2].iter().all(|v| v.is_finite() && *v >= 0.0) {
        return None;
    }
    let rho = lambda * mean_s;
    (rho < 1.0).then(|| lambda * second_moment_s2 / (2.0 * (1.0 - rho)))
}

/// Mean waiting time in queue of an M/G/c queue, seconds, by the Allen–Cunneen approximation:
/// the M/M/c (Erlang C) wait scaled by `(1 + C²)/2`, C² the squared coefficient of variation of
/// the service time. For c = 1 it is exactly [`mg1_wait`]; seed 003 models c threads sharing
/// one socket queue (chapter 5), and this is the waiting-time counterpart of its M/M/c/K drops.
pub fn mgc_wait(lambda: f64, mean_s: f64, second_moment_s2: f64, c: u32) -> Option<f64> {
    if c == 0 || ![lambda, mean_s, second_moment_s2].iter().all(|v| v.is_finite() && *v >= 0.0) {
        return None;
    }
    if c == 1 {
        return mg1_wait(lambda, mean_s, second_moment_s2);
    }
    let rho = lambda * mean_s / c as f64;
    if rho >= 1.0 {
        return None;
    }
    if lambda == 0.0 || mean_s == 0.0 {
        return Some(0.0);
    }
    let scv = second_moment_s2 / (mean_s * mean_s) - 1.0;
    let mmc_wait = erlang_c(lambda * mean_s, c) * mean_s / (c as f64 * (1.0 - rho));
    Some(mmc_wait * (1.0 + scv.max(0.0)) / 2.0)
}

/// Probability that an arrival waits in an M/M/c queue (Erlang C) with offered load `a = λ/μ`
/// Erlangs, from the Erlang B recursion `B(0) = 1`, `B(n) = a·B(n−1) / (n + a·B(n−1))`, which
/// stays in [0, 1] for any c (no factorials).
pub fn erlang_c(a: f64, c: u32) -> f64 {
    let b = erlang_b(a, c);
    let rho = a / c as f64;
    b / (1.0 - rho + rho * b)
}

/// Blocking probability of an M/M/c/c loss system (Erlang B) with offered load `a` Erlangs.
pub fn erlang_b(a: f64, c: u32) -> f64 {
    (1..=c).fold(1.0, |b, n| a * b / (n as f64 + a * b))
}

/// Drop (blocking) probability `p_K` of an M/M/c/K queue: seed 003 equations (5.3) and (5.4),
/// arrivals `lambda`, service rate `mu` per server, `c` servers, at most `k` messages in the
/// system (waiting plus in service).
///
/// The stationary probabilities `p_n ∝ aⁿ/n!` (n < c) and `aⁿ/(c!·c^(n−c))` (n ≥ c), a = λ/μ,
/// are built as logarithms by the ratio `p_n/p_(n−1) = a/min(n, c)` and normalised with a
/// log-sum-exp, so K in the thousands neither overflows nor underflows (equation (5.3) as
/// written needs c! and a^K, which overflow f64 from K ≈ 300 at a ≈ 10).
///
/// Edge cases: `k < c` is treated as `k = c` (there are always c places in service); λ = 0
/// drops nothing; μ = 0 or c = 0 drops everything; non-finite or negative inputs give NaN.
pub fn mmck_drop(lambda: f64, mu: f64, c: u32, k: u32) -> f64 {
    if !(lambda.is_finite() && mu.is_finite() && lambda >= 0.0 && mu >= 0.0) {
        return f64::NAN;
    }
    if lambda == 0.0 {
        return 0.0;
    }
    if mu == 0.0 || c == 0 {
        return 1.0;
    }
    let k = k.max(c);
    let ln_a = (lambda / mu).ln();
    // ln p_n (unnormalised) for n = 0..=K, and the running log-sum-exp of them.
    let mut ln_p = 0.0_f64;
    let mut ln_sum = 0.0_f64;
    for n in 1..=k {
        ln_p += ln_a - (n.min(c) as f64).ln();
        ln_sum = log_add_exp(ln_sum, ln_p);
    }
    (ln_p - ln_sum).exp()
}

/// ln(eˣ + eʸ) without overflow.
fn log_add_exp(x: f64, y: f64) -> f64 {
    let (hi, lo) = if x > y { (x, y) } else { (y, x) };
    hi + (lo - hi).exp().ln_1p()
}

#[cfg(test)]
#[path = "queueing_tests.rs"]
mod tests;
