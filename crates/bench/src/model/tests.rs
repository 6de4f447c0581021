//! Fitting against results files whose expected predictions were computed by hand.

use super::*;
use crate::results::{
    CapacityResult, MessageTiming, Moments, ResultsFile, RunResult, ServerMetrics, ServerUsage, UdpCounters,
};

/// A 60 s run at `offered` calls/s with herald metrics: (type, count, service mean µs,
/// service E[X²] µs², mean queue wait µs) per message type.
fn metrics_run(offered: f64, types: &[(&str, u64, f64, f64, f64)]) -> RunResult {
    let messages = types
        .iter()
        .map(|&(name, count, mean, m2, wait)| {
            let timing = MessageTiming {
                count,
                queue_wait: Moments { mean_us: wait, second_moment_us2: 0.0 },
                service: Moments { mean_us: mean, second_moment_us2: m2 },
            };
            (name.to_string(), timing)
        })
        .collect();
    RunResult {
        label: "herald".into(),
        offered_rate: offered,
        duration_s: 60.0,
        attempted: (offered * 60.0) as u64,
        server_metrics: Some(ServerMetrics { workers: 1, socket_drops: 0, messages }),
        ..RunResult::default()
    }
}

fn capacity_file() -> ResultsFile {
    ResultsFile::Capacity(CapacityResult {
        label: "herald".into(),
        steps: vec![
            // 6,000 calls, 36,000 messages (6 per call). By hand: E[X] = (6000·300 + 30000·100)
            // / 36000 = 133.333 µs, E[X²] = (6000·1e5 + 30000·1.2e4)/36000 = 26,666.7 µs²,
            // λ = 600/s, ρ = 0.08, W = 600 · 26666.7e-12 / (2 · 0.92) = 8.6957 µs; measured
            // (6000·10 + 30000·8)/36000 = 8.333 µs.
            metrics_run(100.0, &[("INVITE", 6000, 300.0, 1e5, 10.0), ("ACK", 30_000, 100.0, 1.2e4, 8.0)]),
            // λ = 6000/s, E[X] = 150 µs, ρ = 0.9, W = 6000 · 25000e-12 / 0.2 = 750 µs; 700 measured.
            metrics_run(1000.0, &[("INVITE", 360_000, 150.0, 25_000.0, 700.0)]),
            // λ = 7500/s, ρ = 1.125: no steady state, the model breaks down here.
            metrics_run(1250.0, &[("INVITE", 450_000, 150.0, 25_000.0, 30_000.0)]),
        ],
        ..CapacityResult::default()
    })
}

fn measured(fit: &ModelFit) -> Vec<&ModelPoint> {
    fit.points.iter().filter(|p| p.measured_wait_us.is_some() || p.measured_drop.is_some()).collect()
}

#[test]
fn fits_herald_metrics_and_finds_the_breakdown() {
    let fit = fit(&capacity_file(), Some(200)).unwrap();
    assert_eq!(fit.source, "herald metrics");
    assert_eq!((fit.servers, fit.queue_capacity), (1, 200));
    // Pooled over 846,000 messages: (36000 · 133.333 + 810000 · 150)/846000 = 149.2908 µs.
    assert!((fit.service_mean_us - 149.290_78).abs() < 1e-3, "{}", fit.service_mean_us);
    let m = measured(&fit);
    assert_eq!(m.len(), 3);
    assert!((m[0].utilization - 0.08).abs() < 1e-12);
    assert!((m[0].predicted_wait_us - 8.695_652).abs() < 1e-5, "{}", m[0].predicted_wait_us);
    assert!((m[0].measured_wait_us.unwrap() - 8.333_333).abs() < 1e-5);
    assert!((m[1].utilization - 0.9).abs() < 1e-12);
    assert!((m[1].predicted_wait_us - 750.0).abs() < 1e-6);
    // M/M/1/200 at ρ = 0.9: 0.1 · 0.9^200 / (1 − 0.9^201) = 7.055e-11.
    assert!((m[1].predicted_drop / 7.055e-11 - 1.0).abs() < 1e-3, "{}", m[1].predicted_drop);
    assert_eq!(m[1].measured_drop, Some(0.0));
    assert!(m[2].utilization > 1.0 && m[2].predicted_wait_us.is_infinite());
    assert_eq!(fit.breaks_down_at, Some(1250.0));
    assert!(fit.notes.iter().any(|n| n.contains("1250.0 calls/s: utilization 1.125")), "{:?}", fit.notes);
}

