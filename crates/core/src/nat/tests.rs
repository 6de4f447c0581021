use super::*;
use bytes::Bytes;
use herald_sip::Limits;

fn msg(s: &str) -> Message {
    Message::parse(Bytes::from(s.replace('\n', "\r\n")), &Limits::default()).unwrap()
}

/// A message from another's bytes (already CRLF).
fn raw(s: String) -> Message {
    Message::parse(Bytes::from(s), &Limits::default()).unwrap()
}

fn invite(via: &str, contact: &str) -> Message {
    msg(&format!(
        "INVITE sip:bob@example.com SIP/2.0\nVia: SIP/2.0/UDP {via};branch=z9hG4bKa;rport\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=1\nTo: <sip:bob@example.com>\nCall-ID: c1\nCSeq: 1 INVITE\nContact: {contact}\nContent-Length: 0\n\n"
    ))
}

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

#[test]
fn private_ranges() {
    for ip in
        ["10.1.2.3", "172.16.0.1", "192.168.1.1", "100.64.0.1", "100.127.255.255", "169.254.3.4", "fd00::1", "fe80::1"]
    {
        assert!(is_private(ip.parse().unwrap()), "{ip}");
    }
    for ip in ["192.0.2.1", "100.128.0.1", "100.63.0.1", "8.8.8.8", "127.0.0.1", "2001:db8::1", "::1"] {
        assert!(!is_private(ip.parse().unwrap()), "{ip}");
    }
}

#[test]
fn bindings_behind_nat() {
    let src = Peer::udp(addr("203.0.113.7:40001"));
    // A private contact not at its source: NAT, whatever the mode.
    assert!(binding_behind_nat("sip:bob@192.168.1.20:5060", src, NatDetect::Private));
    // A private contact that is its source: a phone on herald's own private network.
    let lan = Peer::udp(addr("192.168.1.20:5060"));
    assert!(!binding_behind_nat("sip:bob@192.168.1.20:5060", lan, NatDetect::Private));
    assert!(!binding_behind_nat("sip:bob@192.168.1.20:5060", lan, NatDetect::ContactDiffers));
    // A public contact elsewhere: a third-party registration by default, NAT on request.
    assert!(!binding_behind_nat("sip:bob@198.51.100.9", src, NatDetect::Private));
    assert!(binding_behind_nat("sip:bob@198.51.100.9", src, NatDetect::ContactDiffers));
    // Same address, other port (a port-translating NAT): ContactDiffers only; no port is 5060.
    assert!(binding_behind_nat("sip:bob@203.0.113.7:5060", src, NatDetect::ContactDiffers));
    assert!(!binding_behind_nat("sip:bob@203.0.113.7:40001", src, NatDetect::ContactDiffers));
    assert!(!binding_behind_nat("sip:bob@203.0.113.7", Peer::udp(addr("203.0.113.7:5060")), NatDetect::ContactDiffers));
    assert!(binding_behind_nat("sips:bob@203.0.113.7", Peer::udp(addr("203.0.113.7:5060")), NatDetect::ContactDiffers));
    // Names and other schemes are not judged; nor are stream registrations.
    assert!(!binding_behind_nat("sip:bob@phone.example.com", src, NatDetect::ContactDiffers));
    assert!(!binding_behind_nat("tel:+15551234", src, NatDetect::ContactDiffers));
    let tcp = Peer { transport: Transport::Tcp, ..src };
    assert!(!binding_behind_nat("sip:bob@192.168.1.20:5060", tcp, NatDetect::Private));
}

