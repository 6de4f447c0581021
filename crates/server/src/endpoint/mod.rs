//! The metrics endpoint: the text of a scrape (module `exposition`: the counters of [`Stats`]
//! and the timings of [`crate::metrics`]) and a minimal HTTP/1.1 responder (RFC 9112) that answers `GET /metrics` and
//! nothing else. It runs as tasks of the main thread's runtime, never on a worker.
//!
//! Hostile clients are bounded: at most [`MAX_CONNECTIONS`] at once (more are closed at once), a
//! request head of at most [`MAX_HEAD`] bytes, [`TIMEOUT`] to send it (slowloris) and as long to
//! take the answer. Every answer closes the connection, so there is no keep-alive state.

mod exposition;
#[cfg(test)]
mod scrape_tests;

use crate::stats::Stats;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

/// Largest request head read (request line and headers); a longer one is answered 431.
pub(crate) const MAX_HEAD: usize = 8 * 1024;
/// How long a client may take to send its head, and again to read the answer.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(5);
/// Connections served at once.
pub(crate) const MAX_CONNECTIONS: usize = 32;

/// Binds the endpoint's listener (so that a bad address fails `Server::bind`, not later).
pub(crate) fn bind(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    let l = std::net::TcpListener::bind(addr)?;
    l.set_nonblocking(true)?;
    Ok(l)
}

/// Serves until the runtime that runs it stops.
pub(crate) async fn serve(listener: std::net::TcpListener, stats: Stats) {
    let listener = match TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(error = %e, "metrics endpoint cannot start");
            return;
        }
    };
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!(error = %e, "metrics accept failed");
                // EMFILE and friends: back off instead of spinning.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            tracing::debug!(%peer, "metrics endpoint busy: connection closed");
            continue;
        };
        let stats = stats.clone();
        tokio::spawn(async move {
            answer(stream, &stats).await;
            drop(permit);
        });
    }
}

async fn answer(mut stream: TcpStream, stats: &Stats) {
    let reply = match tokio::time::timeout(TIMEOUT, read_head(&mut stream)).await {
        Ok(Some(head)) => route(&head),
        Ok(None) => Reply::TooLarge,
        Err(_) => Reply::Timeout,
    };
    let (status, body, extra) = match reply {
        Reply::Metrics => ("200 OK", exposition::render(stats), ""),
        Reply::NotFound => ("404 Not Found", "only /metrics is here\n".to_string(), ""),
        Reply::BadMethod => ("405 Method Not Allowed", "only GET\n".to_string(), "Allow: GET\r\n"),
        Reply::BadRequest => ("400 Bad Request", "bad request\n".to_string(), ""),
        Reply::TooLarge => ("431 Request Header Fields Too Large", "request head too large\n".to_string(), ""),
        Reply::Timeout => ("408 Request Timeout", "request head not received in time\n".to_string(), ""),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
         Content-Length: {}\r\n{extra}Connection: close\r\n\r\n",
        body.len()
    );
    let write = async {
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body.as_bytes()).await?;
        stream.shutdown().await
    };
    if let Ok(Err(e)) = tokio::time::timeout(TIMEOUT, write).await {
        tracing::debug!(error = %e, "metrics answer not delivered");
    }
}

/// Reads up to the blank line that ends the head. `None` when [`MAX_HEAD`] bytes hold none; a
/// peer that closes early gets its partial head judged (and most likely a 400).
async fn read_head(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; MAX_HEAD];
    let mut len = 0;
    loop {
        if head_end(&buf[..len]).is_some() {
            buf.truncate(len);
            return Some(buf);
        }
        if len == MAX_HEAD {
            return None;
        }
        match stream.read(&mut buf[len..]).await {
            Ok(0) | Err(_) => {
                buf.truncate(len);
                return Some(buf);
            }
            Ok(n) => len += n,
        }
    }
}

/// Where the head ends: CRLF CRLF, or LF LF from lenient clients (RFC 9112 §2.2 allows a bare LF).
fn head_end(b: &[u8]) -> Option<usize> {
    memchr::memmem::find(b, b"\r\n\r\n").or_else(|| memchr::memmem::find(b, b"\n\n"))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reply {
    Metrics,
    NotFound,
    BadMethod,
    BadRequest,
    TooLarge,
    Timeout,
}

/// What a complete request head asks for. Only the request line matters (RFC 9112 §3).
pub(crate) fn route(head: &[u8]) -> Reply {
    if head_end(head).is_none() {
        return Reply::BadRequest;
    }
    let line_end = head.iter().position(|b| *b == b'\n').unwrap_or(head.len());
    let line = head[..line_end].strip_suffix(b"\r").unwrap_or(&head[..line_end]);
    let mut parts = line.split(|b| *b == b' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Reply::BadRequest;
    };
    if !version.starts_with(b"HTTP/1.") || method.is_empty() || !method.iter().all(u8::is_ascii_uppercase) {
        return Reply::BadRequest;
    }
    let path = target.split(|b| *b == b'?').next().unwrap_or(b"");
    if path != b"/metrics" {
        return Reply::NotFound;
    }
    if method != b"GET" {
        return Reply::BadMethod;
    }
    Reply::Metrics
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        assert_eq!(route(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), Reply::Metrics);
        assert_eq!(route(b"GET /metrics?name[]=x HTTP/1.0\n\n"), Reply::Metrics);
        assert_eq!(route(b"GET / HTTP/1.1\r\n\r\n"), Reply::NotFound);
        assert_eq!(route(b"GET /metricsx HTTP/1.1\r\n\r\n"), Reply::NotFound);
        assert_eq!(route(b"POST /metrics HTTP/1.1\r\n\r\n"), Reply::BadMethod);
        assert_eq!(route(b"HEAD /metrics HTTP/1.1\r\n\r\n"), Reply::BadMethod);
    }

    #[test]
    fn garbage_is_a_bad_request() {
        for head in [
            &b""[..],
            b"\r\n\r\n",
            b"GET /metrics\r\n\r\n",
            b"GET  /metrics HTTP/1.1\r\n\r\n",
            b"GET /metrics HTTP/1.1 extra\r\n\r\n",
            b"get /metrics HTTP/1.1\r\n\r\n",
            b"GET /metrics SIP/2.0\r\n\r\n",
            b"\xff\xfe /metrics HTTP/1.1\r\n\r\n",
            b"GET /metrics HTTP/1.1\r\nHost: x", // the peer closed before the blank line
        ] {
            assert_eq!(route(head), Reply::BadRequest, "{:?}", String::from_utf8_lossy(head));
        }
    }
}
