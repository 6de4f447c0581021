//! The admin API that `herald ctl` talks to: JSON-RPC 2.0 over HTTP/1.1 (`[admin] listen`,
//! loopback unless bearer tokens are configured), served on the main thread's runtime, never on
//! a worker; and configuration reload on SIGHUP, which runs the same `config.reload`.
//!
//! * `rpc`: the JSON-RPC framing and error codes.
//! * `caller`: who calls (bearer token name, or the loopback peer), logged with every change.
//! * `methods`: the methods, one file per subject, and the audit of changes.
//! * `service`: the HTTP side (paths, 401, body bound) over `crate::http`.
//! * `reload`, `users`: reloading the configuration; the users file.
//! * `context`: what the API works on ([`AdminApi`], given by `herald serve`).

mod caller;
mod context;
mod methods;
mod reload;
mod rpc;
mod service;
mod users;

pub use context::AdminApi;
pub use methods::{AdminCounters, METHODS};
pub use reload::{BuildEngineConfig, Reloader};
pub use rpc::{
    FAILED, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, NOT_FOUND, PARSE_ERROR, REFUSED, UNAVAILABLE,
};
pub use users::UsersFile;

pub(crate) use context::Live;

use crate::config::Admin;
use caller::{Caller, Tokens};
use methods::Methods;
use service::Service;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Connections served at once (an operator's tools, not a crowd).
const MAX_CONNECTIONS: usize = 16;

/// Binds `[admin] listen`, if set. When the address is taken and `required = false` (the
/// built-in configuration), herald serves without the endpoint and says so.
pub(crate) fn bind(config: &Admin) -> Result<Option<std::net::TcpListener>, crate::error::ServerError> {
    let Some(addr) = config.listen else {
        return Ok(None);
    };
    match crate::http::bind(addr) {
        Ok(l) => {
            let at = l.local_addr().unwrap_or(addr);
            tracing::info!(addr = %at, tokens = config.token.len(), "admin endpoint: JSON-RPC 2.0 at POST / (herald ctl)");
            Ok(Some(l))
        }
        Err(source) if !config.required => {
            tracing::warn!(%addr, error = %source, "admin endpoint not started ([admin] required = false): herald ctl cannot reach this herald");
            Ok(None)
        }
        Err(source) => Err(crate::error::ServerError::AdminBind { addr, source }),
    }
}

/// Serves the admin API on `listener` (when given) and reloads on SIGHUP, until the runtime
/// stops. Runs on the main thread's runtime.
pub(crate) async fn run(
    listener: Option<std::net::TcpListener>,
    config: Admin,
    api: AdminApi,
    live: Live,
    counters: Arc<AdminCounters>,
) {
    // Config::load checked the tokens; a token file gone since start leaves no token usable,
    // which refuses every request rather than opening the endpoint.
    let tokens = Arc::new(match config.secrets() {
        Ok(t) => Tokens::new(t),
        Err((_, message)) => {
            tracing::error!(%message, "admin tokens cannot be read: every admin request is refused");
            Tokens::new(vec![(String::from("unusable"), String::from("\u{0}"))])
        }
    });
    if let Some(r) = &api.reload {
        r.set_tokens(tokens.clone());
    }
    let service = Arc::new(Service {
        methods: Methods::new(api, live, counters),
        tokens,
        max_body: config.max_body_bytes,
        refusal_logged: AtomicU64::new(0),
        epoch: Instant::now(),
    });
    if let Some(listener) = listener {
        let limits = crate::http::Limits {
            max_connections: MAX_CONNECTIONS,
            head_timeout: Duration::from_secs(5),
            // A reload or a users change writes a file; a listing page is bounded in time.
            answer_timeout: Duration::from_secs(10),
        };
        let s = service.clone();
        tokio::spawn(crate::http::serve("admin endpoint", listener, limits, move |req, peer| {
            s.clone().answer(req, peer)
        }));
    }
    reload_on_sighup(service).await;
}

/// SIGHUP runs `config.reload` (logged and counted as any change). Without this handler the
/// signal's default action would end the process.
async fn reload_on_sighup(service: Arc<Service>) {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hup = match signal(SignalKind::hangup()) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "cannot handle SIGHUP: reload with herald ctl reload");
            return;
        }
    };
    let call = rpc::Call { method: "config.reload".into(), params: Default::default() };
    while hup.recv().await.is_some() {
        tracing::info!("SIGHUP: reloading the configuration");
        let _ = service.methods.call(&Caller::Signal("SIGHUP"), &call);
    }
}
