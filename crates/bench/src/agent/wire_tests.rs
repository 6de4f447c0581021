//! Tests of [`super::wire`]: the messages the generator writes parse as what it meant, responses
//! copy what RFC 3261 §8.2.6.2 asks, and each shortcut answers as the general path does.

use super::wire::*;
use bytes::Bytes;
use herald_sip::Limits;
use herald_sip::{HeaderName, Message};

fn local() -> Local {
    Local::new("UDP", "127.0.0.1:5070".into(), "", "example.com".into())
}

fn parse(b: &Bytes) -> Message {
    Message::parse(b.clone(), &Limits::default()).unwrap()
}

fn two_routes() -> Vec<String> {
    vec!["<sip:p1;lr>".to_string(), "<sip:p2;lr>".to_string()]
}

/// Alice's INVITE to Bob with an SDP offer through `routes`, no credentials, nothing extra.
fn invite(routes: &[String]) -> Request<'_> {
    Request {
        method: "INVITE",
        uri: "sip:bob@example.com",
        branch: "z9hG4bK-1",
        from: "<sip:alice@example.com>;tag=a1",
        to: "<sip:bob@example.com>",
        call_id: "c1",
        cseq: 7,
        routes,
        contact_user: Some("alice"),
        auth: None,
        extra: "",
        body: Some(("application/sdp", SDP_OFFER)),
    }
}

#[test]
fn invite_parses_and_carries_everything() {
    let routes = two_routes();
    let b = local().request(&Request {
        auth: Some(("Proxy-Authorization", "Digest username=\"alice\"")),
        extra: "X-Herald-Ring: 100\r\n",
        ..invite(&routes)
    });
    let m = parse(&b);
    assert_eq!(m.method().unwrap().as_str(), "INVITE");
    assert_eq!(m.top_via().unwrap().branch(), Some("z9hG4bK-1"));
    assert_eq!(m.cseq().unwrap().seq, 7);
    assert_eq!(m.routes().count(), 2);
    assert_eq!(m.body(), SDP_OFFER.as_bytes());
    assert_eq!(m.get_by_name(RING_HEADER), Some(&b"100"[..]));
    assert!(m.get(HeaderName::ProxyAuthorization).is_some());
}

/// The fields handed to the INVITE transaction are those a parser finds in the INVITE.
#[test]
fn invite_ack_source_is_what_the_invite_says() {
    let routes = two_routes();
    let request = invite(&routes);
    let (bytes, ack) = local().invite(&request);
    assert_eq!(bytes, local().request(&request));
    let m = parse(&bytes);
    assert_eq!(ack.request_uri, m.request_uri_bytes().unwrap());
    assert_eq!(ack.top_via, m.list_values(HeaderName::Via).next().unwrap().unwrap().bytes);
    assert_eq!(ack.from, m.get(HeaderName::From).unwrap());
    assert_eq!(ack.call_id, m.get(HeaderName::CallId).unwrap());
    assert_eq!(ack.cseq, m.cseq().unwrap().seq);
    let parsed: Vec<&[u8]> = m.list_values(HeaderName::Route).map(|r| r.unwrap().bytes).collect();
    assert_eq!(ack.routes, parsed);
}

#[test]
fn the_contact_uri_is_the_one_a_contact_line_carries() {
    for local in [local(), Local::new("TCP", "[::1]:5070".into(), ";transport=tcp", "d".into())] {
        let r = local.response(200, "OK", "", "", Some("bob"));
        let m = parse(&r);
        let contact = m.contacts().next().unwrap().unwrap();
        assert_eq!(contact.address().unwrap().uri.as_str(), local.contact_uri("bob"));
    }
}

#[test]
fn response_echoes_request_lines_and_adds_tag() {
    let req = parse(&Bytes::from_static(
        b"INVITE sip:bob@h SIP/2.0\r\nVia: SIP/2.0/UDP p;branch=z9hG4bKp\r\nv: SIP/2.0/UDP c;branch=z9hG4bKc\r\n\
          Record-Route: <sip:p;lr>\r\nf: <sip:a@h>;tag=1\r\nTo: <sip:bob@h>\r\ni: x\r\nCSeq: 1 INVITE\r\n\
          Content-Length: 0\r\n\r\n",
    ));
    let (echo_text, to_line) = echo(&req, true, "t9");
    let r = local().response(200, "OK", &echo_text, &to_line, Some("bob"));
    let m = parse(&r);
    assert_eq!(m.status(), Some(200));
    assert_eq!(m.vias().count(), 2);
    assert_eq!(m.top_via().unwrap().branch(), Some("z9hG4bKp"));
    assert_eq!(m.to_tag().unwrap(), Some("t9"));
    assert_eq!(m.record_routes().count(), 1);
    assert_eq!(m.call_id().unwrap(), "x");
    assert_eq!(m.body(), SDP_ANSWER.as_bytes());
    let (_, bye_to) = echo(&m, false, "other");
    assert!(bye_to.ends_with(";tag=t9\r\n"), "existing tag kept: {bye_to}");
    assert_eq!(bye_to.matches(";tag=").count(), 1, "{bye_to}");
    assert_eq!(to_line, "To: <sip:bob@h>;tag=t9\r\n");
}

