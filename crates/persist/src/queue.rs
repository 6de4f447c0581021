//! The journal the store calls: the latest state of every AoR changed since the last write,
//! waiting for a backend's writer thread.
//!
//! Memory is bounded by the number of AoRs, never by the rate of changes: a second change of an
//! AoR replaces the first in the queue (the store tells the journal an AoR's *complete* binding
//! list, under the AoR's lock, so the latest state is the only one that matters). A bounded
//! channel would have to block a worker or drop a change when full; this queue does neither.
//!
//! Tickets: every change gets the next sequence number under the queue's lock, and the writer
//! takes *every* waiting change at once, so when a batch is committed every ticket up to its
//! highest is durable ([`ChangeQueue::durable`]).

use crate::{Mode, PersistStats};
use herald_core::Peer;
use herald_store::{Aor, AorBindings, Binding, Journal, Ticket};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The state of one AoR after its latest change.
#[derive(Debug, Clone)]
pub struct AorChange {
    /// Unexpired bindings, oldest update first; `expires_at` holds the seconds each had left
    /// at `at_unix`. Empty: the AoR is gone.
    pub bindings: Vec<Binding<Peer>>,
    /// Wall-clock time of the change, in seconds since the Unix epoch.
    pub at_unix: u64,
}

/// What a writer takes: every waiting change, and the ticket that is durable once they are.
#[derive(Debug, Default)]
pub struct Batch {
    pub changes: Vec<(Aor, AorChange)>,
    pub up_to: Ticket,
}

struct Pending {
    changes: HashMap<Aor, (AorChange, u64)>,
    /// The last ticket handed out.
    seq: u64,
    closed: bool,
}

/// See the module documentation. Shared by the store (as its journal) and the writer.
pub struct ChangeQueue {
    mode: Mode,
    pending: Mutex<Pending>,
    wake: Condvar,
    committed: AtomicU64,
    /// Told of every commit (the runtime releases the responses that waited for it).
    on_commit: OnceLock<Box<dyn Fn(Ticket) + Send + Sync>>,
    /// While the start-up load runs: the AoRs a writer took, so that the load does not bring
    /// back an older copy of them (see [`Journal::has_newer`]).
    loading: AtomicBool,
    taken_while_loading: Mutex<HashSet<Aor>>,
    stats: Arc<PersistStats>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl ChangeQueue {
    pub fn new(mode: Mode, stats: Arc<PersistStats>) -> ChangeQueue {
        ChangeQueue {
            mode,
            pending: Mutex::new(Pending { changes: HashMap::new(), seq: 0, closed: false }),
            wake: Condvar::new(),
            committed: AtomicU64::new(0),
            on_commit: OnceLock::new(),
            loading: AtomicBool::new(false),
            taken_while_loading: Mutex::new(HashSet::new()),
            stats,
        }
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    pub fn stats(&self) -> &Arc<PersistStats> {
        &self.stats
    }

    /// Installs the commit listener (once; later calls are ignored).
    pub fn on_commit(&self, f: Box<dyn Fn(Ticket) + Send + Sync>) {
        let _ = self.on_commit.set(f);
    }

    /// Waits for the next batch: in write-through mode as soon as any change waits, in
    /// write-back mode `interval` after `since` (or at once when closed). `None` once closed
    /// and empty: the writer stops.
    pub fn next_batch(&self, interval: Option<Duration>, since: Instant) -> Option<Batch> {
        let mut p = lock(&self.pending);
        loop {
            if p.closed && p.changes.is_empty() {
                return None;
            }
            let due = match interval {
                None => !p.changes.is_empty(),
                Some(i) => p.closed || (since.elapsed() >= i && !p.changes.is_empty()),
            };
            if due {
                break;
            }
            p = match interval {
                None => self.wake.wait(p).unwrap_or_else(PoisonError::into_inner),
                Some(i) => {
                    let left = i.saturating_sub(since.elapsed()).max(Duration::from_millis(1));
                    self.wake.wait_timeout(p, left).unwrap_or_else(PoisonError::into_inner).0
                }
            };
        }
        let up_to = Ticket(p.seq);
        let changes: Vec<(Aor, AorChange)> = p.changes.drain().map(|(aor, (change, _))| (aor, change)).collect();
        self.stats.queue_depth.store(0, Ordering::Relaxed);
        // Still under the queue's lock: `has_newer` must find every AoR in one set or the other.
        if self.loading.load(Ordering::Acquire) {
            lock(&self.taken_while_loading).extend(changes.iter().map(|(aor, _)| aor.clone()));
        }
        drop(p);
        Some(Batch { changes, up_to })
    }

    /// Puts back the changes of a batch that could not be written, unless a newer change of
    /// the same AoR is waiting.
    pub fn put_back(&self, batch: Batch) {
        let mut p = lock(&self.pending);
        for (aor, change) in batch.changes {
            p.changes.entry(aor).or_insert((change, batch.up_to.0));
        }
        self.stats.queue_depth.store(p.changes.len() as u64, Ordering::Relaxed);
    }

    /// Every ticket up to `up_to` is on disk.
    pub fn committed(&self, up_to: Ticket) {
        self.committed.fetch_max(up_to.0, Ordering::Release);
        if let Some(f) = self.on_commit.get() {
            f(up_to);
        }
    }

    /// The writer stops once what waits is written.
    pub fn close(&self) {
        lock(&self.pending).closed = true;
        self.wake.notify_all();
    }

    /// Marks the start-up load as running or over.
    pub fn set_loading(&self, loading: bool) {
        self.loading.store(loading, Ordering::Release);
        if !loading {
            *lock(&self.taken_while_loading) = HashSet::new();
        }
    }

    pub fn is_loading(&self) -> bool {
        self.loading.load(Ordering::Acquire)
    }

    /// AoRs waiting to be written.
    pub fn depth(&self) -> usize {
        lock(&self.pending).changes.len()
    }
}

impl Journal<Peer> for ChangeQueue {
    fn record(&self, change: &AorBindings<'_, Peer>) -> Ticket {
        if self.mode == Mode::Memory {
            return Ticket::DURABLE;
        }
        // Copied before taking the queue's lock (the shard's lock is held either way).
        let bindings = change
            .live()
            .map(|b| Binding { expires_at: change.expires_in(b), source: Peer { conn: None, ..b.source }, ..b.clone() })
            .collect();
        let state = AorChange { bindings, at_unix: unix_now() };
        let mut p = lock(&self.pending);
        p.seq += 1;
        let seq = p.seq;
        p.changes.insert(change.aor().clone(), (state, seq));
        self.stats.queue_depth.store(p.changes.len() as u64, Ordering::Relaxed);
        drop(p);
        match self.mode {
            Mode::WriteThrough => {
                self.wake.notify_one();
                Ticket(seq)
            }
            // The writer wakes on its interval; nobody waits for the change.
            _ => Ticket::DURABLE,
        }
    }

    fn durable(&self) -> Ticket {
        match self.mode {
            Mode::WriteThrough => Ticket(self.committed.load(Ordering::Acquire)),
            _ => Ticket(u64::MAX),
        }
    }

    fn has_newer(&self, aor: &Aor) -> bool {
        self.loading.load(Ordering::Acquire)
            && (lock(&self.pending).changes.contains_key(aor) || lock(&self.taken_while_loading).contains(aor))
    }
}
