//! Phones behind NAT (`crate::nat`) and the AoR forms through the whole engine: a NATed phone
//! registers and is called at the NAT's address, its Contacts are fixed in both directions,
//! herald as an edge proxy adds its Path and routes the registrar's requests back over the
//! phone's flow, and `[registrar] use_domain`.

use super::*;
use crate::nat::{EdgePath, NatConfig, NatDetect};

/// The NAT's public side, where the phone's packets come from.
const NAT: &str = "203.0.113.7:40001";
/// What the phone believes its address is.
const LAN: &str = "192.168.1.20:5060";
/// A registrar of another domain, behind herald.
const REGISTRAR: &str = "198.51.100.50:5060";

fn register_from_lan(user: &str, domain: &str, extra: &str) -> String {
    format!("REGISTER sip:{domain} SIP/2.0\nVia: SIP/2.0/UDP {LAN};branch=z9hG4bKn{user};rport\nMax-Forwards: 70\nFrom: <sip:{user}@{domain}>;tag=r1\nTo: <sip:{user}@{domain}>\nCall-ID: reg-{user}-nat\nCSeq: 1 REGISTER\n{extra}Contact: <sip:{user}@{LAN}>\nExpires: 600\nContent-Length: 0\n\n")
}

fn nat_harness(nat: NatConfig) -> Harness {
    let mut cfg = config(Forking::Parallel, false);
    cfg.nat = nat;
    Harness::from_config(cfg)
}

fn contact_of(m: &Message) -> String {
    match m.contacts().next().unwrap().unwrap() {
        herald_sip::headers::Contact::Address(a) => a.uri.as_str().to_owned(),
        herald_sip::headers::Contact::Star => "*".into(),
    }
}

#[test]
fn a_phone_behind_nat_is_called_at_the_nat_and_its_answer_names_the_nat() {
    let mut h = nat_harness(NatConfig::default());
    let reg = sent(&h.send(NAT, &register_from_lan("bob", "example.com", "")));
    assert_eq!((reg[0].0.addr, reg[0].1.status()), (addr(NAT), Some(200)), "answered at rport (RFC 3581)");
    let out = sent(&h.send(ALICE, &invite("bob", "n1")));
    let (to, fwd) = out.iter().find(|(_, m)| m.is_request()).expect("INVITE forwarded");
    assert_eq!(to.addr, addr(NAT), "sent where the registration came from");
    assert_eq!(fwd.request_uri_bytes(), Some(format!("sip:bob@{LAN}").as_bytes()), "Request-URI is the contact");
    // Bob answers from behind the NAT with his private Contact: Alice sees the NAT's address.
    let ok = answer(fwd, 200, "OK", "b1").replace(&format!("sip:bob@{BOB}"), &format!("sip:bob@{LAN}"));
    let up = sent(&h.send(NAT, &ok));
    let (to, resp) = up.iter().find(|(_, m)| m.status() == Some(200)).expect("200 upstream");
    assert_eq!(to.addr, addr(ALICE));
    assert_eq!(contact_of(resp), format!("sip:bob@{NAT}"));
}

#[test]
fn an_answer_from_a_phone_not_behind_nat_keeps_its_contact() {
    let mut h = nat_harness(NatConfig::default());
    h.register("bob", BOB, None);
    let out = sent(&h.send(ALICE, &invite("bob", "n2")));
    let (_, fwd) = out.iter().find(|(_, m)| m.is_request()).unwrap();
    // Even a private Contact: the branch did not go to a NATed binding (herald cannot tell a
    // UA from a proxy in front of one).
    let ok = answer(fwd, 200, "OK", "b2").replace(&format!("sip:bob@{BOB}"), &format!("sip:bob@{LAN}"));
    let up = sent(&h.send(BOB, &ok));
    let (_, resp) = up.iter().find(|(_, m)| m.status() == Some(200)).unwrap();
    assert_eq!(contact_of(resp), format!("sip:bob@{LAN}"));
}

