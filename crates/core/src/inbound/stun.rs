//! The limited STUN server of RFC 5626 §8: a UA using Outbound over UDP sends STUN Binding
//! requests (RFC 5389) to herald's SIP port to keep its NAT binding open and to notice a dead
//! flow (RFC 5626 §4.4.2); herald answers each with a Binding success response carrying
//! XOR-MAPPED-ADDRESS, the only attribute that usage requires. Nothing else is answered.
//!
//! Sans-IO: bytes in, bytes out. Every byte comes from an unauthenticated sender, so the parse
//! trusts no length it reads, allocates nothing from it, and the answer has a fixed size
//! (32 bytes for IPv4, 44 for IPv6, 8 more when the request carried FINGERPRINT): never more
//! than the request plus the XOR-MAPPED-ADDRESS attribute (the smallest request is 20 bytes).

use bytes::{BufMut, Bytes, BytesMut};
use std::net::{IpAddr, SocketAddr};

/// RFC 5389 §6: the fixed value at bytes 4..8 of every STUN message.
pub const MAGIC_COOKIE: u32 = 0x2112_A442;
/// RFC 5389 §6: the header every STUN message starts with.
pub const HEADER_LEN: usize = 20;
/// RFC 5389 §18.1: Binding request (method 0x001, class request).
const BINDING_REQUEST: u16 = 0x0001;
/// RFC 5389 §18.1: Binding success response.
const BINDING_SUCCESS: u16 = 0x0101;
/// RFC 5389 §18.2: the attributes herald reads or writes.
const XOR_MAPPED_ADDRESS: u16 = 0x0020;
const FINGERPRINT: u16 = 0x8028;
/// RFC 5389 §15.5: the CRC-32 of the message is XORed with "STUN".
const FINGERPRINT_XOR: u32 = 0x5354_554e;

/// Whether a datagram is STUN rather than SIP (RFC 5389 §6 and RFC 7983 §7: the two most
/// significant bits of a STUN message are zero and the magic cookie follows the length). A SIP
/// message starts with a letter or CRLF, and never has the cookie's bytes ("!" then 0x12) there.
pub fn is_stun(datagram: &[u8]) -> bool {
    datagram.len() >= 8 && datagram[0] & 0xC0 == 0 && datagram[4..8] == MAGIC_COOKIE.to_be_bytes()
}

/// Why a STUN datagram gets no answer (each is counted as a dropped STUN message).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Shorter than its header, a length that is not a multiple of 4 or is not what arrived
    /// (RFC 5389 §6: one message per UDP datagram), or attributes that overrun the message or
    /// follow FINGERPRINT.
    Malformed,
    /// Well formed but not a Binding request: a response, an indication (which RFC 5389 §7.3.2
    /// never answers), or another method. RFC 5626 §8 only asks for Binding.
    NotBindingRequest,
    /// A FINGERPRINT that does not match the message (RFC 5389 §7.3: discard).
    BadFingerprint,
}

/// A Binding request: what its answer needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BindingRequest {
    /// RFC 5389 §6: 96 bits, copied into the response so the client can match it.
    pub transaction_id: [u8; 12],
    /// It ended with a valid FINGERPRINT: the answer carries one too (RFC 5389 §8: a client
    /// that demultiplexes by fingerprint expects it).
    pub fingerprint: bool,
}

/// Parses one datagram as a Binding request (RFC 5389 §6, §7.3, §15). Attributes other than
/// FINGERPRINT are skipped (RFC 5626 §8: the request needs none; a USERNAME or
/// MESSAGE-INTEGRITY is ignored, since this usage has no credentials).
pub fn parse_binding_request(datagram: &[u8]) -> Result<BindingRequest, Refused> {
    let Some(header) = datagram.get(..HEADER_LEN) else { return Err(Refused::Malformed) };
    let message_type = u16::from_be_bytes([header[0], header[1]]);
    let length = usize::from(u16::from_be_bytes([header[2], header[3]]));
    if header[0] & 0xC0 != 0 || header[4..8] != MAGIC_COOKIE.to_be_bytes() {
        return Err(Refused::Malformed);
    }
    // RFC 5389 §6: the length counts the attributes (always padded to 4 bytes), not the header.
    if length % 4 != 0 || datagram.len() != HEADER_LEN + length {
        return Err(Refused::Malformed);
    }
    let fingerprint = check_attributes(datagram)?;
    if message_type != BINDING_REQUEST {
        return Err(Refused::NotBindingRequest);
    }
    let mut transaction_id = [0; 12];
    transaction_id.copy_from_slice(&header[8..20]);
    Ok(BindingRequest { transaction_id, fingerprint })
}

