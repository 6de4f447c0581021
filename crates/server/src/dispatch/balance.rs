//! Balancing busy UDP receivers over the workers.
//!
//! SO_REUSEPORT spreads UDP over the workers' sockets by the hash of the source address, so
//! traffic from few peers - an SBC trunk, a load generator - can land on one socket and one
//! core while the others idle (seen here: two peers, both on worker 0, 725 against 2 ticks of
//! CPU). A receiver that is busy - it spent [`BUSY_SHARE`] or more of the last [`WINDOW`]
//! handling datagrams rather than waiting for them - therefore hands the messages of engine
//! shards it does not own (shard `s` is owned by worker `s % workers`, which also runs its
//! timers) to the owner's loop, through the inbox, for the next [`BALANCE_HOLD`]. Every message
//! of a dialog lives in one shard, so:
//! * while handing over, a shard's messages from this socket all go one way (its owner), in
//!   order;
//! * to go back to handling them itself, the receiver waits until every message it handed over
//!   has been handled and sent (`Balance::pending` is released after the owner's sendmmsg), so
//!   it never overtakes one of its own.
//!
//! Why time and not the size of a read (the first rule: a read of 8 or more datagrams): a peer
//! that sends in bursts - `herald bench`, which sends what one wake-up produced in one
//! sendmmsg, as an SBC flushing its queue does - fills reads of 8 and more while the receiver
//! idles most of the time. Measured at 2,000 calls/s from one generator (two workers, both of its
//! sockets on worker 0's receiver): 40% of the messages were handed over, and CPU per call was
//! 1.18x one worker's, for nothing - one thread had the time to do it all. A hand-over costs a
//! cross-thread wake-up and cache traffic; it pays only when the receiver cannot keep up, which
//! is what its busy share says. A burst is absorbed by the socket queue (a millisecond or two).
//!
//! Protections (flood guard, overload, limits) are applied by the receiver before it hands a
//! message over, exactly as if it handled it. Only messages from `[flood] trusted` sources (or
//! any, without `[flood]`) are handed over: an untrusted source is rate-limited far below a
//! worker's capacity, and its requests must pass the guard after its earlier ones were handled
//! (an authentication failure bans before the next guess is admitted).

use crate::runtime::InboxMessage;
use crate::shared::Shared;
use crate::stats::Bump;
use herald_core::Peer;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// The share of [`WINDOW`] a receiver spent handling datagrams (read to sent) that makes it busy:
/// near saturation, with room left for the reads themselves and the bursts.
pub(crate) const BUSY_SHARE: f64 = 0.8;
/// Over how long the busy share is measured: long next to one batch (tens of datagrams, well
/// under a millisecond), short next to [`BALANCE_HOLD`].
pub(crate) const WINDOW: Duration = Duration::from_millis(10);
/// How long a receiver keeps handing over after it was last found busy.
pub(crate) const BALANCE_HOLD: Duration = Duration::from_millis(100);

/// A UDP receiver's hand-over state (module docs, "Balancing").
pub(crate) struct Balance {
    /// Handing the messages of other workers' shards to them, for this batch.
    pub on: bool,
    /// Messages this receiver handed over that are not yet handled and sent.
    pub pending: Arc<AtomicUsize>,
    /// When the receiver was last found busy.
    busy_at: Option<Instant>,
    /// The current measurement window: its start, and the time spent handling in it.
    window_at: Instant,
    handling: Duration,
    /// When the batch being handled was read.
    batch_at: Option<Instant>,
}

impl Balance {
    pub(crate) fn new(now: Instant) -> Balance {
        Balance {
            on: false,
            pending: Arc::new(AtomicUsize::new(0)),
            busy_at: None,
            window_at: now,
            handling: Duration::ZERO,
            batch_at: None,
        }
    }

