//! Balancing busy UDP receivers over the workers.
//!
//! SO_REUSEPORT spreads UDP over the workers' sockets by the hash of the source address, so
//! traffic from few peers - an SBC trunk, a load generator - can land on one socket and one
//! core while the others idle (seen here: two peers, both on worker 0, 725 against 2 ticks of
//! CPU). A receiver that finds its socket backing up (a read of [`BUSY_BATCH`] or more
//! datagrams) therefore hands the messages of engine shards it does not own (shard `s` is owned
//! by worker `s % workers`, which also runs its timers) to the owner's loop, through the inbox,
//! for the next [`BALANCE_HOLD`]. Every message of a dialog lives in one shard, so:
//! * while handing over, a shard's messages from this socket all go one way (its owner), in
//!   order;
//! * to go back to handling them itself, the receiver waits until every message it handed over
//!   has been handled and sent (`Balance::pending` is released after the owner's sendmmsg), so
//!   it never overtakes one of its own.
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

/// A read of this many datagrams means the socket is backing up: balance (see the module docs).
pub(crate) const BUSY_BATCH: usize = 8;
/// How long a receiver keeps handing over after its last busy read.
pub(crate) const BALANCE_HOLD: Duration = Duration::from_millis(100);

/// A UDP receiver's hand-over state (module docs, "Balancing").
pub(crate) struct Balance {
    /// Handing the messages of other workers' shards to them, for this batch.
    pub on: bool,
    /// Messages this receiver handed over that are not yet handled and sent.
    pub pending: Arc<AtomicUsize>,
    /// The last read of [`BUSY_BATCH`] or more datagrams.
    busy_at: Option<Instant>,
}

impl Balance {
    pub(crate) fn new() -> Balance {
        Balance { on: false, pending: Arc::new(AtomicUsize::new(0)), busy_at: None }
    }

    /// Decides, before a batch of `read` datagrams read at `now` is handled, whether it hands
    /// over. It stops only once nothing it handed over is still pending.
    pub(crate) fn before_batch(&mut self, read: usize, now: Instant) {
        if read >= BUSY_BATCH {
            self.busy_at = Some(now);
        }
        let busy = self.busy_at.is_some_and(|at| now.duration_since(at) < BALANCE_HOLD);
        self.on = busy || self.pending.load(Ordering::Acquire) > 0;
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
    fn balancing_starts_on_a_busy_read_and_ends_only_when_nothing_handed_over_is_pending() {
        let t0 = Instant::now();
        let mut b = Balance::new();
        b.before_batch(BUSY_BATCH - 1, t0);
        assert!(!b.on, "a short read: the socket is keeping up");
        b.before_batch(BUSY_BATCH, t0);
        assert!(b.on, "a long read: the socket is backing up");
        b.before_batch(1, t0 + BALANCE_HOLD / 2);
        assert!(b.on, "held after the last busy read");
        b.pending.fetch_add(2, Ordering::Relaxed);
        b.before_batch(1, t0 + BALANCE_HOLD * 2);
        assert!(b.on, "two handed messages not yet sent: handling their shards here could overtake them");
        b.pending.fetch_sub(2, Ordering::Release);
        b.before_batch(1, t0 + BALANCE_HOLD * 2);
        assert!(!b.on, "idle and nothing pending: back to handling everything where it is read");
    }
}
