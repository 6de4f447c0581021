//! herald as an Outbound edge proxy (RFC 5626 §5) in front of another registrar: the Path with a
//! flow token it inserts, the registrar's requests it sends back over the flow (430 when the
//! flow is gone), and Record-Route across WebSocket and TCP (RFC 5658, RFC 7118).

use super::*;

const PHONE: &str = "198.51.100.4:53122";
const REGISTRAR: &str = "203.0.113.20:5060";

fn ws_phone() -> Peer {
    Peer { transport: Transport::Ws, addr: addr(PHONE), conn: Some(crate::ConnId(41)) }
}

fn lf(text: &str) -> Bytes {
    Bytes::from(text.replace("\r\n", "\n").replace('\n', "\r\n"))
}

#[test]
fn a_register_forwarded_for_an_outbound_phone_gets_a_path_that_leads_back_over_its_flow() {
    let mut h = Harness::new();
    // A REGISTER for a domain herald does not serve (RFC 5626 §5.1): herald is the edge proxy.
    let reg = format!("REGISTER sip:{REGISTRAR} SIP/2.0\nVia: SIP/2.0/WS ph.invalid;branch=z9hG4bKob1\nMax-Forwards: 70\nFrom: <sip:bob@{REGISTRAR}>;tag=r1\nTo: <sip:bob@{REGISTRAR}>\nCall-ID: ob1\nCSeq: 1 REGISTER\nSupported: path, outbound\nContact: <sip:bob@ph.invalid;transport=ws;ob>;+sip.instance=\"<urn:uuid:1>\";reg-id=1\nContent-Length: 0\n\n");
    let out = sent(&h.send_bytes(ws_phone(), lf(&reg)));
    let (to, fwd) = out.iter().find(|(_, m)| m.is_request()).expect("forwarded");
    assert_eq!(to.addr, addr(REGISTRAR));
    let path = String::from_utf8_lossy(fwd.get(herald_sip::HeaderName::Path).expect("a Path")).into_owned();
    assert!(path.starts_with(&format!("<sip:{PROXY};lr;ft=")) && path.ends_with(";ob>"), "{path}");

    // The registrar's INVITE comes back with the Path as its Route: out over the phone's flow.
    let route = path.trim_matches(|c| c == '<' || c == '>');
    let inv = format!("INVITE sip:bob@ph.invalid;transport=ws;ob SIP/2.0\nVia: SIP/2.0/UDP {REGISTRAR};branch=z9hG4bKreg-inv1\nRoute: <{route}>\nMax-Forwards: 69\nFrom: <sip:carol@{REGISTRAR}>;tag=c1\nTo: <sip:bob@{REGISTRAR}>\nCall-ID: obcall1\nCSeq: 1 INVITE\nContact: <sip:carol@{REGISTRAR}>\nContent-Length: 0\n\n");
    let out = sent(&h.send(REGISTRAR, &inv));
    let (to, fwd) = out.iter().find(|(_, m)| m.is_request()).expect("sent to the phone");
    assert_eq!(*to, ws_phone());
    assert_eq!(fwd.top_via().unwrap().transport, "WS");
    assert_eq!(fwd.routes().count(), 0, "herald's own Route is consumed");
    // The flow is gone: 430 Flow Failed upstream (RFC 5626 §5.3), so the registrar tries
    // another flow; not 503/500.
    let mut out = Vec::new();
    h.engine.handle(h.now, Input::TransportError { to: ws_phone() }, &mut out);
    let answers = sent(&out);
    let last = answers.iter().rev().find(|(_, m)| m.status().is_some_and(|s| s >= 200)).expect("a final answer");
    assert_eq!((last.0.addr, last.1.status()), (addr(REGISTRAR), Some(430)));
}

#[test]
fn an_altered_flow_token_is_refused_with_403_and_sends_nothing() {
    let mut h = Harness::new();
    let token = FlowTokens::new(crate::seed::Seed::fixed(0)).mint(ws_phone());
    // One digit of the connection id changed: the MAC no longer matches (RFC 5626 §5.3).
    let altered = format!("{}{}", &token[..19], if &token[19..20] == "1" { "2" } else { "1" }) + &token[20..];
    for t in [altered, "nothex".to_owned()] {
        let inv = format!("INVITE sip:bob@ph.invalid;transport=ws SIP/2.0\nVia: SIP/2.0/UDP {REGISTRAR};branch=z9hG4bKforge-{t}\nRoute: <sip:{PROXY};lr;ft={t};ob>\nMax-Forwards: 69\nFrom: <sip:m@{REGISTRAR}>;tag=m1\nTo: <sip:bob@{REGISTRAR}>\nCall-ID: forge-{t}\nCSeq: 1 INVITE\nContent-Length: 0\n\n");
        let out = sent(&h.send(REGISTRAR, &inv));
        assert!(out.iter().all(|(to, m)| to.addr == addr(REGISTRAR) && !m.is_request()), "{out:?}");
        assert_eq!(out.last().unwrap().1.status(), Some(403));
    }
}