#[test]
fn a_caller_behind_nat_gets_its_contact_fixed_unless_switched_off() {
    let natted_invite =
        invite("bob", "n3").replace(&format!("Via: SIP/2.0/UDP {ALICE}"), &format!("Via: SIP/2.0/UDP {LAN}")).replace(
            &format!("Contact: <sip:alice@{ALICE}>"),
            &format!("Contact: <sip:alice@{LAN};transport=udp>;+sip.instance=\"<urn:uuid:1>\""),
        );
    for (fix, want) in
        [(true, format!("sip:alice@{NAT};transport=udp")), (false, format!("sip:alice@{LAN};transport=udp"))]
    {
        let mut h = nat_harness(NatConfig { fix_contact: fix, ..NatConfig::default() });
        h.register("bob", BOB, None);
        let out = sent(&h.send(NAT, &natted_invite));
        let (to, fwd) = out.iter().find(|(_, m)| m.is_request()).unwrap();
        assert_eq!(to.addr, addr(BOB));
        assert_eq!(contact_of(fwd), want);
        fwd.validate_all().unwrap();
        if fix {
            let line = fwd.value_of(fwd.field(herald_sip::HeaderName::Contact).unwrap());
            assert!(line.ends_with(b";+sip.instance=\"<urn:uuid:1>\""), "header parameters kept");
        }
    }
    // A caller on herald's own network is left alone.
    let mut h = nat_harness(NatConfig::default());
    h.register("bob", BOB, None);
    let out = sent(&h.send(ALICE, &invite("bob", "n4")));
    let (_, fwd) = out.iter().find(|(_, m)| m.is_request()).unwrap();
    assert_eq!(contact_of(fwd), format!("sip:alice@{ALICE}"));
}

/// The REGISTER herald forwards to a registrar of another domain, and the INVITE that registrar
/// sends back through the Path: it leaves over the phone's flow (the NAT's address).
#[test]
fn as_an_edge_proxy_herald_adds_its_path_and_routes_the_registrars_requests_to_the_phone() {
    let domain = "198.51.100.50";
    let supported = "Supported: path\n";
    let cases = [
        (EdgePath::Supported, supported, true, false),
        (EdgePath::Supported, "", false, false),
        (EdgePath::Always, "", true, true),
        (EdgePath::Always, supported, true, false),
        (EdgePath::Off, supported, false, false),
    ];
    for (mode, extra, want_path, want_require) in cases {
        let mut h = nat_harness(NatConfig { edge_path: mode, ..NatConfig::default() });
        let out = sent(&h.send(NAT, &register_from_lan("carol", domain, extra)));
        let (to, fwd) = out.iter().find(|(_, m)| m.is_request()).expect("REGISTER forwarded");
        assert_eq!(to.addr, addr(REGISTRAR));
        let paths: Vec<String> = fwd.paths().map(|p| p.unwrap().uri.as_str().to_owned()).collect();
        let requires: Vec<&str> = fwd.tokens(herald_sip::HeaderName::Require).map(|t| t.unwrap()).collect();
        assert_eq!(!paths.is_empty(), want_path, "{mode:?} {extra:?}: {paths:?}");
        assert_eq!(requires == ["path"], want_require, "{mode:?} {extra:?}: {requires:?}");
        assert_eq!(contact_of(fwd), format!("sip:carol@{LAN}"), "a REGISTER's Contact is the registrar's business");
        if !want_path {
            continue;
        }
        assert!(paths[0].starts_with("sip:192.0.2.10:5060;lr;ft="), "{}", paths[0]);
        // herald keeps that NAT mapping open while the registration lasts.
        assert_eq!(h.engine.registrar.edge_flows().due(h.now), vec![addr(NAT)]);
        // The registrar calls carol: Route = the Path, Request-URI = her registered contact.
        let call = format!("INVITE sip:carol@{LAN} SIP/2.0\nVia: SIP/2.0/UDP {REGISTRAR};branch=z9hG4bKreg-in-{mode:?}\nMax-Forwards: 69\nRoute: <{}>\nFrom: <sip:dave@{domain}>;tag=d1\nTo: <sip:carol@{domain}>\nCall-ID: edge-{mode:?}\nCSeq: 1 INVITE\nContact: <sip:dave@{REGISTRAR}>\nContent-Length: 0\n\n", paths[0]);
        let out = sent(&h.send(REGISTRAR, &call));
        let (to, inv) = out.iter().find(|(_, m)| m.is_request()).expect("INVITE towards carol");
        assert_eq!(to.addr, addr(NAT), "over the flow the REGISTER came on");
        assert_eq!(inv.request_uri_bytes(), Some(format!("sip:carol@{LAN}").as_bytes()));
    }
}

