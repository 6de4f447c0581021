//! Whole calls between the caller and callee roles on a virtual clock, with no socket: the
//! roles' outputs are carried out here the way the event loop would, every message the caller
//! sends reaching the callee at once (a transparent proxy) and back. What the sans-IO shape of
//! the roles buys: RFC 3261 timer behaviour is tested in microseconds, losses included.

use super::callee::Callee;
use super::caller::{Calls, Plan};
use super::context::Context;
use super::event_loop::input::peeked;
use super::output::{Outbox, Output, SendKind, Side};
use super::stats::Stats;
use super::timers::{Timer, TimerKind, T1_US};
use super::users::User;
use super::wire::{Local, RING_HEADER};
use herald_sip::{HeaderName, Limits, Message};
use rand::SeedableRng;
use std::collections::BTreeMap;

struct Pair {
    ctx: Context,
    calls: Calls,
    callee: Callee,
    out: Outbox,
    stats: Stats,
    /// (due, sequence) → timer: deterministic order for equal deadlines.
    timers: BTreeMap<(u64, u64), Timer>,
    seq: u64,
    /// Messages the caller sent, by method or status line start.
    sent_by_caller: Vec<String>,
    /// Caller sends to drop, counted from the first.
    drop_caller_sends: Vec<usize>,
    caller_sends: usize,
    /// How long the callee holds every message it sends (as the event loop's quantum does).
    callee_hold_us: u64,
    /// Caller sends that carried the ring header.
    ring_headers: usize,
    /// Messages handed to the roles as a peek when they take them that way (as the event loop
    /// does), else all parsed in full.
    peek: bool,
    /// Messages the roles took from a peek.
    peeked: usize,
    /// The "proxy" answers every INVITE with a 100 Trying before passing it on.
    trying: bool,
}

fn local(port: u16) -> Local {
    Local::new("UDP", format!("127.0.0.1:{port}"), "", "example.com".into())
}

impl Pair {
    fn new() -> Pair {
        let users = vec![User { name: "alice".into(), password: None }, User { name: "bob".into(), password: None }];
        let proxy = "127.0.0.1:5060".parse().unwrap();
        let rng = rand::rngs::SmallRng::seed_from_u64(17);
        Pair {
            callee: Callee::new(&users, 0),
            ctx: Context::new(local(7001), local(7002), proxy, false, users, rng, 1),
            calls: Calls::default(),
            out: Outbox::default(),
            stats: Stats::default(),
            timers: BTreeMap::new(),
            seq: 0,
            sent_by_caller: Vec::new(),
            drop_caller_sends: Vec::new(),
            caller_sends: 0,
            callee_hold_us: 0,
            ring_headers: 0,
            peek: true,
            peeked: 0,
            trying: false,
        }
    }

    /// A pair whose callee rings `ring_us` when an INVITE does not say.
    fn ringing(ring_us: u64) -> Pair {
        let mut p = Pair::new();
        p.callee = Callee::new(&p.ctx.users, ring_us);
        p.ctx.callee_ring_us = ring_us;
        p
    }

