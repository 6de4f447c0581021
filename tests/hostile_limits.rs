//! Issue 16 items 3, 6 and 8 against a real `herald serve` on loopback, with the default
//! `[flood]` policy (loopback is not trusted here). Clients bind distinct loopback addresses
//! (127.0.0.0/8 all reaches `lo`), so each test's sources are counted apart.
//!
//! * Item 8: a request over a parser limit (1,000 Via, 1,000 Route, a 9 KB header line) is
//!   answered 400 over UDP, with its top Via; a 65 KB TCP message gets 513 and the connection
//!   closes (its framing is lost).
//! * Item 6: answers to malformed requests count against their source's rate: of 500 sent
//!   from one address, about `[flood] max_requests` are answered.
//! * Item 3: a source holding its share of the held bytes (`limits.max_held_bytes_per_source`)
//!   with large OPTIONS to a phone that never answers gets 503, while another source's requests
//!   are still forwarded to that phone.

mod common;

use common::sip_client::{answers_within as received, udp_from};
use common::*;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

fn start(name: &str, toml: &str) -> Herald {
    let dir = test_dir(name);
    let extras = HeraldExtras { toml: Some(toml.to_string()), ..Default::default() };
    Herald::start_with(&dir, &HeraldConfig { drain_timeout_s: Some(1), ..Default::default() }, &extras)
}

/// A request from `local` with `extra` header lines after its Via and `body`.
fn request(method: &str, uri: &str, local: SocketAddr, call_id: &str, extra: &str, body: &str) -> String {
    format!(
        "{method} {uri} SIP/2.0\r\n\
         Via: SIP/2.0/UDP {local};branch=z9hG4bK-{call_id};rport\r\n\
         {extra}Max-Forwards: 70\r\n\
         From: <sip:alice@{local}>;tag=a-{call_id}\r\n\
         To: <{uri}>\r\n\
         Call-ID: {call_id}\r\n\
         CSeq: 1 {method}\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// The responses among `got` to the request with Call-ID `call_id`.
fn answers_to<'a>(got: &'a [Vec<u8>], call_id: &str) -> Vec<&'a [u8]> {
    got.iter().map(Vec::as_slice).filter(|m| header_of(m, "Call-ID", "i") == Some(call_id)).collect()
}

fn reason(msg: &[u8]) -> String {
    let line = &msg[..find(msg, b"\r\n").unwrap_or(msg.len())];
    String::from_utf8_lossy(line).splitn(3, ' ').nth(2).unwrap_or("").to_string()
}

#[test]
fn requests_over_a_parser_limit_are_answered() {
    let herald = start("limits_answered", "[auth]\nenabled = false\n");
    let h = herald.addr;
    let sock = udp_from("127.0.0.21");
    let local = sock.local_addr().unwrap();
    let uri = format!("sip:{h}");
    let vias: String = (0..1000).map(|i| format!("Via: SIP/2.0/UDP 198.51.100.7;branch=z9hG4bK-v{i}\r\n")).collect();
    let routes: String = (0..1000).map(|i| format!("Route: <sip:r{i}.example.com;lr>\r\n")).collect();
    let long = format!("Subject: {}\r\n", "s".repeat(9 * 1024));
    for (call_id, extra, expected) in [
        ("via-1000", &vias, "Too many Via values"),
        ("route-1000", &routes, "Too many Route values"),
        ("line-9k", &long, "Header field too long"),
    ] {
        let req = request("OPTIONS", &uri, local, call_id, extra, "");
        assert!(req.len() < 65_000, "{call_id}: {} bytes do not fit a datagram", req.len());
        sock.send_to(req.as_bytes(), h).unwrap();
        let got = received(&sock, Duration::from_millis(500));
        let answers = answers_to(&got, call_id);
        assert_eq!(answers.len(), 1, "{call_id}: {} answers", answers.len());
        let a = answers[0];
        assert_eq!((status_of(a), reason(a).as_str()), (Some(400), expected), "{call_id}");
        // The answer names the sender's Via only (RFC 3261 §18.2.1: the top one is the sender's).
        let text = String::from_utf8_lossy(a);
        assert_eq!(text.matches("Via:").count(), 1, "{text}");
        assert!(text.contains(&format!("branch=z9hG4bK-{call_id}")), "{text}");
    }
    assert!(herald.stop().is_some_and(|s| s.success()));
}

/// Reads what herald sends on `conn` until it closes the connection (or `within` passes):
/// (bytes, closed).
fn read_until_closed(conn: &mut TcpStream, within: Duration) -> (Vec<u8>, bool) {
    conn.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
    let deadline = Instant::now() + within;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        match conn.read(&mut buf) {
            Ok(0) => return (got, true),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return (got, true), // reset
        }
    }
    (got, false)
}

