//! When a worker wakes for the timers of the engine shards it services (shard `s`: worker
//! `s % workers`): at their next deadline, not on a period - an idle herald makes no system call.
//!
//! Any thread may change any shard's deadline (a UDP receiver or another worker handling one of
//! its messages; module `shards` caches each shard's deadline after every call). So each worker
//! publishes the instant it sleeps until (`armed`), and a call that leaves its shard with a
//! deadline more than [`TICK`] before that instant wakes the owner ([`ShardTimers::published`]).
//! A deadline that changes *between* calls - the location store's next expiry, brought earlier
//! by a REGISTER through another shard or by a durable copy's load - arrives as the shard's
//! alarm ([`ShardTimers::alarm`], given to the handler as its `set_timeout_waker`).
//!
//! Coalescing (module `worker`): a worker runs due timers at most once per [`TICK`]: after a run
//! that found work it sleeps until the next deadline but at least a [`TICK`]. A busy server thus
//! wakes its workers at most 1/[`TICK`] times a second, as a fixed tick did, and a new deadline
//! needs no cross-thread wake unless it is more than a [`TICK`] before the owner's next look
//! (under load that look is near; a new transaction's first timer is T1 = 500 ms or later). A
//! timer fires at most [`TICK`] late: small next to SIP's timers.
//!
//! What was published since a worker last looked: each publisher also lowers its owner's
//! `lowered` to the deadline it stored ([`ShardTimers::published`]), and the worker takes that
//! value ([`ShardTimers::take_lowered`]) instead of reading every shard's deadline again: after
//! it raises `armed`, and before a timer run, which walks the shards only when the earliest
//! deadline it knows of has passed (module `worker::lookout`). A walk over 64 shards was ~1k
//! instructions; a run a [`TICK`] after one that found work mostly finds none (callgrind,
//! issue 21).
//!
//! Memory order: a publisher stores the shard's deadline, lowers `lowered` and then reads
//! `armed`; a worker that raises `armed` takes `lowered` after storing it (all SeqCst), so
//! either the publisher sees the new `armed` and wakes it, or the worker sees the new deadline.

use crate::clock_reading::Reading;
use crate::runtime::TICK;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::futures::OwnedNotified;
use tokio::sync::Notify;

/// An encoded deadline meaning "no timer".
pub(crate) const NO_DEADLINE: u64 = u64::MAX;

/// Deadlines are nanoseconds since `epoch`, in atomics.
pub(crate) struct ShardTimers {
    epoch: Instant,
    /// `epoch`'s clock reading, where readings give what subtraction gives (module
    /// `clock_reading`): deadlines are then encoded without a call into std.
    epoch_reading: Option<Reading>,
    workers: usize,
    /// Per shard: the earliest deadline its handler reported between calls, or [`NO_DEADLINE`].
    /// Lowered by the alarm, taken by the owner when it runs the shard's timers.
    alarms: Box<[AtomicU64]>,
    owners: Box<[Owner]>,
}

/// What the other threads know of one worker's sleep; on its own cache lines (read by every
/// publisher, written by the worker when it re-arms).
#[repr(align(128))]
struct Owner {
    /// The deadline the worker sleeps until, or [`NO_DEADLINE`].
    armed: AtomicU64,
    /// The earliest deadline published for the worker's shards since it last took this value,
    /// or [`NO_DEADLINE`].
    lowered: AtomicU64,
    wake: Arc<Notify>,
}

impl ShardTimers {
    pub(crate) fn new(shards: usize, workers: usize) -> ShardTimers {
        let workers = workers.max(1);
        let epoch = Instant::now();
        ShardTimers {
            epoch,
            epoch_reading: Reading::of(epoch).filter(|_| Reading::matches(epoch)),
            workers,
            alarms: (0..shards).map(|_| AtomicU64::new(NO_DEADLINE)).collect(),
            owners: (0..workers)
                .map(|_| Owner {
                    armed: AtomicU64::new(NO_DEADLINE),
                    lowered: AtomicU64::new(NO_DEADLINE),
                    wake: Arc::new(Notify::new()),
                })
                .collect(),
        }
    }

    /// The instant encoded as 0 (set when these timers were made).
    pub(crate) fn epoch(&self) -> Instant {
        self.epoch
    }

    /// `at` in nanoseconds since the epoch. Before the epoch: due now (0); past u64 nanoseconds
    /// (584 years): never.
    pub(crate) fn encode(&self, at: Option<Instant>) -> u64 {
        let Some(t) = at else { return NO_DEADLINE };
        // From the clock readings where they serve (up to 292 years), the same nanoseconds.
        if let Some(nanos) = self.epoch_reading.and_then(|e| e.nanos_until(Reading::of(t)?)) {
            return nanos;
        }
        self.encode_by_subtraction(t)
    }

