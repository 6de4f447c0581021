//! Gateway sets in the engine: the plan of a call's attempts (`gateway_plan`) and the serial
//! failover between them (`failover`), with a fixed clock, through a `[[route]]` rule.

use super::*;
use crate::gateways::{Algorithm, Destination, GatewaySet, Gateways, Health, HealthState};
use crate::routing::{Action, RoutingTable, Rule};
use context::PlannedDest;

pub(super) const GW1: &str = "192.0.2.51:5060";
pub(super) const GW2: &str = "192.0.2.52:5060";
pub(super) const GW3: &str = "192.0.2.53:5060";

/// An engine with set "pstn" of `gws` (round-robin unless `algorithm` says otherwise).
pub(super) fn harness_with(algorithm: Algorithm, gws: &[&str], tune: impl FnOnce(&mut GatewaySet)) -> Harness {
    let now = Instant::now();
    let dests = gws
        .iter()
        .map(|g| Destination { uri: format!("sip:{g}"), weight: 1, priority: 0, health: Arc::new(Health::new(now)) })
        .collect();
    let mut set = GatewaySet::new("pstn", algorithm, dests);
    tune(&mut set);
    let mut cfg = config(Forking::Parallel, false);
    cfg.gateways = Arc::new(Gateways::new(vec![set], None));
    let rule = Rule { allow_unauthenticated: true, ..Rule::new(Action::GatewaySet("pstn".into())) };
    cfg.routing = Arc::new(RoutingTable::new(vec![rule]));
    let mut h = Harness::from_config(cfg);
    h.now = now;
    h
}

fn plan(h: &Harness, call: &str) -> Result<Vec<context::Planned>, decisions::Local> {
    let msg = Message::parse(Bytes::from(invite("+4930123", call).replace('\n', "\r\n")), &Limits::default()).unwrap();
    h.engine.plan_gateway_set(h.now, "pstn", &msg, "sip:+4930123@example.com")
}

fn dests(p: &[context::Planned]) -> Vec<String> {
    p.iter()
        .map(|p| match &p.dest {
            PlannedDest::Uri(u) => u.clone(),
            PlannedDest::Peer(p) => p.addr.to_string(),
        })
        .collect()
}

#[test]
fn the_plan_lists_up_destinations_in_order_up_to_max_attempts() {
    let h = harness_with(Algorithm::Priority, &[GW1, GW2, GW3], |s| s.failover.max_attempts = 2);
    let p = plan(&h, "c1").ok().unwrap();
    assert_eq!(dests(&p), [format!("sip:{GW1}"), format!("sip:{GW2}")]);
    assert!(p.iter().all(|p| p.request_uri.as_deref() == Some("sip:+4930123@example.com")));
    assert_eq!(p.iter().map(|p| p.gateway.as_ref().unwrap().dest).collect::<Vec<_>>(), [0, 1]);
    let set = h.engine.cfg.gateways.get("pstn").unwrap().clone();
    set.destinations[0].health.force(Some(HealthState::Down));
    assert_eq!(dests(&plan(&h, "c2").ok().unwrap()), [format!("sip:{GW2}"), format!("sip:{GW3}")]);
}

#[test]
fn every_destination_down_is_503_with_retry_after_and_an_unknown_set_is_500() {
    let h = harness_with(Algorithm::RoundRobin, &[GW1, GW2], |s| s.retry_after_s = 17);
    for d in &h.engine.cfg.gateways.get("pstn").unwrap().destinations {
        d.health.force(Some(HealthState::Down));
    }
    match plan(&h, "c1") {
        Err(decisions::Local::RejectWith(503, _, headers)) => assert_eq!(headers, [("Retry-After", "17".to_owned())]),
        _ => panic!("not a 503"),
    }
    let quiet = harness_with(Algorithm::RoundRobin, &[GW1], |s| s.retry_after_s = 0);
    quiet.engine.cfg.gateways.get("pstn").unwrap().destinations[0].health.force(Some(HealthState::Down));
    assert!(matches!(plan(&quiet, "c3"), Err(decisions::Local::Reject(503, _))), "0: no Retry-After");
    let msg = Message::parse(Bytes::from(invite("x", "c2").replace('\n', "\r\n")), &Limits::default()).unwrap();
    assert!(matches!(h.engine.plan_gateway_set(h.now, "nope", &msg, "sip:x@y"), Err(decisions::Local::Reject(500, _))));
}

