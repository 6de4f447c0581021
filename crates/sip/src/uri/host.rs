//! `host` and `hostport` (RFC 3261 §25.1, RFC 5118).

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use super::error::UriError;
use super::escape;
use super::host_run::host_run;

/// A parsed host: `host = hostname / IPv4address / IPv6reference` (RFC 3261 §25.1).
///
/// The derived `PartialEq` is exact (hostname case-sensitive); use
/// [`Host::eq_ignore_case`] for RFC 3261 §19.1.4 comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Host<'a> {
    /// A DNS name exactly as written (may end in '.').
    Name(&'a str),
    /// An `IPv4address`.
    Ipv4(Ipv4Addr),
    /// An `IPv6reference`, brackets stripped.
    Ipv6(Ipv6Addr),
}

impl<'a> Host<'a> {
    /// hostname / IPv4address / IPv6reference ("[...]") as in RFC 3261 §25.1 host rule.
    ///
    /// A bare (unbracketed) IPv6 address is rejected: inside a SIP URI the colons
    /// would be ambiguous with the port separator (RFC 5118 §4.2).
    pub fn parse(s: &'a [u8]) -> Result<Host<'a>, UriError> {
        with_ascii(s, |st| parse_host(st, false))
    }

    /// Also accepts a bare (unbracketed) IPv6 address: used for Via received= (RFC 5118
    /// §4.5 says both `received=[2001:db8::9:255]` and `received=2001:db8::9:255` must
    /// be accepted).
    pub fn parse_lenient(s: &'a [u8]) -> Result<Host<'a>, UriError> {
        with_ascii(s, |st| parse_host(st, true))
    }

    /// RFC 3261 §19.1.4: hostnames compare case-insensitively, IP addresses by value.
    /// A hostname never equals an IP address, even one it resolves to.
    pub fn eq_ignore_case(&self, other: &Host<'_>) -> bool {
        match (self, other) {
            (Host::Name(a), Host::Name(b)) => a.eq_ignore_ascii_case(b),
            (Host::Ipv4(a), Host::Ipv4(b)) => a == b,
            (Host::Ipv6(a), Host::Ipv6(b)) => a == b,
            _ => false,
        }
    }

    /// True for an IPv4 or IPv6 literal.
    pub fn is_ip(&self) -> bool {
        !matches!(self, Host::Name(_))
    }
}

/// Hostnames as written, IPv4 dotted-quad, IPv6 in brackets (the RFC 3261 §25.1
/// `IPv6reference` form, so the output is valid inside a URI or Via sent-by).
impl fmt::Display for Host<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(n) => f.write_str(n),
            Host::Ipv4(a) => write!(f, "{a}"),
            Host::Ipv6(a) => write!(f, "[{a}]"),
        }
    }
}

/// Splits `host[:port]` where host may be an IPv6 reference; used by Via sent-by too.
///
/// `port = 1*DIGIT` must fit in 0..=65535; an empty port ("host:") is an error.
/// RFC 5118 §4.3/§4.4: in `[2001:db8::10:5070]` the 5070 is part of the address;
/// only a ':' after the closing ']' introduces a port.
pub fn parse_host_port(s: &[u8]) -> Result<(Host<'_>, Option<u16>), UriError> {
    with_ascii(s, host_port)
}

/// The host grammar only uses ASCII; anything else cannot be a host, and a non-ASCII
/// octet is reported in preference to any other error.
///
/// `parse` runs on the text first and the octets are only screened if it fails:
/// nothing `parse` accepts contains a non-ASCII character.
fn with_ascii<'a, T>(s: &'a [u8], parse: impl FnOnce(&'a str) -> Result<T, UriError>) -> Result<T, UriError> {
    let parsed = match escape::ascii_text(s) {
        Ok(st) => parse(st),
        Err(valid_up_to) => Err(UriError::new(valid_up_to, "bad host")),
    };
    parsed.map_err(|e| match s.iter().position(|b| !b.is_ascii()) {
        Some(i) => UriError::new(i, "bad host"),
        None => e,
    })
}

/// [`parse_host_port`] on text.
pub(crate) fn host_port(st: &str) -> Result<(Host<'_>, Option<u16>), UriError> {
    match host_port_prefix(st) {
        Some((host, port, len)) if len == st.len() => Ok((host, port)),
        _ => host_port_full(st),
    }
}

/// The common forms of `host [":" port]` at the start of `st`, in one pass: a
/// hostname or an IPv4address, and a port that fits in 16 bits. Returns them and the
/// length `len` they span, or None if `st` does not start with one of them followed
/// by a character that cannot continue it. [`host_port_full`] accepts `st[..len]`
/// with the same result; it handles everything else (IPv6 references, errors).
pub(crate) fn host_port_prefix(st: &str) -> Option<(Host<'_>, Option<u16>, usize)> {
    let bytes = st.as_bytes();
    let (host, end) = host_prefix(st)?;
    if bytes.get(end) != Some(&b':') {
        return Some((host, None, end));
    }
    let mut port: u32 = 0;
    let mut i = end + 1;
    while let Some(&b) = bytes.get(i).filter(|b| b.is_ascii_digit()) {
        port = port * 10 + u32::from(b - b'0');
        if port > u32::from(u16::MAX) {
            return None;
        }
        i += 1;
    }
    if i == end + 1 || bytes.get(i) == Some(&b':') {
        return None;
    }
    Some((host, Some(u16::try_from(port).ok()?), i))
}

