//! Herald's own metric families, written by `prometheus-client` in the OpenMetrics text format
//! (<https://prometheus.io/docs/specs/om/open_metrics_spec/>) through a custom [`Collector`].
//!
//! The counting stays where it was: per-worker blocks of relaxed atomics ([`Stats`],
//! [`crate::metrics`]) and the engines' atomics in herald-core, which a scrape sums. The crate's
//! own metric types (one shared atomic per series, label maps behind a lock) are never touched by
//! a worker: a shared lock on the hot path is how every Kamailio worker hung on the metrics lock
//! (Kamailio issue 4209), and one shared cache line per counter would bounce between cores.
//!
//! What OpenMetrics changes from the 0.0.4 text herald wrote before: a counter family is named
//! without `_total` in `# HELP`/`# TYPE` while its samples keep it (so every sample name stays
//! as it was, except the sums of squares, which as counters gained `_total`:
//! `herald_service_seconds_squared_sum_total`), numbers are written shortest-exact (`4e-6`
//! rather than `0.000004`, `le="1.024e-6"`), and the text ends with `# EOF`.

use crate::metrics::{MsgType, TimingTotals, Totals, MIN_EXP, SLOTS, TYPES, WIRES};
use crate::stats::{Stats, StatsSnapshot};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use std::fmt::Result;

/// Reads a [`Stats`] (every clone shares the counters) at each scrape.
#[derive(Debug)]
pub(crate) struct HeraldFamilies(pub(crate) Stats);

impl Collector for HeraldFamilies {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result {
        let stats = &self.0;
        let mut totals = Totals::default();
        for w in stats.metrics.iter() {
            w.add_to(&mut totals);
        }
        encode_parts(&mut enc, stats.workers.len(), &stats.snapshot(), &totals)?;
        encode_protection(&mut enc, stats)
    }
}

/// The families of [`encode_parts`] from given numbers (tests build them by hand).
#[cfg(test)]
#[derive(Debug)]
pub(crate) struct Parts {
    pub(crate) workers: usize,
    pub(crate) snapshot: StatsSnapshot,
    pub(crate) totals: Totals,
}

#[cfg(test)]
impl Collector for Parts {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result {
        encode_parts(&mut enc, self.workers, &self.snapshot, &self.totals)
    }
}

/// A counter family without labels. `name` is the sample's name, with its `_total`.
fn counter(enc: &mut DescriptorEncoder, name: &str, help: &str, v: u64) -> Result {
    ConstCounter::new(v).encode(counter_family(enc, name, help)?)
}

/// The descriptor of a counter family whose samples are called `name` (ending in `_total`).
fn counter_family<'a>(
    enc: &'a mut DescriptorEncoder,
    name: &'a str,
    help: &str,
) -> std::result::Result<MetricEncoder<'a>, std::fmt::Error> {
    let family = name.strip_suffix("_total").unwrap_or(name);
    enc.encode_descriptor(family, help, None, MetricType::Counter)
}

fn gauge(enc: &mut DescriptorEncoder, name: &str, help: &str, v: u64) -> Result {
    ConstGauge::new(v).encode(enc.encode_descriptor(name, help, None, MetricType::Gauge)?)
}

/// One sample of a labelled counter family.
fn labelled(m: &mut MetricEncoder, labels: &[(&str, &str)], v: u64) -> Result {
    ConstCounter::new(v).encode(m.encode_family(&labels)?)
}

