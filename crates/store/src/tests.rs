//! Unit tests of the location store: ordering rules, limits, expiry.

use crate::*;
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

type Store = LocationStore<u8>;

fn aor(s: &str) -> Aor {
    Aor::parse(s).unwrap()
}

fn update<'a>(call_id: &'a str, cseq: u32, contacts: &'a [ContactUpdate<'a>]) -> Update<'a, u8> {
    Update { call_id, cseq, path: None, source: 0, contacts }
}

fn uris(bindings: &[Binding<u8>]) -> Vec<&str> {
    bindings.iter().map(|b| &*b.contact).collect()
}

fn secs(t0: Instant, s: u64) -> Instant {
    t0 + Duration::from_secs(s)
}

#[test]
fn add_refresh_remove() {
    let (store, t0, a) = (Store::new(), Instant::now(), aor("sip:alice@example.com"));
    let c = [ContactUpdate::new("sip:alice@192.0.2.1", 3600)];
    let got = store.apply(&a, t0, &update("c1", 1, &c)).unwrap().bindings;
    assert_eq!(uris(&got), ["sip:alice@192.0.2.1"]);
    assert_eq!((got[0].cseq, &*got[0].call_id), (1, "c1"));
    assert_eq!(store.expires_in(&got[0], t0), 3600);
    assert_eq!((store.len(), store.aor_count()), (1, 1));

    // Refresh: an equivalent URI (host case differs) updates the same binding.
    let c = [ContactUpdate { q: Some(500), ..ContactUpdate::new("sip:alice@192.0.2.1", 60) }];
    let got = store.apply(&a, secs(t0, 10), &update("c1", 2, &c)).unwrap().bindings;
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].cseq, got[0].q), (2, Some(500)));
    assert_eq!(store.expires_in(&got[0], secs(t0, 10)), 60);

    // Remove with expires 0.
    let c = [ContactUpdate::new("sip:alice@192.0.2.1", 0)];
    assert!(store.apply(&a, secs(t0, 11), &update("c1", 3, &c)).unwrap().bindings.is_empty());
    assert!(store.lookup(&a, secs(t0, 11)).is_empty());
    assert_eq!((store.len(), store.aor_count()), (0, 0));
}

#[test]
fn uri_equivalence_and_case() {
    let (store, t0, a) = (Store::new(), Instant::now(), aor("sip:alice@example.com"));
    store.apply(&a, t0, &update("c", 1, &[ContactUpdate::new("sip:alice@PC.example.com;transport=tcp", 60)])).unwrap();
    let got = store
        .apply(&a, t0, &update("c", 2, &[ContactUpdate::new("sip:alice@pc.example.com;Transport=TCP", 90)]))
        .unwrap()
        .bindings;
    // One binding, its text now the latest one sent.
    assert_eq!(uris(&got), ["sip:alice@pc.example.com;Transport=TCP"]);
    // A different transport is a different contact (RFC 3261 §19.1.4).
    let got =
        store.apply(&a, t0, &update("c", 3, &[ContactUpdate::new("sip:alice@pc.example.com", 90)])).unwrap().bindings;
    assert_eq!(got.len(), 2);
    // sips and sip AoRs are one key.
    assert_eq!(store.lookup(&aor("sips:alice@EXAMPLE.com"), t0).len(), 2);
}

