//! Server transactions (RFC 3261 §17.2, RFC 6026 §8.5-8.7) against a simulated clock.

use super::tests_support::*;
use super::{ServerInvite, ServerNonInvite, TimerKind, Timers, Transaction, TxState};
use bytes::Bytes;
use std::time::{Duration, Instant};

const UDP: bool = false;
const TCP: bool = true;

fn server_invite(reliable: bool, send_trying: bool) -> (Transaction, Instant, Vec<Bytes>) {
    let t = t0();
    let (tx, out) = ServerInvite::new(t, &invite("z9hG4bKs1"), reliable, &Timers::default(), send_trying);
    assert!(events(&out).is_empty());
    assert_eq!(tx.next_deadline(), None, "no timer runs in Proceeding");
    (Transaction::ServerInvite(tx), t, sends(&out))
}

fn server_non_invite(reliable: bool) -> (Transaction, Instant) {
    let t = t0();
    let (tx, out) = ServerNonInvite::new(t, reliable, &Timers::default());
    assert!(out.is_empty());
    (Transaction::ServerNonInvite(tx), t)
}

fn ack() -> herald_sip::Message {
    request("ACK", "z9hG4bKs1")
}

#[test]
fn invite_trying_and_provisional_resent_on_retransmission() {
    let (mut tx, t, sent) = server_invite(UDP, true);
    assert_eq!(sent.len(), 1);
    let trying = parse(std::str::from_utf8(&sent[0]).unwrap());
    assert_eq!(trying.status(), Some(100));
    assert_eq!(trying.top_via().unwrap().branch(), Some("z9hG4bKs1"));
    // §17.2.1: a retransmitted INVITE gets the most recent provisional again.
    assert_eq!(sends(&tx.on_message(t + ms(500), invite("z9hG4bKs1"))), sent);
    let ringing = response_bytes(&invite("z9hG4bKs1"), 180, Some("u"));
    assert_eq!(sends(&tx.on_tu_response(t + ms(600), ringing.clone(), 180)), vec![ringing.clone()]);
    assert_eq!(sends(&tx.on_message(t + ms(1500), invite("z9hG4bKs1"))), vec![ringing]);
    assert_eq!(tx.state(), TxState::Proceeding);
    assert_eq!(tx.next_deadline(), None);
}

#[test]
fn invite_without_trying_absorbs_retransmissions_until_a_provisional() {
    let (mut tx, t, sent) = server_invite(UDP, false);
    assert!(sent.is_empty());
    assert!(tx.on_message(t + ms(500), invite("z9hG4bKs1")).is_empty());
    // Responses and out-of-range codes are ignored.
    assert!(tx.on_message(t + ms(500), response(&invite("z9hG4bKs1"), 180, None)).is_empty());
    assert!(tx.on_tu_response(t + ms(500), Bytes::from_static(b"junk"), 99).is_empty());
    assert!(tx.on_tu_response(t + ms(500), Bytes::from_static(b"junk"), 700).is_empty());
}

#[test]
fn invite_udp_non_2xx_timer_g_capped_and_timer_h() {
    let (mut tx, t, _) = server_invite(UDP, true);
    let busy = response_bytes(&invite("z9hG4bKs1"), 486, Some("u"));
    assert_eq!(sends(&tx.on_tu_response(t + ms(1000), busy.clone(), 486)), vec![busy.clone()]);
    assert_eq!(tx.state(), TxState::Completed);
    let fired = drive(&mut tx, t, Duration::from_secs(100));
    // §17.2.1: G at T1 after the response, doubling up to T2; H at 64*T1.
    let expected: Vec<Duration> =
        backoff(ms(500), Some(ms(4000)), ms(32_000)).into_iter().map(|d| d + ms(1000)).collect();
    assert_eq!(&expected[..5], &[ms(1500), ms(2500), ms(4500), ms(8500), ms(12_500)]);
    assert_eq!(times(&fired, TimerKind::G), expected);
    assert!(fired.iter().filter(|f| f.kind == TimerKind::G).all(|f| f.sends == vec![busy.clone()]));
    let last = fired.last().unwrap();
    assert_eq!((last.kind, last.at), (TimerKind::H, ms(33_000)));
    assert_eq!(last.events, vec![Ev::NoAck, Ev::Terminated]);
    assert!(tx.is_terminated());
}

