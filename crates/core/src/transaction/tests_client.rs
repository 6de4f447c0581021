//! Client transactions (RFC 3261 §17.1, RFC 6026 §8.4) against a simulated clock.

use super::tests_support::*;
use super::{ClientInvite, ClientNonInvite, TimerKind, Timers, Transaction, TxState};
use std::time::Duration;

const UDP: bool = false;
const TCP: bool = true;

fn client_invite(reliable: bool) -> (Transaction, std::time::Instant) {
    let now = t0();
    let (tx, out) = ClientInvite::new(now, invite("z9hG4bKc1"), reliable, &Timers::default());
    assert_eq!(sends(&out), vec![invite("z9hG4bKc1").buffer().clone()], "the INVITE goes out at once");
    assert!(events(&out).is_empty());
    (Transaction::ClientInvite(tx), now)
}

fn client_non_invite(reliable: bool) -> (Transaction, std::time::Instant) {
    let now = t0();
    let (tx, out) = ClientNonInvite::new(now, request("OPTIONS", "z9hG4bKo1"), reliable, &Timers::default());
    assert_eq!(out.sends().count(), 1);
    (Transaction::ClientNonInvite(tx), now)
}

#[test]
fn invite_udp_timer_a_doubles_until_timer_b() {
    let (mut tx, t) = client_invite(UDP);
    let fired = drive(&mut tx, t, Duration::from_secs(60));
    // §17.1.1.2: A at T1, then intervals 2*T1, 4*T1, ... (no cap): 0.5, 1.5, 3.5, 7.5, 15.5,
    // 31.5 s; B at 64*T1 = 32 s. Seven transmissions in all.
    let expected = backoff(ms(500), None, ms(32_000));
    assert_eq!(expected, vec![ms(500), ms(1500), ms(3500), ms(7500), ms(15_500), ms(31_500)]);
    assert_eq!(times(&fired, TimerKind::A), expected);
    assert!(fired.iter().filter(|f| f.kind == TimerKind::A).all(|f| f.sends.len() == 1 && f.events.is_empty()));
    let last = fired.last().unwrap();
    assert_eq!((last.kind, last.at), (TimerKind::B, ms(32_000)));
    assert_eq!(last.events, vec![Ev::Timeout, Ev::Terminated]);
    assert!(tx.is_terminated());
    assert_eq!(tx.next_deadline(), None);
}

#[test]
fn invite_provisional_stops_a_and_b() {
    let (mut tx, t) = client_invite(UDP);
    let req = invite("z9hG4bKc1");
    let out = tx.on_message(t + ms(200), response(&req, 100, None));
    assert_eq!(events(&out), vec![Ev::Response(100)]);
    assert!(out.sends().next().is_none());
    assert_eq!(tx.state(), TxState::Proceeding);
    assert_eq!(tx.next_deadline(), None, "no retransmission and no Timer B in Proceeding");
    let out = tx.on_message(t + ms(900), response(&req, 180, Some("x")));
    assert_eq!(events(&out), vec![Ev::Response(180)]);
    // Requests are not responses: ignored.
    assert!(tx.on_message(t + ms(901), req.clone()).is_empty());
}

#[test]
fn invite_udp_non_2xx_acks_and_waits_timer_d() {
    let (mut tx, t) = client_invite(UDP);
    let req = invite("z9hG4bKc1");
    tx.on_message(t + ms(100), response(&req, 180, Some("b1")));
    let out = tx.on_message(t + ms(2000), response(&req, 486, Some("b1")));
    assert_eq!(events(&out), vec![Ev::Response(486)]);
    let acks = sends(&out);
    assert_eq!(acks.len(), 1);
    let ack = parse(std::str::from_utf8(&acks[0]).unwrap());
    assert_eq!(ack.method().map(|m| m.as_str()), Some("ACK"));
    assert_eq!(ack.request_uri_bytes(), req.request_uri_bytes());
    assert_eq!(ack.to_header().unwrap().tag(), Some("b1"));
    assert_eq!(ack.cseq().unwrap().seq, 314159);
    assert_eq!(ack.top_via().unwrap().branch(), Some("z9hG4bKc1"));
    assert_eq!(tx.state(), TxState::Completed);
    // A retransmitted final response is ACKed again and not passed up (§17.1.1.2).
    let again = tx.on_message(t + ms(2500), response(&req, 486, Some("b1")));
    assert_eq!(sends(&again), acks);
    assert!(events(&again).is_empty());
    // Stale 1xx and 2xx in Completed are absorbed.
    assert!(tx.on_message(t + ms(2600), response(&req, 180, Some("b1"))).is_empty());
    assert!(tx.on_message(t + ms(2600), response(&req, 200, Some("b1"))).is_empty());
    // Timer D: 32 s after the final response.
    let fired = drive(&mut tx, t, Duration::from_secs(100));
    assert_eq!(fired.len(), 1);
    assert_eq!((fired[0].kind, fired[0].at), (TimerKind::D, ms(34_000)));
    assert_eq!(fired[0].events, vec![Ev::Terminated]);
    assert!(tx.is_terminated());
}

