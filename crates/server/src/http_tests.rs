//! The bounds of [`super::serve`] against real sockets on loopback: statuses for bad heads, the
//! connection limit, the head and answer timeouts, and bounded bodies.

use super::*;
use hyper::Method;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Instant;

/// Starts `serve` on its own thread's runtime on 127.0.0.1 with an echo handler: `/slow` never
/// answers, `/body` answers the body it read (at most 16 bytes, 300 ms), anything else 200 "ok".
fn start(limits: Limits) -> SocketAddr {
    let listener = bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(serve("test endpoint", listener, limits, |req: Request<Incoming>, _peer| async move {
            match (req.method(), req.uri().path()) {
                (_, "/slow") => std::future::pending().await,
                (&Method::POST, "/body") => match read_body(req.into_body(), 16, Duration::from_millis(300)).await {
                    Ok(b) => full(StatusCode::OK, "application/octet-stream", b),
                    Err(answer) => answer,
                },
                _ => text(StatusCode::OK, "ok"),
            }
        }));
    });
    addr
}

fn quick() -> Limits {
    Limits { max_connections: 4, head_timeout: Duration::from_millis(400), answer_timeout: Duration::from_millis(400) }
}

/// Writes `pieces` `gap` apart on a fresh connection and reads until the server closes.
fn exchange(addr: SocketAddr, pieces: &[&[u8]], gap: Duration) -> String {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    for p in pieces {
        // The server may answer and close before a long head is written in full.
        if c.write_all(p).is_err() {
            break;
        }
        std::thread::sleep(gap);
    }
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn status(answer: &str) -> &str {
    answer.split(' ').nth(1).unwrap_or("")
}

#[test]
fn bad_heads_get_their_status_and_every_answer_closes() {
    let addr = start(quick());
    let long_head = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(MAX_HEAD + 100));
    let many_headers: String = (0..=MAX_HEADERS).map(|i| format!("X-{i}: v\r\n")).collect::<String>() + "\r\n";
    let many_headers = format!("GET / HTTP/1.1\r\n{many_headers}");
    for (req, want) in [
        (&b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[..], "200"),
        (b"GET / HTTP/1.0\n\n", "200"),
        (b"\x00\xff\xfe garbage\r\n\r\n", "400"),
        (b"GET /\r\n\r\n", "400"),
        (b"GET / SIP/2.0\r\n\r\n", "400"),
        (long_head.as_bytes(), "431"),
        (many_headers.as_bytes(), "431"),
    ] {
        let answer = exchange(addr, &[req], Duration::ZERO);
        assert_eq!(status(&answer), want, "{:?} → {answer:.200}", String::from_utf8_lossy(&req[..req.len().min(40)]));
        if want == "200" && req.ends_with(b"\r\n\r\n") {
            assert!(answer.contains("\r\nConnection: close\r\n"), "{answer:.300}");
        }
    }
}

#[test]
fn a_slow_head_is_cut_and_a_head_within_the_timeout_is_served() {
    let addr = start(Limits { head_timeout: Duration::from_secs(1), ..quick() });
    let t0 = Instant::now();
    let silent = exchange(addr, &[], Duration::ZERO);
    let waited = t0.elapsed();
    assert_eq!(silent, "", "no answer to a head that never came");
    assert!(waited >= Duration::from_millis(950) && waited < Duration::from_secs(8), "{waited:?}");
    // Dribbled over ~200 ms, within the second.
    let pieces: [&[u8]; 3] = [b"GET / HT", b"TP/1.1\r\nHost: x\r\n", b"\r\n"];
    assert_eq!(status(&exchange(addr, &pieces, Duration::from_millis(100))), "200");
    // Dribbled past it (a byte every 250 ms, never a whole head): cut, unanswered.
    let pieces = [&b"G"[..], b"E", b"T", b" ", b"/", b" ", b"H", b"T", b"T", b"P"];
    let t0 = Instant::now();
    let answer = exchange(addr, &pieces, Duration::from_millis(250));
    assert_eq!(answer, "");
    assert!(t0.elapsed() < Duration::from_secs(8));
}

#[test]
fn an_answer_that_takes_too_long_is_cut() {
    let addr = start(quick());
    let t0 = Instant::now();
    let answer = exchange(addr, &[b"GET /slow HTTP/1.1\r\n\r\n"], Duration::ZERO);
    assert_eq!(answer, "");
    let waited = t0.elapsed();
    // Head and answer timeouts together: 800 ms.
    assert!(waited >= Duration::from_millis(700) && waited < Duration::from_secs(5), "{waited:?}");
}

#[test]
fn connections_over_the_limit_are_closed_and_slots_come_back() {
    // Timeouts long enough that "closed at once" cannot be mistaken for a timeout.
    let slow = Duration::from_secs(4);
    let addr = start(Limits { max_connections: 2, head_timeout: slow, answer_timeout: slow });
    let held: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(addr).unwrap()).collect();
    // Give the accept loop time to take both before the third arrives.
    std::thread::sleep(Duration::from_millis(200));
    let t0 = Instant::now();
    let refused = exchange(addr, &[b"GET / HTTP/1.1\r\n\r\n"], Duration::ZERO);
    assert_eq!(refused, "", "a connection over the limit is closed unanswered");
    assert!(t0.elapsed() < Duration::from_secs(2), "closed at once, not after a timeout");
    drop(held);
    // The held slots are freed when the server sees them closed.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let answer = exchange(addr, &[b"GET / HTTP/1.1\r\n\r\n"], Duration::ZERO);
        if status(&answer) == "200" {
            break;
        }
        assert!(Instant::now() < deadline, "slots never came back: {answer:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn bodies_are_bounded_in_size_and_time() {
    let addr = start(quick());
    let post = |head_and_body: &[u8]| exchange(addr, &[head_and_body], Duration::ZERO);
    let ok = post(b"POST /body HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello");
    assert_eq!(status(&ok), "200", "{ok}");
    assert!(ok.ends_with("\r\n\r\nhello"), "{ok}");
    // Told too long by Content-Length: refused before reading it.
    let long = post(b"POST /body HTTP/1.1\r\nContent-Length: 100000\r\n\r\n");
    assert_eq!(status(&long), "413", "{long}");
    // Chunked, and longer than the bound only when counted.
    let chunked =
        post(b"POST /body HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n0123456789abcdef\r\n1\r\nx\r\n0\r\n\r\n");
    assert_eq!(status(&chunked), "413", "{chunked}");
    let bad = post(b"POST /body HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
    assert!(status(&bad) == "400" || bad.is_empty(), "{bad}");
    // A body that stops coming: 408 after the body timeout (300 ms), long before the rest.
    let pieces: [&[u8]; 2] = [b"POST /body HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc", b"defghij"];
    let slow = exchange(addr, &pieces, Duration::from_millis(1500));
    assert_eq!(status(&slow), "408", "{slow}");
}