#[test]
fn messages_behind_nat() {
    let src = addr("203.0.113.7:40001");
    // Private Contact (flag 1).
    assert!(message_behind_nat(&invite("203.0.113.7:40001", "<sip:a@10.0.0.2:5062>"), src, NatDetect::Private));
    // Via address not the source (flag 2), Contact a name.
    assert!(message_behind_nat(&invite("198.51.100.1:5060", "<sip:a@phone.example>"), src, NatDetect::Private));
    // Everything public and at the source.
    assert!(!message_behind_nat(&invite("203.0.113.7:40001", "<sip:a@203.0.113.7:40001>"), src, NatDetect::Private));
    // A Via host name proves nothing.
    assert!(!message_behind_nat(&invite("phone.example:5060", "<sip:a@203.0.113.7>"), src, NatDetect::Private));
    assert!(message_behind_nat(&invite("phone.example:5060", "<sip:a@203.0.113.7>"), src, NatDetect::ContactDiffers));
}

#[test]
fn the_contact_is_rewritten_to_the_source_keeping_everything_else() {
    let src = addr("203.0.113.7:40001");
    let m = invite(
        "10.0.0.2:5062",
        "\"Al\" <sip:alice;x=y:pw@10.0.0.2:5062;transport=udp;ob?h=v>;expires=60;+sip.instance=\"<urn:uuid:1>\"",
    );
    let (field, value) = fixed_contact(&m, Peer::udp(src)).unwrap();
    assert_eq!(m.headers()[field].name, HeaderName::Contact);
    assert_eq!(
        value,
        "\"Al\" <sip:alice;x=y:pw@203.0.113.7:40001;transport=udp;ob?h=v>;expires=60;+sip.instance=\"<urn:uuid:1>\""
    );
    // An addr-spec without brackets.
    let m = invite("10.0.0.2:5062", "sip:alice@10.0.0.2");
    assert_eq!(fixed_contact(&m, Peer::udp(src)).unwrap().1, "sip:alice@203.0.113.7:40001");
    // IPv6 source; no user part.
    let m = invite("[fd00::2]:5062", "<sips:[fd00::2]:5061>");
    assert_eq!(fixed_contact(&m, Peer::udp(addr("[2001:db8::7]:4000"))).unwrap().1, "<sips:[2001:db8::7]:4000>");
    // Nothing to fix.
    assert!(fixed_contact(&invite("10.0.0.2", "*"), Peer::udp(src)).is_none());
    assert!(fixed_contact(&invite("10.0.0.2", "<tel:+1555>"), Peer::udp(src)).is_none());
    let two = invite("10.0.0.2", "<sip:a@10.0.0.2>, <sip:a@10.0.0.3>");
    assert!(fixed_contact(&two, Peer::udp(src)).is_none());
}

#[test]
fn which_requests_get_their_contact_fixed() {
    let cfg = NatConfig::default();
    let natted = invite("10.0.0.2:5062", "<sip:alice@10.0.0.2:5062>");
    let from = Peer::udp(addr("203.0.113.7:40001"));
    let (_, v) = request_contact_fix(&natted, from, &cfg).unwrap();
    assert_eq!(v, "<sip:alice@203.0.113.7:40001>");
    // Switched off.
    assert!(request_contact_fix(&natted, from, &NatConfig { fix_contact: false, ..cfg }).is_none());
    // Not behind NAT.
    let direct = Peer::udp(addr("10.0.0.2:5062"));
    assert!(request_contact_fix(&natted, direct, &cfg).is_none());
    // Not the first hop: the source is a proxy, the Contact a UA's elsewhere.
    let proxied = raw(String::from_utf8_lossy(natted.as_bytes()).replacen(
        "Via: ",
        "Via: SIP/2.0/UDP 198.51.100.1;branch=z9hG4bKp\r\nVia: ",
        1,
    ));
    assert!(request_contact_fix(&proxied, from, &cfg).is_none());
    // A WebSocket client: its flow token does the job.
    let ws = Peer { transport: Transport::Ws, ..from };
    assert!(request_contact_fix(&natted, ws, &cfg).is_none());
    // A TCP phone behind NAT: the connection's address, and its transport, without which the
    // far end's requests would go there over UDP.
    let tcp = Peer { transport: Transport::Tcp, ..from };
    let (_, v) = request_contact_fix(&natted, tcp, &cfg).unwrap();
    assert_eq!(v, "<sip:alice@203.0.113.7:40001;transport=tcp>");
    let tls = Peer { transport: Transport::Tls, ..from };
    let sips = invite("10.0.0.2:5062", "<sips:alice@10.0.0.2:5061>");
    assert_eq!(request_contact_fix(&sips, tls, &cfg).unwrap().1, "<sips:alice@203.0.113.7:40001>");
    let explicit = invite("10.0.0.2:5062", "<sip:alice@10.0.0.2:5062;transport=TCP>");
    assert_eq!(request_contact_fix(&explicit, tcp, &cfg).unwrap().1, "<sip:alice@203.0.113.7:40001;transport=TCP>");
    // REGISTER: the registrar keeps the source itself.
    let reg = raw(String::from_utf8_lossy(natted.as_bytes()).replace("INVITE", "REGISTER"));
    assert!(request_contact_fix(&reg, from, &cfg).is_none());
}