/// The requests sent to `host`, parsed.
fn requests_to(out: &[Output], host: &str) -> Vec<Message> {
    sent(out).into_iter().filter(|(p, m)| m.is_request() && p.addr == addr(host)).map(|(_, m)| m).collect()
}

/// The statuses of the responses sent to the caller.
fn to_caller(out: &[Output]) -> Vec<u16> {
    sent(out).iter().filter(|(p, m)| p.addr == addr(ALICE) && !m.is_request()).filter_map(|(_, m)| m.status()).collect()
}

fn health(h: &Harness, i: usize) -> crate::gateways::HealthSnapshot {
    h.engine.cfg.gateways.get("pstn").unwrap().destinations[i].health.snapshot()
}

/// A call from Alice: the INVITE that reaches `gw` first.
fn call(h: &mut Harness, id: &str, gw: &str) -> Message {
    let out = h.send(ALICE, &invite("+4930123", id));
    assert_eq!(to_caller(&out), [100]);
    let sent = requests_to(&out, gw);
    assert_eq!(sent.len(), 1, "{out:?}");
    assert_eq!(sent[0].request_uri_bytes(), Some(&b"sip:+4930123@example.com"[..]));
    sent.into_iter().next().unwrap()
}

#[test]
fn a_503_fails_over_to_the_next_destination_and_its_2xx_reaches_the_caller() {
    let mut h = harness_with(Algorithm::Priority, &[GW1, GW2, GW3], |_| {});
    let inv1 = call(&mut h, "f1", GW1);
    let out = h.send(GW1, &answer(&inv1, 503, "Service Unavailable", "g1"));
    assert_eq!(to_caller(&out), [] as [u16; 0], "the caller hears nothing of the 503");
    assert_eq!(requests_to(&out, GW1)[0].method(), Some(Method::Ack));
    let inv2 = requests_to(&out, GW2).into_iter().next().expect("the next destination");
    assert_eq!(inv2.method(), Some(Method::Invite));
    assert_eq!(inv2.call_id().unwrap(), "f1");
    assert_ne!(inv2.top_via().unwrap().branch(), inv1.top_via().unwrap().branch());
    assert_eq!(to_caller(&h.send(GW2, &answer(&inv2, 180, "Ringing", "g2"))), [180]);
    assert_eq!(to_caller(&h.send(GW2, &answer(&inv2, 200, "OK", "g2"))), [200]);
    let (g1, g2) = (health(&h, 0), health(&h, 1));
    assert_eq!((g1.calls, g1.call_failures, g1.active_calls), (1, 1, 0));
    assert_eq!((g2.calls, g2.call_failures, g2.active_calls), (1, 0, 1), "an established call is active");
    assert_eq!(health(&h, 2).calls, 0);
    // The BYE of the call ends it.
    let bye = format!("BYE sip:+4930123@{GW2} SIP/2.0\nVia: SIP/2.0/UDP {ALICE};branch=z9hG4bK-bye1;rport\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=a1\nTo: <sip:+4930123@example.com>;tag=g2\nCall-ID: f1\nCSeq: 2 BYE\nContent-Length: 0\n\n");
    h.send(ALICE, &bye);
    assert_eq!(health(&h, 1).active_calls, 0);
}

#[test]
fn a_486_goes_to_the_caller_and_ends_the_attempts() {
    let mut h = harness_with(Algorithm::Priority, &[GW1, GW2], |_| {});
    let inv1 = call(&mut h, "f2", GW1);
    let out = h.send(GW1, &answer(&inv1, 486, "Busy Here", "g1"));
    assert_eq!(to_caller(&out), [486]);
    assert!(requests_to(&out, GW2).is_empty());
    let g1 = health(&h, 0);
    assert_eq!((g1.calls, g1.call_failures, g1.active_calls), (1, 0, 0), "a busy gateway is a working one");
}

