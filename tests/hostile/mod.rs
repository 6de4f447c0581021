//! Hostile traffic for tests/hostile_network.rs: the malformed-message corpus ([`corpus`]),
//! the transports that carry it ([`wire`]), callees that answer and check what herald forwards
//! ([`Sink`]), what herald may send at all ([`check_sent`]), and herald's resident memory
//! ([`rss_kib`]).

pub mod corpus;
pub mod tls;
pub mod wire;

use bytes::{Bytes, BytesMut};
use herald_sip::framing::{next_frame, Frame};
use herald_sip::{Framing, Limits, Message};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// herald's resident set size in KiB (`VmRSS` of /proc/PID/status).
pub fn rss_kib(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = text.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The parser limits of a default herald plus room for what a proxy adds to a message it
/// relays.
fn peer_limits() -> Limits {
    Limits::default().with_relay_room()
}

/// Problems with what herald sent: every message herald emits must parse (on a stream: frame
/// as exactly one message), and what it forwards must also pass the receipt checks herald
/// itself applies (`validate`): it accepted the message, so the next hop must be able to.
#[derive(Default)]
pub struct Violations {
    pub count: AtomicUsize,
    /// The first few, described, with the bytes.
    pub samples: Mutex<Vec<String>>,
}

impl Violations {
    pub fn record(&self, what: &str, bytes: &[u8]) {
        self.count.fetch_add(1, Ordering::Relaxed);
        let mut s = self.samples.lock().unwrap();
        if s.len() < 5 {
            s.push(format!("{what}:\n{}", corpus::escape(&bytes[..bytes.len().min(1500)])));
        }
    }

    pub fn total(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    pub fn report(&self) -> String {
        self.samples.lock().unwrap().join("\n---\n")
    }
}

/// Checks one message herald sent. `forwarded`: a request herald relayed (held to `validate`);
/// else an answer, which may echo the malformed request it answers.
pub fn check_sent(bytes: &[u8], framing: Framing, forwarded: bool, v: &Violations) {
    match Message::parse_as(Bytes::copy_from_slice(bytes), &peer_limits(), framing) {
        Err(e) => v.record(&format!("herald sent bytes that do not parse ({e})"), bytes),
        Ok(m) if forwarded => {
            if let Err(e) = m.validate() {
                v.record(&format!("herald forwarded a message that fails the receipt checks ({e})"), bytes);
            }
        }
        Ok(_) => {}
    }
}

/// Cuts the messages herald sent on one stream out of `buf` and checks each; a framing error
/// is a violation and ends the stream (`false`: nothing after it can be framed, the receiver
/// closes the connection).
pub fn check_stream(buf: &mut BytesMut, forwarded: bool, v: &Violations) -> (Vec<Bytes>, bool) {
    let mut out = Vec::new();
    loop {
        match next_frame(buf, &peer_limits()) {
            Ok(None) => return (out, true),
            Ok(Some(Frame::Message(m))) => {
                check_sent(&m, Framing::Stream, forwarded, v);
                out.push(m);
            }
            Ok(Some(_)) => {}
            Err(e) => {
                v.record(&format!("herald sent a stream that cannot be framed ({e})"), buf);
                buf.clear();
                return (out, false);
            }
        }
    }
}

/// Two user agents registered at herald, one at a UDP contact (`user`) and one at a TCP
/// contact (`user_tcp`). They answer every request herald forwards (INVITE 486 Busy Here,
/// anything else 200) as a live callee would, so that forwarded mutants end their transactions,
/// and they check each message against [`check_sent`].
pub struct Sink {
    pub udp: SocketAddr,
    pub tcp: SocketAddr,
    /// Requests herald forwarded to the UDP and to the TCP callee.
    pub requests: Arc<AtomicUsize>,
    pub requests_tcp: Arc<AtomicUsize>,
    pub violations: Arc<Violations>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Sink {
    /// Binds in the calling thread's network namespace, registers both, and answers from
    /// threads of its own.
    pub fn start(herald: SocketAddr, user: &str, user_tcp: &str) -> Sink {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let (udp, tcp) = (sock.local_addr().unwrap(), listener.local_addr().unwrap());
        register(&sock, herald, user, &format!("<sip:{user}@{udp}>"));
        register(&sock, herald, user_tcp, &format!("<sip:{user_tcp}@{tcp};transport=tcp>"));
        let requests = Arc::new(AtomicUsize::new(0));
        let requests_tcp = Arc::new(AtomicUsize::new(0));
        let violations = Arc::new(Violations::default());
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        let (r, v, s) = (requests.clone(), violations.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            let mut buf = vec![0u8; 65_536];
            sock.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
            while !s.load(Ordering::Relaxed) {
                let Ok((n, from)) = sock.recv_from(&mut buf) else { continue };
                let msg = &buf[..n];
                if let Some(resp) = on_message(msg, Framing::Datagram, &r, &v) {
                    let _ = sock.send_to(&resp, from);
                }
            }
        }));
        let (r, v, s) = (requests_tcp.clone(), violations.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            listener.set_nonblocking(true).unwrap();
            let mut conns = Vec::new();
            while !s.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((c, _)) => {
                        let (r, v, s) = (r.clone(), v.clone(), s.clone());
                        conns.push(std::thread::spawn(move || serve_stream(c, &r, &v, &s)));
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(20)),
                    Err(_) => break,
                }
            }
            for c in conns {
                let _ = c.join();
            }
        }));
        Sink { udp, tcp, requests, requests_tcp, violations, stop, threads }
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// REGISTERs `user` at `contact` from `sock` until herald answers 200.
fn register(sock: &UdpSocket, herald: SocketAddr, user: &str, contact: &str) {
    let local = sock.local_addr().unwrap();
    let req = format!(
        "REGISTER sip:{herald} SIP/2.0\r\n\
         Via: SIP/2.0/UDP {local};branch=z9hG4bK-sink-reg-{user};rport\r\n\
         Max-Forwards: 70\r\n\
         From: <sip:{user}@{herald}>;tag=sink\r\n\
         To: <sip:{user}@{herald}>\r\n\
         Call-ID: sink-reg-{user}@{local}\r\n\
         CSeq: 1 REGISTER\r\n\
         Contact: {contact}\r\n\
         Expires: 3600\r\n\
         Content-Length: 0\r\n\r\n"
    );
    sock.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut buf = vec![0u8; 65_536];
    loop {
        assert!(Instant::now() < deadline, "the sink could not register as {user}");
        sock.send_to(req.as_bytes(), herald).unwrap();
        while let Ok((n, _)) = sock.recv_from(&mut buf) {
            if crate::common::status_of(&buf[..n]) == Some(200) {
                return;
            }
        }
    }
}

