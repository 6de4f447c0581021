//! The admin API's methods, one file per subject, and the table that names them. A method takes
//! its named parameters and returns a JSON result; a change is logged by `audit` with who made
//! it, whatever the outcome.
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
