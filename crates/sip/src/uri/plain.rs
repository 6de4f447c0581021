//! The Request-URI of nearly every proxied request, `sip:[user@]IPv4[:port][;params]`, read in
//! one pass as places in its text, for the receipt check's memo (module `checked`).
//!
//! The general parse ([`super::Uri::parse`]) reads such a URI in about 450 instructions: the
//! ASCII screen, the search for '@', the host and port grammar, the parameters, then the
//! [`SipUri`](super::SipUri) it builds and the memo finds again as ranges of the message
//! (callgrind, three Request-URIs per proxied call). Anything else (another scheme or case, a
//! password, an escape, a host name or IPv6 reference, headers) is `None` here and takes the
//! general parse, which gives the same parts for what this accepts (test
//! `plain_uris_read_as_the_general_parse`).

use super::error::MAX_URI_LEN;
use super::escape::{self, PARAM, USER};
use super::host::ipv4_prefix;
use std::net::Ipv4Addr;
use std::ops::Range;

/// A `sip:` URI of the plain shape, as places in its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PlainSip {
    pub user: Option<Range<usize>>,
    pub addr: Ipv4Addr,
    pub port: Option<u16>,
    /// The parameters, from their first ';' to the end (empty at the end when none).
    pub params: Range<usize>,
}

impl PlainSip {
    /// Reads `s`, a whole URI; `None` when it is not of the plain shape.
    pub(crate) fn read(s: &[u8]) -> Option<PlainSip> {
        if s.len() > MAX_URI_LEN || s.get(..4)? != b"sip:" {
            return None;
        }
        // A user of unescaped `user` characters and its '@'. No other part of a plain URI
        // holds an '@' (neither host, port nor `paramchar`), so a run that stops anywhere else
        // means no userinfo: the host starts right after the scheme, and an '@' further on
        // makes the read fail below.
        let user_end = escape::run(s, 4, USER);
        let (user, host_at) = match s.get(user_end) {
            Some(b'@') if user_end > 4 => (Some(4..user_end), user_end + 1),
            _ => (None, 4),
        };
        let (addr, len) = ipv4_prefix(s.get(host_at..)?)?;
        let mut at = host_at + len;
        // As `host_port_prefix` reads a port: digits while the value fits in 16 bits, at
        // least one, and no second ':' after them.
        let port = match s.get(at) {
            Some(b':') => {
                let from = at + 1;
                let mut port = 0u32;
                at = from;
                while let Some(&d) = s.get(at).filter(|d| d.is_ascii_digit()) {
                    port = port * 10 + u32::from(d - b'0');
                    if port > u32::from(u16::MAX) {
                        return None;
                    }
                    at += 1;
                }
                if at == from {
                    return None;
                }
                Some(u16::try_from(port).ok()?)
            }
            _ => None,
        };
        // `;name[=value]` parameters of unescaped `paramchar`s up to the end, names and
        // values not empty (as `check_tail` requires).
        let params = at..s.len();
        while at < s.len() {
            if s.get(at) != Some(&b';') {
                return None;
            }
            let name_end = escape::run(s, at + 1, PARAM);
            if name_end == at + 1 {
                return None;
            }
            at = match s.get(name_end) {
                Some(b'=') => {
                    let value_end = escape::run(s, name_end + 1, PARAM);
                    if value_end == name_end + 1 {
                        return None;
                    }
                    value_end
                }
                _ => name_end,
            };
        }
        Some(PlainSip { user, addr, port, params })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uri::any::Uri;
    use crate::uri::host::Host;
    use crate::uri::sip::Scheme;

    /// Wherever the plain read accepts a URI, the general parse gives the same parts; and it
    /// accepts the usual Request-URIs.
    #[test]
    fn plain_uris_read_as_the_general_parse() {
        use proptest::prelude::*;
        let user = prop_oneof![
            Just(""),
            Just("bob@"),
            Just("sipp@"),
            Just("+4912345@"),
            Just("a;b=c@"),
            Just("a?b@"),
            Just("b%41b@"),
            Just("bob:pw@"),
            Just("@"),
            Just("a@b@"),
            Just("é@"),
        ];
        let host = prop_oneof![
            Just("127.0.0.1"),
            Just("192.0.2.255"),
            Just("1.2.3.256"),
            Just("1.2.3"),
            Just("1.2.3.4567"),
            Just("01.002.3.4"),
            Just("1.2.3.4x"),
            Just("1.2.3.4-"),
            Just("host.example.com"),
            Just("[2001:db8::1]"),
        ];
        let port = prop_oneof![
            Just(""),
            Just(":5060"),
            Just(":0"),
            Just(":65535"),
            Just(":65536"),
            Just(":0005060"),
            Just(":"),
            Just(":5060:1"),
            Just(":50a"),
        ];
        let param = prop_oneof![
            Just(";transport=UDP"),
            Just(";lr"),
            Just(";r2=on"),
            Just(";x=[2001:db8::1]"),
            Just(";"),
            Just(";=a"),
            Just(";a="),
            Just(";a=b=c"),
            Just(";%6C%72"),
            Just("?h=v"),
            Just(" "),
            Just(";a@b"),
            Just(";a=\u{e9}"),
        ];
        let scheme = prop_oneof![Just("sip:"), Just("SIP:"), Just("sips:"), Just("tel:")];
        proptest::proptest!(|(sc in scheme, u in user, h in host, p in port, ps in proptest::collection::vec(param, 0..4))| {
            let text = format!("{sc}{u}{h}{p}{}", ps.concat());
            let s = text.as_bytes();
            if let Some(plain) = PlainSip::read(s) {
                let Ok(Uri::Sip(general)) = Uri::parse(s) else {
                    return Err(TestCaseError::fail(format!("the general parse refuses {text}")));
                };
                let (raw, params, headers) = general.raw_parts();
                prop_assert_eq!(general.scheme, Scheme::Sip, "{}", text);
                prop_assert_eq!(plain.user.and_then(|r| text.get(r)), general.user, "{}", text);
                prop_assert_eq!(general.password, None, "{}", text);
                prop_assert_eq!(Host::Ipv4(plain.addr), general.host, "{}", text);
                prop_assert_eq!(plain.port, general.port, "{}", text);
                prop_assert_eq!(raw, text.as_str());
                prop_assert_eq!(text.get(plain.params), Some(params), "{}", text);
                prop_assert_eq!(headers, "", "{}", text);
            }
        });
        for usual in ["sip:bob@127.0.0.1:5060", "sip:127.0.0.1:19102;transport=UDP", "sip:192.0.2.1;lr;r2=on"] {
            assert!(PlainSip::read(usual.as_bytes()).is_some(), "{usual}");
        }
    }
}
