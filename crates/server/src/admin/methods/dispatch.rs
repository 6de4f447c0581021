//! The table of methods, the call of one by name, and the audit of every change.

use super::counters::AdminCounters;
use super::state::Methods;
use crate::admin::caller::Caller;
use crate::admin::rpc::{Call, RpcError, METHOD_NOT_FOUND};
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

impl Methods {
    /// Runs one call for `who`.
    pub fn call(&self, who: &Caller, call: &Call) -> Result<Value, RpcError> {
        let Some(index) = METHODS.iter().position(|(name, _, _)| *name == call.method) else {
            return Err(RpcError::new(METHOD_NOT_FOUND, format!("no method '{}' (see 'methods')", call.method)));
        };
        let outcome = match call.method.as_str() {
            "registrations.list" => super::registrations::list(self, call),
            "registrations.show" => super::registrations::show(self, call),
            "registrations.remove" => super::registrations::remove(self, who, call),
            "stats" => super::stats::stats(self),
            "flood.list" => super::bans::list(self, call),
            "flood.unban" => super::bans::unban(self, who, call),
            "gateways.list" => super::gateways::list(self, call),
            "gateways.set_state" => super::gateways::set_state(self, who, call),
            "users.list" => super::users::list(self, call),
            "users.add" => super::users::add(self, who, call),
            "users.remove" => super::users::remove(self, who, call),
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
            return Err(RpcError::new(crate::admin::rpc::UNAVAILABLE, "this herald cannot reload its configuration"));
        };
        r.reload(who, self.live.flood.as_deref())
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