#[test]
fn grid_covers_loads_up_to_099_sorted_by_rate() {
    let fit = fit(&capacity_file(), Some(200)).unwrap();
    assert_eq!(fit.points.len(), 3 + 11);
    assert!(fit.points.windows(2).all(|w| w[0].offered_rate <= w[1].offered_rate));
    let grid: Vec<&ModelPoint> = fit.points.iter().filter(|p| p.measured_wait_us.is_none()).collect();
    assert!((grid.last().unwrap().utilization - 0.99).abs() < 1e-12);
    // Grid rate = ρ · c / E[X] / messages per call (6): ρ = 0.5 → 0.5/149.2908e-6/6 = 558.19 cps.
    let half = grid.iter().find(|p| (p.utilization - 0.5).abs() < 1e-9).unwrap();
    assert!((half.offered_rate - 558.193).abs() < 0.01, "{}", half.offered_rate);
    assert!(grid.iter().all(|p| p.predicted_wait_us.is_finite()));
}

#[test]
fn a_wait_far_from_the_prediction_is_a_breakdown() {
    let file = ResultsFile::Calls(metrics_run(100.0, &[("INVITE", 36_000, 133.0, 20_000.0, 40.0)]));
    let fit = fit(&file, Some(200)).unwrap();
    // Predicted ≈ 600 · 2e-8 / (2 · 0.9202) = 6.52 µs vs 40 measured: off by more than half.
    assert_eq!(fit.breaks_down_at, Some(100.0));
    assert!(fit.notes.last().unwrap().contains("measured 40.0 µs"), "{:?}", fit.notes);
}

#[test]
fn falls_back_to_cpu_per_call_as_mm1() {
    let run = RunResult {
        label: "kamailio".into(),
        offered_rate: 1000.0,
        attempted: 60_000,
        servers: vec![ServerUsage { cpu_s_per_1000_calls: 0.5, ..ServerUsage::default() }],
        udp_before: UdpCounters { in_datagrams: 1000, ..UdpCounters::default() },
        udp_after: UdpCounters { in_datagrams: 100_000, rcvbuf_errors: 990, ..UdpCounters::default() },
        ..RunResult::default()
    };
    let fit = fit(&ResultsFile::Calls(run), Some(600)).unwrap();
    assert_eq!(fit.source, "server CPU per call, exponential assumed");
    // 0.5 CPU s per 1000 calls = 500 µs per call, E[X²] = 2 · 500² µs², K = 600/6 = 100 calls.
    assert_eq!((fit.servers, fit.queue_capacity), (1, 100));
    assert!((fit.service_mean_us - 500.0).abs() < 1e-9);
    assert!((fit.service_second_moment_us2 - 500_000.0).abs() < 1e-6);
    let m = measured(&fit);
    // M/M/1, ρ = 0.5: W = ρ/(μ − λ) = 0.5/(2000 − 1000) s = 500 µs.
    assert!((m[0].predicted_wait_us - 500.0).abs() < 1e-6);
    assert_eq!(m[0].measured_wait_us, None);
    // Measured drop 990/(99000 + 990) = 0.0099 vs M/M/1/100 ≈ 4e-31: a breakdown.
    assert!((m[0].measured_drop.unwrap() - 0.009_900_99).abs() < 1e-7);
    assert_eq!(fit.breaks_down_at, Some(1000.0));
    assert!(fit.notes.iter().any(|n| n.contains("predicted drop")));
}

#[test]
fn files_without_service_times_are_errors_naming_the_label() {
    let empty = ResultsFile::Capacity(CapacityResult { label: "x".into(), ..CapacityResult::default() });
    assert_eq!(fit(&empty, None).unwrap_err(), "x: no runs in the results file");
    let bare = ResultsFile::Calls(RunResult { label: "bare".into(), attempted: 10, ..RunResult::default() });
    assert!(fit(&bare, None).unwrap_err().starts_with("bare: no run has"));
}

#[test]
fn default_queue_capacity_follows_rmem_default() {
    let k = default_queue_capacity();
    let rmem: u64 = std::fs::read_to_string("/proc/sys/net/core/rmem_default")
        .map(|t| t.trim().parse().unwrap_or(212_992))
        .unwrap_or(212_992);
    assert_eq!(k as u64, rmem / 1024);
}
