//! The engine shards: `S` handler instances shared by all workers, each behind its own lock.
//!
//! A message belongs to shard `hash(Call-ID) % S` (`herald_core::inbound::shard`); the worker that received
//! it locks that shard for the `handle` call only - never across I/O or an await point - and then
//! carries out the outputs itself. Each shard's next timer deadline is cached in an atomic,
//! updated under the lock after every call, so the worker that services the shard's timers
//! (`shard % workers`) can find the due shards without taking their locks.

use herald_core::{Input, Output, SipHandler};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Shards per worker: enough that two workers rarely want the same lock at the same moment.
const PER_WORKER: usize = 16;
/// The fewest shards, whatever the number of workers.
const MIN_SHARDS: usize = 64;
/// A cached deadline meaning "no timer".
const NO_DEADLINE: u64 = u64::MAX;

/// How many shards `workers` workers get: a power of two, at least [`MIN_SHARDS`].
pub(crate) fn shard_count(workers: usize) -> usize {
    workers.saturating_mul(PER_WORKER).max(MIN_SHARDS).next_power_of_two()
}

/// One shard on its own cache lines: the lock word and the deadline are written by every worker.
#[repr(align(128))]
struct Slot<H> {
    handler: Mutex<H>,
    /// Nanoseconds since [`Shards::epoch`] of the handler's `poll_timeout()`, or [`NO_DEADLINE`].
    deadline: AtomicU64,
    /// The handler's `transactions()` after its last call (for `limits.max_transactions`).
    transactions: AtomicUsize,
    /// The handler's `held_bytes()` after its last call (for `limits.max_held_bytes`).
    held: AtomicUsize,
}

pub(crate) struct Shards<H> {
    slots: Box<[Slot<H>]>,
    epoch: Instant,
    /// Calls into a handler that panicked (see [`Shards::guarded`]).
    panics: AtomicU64,
}

impl<H: SipHandler> Shards<H> {
    /// `count` shards; `make(i)` builds shard `i`'s handler.
    pub(crate) fn new(count: usize, make: impl Fn(usize) -> H) -> Shards<H> {
        let epoch = Instant::now();
        let slots: Box<[Slot<H>]> = (0..count)
            .map(|i| {
                let h = make(i);
                let deadline = AtomicU64::new(encode(epoch, h.poll_timeout()));
                let transactions = AtomicUsize::new(h.transactions());
                let held = AtomicUsize::new(h.held_bytes());
                Slot { handler: Mutex::new(h), deadline, transactions, held }
            })
            .collect();
        Shards { slots, epoch, panics: AtomicU64::new(0) }
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Shard `i`'s handler, locked. A panic is caught inside the lock (see [`Shards::guarded`]),
    /// so the lock is never poisoned by one; poisoning is ignored all the same.
    fn lock(&self, i: usize) -> MutexGuard<'_, H> {
        self.slots[i].handler.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on shard `i`'s handler. Every input is hostile until proven otherwise: should a
    /// handler bug panic on one, that input is dropped (with whatever outputs it had produced),
    /// the panic is logged and counted, and the shard and its worker keep serving - one bad
    /// datagram must not take the server down.
    fn guarded(&self, i: usize, out: &mut Vec<Output>, f: impl FnOnce(&mut H, &mut Vec<Output>)) {
        let mut h = self.lock(i);
        let before = out.len();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&mut h, out)));
        if result.is_err() {
            out.truncate(before);
            self.panics.fetch_add(1, Ordering::Relaxed);
            tracing::error!(shard = i, "handler panicked; the input was dropped and the shard keeps serving");
        }
        self.publish(i, &h);
    }

    /// `handle` on shard `i`.
    pub(crate) fn handle(&self, i: usize, input: Input, out: &mut Vec<Output>) {
        self.guarded(i, out, |h, out| h.handle(Instant::now(), input, out));
    }

    /// `handle_timeouts` on shard `i`.
    pub(crate) fn handle_timeouts(&self, i: usize, now: Instant, out: &mut Vec<Output>) {
        self.guarded(i, out, |h, out| h.handle_timeouts(now, out));
    }

    /// How many handler calls panicked since start.
    pub(crate) fn panics(&self) -> u64 {
        self.panics.load(Ordering::Relaxed)
    }

    /// Called with the lock held, so that a later call's deadline is never overwritten by an
    /// earlier one's.
    fn publish(&self, i: usize, h: &H) {
        self.slots[i].deadline.store(encode(self.epoch, h.poll_timeout()), Ordering::Relaxed);
        // On the slot's own cache line, which this call writes anyway: no shared counter that
        // every worker would update on every message.
        self.slots[i].transactions.store(h.transactions(), Ordering::Relaxed);
        self.slots[i].held.store(h.held_bytes(), Ordering::Relaxed);
    }

    /// Transactions held over all shards, from the values cached after each call (no lock; one
    /// relaxed load per shard, so callers sample it once per tick, not per message).
    pub(crate) fn transactions(&self) -> usize {
        self.slots.iter().map(|s| s.transactions.load(Ordering::Relaxed)).sum()
    }

    /// Bytes of messages held over all shards, from the values cached after each call (as
    /// [`Shards::transactions`]).
    pub(crate) fn held_bytes(&self) -> usize {
        self.slots.iter().map(|s| s.held.load(Ordering::Relaxed)).sum()
    }

    /// Shard `i`'s cached next deadline (no lock).
    pub(crate) fn deadline(&self, i: usize) -> Option<Instant> {
        match self.slots[i].deadline.load(Ordering::Relaxed) {
            NO_DEADLINE => None,
            n => Some(self.epoch + Duration::from_nanos(n)),
        }
    }

    /// Transactions still running over all shards (each locked briefly in turn).
    pub(crate) fn active_transactions(&self) -> usize {
        (0..self.slots.len()).map(|i| self.lock(i).active_transactions()).sum()
    }
}

fn encode(epoch: Instant, at: Option<Instant>) -> u64 {
    match at {
        None => NO_DEADLINE,
        // A deadline before the epoch is due now (0); one past u64 nanoseconds (584 years) never.
        Some(t) => u64::try_from(t.saturating_duration_since(epoch).as_nanos()).unwrap_or(NO_DEADLINE - 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_powers_of_two_and_at_least_64() {
        assert_eq!(shard_count(1), 64);
        assert_eq!(shard_count(4), 64);
        assert_eq!(shard_count(5), 128);
        assert_eq!(shard_count(16), 256);
        assert_eq!(shard_count(17), 512);
    }
}
