//! What real phones on a real network met with herald's defaults (issue 15): a wildcard
//! listener in Record-Route, outbound proxies addressed by a name of ours, AoRs split by port,
//! and the answer for a user without bindings.

use super::*;
use crate::engine::config::SourceRoute;

const HERALD: &str = "10.98.0.1:5060";
const PHONE_A: &str = "10.98.0.2:5070";
const PHONE_B: &str = "10.98.0.2:5080";

/// This machine's routing table in the test: 10.98.0.0/24 is reached from 10.98.0.1.
#[derive(Debug)]
struct Routes;
impl SourceRoute for Routes {
    fn source_for(&self, to: std::net::IpAddr) -> Option<std::net::IpAddr> {
        match to {
            std::net::IpAddr::V4(v4) if v4.octets()[..3] == [10, 98, 0] => Some("10.98.0.1".parse().unwrap()),
            _ => None,
        }
    }
}

/// Herald as the embedded default runs it: UDP and TCP on 0.0.0.0:5060, the interface
/// addresses expanded into the identity, the host name and `localhost` as names of its own,
/// the domains being the host name and addresses.
fn wildcard_harness() -> Harness {
    let ids = [HERALD, "127.0.0.1:5060"].map(addr).to_vec();
    let mut cfg = config(Forking::Parallel, false);
    cfg.identity = Identity::new(ids, ["herald-host".to_owned(), "10.98.0.1".to_owned(), "127.0.0.1".to_owned()])
        .with_names(["herald-host".to_owned(), "localhost".to_owned()]);
    cfg.listeners = vec![
        Listener { transport: Transport::Udp, addr: addr("0.0.0.0:5060") },
        Listener { transport: Transport::Tcp, addr: addr("0.0.0.0:5060") },
    ];
    cfg.routes = Some(Arc::new(Routes));
    Harness::from_config(cfg)
}

/// Feeds `text` from `from` as received on herald's 10.98.0.1:5060 (the IP_PKTINFO address
/// of a wildcard socket).
fn deliver(h: &mut Harness, from: &str, text: &str) -> Vec<(Peer, Message)> {
    let bytes = Bytes::from(text.replace("\r\n", "\n").replace('\n', "\r\n"));
    let msg = Message::parse(bytes, &Limits::default()).unwrap();
    let mut out = Vec::new();
    h.engine.handle(h.now, Input::Message { from: Peer::udp(addr(from)), local: addr(HERALD), msg }, &mut out);
    sent(&out)
}

fn register(h: &mut Harness, user: &str, aor_host: &str, from: &str) {
    let text = format!("REGISTER sip:{aor_host} SIP/2.0\nVia: SIP/2.0/UDP {from};branch=z9hG4bKr{user}{from}\nMax-Forwards: 70\nFrom: <sip:{user}@{aor_host}>;tag=r1\nTo: <sip:{user}@{aor_host}>\nCall-ID: reg-{user}-{from}\nCSeq: 1 REGISTER\nContact: <sip:{user}@{from}>\nExpires: 600\nContent-Length: 0\n\n");
    let out = deliver(h, from, &text);
    assert_eq!(out[0].1.status(), Some(200), "{}", String::from_utf8_lossy(out[0].1.as_bytes()));
}

fn invite_to(ruri: &str, from: &str, call: &str, route: &str) -> String {
    format!("INVITE {ruri} SIP/2.0\nVia: SIP/2.0/UDP {from};branch=z9hG4bK-{call};rport\nMax-Forwards: 70\n{route}From: <sip:alice@10.98.0.1>;tag=a1\nTo: <{ruri}>\nCall-ID: {call}\nCSeq: 1 INVITE\nContact: <sip:alice@{from}>\nContent-Length: 0\n\n")
}

#[test]
fn a_wildcard_listener_record_routes_the_interface_the_call_used() {
    let mut h = wildcard_harness();
    register(&mut h, "bob", "10.98.0.1", PHONE_B);
    let out = deliver(&mut h, PHONE_A, &invite_to("sip:bob@10.98.0.1", PHONE_A, "rr1", ""));
    let (to, fwd) = out.iter().find(|(_, m)| m.is_request()).expect("forwarded to bob");
    assert_eq!(to.addr, addr(PHONE_B));
    let rr: Vec<String> = fwd.record_routes().map(|r| r.unwrap().uri.as_str().to_owned()).collect();
    // In and out through 10.98.0.1: one Record-Route, with the interface's address. Before,
    // the wildcard was compared as configured: `<sip:127.0.0.1;lr>, <sip:0.0.0.0:5060;lr>`.
    assert_eq!(rr, ["sip:10.98.0.1:5060;lr"]);
    assert_eq!(fwd.top_via().unwrap().host.to_string(), "10.98.0.1");
}

#[test]
fn an_outbound_proxy_named_by_a_name_of_ours_is_herald_itself() {
    let mut h = wildcard_harness();
    register(&mut h, "bob", "10.98.0.1", PHONE_B);
    let routes = ["Route: <sip:localhost;lr>\n", "Route: <sip:herald-host:5060;lr>\n", "Route: <sip:10.98.0.1;lr>\n"];
    for (i, route) in routes.into_iter().enumerate() {
        let call = format!("ob-{i}");
        let out = deliver(&mut h, PHONE_A, &invite_to("sip:bob@10.98.0.1", PHONE_A, &call, route));
        let (to, fwd) = out.iter().find(|(_, m)| m.is_request()).expect(route);
        assert_eq!(to.addr, addr(PHONE_B), "{route}: not forwarded back to herald (482)");
        assert_eq!(fwd.routes().count(), 0, "{route}: our Route is removed (§16.4)");
    }
}

#[test]
fn the_port_does_not_split_a_served_domains_users() {
    let mut h = wildcard_harness();
    // Registered without a port, called with one, and the other way round.
    register(&mut h, "bob", "10.98.0.1", PHONE_B);
    register(&mut h, "carol", "10.98.0.1:5060", PHONE_A);
    for (i, (ruri, phone)) in
        [("sip:bob@10.98.0.1:5060", PHONE_B), ("sip:carol@10.98.0.1", PHONE_A)].into_iter().enumerate()
    {
        let out = deliver(&mut h, "10.98.0.2:5090", &invite_to(ruri, "10.98.0.2:5090", &format!("port-{i}"), ""));
        let (to, _) = out.iter().find(|(_, m)| m.is_request()).unwrap_or_else(|| panic!("{ruri}: {out:?}"));
        assert_eq!(to.addr, addr(phone), "{ruri}");
    }
    // The transport parameter does not split it either.
    let out =
        deliver(&mut h, "10.98.0.2:5090", &invite_to("sip:bob@10.98.0.1;transport=udp", "10.98.0.2:5090", "tp", ""));
    assert!(out.iter().any(|(to, m)| m.is_request() && to.addr == addr(PHONE_B)));
}
