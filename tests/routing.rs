//! The routing table (`[[route]]`, issue 18) through a running `herald serve`: each action
//! (rejection, next hop with number handling and tel: conversion, location service with a DID
//! turned into an extension, forwarding by Request-URI), first match wins with a catch-all,
//! the source matcher, and the relay rule: an anonymous caller cannot reach a next hop through
//! a rule. Next hops and phones are UDP sockets on loopback that answer as a UAS would. (The
//! gateway-set action end to end, with SIPp gateways, is tests/gateways*.rs.)

mod common;

use common::sip_client::{register, transaction, udp_from};
use common::{header_of, routes, status_of, test_dir, Herald, HeraldConfig, HeraldExtras};
use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(5);

/// A request to `ruri` from the socket `from`.
fn request(method: &str, ruri: &str, from: &UdpSocket, call: &str) -> String {
    let local = from.local_addr().unwrap();
    format!(
        "{method} {ruri} SIP/2.0\r\nVia: SIP/2.0/UDP {local};branch=z9hG4bK-{call};rport\r\nMax-Forwards: 70\r\n\
         From: <sip:caller@other.org>;tag=c-{call}\r\nTo: <{ruri}>\r\nCall-ID: {call}\r\nCSeq: 1 {method}\r\n\
         Contact: <sip:caller@{local}>\r\nContent-Length: 0\r\n\r\n"
    )
}

/// The first request but an ACK (herald's ACK for an earlier 486) that reaches `sock` within
/// `wait`.
fn received(sock: &UdpSocket, wait: Duration) -> Option<(Vec<u8>, SocketAddr)> {
    let deadline = Instant::now() + wait;
    let mut buf = vec![0u8; 65536];
    while Instant::now() < deadline {
        match sock.recv_from(&mut buf) {
            Ok((n, from)) if status_of(&buf[..n]).is_none() && !buf.starts_with(b"ACK ") => {
                return Some((buf[..n].to_vec(), from))
            }
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => panic!("recv: {e}"),
        }
    }
    None
}

/// The Request-URI of a request.
fn ruri_of(req: &[u8]) -> String {
    let line = String::from_utf8_lossy(&req[..req.iter().position(|b| *b == b'\r').unwrap()]).into_owned();
    line.split(' ').nth(1).unwrap().to_owned()
}

/// Answers `req` (received by `sock` from `to`) with `status` as a UAS.
fn answer(sock: &UdpSocket, req: &[u8], to: SocketAddr, status: u16, reason: &str) {
    let mut resp = format!("SIP/2.0 {status} {reason}\r\n");
    let text = String::from_utf8_lossy(req);
    for line in text.split("\r\n").skip(1).take_while(|l| !l.is_empty()) {
        let name = line.split(':').next().unwrap_or("").trim().to_ascii_lowercase();
        match name.as_str() {
            "via" | "v" | "from" | "f" | "call-id" | "i" | "cseq" => resp += &format!("{line}\r\n"),
            "to" | "t" => resp += &format!("{line};tag=uas\r\n"),
            _ => {}
        }
    }
    resp += "Content-Length: 0\r\n\r\n";
    sock.send_to(resp.as_bytes(), to).unwrap();
}

/// Sends `req` from `caller`; the next hop `hop` receives it (returned), answers 486, and the
/// caller gets that 486.
fn through(herald: SocketAddr, caller: &UdpSocket, hop: &UdpSocket, req: &str) -> Vec<u8> {
    caller.send_to(req.as_bytes(), herald).unwrap();
    let (got, from) = received(hop, WAIT).unwrap_or_else(|| panic!("nothing reached {:?}", hop.local_addr()));
    answer(hop, &got, from, 486, "Busy Here");
    let call = header_of(req.as_bytes(), "Call-ID", "i").unwrap().to_owned();
    let deadline = Instant::now() + WAIT;
    let mut buf = vec![0u8; 65536];
    loop {
        assert!(Instant::now() < deadline, "no final answer for {call}");
        let Ok((n, _)) = caller.recv_from(&mut buf) else { continue };
        let m = &buf[..n];
        if status_of(m).is_some_and(|s| s >= 200) && header_of(m, "Call-ID", "i") == Some(call.as_str()) {
            assert_eq!(status_of(m), Some(486), "{}", String::from_utf8_lossy(m));
            return got;
        }
    }
}

fn start(name: &str, rules: &str, auth: &str) -> Herald {
    let dir = test_dir(name);
    let toml = format!("[flood]\ntrusted = [\"127.0.0.0/8\"]\n{auth}\n{rules}");
    let extras = HeraldExtras { toml: Some(toml), domains: vec!["example.com".into()], ..Default::default() };
    Herald::start_with(&dir, &HeraldConfig::default(), &extras)
}

