//! The load generator: caller and callee user agents driven by one event loop.
//!
//! Both ends live in this process. Callee agents REGISTER the users with contacts on the
//! generator's callee socket; callers place calls to those users through the proxy on an
//! open-loop arrival schedule (INVITE → 180 → 200 → ACK → hold → BYE → 200, or CANCEL while
//! ringing in the user model), with RFC 3261 retransmission timers over UDP and digest
//! authentication when the users have passwords. Every run returns a [`RunResult`].
//!
//! Library entry points (the CLI in `src/bench/` and the capacity search call these):
//! [`run_calls`], [`run_register`], [`run_users`], each taking its options and a [`StopFlag`].
//!
//! Layout, in the style of the sans-IO core: the protocol roles [`caller`] ([`caller::Calls`]),
//! [`callee`] ([`callee::Callee`]), [`registration`] ([`registration::Registrations`]) and
//! [`user_workload`] each own their state, read the run's [`context`] and return [`output`]s
//! (send these bytes there, arm this timer, record this measurement); their client transactions
//! are herald-core's, wrapped by [`client_tx`]. The thin driver carries the outputs out:
//! [`event_loop`] ([`event_loop::Agent`]: sockets, timer heap, statistics, dispatch), [`driver`]
//! (arrivals, window, drain, set-up) and [`run`] (the three runs; [`threads`] runs several event
//! loops on one socket, whose input [`router`] hands to each). Beside them: [`wire`] and
//! [`route`] (messages and dialog routing), [`find`] (short byte searches); [`digest`] and
//! `challenge` (authentication); [`net`] (UDP mmsg, TCP), [`framing`] (stream framing), [`tls`]
//! and [`tls_config`] (TLS over that
//! stream); [`timers`], [`slab`]; [`stats`], [`measure`], [`progress`]; [`held`] (how long our
//! callee held each answer, left out of what the callers measure).
//!
//! Imports run one way: `threads` → `run` → `driver` → `event_loop` → roles → `client_tx` →
//! `context`, `output`, `timers` (`router` below `net`); callers, callee and registrations do not import each other (only the user
//! model names the calls and registrations it starts), and nothing below the driver imports the
//! event loop.

pub mod callee;
pub mod caller;
mod challenge;
pub mod client_tx;
pub mod context;
pub mod digest;
pub mod driver;
pub mod event_loop;
pub mod find;
pub mod framing;
pub mod held;
pub mod measure;
pub mod net;
pub mod options;
pub mod output;
pub mod progress;
pub mod registration;
pub mod route;
pub mod router;
pub mod run;
pub mod slab;
pub mod stats;
pub mod stop;
pub mod stream_codec;
#[cfg(test)]
mod tests_flow;
pub mod threads;
pub mod timers;
pub mod tls;
pub mod tls_config;
#[cfg(test)]
mod tls_tests;
pub mod user_workload;
pub mod users;
pub mod wire;
#[cfg(test)]
mod wire_tests;
pub mod ws;
#[cfg(test)]
mod ws_tests;

pub use crate::results::RunResult;
pub use options::{
    domain_of, CallsOptions, CommonOptions, RegisterOptions, TransportKind, UsersOptions, DEFAULT_QUANTUM_US,
};
pub use run::{run_register, run_users};
pub use stop::StopFlag;
pub use threads::run_calls;
pub use tls_config::TlsOptions;
pub use users::{load as load_users, User};
