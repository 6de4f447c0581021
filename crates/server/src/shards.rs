//! The engine shards: `S` handler instances shared by all workers, each behind its own lock.
//!
//! A message belongs to shard `hash(Call-ID) % S` (`herald_core::inbound::shard`); the worker that received
//! it locks that shard for the `handle` call only - never across I/O or an await point - and then
//! carries out the outputs itself. Each shard's next timer deadline is cached in an atomic,
//! updated under the lock after every call, so the worker that services the shard's timers
//! (`shard % workers`) can find the due shards without taking their locks, and is woken when a
//! call on another thread brings one earlier than it sleeps until (module `shard_timers`).

use crate::runtime::TICK;
use crate::send_order::{Sender, Unsent};
use crate::shard_timers::{ShardTimers, NO_DEADLINE};
use crate::shared::WorkerCommon;
use herald_core::{Input, Output, SipHandler};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

/// Shards per worker: enough that two workers rarely want the same lock at the same moment.
const PER_WORKER: usize = 16;
/// The fewest shards, whatever the number of workers.
const MIN_SHARDS: usize = 64;
/// How many shards `workers` workers get: a power of two, at least [`MIN_SHARDS`].
pub(crate) fn shard_count(workers: usize) -> usize {
    workers.saturating_mul(PER_WORKER).max(MIN_SHARDS).next_power_of_two()
}

/// One shard on its own cache lines: the lock word and the deadline are written by every worker.
#[repr(align(128))]
struct Slot<H> {
    handler: Mutex<Held<H>>,
    /// The handler's `poll_timeout()`, encoded by [`ShardTimers::encode`].
    deadline: AtomicU64,
}

/// One worker's running share of the load over all shards (`limits.max_transactions`,
/// `limits.max_held_bytes`): the changes that the calls its threads made left in the shards'
/// `transactions()` and `held_bytes()`, as wrapping sums. A shard's change is added by whoever
/// called it, so a worker's share alone may be "negative" (a shard it filled, emptied by
/// another); the sum over all workers is the sum over the shards. Summing the workers' shares
/// costs a load or two per worker where the sum over every shard's cached values cost two
/// loads per shard, 64 shards, about twice a UDP call (~330 instructions, callgrind, issue 21).
/// On its own cache lines: written by that worker's threads only.
#[repr(align(128))]
#[derive(Default)]
struct Share {
    transactions: AtomicUsize,
    held: AtomicUsize,
}

/// Adds to a share what a shard's call changed in one of its counts (`was` to `now`), if it
/// changed it: a fall wraps, and the sum over the shares wraps back.
#[inline(always)]
fn add_change(share: &AtomicUsize, now: usize, was: usize) {
    if now != was {
        share.fetch_add(now.wrapping_sub(was), Ordering::Relaxed);
    }
}

/// A shard's handler and what its calls are given and leave, kept under its lock.
struct Held<H> {
    handler: H,
    /// The latest `now` a call was given: a later call never gets an earlier one.
    now: Instant,
    /// The deadline last published (`poll_timeout()`): when a call leaves it unchanged, there
    /// is nothing to publish.
    published: Option<Instant>,
    /// Which sender still holds UDP output of this shard (module `send_order`).
    unsent: Unsent,
    /// The handler's `transactions()` and `held_bytes()` as counted in the workers' shares.
    counted: (usize, usize),
}

pub(crate) struct Shards<H> {
    slots: Box<[Slot<H>]>,
    /// One per worker (see [`Share`]).
    shares: Box<[Share]>,
    timers: Arc<ShardTimers>,
    /// Calls into a handler that panicked (see [`Shards::guarded`]).
    panics: AtomicU64,
}