#[test]
fn cseq_ordering_rules() {
    let (store, t0, a) = (Store::new(), Instant::now(), aor("sip:bob@example.com"));
    let c = [ContactUpdate::new("sip:bob@192.0.2.2", 3600)];
    store.apply(&a, t0, &update("call-1", 10, &c)).unwrap();
    // Replay (same CSeq) and out of order (lower CSeq) with the same Call-ID fail...
    for cseq in [10, 9] {
        let err = store.apply(&a, t0, &update("call-1", cseq, &c)).unwrap_err();
        assert_eq!(
            err,
            StoreError::OutOfOrder { contact: "sip:bob@192.0.2.2".into(), stored_cseq: 10, request_cseq: cseq }
        );
    }
    // ... and fail as a whole: the new contact listed first was not added either.
    let two = [ContactUpdate::new("sip:bob@192.0.2.3", 3600), c[0]];
    assert!(store.apply(&a, t0, &update("call-1", 5, &two)).is_err());
    assert_eq!(uris(&store.lookup(&a, t0)), ["sip:bob@192.0.2.2"]);
    // A different Call-ID (the UA rebooted) may use any CSeq.
    let got = store.apply(&a, t0, &update("call-2", 1, &c)).unwrap().bindings;
    assert_eq!((&*got[0].call_id, got[0].cseq), ("call-2", 1));
    // Higher CSeq with the same Call-ID is fine.
    assert!(store.apply(&a, t0, &update("call-2", 2, &c)).is_ok());
    // A contact that is not bound yet is not subject to the check.
    let other = [ContactUpdate::new("sip:bob@192.0.2.9", 3600)];
    assert!(store.apply(&a, t0, &update("call-2", 1, &other)).is_ok());
}

#[test]
fn remove_all_follows_step_6() {
    let (store, t0, a) = (Store::new(), Instant::now(), aor("sip:carol@example.com"));
    let cs = [ContactUpdate::new("sip:carol@192.0.2.1", 3600), ContactUpdate::new("sip:carol@192.0.2.2", 3600)];
    store.apply(&a, t0, &update("x", 5, &cs)).unwrap();
    assert!(store.remove_all(&a, "x", 5, t0).is_err());
    assert!(store.remove_all(&a, "x", 4, t0).is_err());
    assert_eq!(store.lookup(&a, t0).len(), 2);
    assert_eq!(store.remove_all(&a, "x", 6, t0).map(|r| r.count), Ok(2));
    assert_eq!(store.len(), 0);
    store.apply(&a, t0, &update("x", 7, &cs[..1])).unwrap();
    assert_eq!(store.remove_all(&a, "other-call", 1, t0).map(|r| r.count), Ok(1));
    assert_eq!(store.remove_all(&aor("sip:nobody@example.com"), "x", 1, t0).map(|r| r.count), Ok(0));
}

#[test]
fn q_then_recency_order() {
    let (store, t0, a) = (Store::new(), Instant::now(), aor("sip:dave@example.com"));
    let q = |uri, q| ContactUpdate { q, ..ContactUpdate::new(uri, 3600) };
    store.apply(&a, t0, &update("c", 1, &[q("sip:low@h", Some(100)), q("sip:none@h", None)])).unwrap();
    store.apply(&a, secs(t0, 1), &update("c", 2, &[q("sip:half@h", Some(500)), q("sip:one@h", Some(1000))])).unwrap();
    // q=1.0 and no q rank equal; the more recent comes first.
    assert_eq!(uris(&store.lookup(&a, secs(t0, 1))), ["sip:one@h", "sip:none@h", "sip:half@h", "sip:low@h"]);
    // Refreshing "none" makes it the most recent.
    let got = store.apply(&a, secs(t0, 2), &update("c", 3, &[q("sip:none@h", None)])).unwrap().bindings;
    assert_eq!(uris(&got), ["sip:none@h", "sip:one@h", "sip:half@h", "sip:low@h"]);
}

