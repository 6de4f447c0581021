//! The Prometheus text exposition format, version 0.0.4
//! (<https://prometheus.io/docs/instrumenting/exposition_formats/>).
//!
//! Written directly rather than with the `prometheus-client` crate: the data lives in per-worker
//! blocks that must be summed at scrape time, so that crate would only contribute a custom
//! collector's formatting, while its own metric types (one shared atomic per series, locked
//! label maps) are what the hot path must avoid. Every label value here is a fixed ASCII token,
//! so no escaping is needed; the format's rules that matter are one HELP/TYPE per family, and
//! histogram buckets cumulative with a final `le="+Inf"` equal to `_count`.

use crate::metrics::{MsgType, TimingTotals, Totals, MIN_EXP, SLOTS, TYPES, WIRES};
use crate::stats::{Stats, StatsSnapshot};
use std::fmt::Write;

/// The text of one scrape.
pub(crate) fn render(stats: &Stats) -> String {
    let mut totals = Totals::default();
    for w in stats.metrics.iter() {
        w.add_to(&mut totals);
    }
    let mut out = render_parts(stats.workers.len(), &stats.snapshot(), &totals);
    render_protection(&mut out, stats);
    out
}

/// `[overload]` and `[flood]`: the shedding gauge, and the guard's bans, locks and drops.
fn render_protection(o: &mut String, stats: &Stats) {
    use std::sync::atomic::Ordering::Relaxed;
    family(o, "herald_overload_shedding_workers", "gauge", "Workers answering new requests with 503 now.");
    let _ = writeln!(o, "herald_overload_shedding_workers {}", stats.shedding.load(Relaxed));
    let Some(flood) = &stats.flood else { return };
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
        family(o, name, "counter", help);
        let _ = writeln!(o, "{name} {}", v.load(Relaxed));
    }
    let name = "herald_flood_bans_lifted_total";
    family(o, name, "counter", "Source bans that ended, by the reason they were imposed for.");
    let _ = writeln!(o, "{name}{{reason=\"requests\"}} {}", c.request_bans_lifted.load(Relaxed));
    let _ = writeln!(o, "{name}{{reason=\"auth_failures\"}} {}", c.auth_bans_lifted.load(Relaxed));
    let now = std::time::Instant::now();
    family(o, "herald_flood_banned_sources", "gauge", "Source addresses (IPv6: /64s) banned now.");
    let _ = writeln!(o, "herald_flood_banned_sources {}", flood.banned_sources(now));
    family(o, "herald_flood_locked_users", "gauge", "(source, user) pairs locked now.");
    let _ = writeln!(o, "herald_flood_locked_users {}", flood.locked_users(now));
}

pub(crate) fn render_parts(workers: usize, snap: &StatsSnapshot, t: &Totals) -> String {
    let mut out = String::with_capacity(16 * 1024);
    let o = &mut out;
    family(o, "herald_workers", "gauge", "Worker threads, each with its own sockets (the c of M/M/c/K).");
    let _ = writeln!(o, "herald_workers {workers}");
    family(o, "herald_tcp_connections_open", "gauge", "TCP connections open now (accepted and opened).");
    let _ = writeln!(o, "herald_tcp_connections_open {}", snap.tcp_open);
    family(
        o,
        "herald_socket_drops_total",
        "counter",
        "Datagrams the kernel dropped because a worker's UDP socket queue was full (SO_RXQ_OVFL, summed over sockets).",
    );
    let _ = writeln!(o, "herald_socket_drops_total {}", t.socket_drops);
    for (name, help, v) in snap.counters() {
        let name = format!("herald_{name}_total");
        family(o, &name, "counter", help);
        let _ = writeln!(o, "{name} {v}");
    }
    render_engine(o, snap);
    for (name, counts, help) in [
        ("herald_messages_received_total", &t.received, "SIP messages handled, by type and transport."),
        ("herald_messages_sent_total", &t.sent, "SIP messages queued for sending, by type and transport."),
    ] {
        family(o, name, "counter", help);
        for (i, by_wire) in counts.iter().enumerate() {
            for (w, n) in by_wire.iter().enumerate() {
                let _ = writeln!(o, "{name}{{type=\"{}\",transport=\"{}\"}} {n}", MsgType::label(i), WIRES[w]);
            }
        }
    }
    histogram(
        o,
        "herald_queue_wait_seconds",
        "UDP only: kernel receive timestamp (SO_TIMESTAMPNS) to the start of herald's work on the message.",
        &t.queue_wait,
    );
    histogram(
        o,
        "herald_service_seconds",
        "Herald's time on one message: from reading it to its outputs queued for sending.",
        &t.service,
    );
    out
}

