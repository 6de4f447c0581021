//! Opens many idle TCP, WS or WSS connections to a SIP server, for measuring its memory per
//! connection.
//!
//!     tcp_idle_clients TARGET N [SOURCES] [HOLD_SECONDS] [tcp|tls|ws|wss]
//!
//! Connections come from 127.0.0.2 .. 127.0.0.(1+SOURCES) (bind before connect) so that the
//! 28k ephemeral ports of one source address do not cap N. Each connection sends one RFC 5626
//! CRLFCRLF ping, waits for the CRLF pong (proving the server took it), then idles; over `ws`
//! (RFC 7118) it first upgrades with the `sip` subprotocol and the ping and pong are WebSocket
//! messages; `tls` and `wss` do the same as `tcp` and `ws` over TLS (any certificate accepted).
//! Prints
//! `READY <opened>` when done, then holds the connections for HOLD_SECONDS (default 3600) or
//! until standard input closes. The open-file limit is raised to the hard limit first.

use socket2::{Domain, SockAddr, Socket, Type};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What each connection speaks.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Tcp,
    Tls,
    Ws,
    Wss,
}

/// A connection held open (TCP, or TLS over TCP): only dropped.
type Held = Box<dyn std::any::Any>;

/// The WebSocket upgrade (RFC 6455 §4.1) with the `sip` subprotocol, then a CRLFCRLF ping as a
/// masked text message and its CRLF pong as an unmasked one.
fn ws_ping(s: &mut impl ReadWrite) -> std::io::Result<()> {
    s.write_all(
        b"GET / HTTP/1.1\r\nHost: herald\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\
          Sec-WebSocket-Protocol: sip\r\n\r\n",
    )?;
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut b)?;
        head.push(b[0]);
    }
    if !head.starts_with(b"HTTP/1.1 101") {
        return Err(std::io::Error::other(String::from_utf8_lossy(&head).into_owned()));
    }
    let mask = [1u8, 2, 3, 4];
    let mut frame = vec![0x81, 0x80 | 4];
    frame.extend_from_slice(&mask);
    frame.extend(b"\r\n\r\n".iter().enumerate().map(|(i, c)| c ^ mask[i % 4]));
    s.write_all(&frame)?;
    let mut pong = [0u8; 4];
    s.read_exact(&mut pong)?;
    if pong != [0x81, 2, b'\r', b'\n'] {
        return Err(std::io::Error::other("no CRLF pong message"));
    }
    Ok(())
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// A TLS client that accepts any certificate (the benchmark's server has a throwaway one).
fn tls_config() -> Arc<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(herald_tls::AcceptAnyServerCert::new(provider)))
        .with_no_client_auth();
    Arc::new(config)
}

fn raise_nofile() -> u64 {
    // SAFETY: getrlimit/setrlimit with a valid rlimit struct.
    unsafe {
        let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut r);
        r.rlim_cur = r.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut r);
        r.rlim_cur
    }
}

fn connect(target: SocketAddr, source: Ipv4Addr, mode: Mode, tls: &Arc<rustls::ClientConfig>) -> std::io::Result<Held> {
    let s = Socket::new(Domain::IPV4, Type::STREAM, None)?;
    s.bind(&SockAddr::from(SocketAddr::from((source, 0))))?;
    s.connect_timeout(&SockAddr::from(target), Duration::from_secs(5))?;
    let mut s: TcpStream = s.into();
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    match mode {
        Mode::Tcp => {}
        Mode::Ws => {
            ws_ping(&mut s)?;
            return Ok(Box::new(s));
        }
        Mode::Tls | Mode::Wss => {
            let name = rustls_pki_types::ServerName::IpAddress(target.ip().into());
            let conn = rustls::ClientConnection::new(tls.clone(), name).map_err(std::io::Error::other)?;
            let mut tls = Box::new(rustls::StreamOwned::new(conn, s));
            if mode == Mode::Wss {
                ws_ping(&mut tls)?;
            } else {
                crlf_ping(&mut tls)?;
            }
            return Ok(tls);
        }
    }
    crlf_ping(&mut s)?;
    Ok(Box::new(s))
}

/// RFC 5626 §3.5.1: a CRLFCRLF ping and its CRLF pong.
fn crlf_ping(s: &mut impl ReadWrite) -> std::io::Result<()> {
    s.write_all(b"\r\n\r\n")?;
    let mut pong = [0u8; 2];
    s.read_exact(&mut pong)?;
    if &pong != b"\r\n" {
        return Err(std::io::Error::other("no CRLF pong"));
    }
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: tcp_idle_clients TARGET N [SOURCES] [HOLD_SECONDS] [tcp|tls|ws|wss]");
        std::process::exit(2);
    }
    let target: SocketAddr = args[1].parse().expect("TARGET is IP:PORT");
    let n: usize = args[2].parse().expect("N is a number");
    let sources: u8 = args.get(3).map_or(8, |s| s.parse().expect("SOURCES is 1..=250"));
    let hold: u64 = args.get(4).map_or(3600, |s| s.parse().expect("HOLD_SECONDS is a number"));
    let mode = match args.get(5).map_or("tcp", |s| s.as_str()) {
        "tcp" => Mode::Tcp,
        "tls" => Mode::Tls,
        "ws" => Mode::Ws,
        "wss" => Mode::Wss,
        other => panic!("mode is tcp, tls, ws or wss, not {other}"),
    };
    let tls = tls_config();
    let limit = raise_nofile();
    eprintln!("open-file limit {limit}; opening {n} connections to {target} from {sources} source addresses");
    let t0 = Instant::now();
    let mut conns = Vec::with_capacity(n);
    let mut first_error: Option<String> = None;
    let mut errors = 0usize;
    for i in 0..n {
        let source = Ipv4Addr::new(127, 0, 0, 2 + (i % sources as usize) as u8);
        match connect(target, source, mode, &tls) {
            Ok(s) => conns.push(s),
            Err(e) => {
                errors += 1;
                first_error.get_or_insert_with(|| format!("connection {i}: {e}"));
                if errors > 100 {
                    break;
                }
            }
        }
        if (i + 1) % 10_000 == 0 {
            eprintln!("{} connections in {:.1?}", i + 1, t0.elapsed());
        }
    }
    if let Some(e) = &first_error {
        eprintln!("{errors} connections failed; first: {e}");
    }
    println!("READY {}", conns.len());
    let deadline = Instant::now() + Duration::from_secs(hold);
    // Hold until stdin closes or the time is up.
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
        let _ = tx.send(());
    });
    let _ = rx.recv_timeout(deadline.saturating_duration_since(Instant::now()));
    drop(conns);
}
