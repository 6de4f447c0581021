//! The engine in an in-memory harness: real messages, a simulated clock, no sockets.

use super::*;
use crate::io::{Input, Output, ResolveRequest, Target};
use crate::peer::{Peer, Transport};
use crate::proxy::Identity;
use crate::registrar::{Registrar, RegistrarConfig};
use crate::transaction::Timers;
use bytes::Bytes;
use herald_sip::{Limits, Message, Method};
use std::net::SocketAddr;
use std::time::Duration;

const PROXY: &str = "192.0.2.10:5060";
const ALICE: &str = "192.0.2.1:5061";
const BOB: &str = "192.0.2.2:5062";
const BOB2: &str = "192.0.2.3:5063";

struct Harness {
    engine: Engine,
    now: Instant,
}

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn config(forking: Forking, stateless: bool) -> EngineConfig {
    EngineConfig {
        identity: Identity::new(vec![addr(PROXY)], ["example.com".to_owned()]),
        listeners: vec![
            Listener { transport: Transport::Udp, addr: addr(PROXY) },
            Listener { transport: Transport::Tcp, addr: addr(PROXY) },
            Listener { transport: Transport::Ws, addr: addr(PROXY) },
        ],
        timers: Timers::default(),
        record_route: RecordRoute::Always,
        forking,
        stateless,
        timer_c: Duration::from_secs(180),
        routes: None,
        seed: crate::seed::Seed::fixed(0),
        nat: crate::nat::NatConfig::default(),
        gateways: Default::default(),
        routing: Default::default(),
    }
}

impl Harness {
    fn with(forking: Forking, stateless: bool) -> Harness {
        Harness::from_config(config(forking, stateless))
    }

    fn new() -> Harness {
        Harness::with(Forking::Parallel, false)
    }

    fn from_config(cfg: EngineConfig) -> Harness {
        let registrar = Registrar::new(RegistrarConfig::default());
        let store = Arc::new(registrar.new_store());
        Harness { engine: Engine::new(Arc::new(cfg), store, registrar, 0), now: Instant::now() }
    }

    /// Feeds a message (LF line ends are turned into CRLF) from `from` over UDP.
    fn send(&mut self, from: &str, text: &str) -> Vec<Output> {
        self.send_bytes(Peer::udp(addr(from)), Bytes::from(text.replace("\r\n", "\n").replace('\n', "\r\n")))
    }

    fn send_bytes(&mut self, from: Peer, bytes: Bytes) -> Vec<Output> {
        let msg = Message::parse(bytes, &Limits::default()).unwrap();
        let mut out = Vec::new();
        self.engine.handle(self.now, Input::Message { from, local: addr(PROXY), msg }, &mut out);
        out
    }

    fn advance(&mut self, by: Duration) -> Vec<Output> {
        self.now += by;
        let mut out = Vec::new();
        self.engine.handle_timeouts(self.now, &mut out);
        out
    }

    fn register(&mut self, user: &str, from: &str, q: Option<&str>) {
        let q = q.map(|q| format!(";q={q}")).unwrap_or_default();
        let out = self.send(
            from,
            &format!(
                "REGISTER sip:example.com SIP/2.0\nVia: SIP/2.0/UDP {from};branch=z9hG4bKreg{from}{user}\nMax-Forwards: 70\nFrom: <sip:{user}@example.com>;tag=r1\nTo: <sip:{user}@example.com>\nCall-ID: reg-{user}-{from}\nCSeq: 1 REGISTER\nContact: <sip:{user}@{from}>{q}\nExpires: 3600\nContent-Length: 0\n\n"
            ),
        );
        let (to, resp) = sent(&out)[0].clone();
        assert_eq!(resp.status(), Some(200), "{:?}", String::from_utf8_lossy(resp.as_bytes()));
        assert_eq!(to.addr, addr(from));
    }
}

/// The messages an output list sends, parsed.
fn sent(out: &[Output]) -> Vec<(Peer, Message)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Send { to, bytes } => Some((*to, Message::parse(bytes.clone(), &Limits::default()).unwrap())),
            _ => None,
        })
        .collect()
}

fn invite(to_user: &str, call: &str) -> String {
    format!("INVITE sip:{to_user}@example.com SIP/2.0\nVia: SIP/2.0/UDP {ALICE};branch=z9hG4bK-{call};rport\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=a1\nTo: <sip:{to_user}@example.com>\nCall-ID: {call}\nCSeq: 1 INVITE\nContact: <sip:alice@{ALICE}>\nContent-Type: application/sdp\nContent-Length: 5\n\nv=0\n")
}

/// A response from the callee to a forwarded request.
fn answer(req: &Message, status: u16, reason: &str, to_tag: &str) -> String {
    let mut s = format!("SIP/2.0 {status} {reason}\r\n");
    for h in req.headers() {
        use herald_sip::HeaderName as H;
        if matches!(h.name, H::Via | H::From | H::CallId | H::CSeq | H::RecordRoute) {
            s.push_str(std::str::from_utf8(&req.as_bytes()[h.line.range()]).unwrap());
        }
        if h.name == H::To {
            s.push_str(&format!("To: {};tag={to_tag}\r\n", std::str::from_utf8(req.value_of(h)).unwrap()));
        }
    }
    if status < 300 && status > 100 {
        s.push_str(&format!("Contact: <sip:bob@{BOB}>\r\n"));
    }
    s.push_str("Content-Length: 0\r\n\r\n");
    s
}

