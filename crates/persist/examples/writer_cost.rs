//! The SQLite writer's cost per AoR written, apart from the SIP work around it: USERS users
//! registered through a `LocationStore` journaling into `SqliteLocation`, then ROUNDS rounds
//! refreshing every user (new CSeq and expiry, the workload of scripts/bench-store.sh), each
//! round written by the writer thread in one batch (write-back, interval 10 ms) or in group
//! commits (write-through). Prints the writer thread's CPU (schedstat) and its transactions'
//! wall time per AoR written, and commits.
//!
//! `writer_cost MODE [USERS] [ROUNDS] [DIR]` (MODE write-back or write-through; default 10000
//! users, 20 rounds, a temporary directory).

use herald_core::{Location, Peer};
use herald_persist::sqlite::SqliteLocation;
use herald_persist::Mode;
use herald_store::{Aor, ContactUpdate, LocationStore, Update};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Nanoseconds on CPU of this process's thread named `name` (/proc/self/task/*/schedstat).
fn thread_cpu_ns(name: &str) -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return 0 };
    for t in tasks.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.trim_end() == name {
            let stat = std::fs::read_to_string(t.path().join("schedstat")).unwrap_or_default();
            return stat.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or(0);
        }
    }
    0
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = match args.get(1).map(String::as_str) {
        Some("write-back") => Mode::WriteBack,
        Some("write-through") => Mode::WriteThrough,
        _ => {
            eprintln!("usage: writer_cost write-back|write-through [USERS] [ROUNDS] [DIR]");
            std::process::exit(2);
        }
    };
    let users: usize = args.get(2).and_then(|u| u.parse().ok()).unwrap_or(10_000);
    let rounds: u32 = args.get(3).and_then(|r| r.parse().ok()).unwrap_or(20);
    let dir = args.get(4).map(std::path::PathBuf::from).unwrap_or_else(std::env::temp_dir);
    let path = dir.join(format!("writer-cost-{}.db", std::process::id()));
    let mut db = SqliteLocation::open(&path, mode, Duration::from_millis(10)).unwrap();
    let store: Arc<Location> = Arc::new(LocationStore::new());
    db.attach(&store).unwrap();
    db.wait_loaded();
    let source = Peer::udp(([127, 0, 0, 1], 5080).into());
    let aors: Vec<Aor> = (0..users).map(|i| Aor::from_canonical(format!("user{i}@127.0.0.1").into_bytes())).collect();
    let contacts: Vec<String> = (0..users).map(|i| format!("sip:user{i}@127.0.0.1:{}", 20000 + i % 40000)).collect();
    let stats = db.stats().clone();
    let settle = |expected: u64| {
        while stats.aor_writes.load(Relaxed) < expected || db.queue().depth() > 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    let refresh = |cseq: u32| {
        for (aor, contact) in aors.iter().zip(&contacts) {
            let contacts = [ContactUpdate::new(contact, 3600 + cseq)];
            let update = Update { call_id: "writer-cost", cseq, path: None, source, contacts: &contacts };
            store.apply(aor, Instant::now(), &update).unwrap();
        }
    };
    refresh(1); // the first registrations: inserts
    settle(users as u64);
    let (cpu0, wall0, writes0, commits0) = (
        thread_cpu_ns("herald-location"),
        stats.latency_sum_us.load(Relaxed),
        stats.aor_writes.load(Relaxed),
        stats.commits.load(Relaxed),
    );
    for round in 0..rounds {
        refresh(2 + round);
        settle(writes0 + u64::from(round + 1) * users as u64);
    }
    let writes = (stats.aor_writes.load(Relaxed) - writes0) as f64;
    let cpu_us = (thread_cpu_ns("herald-location") - cpu0) as f64 / 1e3;
    let commits = stats.commits.load(Relaxed) - commits0;
    println!(
        "{mode:?}: {writes} AoR writes in {commits} commits; writer thread CPU {:.2} us per AoR written, \
         transaction wall time {:.2} us per AoR",
        cpu_us / writes,
        (stats.latency_sum_us.load(Relaxed) - wall0) as f64 / writes,
    );
    drop(db);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}