#[test]
fn invite_tcp_has_no_timer_a_and_zero_timer_d() {
    let (mut tx, t) = client_invite(TCP);
    assert_eq!(tx.next_deadline(), Some((t + ms(32_000), TimerKind::B)), "only Timer B runs over TCP");
    let req = invite("z9hG4bKc1");
    let out = tx.on_message(t + ms(300), response(&req, 404, Some("n")));
    assert_eq!(out.sends().count(), 1, "the ACK");
    assert_eq!(events(&out), vec![Ev::Response(404), Ev::Terminated], "D = 0: terminated at once");
    assert!(tx.is_terminated());
    assert_eq!(tx.next_deadline(), None);
}

#[test]
fn invite_tcp_timer_b() {
    let (mut tx, t) = client_invite(TCP);
    let fired = drive(&mut tx, t, Duration::from_secs(60));
    assert_eq!(fired.len(), 1);
    assert_eq!((fired[0].kind, fired[0].at), (TimerKind::B, ms(32_000)));
    assert!(fired[0].sends.is_empty());
    assert_eq!(fired[0].events, vec![Ev::Timeout, Ev::Terminated]);
}

#[test]
fn invite_2xx_accepted_then_timer_m() {
    let (mut tx, t) = client_invite(UDP);
    let req = invite("z9hG4bKc1");
    // A 2xx straight from Calling (no provisional): Accepted, no ACK from the transaction.
    let out = tx.on_message(t + ms(700), response(&req, 200, Some("u1")));
    assert_eq!(events(&out), vec![Ev::Response(200)]);
    assert!(out.sends().next().is_none(), "the TU ACKs a 2xx (§13.2.2.4)");
    assert_eq!(tx.state(), TxState::Accepted);
    assert_eq!(tx.next_deadline(), Some((t + ms(700) + ms(32_000), TimerKind::M)));
    // RFC 6026 §8.4: retransmissions and forked 2xx reach the TU; non-2xx are absorbed.
    assert_eq!(events(&tx.on_message(t + ms(1200), response(&req, 200, Some("u1")))), vec![Ev::Response(200)]);
    assert_eq!(events(&tx.on_message(t + ms(1300), response(&req, 200, Some("u2")))), vec![Ev::Response(200)]);
    assert!(tx.on_message(t + ms(1400), response(&req, 486, Some("u3"))).is_empty());
    assert!(tx.on_message(t + ms(1400), response(&req, 183, Some("u3"))).is_empty());
    let fired = drive(&mut tx, t, Duration::from_secs(100));
    assert_eq!(fired.len(), 1);
    assert_eq!((fired[0].kind, fired[0].at), (TimerKind::M, ms(32_700)));
    assert_eq!(fired[0].events, vec![Ev::Terminated]);
}

#[test]
fn invite_2xx_after_provisional_over_tcp() {
    let (mut tx, t) = client_invite(TCP);
    let req = invite("z9hG4bKc1");
    tx.on_message(t + ms(10), response(&req, 180, Some("u1")));
    tx.on_message(t + ms(20), response(&req, 200, Some("u1")));
    assert_eq!(tx.state(), TxState::Accepted);
    // Timer M is 64*T1 whatever the transport: it absorbs 2xx retransmissions from proxies.
    assert_eq!(tx.next_deadline(), Some((t + ms(32_020), TimerKind::M)));
}

#[test]
fn invite_transport_error() {
    let (mut tx, t) = client_invite(UDP);
    let out = tx.on_transport_error();
    assert_eq!(events(&out), vec![Ev::TransportError, Ev::Terminated]);
    assert!(tx.is_terminated());
    assert!(tx.on_transport_error().is_empty(), "reported once");
    assert!(tx.on_timer(t + ms(500), TimerKind::A).is_empty());
}

#[test]
fn custom_t1_scales_every_timer() {
    let timers = Timers { t1: ms(100), t2: ms(400), t4: ms(1000), d: ms(5000), absorb_grid: None };
    let t = t0();
    let (tx, _) = ClientInvite::new(t, invite("z9hG4bKc2"), UDP, &timers);
    let mut tx = Transaction::ClientInvite(tx);
    let fired = drive(&mut tx, t, Duration::from_secs(60));
    assert_eq!(times(&fired, TimerKind::A), backoff(ms(100), None, ms(6400)));
    assert_eq!(times(&fired, TimerKind::B), vec![ms(6400)]);
}

#[test]
fn non_invite_udp_timer_e_capped_at_t2_until_timer_f() {
    let (mut tx, t) = client_non_invite(UDP);
    let fired = drive(&mut tx, t, Duration::from_secs(60));
    // §17.1.2.2: E at T1, intervals doubling up to T2 = 4 s: 0.5, 1.5, 3.5, 7.5, 11.5, ... 31.5.
    let expected = backoff(ms(500), Some(ms(4000)), ms(32_000));
    assert_eq!(&expected[..6], &[ms(500), ms(1500), ms(3500), ms(7500), ms(11_500), ms(15_500)]);
    assert_eq!(expected.len(), 10, "eleven transmissions in all");
    assert_eq!(times(&fired, TimerKind::E), expected);
    let last = fired.last().unwrap();
    assert_eq!((last.kind, last.at), (TimerKind::F, ms(32_000)));
    assert_eq!(last.events, vec![Ev::Timeout, Ev::Terminated]);
}

