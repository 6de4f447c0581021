//! Fitting the models to a results file (see the parent module for the method).

use super::queueing::{mgc_wait, mmck_drop};
use super::results::{default_queue_capacity, ModelFit, ModelPoint, DROP_NOISE, MESSAGES_PER_CALL, WAIT_NOISE_US};
use crate::results::{ResultsFile, RunResult, ServerMetrics};

const SOURCE_METRICS: &str = "herald metrics";
const SOURCE_CPU: &str = "server CPU per call, exponential assumed";

/// Loads at which the model is also evaluated, between and beyond the measured rates.
const GRID_UTILIZATIONS: [f64; 11] = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99];

/// What one run tells the model, in jobs (messages, or calls without metrics) and seconds.
struct Observed {
    offered_rate: f64,
    /// Jobs per second offered to the server.
    lambda: f64,
    jobs_per_call: f64,
    mean_s: f64,
    second_moment_s2: f64,
    /// How many jobs the moments are averaged over (the pooling weight).
    jobs: f64,
    measured_wait_us: Option<f64>,
    measured_drop: Option<f64>,
}

/// Fits the M/G/1 (M/G/c) waiting-time and M/M/c/K drop models to every run in `file`.
/// `queue_capacity` is K in messages; `None` takes [`default_queue_capacity`].
pub fn fit(file: &ResultsFile, queue_capacity: Option<u32>) -> Result<ModelFit, String> {
    let runs = file.runs();
    let label = file.label().to_string();
    if runs.is_empty() {
        return Err(format!("{label}: no runs in the results file"));
    }
    let mut notes = Vec::new();
    let with_metrics: Vec<(&RunResult, &ServerMetrics)> = runs
        .iter()
        .filter_map(|r| r.server_metrics.as_ref().map(|m| (*r, m)))
        .filter(|(_, m)| m.messages.values().any(|t| t.count > 0))
        .collect();
    let k_messages = queue_capacity.unwrap_or_else(default_queue_capacity).max(1);
    let (source, servers, queue_capacity, observed) = if !with_metrics.is_empty() {
        let servers = with_metrics[0].1.workers.max(1);
        if with_metrics.iter().any(|(_, m)| m.workers.max(1) != servers) {
            notes.push(format!("runs report different worker counts; c = {servers} from the first"));
        }
        let observed: Vec<Observed> = with_metrics.iter().filter_map(|(r, m)| from_metrics(r, m)).collect();
        (SOURCE_METRICS, servers, k_messages, observed)
    } else {
        let observed: Vec<Observed> = runs.iter().filter_map(|r| from_cpu(r)).collect();
        let k_calls = ((k_messages as f64 / MESSAGES_PER_CALL).round() as u32).max(1);
        notes.push(format!(
            "no herald metrics: one call is one job served in the server's CPU time per call, \
             exponential service, 1 server, K = {k_messages} messages / {MESSAGES_PER_CALL} per call = {k_calls} calls; \
             measured drop = the machine-wide UDP RcvbufErrors share of datagrams"
        ));
        (SOURCE_CPU, 1, k_calls, observed)
    };
    if observed.is_empty() {
        return Err(format!(
            "{label}: no run has both calls attempted and a service time (herald metrics with message \
             timings, or --server-pid CPU per call)"
        ));
    }
    if observed.len() < runs.len() {
        notes.push(format!(
            "{} of {} runs had no usable service time and were left out",
            runs.len() - observed.len(),
            runs.len()
        ));
    }

    let total_jobs: f64 = observed.iter().map(|o| o.jobs).sum();
    let pooled = |f: fn(&Observed) -> f64| observed.iter().map(|o| f(o) * o.jobs).sum::<f64>() / total_jobs;
    let mean_s = pooled(|o| o.mean_s);
    let second_moment_s2 = pooled(|o| o.second_moment_s2);
    let jobs_per_call = pooled(|o| o.jobs_per_call);

    let predict = |offered_rate: f64, lambda: f64, mean: f64, m2: f64| {
        let utilization = lambda * mean / servers as f64;
        let predicted_wait_us = mgc_wait(lambda, mean, m2, servers).map_or(f64::INFINITY, |w| w * 1e6);
        let predicted_drop = mmck_drop(lambda, 1.0 / mean, servers, queue_capacity);
        (offered_rate, utilization, predicted_wait_us, predicted_drop)
    };
    let mut points: Vec<ModelPoint> = observed
        .iter()
        .map(|o| {
            let (offered_rate, utilization, predicted_wait_us, predicted_drop) =
                predict(o.offered_rate, o.lambda, o.mean_s, o.second_moment_s2);
            ModelPoint {
                offered_rate,
                utilization,
                predicted_wait_us,
                measured_wait_us: o.measured_wait_us,
                predicted_drop,
                measured_drop: o.measured_drop,
            }
        })
        .collect();
    let mut breaks_down_at = None;
    for point in &points {
        if let Some(reason) = breakdown(point) {
            breaks_down_at = Some(point.offered_rate);
            notes.push(format!("model stops holding at {:.1} calls/s: {reason}", point.offered_rate));
            break;
        }
    }
    for rho in GRID_UTILIZATIONS {
        let lambda = rho * servers as f64 / mean_s;
        let (offered_rate, utilization, predicted_wait_us, predicted_drop) =
            predict(lambda / jobs_per_call, lambda, mean_s, second_moment_s2);
        points.push(ModelPoint {
            offered_rate,
            utilization,
            predicted_wait_us,
            measured_wait_us: None,
            predicted_drop,
            measured_drop: None,
        });
    }
    points.sort_by(|a, b| a.offered_rate.total_cmp(&b.offered_rate));
    Ok(ModelFit {
        label,
        service_mean_us: mean_s * 1e6,
        service_second_moment_us2: second_moment_s2 * 1e12,
        servers,
        queue_capacity,
        source: source.to_string(),
        points,
        breaks_down_at,
        notes,
    })
}

