//! Matching (§17.1.3, §17.2.3, §9.2), the table's heap and removal, and branch generation.

use super::tests_support::*;
use super::{stateless_branch, BranchGen, ServerKey, TimerKind, Timers, TransactionTable, TxAction, TxError, TxState};
use crate::peer::{Peer, Transport};
use std::collections::HashSet;
use std::time::Duration;

fn udp() -> Peer {
    Peer::udp("192.0.2.10:5060".parse().unwrap())
}

fn tcp() -> Peer {
    Peer { transport: Transport::Tcp, addr: "192.0.2.10:5060".parse().unwrap(), conn: Some(crate::peer::ConnId(7)) }
}

fn table() -> TransactionTable {
    TransactionTable::new(Timers::default())
}

#[test]
fn rfc3261_server_matching() {
    let mut tt = table();
    let t = t0();
    let inv = invite("z9hG4bKm1");
    let (id, out) = tt.insert_server(t, &inv, udp(), true).unwrap();
    assert_eq!(out.sends().count(), 1, "100 Trying");
    assert_eq!(tt.peer(id), Some(udp()));
    assert_eq!(tt.find_server(&inv), Some(id), "a retransmission");
    assert_eq!(tt.find_server(&request("ACK", "z9hG4bKm1")), Some(id), "ACK maps to INVITE");
    assert_eq!(tt.find_server(&request("ACK", "z9hG4bKm2")), None, "the ACK for a 2xx has its own branch");
    assert_eq!(tt.find_server(&request("CANCEL", "z9hG4bKm1")), None, "CANCEL is its own transaction");
    assert_eq!(tt.find_cancel_target(&request("CANCEL", "z9hG4bKm1")), Some(id));
    assert_eq!(tt.find_cancel_target(&inv), None, "only a CANCEL has a target");
    let (cid, _) = tt.insert_server(t, &request("CANCEL", "z9hG4bKm1"), udp(), false).unwrap();
    assert_ne!(cid, id);
    assert_eq!(tt.find_server(&request("CANCEL", "z9hG4bKm1")), Some(cid));
    assert_eq!(tt.find_server(&request("BYE", "z9hG4bKm1")), None, "method is part of the key");
    assert_eq!(tt.insert_server(t, &inv, udp(), true).unwrap_err(), TxError::Duplicate(id));
    assert_eq!(tt.len(), 2);
}

#[test]
fn sent_by_and_branch_case_rules() {
    let mut tt = table();
    let via = |host: &str, branch: &str| format!("SIP/2.0/UDP {host};branch={branch}");
    let orig = request_via("INVITE", &via("PC33.Atlanta.example.com:5060", "z9hG4bKaBc"), 1);
    let (id, _) = tt.insert_server(t0(), &orig, udp(), false).unwrap();
    let same_host_lower = request_via("INVITE", &via("pc33.atlanta.example.com:5060", "z9hG4bKaBc"), 1);
    assert_eq!(tt.find_server(&same_host_lower), Some(id), "host names compare case-insensitively");
    let other_port = request_via("INVITE", &via("pc33.atlanta.example.com:5070", "z9hG4bKaBc"), 1);
    assert_eq!(tt.find_server(&other_port), None, "sent-by includes the port");
    let other_case_branch = request_via("INVITE", &via("pc33.atlanta.example.com:5060", "z9hG4bKabc"), 1);
    assert_eq!(tt.find_server(&other_case_branch), None, "the branch compares as written");
    // IPv6 sent-by is normalised.
    let v6 = request_via("INVITE", &via("[2001:db8::0:1]:5060", "z9hG4bKv6"), 1);
    let (id6, _) = tt.insert_server(t0(), &v6, udp(), false).unwrap();
    assert_eq!(tt.find_server(&request_via("INVITE", &via("[2001:DB8::1]:5060", "z9hG4bKv6"), 1)), Some(id6));
}