#[test]
fn which_responses_get_their_contact_fixed() {
    let cfg = NatConfig::default();
    let ok = msg("SIP/2.0 200 OK\nVia: SIP/2.0/UDP 192.0.2.10:5060;branch=z9hG4bKh\nVia: SIP/2.0/UDP 198.51.100.3;branch=z9hG4bKc\nFrom: <sip:alice@example.com>;tag=1\nTo: <sip:bob@example.com>;tag=2\nCall-ID: c1\nCSeq: 1 INVITE\nContact: <sip:bob@192.168.1.20:5060>\nContent-Length: 0\n\n");
    let to = Peer::udp(addr("203.0.113.7:40001"));
    let (_, v) = response_contact_fix(&ok, "sip:bob@192.168.1.20:5060", to, false, &cfg).unwrap();
    assert_eq!(v, "<sip:bob@203.0.113.7:40001>");
    // A dialog-creating request to a contact that is not behind NAT (a gateway, a public
    // phone, a proxy in front of a private network): its answer is not judged.
    assert!(response_contact_fix(&ok, "sip:bob@203.0.113.7:40001", to, false, &cfg).is_none());
    // An in-dialog request sent straight to its Request-URI: the answer is the UA's own.
    let (_, v) = response_contact_fix(&ok, "sip:bob@203.0.113.7:40001", to, true, &cfg).unwrap();
    assert_eq!(v, "<sip:bob@203.0.113.7:40001>");
    assert!(response_contact_fix(&ok, "sip:bob@203.0.113.8:40001", to, true, &cfg).is_none(), "not where it went");
    assert!(response_contact_fix(&ok, "sip:bob@203.0.113.7", to, true, &cfg).is_none(), "5060 is not 40001");
    let off = NatConfig { fix_contact: false, ..cfg };
    assert!(response_contact_fix(&ok, "sip:bob@192.168.1.20:5060", to, false, &off).is_none());
    // A phone behind NAT registered over TCP, answering over its connection.
    let tcp = Peer { transport: Transport::Tcp, ..to };
    let (_, v) = response_contact_fix(&ok, "sip:bob@192.168.1.20:5060;transport=tcp", tcp, false, &cfg).unwrap();
    assert_eq!(v, "<sip:bob@203.0.113.7:40001;transport=tcp>");
    let ws = Peer { transport: Transport::Ws, ..to };
    assert!(response_contact_fix(&ok, "sip:bob@192.168.1.20:5060", ws, false, &cfg).is_none(), "flow tokens do it");
}

