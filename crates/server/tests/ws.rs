//! SIP over WebSocket (RFC 7118) against a running server: upgrades good and bad, round trips
//! over WS and WSS, text, binary and fragmented messages, and the ways a connection must end:
//! oversize frame (1009), unmasked frame and garbage (1002), close handshake, a peer that
//! vanishes (ping timeout). Each case is counted, and the server keeps serving.

mod common;

use common::{ipv6, TestHandler};
use herald_core::Transport;
use herald_server::{Config, Server, Stats};
use herald_sip::Message;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tungstenite::client::IntoClientRequest;
use tungstenite::{Message as WsMessage, WebSocket};

/// A server with a WS listener (and WSS when `tls` names a certificate and key).
struct Ws {
    ws: SocketAddr,
    wss: Option<SocketAddr>,
    stats: Stats,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Ws {
    fn drop(&mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.thread.take().unwrap().join().unwrap();
    }
}

fn start(extra: &str, tls: Option<&(PathBuf, PathBuf)>) -> Ws {
    let _ = ipv6();
    let mut text = String::from("[flood]\ntrusted = [\"127.0.0.0/8\"]\n[server]\nworkers = 2\n");
    text.push_str("[[listen]]\naddress = \"127.0.0.1:0\"\ntransports = [\"ws\"]\n");
    if let Some((cert, key)) = tls {
        text.push_str("[[listen]]\naddress = \"127.0.0.1:0\"\ntransports = [\"wss\"]\n");
        text.push_str(&format!("[tls]\ncertificate = {cert:?}\nprivate_key = {key:?}\n"));
    }
    text.push_str(extra);
    let server = Server::bind(Config::from_toml(&text, "ws-test.toml").expect("config")).expect("bind");
    let ws = server.local_addr(Transport::Ws, false).expect("ws listener");
    let wss = server.local_addr(Transport::Wss, false);
    let stats = server.stats();
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let (seen, _keep) = std::sync::mpsc::channel();
        std::mem::forget(_keep);
        server
            .run(move |i| TestHandler::new(i, seen.clone()), async move {
                let _ = stop_rx.await;
            })
            .expect("server run");
    });
    Ws { ws, wss, stats, stop: Some(stop), thread: Some(thread) }
}

fn options(call_id: &str, transport: &str, content_length: bool) -> String {
    let cl = if content_length { "Content-Length: 0\r\n" } else { "" };
    format!(
        "OPTIONS sip:svc@example.com SIP/2.0\r\n\
         Via: SIP/2.0/{transport} df7jal23ls0d.invalid;branch=z9hG4bK{call_id}\r\n\
         Max-Forwards: 70\r\nFrom: <sip:alice@example.com>;tag=a1\r\nTo: <sip:svc@example.com>\r\n\
         Call-ID: {call_id}\r\nCSeq: 1 OPTIONS\r\n{cl}\r\n"
    )
}

fn tcp(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s
}

/// A tungstenite client over `stream`, `sip` subprotocol offered.
fn client<S: Read + Write>(stream: S, url: &str) -> WebSocket<S> {
    let mut req = url.into_client_request().unwrap();
    req.headers_mut().insert("Sec-WebSocket-Protocol", "sip".parse().unwrap());
    let (ws, resp) = tungstenite::client(req, stream).expect("upgrade");
    assert_eq!(resp.status(), 101);
    assert_eq!(resp.headers().get("Sec-WebSocket-Protocol").unwrap(), "sip");
    ws
}