    /// Carries out the outputs: sends are delivered at once (or dropped), timers queued.
    fn execute(&mut self) {
        while !self.out.is_empty() {
            let mut batch = Vec::new();
            self.out.swap_into(&mut batch);
            for output in batch {
                match output {
                    Output::Send { side, bytes, kind, .. } => {
                        if kind == SendKind::Retransmission {
                            self.stats.retransmissions += 1;
                        }
                        let msg = Message::parse(bytes.clone(), &Limits::default()).unwrap();
                        match side {
                            Side::Caller => {
                                self.caller_sends += 1;
                                self.ring_headers += usize::from(msg.get_by_name(RING_HEADER).is_some());
                                let first = String::from_utf8_lossy(&msg.as_bytes()[..msg.as_bytes().len().min(8)]);
                                self.sent_by_caller.push(first.split(' ').next().unwrap_or("").to_string());
                                if self.drop_caller_sends.contains(&self.caller_sends) {
                                    continue;
                                }
                                if self.trying && msg.method().is_some_and(|m| m.as_str() == "INVITE") {
                                    let [via, from, to, id, cseq] = [
                                        HeaderName::Via,
                                        HeaderName::From,
                                        HeaderName::To,
                                        HeaderName::CallId,
                                        HeaderName::CSeq,
                                    ]
                                    .map(|h| String::from_utf8_lossy(msg.get(h).unwrap()).into_owned());
                                    let trying = format!(
                                        "SIP/2.0 100 Trying\r\nVia: {via}\r\nFrom: {from}\r\nTo: {to}\r\nCall-ID: {id}\r\n\
                                         CSeq: {cseq}\r\nContent-Length: 0\r\n\r\n"
                                    );
                                    self.deliver_to_caller(bytes::Bytes::from(trying));
                                }
                                let from = "127.0.0.1:7001".parse().unwrap();
                                let (callee, ctx, out) = (&mut self.callee, &mut self.ctx, &mut self.out);
                                if self.peek
                                    && peeked(&bytes, &Limits::default(), |p| {
                                        callee.on_peeked_request(ctx, p, from, out)
                                    })
                                {
                                    self.peeked += 1;
                                } else {
                                    self.callee.on_request(&mut self.ctx, &msg, from, &mut self.out);
                                }
                            }
                            Side::Callee => {
                                // Held before it leaves, as the loop records at its flush.
                                if let SendKind::Answer { key, .. } = kind {
                                    self.ctx.held.record(key, self.callee_hold_us);
                                }
                                let rx_us = self.ctx.rx_us;
                                self.ctx.rx_us += self.callee_hold_us;
                                self.deliver_to_caller(bytes);
                                self.ctx.rx_us = rx_us;
                            }
                        }
                    }
                    Output::Arm { at_us, timer } => {
                        self.seq += 1;
                        self.timers.insert((at_us, self.seq), timer);
                    }
                    Output::Record(m) => self.stats.record(m),
                    Output::CallEnded { .. } => {}
                }
            }
        }
    }

    /// Hands a response to the caller, from a peek when it takes it that way.
    fn deliver_to_caller(&mut self, bytes: bytes::Bytes) {
        let (calls, ctx, out) = (&mut self.calls, &mut self.ctx, &mut self.out);
        if self.peek && peeked(&bytes, &Limits::default(), |p| calls.on_peeked_response(ctx, p, out)) {
            self.peeked += 1;
        } else {
            let msg = Message::parse(bytes, &Limits::default()).unwrap();
            self.calls.on_response(&mut self.ctx, msg, &mut self.out);
        }
    }

    /// Runs timers in deadline order until none is left before `until_us`.
    fn run_until(&mut self, until_us: u64) {
        while let Some((&(at, seq), &t)) = self.timers.iter().next() {
            if at > until_us {
                break;
            }
            self.timers.remove(&(at, seq));
            self.ctx.now = at;
            self.ctx.rx_us = at;
            match t.kind {
                TimerKind::CalleeAnswer
                | TimerKind::CalleeRetransmit
                | TimerKind::CalleeAckTimeout
                | TimerKind::CalleeForget => self.callee.on_timer(&self.ctx, t, &mut self.out),
                _ => self.calls.on_timer(&mut self.ctx, t, &mut self.out),
            }
            self.execute();
        }
    }

    fn call(&mut self, ring_us: u64, hold_us: u64) {
        let plan = Plan { ring_us, hold_us, cancel_after_us: None, outcome: None };
        self.calls.start(&mut self.ctx, 0, 1, plan, &mut self.out);
        self.execute();
    }
}

#[test]
fn a_call_completes_and_records_its_delays() {
    let mut p = Pair::new();
    p.call(1_000, 2_000);
    p.run_until(10_000);
    assert_eq!((p.stats.attempted, p.stats.succeeded, p.stats.failed), (1, 1, 0));
    assert!(p.calls.is_empty());
    assert_eq!(p.sent_by_caller, ["INVITE", "ACK", "BYE"]);
    assert_eq!(p.stats.srd.count(), 1);
    assert_eq!(p.stats.sdd.count(), 1);
    assert_eq!(p.stats.retransmissions, 0);
    assert_eq!(p.stats.transactions_failed, 0);
}

