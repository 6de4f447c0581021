//! A gateway set on the simulator (issue 18): alice calls a number that a `[[route]]` rule sends
//! to gateway set "pstn" of two simulated gateways, the first of which is silent (gone) or
//! refuses. Herald fails over within the caller's one INVITE transaction: the caller sees one
//! final answer, from the second gateway, at the time the failover rules give.

mod common;

use common::{config, ms, register, ua};
use herald_core::gateways::{Algorithm, Destination, GatewaySet, Gateways, Health, HealthState};
use herald_core::routing::{Action, RoutingTable, Rule};
use herald_sim::{Answer, Sim, UaId};
use std::sync::Arc;
use std::time::{Duration, Instant};

const GW1: &str = "192.0.2.51:5060";
const GW2: &str = "192.0.2.52:5060";

struct World {
    sim: Sim,
    alice: UaId,
    gw1: UaId,
    gw2: UaId,
    gateways: Arc<Gateways>,
}

/// Herald with set "pstn" = [GW1, GW2] in priority order, `tune`d; alice registered; GW1
/// answering as `gw1`, GW2 picking up after 1 s.
fn world(seed: u64, gw1: Answer, tune: impl FnOnce(&mut GatewaySet)) -> World {
    let mut cfg = config(seed);
    let now = Instant::now();
    let dests = [GW1, GW2]
        .iter()
        .enumerate()
        .map(|(i, g)| Destination {
            uri: format!("sip:{g}"),
            weight: 1,
            priority: i as u32,
            health: Arc::new(Health::new(now)),
        })
        .collect();
    let mut set = GatewaySet::new("pstn", Algorithm::Priority, dests);
    tune(&mut set);
    let gateways = Arc::new(Gateways::new(vec![set], None));
    cfg.gateways = gateways.clone();
    cfg.routing = Arc::new(RoutingTable::new(vec![Rule::new(Action::GatewaySet("pstn".into()))]));
    let mut sim = Sim::new(cfg);
    let alice = ua(&mut sim, "alice", "alice", "192.0.2.1:5061");
    let gw1_id = sim.add_ua("gw1", GW1);
    let gw2_id = sim.add_ua("gw2", GW2);
    sim.ua_mut(gw1_id).set_answer(gw1);
    sim.ua_mut(gw2_id).set_answer(Answer::pick_up(ms(1_000)));
    assert_eq!(register(&mut sim, alice), 200);
    sim.run_for(Duration::from_secs(1));
    World { sim, alice, gw1: gw1_id, gw2: gw2_id, gateways }
}

impl World {
    fn health(&self, i: usize) -> herald_core::gateways::HealthSnapshot {
        self.gateways.get("pstn").unwrap().destinations[i].health.snapshot()
    }
}

#[test]
fn a_silent_gateway_is_abandoned_after_the_attempt_timeout_and_the_next_answers() {
    let mut w = world(31, Answer::Silent, |s| s.failover.attempt_timeout = Some(Duration::from_secs(2)));
    let t0 = w.sim.elapsed();
    let call = w.sim.act(w.alice, |ua, now| ua.invite(now, "+4930123"));
    w.sim.run_for(Duration::from_secs(10));
    let outcome = w.sim.ua(w.alice).outcome(&call, "INVITE").unwrap().clone();
    assert_eq!(outcome.status, 200);
    // 407 round trip (10 ms), INVITE to gw1 (5 ms), 2 s of silence, INVITE to gw2 (5 ms),
    // its 200 after 1 s, 5 ms back to herald and 5 ms on to alice.
    assert_eq!(outcome.at - t0, ms(10) + ms(5) + Duration::from_secs(2) + ms(5) + ms(1_000) + ms(10));
    // Exactly one final answer reached alice; gw1 was never cancelled (it sent nothing).
    let finals: Vec<u16> = w.sim.ua(w.alice).statuses("INVITE").into_iter().filter(|s| *s >= 200).collect();
    assert_eq!(finals, [407, 200]);
    assert!(w.sim.ua(w.gw1).requests("CANCEL").is_empty());
    assert!(!w.sim.ua(w.gw1).requests("INVITE").is_empty());
    assert_eq!(w.sim.ua(w.gw2).requests("INVITE").len(), 1);
    assert!(w.sim.ua(w.gw2).acked(&call), "alice's ACK reached the gateway that answered");
    let (g1, g2) = (w.health(0), w.health(1));
    assert_eq!((g1.calls, g1.call_failures, g1.active_calls), (1, 1, 0));
    assert_eq!((g2.calls, g2.call_failures, g2.active_calls), (1, 0, 1));
    // Alice hangs up: the BYE through herald's Record-Route ends the call at gw2.
    w.sim.act(w.alice, |ua, now| ((), ua.bye(now, &call)));
    w.sim.run_for(Duration::from_secs(1));
    assert_eq!(w.sim.ua(w.gw2).requests("BYE").len(), 1);
    assert_eq!(w.health(1).active_calls, 0);
}