#[test]
fn max_bindings() {
    let store = Store::with_config(StoreConfig { max_bindings_per_aor: 2, shards: 4 });
    assert_eq!((store.max_bindings_per_aor(), store.shard_count()), (2, 4));
    let (t0, a) = (Instant::now(), aor("sip:erin@example.com"));
    let c = |u| ContactUpdate::new(u, 100);
    store.apply(&a, t0, &update("c", 1, &[c("sip:1@h"), c("sip:2@h")])).unwrap();
    let err = store.apply(&a, secs(t0, 30), &update("c", 2, &[c("sip:3@h")])).unwrap_err();
    assert_eq!(err, StoreError::TooManyBindings { max: 2, retry_after: 70 });
    // Replacing one binding in the same request keeps the count.
    let swap = [ContactUpdate::new("sip:1@h", 0), c("sip:3@h")];
    assert_eq!(store.apply(&a, t0, &update("c", 3, &swap)).unwrap().bindings.len(), 2);
    // Refreshing is always possible; so is adding once a binding has expired.
    assert!(store.apply(&a, t0, &update("c", 4, &[c("sip:2@h")])).is_ok());
    let later = [ContactUpdate::new("sip:2@h", 500)];
    store.apply(&a, t0, &update("c", 5, &later)).unwrap();
    assert_eq!(store.apply(&a, secs(t0, 101), &update("c", 6, &[c("sip:4@h")])).unwrap().bindings.len(), 2);
    // Far too many contacts in one request are refused before any matching work.
    let many: Vec<ContactUpdate> = (0..5).map(|_| c("sip:x@h")).collect();
    assert!(matches!(store.apply(&a, t0, &update("c", 9, &many)), Err(StoreError::TooManyBindings { .. })));
}

#[test]
fn duplicate_contacts_in_one_request_last_wins() {
    let (store, t0, a) = (Store::new(), Instant::now(), aor("sip:frank@example.com"));
    let cs = [ContactUpdate::new("sip:f@h", 100), ContactUpdate::new("sip:f@H", 200)];
    let got = store.apply(&a, t0, &update("c", 1, &cs)).unwrap().bindings;
    assert_eq!(uris(&got), ["sip:f@H"]);
    assert_eq!(store.expires_in(&got[0], t0), 200);
    // Add then remove in one request: removed.
    let cs = [ContactUpdate::new("sip:g@h", 100), ContactUpdate::new("sip:g@h", 0)];
    assert_eq!(store.apply(&a, t0, &update("c", 2, &cs)).unwrap().bindings.len(), 1);
}

#[test]
fn outbound_instance_and_reg_id_identify_a_flow() {
    let (store, t0, a) = (Store::new(), Instant::now(), aor("sip:gina@example.com"));
    let inst = Some("<urn:uuid:00000000-0000-1000-8000-000A95A0E128>");
    let flow =
        |uri, reg| ContactUpdate { instance: inst, reg_id: NonZeroU32::new(reg), ..ContactUpdate::new(uri, 3600) };
    store.apply(&a, t0, &update("c", 1, &[flow("sip:gina@192.0.2.1:5060", 1)])).unwrap();
    // Same instance and reg-id from a new address (NAT rebinding): replaces the binding.
    let got = store.apply(&a, t0, &update("c", 2, &[flow("sip:gina@192.0.2.1:6000", 1)])).unwrap().bindings;
    assert_eq!(uris(&got), ["sip:gina@192.0.2.1:6000"]);
    assert_eq!(got[0].instance.as_deref(), inst);
    // A second flow (reg-id 2) is another binding.
    assert_eq!(store.apply(&a, t0, &update("c", 3, &[flow("sip:gina@192.0.2.1:7000", 2)])).unwrap().bindings.len(), 2);
}

#[test]
fn path_and_source_are_stored() {
    let (store, t0, a) = (LocationStore::<(u8, u16)>::new(), Instant::now(), aor("sip:hal@example.com"));
    let c = [ContactUpdate::new("sip:hal@10.0.0.1", 60)];
    let u = Update { call_id: "c", cseq: 1, path: Some("<sip:edge.example.com;lr>"), source: (1, 5060), contacts: &c };
    let got = store.apply(&a, t0, &u).unwrap().bindings;
    assert_eq!(got[0].path.as_deref(), Some("<sip:edge.example.com;lr>"));
    assert_eq!(got[0].source, (1, 5060));
    let u = Update { cseq: 2, path: None, source: (2, 6000), ..u };
    let got = store.apply(&a, t0, &u).unwrap().bindings;
    assert_eq!((got[0].path.as_deref(), got[0].source), (None, (2, 6000)));
}