impl<H: SipHandler> Shards<H> {
    /// `count` shards whose timers `workers` workers service; `make(i)` builds shard `i`'s
    /// handler.
    pub(crate) fn new(count: usize, workers: usize, make: impl Fn(usize) -> H) -> Shards<H> {
        let timers = Arc::new(ShardTimers::new(count, workers));
        let shares: Box<[Share]> = (0..workers.max(1)).map(|_| Share::default()).collect();
        let slots: Box<[Slot<H>]> = (0..count)
            .map(|i| {
                let mut h = make(i);
                let alarm = timers.clone();
                h.set_timeout_waker(Box::new(move |at| alarm.alarm(i, at)));
                let published = h.poll_timeout();
                let deadline = AtomicU64::new(timers.encode(published));
                let counted = (h.transactions(), h.held_bytes());
                shares[0].transactions.fetch_add(counted.0, Ordering::Relaxed);
                shares[0].held.fetch_add(counted.1, Ordering::Relaxed);
                let now = timers.epoch();
                let handler = Mutex::new(Held { handler: h, now, published, unsent: Unsent::default(), counted });
                Slot { handler, deadline }
            })
            .collect();
        Shards { slots, shares, timers, panics: AtomicU64::new(0) }
    }

    pub(crate) fn timers(&self) -> &ShardTimers {
        &self.timers
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Shard `i`'s handler, locked. A panic is caught inside the lock (see [`Shards::guarded`]),
    /// so the lock is never poisoned by one; poisoning is ignored all the same.
    fn lock(&self, i: usize) -> MutexGuard<'_, Held<H>> {
        self.slots[i].handler.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on shard `i`'s handler. Every input is hostile until proven otherwise: should a
    /// handler bug panic on one, that input is dropped (with whatever outputs it had produced),
    /// the panic is logged and counted, and the shard and its worker keep serving - one bad
    /// datagram must not take the server down.
    ///
    /// `now`: when the caller read its batch, or later. Callers on several threads may come in
    /// with instants out of order: a shard is given the latest it has seen, so that its clock
    /// never goes back. (The instant is the caller's, read once per batch of messages, not one
    /// clock read per call under the lock: ~40 instructions a message, callgrind, issue 21.)
    ///
    /// `me`: the caller's sender, which sends `out`. While another sender has not yet carried
    /// out this shard's output, the call waits (lock released, `me` flushed) until it has, so
    /// that the shard's sends leave in the order it produced them (module `send_order`).
    ///
    /// True when the shard holds more transactions after the call than before it.
    fn guarded(
        &self,
        i: usize,
        now: Instant,
        out: &mut Vec<Output>,
        me: &mut impl Sender,
        f: impl FnOnce(&mut H, Instant, &mut Vec<Output>),
    ) -> bool {
        let mut held = loop {
            let mut held = self.lock(i);
            let Some((by, flush)) = held.unsent.must_wait(me.flushes()) else { break held };
            drop(held);
            me.flush();
            by.wait_for(flush);
        };
        let held = &mut *held;
        let now = now.max(held.now);
        held.now = now;
        let before = out.len();
        let h = &mut held.handler;
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(h, now, out)));
        if result.is_err() {
            out.truncate(before);
            self.panics.fetch_add(1, Ordering::Relaxed);
            tracing::error!(shard = i, "handler panicked; the input was dropped and the shard keeps serving");
        }
        // Any output, not only datagrams: a stream send leaves in the caller's dispatch, after
        // the lock is released, and must not be overtaken either.
        if out.len() > before {
            held.unsent.queued(me.flushes());
            me.owe_flush();
        }
        self.publish(i, held, me.worker())
    }

    /// `handle` on shard `i` at `now` (see [`Shards::guarded`]). True when the shard holds
    /// more transactions than before: the input started one (what a per-source budget charges
    /// for an answer, module `source_budget`).
    pub(crate) fn handle(
        &self,
        i: usize,
        input: Input,
        now: Instant,
        out: &mut Vec<Output>,
        me: &mut impl Sender,
    ) -> bool {
        self.guarded(i, now, out, me, |h, now, out| h.handle(now, input, out))
    }

    /// `handle_timeouts` on shard `i`.
    pub(crate) fn handle_timeouts(&self, i: usize, now: Instant, out: &mut Vec<Output>, me: &mut impl Sender) {
        self.guarded(i, now, out, me, |h, now, out| h.handle_timeouts(now, out));
    }

    /// How many handler calls panicked since start.
    pub(crate) fn panics(&self) -> u64 {
        self.panics.load(Ordering::Relaxed)
    }

    /// Called with the lock held, so that a later call's deadline is never overwritten by an
    /// earlier one's. A deadline the call left as it was is published already: the slot holds
    /// it, and its owner, which reads the slots whenever it sleeps longer (module
    /// `shard_timers`), has seen it or was woken for it. The change in the shard's load goes
    /// to the share of `worker`, the caller's. True when the shard's transactions grew.
    fn publish(&self, i: usize, held: &mut Held<H>, worker: usize) -> bool {
        let h = &held.handler;
        let next = h.poll_timeout();
        if next != held.published {
            held.published = next;
            let at = self.timers.encode(next);
            // SeqCst: see module `shard_timers`, "Memory order".
            self.slots[i].deadline.store(at, Ordering::SeqCst);
            self.timers.published(i, at);
        }
        // Into the caller's worker's share: no counter that every worker would update on
        // every message.
        let share = self.shares.get(worker).unwrap_or(&self.shares[0]);
        let (transactions, bytes) = (h.transactions(), h.held_bytes());
        add_change(&share.transactions, transactions, held.counted.0);
        add_change(&share.held, bytes, held.counted.1);
        let grew = transactions > held.counted.0;
        held.counted = (transactions, bytes);
        grew
    }

    /// Transactions held over all shards, as of their last calls (no lock: see
    /// [`Shards::load`]).
    pub(crate) fn transactions(&self) -> usize {
        self.load().0
    }

    /// Transactions and bytes of messages held over all shards as of their last calls: the sum
    /// of the workers' shares (no lock; two relaxed loads per worker, sampled once per tick by
    /// the threads that admit messages, see [`LoadGauges`]). The shares are read one after the
    /// other while other threads add to them, so a sum may miss a change that a later one
    /// counts, as a walk over the shards read while they change did; a sum that misses the
    /// increase a later decrease undoes would be below zero, and reads as zero.
    fn load(&self) -> (usize, usize) {
        let (t, b) = self.shares.iter().fold((0usize, 0usize), |(t, b), s| {
            (t.wrapping_add(s.transactions.load(Ordering::Relaxed)), b.wrapping_add(s.held.load(Ordering::Relaxed)))
        });
        let at_least_zero = |v: usize| if (v as isize) < 0 { 0 } else { v };
        (at_least_zero(t), at_least_zero(b))
    }

    /// When shard `i` next has timer work (no lock): its cached deadline or, if earlier, the
    /// alarm its handler rang since (encoded; `NO_DEADLINE`: none).
    pub(crate) fn due(&self, i: usize) -> u64 {
        self.slots[i].deadline.load(Ordering::SeqCst).min(self.timers.alarm_of(i))
    }

    /// The earliest deadline (encoded, as [`Shards::due`]) of shards `first`, `first + step`, ...
    /// (no lock), after `run(i)` on each of them that is due at `now_at`: for such a shard the
    /// deadline counted is the one read after `run`. ([`Shards::earliest`] runs nothing.)
    ///
    /// One pass over local slices: a worker's walk over its shards through [`Shards::due`] read
    /// each shard's slot and alarm through the shard table again after every atomic load, ~30
    /// instructions a shard, 64 shards on every timer run and every re-arm (callgrind, issue 21).
    /// The due shards of up to 64 read in a row are noted as bits and run after those reads, in
    /// the same order: a loop that runs them as it goes kept its state on the stack around the
    /// call, ~19 instructions a shard that is not due instead of ~11.
    ///
    /// The reads of a window are [`due_in`]'s, a function of its own: inside this one, whose
    /// `run` is a whole shard call (lock, engine, publish) inlined, the read loop kept its
    /// state on the stack (16 instructions a shard that is not due, 14 in `due_in`), and a due
    /// shard's bit cost a division by the step (callgrind, issue 21).
    pub(crate) fn run_due(&self, first: usize, step: usize, now_at: u64, mut run: impl FnMut(usize)) -> u64 {
        let slots = &self.slots[..];
        let alarms = &self.timers.alarms()[..slots.len()];
        let (mut earliest, mut start, step) = (NO_DEADLINE, first, step.max(1));
        while start < slots.len() {
            let end = slots.len().min(start.saturating_add(64 * step));
            let (mut due_bits, not_due) = due_in(slots, alarms, start, end, step, now_at);
            earliest = earliest.min(not_due);
            while due_bits != 0 {
                let i = start + due_bits.trailing_zeros() as usize * step;
                due_bits &= due_bits - 1;
                run(i);
                earliest = earliest.min(self.due(i));
            }
            start = end;
        }
        earliest
    }

    /// The earliest deadline (encoded) of shards `first`, `first + step`, ... (no lock).
    pub(crate) fn earliest(&self, first: usize, step: usize) -> u64 {
        let slots = &self.slots[..];
        let alarms = &self.timers.alarms()[..slots.len()];
        let (mut earliest, mut i, step) = (NO_DEADLINE, first, step.max(1));
        while i < slots.len() {
            earliest = earliest.min(slots[i].deadline.load(Ordering::SeqCst).min(alarms[i].load(Ordering::SeqCst)));
            i += step;
        }
        earliest
    }

    /// Transactions still running over all shards (each locked briefly in turn).
    pub(crate) fn active_transactions(&self) -> usize {
        (0..self.slots.len()).map(|i| self.lock(i).handler.active_transactions()).sum()
    }
}