#[test]
fn silence_until_timer_b_fails_over_as_408() {
    let mut h = harness_with(Algorithm::Priority, &[GW1, GW2], |_| {});
    call(&mut h, "f3", GW1);
    let mut inv2 = None;
    for _ in 0..70 {
        let out = h.advance(Duration::from_millis(500));
        assert!(to_caller(&out).iter().all(|s| *s < 200));
        if let Some(m) = requests_to(&out, GW2).into_iter().next() {
            inv2 = Some(m);
            break;
        }
    }
    let inv2 = inv2.expect("the second destination after Timer B");
    let out = h.send(GW2, &answer(&inv2, 503, "Service Unavailable", "g2"));
    // Both failed: the best of 408 and 503 is 408 (§16.7 step 6: lowest class, first).
    assert_eq!(to_caller(&out), [408]);
    assert_eq!(health(&h, 0).call_failures, 1);
}

#[test]
fn the_per_attempt_timeout_moves_on_without_cancel_and_cancels_a_late_provisional() {
    let mut h = harness_with(Algorithm::Priority, &[GW1, GW2], |s| {
        s.failover.attempt_timeout = Some(Duration::from_secs(2));
    });
    let inv1 = call(&mut h, "f4", GW1);
    let out = h.advance(Duration::from_millis(1500));
    assert!(requests_to(&out, GW2).is_empty());
    let out = h.advance(Duration::from_millis(600));
    let inv2 = requests_to(&out, GW2).into_iter().next().expect("next destination at 2 s");
    assert!(
        requests_to(&out, GW1).iter().all(|m| m.method() == Some(Method::Invite)),
        "no CANCEL before a provisional"
    );
    assert_eq!(to_caller(&out), [] as [u16; 0]);
    // GW1 wakes up and rings: it is cancelled, and the caller does not hear its ringing.
    let out = h.send(GW1, &answer(&inv1, 180, "Ringing", "g1"));
    assert_eq!(to_caller(&out), [] as [u16; 0]);
    let cancel = requests_to(&out, GW1);
    assert_eq!(cancel.iter().map(|m| m.method()).collect::<Vec<_>>(), [Some(Method::Cancel)]);
    let out = h.send(GW1, &answer(&inv1, 487, "Request Terminated", "g1"));
    assert_eq!(to_caller(&out), [] as [u16; 0], "the abandoned attempt's final response is absorbed");
    assert_eq!(to_caller(&h.send(GW2, &answer(&inv2, 200, "OK", "g2"))), [200]);
    let g1 = health(&h, 0);
    assert_eq!((g1.calls, g1.call_failures, g1.active_calls), (1, 1, 0));
}

#[test]
fn a_100_trying_keeps_the_attempt_past_its_timeout() {
    let mut h = harness_with(Algorithm::Priority, &[GW1, GW2], |s| {
        s.failover.attempt_timeout = Some(Duration::from_secs(2));
    });
    let inv1 = call(&mut h, "f5", GW1);
    h.advance(Duration::from_millis(500));
    h.send(GW1, &answer(&inv1, 100, "Trying", "g1"));
    let out = h.advance(Duration::from_secs(5));
    assert!(requests_to(&out, GW2).is_empty(), "{out:?}");
    assert_eq!(to_caller(&h.send(GW1, &answer(&inv1, 200, "OK", "g1"))), [200]);
}

#[test]
fn max_attempts_bounds_the_failover_and_a_503_reaches_the_caller_as_500() {
    let mut h = harness_with(Algorithm::Priority, &[GW1, GW2, GW3], |s| s.failover.max_attempts = 2);
    let inv1 = call(&mut h, "f6", GW1);
    let out = h.send(GW1, &answer(&inv1, 503, "Service Unavailable", "g1"));
    let inv2 = requests_to(&out, GW2).into_iter().next().unwrap();
    let out = h.send(GW2, &answer(&inv2, 503, "Service Unavailable", "g2"));
    assert!(requests_to(&out, GW3).is_empty());
    // RFC 3261 §16.7 step 6: the gateways' 503 would make the caller's proxy shun herald.
    assert_eq!(to_caller(&out), [500]);
}