/// Walks the attributes of a message whose length was checked (RFC 5389 §15: type, length,
/// value padded to 4 bytes). Returns whether it ends with a FINGERPRINT, which must be correct
/// and last (§15.5).
fn check_attributes(message: &[u8]) -> Result<bool, Refused> {
    let mut at = HEADER_LEN;
    while at < message.len() {
        let Some(head) = message.get(at..at + 4) else { return Err(Refused::Malformed) };
        let kind = u16::from_be_bytes([head[0], head[1]]);
        let len = usize::from(u16::from_be_bytes([head[2], head[3]]));
        let end = at + 4 + len.next_multiple_of(4);
        if end > message.len() {
            return Err(Refused::Malformed);
        }
        if kind == FINGERPRINT {
            if len != 4 || end != message.len() {
                return Err(Refused::Malformed);
            }
            let value = u32::from_be_bytes([message[at + 4], message[at + 5], message[at + 6], message[at + 7]]);
            return if value == crc32(&message[..at]) ^ FINGERPRINT_XOR {
                Ok(true)
            } else {
                Err(Refused::BadFingerprint)
            };
        }
        at = end;
    }
    Ok(false)
}

/// The Binding success response to `request` from `source` (RFC 5389 §7.3.1.1): the request's
/// transaction id, XOR-MAPPED-ADDRESS with the source's address (§15.2), and FINGERPRINT when the
/// request had one. An IPv4 source seen on a dual-stack socket (`::ffff:a.b.c.d`) is answered
/// as the IPv4 address the client knows itself by.
pub fn binding_success(request: &BindingRequest, source: SocketAddr) -> Bytes {
    let ip = source.ip().to_canonical();
    let address_len = if ip.is_ipv4() { 4 } else { 16 };
    let attributes = 4 + 4 + address_len + if request.fingerprint { 8 } else { 0 };
    let mut out = BytesMut::with_capacity(HEADER_LEN + attributes);
    out.put_u16(BINDING_SUCCESS);
    out.put_u16(attributes as u16);
    out.put_u32(MAGIC_COOKIE);
    out.put_slice(&request.transaction_id);
    // RFC 5389 §15.2: reserved byte, family, port XOR the cookie's high 16 bits, address XOR the
    // cookie (IPv4) or the cookie followed by the transaction id (IPv6).
    out.put_u16(XOR_MAPPED_ADDRESS);
    out.put_u16(4 + address_len as u16);
    out.put_u8(0);
    out.put_u8(if ip.is_ipv4() { 0x01 } else { 0x02 });
    out.put_u16(source.port() ^ (MAGIC_COOKIE >> 16) as u16);
    let mut key = [0u8; 16];
    key[..4].copy_from_slice(&MAGIC_COOKIE.to_be_bytes());
    key[4..].copy_from_slice(&request.transaction_id);
    match ip {
        IpAddr::V4(v4) => out.extend(v4.octets().iter().zip(&key).map(|(a, k)| a ^ k)),
        IpAddr::V6(v6) => out.extend(v6.octets().iter().zip(&key).map(|(a, k)| a ^ k)),
    }
    if request.fingerprint {
        let crc = crc32(&out) ^ FINGERPRINT_XOR;
        out.put_u16(FINGERPRINT);
        out.put_u16(4);
        out.put_u32(crc);
    }
    out.freeze()
}

