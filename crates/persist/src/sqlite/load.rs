//! Reading the database back at start-up, in the background: herald serves from the first
//! moment, and the store fills page by page (`LocationStore::restore`, which never overwrites
//! an AoR that a REGISTER changed meanwhile). Bindings that expired while herald was down are
//! not restored (the writer deletes their rows).
//!
//! While the load runs, a lookup of a user the store does not hold yet reads that one AoR from
//! the database ([`PointReader`], an indexed point read of a few microseconds): a call to a
//! user not loaded yet still finds them.

use super::{rows, schema, writer};
use crate::queue::unix_now;
use crate::ChangeQueue;
use herald_core::{Location, Peer};
use herald_store::{Aor, Backfill, Binding};
use rusqlite::Connection;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

/// Rows per page: one read transaction each, so the writer's checkpoints are never held back
/// for the whole load.
const PAGE_ROWS: i64 = 5_000;

pub(super) fn spawn(path: &Path, store: Arc<Location>, queue: Arc<ChangeQueue>) -> rusqlite::Result<JoinHandle<()>> {
    let conn = writer::connect(path)?;
    let path = path.display().to_string();
    std::thread::Builder::new()
        .name("herald-location-load".into())
        .spawn(move || {
            let started = Instant::now();
            let result = load_all(&conn, &store, &queue);
            queue.set_loading(false);
            queue.stats().loading.store(0, Ordering::Relaxed);
            let stats = queue.stats();
            let (loaded, expired) =
                (stats.loaded.load(Ordering::Relaxed), stats.dropped_expired.load(Ordering::Relaxed));
            match result {
                Ok(aors) => tracing::info!(
                    database = %path, aors, bindings = loaded, expired, ms = started.elapsed().as_millis() as u64,
                    "registrations loaded"
                ),
                Err(e) => tracing::error!(database = %path, error = %e, loaded, "loading registrations failed"),
            }
        })
        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
}

/// Restores every AoR in key order; returns how many were restored.
fn load_all(conn: &Connection, store: &Location, queue: &ChangeQueue) -> rusqlite::Result<u64> {
    let stats = queue.stats();
    let mut stmt = conn.prepare(&schema::select_page())?;
    let mut after: Vec<u8> = Vec::new();
    let mut aors = 0;
    loop {
        let now_unix = unix_now();
        let page: Vec<(Aor, Binding<Peer>)> = stmt
            .query_map(rusqlite::params![after, PAGE_ROWS], |r| rows::read(r, now_unix))?
            .collect::<Result<_, _>>()?;
        let full = page.len() as i64 == PAGE_ROWS;
        let mut groups = group(page);
        // The last AoR of a full page may go on in the next one: read it again from its start.
        if full && groups.len() > 1 {
            groups.pop();
        }
        let Some((last, _)) = groups.last() else { return Ok(aors) };
        after = last.as_bytes().to_vec();
        // The rows the database held at start are counted as the load reads them (no scan of
        // its own before the first request); the writer adds and subtracts its own. An AoR the
        // writer rewrote before the load reached it is off by its change in size meanwhile.
        stats.stored_bindings.fetch_add(groups.iter().map(|(_, b)| b.len() as i64).sum(), Ordering::Relaxed);
        let now = Instant::now();
        for (aor, mut bindings) in groups {
            let before = bindings.len();
            bindings.retain(|b| b.expires_at > 0);
            stats.dropped_expired.fetch_add((before - bindings.len()) as u64, Ordering::Relaxed);
            let n = bindings.len() as u64;
            if n > 0 && store.restore(&aor, bindings, now) {
                stats.loaded.fetch_add(n, Ordering::Relaxed);
                aors += 1;
            }
        }
        if !full {
            return Ok(aors);
        }
    }
}

/// Consecutive rows of one AoR together (the query orders by AoR).
fn group(page: Vec<(Aor, Binding<Peer>)>) -> Vec<(Aor, Vec<Binding<Peer>>)> {
    let mut out: Vec<(Aor, Vec<Binding<Peer>>)> = Vec::new();
    for (aor, b) in page {
        match out.last_mut() {
            Some((last, bindings)) if *last == aor => bindings.push(b),
            _ => out.push((aor, vec![b])),
        }
    }
    out
}

/// Point reads of single AoRs while the load runs (see the module documentation).
pub(super) struct PointReader {
    conn: Mutex<Connection>,
    queue: Arc<ChangeQueue>,
}

impl PointReader {
    pub(super) fn open(path: &Path, queue: Arc<ChangeQueue>) -> rusqlite::Result<PointReader> {
        Ok(PointReader { conn: Mutex::new(writer::connect(path)?), queue })
    }
}

impl Backfill<Peer> for PointReader {
    fn loading(&self) -> bool {
        self.queue.is_loading()
    }

    fn fetch(&self, aor: &Aor) -> Option<Vec<Binding<Peer>>> {
        let conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        let now_unix = unix_now();
        let read = || -> rusqlite::Result<Vec<Binding<Peer>>> {
            let mut stmt = conn.prepare_cached(&schema::select_aor())?;
            let rows = stmt.query_map([aor.as_bytes()], |r| rows::read(r, now_unix))?;
            rows.map(|r| r.map(|(_, b)| b)).filter(|b| !matches!(b, Ok(b) if b.expires_at == 0)).collect()
        };
        match read() {
            Ok(bindings) if !bindings.is_empty() => Some(bindings),
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(%aor, error = %e, "location database: reading a user not yet loaded failed");
                None
            }
        }
    }
}
