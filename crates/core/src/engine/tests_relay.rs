//! Issue 16, items 1 and 2: herald relays to foreign targets only what authenticated, what a
//! trusted peer sent, or what follows a Record-Route herald signed; and whatever it answers to
//! a request that did not authenticate is sent once, statelessly, holding no state.

use super::*;
use crate::auth::tests::{authenticator, client_answer, nonce_of};
use crate::auth::{Algorithm, AuthPolicy, PeerPrefix};
use herald_sip::HeaderName;

/// A host herald does not serve, and a caller from a domain it does not serve.
const FOREIGN: &str = "198.51.100.9:5060";
const CAROL: &str = "198.51.100.20:5070";
const TRUNK: &str = "203.0.113.7:5060";

fn harness_with(policy: AuthPolicy) -> Harness {
    let registrar = Registrar::new(RegistrarConfig::default());
    let store = Arc::new(registrar.new_store());
    let now = Instant::now();
    let auth = Arc::new(authenticator(&[Algorithm::Md5], policy, now));
    let engine = Engine::new(Arc::new(config(Forking::Parallel, false)), store, registrar, 0).with_auth(auth);
    Harness { engine, now }
}

fn harness() -> Harness {
    harness_with(AuthPolicy { trusted_peers: vec![PeerPrefix::parse("203.0.113.0/24").unwrap()], ..Default::default() })
}

/// Registers `user` at `from`, answering the 401 (as bob with his password).
fn register(h: &mut Harness, user: &str, password: &str, from: &str) {
    let text = |cseq: u32, auth: &str| {
        format!("REGISTER sip:example.com SIP/2.0\nVia: SIP/2.0/UDP {from};branch=z9hG4bKreg{cseq}\nMax-Forwards: 70\nFrom: <sip:{user}@example.com>;tag=r1\nTo: <sip:{user}@example.com>\nCall-ID: reg-{user}\nCSeq: {cseq} REGISTER\nContact: <sip:{user}@{from}>\n{auth}Expires: 3600\nContent-Length: 0\n\n")
    };
    let first = sent(&h.send(from, &text(1, "")));
    let nonce = nonce_of(std::str::from_utf8(first[0].1.get(HeaderName::WwwAuthenticate).unwrap()).unwrap());
    let answer = client_answer(Algorithm::Md5, user, "example.com", password, &nonce, "REGISTER", "sip:example.com", 1);
    let ok = sent(&h.send(from, &text(2, &format!("Authorization: {answer}\n"))));
    assert_eq!(ok[0].1.status(), Some(200));
}

/// A request of `method` from `from_uri` (tag f1), to `ruri`, with extra header lines.
fn request(method: &str, ruri: &str, from_uri: &str, to_tag: &str, call: &str, extra: &str) -> String {
    let to_tag = if to_tag.is_empty() { String::new() } else { format!(";tag={to_tag}") };
    let rack = if method == "PRACK" { "RAck: 1 1 INVITE\n" } else { "" };
    let event = if matches!(method, "SUBSCRIBE" | "NOTIFY" | "PUBLISH") { "Event: presence\n" } else { "" };
    let sub = if method == "NOTIFY" { "Subscription-State: active\n" } else { "" };
    let refer = if method == "REFER" { format!("Refer-To: <sip:x@{FOREIGN}>\n") } else { String::new() };
    format!("{method} {ruri} SIP/2.0\nVia: SIP/2.0/UDP {CAROL};branch=z9hG4bK-{call};rport\n{extra}Max-Forwards: 70\nFrom: <{from_uri}>;tag=f1\nTo: <{ruri}>{to_tag}\nCall-ID: {call}\nCSeq: 1 {method}\nContact: <sip:carol@{CAROL}>\n{rack}{event}{sub}{refer}Content-Length: 0\n\n")
}