#[test]
fn non_invite_proceeding_retransmits_every_t2() {
    let (mut tx, t) = client_non_invite(UDP);
    let req = request("OPTIONS", "z9hG4bKo1");
    // First E at 0.5 s (interval becomes 1 s), then a 1xx at 0.6 s.
    let first = drive(&mut tx, t, ms(500));
    assert_eq!(times(&first, TimerKind::E), vec![ms(500)]);
    let out = tx.on_message(t + ms(600), response(&req, 100, None));
    assert_eq!(events(&out), vec![Ev::Response(100)]);
    assert_eq!(tx.state(), TxState::Proceeding);
    let fired = drive(&mut tx, t, Duration::from_secs(60));
    // The pending E still fires at 1.5 s; from then on every T2 (§17.1.2.2). F stays at 32 s.
    let mut expected = vec![ms(1500)];
    while let Some(&l) = expected.last() {
        if l + ms(4000) >= ms(32_000) {
            break;
        }
        expected.push(l + ms(4000));
    }
    assert_eq!(times(&fired, TimerKind::E), expected);
    assert_eq!(times(&fired, TimerKind::F), vec![ms(32_000)]);
    assert_eq!(fired.last().unwrap().events, vec![Ev::Timeout, Ev::Terminated]);
}

#[test]
fn non_invite_final_then_timer_k_is_t4_over_udp() {
    let (mut tx, t) = client_non_invite(UDP);
    let req = request("OPTIONS", "z9hG4bKo1");
    let out = tx.on_message(t + ms(800), response(&req, 200, Some("z")));
    assert_eq!(events(&out), vec![Ev::Response(200)]);
    assert_eq!(tx.state(), TxState::Completed);
    // Retransmitted finals (and late provisionals) are absorbed.
    assert!(tx.on_message(t + ms(900), response(&req, 200, Some("z"))).is_empty());
    assert!(tx.on_message(t + ms(900), response(&req, 180, Some("z"))).is_empty());
    let fired = drive(&mut tx, t, Duration::from_secs(60));
    assert_eq!(fired.len(), 1, "no E after the final response");
    assert_eq!((fired[0].kind, fired[0].at), (TimerKind::K, ms(5800)));
    assert_eq!(fired[0].events, vec![Ev::Terminated]);
}

#[test]
fn non_invite_tcp_no_timer_e_and_zero_timer_k() {
    let (mut tx, t) = client_non_invite(TCP);
    assert_eq!(tx.next_deadline(), Some((t + ms(32_000), TimerKind::F)));
    let req = request("OPTIONS", "z9hG4bKo1");
    let out = tx.on_message(t + ms(50), response(&req, 503, Some("z")));
    assert_eq!(events(&out), vec![Ev::Response(503), Ev::Terminated]);
    assert!(out.sends().next().is_none(), "no ACK for non-INVITE");
    assert!(tx.is_terminated());
}

#[test]
fn non_invite_transport_error() {
    let (mut tx, _) = client_non_invite(TCP);
    assert_eq!(events(&tx.on_transport_error()), vec![Ev::TransportError, Ev::Terminated]);
    assert!(tx.on_transport_error().is_empty());
}

#[test]
fn stale_timer_kinds_are_ignored() {
    let (mut tx, t) = client_non_invite(UDP);
    // Kinds this machine never arms, or arms later, do nothing.
    for kind in [TimerKind::A, TimerKind::B, TimerKind::K, TimerKind::M] {
        assert!(tx.on_timer(t + Duration::from_secs(100), kind).is_empty());
    }
    assert_eq!(tx.state(), TxState::Trying);
}

#[test]
fn extreme_timer_configurations_neither_panic_nor_spin() {
    let t = t0();
    // Durations past what Instant can represent: those timers are simply never armed.
    let huge = Timers { t1: Duration::MAX, t2: Duration::MAX, t4: Duration::MAX, d: Duration::MAX, absorb_grid: None };
    let (tx, out) = ClientNonInvite::new(t, request("OPTIONS", "z9hG4bKx1"), UDP, &huge);
    assert_eq!(out.sends().count(), 1);
    assert_eq!(tx.next_deadline(), None);
    // Zero T1/T2: retransmission intervals are at least 1 ms, so every firing makes progress.
    let zero =
        Timers { t1: Duration::ZERO, t2: Duration::ZERO, t4: Duration::ZERO, d: Duration::ZERO, absorb_grid: None };
    let (tx, _) = ClientNonInvite::new(t, request("OPTIONS", "z9hG4bKx2"), UDP, &zero);
    let mut tx = Transaction::ClientNonInvite(tx);
    let fired = drive(&mut tx, t, ms(10));
    assert_eq!(fired.len(), 1, "F = 64*0 fires at once, before the 1 ms E");
    assert_eq!(fired[0].events, vec![Ev::Timeout, Ev::Terminated]);
}