/// Told whether the To has a tag, echo writes what it writes when it reads that itself.
#[test]
fn echo_told_about_the_tag_is_echo() {
    let untagged = parse(&Bytes::from_static(
        b"INVITE sip:bob@h SIP/2.0\r\nVia: SIP/2.0/UDP p;branch=z9hG4bKp\r\nFrom: <sip:a@h>;tag=1\r\n\
          To: <sip:bob@h>\r\nCall-ID: x\r\nCSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n",
    ));
    assert_eq!(echo_tagging(&untagged, true, Some("t9")), echo(&untagged, true, "t9"));
    let tagged = parse(&Bytes::from(
        String::from_utf8(untagged.as_bytes().to_vec()).unwrap().replace("<sip:bob@h>", "<sip:bob@h>;tag=2"),
    ));
    assert_eq!(echo_tagging(&tagged, false, None), echo(&tagged, false, "t9"));
    assert_ne!(echo_tagging(&tagged, false, Some("t9")), echo(&tagged, false, "t9"));
}

/// Runs of adjacent copied lines, copied at once, give what copying each line gives.
#[test]
fn echo_is_the_copied_lines_in_their_order() {
    let req = parse(&Bytes::from_static(
        b"INVITE sip:bob@h SIP/2.0\r\nRecord-Route: <sip:p;lr>\r\nVia: SIP/2.0/UDP p;branch=z9hG4bKp\r\n\
          v: SIP/2.0/UDP c;branch=z9hG4bKc\r\nMax-Forwards: 69\r\nf: <sip:a@h>;tag=1\r\nTo: <sip:bob@h>\r\n\
          i: x\r\nCSeq: 1 INVITE\r\nContact: <sip:a@c>\r\nRecord-Route: <sip:q;lr>\r\nContent-Length: 0\r\n\r\n",
    ));
    for record_route in [true, false] {
        let (echo_text, _) = echo(&req, record_route, "t");
        let copied = |name: HeaderName| {
            matches!(name, HeaderName::Via | HeaderName::From | HeaderName::CallId | HeaderName::CSeq)
                || (record_route && name == HeaderName::RecordRoute)
        };
        let want: String = req
            .headers()
            .iter()
            .filter(|h| copied(h.name))
            .map(|h| String::from_utf8_lossy(&req.as_bytes()[h.line.range()]).into_owned())
            .collect();
        assert_eq!(echo_text, want, "record_route {record_route}");
    }
}

#[test]
fn text_that_is_not_utf8_is_replaced_not_copied() {
    let req = parse(&Bytes::from_static(
        b"BYE sip:bob@h SIP/2.0\r\nVia: SIP/2.0/UDP p\xff;branch=z9hG4bKp\r\nFrom: <sip:a@h>;tag=1\r\n\
          To: <sip:bob@h>;tag=2\r\nCall-ID: x\r\nCSeq: 2 BYE\r\nContent-Length: 0\r\n\r\n",
    ));
    let (echo_text, to_line) = echo(&req, false, "t9");
    assert!(echo_text.starts_with("Via: SIP/2.0/UDP p\u{fffd};branch=z9hG4bKp\r\nFrom: <sip:a@h>;tag=1\r\n"));
    assert!(echo_text.ends_with("Call-ID: x\r\nCSeq: 2 BYE\r\n"), "{echo_text}");
    assert_eq!(to_line, "To: <sip:bob@h>;tag=2\r\n");
}

#[test]
fn top_via_branch_is_found_only_whole_and_only_in_the_top_value() {
    let response = |via: &str| {
        let text = format!(
            "SIP/2.0 200 OK\r\nVia: {via}\r\nFrom: <sip:a@d>;tag=1\r\nTo: <sip:b@d>;tag=2\r\n\
             Call-ID: x\r\nCSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n"
        );
        Message::parse(Bytes::from(text), &Limits::default()).unwrap()
    };
    let ours = response("SIP/2.0/UDP 127.0.0.1:5070;branch=z9hG4bKa.1;rport=5070;received=127.0.0.1");
    assert!(top_via_has_branch(&ours, "z9hG4bKa.1"));
    assert!(!top_via_has_branch(&ours, "z9hG4bKa."), "a prefix is not the branch");
    assert!(!top_via_has_branch(&ours, "z9hG4bKa.12"));
    assert!(top_via_has_branch(&response("SIP/2.0/UDP h;branch=z9hG4bKb"), "z9hG4bKb"));
    // Only the top value counts, and a branch must be a parameter of its own.
    assert!(!top_via_has_branch(&response("SIP/2.0/UDP p;branch=z9hG4bKx, SIP/2.0/UDP h;branch=y"), "y"));
    assert!(!top_via_has_branch(&response("SIP/2.0/UDP h;xbranch=z9hG4bKc"), "z9hG4bKc"));
    assert!(top_via_has_branch(&response("SIP/2.0/UDP h;xbranch=q;branch=z9hG4bKc"), "z9hG4bKc"));
}