#[test]
fn a_tcp_message_over_the_size_limit_gets_513_and_the_connection_closes() {
    let herald = start("limits_tcp_513", "[auth]\nenabled = false\n");
    let h = herald.addr;
    let uri = format!("sip:{h}");
    let body = "b".repeat(66_000);
    let vias: String = (0..1400).map(|i| format!("Via: SIP/2.0/TCP 198.51.100.7;branch=z9hG4bK-v{i}\r\n")).collect();
    for (call_id, extra, body) in [("big-body", "", body.as_str()), ("big-head", &vias, "")] {
        let mut conn = TcpStream::connect(h).unwrap();
        let local = conn.local_addr().unwrap();
        // The extra header lines follow the identifying ones: what herald reads up to its limit
        // (64 KB) must name the sender.
        let req = request("OPTIONS", &uri, local, call_id, "", body)
            .replace("SIP/2.0/UDP", "SIP/2.0/TCP")
            .replace("Content-Length:", &format!("{extra}Content-Length:"));
        assert!(req.len() > 65_535);
        // Herald stops reading at the limit: the rest may never be taken, so write from a thread.
        let mut writer = conn.try_clone().unwrap();
        let bytes = req.into_bytes();
        let w = std::thread::spawn(move || {
            let _ = writer.write_all(&bytes);
        });
        let (got, closed) = read_until_closed(&mut conn, Duration::from_secs(10));
        let text = String::from_utf8_lossy(&got);
        assert_eq!(status_of(&got), Some(513), "{call_id}: herald sent {text:?}");
        assert_eq!(header_of(&got, "Call-ID", "i"), Some(call_id), "{text}");
        assert!(closed, "{call_id}: the connection stayed open after the 513");
        drop(conn);
        w.join().unwrap();
    }
    assert!(herald.stop().is_some_and(|s| s.success()));
}

