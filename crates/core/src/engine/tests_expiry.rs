//! Registrations expire at their time with no traffic: the engine that removes the store's
//! expired bindings (index 0) reports the store's next expiry as its deadline, and only it.

use super::*;
use std::sync::Mutex;

#[test]
fn a_binding_expires_at_its_time_with_no_traffic() {
    let mut h = Harness::new();
    assert_eq!(h.engine.poll_timeout(), None, "nothing registered, nothing running: no deadline");
    let t0 = h.now;
    let out = h.send(
        BOB,
        "REGISTER sip:example.com SIP/2.0\nVia: SIP/2.0/UDP 192.0.2.2:5062;branch=z9hG4bKexp1\nMax-Forwards: 70\nFrom: <sip:bob@example.com>;tag=r1\nTo: <sip:bob@example.com>\nCall-ID: exp-1\nCSeq: 1 REGISTER\nContact: <sip:bob@192.0.2.2:5062>\nExpires: 60\nContent-Length: 0\n\n",
    );
    assert_eq!(sent(&out)[0].1.status(), Some(200));
    // Until the REGISTER's transaction ends (Timer J) its deadline comes first; then the
    // binding's expiry is the only one left.
    while h.engine.poll_timeout().is_some_and(|at| at < t0 + Duration::from_secs(60)) {
        let at = h.engine.poll_timeout().unwrap();
        h.now = at;
        let mut out = Vec::new();
        h.engine.handle_timeouts(at, &mut out);
    }
    assert_eq!(h.engine.poll_timeout(), Some(t0 + Duration::from_secs(60)));
    assert_eq!(h.engine.store.len(), 1);
    h.now = t0 + Duration::from_secs(60);
    let mut out = Vec::new();
    h.engine.handle_timeouts(h.now, &mut out);
    assert_eq!(h.engine.store.len(), 0, "removed at its expiry, with no message in between");
    assert_eq!(h.engine.poll_timeout(), None, "and nothing more to wake for");
}

#[test]
fn only_the_first_engine_expires_the_store_and_it_is_told_of_earlier_expiries() {
    let registrar = Registrar::new(RegistrarConfig::default());
    let store = Arc::new(registrar.new_store());
    let cfg = Arc::new(config(Forking::Parallel, false));
    let mut first = Engine::new(cfg.clone(), store.clone(), registrar.clone(), 0);
    let mut other = Harness { engine: Engine::new(cfg, store.clone(), registrar, 1), now: Instant::now() };
    let woken = Arc::new(Mutex::new(Vec::new()));
    let log = woken.clone();
    first.set_timeout_waker(Box::new(move |at| log.lock().unwrap().push(at)));
    let log = woken.clone();
    other.engine.set_timeout_waker(Box::new(move |at| log.lock().unwrap().push(at)));
    let t0 = other.now;
    // A registration through the other engine: its own deadline is its transaction's only,
    // while the first is woken for the binding's expiry.
    other.register("bob", BOB, None);
    let expiry = t0 + Duration::from_secs(3600);
    assert_eq!(*woken.lock().unwrap(), [expiry]);
    assert!(other.engine.poll_timeout().is_some_and(|at| at < expiry));
    other.now = expiry;
    let mut out = Vec::new();
    other.engine.handle_timeouts(expiry, &mut out);
    assert_eq!((store.len(), other.engine.poll_timeout()), (1, None), "the other engine leaves the store alone");
    assert_eq!(first.poll_timeout(), Some(expiry));
    first.handle_timeouts(expiry, &mut out);
    assert_eq!((store.len(), first.poll_timeout()), (0, None));
}
