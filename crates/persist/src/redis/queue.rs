//! The changes waiting to be written to Redis: the latest state of each changed AoR, bounded.
//!
//! The store's journal hook runs under a shard lock on a worker thread: it copies the AoR's
//! bindings here and wakes the Redis task, nothing more. While Redis is slow or down, a second
//! change of one AoR replaces the first (the value in Redis is the AoR's whole binding list, so
//! only the latest state matters). At most `capacity` AoRs wait; a change of one more AoR is
//! not kept, and the queue remembers that it overflowed: the next resync then writes the whole
//! local store (see `sync`), so nothing is lost, only written later.

use herald_core::Peer;
use herald_store::{Aor, AorBindings, Binding, Journal, Ticket};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};
use tokio::sync::Notify;

/// One AoR's state at the moment of its latest change: the bindings with `expires_at` holding
/// the seconds they had left, and that moment's wall clock.
#[derive(Debug, Clone)]
pub struct Change {
    pub bindings: Vec<Binding<Peer>>,
    pub at_ms: u64,
}

/// The queue; the store's [`Journal`] in Redis mode.
pub struct Pending {
    inner: Mutex<Inner>,
    wake: Notify,
    capacity: usize,
    /// AoRs waiting (a gauge for the metrics endpoint, readable without the lock).
    queued: AtomicU64,
    /// Changes not kept because the queue was full.
    overflows: AtomicU64,
    /// AoRs taken by the writer and not yet written (or put back).
    in_flight: AtomicU64,
}

#[derive(Default)]
struct Inner {
    latest: HashMap<Aor, Change>,
    overflowed: bool,
}