#[test]
fn malformed_requests_over_the_rate_get_no_answers() {
    // Defaults: 60 requests per 2 s per source.
    let herald = start("limits_reflector", "[auth]\nenabled = false\n");
    let h = herald.addr;
    let sock = udp_from("127.0.0.24");
    let local = sock.local_addr().unwrap();
    let uri = format!("sip:{h}");
    for i in 0..500 {
        let req = request("OPTIONS", &uri, local, &format!("bad-{i}"), "", "")
            .replace("Max-Forwards: 70", "Max-Forwards: lots");
        sock.send_to(req.as_bytes(), h).unwrap();
        if i % 50 == 0 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let got = received(&sock, Duration::from_secs(1));
    let answered = got.iter().filter(|a| status_of(a) == Some(400)).count();
    assert_eq!(got.len(), answered, "only 400s come back");
    assert!((40..=61).contains(&answered), "{answered} of 500 malformed requests answered");
    // Another source is still answered.
    let other = udp_from("127.0.0.25");
    udp_options_ok(&other, h, "another-source", Duration::from_secs(5)).expect("another source is answered");
    assert!(herald.stop().is_some_and(|s| s.success()));
}

extern "C" {
    fn setsockopt(fd: i32, level: i32, name: i32, value: *const std::ffi::c_void, len: u32) -> i32;
}

/// A socket on `ip` with a receive buffer large enough for a burst of 50-KB datagrams.
fn big_udp_from(ip: &str) -> UdpSocket {
    use std::os::fd::AsRawFd;
    let s = udp_from(ip);
    let size: i32 = 8 << 20;
    // SOL_SOCKET = 1; SO_RCVBUFFORCE = 33 (root), else SO_RCVBUF = 8 (capped by rmem_max).
    for opt in [33, 8] {
        // SAFETY: setsockopt(2) reads 4 bytes from a live local.
        if unsafe { setsockopt(s.as_raw_fd(), 1, opt, (&size as *const i32).cast(), 4) } == 0 {
            break;
        }
    }
    s
}

/// Registers `user` at herald with `sock`'s address as contact (no authentication).
fn register(sock: &UdpSocket, herald: SocketAddr, user: &str) {
    let local = sock.local_addr().unwrap();
    let req = format!(
        "REGISTER sip:{herald} SIP/2.0\r\n\
         Via: SIP/2.0/UDP {local};branch=z9hG4bK-reg-{user};rport\r\n\
         Max-Forwards: 70\r\n\
         From: <sip:{user}@{herald}>;tag=r\r\n\
         To: <sip:{user}@{herald}>\r\n\
         Call-ID: reg-{user}\r\n\
         CSeq: 1 REGISTER\r\n\
         Contact: <sip:{user}@{local}>\r\n\
         Content-Length: 0\r\n\r\n"
    );
    sock.send_to(req.as_bytes(), herald).unwrap();
    let got = received(sock, Duration::from_millis(500));
    assert!(got.iter().any(|m| status_of(m) == Some(200)), "{user} is not registered");
}

/// The distinct Call-IDs of the requests among `got`.
fn call_ids(got: &[Vec<u8>], prefix: &str) -> std::collections::BTreeSet<String> {
    got.iter()
        .filter(|m| status_of(m).is_none())
        .filter_map(|m| header_of(m, "Call-ID", "i"))
        .filter(|id| id.starts_with(prefix))
        .map(str::to_string)
        .collect()
}

/// `count` OPTIONS of 50 KB from `sock` to bob at herald `h` (Call-IDs `big-0`, `big-1`, ...),
/// 33 a second: under the `[flood]` rate of 60 per 2 s.
fn send_big_options(sock: &UdpSocket, h: SocketAddr, count: usize) {
    let local = sock.local_addr().unwrap();
    let uri = format!("sip:bob@{h}");
    let body = "x".repeat(50_000);
    for n in 0..count {
        let req = request("OPTIONS", &uri, local, &format!("big-{n}"), "", &body);
        sock.send_to(req.as_bytes(), h).unwrap();
        std::thread::sleep(Duration::from_millis(30));
    }
}

/// Item 3: one source sending 50-KB OPTIONS to a phone that never answers holds about 100 KB
/// per request (the request and its forwarded copy) until Timer F and Timer J end it. With a
/// per-source budget of 1 MiB, about 11 are forwarded and the rest refused with 503, at a rate
/// well under `[flood] max_requests`; another source's OPTIONS to the same phone is still
/// forwarded. Without the per-source budget the global one (1 GiB) never refuses any.
#[test]
fn a_source_past_its_held_bytes_budget_gets_503_while_another_is_forwarded() {
    let toml = "[limits]\nmax_held_bytes_per_source = 1048576\n[timers]\nt1_ms = 50\n\
                [overload]\nretry_after_s = 7\n[auth]\nenabled = false\n";
    let herald = start("limits_per_source", toml);
    let h = herald.addr;
    let phone = big_udp_from("127.0.0.26"); // bob, never answers
    register(&phone, h, "bob");
    let attacker = big_udp_from("127.0.0.27");
    let uri = format!("sip:bob@{h}");
    const SENT: usize = 30;
    send_big_options(&attacker, h, SENT);
    let answers = received(&attacker, Duration::from_millis(300));
    let refused: Vec<&Vec<u8>> = answers.iter().filter(|a| status_of(a) == Some(503)).collect();
    let forwarded = call_ids(&received(&phone, Duration::from_millis(300)), "big-");
    assert!((8..=14).contains(&forwarded.len()), "{} forwarded: {forwarded:?}", forwarded.len());
    assert_eq!(forwarded.len() + refused.len(), SENT, "each forwarded or refused once");
    assert!(refused.iter().all(|a| header_of(a, "Retry-After", "Retry-After") == Some("7")));

    // Another source is served: its OPTIONS reaches the phone, and it gets no 503.
    let other = big_udp_from("127.0.0.28");
    let local = other.local_addr().unwrap();
    let req = request("OPTIONS", &uri, local, "small-1", "", "");
    other.send_to(req.as_bytes(), h).unwrap();
    let reached = call_ids(&received(&phone, Duration::from_millis(500)), "small-");
    assert!(reached.contains("small-1"), "the other source's request was not forwarded");
    assert!(received(&other, Duration::from_millis(100)).iter().all(|a| status_of(a) != Some(503)));
    // The first source is still refused.
    let req = request("OPTIONS", &uri, attacker.local_addr().unwrap(), "big-late", "", "");
    attacker.send_to(req.as_bytes(), h).unwrap();
    let late = received(&attacker, Duration::from_millis(300));
    assert!(
        answers_to(&late, "big-late").iter().any(|a| status_of(a) == Some(503)),
        "the first source is no longer refused"
    );
    assert!(herald.stop().is_some_and(|s| s.success()));
}

/// Item 3, what is not charged: a request forwarded without state holds nothing once its copy
/// has left (RFC 3261 §16.11), so its source is not charged for it. A stateless herald
/// (`[proxy] stateless = true`) relays thirty 50-KB OPTIONS, three times the 1 MiB budget if
/// each were charged as a held request and its copy, and the same source's next one is relayed
/// too, not refused with 503 (it was, while a forward was charged whatever it held). (An ACK is
/// never charged; a stateful herald holds what it forwards: the test above.)
#[test]
fn requests_forwarded_without_state_are_not_charged_to_their_source() {
    let toml = "[limits]\nmax_held_bytes_per_source = 1048576\n[proxy]\nstateless = true\n\
                [auth]\nenabled = false\n";
    let herald = start("limits_stateless_uncharged", toml);
    let h = herald.addr;
    let phone = big_udp_from("127.0.0.29"); // bob, never answers
    register(&phone, h, "bob");
    let caller = big_udp_from("127.0.0.30");
    const SENT: usize = 31; // the last one after the other thirty
    send_big_options(&caller, h, SENT);
    let relayed = call_ids(&received(&phone, Duration::from_millis(500)), "big-");
    assert_eq!(relayed.len(), SENT, "each relayed once: {relayed:?}");
    let answers = received(&caller, Duration::from_millis(100));
    assert!(answers.iter().all(|a| status_of(a) != Some(503)), "the source was charged for stateless forwards");
    assert!(herald.stop().is_some_and(|s| s.success()));
}
