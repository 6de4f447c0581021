//! Protection of the server against its own clients: flood and brute-force bans per source.

mod flood;
mod window;

pub use flood::{FloodCounters, FloodGuard, FloodSettings, Prefix, Verdict};
