//! The engine with digest authentication on: challenges, answers, the requests that pass
//! without credentials, and what is forwarded.

use super::*;
use crate::auth::tests::{authenticator, client_answer, nonce_of};
use crate::auth::{Algorithm, AuthPolicy};
use herald_sip::HeaderName;

fn harness(stateless: bool) -> Harness {
    let registrar = Registrar::new(RegistrarConfig::default());
    let store = Arc::new(registrar.new_store());
    let now = Instant::now();
    let auth = Arc::new(authenticator(&Algorithm::ALL, AuthPolicy::default(), now));
    let engine = Engine::new(Arc::new(config(Forking::Parallel, stateless)), store, registrar, 0).with_auth(auth);
    Harness { engine, now }
}

fn register_text(user: &str, from: &str, cseq: u32, auth: &str) -> String {
    format!(
        "REGISTER sip:example.com SIP/2.0\nVia: SIP/2.0/UDP {from};branch=z9hG4bKreg{cseq}{user}\nMax-Forwards: 70\nFrom: <sip:{user}@example.com>;tag=r1\nTo: <sip:{user}@example.com>\nCall-ID: reg-{user}\nCSeq: {cseq} REGISTER\nContact: <sip:{user}@{from}>\n{auth}Expires: 3600\nContent-Length: 0\n\n"
    )
}

/// The first challenge of a 401/407 and its nonce.
fn challenge_of(resp: &Message, header: HeaderName) -> (Vec<String>, String) {
    let values: Vec<String> =
        resp.fields(header).map(|h| String::from_utf8_lossy(resp.value_of(h)).into_owned()).collect();
    assert_eq!(values.len(), 3, "one challenge per algorithm");
    let nonce = nonce_of(&values[0]);
    (values, nonce)
}

/// REGISTER → 401 → REGISTER with credentials (`password`) → the final response.
fn register_with(h: &mut Harness, user: &str, from: &str, password: &str) -> Message {
    let first = sent(&h.send(from, &register_text(user, from, 1, "")));
    assert_eq!(first[0].1.status(), Some(401));
    let (_, nonce) = challenge_of(&first[0].1, HeaderName::WwwAuthenticate);
    let answer =
        client_answer(Algorithm::Sha512_256, user, "example.com", password, &nonce, "REGISTER", "sip:example.com", 1);
    let second = sent(&h.send(from, &register_text(user, from, 2, &format!("Authorization: {answer}\n"))));
    second[0].1.clone()
}

#[test]
fn register_is_challenged_then_accepted() {
    let mut h = harness(false);
    let first = sent(&h.send(BOB, &register_text("bob", BOB, 1, "")));
    let resp = &first[0].1;
    assert_eq!(resp.status(), Some(401));
    let (values, _) = challenge_of(resp, HeaderName::WwwAuthenticate);
    assert!(values[0].contains("algorithm=SHA-512-256") && values[2].contains("algorithm=MD5"), "{values:?}");
    assert!(resp.get(HeaderName::ProxyAuthenticate).is_none());
    assert_eq!(register_with(&mut h, "bob", BOB, "secret-b").status(), Some(200));
    // Bob is now registered: an inbound call reaches him.
    let inbound = invite("bob", "in1").replace("sip:alice@example.com>;tag=a1", "sip:carol@other.org>;tag=a1");
    let out = sent(&h.send(ALICE, &inbound));
    assert!(out.iter().any(|(p, m)| p.addr == addr(BOB) && m.method() == Some(Method::Invite)));
}

#[test]
fn a_provisioned_user_without_bindings_is_temporarily_unavailable() {
    // RFC 3261 §16.5: an empty target set gets 480; 404 only where the user does not exist.
    let mut h = harness(false);
    let from_outside =
        |to: &str, call: &str| invite(to, call).replace("sip:alice@example.com>;tag=a1", "sip:carol@other.org>;tag=a1");
    let out = sent(&h.send(ALICE, &from_outside("bob", "unreg1")));
    assert_eq!(out.last().unwrap().1.status(), Some(480), "bob is in the users file, not registered");
    let out = sent(&h.send(ALICE, &from_outside("nobody", "unreg2")));
    assert_eq!(out.last().unwrap().1.status(), Some(404), "nobody is not a user");
}