#[test]
fn a_call_through_the_proxy() {
    let mut h = Harness::new();
    h.register("bob", BOB, None);
    let out = h.send(ALICE, &invite("bob", "call1"));
    let msgs = sent(&out);
    // 100 Trying to Alice (RFC 3581: rport → her source port), INVITE to Bob's registration.
    assert_eq!(msgs.len(), 2);
    assert_eq!((msgs[0].0.addr, msgs[0].1.status()), (addr(ALICE), Some(100)));
    let (to, fwd) = &msgs[1];
    assert_eq!(to.addr, addr(BOB));
    assert_eq!(fwd.request_uri_bytes(), Some(format!("sip:bob@{BOB}").as_bytes()));
    assert_eq!(fwd.max_forwards().unwrap(), Some(69));
    assert_eq!(fwd.vias().count(), 2);
    let top = fwd.top_via().unwrap();
    assert!(top.has_rfc3261_branch());
    assert_eq!(fwd.vias().nth(1).unwrap().unwrap().rport(), Some(Some(5061)));
    assert_eq!(fwd.record_routes().count(), 1);
    assert_eq!(fwd.body(), b"v=0\r\n");
    // Bob rings, then answers: both reach Alice in that order, without our Via.
    let fwd = fwd.clone();
    let ringing = h.send(BOB, &answer(&fwd, 180, "Ringing", "b1"));
    let ok = h.send(BOB, &answer(&fwd, 200, "OK", "b1"));
    let (r, o) = (sent(&ringing), sent(&ok));
    assert_eq!((r[0].0.addr, r[0].1.status()), (addr(ALICE), Some(180)));
    assert_eq!((o[0].0.addr, o[0].1.status()), (addr(ALICE), Some(200)));
    assert_eq!(o[0].1.vias().count(), 1);
    // Alice's ACK and BYE follow the Record-Route (loose routing) to Bob.
    let route = format!("<sip:{PROXY};lr>");
    let ack = format!("ACK sip:bob@{BOB} SIP/2.0\nVia: SIP/2.0/UDP {ALICE};branch=z9hG4bK-ack1\nRoute: {route}\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=a1\nTo: <sip:bob@example.com>;tag=b1\nCall-ID: call1\nCSeq: 1 ACK\nContent-Length: 0\n\n");
    let a = sent(&h.send(ALICE, &ack));
    assert_eq!(a.len(), 1);
    assert_eq!((a[0].0.addr, a[0].1.method()), (addr(BOB), Some(Method::Ack)));
    assert_eq!(a[0].1.routes().count(), 0, "our own Route entry is removed");
    let bye =
        ack.replace("ACK sip", "BYE sip").replace("CSeq: 1 ACK", "CSeq: 2 BYE").replace("z9hG4bK-ack1", "z9hG4bK-bye1");
    let b = sent(&h.send(ALICE, &bye));
    assert_eq!((b[0].0.addr, b[0].1.method()), (addr(BOB), Some(Method::Bye)));
    let b200 = sent(&h.send(BOB, &answer(&b[0].1, 200, "OK", "b1")));
    assert_eq!((b200[0].0.addr, b200[0].1.status()), (addr(ALICE), Some(200)));
}

#[test]
fn unknown_users_and_invalid_requests_are_answered_locally() {
    let mut h = Harness::new();
    let counted = Arc::new(ResponseStats::default());
    h.engine = h.engine.with_response_stats(counted.clone());
    let nobody = sent(&h.send(ALICE, &invite("nobody", "c404")));
    assert_eq!(nobody.last().unwrap().1.status(), Some(404));
    let zero = invite("bob", "c483").replace("Max-Forwards: 70", "Max-Forwards: 0");
    assert_eq!(sent(&h.send(ALICE, &zero)).last().unwrap().1.status(), Some(483));
    let ext = invite("bob", "c420").replace("Max-Forwards: 70", "Max-Forwards: 70\nProxy-Require: foo");
    let r = sent(&h.send(ALICE, &ext));
    assert_eq!(r.last().unwrap().1.status(), Some(420));
    assert_eq!(r.last().unwrap().1.get(herald_sip::HeaderName::Unsupported), Some(&b"foo"[..]));
    let tel = invite("bob", "c416").replace("INVITE sip:bob@example.com", "INVITE tel:+15551234");
    assert_eq!(sent(&h.send(ALICE, &tel)).last().unwrap().1.status(), Some(416));
    let opts = format!("OPTIONS sip:{PROXY} SIP/2.0\nVia: SIP/2.0/UDP {ALICE};branch=z9hG4bK-o1\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=a1\nTo: <sip:{PROXY}>\nCall-ID: opt1\nCSeq: 1 OPTIONS\nContent-Length: 0\n\n");
    let o = sent(&h.send(ALICE, &opts));
    assert_eq!(o[0].1.status(), Some(200));
    assert!(o[0].1.get(herald_sip::HeaderName::Allow).is_some());
    // A request missing Call-ID gets a 400 naming it.
    let bad = invite("bob", "c400").replace("Call-ID: c400\n", "");
    let r = sent(&h.send(ALICE, &bad));
    assert_eq!(r[0].1.status(), Some(400));
    assert_eq!(r[0].1.reason(), Some(&b"Missing Call-ID"[..]));
    // Every one of those answers is counted by its status (herald_local_responses_total).
    assert_eq!(counted.snapshot(), vec![(200, 1), (400, 1), (404, 1), (416, 1), (420, 1), (483, 1)]);
}

