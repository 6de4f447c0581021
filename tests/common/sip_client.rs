//! A bare SIP client for the tests that play phones and attackers by hand: UDP sockets bound
//! to chosen loopback addresses (so one source can be limited while another is served), a
//! REGISTER builder, one request's final answer, everything that arrives until quiet, and an
//! OPTIONS over a TCP connection.

use super::{find, header_of, options_request, status_of};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::raw::c_int;
use std::time::{Duration, Instant};

extern "C" {
    fn setsockopt(fd: c_int, level: c_int, name: c_int, value: *const std::ffi::c_void, len: u32) -> c_int;
}
const SOL_SOCKET: c_int = 1;
const SO_RCVBUF: c_int = 8;
const SO_RCVBUFFORCE: c_int = 33;

pub fn udp_from(ip: &str) -> UdpSocket {
    let s = UdpSocket::bind((ip, 0)).unwrap_or_else(|e| panic!("bind {ip}: {e}"));
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    // Herald may answer a whole queue of requests in one burst: room for all of it, or the
    // test would lose answers, not herald.
    let size: c_int = 4 << 20;
    for opt in [SO_RCVBUFFORCE, SO_RCVBUF] {
        use std::os::fd::AsRawFd;
        // SAFETY: setsockopt(2) reads size_of::<c_int>() bytes from a live local.
        let r = unsafe { setsockopt(s.as_raw_fd(), SOL_SOCKET, opt, (&size as *const c_int).cast(), 4) };
        if r == 0 {
            break; // SO_RCVBUFFORCE needs CAP_NET_ADMIN; SO_RCVBUF is capped by rmem_max
        }
    }
    s
}

/// A REGISTER of `user` from `local`; `auth` is an Authorization value.
pub fn register(herald: SocketAddr, local: SocketAddr, user: &str, cseq: u32, auth: Option<&str>) -> String {
    let auth = auth.map(|a| format!("Authorization: {a}\r\n")).unwrap_or_default();
    format!(
        "REGISTER sip:{herald} SIP/2.0\r\n\
         Via: SIP/2.0/UDP {local};branch=z9hG4bK-r{cseq}-{port};rport\r\n\
         Max-Forwards: 70\r\n\
         From: <sip:{user}@{herald}>;tag=f{port}\r\n\
         To: <sip:{user}@{herald}>\r\n\
         Call-ID: reg-{user}-{port}\r\n\
         CSeq: {cseq} REGISTER\r\n\
         Contact: <sip:{user}@{local}>\r\n\
         {auth}Content-Length: 0\r\n\r\n",
        port = local.port()
    )
}

/// The answer to `req` (matched by CSeq number), or `None` after `wait`.
pub fn transaction(sock: &UdpSocket, herald: SocketAddr, req: &str, wait: Duration) -> Option<Vec<u8>> {
    let cseq = req.lines().find(|l| l.starts_with("CSeq:")).unwrap().to_string();
    sock.send_to(req.as_bytes(), herald).unwrap();
    let deadline = Instant::now() + wait;
    let mut buf = vec![0u8; 65536];
    while Instant::now() < deadline {
        match sock.recv_from(&mut buf) {
            Ok((n, _)) => {
                let m = &buf[..n];
                let final_answer = status_of(m).is_some_and(|s| s >= 200);
                if final_answer && header_of(m, "CSeq", "CSeq").is_some_and(|c| format!("CSeq: {c}") == cseq) {
                    return Some(m.to_vec());
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => panic!("recv: {e}"),
        }
    }
    None
}

/// Sends datagrams that nobody answers any more and counts the answers that still come.
pub fn answers_within(sock: &UdpSocket, quiet: Duration) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65536];
    let mut last = Instant::now();
    while last.elapsed() < quiet {
        match sock.recv_from(&mut buf) {
            Ok((n, _)) => {
                got.push(buf[..n].to_vec());
                last = Instant::now();
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => panic!("recv: {e}"),
        }
    }
    got
}

/// The status of the answer to an OPTIONS sent over `conn`, or `None` if it closed or went
/// quiet for 5 s.
pub fn tcp_options(conn: &mut TcpStream, herald: SocketAddr, call_id: &str) -> Option<u16> {
    let local = conn.local_addr().unwrap();
    conn.write_all(options_request(herald, local, call_id, "TCP").as_bytes()).ok()?;
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while find(&got, b"\r\n\r\n").is_none() {
        let n = conn.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        got.extend_from_slice(&buf[..n]);
    }
    status_of(&got)
}