#[test]
fn wrong_password_and_unknown_user_get_the_same_fresh_challenge() {
    let mut h = harness(false);
    let wrong = register_with(&mut h, "bob", BOB, "guess");
    assert_eq!(wrong.status(), Some(401));
    let unknown = register_with(&mut h, "mallory", BOB2, "guess");
    assert_eq!(unknown.status(), Some(401));
    let strip = |m: &Message| {
        let (v, n) = challenge_of(m, HeaderName::WwwAuthenticate);
        v.iter().map(|s| s.replace(&n, "N")).collect::<Vec<_>>()
    };
    assert_eq!(strip(&wrong), strip(&unknown));
    assert_eq!(wrong.reason(), unknown.reason());
}

#[test]
fn registering_as_someone_else_is_forbidden() {
    let mut h = harness(false);
    let first = sent(&h.send(BOB, &register_text("bob", BOB, 1, "")));
    let (_, nonce) = challenge_of(&first[0].1, HeaderName::WwwAuthenticate);
    // Alice's valid credentials on a REGISTER for bob.
    let answer =
        client_answer(Algorithm::Md5, "alice", "example.com", "secret-a", &nonce, "REGISTER", "sip:example.com", 1);
    let r = sent(&h.send(BOB, &register_text("bob", BOB, 2, &format!("Authorization: {answer}\n"))));
    assert_eq!(r[0].1.status(), Some(403));
}

#[test]
fn malformed_credentials_get_400() {
    let mut h = harness(false);
    let bad = "Authorization: Digest realm=\"example.com\", username=\"bob\"\n";
    let r = sent(&h.send(BOB, &register_text("bob", BOB, 1, bad)));
    assert_eq!(r[0].1.status(), Some(400));
}

#[test]
fn a_local_caller_is_challenged_then_forwarded_without_our_credentials() {
    let mut h = harness(false);
    assert_eq!(register_with(&mut h, "bob", BOB, "secret-b").status(), Some(200));
    let first = sent(&h.send(ALICE, &invite("bob", "call-a")));
    let resp = first.iter().find(|(_, m)| m.status().is_some_and(|s| s >= 200)).unwrap().1.clone();
    assert_eq!(resp.status(), Some(407));
    let (_, nonce) = challenge_of(&resp, HeaderName::ProxyAuthenticate);
    assert!(resp.get(HeaderName::WwwAuthenticate).is_none());
    // ACK for the 407 (same branch) is absorbed by the transaction.
    let ack = format!("ACK sip:bob@example.com SIP/2.0\nVia: SIP/2.0/UDP {ALICE};branch=z9hG4bK-call-a;rport\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=a1\nTo: <sip:bob@example.com>;tag={}\nCall-ID: call-a\nCSeq: 1 ACK\nContent-Length: 0\n\n", resp.to_tag().unwrap().unwrap());
    assert!(sent(&h.send(ALICE, &ack)).is_empty());
    let answer = client_answer(
        Algorithm::Sha256,
        "alice",
        "example.com",
        "secret-a",
        &nonce,
        "INVITE",
        "sip:bob@example.com",
        1,
    );
    let foreign =
        "Digest username=\"a\", realm=\"carrier.net\", nonce=\"n\", uri=\"sip:bob@example.com\", response=\"00\"";
    let retry = invite("bob", "call-a").replace("branch=z9hG4bK-call-a", "branch=z9hG4bK-call-a2").replace(
        "CSeq: 1 INVITE",
        &format!("CSeq: 2 INVITE\nProxy-Authorization: {answer}\nProxy-Authorization: {foreign}"),
    );
    let out = sent(&h.send(ALICE, &retry));
    let (to, fwd) = out.iter().find(|(_, m)| m.method() == Some(Method::Invite)).expect("forwarded");
    assert_eq!(to.addr, addr(BOB));
    let left: Vec<&[u8]> = fwd.fields(HeaderName::ProxyAuthorization).map(|f| fwd.value_of(f)).collect();
    assert_eq!(left, [foreign.as_bytes()], "our realm's credentials are consumed, others pass");
    assert_eq!(fwd.body(), b"v=0\r\n");
}

