//! The ping API (`crate::ping`): herald's own OPTIONS as client transactions of the engine.

use super::*;
use crate::io::ResolveError;
use crate::ping::{Ping, PingOutcome, PingTarget};

const GW: &str = "192.0.2.50:5060";

fn ping(target: PingTarget, timeout: Option<Duration>) -> Ping {
    Ping { target, uri: None, call_id: "ping-1".into(), max_forwards: 1, timeout }
}

fn send_ping(h: &mut Harness, token: u64, p: Ping) -> Vec<Output> {
    let mut out = Vec::new();
    h.engine.handle(h.now, Input::Ping { token, ping: p }, &mut out);
    out
}

fn outcomes(out: &[Output]) -> Vec<(u64, PingOutcome)> {
    out.iter()
        .filter_map(|o| match o {
            Output::PingDone { token, outcome } => Some((*token, *outcome)),
            _ => None,
        })
        .collect()
}

#[test]
fn an_answered_ping_reports_its_status_once() {
    let mut h = Harness::new();
    let out = send_ping(&mut h, 7, ping(PingTarget::Peer(Peer::udp(addr(GW))), None));
    let msgs = sent(&out);
    assert_eq!(msgs.len(), 1);
    let (to, options) = &msgs[0];
    assert_eq!(to.addr, addr(GW));
    assert_eq!(options.method(), Some(Method::Options));
    assert_eq!(options.request_uri_bytes(), Some(&b"sip:192.0.2.50:5060"[..]));
    assert_eq!(options.max_forwards().unwrap(), Some(1));
    assert_eq!(options.call_id().unwrap(), "ping-1");
    let via = options.top_via().unwrap();
    assert!(via.branch().unwrap().starts_with("z9hG4bK"));
    assert!(outcomes(&out).is_empty());
    // A provisional is not an outcome; the final response is, once.
    assert!(outcomes(&h.send(GW, &answer(options, 100, "Trying", "g1"))).is_empty());
    let out = h.send(GW, &answer(options, 404, "Not Found", "g1"));
    assert_eq!(outcomes(&out), [(7, PingOutcome::Answered(404))]);
    assert!(sent(&out).is_empty(), "a response to herald's own request goes nowhere");
    assert!(outcomes(&h.send(GW, &answer(options, 404, "Not Found", "g1"))).is_empty(), "retransmission");
    // The transaction ends after Timer K; nothing more is reported.
    assert!(outcomes(&h.advance(Duration::from_secs(6))).is_empty());
    assert_eq!(h.engine.transactions(), 0);
}

#[test]
fn silence_is_retransmitted_by_timer_e_and_times_out_with_timer_f() {
    let mut h = Harness::new();
    let start = h.now;
    let first = sent(&send_ping(&mut h, 1, ping(PingTarget::Peer(Peer::udp(addr(GW))), None)));
    let branch = first[0].1.top_via().unwrap().branch().unwrap().to_owned();
    let mut retransmits = 0;
    let mut done = Vec::new();
    for _ in 0..320 {
        let out = h.advance(Duration::from_millis(100));
        for (to, m) in sent(&out) {
            assert_eq!((to.addr, m.top_via().unwrap().branch().unwrap()), (addr(GW), branch.as_str()));
            retransmits += 1;
        }
        done.extend(outcomes(&out));
        if !done.is_empty() {
            break;
        }
    }
    // Timer E doubles from T1 to T2 (500 ms ... 4 s): 0.5, 1.5, 3.5, 7.5, then every 4 s to 32 s.
    assert_eq!(retransmits, 10);
    assert_eq!(done, [(1, PingOutcome::TimedOut)]);
    assert!(h.now >= start + Duration::from_secs(32) && h.now < start + Duration::from_millis(32_200), "Timer F");
}