const METHODS: [&str; 13] = [
    "INVITE",
    "MESSAGE",
    "OPTIONS",
    "NOTIFY",
    "INFO",
    "BYE",
    "SUBSCRIBE",
    "REFER",
    "PUBLISH",
    "UPDATE",
    "PRACK",
    "ACK",
    "CANCEL",
];

/// The Route lines of the four situations of the relay matrix (issue 16).
fn situations() -> [(&'static str, &'static str, String); 4] {
    [
        ("no To tag", "", String::new()),
        ("invented To tag", "x9", String::new()),
        ("herald's own Route without signature", "x9", format!("Route: <sip:{PROXY};lr>\n")),
        ("a foreign Route", "", "Route: <sip:198.51.100.30;lr>\n".to_owned()),
    ]
}

fn reached(out: &[Output], host: &str) -> usize {
    sent(out).iter().filter(|(p, m)| m.is_request() && p.addr.ip() == addr(host).ip()).count()
}

#[test]
fn without_credentials_nothing_is_relayed_whatever_the_method_tag_or_route() {
    let mut h = harness();
    for method in METHODS {
        for (i, (situation, to_tag, route)) in situations().iter().enumerate() {
            let call = format!("relay-{method}-{i}");
            let ruri = if route.contains("198.51.100.30") {
                "sip:bob@example.com".to_owned() // to a local user, but routed away
            } else {
                format!("sip:victim@{FOREIGN}")
            };
            for from_uri in ["sip:carol@other.org", "sip:alice@example.com"] {
                let out = h.send(CAROL, &request(method, &ruri, from_uri, to_tag, &call, route));
                assert_eq!(reached(&out, FOREIGN) + reached(&out, "198.51.100.30:5060"), 0, "{method}, {situation}");
                let answers: Vec<u16> = sent(&out).iter().filter_map(|(_, m)| m.status()).collect();
                let expected: &[u16] = match method {
                    "ACK" => &[],
                    "CANCEL" => &[481],
                    _ => &[407],
                };
                assert_eq!(answers, expected, "{method}, {situation}, from {from_uri}");
            }
        }
    }
    assert_eq!(h.engine.transactions(), 0, "all answered statelessly");
    // Nothing is retransmitted either.
    assert!(sent(&h.advance(Duration::from_secs(40))).is_empty());
}

#[test]
fn a_trusted_peer_relays_without_credentials() {
    let mut h = harness();
    for method in METHODS.iter().filter(|m| !matches!(**m, "CANCEL")) {
        let call = format!("trunk-{method}");
        let text = request(method, &format!("sip:x@{FOREIGN}"), "sip:carol@other.org", "", &call, "")
            .replace(&format!("UDP {CAROL}"), &format!("UDP {TRUNK}"));
        let out = h.send(TRUNK, &text);
        assert_eq!(reached(&out, FOREIGN), 1, "{method}");
    }
    // A CANCEL for an INVITE herald never saw is still forwarded for a trusted peer (§16.10).
    let cancel = request("CANCEL", &format!("sip:x@{FOREIGN}"), "sip:carol@other.org", "", "trunk-c", "")
        .replace(&format!("UDP {CAROL}"), &format!("UDP {TRUNK}"));
    assert_eq!(reached(&h.send(TRUNK, &cancel), FOREIGN), 1);
    // The trust is in the source address, not in what the message says.
    let text = request("OPTIONS", &format!("sip:x@{FOREIGN}"), "sip:carol@other.org", "", "not-trunk", "")
        .replace(&format!("UDP {CAROL}"), &format!("UDP {TRUNK}"));
    assert_eq!(reached(&h.send(CAROL, &text), FOREIGN), 0);
}

