//! Flow tokens (RFC 5626 §5.2): herald's name for one flow to a user agent, put into the
//! Path and Record-Route URIs it writes as an edge proxy, so that requests towards the UA come
//! back to herald and leave over that flow (the connection the UA opened, or the UDP address
//! its requests came from).
//!
//! ```text
//! <sip:192.0.2.10:5060;transport=ws;lr;ft=<token>;ob>
//! token = hex( flow || HMAC-SHA256(K, flow)[..12] )
//! flow  = transport (1) | has-connection (1) | connection id (8) | IPv6 or v4-mapped (16) | port (2)
//! K     = 16 bytes derived from the engine's seed ("flow token")
//! ```
//!
//! *Why signed.* A flow token decides where herald sends. Whoever can write one could make
//! herald send a request to any address over UDP, or into any open connection (issue 16: every
//! unauthenticated byte is an attacker's). RFC 5626 §5.2 asks that a proxy "MUST be able to
//! detect" a tampered token; herald checks an HMAC, as it does for its signed Record-Route
//! ([`crate::auth::route_sig`], the `hs` parameter), and refuses a bad one with 403 (§5.3).
//!
//! *Why a parameter, not the user part.* RFC 5626 leaves the token's form to the proxy that
//! reads it; herald's own Route URIs carry no user part ([`super::Identity::is_this_proxy`]),
//! and the token sits beside `hs` as the URI parameter [`FLOW_PARAM`].
//!
//! *The key* comes from the engine's seed, which `herald serve` draws at start-up and every
//! shard shares: a token names a connection of this process, which no other process and no
//! later run of herald has, so a key that dies with the process loses nothing.
//!
//! *Why a cache.* A call between two WebSocket phones mints two tokens for its INVITE's
//! Record-Route and reads two on each in-dialog request: six HMACs per call (12 SHA-256
//! finalizations, about 44k instructions of the server's 418k per call under callgrind), all for
//! the same two flows. [`FlowTokens`] keeps the MAC (and the token's text) of the flows it
//! computed lately (`MacCache`), keyed by the whole flow (transport, connection id, address,
//! port), so a flow's MAC is computed once while the flow is in use. A token is still only valid with the MAC of exactly its flow
//! under the key: the cached MAC *is* that HMAC, and a token's MAC is compared with it in constant
//! time, as `verify` does.

use crate::peer::{ConnId, Peer, Transport};
use crate::seed::{Seed, SeededState};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::cell::RefCell;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use subtle::ConstantTimeEq;

type HmacSha256 = Hmac<Sha256>;

/// The URI parameter of herald's Path and Record-Route values that carries a flow token.
pub const FLOW_PARAM: &str = "ft";
const FLOW_LEN: usize = 28;
const MAC_LEN: usize = 12;
const TRANSPORTS: [Transport; 5] = [Transport::Udp, Transport::Tcp, Transport::Tls, Transport::Ws, Transport::Wss];

/// Flows whose MAC [`FlowTokens`] keeps per engine (each shard has one, and sees the dialogs whose
/// Call-ID hashes to it): a call's flows are its phones' connections; a flow forgotten only costs
/// an HMAC again. At most about 40 KiB, growing with the flows seen (a herald that serves no
/// WebSocket or Outbound phone allocates nothing).
const CACHED_FLOWS: usize = 256;

/// Mints and reads flow tokens.
#[derive(Clone)]
pub struct FlowTokens {
    mac: HmacSha256,
    cache: RefCell<MacCache>,
}

impl std::fmt::Debug for FlowTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlowTokens").finish_non_exhaustive()
    }
}

/// What a flow token said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowToken {
    /// A token herald minted, naming this flow.
    Valid(Peer),
    /// Not a token herald minted (forged, altered or truncated): RFC 5626 §5.3 answers 403.
    Forged,
}

impl FlowTokens {
    /// Keyed from `seed` (the engine's): every shard of one process reads the others' tokens.
    pub fn new(seed: Seed) -> FlowTokens {
        let key: Vec<u8> = seed.derive("flow token", 0).keys().iter().flat_map(|k| k.to_le_bytes()).collect();
        FlowTokens {
            mac: HmacSha256::new_from_slice(&key).expect("HMAC accepts keys of any length"),
            cache: RefCell::new(MacCache::new(seed.derive("flow token cache", 0), CACHED_FLOWS)),
        }
    }

    /// The token naming `flow`.
    pub fn mint(&self, flow: Peer) -> String {
        let raw = encode(flow);
        if let Some(known) = self.cache.borrow().get(&raw) {
            return known.token.clone();
        }
        let tag = self.compute(&raw);
        let mut token = herald_credentials::to_hex(&raw);
        token.push_str(&herald_credentials::to_hex(&tag));
        self.cache.borrow_mut().put(raw, Known { tag, token: token.clone() });
        token
    }

