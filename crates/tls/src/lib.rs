//! herald-tls: the rustls pieces that both herald's runtime (`herald-server`) and its load
//! generator (`herald-bench`) need.
//!
//! Why a crate of its own: the two do not depend on each other (a server must not pull in the
//! load generator, nor the generator tokio and the server's resolver), and no crate below both
//! of them uses rustls: the parser, the sans-IO core, the stores and the syscall crate have no
//! business with certificates. A small crate over rustls is the one place both can import
//! without a cycle.
//!
//! What it owns:
//! * [`AcceptAnyServerCert`]: the client-side verifier behind `[tls] verify_server = false` and
//!   `herald bench --tls-insecure-skip-verify`, for labs and self-signed test peers.

#![forbid(unsafe_code)]

mod accept_any;

pub use accept_any::AcceptAnyServerCert;
