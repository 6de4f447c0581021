//! Gateway sets in the engine: the plan of a call's attempts (`gateway_plan`).

use super::*;
use crate::gateways::{Algorithm, Destination, GatewaySet, Gateways, Health, HealthState};
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
    let msg = Message::parse(Bytes::from(invite("x", "c2").replace('\n', "\r\n")), &Limits::default()).unwrap();
    assert!(matches!(h.engine.plan_gateway_set(h.now, "nope", &msg, "sip:x@y"), Err(decisions::Local::Reject(500, _))));
}