#[test]
fn lookups_ignore_expired_bindings() {
    let (store, t0, a) = (Store::new(), Instant::now(), aor("sip:ivy@example.com"));
    let cs = [ContactUpdate::new("sip:short@h", 10), ContactUpdate::new("sip:long@h", 100)];
    store.apply(&a, t0, &update("c", 1, &cs)).unwrap();
    assert_eq!(store.lookup(&a, secs(t0, 9)).len(), 2);
    assert_eq!(uris(&store.lookup(&a, secs(t0, 10))), ["sip:long@h"]);
    assert!(store.lookup(&a, secs(t0, 100)).is_empty());
    // Not removed yet: only expire() does that.
    assert_eq!(store.len(), 2);
    // An expired binding no longer takes part in the CSeq check.
    assert!(store.apply(&a, secs(t0, 100), &update("c", 1, &cs[..1])).is_ok());
    assert_eq!(store.len(), 1);
}

#[test]
fn expiry_respects_the_budget() {
    let store = Store::with_config(StoreConfig { shards: 8, ..StoreConfig::default() });
    let t0 = Instant::now();
    for i in 0..100 {
        let c = [ContactUpdate::new("sip:x@192.0.2.1", 10 + (i % 2) * 1000)];
        store.apply(&aor(&format!("sip:u{i}@example.com")), t0, &update("c", 1, &c)).unwrap();
    }
    assert_eq!(store.len(), 100);
    // Nothing due yet.
    assert_eq!(store.expire(secs(t0, 9), 1000), 0);
    // 50 bindings are due at t0+10: removed at most 7 per call.
    let mut calls = 0;
    let mut total = 0;
    loop {
        let n = store.expire(secs(t0, 10), 7);
        assert!(n <= 7);
        if n == 0 {
            break;
        }
        total += n;
        calls += 1;
    }
    assert_eq!((total, calls), (50, 8));
    assert_eq!((store.len(), store.aor_count()), (50, 50));
    assert_eq!(store.expire(secs(t0, 2000), usize::MAX), 50);
    assert!(store.is_empty());
}

#[test]
fn expiry_budget_applies_inside_one_aor_and_after_refresh() {
    let store = Store::new();
    let (t0, a) = (Instant::now(), aor("sip:jo@example.com"));
    let cs: Vec<ContactUpdate> = ["sip:1@h", "sip:2@h", "sip:3@h"].iter().map(|u| ContactUpdate::new(u, 10)).collect();
    store.apply(&a, t0, &update("c", 1, &cs)).unwrap();
    assert_eq!(store.expire(secs(t0, 10), 2), 2);
    assert_eq!(store.len(), 1);
    assert_eq!(store.expire(secs(t0, 10), 2), 1);
    assert_eq!(store.aor_count(), 0);

    // A refresh that extends the lifetime: the old heap entry fires early and reschedules.
    store.apply(&a, t0, &update("c", 2, &cs[..1])).unwrap();
    store.apply(&a, secs(t0, 5), &update("c", 3, &[ContactUpdate::new("sip:1@h", 100)])).unwrap();
    assert_eq!(store.expire(secs(t0, 50), 10), 0);
    assert_eq!(store.lookup(&a, secs(t0, 50)).len(), 1);
    assert_eq!(store.expire(secs(t0, 105), 10), 1);
    // A refresh that shortens it is honoured too.
    store.apply(&a, secs(t0, 200), &update("c", 4, &[ContactUpdate::new("sip:1@h", 1000)])).unwrap();
    store.apply(&a, secs(t0, 201), &update("c", 5, &[ContactUpdate::new("sip:1@h", 60)])).unwrap();
    assert_eq!(store.expire(secs(t0, 261), 10), 1);
    assert!(store.is_empty());
}

