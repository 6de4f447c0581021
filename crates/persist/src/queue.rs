//! The journal the store calls: the set of AoRs changed since the last write, waiting for a
//! backend's writer thread, which reads each one's *current* bindings from the store when it
//! writes (Kamailio usrloc's dirty flag).
//!
//! Memory is bounded by the number of AoRs, never by the rate of changes: a second change of an
//! AoR before the write adds nothing (the latest state is the only one that matters, and the
//! writer reads it). A bounded channel would have to block a worker or drop a change when full;
//! this queue does neither. And the worker pays for one key in a set, not for a copy of the
//! bindings: the copy is made once per write, on the writer's thread.
//!
//! Tickets: every change gets the next sequence number under the queue's lock, and the writer
//! takes *every* waiting change at once, so when a batch is committed every ticket up to its
//! highest is durable ([`ChangeQueue::durable`]).

use crate::{Mode, PersistStats};
use herald_core::{Location, Peer};
use herald_store::{Aor, AorBindings, Binding, Journal, Ticket};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The state of one AoR as the writer read it ([`ChangeQueue::state_of`]).
#[derive(Debug, Clone)]
pub struct AorChange {
    /// Unexpired bindings, oldest update first; `expires_at` holds the seconds each had left
    /// at `at_unix`. Empty: the AoR is gone.
    pub bindings: Vec<Binding<Peer>>,
    /// Wall-clock time of the read, in seconds since the Unix epoch.
    pub at_unix: u64,
}

/// What a writer takes: every AoR changed, and the ticket that is durable once their current
/// states are written.
#[derive(Debug, Default)]
pub struct Batch {
    pub aors: Vec<Aor>,
    pub up_to: Ticket,
}

struct Pending {
    changed: HashSet<Aor>,
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
    /// The store whose changes these are (set by `attach`, before the journal is installed).
    store: OnceLock<Weak<Location>>,
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
            pending: Mutex::new(Pending { changed: HashSet::new(), seq: 0, closed: false }),
            wake: Condvar::new(),
            committed: AtomicU64::new(0),
            on_commit: OnceLock::new(),
            loading: AtomicBool::new(false),
            taken_while_loading: Mutex::new(HashSet::new()),
            stats,
            store: OnceLock::new(),
        }
    }

    /// The store the writer reads the changed AoRs from (once; before the journal is installed).
    pub fn set_store(&self, store: &Arc<Location>) {
        let _ = self.store.set(Arc::downgrade(store));
    }

    /// The current state of `aor` in the store, as it is written (`None`: no store, or it is
    /// gone: nothing to write).
    pub fn state_of(&self, aor: &Aor) -> Option<AorChange> {
        let store = self.store.get()?.upgrade()?;
        let at_unix = unix_now();
        let bindings = store.read_bindings(aor, Instant::now(), |v| {
            v.live()
                .map(|b| Binding { expires_at: v.expires_in(b), source: Peer { conn: None, ..b.source }, ..b.clone() })
                .collect()
        });
        Some(AorChange { bindings, at_unix })
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
            if p.closed && p.changed.is_empty() {
                return None;
            }
            let due = match interval {
                None => !p.changed.is_empty(),
                Some(i) => p.closed || (since.elapsed() >= i && !p.changed.is_empty()),
            };
            if due {
                break;
            }
            p = match interval {
                // Nothing waits: sleep until `record` brings the first change (an idle writer
                // makes no system call; it used to look every millisecond).
                None => self.wake.wait(p).unwrap_or_else(PoisonError::into_inner),
                Some(_) if p.changed.is_empty() => self.wake.wait(p).unwrap_or_else(PoisonError::into_inner),
                Some(i) => {
                    let left = i.saturating_sub(since.elapsed()).max(Duration::from_millis(1));
                    self.wake.wait_timeout(p, left).unwrap_or_else(PoisonError::into_inner).0
                }
            };
        }
        let up_to = Ticket(p.seq);
        let aors: Vec<Aor> = p.changed.drain().collect();
        self.stats.queue_depth.store(0, Ordering::Relaxed);
        // Still under the queue's lock: `has_newer` must find every AoR in one set or the other.
        if self.loading.load(Ordering::Acquire) {
            lock(&self.taken_while_loading).extend(aors.iter().cloned());
        }
        drop(p);
        Some(Batch { aors, up_to })
    }

    /// Puts back the AoRs of a batch that could not be written (their state is read again).
    pub fn put_back(&self, batch: Batch) {
        let mut p = lock(&self.pending);
        p.changed.extend(batch.aors);
        self.stats.queue_depth.store(p.changed.len() as u64, Ordering::Relaxed);
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
        lock(&self.pending).changed.len()
    }
}

impl Journal<Peer> for ChangeQueue {
    fn record(&self, change: &AorBindings<'_, Peer>) -> Ticket {
        if self.mode == Mode::Memory {
            return Ticket::DURABLE;
        }
        let mut p = lock(&self.pending);
        p.seq += 1;
        let seq = p.seq;
        let first = p.changed.is_empty();
        if !p.changed.contains(change.aor()) {
            p.changed.insert(change.aor().clone());
            self.stats.queue_depth.store(p.changed.len() as u64, Ordering::Relaxed);
        }
        drop(p);
        match self.mode {
            Mode::WriteThrough => {
                self.wake.notify_one();
                Ticket(seq)
            }
            // Nobody waits for the change. The writer sleeps while nothing waits and is woken
            // by the first change; the others find it on its interval's timer (one wake per
            // interval, not per change).
            _ => {
                if first {
                    self.wake.notify_one();
                }
                Ticket::DURABLE
            }
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
            && (lock(&self.pending).changed.contains(aor) || lock(&self.taken_while_loading).contains(aor))
    }
}