    /// HMAC-SHA256(K, flow), truncated.
    fn compute(&self, raw: &[u8; FLOW_LEN]) -> [u8; MAC_LEN] {
        let mut m = self.mac.clone();
        m.update(raw);
        let full = m.finalize().into_bytes();
        let mut tag = [0u8; MAC_LEN];
        tag.copy_from_slice(&full[..MAC_LEN]);
        tag
    }

    /// Reads a token (the value of [`FLOW_PARAM`]); the MAC is compared in constant time.
    pub fn read(&self, token: &str) -> FlowToken {
        let mut raw = [0u8; FLOW_LEN + MAC_LEN];
        if token.len() != raw.len() * 2 || herald_credentials::from_hex(token, &mut raw).is_none() {
            return FlowToken::Forged;
        }
        let (flow, tag) = raw.split_at(FLOW_LEN);
        let flow: [u8; FLOW_LEN] = flow.try_into().expect("split at FLOW_LEN");
        // A well-formed flow first: a token naming no flow costs no HMAC.
        let Some(peer) = decode(&flow) else { return FlowToken::Forged };
        let cached = self.cache.borrow().get(&flow).map(|k| k.tag);
        let expected = cached.unwrap_or_else(|| self.compute(&flow));
        if !bool::from(expected.ct_eq(tag)) {
            return FlowToken::Forged;
        }
        // Only a flow whose token was genuine is kept: forged tokens fill nothing. The text kept
        // is the one `mint` writes (lowercase hex), whatever case this token was written in.
        if cached.is_none() {
            let mut token = herald_credentials::to_hex(&flow);
            token.push_str(&herald_credentials::to_hex(&expected));
            self.cache.borrow_mut().put(flow, Known { tag: expected, token });
        }
        FlowToken::Valid(peer)
    }
}

/// What [`MacCache`] knows of one flow.
#[derive(Clone)]
struct Known {
    /// HMAC-SHA256(K, flow), truncated.
    tag: [u8; MAC_LEN],
    /// The token `mint` writes for the flow.
    token: String,
}

/// The flows lately minted or read, keyed by the whole flow (hashed with a key from the seed, so
/// a peer cannot aim at collisions): an entry answers only for its flow, byte for byte. Bounded:
/// when full it starts again empty (what it forgets costs an HMAC each).
#[derive(Clone)]
struct MacCache {
    known: HashMap<[u8; FLOW_LEN], Known, SeededState>,
    hash: Seed,
    size: usize,
}

impl MacCache {
    fn new(hash: Seed, size: usize) -> MacCache {
        MacCache { known: HashMap::with_hasher(hash.build()), hash, size: size.max(1) }
    }

    fn get(&self, flow: &[u8; FLOW_LEN]) -> Option<&Known> {
        self.known.get(flow)
    }

    fn put(&mut self, flow: [u8; FLOW_LEN], known: Known) {
        if self.known.len() >= self.size {
            self.known = HashMap::with_hasher(self.hash.build());
        }
        self.known.insert(flow, known);
    }
}

fn encode(flow: Peer) -> [u8; FLOW_LEN] {
    let mut raw = [0u8; FLOW_LEN];
    raw[0] = TRANSPORTS.iter().position(|t| *t == flow.transport).unwrap_or(0) as u8;
    if let Some(ConnId(id)) = flow.conn {
        raw[1] = 1;
        raw[2..10].copy_from_slice(&id.to_be_bytes());
    }
    let ip = match flow.addr.ip() {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    };
    raw[10..26].copy_from_slice(&ip.octets());
    raw[26..28].copy_from_slice(&flow.addr.port().to_be_bytes());
    raw
}

