//! The admin API's methods, one file per subject, and the table that names them (`dispatch`).
//! A method takes its named parameters and returns a JSON result; a change is logged by
//! `dispatch` with who made it, whatever the outcome, and counted (`counters`).
//!
//! Errors (JSON-RPC 2.0 §5.1, then herald's own in the range left to servers): -32700 the body
//! is not JSON, -32600 not a request, -32601 no such method, -32602 wrong parameters (the
//! message names them), -32001 not found (AoR, binding, user, ban, gateway set or destination),
//! -32002 refused (a configuration that does not load, with `data` {file, line, key, message},
//! or that needs a restart, with `data` {restart: [sections]}), -32003 unavailable (that part
//! of herald is off), -32004 failed (the users file could not be written). Whatever the error,
//! nothing has changed.
//!
//! | method | params | changes |
//! | --- | --- | --- |
//! | `registrations.list` | `prefix`, `user`, `limit`, `cursor` | no |
//! | `registrations.show` | `aor` | no |
//! | `registrations.remove` | `aor`, `contact` (optional: else the whole AoR) | yes |
//! | `stats` | | no |
//! | `flood.list` | `limit` | no |
//! | `flood.unban` | `source` (an IP address) | yes |
//! | `gateways.list` | | no |
//! | `gateways.set_state` | `set`, `destination`, `state` (`up`, `down`, `auto`) | yes |
//! | `users.list` | `realm` | no |
//! | `users.add` | `name`, `password`, `realm` | yes |
//! | `users.remove` | `name`, `realm` | yes |
//! | `config.reload` | | yes |
//! | `methods` | | no |

mod bans;
mod counters;
mod dispatch;
mod gateways;
mod listings;
mod registrations;
mod state;
mod stats;
mod users;

pub use counters::AdminCounters;
pub use dispatch::METHODS;
pub(crate) use state::Methods;

#[cfg(test)]
mod tests;