#[test]
fn odd_contacts_are_fixed_exactly_or_left_alone() {
    let src = addr("203.0.113.7:40001");
    // Compact form, folded line, escapes in the user part, no space after the colon.
    let m = msg("INVITE sip:b@example.com SIP/2.0\nVia: SIP/2.0/UDP 10.0.0.2;branch=z9hG4bKo\nMax-Forwards: 70\nFrom: <sip:a@example.com>;tag=1\nTo: <sip:b@example.com>\nCall-ID: o1\nCSeq: 1 INVITE\nm:\n  <sip:a%20b@10.0.0.2:5062;lr>;q=0.5\nContent-Length: 0\n\n");
    let (field, value) = fixed_contact(&m, Peer::udp(src)).unwrap();
    assert_eq!(m.headers()[field].name, HeaderName::Contact);
    assert!(value.ends_with("<sip:a%20b@203.0.113.7:40001;lr>;q=0.5"), "{value}");
    // A Contact that is not a SIP URI, or not parseable: nothing.
    assert!(fixed_contact(&invite("10.0.0.2", "<mailto:a@example.com>"), Peer::udp(src)).is_none());
    assert!(fixed_contact(&invite("10.0.0.2", "<sip:@>"), Peer::udp(src)).is_none());
    // The fix keeps the message well-formed.
    let natted = invite("10.0.0.2:5062", "\"A, B\" <sip:a@[fd00::2]:5062>");
    let (field, value) = request_contact_fix(&natted, Peer::udp(src), &NatConfig::default()).unwrap();
    let mut e = herald_sip::Editor::new(&natted);
    e.replace_value(field, value.as_bytes());
    let fixed = Message::parse(e.finish(), &Limits::default()).unwrap();
    fixed.validate_all().unwrap();
    assert_eq!(value, "\"A, B\" <sip:a@203.0.113.7:40001>");
}

/// The text filter in front of the Contact parse never hides a private address: whenever a
/// Contact's URI has a private host, its text passes the filter.
#[test]
fn the_text_filter_passes_every_private_contact() {
    let hosts = [
        "10.0.0.1",
        "010.1.2.3",
        "172.16.0.1",
        "172.31.255.255",
        "192.168.1.20",
        "192.168.001.002",
        "169.254.3.4",
        "100.64.0.1",
        "100.127.255.255",
        "[fd00::1]",
        "[FE80::1]",
        "[::ffff:10.0.0.1]",
        "127.0.0.1",
        "203.0.113.7",
        "8.8.8.8",
        "110.0.0.1",
        "[2001:db8::1]",
        "example.com",
        "10.example.com",
    ];
    for host in hosts {
        for contact in [
            format!("<sip:alice@{host}:5060;transport=udp>"),
            format!("\"A\" <sip:{host}>;expires=60"),
            format!("sips:bob@{host}"),
        ] {
            let private = NameAddr::parse(contact.as_bytes())
                .ok()
                .and_then(|a| a.uri.as_sip().and_then(|u| host_ip(&u.host)))
                .is_some_and(is_private);
            assert!(!private || may_name_private_address(contact.as_bytes()), "{contact}");
        }
    }
    assert!(!may_name_private_address(b"<sip:sipp@127.0.0.1:5061;transport=UDP>"));
    assert!(!may_name_private_address(b"<sip:bob@203.0.113.7:40001>"));
}

/// The text filter's rule read octet by octet: a '[' (an IPv6 literal) anywhere, or a '.'
/// after the first octet of a private, link-local or shared range (10, 172, 192, 169, 100).
fn text_filter_rule(v: &[u8]) -> bool {
    v.contains(&b'[')
        || (0..v.len()).any(|at| {
            v[at] == b'.' && [&b"10"[..], b"172", b"192", b"169", b"100"].iter().any(|f| v[..at].ends_with(f))
        })
}

/// The word-at-a-time filter says what an octet-by-octet reading of its rule says, wherever
/// the octets fall in the words.
#[test]
fn the_text_filter_reads_as_its_rule() {
    let parts: [&[u8]; 12] = [b"10", b"172", b"192", b"169", b"100", b"[", b"a", b"1", b".", b"<sip:", b"@", b":5060"];
    let mut seed = 7u64;
    for _ in 0..20_000 {
        let mut v = Vec::new();
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        let mut s = seed;
        for _ in 0..(seed >> 60) + 2 {
            v.extend_from_slice(parts[(s % 12) as usize]);
            s /= 12;
        }
        assert_eq!(may_name_private_address_anywhere(&v), text_filter_rule(&v), "{}", String::from_utf8_lossy(&v));
    }
}