/// `[overload]` and `[flood]`: the shedding gauge, and the guard's bans, locks and drops.
fn encode_protection(enc: &mut DescriptorEncoder, stats: &Stats) -> Result {
    use std::sync::atomic::Ordering::Relaxed;
    let shedding = stats.shedding.load(Relaxed) as u64;
    gauge(enc, "herald_overload_shedding_workers", "Workers answering new requests with 503 now.", shedding)?;
    let Some(flood) = &stats.flood else { return Ok(()) };
    let c = &flood.counters;
    for (name, help, v) in [
        (
            "herald_flood_request_bans_total",
            "Sources banned for sending more than [flood] max_requests over TCP/TLS (UDP is rate-limited instead).",
            &c.request_bans,
        ),
        (
            "herald_flood_auth_bans_total",
            "Sources banned for more than [flood] max_auth_failures_per_source.",
            &c.auth_bans,
        ),
        ("herald_flood_dropped_total", "Requests dropped unanswered because their source was banned.", &c.dropped),
        (
            "herald_flood_rate_limited_total",
            "UDP requests dropped unanswered for exceeding [flood] max_requests (no ban).",
            &c.rate_limited,
        ),
        (
            "herald_flood_user_locks_total",
            "(source, user) pairs locked for more than [flood] max_auth_failures; other users of the source are not.",
            &c.user_locks,
        ),
        (
            "herald_flood_user_locks_lifted_total",
            "(source, user) locks that ended.",
            &c.user_locks_lifted,
        ),
        (
            "herald_flood_account_locks_total",
            "Account back-off locks: answers for a user name refused for 1 s, doubling, after [flood] account_failures.",
            &c.account_locks,
        ),
        (
            "herald_flood_auth_refused_total",
            "Answers challenged again unchecked because their (source, user) pair or account was locked.",
            &c.auth_refused,
        ),
        ("herald_flood_untracked_total", "Events from sources not tracked because the tables were full.", &c.untracked),
        (
            "herald_auth_failures_total",
            "Failed authentications (wrong password, unknown user, forged nonce, ...).",
            &c.auth_failures,
        ),
    ] {
        counter(enc, name, help, v.load(Relaxed))?;
    }
    let mut m = counter_family(
        enc,
        "herald_flood_bans_lifted_total",
        "Source bans that ended, by the reason they were imposed for.",
    )?;
    labelled(&mut m, &[("reason", "requests")], c.request_bans_lifted.load(Relaxed))?;
    labelled(&mut m, &[("reason", "auth_failures")], c.auth_bans_lifted.load(Relaxed))?;
    let now = std::time::Instant::now();
    let banned = flood.banned_sources(now) as u64;
    gauge(enc, "herald_flood_banned_sources", "Source addresses (IPv6: /64s) banned now.", banned)?;
    gauge(enc, "herald_flood_locked_users", "(source, user) pairs locked now.", flood.locked_users(now) as u64)
}

fn encode_parts(enc: &mut DescriptorEncoder, workers: usize, snap: &StatsSnapshot, t: &Totals) -> Result {
    gauge(enc, "herald_workers", "Worker threads, each with its own sockets (the c of M/M/c/K).", workers as u64)?;
    gauge(enc, "herald_tcp_connections_open", "TCP connections open now (accepted and opened).", snap.tcp_open)?;
    counter(
        enc,
        "herald_socket_drops_total",
        "Datagrams the kernel dropped because a worker's UDP socket queue was full (SO_RXQ_OVFL, summed over sockets).",
        t.socket_drops,
    )?;
    for (name, help, v) in snap.counters() {
        counter(enc, &format!("herald_{name}_total"), help, v)?;
    }
    encode_engine(enc, snap)?;
    for (name, counts, help) in [
        ("herald_messages_received_total", &t.received, "SIP messages handled, by type and transport."),
        ("herald_messages_sent_total", &t.sent, "SIP messages queued for sending, by type and transport."),
    ] {
        let mut m = counter_family(enc, name, help)?;
        for (i, by_wire) in counts.iter().enumerate() {
            for (w, n) in by_wire.iter().enumerate() {
                labelled(&mut m, &[("type", MsgType::label(i)), ("transport", WIRES[w])], *n)?;
            }
        }
    }
    histogram(
        enc,
        "herald_queue_wait_seconds",
        "UDP only: kernel receive timestamp (SO_TIMESTAMPNS) to the start of herald's work on the message.",
        &t.queue_wait,
    )?;
    histogram(
        enc,
        "herald_service_seconds",
        "Herald's time on one message: from reading it to its outputs queued for sending.",
        &t.service,
    )
}