/// The hostname or IPv4address at the start of `st` (see [`host_port_prefix`]).
#[inline]
fn host_prefix(st: &str) -> Option<(Host<'_>, usize)> {
    let bytes = st.as_bytes();
    if bytes.first().is_some_and(u8::is_ascii_digit) {
        if let Some((addr, len)) = ipv4_prefix(bytes) {
            if bytes.get(len).is_none_or(|&b| escape::class(b) & escape::HOST == 0) {
                return Some((Host::Ipv4(addr), len));
            }
        }
    }
    let run = host_run(bytes);
    // Digits and dots only (and not an IPv4address, see above): an error, because a
    // hostname's toplabel must start with ALPHA (RFC 3261 §25.1). E.g. "192.0.2.256".
    if run.len == 0 || run.numeric || run.empty_label {
        return None;
    }
    Some((Host::Name(st.get(..run.len)?), run.len))
}

/// The `IPv4address` at the start of `s` and its length.
///
/// `IPv4address = 1*3DIGIT "." 1*3DIGIT "." 1*3DIGIT "." 1*3DIGIT` (RFC 3261 §25.1),
/// each octet decimal 0..=255. Written by hand because `Ipv4Addr::from_str` rejects
/// leading zeros, which the SIP grammar permits. Each octet is read digit by digit with the
/// value built on the way (every proxied message carries several IPv4 hosts: Via sent-by,
/// received=, Contact, Request-URI). A digit after a fourth octet of three digits ends the
/// prefix (the caller then sees a hostname character follow it).
#[inline(always)]
pub(crate) fn ipv4_prefix(s: &[u8]) -> Option<(Ipv4Addr, usize)> {
    match s.first_chunk::<16>() {
        // Every place the read looks at is below 15 (four octets of at most three digits and
        // three dots), so inside the window: `i & 15` is `i`, and the mask (which tells the
        // compiler that the place is inside the window: no bounds test) is one instruction
        // where a bounds test was three, at each of about 16 places per address (callgrind:
        // Via sent-by and Request-URI hosts, nine addresses per proxied call).
        Some(window) => ipv4_at(|i| window.get(i & 15).copied()),
        None => ipv4_at(|i| s.get(i).copied()),
    }
}

/// [`ipv4_prefix`] over the octet at each place (`None` past the end).
#[inline(always)]
fn ipv4_at(at: impl Fn(usize) -> Option<u8>) -> Option<(Ipv4Addr, usize)> {
    let digit = |i: usize| match at(i) {
        Some(b) if b.is_ascii_digit() => Some(u32::from(b - b'0')),
        _ => None,
    };
    let mut addr: u32 = 0;
    let mut i = 0;
    for n in 0..4 {
        if n > 0 {
            if at(i) != Some(b'.') {
                return None;
            }
            i += 1;
        }
        let mut octet = digit(i)?;
        i += 1;
        if let Some(d) = digit(i) {
            octet = octet * 10 + d;
            i += 1;
            if let Some(d) = digit(i) {
                octet = octet * 10 + d;
                i += 1;
            }
        }
        if octet > 255 {
            return None;
        }
        addr = (addr << 8) | octet;
    }
    debug_assert!(i <= 15);
    Some((Ipv4Addr::from(addr), i))
}

/// [`host_port`], the whole grammar (IPv6 references, and the reasons for rejecting
/// anything else).
fn host_port_full(st: &str) -> Result<(Host<'_>, Option<u16>), UriError> {
    let (host, port) = if st.starts_with('[') {
        let close = st.find(']').ok_or(UriError::new(st.len(), "unterminated IPv6 reference"))?;
        let (host, after) = split_at(st, close + 1)?;
        if after.is_empty() {
            (host, None)
        } else if let Some(p) = after.strip_prefix(':') {
            (host, Some(p))
        } else {
            return Err(UriError::new(close + 1, "bad host"));
        }
    } else {
        match st.split_once(':') {
            Some((host, p)) => {
                if let Some(i) = p.find(':') {
                    // RFC 5118 §4.2: "sip:2001:db8::10" is not a valid SIP URI.
                    return Err(UriError::new(host.len() + 1 + i, "IPv6 address must be in brackets"));
                }
                (host, Some(p))
            }
            None => (st, None),
        }
    };
    let host = parse_host(host, false)?;
    let port = match port {
        Some(p) => Some(parse_port(p, st.len() - p.len())?),
        None => None,
    };
    Ok((host, port))
}