/// Wall-clock milliseconds since the Unix epoch.
pub fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Pending {
    pub fn new(capacity: usize) -> Pending {
        Pending {
            inner: Mutex::new(Inner::default()),
            wake: Notify::new(),
            capacity: capacity.max(1),
            queued: AtomicU64::new(0),
            overflows: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // Nothing panics while holding it; a poisoned map is still a valid map.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `change` as the latest state of `aor` (replacing an older one), unless the queue
    /// is full of other AoRs.
    pub fn push(&self, aor: &Aor, change: Change) {
        let mut inner = self.lock();
        if inner.latest.len() >= self.capacity && !inner.latest.contains_key(aor) {
            inner.overflowed = true;
            self.overflows.fetch_add(1, Ordering::Relaxed);
            return;
        }
        inner.latest.insert(aor.clone(), change);
        self.queued.store(inner.latest.len() as u64, Ordering::Relaxed);
        drop(inner);
        self.wake.notify_one();
    }

    /// Takes up to `max` AoRs to write.
    pub fn take(&self, max: usize) -> Vec<(Aor, Change)> {
        let mut inner = self.lock();
        let keys: Vec<Aor> = inner.latest.keys().take(max).cloned().collect();
        let batch: Vec<(Aor, Change)> =
            keys.into_iter().filter_map(|k| inner.latest.remove(&k).map(|c| (k, c))).collect();
        self.queued.store(inner.latest.len() as u64, Ordering::Relaxed);
        self.in_flight.fetch_add(batch.len() as u64, Ordering::Relaxed);
        batch
    }

    /// `n` AoRs of what [`Self::take`] gave are written.
    pub fn written(&self, n: usize) {
        self.in_flight.fetch_sub(n as u64, Ordering::Relaxed);
    }

    /// Nothing waits and nothing is being written.
    pub fn idle(&self) -> bool {
        self.queued.load(Ordering::Relaxed) == 0 && self.in_flight.load(Ordering::Relaxed) == 0
    }

    /// Puts back changes whose write failed, unless a newer change of the AoR came meanwhile.
    /// May exceed the capacity by what was taken: those AoRs held places before.
    pub fn put_back(&self, batch: Vec<(Aor, Change)>) {
        self.in_flight.fetch_sub(batch.len() as u64, Ordering::Relaxed);
        let mut inner = self.lock();
        for (aor, change) in batch {
            inner.latest.entry(aor).or_insert(change);
        }
        self.queued.store(inner.latest.len() as u64, Ordering::Relaxed);
    }

    /// Whether a change of `aor` is waiting: a value read from Redis is older than it and must
    /// not overwrite the local state (the write that follows wins, last writer wins per AoR).
    pub fn holds(&self, aor: &Aor) -> bool {
        self.lock().latest.contains_key(aor)
    }

    /// The waiting change of `aor`, with each binding's seconds left as of `now_ms` (rounded
    /// up; bindings that lapsed meanwhile left out).
    pub fn peek(&self, aor: &Aor, now_ms: u64) -> Option<Vec<Binding<Peer>>> {
        let inner = self.lock();
        let change = inner.latest.get(aor)?;
        let passed_s = u32::try_from(now_ms.saturating_sub(change.at_ms) / 1000).unwrap_or(u32::MAX);
        Some(
            change
                .bindings
                .iter()
                .filter(|b| b.expires_at > passed_s)
                .map(|b| Binding { expires_at: b.expires_at - passed_s, ..b.clone() })
                .collect(),
        )
    }

    /// Whether changes were dropped since the last call (and clears the mark).
    pub fn take_overflowed(&self) -> bool {
        std::mem::take(&mut self.lock().overflowed)
    }

    /// Marks the queue as overflowed again (a full write that was to make up for it failed).
    pub fn push_overflow_mark(&self) {
        self.lock().overflowed = true;
    }

    pub fn is_empty(&self) -> bool {
        self.lock().latest.is_empty()
    }

    /// Completes when something was pushed since the last wake-up.
    pub async fn woken(&self) {
        self.wake.notified().await
    }

    pub fn queued(&self) -> u64 {
        self.queued.load(Ordering::Relaxed)
    }

    pub fn overflows(&self) -> u64 {
        self.overflows.load(Ordering::Relaxed)
    }
}

impl Journal<Peer> for Pending {
    /// Copies the AoR's unexpired bindings (their seconds left) and returns at once: Redis mode
    /// never makes a REGISTER wait (the 200 OK says the binding is in this node's store; other
    /// nodes see it once the write lands, normally within a millisecond).
    fn record(&self, change: &AorBindings<'_, Peer>) -> Ticket {
        let bindings = change.live().map(|b| Binding { expires_at: change.expires_in(b), ..b.clone() }).collect();
        self.push(change.aor(), Change { bindings, at_ms: unix_ms() });
        Ticket::DURABLE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(n: u32) -> Change {
        Change { bindings: Vec::new(), at_ms: u64::from(n) }
    }

    fn aor(s: &str) -> Aor {
        Aor::from_canonical(s.as_bytes().to_vec())
    }

    #[test]
    fn the_latest_change_of_an_aor_wins_and_the_queue_is_bounded() {
        let q = Pending::new(2);
        q.push(&aor("a"), change(1));
        q.push(&aor("a"), change(2));
        q.push(&aor("b"), change(3));
        assert_eq!(q.queued(), 2);
        // Full: a third AoR is not kept, but the overflow is remembered once.
        q.push(&aor("c"), change(4));
        assert_eq!(q.overflows(), 1);
        assert!(q.take_overflowed());
        assert!(!q.take_overflowed());
        // A known AoR still replaces its state.
        q.push(&aor("b"), change(5));
        let mut batch = q.take(10);
        batch.sort_by(|x, y| x.0.cmp(&y.0));
        let got: Vec<u64> = batch.iter().map(|(_, c)| c.at_ms).collect();
        assert_eq!(got, [2, 5]);
        assert!(q.is_empty());
    }

    #[test]
    fn a_failed_write_goes_back_unless_a_newer_change_came() {
        let q = Pending::new(10);
        q.push(&aor("a"), change(1));
        q.push(&aor("b"), change(2));
        let batch = q.take(10);
        assert!(!q.idle());
        q.push(&aor("a"), change(3));
        q.put_back(batch);
        let mut back = q.take(10);
        back.sort_by(|x, y| x.0.cmp(&y.0));
        let got: Vec<u64> = back.iter().map(|(_, c)| c.at_ms).collect();
        assert_eq!(got, [3, 2]);
        assert!(!q.idle(), "taken, not written");
        q.written(back.len());
        assert!(q.idle());
        assert!(!q.holds(&aor("x")));
    }

    #[test]
    fn a_peeked_change_counts_the_time_since_it_was_made() {
        let q = Pending::new(10);
        let udp = Peer::udp("192.0.2.1:5060".parse().unwrap());
        let b = |left: u32| Binding {
            contact: "sip:a@192.0.2.1".into(),
            call_id: "c".into(),
            path: None,
            instance: None,
            source: udp,
            expires_at: left,
            cseq: 1,
            reg_id: None,
            q: None,
        };
        q.push(&aor("a"), Change { bindings: vec![b(60), b(2)], at_ms: 10_000 });
        assert_eq!(q.peek(&aor("a"), 12_500), Some(vec![b(58)]));
        assert_eq!(q.peek(&aor("b"), 12_500), None);
    }
}
