//! The metrics endpoint: `GET /metrics` answers the text of a scrape (module `exposition`: the
//! counters of [`Stats`] and the timings of [`crate::metrics`]). It is served by [`crate::http`]
//! (hyper, on the main thread's runtime, never a worker) with that module's bounds: 32
//! connections, an 8 KiB head sent within 5 s, 5 s for the answer, one request per connection.
//! Any other path is 404; another method on `/metrics` is 405 with `Allow: GET`.

mod exposition;
#[cfg(test)]
mod scrape_tests;

pub(crate) use crate::http::bind;

use crate::http::{self, Body, Limits};
use crate::stats::Stats;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW};
use hyper::{Method, Request, Response, StatusCode};

/// The content type of the Prometheus text format 0.0.4.
pub(crate) const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Serves until the runtime that runs it stops.
pub(crate) async fn serve(listener: std::net::TcpListener, stats: Stats) {
    http::serve("metrics endpoint", listener, Limits::default(), move |req, _peer| {
        let answer = answer(&req, &stats);
        async move { answer }
    })
    .await;
}

/// The answer to one request: only the request line matters (RFC 9112 §3).
fn answer(req: &Request<Incoming>, stats: &Stats) -> Response<Body> {
    if req.uri().path() != "/metrics" {
        return http::text(StatusCode::NOT_FOUND, "only /metrics is here\n");
    }
    if req.method() != Method::GET {
        let mut r = http::text(StatusCode::METHOD_NOT_ALLOWED, "only GET\n");
        r.headers_mut().insert(ALLOW, HeaderValue::from_static("GET"));
        return r;
    }
    http::full(StatusCode::OK, CONTENT_TYPE, exposition::render(stats))
}