#[test]
fn an_authenticated_user_may_relay_any_method() {
    let mut h = harness();
    for method in ["OPTIONS", "NOTIFY", "INFO", "BYE", "MESSAGE"] {
        let call = format!("auth-{method}");
        let ruri = format!("sip:x@{FOREIGN}");
        let first = sent(&h.send(ALICE, &request(method, &ruri, "sip:alice@example.com", "", &call, "")));
        let nonce = nonce_of(std::str::from_utf8(first[0].1.get(HeaderName::ProxyAuthenticate).unwrap()).unwrap());
        let answer = client_answer(Algorithm::Md5, "alice", "example.com", "secret-a", &nonce, method, &ruri, 1);
        let retry =
            request(method, &ruri, "sip:alice@example.com", "", &call, &format!("Proxy-Authorization: {answer}\n"))
                .replace("CSeq: 1", "CSeq: 2")
                .replace(&format!("z9hG4bK-{call}"), &format!("z9hG4bK-{call}-2"));
        assert_eq!(reached(&h.send(ALICE, &retry), FOREIGN), 1, "{method}");
    }
}

/// An inbound call from carol (other.org) to bob through herald: the forwarded INVITE, and
/// the Record-Route herald signed.
fn inbound_call(h: &mut Harness, call: &str) -> (Message, String) {
    register(h, "bob", "secret-b", BOB);
    let inv = request("INVITE", "sip:bob@example.com", "sip:carol@other.org", "", call, "");
    let out = sent(&h.send(CAROL, &inv));
    let (_, fwd) = out.iter().find(|(p, m)| p.addr == addr(BOB) && m.method() == Some(Method::Invite)).unwrap();
    let rr = String::from_utf8_lossy(fwd.get(HeaderName::RecordRoute).unwrap()).into_owned();
    assert!(rr.starts_with(&format!("<sip:{PROXY};lr;hs=")), "{rr}");
    (fwd.clone(), rr)
}

fn in_dialog(method: &str, from_callee: bool, call: &str, route: &str, branch: &str) -> String {
    // §12.2.1.1: the callee's requests have the tags the other way round.
    let (ruri, from, to, via) = if from_callee {
        (format!("sip:carol@{CAROL}"), "<sip:bob@example.com>;tag=b1", "<sip:carol@other.org>;tag=f1", BOB)
    } else {
        (format!("sip:bob@{BOB}"), "<sip:carol@other.org>;tag=f1", "<sip:bob@example.com>;tag=b1", CAROL)
    };
    format!("{method} {ruri} SIP/2.0\nVia: SIP/2.0/UDP {via};branch=z9hG4bK-{branch}\nRoute: {route}\nMax-Forwards: 70\nFrom: {from}\nTo: {to}\nCall-ID: {call}\nCSeq: 5 {method}\nContent-Length: 0\n\n")
}

#[test]
fn requests_of_a_dialog_herald_record_routed_pass_both_ways() {
    let mut h = harness();
    let (fwd, rr) = inbound_call(&mut h, "dlg1");
    sent(&h.send(BOB, &answer(&fwd, 200, "OK", "b1")));
    // Neither party is authenticated here: the signed route is the proof.
    let ack = sent(&h.send(CAROL, &in_dialog("ACK", false, "dlg1", &rr, "ack1")));
    assert_eq!((ack.len(), ack[0].0.addr, ack[0].1.method()), (1, addr(BOB), Some(Method::Ack)));
    let info = sent(&h.send(CAROL, &in_dialog("INFO", false, "dlg1", &rr, "info1")));
    assert!(info.iter().any(|(p, m)| p.addr == addr(BOB) && m.method() == Some(Method::Info)));
    assert_eq!(info.iter().find(|(_, m)| m.is_request()).unwrap().1.routes().count(), 0, "our Route is removed");
    let bye = sent(&h.send(BOB, &in_dialog("BYE", true, "dlg1", &rr, "bye1")));
    assert!(bye.iter().any(|(p, m)| p.addr == addr(CAROL) && m.method() == Some(Method::Bye)), "{bye:?}");
    // Behind an outbound proxy Route of herald's own that the phone added above it.
    let both = format!("<sip:{PROXY};lr>, {rr}");
    let bye = sent(&h.send(BOB, &in_dialog("BYE", true, "dlg1", &both, "bye2")));
    assert!(bye.iter().any(|(p, m)| p.addr == addr(CAROL) && m.method() == Some(Method::Bye)));
}

