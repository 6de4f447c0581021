//! Whole call flows through herald on the simulator, each with a fixed seed: registration with
//! digest authentication, a call with Record-Route, a parallel fork, CANCEL.

mod common;

use common::{config, ms, register, ua};
use herald_sim::{Answer, Sim};
use std::time::Duration;

#[test]
fn register_answers_the_challenge_and_stores_the_binding() {
    let mut sim = Sim::new(config(1));
    let alice = ua(&mut sim, "alice", "alice", "192.0.2.1:5061");
    assert_eq!(register(&mut sim, alice), 200);
    // 401 (RFC 3261 §22.4), then 200 for the retry with credentials: two round trips of 2 x 5 ms.
    assert_eq!(sim.ua(alice).statuses("REGISTER"), [401, 200]);
    let outcome = sim.ua(alice).outcomes().last().unwrap().clone();
    assert_eq!(outcome.at, ms(20));
    let aor = herald_core::registrar::Aor::parse("sip:alice@example.com").unwrap();
    let bindings = sim.herald.store.lookup(&aor, sim.now);
    assert_eq!(bindings.len(), 1);
    assert_eq!(&*bindings[0].contact, "sip:alice@192.0.2.1:5061");
}

#[test]
fn a_wrong_password_is_refused() {
    let mut sim = Sim::new(config(2));
    let mallory = ua(&mut sim, "mallory", "alice", "192.0.2.66:5060");
    sim.ua_mut(mallory).set_password("guess");
    // The retry with wrong credentials is challenged again; the UA gives up after one retry.
    assert_eq!(register(&mut sim, mallory), 401);
    assert_eq!(sim.ua(mallory).statuses("REGISTER"), [401, 401]);
}

#[test]
fn a_call_goes_through_herald_and_stays_in_its_route() {
    let mut sim = Sim::new(config(3));
    let alice = ua(&mut sim, "alice", "alice", "192.0.2.1:5061");
    let bob = ua(&mut sim, "bob", "bob", "192.0.2.2:5062");
    sim.ua_mut(bob).set_answer(Answer::pick_up(ms(1_000)));
    assert_eq!(register(&mut sim, alice), 200);
    assert_eq!(register(&mut sim, bob), 200);

    let t0 = sim.elapsed();
    let call = sim.act(alice, |ua, now| ua.invite(now, "bob"));
    assert!(sim.run_until(Duration::from_secs(5), |s| s.ua(bob).acked(&call)), "bob's 200 was never acknowledged");
    // alice: 407 (a local caller must authenticate, RFC 3261 §22.3), then 100, 180 and 200.
    assert_eq!(sim.ua(alice).statuses("INVITE"), [407, 100, 180, 200]);
    let ok = sim.ua(alice).outcome(&call, "INVITE").unwrap().clone();
    assert_eq!(ok.status, 200);
    // The challenge round trip (10 ms), the INVITE to bob (10 ms), bob's second, 200 back (10 ms).
    assert_eq!(ok.at - t0, ms(1_030));
    // bob saw one INVITE, from herald, with herald's Record-Route (RFC 3261 §16.6 step 4).
    let invites = sim.ua(bob).requests("INVITE");
    assert_eq!(invites.len(), 1);
    assert_eq!(invites[0].from, sim.herald.addr);
    let rr: Vec<String> = invites[0].msg.record_routes().map(|r| r.unwrap().uri.as_str().to_owned()).collect();
    assert_eq!(rr.len(), 1, "{rr:?}");
    assert!(rr[0].starts_with("sip:192.0.2.10:5060"), "{rr:?}");
    // The ACK followed the route set: through herald, not straight to bob.
    let acks = sim.ua(bob).requests("ACK");
    assert_eq!(acks.len(), 1);
    assert_eq!(acks[0].from, sim.herald.addr);

    sim.act(alice, |ua, now| ((), ua.bye(now, &call)));
    assert!(sim.run_until(Duration::from_secs(5), |s| s.ua(alice).outcome(&call, "BYE").is_some()));
    assert_eq!(sim.ua(alice).outcome(&call, "BYE").unwrap().status, 200);
    let byes = sim.ua(bob).requests("BYE");
    assert_eq!(byes.len(), 1);
    assert_eq!(byes[0].from, sim.herald.addr, "the BYE went through herald too");
}

#[test]
fn a_parallel_fork_rings_both_phones_and_cancels_the_loser() {
    let mut sim = Sim::new(config(4));
    let alice = ua(&mut sim, "alice", "alice", "192.0.2.1:5061");
    let desk = ua(&mut sim, "desk", "dave", "192.0.2.4:5064");
    let mobile = ua(&mut sim, "mobile", "dave", "192.0.2.5:5065");
    sim.ua_mut(desk).set_answer(Answer::ring_forever());
    sim.ua_mut(mobile).set_answer(Answer::pick_up(ms(2_000)));
    for id in [alice, desk, mobile] {
        assert_eq!(register(&mut sim, id), 200);
    }
    let call = sim.act(alice, |ua, now| ua.invite(now, "dave"));
    assert!(sim.run_until(Duration::from_secs(10), |s| s.ua(mobile).acked(&call)));
    sim.run_for(Duration::from_secs(1));
    assert_eq!(sim.ua(alice).outcome(&call, "INVITE").unwrap().status, 200);
    assert_eq!(sim.ua(desk).requests("INVITE").len(), 1, "both contacts rang");
    assert_eq!(sim.ua(mobile).requests("INVITE").len(), 1);
    // RFC 3261 §16.7 step 10: once a 2xx came, the other branch is cancelled.
    assert_eq!(sim.ua(desk).requests("CANCEL").len(), 1);
    assert!(sim.ua(mobile).requests("CANCEL").is_empty());
    // alice saw the mobile's 200 and never the desk's 487 (§16.7 step 6: one best answer).
    let finals: Vec<u16> = sim.ua(alice).statuses("INVITE").into_iter().filter(|s| *s >= 200).collect();
    assert_eq!(finals, [407, 200], "the challenge, then the mobile's 200");
}

#[test]
fn cancel_ends_a_ringing_call_with_487() {
    let mut sim = Sim::new(config(5));
    let alice = ua(&mut sim, "alice", "alice", "192.0.2.1:5061");
    let bob = ua(&mut sim, "bob", "bob", "192.0.2.2:5062");
    sim.ua_mut(bob).set_answer(Answer::ring_forever());
    assert_eq!(register(&mut sim, alice), 200);
    assert_eq!(register(&mut sim, bob), 200);
    let call = sim.act(alice, |ua, now| ua.invite(now, "bob"));
    sim.run_for(Duration::from_secs(2));
    assert_eq!(sim.ua(alice).statuses("INVITE"), [407, 100, 180]);
    sim.act(alice, |ua, now| ((), ua.cancel(now, &call)));
    sim.run_for(Duration::from_secs(2));
    assert_eq!(sim.ua(alice).outcome(&call, "CANCEL").unwrap().status, 200);
    assert_eq!(sim.ua(alice).outcome(&call, "INVITE").unwrap().status, 487);
    // herald answered the CANCEL itself and cancelled its branch to bob (RFC 3261 §16.10).
    assert_eq!(sim.ua(bob).requests("CANCEL").len(), 1);
    assert_eq!(sim.ua(bob).requests("CANCEL")[0].from, sim.herald.addr);
    assert!(sim.ua(bob).requests("ACK").len() == 1, "herald acknowledged bob's 487 (§17.1.1.3)");
}
