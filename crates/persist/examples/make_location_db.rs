//! Builds a location database with many registrations, through the crate's own path (a
//! `LocationStore` journaling into `SqliteLocation`), for the start-up measurement of
//! scripts/bench-store.sh: `make_location_db PATH COUNT [EXPIRES_S]`.
//!
//! Users are `user0@127.0.0.1` .. with one UDP contact each, expiring EXPIRES_S (default
//! 86400) seconds from now.

use herald_core::{Location, Peer};
use herald_persist::sqlite::SqliteLocation;
use herald_persist::Mode;
use herald_store::{Aor, ContactUpdate, LocationStore, Update};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(path), Some(count)) = (args.get(1), args.get(2).and_then(|c| c.parse::<usize>().ok())) else {
        eprintln!("usage: make_location_db PATH COUNT [EXPIRES_S]");
        std::process::exit(2);
    };
    let expires: u32 = args.get(3).and_then(|e| e.parse().ok()).unwrap_or(86_400);
    let _ = std::fs::remove_file(path);
    let started = Instant::now();
    let mut db = SqliteLocation::open(path.as_ref(), Mode::WriteBack, Duration::from_millis(50)).unwrap();
    let store: Arc<Location> = Arc::new(LocationStore::new());
    db.attach(&store).unwrap();
    db.wait_loaded();
    let source = Peer::udp(([127, 0, 0, 1], 5080).into());
    for i in 0..count {
        let contact = format!("sip:user{i}@127.0.0.1:{}", 20000 + i % 40000);
        let contacts = [ContactUpdate::new(&contact, expires)];
        let call_id = format!("make-{i}");
        let update = Update { call_id: &call_id, cseq: 1, path: None, source, contacts: &contacts };
        let aor = Aor::from_canonical(format!("user{i}@127.0.0.1").into_bytes());
        store.apply(&aor, Instant::now(), &update).unwrap();
        // Keep the queue (and memory) small: let the writer catch up every 100,000.
        if i % 100_000 == 99_999 {
            while db.queue().depth() > 0 {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
    drop(db);
    eprintln!("{count} registrations written to {path} in {:.1} s", started.elapsed().as_secs_f64());
}