#[test]
fn configured_statuses_fail_over_others_do_not() {
    let mut h = harness_with(Algorithm::Priority, &[GW1, GW2], |s| s.failover.statuses = vec![408, 503, 502]);
    let inv1 = call(&mut h, "f7", GW1);
    let out = h.send(GW1, &answer(&inv1, 502, "Bad Gateway", "g1"));
    let inv2 = requests_to(&out, GW2).into_iter().next().expect("502 fails over when configured");
    let out = h.send(GW2, &answer(&inv2, 500, "Server Internal Error", "g2"));
    assert_eq!(to_caller(&out), [500]);
}

#[test]
fn every_destination_down_answers_503_with_retry_after_at_once() {
    let mut h = harness_with(Algorithm::RoundRobin, &[GW1, GW2], |s| s.retry_after_s = 20);
    for d in &h.engine.cfg.gateways.get("pstn").unwrap().destinations {
        d.health.force(Some(HealthState::Down));
    }
    let out = h.send(ALICE, &invite("+4930123", "f8"));
    let msgs = sent(&out);
    let finals: Vec<&Message> = msgs.iter().map(|(_, m)| m).filter(|m| m.status().is_some_and(|s| s >= 200)).collect();
    assert_eq!(finals.len(), 1);
    assert_eq!(finals[0].status(), Some(503));
    assert_eq!(finals[0].get_by_name("Retry-After"), Some(&b"20"[..]));
    assert!(msgs.iter().all(|(p, _)| p.addr == addr(ALICE)), "nothing sent to a gateway");
}

#[test]
fn m_failed_calls_in_a_row_take_a_destination_down_and_calls_skip_it() {
    let mut h = harness_with(Algorithm::Priority, &[GW1, GW2], |s| s.health.call_failures_down = 2);
    for id in ["m1", "m2"] {
        let inv1 = call(&mut h, id, GW1);
        let out = h.send(GW1, &answer(&inv1, 503, "Service Unavailable", "g1"));
        let inv2 = requests_to(&out, GW2).into_iter().next().unwrap();
        h.send(GW2, &answer(&inv2, 486, "Busy Here", "g2"));
    }
    let g1 = health(&h, 0);
    assert_eq!((g1.state, g1.changes), (HealthState::Down, 1));
    call(&mut h, "m3", GW2);
}

#[test]
fn attempts_spread_by_round_robin_and_each_call_fails_over_in_order() {
    let mut h = harness_with(Algorithm::RoundRobin, &[GW1, GW2, GW3], |_| {});
    let firsts: Vec<String> = (0..6)
        .map(|i| {
            let out = h.send(ALICE, &invite("+4930123", &format!("rr{i}")));
            let (to, _) = sent(&out).into_iter().find(|(_, m)| m.is_request()).unwrap();
            to.addr.to_string()
        })
        .collect();
    assert_eq!(firsts, [GW1, GW2, GW3, GW1, GW2, GW3]);
}

#[test]
fn hash_from_user_keys_on_the_callers_number_in_sip_and_tel_from_uris() {
    let h = harness_with(Algorithm::HashFromUser, &[GW1, GW2, GW3], |_| {});
    let first = |from: &str, call: &str| {
        let text = invite("+4930123", call).replace("From: <sip:alice@example.com>", &format!("From: <{from}>"));
        let msg = Message::parse(Bytes::from(text.replace('\n', "\r\n")), &Limits::default()).unwrap();
        dests(&h.engine.plan_gateway_set(h.now, "pstn", &msg, "sip:+4930123@example.com").ok().unwrap())[0].clone()
    };
    let by_number: Vec<String> = (0..12).map(|n| first(&format!("sip:+49301{n:03}@example.com"), "c")).collect();
    for (n, dest) in by_number.iter().enumerate() {
        // Another call of the same caller, and the same number as a tel: URI, go the same way.
        assert_eq!(&first(&format!("sip:+49301{n:03}@example.com"), "other"), dest);
        assert_eq!(&first(&format!("tel:+49301{n:03}"), "c"), dest);
    }
    let distinct: std::collections::HashSet<&String> = by_number.iter().collect();
    assert!(distinct.len() > 1, "callers spread: {by_number:?}");
}