/// The filter against its rule over every text of up to 5 octets from the octets the rule
/// reads: each prefix at the very start (fewer than three octets before its dot) and inside.
#[test]
fn the_text_filter_reads_as_its_rule_over_every_short_text() {
    let alphabet = b"1079262.[a";
    let mut texts = vec![Vec::new()];
    for _ in 0..5 {
        let longer: Vec<Vec<u8>> =
            texts.iter().flat_map(|t: &Vec<u8>| alphabet.iter().map(move |&c| [&t[..], &[c]].concat())).collect();
        for t in &longer {
            assert_eq!(may_name_private_address_anywhere(t), text_filter_rule(t), "{}", String::from_utf8_lossy(t));
        }
        texts = longer;
    }
}

/// A part of a text never may name a private address where the whole text may not: what lets
/// the NAT tests ask the first Contact line's text before splitting its first value out.
#[test]
fn no_part_of_a_text_the_filter_clears_may_name_a_private_address() {
    let parts: [&[u8]; 13] =
        [b"10", b"172", b"192", b"169", b"100", b"[", b"a", b"1", b"0", b".", b"<sip:", b",", b":5060"];
    crate::substring_filters::assert_no_part_of_a_cleared_text_passes(&parts, 11, may_name_private_address_anywhere);
}

/// Branch targets naming private, public, loopback and unparsable hosts, with and without
/// ports and transports: the texts the NAT tests of a branch's responder are checked over.
const BRANCH_TARGETS: [&str; 12] = [
    "sip:bob@192.168.1.20:5060",
    "sip:bob@10.0.0.2:5062;transport=udp",
    "sip:bob@[fd00::2]:5060",
    "sip:bob@203.0.113.7:40001",
    "sip:bob@203.0.113.7",
    "sip:bob@203.0.113.7:5060",
    "sip:sipp@127.0.0.1:5061;transport=UDP",
    "sips:bob@100.64.0.1",
    "sips:bob@203.0.113.7:5061",
    "sip:bob@example.com",
    "tel:+15551234",
    "sip:",
];

/// A registered contact's kept reading (its IP host and port) gives a branch outside a dialog
/// the answer its text gives, for every target, peer transport and detection.
#[test]
fn a_target_read_before_gets_the_answer_of_its_text() {
    let address = |t: &str| Uri::parse(t.as_bytes()).ok().as_ref().and_then(contact_address);
    for transport in [Transport::Udp, Transport::Tcp, Transport::Ws] {
        let to = Peer { transport, addr: addr("203.0.113.7:40001"), conn: None };
        for detect in [NatDetect::Private, NatDetect::ContactDiffers] {
            for fix_contact in [true, false] {
                let cfg = NatConfig { detect, fix_contact, ..NatConfig::default() };
                for target in BRANCH_TARGETS {
                    assert_eq!(
                        address_responder_may_be_natted(address(target), to, &cfg),
                        responder_may_be_natted(target, to, false, &cfg),
                        "{target} {transport:?} {detect:?} {fix_contact}"
                    );
                }
            }
        }
    }
}

/// The text filter in front of a branch target's parse changes no answer: for targets that name
/// private, public and loopback hosts, in and out of dialogs, under both detections, the answer
/// is the one the parsed target gives.
#[test]
fn a_target_filtered_by_its_text_gets_the_parsed_answer() {
    let to = Peer::udp(addr("203.0.113.7:40001"));
    for detect in [NatDetect::Private, NatDetect::ContactDiffers] {
        let cfg = NatConfig { detect, ..NatConfig::default() };
        for target in BRANCH_TARGETS {
            for in_dialog in [false, true] {
                let parsed = Uri::parse(target.as_bytes())
                    .is_ok_and(|u| parsed_responder_may_be_natted(&u, to, in_dialog, &cfg));
                assert_eq!(
                    responder_may_be_natted(target, to, in_dialog, &cfg),
                    parsed,
                    "{target} {in_dialog} {detect:?}"
                );
            }
        }
    }
}
