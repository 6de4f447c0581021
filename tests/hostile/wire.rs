//! How the hostile corpus reaches herald: one [`Transport`] per wire protocol, one
//! [`send_batch`] for all of them, and the liveness probe (a valid OPTIONS answered 200) over
//! the same transport.
//!
//! Streams are opened by a [`Connector`]; TCP is [`TcpConnector`]. TLS (`herald serve
//! --listen-tls`) plugs in as another `Connector` whose `connect` returns the TLS stream (e.g.
//! rustls' `StreamOwned` over a `TcpStream`): the batch modes, the probes and the test's
//! checks then run over TLS unchanged.

use super::corpus::Mutant;
use super::{check_sent, check_stream, Violations};
use bytes::BytesMut;
use herald_sip::Framing;
use std::collections::BTreeMap;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

/// A byte stream to herald.
pub trait Stream: Read + Write + Send {
    /// Half-closes the sending direction (TCP FIN; TLS close_notify then FIN).
    fn shutdown_write(&mut self);
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()>;
    fn local_addr(&self) -> io::Result<SocketAddr>;
}

/// Opens streams to herald.
pub trait Connector: Send + Sync {
    /// The Via transport token: "TCP", "TLS".
    fn via(&self) -> &'static str;
    fn connect(&self, to: SocketAddr) -> io::Result<Box<dyn Stream>>;
}

pub struct TcpConnector;

impl Stream for TcpStream {
    fn shutdown_write(&mut self) {
        let _ = self.shutdown(Shutdown::Write);
    }
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        TcpStream::set_read_timeout(self, t)
    }
    fn local_addr(&self) -> io::Result<SocketAddr> {
        TcpStream::local_addr(self)
    }
}

impl Connector for TcpConnector {
    fn via(&self) -> &'static str {
        "TCP"
    }
    fn connect(&self, to: SocketAddr) -> io::Result<Box<dyn Stream>> {
        let s = TcpStream::connect_timeout(&to, Duration::from_secs(5))?;
        s.set_nodelay(true)?;
        s.set_write_timeout(Some(Duration::from_secs(5)))?;
        Ok(Box::new(s))
    }
}

pub enum Transport {
    /// One datagram per mutant, from one socket.
    Udp(UdpSocket),
    Stream(Box<dyn Connector>),
}

impl Transport {
    pub fn name(&self) -> &'static str {
        match self {
            Transport::Udp(_) => "UDP",
            Transport::Stream(c) => c.via(),
        }
    }

    /// The largest mutant this transport can carry at all.
    pub fn max_len(&self) -> usize {
        match self {
            // 65,535 - 20 (IPv4 header) - 8 (UDP header).
            Transport::Udp(_) => 65_507,
            // Past herald's limit (65,535) by a margin: the oversized cases must arrive.
            Transport::Stream(_) => 256 * 1024,
        }
    }
}

/// How a stream batch is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Datagrams (UDP only).
    Datagrams,
    /// Each mutant on a new connection, half-closed after it; up to [`OPEN_AT_ONCE`] open.
    ConnectionEach,
    /// All mutants back to back on one connection; a new one when herald closes it (it must,
    /// once the framing is lost).
    Pipelined,
    /// Each mutant on a new connection in small pieces with pauses; every fifth stops halfway
    /// and is left open (herald's incomplete-message timeout must deal with it).
    Slow,
}

/// Connections a `ConnectionEach` batch keeps open at once (herald allows 256 per address).
const OPEN_AT_ONCE: usize = 32;
/// How long a finished connection is given to deliver herald's answer and close.
const LINGER: Duration = Duration::from_millis(300);

/// What happened to a batch, for the report.
#[derive(Debug, Default)]
pub struct BatchReport {
    pub sent: usize,
    /// Final responses (status → count) and provisional ones, as far as they were read.
    pub statuses: BTreeMap<u16, usize>,
    /// Requests herald sent to the sender (a mutant named it as a contact, ...).
    pub requests_received: usize,
    /// Connections herald closed (EOF or reset) while the batch was sent.
    pub closed_by_herald: usize,
    pub connections: usize,
    /// Mutants that could not be sent (connection refused, write error on a fresh connection).
    pub send_errors: usize,
    pub elapsed: Duration,
}

impl BatchReport {
    /// Counts one message herald sent us.
    fn count(&mut self, msg: &[u8]) {
        match crate::common::status_of(msg) {
            Some(code) => *self.statuses.entry(code).or_default() += 1,
            None => self.requests_received += 1,
        }
    }

