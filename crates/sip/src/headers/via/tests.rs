//! Tests of the Via parse (`super`): the general parse and the plain one against it.

use super::*;
use std::net::Ipv6Addr;

#[test]
fn full_via() {
    let v = Via::parse(b"SIP/2.0/UDP pc33.atlanta.com:5066;branch=z9hG4bK776asdhds;rport;received=192.0.2.1").unwrap();
    assert_eq!(v.transport, "UDP");
    assert_eq!(v.host, Host::Name("pc33.atlanta.com"));
    assert_eq!(v.port, Some(5066));
    assert_eq!(v.branch(), Some("z9hG4bK776asdhds"));
    assert!(v.has_rfc3261_branch());
    assert_eq!(v.rport(), Some(None));
    assert_eq!(v.received(), Some("192.0.2.1"));
}

#[test]
fn a_branch_that_is_not_utf8_is_refused_not_replaced() {
    // Found by the stream_framer fuzz target: the branch became "" (not a slice of the
    // message), and the message's memo took its range from a foreign pointer.
    let err = Via::parse(b"SIP/2.0/UDP h:5060;branch=\"z9hG4bK\x82\x00x\"").unwrap_err();
    assert_eq!(err.what, "branch is not UTF-8");
    let v = Via::parse("SIP/2.0/UDP h;branch=\"z9hG4bK-é\"".as_bytes()).unwrap();
    assert_eq!(v.branch(), Some("\"z9hG4bK-é\""));
}

#[test]
fn branch_is_the_first_branch_parameter() {
    let v = Via::parse(b"SIP/2.0/UDP h;BRANCH=z9hG4bKa;branch=z9hG4bKb").unwrap();
    assert_eq!(v.branch(), Some("z9hG4bKa"));
    let flag = Via::parse(b"SIP/2.0/UDP h;branch;branch=z9hG4bKb").unwrap();
    assert_eq!(flag.branch(), None);
    assert_eq!(flag.branch(), flag.params.get("branch").flatten());
    let quoted = Via::parse(b"SIP/2.0/UDP h;rport;branch = \"z9\"").unwrap();
    assert_eq!(quoted.branch(), Some("\"z9\""));
    assert_eq!(Via::parse(b"SIP/2.0/UDP h;rport").unwrap().branch(), None);
}

#[test]
fn the_sip_2_0_fast_path_reads_what_the_general_path_reads() {
    // A leading SP takes the general path (token and SWS scans) for the same value.
    use proptest::prelude::*;
    let transport = prop_oneof![
        Just("UDP"),
        Just("TCP"),
        Just("TLS"),
        Just("SCTP"),
        Just("ws"),
        Just("UdP"),
        Just("U1P"),
        Just("UD"),
        Just(""),
        Just("UD P")
    ];
    let gap = prop_oneof![Just(""), Just(" "), Just("\t"), Just("  "), Just("\r\n ")];
    let sent_by = prop_oneof![Just("h:5060;branch=z9hG4bKx"), Just("192.0.2.1"), Just(";x"), Just("")];
    proptest::proptest!(|(t in transport, g1 in gap.clone(), g2 in gap, b in sent_by)| {
        let fast = format!("SIP/2.0/{g1}{t}{g2}{b}");
        let general = format!(" {fast}");
        match (Via::parse(fast.as_bytes()), Via::parse(general.as_bytes())) {
            (Ok(f), Ok(g)) => {
                prop_assert_eq!((f.protocol_name, f.protocol_version, f.transport), (g.protocol_name, g.protocol_version, g.transport));
                prop_assert_eq!((f.host, f.port, f.branch()), (g.host, g.port, g.branch()));
            }
            (Err(f), Err(g)) => prop_assert_eq!((f.at + 1, f.what), (g.at, g.what)),
            (f, g) => prop_assert!(false, "{fast:?}: {f:?} vs {g:?}"),
        }
    });
}

