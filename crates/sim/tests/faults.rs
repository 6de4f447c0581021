//! Timers and lost datagrams on the simulator, each with a fixed seed: Timers B, C and F end
//! unanswered requests with 408 at the times RFC 3261 gives them, a lost 200 is resent by the
//! callee until the ACK (§13.3.1.4), a call completes under random loss, and a run is a
//! function of its seed.

mod common;

use common::{config, ms, register, ua};
use herald_sim::{Answer, Fate, Sim};
use std::time::Duration;

/// alice and bob registered (bob answering as `answer`), time reset to a round number.
fn two_phones(seed: u64, answer: Answer) -> (Sim, herald_sim::UaId, herald_sim::UaId) {
    let mut sim = Sim::new(config(seed));
    let alice = ua(&mut sim, "alice", "alice", "192.0.2.1:5061");
    let bob = ua(&mut sim, "bob", "bob", "192.0.2.2:5062");
    assert_eq!(register(&mut sim, alice), 200);
    assert_eq!(register(&mut sim, bob), 200);
    sim.ua_mut(bob).set_answer(answer);
    sim.run_for(Duration::from_secs(1));
    (sim, alice, bob)
}

#[test]
fn timer_b_a_callee_that_never_answers_gets_the_caller_a_408() {
    let (mut sim, alice, bob) = two_phones(10, Answer::Silent);
    let t0 = sim.elapsed();
    let call = sim.act(alice, |ua, now| ua.invite(now, "bob"));
    sim.run_for(Duration::from_secs(40));
    let outcome = sim.ua(alice).outcome(&call, "INVITE").unwrap().clone();
    assert_eq!(outcome.status, 408);
    // herald's INVITE left 10 ms + 5 ms after t0 (challenge round trip, then one hop); Timer B
    // is 64*T1 = 32 s after it (§17.1.1.2), and the 408 takes 5 ms back to alice.
    assert_eq!(outcome.at - t0, ms(15) + Duration::from_secs(32) + ms(5));
    // Timer A: herald sent the INVITE at 0, 0.5, 1.5, 3.5, 7.5, 15.5, 31.5 s: 7 copies.
    assert_eq!(sim.ua(bob).requests("INVITE").len(), 7);
    assert_eq!(sim.ua(alice).statuses("INVITE"), [407, 100, 408]);
}

#[test]
fn timer_c_a_phone_that_rings_forever_is_cancelled_after_three_minutes() {
    let (mut sim, alice, bob) = two_phones(11, Answer::ring_forever());
    let t0 = sim.elapsed();
    let call = sim.act(alice, |ua, now| ua.invite(now, "bob"));
    sim.run_for(Duration::from_secs(200));
    // Timer C (180 s, §16.6 step 11, reset by the 180 that came 10 ms after the INVITE left)
    // fires: the branch had a provisional response, so herald CANCELs it (§16.8) and the
    // callee's 487 is the caller's final answer (a 408 is only for a branch without one).
    let cancels = sim.ua(bob).requests("CANCEL");
    assert_eq!(cancels.len(), 1);
    assert_eq!(cancels[0].at - t0, ms(15) + ms(10) + Duration::from_secs(180) + ms(5));
    let outcome = sim.ua(alice).outcome(&call, "INVITE").unwrap();
    assert_eq!(outcome.status, 487);
    assert_eq!(outcome.at - t0, cancels[0].at - t0 + ms(10), "bob's 487 to herald, then to alice");
    assert_eq!(sim.ua(bob).requests("ACK").len(), 1, "herald acknowledged bob's 487");
}

#[test]
fn timer_f_a_message_nobody_answers_times_out_after_64_t1() {
    let (mut sim, alice, bob) = two_phones(12, Answer::Silent);
    let t0 = sim.elapsed();
    let call = sim.act(alice, |ua, now| ua.message(now, "bob"));
    sim.run_for(Duration::from_secs(40));
    let outcome = sim.ua(alice).outcome(&call, "MESSAGE").unwrap();
    assert_eq!(outcome.status, 408);
    // alice's own Timer F (§17.1.2.2) fires 64*T1 after its first MESSAGE (after the 407, at 10 ms).
    let first_sent = ms(10);
    assert!(outcome.at - t0 >= first_sent + Duration::from_secs(32), "{:?}", outcome.at - t0);
    assert!(outcome.at - t0 <= first_sent + Duration::from_secs(32) + ms(10), "{:?}", outcome.at - t0);
    // Timer E resent herald's copy to bob: at 0, 0.5, 1.5, 3.5, 7.5, then every T2 = 4 s.
    assert!(sim.ua(bob).requests("MESSAGE").len() >= 10);
}