#[test]
fn a_route_signed_for_another_dialog_or_altered_proves_nothing() {
    let mut h = harness();
    let (_, rr) = inbound_call(&mut h, "dlg2");
    let refused = |h: &mut Harness, text: String| {
        let out = sent(&h.send(CAROL, &text));
        assert!(out.iter().all(|(_, m)| !m.is_request()), "{out:?}");
        out.iter().map(|(_, m)| m.status().unwrap()).collect::<Vec<_>>()
    };
    // The same signature on another Call-ID: a relay attempt.
    assert_eq!(refused(&mut h, in_dialog("BYE", false, "other-call", &rr, "x1")), [407]);
    // Tags that are neither the creator's.
    let text = in_dialog("BYE", false, "dlg2", &rr, "x2").replace("tag=f1", "tag=f2");
    assert_eq!(refused(&mut h, text), [407]);
    // An altered signature, and a signed Route of another proxy.
    let forged = rr.replace("hs=", "hs=0");
    assert_eq!(refused(&mut h, in_dialog("BYE", false, "dlg2", &forged, "x3")), [407]);
    let elsewhere = rr.replace(PROXY, "198.51.100.30:5060");
    let text = in_dialog("BYE", false, "dlg2", &elsewhere, "x4");
    let out = sent(&h.send(CAROL, &text));
    assert_eq!(reached(&h.send(CAROL, &text), "198.51.100.30:5060"), 0, "{out:?}");
    assert!(refused(&mut h, in_dialog("ACK", false, "other-call", &rr, "x5")).is_empty(), "an ACK is dropped");
}

#[test]
fn a_cancel_is_forwarded_only_for_an_invite_herald_holds() {
    let mut h = harness();
    let (fwd, _) = inbound_call(&mut h, "cx1");
    h.send(BOB, &answer(&fwd, 180, "Ringing", "b1"));
    let cancel = request("CANCEL", "sip:bob@example.com", "sip:carol@other.org", "", "cx1", "");
    let out = sent(&h.send(CAROL, &cancel));
    assert!(out.iter().any(|(p, m)| p.addr == addr(BOB) && m.method() == Some(Method::Cancel)));
    // To a foreign host, for a transaction herald never had: 481, nothing relayed.
    let stray = request("CANCEL", &format!("sip:x@{FOREIGN}"), "sip:carol@other.org", "", "cx2", "");
    let out = h.send(CAROL, &stray);
    assert_eq!(reached(&out, FOREIGN), 0);
    assert_eq!(sent(&out)[0].1.status(), Some(481));
}

