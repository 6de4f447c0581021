//! `herald bench`: the instrument the seed papers lacked.
//!
//! - [`arrivals`]: open-loop arrival processes (Poisson, uniform, trace file).
//! - [`latency`]: HDR-histogram latency recording and summaries.
//! - [`results`]: the JSON results schema every subcommand writes and reads.
//! - [`agent`]: the caller and callee user agents and the event loop that drives them.
//! - [`workload`]: the SPEC SIP Infrastructure user model (seed 002).
//! - [`sysstat`]: CPU, peak RSS and kernel UDP counters from /proc.
//! - [`scrape`]: reads herald's Prometheus metrics endpoint.
//! - [`capacity`]: the step-then-bisect capacity search.
//! - [`floor`]: what the kernel charges per datagram, and the CPU floor per call it implies.
//! - [`model`]: M/G/1 (Pollaczek–Khinchine) and M/M/c/K queueing models (seed 003).
//! - [`report`]: the HTML report with SVG plots.

// System calls std does not wrap live in herald-sys.
#![forbid(unsafe_code)]

pub mod agent;
pub mod arrivals;
pub mod capacity;
pub mod floor;
pub mod latency;
pub mod model;
pub mod report;
pub mod results;
pub mod scrape;
pub mod sysstat;
pub mod workload;
