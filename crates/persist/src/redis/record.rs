//! One AoR's value in Redis, and how a node's bindings become it and come back from it.
//!
//! The value is JSON (readable with `redis-cli GET`, versioned by `v`):
//!
//! ```text
//! {"v":1,"node":"a","bindings":[{"contact":"sip:alice@10.0.0.5:5060","call_id":"…","cseq":7,
//!   "path":"<sip:192.0.2.10:5060;lr;ft=…;ob>","expires_ms":1764200000000,"source":"udp 203.0.113.9:5062",…}]}
//! ```
//!
//! *Why a Path to the owning node.* A binding registered directly at node A (no Path of its own)
//! is reachable only through A: over a connection only A holds (TCP, TLS, WebSocket), or through
//! a NAT that lets only A's address in. So A stores it with a Path of A's own loose-routing URI
//! carrying the flow token of that flow (RFC 3327 §5.3 and RFC 5626 §5.3, as an Outbound edge
//! proxy writes it: [`herald_core::proxy::own_values::outbound_path_value`]); node B then pushes it
//! as a Route (the core's delivery routes a binding with a Path to its first entry) and A's
//! engine delivers the request on the flow the token names. A binding that already has a Path
//! (an edge proxy in front) keeps it: any node reaches the edge proxy.
//!
//! *Coming back.* When A reads a value holding its own Path (another node rewrote the AoR, or A
//! restarted), it strips that entry and takes the flow back from the token: a genuine token
//! names the flow, connection included. A token of an earlier run of A (a new seed) names
//! nothing any more; the binding keeps the source stored beside it (the UDP address still
//! works; a connection is gone) and is written again with a fresh token.
//!
//! *Times.* A binding's expiry inside a store counts from that store's epoch; in Redis it is
//! wall-clock milliseconds since the Unix epoch, which every node reads alike (nodes need
//! synchronized clocks, as for any expiry shared between machines).

use herald_core::peer::{Peer, Transport};
use herald_core::proxy::flow_token::{FlowToken, FlowTokens, FLOW_PARAM};
use herald_core::proxy::own_values::outbound_path_value;
use herald_sip::headers::{ListIter, NameAddr};
use herald_sip::uri::Host;
use herald_store::Binding;
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU32;

/// The format version written; a value of another version is ignored (logged), not misread.
const VERSION: u32 = 1;

/// The stored value of one AoR.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredAor {
    pub v: u32,
    /// The node that wrote it last (for the operator reading Redis).
    pub node: String,
    pub bindings: Vec<StoredBinding>,
}

/// One binding as every node can use it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredBinding {
    pub contact: String,
    pub call_id: String,
    pub cseq: u32,
    /// The Path other nodes push as Route values: the owning node's URI first when the binding
    /// is reached through it (see the module documentation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reg_id: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub q: Option<u16>,
    /// Wall-clock expiry, milliseconds since the Unix epoch.
    pub expires_ms: u64,
    /// Where the REGISTER came from, as `"udp 203.0.113.9:5062"`: the owner's fallback when its
    /// flow token is from an earlier run (see the module documentation).
    pub source: String,
}

/// This node's side of the conversion: its identity, the address other nodes reach it at, and
/// the flow tokens of its engine (the same seed: the engine reads what this mints).
pub struct Codec {
    pub node: String,
    /// The SIP address (UDP) other nodes send requests for this node's phones to.
    pub advertise: SocketAddr,
    pub tokens: FlowTokens,
}

/// A binding read back, and whether its owner (this node) must write it again (its flow token
/// is from an earlier run).
pub struct Imported {
    pub bindings: Vec<Binding<Peer>>,
    pub rewrite: bool,
}

impl Codec {
    /// The value for `bindings` (each `expires_at` holding the seconds it had left at
    /// `now_ms`), or `None` when there is none (the key is deleted). Also returns the latest
    /// expiry, for the key's own expiry (`PXAT`).
    pub fn export(&self, bindings: &[Binding<Peer>], now_ms: u64) -> Option<(StoredAor, u64)> {
        let stored: Vec<StoredBinding> =
            bindings.iter().filter(|b| b.expires_at > 0).map(|b| self.export_one(b, now_ms)).collect();
        let latest = stored.iter().map(|b| b.expires_ms).max()?;
        Some((StoredAor { v: VERSION, node: self.node.clone(), bindings: stored }, latest))
    }