#[test]
fn a_websocket_caller_to_a_tcp_callee_gets_two_record_routes_that_route_both_ways() {
    let mut h = Harness::new();
    let bob_tcp = Peer { transport: Transport::Tcp, addr: addr(BOB), conn: Some(crate::ConnId(7)) };
    let reg = format!("REGISTER sip:example.com SIP/2.0\nVia: SIP/2.0/TCP {BOB};branch=z9hG4bKrt1\nMax-Forwards: 70\nFrom: <sip:bob@example.com>;tag=r1\nTo: <sip:bob@example.com>\nCall-ID: rt1\nCSeq: 1 REGISTER\nContact: <sip:bob@{BOB};transport=tcp>\nContent-Length: 0\n\n");
    assert_eq!(sent(&h.send_bytes(bob_tcp, lf(&reg)))[0].1.status(), Some(200));
    let inv = "INVITE sip:bob@example.com SIP/2.0\nVia: SIP/2.0/WS ph.invalid;branch=z9hG4bKws1\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=a1\nTo: <sip:bob@example.com>\nCall-ID: ws1\nCSeq: 1 INVITE\nContact: <sip:alice@ph.invalid;transport=ws>\nContent-Length: 0\n\n";
    let out = sent(&h.send_bytes(ws_phone(), lf(inv)));
    let (to, fwd) = out.iter().find(|(_, m)| m.is_request()).unwrap();
    assert_eq!(*to, bob_tcp);
    let rr: Vec<String> = fwd.record_routes().map(|r| r.unwrap().uri.as_str().to_owned()).collect();
    // RFC 5658 §3: the top value faces bob (TCP; his contact is reachable, no token), the
    // second faces alice (ws, with her flow's token: her `.invalid` Contact is reached no other way).
    assert_eq!(rr.len(), 2, "{rr:?}");
    assert_eq!(rr[0], format!("sip:{PROXY};transport=tcp;lr"));
    assert!(rr[1].starts_with(&format!("sip:{PROXY};transport=ws;lr;ft=")), "{rr:?}");
    // bob's BYE (his route set is the Record-Route as received) goes to alice's flow...
    let bye = format!("BYE sip:alice@ph.invalid;transport=ws SIP/2.0\nVia: SIP/2.0/TCP {BOB};branch=z9hG4bKbye1\nRoute: <{}>, <{}>\nMax-Forwards: 70\nFrom: <sip:bob@example.com>;tag=b1\nTo: <sip:alice@example.com>;tag=a1\nCall-ID: ws1\nCSeq: 1 BYE\nContent-Length: 0\n\n", rr[0], rr[1]);
    let out = sent(&h.send_bytes(bob_tcp, lf(&bye)));
    let (to, _) = out.iter().find(|(_, m)| m.is_request()).unwrap();
    assert_eq!(*to, ws_phone());
    // ...and alice's (the reverse) to bob's contact: her own flow's token is skipped.
    let bye = format!("BYE sip:bob@{BOB};transport=tcp SIP/2.0\nVia: SIP/2.0/WS ph.invalid;branch=z9hG4bKbye2\nRoute: <{}>, <{}>\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=a1\nTo: <sip:bob@example.com>;tag=b1\nCall-ID: ws1\nCSeq: 2 BYE\nContent-Length: 0\n\n", rr[1], rr[0]);
    let out = sent(&h.send_bytes(ws_phone(), lf(&bye)));
    let (to, _) = out.iter().find(|(_, m)| m.is_request()).unwrap();
    assert_eq!((to.transport, to.addr), (Transport::Tcp, addr(BOB)));
}

#[test]
fn an_outbound_proxy_route_with_ob_keeps_the_dialog_on_the_callers_flow() {
    let mut h = Harness::new();
    h.register("bob", BOB, None);
    // A reachable Contact, but the UA's outbound-proxy Route asks for Outbound (RFC 5626 §4.3).
    let inv = invite("bob", "ob-rt")
        .replace("Max-Forwards: 70\n", &format!("Route: <sip:{PROXY};lr;ob>\nMax-Forwards: 70\n"));
    let out = sent(&h.send(ALICE, &inv));
    let (_, fwd) = out.iter().find(|(_, m)| m.is_request()).unwrap();
    let rr: Vec<String> = fwd.record_routes().map(|r| r.unwrap().uri.as_str().to_owned()).collect();
    assert_eq!(rr.len(), 2, "{rr:?}");
    assert_eq!(rr[0], format!("sip:{PROXY};lr"));
    assert!(rr[1].starts_with(&format!("sip:{PROXY};lr;ft=")), "{rr:?}");
    // Without `ob` (and a reachable Contact) nothing changes: one value, no token.
    let out = sent(&h.send(ALICE, &invite("bob", "plain")));
    let (_, fwd) = out.iter().find(|(_, m)| m.is_request()).unwrap();
    assert_eq!(fwd.record_routes().count(), 1);
}