/// The answer owed to a STUN datagram from `source`, or why there is none.
pub fn answer(datagram: &[u8], source: SocketAddr) -> Result<Bytes, Refused> {
    parse_binding_request(datagram).map(|request| binding_success(&request, source))
}

/// CRC-32 as FINGERPRINT uses it (RFC 5389 §15.5: ITU V.42, the polynomial of zlib and
/// Ethernet, reflected 0xEDB88320).
fn crc32(bytes: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut table = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut bit = 0;
            while bit < 8 {
                c = if c & 1 != 0 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
                bit += 1;
            }
            table[i] = c;
            i += 1;
        }
        table
    };
    !bytes.iter().fold(!0u32, |c, b| TABLE[((c ^ u32::from(*b)) & 0xFF) as usize] ^ (c >> 8))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    /// RFC 5769 §2.1: a Binding request with SOFTWARE, PRIORITY, ICE-CONTROLLED, USERNAME,
    /// MESSAGE-INTEGRITY and FINGERPRINT.
    const RFC5769_REQUEST: [u8; 108] = [
        0x00, 0x01, 0x00, 0x58, 0x21, 0x12, 0xa4, 0x42, 0xb7, 0xe7, 0xa7, 0x01, 0xbc, 0x34, 0xd6, 0x86, 0xfa, 0x87,
        0xdf, 0xae, 0x80, 0x22, 0x00, 0x10, 0x53, 0x54, 0x55, 0x4e, 0x20, 0x74, 0x65, 0x73, 0x74, 0x20, 0x63, 0x6c,
        0x69, 0x65, 0x6e, 0x74, 0x00, 0x24, 0x00, 0x04, 0x6e, 0x00, 0x01, 0xff, 0x80, 0x29, 0x00, 0x08, 0x93, 0x2f,
        0xf9, 0xb1, 0x51, 0x26, 0x3b, 0x36, 0x00, 0x06, 0x00, 0x09, 0x65, 0x76, 0x74, 0x6a, 0x3a, 0x68, 0x36, 0x76,
        0x59, 0x20, 0x20, 0x20, 0x00, 0x08, 0x00, 0x14, 0x9a, 0xea, 0xa7, 0x0c, 0xbf, 0xd8, 0xcb, 0x56, 0x78, 0x1e,
        0xf2, 0xb5, 0xb2, 0xd3, 0xf2, 0x49, 0xc1, 0xb5, 0x71, 0xa2, 0x80, 0x28, 0x00, 0x04, 0xe5, 0x7a, 0x3b, 0xcf,
    ];
    /// RFC 5769 §2.1's transaction id.
    const RFC5769_ID: [u8; 12] = [0xb7, 0xe7, 0xa7, 0x01, 0xbc, 0x34, 0xd6, 0x86, 0xfa, 0x87, 0xdf, 0xae];
    /// RFC 5769 §2.2's XOR-MAPPED-ADDRESS for 192.0.2.1:32853.
    const RFC5769_XMA_V4: [u8; 12] = [0x00, 0x20, 0x00, 0x08, 0x00, 0x01, 0xa1, 0x47, 0xe1, 0x12, 0xa6, 0x43];
    /// RFC 5769 §2.3's, for [2001:db8:1234:5678:11:2233:4455:6677]:32853.
    const RFC5769_XMA_V6: [u8; 24] = [
        0x00, 0x20, 0x00, 0x14, 0x00, 0x02, 0xa1, 0x47, 0x01, 0x13, 0xa9, 0xfa, 0xa5, 0xd3, 0xf1, 0x79, 0xbc, 0x25,
        0xf4, 0xb5, 0xbe, 0xd2, 0xb9, 0xd9,
    ];

    fn v4() -> SocketAddr {
        (Ipv4Addr::new(192, 0, 2, 1), 32853).into()
    }

    fn v6() -> SocketAddr {
        (Ipv6Addr::new(0x2001, 0xdb8, 0x1234, 0x5678, 0x11, 0x2233, 0x4455, 0x6677), 32853).into()
    }

    /// A bare Binding request (RFC 5626 §8: no attributes needed).
    fn bare(id: [u8; 12]) -> Vec<u8> {
        let mut m = vec![0x00, 0x01, 0x00, 0x00, 0x21, 0x12, 0xa4, 0x42];
        m.extend_from_slice(&id);
        m
    }

    #[test]
    fn rfc5769_sample_request_parses_with_its_fingerprint() {
        assert!(is_stun(&RFC5769_REQUEST));
        let r = parse_binding_request(&RFC5769_REQUEST).unwrap();
        assert_eq!(r, BindingRequest { transaction_id: RFC5769_ID, fingerprint: true });
        let mut bad = RFC5769_REQUEST;
        bad[30] ^= 1; // inside SOFTWARE: the fingerprint no longer matches
        assert_eq!(parse_binding_request(&bad), Err(Refused::BadFingerprint));
    }

    /// RFC 5769 §2.2 and §2.3: the XOR-MAPPED-ADDRESS encodings of the sample responses.
    #[test]
    fn xor_mapped_address_matches_rfc5769_responses() {
        for (source, xma) in [(v4(), &RFC5769_XMA_V4[..]), (v6(), &RFC5769_XMA_V6[..])] {
            let request = BindingRequest { transaction_id: RFC5769_ID, fingerprint: false };
            let r = binding_success(&request, source);
            assert_eq!(&r[..2], &[0x01, 0x01], "Binding success");
            assert_eq!(usize::from(u16::from_be_bytes([r[2], r[3]])), xma.len());
            assert_eq!(&r[4..8], &MAGIC_COOKIE.to_be_bytes());
            assert_eq!(&r[8..20], &RFC5769_ID);
            assert_eq!(&r[20..], xma, "{source}");
            assert_eq!(decode_xor_mapped(&r), source);
        }
    }

    /// What a client does with the answer: find XOR-MAPPED-ADDRESS and undo the XOR.
    fn decode_xor_mapped(r: &[u8]) -> SocketAddr {
        let a = &r[20..];
        assert_eq!(u16::from_be_bytes([a[0], a[1]]), XOR_MAPPED_ADDRESS);
        let port = u16::from_be_bytes([a[6], a[7]]) ^ 0x2112;
        let key: Vec<u8> = MAGIC_COOKIE.to_be_bytes().iter().chain(&r[8..20]).copied().collect();
        let x: Vec<u8> = a[8..].iter().zip(&key).map(|(a, k)| a ^ k).collect();
        match a[5] {
            1 => (Ipv4Addr::new(x[0], x[1], x[2], x[3]), port).into(),
            2 => (Ipv6Addr::from(<[u8; 16]>::try_from(&x[..16]).unwrap()), port).into(),
            f => panic!("family {f}"),
        }
    }

    #[test]
    fn answer_carries_a_valid_fingerprint_when_the_request_did() {
        let r = answer(&RFC5769_REQUEST, v4()).unwrap();
        assert_eq!(r.len(), 20 + 12 + 8);
        assert_eq!(&r[20..32], &RFC5769_XMA_V4);
        // The answer parses by the same rules (as a response: not answerable, not malformed).
        assert_eq!(parse_binding_request(&r), Err(Refused::NotBindingRequest));
        let mut bad = r.to_vec();
        bad[25] ^= 1;
        assert_eq!(parse_binding_request(&bad), Err(Refused::BadFingerprint));
    }

    #[test]
    fn crc32_is_the_standard_one() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    /// No amplification: the answer is at most the request plus the XOR-MAPPED-ADDRESS attribute
    /// (12 bytes for IPv4, 24 for IPv6), whatever the request.
    #[test]
    fn answers_never_exceed_the_request_plus_xor_mapped_address() {
        let mapped_v4: SocketAddr = "[::ffff:192.0.2.1]:32853".parse().unwrap();
        for (request, source, attribute) in [
            (bare([7; 12]), v4(), 12),
            (bare([7; 12]), v6(), 24),
            (bare([7; 12]), mapped_v4, 12),
            (RFC5769_REQUEST.to_vec(), v4(), 12),
            (RFC5769_REQUEST.to_vec(), v6(), 24),
        ] {
            let r = answer(&request, source).unwrap();
            assert!(r.len() <= request.len() + attribute, "{} -> {}", request.len(), r.len());
        }
        let r = answer(&bare([7; 12]), mapped_v4).unwrap();
        assert_eq!((r.len(), decode_xor_mapped(&r)), (32, v4()), "a dual-stack socket's IPv4 peer");
    }

    #[test]
    fn only_binding_requests_are_answered() {
        let with_type = |t: u16| {
            let mut m = bare([1; 12]);
            m[..2].copy_from_slice(&t.to_be_bytes());
            m
        };
        assert!(answer(&with_type(0x0001), v4()).is_ok());
        for t in [0x0011, 0x0101, 0x0111, 0x0003, 0x0002] {
            assert!(is_stun(&with_type(t)));
            assert_eq!(answer(&with_type(t), v4()), Err(Refused::NotBindingRequest), "{t:#06x}");
        }
    }

    /// Whatever arrives: truncated, lying lengths, overrunning attributes - a refusal, never a panic.
    #[test]
    fn malformed_messages_are_refused() {
        let ok = RFC5769_REQUEST;
        for n in 0..ok.len() {
            assert_eq!(parse_binding_request(&ok[..n]), Err(Refused::Malformed), "truncated to {n}");
        }
        let mut longer = ok.to_vec();
        longer.extend_from_slice(&[0; 4]);
        assert_eq!(parse_binding_request(&longer), Err(Refused::Malformed), "bytes past its length");
        for length in [0xFFFF, 0xFFFC, 0x0002, 0x0059] {
            let mut m = ok;
            m[2..4].copy_from_slice(&u16::to_be_bytes(length));
            assert_eq!(parse_binding_request(&m), Err(Refused::Malformed), "length {length:#x}");
        }
        // An attribute whose length runs past the message.
        let mut m = bare([2; 12]);
        m[3] = 8;
        m.extend_from_slice(&[0x80, 0x22, 0xFF, 0xF0, b'a', b'b', b'c', b'd']);
        assert_eq!(parse_binding_request(&m), Err(Refused::Malformed));
        // An attribute after FINGERPRINT.
        let mut m = RFC5769_REQUEST.to_vec();
        m[3] += 8;
        m.extend_from_slice(&[0x80, 0x22, 0x00, 0x04, b'a', b'b', b'c', b'd']);
        assert_eq!(parse_binding_request(&m), Err(Refused::Malformed));
        // Not STUN at all.
        assert!(!is_stun(b"OPTIONS sip:a SIP/2.0\r\n"));
        assert!(!is_stun(b"\r\n\r\n"));
        assert!(!is_stun(b"\x00\x01garbage"));
        let mut m = bare([0; 12]);
        m[0] = 0x40;
        assert!(!is_stun(&m));
        assert_eq!(parse_binding_request(&m), Err(Refused::Malformed));
        // Unknown attributes of any kind are skipped.
        let mut m = bare([3; 12]);
        m[3] = 12;
        m.extend_from_slice(&[0x00, 0x99, 0x00, 0x05, 1, 2, 3, 4, 5, 0, 0, 0]);
        assert!(parse_binding_request(&m).is_ok());
    }

    /// Every prefix and every single-byte change of a valid request: no panic, and an answer
    /// only for a Binding request.
    #[test]
    fn mutations_never_panic() {
        for n in 0..=RFC5769_REQUEST.len() {
            let _ = answer(&RFC5769_REQUEST[..n], v6());
        }
        for i in 0..RFC5769_REQUEST.len() {
            for v in [0x00, 0x01, 0x7F, 0x80, 0xFF] {
                let mut m = RFC5769_REQUEST;
                m[i] = v;
                if let Ok(r) = answer(&m, v4()) {
                    assert_eq!(&m[..2], &[0, 1]);
                    assert_eq!(&r[8..20], &m[8..20]);
                }
            }
        }
    }
}