#[test]
fn rfc2543_fallback_matching() {
    let mut tt = table();
    let t = t0();
    let inv = parse(INV2543);
    assert!(matches!(ServerKey::from_request(&inv), Some(ServerKey::Rfc2543(_))));
    // A bare magic cookie is no RFC 3261 branch either (RFC 4475 badbranch).
    let bare = request_via("INVITE", "SIP/2.0/UDP h.example.com;branch=z9hG4bK", 1);
    assert!(matches!(ServerKey::from_request(&bare), Some(ServerKey::Rfc2543(_))));
    let (id, _) = tt.insert_server(t, &inv, udp(), false).unwrap();
    assert_eq!(tt.find_server(&parse(INV2543)), Some(id), "byte-identical retransmission");
    assert_eq!(tt.find_server(&inv2543_as("INVITE", Some("x"))), None, "To tag differs from the INVITE's");
    // Before any final response an ACK matches nothing.
    assert_eq!(tt.find_server(&inv2543_as("ACK", Some("t1"))), None);
    let busy = response_bytes(&inv, 486, Some("t1"));
    tt.on_tu_response(t + ms(10), id, busy, 486);
    assert_eq!(tt.find_server(&inv2543_as("ACK", Some("t1"))), Some(id), "ACK with the response's To tag");
    assert_eq!(tt.find_server(&inv2543_as("ACK", Some("t2"))), None);
    assert_eq!(tt.find_server(&inv2543_as("ACK", None)), None);
    // CANCEL: its own transaction, targeting the INVITE (§9.2).
    let cancel = inv2543_as("CANCEL", None);
    assert_eq!(tt.find_server(&cancel), None);
    assert_eq!(tt.find_cancel_target(&cancel), Some(id));
    assert_eq!(tt.find_cancel_target(&inv2543_as("CANCEL", Some("zz"))), None);
    // Other fields take part: a different CSeq number is another transaction.
    let other = parse(&INV2543.replace("CSeq: 56", "CSeq: 57"));
    assert_eq!(tt.find_server(&other), None);
    // The ACK reaches the machine: Confirmed.
    let out = tt.on_message(t + ms(20), id, inv2543_as("ACK", Some("t1")));
    assert!(out.is_empty());
    assert_eq!(tt.get(id).map(|tx| tx.state()), Some(TxState::Confirmed));
}

#[test]
fn rfc2543_non_invite_includes_to_tag() {
    let mut tt = table();
    let bye = inv2543_as("BYE", Some("t9"));
    let (id, _) = tt.insert_server(t0(), &bye, udp(), false).unwrap();
    assert_eq!(tt.find_server(&inv2543_as("BYE", Some("t9"))), Some(id));
    assert_eq!(tt.find_server(&inv2543_as("BYE", Some("t8"))), None);
}

#[test]
fn client_matching_by_branch_and_cseq_method() {
    let mut tt = table();
    let t = t0();
    let inv = invite("z9hG4bKcl1");
    let (id, out) = tt.insert_client(t, inv.clone(), udp()).unwrap();
    assert_eq!(out.sends().next(), Some(inv.buffer()));
    let (cid, _) = tt.insert_client(t, request("CANCEL", "z9hG4bKcl1"), udp()).unwrap();
    assert_eq!(tt.find_client(&response(&inv, 180, Some("a"))), Some(id));
    assert_eq!(tt.find_client(&response(&request("CANCEL", "z9hG4bKcl1"), 200, Some("a"))), Some(cid));
    assert_eq!(tt.find_client(&response(&invite("z9hG4bKother"), 180, None)), None);
    assert_eq!(tt.find_client(&inv), None, "a request is not a response");
    assert_eq!(tt.insert_client(t, request("ACK", "z9hG4bKcl1"), udp()).unwrap_err(), TxError::Ack);
    assert_eq!(tt.insert_client(t, response(&inv, 200, None), udp()).unwrap_err(), TxError::NotARequest);
    assert_eq!(tt.insert_client(t, inv.clone(), udp()).unwrap_err(), TxError::Duplicate(id));
    let no_via = parse(
        "OPTIONS sip:a@b SIP/2.0\r\nCSeq: 1 OPTIONS\r\nCall-ID: x\r\nFrom: <sip:a@b>;tag=1\r\nTo: <sip:a@b>\r\n\r\n",
    );
    assert_eq!(tt.insert_client(t, no_via.clone(), udp()).unwrap_err(), TxError::NoKey);
    assert_eq!(tt.insert_server(t, &no_via, udp(), false).unwrap_err(), TxError::NoKey);
    assert_eq!(tt.find_server(&no_via), None);
}

