//! WebSocket phones (RFC 7118) and Outbound flows (RFC 5626) through herald on the simulator:
//! a phone with a `.invalid` Contact is reached over the connection it registered on, called
//! from a UDP phone and calling back (two Record-Route values, one per transport, RFC 5658);
//! a flow that died fails over to another flow of the same instance; a forged flow token makes
//! herald send nowhere.

mod common;

use common::{config, ms, register, ua, HERALD};
use herald_core::proxy::flow_token::FlowTokens;
use herald_core::{Peer, Seed, Transport};
use herald_sim::{Datagram, HeraldConfig, Sim};
use std::net::SocketAddr;
use std::time::Duration;

/// The Record-Route URIs of the first `method` request `id` received.
fn record_routes(sim: &Sim, id: herald_sim::UaId, method: &str) -> Vec<String> {
    let reqs = sim.ua(id).requests(method);
    reqs[0].msg.record_routes().map(|r| r.unwrap().uri.as_str().to_owned()).collect()
}

#[test]
fn a_websocket_phone_is_called_from_udp_over_its_connection_and_calls_back() {
    let mut sim = Sim::new(config(21));
    let alice = ua(&mut sim, "alice", "alice", "192.0.2.1:5061");
    let bob = ua(&mut sim, "bob", "bob", "198.51.100.20:40001");
    let flow = sim.connect(bob, Transport::Ws);
    sim.ua_mut(bob).set_answer(herald_sim::Answer::pick_up(ms(300)));
    sim.ua_mut(alice).set_answer(herald_sim::Answer::pick_up(ms(300)));
    assert_eq!(register(&mut sim, alice), 200);
    assert_eq!(register(&mut sim, bob), 200);
    let aor = herald_core::registrar::Aor::parse("sip:bob@example.com").unwrap();
    let b = &sim.herald.store.lookup(&aor, sim.now)[0];
    assert_eq!((&*b.contact, b.source), ("sip:bob@bob.invalid;transport=ws", flow));

    // alice (UDP) calls bob: the INVITE reaches bob over his WebSocket flow.
    let call = sim.act(alice, |ua, now| ua.invite(now, "bob"));
    assert!(sim.run_until(Duration::from_secs(5), |s| s.ua(bob).acked(&call)), "bob's 200 never acknowledged");
    assert_eq!(sim.ua(alice).outcome(&call, "INVITE").unwrap().status, 200);
    let invite = &sim.ua(bob).requests("INVITE")[0];
    assert_eq!(invite.msg.request_uri_bytes(), Some(&b"sip:bob@bob.invalid;transport=ws"[..]));
    // RFC 5658 §3: two values, the top facing bob (ws, with the flow token that brings the
    // dialog's requests back to his connection), the second facing alice (UDP).
    let rr = record_routes(&sim, bob, "INVITE");
    assert_eq!(rr.len(), 2, "{rr:?}");
    assert!(rr[0].starts_with("sip:192.0.2.10:5060;transport=ws;lr;") && rr[0].contains(";ft="), "{rr:?}");
    assert!(rr[1].starts_with("sip:192.0.2.10:5060;lr") && !rr[1].contains("transport=") && !rr[1].contains("ft="));
    // The ACK and the BYE, addressed to bob's `.invalid` Contact, follow the flow token.
    sim.act(alice, |ua, now| ((), ua.bye(now, &call)));
    assert!(sim.run_until(Duration::from_secs(5), |s| s.ua(alice).outcome(&call, "BYE").is_some()));
    assert_eq!(sim.ua(alice).outcome(&call, "BYE").unwrap().status, 200);
    assert_eq!(sim.ua(bob).requests("ACK").len(), 1);
    assert_eq!(sim.ua(bob).requests("BYE").len(), 1);

    // bob calls back: the top value faces alice (UDP), the second bob (ws, his flow's token).
    let back = sim.act(bob, |ua, now| ua.invite(now, "alice"));
    assert!(sim.run_until(Duration::from_secs(5), |s| s.ua(alice).acked(&back)), "alice's 200 never acknowledged");
    assert_eq!(sim.ua(bob).outcome(&back, "INVITE").unwrap().status, 200);
    let rr = record_routes(&sim, alice, "INVITE");
    assert_eq!(rr.len(), 2, "{rr:?}");
    assert!(rr[0].starts_with("sip:192.0.2.10:5060;lr") && !rr[0].contains("ft="), "{rr:?}");
    assert!(rr[1].starts_with("sip:192.0.2.10:5060;transport=ws;lr;") && rr[1].contains(";ft="), "{rr:?}");
    // bob hangs up: his ACK and BYE carry his own flow's token first, which herald skips (they
    // came on that flow, RFC 5626 §5.3), and go to alice's Contact over UDP.
    sim.act(bob, |ua, now| ((), ua.bye(now, &back)));
    assert!(sim.run_until(Duration::from_secs(5), |s| s.ua(bob).outcome(&back, "BYE").is_some()));
    assert_eq!(sim.ua(bob).outcome(&back, "BYE").unwrap().status, 200);
    assert_eq!(sim.ua(alice).requests("ACK").len(), 1);
    assert_eq!(sim.ua(alice).requests("BYE").len(), 1);
    assert_eq!(sim.ua(alice).requests("BYE")[0].from, sim.herald.addr);
}

