//! The branch a stateless proxy writes (RFC 3261 §16.11): a function of the request's
//! transaction identity, the same in every herald process.

use super::key::to_tag;
use herald_sip::headers::is_rfc3261_branch;
use herald_sip::text;
use herald_sip::uri::Host;
use herald_sip::{HeaderName, Message};

/// FNV-1a, 128 bits: deterministic across processes and Rust versions, so several stateless
/// proxy instances (or one restarted) derive the same branch for the same request.
struct Fnv128(u128);

impl Fnv128 {
    const PRIME: u128 = 0x0000000001000000000000000000013B;

    fn new() -> Fnv128 {
        Fnv128(0x6c62272e07bb014262b821756295c58d)
    }

    /// Writes the length first so that field boundaries cannot be shifted. Two plain loops on a
    /// local: one loop over the length chained to the bytes cost a test of the chain per byte.
    fn field(&mut self, bytes: &[u8]) {
        let mut h = self.0;
        for b in (bytes.len() as u64).to_le_bytes() {
            h = (h ^ u128::from(b)).wrapping_mul(Self::PRIME);
        }
        for &b in bytes {
            h = (h ^ u128::from(b)).wrapping_mul(Self::PRIME);
        }
        self.0 = h;
    }
}

/// The branch a stateless proxy puts in its Via when forwarding `request` (RFC 3261 §16.11):
/// a function of the incoming request's transaction identity, so retransmissions get the same
/// branch. With an RFC 3261 branch it hashes that branch (and the sent-by); otherwise the top
/// Via, To tag, From tag, Call-ID, CSeq number and Request-URI, as §16.11 recommends. The method
/// is left out on purpose, so a CANCEL (and, with an RFC 3261 branch, a non-2xx ACK) gets the
/// branch of its INVITE and matches it downstream.
///
/// Other herald processes compare these values (stateless instances side by side, a restarted
/// one, a cluster of mixed versions): the bytes hashed are the same as when the top Via was
/// parsed here (`tests_table::stateless_branch_values_are_pinned`); they now come from the
/// receipt check's memo, and an IPv4 sent-by is written on the stack (the parse, the `String`
/// and the chained loop cost about 1,100 instructions per stateless ACK, issue 21).
pub fn stateless_branch(request: &Message) -> Option<String> {
    // `None` exactly when the top Via is missing or malformed, as `top_via()` was.
    let sent_by = request.top_via_sent_by()?;
    let mut h = Fnv128::new();
    if let Some(branch) = request.top_via_branch().filter(|b| is_rfc3261_branch(b)) {
        h.field(b"3261");
        h.field(branch.as_bytes());
        match sent_by {
            (Host::Ipv4(ip), port) => h.field(text::ipv4_port_text(ip, port, &mut [0; 21]).as_bytes()),
            other => h.field(sent_by_text(other).as_bytes()),
        }
    } else {
        h.field(b"2543");
        h.field(request.list_values(HeaderName::Via).next()?.ok()?.bytes);
        h.field(to_tag(request).as_deref().unwrap_or("").as_bytes());
        h.field(request.from_tag().ok()?.unwrap_or("").as_bytes());
        h.field(request.call_id().ok()?.as_bytes());
        h.field(&request.cseq().ok()?.seq.to_le_bytes());
        h.field(request.request_uri_bytes()?);
    }
    // With room for the proxy's loop-hash suffix (`engine::forward_edits::loop_branch`).
    let mut branch = String::with_capacity(8 + 32 + 17);
    branch.push_str("z9hG4bKs");
    // `{:032x}` of the u128, without core::fmt.
    text::push_hex(&mut branch, (h.0 >> 64) as u64, 16);
    text::push_hex(&mut branch, h.0 as u64, 16);
    Some(branch)
}

/// `host[:port]` of a Via's sent-by, host names lower-cased (§19.1.4: hosts compare
/// case-insensitively), IPv6 references in brackets.
fn sent_by_text((host, port): (Host<'_>, Option<u16>)) -> String {
    let mut s = String::with_capacity(match host {
        Host::Name(n) => n.len() + 6,
        _ => 48,
    });
    match host {
        Host::Name(n) => s.extend(n.chars().map(|c| c.to_ascii_lowercase())),
        Host::Ipv4(ip) => text::push_host(&mut s, ip.into()),
        other => s.push_str(&other.to_string()),
    }
    if let Some(p) = port {
        s.push(':');
        text::push_dec(&mut s, u64::from(p));
    }
    s
}