#[test]
fn the_pings_own_timeout_ends_it_early_and_a_late_answer_is_dropped() {
    let mut h = Harness::new();
    let first = sent(&send_ping(&mut h, 3, ping(PingTarget::Peer(Peer::udp(addr(GW))), Some(Duration::from_secs(2)))));
    assert_eq!(h.engine.poll_timeout().map(|t| t <= h.now + Duration::from_millis(500)), Some(true));
    assert!(outcomes(&h.advance(Duration::from_millis(1900))).is_empty());
    assert_eq!(outcomes(&h.advance(Duration::from_millis(200))), [(3, PingOutcome::TimedOut)]);
    assert_eq!(h.engine.transactions(), 0);
    let late = h.send(GW, &answer(&first[0].1, 200, "OK", "g"));
    assert!(late.is_empty(), "{late:?}");
}

#[test]
fn a_uri_with_a_name_is_resolved_first_and_a_failed_lookup_is_reported() {
    let mut h = Harness::new();
    let p = ping(PingTarget::Uri("sip:gw.example.net;transport=tcp".into()), None);
    let out = send_ping(&mut h, 9, p.clone());
    let Some(Output::Resolve { token, request }) = out.first() else { panic!("{out:?}") };
    assert_eq!(request.host, "gw.example.net");
    let target = Target { transport: Transport::Tcp, addr: addr(GW) };
    let mut out = Vec::new();
    h.engine.handle(h.now, Input::Resolved { token: *token, result: Ok(vec![target]) }, &mut out);
    let msgs = sent(&out);
    assert_eq!((msgs[0].0.transport, msgs[0].0.addr), (Transport::Tcp, addr(GW)));
    assert_eq!(msgs[0].1.request_uri_bytes(), Some(&b"sip:gw.example.net;transport=tcp"[..]));
    // Over TCP a transport error ends it at once.
    let mut out = Vec::new();
    h.engine.handle(h.now, Input::TransportError { to: msgs[0].0 }, &mut out);
    assert_eq!(outcomes(&out), [(9, PingOutcome::TransportError)]);

    let out = send_ping(&mut h, 10, Ping { call_id: "ping-2".into(), ..p });
    let Some(Output::Resolve { token, .. }) = out.first() else { panic!() };
    let mut out = Vec::new();
    h.engine.handle(h.now, Input::Resolved { token: *token, result: Err(ResolveError::NoSuchName) }, &mut out);
    assert_eq!(outcomes(&out), [(10, PingOutcome::Unresolved("no such name"))]);
}

#[test]
fn pings_that_cannot_be_sent_are_reported_at_once() {
    let mut h = Harness::new();
    let out = send_ping(&mut h, 1, ping(PingTarget::Uri("tel:+4930123".into()), None));
    assert!(matches!(outcomes(&out)[..], [(1, PingOutcome::NotSent(_))]));
    // No TLS listener.
    let tls = Peer { transport: Transport::Tls, addr: addr(GW), conn: None };
    let out = send_ping(&mut h, 2, ping(PingTarget::Peer(tls), None));
    assert!(matches!(outcomes(&out)[..], [(2, PingOutcome::NotSent(_))]));
    // A NAT keep-alive to a phone names its Contact as Request-URI.
    let phone = Ping { uri: Some(format!("sip:bob@{BOB}")), ..ping(PingTarget::Peer(Peer::udp(addr(BOB))), None) };
    let msgs = sent(&send_ping(&mut h, 3, phone));
    assert_eq!(msgs[0].1.request_uri_bytes(), Some(format!("sip:bob@{BOB}").as_bytes()));
}

#[test]
fn pings_in_flight_are_bounded() {
    let mut h = Harness::new();
    let mut refused = 0;
    for i in 0..(crate::ping::MAX_PINGS_IN_FLIGHT as u64 + 3) {
        let p = Ping { call_id: format!("p{i}"), ..ping(PingTarget::Peer(Peer::udp(addr(GW))), None) };
        refused += outcomes(&send_ping(&mut h, i, p)).len();
    }
    assert_eq!(refused, 3);
}
