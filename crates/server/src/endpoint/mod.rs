//! The metrics endpoint: `GET /metrics` answers the OpenMetrics text of `prometheus-client`
//! (module `exposition`: the counters of [`Stats`] and the timings of [`crate::metrics`], read
//! by a custom collector; module `registry`: the families other areas add). It is served by
//! [`crate::http`] (hyper, on the main thread's runtime, never a worker) with that module's
//! bounds: 32 connections, an 8 KiB head sent within 5 s, 5 s for the answer, one request per
//! connection. Any other path is 404; another method on `/metrics` is 405 with `Allow: GET`.
//!
//! # Adding an area's metrics
//!
//! The hot path never takes a lock to count (Kamailio issue 4209: every worker hung on the
//! metrics lock). So an area that counts on the hot path (the location store, Redis sync,
//! gateways) keeps its own atomics (`AtomicU64`; per worker, like [`Stats`], when several threads
//! bump one at a high rate, so no cache line bounces) and exposes them at scrape time with
//! a [`prometheus_client::collector::Collector`] in its own file, next to its code (any crate:
//! add `prometheus-client.workspace = true` to its Cargo.toml):
//!
//! ```ignore
//! // crates/persist/src/metrics.rs (for example)
//! use prometheus_client::{collector::Collector, encoding::{DescriptorEncoder, EncodeMetric}};
//! use prometheus_client::metrics::{counter::ConstCounter, gauge::ConstGauge, MetricType};
//!
//! #[derive(Debug)]
//! pub struct StoreMetrics(pub Arc<StoreCounters>); // the atomics the writer bumps
//!
//! impl Collector for StoreMetrics {
//!     fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
//!         let c = &self.0;
//!         // A counter: name without `_total`; its sample is `herald_store_writes_total`.
//!         let m = enc.encode_descriptor("herald_store_writes", "Bindings written.", None, MetricType::Counter)?;
//!         ConstCounter::new(c.writes.load(Relaxed)).encode(m)?;
//!         let m = enc.encode_descriptor("herald_store_bindings", "Bindings held now.", None, MetricType::Gauge)?;
//!         ConstGauge::new(c.bindings.load(Relaxed) as i64).encode(m)?;
//!         // Labels: one descriptor, then one sample per label set.
//!         let mut m = enc.encode_descriptor("herald_store_errors", "Failed writes, by kind.", None, MetricType::Counter)?;
//!         for (kind, v) in [("io", &c.io_errors), ("full", &c.full)] {
//!             ConstCounter::new(v.load(Relaxed)).encode(m.encode_family(&[("kind", kind)])?)?;
//!         }
//!         Ok(())
//!     }
//! }
//! ```
//!
//! and registers it with one line where the component is built (`herald serve`'s start-up in
//! `Server`, or `src/main.rs` through `server.stats()`):
//!
//! ```ignore
//! stats.export_collector(StoreMetrics(store.counters()));
//! ```
//!
//! Events off the hot path (admin actions, config reloads, Redis reconnects) may instead use
//! `prometheus-client`'s own metric types directly, registered once and kept by the area:
//!
//! ```ignore
//! let actions = Family::<Vec<(&'static str, String)>, Counter>::default();
//! stats.export_metric("herald_admin_actions", "Admin API calls that changed state, by method", actions.clone());
//! actions.get_or_create(&vec![("method", "registrations.remove".into())]).inc();
//! ```
//!
//! Rules: family names start with `herald_<area>_` and belong to one area (two families of one
//! name make the scrape invalid); a counter's family name has no `_total` (its samples get it);
//! seconds and bytes are the units (`_seconds`, `_bytes`); label values are few and fixed
//! (never a user name, AoR or address: an attacker would choose the series count). The
//! exposition of herald's own families is `exposition.rs`; `herald bench` reads sample names
//! (crates/bench/src/scrape.rs), so renaming one is a change to the scraper too.

mod exposition;
mod registry;
#[cfg(test)]
mod scrape_tests;

pub(crate) use crate::http::bind;

use crate::http::{self, Body, Limits};
use crate::stats::Stats;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW};
use hyper::{Method, Request, Response, StatusCode};
use prometheus_client::registry::Registry;

/// The content type of the OpenMetrics text format, which Prometheus negotiates and accepts.
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

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
    http::full(StatusCode::OK, CONTENT_TYPE, render(stats))
}

/// The text of one scrape: herald's own families, the registered ones, `# EOF`.
pub(crate) fn render(stats: &Stats) -> String {
    let mut own = Registry::default();
    own.register_collector(Box::new(exposition::HeraldFamilies(stats.clone())));
    let mut out = String::with_capacity(32 * 1024);
    // Writing to a String cannot fail, and the collectors only fail when their writer does.
    let _ = prometheus_client::encoding::text::encode_registry(&mut out, &own);
    let _ = stats.encode_families(&mut out);
    let _ = prometheus_client::encoding::text::encode_eof(&mut out);
    out
}
