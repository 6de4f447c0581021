//! Queueing models fitted to measured runs: seed 003's M/G/1 waiting time (chapter 4) and
//! M/M/c/K drop probability (chapter 5), predicted next to what was measured, as its tables 4.4
//! and 5.2–5.6 do, with the load from which the model stops holding.
//!
//! # Inputs
//!
//! With herald's metrics (`server_metrics`), the service time of a message is the
//! message-weighted mix of the per-type moments, `E[X] = Σ nᵢE[Xᵢ]/Σ nᵢ` and
//! `E[X²] = Σ nᵢE[Xᵢ²]/Σ nᵢ`: equation (4.3) weights the six types equally because each call
//! there has exactly one of each; weighting by count is the same thing for that workload and
//! stays right for others. The message arrival rate is the offered call rate times the messages
//! per call (`Σ nᵢ / attempted`), c is the number of workers, and the measured wait and drop
//! rate are the mean queue wait and `socket_drops / (messages + socket_drops)` (the thesis'
//! RCVErrors / TotalMessages).
//!
//! Without metrics, the server's CPU per call (`servers[0].cpu_s_per_1000_calls`) is the mean
//! service time of one call, exponential service is assumed (`E[X²] = 2E[X]²`, the M/M/1 case),
//! c = 1, and the queue is counted in calls (K divided by [`MESSAGES_PER_CALL`]). The measured
//! drop rate then comes from the machine-wide UDP counters. `ModelFit::source` says which.
//!
//! # Where the model stops holding
//!
//! At each measured rate the prediction uses that run's own service moments (the thesis'
//! tables do the same: E\[X\] grows with load, its α and β factors); the grid of loads up to
//! ρ = 0.99 uses the moments pooled over all runs. The model is said to break down at the
//! lowest measured rate where ρ ≥ 1 (no steady state; table 4.4's "N/A"), or where the
//! predicted wait is off by more than half the measured one (and by more than
//! [`WAIT_NOISE_US`]), or the predicted drop rate by more than half the measured one (and by
//! more than [`DROP_NOISE`]). The noise floors keep timer resolution and a handful of lost
//! datagrams at light load from being called a breakdown.

pub mod queueing;

mod fit;

pub use fit::fit;
pub use queueing::{erlang_b, erlang_c, mg1_wait, mgc_wait, mmck_drop};

use serde::{Deserialize, Serialize};

/// Messages a proxy receives per call in the basic call flow when herald's metrics are absent:
/// INVITE, 180, 200, ACK, BYE, 200 (seed 003, equation (4.3): "each call generates exactly six
/// messages").
pub const MESSAGES_PER_CALL: f64 = 6.0;

/// Waits closer than this to the measurement, µs, are agreement whatever the ratio: receive
/// timestamps and scheduling jitter are a few µs (table 4.4's 100 cps row differs by 0.5 µs).
pub const WAIT_NOISE_US: f64 = 5.0;

/// Drop rates closer than this (absolute) agree whatever the ratio.
pub const DROP_NOISE: f64 = 0.001;

/// Bytes the kernel charges a socket for one queued SIP datagram (payload plus sk_buff overhead,
/// its "truesize"); a ~500-byte SIP message over loopback costs about 1 KiB.
pub const DATAGRAM_TRUESIZE_BYTES: u64 = 1024;

/// One offered load: the model's prediction and, at measured rates, the measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelPoint {
    /// Calls per second.
    pub offered_rate: f64,
    /// ρ = λ·E\[X\]/c.
    pub utilization: f64,
    /// Mean queue wait of a message, µs; infinite when ρ ≥ 1 (serialised as null).
    pub predicted_wait_us: f64,
    pub measured_wait_us: Option<f64>,
    /// Fraction of messages dropped (M/M/c/K).
    pub predicted_drop: f64,
    pub measured_drop: Option<f64>,
}

/// A model fitted to one results file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelFit {
    pub label: String,
    /// Mean service time of one job (message, or call without metrics), µs, pooled over runs.
    pub service_mean_us: f64,
    pub service_second_moment_us2: f64,
    /// c.
    pub servers: u32,
    /// K, in jobs (waiting plus in service).
    pub queue_capacity: u32,
    /// "herald metrics" or "server CPU per call, exponential assumed".
    pub source: String,
    /// Sorted by offered rate.
    pub points: Vec<ModelPoint>,
    /// Lowest measured offered rate at which the model stops holding (reason in `notes`).
    pub breaks_down_at: Option<f64>,
    pub notes: Vec<String>,
}

/// The default K: the kernel's default socket receive buffer (`net.core.rmem_default`) over
/// [`DATAGRAM_TRUESIZE_BYTES`]. With the common 212,992-byte default that is 208 messages, the
/// K ≈ 200 seed 003 derived the same way from its socket buffer size (section 5.3). It describes
/// the machine the model runs on, which should be the one that was measured.
pub fn default_queue_capacity() -> u32 {
    let rmem = std::fs::read_to_string("/proc/sys/net/core/rmem_default")
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok())
        .unwrap_or(212_992);
    (rmem / DATAGRAM_TRUESIZE_BYTES).clamp(1, u32::MAX as u64) as u32
}

#[cfg(test)]
mod tests;