    /// Checks and counts what herald sent on one connection.
    fn account_stream(&mut self, buf: &mut BytesMut, v: &Violations) {
        for m in check_stream(buf, false, v).0 {
            self.count(&m);
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Sends `mutants` to `herald` over `transport` in `mode`. Everything herald sends back is
/// checked with [`check_sent`] (it must parse; on a stream, frame) into `v`.
pub fn send_batch(
    transport: &Transport,
    herald: SocketAddr,
    mutants: &[Mutant],
    mode: Mode,
    v: &Violations,
) -> BatchReport {
    let started = Instant::now();
    let mut r = BatchReport::default();
    match (transport, mode) {
        (Transport::Udp(sock), Mode::Datagrams) => udp_batch(sock, herald, mutants, &mut r, v),
        (Transport::Stream(c), Mode::ConnectionEach) => each_on_own_connection(&**c, herald, mutants, &mut r, v),
        (Transport::Stream(c), Mode::Pipelined) => pipelined(&**c, herald, mutants, &mut r, v),
        (Transport::Stream(c), Mode::Slow) => slow(&**c, herald, mutants, &mut r, v),
        (t, m) => panic!("mode {m:?} does not apply to {}", t.name()),
    }
    r.elapsed = started.elapsed();
    r
}

fn udp_batch(sock: &UdpSocket, herald: SocketAddr, mutants: &[Mutant], r: &mut BatchReport, v: &Violations) {
    sock.set_nonblocking(true).unwrap();
    let mut buf = vec![0u8; 65_536];
    let mut drain = |r: &mut BatchReport| {
        while let Ok((n, _)) = sock.recv_from(&mut buf) {
            check_sent(&buf[..n], Framing::Datagram, false, v);
            r.count(&buf[..n]);
        }
    };
    for (i, m) in mutants.iter().enumerate() {
        match sock.send_to(&m.bytes, herald) {
            Ok(_) => r.sent += 1,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5));
                if sock.send_to(&m.bytes, herald).is_ok() {
                    r.sent += 1;
                } else {
                    r.send_errors += 1;
                }
            }
            Err(_) => r.send_errors += 1,
        }
        // About 2,000 datagrams per second: hostile, but not a flood that the overload control
        // would rightly answer with 503s to everybody (tests/protect.rs covers floods).
        if i % 10 == 9 {
            drain(r);
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let until = Instant::now() + Duration::from_millis(300);
    while Instant::now() < until {
        drain(r);
        std::thread::sleep(Duration::from_millis(20));
    }
    sock.set_nonblocking(false).unwrap();
}

/// Reads what herald sends into `got` until EOF, reset or `until`; true if herald closed the
/// stream.
fn read_until_closed(s: &mut dyn Stream, until: Instant, got: &mut BytesMut) -> bool {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        let _ = s.set_read_timeout(Some(left.max(Duration::from_millis(1))));
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => return false,
            Err(_) => return true,
        }
    }
}

/// Reads the rest of a finished stream, then checks and counts all herald sent on it.
fn finish(s: &mut dyn Stream, until: Instant, mut got: BytesMut, r: &mut BatchReport, v: &Violations) {
    if read_until_closed(s, until, &mut got) {
        r.closed_by_herald += 1;
    }
    r.account_stream(&mut got, v);
}

fn each_on_own_connection(
    c: &dyn Connector,
    herald: SocketAddr,
    mutants: &[Mutant],
    r: &mut BatchReport,
    v: &Violations,
) {
    let mut open: Vec<Box<dyn Stream>> = Vec::new();
    let settle = |open: &mut Vec<Box<dyn Stream>>, r: &mut BatchReport| {
        let until = Instant::now() + LINGER;
        for mut s in open.drain(..) {
            finish(&mut *s, until, BytesMut::new(), r, v);
        }
    };
    for m in mutants {
        match c.connect(herald) {
            Ok(mut s) => {
                r.connections += 1;
                if s.write_all(&m.bytes).is_ok() {
                    r.sent += 1;
                } else {
                    r.send_errors += 1;
                }
                s.shutdown_write();
                open.push(s);
            }
            Err(_) => r.send_errors += 1,
        }
        if open.len() == OPEN_AT_ONCE {
            settle(&mut open, r);
        }
    }
    settle(&mut open, r);
}

