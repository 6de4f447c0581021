//! Unit tests of what durable copies use: the journal, the removals outside a REGISTER,
//! restore/replace and the paged scan.

use crate::*;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

type Store = LocationStore<u8>;

/// One journaled change: the AoR and its live bindings as (contact, seconds left).
type Change = (String, Vec<(String, u32)>);

/// A journal that keeps every change it is told, as (AoR, [(contact, seconds left)]).
#[derive(Default)]
struct Recorder {
    changes: Mutex<Vec<Change>>,
    issued: AtomicU64,
}

impl Journal<u8> for Recorder {
    fn record(&self, change: &AorBindings<'_, u8>) -> Ticket {
        let live = change.live().map(|b| (b.contact.to_string(), change.expires_in(b))).collect();
        self.changes.lock().unwrap().push((change.aor().to_string(), live));
        Ticket(self.issued.fetch_add(1, Ordering::Relaxed) + 1)
    }
}

impl Recorder {
    fn take(&self) -> Vec<Change> {
        std::mem::take(&mut *self.changes.lock().unwrap())
    }
}

fn aor(s: &str) -> Aor {
    Aor::parse(s).unwrap()
}

fn register(store: &Store, a: &Aor, now: Instant, cseq: u32, contacts: &[ContactUpdate<'_>]) -> Applied<u8> {
    store.apply(a, now, &Update { call_id: "c", cseq, path: None, source: 7, contacts }).unwrap()
}

fn binding(contact: &str, expires_in: u32) -> Binding<u8> {
    Binding {
        contact: contact.into(),
        call_id: "restored".into(),
        path: None,
        instance: None,
        source: 1,
        expires_at: expires_in,
        cseq: 9,
        reg_id: None,
        q: None,
    }
}

fn owned(v: &[(&str, u32)]) -> Vec<(String, u32)> {
    v.iter().map(|(c, s)| (c.to_string(), *s)).collect()
}

#[test]
fn every_change_is_journaled_with_the_whole_list_and_its_ticket() {
    let journal = Arc::new(Recorder::default());
    let store = Store::new().with_journal(journal.clone());
    let (t0, a) = (Instant::now(), aor("sip:alice@example.com"));
    let later = t0 + Duration::from_secs(10);

    let applied = register(&store, &a, t0, 1, &[ContactUpdate::new("sip:a@1", 60)]);
    assert_eq!(applied.ticket, Ticket(1));
    let applied = register(&store, &a, later, 2, &[ContactUpdate::new("sip:a@2", 100)]);
    assert_eq!((applied.ticket, applied.bindings.len()), (Ticket(2), 2));
    assert_eq!(
        journal.take(),
        [
            ("alice@example.com".to_string(), owned(&[("sip:a@1", 60)])),
            // The complete list, oldest update first, with what each has left at the change.
            ("alice@example.com".to_string(), owned(&[("sip:a@1", 50), ("sip:a@2", 100)])),
        ]
    );

    let removed = store.remove_binding(&a, "sip:a@1", later);
    assert_eq!((removed.count, removed.ticket), (1, Ticket(3)));
    let removed = store.remove_all(&a, "c", 3, later).unwrap();
    assert_eq!((removed.count, removed.ticket), (1, Ticket(4)));
    assert_eq!(
        journal.take(),
        [("alice@example.com".to_string(), owned(&[("sip:a@2", 100)])), ("alice@example.com".to_string(), vec![]),]
    );
    // A refused update is not journaled; expiry is not journaled.
    register(&store, &a, later, 5, &[ContactUpdate::new("sip:a@3", 5)]);
    journal.take();
    let same = [ContactUpdate::new("sip:a@3", 5)];
    let refused = store.apply(&a, later, &Update { call_id: "c", cseq: 5, path: None, source: 7, contacts: &same });
    assert!(refused.is_err());
    assert_eq!(store.expire(later + Duration::from_secs(6), 100), 1);
    assert!(journal.take().is_empty());
}

#[test]
fn removals_of_unknown_aors_are_journaled_too() {
    // During a start-up load an AoR may be in the durable copy and not yet here: its removal
    // must still reach the copy.
    let journal = Arc::new(Recorder::default());
    let store = Store::new().with_journal(journal.clone());
    let (t0, a) = (Instant::now(), aor("sip:bob@example.com"));
    assert_eq!(store.remove_aor(&a, t0).count, 0);
    assert_eq!(store.remove_binding(&a, "sip:b@1", t0).count, 0);
    assert_eq!(store.remove_all(&a, "x", 1, t0).unwrap().count, 0);
    register(&store, &a, t0, 1, &[ContactUpdate::new("sip:b@1", 0)]);
    let changes = journal.take();
    assert_eq!(changes.len(), 4);
    assert!(changes.iter().all(|(k, live)| k == "bob@example.com" && live.is_empty()));
    // Without a journal every ticket is already durable.
    let plain = Store::new();
    assert!(register(&plain, &a, t0, 1, &[ContactUpdate::new("sip:b@1", 60)]).ticket.is_durable());
    assert!(plain.set_journal(journal.clone()).is_ok());
    assert!(plain.set_journal(journal).is_err());
}

#[test]
fn remove_binding_matches_equivalent_uris_and_remove_aor_removes_all() {
    let store = Store::new();
    let (t0, a) = (Instant::now(), aor("sip:carol@example.com"));
    let cs = [ContactUpdate::new("sip:carol@PC.example.com;transport=tcp", 60), ContactUpdate::new("sip:c@2", 60)];
    register(&store, &a, t0, 1, &cs);
    assert_eq!(store.remove_binding(&a, "sip:carol@pc.example.com;Transport=TCP", t0).count, 1);
    assert_eq!(store.remove_binding(&a, "sip:nobody@h", t0).count, 0);
    let left: Vec<_> = store.lookup(&a, t0).iter().map(|b| b.contact.to_string()).collect();
    assert_eq!(left, ["sip:c@2"]);
    assert_eq!((store.len(), store.aor_count()), (1, 1));
    assert_eq!(store.remove_binding(&a, "sip:c@2", t0).count, 1);
    assert_eq!((store.len(), store.aor_count()), (0, 0));

    register(&store, &a, t0, 2, &cs);
    assert_eq!(store.remove_aor(&a, t0).count, 2);
    assert_eq!((store.len(), store.aor_count()), (0, 0));
    assert!(store.lookup(&a, t0).is_empty());
}

#[test]
fn restore_never_overwrites_a_live_registration_and_replace_does() {
    let journal = Arc::new(Recorder::default());
    let store = Store::new().with_journal(journal.clone());
    let (t0, a, b) = (Instant::now(), aor("sip:dave@example.com"), aor("sip:erin@example.com"));
    store.lookup(&a, t0); // fixes the epoch at t0
    let t5 = t0 + Duration::from_secs(5);

    // Restored lifetimes are the seconds left at `now`; a zero one is dropped.
    assert!(store.restore(&a, vec![binding("sip:d@old", 30), binding("sip:d@gone", 0)], t5));
    let got = store.lookup(&a, t5);
    assert_eq!((got.len(), &*got[0].contact, store.expires_in(&got[0], t5)), (1, "sip:d@old", 30));
    assert_eq!((got[0].cseq, &*got[0].call_id), (9, "restored"));

    // A REGISTER that arrived during the load wins over the stored copy.
    register(&store, &b, t5, 1, &[ContactUpdate::new("sip:e@new", 60)]);
    assert!(!store.restore(&b, vec![binding("sip:e@stored", 30)], t5));
    assert_eq!(&*store.lookup(&b, t5)[0].contact, "sip:e@new");

    // An AoR whose bindings all expired may be restored.
    let t40 = t0 + Duration::from_secs(40);
    assert!(store.restore(&a, vec![binding("sip:d@again", 10)], t40));
    assert_eq!(store.lookup(&a, t40).len(), 1);
    assert_eq!(store.len(), 2, "the expired binding was replaced, not added to");

    // Replace overwrites, and an empty list removes.
    store.replace(&b, vec![binding("sip:e@1", 10), binding("sip:e@2", 20)], t5);
    let got: Vec<_> = store.lookup(&b, t5).iter().map(|b| b.contact.to_string()).collect();
    assert_eq!(got, ["sip:e@2", "sip:e@1"], "most recent (last) first");
    store.replace(&b, vec![], t5);
    assert!(store.lookup(&b, t5).is_empty());
    assert_eq!(store.aor_count(), 1);
    // Neither is journaled.
    assert_eq!(journal.take().len(), 1, "only the REGISTER");

    // Restored bindings expire like any other.
    assert_eq!(store.expire(t0 + Duration::from_secs(60), 100), 1);
    assert!(store.is_empty());
}

#[test]
fn restore_keeps_only_the_most_recent_bindings_over_the_limit() {
    let store = Store::with_config(StoreConfig { max_bindings_per_aor: 2, ..StoreConfig::default() });
    let (t0, a) = (Instant::now(), aor("sip:f@example.com"));
    assert!(store.restore(&a, vec![binding("sip:1@h", 10), binding("sip:2@h", 10), binding("sip:3@h", 10)], t0));
    let mut got: Vec<_> = store.lookup(&a, t0).iter().map(|b| b.contact.to_string()).collect();
    got.sort();
    assert_eq!(got, ["sip:2@h", "sip:3@h"]);
}

#[test]
fn scan_visits_every_aor_once_in_bounded_pages_while_the_store_changes() {
    let store = Store::with_config(StoreConfig { shards: 4, ..StoreConfig::default() });
    let t0 = Instant::now();
    let n = 1000;
    for i in 0..n {
        let uri = format!("sip:u{i}@h");
        register(&store, &aor(&format!("sip:u{i}@example.com")), t0, 1, &[ContactUpdate::new(&uri, 60)]);
    }
    let mut seen = HashSet::new();
    let (mut cursor, mut pages) = (Some(ScanCursor::START), 0);
    while let Some(c) = cursor {
        let mut page = 0;
        cursor = store.scan(c, 7, t0, |v| {
            page += 1;
            assert_eq!(v.live().count(), 1);
            assert!(seen.insert(v.aor().to_string()), "{} visited twice", v.aor());
        });
        assert!(page <= 7);
        pages += 1;
        // Grow every table between pages (rehashing them): the cursor must still hold.
        if pages % 20 == 0 {
            for j in 0..100 {
                let uri = format!("sip:x{pages}-{j}@h");
                let key = aor(&format!("sip:x{pages}-{j}@example.com"));
                register(&store, &key, t0, 1, &[ContactUpdate::new(&uri, 60)]);
            }
        }
    }
    for i in 0..n {
        assert!(seen.contains(&format!("u{i}@example.com")), "u{i} missed");
    }
    assert!(pages >= n / 7, "pages are bounded: {pages}");

    // One big page is the whole store; an empty store ends at once.
    let mut all = 0;
    assert_eq!(store.scan(ScanCursor::START, usize::MAX, t0, |_| all += 1), None);
    assert_eq!(all, store.aor_count());
    assert_eq!(Store::new().scan(ScanCursor::START, 10, t0, |_| panic!("empty")), None);
}

/// A durable copy still loading: serves AoRs from a map, counting the reads.
struct Copy {
    loading: std::sync::atomic::AtomicBool,
    rows: Mutex<std::collections::HashMap<String, Vec<Binding<u8>>>>,
    reads: AtomicU64,
}

impl Backfill<u8> for Copy {
    fn loading(&self) -> bool {
        self.loading.load(Ordering::Relaxed)
    }

    fn fetch(&self, aor: &Aor) -> Option<Vec<Binding<u8>>> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.rows.lock().unwrap().get(&aor.to_string()).cloned()
    }
}