/// Client keys hash only the keyed digits of a long branch: branches that share them and
/// differ elsewhere (before, after, in length) are still told apart, CANCELs still find their
/// own transaction, and herald's own branches are all found.
#[test]
fn client_branches_sharing_their_hashed_digits_are_told_apart() {
    let mut tt = table();
    let t = t0();
    let branches = [
        "z9hG4bK0123456789abcdef-1",
        "z9hG4bK0123456789abcdef-2",
        "z9hG4bK0123456789abcdef-22",
        "z9hG4bX0123456789abcdef-1",
    ];
    let mut ids = Vec::new();
    for b in branches {
        ids.push(tt.insert_client(t, invite(b), udp()).unwrap().0);
    }
    let cancel = tt.insert_client(t, request("CANCEL", branches[0]), udp()).unwrap().0;
    for (b, id) in branches.iter().zip(&ids) {
        assert_eq!(tt.find_client(&response(&invite(b), 180, Some("a"))), Some(*id), "{b}");
    }
    assert_eq!(tt.find_client(&response(&request("CANCEL", branches[0]), 200, None)), Some(cancel));
    assert_eq!(tt.find_client(&response(&invite("z9hG4bK0123456789abcdef-3"), 180, None)), None);
    assert_eq!(tt.find_client(&response(&invite("z9hG4bK0123456789abcdef"), 180, None)), None, "digits alone");
    let mut gen = BranchGen::new(crate::seed::Seed::fixed(9), 3);
    let own: Vec<(String, super::TxId)> = (0..500)
        .map(|_| {
            let b = gen.next_branch_with(b'-', 0x0123_4567_89ab_cdef);
            let id = tt.insert_client(t, invite(&b), udp()).unwrap().0;
            (b, id)
        })
        .collect();
    for (b, id) in &own {
        assert_eq!(tt.find_client(&response(&invite(b), 200, Some("a"))), Some(*id), "{b}");
    }
}

#[test]
fn heap_fires_exactly_and_skips_stale_entries() {
    let mut tt = table();
    let t = t0();
    let inv = invite("z9hG4bKh1");
    let (id, _) = tt.insert_client(t, inv.clone(), udp()).unwrap();
    assert_eq!(tt.next_timeout(), Some(t + ms(500)));
    assert!(tt.handle_timeouts(t + ms(499)).is_empty(), "not 1 ms early");
    let fired = tt.handle_timeouts(t + ms(500));
    assert_eq!(fired.len(), 1);
    assert!(matches!(&fired[0], (i, TxAction::Send(b)) if *i == id && b == inv.buffer()));
    assert_eq!(tt.next_timeout(), Some(t + ms(1500)));
    // A 1xx cancels A and B: the heap entry at 1.5 s is now stale and does nothing.
    let found = tt.find_client(&response(&inv, 180, Some("x"))).unwrap();
    tt.on_message(t + ms(600), found, response(&inv, 180, Some("x")));
    assert!(tt.handle_timeouts(t + Duration::from_secs(40)).is_empty());
    assert_eq!(tt.next_timeout(), None);
    assert_eq!(tt.len(), 1, "Proceeding has no timer; the TU (Timer C) ends it");
}

