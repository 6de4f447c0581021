//! herald-core: the protocol logic of herald without any I/O (see docs/design/serve.md).
//! Everything here takes the current time and an input and returns outputs; nothing reads a
//! clock or a socket, so every RFC 3261 timer path is testable with a simulated clock.

pub mod auth;
pub mod engine;
pub mod hash;
pub mod inbound;
pub mod io;
pub mod peer;
pub mod proxy;
pub mod registrar;
pub mod transaction;

pub use io::{Input, Output, ResolveRequest, SipHandler, Target};
pub use peer::{ConnId, Peer, Transport};
pub use registrar::{Location, Registrar, RegistrarConfig};
