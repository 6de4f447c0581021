use super::exposition::Parts;
use super::render;
use crate::metrics::{MsgType, Totals, Wire, WorkerMetrics};
use crate::stats::StatsSnapshot;
use bytes::Bytes;
use herald_sip::Message;

fn parse(text: &str) -> Message {
    Message::parse(Bytes::from(text.replace('\n', "\r\n")), &herald_sip::Limits::default()).unwrap()
}

/// The OpenMetrics text of herald's own families for given numbers.
fn render_parts(workers: usize, snapshot: &StatsSnapshot, totals: &Totals) -> String {
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register_collector(Box::new(Parts { workers, snapshot: snapshot.clone(), totals: totals.clone() }));
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
    out
}

const HEADERS: &str = "Via: SIP/2.0/UDP h;branch=z9hG4bK1\nFrom: <sip:a@b>;tag=1\nTo: <sip:a@b>\nCall-ID: x\n";

#[test]
fn exposition_text() {
    let w = WorkerMetrics::default();
    w.handled(MsgType::Register, Wire::Udp, 3_000, Some(1_500_000));
    w.handled(MsgType::Register, Wire::Udp, 1_000, Some(500_000));
    w.dropped(4);
    let mut t = Totals::default();
    w.add_to(&mut t);
    let snap = StatsSnapshot { udp_received: 2, tcp_open: 1, ..Default::default() };
    let text = render_parts(2, &snap, &t);
    for line in [
        "herald_workers 2",
        "herald_tcp_connections_open 1",
        "herald_socket_drops_total 4",
        "herald_udp_received_total 2",
        "herald_tcp_pings_total 0",
        "herald_messages_received_total{type=\"REGISTER\",transport=\"udp\"} 2",
        "herald_messages_received_total{type=\"INVITE\",transport=\"tcp\"} 0",
        "herald_service_seconds_bucket{le=\"0.000001024\",type=\"REGISTER\"} 1",
        "herald_service_seconds_bucket{le=\"0.000004096\",type=\"REGISTER\"} 2",
        "herald_service_seconds_bucket{le=\"+Inf\",type=\"REGISTER\"} 2",
        "herald_service_seconds_sum{type=\"REGISTER\"} 0.000004",
        "herald_service_seconds_count{type=\"REGISTER\"} 2",
        "herald_service_seconds_squared_sum_total{type=\"REGISTER\"} 1e-11",
        "herald_queue_wait_seconds_sum{type=\"REGISTER\"} 0.002",
        "herald_queue_wait_seconds_squared_sum_total{type=\"REGISTER\"} 0.0000025",
        "# TYPE herald_queue_wait_seconds histogram",
        "# TYPE herald_service_seconds_squared_sum counter",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
    }
    assert!(!text.contains("type=\"INVITE\",le="), "unseen types have no histogram series");
    // One HELP and TYPE per family, and every sample line is `name{labels} value`.
    let mut families = std::collections::HashSet::new();
    for l in text.lines() {
        if let Some(rest) = l.strip_prefix("# TYPE ") {
            assert!(families.insert(rest.split(' ').next().unwrap().to_string()), "{l}");
        } else if !l.starts_with("# HELP ") && l != "# EOF" {
            let value = l.rsplit(' ').next().unwrap();
            assert!(value == "+Inf" || value.parse::<f64>().is_ok(), "{l}");
        }
    }
}

