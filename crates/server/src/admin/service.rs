//! The admin API over HTTP/1.1: `POST /` (or `/rpc`) with a JSON-RPC 2.0 body, served by
//! `crate::http` (connection limits, head and answer timeouts) on the main thread's runtime.
//! Before any method runs, the caller is identified (`caller`); a missing or unknown bearer
//! token is answered 401 (RFC 6750 §3) and logged. Bodies are bounded by `[admin]
//! max_body_bytes` (413 past it, nothing read).

use super::caller::{Caller, Refusal, Tokens};
use super::methods::Methods;
use super::rpc;
use crate::http::{self, Body};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, AUTHORIZATION, WWW_AUTHENTICATE};
use hyper::{Method, Request, Response, StatusCode};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a client may take to send its body.
const BODY_TIMEOUT: Duration = Duration::from_secs(5);

/// What every request is served with.
pub(crate) struct Service {
    pub methods: Methods,
    pub tokens: Arc<Tokens>,
    pub max_body: usize,
    /// Refusals are logged at most once a second (whoever sends bad tokens must not flood the
    /// log); all are counted. Seconds since `epoch` of the last line logged, plus one.
    pub refusal_logged: AtomicU64,
    pub epoch: Instant,
}

impl Service {
    /// Answers one request from `peer`.
    pub async fn answer(self: Arc<Self>, req: Request<Incoming>, peer: SocketAddr) -> Response<Body> {
        if !matches!(req.uri().path(), "/" | "/rpc") {
            return http::text(StatusCode::NOT_FOUND, "the admin API is JSON-RPC 2.0 at POST / (see herald ctl)\n");
        }
        if req.method() != Method::POST {
            let mut r = http::text(StatusCode::METHOD_NOT_ALLOWED, "only POST\n");
            r.headers_mut().insert(ALLOW, HeaderValue::from_static("POST"));
            return r;
        }
        let who = match self.tokens.identify(req.headers().get(AUTHORIZATION).map(|v| v.as_bytes()), peer) {
            Ok(who) => who,
            Err(refusal) => return self.unauthorized(refusal, peer),
        };
        let body = match http::read_body(req.into_body(), self.max_body, BODY_TIMEOUT).await {
            Ok(b) => b,
            Err(answer) => return answer,
        };
        self.call(&who, &body)
    }

    /// The JSON-RPC answer to `body` (204 when it held only notifications).
    fn call(&self, who: &Caller, body: &[u8]) -> Response<Body> {
        match rpc::answer(body, |call| self.methods.call(who, call)) {
            Some(reply) => http::full(StatusCode::OK, "application/json", reply.to_string()),
            None => http::full(StatusCode::NO_CONTENT, "application/json", ""),
        }
    }

    fn unauthorized(&self, refusal: Refusal, peer: SocketAddr) -> Response<Body> {
        self.methods.counters.unauthorized.inc();
        let (why, challenge) = match refusal {
            Refusal::Missing => ("no bearer token", r#"Bearer realm="herald""#),
            Refusal::Unknown => ("unknown bearer token", r#"Bearer realm="herald", error="invalid_token""#),
        };
        let second = self.epoch.elapsed().as_secs() + 1;
        if self.refusal_logged.swap(second, Ordering::Relaxed) != second {
            let total = self.methods.counters.unauthorized.get();
            tracing::warn!(%peer, reason = why, refused_total = total, "admin: request refused (401; logged once a second)");
        }
        let mut r = http::text(StatusCode::UNAUTHORIZED, &format!("{why}: send Authorization: Bearer TOKEN\n"));
        r.headers_mut().insert(WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
        r
    }
}