#[test]
fn parallel_forking_picks_the_2xx_and_cancels_the_rest() {
    let mut h = Harness::new();
    h.register("bob", BOB, Some("0.5"));
    h.register("bob", BOB2, Some("0.9"));
    let out = sent(&h.send(ALICE, &invite("bob", "fork1")));
    let branches: Vec<_> = out.iter().filter(|(_, m)| m.is_request()).cloned().collect();
    assert_eq!(branches.len(), 2);
    let to_bob2 = branches.iter().find(|(p, _)| p.addr == addr(BOB2)).unwrap().1.clone();
    let to_bob = branches.iter().find(|(p, _)| p.addr == addr(BOB)).unwrap().1.clone();
    h.send(BOB, &answer(&to_bob, 180, "Ringing", "x1"));
    let ok = sent(&h.send(BOB2, &answer(&to_bob2, 200, "OK", "x2")));
    // The 200 goes to Alice and a CANCEL to the other, ringing branch.
    assert!(ok.iter().any(|(p, m)| p.addr == addr(ALICE) && m.status() == Some(200)));
    let cancel = ok.iter().find(|(_, m)| m.method() == Some(Method::Cancel)).expect("CANCEL for the other branch");
    assert_eq!(cancel.0.addr, addr(BOB));
    assert_eq!(cancel.1.top_via().unwrap().branch(), to_bob.top_via().unwrap().branch());
}

#[test]
fn sequential_forking_tries_higher_q_first() {
    let mut h = Harness::with(Forking::Sequential, false);
    h.register("bob", BOB, Some("0.5"));
    h.register("bob", BOB2, Some("0.9"));
    let out = sent(&h.send(ALICE, &invite("bob", "seq1")));
    let first: Vec<_> = out.iter().filter(|(_, m)| m.is_request()).collect();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].0.addr, addr(BOB2));
    let busy = first[0].1.clone();
    let next = sent(&h.send(BOB2, &answer(&busy, 486, "Busy Here", "x2")));
    // The 486 is ACKed hop-by-hop and the next contact is tried; Alice hears nothing final yet.
    assert!(next.iter().any(|(p, m)| p.addr == addr(BOB2) && m.method() == Some(Method::Ack)));
    let second = next.iter().find(|(_, m)| m.method() == Some(Method::Invite)).unwrap();
    assert_eq!(second.0.addr, addr(BOB));
    assert!(!next.iter().any(|(p, m)| p.addr == addr(ALICE) && m.status().is_some_and(|s| s >= 200)));
    let nf = sent(&h.send(BOB, &answer(&second.1, 404, "Not Found", "x1")));
    // Best of {486, 404}: the first received of the lowest class, 486.
    assert!(nf.iter().any(|(p, m)| p.addr == addr(ALICE) && m.status() == Some(486)));
}

#[test]
fn cancel_from_the_caller() {
    let mut h = Harness::new();
    h.register("bob", BOB, None);
    let inv = invite("bob", "cancel1");
    let fwd = sent(&h.send(ALICE, &inv))[1].1.clone();
    h.send(BOB, &answer(&fwd, 180, "Ringing", "b1"));
    let cancel = format!("CANCEL sip:bob@example.com SIP/2.0\nVia: SIP/2.0/UDP {ALICE};branch=z9hG4bK-cancel1;rport\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=a1\nTo: <sip:bob@example.com>\nCall-ID: cancel1\nCSeq: 1 CANCEL\nContent-Length: 0\n\n");
    let out = sent(&h.send(ALICE, &cancel));
    assert!(out
        .iter()
        .any(|(p, m)| p.addr == addr(ALICE) && m.status() == Some(200) && m.cseq().unwrap().method == Method::Cancel));
    let c = out.iter().find(|(_, m)| m.method() == Some(Method::Cancel)).expect("CANCEL downstream");
    assert_eq!(c.0.addr, addr(BOB));
    // Bob answers 487 to the INVITE: it is ACKed downstream and forwarded to Alice.
    let out = sent(&h.send(BOB, &answer(&fwd, 487, "Request Terminated", "b1")));
    assert!(out.iter().any(|(p, m)| p.addr == addr(BOB) && m.method() == Some(Method::Ack)));
    assert!(out.iter().any(|(p, m)| p.addr == addr(ALICE) && m.status() == Some(487)));
}

#[test]
fn a_silent_callee_times_out_with_408() {
    let mut h = Harness::new();
    h.register("bob", BOB, None);
    h.send(ALICE, &invite("bob", "t1"));
    // Timer A retransmits the INVITE to Bob at 0.5 s, 1.5 s, ... (RFC 3261 §17.1.1.2).
    let r = sent(&h.advance(Duration::from_millis(500)));
    assert!(r.iter().any(|(p, m)| p.addr == addr(BOB) && m.method() == Some(Method::Invite)));
    let mut final_to_alice = None;
    for _ in 0..80 {
        let out = sent(&h.advance(Duration::from_millis(500)));
        if let Some((_, m)) = out.iter().find(|(p, m)| p.addr == addr(ALICE) && m.status().is_some_and(|s| s >= 400)) {
            final_to_alice = Some((m.status(), h.now));
            break;
        }
    }
    assert_eq!(final_to_alice.map(|f| f.0), Some(Some(408)));
}