/// The parameters picked out while parsing read as the lookups in the list read them.
#[test]
fn picked_parameters_read_as_lookups() {
    let vias: [&[u8]; 7] = [
        b"SIP/2.0/UDP h;branch=z9hG4bKa;rport=5060;received=192.0.2.1;maddr=239.1.1.1",
        b"SIP/2.0/UDP h;RPORT;Received = \"[2001:db8::1]\" ;rport=7;MADDR=x.example",
        b"SIP/2.0/UDP h;rport=99999;received;maddr=a;maddr=b;received=c",
        b"SIP/2.0/UDP h;rportx=1;receive=2;madd=3;branch",
        b"SIP/2.0/UDP h ;\r\n rport ; received=2001:db8::9",
        b"SIP/2.0/UDP h;rport=\"\xc3\xa9\";maddr=\"\xff\"",
        b"SIP/2.0/UDP h",
    ];
    for raw in vias {
        let v = Via::parse(raw).unwrap();
        let p = v.params;
        let text = String::from_utf8_lossy(raw);
        assert_eq!(v.received(), p.get("received").flatten(), "{text}");
        assert_eq!(v.maddr(), p.get("maddr").flatten(), "{text}");
        assert_eq!(v.rport(), p.get("rport").map(|v| v.and_then(|v| v.parse().ok())), "{text}");
    }
}

/// What the one-pass reading of the usual shape accepts, the general parse reads alike; and
/// it accepts the usual shapes.
#[test]
fn plain_vias_read_as_the_general_parse() {
    use proptest::prelude::*;
    let sent_by = prop_oneof![
        Just("127.0.0.1:5060"),
        Just("192.0.2.1"),
        Just("10.0.0.255:65535"),
        Just("10.0.0.1:65536"),
        Just("10.0.0.1:005060"),
        Just("10.0.0.1:"),
        Just("1.2.3.4x"),
        Just("1.2.3.4:50a60"),
        Just("1.2.3.4:123456"),
        Just("1.2.3.4567"),
        Just("01.02.03.004:00001"),
        Just("1.2.3.4:5060:5060"),
        Just("1.2.3.256"),
        Just("1.2.3"),
        Just("host.example.com:5060"),
        Just("[2001:db8::1]:5060"),
    ];
    let param = prop_oneof![
        Just(";branch=z9hG4bK-29734-1-0"),
        Just(";rport"),
        Just(";rport=5060"),
        Just(";received=192.0.2.1"),
        Just(";maddr=239.1.1.1"),
        Just(";RPORT=1"),
        Just(";branch"),
        Just(";BRANCH=z9hG4bKa"),
        Just(";Branch=1"),
        Just(";branch="),
        Just(";branchx=1"),
        Just(";branc=1"),
        Just(";x=[2001:db8::1]"),
        Just(";x=\"q\""),
        Just(";"),
        Just("; rport"),
        Just(";rport ="),
        Just(";a=é"),
        Just(" ;ttl=1"),
        Just(","),
        Just("\r\n ;lr"),
    ];
    let start = prop_oneof![Just("SIP/2.0/UDP "), Just("SIP/2.0/TCP  "), Just("SIP/2.0/udp "), Just("SIP/2.0/WS ")];
    proptest::proptest!(|(st in start, sb in sent_by, ps in proptest::collection::vec(param, 0..4))| {
        let text = format!("{st}{sb}{}", ps.concat());
        let s = text.as_bytes();
        if let Some(plain) = Via::parse_plain(s) {
            let general = Via::parse_general(s);
            // The same parameter text, at the same place (the memo keeps it as a range).
            let raw = |v: &Via<'_>| (v.params.raw().as_ptr(), v.params.raw().len());
            prop_assert_eq!(Some(raw(&plain)), general.as_ref().ok().map(raw), "{}", text);
            prop_assert_eq!(Ok(plain), general, "{}", text);
        }
    });
    for usual in [
        &b"SIP/2.0/UDP 127.0.0.1:19101;branch=z9hG4bK-29734-1-0"[..],
        b"SIP/2.0/UDP 127.0.0.1:5060;branch=z9hG4bKf3a9c0d1e2b34a5c.0;rport",
        b"SIP/2.0/TCP 192.0.2.1;branch=z9hG4bK1;rport=5060;received=192.0.2.2",
        b"SIP/2.0/UDP 127.0.0.1:5060;branch=z9hG4bKa;RPORT",
        b"SIP/2.0/UDP 127.0.0.1:5060;branch=z9hG4bKa;rportx",
        b"SIP/2.0/UDP 127.0.0.1:5060;branch=z9hG4bKa;rport;x",
        b"SIP/2.0/UDP 127.0.0.1:5060;branch=z9hG4bKa;rport;rport=5",
    ] {
        assert_eq!(Via::parse_plain(usual), Some(Via::parse_general(usual).unwrap()));
    }
}

