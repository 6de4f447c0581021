//! Browser phones through herald's WebSocket listeners (RFC 7118, issue 20): headless Chromium
//! (Debian package `chromium`) runs JsSIP 3.13.8 (vendored in tests/browser_support, nothing
//! fetched at run time) with a fake microphone, against a real `herald serve` with a `ws` and a
//! `wss` listener and digest authentication as configured by default (users added with
//! `herald users add`).
//!
//! * Browser to browser: alice registers over WSS (herald's certificate comes from a CA the test
//!   made; Chromium trusts the key by its SPKI hash), bob over WS; alice calls bob, who answers;
//!   both see the call confirmed (ACK delivered), alice hangs up and both see it ended (BYE
//!   delivered). Each side receives the other's SDP byte for byte.
//! * Browser to SIPp over UDP (interworking WSS to UDP): carol is a SIPp callee registered over
//!   UDP (tests/browser_support/uas_webrtc.xml answers with an SDP a browser accepts); alice
//!   calls her over WSS: INVITE (challenged, answered), 180, 200, ACK, BYE, 200 complete, the
//!   INVITE carries two Record-Route values (herald's UDP and WSS listeners, RFC 5658), and the
//!   SDP reaches each side untouched: herald relays no media (README, "Browser phones").
//! * SIPp over UDP to browser (and back, UDP to WS): carol (tests/browser_support/uac_webrtc.xml,
//!   challenged, answering) calls bob, a browser on WS, who answers; the ACK and SIPp's BYE reach
//!   him along the Record-Route (UDP and WS listeners); SDP untouched both ways.
//!
//! Every wait is bounded; Chromium, SIPp and herald are killed when a test ends, however it
//! ends. Files: `target/tmp/browser_*/` (each browser's log holds the page's console lines).

mod browser_support;
mod common;
mod tls_support;

use browser_support::herald::DOMAIN;
use browser_support::{sipp_messages, Lab, Traced, Ws};
use common::Sipp;
use serde_json::json;
use std::path::Path;
use std::time::Duration;

/// Chromium's start and JsSIP's registration (REGISTER, 401, REGISTER with credentials, 200).
const REGISTERED: Duration = Duration::from_secs(30);
/// Any one step of a call.
const STEP: Duration = Duration::from_secs(20);

#[test]
fn browser_calls_browser_over_wss_and_ws() {
    let mut lab = Lab::new("browser_ws_to_ws", &[("alice", "alice-secret"), ("bob", "bob-secret")]);
    lab.open_phone("alice", "alice-secret", Ws::Secure);
    lab.open_phone("bob", "bob-secret", Ws::Plain);
    let alice = lab.expect("alice", "connected", REGISTERED);
    assert!(alice["url"].as_str().unwrap().starts_with("wss://"), "{alice}");
    lab.expect("alice", "registered", REGISTERED);
    lab.expect("bob", "registered", REGISTERED);

    lab.command("alice", json!({ "call": format!("sip:bob@{DOMAIN}") }));
    // The callee's 'confirmed' follows the ACK it received; the caller's, the ACK it sent.
    let incoming = lab.expect("bob", "session", STEP);
    assert_eq!(incoming["originator"], "remote", "{incoming}");
    lab.expect("alice", "confirmed", STEP);
    lab.expect("bob", "confirmed", STEP);
    // SDP passes through herald untouched, both ways.
    assert_eq!(lab.sdp("bob", "remote", "offer"), lab.sdp("alice", "local", "offer"));
    assert_eq!(lab.sdp("alice", "remote", "answer"), lab.sdp("bob", "local", "answer"));

    lab.command("alice", json!({ "hangup": true }));
    let ended = lab.expect("alice", "ended", STEP);
    assert_eq!(ended["originator"], "local", "{ended}");
    let ended = lab.expect("bob", "ended", STEP);
    // bob's call ended by alice's BYE, not by a timeout of his own.
    assert_eq!(ended["originator"], "remote", "{ended}");
}

/// The path of a SIPp scenario of tests/browser_support.
fn scenario(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser_support").join(name);
    path.to_str().unwrap().to_owned()
}

/// SIPp's arguments for one call, its messages logged to `trace`, then `more`.
fn one_call(trace: &Path, more: &[&str]) -> Vec<String> {
    let log = ["-m", "1", "-timeout", "60", "-trace_msg", "-message_file", trace.to_str().unwrap()];
    log.iter().chain(more).map(|s| s.to_string()).collect()
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The first message SIPp `received` (else sent) whose first line starts with `start` and that
/// has a body.
fn with_sdp<'a>(lab: &Lab, messages: &'a [Traced], received: bool, start: &str) -> &'a Traced {
    let found =
        messages.iter().find(|m| m.received == received && m.first_line().starts_with(start) && !m.body().is_empty());
    let what = if received { "received" } else { "sent" };
    found.unwrap_or_else(|| panic!("SIPp {what} no {start} with SDP\n{}", lab.diagnosis()))
}

/// A browser's offer or answer: ICE and DTLS-SRTP, which herald must not touch.
fn assert_webrtc(sdp: &str) {
    for line in ["a=ice-ufrag:", "a=ice-pwd:", "a=fingerprint:", "UDP/TLS/RTP/SAVPF"] {
        assert!(sdp.contains(line), "no {line} in the browser's SDP:\n{sdp}");
    }
}

