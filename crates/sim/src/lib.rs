//! herald-sim: herald's engine and simulated user agents on a virtual clock and an in-memory
//! network, in the style of quinn-proto's `Pair` test harness. A run is a pure function of its
//! seed and its script: herald's branches, tags and nonces come from the seed
//! ([`herald_core::Seed`]), packet loss from a seeded PRNG, time from the simulation's clock.
//!
//! What it owns: the network ([`net`]), herald as the runtime drives it ([`herald`]), user
//! agents ([`ua`]), the world that runs them ([`world`]), and the fuzz target's pipeline
//! ([`pipeline`]), so that a fuzz input replays the same way in a test. Call flows are tests in
//! `tests/`.
#![forbid(unsafe_code)]

pub mod herald;
pub mod net;
pub mod pipeline;
pub mod rng;
pub mod ua;
pub mod world;

pub use herald::{Herald, HeraldConfig};
pub use net::{Datagram, Fate, Network};
pub use ua::{Answer, Outcome, Ua};
pub use world::{Sim, UaId};