/// The plain value at the start of a Via line of several values reads as that value alone:
/// where `read_prefix` accepts, it stops at the end or at a ',', and `read` of the text before
/// gives the same Via (the header scan keeps it as the top Via: module `message::via_split`).
#[test]
fn a_plain_prefix_reads_as_the_value_alone() {
    use proptest::prelude::*;
    let sent_by = prop_oneof![
        Just("127.0.0.1:5060"),
        Just("192.0.2.1"),
        Just("10.0.0.1:65536"),
        Just("10.0.0.1:"),
        Just("1.2.3"),
        Just("1.2.3.4567"),
        Just("host.example.com"),
        Just(""),
    ];
    let param = prop_oneof![
        Just(";branch=z9hG4bK-29734-1-0"),
        Just(";branch=z9hG4bKf3a9c0d1e2b34a5c0123456789abcdef.0123456789abcdef"),
        Just(";rport"),
        Just(";received=192.0.2.1"),
        Just(";BRANCH=z9hG4bKa"),
        Just(";branch="),
        Just(";branc"),
        Just(";x=[2001:db8::1]"),
        Just(";x=\"q\""),
        Just(";"),
        Just(" "),
    ];
    let after = prop_oneof![
        Just(""),
        Just(","),
        Just(", SIP/2.0/UDP 192.0.2.2;branch=z9hG4bKb"),
        Just(",SIP/2.0/UDP h"),
        Just(" , SIP/2.0/UDP h"),
        Just(",,"),
        Just(",\r\n SIP/2.0/UDP h"),
        Just("<sip:x>"),
        Just("\"a,b\""),
        Just("x"),
    ];
    let start = prop_oneof![Just("SIP/2.0/UDP "), Just("SIP/2.0/UDP  "), Just("SIP/2.0/udp "), Just("SIP/2.0/UDP")];
    proptest::proptest!(|(st in start, sb in sent_by, ps in proptest::collection::vec(param, 0..3), a in after)| {
        let text = format!("{st}{sb}{}{a}", ps.concat());
        let s = text.as_bytes();
        let mut prefix = None;
        let end = PlainVia::read_prefix(s, &mut prefix);
        if let Some(end) = end {
            prop_assert!(matches!(s.get(end), None | Some(b',')), "{}", text);
            prop_assert_eq!(prefix, PlainVia::read(&s[..end]), "{}", text);
            prop_assert!(prefix.is_some());
        }
        // A value alone reads as `read` reads it.
        let first = s.iter().position(|b| *b == b',').unwrap_or(s.len());
        if let Some(alone) = PlainVia::read(&s[..first]) {
            prop_assert_eq!((end, prefix), (Some(first), Some(alone)), "{}", text);
        }
    });
}