/// Why the model does not hold at this measured point, if it does not.
fn breakdown(p: &ModelPoint) -> Option<String> {
    if p.utilization >= 1.0 {
        return Some(format!("utilization {:.3} >= 1, the infinite-queue model has no steady state", p.utilization));
    }
    if let Some(measured) = p.measured_wait_us {
        let off = (p.predicted_wait_us - measured).abs();
        if off > 0.5 * measured && off > WAIT_NOISE_US {
            return Some(format!("predicted wait {:.1} µs vs measured {measured:.1} µs", p.predicted_wait_us));
        }
    }
    if let Some(measured) = p.measured_drop {
        let off = (p.predicted_drop - measured).abs();
        if off > 0.5 * measured && off > DROP_NOISE {
            return Some(format!("predicted drop {:.4} vs measured {measured:.4}", p.predicted_drop));
        }
    }
    None
}

/// A run with herald's per-message timings: jobs are messages.
fn from_metrics(run: &RunResult, metrics: &ServerMetrics) -> Option<Observed> {
    let timings = metrics.messages.values().filter(|t| t.count > 0);
    let messages: f64 = timings.clone().map(|t| t.count as f64).sum();
    let weighted = |f: fn(&crate::results::MessageTiming) -> f64| {
        timings.clone().map(|t| t.count as f64 * f(t)).sum::<f64>() / messages
    };
    let mean_s = weighted(|t| t.service.mean_us) * 1e-6;
    let second_moment_s2 = weighted(|t| t.service.second_moment_us2) * 1e-12;
    if run.attempted == 0 || !(mean_s > 0.0 && mean_s.is_finite()) || !second_moment_s2.is_finite() {
        return None;
    }
    let jobs_per_call = messages / run.attempted as f64;
    let drops = metrics.socket_drops as f64;
    Some(Observed {
        offered_rate: run.offered_rate,
        lambda: run.offered_rate * jobs_per_call,
        jobs_per_call,
        mean_s,
        // E[X²] ≥ E[X]² for any distribution; a smaller value is a measurement inconsistency.
        second_moment_s2: second_moment_s2.max(mean_s * mean_s),
        jobs: messages,
        measured_wait_us: Some(weighted(|t| t.queue_wait.mean_us)),
        measured_drop: Some(drops / (messages + drops)),
    })
}

/// A run with only the server's CPU per call: jobs are calls, service exponential.
fn from_cpu(run: &RunResult) -> Option<Observed> {
    let mean_s = run.servers.first()?.cpu_s_per_1000_calls / 1000.0;
    if run.attempted == 0 || !(mean_s > 0.0 && mean_s.is_finite()) {
        return None;
    }
    let received = run.udp_after.in_datagrams.saturating_sub(run.udp_before.in_datagrams) as f64;
    let dropped = run.udp_after.rcvbuf_errors.saturating_sub(run.udp_before.rcvbuf_errors) as f64;
    Some(Observed {
        offered_rate: run.offered_rate,
        lambda: run.offered_rate,
        jobs_per_call: 1.0,
        mean_s,
        second_moment_s2: 2.0 * mean_s * mean_s,
        jobs: run.attempted as f64,
        measured_wait_us: None,
        measured_drop: (received + dropped > 0.0).then(|| dropped / (received + dropped)),
    })
}