/// The engines' counters (herald-core's authenticator and registrar) reach the scrape and the
/// snapshot once registered, move with the live counters, and keep the format's rules.
#[test]
fn engine_counters_are_exported_once_registered() {
    use herald_core::auth::AuthStats;
    use herald_core::registrar::{Registrar, RegistrarConfig};
    use std::sync::atomic::Ordering::Relaxed;
    use std::sync::Arc;

    let stats = crate::stats::Stats::new(1, None);
    let text = render(&stats);
    assert!(!text.contains("herald_auth_") && !text.contains("herald_registrar_"), "nothing registered yet");
    assert_eq!((stats.snapshot().auth, stats.snapshot().registrar), (None, None));

    let auth = Arc::new(AuthStats::default());
    let registrar = Registrar::new(RegistrarConfig { max_bindings_per_aor: 1, ..RegistrarConfig::default() });
    // `herald serve` registers through the clone `Server::stats` returns; the endpoint reads
    // another clone.
    let handle = stats.clone();
    assert!(handle.export_auth(auth.clone()));
    assert!(handle.export_registrar(registrar.shared_stats()));
    assert!(!handle.export_auth(Arc::new(AuthStats::default())), "the first registration stays");
    let responses = Arc::new(herald_core::engine::ResponseStats::default());
    assert!(handle.export_responses(responses.clone()));
    assert!(!render(&stats).contains("herald_local_responses_total"), "no family before the first response");
    for status in [404, 483, 404] {
        responses.count(status);
    }

    auth.challenges.fetch_add(3, Relaxed);
    auth.accepted.fetch_add(2, Relaxed);
    auth.failed.fetch_add(1, Relaxed);
    auth.replayed.fetch_add(4, Relaxed);
    // One REGISTER accepted, then two refused for the binding limit, through a shard's clone.
    let shard = registrar.clone();
    let store = shard.new_store();
    let peer = herald_core::Peer::udp("192.0.2.1:5060".parse().unwrap());
    for (cseq, contact) in [(1, "a"), (2, "b"), (3, "c")] {
        let req = parse(&format!(
            "REGISTER sip:b SIP/2.0\n{HEADERS}CSeq: {cseq} REGISTER\nContact: <sip:{contact}@h>\nContent-Length: 0\n\n"
        ));
        shard.handle_register(std::time::Instant::now(), &req, peer, &store);
    }

    let snap = stats.snapshot();
    assert_eq!(snap.auth.map(|a| (a.challenges, a.accepted, a.failed, a.replayed)), Some((3, 2, 1, 4)));
    assert_eq!(snap.registrar.map(|r| (r.accepted, r.too_many_bindings)), Some((1, 2)));
    assert_eq!(snap.local_responses, vec![(404, 2), (483, 1)]);
    let text = render(&stats);
    for line in [
        "herald_auth_challenges_total 3",
        "herald_auth_accepted_total 2",
        "herald_auth_rejected_total{reason=\"wrong_response\"} 1",
        "herald_auth_rejected_total{reason=\"replayed\"} 4",
        "herald_auth_rejected_total{reason=\"identity_mismatch\"} 0",
        "herald_registrar_accepted_total 1",
        "herald_registrar_rejected_total{reason=\"too_many_bindings\"} 2",
        "herald_registrar_rejected_total{reason=\"out_of_order\"} 0",
        "herald_local_responses_total{status=\"404\"} 2",
        "herald_local_responses_total{status=\"483\"} 1",
        "# TYPE herald_local_responses counter",
        "# TYPE herald_auth_rejected counter",
        "# TYPE herald_registrar_rejected counter",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
    }
    let mut families = std::collections::HashSet::new();
    for l in text.lines() {
        if let Some(rest) = l.strip_prefix("# TYPE ") {
            assert!(families.insert(rest.split(' ').next().unwrap().to_string()), "family twice: {l}");
        } else if let Some(rest) = l.strip_prefix("# HELP ") {
            assert!(rest.split_once(' ').is_some_and(|(_, h)| !h.trim().is_empty()), "no help text: {l}");
        }
    }
}