#[test]
fn timeouts_across_transactions_in_deadline_order_and_removal() {
    let mut tt = table();
    let t = t0();
    let (a, _) = tt.insert_client(t, request("OPTIONS", "z9hG4bKt1"), udp()).unwrap();
    let (b, _) = tt.insert_client(t + ms(100), request("OPTIONS", "z9hG4bKt2"), udp()).unwrap();
    let (c, _) = tt.insert_server(t, &request("MESSAGE", "z9hG4bKt3"), tcp(), false).unwrap();
    // The worker sleeps until each next_timeout() and handles what is due then.
    let mut fired = Vec::new();
    while let Some(at) = tt.next_timeout().filter(|at| *at <= t + ms(1550)) {
        fired.extend(tt.handle_timeouts(at));
    }
    let order: Vec<_> = fired.iter().map(|(id, _)| *id).collect();
    // E: a at 0.5 and 1.5 s, b at 0.6 s; the server has no timer.
    assert_eq!(order, vec![a, b, a]);
    // Everything times out by 32.1 s; both clients are gone, the server remains. (A late call
    // fires each due timer once, re-arming from `now`: no burst of retransmissions.)
    let fired = tt.handle_timeouts(t + ms(32_100));
    let timeouts = fired.iter().filter(|(_, x)| matches!(x, TxAction::ToTu(super::TuEvent::Timeout))).count();
    assert_eq!(timeouts, 2);
    assert_eq!(tt.len(), 1);
    assert!(tt.get(a).is_none() && tt.get(b).is_none());
    assert_eq!(tt.find_client(&response(&request("OPTIONS", "z9hG4bKt1"), 200, None)), None);
    // A final response over TCP terminates and removes the server transaction at once.
    let out =
        tt.on_tu_response(t + ms(32_200), c, response_bytes(&request("MESSAGE", "z9hG4bKt3"), 200, Some("q")), 200);
    assert_eq!(events(&out), vec![Ev::Terminated]);
    assert!(tt.is_empty());
    assert_eq!(tt.find_server(&request("MESSAGE", "z9hG4bKt3")), None);
    assert!(tt.on_message(t, c, request("MESSAGE", "z9hG4bKt3")).is_empty(), "unknown ids are harmless");
}

#[test]
fn server_timers_through_the_table() {
    let mut tt = table();
    let t = t0();
    let inv = invite("z9hG4bKg1");
    let (id, _) = tt.insert_server(t, &inv, udp(), true).unwrap();
    assert_eq!(tt.next_timeout(), None);
    tt.on_tu_response(t + ms(100), id, response_bytes(&inv, 480, Some("g")), 480);
    assert_eq!(tt.next_timeout(), Some(t + ms(600)));
    assert!(tt.handle_timeouts(t + ms(599)).is_empty());
    assert_eq!(tt.handle_timeouts(t + ms(600)).len(), 1);
    // The ACK moves the next deadline to I (T4 after the ACK).
    tt.on_message(t + ms(700), id, request("ACK", "z9hG4bKg1"));
    assert!(tt.handle_timeouts(t + ms(5699)).is_empty());
    let fired = tt.handle_timeouts(t + ms(5700));
    assert!(matches!(fired.as_slice(), [(i, TxAction::ToTu(super::TuEvent::Terminated))] if *i == id));
    assert!(tt.is_empty());
}

#[test]
fn transport_error_removes() {
    let mut tt = table();
    let (id, _) = tt.insert_client(t0(), invite("z9hG4bKe1"), tcp()).unwrap();
    assert_eq!(events(&tt.on_transport_error(id)), vec![Ev::TransportError, Ev::Terminated]);
    assert!(tt.is_empty());
    assert!(tt.on_transport_error(id).is_empty());
    assert!(tt.remove(id).is_none());
}

#[test]
fn explicit_remove_unlinks_the_key() {
    let mut tt = table();
    let inv = invite("z9hG4bKr1");
    let (id, _) = tt.insert_server(t0(), &inv, udp(), false).unwrap();
    assert!(tt.remove(id).is_some());
    assert_eq!(tt.find_server(&inv), None);
    // The stale heap entry (none here) or a new transaction with the same key are fine.
    let (id2, _) = tt.insert_server(t0(), &inv, udp(), false).unwrap();
    assert_ne!(id, id2);
    assert_eq!(tt.get(id2).map(|t| t.state()), Some(TxState::Proceeding));
    assert_eq!(tt.get(id2).map(|t| t.next_deadline()), Some(None::<(std::time::Instant, TimerKind)>));
}

