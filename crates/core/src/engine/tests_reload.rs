//! A reloaded configuration reaches a serving engine at its next call, and what the engine
//! holds (transactions, their contexts) is kept.

use super::*;

const OTHER: &str = "other.example";

fn register_in(domain: &str, call: &str) -> String {
    format!("REGISTER sip:{domain} SIP/2.0\nVia: SIP/2.0/UDP {ALICE};branch=z9hG4bK-{call}\nMax-Forwards: 70\nFrom: <sip:alice@{domain}>;tag=r1\nTo: <sip:alice@{domain}>\nCall-ID: {call}\nCSeq: 1 REGISTER\nContact: <sip:alice@{ALICE}>\nExpires: 600\nContent-Length: 0\n\n")
}

#[test]
fn a_published_configuration_applies_from_the_next_call_and_keeps_transactions() {
    let initial = Arc::new(config(Forking::Parallel, false));
    let updates = Arc::new(ConfigUpdates::new(initial.clone()));
    let mut h = Harness::from_config((*initial).clone());
    h.engine = Engine::new(initial.clone(), h.engine.store.clone(), h.engine.registrar.clone(), 0)
        .with_config_updates(updates.clone());
    h.register("bob", BOB, None);
    // A call in progress under the old configuration.
    let forwarded = sent(&h.send(ALICE, &invite("bob", "reload-1")));
    assert!(forwarded.iter().any(|(to, m)| to.addr == addr(BOB) && m.is_request()));
    let held = h.engine.transactions();

    // other.example is not served: its REGISTER is proxied towards that domain, not answered.
    let before = h.send(ALICE, &register_in(OTHER, "reg-other-1"));
    assert!(sent(&before).iter().all(|(_, m)| m.status() != Some(200)), "{before:?}");

    let mut cfg = (*initial).clone();
    cfg.identity = Identity::new(vec![addr(PROXY)], ["example.com".to_owned(), OTHER.to_owned()]);
    updates.publish(Arc::new(cfg));
    assert_eq!(updates.generation(), 1);

    let after = sent(&h.send(ALICE, &register_in(OTHER, "reg-other-2")));
    assert_eq!(after.iter().find_map(|(_, m)| m.status()), Some(200), "served after the reload");
    assert!(h.engine.transactions() > held, "the call's transactions are still held, the new one added");
    // The call in progress completes: Bob's 200 is relayed to Alice.
    let invite_to_bob = forwarded.iter().find(|(to, m)| to.addr == addr(BOB) && m.is_request()).unwrap().1.clone();
    let ok = herald_sip::ResponseBuilder::new(&invite_to_bob, 200, "OK").to_tag("b1").build();
    let relayed = sent(&h.send_bytes(Peer::udp(addr(BOB)), ok.freeze()));
    assert!(relayed.iter().any(|(to, m)| to.addr == addr(ALICE) && m.status() == Some(200)), "{relayed:?}");
}

#[test]
fn without_updates_the_engine_keeps_its_configuration() {
    let initial = Arc::new(config(Forking::Parallel, false));
    let updates = ConfigUpdates::new(initial.clone());
    let mut cfg = (*initial).clone();
    cfg.identity = Identity::new(vec![addr(PROXY)], [OTHER.to_owned()]);
    updates.publish(Arc::new(cfg));
    // An engine built without with_config_updates never looks.
    let mut h = Harness::from_config((*initial).clone());
    let out = sent(&h.send(ALICE, &register_in(OTHER, "reg-other-3")));
    assert!(out.iter().all(|(_, m)| m.status() != Some(200)), "{out:?}");
    assert_eq!(updates.latest().identity.domains, vec![OTHER.to_owned()]);
}
