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
mod results;

pub use fit::fit;
pub use queueing::{erlang_b, erlang_c, mg1_wait, mgc_wait, mmck_drop};
pub use results::{
    default_queue_capacity, ModelFit, ModelPoint, DATAGRAM_TRUESIZE_BYTES, DROP_NOISE, MESSAGES_PER_CALL, WAIT_NOISE_US,
};

#[cfg(test)]
mod tests;