#[test]
fn a_websocket_phone_whose_connection_died_is_temporarily_unavailable() {
    let mut sim = Sim::new(config(22));
    let alice = ua(&mut sim, "alice", "alice", "192.0.2.1:5061");
    let bob = ua(&mut sim, "bob", "bob", "198.51.100.20:40001");
    sim.connect(bob, Transport::Ws);
    assert_eq!(register(&mut sim, alice), 200);
    assert_eq!(register(&mut sim, bob), 200);
    sim.disconnect(bob);
    let call = sim.act(alice, |ua, now| ua.invite(now, "bob"));
    assert!(sim
        .run_until(Duration::from_secs(5), |s| s.ua(alice).outcome(&call, "INVITE").is_some_and(|o| o.status != 407)));
    // No fallback to `bob.invalid` (it would have been a DNS failure, 503, forwarded as 500):
    // 480, the phone is registered but its connection is gone (RFC 5626 §5.3, RFC 3261 §21.4.18).
    assert_eq!(sim.ua(alice).outcome(&call, "INVITE").unwrap().status, 480);
    assert!(sim.ua(bob).requests("INVITE").is_empty());
}

#[test]
fn an_outbound_instance_gets_one_invite_over_its_newest_live_flow() {
    let mut sim = Sim::new(config(23));
    let alice = ua(&mut sim, "alice", "alice", "192.0.2.1:5061");
    // Two flows of one instance (two connections of one phone, each with its reg-id).
    let second = ua(&mut sim, "bob2", "bob", "198.51.100.20:40002");
    let first = ua(&mut sim, "bob1", "bob", "198.51.100.20:40001");
    let instance = "urn:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6";
    sim.ua_mut(second).set_outbound(instance, 2);
    sim.ua_mut(first).set_outbound(instance, 1);
    sim.connect(second, Transport::Ws);
    sim.connect(first, Transport::Ws);
    assert_eq!(register(&mut sim, alice), 200);
    assert_eq!(register(&mut sim, second), 200);
    assert_eq!(register(&mut sim, first), 200);
    // RFC 5626 §6: Outbound applied, and the 200 says so.
    let ok = sim.ua(first).received().iter().rev().find(|r| r.msg.status() == Some(200)).unwrap().msg.clone();
    assert_eq!(ok.get(herald_sip::HeaderName::Require), Some(&b"outbound"[..]));
    assert_eq!(ok.contacts().count(), 2, "both flows are bound");

    // §5.3: one INVITE per instance, over the most recently registered flow.
    let call = sim.act(alice, |ua, now| ua.invite(now, "bob"));
    assert!(sim.run_until(Duration::from_secs(5), |s| s.ua(first).acked(&call)));
    assert_eq!(sim.ua(alice).outcome(&call, "INVITE").unwrap().status, 200);
    assert!(sim.ua(second).requests("INVITE").is_empty(), "one flow per instance");

    // The first flow's connection dies: the next call goes over the second (§5.3, §9).
    sim.disconnect(first);
    let call = sim.act(alice, |ua, now| ua.invite(now, "bob"));
    assert!(sim.run_until(Duration::from_secs(5), |s| s.ua(second).acked(&call)), "the second flow never got it");
    assert_eq!(sim.ua(alice).outcome(&call, "INVITE").unwrap().status, 200);
    assert_eq!(sim.ua(first).requests("INVITE").len(), 1, "nothing more reached the dead flow");
    assert_eq!(sim.ua(second).requests("INVITE").len(), 1);
}

/// An INVITE from an unauthenticated UDP sender with a Route of herald's carrying `token`.
fn forged_invite(token: &str, victim: SocketAddr) -> bytes::Bytes {
    format!(
        "INVITE sip:bob@{victim} SIP/2.0\r\nVia: SIP/2.0/UDP 203.0.113.66:5060;branch=z9hG4bKforged1;rport\r\n\
         Route: <sip:{HERALD};lr;ft={token}>\r\nMax-Forwards: 70\r\nFrom: <sip:mallory@evil.example>;tag=m1\r\n\
         To: <sip:bob@example.com>\r\nCall-ID: forged-1\r\nCSeq: 1 INVITE\r\nContact: <sip:mallory@203.0.113.66>\r\n\
         Content-Length: 0\r\n\r\n"
    )
    .into()
}

#[test]
fn a_forged_flow_token_makes_herald_send_nowhere() {
    let attacker: SocketAddr = "203.0.113.66:5060".parse().unwrap();
    let victim: SocketAddr = "192.0.2.2:5062".parse().unwrap();
    // A token of another key (another process, or a guess) naming the victim, and garbage.
    let other = FlowTokens::new(Seed::fixed(999)).mint(Peer::udp(victim));
    for (with_auth, token, answer) in
        [(false, other.clone(), 403), (false, "00".repeat(40), 403), (true, other, 407), (true, "zz".into(), 407)]
    {
        let cfg = if with_auth { config(24) } else { HeraldConfig::new(HERALD.parse().unwrap(), "example.com", 24) };
        let mut sim = Sim::new(cfg);
        let bob = ua(&mut sim, "bob", "bob", &victim.to_string());
        assert_eq!(register(&mut sim, bob), 200);
        let before = sim.net.log().len();
        let now = sim.now;
        sim.net.send(now, Datagram { from: attacker, to: sim.herald.addr, bytes: forged_invite(&token, victim) });
        sim.run_for(Duration::from_secs(40));
        let sent: Vec<_> = sim.net.log()[before..]
            .iter()
            .filter(|s| s.datagram.from == sim.herald.addr)
            .map(|s| &s.datagram)
            .collect();
        assert!(!sent.is_empty());
        assert!(sent.iter().all(|d| d.to == attacker), "herald sent elsewhere: {:?}", sent.iter().map(|d| d.to));
        assert!(sent.iter().any(|d| d.first_line().starts_with(&format!("SIP/2.0 {answer}"))), "auth {with_auth}");
        assert!(sim.ua(bob).requests("INVITE").is_empty());
    }
}
