//! `stats`: what herald is doing now, from the same counters as the metrics endpoint.

use super::state::Methods;
use crate::admin::rpc::RpcError;
use crate::metrics::{MsgType, Totals, TYPES};
use serde_json::{json, Map, Value};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Herald is a transaction-stateful proxy (RFC 3261 §16): it keeps no dialog state, so there is
/// no dialog count to report; calls in progress show as INVITE transactions.
pub(super) fn stats(m: &Methods) -> Result<Value, RpcError> {
    let live = &m.live;
    let s = live.stats.snapshot();
    let counters: Map<String, Value> =
        s.counters().into_iter().map(|(name, _, v)| (name.to_string(), json!(v))).collect();
    let mut totals = Totals::default();
    for w in live.stats.metrics.iter() {
        w.add_to(&mut totals);
    }
    // Per message type, both wires (UDP and streams) together.
    let per_type = |a: &[[u64; 2]; TYPES]| -> Map<String, Value> {
        (0..TYPES).map(|i| (MsgType::label(i).to_string(), json!(a[i][0] + a[i][1]))).collect()
    };
    let now = Instant::now();
    let flood = live.flood.as_ref().map(|f| {
        let c = &f.counters;
        json!({
            "banned_sources": f.banned_sources(now),
            "locked_users": f.locked_users(now),
            "dropped": c.dropped.load(Ordering::Relaxed),
            "rate_limited": c.rate_limited.load(Ordering::Relaxed),
            "request_bans": c.request_bans.load(Ordering::Relaxed),
            "auth_bans": c.auth_bans.load(Ordering::Relaxed),
        })
    });
    let registrar = s.registrar.as_ref().map(|r| {
        json!({
            "accepted": r.accepted, "too_many_bindings": r.too_many_bindings, "out_of_order": r.out_of_order,
            "interval_too_brief": r.interval_too_brief, "not_found": r.not_found,
            "bad_extension": r.bad_extension, "malformed": r.malformed, "other": r.other,
        })
    });
    let auth = s.auth.as_ref().map(|a| {
        json!({
            "challenges": a.challenges, "accepted": a.accepted,
            "rejected": a.rejections().iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<Map<String, Value>>(),
        })
    });
    let local: Map<String, Value> = s.local_responses.iter().map(|(st, n)| (st.to_string(), json!(n))).collect();
    let store = m.api.store.as_ref().map(|st| json!({ "bindings": st.len(), "aors": st.aor_count() }));
    Ok(json!({
        "workers": live.workers,
        "shards": live.shards,
        "transactions": (live.transactions)(),
        "dialogs": Value::Null,
        "overload": { "shedding_workers": live.stats.shedding.load(Ordering::Relaxed) },
        "tcp_open": s.tcp_open,
        "counters": counters,
        "messages": {
            "measured": live.measured,
            "received": per_type(&totals.received),
            "sent": per_type(&totals.sent),
            "socket_drops": totals.socket_drops,
        },
        "registrar": registrar,
        "auth": auth,
        "local_responses": local,
        "flood": flood,
        "location": store,
    }))
}
