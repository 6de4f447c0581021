//! What a fitted model is made of and the constants it judges agreement by: the types the fit
//! writes into results files and reports read.

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