fn decode(raw: &[u8]) -> Option<Peer> {
    let transport = *TRANSPORTS.get(usize::from(raw[0]))?;
    let conn = match raw[1] {
        0 => None,
        1 => Some(ConnId(u64::from_be_bytes(raw[2..10].try_into().ok()?))),
        _ => return None,
    };
    let v6 = Ipv6Addr::from(<[u8; 16]>::try_from(&raw[10..26]).ok()?);
    let ip = v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4);
    let port = u16::from_be_bytes([raw[26], raw[27]]);
    Some(Peer { transport, addr: SocketAddr::new(ip, port), conn })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_names_its_flow_and_nothing_else() {
        let tokens = FlowTokens::new(Seed::fixed(7));
        let ws = Peer { transport: Transport::Ws, addr: "198.51.100.4:53122".parse().unwrap(), conn: Some(ConnId(9)) };
        let udp = Peer::udp("[2001:db8::5]:5060".parse().unwrap());
        for flow in [ws, udp] {
            let t = tokens.mint(flow);
            assert_eq!(tokens.read(&t), FlowToken::Valid(flow));
            // Another process (another seed) cannot read it.
            assert_eq!(FlowTokens::new(Seed::fixed(8)).read(&t), FlowToken::Forged);
        }
        let t = tokens.mint(ws);
        // Any changed digit (the flow or the MAC), a truncation, non-hex: forged.
        for i in [0, 5, 30, t.len() - 1] {
            let mut b = t.clone().into_bytes();
            b[i] = if b[i] == b'0' { b'1' } else { b'0' };
            assert_eq!(tokens.read(&String::from_utf8(b).unwrap()), FlowToken::Forged, "digit {i}");
        }
        assert_eq!(tokens.read(&t[..t.len() - 2]), FlowToken::Forged);
        assert_eq!(tokens.read(&t.replace(|c: char| c.is_ascii_digit(), "z")), FlowToken::Forged);
        assert_eq!(tokens.read(""), FlowToken::Forged);
    }

    fn phones() -> Vec<Peer> {
        let mut flows = Vec::new();
        for conn in [None, Some(ConnId(1)), Some(ConnId(2))] {
            for addr in ["198.51.100.4:53122", "198.51.100.4:53123", "198.51.100.5:53122", "[2001:db8::5]:5060"] {
                for transport in [Transport::Udp, Transport::Ws, Transport::Tcp] {
                    flows.push(Peer { transport, addr: addr.parse().unwrap(), conn });
                }
            }
        }
        flows
    }

    /// The cache answers with the MAC of exactly the flow asked about: with room for one flow
    /// every flow displaces the last, and with room for all each stays; either way every token
    /// is the uncached one, reads as its own flow, and a token whose MAC is another flow's (even
    /// the cached one) is forged.
    #[test]
    fn the_mac_cache_answers_a_flow_only_with_its_own_mac() {
        let uncached = || {
            let t = FlowTokens::new(Seed::fixed(7));
            *t.cache.borrow_mut() = MacCache::new(Seed::fixed(1), 1);
            t
        };
        let flows = phones();
        let expected: Vec<String> = flows.iter().map(|f| uncached().mint(*f)).collect();
        for size in [1, 3, CACHED_FLOWS] {
            let tokens = FlowTokens::new(Seed::fixed(7));
            *tokens.cache.borrow_mut() = MacCache::new(Seed::fixed(3), size);
            for round in 0..2 {
                for (i, f) in flows.iter().enumerate() {
                    let t = tokens.mint(*f);
                    assert_eq!(t, expected[i], "size {size} round {round} flow {i}");
                    assert_eq!(tokens.read(&t), FlowToken::Valid(*f), "size {size} flow {i}");
                    // The previous flow's MAC (likely the one cached) on this flow: forged.
                    let other = &expected[(i + flows.len() - 1) % flows.len()];
                    let spliced = format!("{}{}", &t[..FLOW_LEN * 2], &other[FLOW_LEN * 2..]);
                    assert_eq!(tokens.read(&spliced), FlowToken::Forged, "size {size} flow {i}");
                    assert_eq!(tokens.read(&t), FlowToken::Valid(*f));
                }
            }
        }
    }

    /// A cached flow's token read with another key is still forged, and a read token that was
    /// never minted here is checked by the HMAC, then cached as what it is.
    #[test]
    fn a_cached_mac_is_the_keys_own() {
        let tokens = FlowTokens::new(Seed::fixed(7));
        // Nothing is allocated before the first token.
        assert_eq!(tokens.cache.borrow().known.capacity(), 0);
        let other = FlowTokens::new(Seed::fixed(8));
        for f in phones() {
            let t = other.mint(f);
            assert_eq!(tokens.read(&t), FlowToken::Forged);
            assert!(tokens.cache.borrow().get(&encode(f)).is_none(), "a forged token was kept");
            assert_eq!(tokens.read(&tokens.mint(f)), FlowToken::Valid(f));
            assert_eq!(tokens.read(&t), FlowToken::Forged);
            let fresh = FlowTokens::new(Seed::fixed(8));
            assert_eq!(fresh.read(&t), FlowToken::Valid(f));
            assert!(fresh.cache.borrow().get(&encode(f)).is_some());
            assert_eq!(fresh.mint(f), t);
            // Read first in capitals, the token minted later is still the lowercase one.
            let fresh = FlowTokens::new(Seed::fixed(8));
            assert_eq!(fresh.read(&t.to_uppercase()), FlowToken::Valid(f));
            assert_eq!(fresh.mint(f), t);
        }
    }
}
