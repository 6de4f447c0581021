//! Serving HTTP/1.1 (RFC 9112) with hyper on the main thread's tokio runtime, never on a worker:
//! the one home of the bounds every HTTP listener of herald needs (the metrics endpoint,
//! `endpoint`; the admin API). A caller brings a listener and an async handler; [`serve`] accepts,
//! bounds and drives the connections.
//!
//! Every byte here may be an attacker's, so each connection is bounded:
//! - at most [`Limits::max_connections`] at once; more are closed as soon as accepted (no queue);
//! - a request head of at most [`MAX_HEAD`] bytes, answered 431 when longer (hyper's read
//!   buffer, `max_buf_size`), and at most [`MAX_HEADERS`] header fields (431 too);
//! - [`Limits::head_timeout`] to send the head (slowloris): then the connection is closed
//!   without an answer (hyper's `header_read_timeout` answers nothing; RFC 9110 §15.5.9 makes a
//!   408 optional);
//! - [`Limits::answer_timeout`] from the end of that to the last byte of the answer (reading a
//!   body, the handler and writing included): the connection is cut when it runs out, so a client
//!   that reads slowly cannot hold its slot;
//! - a body only when the handler asks for one, through [`read_body`], bounded in size (413) and
//!   in time;
//! - one request per connection (keep-alive off: every answer says `Connection: close`), so no
//!   idle connection holds a slot between requests.
//!
//! Handlers answer with [`Body`], a boxed body: [`text`] and [`full`] build whole answers, and a
//! handler may stream a long one (a `StreamBody` boxed with `BodyExt::boxed_unsync`) as long as
//! it ends within the answer timeout.

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// Largest request head (request line and header fields) read; a longer one is answered 431.
/// hyper's smallest read buffer, and ample for a scrape or a JSON-RPC call.
pub(crate) const MAX_HEAD: usize = 8 * 1024;
/// Most header fields in one request head; more are answered 431.
pub(crate) const MAX_HEADERS: usize = 64;

/// The error a streamed answer body may end with (the connection is then cut).
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// The body of every answer.
pub(crate) type Body = UnsyncBoxBody<Bytes, BoxError>;

/// The bounds of one listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Connections served at once; more are closed when accepted.
    pub(crate) max_connections: usize,
    /// How long a client may take to send its request head.
    pub(crate) head_timeout: Duration,
    /// How long the rest may take: reading the body, the handler, and writing the answer.
    pub(crate) answer_timeout: Duration,
}

impl Default for Limits {
    /// The metrics endpoint's bounds since its first, hand-written responder.
    fn default() -> Limits {
        Limits { max_connections: 32, head_timeout: Duration::from_secs(5), answer_timeout: Duration::from_secs(5) }
    }
}

/// Binds a listener (so that a bad address fails at start, naming the address, not later).
pub(crate) fn bind(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    let l = std::net::TcpListener::bind(addr)?;
    l.set_nonblocking(true)?;
    Ok(l)
}

/// Serves `listener` with `handler` (called with each request and the peer's address) until
/// the runtime that runs this stops or the task is aborted. `what` names the listener in logs.
/// Must run inside a tokio runtime with the time driver (the main thread's).
pub(crate) async fn serve<H, F>(what: &'static str, listener: std::net::TcpListener, limits: Limits, handler: H)
where
    H: Fn(Request<Incoming>, SocketAddr) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
{
    let listener = match TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(error = %e, "{what} cannot start");
            return;
        }
    };
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.head_timeout)
        .max_buf_size(MAX_HEAD)
        .max_headers(MAX_HEADERS)
        .keep_alive(false)
        .title_case_headers(true);
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!(error = %e, "{what}: accept failed");
                // EMFILE and friends: back off instead of spinning.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            tracing::debug!(%peer, "{what} busy: connection closed");
            continue;
        };
        let handler = handler.clone();
        let service = hyper::service::service_fn(move |req| {
            let answer = handler(req, peer);
            async move { Ok::<_, Infallible>(answer.await) }
        });
        let conn = http.serve_connection(TokioIo::new(stream), service);
        let deadline = limits.head_timeout + limits.answer_timeout;
        tokio::spawn(async move {
            match tokio::time::timeout(deadline, conn).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::debug!(%peer, error = %e, "{what}: connection ended"),
                Err(_) => tracing::debug!(%peer, "{what}: connection cut after {deadline:?}"),
            }
            drop(permit);
        });
    }
}

/// Reads a request body of at most `max` bytes within `timeout`. The error is the answer to
/// send instead: 413 when longer (told by Content-Length before any byte is read, or counted),
/// 408 when too slow, 400 when the body is malformed (bad chunking) or cut short.
pub(crate) async fn read_body(body: Incoming, max: usize, timeout: Duration) -> Result<Bytes, Response<Body>> {
    use hyper::body::Body as _;
    if body.size_hint().lower() > max as u64 {
        return Err(text(StatusCode::PAYLOAD_TOO_LARGE, &format!("request body larger than {max} bytes\n")));
    }
    match tokio::time::timeout(timeout, Limited::new(body, max).collect()).await {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            Err(text(StatusCode::PAYLOAD_TOO_LARGE, &format!("request body larger than {max} bytes\n")))
        }
        Ok(Err(_)) => Err(text(StatusCode::BAD_REQUEST, "request body malformed or cut short\n")),
        Err(_) => Err(text(StatusCode::REQUEST_TIMEOUT, "request body not received in time\n")),
    }
}

/// A whole answer with this content type.
pub(crate) fn full(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()).map_err(|never| match never {}).boxed_unsync());
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// A short plain-text answer (errors, refusals).
pub(crate) fn text(status: StatusCode, body: &str) -> Response<Body> {
    full(status, "text/plain; charset=utf-8", Bytes::copy_from_slice(body.as_bytes()))
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;
