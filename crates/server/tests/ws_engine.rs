//! herald's engine behind a WebSocket listener, wired as `herald serve` wires it: a browser-like
//! client registers over WS (RFC 7118), its OPTIONS is answered over the same connection, and an
//! INVITE from a UDP phone reaches it over that connection with two Record-Route values, one per
//! transport (RFC 5658), Via `SIP/2.0/WS`; the browser's answer goes back to the UDP phone.

use bytes::Bytes;
use herald_core::engine::{Engine, Listener};
use herald_core::registrar::Registrar;
use herald_core::{Seed, Transport};
use herald_server::{Config, KernelRoutes, Server};
use herald_sip::Message;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::Arc;
use std::time::Duration;
use tungstenite::client::IntoClientRequest;
use tungstenite::Message as WsMessage;

fn parse(b: Bytes) -> Message {
    Message::parse(b, &Default::default()).expect("a SIP message")
}

fn next_sip(ws: &mut tungstenite::WebSocket<TcpStream>) -> Message {
    loop {
        match ws.read().expect("a message from herald") {
            WsMessage::Text(t) => return parse(Bytes::from(t)),
            WsMessage::Binary(b) => return parse(b),
            _ => continue,
        }
    }
}

#[test]
fn register_over_ws_then_a_udp_phone_calls_the_browser_across_transports() {
    let text = "domains = [\"example.com\"]\n[server]\nworkers = 1\n[auth]\nenabled = false\n\
                [flood]\ntrusted = [\"127.0.0.0/8\"]\n\
                [[listen]]\naddress = \"127.0.0.1:0\"\ntransports = [\"udp\"]\n\
                [[listen]]\naddress = \"127.0.0.1:0\"\ntransports = [\"ws\"]\n";
    let config = Config::from_toml(text, "ws-engine.toml").unwrap();
    let server = Server::bind(config.clone()).unwrap();
    let ws_addr = server.local_addr(Transport::Ws, false).unwrap();
    let udp_addr = server.local_addr(Transport::Udp, false).unwrap();
    let listeners: Vec<Listener> =
        server.local_addrs().iter().map(|b| Listener { transport: b.transport, addr: b.addr }).collect();
    let seed = Seed::fixed(7);
    let engine_cfg = Arc::new(config.engine_config(&listeners, Arc::new(KernelRoutes::new()), seed));
    let registrar = Registrar::new(config.registrar_config(seed.derive("registrar", 0)));
    let store = Arc::new(registrar.new_store());
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        server
            .run(move |shard| Engine::new(engine_cfg.clone(), store.clone(), registrar.clone(), shard), async move {
                let _ = stop_rx.await;
            })
            .unwrap()
    });

    // The browser: registers its connection's own address (what a phone behind no NAT says).
    let tcp = TcpStream::connect(ws_addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let me: SocketAddr = tcp.local_addr().unwrap();
    let mut req = format!("ws://{ws_addr}/").into_client_request().unwrap();
    req.headers_mut().insert("Sec-WebSocket-Protocol", "sip".parse().unwrap());
    let (mut ws, _) = tungstenite::client(req, tcp).unwrap();
    let register = format!(
        "REGISTER sip:example.com SIP/2.0\r\nVia: SIP/2.0/WS {me};branch=z9hG4bKreg1\r\nMax-Forwards: 70\r\n\
         From: <sip:alice@example.com>;tag=r1\r\nTo: <sip:alice@example.com>\r\nCall-ID: ws-reg\r\n\
         CSeq: 1 REGISTER\r\nContact: <sip:alice@{me};transport=ws>\r\nExpires: 600\r\n\r\n"
    );
    ws.send(WsMessage::text(register)).unwrap(); // no Content-Length: RFC 7118 §5.1
    let ok = next_sip(&mut ws);
    assert_eq!(ok.status(), Some(200), "{:?}", String::from_utf8_lossy(ok.as_bytes()));
    let options = format!(
        "OPTIONS sip:example.com SIP/2.0\r\nVia: SIP/2.0/WS {me};branch=z9hG4bKopt1\r\nMax-Forwards: 70\r\n\
         From: <sip:alice@example.com>;tag=o1\r\nTo: <sip:example.com>\r\nCall-ID: ws-opt\r\nCSeq: 1 OPTIONS\r\n\
         Content-Length: 0\r\n\r\n"
    );
    ws.send(WsMessage::text(options)).unwrap();
    assert_eq!(next_sip(&mut ws).status(), Some(200));

    // A UDP phone calls alice: herald finds her binding and sends over her WS connection.
    let phone = UdpSocket::bind("127.0.0.1:0").unwrap();
    phone.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let p = phone.local_addr().unwrap();
    let invite = format!(
        "INVITE sip:alice@example.com SIP/2.0\r\nVia: SIP/2.0/UDP {p};branch=z9hG4bKinv1\r\nMax-Forwards: 70\r\n\
         From: <sip:bob@example.com>;tag=b1\r\nTo: <sip:alice@example.com>\r\nCall-ID: ws-call\r\nCSeq: 1 INVITE\r\n\
         Contact: <sip:bob@{p}>\r\nContent-Length: 0\r\n\r\n"
    );
    phone.send_to(invite.as_bytes(), udp_addr).unwrap();
    let got = next_sip(&mut ws);
    assert_eq!(got.call_id().unwrap(), "ws-call");
    let text = String::from_utf8_lossy(got.as_bytes()).into_owned();
    let rr: Vec<&str> = text.lines().filter(|l| l.to_ascii_lowercase().starts_with("record-route:")).collect();
    // RFC 5658 §3: the top value faces the next hop (WS), the second the previous one (UDP).
    let rr_all = rr.join(",");
    let values: Vec<&str> = rr_all.split(',').map(|v| v.split_once(':').map_or(v, |(_, r)| r).trim()).collect();
    assert_eq!(values.len(), 2, "{text}");
    assert!(values[0].starts_with(&format!("<sip:{ws_addr};transport=ws;lr")), "{text}");
    assert!(values[1].starts_with(&format!("<sip:{udp_addr};lr")), "{text}");
    let top_via = text.lines().find(|l| l.starts_with("Via:")).unwrap();
    assert!(top_via.starts_with(&format!("Via: SIP/2.0/WS {ws_addr}")), "{text}");
    // The browser declines; the answer reaches the UDP phone.
    let vias: String = text.lines().filter(|l| l.starts_with("Via:")).map(|l| format!("{l}\r\n")).collect();
    let busy = format!(
        "SIP/2.0 486 Busy Here\r\n{vias}From: <sip:bob@example.com>;tag=b1\r\nTo: <sip:alice@example.com>;tag=a9\r\n\
         Call-ID: ws-call\r\nCSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n"
    );
    ws.send(WsMessage::text(busy)).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        let n = phone.recv(&mut buf).expect("the phone gets the final answer");
        let m = parse(Bytes::copy_from_slice(&buf[..n]));
        if m.status() == Some(100) {
            continue;
        }
        assert_eq!(m.status(), Some(486));
        break;
    }
    let _ = stop.send(());
    thread.join().unwrap();
}