/// A journal that has newer changes of the AoRs it was told of.
#[derive(Default)]
struct Newer(Mutex<HashSet<String>>);

impl Journal<u8> for Newer {
    fn record(&self, change: &AorBindings<'_, u8>) -> Ticket {
        self.0.lock().unwrap().insert(change.aor().to_string());
        Ticket(1)
    }

    fn durable(&self) -> Ticket {
        Ticket(0)
    }

    fn has_newer(&self, aor: &Aor) -> bool {
        self.0.lock().unwrap().contains(&aor.to_string())
    }
}

#[test]
fn a_user_not_yet_loaded_is_read_from_the_copy_and_newer_changes_win() {
    let journal = Arc::new(Newer::default());
    let store = Store::new().with_journal(journal.clone());
    let rows =
        [("gil@example.com", vec![binding("sip:g@stored", 60)]), ("hal@example.com", vec![binding("sip:h@1", 60)])];
    let copy = Arc::new(Copy {
        loading: true.into(),
        rows: Mutex::new(rows.into_iter().map(|(k, v)| (k.to_string(), v)).collect()),
        reads: AtomicU64::new(0),
    });
    assert!(store.set_backfill(copy.clone()).is_ok());
    let (t0, gil, hal) = (Instant::now(), aor("sip:gil@example.com"), aor("sip:hal@example.com"));
    assert_eq!(store.durable(), Ticket(0));

    // A lookup miss reads the copy once; the AoR is then held.
    assert_eq!(&*store.lookup(&gil, t0)[0].contact, "sip:g@stored");
    store.lookup(&gil, t0);
    assert_eq!(copy.reads.load(Ordering::Relaxed), 1);

    // A REGISTER of a user not yet loaded starts from the stored bindings.
    let applied = register(&store, &hal, t0, 1, &[ContactUpdate::new("sip:h@2", 60)]);
    assert_eq!(applied.bindings.len(), 2);
    // Once changed here, the background load must not bring the copy back: not even after a
    // `Contact: *` emptied the AoR.
    store.remove_all(&hal, "c", 2, t0).unwrap();
    assert!(!store.restore(&hal, vec![binding("sip:h@1", 60)], t0));
    assert!(store.lookup(&hal, t0).is_empty());

    // After the load nothing is read any more.
    copy.loading.store(false, Ordering::Relaxed);
    let reads = copy.reads.load(Ordering::Relaxed);
    store.lookup(&aor("sip:nobody@example.com"), t0);
    assert_eq!(copy.reads.load(Ordering::Relaxed), reads);
    assert_eq!(Store::new().durable(), Ticket(u64::MAX));
}