/// The next SIP message the server sends (pings answered by tungstenite).
fn next_sip<S: Read + Write>(ws: &mut WebSocket<S>) -> Message {
    loop {
        match ws.read().expect("a message") {
            WsMessage::Text(t) => return Message::parse(bytes::Bytes::from(t), &Default::default()).unwrap(),
            WsMessage::Binary(b) => return Message::parse(b, &Default::default()).unwrap(),
            _ => continue,
        }
    }
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The server still serves: a fresh WebSocket client gets its OPTIONS answered.
fn still_serving(s: &Ws, id: &str) {
    let mut ws = client(tcp(s.ws), &format!("ws://{}/", s.ws));
    ws.send(WsMessage::text(options(id, "WS", true))).unwrap();
    let r = next_sip(&mut ws);
    assert_eq!((r.status(), r.call_id().unwrap()), (Some(200), id));
    ws.close(None).unwrap();
}

#[test]
fn options_round_trip_over_ws_text_binary_fragmented_and_without_content_length() {
    let s = start("", None);
    let mut ws = client(tcp(s.ws), &format!("ws://{}/", s.ws));
    ws.send(WsMessage::text(options("ws-text", "WS", true))).unwrap();
    let r = next_sip(&mut ws);
    assert_eq!((r.status(), r.call_id().unwrap()), (Some(200), "ws-text"));
    // RFC 7118 §5.1: Content-Length is optional; binary frames are allowed.
    ws.send(WsMessage::binary(options("ws-binary", "WS", false).into_bytes())).unwrap();
    assert_eq!(next_sip(&mut ws).call_id().unwrap(), "ws-binary");
    // A message in three fragments (RFC 6455 §5.4) is one SIP message.
    let text = options("ws-fragments", "WS", true);
    let (a, rest) = text.split_at(20);
    let (b, c) = rest.split_at(30);
    use tungstenite::protocol::frame::{
        coding::{Data, OpCode},
        Frame,
    };
    ws.send(WsMessage::Frame(Frame::message(a.to_string(), OpCode::Data(Data::Text), false))).unwrap();
    ws.send(WsMessage::Frame(Frame::message(b.to_string(), OpCode::Data(Data::Continue), false))).unwrap();
    ws.send(WsMessage::Frame(Frame::message(c.to_string(), OpCode::Data(Data::Continue), true))).unwrap();
    assert_eq!(next_sip(&mut ws).call_id().unwrap(), "ws-fragments");
    // The CRLF keep-alive of RFC 5626 §3.5.1 as SIP.js sends it: a CRLF message back.
    ws.send(WsMessage::text("\r\n\r\n")).unwrap();
    assert_eq!(ws.read().unwrap(), WsMessage::text("\r\n"));
    // A WebSocket ping gets its pong (tungstenite hands it up before the next message).
    ws.send(WsMessage::Ping(bytes::Bytes::from_static(b"hi"))).unwrap();
    assert_eq!(ws.read().unwrap(), WsMessage::Pong(bytes::Bytes::from_static(b"hi")));
    // The close handshake: the server answers the close and ends the connection.
    ws.close(None).unwrap();
    loop {
        match ws.read() {
            Ok(_) => continue,
            Err(tungstenite::Error::ConnectionClosed) => break,
            Err(e) => panic!("close handshake: {e}"),
        }
    }
    wait_for("the connection to be freed", || s.stats.snapshot().tcp_open == 0);
    let snap = s.stats.snapshot();
    assert_eq!((snap.ws_handshakes, snap.ws_handshake_failures, snap.ws_closed_by_peer), (1, 0, 1));
    assert_eq!(snap.tcp_pings, 1);
}

/// Sends `request` on a raw connection and returns the status of the answer; the server then
/// closes the connection.
fn refused(addr: SocketAddr, request: &str) -> u16 {
    let mut c = tcp(addr);
    c.write_all(request.as_bytes()).unwrap();
    let mut answer = Vec::new();
    c.read_to_end(&mut answer).expect("the server closes after its answer");
    let text = String::from_utf8_lossy(&answer);
    assert!(text.contains("Connection: close"), "{text}");
    text[9..12].parse().unwrap_or_else(|_| panic!("an HTTP answer: {text}"))
}

fn upgrade_request(extra: &str) -> String {
    format!(
        "GET / HTTP/1.1\r\nHost: herald\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n"
    )
}

#[test]
fn bad_upgrades_get_their_http_answer_are_counted_and_the_server_keeps_serving() {
    let s = start("[websocket]\nallowed_origins = [\"https://phone.example.com\"]\n", None);
    let sip = "Sec-WebSocket-Protocol: sip\r\n";
    let cases = [
        ("missing subprotocol", upgrade_request(""), 400),
        ("wrong subprotocol", upgrade_request("Sec-WebSocket-Protocol: chat\r\n"), 400),
        ("bad key", upgrade_request(sip).replace("dGhlIHNhbXBsZSBub25jZQ==", "not-a-key"), 400),
        ("HTTP/1.0", upgrade_request(sip).replace("HTTP/1.1", "HTTP/1.0"), 400),
        ("not an upgrade", "GET / HTTP/1.1\r\nHost: herald\r\n\r\n".to_string(), 400),
        ("version 8", upgrade_request(sip).replace("Version: 13", "Version: 8"), 426),
        ("foreign origin", upgrade_request(&format!("{sip}Origin: https://evil.example\r\n")), 403),
        ("SIP instead of HTTP", options("raw-sip", "TCP", true), 400),
    ];
    for (i, (what, request, status)) in cases.iter().enumerate() {
        assert_eq!(refused(s.ws, request), *status, "{what}");
        wait_for(what, || s.stats.snapshot().ws_handshake_failures == i as u64 + 1);
    }
    // An allowed origin passes.
    let mut c = tcp(s.ws);
    c.write_all(upgrade_request(&format!("{sip}Origin: https://phone.example.com\r\n")).as_bytes()).unwrap();
    let mut head = [0u8; 12];
    c.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 101");
    still_serving(&s, "after-bad-upgrades");
    wait_for("connections freed", || s.stats.snapshot().tcp_open <= 1);
}

/// An upgraded raw connection, its 101 read.
fn upgraded(addr: SocketAddr) -> TcpStream {
    let mut c = tcp(addr);
    c.write_all(upgrade_request("Sec-WebSocket-Protocol: sip\r\n").as_bytes()).unwrap();
    let mut got = Vec::new();
    let mut b = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") {
        c.read_exact(&mut b).unwrap();
        got.push(b[0]);
    }
    assert!(got.starts_with(b"HTTP/1.1 101"), "{}", String::from_utf8_lossy(&got));
    c
}

