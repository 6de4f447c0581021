//! `plan_targets` keeping only the best target (`Option<Planned>`, what `forward_stateless`
//! sends) against the plan kept whole (`Vec<Planned>`) with the best chosen from it, as
//! `forward_stateless` chose before (issue 21: no `Vec` for a target planned alone).

use super::*;
use crate::engine::context::Planned;
use crate::engine::decisions::Local;
use crate::engine::targets::PlanSet;
use crate::proxy::route::{preprocess_into, Preprocessed};

/// The first of the highest q, read from the whole plan (the choice before `PlanSet`).
fn best_of_whole(plan: Vec<Planned>) -> Option<Planned> {
    plan.into_iter().rev().max_by_key(|p| p.q)
}

fn shown(plan: Result<Option<Planned>, Local>) -> String {
    match plan {
        Ok(p) => format!("{p:?}"),
        Err(Local::Options) => "options".into(),
        Err(Local::Register) => "register".into(),
        Err(Local::Reject(status, reason)) => format!("{status} {reason}"),
        Err(Local::RejectWith(status, reason, headers)) => format!("{status} {reason} {headers:?}"),
        Err(Local::RuleReject(status, reason)) => format!("{status} {reason} (rule)"),
    }
}

/// Both plans of `text` from Alice, shown: (the whole plan's best, the best alone).
fn both(h: &Harness, text: &str) -> (String, String) {
    let msg = Message::parse(Bytes::from(text.replace('\n', "\r\n")), &Limits::default()).unwrap();
    let mut pre = Preprocessed::default();
    let pre = preprocess_into(&msg, &h.engine.cfg.identity, &h.engine.own_texts, &mut pre).ok().map(|()| &pre);
    let from = Peer::udp(addr(ALICE));
    let whole = h.engine.plan_targets::<Vec<Planned>>(h.now, &msg, pre, from, true).map(best_of_whole);
    let best = h.engine.plan_targets::<Option<Planned>>(h.now, &msg, pre, from, true);
    (shown(whole), shown(best))
}

fn request(method: &str, ruri: &str, to_tag: &str, extra: &str) -> String {
    format!("{method} {ruri} SIP/2.0\nVia: SIP/2.0/UDP {ALICE};branch=z9hG4bK-p1\n{extra}Max-Forwards: 70\nFrom: <sip:alice@example.com>;tag=f1\nTo: <{ruri}>{to_tag}\nCall-ID: plan-1\nCSeq: 1 {method}\nContact: <sip:alice@{ALICE}>\nContent-Length: 0\n\n")
}

#[test]
fn the_best_target_alone_is_the_whole_plans_best() {
    let mut h = Harness::new();
    // Bindings of several q, two of them at the highest: the first of those is the best.
    h.register("bob", BOB, Some("0.5"));
    h.register("bob", BOB2, Some("1.0"));
    h.register("bob", "192.0.2.4:5064", Some("1.0"));
    h.register("carol", BOB, None);
    let cases = [
        request("INVITE", "sip:bob@example.com", "", ""),
        request("ACK", "sip:bob@example.com", ";tag=t1", ""),
        request("INVITE", "sip:carol@example.com", "", ""),
        request("INVITE", "sip:nobody@example.com", "", ""),
        request("ACK", &format!("sip:bob@{BOB}"), ";tag=t1", ""),
        request("ACK", &format!("sip:bob@{BOB}"), ";tag=t1", &format!("Route: <sip:{PROXY};lr>\n")),
        request("BYE", &format!("sip:bob@{BOB}"), ";tag=t1", "Route: <sip:192.0.2.50;lr>, <sip:192.0.2.51;lr>\n"),
        request("ACK", &format!("sip:bob@{BOB}"), ";tag=t1", "Route: <sip:192.0.2.50>\n"),
        request("ACK", "sip:bob@far.example.org", ";tag=t1", ""),
        request("ACK", "sip:bob@example.com", ";tag=t1", "Route: <bad\n"),
        request("OPTIONS", "sip:example.com", "", ""),
        request("OPTIONS", "sip:192.0.2.10:5060", "", ""),
        request("REGISTER", "sip:example.com", "", ""),
        request("MESSAGE", "tel:+441234", "", ""),
    ];
    let mut planned = 0;
    for text in &cases {
        let (whole, best) = both(&h, text);
        assert_eq!(best, whole, "{text}");
        planned += usize::from(best.starts_with("Some("));
    }
    // Each way of planning a target is among them: a location list (twice), a Route, a
    // strict route, the Request-URI by address and by name.
    assert_eq!(planned, 8);
}

/// Every list of up to five targets over three q-values: the best alone is the first of the
/// highest q, and none of an empty list.
#[test]
fn many_keeps_the_first_of_the_highest_q() {
    let target = |i: usize, q: u16| Planned { request_uri: Some(i.to_string()), q, ..Planned::spent() };
    let qs = [0u16, 500, 1000];
    for len in 0..=5u32 {
        for code in 0..3usize.pow(len) {
            let plan: Vec<Planned> =
                (0..len as usize).map(|i| target(i, qs[code / 3usize.pow(i as u32) % 3])).collect();
            let top = plan.iter().map(|p| p.q).max();
            let first_of_top = plan.iter().position(|p| Some(p.q) == top).map(|i| i.to_string());
            let best = <Option<Planned> as PlanSet>::many(plan);
            assert_eq!(best.and_then(|p| p.request_uri), first_of_top);
        }
    }
}