    /// Decides, before a batch read at `now` is handled, whether it hands over. It stops only
    /// once nothing it handed over is still pending.
    pub(crate) fn before_batch(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.window_at);
        if elapsed >= WINDOW {
            // While handing over, the receiver does only part of the work, so its share falls
            // although the load has not: half the share keeps it busy (else it would hand over
            // and stop in turn, its socket backing up each time it stops).
            let share = if self.on { BUSY_SHARE / 2.0 } else { BUSY_SHARE };
            if self.handling.as_secs_f64() >= share * elapsed.as_secs_f64() {
                self.busy_at = Some(now);
            }
            self.window_at = now;
            self.handling = Duration::ZERO;
        }
        self.batch_at = Some(now);
        let busy = self.busy_at.is_some_and(|at| now.duration_since(at) < BALANCE_HOLD);
        self.on = busy || self.pending.load(Ordering::Acquire) > 0;
    }

    /// The batch read at the last [`Balance::before_batch`] is handled and sent, at `now`.
    pub(crate) fn after_batch(&mut self, now: Instant) {
        if let Some(at) = self.batch_at.take() {
            self.handling += now.saturating_duration_since(at);
        }
    }
}

/// Only a trusted source's messages are handed over (or anyone's without `[flood]`). An
/// untrusted source is held to `[flood] max_requests`, far below what one worker can serve,
/// so it never needs balancing; and handing its requests over would let its later requests
/// pass the guard before its earlier ones were handled - a password guesser would get tries
/// in after the failure that bans it.
pub(crate) fn may_hand_over(shared: &Shared, from: &Peer) -> bool {
    shared.flood.as_ref().is_none_or(|f| f.trusted(from.addr.ip()))
}

/// Queues `it` (a handed-over message of a shard worker `owner` owns) for that worker's
/// loop, counting it in `pending`, its receiver's count. A full inbox holds this thread until
/// there is room: dropping or handling the message here could lose it or reorder it. Only a
/// stopping server drops it.
pub(crate) fn hand_over(shared: &Shared, worker: usize, owner: usize, mut it: InboxMessage, pending: &AtomicUsize) {
    shared.stats.workers[worker].udp_handed_over.bump();
    pending.fetch_add(1, Ordering::Relaxed);
    loop {
        match shared.inboxes[owner].try_send(it) {
            Ok(()) => return,
            Err(mpsc::error::TrySendError::Full(back)) if !shared.stopped.load(Ordering::Relaxed) => {
                it = back;
                std::thread::yield_now();
            }
            Err(mpsc::error::TrySendError::Full(_) | mpsc::error::TrySendError::Closed(_)) => {
                pending.fetch_sub(1, Ordering::Release);
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_in_an_idle_window_does_not_balance() {
        let t0 = Instant::now();
        let mut b = Balance::new(t0);
        // A burst: 2 ms of handling, then nothing until the window is over.
        b.before_batch(t0);
        b.after_batch(t0 + Duration::from_millis(2));
        b.before_batch(t0 + WINDOW);
        assert!(!b.on, "20% of the window busy: the receiver keeps up");
    }

    #[test]
    fn balancing_starts_when_busy_and_ends_only_when_nothing_handed_over_is_pending() {
        let t0 = Instant::now();
        let mut b = Balance::new(t0);
        // Back-to-back batches for a whole window: the socket never empties.
        let batch = Duration::from_micros(500);
        let mut t = t0;
        while t < t0 + WINDOW {
            b.before_batch(t);
            assert!(!b.on, "not yet measured busy");
            t += batch;
            b.after_batch(t);
        }
        b.before_batch(t);
        assert!(b.on, "a window handling all the time: the receiver cannot keep up");
        b.after_batch(t + WINDOW / 2);
        b.before_batch(t + WINDOW);
        assert!(b.on, "handing over, half the window busy is still busy");
        b.after_batch(t + WINDOW);
        b.before_batch(t + WINDOW + BALANCE_HOLD / 2);
        assert!(b.on, "held after it was last found busy");
        let t = t + WINDOW;
        b.pending.fetch_add(2, Ordering::Relaxed);
        b.before_batch(t + BALANCE_HOLD * 2);
        assert!(b.on, "two handed messages not yet sent: handling their shards here could overtake them");
        b.pending.fetch_sub(2, Ordering::Release);
        b.before_batch(t + BALANCE_HOLD * 2);
        assert!(!b.on, "idle and nothing pending: back to handling everything where it is read");
    }
}
