//! A small real SIP handler for the runtime tests, and helpers to run a server on loopback.
//!
//! The handler is a legitimate peer, not a stand-in for herald's proxy: it answers OPTIONS with
//! 200 (ResponseBuilder), reports every other request it receives on a channel, and implements a
//! few test verbs that exercise the runtime's outputs:
//! * `TIMER`: answers 200 from `handle_timeouts`, 100 ms later (the timer path);
//! * `FORWARD` with `X-Forward-To: tcp:IP:PORT`: sends the request there with `conn: None`
//!   (outgoing connection and reuse);
//! * `RESOLVE` with `X-Resolve: HOST[:PORT]`: asks for an RFC 3263 lookup and answers 200 with
//!   the targets in `X-Targets`;
//! * `BEGIN` / `END`: count an active transaction up / down (graceful shutdown).
#![allow(dead_code)]

use bytes::Bytes;
use herald_core::{Input, Output, Peer, ResolveRequest, SipHandler, Transport};
use herald_server::{Config, Server, ServerError, Stats};
use herald_sip::{Message, Method, ResponseBuilder};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A request the handler saw.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The engine shard (handler instance) that handled it.
    pub shard: usize,
    /// The name of the thread that handled it (`herald-wN-udpK` for a UDP receiver, `herald-wN`
    /// for a worker's loop: TCP, and UDP messages handed over by a busy receiver).
    pub thread: String,
    pub method: String,
    pub call_id: String,
    pub cseq: u32,
    pub from: Peer,
    pub local: SocketAddr,
}

pub struct TestHandler {
    shard: usize,
    seen: mpsc::Sender<Seen>,
    timers: Vec<(Instant, Peer, Message)>,
    resolving: Vec<(u64, Peer, Message)>,
    next_token: u64,
    active: usize,
}

impl TestHandler {
    pub fn new(shard: usize, seen: mpsc::Sender<Seen>) -> TestHandler {
        TestHandler { shard, seen, timers: vec![], resolving: vec![], next_token: 1, active: 0 }
    }

    fn reply(out: &mut Vec<Output>, to: Peer, msg: &Message, code: u16, extra: Option<(&str, &[u8])>) {
        let mut b = ResponseBuilder::new(msg, code, if code == 200 { "OK" } else { "Error" }).to_tag("t1");
        if let Some((n, v)) = extra {
            b = b.header(n, v);
        }
        out.push(Output::Send { to, bytes: b.build().freeze() });
    }
}

impl SipHandler for TestHandler {
    fn handle(&mut self, now: Instant, input: Input, out: &mut Vec<Output>) {
        match input {
            Input::Message { from, local, msg } => {
                let Some(method) = msg.method().map(|m| m.to_string()) else { return };
                match msg.method() {
                    Some(Method::Options) => return Self::reply(out, from, &msg, 200, None),
                    // A handler bug, on demand: the runtime must survive it.
                    Some(Method::Extension("PANIC")) => panic!("test handler panics on PANIC"),
                    Some(Method::Extension("TIMER")) => {
                        self.timers.push((now + Duration::from_millis(100), from, msg.clone()));
                    }
                    Some(Method::Extension("FORWARD")) => {
                        let to = msg.get_by_name("X-Forward-To").and_then(|v| std::str::from_utf8(v).ok());
                        if let Some(addr) = to.and_then(|v| v.strip_prefix("tcp:")).and_then(|a| a.parse().ok()) {
                            let to = Peer { transport: Transport::Tcp, addr, conn: None };
                            out.push(Output::Send { to, bytes: msg.buffer().clone() });
                        }
                    }
                    Some(Method::Extension("RESOLVE")) => {
                        let v = msg.get_by_name("X-Resolve").and_then(|v| std::str::from_utf8(v).ok()).unwrap_or("");
                        let (host, port) = match v.rsplit_once(':') {
                            Some((h, p)) => (h.to_string(), p.parse().ok()),
                            None => (v.to_string(), None),
                        };
                        let token = self.next_token;
                        self.next_token += 1;
                        self.resolving.push((token, from, msg.clone()));
                        let request = ResolveRequest { host, port, transport: None, secure: false };
                        out.push(Output::Resolve { token, request });
                    }
                    Some(Method::Extension("BEGIN")) => self.active += 1,
                    Some(Method::Extension("END")) => self.active = self.active.saturating_sub(1),
                    _ => {}
                }
                let seen = Seen {
                    shard: self.shard,
                    thread: std::thread::current().name().unwrap_or("").to_string(),
                    method,
                    call_id: msg.call_id().unwrap_or("").to_string(),
                    cseq: msg.cseq().map(|c| c.seq).unwrap_or(0),
                    from,
                    local,
                };
                let _ = self.seen.send(seen);
            }
            Input::Resolved { token, result } => {
                if let Some(i) = self.resolving.iter().position(|r| r.0 == token) {
                    let (_, from, msg) = self.resolving.remove(i);
                    let text = match result {
                        Ok(targets) => {
                            targets.iter().map(|t| format!("{}:{}", t.transport, t.addr)).collect::<Vec<_>>().join(",")
                        }
                        Err(e) => format!("error {e}"),
                    };
                    Self::reply(out, from, &msg, 200, Some(("X-Targets", text.as_bytes())));
                }
            }
            Input::TransportError { .. } | Input::Ping { .. } => {}
        }
    }