/// Reads until EOF and returns the status code of the server's close frame.
fn close_status(c: &mut TcpStream) -> u16 {
    let mut got = Vec::new();
    c.read_to_end(&mut got).expect("the server closes the connection");
    // Server frames are unmasked: 0x88, length, code.
    let at = got.iter().position(|b| *b == 0x88).unwrap_or_else(|| panic!("a close frame in {got:02x?}"));
    u16::from_be_bytes([got[at + 2], got[at + 3]])
}

/// A masked client frame (RFC 6455 §5.2) with the given first byte and payload.
fn masked(first: u8, payload: &[u8]) -> Vec<u8> {
    let mask = [0x12, 0x34, 0x56, 0x78];
    let mut f = vec![first];
    match payload.len() {
        n if n < 126 => f.push(0x80 | n as u8),
        n if n < 65_536 => {
            f.push(0x80 | 126);
            f.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            f.push(0x80 | 127);
            f.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    f.extend_from_slice(&mask);
    f.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    f
}

#[test]
fn oversize_unmasked_and_garbage_frames_close_with_their_status_and_are_counted() {
    let s = start("[limits]\nmax_message_size = 4096\n", None);
    // 1009: a frame over the limit: its announced size is enough (the rest is not sent, so the
    // server has read everything when it closes, and the close frame is not lost to a reset).
    let mut c = upgraded(s.ws);
    c.write_all(&masked(0x81, &vec![b'a'; 5000])[..200]).unwrap();
    assert_eq!(close_status(&mut c), 1009);
    // 1002: an unmasked client frame (RFC 6455 §5.1).
    let mut c = upgraded(s.ws);
    let text = options("unmasked", "WS", true);
    let mut frame = vec![0x81, 126];
    frame.extend_from_slice(&(text.len() as u16).to_be_bytes());
    frame.extend_from_slice(text.as_bytes());
    c.write_all(&frame).unwrap();
    assert_eq!(close_status(&mut c), 1002);
    // 1002: garbage after the handshake (reserved bits and opcode).
    let mut c = upgraded(s.ws);
    c.write_all(b"\xff\xffgarbage that is not a frame").unwrap();
    assert_eq!(close_status(&mut c), 1002);
    // A message under the limit still works on a fresh connection.
    let mut c = upgraded(s.ws);
    c.write_all(&masked(0x81, options("masked-ok", "WS", true).as_bytes())).unwrap();
    let mut got = vec![0u8; 2];
    c.read_exact(&mut got).unwrap();
    assert_eq!(got[0], 0x81, "a text frame back");
    drop(c);
    let snap = s.stats.snapshot();
    assert_eq!((snap.ws_closed_too_big, snap.ws_closed_protocol_error), (1, 2));
    still_serving(&s, "after-bad-frames");
}

#[test]
fn a_peer_that_vanishes_without_a_close_is_found_by_the_ping_and_freed() {
    let s = start("[websocket]\nping_interval_s = 1\n", None);
    // A live client answers the pings (tungstenite does) and stays connected.
    let mut live = client(tcp(s.ws), &format!("ws://{}/", s.ws));
    // A vanished one: upgraded, then silent; it never answers the ping.
    let silent = upgraded(s.ws);
    wait_for("two connections", || s.stats.snapshot().tcp_open == 2);
    let start = Instant::now();
    live.get_mut().set_read_timeout(Some(Duration::from_millis(100))).unwrap();
    while s.stats.snapshot().tcp_open != 1 {
        assert!(start.elapsed() < Duration::from_secs(6), "the silent connection was not freed");
        match live.read() {
            Ok(_) => {}
            Err(tungstenite::Error::Io(e)) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("live client: {e}"),
        }
    }
    // Freed after the ping (1 s) and its wait (1 s), not before.
    assert!(start.elapsed() >= Duration::from_millis(1500), "{:?}", start.elapsed());
    let snap = s.stats.snapshot();
    assert_eq!(snap.ws_closed_dead, 1);
    assert!(snap.ws_pings_sent >= 2, "{snap:?}");
    drop(silent);
    live.get_mut().set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    live.send(WsMessage::text(options("live-after-pings", "WS", true))).unwrap();
    assert_eq!(next_sip(&mut live).call_id().unwrap(), "live-after-pings");
}

/// A self-signed certificate for 127.0.0.1 made with the openssl command.
fn certificate(name: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("herald-ws-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let out = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"])
        .args(["-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl (package openssl) makes the test certificate");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    (cert, key)
}

#[test]
fn options_round_trip_over_wss_and_a_failed_tls_handshake_is_counted() {
    let pair = certificate("wss");
    let s = start("", Some(&pair));
    let wss = s.wss.unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(herald_tls::AcceptAnyServerCert::new(provider)))
        .with_no_client_auth();
    let config = Arc::new(config);
    let tls = |addr| {
        let name = rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap();
        rustls::StreamOwned::new(rustls::ClientConnection::new(config.clone(), name).unwrap(), tcp(addr))
    };
    let mut ws = client(tls(wss), &format!("wss://{wss}/"));
    for i in 0..3 {
        let id = format!("wss-{i}");
        ws.send(WsMessage::text(options(&id, "WSS", true))).unwrap();
        assert_eq!(next_sip(&mut ws).call_id().unwrap(), id);
    }
    ws.close(None).unwrap();
    while ws.read().is_ok() {}
    // Plain HTTP on the WSS port: not a TLS handshake.
    let mut c = tcp(wss);
    c.write_all(upgrade_request("Sec-WebSocket-Protocol: sip\r\n").as_bytes()).unwrap();
    let mut rest = Vec::new();
    let _ = c.read_to_end(&mut rest);
    wait_for("the failed handshake to be counted", || s.stats.snapshot().ws_handshake_failures == 1);
    let snap = s.stats.snapshot();
    assert_eq!((snap.ws_handshakes, snap.tls_handshakes, snap.tls_handshake_failures), (1, 1, 1));
    still_serving(&s, "after-wss");
    let _ = std::fs::remove_dir_all(pair.0.parent().unwrap());
}

#[test]
fn the_connection_limits_of_tcp_hold_for_websocket() {
    let s = start(
        "[websocket]\nhandshake_timeout_s = 1\nping_interval_s = 0\n\
         [limits]\nmax_tcp_connections_per_ip = 2\ntcp_idle_timeout_s = 1\ntcp_incomplete_message_timeout_s = 2\n",
        None,
    );
    // A client that connects and never upgrades is closed at the handshake deadline.
    let mut mute = tcp(s.ws);
    let t0 = Instant::now();
    let mut rest = Vec::new();
    let _ = mute.read_to_end(&mut rest);
    assert!(t0.elapsed() >= Duration::from_millis(900) && t0.elapsed() < Duration::from_secs(4), "{:?}", t0.elapsed());
    wait_for("the handshake failure", || s.stats.snapshot().ws_handshake_failures == 1);
    // An upgraded connection silent for tcp_idle_timeout_s (pings off) gets close 1000, then EOF.
    let mut idle = upgraded(s.ws);
    assert_eq!(close_status(&mut idle), 1000);
    wait_for("the idle close", || s.stats.snapshot().tcp_idle_closed == 1);
    // A frame that never completes, trickled a byte at a time (each resetting the idle timer),
    // is cut off by tcp_incomplete_message_timeout_s as over TCP.
    let mut slow = upgraded(s.ws);
    let frame = masked(0x81, options("slow", "WS", true).as_bytes());
    let t0 = Instant::now();
    for b in &frame[..40] {
        if slow.write_all(&[*b]).is_err() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut rest = Vec::new();
    let _ = slow.read_to_end(&mut rest);
    assert!(t0.elapsed() < Duration::from_secs(4), "{:?}", t0.elapsed());
    wait_for("the incomplete message", || s.stats.snapshot().tcp_incomplete_timeouts == 1);
    // max_tcp_connections_per_ip: a third connection from 127.0.0.1 is refused at once.
    let (_a, _b) = (upgraded(s.ws), upgraded(s.ws));
    let mut third = tcp(s.ws);
    let mut got = Vec::new();
    let _ = third.read_to_end(&mut got);
    assert!(got.is_empty());
    wait_for("the refusal to be counted", || s.stats.snapshot().tcp_rejected_per_ip == 1);
}
