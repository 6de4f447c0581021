//! The writer thread: takes every waiting change at once and writes it in one transaction
//! (group commit), then reports the batch's ticket committed. Expired rows are deleted a
//! bounded number at a time between batches: each copy expires its own bindings.

use super::schema;
use crate::queue::unix_now;
use crate::{Batch, ChangeQueue};
use herald_store::Aor;
use rusqlite::{params, Connection};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often expired rows are looked for, and how many rows one chunk of the walk covers.
const PURGE_EVERY: Duration = Duration::from_secs(10);
const PURGE_ROWS: i64 = 5_000;
/// Write-through: the least time from the start of one commit to the start of the next. The
/// writer takes every change waiting when it starts a commit (group commit), but a commit that
/// ends before the next REGISTERs arrive takes only one or two of them (5,000 REGISTER/s: 1.9
/// per commit, 60 us of writer CPU per REGISTER - the fsync and the WAL frames are paid per
/// commit). Waiting out the rest of this gap gathers more per commit at the price of at most
/// this much latency; an idle writer (last commit longer ago) commits at once. Measured with
/// scripts/bench-store.sh (METRICS_PORT): 5,000 REGISTER/s 9.9 per commit, 21 us of writer CPU
/// per REGISTER, p50 0.77 ms (0.19 without the gap); 20,000/s 32 per commit, 9.8 us (21.5).
const COMMIT_GAP: Duration = Duration::from_millis(1);

pub(super) fn connect(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    schema::configure(&conn)?;
    Ok(conn)
}

pub(super) fn spawn(
    mut conn: Connection,
    queue: Arc<ChangeQueue>,
    interval: Option<Duration>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name("herald-location-writer".into()).spawn(move || {
        if interval.is_some() {
            lower_priority();
        }
        let mut last_purge = Instant::now();
        let mut purged_to = Vec::new();
        let mut since = Instant::now();
        loop {
            if interval.is_none() {
                let rest = COMMIT_GAP.saturating_sub(since.elapsed());
                if !rest.is_zero() {
                    std::thread::sleep(rest);
                }
            }
            let Some(batch) = queue.next_batch(interval, since) else { break };
            since = Instant::now();
            let started = Instant::now();
            match write(&mut conn, &queue, &batch) {
                Ok((inserted, deleted)) => {
                    let stats = queue.stats();
                    stats.commit_took(started.elapsed());
                    stats.aor_writes.fetch_add(batch.aors.len() as u64, Ordering::Relaxed);
                    stats.stored_bindings.fetch_add(inserted - deleted, Ordering::Relaxed);
                    queue.committed(batch.up_to);
                }
                Err(e) => {
                    queue.stats().failures.fetch_add(1, Ordering::Relaxed);
                    tracing::error!(error = %e, aors = batch.aors.len(), "location database: write failed; retrying in 1 s");
                    queue.put_back(batch);
                    std::thread::sleep(Duration::from_secs(1));
                }
            }
            if last_purge.elapsed() >= PURGE_EVERY {
                last_purge = Instant::now();
                purged_to = purge(&conn, &queue, std::mem::take(&mut purged_to));
            }
        }
    })
}

/// Write-back: nobody waits for the writer, while a busy worker's REGISTERs wait for the CPU.
/// Every interval the writer has a burst of SQLite work (3.3 us per AoR: 165 ms for 50,000);
/// on a machine whose cores are all busy, at normal priority it takes its share of CPU from
/// the workers and their queues grow (scripts/bench-store.sh: failures at 50,000 REGISTER/s on
/// 2 cores). At nice 10 it runs on what the workers leave. Linux: nice is per thread, and
/// `setpriority(PRIO_PROCESS, 0, ..)` sets the calling thread's. Lowering needs no privilege.
fn lower_priority() {
    if let Err(e) = rustix::process::setpriority_process(None, 10) {
        tracing::debug!(error = %e, "location writer: setpriority failed");
    }
}

/// One transaction for the whole batch, each AoR as the store holds it now; returns (rows
/// inserted, rows deleted).
///
/// A refresh (the common change: same bindings, new expiry and CSeq) is one in-place `UPDATE`
/// per binding, found by its key (aor, position), and one `DELETE` of positions past the new
/// count that finds nothing: the b-tree keeps its shape, no row is removed and inserted again
/// (DELETE + INSERT: 2.6 us per AoR in the writer_cost example, against 2.2). An `UPDATE`
/// that finds no row (a new binding) becomes an `INSERT`; `changes()` tells the two apart, so
/// the count of stored rows stays exact.
fn write(conn: &mut Connection, queue: &ChangeQueue, batch: &Batch) -> rusqlite::Result<(i64, i64)> {
    let tx = conn.transaction()?;
    let (mut inserted, mut deleted) = (0i64, 0i64);
    // One buffer for every binding's source address: no allocation per row.
    let mut source = String::with_capacity(48);
    {
        let mut update = tx.prepare_cached(schema::UPDATE)?;
        let mut insert = tx.prepare_cached(schema::INSERT)?;
        let mut trim = tx.prepare_cached(schema::DELETE_FROM_POSITION)?;
        // In key order: consecutive writes touch neighbouring b-tree pages, which are then in
        // the CPU's caches (writer_cost example, 10,000 AoRs: 1.8 instead of 2.1 us per AoR).
        let mut aors: Vec<&Aor> = batch.aors.iter().collect();
        aors.sort_unstable();
        for aor in aors {
            let Some(change) = queue.state_of(aor) else { continue };
            for (position, b) in change.bindings.iter().enumerate() {
                let expires = change.at_unix.saturating_add(u64::from(b.expires_at));
                source.clear();
                let _ = write!(source, "{}", b.source.addr);
                let values = params![
                    aor.as_bytes(),
                    position as i64,
                    &*b.contact,
                    i64::try_from(expires).unwrap_or(i64::MAX),
                    &*b.call_id,
                    b.cseq,
                    b.path.as_deref(),
                    b.instance.as_deref(),
                    b.reg_id.map(|r| r.get()),
                    b.q,
                    b.source.transport.as_via_str(),
                    source.as_str(),
                ];
                if update.execute(values)? == 0 {
                    insert.execute(values)?;
                    inserted += 1;
                }
            }
            deleted += trim.execute(params![aor.as_bytes(), change.bindings.len() as i64])? as i64;
        }
    }
    tx.commit()?;
    Ok((inserted, deleted))
}

/// Walks the key from where the last walk stopped, deleting expired rows a chunk at a time,
/// for at most 20 ms (the next batch waits meanwhile); the walk starts over after the last
/// AoR. Returns where to go on.
pub(super) fn purge(conn: &Connection, queue: &ChangeQueue, mut after: Vec<u8>) -> Vec<u8> {
    let started = Instant::now();
    let now = i64::try_from(unix_now()).unwrap_or(i64::MAX);
    while started.elapsed() < Duration::from_millis(20) {
        let end: Option<Vec<u8>> =
            match conn.query_row(schema::PURGE_CHUNK_END, params![after, PURGE_ROWS], |r| r.get(0)) {
                Ok(end) => end,
                Err(e) => {
                    tracing::warn!(error = %e, "location database: looking for expired bindings failed");
                    return after;
                }
            };
        let Some(end) = end else { return Vec::new() }; // past the last AoR: start over next time
        match conn.execute(schema::PURGE, params![after, end, now]) {
            Ok(n) => {
                queue.stats().stored_bindings.fetch_sub(n as i64, Ordering::Relaxed);
            }
            Err(e) => {
                tracing::warn!(error = %e, "location database: deleting expired bindings failed");
                return after;
            }
        }
        after = end;
    }
    after
}