#[test]
fn the_time_our_callee_holds_its_answers_is_left_out_of_the_latencies() {
    let mut p = Pair::new();
    // Every answer leaves 7 ms after it was due; the "proxy" here adds nothing.
    p.callee_hold_us = 7_000;
    p.call(1_000, 2_000);
    p.run_until(100_000);
    assert_eq!((p.stats.attempted, p.stats.succeeded), (1, 1));
    // 1 µs: the histograms' floor (nothing at all is left).
    assert_eq!(p.stats.srd.quantile_us(1.0), 1);
    assert_eq!(p.stats.sdd.quantile_us(1.0), 1);
    assert_eq!(p.stats.response_time["BYE"].quantile_us(1.0), 1);
    // The ring time is the callee's answer, not its hold: it stays in the INVITE's.
    let invite = p.stats.response_time["INVITE"].quantile_us(1.0);
    assert!((1_000..1_010).contains(&invite), "{invite}");
    assert!(p.ctx.held.is_empty(), "every held answer was taken");
}

#[test]
fn a_lost_invite_is_retransmitted_on_timer_a_and_a_lost_bye_on_timer_e() {
    let mut p = Pair::new();
    // The first INVITE and the first BYE are lost on the way.
    p.drop_caller_sends = vec![1, 4];
    p.call(0, 0);
    p.run_until(T1_US - 1);
    assert_eq!(p.stats.succeeded, 0, "nothing before Timer A");
    p.run_until(10 * T1_US);
    assert_eq!((p.stats.attempted, p.stats.succeeded, p.stats.failed), (1, 1, 0));
    assert_eq!(p.sent_by_caller, ["INVITE", "INVITE", "ACK", "BYE", "BYE"]);
    assert_eq!(p.stats.retransmissions, 2);
}

#[test]
fn a_callee_that_never_answers_times_out_the_call_on_timer_b() {
    let mut p = Pair::new();
    p.drop_caller_sends = (1..100).collect();
    p.call(0, 0);
    p.run_until(u64::MAX);
    assert_eq!((p.stats.attempted, p.stats.succeeded, p.stats.failed), (1, 0, 1));
    assert_eq!(p.stats.failures.get("timeout"), Some(&1));
    // Timer A over 64·T1: 0, 0.5, 1.5, 3.5, 7.5, 15.5, 31.5 s.
    assert_eq!(p.sent_by_caller.len(), 7);
    assert!(p.calls.is_empty());
}

/// A call that rings as long as our callee does by default leaves the ring header out; one that
/// rings otherwise names its ring time. Either way the INVITE's answer comes after that ring.
#[test]
fn the_ring_header_is_sent_only_when_the_ring_differs_from_the_callees_default() {
    for (ring_us, headers) in [(3_000, 0), (1_000, 1), (0, 1)] {
        let mut p = Pair::ringing(3_000);
        p.call(ring_us, 2_000);
        p.run_until(100_000);
        assert_eq!((p.stats.attempted, p.stats.succeeded), (1, 1), "ring {ring_us}");
        assert_eq!(p.ring_headers, headers, "ring {ring_us}");
        let invite = p.stats.response_time["INVITE"].quantile_us(1.0);
        assert!((ring_us..ring_us + 10).contains(&invite.max(1)), "ring {ring_us}: {invite}");
    }
}

/// Our callee names the called user from the INVITE's Request-URI: our registered contact
/// verbatim (looked up as written), or any other form parsed (a parameter added, the address
/// of record); an unknown user gets 404.
#[test]
fn the_callee_finds_the_user_by_its_contact_or_by_parsing_the_uri() {
    let mut p = Pair::new();
    let bob = p.ctx.callee_local.contact_uri("bob");
    let alice = p.ctx.callee_local.contact_uri("alice");
    let cases = [
        (bob.clone(), "180", Some("bob")),
        (alice, "180", Some("alice")),
        (format!("{bob};x=1"), "180", Some("bob")),
        ("sip:bob@example.com".to_string(), "180", Some("bob")),
        (p.ctx.callee_local.contact_uri("carol"), "404", None),
    ];
    for (n, (uri, status, user)) in cases.into_iter().enumerate() {
        let invite = format!(
            "INVITE {uri} SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:7001;branch=z9hG4bK{n}\r\nFrom: <sip:a@d>;tag=1\r\n\
             To: <sip:x@d>\r\nCall-ID: target{n}\r\nCSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n"
        );
        let msg = Message::parse(bytes::Bytes::from(invite), &Limits::default()).unwrap();
        p.callee.on_request(&mut p.ctx, &msg, "127.0.0.1:7001".parse().unwrap(), &mut p.out);
        let mut outputs = Vec::new();
        p.out.swap_into(&mut outputs);
        let Some(Output::Send { bytes, .. }) = outputs.into_iter().find(|o| matches!(o, Output::Send { .. })) else {
            panic!("no answer to {uri}");
        };
        let answer = Message::parse(bytes, &Limits::default()).unwrap();
        assert_eq!(answer.status().map(|s| s.to_string()).as_deref(), Some(status), "{uri}");
        let contact_user = answer.contacts().next().map(|c| c.unwrap().address().unwrap().uri.as_str().to_string());
        assert_eq!(contact_user, user.map(|u| p.ctx.callee_local.contact_uri(u)), "{uri}");
    }
}