#[test]
fn removed_aors_leave_only_stale_heap_entries() {
    let store = Store::with_config(StoreConfig { shards: 1, ..StoreConfig::default() });
    let t0 = Instant::now();
    for i in 0..20 {
        let a = aor(&format!("sip:k{i}@example.com"));
        store.apply(&a, t0, &update("c", 1, &[ContactUpdate::new("sip:k@h", 10)])).unwrap();
        store.apply(&a, t0, &update("c", 2, &[ContactUpdate::new("sip:k@h", 0)])).unwrap();
    }
    assert!(store.is_empty());
    // 20 stale entries: popped with bounded work per call, nothing removed.
    assert_eq!(store.expire(secs(t0, 10), 5), 0);
    assert_eq!(store.expire(secs(t0, 10), 100), 0);
}

#[test]
fn times_before_the_epoch_count_as_zero() {
    let (store, t0, a) = (Store::new(), Instant::now(), aor("sip:lee@example.com"));
    store.apply(&a, secs(t0, 5), &update("c", 1, &[ContactUpdate::new("sip:l@h", 10)])).unwrap();
    assert_eq!(store.lookup(&a, t0).len(), 1);
    let b = &store.lookup(&a, t0)[0];
    assert_eq!(store.expires_in(b, t0), 10);
}

#[test]
fn mass_expiry_gives_memory_back_and_the_store_still_works() {
    let store = Store::with_config(StoreConfig { shards: 1, ..StoreConfig::default() });
    let t0 = Instant::now();
    let c = [ContactUpdate::new("sip:m@h", 10)];
    for i in 0..1000 {
        store.apply(&aor(&format!("sip:m{i}@example.com")), t0, &update("c", 1, &c)).unwrap();
    }
    let keep = aor("sip:m7@example.com");
    store.apply(&keep, t0, &update("c", 2, &[ContactUpdate::new("sip:m@h", 100)])).unwrap();
    // Removes 999 and shrinks the table and heap (both far below a quarter full).
    assert_eq!(store.expire(secs(t0, 10), usize::MAX), 999);
    assert_eq!((store.len(), store.aor_count()), (1, 1));
    // The survivor is still found (the shrink rehashed the table) and expires on time.
    assert_eq!(store.lookup(&keep, secs(t0, 10)).len(), 1);
    store.apply(&aor("sip:new@example.com"), secs(t0, 10), &update("c", 1, &c)).unwrap();
    assert_eq!(store.expire(secs(t0, 100), usize::MAX), 2);
    assert!(store.is_empty());
}

#[test]
fn expire_before_anything_is_due_visits_no_shard() {
    let store = Store::new();
    let t0 = Instant::now();
    let c = [ContactUpdate::new("sip:p@h", 3600)];
    for i in 0..100_000 {
        store.apply(&aor(&format!("sip:p{i}@example.com")), t0, &update("c", 1, &c)).unwrap();
    }
    let soon = [ContactUpdate::new("sip:p@h", 60)];
    for i in 0..3 {
        store.apply(&aor(&format!("sip:soon{i}@example.com")), t0, &update("c", 1, &soon)).unwrap();
    }
    assert_eq!(store.next_expiry(), Some(secs(t0, 60)));
    // Nothing due: no lock taken, however many bindings are stored.
    for s in [0, 30, 59] {
        assert_eq!(store.expire(secs(t0, s), 512), 0);
    }
    assert_eq!(store.expiry_locks.load(std::sync::atomic::Ordering::Relaxed), 0);
    // Three due: only their shards are locked (at most three of 256), and the next due time
    // moves on to the others'.
    assert_eq!(store.expire(secs(t0, 60), 512), 3);
    assert!(store.expiry_locks.load(std::sync::atomic::Ordering::Relaxed) <= 3);
    assert_eq!(store.next_expiry(), Some(secs(t0, 3600)));
    assert_eq!(store.len(), 100_000);
}