fn pipelined(c: &dyn Connector, herald: SocketAddr, mutants: &[Mutant], r: &mut BatchReport, v: &Violations) {
    let mut conn: Option<Box<dyn Stream>> = None;
    let mut got = BytesMut::new();
    let mut buf = vec![0u8; 64 * 1024];
    for m in mutants {
        for attempt in 0..2 {
            if conn.is_none() {
                match c.connect(herald) {
                    Ok(s) => {
                        let _ = s.set_read_timeout(Some(Duration::from_millis(1)));
                        r.connections += 1;
                        conn = Some(s);
                    }
                    Err(_) => break,
                }
            }
            let s = conn.as_mut().unwrap();
            if s.write_all(&m.bytes).is_ok() {
                r.sent += 1;
                break;
            }
            // Herald closed the connection (framing lost earlier): count it, retry on a new one.
            conn = None;
            r.closed_by_herald += 1;
            r.account_stream(&mut got, v);
            got.clear();
            if attempt == 1 {
                r.send_errors += 1;
            }
        }
        // Read what is there without waiting, so that neither side's buffers fill up.
        if let Some(s) = conn.as_mut() {
            let closed = match s.read(&mut buf) {
                Ok(0) => true,
                Ok(n) => {
                    got.extend_from_slice(&buf[..n]);
                    false
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => false,
                Err(_) => true,
            };
            if closed {
                conn = None;
                r.closed_by_herald += 1;
                r.account_stream(&mut got, v);
                got.clear();
            }
        }
    }
    if let Some(mut s) = conn {
        s.shutdown_write();
        finish(&mut *s, Instant::now() + LINGER, got, r, v);
    }
}

fn slow(c: &dyn Connector, herald: SocketAddr, mutants: &[Mutant], r: &mut BatchReport, v: &Violations) {
    let mut abandoned = Vec::new();
    for (i, m) in mutants.iter().enumerate() {
        let Ok(mut s) = c.connect(herald) else {
            r.send_errors += 1;
            continue;
        };
        r.connections += 1;
        let half = i % 5 == 4;
        let len = if half { m.bytes.len() / 2 } else { m.bytes.len() };
        let piece = (len / 4).max(1);
        let mut ok = true;
        for chunk in m.bytes[..len].chunks(piece) {
            if s.write_all(chunk).is_err() {
                ok = false;
                break;
            }
            std::thread::sleep(Duration::from_millis(3));
        }
        if !ok {
            r.closed_by_herald += 1;
            continue;
        }
        r.sent += 1;
        if half {
            abandoned.push(s); // open, half a message in, until the batch ends
        } else {
            s.shutdown_write();
            finish(&mut *s, Instant::now() + Duration::from_millis(100), BytesMut::new(), r, v);
        }
    }
    drop(abandoned);
}

/// A valid OPTIONS to herald itself over `transport` answered 200 within `timeout`: over UDP
/// from the transport's socket, over a stream on a new connection.
pub fn options_ok(transport: &Transport, herald: SocketAddr, call_id: &str, timeout: Duration) -> Result<(), String> {
    match transport {
        Transport::Udp(sock) => crate::common::udp_options_ok(sock, herald, call_id, timeout),
        Transport::Stream(c) => {
            let mut s = c.connect(herald).map_err(|e| format!("{} connect: {e}", c.via()))?;
            let local = s.local_addr().map_err(|e| e.to_string())?;
            let req = crate::common::options_request(herald, local, call_id, c.via());
            s.write_all(req.as_bytes()).map_err(|e| format!("{} write: {e}", c.via()))?;
            let deadline = Instant::now() + timeout;
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                if let Some(end) = find(&got, b"\r\n\r\n") {
                    let head = &got[..end + 4];
                    return match crate::common::status_of(head) {
                        Some(200) if crate::common::header_of(head, "Call-ID", "i") == Some(call_id) => Ok(()),
                        s => Err(format!("OPTIONS over {} answered {s:?}: {}", c.via(), String::from_utf8_lossy(head))),
                    };
                }
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(format!("no answer to OPTIONS over {} within {timeout:?}", c.via()));
                }
                s.set_read_timeout(Some(left)).map_err(|e| e.to_string())?;
                match s.read(&mut buf) {
                    Ok(0) => return Err(format!("{} connection closed before the answer", c.via())),
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                    Err(e) => return Err(format!("{} read: {e}", c.via())),
                }
            }
        }
    }
}