#[test]
fn invite_ack_confirms_then_timer_i() {
    let (mut tx, t, _) = server_invite(UDP, true);
    let busy = response_bytes(&invite("z9hG4bKs1"), 486, Some("u"));
    tx.on_tu_response(t, busy.clone(), 486);
    // A retransmitted INVITE in Completed gets the final response again.
    assert_eq!(sends(&tx.on_message(t + ms(100), invite("z9hG4bKs1"))), vec![busy]);
    let out = tx.on_message(t + ms(200), ack());
    assert!(out.is_empty(), "the ACK for a non-2xx is absorbed, not passed up");
    assert_eq!(tx.state(), TxState::Confirmed);
    // Further ACKs and INVITEs are absorbed; the TU has nothing more to send.
    assert!(tx.on_message(t + ms(300), ack()).is_empty());
    assert!(tx.on_message(t + ms(300), invite("z9hG4bKs1")).is_empty());
    assert!(tx.on_tu_response(t + ms(300), Bytes::from_static(b"x"), 200).is_empty());
    let fired = drive(&mut tx, t, Duration::from_secs(100));
    assert_eq!(fired.len(), 1, "G and H stopped");
    assert_eq!((fired[0].kind, fired[0].at), (TimerKind::I, ms(5200)));
    assert_eq!(fired[0].events, vec![Ev::Terminated]);
}

#[test]
fn invite_tcp_no_timer_g_and_zero_timer_i() {
    let (mut tx, t, _) = server_invite(TCP, true);
    let busy = response_bytes(&invite("z9hG4bKs1"), 603, Some("u"));
    tx.on_tu_response(t, busy, 603);
    assert_eq!(tx.next_deadline(), Some((t + ms(32_000), TimerKind::H)), "H runs on every transport");
    let out = tx.on_message(t + ms(40), ack());
    assert_eq!(events(&out), vec![Ev::Terminated], "I = 0 over TCP");
    assert!(tx.is_terminated());
}

#[test]
fn invite_tcp_timer_h_without_ack() {
    let (mut tx, t, _) = server_invite(TCP, false);
    tx.on_tu_response(t + ms(5), response_bytes(&invite("z9hG4bKs1"), 404, Some("u")), 404);
    let fired = drive(&mut tx, t, Duration::from_secs(100));
    assert_eq!(fired.len(), 1);
    assert_eq!((fired[0].kind, fired[0].at), (TimerKind::H, ms(32_005)));
    assert_eq!(fired[0].events, vec![Ev::NoAck, Ev::Terminated]);
}

#[test]
fn invite_2xx_accepted_acks_to_tu_then_timer_l() {
    let (mut tx, t, _) = server_invite(UDP, true);
    let ok = response_bytes(&invite("z9hG4bKs1"), 200, Some("u"));
    assert_eq!(sends(&tx.on_tu_response(t + ms(300), ok.clone(), 200)), vec![ok.clone()]);
    assert_eq!(tx.state(), TxState::Accepted);
    assert_eq!(tx.next_deadline(), Some((t + ms(32_300), TimerKind::L)));
    // RFC 6026 §8.6: retransmitted INVITEs are absorbed; the transaction does not resend 2xx.
    assert!(tx.on_message(t + ms(500), invite("z9hG4bKs1")).is_empty());
    // §8.5: 2xx from the TU (its own retransmissions) are sent; L is not restarted.
    assert_eq!(sends(&tx.on_tu_response(t + ms(800), ok.clone(), 200)), vec![ok]);
    assert!(tx.on_tu_response(t + ms(800), Bytes::from_static(b"x"), 486).is_empty());
    assert!(tx.on_tu_response(t + ms(800), Bytes::from_static(b"x"), 180).is_empty());
    // §8.7: an ACK matching the transaction in Accepted goes to the TU (every copy).
    assert_eq!(events(&tx.on_message(t + ms(900), ack())), vec![Ev::Ack]);
    assert_eq!(events(&tx.on_message(t + ms(950), ack())), vec![Ev::Ack]);
    let fired = drive(&mut tx, t, Duration::from_secs(100));
    assert_eq!(fired.len(), 1);
    assert_eq!((fired[0].kind, fired[0].at), (TimerKind::L, ms(32_300)));
    assert_eq!(fired[0].events, vec![Ev::Terminated]);
}