/// herald record-routes a dialog that crosses transports twice (RFC 5658): its UDP listener
/// toward the SIPp phone and its WebSocket listener `ws` (with `transport=ws` or `wss`) toward
/// the browser, so that in-dialog requests come back through the listener each side uses.
fn assert_two_record_routes(lab: &Lab, m: &Traced, ws: &str) {
    let rr = m.header("Record-Route");
    let (udp, ws_addr) = (format!("<sip:{};", lab.herald.udp), format!("<sip:{}", lab.herald.ws_addr(ws)));
    let udp_side = rr.iter().any(|v| v.starts_with(&udp) && !v.contains("transport="));
    let ws_side = rr.iter().any(|v| v.starts_with(&ws_addr) && v.contains(&format!(";transport={ws};")));
    assert!(rr.len() == 2 && udp_side && ws_side, "Record-Route {rr:?} in\n{}", m.text);
}

/// A SIPp phone on UDP registered as `user` of [`DOMAIN`] (REGISTER, 401, answer, 200) with
/// its contact on port `port`.
fn register_sipp(lab: &Lab, (user, password): (&str, &str), port: u16) {
    let (herald, port) = (lab.herald.udp.to_string(), port.to_string());
    let args = [herald.as_str(), "-s", user, "-au", user, "-ap", password, "-key", "target_domain", DOMAIN];
    let args = [&args[..], &["-key", "contact_host", "127.0.0.1", "-key", "contact_port", &port]].concat();
    let args = [&args[..], &["-m", "1", "-timeout", "30"]].concat();
    Sipp::start(&lab.dir, "register", &scenario("register_auth_domain.xml"), &args).wait(STEP).assert_all_successful(1);
}

#[test]
fn browser_calls_sipp_over_udp() {
    let mut lab = Lab::new("browser_ws_to_udp", &[("alice", "alice-secret"), ("carol", "carol-secret")]);
    let trace = lab.dir.join("uas_messages.log");
    let uas = Sipp::start(&lab.dir, "uas", &scenario("uas_webrtc.xml"), &strs(&one_call(&trace, &[])));
    common::wait_bound(uas.port, false);
    register_sipp(&lab, ("carol", "carol-secret"), uas.port);

    lab.open_phone("alice", "alice-secret", Ws::Secure);
    lab.expect("alice", "registered", REGISTERED);
    lab.command("alice", json!({ "call": format!("sip:carol@{DOMAIN}") }));
    lab.expect("alice", "confirmed", STEP);
    lab.command("alice", json!({ "hangup": true }));
    lab.expect("alice", "ended", STEP);
    // INVITE, ACK and BYE reached the callee, and it answered them all.
    uas.wait(STEP).assert_all_successful(1);

    let messages = sipp_messages(&trace);
    let offer = lab.sdp("alice", "local", "offer");
    assert_webrtc(&offer);
    let invite = with_sdp(&lab, &messages, true, "INVITE ");
    assert_eq!(invite.body(), offer, "the offer the callee received");
    assert_two_record_routes(&lab, invite, "wss");
    let answer = with_sdp(&lab, &messages, false, "SIP/2.0 200").body();
    assert_eq!(lab.sdp("alice", "remote", "answer"), answer, "the answer the browser received");
}

#[test]
fn sipp_over_udp_calls_browser() {
    let mut lab = Lab::new("browser_udp_to_ws", &[("bob", "bob-secret"), ("carol", "carol-secret")]);
    lab.open_phone("bob", "bob-secret", Ws::Plain);
    lab.expect("bob", "registered", REGISTERED);

    // carol, a SIPp caller on UDP, calls bob (answering herald's 407), sends the ACK and, a
    // second later, the BYE.
    let trace = lab.dir.join("uac_messages.log");
    let herald = lab.herald.udp.to_string();
    let args = [herald.as_str(), "-s", "bob", "-key", "caller", "carol", "-au", "carol", "-ap", "carol-secret"];
    let args = one_call(&trace, &[&args[..], &["-key", "target_domain", DOMAIN]].concat());
    let uac = Sipp::start(&lab.dir, "uac", &scenario("uac_webrtc.xml"), &strs(&args));
    let incoming = lab.expect("bob", "session", STEP);
    assert_eq!(incoming["originator"], "remote", "{incoming}");
    lab.expect("bob", "confirmed", STEP);
    let ended = lab.expect("bob", "ended", STEP);
    assert_eq!(ended["originator"], "remote", "{ended}");
    uac.wait(STEP).assert_all_successful(1);

    let messages = sipp_messages(&trace);
    let answer = lab.sdp("bob", "local", "answer");
    assert_webrtc(&answer);
    let ok = with_sdp(&lab, &messages, true, "SIP/2.0 200");
    assert_eq!(ok.body(), answer, "the answer the caller received");
    assert_two_record_routes(&lab, ok, "ws");
    let offer = with_sdp(&lab, &messages, false, "INVITE ").body();
    assert_eq!(lab.sdp("bob", "remote", "offer"), offer, "the offer the browser received");
}
