//! What a worker knows of its shards' deadlines between walks over them: a value no later than
//! any of them, kept up to date by taking what publishers lowered since (module
//! `shard_timers`), so that the worker reads every shard only when that value has passed.
//!
//! A timer run a [`TICK`](crate::runtime::TICK) after one that found work mostly finds none,
//! and a worker that raised its wake-up had to read every deadline again to see whether a
//! publisher lowered one meanwhile: with 64 shards each read was ~1k instructions (callgrind,
//! issue 21). One swap of the owner's `lowered` answers both.

use crate::shard_timers::ShardTimers;

pub(super) struct Lookout {
    /// No later than the deadline of any of the worker's shards, except those published since
    /// the last [`Lookout::look`]: they are in the owner's `lowered`, and a publisher whose
    /// deadline is more than a tick before the worker's `armed` wakes it.
    earliest: u64,
}

impl Lookout {
    /// `earliest`: read from every shard.
    pub(super) fn new(earliest: u64) -> Lookout {
        Lookout { earliest }
    }

    /// The earliest deadline known without a look.
    pub(super) fn earliest(&self) -> u64 {
        self.earliest
    }

    /// The earliest deadline of worker `worker`'s shards as far as it can be known without
    /// reading them: what it knew, lowered by what was published since. A timer run walks the
    /// shards only when this has passed; a worker that raised its `armed` looks after storing
    /// it (module `shard_timers`, "Memory order").
    pub(super) fn look(&mut self, timers: &ShardTimers, worker: usize) -> u64 {
        self.earliest = self.earliest.min(timers.take_lowered(worker));
        self.earliest
    }

    /// A walk over every shard (after a [`Lookout::look`], or with nothing taken since the
    /// last) found `earliest`.
    pub(super) fn walked(&mut self, earliest: u64) {
        self.earliest = earliest;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::TICK;
    use crate::shard_timers::NO_DEADLINE;
    use std::future::Future;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Barrier};
    use std::task::{Context, Poll, Waker};
    use tokio::sync::futures::OwnedNotified;

    /// A small deterministic generator (xorshift64*), so a failure replays.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) % n
        }
    }

    fn ready(f: std::pin::Pin<&mut OwnedNotified>) -> bool {
        f.poll(&mut Context::from_waker(Waker::noop())) == Poll::Ready(())
    }

    /// A shard's cached deadline as module `shards` keeps it: stored, then published.
    fn publish(timers: &ShardTimers, slots: &[AtomicU64], shard: usize, at: u64) {
        slots[shard].store(at, Ordering::SeqCst);
        timers.published(shard, at);
    }

    fn earliest_of(timers: &ShardTimers, slots: &[AtomicU64], worker: usize, workers: usize) -> u64 {
        (worker..slots.len())
            .step_by(workers)
            .map(|i| slots[i].load(Ordering::SeqCst).min(timers.alarm_of(i)))
            .min()
            .unwrap_or(NO_DEADLINE)
    }

    /// No missed run: whatever deadlines publishers raise or lower, and alarms rung, between
    /// looks and walks, a look is never later than the earliest deadline of the worker's
    /// shards, so a run that does not walk has nothing due; and a walk makes it exact again.
    #[test]
    fn a_look_is_never_later_than_any_deadline() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for workers in 1..=3usize {
            for shards in [1usize, 4, 7] {
                let timers = ShardTimers::new(shards, workers);
                let slots: Vec<_> = (0..shards).map(|_| AtomicU64::new(NO_DEADLINE)).collect();
                let mut lookouts: Vec<_> =
                    (0..workers).map(|w| Lookout::new(earliest_of(&timers, &slots, w, workers))).collect();
                for _ in 0..20_000 {
                    let shard = rng.below(shards as u64) as usize;
                    let at = match rng.below(8) {
                        0 => NO_DEADLINE,
                        _ => rng.below(1_000),
                    };
                    match rng.below(10) {
                        0..=5 => publish(&timers, &slots, shard, at),
                        6 if at != NO_DEADLINE => timers.alarm(shard, timers.decode(at).unwrap()),
                        6 => timers.take_alarm(shard, rng.below(1_000)),
                        7 | 8 => {
                            let w = rng.below(workers as u64) as usize;
                            let seen = lookouts[w].look(&timers, w);
                            assert!(seen <= earliest_of(&timers, &slots, w, workers), "{workers} {shards}");
                        }
                        _ => {
                            let w = rng.below(workers as u64) as usize;
                            lookouts[w].look(&timers, w);
                            lookouts[w].walked(earliest_of(&timers, &slots, w, workers));
                        }
                    }
                }
            }
        }
    }

    /// No lost wake-up: while a worker raises its `armed` and then looks, other threads publish
    /// deadlines; afterwards every deadline published more than a tick before the raised
    /// `armed` was either seen by the look or left the worker woken.
    #[test]
    fn a_raise_races_no_publisher_into_a_lost_wake_up() {
        const PUBLISHERS: usize = 3;
        let tick = TICK.as_nanos() as u64;
        let timers = Arc::new(ShardTimers::new(4, 1));
        let slots: Arc<Vec<_>> = Arc::new((0..4).map(|_| AtomicU64::new(NO_DEADLINE)).collect());
        let start = Arc::new(Barrier::new(PUBLISHERS + 1));
        let done = Arc::new(Barrier::new(PUBLISHERS + 1));
        let rounds = 3_000u64;
        let published: Vec<_> = (0..PUBLISHERS)
            .map(|p| {
                let (timers, slots, start, done) = (timers.clone(), slots.clone(), start.clone(), done.clone());
                std::thread::spawn(move || {
                    let mut rng = Rng(p as u64 * 7919 + 1);
                    let mut sent = Vec::new();
                    for _ in 0..rounds {
                        start.wait();
                        let at = 1_000 * tick + rng.below(10 * tick);
                        publish(&timers, &slots, rng.below(4) as usize, at);
                        sent.push(at);
                        done.wait();
                    }
                    sent
                })
            })
            .collect();
        let mut lookout = Lookout::new(NO_DEADLINE);
        let mut rng = Rng(42);
        let mut seen = Vec::new();
        for _ in 0..rounds {
            // Every shard far off, the worker armed for one of them and knowing it.
            for s in slots.iter() {
                s.store(NO_DEADLINE, Ordering::SeqCst);
            }
            timers.arm(0, NO_DEADLINE);
            timers.take_lowered(0);
            lookout.walked(NO_DEADLINE);
            // A fresh notification, not the permit a wake of the last round left.
            let mut woken = Box::pin(timers.woken(0));
            while ready(woken.as_mut()) {
                woken = Box::pin(timers.woken(0));
            }
            timers.arm(0, 900 * tick);
            start.wait();
            // Raised as `Worker::arm` raises it: store, then look.
            let armed = 1_000 * tick + rng.below(12 * tick);
            timers.arm(0, armed);
            let known = lookout.look(&timers, 0);
            done.wait();
            let rang = ready(woken.as_mut());
            seen.push((armed, known, rang));
        }
        let sent: Vec<Vec<u64>> = published.into_iter().map(|h| h.join().unwrap()).collect();
        for (round, &(armed, known, rang)) in seen.iter().enumerate() {
            for p in &sent {
                let at = p[round];
                assert!(at + tick >= armed || known <= at || rang, "round {round}: {at} vs armed {armed}");
            }
        }
    }
}