#[test]
fn next_expiry_follows_changes_from_every_path() {
    let store = Store::with_config(StoreConfig { shards: 4, ..StoreConfig::default() });
    let t0 = Instant::now();
    assert_eq!(store.next_expiry(), None);
    let rang = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = rang.clone();
    assert!(store.set_expiry_alarm(Box::new(move |at| log.lock().unwrap().push(at))).is_ok());
    let (a, b, c) = (aor("sip:a@example.com"), aor("sip:b@example.com"), aor("sip:c@example.com"));
    store.apply(&a, t0, &update("c", 1, &[ContactUpdate::new("sip:a@h", 100)])).unwrap();
    // A later expiry leaves the earliest alone and rings nothing.
    store.apply(&b, t0, &update("c", 1, &[ContactUpdate::new("sip:b@h", 200)])).unwrap();
    // A durable copy's load is a change like a REGISTER.
    let restored = store.lookup(&b, t0)[0].clone();
    assert!(store.restore(&c, vec![Binding { expires_at: 40, ..restored }], secs(t0, 10)));
    assert_eq!(*rang.lock().unwrap(), [secs(t0, 100), secs(t0, 50)]);
    assert_eq!(store.next_expiry(), Some(secs(t0, 50)));
    assert_eq!(store.expire(secs(t0, 50), 10), 1);
    assert_eq!(store.next_expiry(), Some(secs(t0, 100)));
    // Removed before it expires: its heap entry still comes due (early, never late).
    store.remove_aor(&a, secs(t0, 60));
    assert_eq!(store.expire(secs(t0, 100), 10), 0);
    assert_eq!(store.next_expiry(), Some(secs(t0, 200)));
    assert_eq!(store.expire(secs(t0, 200), 10), 1);
    assert_eq!(store.next_expiry(), None);
    assert!(store.is_empty());
}

#[test]
fn an_expiry_pass_out_of_budget_leaves_the_rest_due() {
    let store = Store::with_config(StoreConfig { shards: 8, ..StoreConfig::default() });
    let t0 = Instant::now();
    for i in 0..20 {
        store
            .apply(&aor(&format!("sip:d{i}@example.com")), t0, &update("c", 1, &[ContactUpdate::new("sip:d@h", 10)]))
            .unwrap();
    }
    assert_eq!(store.expire(secs(t0, 10), 5), 5);
    assert_eq!(store.next_expiry(), Some(secs(t0, 10)));
    assert_eq!(store.expire(secs(t0, 11), 100), 15);
    assert_eq!(store.next_expiry(), None);
}

#[test]
fn the_binding_alarm_hears_every_change_that_stores_bindings() {
    let store = Store::with_config(StoreConfig { shards: 4, ..StoreConfig::default() });
    let t0 = Instant::now();
    let heard = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = heard.clone();
    let alarm = move |bs: &[Binding<u8>]| log.lock().unwrap().push(bs.iter().map(|b| b.contact.to_string()).collect());
    assert!(store.set_binding_alarm(Box::new(alarm)).is_ok());
    assert!(store.set_binding_alarm(Box::new(|_| {})).is_err(), "once only");
    let (a, b) = (aor("sip:a@example.com"), aor("sip:b@example.com"));
    store.apply(&a, t0, &update("c", 1, &[ContactUpdate::new("sip:a@h", 100)])).unwrap();
    store.apply(&a, t0, &update("c", 2, &[ContactUpdate::new("sip:a2@h", 100)])).unwrap();
    let restored = store.lookup(&a, t0)[0].clone();
    assert!(store.restore(&b, vec![Binding { contact: "sip:b@h".into(), ..restored }], t0));
    // Removing the last binding stores nothing: no ring.
    store.apply(&b, t0, &update("c", 9, &[ContactUpdate::new("sip:b@h", 0)])).unwrap();
    let heard: Vec<Vec<String>> = heard.lock().unwrap().clone();
    assert_eq!(heard, [vec!["sip:a@h"], vec!["sip:a@h", "sip:a2@h"], vec!["sip:b@h"]]);
}