/// The engines' counters (herald-core): digest authentication, the registrar and the engines'
/// own responses. Absent when not registered with the `Stats` (`[auth] enabled = false` has no
/// authenticator) or, for the responses, before the first one.
fn encode_engine(enc: &mut DescriptorEncoder, snap: &StatsSnapshot) -> Result {
    if let Some(a) = &snap.auth {
        counter(
            enc,
            "herald_auth_challenges_total",
            "Digest challenges sent: 401 with WWW-Authenticate, 407 with Proxy-Authenticate (stale=true ones included).",
            a.challenges,
        )?;
        counter(
            enc,
            "herald_auth_accepted_total",
            "Requests whose credentials for herald's realm checked out.",
            a.accepted,
        )?;
        let mut m = counter_family(
            enc,
            "herald_auth_rejected_total",
            "Answers to herald's challenges that did not authenticate, by reason: wrong_response (wrong password \
             or unknown user), stale_or_invalid_nonce (expired, answered stale=true; or not issued by herald), \
             replayed (nonce-count not above the last one), malformed (400), identity_mismatch (403).",
        )?;
        for (reason, n) in a.rejections() {
            labelled(&mut m, &[("reason", reason)], n)?;
        }
    }
    if let Some(r) = &snap.registrar {
        counter(
            enc,
            "herald_registrar_accepted_total",
            "REGISTERs answered 200 (bindings added, refreshed, removed or listed).",
            r.accepted,
        )?;
        let mut m = counter_family(
            enc,
            "herald_registrar_rejected_total",
            "REGISTERs the registrar refused, by reason: too_many_bindings (503 + Retry-After, \
             [registrar] max_bindings_per_aor reached), out_of_order (500, CSeq not newer), interval_too_brief \
             (423), not_found (404, domain not served), bad_extension (420), malformed (400), other.",
        )?;
        for (reason, n) in r.rejections() {
            labelled(&mut m, &[("reason", reason)], n)?;
        }
    }
    if !snap.local_responses.is_empty() {
        let mut m = counter_family(
            enc,
            "herald_local_responses_total",
            "Responses the proxy core built itself (not relayed), by status: its refusals (400, 404, 416, 420, \
             480, 482, 483), final answers synthesized for failed branches (408, 500, 502, 503), 200 to OPTIONS \
             and CANCEL, digest challenges (401, 407). Registrar answers are herald_registrar_*.",
        )?;
        for (status, n) in &snap.local_responses {
            labelled(&mut m, &[("status", status.to_string().as_str())], *n)?;
        }
    }
    Ok(())
}

/// A histogram family plus its `_squared_sum` counter family. Only types seen at least once get
/// series (absent means zero), which keeps a scrape of a REGISTER-only load short.
fn histogram(enc: &mut DescriptorEncoder, name: &str, help: &str, t: &[TimingTotals; TYPES]) -> Result {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Histogram)?;
    let seen = || t.iter().enumerate().filter(|(_, h)| h.count > 0);
    for (i, h) in seen() {
        // Per-slot counts with their upper bounds; prometheus-client accumulates them, and writes
        // the bound f64::MAX as `+Inf`.
        let buckets: Vec<(f64, u64)> = h
            .slots
            .iter()
            .enumerate()
            .map(|(s, n)| {
                let le = if s + 1 == SLOTS { f64::MAX } else { (1u64 << (MIN_EXP + s as u32)) as f64 / 1e9 };
                (le, *n)
            })
            .collect();
        let labels = [("type", MsgType::label(i))];
        m.encode_family(&labels)?.encode_histogram::<prometheus_client::encoding::NoLabelSet>(
            h.sum_ns as f64 / 1e9,
            h.count,
            &buckets,
            None,
        )?;
    }
    // Not a histogram sample (OpenMetrics histograms have no sum of squares), so its own
    // family; a counter, hence `_total`.
    let sq = format!("{name}_squared_sum_total");
    let mut m = counter_family(enc, &sq, "Sum of the squared durations in seconds², for the exact second moment.")?;
    for (i, h) in seen() {
        ConstCounter::new(h.sum_sq_ns2 / 1e18).encode(m.encode_family(&[("type", MsgType::label(i))])?)?;
    }
    Ok(())
}
