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
mod gateways;
mod registrations;
mod stats;
mod users;

use super::caller::Caller;
use super::context::{AdminApi, Live};
use super::rpc::{Call, RpcError, METHOD_NOT_FOUND};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use registrations::Listings;
use serde_json::{json, Value};

/// Every method: name, whether it changes anything, one line of help (`methods`, `herald ctl`).
pub const METHODS: &[(&str, bool, &str)] = &[
    ("registrations.list", false, "bindings, a page at a time (prefix, user, limit, cursor)"),
    ("registrations.show", false, "the bindings of one AoR (aor)"),
    ("registrations.remove", true, "remove one binding (aor, contact) or a whole AoR (aor)"),
    ("stats", false, "transactions, per-type counts, drops, bans, overload state"),
    ("flood.list", false, "bans and user locks in force (limit)"),
    ("flood.unban", true, "lift the bans and locks of one source (source)"),
    ("gateways.list", false, "gateway sets and the health of their destinations"),
    ("gateways.set_state", true, "force a destination up or down, or back to auto (set, destination, state)"),
    ("users.list", false, "users of digest authentication by realm (realm)"),
    ("users.add", true, "add a user or change a password (name, password, realm)"),
    ("users.remove", true, "remove a user (name, realm)"),
    ("config.reload", true, "reload the configuration file (as SIGHUP)"),
    ("methods", false, "this list"),
];

/// The admin API's metrics: changes by method and outcome, and requests refused for their
/// token. prometheus-client's own counters (off the hot path: an operator's calls), exported by
/// [`AdminCounters::export`].
#[derive(Debug, Default)]
pub struct AdminCounters {
    changes: Family<Vec<(String, String)>, Counter>,
    /// Requests refused before any method ran: no or a wrong bearer token.
    pub(crate) unauthorized: Counter,
}

impl AdminCounters {
    /// Registers them with the metrics endpoint as `herald_admin_changes_total{method,
    /// outcome}` and `herald_admin_unauthorized_total`.
    pub fn export(&self, stats: &crate::stats::Stats) {
        stats.export_metric(
            "herald_admin_changes",
            "Changes asked through the admin API (herald ctl, SIGHUP), by method and outcome: done or refused",
            self.changes.clone(),
        );
        stats.export_metric(
            "herald_admin_unauthorized",
            "Admin API requests refused (401) for a missing or unknown bearer token",
            self.unauthorized.clone(),
        );
    }

    /// How many `method` calls ended with `outcome` (`"done"` or `"refused"`).
    pub fn changes(&self, method: &str, outcome: &str) -> u64 {
        self.changes.get_or_create(&labels(method, outcome)).get()
    }

    fn count(&self, method: &str, outcome: &str) {
        self.changes.get_or_create(&labels(method, outcome)).inc();
    }
}

fn labels(method: &str, outcome: &str) -> Vec<(String, String)> {
    vec![("method".into(), method.into()), ("outcome".into(), outcome.into())]
}

/// The methods with what they work on.
pub(crate) struct Methods {
    pub api: AdminApi,
    pub live: Live,
    pub counters: std::sync::Arc<AdminCounters>,
    listings: Listings,
}

impl Methods {
    pub fn new(api: AdminApi, live: Live, counters: std::sync::Arc<AdminCounters>) -> Methods {
        Methods { api, live, counters, listings: Listings::default() }
    }

    /// Runs one call for `who`.
    pub fn call(&self, who: &Caller, call: &Call) -> Result<Value, RpcError> {
        let Some(index) = METHODS.iter().position(|(name, _, _)| *name == call.method) else {
            return Err(RpcError::new(METHOD_NOT_FOUND, format!("no method '{}' (see 'methods')", call.method)));
        };
        let outcome = match call.method.as_str() {
            "registrations.list" => registrations::list(self, call),
            "registrations.show" => registrations::show(self, call),
            "registrations.remove" => registrations::remove(self, who, call),
            "stats" => stats::stats(self),
            "flood.list" => bans::list(self, call),
            "flood.unban" => bans::unban(self, who, call),
            "gateways.list" => gateways::list(self, call),
            "gateways.set_state" => gateways::set_state(self, who, call),
            "users.list" => users::list(self, call),
            "users.add" => users::add(self, who, call),
            "users.remove" => users::remove(self, who, call),
            "config.reload" => self.reload(who),
            _ => Ok(json!(METHODS
                .iter()
                .map(|(name, changes, help)| json!({"name": name, "changes": changes, "help": help}))
                .collect::<Vec<_>>())),
        };
        if METHODS[index].1 {
            audit(&self.counters, who, call, &outcome);
        }
        outcome
    }

    /// `config.reload`, also what SIGHUP runs (with `who` the signal).
    pub fn reload(&self, who: &Caller) -> Result<Value, RpcError> {
        let Some(r) = &self.api.reload else {
            return Err(RpcError::new(super::rpc::UNAVAILABLE, "this herald cannot reload its configuration"));
        };
        r.reload(who)
    }
}

/// Logs a change made through the API, with who made it and what came of it, and counts it.
/// Parameters are logged except passwords.
fn audit(counters: &AdminCounters, who: &Caller, call: &Call, outcome: &Result<Value, RpcError>) {
    let params: serde_json::Map<String, Value> =
        call.params.iter().filter(|(k, _)| *k != "password").map(|(k, v)| (k.clone(), v.clone())).collect();
    let params = Value::Object(params).to_string();
    // Bounded: parameters come from the caller.
    let params: String = params.chars().take(512).collect();
    match outcome {
        Ok(result) => {
            counters.count(&call.method, "done");
            let result: String = result.to_string().chars().take(512).collect();
            tracing::info!(%who, method = %call.method, %params, %result, "admin: change made");
        }
        Err(e) => {
            counters.count(&call.method, "refused");
            tracing::info!(%who, method = %call.method, %params, code = e.code, error = %e.message, "admin: change refused");
        }
    }
}

/// `limit` within `1..=max`, `default` when absent.
fn limit(given: Option<usize>, default: usize, max: usize) -> Result<usize, RpcError> {
    match given {
        None => Ok(default),
        Some(n) if (1..=max).contains(&n) => Ok(n),
        Some(n) => Err(RpcError::params(format!("limit {n} is outside 1..={max}"))),
    }
}

#[cfg(test)]
mod tests;
