//! The Request-URI of nearly every proxied request, `sip:[user@]IPv4[:port][;params]`, read in
//! one pass as places in its text, for the receipt check's memo (module `checked`).
//!
//! The general parse ([`super::Uri::parse`]) reads such a URI in about 450 instructions: the
//! ASCII screen, the search for '@', the host and port grammar, the parameters, then the
//! [`SipUri`](super::SipUri) it builds and the memo finds again as ranges of the message
//! (callgrind, three Request-URIs per proxied call). Anything else (another scheme or case, a
//! password, an escape, a host name or IPv6 reference, headers) is `None` here and takes the
//! general parse, which gives the same parts for what this accepts (test
//! `plain_uris_read_as_the_general_parse`). [`super::Uri::parse`] takes this read first too,
//! for every URI a proxy reads (Contact, Route, Record-Route).

use super::error::MAX_URI_LEN;
use super::escape::{self, USER};
use super::host::{ipv4_prefix, Host};
use super::plain_tail;
use super::sip::{Scheme, SipUri};
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
        // No other part of a plain URI holds an '@' (neither host, port nor `paramchar`), and
        // a plain URI has no other: an address right after the scheme, followed by its port,
        // parameters or the end, has no user (an '@' further on makes the read fail below).
        // Else a user of unescaped `user` characters and its '@'; a run that stops anywhere
        // else means no userinfo either.
        let (user, (addr, len), host_at) = match ipv4_prefix(s.get(4..)?) {
            Some(host) if matches!(s.get(4 + host.1), None | Some(b':' | b';')) => (None, host, 4),
            _ => {
                let user_end = escape::run(s, 4, USER);
                let (user, host_at) = match s.get(user_end) {
                    Some(b'@') if user_end > 4 => (Some(4..user_end), user_end + 1),
                    _ => (None, 4),
                };
                (user, ipv4_prefix(s.get(host_at..)?)?, host_at)
            }
        };
        let mut at = host_at + len;
        // As `host_port_prefix` reads a port: digits while the value fits in 16 bits, at
        // least one, and no second ':' after them.
        let port = match s.get(at) {
            Some(b':') => {
                let (port, end) = plain_tail::port_at(s, at + 1)?;
                at = end;
                Some(port)
            }
            _ => None,
        };
        // `;name[=value]` parameters of unescaped `paramchar`s up to the end, names and
        // values not empty (as `check_tail` requires).
        if !plain_tail::params_at(s, at) {
            return None;
        }
        Some(PlainSip { user, addr, port, params: at..s.len() })
    }

    /// The [`SipUri`] of `s`, the text this was read from (`None` if it is not; the classes
    /// matched are ASCII, so it is text).
    pub(crate) fn uri(self, s: &[u8]) -> Option<SipUri<'_>> {
        let text = escape::ascii_text(s).ok()?;
        let user = match self.user {
            Some(r) => Some(text.get(r)?),
            None => None,
        };
        let params = text.get(self.params)?;
        Some(SipUri::from_parts(Scheme::Sip, user, None, Host::Ipv4(self.addr), self.port, text, params, ""))
    }
}
