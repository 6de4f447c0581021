//! Unit tests: hosts, host:port splitting, RFC 5118 IPv6 torture cases.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing, clippy::string_slice)]

use std::net::{Ipv4Addr, Ipv6Addr};

use super::*;

fn sip(s: &str) -> SipUri<'_> {
    match Uri::parse(s.as_bytes()) {
        Ok(Uri::Sip(u)) => u,
        other => panic!("{s:?} did not parse as sip: {other:?}"),
    }
}

fn err(s: &str) -> UriError {
    match Uri::parse(s.as_bytes()) {
        Err(e) => e,
        Ok(u) => panic!("{s:?} should be rejected, got {u:?}"),
    }
}

fn v6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

#[test]
fn hosts() {
    assert_eq!(Host::parse(b"example.com").unwrap(), Host::Name("example.com"));
    assert_eq!(Host::parse(b"example.com.").unwrap(), Host::Name("example.com."));
    assert_eq!(Host::parse(b"_sip._udp.x-y.com").unwrap(), Host::Name("_sip._udp.x-y.com"));
    assert_eq!(Host::parse(b"localhost").unwrap(), Host::Name("localhost"));
    assert_eq!(Host::parse(b"192.0.2.1").unwrap(), Host::Ipv4(Ipv4Addr::new(192, 0, 2, 1)));
    assert_eq!(Host::parse(b"010.0.0.1").unwrap(), Host::Ipv4(Ipv4Addr::new(10, 0, 0, 1)));
    assert_eq!(Host::parse(b"192.0.2.256").unwrap_err().reason, "bad host");
    assert_eq!(Host::parse(b"1.2.3").unwrap_err().reason, "bad host");
    assert_eq!(Host::parse(b"1.2.3.4.5").unwrap_err().reason, "bad host");
    assert_eq!(Host::parse(b"1234.2.3.4").unwrap_err().reason, "bad host");
    assert_eq!(Host::parse(b"123").unwrap_err().reason, "bad host");
    assert_eq!(Host::parse(b"").unwrap_err().reason, "empty host");
    assert_eq!(Host::parse(b".").unwrap_err().reason, "bad host");
    assert_eq!(Host::parse(b"a..b").unwrap_err().offset, 2);
    assert!(Host::parse(b"a.b..").is_err());
    assert!(Host::parse("h\u{e9}.com".as_bytes()).is_err());
    assert_eq!(Host::parse(b"[::1]").unwrap(), Host::Ipv6(Ipv6Addr::LOCALHOST));
    assert!(Host::parse(b"[::1").is_err());
    assert!(Host::parse(b"[::1]x").is_err());
    assert!(Host::parse(b"[]").is_err());
    assert!(Host::parse(b"[fe80::1%eth0]").is_err());
    assert!(Host::parse(b"[192.0.2.1]").is_err());
    assert_eq!(Host::parse(b"::1").unwrap_err().reason, "IPv6 address must be in brackets");
    assert!(Host::parse(b"Example.COM").unwrap().eq_ignore_case(&Host::Name("example.com")));
    assert!(!Host::Name("a").eq_ignore_case(&Host::Name("b")));
    assert!(!Host::Name("192.0.2.4").eq_ignore_case(&Host::Ipv4(Ipv4Addr::new(192, 0, 2, 4))));
    let a = Host::parse(b"[2001:DB8::1]").unwrap();
    assert!(a.eq_ignore_case(&Host::parse(b"[2001:db8:0:0::1]").unwrap()));
    assert!(a.is_ip() && !Host::Name("x").is_ip());
}

#[test]
fn host_display() {
    assert_eq!(Host::Name("Example.com").to_string(), "Example.com");
    assert_eq!(Host::parse(b"192.0.2.1").unwrap().to_string(), "192.0.2.1");
    assert_eq!(Host::parse(b"[2001:DB8:0::10]").unwrap().to_string(), "[2001:db8::10]");
}

#[test]
fn host_parse_lenient_rfc5118_4_5() {
    let bracketed = Host::parse_lenient(b"[2001:db8::9:255]").unwrap();
    let bare = Host::parse_lenient(b"2001:db8::9:255").unwrap();
    assert_eq!(bracketed, Host::Ipv6(v6("2001:db8::9:255")));
    assert_eq!(bare, bracketed);
    assert_eq!(Host::parse_lenient(b"example.com").unwrap(), Host::Name("example.com"));
    assert!(Host::parse_lenient(b"2001:db8::9::255").is_err());
    assert!(Host::parse(b"2001:db8::9:255").is_err());
}

#[test]
fn host_port_split() {
    let (h, p) = parse_host_port(b"[2001:db8::10]:5070").unwrap();
    assert_eq!((h, p), (Host::Ipv6(v6("2001:db8::10")), Some(5070)));
    let (h, p) = parse_host_port(b"example.com:5061").unwrap();
    assert_eq!((h, p), (Host::Name("example.com"), Some(5061)));
    assert_eq!(parse_host_port(b"192.0.2.1").unwrap().1, None);
    assert_eq!(parse_host_port(b"h:").unwrap_err().reason, "bad port");
    assert_eq!(parse_host_port(b"h:70000").unwrap_err().reason, "bad port");
    assert_eq!(parse_host_port(b"[::1]5060").unwrap_err().reason, "bad host");
    assert_eq!(parse_host_port(b"[::1:5060").unwrap_err().reason, "unterminated IPv6 reference");
    assert_eq!(parse_host_port(b":5060").unwrap_err().reason, "empty host");
}

#[test]
fn rfc5118_ipv6() {
    // §4.1
    assert_eq!(sip("sip:[2001:db8::10]").host, Host::Ipv6(v6("2001:db8::10")));
    // §4.2 ipv6-bad
    assert!(Uri::parse(b"sip:[2001:db8::10").is_err());
    assert_eq!(err("sip:2001:db8::10").reason, "IPv6 address must be in brackets");
    assert!(Uri::parse(b"sip:user@2001:db8::10").is_err());
    assert!(Uri::parse(b"sip:user@[2001:db8::10").is_err());
    // §4.3: 5070 is the last group of the address, there is no port.
    let u = sip("sip:[2001:db8::10:5070]");
    assert_eq!((u.host, u.port), (Host::Ipv6(v6("2001:db8::10:5070")), None));
    // §4.4
    let u = sip("sip:user@[2001:db8::10]:5070;lr");
    assert_eq!((u.host, u.port), (Host::Ipv6(v6("2001:db8::10")), Some(5070)));
    assert!(u.lr());
    // §4.9 IPv4-mapped
    let u = sip("sip:[::ffff:192.0.2.10]");
    assert_eq!(u.host, Host::Ipv6(Ipv4Addr::new(192, 0, 2, 10).to_ipv6_mapped()));
    // §4.10: both the correct and the RFC 3261 ABNF-bug 3-colon forms.
    let good = sip("sip:[2001:db8::192.0.2.1]");
    let bug = sip("sip:[2001:db8:::192.0.2.1]");
    assert_eq!(good.host, Host::Ipv6(v6("2001:db8::192.0.2.1")));
    assert_eq!(bug.host, good.host);
    assert!(bug.equivalent(&good));
    assert_eq!(sip("sip:[:::192.0.2.1]").host, Host::Ipv6(v6("::192.0.2.1")));
    assert!(Uri::parse(b"sip:[2001:db8:::1]").is_err());
    assert!(Uri::parse(b"sip:[2001:::db8:192.0.2.1]").is_err());
    // Brackets in parameters (param-unreserved) are fine.
    assert_eq!(sip("sip:h;maddr=[::1]").maddr(), Some("[::1]"));
}