    fn handle_timeouts(&mut self, now: Instant, out: &mut Vec<Output>) {
        let due: Vec<_> = self.timers.iter().filter(|t| t.0 <= now).cloned().collect();
        self.timers.retain(|t| t.0 > now);
        for (_, to, msg) in due {
            Self::reply(out, to, &msg, 200, None);
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.timers.iter().map(|t| t.0).min()
    }

    fn active_transactions(&self) -> usize {
        self.active
    }

    fn held_bytes(&self) -> usize {
        let delayed = self.timers.iter().map(|t| t.2.as_bytes().len());
        delayed.chain(self.resolving.iter().map(|r| r.2.as_bytes().len())).sum()
    }
}

/// A server running on its own thread, listening on loopback ports chosen by the kernel.
pub struct Running {
    pub udp4: SocketAddr,
    pub tcp4: SocketAddr,
    pub udp6: Option<SocketAddr>,
    pub tcp6: Option<SocketAddr>,
    pub seen: mpsc::Receiver<Seen>,
    pub stats: Stats,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<Result<(), ServerError>>>,
}

pub fn ipv6() -> bool {
    UdpSocket::bind("[::1]:0").is_ok()
}

/// Starts a server with `extra` TOML appended to a loopback listen config. Loopback is trusted by
/// `[flood]`: these tests send hundreds of messages per second from one address (`extra` may
/// override it with its own `[flood]` table).
pub fn start(extra: &str) -> Running {
    let mut text = String::new();
    if !extra.contains("[flood]") {
        text.push_str("[flood]\ntrusted = [\"127.0.0.0/8\", \"::1\"]\n");
    }
    text.push_str("[[listen]]\naddress = \"127.0.0.1:0\"\n");
    if ipv6() {
        text.push_str("[[listen]]\naddress = \"[::1]:0\"\n");
    }
    text.push_str(extra);
    start_config(&text)
}

/// Starts a server with exactly this configuration (it must listen on IPv4 UDP and TCP).
pub fn start_config(text: &str) -> Running {
    let config = Config::from_toml(text, "test.toml").expect("test config");
    let server = Server::bind(config).expect("bind");
    let addr = |t, v6| server.local_addr(t, v6);
    let (udp4, tcp4) = (addr(Transport::Udp, false).unwrap(), addr(Transport::Tcp, false).unwrap());
    let (udp6, tcp6) = (addr(Transport::Udp, true), addr(Transport::Tcp, true));
    let stats = server.stats();
    let (seen_tx, seen) = mpsc::channel();
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let make = move |i| TestHandler::new(i, seen_tx.clone());
        server.run(make, async move {
            let _ = stop_rx.await;
        })
    });
    Running { udp4, tcp4, udp6, tcp6, seen, stats, stop: Some(stop), thread: Some(thread) }
}

impl Running {
    /// Triggers shutdown and waits for `run` to return.
    pub fn stop(mut self) -> Result<(), ServerError> {
        self.stop.take().unwrap().send(()).unwrap();
        self.thread.take().unwrap().join().expect("server thread")
    }

    /// Starts shutdown without waiting.
    pub fn begin_stop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }

    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    pub fn join(mut self) -> Result<(), ServerError> {
        self.thread.take().unwrap().join().expect("server thread")
    }

    pub fn next_seen(&self) -> Seen {
        self.seen.recv_timeout(Duration::from_secs(5)).expect("the handler saw a request")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

/// A request with the five mandatory headers; `to_tag` makes it in-dialog.
pub fn request(method: &str, call_id: &str, cseq: u32, transport: &str, to_tag: Option<&str>, extra: &str) -> String {
    let tag = to_tag.map(|t| format!(";tag={t}")).unwrap_or_default();
    format!(
        "{method} sip:svc@example.com SIP/2.0\r\n\
         Via: SIP/2.0/{transport} client.example.com:5999;branch=z9hG4bK{call_id}-{cseq}\r\n\
         Max-Forwards: 70\r\n\
         From: <sip:alice@example.com>;tag=a1\r\n\
         To: <sip:svc@example.com>{tag}\r\n\
         Call-ID: {call_id}\r\n\
         CSeq: {cseq} {method}\r\n\
         {extra}Content-Length: 0\r\n\r\n"
    )
}

pub fn udp_client(server: SocketAddr) -> UdpSocket {
    let bind = if server.is_ipv6() { "[::1]:0" } else { "127.0.0.1:0" };
    let s = UdpSocket::bind(bind).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.connect(server).unwrap();
    s
}

/// Receives one datagram and parses it.
pub fn recv_msg(s: &UdpSocket) -> Message {
    let mut buf = vec![0u8; 65_536];
    let n = s.recv(&mut buf).expect("a datagram from the server");
    Message::parse(Bytes::copy_from_slice(&buf[..n]), &Default::default()).expect("a well-formed message")
}

pub fn tcp_client(server: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(server).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

/// Reads until `n` complete messages (by Content-Length) have arrived, or EOF/timeout.
pub fn read_messages(s: &mut TcpStream, n: usize) -> Vec<Message> {
    let mut buf = bytes::BytesMut::new();
    let mut out = Vec::new();
    let limits = herald_sip::Limits::default();
    let mut chunk = [0u8; 4096];
    while out.len() < n {
        loop {
            match herald_sip::framing::next_frame(&mut buf, &limits) {
                Ok(Some(herald_sip::framing::Frame::Message(b))) => {
                    out.push(Message::parse_as(b, &limits, herald_sip::Framing::Stream).unwrap())
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
        if out.len() >= n {
            break;
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(k) => buf.extend_from_slice(&chunk[..k]),
        }
    }
    out
}

/// Whether the server closes the connection within `within` (EOF or reset).
pub fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).unwrap();
    let mut b = [0u8; 1024];
    loop {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut => {
                return false
            }
            Err(_) => return true,
        }
    }
}

pub fn send_tcp(s: &mut TcpStream, text: &str) {
    s.write_all(text.as_bytes()).unwrap();
}