#[test]
fn a_lost_200_is_resent_until_the_ack_comes() {
    let (mut sim, alice, bob) = two_phones(13, Answer::pick_up(ms(1_000)));
    let bob_addr = sim.ua(bob).addr;
    // The first 200 for the INVITE leaves bob and never arrives.
    sim.net.drop_next(move |d| d.from == bob_addr && d.first_line().starts_with("SIP/2.0 200"));
    let t0 = sim.elapsed();
    let call = sim.act(alice, |ua, now| ua.invite(now, "bob"));
    assert!(sim.run_until(Duration::from_secs(10), |s| s.ua(bob).acked(&call)));
    let ok = sim.ua(alice).outcome(&call, "INVITE").unwrap().clone();
    assert_eq!(ok.status, 200);
    // Without the loss the 200 would reach alice 1,030 ms after t0 (see call_flows.rs); bob
    // resends it T1 = 500 ms later (§13.3.1.4).
    assert_eq!(ok.at - t0, ms(1_030) + ms(500));
    let dropped = sim.net.log().iter().filter(|s| s.fate == Fate::Dropped).count();
    assert_eq!(dropped, 1);
    let sent_200s = sim
        .net
        .log()
        .iter()
        .filter(|s| s.datagram.from == bob_addr && s.datagram.first_line().starts_with("SIP/2.0 200"))
        .count();
    assert_eq!(sent_200s, 2, "the 200 and one retransmission, then the ACK stopped it");
}

/// Registers both, calls, hangs up: the outcomes, under `loss` per mille.
fn lossy_call(seed: u64, loss: u32) -> (Sim, Vec<u16>) {
    let mut sim = Sim::new(config(seed));
    sim.net.set_loss(loss);
    let alice = ua(&mut sim, "alice", "alice", "192.0.2.1:5061");
    let bob = ua(&mut sim, "bob", "bob", "192.0.2.2:5062");
    sim.ua_mut(bob).set_answer(Answer::pick_up(ms(300)));
    let mut statuses = vec![register(&mut sim, alice), register(&mut sim, bob)];
    let call = sim.act(alice, |ua, now| ua.invite(now, "bob"));
    sim.run_until(Duration::from_secs(40), |s| s.ua(alice).outcome(&call, "INVITE").is_some());
    statuses.push(sim.ua(alice).outcome(&call, "INVITE").map_or(0, |o| o.status));
    sim.run_until(Duration::from_secs(40), |s| s.ua(bob).acked(&call));
    sim.act(alice, |ua, now| ((), ua.bye(now, &call)));
    sim.run_until(Duration::from_secs(40), |s| s.ua(alice).outcome(&call, "BYE").is_some());
    statuses.push(sim.ua(alice).outcome(&call, "BYE").map_or(0, |o| o.status));
    (sim, statuses)
}

/// Datagrams that are byte copies of one sent before by the same element (retransmissions).
fn repeats(sim: &Sim) -> usize {
    let log = sim.net.log();
    (0..log.len()).filter(|&i| log[..i].iter().any(|e| e.datagram == log[i].datagram)).count()
}

#[test]
fn a_call_completes_under_twenty_percent_loss() {
    let (sim, statuses) = lossy_call(14, 200);
    assert_eq!(statuses, [200, 200, 200, 200], "register, register, INVITE, BYE");
    let lost = sim.net.log().iter().filter(|s| s.fate == Fate::Lost).count();
    assert!(lost >= 3, "the seed must make the network lose something: {lost} lost");
    // Retransmissions made up for it; a loss-free run needs none.
    assert!(repeats(&sim) > 0);
    let (clean, statuses) = lossy_call(14, 0);
    assert_eq!(statuses, [200, 200, 200, 200]);
    assert_eq!(repeats(&clean), 0);
}

#[test]
fn the_same_seed_gives_the_same_run_bit_for_bit() {
    let (a, sa) = lossy_call(21, 150);
    let (b, sb) = lossy_call(21, 150);
    assert_eq!(sa, sb);
    assert_eq!(a.net.log().len(), b.net.log().len());
    assert_eq!(a.net.digest(), b.net.digest());
    // Another seed: other branches, tags and nonces, other losses.
    let (c, _) = lossy_call(22, 150);
    assert_ne!(a.net.digest(), c.net.digest());
}