#[test]
fn timer_c_cancels_a_branch_that_rings_forever() {
    let mut h = Harness::new();
    h.register("bob", BOB, None);
    let fwd = sent(&h.send(ALICE, &invite("bob", "tc1")))[1].1.clone();
    h.send(BOB, &answer(&fwd, 180, "Ringing", "b1"));
    let before = sent(&h.advance(Duration::from_secs(179)));
    assert!(!before.iter().any(|(_, m)| m.method() == Some(Method::Cancel)));
    let at = sent(&h.advance(Duration::from_secs(1)));
    assert!(at.iter().any(|(p, m)| p.addr == addr(BOB) && m.method() == Some(Method::Cancel)));
}

/// §16.7 step 2: every provisional resets Timer C; the branch keeps one heap entry, which comes
/// due at the first deadline and is queued again at the reset one.
#[test]
fn a_later_provisional_postpones_timer_c() {
    let mut h = Harness::new();
    h.register("bob", BOB, None);
    let fwd = sent(&h.send(ALICE, &invite("bob", "tc2")))[1].1.clone();
    h.send(BOB, &answer(&fwd, 180, "Ringing", "b1"));
    h.advance(Duration::from_secs(100));
    h.send(BOB, &answer(&fwd, 183, "Session Progress", "b1"));
    let cancels = |out: &[Output]| sent(out).iter().filter(|(_, m)| m.method() == Some(Method::Cancel)).count();
    // The first deadline (180 s after the 180) passes: the entry is queued again, no CANCEL.
    for _ in 0..179 {
        assert_eq!(cancels(&h.advance(Duration::from_secs(1))), 0, "Timer C was reset by the 183");
    }
    assert_eq!(cancels(&h.advance(Duration::from_secs(1))), 1, "180 s after the 183");
    assert_eq!(cancels(&h.advance(Duration::from_secs(200))), 0, "one CANCEL");
}

#[test]
fn names_are_resolved_without_blocking() {
    let mut h = Harness::new();
    let inv = invite("carol", "dns1").replace("INVITE sip:carol@example.com", "INVITE sip:carol@example.net");
    let out = h.send(ALICE, &inv);
    let (token, request) = out
        .iter()
        .find_map(|o| match o {
            Output::Resolve { token, request } => Some((*token, request.clone())),
            _ => None,
        })
        .expect("a lookup");
    assert_eq!(request, ResolveRequest { host: "example.net".into(), port: None, transport: None, secure: false });
    let mut out = Vec::new();
    let target = Target { transport: Transport::Udp, addr: addr("198.51.100.7:5060") };
    h.engine.handle(h.now, Input::Resolved { token, result: Ok(vec![target]) }, &mut out);
    let fwd = sent(&out);
    assert_eq!((fwd[0].0.addr, fwd[0].1.method()), (target.addr, Some(Method::Invite)));
    assert_eq!(fwd[0].1.request_uri_bytes(), Some(&b"sip:carol@example.net"[..]));
}

#[test]
fn failed_lookups_give_500_upstream() {
    let mut h = Harness::new();
    let inv = invite("carol", "dns2").replace("INVITE sip:carol@example.com", "INVITE sip:carol@example.net");
    let out = h.send(ALICE, &inv);
    let token =
        out.iter().find_map(|o| if let Output::Resolve { token, .. } = o { Some(*token) } else { None }).unwrap();
    let mut out = Vec::new();
    h.engine.handle(h.now, Input::Resolved { token, result: Err(crate::io::ResolveError::NoSuchName) }, &mut out);
    // RFC 3263 §4.3 makes it a 503 for the branch, which §16.7 step 6 forwards as 500.
    assert_eq!(sent(&out).last().unwrap().1.status(), Some(500));
}

#[test]
fn cross_transport_calls_are_double_record_routed() {
    let mut h = Harness::new();
    // Bob registers over TCP: calls to him leave on TCP, over his connection.
    let bob_tcp = Peer { transport: Transport::Tcp, addr: addr(BOB), conn: Some(crate::ConnId(7)) };
    let reg = format!("REGISTER sip:example.com SIP/2.0\r\nVia: SIP/2.0/TCP {BOB};branch=z9hG4bKregtcp\r\nMax-Forwards: 70\r\nFrom: <sip:bob@example.com>;tag=r1\r\nTo: <sip:bob@example.com>\r\nCall-ID: regtcp\r\nCSeq: 1 REGISTER\r\nContact: <sip:bob@{BOB};transport=tcp>\r\nContent-Length: 0\r\n\r\n");
    let r = sent(&h.send_bytes(bob_tcp, Bytes::from(reg)));
    assert_eq!((r[0].0, r[0].1.status()), (bob_tcp, Some(200)));
    let out = sent(&h.send(ALICE, &invite("bob", "x1")));
    let (to, fwd) = out.iter().find(|(_, m)| m.is_request()).unwrap();
    assert_eq!(*to, bob_tcp, "the request reuses Bob's connection");
    assert_eq!(fwd.top_via().unwrap().transport, "TCP");
    let rr: Vec<String> = fwd.record_routes().map(|r| r.unwrap().uri.as_str().to_owned()).collect();
    assert_eq!(rr, [format!("sip:{PROXY};transport=tcp;lr"), format!("sip:{PROXY};lr")]);
    // Bob's connection is gone: the runtime reports it, and the branch falls back to his
    // contact URI (a new TCP connection to the address he registered).
    let mut out = Vec::new();
    h.engine.handle(h.now, Input::TransportError { to: bob_tcp }, &mut out);
    let retry = sent(&out);
    let (to, again) = retry.iter().find(|(_, m)| m.is_request()).expect("retried over the contact");
    assert_eq!((to.transport, to.addr, to.conn), (Transport::Tcp, addr(BOB), None));
    assert_ne!(again.top_via().unwrap().branch(), fwd.top_via().unwrap().branch(), "a new client transaction");
}

