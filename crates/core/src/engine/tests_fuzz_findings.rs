//! Regressions found by the `engine_pipeline` fuzz target (fuzz/fuzz_targets/engine_pipeline.rs).

use super::*;

/// Bob registered over TCP (connection 7).
fn bob_over_tcp(h: &mut Harness) -> Peer {
    let bob_tcp = Peer { transport: Transport::Tcp, addr: addr(BOB), conn: Some(crate::ConnId(7)) };
    let reg = format!("REGISTER sip:example.com SIP/2.0\r\nVia: SIP/2.0/TCP {BOB};branch=z9hG4bKregtcp\r\nMax-Forwards: 70\r\nFrom: <sip:bob@example.com>;tag=r1\r\nTo: <sip:bob@example.com>\r\nCall-ID: regtcp\r\nCSeq: 1 REGISTER\r\nContact: <sip:bob@{BOB};transport=tcp>\r\nContent-Length: 0\r\n\r\n");
    let r = sent(&h.send_bytes(bob_tcp, Bytes::from(reg)));
    assert_eq!(r[0].1.status(), Some(200));
    bob_tcp
}

#[test]
fn relayed_onto_a_stream_a_message_gets_content_length() {
    // Content-Length is optional over UDP, mandatory over TCP (RFC 3261 §18.3, §20.14).
    let mut h = Harness::new();
    let bob = bob_over_tcp(&mut h);
    let inv = invite("bob", "nocl").replace("Content-Type: application/sdp\nContent-Length: 5\n\nv=0\n", "\n");
    let out = h.send(ALICE, &inv);
    let (to, bytes) = out
        .iter()
        .find_map(|o| match o {
            Output::Send { to, bytes } if bytes.starts_with(b"INVITE") => Some((*to, bytes.clone())),
            _ => None,
        })
        .expect("INVITE forwarded");
    assert_eq!(to, bob);
    let framed = herald_sip::framing::next_frame(&mut bytes::BytesMut::from(&bytes[..]), &Limits::default());
    assert!(matches!(framed, Ok(Some(herald_sip::framing::Frame::Message(_)))), "{framed:?}");
    let fwd = Message::parse(bytes, &Limits::default()).unwrap();
    assert_eq!(fwd.content_length(), Some(0));
    // Bob's 180 without Content-Length goes back to Alice with one too.
    let ringing = answer(&fwd, 180, "Ringing", "b1").replace("Content-Length: 0\r\n", "");
    let up = sent(&h.send_bytes(bob, Bytes::from(ringing)));
    assert_eq!(up[0].1.status(), Some(180));
    assert_eq!(up[0].1.content_length(), Some(0));
}

#[test]
fn a_branch_silent_after_cancel_is_given_up_and_the_caller_answered() {
    let mut h = Harness::new();
    h.register("bob", BOB, None);
    let out = sent(&h.send(ALICE, &invite("bob", "silent")));
    let fwd = out.iter().find(|(_, m)| m.is_request()).unwrap().1.clone();
    h.send(BOB, &answer(&fwd, 180, "Ringing", "b1"));
    // Timer C (3 min, §16.8): the ringing branch is CANCELled...
    let at_c = sent(&h.advance(Duration::from_secs(181)));
    assert!(at_c.iter().any(|(_, m)| m.method() == Some(Method::Cancel)), "CANCEL at Timer C");
    // ...and Bob never answers anything again. 64*T1 later (§9.1) the branch is given up: Alice
    // gets a final response, and no transaction is left once the timers have run.
    let mut finals = Vec::new();
    for _ in 0..40 {
        for (to, m) in sent(&h.advance(Duration::from_secs(2))) {
            if to.addr == addr(ALICE) && m.status().is_some_and(|s| s >= 200) {
                finals.push(m.status().unwrap());
            }
        }
    }
    // Retransmitted (Timer G) until it is ACKed, which Alice does not do here.
    finals.dedup();
    assert_eq!(finals, [408], "one final response to Alice");
    for _ in 0..40 {
        h.advance(Duration::from_secs(2));
    }
    assert_eq!(SipHandler::transactions(&h.engine), 0, "transactions left");
}

#[test]
fn a_response_with_no_via_left_is_not_forwarded() {
    let mut h = Harness::new();
    h.register("bob", BOB, None);
    let out = sent(&h.send(ALICE, &invite("bob", "novia")));
    let fwd = out.iter().find(|(_, m)| m.is_request()).unwrap().1.clone();
    // Bob's answers keep our Via but mangle Alice's below it (§16.7 step 3: nothing to forward).
    let ringing = answer(&fwd, 180, "Ringing", "b1");
    let via_line = |text: &str| {
        let at = text.find(&format!("Via: SIP/2.0/UDP {ALICE}")).expect("Alice's Via");
        text[at..at + text[at..].find("\r\n").unwrap() + 2].to_string()
    };
    let alice_via = via_line(&ringing);
    let up = sent(&h.send(BOB, &ringing.replace(&alice_via, "Via: ???\r\n")));
    assert!(up.iter().all(|(to, _)| to.addr != addr(ALICE)), "a provisional without Via is dropped: {up:?}");
    let busy = answer(&fwd, 486, "Busy Here", "b1").replace(&alice_via, "Via: ???\r\n");
    let up = sent(&h.send(BOB, &busy));
    let to_alice: Vec<_> = up.iter().filter(|(to, _)| to.addr == addr(ALICE)).collect();
    assert_eq!(to_alice.len(), 1, "{up:?}");
    // The caller still gets a final response: herald's own, with her Via from the request.
    assert_eq!(to_alice[0].1.status(), Some(502));
    assert_eq!(to_alice[0].1.vias().count(), 1);
}