#[test]
fn a_gateways_408_fails_over_like_its_silence() {
    let mut h = harness_with(Algorithm::Priority, &[GW1, GW2], |_| {});
    let inv1 = call(&mut h, "f9", GW1);
    let out = h.send(GW1, &answer(&inv1, 408, "Request Timeout", "g1"));
    assert_eq!(to_caller(&out), [] as [u16; 0]);
    let inv2 = requests_to(&out, GW2).into_iter().next().expect("408 fails over");
    assert_eq!(to_caller(&h.send(GW2, &answer(&inv2, 200, "OK", "g2"))), [200]);
}

#[test]
fn a_provisional_from_an_abandoned_attempt_is_cancelled_even_after_the_call_ended() {
    let mut h = harness_with(Algorithm::Priority, &[GW1, GW2], |s| {
        s.failover.attempt_timeout = Some(Duration::from_secs(2));
    });
    let inv1 = call(&mut h, "f10", GW1);
    let out = h.advance(Duration::from_millis(2100));
    let inv2 = requests_to(&out, GW2).into_iter().next().unwrap();
    let out = h.send(GW2, &answer(&inv2, 486, "Busy Here", "g2"));
    let busy = sent(&out).into_iter().find(|(p, _)| p.addr == addr(ALICE)).unwrap().1;
    assert_eq!(busy.status(), Some(486));
    let tag = busy.to_tag().unwrap().unwrap().to_owned();
    h.send(ALICE, &format!("ACK sip:+4930123@example.com SIP/2.0\nVia: SIP/2.0/UDP {ALICE};branch=z9hG4bK-f10;rport\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=a1\nTo: <sip:+4930123@example.com>;tag={tag}\nCall-ID: f10\nCSeq: 1 ACK\nContent-Length: 0\n\n"));
    // Timer I ends the caller's transaction, and with it the call's response context.
    h.advance(Duration::from_secs(6));
    // gw1 wakes up at last: it is CANCELled, the caller hears nothing.
    let out = h.send(GW1, &answer(&inv1, 180, "Ringing", "g1"));
    assert_eq!(requests_to(&out, GW1).iter().map(|m| m.method()).collect::<Vec<_>>(), [Some(Method::Cancel)]);
    assert!(sent(&out).iter().all(|(p, _)| p.addr != addr(ALICE)));
    assert!(requests_to(&h.send(GW1, &answer(&inv1, 180, "Ringing", "g1")), GW1).is_empty(), "one CANCEL");
    // gw1 never sends a final response: 64*T1 after the CANCEL its INVITE is dropped.
    let held = h.engine.transactions();
    h.advance(Duration::from_secs(33));
    assert!(h.engine.transactions() < held, "{} transactions still held", h.engine.transactions());
    assert_eq!(h.engine.transactions(), 0);
}

#[test]
fn stateless_mode_sends_to_the_first_destination_of_the_sets_order() {
    let h = harness_with(Algorithm::Priority, &[GW1, GW2, GW3], |_| {});
    let cfg = EngineConfig { stateless: true, ..(*h.engine.cfg).clone() };
    let mut h = Harness { now: h.now, ..Harness::from_config(cfg) };
    let out = h.send(ALICE, &invite("+4930123", "st-gw"));
    assert_eq!(requests_to(&out, GW1).len(), 1, "priority order: the first destination ({out:?})");
    assert!(requests_to(&out, GW2).is_empty() && requests_to(&out, GW3).is_empty());
    assert_eq!(h.engine.transactions(), 0, "no state");
}