#[test]
fn natted_and_third_party_registrations() {
    let mut h = Harness::new();
    // A phone behind NAT: private contact, REGISTER from a public address → deliver to source.
    let reg = |contact: &str, call: &str| {
        format!("REGISTER sip:example.com SIP/2.0\nVia: SIP/2.0/UDP 10.1.1.5:5060;branch=z9hG4bK{call};rport\nMax-Forwards: 70\nFrom: <sip:carol@example.com>;tag=r1\nTo: <sip:carol@example.com>\nCall-ID: {call}\nCSeq: 1 REGISTER\nContact: <{contact}>\nContent-Length: 0\n\n")
    };
    h.send("203.0.113.9:40001", &reg("sip:carol@10.1.1.5:5060", "nat1"));
    let out = sent(&h.send(ALICE, &invite("carol", "n1")));
    let inv = out.iter().find(|(_, m)| m.is_request()).unwrap();
    assert_eq!(inv.0.addr, addr("203.0.113.9:40001"));
    assert_eq!(inv.1.request_uri_bytes(), Some(&b"sip:carol@10.1.1.5:5060"[..]));
    // A third-party registration of a public contact: deliver to the contact.
    let mut h = Harness::new();
    h.send("198.51.100.1:5060", &reg("sip:carol@198.51.100.2:5070", "tp1"));
    let out = sent(&h.send(ALICE, &invite("carol", "n2")));
    let inv = out.iter().find(|(_, m)| m.is_request()).unwrap();
    assert_eq!(inv.0.addr, addr("198.51.100.2:5070"));
}

#[test]
fn registrations_with_path_are_reached_through_the_edge_proxy() {
    let mut h = Harness::new();
    let edge = "198.51.100.50:5060";
    let reg = format!("REGISTER sip:example.com SIP/2.0\nVia: SIP/2.0/UDP {edge};branch=z9hG4bKedge1\nVia: SIP/2.0/UDP {BOB};branch=z9hG4bKpath1\nPath: <sip:{edge};lr>\nSupported: path\nMax-Forwards: 69\nFrom: <sip:bob@example.com>;tag=r1\nTo: <sip:bob@example.com>\nCall-ID: path1\nCSeq: 1 REGISTER\nContact: <sip:bob@{BOB}>\nContent-Length: 0\n\n");
    let r = sent(&h.send(edge, &reg));
    assert_eq!(r[0].1.status(), Some(200));
    let out = sent(&h.send(ALICE, &invite("bob", "p1")));
    let (to, fwd) = out.iter().find(|(_, m)| m.is_request()).unwrap();
    assert_eq!(to.addr, addr(edge), "RFC 3327 §5.3: via the Path, not straight to the contact");
    assert_eq!(fwd.request_uri_bytes(), Some(format!("sip:bob@{BOB}").as_bytes()));
    let routes: Vec<String> = fwd.routes().map(|r| r.unwrap().uri.as_str().to_owned()).collect();
    assert_eq!(routes, [format!("sip:{edge};lr")]);
}

#[test]
fn both_of_our_route_values_on_one_line_are_removed() {
    // A UA echoes a double Record-Route as one Route line; this once crashed the editor.
    let mut h = Harness::new();
    let ack = format!("ACK sip:bob@{BOB} SIP/2.0\nVia: SIP/2.0/UDP {ALICE};branch=z9hG4bK-ack2\nRoute: <sip:{PROXY};lr>, <sip:{PROXY};transport=tcp;lr>\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=a1\nTo: <sip:bob@example.com>;tag=b1\nCall-ID: rr2\nCSeq: 1 ACK\nContent-Length: 0\n\n");
    let out = sent(&h.send(ALICE, &ack));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0.addr, addr(BOB));
    assert_eq!(out[0].1.routes().count(), 0);
    assert!(out[0].1.get(herald_sip::HeaderName::Route).is_none());
}

#[test]
fn strict_routers_get_the_request_uri_rewritten() {
    // §16.6 step 6: the next hop p2 lacks `lr`.
    let mut h = Harness::new();
    let msg = format!("MESSAGE sip:bob@198.51.100.9 SIP/2.0\nVia: SIP/2.0/UDP {ALICE};branch=z9hG4bK-sr1\nRoute: <sip:198.51.100.20>, <sip:198.51.100.30;lr>\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=a1\nTo: <sip:bob@example.com>;tag=b1\nCall-ID: sr1\nCSeq: 1 MESSAGE\nContent-Length: 0\n\n");
    let out = sent(&h.send(ALICE, &msg));
    let (to, fwd) = out.iter().find(|(_, m)| m.is_request()).unwrap();
    assert_eq!(to.addr, addr("198.51.100.20:5060"));
    assert_eq!(fwd.request_uri_bytes(), Some(&b"sip:198.51.100.20"[..]));
    let routes: Vec<String> = fwd.routes().map(|r| r.unwrap().uri.as_str().to_owned()).collect();
    assert_eq!(routes, ["sip:198.51.100.30;lr", "sip:bob@198.51.100.9"]);
}