#[test]
fn fresh_branches_are_unique_and_rfc3261() {
    let mut branches = BranchGen::new(crate::seed::Seed::fixed(1), 0);
    let set: HashSet<String> = (0..10_000).map(|_| branches.next_branch()).collect();
    assert_eq!(set.len(), 10_000);
    for b in set.iter().take(10) {
        assert!(b.starts_with("z9hG4bK") && b.len() > 7 + 16);
        assert!(b.bytes().all(|c| c.is_ascii_alphanumeric()), "a token");
    }
}

#[test]
fn stateless_branch_is_deterministic_per_transaction() {
    let inv = invite("z9hG4bKst1");
    let b = stateless_branch(&inv).unwrap();
    assert!(b.starts_with("z9hG4bK") && b.len() > 7);
    assert_eq!(stateless_branch(&invite("z9hG4bKst1")), Some(b.clone()), "retransmissions agree");
    assert_eq!(stateless_branch(&request("CANCEL", "z9hG4bKst1")), Some(b.clone()), "CANCEL goes with INVITE");
    assert_ne!(stateless_branch(&invite("z9hG4bKst2")), Some(b.clone()));
    let legacy = stateless_branch(&parse(INV2543)).unwrap();
    assert_eq!(stateless_branch(&parse(INV2543)), Some(legacy.clone()));
    assert_ne!(stateless_branch(&parse(&INV2543.replace("CSeq: 56", "CSeq: 57"))), Some(legacy));
    let no_via = parse("OPTIONS sip:a@b SIP/2.0\r\nCSeq: 1 OPTIONS\r\n\r\n");
    assert_eq!(stateless_branch(&no_via), None);
}

#[test]
fn state_after_messages_through_table_matches_rfc6026() {
    let mut tt = table();
    let t = t0();
    let inv = invite("z9hG4bKa1");
    let (id, _) = tt.insert_server(t, &inv, udp(), false).unwrap();
    tt.on_tu_response(t, id, response_bytes(&inv, 200, Some("a")), 200);
    // The ACK for a 2xx carries a new branch: it matches no transaction (the proxy forwards
    // it), but an ACK reusing the INVITE branch would be passed up from Accepted.
    assert_eq!(tt.find_server(&request("ACK", "z9hG4bKa2")), None);
    let found = tt.find_server(&request("ACK", "z9hG4bKa1")).unwrap();
    let out = tt.on_message(t + ms(5), found, request("ACK", "z9hG4bKa1"));
    assert_eq!(events(&out), vec![Ev::Ack]);
    let fired = tt.handle_timeouts(t + ms(32_000));
    assert_eq!(fired.len(), 1);
    assert!(tt.is_empty());
}

#[test]
fn a_cancelled_retransmission_timer_is_not_the_next_timeout() {
    let mut tt = table();
    let t = t0();
    let inv = invite("z9hG4bKst1");
    let (id, _) = tt.insert_client(t, inv.clone(), udp()).unwrap();
    assert_eq!(tt.next_timeout(), Some(t + Timers::default().t1), "Timer A first");
    // A provisional response ends Calling (§17.1.1.2): no retransmissions, no Timer B (the
    // proxy's Timer C guards Proceeding), so nothing is left to wake for.
    let found = tt.find_client(&response(&inv, 180, Some("x"))).unwrap();
    assert_eq!(found, id);
    tt.on_message(t + ms(10), id, response(&inv, 180, Some("x")));
    assert_eq!(tt.next_timeout(), None, "the cancelled Timer A must not wake the worker at T1");
    assert!(tt.handle_timeouts(t + Timers::default().t1).is_empty());
}