/// A reply written straight into its buffer is byte for byte the response made of echo's
/// two strings.
#[test]
fn a_reply_is_the_response_made_of_its_echo() {
    let requests: [&[u8]; 3] = [
        b"BYE sip:bob@h SIP/2.0\r\nVia: SIP/2.0/UDP p;branch=z9hG4bKp\r\nv: SIP/2.0/UDP c;branch=z9hG4bKc\r\n\
          Record-Route: <sip:p;lr>\r\nf: <sip:a@h>;tag=1\r\nTo: <sip:bob@h>;tag=2\r\ni: x\r\nCSeq: 2 BYE\r\n\
          Content-Length: 0\r\n\r\n",
        b"OPTIONS sip:bob@h SIP/2.0\r\nVia: SIP/2.0/UDP c;branch=z9hG4bKc\r\nFrom: <sip:a@h>;tag=1\r\n\
          To: <sip:bob@h>\r\nCall-ID: y\r\nCSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n",
        b"BYE sip:bob@h SIP/2.0\r\nVia: SIP/2.0/UDP p\xff;branch=z9hG4bKp\r\nFrom: <sip:a@h>;tag=1\r\n\
          To: <sip:bob@h>;tag=2\r\nCall-ID: x\r\nCSeq: 2 BYE\r\nContent-Length: 0\r\n\r\n",
    ];
    for request in requests {
        let req = parse(&Bytes::from_static(request));
        for (status, reason) in [(200, "OK"), (481, "Call/Transaction Does Not Exist")] {
            let (lines, to_line) = echo(&req, false, "bench");
            let want = local().response(status, reason, &lines, &to_line, None);
            assert_eq!(local().reply(&req, status, reason, "bench"), want, "{}", String::from_utf8_lossy(request));
        }
    }
}

/// Our own Via found verbatim answers as the search does, and so does any other.
#[test]
fn our_own_top_via_matches_as_the_search_does() {
    let local = local();
    let response = |via: &str| {
        let text = format!(
            "SIP/2.0 200 OK\r\nVia: {via}\r\nFrom: <sip:a@d>;tag=1\r\nTo: <sip:b@d>;tag=2\r\n\
             Call-ID: x\r\nCSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n"
        );
        Message::parse(Bytes::from(text), &Limits::default()).unwrap()
    };
    let vias = [
        "SIP/2.0/UDP 127.0.0.1:5070;branch=z9hG4bKa.1;rport=5070;received=127.0.0.1",
        "SIP/2.0/UDP 127.0.0.1:5070;branch=z9hG4bKa.1",
        "SIP/2.0/UDP 127.0.0.1:5070;branch=z9hG4bKa.1 ;rport",
        "SIP/2.0/UDP 127.0.0.1:5070;branch=z9hG4bKa.1, SIP/2.0/UDP p;branch=z9hG4bKp",
        "SIP/2.0/UDP 127.0.0.1:5070;branch=z9hG4bKa.12;rport",
        "SIP/2.0/UDP 127.0.0.1:5070;branch=z9hG4bKa.",
        "SIP/2.0/UDP 127.0.0.1:5070;rport;branch=z9hG4bKa.1",
        "SIP/2.0/UDP 127.0.0.1:5071;branch=z9hG4bKa.1",
        "SIP/2.0/TCP 127.0.0.1:5070;branch=z9hG4bKa.1",
        "SIP/2.0/UDP p;branch=z9hG4bKx, SIP/2.0/UDP 127.0.0.1:5070;branch=z9hG4bKa.1",
    ];
    let mut matched = 0;
    for via in vias {
        let m = response(via);
        let want = top_via_has_branch(&m, "z9hG4bKa.1");
        assert_eq!(local.wrote_top_via(&m, "z9hG4bKa.1"), want, "{via}");
        matched += usize::from(want);
    }
    assert_eq!(matched, 7);
}

#[test]
fn ack_for_failure_reuses_top_via_and_tag() {
    let resp = parse(&Bytes::from_static(
        b"SIP/2.0 487 Request Terminated\r\nVia: SIP/2.0/UDP c;branch=z9hG4bKc;rport=5, SIP/2.0/UDP x\r\n\
          From: <sip:a@h>;tag=1\r\nTo: <sip:bob@h>;tag=2\r\nCall-ID: x\r\nCSeq: 4 INVITE\r\nContent-Length: 0\r\n\r\n",
    ));
    let ack = parse(&ack_for_failure(&resp).unwrap());
    assert_eq!(ack.method().unwrap().as_str(), "ACK");
    assert_eq!(ack.request_uri_bytes(), Some(&b"sip:bob@h"[..]));
    assert_eq!(ack.vias().count(), 1);
    assert_eq!(ack.top_via().unwrap().branch(), Some("z9hG4bKc"));
    assert_eq!(ack.to_tag().unwrap(), Some("2"));
    assert_eq!(ack.cseq().unwrap().seq, 4);
    assert_eq!(ack.cseq().unwrap().method.as_str(), "ACK");
}
