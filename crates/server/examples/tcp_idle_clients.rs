//! Opens many idle TCP connections to a SIP server, for measuring its memory per connection.
//!
//!     tcp_idle_clients TARGET N [SOURCES] [HOLD_SECONDS]
//!
//! Connections come from 127.0.0.2 .. 127.0.0.(1+SOURCES) (bind before connect) so that the
//! 28k ephemeral ports of one source address do not cap N. Each connection sends one RFC 5626
//! CRLFCRLF ping, waits for the CRLF pong (proving the server took it), then idles. Prints
//! `READY <opened>` when done, then holds the connections for HOLD_SECONDS (default 3600) or
//! until standard input closes. The open-file limit is raised to the hard limit first.

use socket2::{Domain, SockAddr, Socket, Type};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

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

fn connect(target: SocketAddr, source: Ipv4Addr) -> std::io::Result<TcpStream> {
    let s = Socket::new(Domain::IPV4, Type::STREAM, None)?;
    s.bind(&SockAddr::from(SocketAddr::from((source, 0))))?;
    s.connect_timeout(&SockAddr::from(target), Duration::from_secs(5))?;
    let mut s: TcpStream = s.into();
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(b"\r\n\r\n")?;
    let mut pong = [0u8; 2];
    s.read_exact(&mut pong)?;
    if &pong != b"\r\n" {
        return Err(std::io::Error::other("no CRLF pong"));
    }
    Ok(s)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: tcp_idle_clients TARGET N [SOURCES] [HOLD_SECONDS]");
        std::process::exit(2);
    }
    let target: SocketAddr = args[1].parse().expect("TARGET is IP:PORT");
    let n: usize = args[2].parse().expect("N is a number");
    let sources: u8 = args.get(3).map_or(8, |s| s.parse().expect("SOURCES is 1..=250"));
    let hold: u64 = args.get(4).map_or(3600, |s| s.parse().expect("HOLD_SECONDS is a number"));
    let limit = raise_nofile();
    eprintln!("open-file limit {limit}; opening {n} connections to {target} from {sources} source addresses");
    let t0 = Instant::now();
    let mut conns = Vec::with_capacity(n);
    let mut first_error: Option<String> = None;
    let mut errors = 0usize;
    for i in 0..n {
        let source = Ipv4Addr::new(127, 0, 0, 2 + (i % sources as usize) as u8);
        match connect(target, source) {
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