#[test]
fn stateless_mode_forwards_without_transactions() {
    let mut h = Harness::with(Forking::Parallel, true);
    h.register("bob", BOB, None);
    let out = sent(&h.send(ALICE, &invite("bob", "sl1")));
    assert_eq!(out.len(), 1, "no 100 Trying from a stateless proxy");
    assert_eq!(out[0].0.addr, addr(BOB));
    let fwd = out[0].1.clone();
    assert_eq!(h.engine.active_transactions(), 0);
    // The response goes back by the Via headers alone.
    let back = sent(&h.send(BOB, &answer(&fwd, 180, "Ringing", "b1")));
    assert_eq!((back[0].0.addr, back[0].1.status()), (addr(ALICE), Some(180)));
    // A retransmitted INVITE gets the same branch (§16.11).
    let again = sent(&h.send(ALICE, &invite("bob", "sl1")));
    assert_eq!(again[0].1.top_via().unwrap().branch(), fwd.top_via().unwrap().branch());
}

/// §16.11: a stateless proxy forwards a CANCEL, and the ACK for a non-2xx answer, with the branch
/// of their INVITE (the branch hashes "the CSeq number (but not method)"), also when the INVITE
/// carried credentials that a CANCEL never has (§22.1), so both reach the callee's INVITE
/// transaction.
#[test]
fn stateless_mode_gives_a_cancel_and_a_non_2xx_ack_their_invites_branch() {
    let mut h = Harness::with(Forking::Parallel, true);
    h.register("bob", BOB, None);
    let credentials = "Proxy-Authorization: Digest username=\"alice\", realm=\"example.com\", nonce=\"n\", uri=\"sip:bob@example.com\", response=\"00\"\nContact:";
    let inv = invite("bob", "slc1").replacen("Contact:", credentials, 1);
    let fwd = sent(&h.send(ALICE, &inv))[0].1.clone();
    let cancel = format!("CANCEL sip:bob@example.com SIP/2.0\nVia: SIP/2.0/UDP {ALICE};branch=z9hG4bK-slc1;rport\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=a1\nTo: <sip:bob@example.com>\nCall-ID: slc1\nCSeq: 1 CANCEL\nContent-Length: 0\n\n");
    let out = sent(&h.send(ALICE, &cancel));
    let (to, c) = out.iter().find(|(_, m)| m.method() == Some(Method::Cancel)).expect("CANCEL forwarded");
    assert_eq!(to.addr, addr(BOB));
    assert_eq!(c.top_via().unwrap().branch(), fwd.top_via().unwrap().branch());
    // The ACK for the 487 carries the answer's To tag, which the INVITE had not (§17.1.1.3): it
    // must reach the same transaction at Bob.
    let back = sent(&h.send(BOB, &answer(&fwd, 487, "Request Terminated", "b1")));
    assert_eq!((back[0].0.addr, back[0].1.status()), (addr(ALICE), Some(487)));
    let ack = cancel
        .replace("CANCEL sip", "ACK sip")
        .replace("1 CANCEL", "1 ACK")
        .replace("To: <sip:bob@example.com>", "To: <sip:bob@example.com>;tag=b1");
    let out = sent(&h.send(ALICE, &ack));
    let (to, a) = out.iter().find(|(_, m)| m.method() == Some(Method::Ack)).expect("ACK forwarded");
    assert_eq!(to.addr, addr(BOB));
    assert_eq!(a.top_via().unwrap().branch(), fwd.top_via().unwrap().branch());
    // Another request of the same call (a new CSeq number) leaves with another branch.
    let bye = cancel.replace("CANCEL sip", "BYE sip").replace("1 CANCEL", "2 BYE");
    let out = sent(&h.send(ALICE, &bye));
    let (_, b) = out.iter().find(|(_, m)| m.method() == Some(Method::Bye)).expect("BYE forwarded");
    assert_ne!(b.top_via().unwrap().branch(), fwd.top_via().unwrap().branch());
}

#[test]
fn shutdown_waits_only_for_unanswered_transactions() {
    let mut h = Harness::new();
    h.register("bob", BOB, None);
    // The REGISTER was answered: its transaction only absorbs retransmissions now.
    assert_eq!(h.engine.active_transactions(), 0);
    let fwd = sent(&h.send(ALICE, &invite("bob", "sd1")))[1].1.clone();
    assert_eq!(h.engine.active_transactions(), 2, "server and client INVITE transactions");
    h.send(BOB, &answer(&fwd, 486, "Busy Here", "b1"));
    assert_eq!(h.engine.active_transactions(), 0);
}