/// `[flood]`: bans, locks, lifts and rate-limited drops reach the scrape, with the gauges of
/// what is banned and locked now.
#[test]
fn flood_guard_counters_and_gauges_are_exported() {
    use crate::protect::FloodGuard;
    use herald_core::auth::Failure;
    use herald_core::{ConnId, Peer, Transport};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    let t0 = Instant::now();
    let settings = crate::config::Flood::default().settings();
    let (max_requests, per_user) = (settings.max_requests, settings.max_auth_failures);
    // Built "in the past", so that the scrape (which reads the real clock) sees the old ban
    // lifted and the recent ones live.
    let start = t0.checked_sub(Duration::from_secs(3600)).unwrap_or(t0);
    let guard = Arc::new(FloodGuard::new(settings, start));
    let udp = Peer::udp("192.0.2.1:5060".parse().unwrap());
    let tcp = |ip: &str| Peer {
        transport: Transport::Tcp,
        addr: format!("{ip}:40000").parse().unwrap(),
        conn: Some(ConnId(7)),
    };
    // A TCP flood an hour ago: banned, and lifted since.
    for _ in 0..=max_requests {
        guard.check_request(&tcp("192.0.2.9"), start);
    }
    // Now: a UDP flood (rate-limited), a TCP flood (banned), a user locked at one address.
    for _ in 0..max_requests + 5 {
        guard.check_request(&udp, t0);
    }
    for _ in 0..=max_requests {
        guard.check_request(&tcp("192.0.2.2"), t0);
    }
    for _ in 0..=per_user {
        guard.auth_failed(t0, &udp, Some("alice"), Failure::WrongResponse);
    }
    assert!(guard.locked_out(t0, &udp, "alice"));
    let stats = crate::stats::Stats::new(1, Some(guard));
    let text = render(&stats);
    for line in [
        "herald_flood_rate_limited_total 5",
        "herald_flood_request_bans_total 2",
        "herald_flood_dropped_total 2",
        "herald_flood_user_locks_total 1",
        "herald_flood_user_locks_lifted_total 0",
        "herald_flood_account_locks_total 12", // failures 10 to 21: one lock each (doubling)
        "herald_flood_auth_refused_total 1",
        "herald_flood_auth_bans_total 0",
        "herald_auth_failures_total 21",
        "herald_flood_bans_lifted_total{reason=\"requests\"} 1",
        "herald_flood_bans_lifted_total{reason=\"auth_failures\"} 0",
        "herald_flood_banned_sources 1",
        "herald_flood_locked_users 1",
        "# TYPE herald_flood_banned_sources gauge",
        "# TYPE herald_flood_bans_lifted counter",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
    }
    let mut families = std::collections::HashSet::new();
    for l in text.lines().filter_map(|l| l.strip_prefix("# TYPE ")) {
        assert!(families.insert(l.split(' ').next().unwrap().to_string()), "family twice: {l}");
    }
}

/// Another area's collector and a `prometheus-client` metric, each registered with one line,
/// reach every scrape through any clone of the `Stats`, after herald's own families and before
/// `# EOF`, and move with the area's counters.
#[test]
fn registered_families_reach_the_scrape() {
    use prometheus_client::collector::Collector;
    use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
    use prometheus_client::metrics::counter::{ConstCounter, Counter};
    use prometheus_client::metrics::family::Family;
    use prometheus_client::metrics::MetricType;
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    use std::sync::Arc;

    #[derive(Debug, Default)]
    struct Writes(Arc<AtomicU64>);
    impl Collector for Writes {
        fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
            let m = enc.encode_descriptor("herald_test_writes", "Writes.", None, MetricType::Counter)?;
            ConstCounter::new(self.0.load(Relaxed)).encode(m)
        }
    }

    let stats = crate::stats::Stats::new(1, None);
    let writes = Arc::new(AtomicU64::new(0));
    stats.clone().export_collector(Writes(writes.clone()));
    let actions = Family::<Vec<(&'static str, &'static str)>, Counter>::default();
    stats.clone().export_metric("herald_test_actions", "Actions, by method", actions.clone());
    writes.fetch_add(3, Relaxed);
    actions.get_or_create(&vec![("method", "reload")]).inc();

    let text = render(&stats);
    for line in [
        "# TYPE herald_test_writes counter",
        "herald_test_writes_total 3",
        "# HELP herald_test_actions Actions, by method.",
        "herald_test_actions_total{method=\"reload\"} 1",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
    }
    let lines: Vec<&str> = text.lines().collect();
    let at = |prefix: &str| lines.iter().position(|l| l.starts_with(prefix)).unwrap();
    assert!(at("herald_workers ") < at("herald_test_writes_total"), "herald's own families first");
    assert_eq!(lines.last(), Some(&"# EOF"));
    assert_eq!(lines.iter().filter(|l| **l == "# EOF").count(), 1);
}