#[test]
fn on_a_grid_absorbing_timers_of_several_transactions_come_due_together() {
    let t = t0();
    let step = ms(250);
    let timers = Timers { absorb_grid: Some(super::AbsorbGrid { epoch: t, step }), ..Timers::default() };
    let mut tt = TransactionTable::new(timers);
    // Two non-INVITE client transactions completed 100 ms apart: Timer K (T4 over UDP) each.
    let mut ids = Vec::new();
    for (i, at) in [ms(10), ms(110)].into_iter().enumerate() {
        let req = request("OPTIONS", &format!("z9hG4bKgrid{i}"));
        let (id, _) = tt.insert_client(t, req.clone(), udp()).unwrap();
        tt.on_message(t + at, id, response(&req, 200, Some("x")));
        ids.push(id);
    }
    let k = Timers::default().t4;
    // Due at t+10ms+T4 and t+110ms+T4; scheduled together at the next grid point.
    assert_eq!(tt.next_timeout(), Some(t + k + step));
    assert!(tt.handle_timeouts(t + k + ms(200)).is_empty(), "not before the grid point");
    assert_eq!(tt.len(), 2);
    tt.handle_timeouts(t + k + step);
    assert_eq!(tt.len(), 0, "both ended at the one grid point");
}

#[test]
fn server_key_keeps_branch_and_sent_by_apart() {
    let key = |via: &str| ServerKey::from_request(&request_via("INVITE", via, 1)).unwrap();
    let named = key("SIP/2.0/UDP PC33.Example.com:5060;branch=z9hG4bKaBc");
    assert_eq!((named.branch(), named.sent_by().as_deref()), (Some("z9hG4bKaBc"), Some("pc33.example.com:5060")));
    let ipv4 = key("SIP/2.0/UDP 192.0.2.10;branch=z9hG4bK7");
    assert_eq!((ipv4.branch(), ipv4.sent_by().as_deref()), (Some("z9hG4bK7"), Some("192.0.2.10")));
    // The split is part of the key: the same characters cut elsewhere are another key.
    let a = key("SIP/2.0/UDP 1.example.com;branch=z9hG4bKx");
    let b = key("SIP/2.0/UDP example.com;branch=z9hG4bKx1.");
    assert_eq!(a.sent_by().as_deref(), Some("1.example.com"));
    assert_ne!(a, b);
}

#[test]
fn a_usual_server_key_is_held_inline() {
    let key = |via: &str| ServerKey::from_request(&request_via("INVITE", via, 1)).unwrap();
    let inline = |k: &ServerKey| matches!(k, ServerKey::Rfc3261 { branch_sent_by, .. } if !branch_sent_by.spilled());
    // SIPp's branch and an IPv4 sent-by; a 36-octet branch and an IPv6 one.
    assert!(inline(&key("SIP/2.0/UDP 127.0.0.1:5060;branch=z9hG4bK-4711-123-0")));
    assert!(inline(&key(&format!("SIP/2.0/UDP [2001:db8::1]:5060;branch=z9hG4bK{}", "a".repeat(29)))));
    // A longer one is kept whole on the heap.
    let long = key(&format!("SIP/2.0/UDP 192.0.2.1;branch=z9hG4bK{}", "b".repeat(60)));
    assert!(!inline(&long));
    assert_eq!(long.branch().map(str::len), Some(67));
    assert_eq!(long.sent_by().as_deref(), Some("192.0.2.1"));
}

#[test]
fn server_keys_compare_sent_by_as_its_text_does() {
    let key = |via: &str| ServerKey::from_request(&request_via("INVITE", via, 1)).unwrap();
    let k = |host: &str| key(&format!("SIP/2.0/UDP {host};branch=z9hG4bKs"));
    assert_eq!(k("PC33.Example.COM:5060"), k("pc33.example.com:5060"), "host names case-insensitively");
    assert_ne!(k("192.0.2.10"), k("192.0.2.10:5060"), "a port against none");
    assert_ne!(k("192.0.2.10:5060"), k("192.0.2.10:5061"));
    assert_ne!(k("192.0.2.10"), k("192.0.2.11"));
    assert_eq!(k("[2001:db8::1]:5060"), k("[2001:DB8:0::1]:5060"), "IPv6 addresses by value");
    assert_eq!(k("[2001:DB8:0::1]:5060").sent_by().as_deref(), Some("[2001:db8::1]:5060"));
    assert_ne!(k("[2001:db8::1]"), k("[2001:db8::2]"));
}

