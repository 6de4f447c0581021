//! Balancing busy UDP receivers over the workers.
//!
//! SO_REUSEPORT spreads UDP over the workers' sockets by the hash of the source address, so
//! traffic from few peers - an SBC trunk, a load generator - can land on one socket and one
//! core while the others idle (seen here: two peers, both on worker 0, 725 against 2 ticks of
//! CPU). A receiver that is busy - it spent [`BUSY_SHARE`] or more of the last [`WINDOW`]
//! handling datagrams rather than waiting for them - therefore hands the messages of engine
//! shards it does not own (shard `s` is owned by worker `s % workers`, which also runs its
//! timers) to the owner's loop (batched, below), for the next [`BALANCE_HOLD`]. Every message
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
//! What a hand-over costs the receiver: as little as it can. Every message of one 4-tuple
//! passes through its one receiver thread, so what that thread does per message handed over
//! caps the 4-tuple's capacity however many workers share the rest (measured on a 16-core
//! machine: with 8 workers the receiver was 63% of its core and each other loop 11%). So the
//! receiver does not parse what it hands over: it peeks at the Call-ID of the raw datagram
//! (`herald_sip::peek::Peek`: the start line and the header lines up to the first Call-ID,
//! read by the parser's own line reader, so that the value is the one the full parse gives for
//! any message it accepts; a peek that fails or finds none leaves the message to be parsed here
//! as before), computes its shard, and queues the bytes for the shard's owner, which
//! classifies, admits and handles them (`HandedItem::Datagram`).
//! What one read (one recvmmsg) hands a worker leaves as one batch on its control channel
//! (`Ctl::Handed`): one channel operation and at most one wake-up of its loop per owner per
//! read, not per message. A message the receiver had to parse whose shard is another worker's
//! joins the same batch, parsed (`HandedItem::Parsed`): one way per owner, so a dialog's order
//! holds however its messages were read. Only a peek that read no Call-ID where the parse did
//! leads there (a trusted source, while handing over; a message without a valid Call-ID fails
//! the receipt checks, a truncated one is answered); the sip crate's tests find none
//! (`crates/sip/tests/peek.rs`), and `udp_handed_parsed` counts any (tests/balance.rs: none of
//! its Call-ID shapes).
//!
//! Measured with callgrind (`--separate-threads=yes`, the receiver thread alone; herald with 2
//! workers stopped by SIGSTOP while one socket queues 1,000 in-dialog INFOs of 40 dialogs, then
//! resumed, four times; 2,380 of the 4,000 handed over in both runs): per message handed over
//! the receiver did ~4,160 instructions beyond the read (`ingress::receive` 3,591: the full
//! parse and receipt checks; admission, shard and a channel send per message ~570), then ~890
//! with a Call-ID scan of its own (~870, queueing and the batch's send ~110, one clock read
//! less ~90). The whole thread: 37.36M → 30.55M instructions (9,339 → 7,638 per datagram read;
//! without the engine's handling of the 1,620 it kept, 4,876 → 3,190). The scan was then
//! replaced by the peek the load generator already used, which one home for that reading asked
//! for and which costs less: 621 instructions a message against the scan's 903 over SIPp's six
//! messages of a call (callgrind, the two side by side in one example). The messages the
//! receiver keeps pay the peek on top of their parse.
//!
//! Protections (flood guard, overload, limits) are applied to a handed datagram by its owner
//! exactly as the receiver would have: with the reader's shedding state (`Reader::shedding`) as
//! well as the owner's, counted as received by the reader's worker, malformed ones answered
//! from the owner's socket of the same local address. A message the receiver parsed was
//! admitted by it before it was handed over. Only messages from `[flood] trusted` sources (or
//! any, without `[flood]`) are handed over: an untrusted source is rate-limited far below a
//! worker's capacity, and its requests must pass the guard after its earlier ones were handled
//! (an authentication failure bans before the next guess is admitted); its messages are still
//! parsed, admitted and handled where they are read. The channel is unbounded, the hand-over
//! not: a receiver with `[limits] inbox_capacity` messages handed and not yet sent waits.

use crate::runtime::{Ctl, HandedBatch, HandedItem, Reader};
use crate::shared::{Shared, WorkerCommon};
use crate::stats::Bump;
use herald_core::Peer;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    /// Which of its worker's UDP sockets the receiver reads.
    socket: usize,
    /// This read's hand-overs, by owning worker: sent at its end ([`Balance::send`]).
    batches: Vec<Vec<HandedItem>>,
    /// Something was queued in `batches` since the last send: most reads hand nothing over,
    /// and their send need not look at every worker's batch.
    queued: bool,
}

impl Balance {
    /// For the receiver of UDP socket `socket` of a worker, one of `workers`.
    pub(crate) fn new(now: Instant, socket: usize, workers: usize) -> Balance {
        Balance {
            on: false,
            pending: Arc::new(AtomicUsize::new(0)),
            busy_at: None,
            window_at: now,
            handling: Duration::ZERO,
            batch_at: None,
            socket,
            batches: (0..workers).map(|_| Vec::new()).collect(),
            queued: false,
        }
    }