#[test]
fn stateless_responses_pass_through_a_wildcard_listener() {
    // Bound to 0.0.0.0 (the embedded default), herald writes its advertised address in the Via;
    // responses carrying that Via must still be recognised as ours and go on upstream.
    let mut cfg = config(Forking::Parallel, true);
    cfg.listeners = vec![Listener { transport: Transport::Udp, addr: addr("0.0.0.0:5060") }];
    let registrar = Registrar::new(RegistrarConfig::default());
    let store = Arc::new(registrar.new_store());
    let mut h = Harness { engine: Engine::new(Arc::new(cfg), store, registrar, 0), now: Instant::now() };
    h.register("bob", BOB, None);
    let out = sent(&h.send(ALICE, &invite("bob", "wild1")));
    let fwd = out[0].1.clone();
    assert_eq!(fwd.top_via().unwrap().host.to_string(), "192.0.2.10");
    let back = sent(&h.send(BOB, &answer(&fwd, 180, "Ringing", "b1")));
    assert_eq!((back[0].0.addr, back[0].1.status()), (addr(ALICE), Some(180)));
}

#[test]
fn retransmitted_invite_is_absorbed() {
    let mut h = Harness::new();
    h.register("bob", BOB, None);
    h.send(ALICE, &invite("bob", "rt1"));
    let again = sent(&h.send(ALICE, &invite("bob", "rt1")));
    // The server transaction resends its last provisional; nothing goes to Bob again.
    assert_eq!(again.len(), 1);
    assert_eq!((again[0].0.addr, again[0].1.status()), (addr(ALICE), Some(100)));
}

#[path = "tests_auth.rs"]
mod auth;

#[path = "tests_relay.rs"]
mod relay;

#[path = "tests_routing.rs"]
mod routing;

#[path = "tests_phones.rs"]
mod phones;

#[path = "tests_outbound.rs"]
mod outbound;

#[path = "tests_nat.rs"]
mod nat;

#[path = "tests_reload.rs"]
mod reload;

#[path = "tests_pings.rs"]
mod pings;

#[path = "tests_durable.rs"]
mod durable;

#[path = "tests_gateways.rs"]
mod gateways;

#[cfg(test)]
#[path = "tests_fuzz_findings.rs"]
mod fuzz_findings;

#[path = "tests_timer_c.rs"]
mod timer_c;

#[path = "tests_plan_set.rs"]
mod plan_set;

/// RFC 5630 §3.1.3 and RFC 3261 §16.6 step 4: a SIPS request goes only to bindings reached over
/// TLS (480 when there is none, never a UDP or TCP contact), and its Record-Route is SIPS.
#[test]
fn sips_requests_reach_only_tls_bindings_with_a_sips_record_route() {
    let mut cfg = config(Forking::Parallel, false);
    let tls_listener = addr("192.0.2.10:5061");
    cfg.listeners.push(Listener { transport: Transport::Tls, addr: tls_listener });
    let mut h = Harness::from_config(cfg);
    h.register("bob", BOB, None);
    let sips = |call: &str| invite("bob", call).replace("INVITE sip:bob@example.com", "INVITE sips:bob@example.com");
    let r = sent(&h.send(ALICE, &sips("s1")));
    assert_eq!(r.last().unwrap().1.status(), Some(480), "bob is reachable over UDP only");

    // A second phone of bob's registers over its TLS connection.
    let flow = Peer { transport: Transport::Tls, addr: addr(BOB2), conn: Some(crate::peer::ConnId(7)) };
    let reg = format!("REGISTER sips:example.com SIP/2.0\r\nVia: SIP/2.0/TLS {BOB2};branch=z9hG4bKtls1\r\nMax-Forwards: 70\r\nFrom: <sips:bob@example.com>;tag=r2\r\nTo: <sips:bob@example.com>\r\nCall-ID: reg-bob-tls\r\nCSeq: 1 REGISTER\r\nContact: <sips:bob@{BOB2}>\r\nExpires: 3600\r\nContent-Length: 0\r\n\r\n");
    assert_eq!(sent(&h.send_bytes(flow, Bytes::from(reg)))[0].1.status(), Some(200));
    let r = sent(&h.send(ALICE, &sips("s2")));
    let forwarded: Vec<_> = r.iter().filter(|(_, m)| m.is_request()).collect();
    assert_eq!(
        forwarded.len(),
        1,
        "only the TLS binding gets the request: {:?}",
        forwarded.iter().map(|f| f.0).collect::<Vec<_>>()
    );
    let (to, fwd) = forwarded[0];
    assert_eq!(*to, flow);
    let rr: Vec<_> = fwd.record_routes().map(|r| r.unwrap().uri.as_str().to_owned()).collect();
    assert_eq!(rr.first().map(String::as_str), Some("sips:192.0.2.10:5061;lr"), "{rr:?}");

    // A plain sip: request to the same AoR still forks to both phones.
    let r = sent(&h.send(ALICE, &invite("bob", "s3")));
    assert_eq!(r.iter().filter(|(_, m)| m.is_request()).count(), 2);
}