fn use_domain_harness(use_domain: bool) -> Harness {
    let mut cfg = config(Forking::Parallel, false);
    cfg.identity = Identity::new(vec![addr(PROXY)], ["example.com".to_owned(), "example.org".to_owned()]);
    let registrar = Registrar::new(RegistrarConfig { use_domain, ..RegistrarConfig::default() });
    let store = Arc::new(registrar.new_store());
    Harness { engine: Engine::new(Arc::new(cfg), store, registrar, 0), now: Instant::now() }
}

/// `[registrar] use_domain`: with it (the default) bob@example.com and bob@example.org are two
/// users; without it one. The port, transport and scheme of either URI never split a user, and
/// the user part's case always does (RFC 3261 §19.1.4).
#[test]
fn aor_forms_in_both_directions() {
    for use_domain in [true, false] {
        let mut h = use_domain_harness(use_domain);
        h.register("bob", BOB, None);
        let call = |h: &mut Harness, ruri: &str, n: &str| -> Option<u16> {
            let text = invite("bob", n).replacen("INVITE sip:bob@example.com", &format!("INVITE {ruri}"), 1);
            let out = sent(&h.send(ALICE, &text));
            match out.iter().find(|(_, m)| m.is_request()) {
                Some((to, _)) if to.addr == addr(BOB) => None,
                _ => out.iter().filter_map(|(_, m)| m.status()).find(|s| *s >= 300),
            }
        };
        for (i, ruri) in
            ["sip:bob@example.com:5060", "sip:bob@EXAMPLE.com;transport=udp", "sip:bob@example.com:5060;transport=tcp"]
                .into_iter()
                .enumerate()
        {
            assert_eq!(call(&mut h, ruri, &format!("f{use_domain}{i}")), None, "{ruri} reaches bob");
        }
        assert_eq!(
            call(&mut h, "sip:Bob@example.com", &format!("c{use_domain}")),
            Some(404),
            "user parts are case-sensitive"
        );
        let other_domain = call(&mut h, "sip:bob@example.org", &format!("d{use_domain}"));
        assert_eq!(other_domain, if use_domain { Some(404) } else { None }, "use_domain = {use_domain}");
    }
}

/// The other direction: registered with a port and transport in To, called without.
#[test]
fn a_registration_with_port_and_transport_is_found_without_them() {
    let mut h = use_domain_harness(true);
    let reg = format!("REGISTER sip:example.com SIP/2.0\nVia: SIP/2.0/UDP {BOB};branch=z9hG4bKpt\nMax-Forwards: 70\nFrom: <sip:bob@example.com:5060;transport=udp>;tag=r1\nTo: <sips:bob@Example.COM:5060;transport=udp>\nCall-ID: reg-pt\nCSeq: 1 REGISTER\nContact: <sip:bob@{BOB}>\nExpires: 600\nContent-Length: 0\n\n");
    assert_eq!(sent(&h.send(BOB, &reg))[0].1.status(), Some(200));
    let out = sent(&h.send(ALICE, &invite("bob", "pt1")));
    assert!(out.iter().any(|(to, m)| m.is_request() && to.addr == addr(BOB)), "found as sip:bob@example.com");
}

