//! The SQLite copy against real database files: what is written, when, and what comes back.

use super::SqliteLocation;
use crate::Mode;
use herald_core::{Location, Peer, Transport};
use herald_store::{Aor, ContactUpdate, LocationStore, Ticket, Update};
use rusqlite::Connection;
use std::num::NonZeroU32;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn store() -> Arc<Location> {
    Arc::new(LocationStore::new())
}

fn aor(user: &str) -> Aor {
    Aor::parse(&format!("sip:{user}@example.com")).unwrap()
}

fn peer(t: Transport, port: u16) -> Peer {
    Peer { transport: t, addr: ([192, 0, 2, 7], port).into(), conn: Some(herald_core::ConnId(42)) }
}

fn register(store: &Location, user: &str, contact: &str, expires: u32, cseq: u32) -> Ticket {
    let contacts = [ContactUpdate::new(contact, expires)];
    let update = Update { call_id: "cid", cseq, path: None, source: peer(Transport::Udp, 5060), contacts: &contacts };
    store.apply(&aor(user), Instant::now(), &update).unwrap().ticket
}

fn rows(path: &Path) -> i64 {
    let conn = Connection::open(path).unwrap();
    conn.query_row("SELECT COUNT(*) FROM location", [], |r| r.get(0)).unwrap()
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn write_through_tickets_become_durable_and_everything_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("location.db");
    {
        let mut db = SqliteLocation::open(&path, Mode::WriteThrough, Duration::from_secs(1)).unwrap();
        let s = store();
        db.attach(&s).unwrap();
        db.wait_loaded();
        let contacts = [ContactUpdate {
            q: Some(700),
            instance: Some("<urn:uuid:00000000-0000-1000-8000-000a95a0e128>"),
            reg_id: NonZeroU32::new(2),
            ..ContactUpdate::new("sip:alice@192.0.2.7:5070;transport=tcp", 600)
        }];
        let update = Update {
            call_id: "call-1",
            cseq: 17,
            path: Some("<sip:edge.example.com;lr>"),
            source: peer(Transport::Tcp, 5070),
            contacts: &contacts,
        };
        let t1 = s.apply(&aor("alice"), Instant::now(), &update).unwrap().ticket;
        let t2 = register(&s, "bob", "sip:bob@192.0.2.8", 60, 1);
        assert!(t1 > Ticket::DURABLE && t2 > t1, "{t1:?} {t2:?}");
        wait_until("the commit", || s.durable() >= t2);
        assert_eq!(rows(&path), 2, "committed means on disk");
        assert_eq!(db.stats().stored_bindings.load(std::sync::atomic::Ordering::Relaxed), 2);
    }
    let mut db = SqliteLocation::open(&path, Mode::WriteThrough, Duration::from_secs(1)).unwrap();
    let s = store();
    db.attach(&s).unwrap();
    db.wait_loaded();
    assert_eq!(db.stats().stored_bindings.load(std::sync::atomic::Ordering::Relaxed), 2, "counted by the load");
    let got = s.lookup(&aor("alice"), Instant::now());
    assert_eq!(got.len(), 1);
    let b = &got[0];
    assert_eq!(&*b.contact, "sip:alice@192.0.2.7:5070;transport=tcp");
    assert_eq!((&*b.call_id, b.cseq, b.q, b.reg_id), ("call-1", 17, Some(700), NonZeroU32::new(2)));
    assert_eq!(b.path.as_deref(), Some("<sip:edge.example.com;lr>"));
    assert_eq!(b.instance.as_deref(), Some("<urn:uuid:00000000-0000-1000-8000-000a95a0e128>"));
    // The connection does not survive a restart; transport and address do.
    assert_eq!(b.source, Peer { conn: None, ..peer(Transport::Tcp, 5070) });
    let left = s.expires_in(b, Instant::now());
    assert!((598..=600).contains(&left), "{left}");
    assert_eq!(s.lookup(&aor("bob"), Instant::now()).len(), 1);
    // A removal is written too.
    let t = s.remove_aor(&aor("bob"), Instant::now()).ticket;
    wait_until("the removal", || s.durable() >= t);
    assert_eq!(rows(&path), 1);
}

#[test]
fn write_back_writes_the_latest_state_once_per_interval() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("location.db");
    let mut db = SqliteLocation::open(&path, Mode::WriteBack, Duration::from_millis(300)).unwrap();
    let s = store();
    db.attach(&s).unwrap();
    db.wait_loaded();
    let started = Instant::now();
    for cseq in 1..=50 {
        // Nobody waits in write-back mode. 20 contacts (the limit per AoR), then refreshes.
        let contact = format!("sip:carol@192.0.2.{}", cseq.min(20));
        assert!(register(&s, "carol", &contact, 60, cseq).is_durable());
    }
    assert_eq!(db.queue().depth(), 1, "one AoR waiting, however many changes");
    assert_eq!(rows(&path), 0, "nothing written before the interval");
    wait_until("the write-back", || rows(&path) > 0);
    assert!(started.elapsed() >= Duration::from_millis(250), "{:?}", started.elapsed());
    // The 20 bindings of carol, in one state.
    assert_eq!(rows(&path), 20);
    assert_eq!(db.stats().aor_writes.load(std::sync::atomic::Ordering::Relaxed), 1);
    // Dropping writes what is queued.
    register(&s, "dave", "sip:dave@192.0.2.9", 60, 1);
    drop(db);
    assert_eq!(rows(&path), 21);
}