/// The engines' counters (herald-core): digest authentication, the registrar and the engines'
/// own responses. Absent when not registered with the `Stats` (`[auth] enabled = false` has no
/// authenticator) or, for the responses, before the first one.
fn render_engine(o: &mut String, snap: &StatsSnapshot) {
    if let Some(a) = &snap.auth {
        for (name, help, v) in [
            (
                "herald_auth_challenges_total",
                "Digest challenges sent: 401 with WWW-Authenticate, 407 with Proxy-Authenticate (stale=true ones included).",
                a.challenges,
            ),
            ("herald_auth_accepted_total", "Requests whose credentials for herald's realm checked out.", a.accepted),
        ] {
            family(o, name, "counter", help);
            let _ = writeln!(o, "{name} {v}");
        }
        let name = "herald_auth_rejected_total";
        family(
            o,
            name,
            "counter",
            "Answers to herald's challenges that did not authenticate, by reason: wrong_response (wrong password \
             or unknown user), stale_or_invalid_nonce (expired, answered stale=true; or not issued by herald), \
             replayed (nonce-count not above the last one), malformed (400), identity_mismatch (403).",
        );
        for (reason, n) in a.rejections() {
            let _ = writeln!(o, "{name}{{reason=\"{reason}\"}} {n}");
        }
    }
    if let Some(r) = &snap.registrar {
        let name = "herald_registrar_accepted_total";
        family(o, name, "counter", "REGISTERs answered 200 (bindings added, refreshed, removed or listed).");
        let _ = writeln!(o, "{name} {}", r.accepted);
        let name = "herald_registrar_rejected_total";
        family(
            o,
            name,
            "counter",
            "REGISTERs the registrar refused, by reason: too_many_bindings (503 + Retry-After, \
             [registrar] max_bindings_per_aor reached), out_of_order (500, CSeq not newer), interval_too_brief \
             (423), not_found (404, domain not served), bad_extension (420), malformed (400), other.",
        );
        for (reason, n) in r.rejections() {
            let _ = writeln!(o, "{name}{{reason=\"{reason}\"}} {n}");
        }
    }
    if !snap.local_responses.is_empty() {
        let name = "herald_local_responses_total";
        family(
            o,
            name,
            "counter",
            "Responses the proxy core built itself (not relayed), by status: its refusals (400, 404, 416, 420, \
             480, 482, 483), final answers synthesized for failed branches (408, 500, 502, 503), 200 to OPTIONS \
             and CANCEL, digest challenges (401, 407). Registrar answers are herald_registrar_*.",
        );
        for (status, n) in &snap.local_responses {
            let _ = writeln!(o, "{name}{{status=\"{status}\"}} {n}");
        }
    }
}

fn family(o: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// A histogram family plus its `_squared_sum` counter family. Only types seen at least once get
/// series (absent means zero), which keeps a scrape of a REGISTER-only load short.
fn histogram(o: &mut String, name: &str, help: &str, t: &[TimingTotals; TYPES]) {
    family(o, name, "histogram", help);
    for (i, h) in t.iter().enumerate().filter(|(_, h)| h.count > 0) {
        let ty = MsgType::label(i);
        let mut cumulative = 0;
        for (s, n) in h.slots.iter().enumerate() {
            cumulative += n;
            if s + 1 == SLOTS {
                let _ = writeln!(o, "{name}_bucket{{type=\"{ty}\",le=\"+Inf\"}} {cumulative}");
            } else {
                let le = (1u64 << (MIN_EXP + s as u32)) as f64 / 1e9;
                let _ = writeln!(o, "{name}_bucket{{type=\"{ty}\",le=\"{le}\"}} {cumulative}");
            }
        }
        let _ = writeln!(o, "{name}_sum{{type=\"{ty}\"}} {}", h.sum_ns as f64 / 1e9);
        let _ = writeln!(o, "{name}_count{{type=\"{ty}\"}} {}", h.count);
    }
    let sq = format!("{name}_squared_sum");
    family(o, &sq, "counter", "Sum of the squared durations in seconds², for the exact second moment.");
    for (i, h) in t.iter().enumerate().filter(|(_, h)| h.count > 0) {
        let _ = writeln!(o, "{sq}{{type=\"{}\"}} {}", MsgType::label(i), h.sum_sq_ns2 / 1e18);
    }
}
