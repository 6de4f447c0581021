//! Stream connections, TCP and TLS (RFC 3261 §18.3): no central dispatcher. The worker that
//! accepts (module `listen`) or opens (module `open`) a connection owns it: one task reads,
//! frames, answers keep-alive pings and writes; the messages it reads go, in order, through the
//! owning worker's inbox to that worker's loop. Any worker sends on it by pushing bytes into its
//! bounded write queue, found through the registry (module `conns`).
//!
//! One connection loop (module `task`) serves every stream transport; what differs is the
//! [`codec::Codec`] between the socket and the SIP bytes: plain TCP (`codec::Plain`) or TLS
//! (`tls::TlsCodec`, rustls driven sans-IO), and WebSocket next.

mod codec;
mod framer;
mod listen;
mod open;
mod task;
mod tls;

pub(crate) use listen::accept_loop;
pub(crate) use open::send;