#[test]
fn every_rule_kind_through_a_running_herald() {
    let gw = udp_from("127.0.0.1");
    let gw2 = udp_from("127.0.0.1");
    let echo = udp_from("127.0.0.1");
    let (gw_at, gw2_at, echo_at) = (gw.local_addr().unwrap(), gw2.local_addr().unwrap(), echo.local_addr().unwrap());
    let premium_and_uk = routes::premium_and_uk(&format!("sip:{gw_at}"));
    let rules = format!(
        r#"
{premium_and_uk}
[[route]]
name = "france-from-127.0.0.2"
user_prefix = "+33"
source = "127.0.0.2"
next_hop = "sip:{gw2_at}"

[[route]]
name = "did"
user_prefix = "+4930123"
strip = 8
location = true

[[route]]
name = "echo"
user = "echo"
methods = ["MESSAGE"]
request_uri = true

[[route]]
name = "others"
domain = "127.0.0.1"
reject = 404
reason = "No Route"
"#
    );
    let h = start("routing_rules", &rules, "[auth]\nenabled = false\n");
    let caller = udp_from("127.0.0.1");

    // reject: herald's answer with the configured reason.
    let r = transaction(&caller, h.addr, &request("INVITE", "sip:+19005550100@example.com", &caller, "r1"), WAIT)
        .expect("an answer");
    assert_eq!(status_of(&r), Some(403));
    assert!(String::from_utf8_lossy(&r).starts_with("SIP/2.0 403 Premium Numbers Barred\r\n"));

    // next hop: + becomes 00 in the Request-URI sent on; a tel: URI becomes sip:...;user=phone.
    let got = through(h.addr, &caller, &gw, &request("INVITE", "sip:+441234@example.com", &caller, "n1"));
    assert_eq!(ruri_of(&got), "sip:00441234@example.com");
    let got = through(h.addr, &caller, &gw, &request("INVITE", "tel:+44-20-1234", &caller, "n2"));
    assert_eq!(ruri_of(&got), format!("sip:0044201234@{gw_at};user=phone"));

    // source: only from 127.0.0.2; from elsewhere the number gets the default routing (a
    // served domain's user nobody registered: 404).
    let caller2 = udp_from("127.0.0.2");
    let got = through(h.addr, &caller2, &gw2, &request("INVITE", "sip:+33123@example.com", &caller2, "s1"));
    assert_eq!(ruri_of(&got), "sip:+33123@example.com");
    let r = transaction(&caller, h.addr, &request("INVITE", "sip:+33123@example.com", &caller, "s2"), WAIT).unwrap();
    assert_eq!(status_of(&r), Some(404));
    assert!(received(&gw2, Duration::from_millis(300)).is_none());

    // location: a DID of the served domain reaches extension 1001's registered phone.
    let phone = udp_from("127.0.0.1");
    let reg = register(h.addr, phone.local_addr().unwrap(), "1001", 1, None)
        .replace(&format!("@{}", h.addr), "@example.com")
        .replace(&format!("REGISTER sip:{}", h.addr), "REGISTER sip:example.com");
    assert_eq!(transaction(&phone, h.addr, &reg, WAIT).and_then(|r| status_of(&r)), Some(200));
    let got = through(h.addr, &caller, &phone, &request("INVITE", "sip:+49301231001@example.com", &caller, "l1"));
    assert_eq!(ruri_of(&got), format!("sip:1001@{}", phone.local_addr().unwrap()));

    // Request-URI, and first match wins over the catch-all after it.
    let got = through(h.addr, &caller, &echo, &request("MESSAGE", &format!("sip:echo@{echo_at}"), &caller, "e1"));
    assert_eq!(ruri_of(&got), format!("sip:echo@{echo_at}"));
    let r = transaction(&caller, h.addr, &request("MESSAGE", &format!("sip:other@{echo_at}"), &caller, "e2"), WAIT);
    assert!(String::from_utf8_lossy(&r.unwrap()).starts_with("SIP/2.0 404 No Route\r\n"));
    assert!(received(&echo, Duration::from_millis(300)).is_none(), "the catch-all sent nothing");
}

#[test]
fn an_anonymous_caller_cannot_reach_a_next_hop_through_a_rule() {
    let gw = udp_from("127.0.0.1");
    let gw_at = gw.local_addr().unwrap();
    let dir = test_dir("routing_relay_users");
    let users = dir.join("users.txt");
    std::fs::write(&users, "realm example.com\n").unwrap();
    let auth =
        format!("[auth]\nenabled = true\nusers_file = \"{}\"\ntrusted_peers = [\"127.0.0.3\"]\n", users.display());
    let rules = format!(
        "[[route]]\nuser_prefix = \"+44\"\nnext_hop = \"sip:{gw_at}\"\n\n\
         [[route]]\nuser_prefix = \"+33\"\nsource = \"127.0.0.4\"\nallow_unauthenticated = true\nnext_hop = \"sip:{gw_at}\"\n"
    );
    let h = start("routing_relay", &rules, &auth);
    // A caller from another domain to a number "of" the served domain: the rule sends it to a
    // gateway, so it is a relay and is challenged; nothing reaches the gateway.
    let stranger = udp_from("127.0.0.5");
    for (i, ruri) in ["sip:+441234@example.com", "tel:+441234", "sip:+441234@other.net"].iter().enumerate() {
        let r = transaction(&stranger, h.addr, &request("INVITE", ruri, &stranger, &format!("a{i}")), WAIT);
        assert_eq!(r.as_deref().and_then(status_of), Some(407), "{ruri}");
    }
    assert!(received(&gw, Duration::from_millis(300)).is_none(), "nothing reached the gateway");
    // A trusted peer relays without credentials.
    let trunk = udp_from("127.0.0.3");
    through(h.addr, &trunk, &gw, &request("INVITE", "sip:+441234@example.com", &trunk, "t1"));
    // A rule with allow_unauthenticated lets its own source through, only that source.
    let partner = udp_from("127.0.0.4");
    through(h.addr, &partner, &gw, &request("INVITE", "sip:+33123@example.com", &partner, "p1"));
    let r = transaction(&stranger, h.addr, &request("INVITE", "sip:+33123@other.net", &stranger, "p2"), WAIT);
    assert_eq!(r.as_deref().and_then(status_of), Some(407));
    assert!(received(&gw, Duration::from_millis(300)).is_none());
}
