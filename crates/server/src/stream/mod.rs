//! Stream connections, TCP, TLS, WS and WSS (RFC 3261 §18.3, RFC 7118): no central dispatcher. The worker that
//! accepts (module `listen`) or opens (module `open`) a connection owns it: one task reads,
//! frames, answers keep-alive pings and writes; the messages it reads go, in order, through the
//! owning worker's inbox to that worker's loop, or, while nothing waits there, straight to the
//! worker's handler on the same thread (module `handler`). Any worker sends on it by pushing bytes into its
//! bounded write queue, found through the registry (module `conns`); on plain TCP a push to an
//! empty queue is written to the socket at once.
//!
//! One connection loop (module `task`) serves every stream transport; what differs is the
//! [`codec::Codec`] between the socket and the SIP bytes: plain TCP (`codec::Plain`), TLS
//! (`tls::TlsCodec`, rustls driven sans-IO) or WebSocket over either (`ws::WsCodec`,
//! tungstenite driven sans-IO, its upgrade in `ws_upgrade`).

mod codec;
mod conn_timer;
mod framer;
mod handler;
mod listen;
mod open;
mod socket;
mod task;
mod tls;
mod ws;
mod ws_upgrade;

pub(crate) use handler::{install, Handler};
pub(crate) use listen::accept_loop;
pub(crate) use open::send;