    /// Decides, before a batch read at `now` is handled, whether it hands over. It stops only
    /// once nothing it handed over is still pending.
    pub(crate) fn before_batch(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.window_at);
        if elapsed >= WINDOW {
            // While handing over, the receiver does only part of the work, so its share falls
            // although the load has not; the share that keeps it busy must fall as much, else it
            // would hand over and stop in turn, its socket backing up each time it stops. It
            // keeps the whole work of 1/workers of the shards, and a hand-over costs it about a
            // tenth of handling the message (~890 of the ~9-12k instructions a message costs in
            // all, module docs): a receiver found busy at BUSY_SHARE does about
            // BUSY_SHARE x (1/workers + 0.1) while handing over - 48% of its time with 2 workers, 18% with 8. BUSY_SHARE / workers
            // stays under that (40%, 10%), so only a load that really fell ends the hand-over.
            let share = if self.on { BUSY_SHARE / self.batches.len() as f64 } else { BUSY_SHARE };
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

impl Balance {
    /// Queues `item` for worker `owner`'s loop, counting it in `pending`; it leaves with this
    /// read's others at [`Balance::send`]. While `[limits] inbox_capacity` messages handed over
    /// are not yet sent, this thread sends what it queued and waits (its socket backs up, and
    /// its overload detector sees that): dropping or handling the message here could lose it or
    /// reorder it. Only a stopping server stops waiting.
    pub(super) fn queue(&mut self, shared: &Shared, common: &WorkerCommon, owner: usize, item: HandedItem) {
        shared.stats.workers[common.id].udp_handed_over.bump();
        if self.pending.load(Ordering::Acquire) >= shared.config.limits.inbox_capacity {
            self.send(shared, common);
            while self.pending.load(Ordering::Acquire) >= shared.config.limits.inbox_capacity
                && !shared.stopped.load(Ordering::Relaxed)
            {
                std::thread::yield_now();
            }
        }
        self.pending.fetch_add(1, Ordering::Relaxed);
        self.queued = true;
        let batch = &mut self.batches[owner];
        if batch.capacity() == 0 {
            batch.reserve(herald_sys::BATCH);
        }
        batch.push(item);
    }

    /// Sends each owner what this read handed it, in one batch (one channel operation and at
    /// most one wake-up of its loop). Only a stopped worker does not take it.
    pub(crate) fn send(&mut self, shared: &Shared, common: &WorkerCommon) {
        if !std::mem::take(&mut self.queued) {
            return;
        }
        for (owner, items) in self.batches.iter_mut().enumerate() {
            if items.is_empty() {
                continue;
            }
            let n = items.len();
            let batch = HandedBatch {
                origin: self.pending.clone(),
                reader: Reader {
                    worker: common.id,
                    socket: self.socket,
                    shedding: common.shedding.load(Ordering::Relaxed) > 0,
                },
                items: std::mem::take(items),
            };
            if shared.ctl[owner].send(Ctl::Handed(batch)).is_err() {
                self.pending.fetch_sub(n, Ordering::Release);
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
        let mut b = Balance::new(t0, 0, 2);
        // A burst: 2 ms of handling, then nothing until the window is over.
        b.before_batch(t0);
        b.after_batch(t0 + Duration::from_millis(2));
        b.before_batch(t0 + WINDOW);
        assert!(!b.on, "20% of the window busy: the receiver keeps up");
    }

    #[test]
    fn balancing_starts_when_busy_and_ends_only_when_nothing_handed_over_is_pending() {
        let t0 = Instant::now();
        let mut b = Balance::new(t0, 0, 2);
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

    /// A receiver of one of `workers` workers found busy (one window handling all the time);
    /// returns it and the end of that window.
    fn busy_receiver(workers: usize) -> (Balance, Instant) {
        let t0 = Instant::now();
        let mut b = Balance::new(t0, 0, workers);
        b.before_batch(t0);
        b.after_batch(t0 + WINDOW);
        b.before_batch(t0 + WINDOW);
        assert!(b.on);
        (b, t0 + WINDOW)
    }

    /// Spends `share` of each window for `windows` windows from `t` handing over; whether the
    /// receiver still hands over at the end.
    fn hands_over_after(b: &mut Balance, mut t: Instant, share: f64, windows: u32) -> bool {
        for _ in 0..windows {
            b.after_batch(t + WINDOW.mul_f64(share));
            t += WINDOW;
            b.before_batch(t);
        }
        b.on
    }

    #[test]
    fn the_share_that_keeps_a_receiver_handing_over_falls_with_the_workers() {
        // With 8 workers a receiver that hands 7/8 of its messages over is ~18% busy at the
        // load that made it busy: that must keep it on, for longer than the hold.
        let windows = (BALANCE_HOLD.as_millis() / WINDOW.as_millis()) as u32 * 3;
        let (mut b, t) = busy_receiver(8);
        assert!(hands_over_after(&mut b, t, 0.18, windows), "8 workers, 18% busy: still the load that made it busy");
        let (mut b, t) = busy_receiver(8);
        assert!(!hands_over_after(&mut b, t, 0.05, windows), "8 workers, 5% busy: the load fell");
        let (mut b, t) = busy_receiver(2);
        assert!(hands_over_after(&mut b, t, 0.45, windows), "2 workers, 45% busy: still the load that made it busy");
        let (mut b, t) = busy_receiver(2);
        assert!(!hands_over_after(&mut b, t, 0.30, windows), "2 workers, 30% busy: the load fell");
    }
}
