//! AoR forms through a running herald (issue 18 item 3), both directions: a REGISTER's To and a
//! call's Request-URI with and without port and transport, `sips:` against `sip:`, the domain's
//! case (ignored) and the user's (kept, RFC 3261 §19.1.4); `[registrar] use_domain = false`
//! makes bob@a.test and bob@b.test one user. Phones are UDP sockets on loopback.

mod common;
mod nat_support;
mod netns_support;

use common::{test_dir, Herald, HeraldConfig, HeraldExtras};
use nat_support::{request_uri, respond, status, Ua};
use std::net::UdpSocket;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(3);

fn ua() -> Ua {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    Ua::new(s)
}

fn start(name: &str, domains: &[&str], registrar: &str) -> Herald {
    let extras = HeraldExtras {
        domains: domains.iter().map(|d| d.to_string()).collect(),
        toml: Some(format!(
            "[flood]\ntrusted = [\"127.0.0.0/8\"]\n[auth]\nenabled = false\n[registrar]\n{registrar}\n"
        )),
        ..HeraldExtras::default()
    };
    Herald::start_with(&test_dir(name), &HeraldConfig::default(), &extras)
}

/// `phone` registers with `to` as its To URI (the AoR as written) and Request-URI `sip:DOMAIN`.
fn register(herald: &Herald, phone: &mut Ua, to: &str, domain: &str) {
    let local = phone.addr;
    let user = to.split([':', '@']).nth(1).unwrap();
    phone.send(
        herald.addr,
        &format!("REGISTER sip:{domain} SIP/2.0\nVia: SIP/2.0/UDP {local};branch=z9hG4bK-r{user}{}\nMax-Forwards: 70\nFrom: <{to}>;tag=r1\nTo: <{to}>\nCall-ID: reg-{user}-{}\nCSeq: 1 REGISTER\nContact: <sip:{user}@{local}>\nExpires: 300\nContent-Length: 0\n\n", local.port(), local.port()),
    );
    let answer = phone.wait_for(WAIT, |m| status(m).is_some_and(|s| s >= 200));
    let code = answer.as_ref().and_then(|(m, _)| status(m));
    assert_eq!(code, Some(200), "REGISTER To {to}:\n{}", herald.log_text());
}

/// Calls `ruri` from `caller`: `Ok(())` when the INVITE reached `callee` (which answers 486),
/// `Err(status)` with herald's own answer otherwise.
fn call(herald: &Herald, caller: &mut Ua, callee: &mut Ua, ruri: &str, call_id: &str) -> Result<(), Option<u16>> {
    let local = caller.addr;
    caller.send(
        herald.addr,
        &format!("INVITE {ruri} SIP/2.0\nVia: SIP/2.0/UDP {local};branch=z9hG4bK-{call_id};rport\nMax-Forwards: 70\nFrom: <sip:alice@example.test>;tag=a1\nTo: <{ruri}>\nCall-ID: {call_id}\nCSeq: 1 INVITE\nContact: <sip:alice@{local}>\nContent-Length: 0\n\n"),
    );
    if let Some((inv, from)) = callee.wait_for(WAIT, |m| m.starts_with("INVITE ") && m.contains(call_id)) {
        assert_eq!(request_uri(&inv), format!("sip:{}", inv_contact_user(&inv, callee)), "to the registered contact");
        callee.send(from, &respond(&inv, 486, "Busy Here", "x", None));
        let busy = caller.wait_for(WAIT, |m| status(m) == Some(486) && m.contains(call_id));
        assert!(busy.is_some(), "the callee's 486 reached the caller");
        return Ok(());
    }
    let answer =
        caller.wait_for(Duration::from_millis(200), |m| status(m).is_some_and(|s| s >= 300) && m.contains(call_id));
    Err(answer.and_then(|(m, _)| status(&m)))
}

/// `user@addr` of the callee's contact, as the INVITE's Request-URI should be.
fn inv_contact_user(inv: &str, callee: &Ua) -> String {
    let user = request_uri(inv).trim_start_matches("sip:").split('@').next().unwrap_or("").to_owned();
    format!("{user}@{}", callee.addr)
}

#[test]
fn registrations_and_calls_match_whatever_port_transport_scheme_and_domain_case() {
    let herald = start("nat_aor_forms_domain", &["example.test"], "use_domain = true");
    let mut alice = ua();
    let (mut bob, mut carol, mut dave) = (ua(), ua(), ua());
    // Registered with port and transport, called without (and the domain in capitals).
    register(&herald, &mut bob, "sip:bob@example.test:5060;transport=udp", "example.test");
    assert_eq!(call(&herald, &mut alice, &mut bob, "sip:bob@EXAMPLE.test", "c1"), Ok(()));
    // Registered without, called with.
    register(&herald, &mut carol, "sip:carol@example.test", "example.test");
    assert_eq!(call(&herald, &mut alice, &mut carol, "sip:carol@example.test:5060;transport=udp", "c2"), Ok(()));
    assert_eq!(call(&herald, &mut alice, &mut carol, "sip:carol@example.test:5070", "c3"), Ok(()));
    // Registered as sips:, called as sip: (one AoR; the contact itself is sip: over UDP).
    register(&herald, &mut dave, "sips:dave@Example.Test", "example.test");
    assert_eq!(call(&herald, &mut alice, &mut dave, "sip:dave@example.test", "c4"), Ok(()));
    // The user part is case-sensitive: nobody is registered as Bob.
    assert_eq!(call(&herald, &mut alice, &mut bob, "sip:Bob@example.test", "c5"), Err(Some(404)));
}

#[test]
fn without_use_domain_a_user_is_one_user_over_every_served_domain() {
    for (use_domain, expected) in [(false, Ok(())), (true, Err(Some(404)))] {
        let herald = start(
            &format!("nat_aor_forms_use_domain_{use_domain}"),
            &["a.test", "b.test"],
            &format!("use_domain = {use_domain}"),
        );
        let (mut alice, mut bob) = (ua(), ua());
        register(&herald, &mut bob, "sip:bob@a.test", "a.test");
        assert_eq!(call(&herald, &mut alice, &mut bob, "sip:bob@a.test", "u1"), Ok(()));
        assert_eq!(
            call(&herald, &mut alice, &mut bob, "sip:bob@b.test:5060", "u2"),
            expected,
            "use_domain = {use_domain}"
        );
    }
}
