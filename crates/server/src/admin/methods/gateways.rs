//! `gateways.list` and `gateways.set_state`: the health of every destination of the gateway
//! sets in force (`herald_core::gateways`), and an operator's forced state.

use super::state::Methods;
use crate::admin::caller::Caller;
use crate::admin::rpc::{params, Call, RpcError, UNAVAILABLE};
use herald_core::engine::EngineConfig;
use herald_core::gateways::HealthState;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Instant;

fn engine(m: &Methods) -> Result<Arc<EngineConfig>, RpcError> {
    m.api.reload.as_ref().map(|r| r.engine()).ok_or_else(|| RpcError::new(UNAVAILABLE, "no gateway sets here"))
}

/// `{sets: [{name, algorithm, destinations: [...]}]}`.
pub(super) fn list(m: &Methods, _call: &Call) -> Result<Value, RpcError> {
    let cfg = engine(m)?;
    let now = Instant::now();
    let sets: Vec<Value> = cfg
        .gateways
        .iter()
        .map(|set| {
            let destinations: Vec<Value> = set
                .destinations
                .iter()
                .map(|d| {
                    let h = d.health.snapshot();
                    json!({
                        "uri": d.uri, "weight": d.weight, "priority": d.priority,
                        "effective": h.effective.as_str(), "state": h.state.as_str(),
                        "forced": h.forced.map(HealthState::as_str),
                        "since_s": now.saturating_duration_since(h.since).as_secs(),
                        "changes": h.changes, "probes_ok": h.probes_ok, "probes_failed": h.probes_failed,
                        "calls": h.calls, "call_failures": h.call_failures, "active_calls": h.active_calls,
                    })
                })
                .collect();
            json!({ "name": set.name, "algorithm": set.algorithm.as_str(), "destinations": destinations })
        })
        .collect();
    Ok(json!({ "sets": sets }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SetStateParams {
    set: String,
    destination: String,
    /// "up", "down" (forced until cleared) or "auto" (probes and calls decide again).
    state: String,
}

/// `{set, destination, forced, effective}`. An unknown set or destination changes nothing.
pub(super) fn set_state(m: &Methods, _who: &Caller, call: &Call) -> Result<Value, RpcError> {
    let p: SetStateParams = params(call)?;
    let forced = match p.state.as_str() {
        "up" => Some(HealthState::Up),
        "down" => Some(HealthState::Down),
        "auto" => None,
        other => return Err(RpcError::params(format!("state '{other}': give up, down or auto"))),
    };
    let cfg = engine(m)?;
    let set = cfg.gateways.get(&p.set).ok_or_else(|| RpcError::not_found(format!("no gateway set '{}'", p.set)))?;
    let dest = set.destination(&p.destination).ok_or_else(|| {
        RpcError::not_found(format!("gateway set '{}' has no destination '{}'", p.set, p.destination))
    })?;
    dest.health.force(forced);
    let h = dest.health.snapshot();
    Ok(json!({
        "set": set.name, "destination": dest.uri,
        "forced": h.forced.map(HealthState::as_str), "effective": h.effective.as_str(),
    }))
}