    fn export_one(&self, b: &Binding<Peer>, now_ms: u64) -> StoredBinding {
        let path = match &b.path {
            Some(p) => p.to_string(),
            // Registered here, directly: reached through this node, over its flow.
            None => outbound_path_value(None, self.advertise, &self.tokens.mint(b.source)),
        };
        StoredBinding {
            contact: b.contact.to_string(),
            call_id: b.call_id.to_string(),
            cseq: b.cseq,
            path: Some(path),
            instance: b.instance.as_deref().map(str::to_owned),
            reg_id: b.reg_id.map(NonZeroU32::get),
            q: b.q,
            expires_ms: now_ms.saturating_add(u64::from(b.expires_at) * 1000),
            source: format!("{} {}", b.source.transport.as_param(), b.source.addr),
        }
    }

    /// The bindings of a stored value as this node's store takes them ([`LocationStore::replace`]:
    /// each `expires_at` holds the seconds left at `now_ms`, rounded up; expired ones are left
    /// out), oldest update first as stored.
    ///
    /// [`LocationStore::replace`]: herald_store::LocationStore::replace
    pub fn import(&self, value: &StoredAor, now_ms: u64) -> Imported {
        let mut rewrite = false;
        let mut bindings = Vec::with_capacity(value.bindings.len());
        for s in value.bindings.iter().filter(|s| s.expires_ms > now_ms) {
            let Some(stored_source) = parse_source(&s.source) else { continue };
            let (source, path) = match s.path.as_deref().map(|p| self.strip_own(p)) {
                Some(Own::Mine { flow, rest }) => {
                    rewrite |= flow.is_none();
                    (flow.unwrap_or(stored_source), rest)
                }
                Some(Own::Other) => (stored_source, s.path.clone()),
                None => (stored_source, None),
            };
            let left_ms = s.expires_ms - now_ms;
            bindings.push(Binding {
                contact: s.contact.as_str().into(),
                call_id: s.call_id.as_str().into(),
                path: path.map(Into::into),
                instance: s.instance.as_deref().map(Into::into),
                source,
                expires_at: u32::try_from(left_ms.div_ceil(1000)).unwrap_or(u32::MAX),
                cseq: s.cseq,
                reg_id: s.reg_id.and_then(NonZeroU32::new),
                q: s.q,
            });
        }
        Imported { bindings, rewrite }
    }

    /// Whether the first entry of `path` is this node's own URI with a flow token; if so, the
    /// flow (when the token is genuine) and the rest of the Path.
    fn strip_own(&self, path: &str) -> Own {
        let mut entries = ListIter::new(path.as_bytes());
        let Some(Ok((_, first))) = entries.next() else { return Own::Other };
        let Ok(addr) = NameAddr::parse(first) else { return Own::Other };
        let Some(uri) = addr.uri.as_sip() else { return Own::Other };
        let host_ip = match uri.host {
            Host::Ipv4(ip) => IpAddr::V4(ip),
            Host::Ipv6(ip) => IpAddr::V6(ip),
            Host::Name(_) => return Own::Other,
        };
        let token = uri.param(FLOW_PARAM).flatten();
        let ours = host_ip == self.advertise.ip() && uri.port.unwrap_or(5060) == self.advertise.port();
        let Some(token) = token.filter(|_| ours) else { return Own::Other };
        let flow = match self.tokens.read(token) {
            FlowToken::Valid(peer) => Some(peer),
            FlowToken::Forged => None,
        };
        let rest: Vec<&str> = entries.filter_map(Result::ok).filter_map(|(_, e)| std::str::from_utf8(e).ok()).collect();
        Own::Mine { flow, rest: (!rest.is_empty()).then(|| rest.join(", ")) }
    }
}

enum Own {
    Mine { flow: Option<Peer>, rest: Option<String> },
    Other,
}

/// `"udp 203.0.113.9:5062"` → the peer (no connection: a connection is this process's only).
fn parse_source(text: &str) -> Option<Peer> {
    let (transport, addr) = text.split_once(' ')?;
    Some(Peer { transport: Transport::parse(transport)?, addr: addr.parse().ok()?, conn: None })
}

/// The value as bytes.
pub fn encode(value: &StoredAor) -> Vec<u8> {
    serde_json::to_vec(value).expect("plain structs serialize")
}

/// A stored value, if it is one of this format.
pub fn decode(bytes: &[u8]) -> Result<StoredAor, String> {
    let value: StoredAor = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if value.v != VERSION {
        return Err(format!("format version {} (this herald reads {VERSION})", value.v));
    }
    Ok(value)
}

#[cfg(test)]
#[path = "record_tests.rs"]
mod tests;