#[test]
fn unauthenticated_requests_hold_no_state_and_are_answered_once() {
    let mut h = harness();
    let mut challenges = 0;
    for i in 0..1000 {
        let reg = format!("REGISTER sip:example.com SIP/2.0\nVia: SIP/2.0/UDP {CAROL};branch=z9hG4bKflood{i}\nMax-Forwards: 70\nFrom: <sip:bob@example.com>;tag=r{i}\nTo: <sip:bob@example.com>\nCall-ID: flood-reg-{i}\nCSeq: 1 REGISTER\nContact: <sip:bob@{CAROL}>\nContent-Length: 0\n\n");
        let out = sent(&h.send(CAROL, &reg));
        assert_eq!(out.len(), 1);
        challenges += usize::from(out[0].1.status() == Some(401));
        let inv = invite("bob", &format!("flood-inv-{i}"));
        let out = sent(&h.send(ALICE, &inv));
        assert_eq!(out.len(), 1, "no 100 Trying either: no transaction");
        challenges += usize::from(out[0].1.status() == Some(407));
    }
    assert_eq!(challenges, 2000);
    assert_eq!(h.engine.transactions(), 0);
    assert_eq!(h.engine.held_bytes(), 0);
    // Past Timer G's and Timer H's whole range (64*T1, RFC 3261 §17.2.1): nothing is resent.
    for _ in 0..70 {
        assert!(sent(&h.advance(Duration::from_millis(500))).is_empty());
    }
    // A retransmission is simply challenged again (a fresh nonce), still without state; the
    // ACK for the 407 carries herald's To tag and ends here.
    let again = sent(&h.send(ALICE, &invite("bob", "flood-inv-7")));
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].1.status(), Some(407));
    let tag = again[0].1.to_tag().unwrap().unwrap().to_owned();
    let ack = format!("ACK sip:bob@example.com SIP/2.0\nVia: SIP/2.0/UDP {ALICE};branch=z9hG4bK-flood-inv-7;rport\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=a1\nTo: <sip:bob@example.com>;tag={tag}\nCall-ID: flood-inv-7\nCSeq: 1 ACK\nContent-Length: 0\n\n");
    register(&mut h, "bob", "secret-b", BOB);
    let before = h.engine.transactions();
    assert!(sent(&h.send(ALICE, &ack)).is_empty(), "not forwarded to bob");
    assert_eq!(h.engine.transactions(), before);
}

#[test]
fn local_answers_to_unauthenticated_requests_are_stateless() {
    let mut h = harness();
    // An inbound call for a user herald does not know, and an OPTIONS for herald itself.
    let out = sent(&h.send(CAROL, &request("INVITE", "sip:nobody@example.com", "sip:carol@other.org", "", "l1", "")));
    assert_eq!(out.iter().map(|(_, m)| m.status().unwrap()).collect::<Vec<_>>(), [404]);
    let out = sent(&h.send(CAROL, &request("OPTIONS", &format!("sip:{PROXY}"), "sip:carol@other.org", "", "l2", "")));
    assert_eq!(out[0].1.status(), Some(200));
    assert!(out[0].1.get(HeaderName::Allow).is_some());
    // A request that fails validation (§16.3: Max-Forwards 0).
    let zero = request("INVITE", "sip:bob@example.com", "sip:carol@other.org", "", "l3", "")
        .replace("Max-Forwards: 70", "Max-Forwards: 0");
    assert_eq!(sent(&h.send(CAROL, &zero))[0].1.status(), Some(483));
    assert_eq!((h.engine.transactions(), h.engine.held_bytes()), (0, 0));
    assert!(sent(&h.advance(Duration::from_secs(40))).is_empty());
}

#[test]
fn an_options_to_a_name_of_heralds_own_is_answered_not_challenged() {
    // `localhost` designates herald without being a served domain (issue 15): an OPTIONS
    // keep-alive to it is answered by herald, which is no relay.
    let mut cfg = config(Forking::Parallel, false);
    cfg.identity = cfg.identity.with_names(["localhost".to_owned()]);
    let registrar = Registrar::new(RegistrarConfig::default());
    let store = Arc::new(registrar.new_store());
    let now = Instant::now();
    let auth = Arc::new(authenticator(&[Algorithm::Md5], AuthPolicy::default(), now));
    let mut h = Harness { engine: Engine::new(Arc::new(cfg), store, registrar, 0).with_auth(auth), now };
    let out = sent(&h.send(CAROL, &request("OPTIONS", "sip:localhost", "sip:carol@other.org", "", "ka1", "")));
    assert_eq!(out.iter().map(|(_, m)| m.status().unwrap()).collect::<Vec<_>>(), [200]);
    // A user at that name is not herald: forwarding it would loop back here, and it is no
    // served domain either, so it is challenged like any other foreign target.
    let out = sent(&h.send(CAROL, &request("OPTIONS", "sip:x@localhost", "sip:carol@other.org", "", "ka2", "")));
    assert_eq!(out.iter().map(|(_, m)| m.status().unwrap()).collect::<Vec<_>>(), [407]);
}
