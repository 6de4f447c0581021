//! herald-core: the protocol logic of herald without any I/O (see docs/design/serve.md).
//! Everything here takes the current time and an input and returns outputs; nothing reads a
//! clock or a socket, so every RFC 3261 timer path is testable with a simulated clock.
//!
//! What it owns: the transaction layer (RFC 3261 §17), the proxy core (§16), the registrar
//! (§10.3), digest authentication (§22) and the classification of received bytes (`inbound`),
//! driven as one `SipHandler` (`engine::Engine`) per shard. What it must not import: it may use
//! `herald-sip`, `herald-store` and `herald-credentials`, never the runtime (`herald-server`),
//! an async runtime or platform code. It opens no socket, reads no clock, starts no thread and
//! draws no process-global randomness: time comes in as `now`, randomness from the engine
//! config's seed, so one seed and one input sequence replay a run exactly.

#![forbid(unsafe_code)]

pub mod auth;
pub mod engine;
pub mod gateways;
pub mod hash;
pub mod inbound;
pub mod io;
pub mod nat;
pub mod peer;
pub mod ping;
pub mod proxy;
pub mod registrar;
pub mod routing;
pub mod seed;
#[cfg(test)]
mod substring_filters;
pub mod transaction;

pub use io::{Input, Output, Resolution, ResolveError, ResolveRequest, SipHandler, Target, TimeoutWaker};
pub use peer::{ConnId, Peer, Transport};
pub use ping::{Ping, PingOutcome, PingTarget};
pub use registrar::{Location, Registrar, RegistrarConfig};
pub use seed::Seed;