#[test]
fn inbound_calls_to_local_users_need_no_credentials_but_relays_do() {
    let mut h = harness(false);
    assert_eq!(register_with(&mut h, "bob", BOB, "secret-b").status(), Some(200));
    let inbound = invite("bob", "in2").replace("sip:alice@example.com>;tag=a1", "sip:carol@other.org>;tag=a1");
    let out = sent(&h.send(ALICE, &inbound));
    assert!(out.iter().any(|(p, m)| p.addr == addr(BOB) && m.method() == Some(Method::Invite)));
    // From outside, to outside: herald is not an open relay.
    let relay = inbound.replace("INVITE sip:bob@example.com", "INVITE sip:bob@198.51.100.9").replace("in2", "relay1");
    let out = sent(&h.send(ALICE, &relay));
    assert_eq!(out.last().unwrap().1.status(), Some(407));
    // From outside to a local user but with a Route elsewhere: also a relay.
    let routed =
        inbound.replace("Max-Forwards: 70", "Max-Forwards: 70\nRoute: <sip:198.51.100.9;lr>").replace("in2", "rt1");
    let out = sent(&h.send(ALICE, &routed));
    assert_eq!(out.last().unwrap().1.status(), Some(407));
}

#[test]
fn in_dialog_requests_pass_only_along_a_route_herald_signed() {
    let mut h = harness(false);
    assert_eq!(register_with(&mut h, "bob", BOB, "secret-b").status(), Some(200));
    let inbound = invite("bob", "dlg9").replace("sip:alice@example.com>;tag=a1", "sip:carol@other.org>;tag=a1");
    let out = sent(&h.send(ALICE, &inbound));
    let fwd = &out.iter().find(|(_, m)| m.method() == Some(Method::Invite)).unwrap().1;
    let rr = String::from_utf8_lossy(fwd.get(HeaderName::RecordRoute).unwrap()).into_owned();
    let bye = |route: &str, branch: &str| {
        format!("BYE sip:bob@{BOB} SIP/2.0\nVia: SIP/2.0/UDP {ALICE};branch=z9hG4bK-{branch}\nRoute: {route}\nMax-Forwards: 70\nFrom: <sip:carol@other.org>;tag=a1\nTo: <sip:bob@example.com>;tag=b1\nCall-ID: dlg9\nCSeq: 2 BYE\nContent-Length: 0\n\n")
    };
    let out = sent(&h.send(ALICE, &bye(&rr, "bye9")));
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].0.addr, out[0].1.method()), (addr(BOB), Some(Method::Bye)));
    // The Route a sender writes itself proves nothing (issue 16).
    let out = sent(&h.send(ALICE, &bye(&format!("<sip:{PROXY};lr>"), "bye10")));
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].0.addr, out[0].1.status()), (addr(ALICE), Some(407)));
}

#[test]
fn stateless_mode_challenges_too() {
    let mut h = harness(true);
    let first = sent(&h.send(BOB, &register_text("bob", BOB, 1, "")));
    assert_eq!(first[0].1.status(), Some(401));
    assert_eq!(register_with(&mut h, "bob", BOB, "secret-b").status(), Some(200));
    let out = sent(&h.send(ALICE, &invite("bob", "sl1")));
    assert_eq!(out[0].1.status(), Some(407));
    let (_, nonce) = challenge_of(&out[0].1, HeaderName::ProxyAuthenticate);
    let answer =
        client_answer(Algorithm::Md5, "alice", "example.com", "secret-a", &nonce, "INVITE", "sip:bob@example.com", 1);
    let retry =
        invite("bob", "sl1").replace("CSeq: 1 INVITE", &format!("CSeq: 2 INVITE\nProxy-Authorization: {answer}"));
    let out = sent(&h.send(ALICE, &retry));
    let (to, fwd) = &out[0];
    assert_eq!((to.addr, fwd.method()), (addr(BOB), Some(Method::Invite)));
    assert!(fwd.get(HeaderName::ProxyAuthorization).is_none());
}
