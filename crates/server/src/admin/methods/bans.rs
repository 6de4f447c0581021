//! `flood.list` and `flood.unban`: the `[flood]` guard's bans and user locks.

use super::state::{limit, Methods};
use crate::admin::caller::Caller;
use crate::admin::rpc::{params, Call, RpcError, UNAVAILABLE};
use crate::protect::FloodGuard;
use serde::Deserialize;
use serde_json::{json, Value};
use std::net::IpAddr;
use std::time::Instant;

fn guard(m: &Methods) -> Result<&FloodGuard, RpcError> {
    m.live
        .flood
        .as_deref()
        .ok_or_else(|| RpcError::new(UNAVAILABLE, "the flood guard is off ([flood] enabled = false)"))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListParams {
    limit: Option<usize>,
}

/// `{holds: [...], total}`.
pub(super) fn list(m: &Methods, call: &Call) -> Result<Value, RpcError> {
    let p: ListParams = params(call)?;
    let max = limit(p.limit, 1000, 100_000)?;
    let (holds, total) = guard(m)?.holds(Instant::now(), max);
    let holds: Vec<Value> = holds
        .iter()
        .map(|h| {
            json!({
                "kind": h.kind.as_str(), "source": h.source, "evidence": h.evidence, "reason": h.reason,
                "user": h.user, "count": h.count, "remaining_s": h.remaining.as_secs(),
            })
        })
        .collect();
    Ok(json!({ "holds": holds, "total": total }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UnbanParams {
    source: String,
}

/// `{source, lifted}`; a source with nothing in force is an error and changes nothing.
pub(super) fn unban(m: &Methods, who: &Caller, call: &Call) -> Result<Value, RpcError> {
    let p: UnbanParams = params(call)?;
    // `2001:db8::/64` as listed is accepted too: the /64 is what is banned.
    let text = p.source.trim();
    let ip: IpAddr = text
        .strip_suffix("/64")
        .unwrap_or(text)
        .parse()
        .map_err(|_| RpcError::params(format!("'{text}' is not an IP address")))?;
    let lifted = guard(m)?.unban(ip, Instant::now(), &who.to_string());
    if lifted == 0 {
        return Err(RpcError::not_found(format!("no ban or user lock in force for {text}")));
    }
    Ok(json!({ "source": text, "lifted": lifted }))
}