    /// [`ShardTimers::encode`] the general way.
    fn encode_by_subtraction(&self, t: Instant) -> u64 {
        u64::try_from(t.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(NO_DEADLINE - 1)
    }

    pub(crate) fn decode(&self, at: u64) -> Option<Instant> {
        (at != NO_DEADLINE).then(|| self.epoch + Duration::from_nanos(at))
    }

    /// The worker that runs shard `shard`'s timers.
    pub(crate) fn owner(&self, shard: usize) -> usize {
        shard % self.workers
    }

    /// A call on shard `shard` left it with deadline `at` (encoded): notes it for its worker's
    /// next look and wakes the worker if that sleeps past it by more than [`TICK`]. Call after
    /// storing the deadline (SeqCst).
    pub(crate) fn published(&self, shard: usize, at: u64) {
        let owner = &self.owners[self.owner(shard)];
        // A `lowered` at or below `at` already makes the worker look by `at`: whatever the
        // worker takes, before or after this load, is no later (see "Memory order").
        if at < owner.lowered.load(Ordering::SeqCst) {
            owner.lowered.fetch_min(at, Ordering::SeqCst);
        }
        if at.saturating_add(TICK.as_nanos() as u64) < owner.armed.load(Ordering::SeqCst) {
            owner.wake.notify_one();
        }
    }

    /// Shard `shard`'s handler says, between calls, that it has work at `at`.
    pub(crate) fn alarm(&self, shard: usize, at: Instant) {
        let at = self.encode(Some(at));
        let alarm = &self.alarms[shard];
        if at < alarm.load(Ordering::SeqCst) {
            alarm.fetch_min(at, Ordering::SeqCst);
            self.published(shard, at);
        }
    }

    /// Shard `shard`'s alarm (encoded).
    pub(crate) fn alarm_of(&self, shard: usize) -> u64 {
        self.alarms[shard].load(Ordering::SeqCst)
    }

    /// Every shard's alarm, by shard (for a walk over many: module `shards`).
    pub(crate) fn alarms(&self) -> &[AtomicU64] {
        &self.alarms
    }

    /// Clears shard `shard`'s alarm if it is due at `now` (encoded), before its timers run: the
    /// call's own deadline covers what it reported; an alarm rung after this is kept.
    pub(crate) fn take_alarm(&self, shard: usize, now: u64) {
        let alarm = &self.alarms[shard];
        if alarm.load(Ordering::SeqCst) <= now {
            alarm.store(NO_DEADLINE, Ordering::SeqCst);
        }
    }

    /// Worker `worker` now sleeps until `at` (encoded).
    pub(crate) fn arm(&self, worker: usize, at: u64) {
        self.owners[worker].armed.store(at, Ordering::SeqCst);
    }

    /// The earliest deadline published for worker `worker`'s shards since the last take
    /// (encoded; [`NO_DEADLINE`]: none), and from now on none.
    pub(crate) fn take_lowered(&self, worker: usize) -> u64 {
        self.owners[worker].lowered.swap(NO_DEADLINE, Ordering::SeqCst)
    }

    /// Ready when a publisher wants worker `worker` to look at its deadlines.
    pub(crate) fn woken(&self, worker: usize) -> OwnedNotified {
        self.owners[worker].wake.clone().notified_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    fn ready(f: std::pin::Pin<&mut OwnedNotified>) -> bool {
        f.poll(&mut Context::from_waker(Waker::noop())) == Poll::Ready(())
    }

    #[test]
    fn a_deadline_wakes_its_owner_only_when_it_sleeps_past_it() {
        let t = ShardTimers::new(4, 2);
        let tick = TICK.as_nanos() as u64;
        // Worker 1 (shards 1 and 3) sleeps until 1 s.
        t.arm(1, 1_000_000_000);
        let mut woken = pin!(t.woken(1));
        assert!(!ready(woken.as_mut()));
        // Within a tick of what it is armed for: coalesced, no wake.
        t.published(3, 1_000_000_000 - tick);
        t.published(2, 0); // worker 0's shard
        assert!(!ready(woken.as_mut()));
        t.published(3, 1_000_000_000 - tick - 1);
        assert!(ready(woken.as_mut()));
        // Sleeping without a deadline: any deadline wakes it.
        t.arm(1, NO_DEADLINE);
        let mut woken = pin!(t.woken(1));
        t.published(1, 5_000_000_000_000);
        assert!(ready(woken.as_mut()));
    }

    #[test]
    fn encoding_from_readings_is_encoding_by_subtraction() {
        let t = ShardTimers::new(1, 1);
        assert!(t.epoch_reading.is_some(), "a Unix Instant gives readings");
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for i in 0..20_000u64 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            let d = Duration::from_nanos(if i % 2 == 0 { x >> 20 } else { i * 999_999_937 });
            for at in [t.epoch.checked_add(d), t.epoch.checked_sub(d)].into_iter().flatten() {
                assert_eq!(t.encode(Some(at)), t.encode_by_subtraction(at));
            }
        }
        let far = t.epoch.checked_add(Duration::from_secs(300 * 365 * 86_400));
        if let Some(far) = far {
            assert_eq!(t.encode(Some(far)), t.encode_by_subtraction(far));
        }
        assert_eq!(t.encode(None), NO_DEADLINE);
    }

    #[test]
    fn an_alarm_is_kept_until_taken_and_only_lowered() {
        let t = ShardTimers::new(2, 1);
        let at = t.epoch + Duration::from_secs(60);
        t.alarm(0, at);
        t.alarm(0, at + Duration::from_secs(1));
        assert_eq!(t.decode(t.alarm_of(0)), Some(at));
        // Not due yet at 59 s: kept.
        t.take_alarm(0, 59_000_000_000);
        assert_eq!(t.decode(t.alarm_of(0)), Some(at));
        t.take_alarm(0, 60_000_000_000);
        assert_eq!(t.alarm_of(0), NO_DEADLINE);
        assert_eq!(t.alarm_of(1), NO_DEADLINE);
    }
}