fn serve_stream(mut c: TcpStream, r: &AtomicUsize, v: &Violations, stop: &AtomicBool) {
    let _ = c.set_read_timeout(Some(Duration::from_millis(50)));
    let mut buf = BytesMut::new();
    let mut chunk = vec![0u8; 65_536];
    while !stop.load(Ordering::Relaxed) {
        match c.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(_) => return,
        }
        let (frames, ok) = check_stream(&mut buf, true, v);
        for m in frames {
            // Already checked: answer only.
            if let Some(resp) = on_message(&m, Framing::Stream, r, &Violations::default()) {
                let _ = c.write_all(&resp);
            }
        }
        if !ok {
            return; // as herald does with a stream whose framing is lost
        }
    }
}

/// Counts and checks a message herald forwarded; the answer to it, if any.
fn on_message(msg: &[u8], framing: Framing, r: &AtomicUsize, v: &Violations) -> Option<Vec<u8>> {
    if msg.starts_with(b"SIP/2.0 ") {
        return None; // a response to our REGISTER
    }
    r.fetch_add(1, Ordering::Relaxed);
    check_sent(msg, framing, true, v);
    if msg.starts_with(b"ACK ") {
        return None;
    }
    let status = if msg.starts_with(b"INVITE ") { "486 Busy Here" } else { "200 OK" };
    answer(msg, status)
}

/// A response copying the request's Via, From, To (tagged), Call-ID and CSeq lines; `None` when
/// it lacks one.
fn answer(req: &[u8], status: &str) -> Option<Vec<u8>> {
    let text = String::from_utf8_lossy(req);
    let head = text.split("\r\n\r\n").next()?;
    let mut out = format!("SIP/2.0 {status}\r\n");
    let mut have = [false; 4];
    for line in head.split("\r\n").skip(1) {
        let name = line.split(':').next().unwrap_or("").trim().to_ascii_lowercase();
        match name.as_str() {
            "via" | "v" | "from" | "f" => {
                have[0] |= name.starts_with('v');
                have[1] |= name.starts_with('f');
                out.push_str(line);
            }
            "to" | "t" => {
                have[2] = true;
                out.push_str(line);
                if !line.contains(";tag=") {
                    out.push_str(";tag=sink");
                }
            }
            "call-id" | "i" | "cseq" => {
                have[3] |= name == "cseq";
                out.push_str(line);
            }
            _ => continue,
        }
        out.push_str("\r\n");
    }
    out.push_str("Content-Length: 0\r\n\r\n");
    have.iter().all(|h| *h).then(|| out.into_bytes())
}