/// `port = 1*DIGIT`, value 0..=65535. Overflow-safe for arbitrarily long digit strings.
fn parse_port(p: &str, base: usize) -> Result<u16, UriError> {
    if p.is_empty() {
        return Err(UriError::new(base, "bad port"));
    }
    let mut v: u32 = 0;
    for (i, b) in p.bytes().enumerate() {
        if !b.is_ascii_digit() {
            return Err(UriError::new(base + i, "bad port"));
        }
        v = v * 10 + u32::from(b - b'0');
        if v > u32::from(u16::MAX) {
            return Err(UriError::new(base, "bad port"));
        }
    }
    u16::try_from(v).map_err(|_| UriError::new(base, "bad port"))
}

fn split_at(s: &str, mid: usize) -> Result<(&str, &str), UriError> {
    s.split_at_checked(mid).ok_or(UriError::new(mid.min(s.len()), "bad host"))
}

fn parse_host(s: &str, lenient: bool) -> Result<Host<'_>, UriError> {
    if let Some((host, len)) = host_prefix(s) {
        if len == s.len() {
            return Ok(host);
        }
    }
    // The whole grammar.
    if s.is_empty() {
        return Err(UriError::new(0, "empty host"));
    }
    if let Some(inner) = s.strip_prefix('[') {
        // IPv6reference = "[" IPv6address "]"
        let inner = inner.strip_suffix(']').ok_or(UriError::new(s.len(), "unterminated IPv6 reference"))?;
        return parse_ipv6(inner).map(Host::Ipv6).ok_or(UriError::new(1, "bad IPv6 address"));
    }
    if let Some(i) = s.find(':') {
        if lenient {
            return parse_ipv6(s).map(Host::Ipv6).ok_or(UriError::new(0, "bad IPv6 address"));
        }
        return Err(UriError::new(i, "IPv6 address must be in brackets"));
    }
    if s.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        // Digits and dots only: it can only be an IPv4address, because a hostname's
        // toplabel must start with ALPHA (RFC 3261 §25.1). "192.0.2.256" is an error,
        // not a hostname.
        return match ipv4_prefix(s.as_bytes()) {
            Some((addr, len)) if len == s.len() => Ok(Host::Ipv4(addr)),
            _ => Err(UriError::new(0, "bad host")),
        };
    }
    check_hostname(s)?;
    Ok(Host::Name(s))
}

/// `hostname = *( domainlabel "." ) toplabel [ "." ]` (RFC 3261 §25.1), applied
/// pragmatically: labels are 1*(alphanum / "-" / "_") ('_' occurs in real networks,
/// e.g. SRV-style names), no empty labels except for a single trailing dot. The
/// "toplabel starts with ALPHA" rule is not enforced beyond rejecting all-numeric hosts.
fn check_hostname(s: &str) -> Result<(), UriError> {
    let body = s.strip_suffix('.').unwrap_or(s);
    let mut pos = 0;
    for label in body.split('.') {
        if label.is_empty() {
            return Err(UriError::new(pos, "bad host"));
        }
        if let Some(i) = label.bytes().position(|b| escape::class(b) & escape::HOST == 0) {
            return Err(UriError::new(pos + i, "bad host"));
        }
        pos += label.len() + 1;
    }
    Ok(())
}

/// Longest IPv6 text we will look at (45 chars is the real maximum; a little slack
/// for the tolerated 3-colon form).
const MAX_IPV6_TEXT: usize = 64;

/// Parses the inside of an IPv6reference.
///
/// RFC 5118 §4.10: RFC 3261's ABNF (`hexpart [":" IPv4address]` where hexpart may
/// end in "::") wrongly generates "2001:db8:::192.0.2.1". Implementations should
/// accept it, so ":::" immediately followed by a dotted IPv4 tail is read as "::".
fn parse_ipv6(s: &str) -> Option<Ipv6Addr> {
    if s.len() > MAX_IPV6_TEXT || s.contains('%') {
        // No zone identifiers in SIP (RFC 3261 §25.1 IPv6address has none).
        return None;
    }
    if let Ok(a) = s.parse::<Ipv6Addr>() {
        return Some(a);
    }
    let (head, tail) = s.split_once(":::")?;
    if tail.contains(':') || !tail.contains('.') {
        return None;
    }
    // Rebuild "head::tail" on the stack: no allocation on the parse path.
    let mut buf = [0u8; MAX_IPV6_TEXT];
    let mut w: &mut [u8] = &mut buf;
    for part in [head.as_bytes(), b"::", tail.as_bytes()] {
        std::io::Write::write_all(&mut w, part).ok()?;
    }
    let used = MAX_IPV6_TEXT - w.len();
    let fixed = std::str::from_utf8(buf.get(..used)?).ok()?;
    fixed.parse::<Ipv6Addr>().ok()
}