/// A context is compacted once its final response went upstream with no branch pending
/// (`Context::compact`); what it still owes - RFC 6026 §7.1: every 2xx, retransmitted or forked,
/// goes upstream for 64*T1 - must survive that.
#[test]
fn a_compacted_context_still_relays_2xx_retransmissions_and_late_forked_2xx() {
    let mut h = Harness::new();
    h.register("bob", BOB, Some("0.5"));
    h.register("bob", BOB2, Some("0.9"));
    let out = sent(&h.send(ALICE, &invite("bob", "compact1")));
    let to_bob2 = out.iter().find(|(p, m)| p.addr == addr(BOB2) && m.is_request()).unwrap().1.clone();
    let to_bob = out.iter().find(|(p, m)| p.addr == addr(BOB) && m.is_request()).unwrap().1.clone();
    h.send(BOB, &answer(&to_bob, 180, "Ringing", "x1"));
    let ok = sent(&h.send(BOB2, &answer(&to_bob2, 200, "OK", "x2")));
    assert!(ok.iter().any(|(_, m)| m.method() == Some(Method::Cancel)), "the ringing branch is cancelled");
    // Bob answers anyway (the CANCEL crossed his 200): the last branch is done, so the context
    // is compacted here - and this 2xx must still reach Alice.
    let late = sent(&h.send(BOB, &answer(&to_bob, 200, "OK", "x1")));
    assert!(late.iter().any(|(p, m)| p.addr == addr(ALICE) && m.status() == Some(200)), "{late:?}");
    assert!(h.engine.contexts.values().all(|c| c.request.is_none() && c.finals.is_empty()), "compacted");
    // Bob2 never got an ACK and retransmits its 200: relayed as well, seconds later.
    h.advance(Duration::from_secs(2));
    let again = sent(&h.send(BOB2, &answer(&to_bob2, 200, "OK", "x2")));
    assert!(again.iter().any(|(p, m)| p.addr == addr(ALICE) && m.status() == Some(200)), "{again:?}");
    // The client transactions let go of the forwarded INVITEs at their final responses.
    assert!(h.engine.clients.keys().all(|id| h.engine.txs.get(*id).is_none_or(|t| t.request().is_none())));
}

/// `held_bytes` (what `limits.max_held_bytes` bounds) counts the messages held while they are
/// held - the request in its context and in each branch's client transaction, collected
/// finals, responses kept for retransmission - and returns to zero when everything has ended,
/// whichever way a call went: answered, busy on one fork and answered on the other, unanswered.
#[test]
fn held_bytes_follow_the_messages_held_and_return_to_zero() {
    let mut h = Harness::new();
    h.register("bob", BOB, Some("0.5"));
    h.register("bob", BOB2, Some("0.9"));
    h.register("carol", BOB, None);
    let held = |h: &Harness| SipHandler::held_bytes(&h.engine);
    let base = held(&h);
    // A large INVITE forked to two phones: held three times (context, two client transactions).
    let pad = format!("X-Pad: {}\n", "p".repeat(5_000)).repeat(4);
    let big = invite("bob", "held1").replace("Contact:", &format!("{pad}Contact:"));
    let out = sent(&h.send(ALICE, &big));
    assert!(held(&h) >= base + 3 * 20_000, "{} after a 20 KB INVITE forked twice", held(&h));
    let to_bob = out.iter().find(|(p, m)| p.addr == addr(BOB) && m.is_request()).unwrap().1.clone();
    let to_bob2 = out.iter().find(|(p, m)| p.addr == addr(BOB2) && m.is_request()).unwrap().1.clone();
    // Bob is busy: his branch lets go of its request; his 486 is kept among the finals.
    h.send(BOB, &answer(&to_bob, 486, "Busy Here", "b1"));
    let after_busy = held(&h);
    assert!((base + 2 * 20_000..base + 3 * 20_000).contains(&after_busy), "{after_busy}");
    // Bob2 answers: the context is compacted, the transactions keep only small messages.
    h.send(BOB2, &answer(&to_bob2, 200, "OK", "b2"));
    assert!(held(&h) < base + 20_000, "{} once answered", held(&h));
    // An INVITE nobody answers is held until Timer B gives up (64*T1).
    h.send(ALICE, &invite("carol", "held2"));
    assert!(held(&h) > base + 1000);
    for _ in 0..40 {
        h.advance(Duration::from_secs(2));
    }
    assert_eq!(SipHandler::transactions(&h.engine), 0, "everything ended");
    assert_eq!(held(&h), 0, "nothing held once every transaction and context is gone");
}

#[path = "tests_expiry.rs"]
mod expiry;

#[test]
fn an_answered_call_leaves_no_timer_c_to_wake_for() {
    let mut h = Harness::new();
    h.register("bob", BOB, None);
    let out = h.send(ALICE, &invite("bob", "callc"));
    let fwd = sent(&out)[1].1.clone();
    h.send(BOB, &answer(&fwd, 200, "OK", "b1"));
    // The transactions linger to absorb retransmissions (64*T1 at most), then nothing is left:
    // in particular not the answered branch's Timer C, 180 s after the INVITE.
    let later = h.now + Duration::from_secs(64);
    h.engine.handle_timeouts(later, &mut Vec::new());
    let next = h.engine.poll_timeout().map(|at| at.duration_since(h.now));
    assert!(next.is_none_or(|d| d > Duration::from_secs(180)), "a wake-up {next:?} after the INVITE");
}

/// `take_earlier` over the sources in turn ends at the earliest deadline of them all, as the
/// minimum of the flattened list: every list of four from none and three instants (ties too).
#[test]
fn the_next_timeout_is_the_earliest_of_all_sources() {
    let t0 = std::time::Instant::now();
    let values = [None, Some(t0), Some(t0 + Duration::from_millis(1)), Some(t0 + Duration::from_secs(3))];
    for a in values {
        for b in values {
            for c in values {
                for d in values {
                    let mut next = a;
                    for at in [b, c, d] {
                        super::take_earlier(&mut next, at);
                    }
                    assert_eq!(next, [a, b, c, d].into_iter().flatten().min(), "{a:?} {b:?} {c:?} {d:?}");
                }
            }
        }
    }
}