#[test]
fn a_stale_entry_uncovered_by_a_timeout_is_not_the_next_timeout() {
    let mut tt = table();
    let t = t0();
    let (first, second) = (invite("z9hG4bKu1"), invite("z9hG4bKu2"));
    tt.insert_client(t, first.clone(), udp()).unwrap();
    let (id2, _) = tt.insert_client(t + ms(100), second.clone(), udp()).unwrap();
    // The second's Timer A (at 600 ms) is cancelled under the first's (at 500 ms): a stale
    // entry just below the top.
    tt.on_message(t + ms(150), id2, response(&second, 180, Some("x")));
    assert_eq!(tt.next_timeout(), Some(t + ms(500)));
    // The first's Timer A fires and re-arms at 1.5 s; the stale 600 ms entry is uncovered.
    assert_eq!(tt.handle_timeouts(t + ms(500)).len(), 1);
    assert_eq!(tt.next_timeout(), Some(t + ms(1500)), "no wake-up at 600 ms for nothing");
}

/// The stateless branch is compared across herald processes (several stateless instances, a
/// restarted one, a cluster of mixed versions): these are the values session 16's herald wrote
/// (computed from the parsed top Via), and the one computed from the receipt check's memo must
/// be the same, for a checked message and an unchecked one.
#[test]
fn stateless_branch_values_are_pinned() {
    let with_via = |via: &str| {
        parse(&format!(
            "INVITE sip:bob@example.com SIP/2.0\r\nVia: {via}\r\nFrom: <sip:a@example.com>;tag=f1\r\nTo: <sip:bob@example.com>\r\nCall-ID: pin-1\r\nCSeq: 7 INVITE\r\nContent-Length: 0\r\n\r\n"
        ))
    };
    let cases = [
        ("SIP/2.0/UDP 192.0.2.7:5062;branch=z9hG4bKpin1;rport", "z9hG4bKs92d56c5627f547e4bcf500d9475d221d"),
        ("SIP/2.0/UDP 192.0.2.7;branch=z9hG4bKpin1", "z9hG4bKs2f581845816d52c8a7ec873b9bfc4313"),
        ("SIP/2.0/TCP Host.Example.COM:5070;branch=z9hG4bKpin2", "z9hG4bKsb60545416c8d606670fdb830b9ba1fce"),
        ("SIP/2.0/UDP [2001:db8::7]:5060;branch=z9hG4bKpin3", "z9hG4bKse013d64607806a5b76f7b2a647e2ceca"),
        ("SIP/2.0/UDP 10.0.0.1:5060;branch=1234", "z9hG4bKsd0d9fd523a2e9075c45500dc6cd36d23"),
    ];
    for (via, branch) in cases {
        let mut msg = with_via(via);
        assert_eq!(stateless_branch(&msg).as_deref(), Some(branch), "unchecked: {via}");
        msg.check().unwrap();
        assert!(msg.is_checked());
        assert_eq!(stateless_branch(&msg).as_deref(), Some(branch), "checked: {via}");
    }
}

/// A branch with its loop hash written at once is the branch and the hash written one after the
/// other, for engines of every index and counters of every length.
#[test]
fn a_branch_with_a_suffix_is_the_branch_then_the_suffix() {
    for index in [0u16, 1, 7, u16::MAX] {
        let mut at_once = BranchGen::new(crate::seed::Seed::fixed(3), index);
        let mut pieces = BranchGen::new(crate::seed::Seed::fixed(3), index);
        for i in 0..300u64 {
            let suffix = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (i % 64);
            let b = at_once.next_branch_with(b'-', suffix);
            assert_eq!(b, format!("{}-{suffix:016x}", pieces.next_branch()));
            assert_eq!(b.capacity(), b.len(), "exact: a key takes it without a reallocation");
        }
    }
    // The counter's digits grow with it (an engine of index 0 starts at 0: one digit).
    let mut g = BranchGen::new(crate::seed::Seed::fixed(3), 0);
    assert_eq!(g.next_branch_with(b'-', 0).len(), 7 + 16 + 1 + 1 + 16);
}