/// RFC 3261 §16.6 step 2 (§19.1.1 Table 1): a forwarded request's Request-URI carries no
/// header components and no `method` parameter, whichever target it came from. The fuzz
/// target found a strict router's Route value with `?headers` promoted as it was.
fn forwarded_request_uri(out: &[Output]) -> String {
    let (_, fwd) = sent(out).into_iter().find(|(_, m)| m.is_request()).expect("request forwarded");
    fwd.validate().unwrap_or_else(|e| panic!("forwarded request fails the receipt checks: {e}"));
    String::from_utf8(fwd.request_uri_bytes().unwrap().to_vec()).unwrap()
}

#[test]
fn a_strict_routers_route_value_loses_its_headers_as_the_request_uri() {
    let mut h = Harness::new();
    let msg = format!("MESSAGE sip:bob@198.51.100.9 SIP/2.0\nVia: SIP/2.0/UDP {ALICE};branch=z9hG4bK-srh\nRoute: <sip:198.51.100.20:5;method=BYE?rP3Pport=tcp>\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=a1\nTo: <sip:bob@example.com>;tag=b1\nCall-ID: srh\nCSeq: 1 MESSAGE\nContent-Length: 0\n\n");
    assert_eq!(forwarded_request_uri(&h.send(ALICE, &msg)), "sip:198.51.100.20:5");
}

#[test]
fn a_request_uri_restored_from_the_last_route_loses_its_headers() {
    // §16.4: the previous hop was a strict router, so the Request-URI is ours and the last
    // Route value is the Request-URI it replaced.
    let mut h = Harness::new();
    let msg = format!("MESSAGE sip:{PROXY} SIP/2.0\nVia: SIP/2.0/UDP {ALICE};branch=z9hG4bK-srl\nRoute: <sip:bob@198.51.100.9?Subject=hi>\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=a1\nTo: <sip:bob@example.com>;tag=b1\nCall-ID: srl\nCSeq: 1 MESSAGE\nContent-Length: 0\n\n");
    assert_eq!(forwarded_request_uri(&h.send(ALICE, &msg)), "sip:bob@198.51.100.9");
}

#[test]
fn a_registered_contact_with_header_components_is_called_without_them() {
    // RFC 4475 §3.3.14 (regescrt): the binding keeps the escaped Route header component.
    let mut h = Harness::new();
    let reg = format!("REGISTER sip:example.com SIP/2.0\nVia: SIP/2.0/UDP {BOB};branch=z9hG4bKregesc\nMax-Forwards: 70\nFrom: <sip:bob@example.com>;tag=r1\nTo: <sip:bob@example.com>\nCall-ID: regesc\nCSeq: 1 REGISTER\nContact: <sip:bob@{BOB};method=INVITE?Route=%3Csip:sip.example.com%3E>\nExpires: 3600\nContent-Length: 0\n\n");
    assert_eq!(sent(&h.send(BOB, &reg))[0].1.status(), Some(200));
    let out = h.send(ALICE, &invite("bob", "regesc-call"));
    assert_eq!(forwarded_request_uri(&out), format!("sip:bob@{BOB}"));
}

/// A branch that rings after the call was answered on another branch is CANCELled (§9.1); if
/// its callee never answers the CANCEL, its INVITE client transaction (in Proceeding, with no
/// timer of its own) is still dropped 64*T1 after the CANCEL, although the response context
/// whose Timer C would have dropped it ended first. Found by the engine_pipeline fuzz target.
#[test]
fn a_branch_that_rings_after_the_answer_and_ignores_the_cancel_is_dropped() {
    let mut h = Harness::new();
    h.register("bob", BOB, Some("0.5"));
    h.register("bob", BOB2, Some("0.9"));
    let out = sent(&h.send(ALICE, &invite("bob", "late183")));
    let to = |who: &str| out.iter().find(|(p, m)| p.addr == addr(who) && m.is_request()).unwrap().1.clone();
    let (to_bob, to_bob2) = (to(BOB), to(BOB2));
    let ok = sent(&h.send(BOB2, &answer(&to_bob2, 200, "OK", "x2")));
    assert!(ok.iter().any(|(p, m)| p.addr == addr(ALICE) && m.status() == Some(200)));
    // Bob has not sent a provisional yet: no CANCEL may go (§9.1). The server transaction
    // ends 64*T1 after the 2xx (RFC 6026 Accepted), taking the response context with it.
    assert!(!ok.iter().any(|(_, m)| m.method() == Some(Method::Cancel)));
    h.advance(Duration::from_secs(10));
    let ringing = sent(&h.send(BOB, &answer(&to_bob, 183, "Session Progress", "x1")));
    assert!(ringing.iter().any(|(p, m)| p.addr == addr(BOB) && m.method() == Some(Method::Cancel)));
    // Bob never answers the CANCEL. A minute later (past the context's end at 32 s and the
    // CANCEL's 64*T1 at 42 s) nothing is left.
    for _ in 0..60 {
        h.advance(Duration::from_secs(1));
    }
    assert_eq!(h.engine.transactions(), 0, "transactions left: {}", h.engine.active_transactions());
}
