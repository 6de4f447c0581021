//! `herald bench`: the instrument the seed papers lacked.
//!
//! - [`arrivals`]: open-loop arrival processes (Poisson, uniform, trace file).
//! - [`latency`]: HDR-histogram latency recording and summaries.
//! - [`results`]: the JSON results schema every subcommand writes and reads.

pub mod arrivals;
pub mod latency;
pub mod results;