#[test]
fn invite_transport_error_in_completed() {
    let (mut tx, t, _) = server_invite(UDP, true);
    tx.on_tu_response(t, response_bytes(&invite("z9hG4bKs1"), 500, Some("u")), 500);
    assert_eq!(events(&tx.on_transport_error()), vec![Ev::TransportError, Ev::Terminated]);
    assert_eq!(tx.next_deadline(), None);
    assert!(tx.on_transport_error().is_empty());
}

#[test]
fn non_invite_trying_absorbs_then_proceeding_resends_provisional() {
    let (mut tx, t) = server_non_invite(UDP);
    let req = request("REGISTER", "z9hG4bKr1");
    assert!(tx.on_message(t + ms(500), req.clone()).is_empty(), "Trying: retransmissions absorbed");
    assert_eq!(tx.state(), TxState::Trying);
    let trying = response_bytes(&req, 100, None);
    assert_eq!(sends(&tx.on_tu_response(t + ms(600), trying.clone(), 100)), vec![trying.clone()]);
    assert_eq!(tx.state(), TxState::Proceeding);
    assert_eq!(sends(&tx.on_message(t + ms(1500), req.clone())), vec![trying]);
    assert_eq!(tx.next_deadline(), None);
}

#[test]
fn non_invite_udp_final_then_timer_j() {
    let (mut tx, t) = server_non_invite(UDP);
    let req = request("REGISTER", "z9hG4bKr1");
    let ok = response_bytes(&req, 200, Some("r"));
    assert_eq!(sends(&tx.on_tu_response(t + ms(50), ok.clone(), 200)), vec![ok.clone()]);
    assert_eq!(tx.state(), TxState::Completed);
    // Retransmitted requests get the final response; later TU responses are discarded.
    assert_eq!(sends(&tx.on_message(t + ms(550), req.clone())), vec![ok.clone()]);
    assert!(tx.on_tu_response(t + ms(600), response_bytes(&req, 500, Some("r")), 500).is_empty());
    assert_eq!(sends(&tx.on_message(t + ms(1550), req)), vec![ok]);
    let fired = drive(&mut tx, t, Duration::from_secs(100));
    assert_eq!(fired.len(), 1);
    assert_eq!((fired[0].kind, fired[0].at), (TimerKind::J, ms(32_050)));
    assert_eq!(fired[0].events, vec![Ev::Terminated]);
}

#[test]
fn non_invite_tcp_zero_timer_j() {
    let (mut tx, t) = server_non_invite(TCP);
    let req = request("BYE", "z9hG4bKb1");
    let out = tx.on_tu_response(t, response_bytes(&req, 200, Some("r")), 200);
    assert_eq!(out.sends().count(), 1);
    assert_eq!(events(&out), vec![Ev::Terminated]);
    assert!(tx.is_terminated());
}

#[test]
fn non_invite_final_directly_from_proceeding_and_transport_error() {
    let (mut tx, t) = server_non_invite(UDP);
    let req = request("OPTIONS", "z9hG4bKp1");
    tx.on_tu_response(t, response_bytes(&req, 183, Some("r")), 183);
    assert_eq!(events(&tx.on_transport_error()), vec![Ev::TransportError, Ev::Terminated]);
    assert!(tx.on_tu_response(t, response_bytes(&req, 200, Some("r")), 200).is_empty());
}
