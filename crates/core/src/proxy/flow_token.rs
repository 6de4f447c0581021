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

use crate::peer::{ConnId, Peer, Transport};
use crate::seed::Seed;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};

type HmacSha256 = Hmac<Sha256>;

/// The URI parameter of herald's Path and Record-Route values that carries a flow token.
pub const FLOW_PARAM: &str = "ft";
const FLOW_LEN: usize = 28;
const MAC_LEN: usize = 12;
const TRANSPORTS: [Transport; 5] = [Transport::Udp, Transport::Tcp, Transport::Tls, Transport::Ws, Transport::Wss];

/// Mints and reads flow tokens.
#[derive(Clone)]
pub struct FlowTokens {
    mac: HmacSha256,
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
        FlowTokens { mac: HmacSha256::new_from_slice(&key).expect("HMAC accepts keys of any length") }
    }

    /// The token naming `flow`.
    pub fn mint(&self, flow: Peer) -> String {
        let raw = encode(flow);
        let mut m = self.mac.clone();
        m.update(&raw);
        let tag = m.finalize().into_bytes();
        let mut token = herald_credentials::to_hex(&raw);
        token.push_str(&herald_credentials::to_hex(&tag[..MAC_LEN]));
        token
    }

    /// Reads a token (the value of [`FLOW_PARAM`]); the MAC is compared in constant time.
    pub fn read(&self, token: &str) -> FlowToken {
        let mut raw = [0u8; FLOW_LEN + MAC_LEN];
        if token.len() != raw.len() * 2 || herald_credentials::from_hex(token, &mut raw).is_none() {
            return FlowToken::Forged;
        }
        let (flow, tag) = raw.split_at(FLOW_LEN);
        let mut m = self.mac.clone();
        m.update(flow);
        if m.verify_truncated_left(tag).is_err() {
            return FlowToken::Forged;
        }
        decode(flow).map_or(FlowToken::Forged, FlowToken::Valid)
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
}