#[test]
fn without_an_attempt_timeout_timer_b_moves_the_call_on_after_32_seconds() {
    let mut w = world(32, Answer::Silent, |_| {});
    let t0 = w.sim.elapsed();
    let call = w.sim.act(w.alice, |ua, now| ua.invite(now, "+4930123"));
    w.sim.run_for(Duration::from_secs(40));
    let outcome = w.sim.ua(w.alice).outcome(&call, "INVITE").unwrap().clone();
    assert_eq!(outcome.status, 200);
    // Timer B = 64*T1 after herald's INVITE to gw1; alice, who had herald's 100, waits.
    assert_eq!(outcome.at - t0, ms(15) + Duration::from_secs(32) + ms(5) + ms(1_000) + ms(10));
    // Timer A resent the INVITE to gw1 at 0, 0.5, 1.5, 3.5, 7.5, 15.5, 31.5 s.
    assert_eq!(w.sim.ua(w.gw1).requests("INVITE").len(), 7);
}

#[test]
fn a_refusing_gateway_fails_over_at_once_and_three_in_a_row_take_it_down() {
    let refuse = Answer::Script { ring: None, after: Some((Duration::ZERO, 503)) };
    let mut w = world(33, refuse, |s| s.health.call_failures_down = 3);
    for n in 0..3 {
        let t0 = w.sim.elapsed();
        let call = w.sim.act(w.alice, |ua, now| ua.invite(now, "+4930123"));
        w.sim.run_for(Duration::from_secs(5));
        let outcome = w.sim.ua(w.alice).outcome(&call, "INVITE").unwrap().clone();
        assert_eq!(outcome.status, 200, "call {n}");
        // gw1's 503 comes back 10 ms after the INVITE left: gw2 is tried at once.
        assert_eq!(outcome.at - t0, ms(15) + ms(10) + ms(5) + ms(1_000) + ms(10), "call {n}");
        w.sim.act(w.alice, |ua, now| ((), ua.bye(now, &call)));
        w.sim.run_for(Duration::from_secs(1));
    }
    assert_eq!(w.health(0).state, HealthState::Down);
    assert_eq!(w.sim.ua(w.gw1).requests("INVITE").len(), 3);
    // gw1 is down: the next call goes straight to gw2.
    let call = w.sim.act(w.alice, |ua, now| ua.invite(now, "+4930123"));
    w.sim.run_for(Duration::from_secs(5));
    assert_eq!(w.sim.ua(w.alice).outcome(&call, "INVITE").unwrap().status, 200);
    assert_eq!(w.sim.ua(w.gw1).requests("INVITE").len(), 3);
    assert_eq!(w.sim.ua(w.gw2).requests("INVITE").len(), 4);
    assert_eq!(w.health(1).active_calls, 1);
}