/// A request looked up from its key's parts (`find_server_unkeyed`, without building the key)
/// finds what the built key finds: ACKs with their INVITE's branch or another, sent-bys that
/// differ in port, address or family, host names (the built-key road), RFC 2543 clients,
/// retransmissions of other methods, checked requests (from the memo) and unchecked ones.
#[test]
fn a_request_found_by_its_key_parts_is_the_one_its_built_key_finds() {
    let mut tt = table();
    let t = t0();
    let sent_bys = ["192.0.2.7:5062", "192.0.2.7", "192.0.2.8:5062", "[2001:db8::7]:5060", "Host.Example.com:5060"];
    let branches = ["z9hG4bKk1", "z9hG4bKk2"];
    for (i, sent_by) in sent_bys.iter().enumerate() {
        let inv = request_via("INVITE", &format!("SIP/2.0/UDP {sent_by};branch={}", branches[i % 2]), 1);
        tt.insert_server(t, &inv, udp(), false).unwrap();
        let options = request_via("OPTIONS", &format!("SIP/2.0/UDP {sent_by};branch=z9hG4bKo{i}"), 2);
        tt.insert_server(t, &options, udp(), false).unwrap();
    }
    let legacy = request_via("INVITE", "SIP/2.0/UDP 192.0.2.9:5060", 3);
    let (legacy_id, _) = tt.insert_server(t, &legacy, udp(), false).unwrap();
    tt.on_tu_response(t, legacy_id, response_bytes(&legacy, 486, Some("lt")), 486);
    let mut found = 0;
    for method in ["ACK", "INVITE", "OPTIONS", "BYE"] {
        for sent_by in sent_bys.iter().chain(&["192.0.2.7:5063", "host.example.COM:5060", "[2001:db8::7]"]) {
            for branch in branches.iter().chain(&["z9hG4bKo0", "z9hG4bKo3", "z9hG4bKnone"]) {
                for cseq in [1, 2] {
                    let mut msg = request_via(method, &format!("SIP/2.0/UDP {sent_by};branch={branch}"), cseq);
                    let expected = tt.find_server(&msg);
                    assert_eq!(tt.find_server_unkeyed(&msg), expected, "unchecked {method} {sent_by} {branch}");
                    msg.check().unwrap();
                    assert_eq!(tt.find_server_unkeyed(&msg), expected, "checked {method} {sent_by} {branch}");
                    found += usize::from(expected.is_some());
                }
            }
        }
    }
    assert!(found > 20, "the lookups find transactions too: {found}");
    // An RFC 2543 ACK (no cookie) takes the built key's road and finds its INVITE by its tags.
    let ack = super::build_ack(&legacy, &response(&legacy, 486, Some("lt"))).unwrap();
    let ack = parse(&String::from_utf8_lossy(&ack));
    assert_eq!(tt.find_server_unkeyed(&ack), Some(legacy_id));
    assert_eq!(tt.find_server(&ack), Some(legacy_id));
}

/// A transaction id kept after its transaction ended (as an engine's maps may, until they are
/// told) reaches nothing, also once a new transaction has taken its slot in the table.
#[test]
fn an_ended_transactions_id_never_reaches_the_one_in_its_slot() {
    let mut tt = table();
    let t = t0();
    let (old, _) = tt.insert_client(t, request("OPTIONS", "z9hG4bKold"), tcp()).unwrap();
    assert!(tt.remove(old).is_some());
    let (new, _) = tt.insert_client(t, request("OPTIONS", "z9hG4bKnew"), udp()).unwrap();
    assert_eq!(old.0 as u32, new.0 as u32, "the new one is in the old one's slot");
    assert_ne!(old, new);
    assert!(tt.get(old).is_none() && tt.peer(old).is_none());
    let ok = response(&request("OPTIONS", "z9hG4bKnew"), 200, None);
    let mut peer = None;
    assert!(tt.on_message_to(t, old, ok.clone(), &mut peer).is_empty());
    assert_eq!(peer, None, "not delivered to the new one");
    assert!(tt.on_transport_error(old).is_empty());
    assert!(tt.remove(old).is_none());
    assert_eq!(tt.get(new).map(|tx| tx.state()), Some(TxState::Trying));
    assert_eq!(tt.find_client(&ok), Some(new));
    assert_eq!(tt.len(), 1);
}
