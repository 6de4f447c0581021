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
    const BASIS: u128 = 0x6c62272e07bb014262b821756295c58d;
    /// PRIME to the 7th power: seven zero octets, whose XOR changes nothing, are seven
    /// multiplications by PRIME, which is one by this.
    const PRIME_POW7: u128 = Self::PRIME
        .wrapping_mul(Self::PRIME)
        .wrapping_mul(Self::PRIME)
        .wrapping_mul(Self::PRIME)
        .wrapping_mul(Self::PRIME)
        .wrapping_mul(Self::PRIME)
        .wrapping_mul(Self::PRIME);
    /// The hash after `field(b"3261")`, the first field of every RFC 3261 request's branch:
    /// a constant, computed by the compiler.
    const AFTER_3261: u128 = Self::const_field(Self::BASIS, b"3261");

    fn new() -> Fnv128 {
        Fnv128(Self::BASIS)
    }

    /// [`Self::field`] of a constant, as a `const fn` (the octet by octet definition).
    const fn const_field(mut h: u128, bytes: &[u8]) -> u128 {
        let len = (bytes.len() as u64).to_le_bytes();
        let mut i = 0;
        while i < len.len() {
            h = (h ^ len[i] as u128).wrapping_mul(Self::PRIME);
            i += 1;
        }
        let mut i = 0;
        while i < bytes.len() {
            h = (h ^ bytes[i] as u128).wrapping_mul(Self::PRIME);
            i += 1;
        }
        h
    }

    /// Writes the length first so that field boundaries cannot be shifted. Two plain loops on a
    /// local: one loop over the length chained to the bytes cost a test of the chain per byte.
    /// A length under 256 (every field of a usual request) is its low octet and seven zeros,
    /// taken as one multiplication by PRIME^7: the same value, ~50 instructions less a field.
    fn field(&mut self, bytes: &[u8]) {
        let mut h = self.0;
        match u8::try_from(bytes.len()) {
            Ok(len) => h = (h ^ u128::from(len)).wrapping_mul(Self::PRIME).wrapping_mul(Self::PRIME_POW7),
            Err(_) => {
                for b in (bytes.len() as u64).to_le_bytes() {
                    h = (h ^ u128::from(b)).wrapping_mul(Self::PRIME);
                }
            }
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
    stateless_branch_text(request).map(|text| branch_string(&text))
}

/// A branch of [`stateless_branch_text`] as a `String`, with room for the proxy's loop-hash
/// suffix (`engine::forward_edits::loop_branch`).
pub fn branch_string(text: &[u8; STATELESS_BRANCH_LEN]) -> String {
    let mut branch = String::with_capacity(STATELESS_BRANCH_LEN + 17);
    branch.push_str(text::ascii(text));
    branch
}

/// The length of a stateless branch: `z9hG4bKs` and 32 hex digits.
pub const STATELESS_BRANCH_LEN: usize = 8 + 32;

/// [`stateless_branch`] written on the stack, for a caller that sends it as it is (a stateful
/// proxy's ACK for a 2xx, once per call): no `String`, so no allocation and free.
pub fn stateless_branch_text(request: &Message) -> Option<[u8; STATELESS_BRANCH_LEN]> {
    // `None` exactly when the top Via is missing or malformed, as `top_via()` was.
    let sent_by = request.top_via_sent_by()?;
    let mut h = Fnv128::new();
    if let Some(branch) = request.top_via_branch().filter(|b| is_rfc3261_branch(b)) {
        h = Fnv128(Fnv128::AFTER_3261);
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
    // `z9hG4bKs` and `{:032x}` of the u128, without core::fmt, on the stack (two `push_hex`
    // onto a `String` cost ~230 instructions per stateless ACK).
    let mut text = [0u8; STATELESS_BRANCH_LEN];
    text[..8].copy_from_slice(b"z9hG4bKs");
    text[8..24].copy_from_slice(&text::hex16((h.0 >> 64) as u64));
    text[24..].copy_from_slice(&text::hex16(h.0 as u64));
    Some(text)
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

#[cfg(test)]
mod tests {
    use super::Fnv128;

    /// FNV-1a over a field octet by octet, as the branch's definition reads.
    fn by_octet(mut h: u128, bytes: &[u8]) -> u128 {
        for &b in (bytes.len() as u64).to_le_bytes().iter().chain(bytes) {
            h = (h ^ u128::from(b)).wrapping_mul(Fnv128::PRIME);
        }
        h
    }

    /// The shortcuts (the constant first field, a short length as PRIME^7) give the octet by
    /// octet value, for lengths on both sides of 256 and any start.
    #[test]
    fn the_shortcuts_hash_as_octet_by_octet() {
        assert_eq!(Fnv128::AFTER_3261, by_octet(Fnv128::BASIS, b"3261"));
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for len in (0..300).chain([511, 512, 65_536]) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let bytes: Vec<u8> = (0..len).map(|i| (x >> (i % 57)) as u8).collect();
            let start = u128::from(x) << 64 | u128::from(x.rotate_left(17));
            let mut h = Fnv128(start);
            h.field(&bytes);
            assert_eq!(h.0, by_octet(start, &bytes), "length {len}");
        }
    }
}