/// As the registrar behind an edge: a binding with a Path is reached through the edge, which
/// fixes the phone's Contact itself; herald leaves the answer's Contact alone (the branch went
/// to a proxy, not to the phone), even a private one.
#[test]
fn a_registrar_does_not_fix_answers_that_come_through_a_path() {
    const EDGE: &str = "198.51.100.60:5060";
    let mut h = nat_harness(NatConfig::default());
    let reg = format!("REGISTER sip:example.com SIP/2.0\nVia: SIP/2.0/UDP {EDGE};branch=z9hG4bKedge1\nVia: SIP/2.0/UDP {LAN};branch=z9hG4bKph1;rport=40001;received=203.0.113.7\nMax-Forwards: 69\nPath: <sip:{EDGE};lr;ft=abc>\nSupported: path\nFrom: <sip:erin@example.com>;tag=r1\nTo: <sip:erin@example.com>\nCall-ID: reg-erin\nCSeq: 1 REGISTER\nContact: <sip:erin@{LAN}>\nExpires: 600\nContent-Length: 0\n\n");
    assert_eq!(sent(&h.send(EDGE, &reg))[0].1.status(), Some(200));
    let out = sent(&h.send(ALICE, &invite("erin", "p1")));
    let (to, fwd) = out.iter().find(|(_, m)| m.is_request()).unwrap();
    assert_eq!(to.addr, addr(EDGE), "through the Path");
    let ok = answer(fwd, 200, "OK", "e1").replace(&format!("sip:bob@{BOB}"), &format!("sip:erin@{LAN}"));
    let up = sent(&h.send(EDGE, &ok));
    let (_, resp) = up.iter().find(|(_, m)| m.status() == Some(200)).unwrap();
    assert_eq!(contact_of(resp), format!("sip:erin@{LAN}"));
}

/// A REGISTER from a phone that is not behind NAT (here a third-party registration: the
/// contact is another host's) gets herald's Path without a flow token: the registrar's INVITE
/// comes back through herald and goes to the contact, not to where the REGISTER came from.
#[test]
fn an_edge_path_for_a_phone_not_behind_nat_has_no_flow_token() {
    let mut h = nat_harness(NatConfig::default());
    let reg = format!("REGISTER sip:{REGISTRAR} SIP/2.0\nVia: SIP/2.0/UDP {ALICE};branch=z9hG4bKtp\nMax-Forwards: 70\nFrom: <sip:frank@{REGISTRAR}>;tag=r1\nTo: <sip:frank@{REGISTRAR}>\nCall-ID: reg-frank\nCSeq: 1 REGISTER\nSupported: path\nContact: <sip:frank@{BOB}>\nExpires: 600\nContent-Length: 0\n\n");
    let out = sent(&h.send(ALICE, &reg));
    let (_, fwd) = out.iter().find(|(_, m)| m.is_request()).expect("REGISTER forwarded");
    let paths: Vec<String> = fwd.paths().map(|p| p.unwrap().uri.as_str().to_owned()).collect();
    assert_eq!(paths, ["sip:192.0.2.10:5060;lr"]);
    assert!(h.engine.registrar.edge_flows().is_empty(), "no NAT mapping to keep open");
    let call = format!("INVITE sip:frank@{BOB} SIP/2.0\nVia: SIP/2.0/UDP {REGISTRAR};branch=z9hG4bKtp-in\nMax-Forwards: 69\nRoute: <{}>\nFrom: <sip:dave@{REGISTRAR}>;tag=d1\nTo: <sip:frank@{REGISTRAR}>\nCall-ID: tp-1\nCSeq: 1 INVITE\nContact: <sip:dave@{REGISTRAR}>\nContent-Length: 0\n\n", paths[0]);
    let out = sent(&h.send(REGISTRAR, &call));
    let (to, _) = out.iter().find(|(_, m)| m.is_request()).expect("INVITE towards frank");
    assert_eq!(to.addr, addr(BOB), "to the contact, not to the REGISTER's source");
}