#[test]
fn a_second_process_is_refused_and_the_error_names_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("location.db");
    let _db = SqliteLocation::open(&path, Mode::WriteBack, Duration::from_secs(1)).unwrap();
    // flock locks are per open file description: a second open in this process conflicts as a
    // second process would.
    let err = SqliteLocation::open(&path, Mode::WriteBack, Duration::from_secs(1)).err().expect("refused");
    let text = err.to_string();
    assert!(text.contains(&path.display().to_string()) && text.contains("in use"), "{text}");
}

#[test]
fn expired_rows_are_dropped_and_newer_registrations_win_over_the_load() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("location.db");
    {
        let db = SqliteLocation::open(&path, Mode::WriteThrough, Duration::from_secs(1)).unwrap();
        drop(db);
        // Rows as an earlier run left them: one expired while herald was down, two live.
        let conn = Connection::open(&path).unwrap();
        let now = crate::queue::unix_now() as i64;
        for (user, expires) in [("old", now - 5), ("eve", now + 100), ("fay", now + 100)] {
            conn.execute(
                "INSERT INTO location VALUES (?1, 0, ?2, ?3, 'c', 1, NULL, NULL, NULL, NULL, 'UDP', '192.0.2.1:5060')",
                rusqlite::params![format!("{user}@example.com").as_bytes(), format!("sip:{user}@192.0.2.1"), expires],
            )
            .unwrap();
        }
    }
    let mut db = SqliteLocation::open(&path, Mode::WriteThrough, Duration::from_secs(1)).unwrap();
    let s = store();
    // A REGISTER that arrived before the load reached fay wins.
    register(&s, "fay", "sip:fay@new", 60, 2);
    db.attach(&s).unwrap();
    db.wait_loaded();
    let now = Instant::now();
    assert!(s.lookup(&aor("old"), now).is_empty(), "expired while down");
    assert_eq!(s.lookup(&aor("eve"), now).len(), 1);
    let fay = s.lookup(&aor("fay"), now);
    assert_eq!((fay.len(), &*fay[0].contact), (1, "sip:fay@new"));
    let stats = db.stats();
    assert_eq!(stats.dropped_expired.load(std::sync::atomic::Ordering::Relaxed), 1);
    assert_eq!(stats.loaded.load(std::sync::atomic::Ordering::Relaxed), 1);
}

#[test]
fn a_user_not_yet_loaded_is_read_by_a_point_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("location.db");
    {
        let mut db = SqliteLocation::open(&path, Mode::WriteThrough, Duration::from_secs(1)).unwrap();
        let s = store();
        db.attach(&s).unwrap();
        db.wait_loaded();
        let t = register(&s, "gus", "sip:gus@192.0.2.3", 60, 1);
        wait_until("the commit", || s.durable() >= t);
    }
    let db = SqliteLocation::open(&path, Mode::WriteThrough, Duration::from_secs(1)).unwrap();
    db.queue().set_loading(true);
    let reader = super::load::PointReader::open(&path, db.queue().clone()).unwrap();
    let s = store();
    s.set_backfill(Arc::new(reader)).ok();
    // No background load started: only the point read can find gus.
    assert_eq!(&*s.lookup(&aor("gus"), Instant::now())[0].contact, "sip:gus@192.0.2.3");
    assert!(s.lookup(&aor("nobody"), Instant::now()).is_empty());
}

#[test]
fn expired_rows_are_deleted_by_the_walk_and_live_ones_stay() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("location.db");
    let db = SqliteLocation::open(&path, Mode::WriteBack, Duration::from_secs(1)).unwrap();
    let conn = super::writer::connect(&path).unwrap();
    let now = crate::queue::unix_now() as i64;
    for i in 0..12_000 {
        // Every third AoR expired; one AoR with one expired and one live binding.
        let expires = if i % 3 == 0 { now - 1 } else { now + 100 };
        conn.execute(
            "INSERT INTO location VALUES (?1, 0, 'sip:u@h', ?2, 'c', 1, NULL, NULL, NULL, NULL, 'UDP', '192.0.2.1:5060')",
            rusqlite::params![format!("u{i:05}@h").as_bytes(), expires],
        )
        .unwrap();
    }
    conn.execute(
        "INSERT INTO location VALUES (?1, 1, 'sip:u2@h', ?2, 'c', 1, NULL, NULL, NULL, NULL, 'UDP', '192.0.2.1:5060')",
        rusqlite::params![b"u00001@h".as_slice(), now - 1],
    )
    .unwrap();
    // Chunks of 5,000 rows: the walk goes on where it stopped and starts over after the end.
    let mut after = Vec::new();
    for _ in 0..4 {
        after = super::writer::purge(&conn, db.queue(), after);
    }
    assert_eq!(rows(&path), 8_000);
    let live: i64 = conn.query_row("SELECT COUNT(*) FROM location WHERE expires > ?1", [now], |r| r.get(0)).unwrap();
    assert_eq!(live, 8_000);
}