/// The port read through its window is the one the digit-by-digit count reads (every text
/// of up to eight octets of digits and others, shorter and longer than the window).
#[test]
fn ports_read_as_counted() {
    fn counted(s: &[u8]) -> Option<(u16, usize)> {
        let mut n = 0;
        let mut port = 0u32;
        while let Some(&d) = s.get(n).filter(|d| d.is_ascii_digit()) {
            if n == 5 {
                return None;
            }
            port = port * 10 + u32::from(d - b'0');
            n += 1;
        }
        if n == 0 {
            return None;
        }
        Some((u16::try_from(port).ok()?, n))
    }
    let alphabet = [b'0', b'6', b'9', b';', b'a'];
    let mut checked = 0;
    for len in 0..=8u32 {
        for code in 0..alphabet.len().pow(len) {
            let mut c = code;
            let s: Vec<u8> = (0..len)
                .map(|_| {
                    let b = alphabet[c % alphabet.len()];
                    c /= alphabet.len();
                    b
                })
                .collect();
            assert_eq!(port_prefix(&s), counted(&s), "{:?}", String::from_utf8_lossy(&s));
            checked += 1;
        }
    }
    assert!(checked > 400_000);
    assert_eq!(port_prefix(b"65535;x"), Some((65535, 5)));
    assert_eq!(port_prefix(b"65536;x"), None);
    assert_eq!(port_prefix(b"5060"), Some((5060, 4)));
}

#[test]
fn lws_in_sent_protocol() {
    let v = Via::parse(b"SIP  /   2.0  / UDP   192.0.2.2;branch=390skdjuw").unwrap();
    assert_eq!((v.protocol_name, v.protocol_version, v.transport), ("SIP", "2.0", "UDP"));
    assert!(!v.has_rfc3261_branch());
}

#[test]
fn ipv6_sent_by() {
    let v = Via::parse(b"SIP/2.0/UDP [2001:db8::9:1]:5070;branch=z9hG4bKas3-111").unwrap();
    assert_eq!(v.host, Host::Ipv6("2001:db8::9:1".parse::<Ipv6Addr>().unwrap()));
    assert_eq!(v.port, Some(5070));
}

#[test]
fn malformed() {
    assert!(Via::parse(b"SIP/2.0/UDP 192.0.2.15;;").is_err());
    assert!(Via::parse(b"SIP/2.0 192.0.2.15").is_err());
    assert!(Via::parse(b"SIP/2.0/UDP").is_err());
    assert!(Via::parse(b"SIP/2.0/UDP host;branch=a junk").is_err());
}

/// A Via read while this thread remembers earlier sent-bys (module `sent_by_memo`) reads as
/// it reads with nothing remembered: over runs of values that share their start with the
/// ones before them and differ in the octets after it (a digit more, a port or none, another
/// transport, the octet that ends the sent-by), each read both ways.
#[test]
fn a_remembered_sent_by_reads_as_a_fresh_read() {
    use proptest::prelude::*;
    let start = prop_oneof![
        Just("SIP/2.0/UDP 127.0.0.1"),
        Just("SIP/2.0/UDP 127.0.0.1:5060"),
        Just("SIP/2.0/UDP 127.0.0.1:506"),
        Just("SIP/2.0/TCP 127.0.0.1:5060"),
        Just("SIP/2.0/UDP 127.0.0.12"),
        Just("SIP/2.0/UDP 255.255.255.255:65535"),
        Just("SIP/2.0/UDP 10.0.0.1:65536"),
    ];
    let after = prop_oneof![
        Just(""),
        Just("0"),
        Just(":1"),
        Just(":"),
        Just(";branch=z9hG4bK1"),
        Just(";branch=z9hG4bK1;rport"),
        Just(",SIP/2.0/UDP h"),
        Just(" ;x"),
        Just("\r\n"),
        Just("\t"),
        Just("a"),
        Just("."),
    ];
    proptest::proptest!(|(values in proptest::collection::vec((start, after), 1..8))| {
        for (start, after) in &values {
            let v = format!("{start}{after}");
            let mut remembered = None;
            let with_memo = PlainVia::read_prefix(v.as_bytes(), &mut remembered);
            let kept = std::thread::scope(|scope| {
                // A thread of its own remembers nothing.
                scope.spawn(|| {
                    let mut fresh = None;
                    (PlainVia::read_prefix(v.as_bytes(), &mut fresh), fresh)
                }).join().expect("the read")
            });
            prop_assert_eq!((with_memo, remembered), kept, "{}", v);
        }
    });
}