/// A 3xx from a NATed phone names redirect targets, not the phone: its Contact is left alone.
#[test]
fn a_redirect_from_a_phone_behind_nat_keeps_its_contacts() {
    let mut h = nat_harness(NatConfig::default());
    sent(&h.send(NAT, &register_from_lan("bob", "example.com", "")));
    let out = sent(&h.send(ALICE, &invite("bob", "r1")));
    let (_, fwd) = out.iter().find(|(_, m)| m.is_request()).unwrap();
    let moved = answer(fwd, 302, "Moved Temporarily", "b1")
        .replace("Content-Length: 0", "Contact: <sip:bob@192.168.1.99:5060>\r\nContent-Length: 0");
    let up = sent(&h.send(NAT, &moved));
    let (_, resp) = up.iter().find(|(_, m)| m.status() == Some(302)).expect("302 upstream");
    assert_eq!(contact_of(resp), "sip:bob@192.168.1.99:5060");
}

/// `[nat] detect = "contact_differs"`: a public contact that is not where the REGISTER came
/// from is taken for NAT too, and reached at the source; by default it is a third-party
/// registration, reached at the contact.
#[test]
fn contact_differs_reaches_a_public_contact_at_its_source() {
    for (detect, want) in [(NatDetect::ContactDiffers, NAT), (NatDetect::Private, "198.51.100.77:5060")] {
        let mut h = nat_harness(NatConfig { detect, ..NatConfig::default() });
        let reg = register_from_lan("bob", "example.com", "").replace(LAN, "198.51.100.77:5060");
        assert_eq!(sent(&h.send(NAT, &reg))[0].1.status(), Some(200));
        let out = sent(&h.send(ALICE, &invite("bob", "cd1")));
        let (to, _) = out.iter().find(|(_, m)| m.is_request()).unwrap();
        assert_eq!(to.addr, addr(want), "{detect:?}");
    }
}

/// A re-INVITE to the Contact herald fixed goes straight to the NAT, and the phone's 2xx (which
/// refreshes the caller's remote target, RFC 3261 §12.2.1.2) names the NAT again; an in-dialog
/// request that follows a Route to another proxy keeps its answer's Contact.
#[test]
fn in_dialog_answers_from_a_phone_behind_nat_are_fixed_too() {
    let mut h = nat_harness(NatConfig::default());
    sent(&h.send(NAT, &register_from_lan("bob", "example.com", "")));
    let out = sent(&h.send(ALICE, &invite("bob", "rd1")));
    let (_, fwd) = out.iter().find(|(_, m)| m.is_request()).unwrap();
    let rr = fwd.record_routes().next().unwrap().unwrap().uri.as_str().to_owned();
    let ok = answer(fwd, 200, "OK", "b1").replace(&format!("sip:bob@{BOB}"), &format!("sip:bob@{LAN}"));
    sent(&h.send(NAT, &ok));
    for (route, to_want, fixed) in [
        (format!("Route: <{rr}>\n"), NAT, true),
        (format!("Route: <{rr}>\nRoute: <sip:198.51.100.9;lr>\n"), "198.51.100.9:5060", false),
    ] {
        let reinvite = format!("INVITE sip:bob@{NAT} SIP/2.0\nVia: SIP/2.0/UDP {ALICE};branch=z9hG4bK-re-{fixed};rport\nMax-Forwards: 70\n{route}From: <sip:alice@example.com>;tag=a1\nTo: <sip:bob@example.com>;tag=b1\nCall-ID: rd1\nCSeq: {} INVITE\nContact: <sip:alice@{ALICE}>\nContent-Length: 0\n\n", if fixed { 2 } else { 3 });
        let out = sent(&h.send(ALICE, &reinvite));
        let (to, fwd) = out.iter().find(|(_, m)| m.is_request()).expect("re-INVITE forwarded");
        assert_eq!(to.addr, addr(to_want));
        let ok = answer(fwd, 200, "OK", "b1").replace(&format!("sip:bob@{BOB}"), &format!("sip:bob@{LAN}"));
        let up = sent(&h.send(to_want, &ok));
        let (_, resp) = up.iter().find(|(_, m)| m.status() == Some(200)).expect("200 upstream");
        let want = if fixed { format!("sip:bob@{NAT}") } else { format!("sip:bob@{LAN}") };
        assert_eq!(contact_of(resp), want, "fixed: {fixed}");
    }
}