/// What a run of `scenario` on a pair left: statistics, the caller's messages and how many
/// messages were taken from a peek.
fn outcome(peek: bool, scenario: impl Fn(&mut Pair)) -> (String, Vec<String>, usize) {
    let mut p = Pair::new();
    p.peek = peek;
    scenario(&mut p);
    let s = &p.stats;
    let latencies: Vec<u64> = [&s.srd, &s.sdd, &s.response_time["INVITE"], &s.response_time["BYE"]]
        .iter()
        .flat_map(|h| [h.count(), h.quantile_us(0.5), h.quantile_us(1.0)])
        .collect();
    let stats = format!(
        "{} {} {} {} {} {} {:?} {latencies:?}",
        s.attempted, s.succeeded, s.failed, s.retransmissions, s.transactions_failed, s.stray, s.failures
    );
    (stats, p.sent_by_caller, p.peeked)
}

/// The messages the roles take from a peek (the ACK, the BYE, the provisionals, the 2xx to a
/// BYE) do exactly what they do parsed in full: calls with the proxy's 100 Trying, held
/// answers, lost INVITEs, BYEs and ACKs (then the callee's 2xx retransmissions) end the same,
/// with the same latencies, retransmissions and messages.
#[test]
fn messages_taken_from_a_peek_do_what_they_do_parsed() {
    type Scenario = (&'static str, fn(&mut Pair));
    let scenarios: [Scenario; 5] = [
        ("trying", |p| {
            p.trying = true;
            p.callee_hold_us = 300;
            for _ in 0..3 {
                p.call(1_000, 2_000);
            }
            p.run_until(100_000);
        }),
        ("trying, then a long ring", |p| {
            // The 100 read from a peek stops Timer A and B as the parsed one does: no INVITE
            // retransmitted in 6·T1 of ringing, no timeout.
            p.trying = true;
            p.call(6 * T1_US, 0);
            p.run_until(u64::MAX);
        }),
        ("lost INVITE and BYE", |p| {
            p.trying = true;
            p.drop_caller_sends = vec![1, 4];
            p.call(0, 0);
            p.run_until(10 * T1_US);
        }),
        ("lost ACK", |p| {
            p.drop_caller_sends = vec![2];
            p.call(500, 40 * T1_US);
            p.run_until(u64::MAX);
        }),
        ("plain", |p| {
            p.call(1_000, 2_000);
            p.run_until(10_000);
        }),
    ];
    for (name, scenario) in scenarios {
        let (parsed, peeked) = (outcome(false, scenario), outcome(true, scenario));
        assert_eq!(parsed.2, 0);
        assert!(peeked.2 >= 2, "{name}: {} peeked", peeked.2);
        assert_eq!((&parsed.0, &parsed.1), (&peeked.0, &peeked.1), "{name}");
    }
    // The 100 (the first provisional, which moves the INVITE's transaction to Proceeding) and
    // the 180 are taken from a peek, as are the ACKs, the BYEs, the 2xx to the BYEs, and the
    // 2xx to the INVITEs after the first, whose Contact was read then: 3 x 5 + 2. The INVITEs
    // go to the address of record here (no proxy puts our contact in), which is parsed.
    assert_eq!(outcome(true, scenarios[0].1).2, 17);
}
