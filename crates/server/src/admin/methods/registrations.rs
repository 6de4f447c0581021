//! `registrations.list`, `.show`, `.remove`: the location store as an operator sees it.
//!
//! A listing pages through the store's incremental scan (`LocationStore::scan`: one shard's read
//! lock per page, held only while the page is copied), so listing 1,000,000 bindings delays no
//! REGISTER by more than a page. The scan position is kept under an opaque cursor (`listings`).

use super::listings::{Filter, Listing};
use super::state::{limit, Methods};
use crate::admin::caller::Caller;
use crate::admin::rpc::{params, Call, RpcError, UNAVAILABLE};
use herald_core::{Location, Peer};
use herald_sip::uri::SipUri;
use herald_store::{Aor, Binding, ScanCursor};
use serde::Deserialize;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// AoRs read per scan step (one shard read lock each, held while they are copied).
const PAGE_AORS: usize = 128;
/// How long one call may scan for matches before it answers with what it has (a filter that
/// matches little must not hold the admin endpoint's thread).
const CALL_BUDGET: Duration = Duration::from_millis(20);
const DEFAULT_LIMIT: usize = 1000;
const MAX_LIMIT: usize = 10_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListParams {
    prefix: Option<String>,
    user: Option<String>,
    limit: Option<usize>,
    cursor: Option<String>,
}

fn store(m: &Methods) -> Result<&Location, RpcError> {
    m.api.store.as_deref().ok_or_else(|| RpcError::new(UNAVAILABLE, "no location store"))
}

/// `{registrations: [...], cursor}`: up to `limit` bindings (a page ends with whole AoRs, so
/// it may hold up to `max_bindings_per_aor - 1` more), and the cursor to continue with, `null`
/// when the store has been gone through. A page may be short, even empty, with a cursor: the
/// call's time budget ran out while a filter skipped AoRs.
pub(super) fn list(m: &Methods, call: &Call) -> Result<Value, RpcError> {
    let p: ListParams = params(call)?;
    let store = store(m)?;
    let want = limit(p.limit, DEFAULT_LIMIT, MAX_LIMIT)?;
    let started = Instant::now();
    let mut listing = match &p.cursor {
        Some(c) => {
            if p.prefix.is_some() || p.user.is_some() {
                return Err(RpcError::params("a cursor continues a listing: give it without prefix or user"));
            }
            m.listings
                .take(c, started)
                .ok_or_else(|| RpcError::params(format!("unknown or expired cursor '{c}': start the listing again")))?
        }
        None => {
            let prefix = p.prefix.map(|s| strip_scheme(&s).to_string());
            Listing { at: ScanCursor::START, filter: Filter { prefix, user: p.user }, touched: started }
        }
    };
    let mut out: Vec<Value> = Vec::new();
    let mut next = Some(listing.at);
    while let Some(at) = next {
        if out.len() >= want || started.elapsed() >= CALL_BUDGET {
            break;
        }
        let now = Instant::now();
        let page = (want - out.len()).clamp(1, PAGE_AORS);
        // Under the shard's read lock only the copies; the JSON is written after it is let go.
        let mut copied: Vec<(String, Binding<Peer>, u32)> = Vec::new();
        next = store.scan(at, page, now, |aor| {
            let key = aor.aor().to_string();
            if listing.filter.matches(&key) {
                copied.extend(aor.live().map(|b| (key.clone(), b.clone(), aor.expires_in(b))));
            }
        });
        out.extend(copied.iter().map(|(key, b, expires_in)| binding(key, b, *expires_in)));
    }
    let cursor = next.map(|at| {
        listing.at = at;
        listing.touched = Instant::now();
        m.listings.put(listing)
    });
    Ok(json!({ "registrations": out, "cursor": cursor }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AorParams {
    aor: String,
}

/// `{aor, bindings: [...]}`; an AoR with no binding is an error (nothing to show).
pub(super) fn show(m: &Methods, call: &Call) -> Result<Value, RpcError> {
    let p: AorParams = params(call)?;
    let store = store(m)?;
    let aor = parse_aor(&p.aor, m.api.use_domain)?;
    let now = Instant::now();
    let bindings = store.lookup(&aor, now);
    if bindings.is_empty() {
        return Err(RpcError::not_found(format!("no bindings for '{aor}'")));
    }
    let key = aor.to_string();
    let list: Vec<Value> = bindings.iter().map(|b| binding(&key, b, store.expires_in(b, now))).collect();
    Ok(json!({ "aor": key, "bindings": list }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RemoveParams {
    aor: String,
    contact: Option<String>,
}

/// `{aor, removed}`. The store journals the removal, so a durable store forgets it too. An AoR
/// without bindings, or a contact it does not hold, is an error and changes nothing.
pub(super) fn remove(m: &Methods, _who: &Caller, call: &Call) -> Result<Value, RpcError> {
    let p: RemoveParams = params(call)?;
    let store = store(m)?;
    let aor = parse_aor(&p.aor, m.api.use_domain)?;
    let now = Instant::now();
    if store.lookup(&aor, now).is_empty() {
        return Err(RpcError::not_found(format!("no bindings for '{aor}'")));
    }
    let removed = match &p.contact {
        Some(contact) => {
            let removed = store.remove_binding(&aor, contact, now);
            if removed.count == 0 {
                return Err(RpcError::not_found(format!("'{aor}' has no binding with contact '{contact}'")));
            }
            removed.count
        }
        None => store.remove_aor(&aor, now).count,
    };
    Ok(json!({ "aor": aor.to_string(), "removed": removed }))
}

/// An AoR as an operator types it: `sip:alice@example.com`, `sips:...` or `alice@example.com`,
/// keyed as the registrar keys a REGISTER's To (RFC 3261 §10.3 step 5).
fn parse_aor(text: &str, use_domain: bool) -> Result<Aor, RpcError> {
    let text = text.trim();
    let uri =
        if text.starts_with("sip:") || text.starts_with("sips:") { text.to_string() } else { format!("sip:{text}") };
    let parsed = SipUri::parse(uri.as_bytes())
        .map_err(|e| RpcError::params(format!("'{text}' is not an address-of-record (user@domain): {e}")))?;
    if parsed.user.is_none() {
        return Err(RpcError::params(format!("'{text}' has no user part: an AoR is user@domain")));
    }
    Ok(Aor::of_served_user(&parsed, use_domain))
}

fn strip_scheme(s: &str) -> &str {
    s.strip_prefix("sips:").or_else(|| s.strip_prefix("sip:")).unwrap_or(s)
}

fn binding(aor: &str, b: &Binding<Peer>, expires_in: u32) -> Value {
    json!({
        "aor": aor,
        "contact": &*b.contact,
        "expires_in": expires_in,
        "q": b.q.map(|q| f64::from(q) / 1000.0),
        "source": format!("{}:{}", b.source.transport, b.source.addr),
        "call_id": &*b.call_id,
        "cseq": b.cseq,
        "instance": b.instance.as_deref(),
        "reg_id": b.reg_id.map(|r| r.get()),
        "path": b.path.as_deref(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aors_are_typed_with_or_without_scheme() {
        let a = parse_aor("sip:Alice@Example.COM:5060", true).unwrap();
        assert_eq!(a, parse_aor("Alice@example.com", true).unwrap());
        assert_eq!(a.to_string(), "Alice@example.com");
        assert!(parse_aor("example.com", true).is_err(), "no user");
        assert!(parse_aor("a b@@", true).is_err());
    }
}