/// Reads the deadlines of shards `start`, `start + step`, ... before `end` (at most 64 of them):
/// which are due at `now_at`, as bits by their place in that sequence (bit 0: `start`), and the
/// earliest deadline of the others (encoded; [`NO_DEADLINE`]: none). A shard's deadline is its
/// slot's or, if earlier, its alarm's.
#[inline(never)]
fn due_in<H>(
    slots: &[Slot<H>],
    alarms: &[AtomicU64],
    start: usize,
    end: usize,
    step: usize,
    now_at: u64,
) -> (u64, u64) {
    let (mut due_bits, mut earliest) = (0u64, NO_DEADLINE);
    // Cut to `end`: the reads below need no bounds test of their own.
    let (slots, alarms) = (&slots[..end], &alarms[..end]);
    let (mut i, mut bit) = (start, 0u32);
    while i < end {
        let due = slots[i].deadline.load(Ordering::SeqCst).min(alarms[i].load(Ordering::SeqCst));
        if due <= now_at {
            // At most 64 shards a window: `bit` < 64.
            due_bits |= 1 << bit;
        } else {
            earliest = earliest.min(due);
        }
        i += step;
        bit += 1;
    }
    (due_bits, earliest)
}

/// A thread's copy, into its worker's [`WorkerCommon`], of the load over all shards that
/// `limits.max_transactions` and `limits.max_held_bytes` bound: refreshed by the threads that
/// admit messages (each dispatcher: a UDP receiver's, the worker loop's, its connections'),
/// when a new request is to be judged against them and at most once per [`TICK`] - a sum of
/// one load per shard, never per message, and no periodic wake-up: with no new requests
/// nothing reads the gauges.
pub(crate) struct LoadGauges {
    next: Option<Instant>,
}

impl LoadGauges {
    pub(crate) fn new() -> LoadGauges {
        LoadGauges { next: None }
    }

    pub(crate) fn refresh<H: SipHandler>(&mut self, shards: &Shards<H>, common: &WorkerCommon, now: Instant) {
        if self.next.is_some_and(|next| now < next) {
            return;
        }
        self.next = Some(now + TICK);
        let (transactions, held) = shards.load();
        common.transactions.store(transactions, Ordering::Relaxed);
        common.held_bytes.store(held, Ordering::Relaxed);
    }
}

#[cfg(test)]
#[path = "shards_tests.rs"]
mod tests;
