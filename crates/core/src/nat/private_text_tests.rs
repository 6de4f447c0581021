//! The private-address text filter (module `private_text`) against the parse it stands in front of.

use super::private_text::*;
use super::{host_ip, is_private};
use bytes::Bytes;
use herald_sip::headers::NameAddr;
use herald_sip::{HeaderName, Limits, Message};

/// Whether the first Contact value of `msg` parses to a URI with a private host: what the
/// filter's `false` must rule out.
fn first_contact_is_private(msg: &Message) -> bool {
    let Some(Ok(value)) = msg.first_list_value(HeaderName::Contact) else { return false };
    NameAddr::parse(value.bytes)
        .ok()
        .and_then(|a| a.uri.as_sip().and_then(|u| host_ip(&u.host)))
        .is_some_and(is_private)
}

/// A request whose Contact line is `line` (`None` when the message does not parse).
fn with_contact(line: &[u8]) -> Option<Message> {
    let mut text = b"OPTIONS sip:b@example.com SIP/2.0\r\nVia: SIP/2.0/UDP 203.0.113.7;branch=z9hG4bKt\r\n\
        Max-Forwards: 70\r\nFrom: <sip:a@example.com>;tag=1\r\nTo: <sip:b@example.com>\r\nCall-ID: t1\r\n\
        CSeq: 1 OPTIONS\r\nContact: "
        .to_vec();
    text.extend_from_slice(line);
    text.extend_from_slice(b"\r\nContent-Length: 0\r\n\r\n");
    Message::parse(Bytes::from(text), &Limits::default()).ok()
}

/// What the NAT tests rely on, over random Contact lines (most of them `<sip:` first, the
/// shape the host is read from): a line the filter clears has a first value that parses to
/// no private host, and that value the filter clears too. Private hosts, IPv6 references,
/// users, passwords, several values, display names, brackets and `@` in odd places.
#[test]
fn a_cleared_contact_line_names_no_private_address_in_its_first_value() {
    let starts: [&[u8]; 6] = [b"<sip:", b"<sip:", b"<sip:u@", b"\"A\" <sip:", b"sip:", b"<sips:"];
    let parts: [&[u8]; 24] = [
        b"10.0.0.1",
        b"010.1.2.3",
        b"172.16.0.1",
        b"192.168.1.2",
        b"169.254.1.1",
        b"100.64.0.1",
        b"127.0.0.1",
        b"203.0.113.7",
        b"[fd00::1]",
        b"[2001:db8::1]",
        b"1",
        b"0",
        b".",
        b"@",
        b">",
        b"<",
        b":5060",
        b":pw",
        b";transport=udp",
        b",",
        b" ",
        b"a",
        b"\"",
        b";x=10.0.0.1",
    ];
    let (mut cleared, mut fast, mut private) = (0, 0, 0);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..40_000 {
        let mut line = starts[(next() % starts.len() as u64) as usize].to_vec();
        for _ in 0..next() % 6 + 1 {
            line.extend_from_slice(parts[(next() % parts.len() as u64) as usize]);
        }
        if next() % 2 == 0 {
            line.push(b'>');
        }
        let Some(msg) = with_contact(&line) else { continue };
        let Some(text) = msg.get(HeaderName::Contact) else { continue };
        if first_contact_is_private(&msg) {
            private += 1;
        }
        if may_name_private_address(text) {
            continue;
        }
        cleared += 1;
        fast += usize::from(bracketed_sip_host(text).is_some());
        let shown = String::from_utf8_lossy(text);
        assert!(!first_contact_is_private(&msg), "{shown}");
        if let Some(Ok(value)) = msg.first_list_value(HeaderName::Contact) {
            assert!(!may_name_private_address(value.bytes), "{shown}");
        }
    }
    assert!(cleared > 5_000 && fast > 3_000 && private > 1_000, "{cleared} {fast} {private}");
}

/// The host read against the parse over every host of up to four octets from the octets it
/// looks at, with and without a user, a port and the closing `>`: a host it clears never
/// parses to a private address, and every private one it passes.
#[test]
fn the_host_read_clears_no_private_host_over_every_short_host() {
    let alphabet = b"10279.[@>:a";
    let mut hosts = vec![Vec::new()];
    for _ in 0..4 {
        hosts = hosts.iter().flat_map(|h: &Vec<u8>| alphabet.iter().map(move |&c| [&h[..], &[c]].concat())).collect();
        for host in &hosts {
            for (user, tail) in [("", ".0.1>"), ("u@", ".0.1>"), ("u:p@", ".0.1:5060>"), ("", "")] {
                let text = [b"<sip:", user.as_bytes(), host, tail.as_bytes()].concat();
                let private = NameAddr::parse(&text)
                    .ok()
                    .and_then(|a| a.uri.as_sip().and_then(|u| host_ip(&u.host)))
                    .is_some_and(is_private);
                assert!(!private || may_name_private_address(&text), "{}", String::from_utf8_lossy(&text));
            }
        }
    }
}

/// SIPp's Contacts and a public phone's are cleared by the host read alone.
#[test]
fn usual_public_contacts_are_cleared_at_their_host() {
    for text in [
        &b"<sip:sipp@127.0.0.1:5061;transport=UDP>"[..],
        b"<sip:127.0.0.1:19102;transport=UDP>",
        b"<sip:bob@203.0.113.7:40001;ob>;+sip.instance=\"<urn:uuid:1>\";reg-id=1",
    ] {
        assert!(bracketed_sip_host(text).is_some() && !may_name_private_address(text));
    }
    assert!(may_name_private_address(b"<sip:bob@192.168.1.20:5060;transport=udp>"));
    assert!(may_name_private_address(b"<sip:[fd00::1]:5060>"));
    assert!(may_name_private_address(b"<sip:10.1.2.3>"));
}
