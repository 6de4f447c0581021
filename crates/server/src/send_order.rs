//! One engine shard's sends leave in the order the shard produced them, whichever threads carry
//! them out.
//!
//! A thread that handles a message carries out its output after it has released the shard's
//! lock: stream sends in its dispatch, datagrams at its next flush (one sendmmsg per batch,
//! module `egress`). Another thread that takes the lock in between could send what the shard
//! produced later first: a UDP receiver answered a retransmitted INVITE with a 100 (Trying) and
//! was preempted before its flush, while the worker's thread forwarded the callee's 200 over UDP
//! at once, so the caller got the 100 after the 200 (tests/sipp_calls.rs,
//! `udp_caller_to_tcp_callee_double_record_route`, under CPU load). Flushing under the lock
//! would keep the order but cost one sendmmsg per message instead of one per batch.
//!
//! So a shard remembers, under its lock, which sender left output of it not yet carried out and
//! which of that sender's flushes (the end of a receiver's batch, of a worker loop's turn, of a
//! connection's read: each after the dispatch) carries it out ([`Unsent`]). A thread that takes
//! the lock while another sender's output is still pending lets go of the lock, flushes its own
//! queue, waits until that flush of the other sender has happened, and takes the lock again
//! ([`Flushes::wait_for`]). No thread waits while it holds a lock or has pending output of its
//! own, so no two threads wait for each other. The wait is as long as the rest of the other
//! sender's batch (a receiver's up to 32 datagrams, a worker loop's turn) and happens only when
//! two threads handle one shard within that time, which one dialog's messages rarely do.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How many flushes one sender (a thread's `Egress`) has completed.
#[derive(Default)]
pub(crate) struct Flushes(AtomicU64);

impl Flushes {
    /// The number of the sender's next flush: what sends output queued now. Read by the sender
    /// itself only, which alone counts.
    pub(crate) fn next(&self) -> u64 {
        self.0.load(Ordering::Relaxed) + 1
    }

    /// Called by the sender after each flush, once everything it was given before is with the
    /// kernel (or in a stream connection's write queue).
    pub(crate) fn completed(&self) {
        self.0.fetch_add(1, Ordering::Release);
    }

    /// Whether flush number `flush` has completed.
    pub(crate) fn done(&self, flush: u64) -> bool {
        self.0.load(Ordering::Acquire) >= flush
    }

    /// Blocks until flush number `flush` has completed: spins briefly, then yields, then
    /// sleeps in short steps (a sender held by a full send buffer flushes within 100 ms).
    pub(crate) fn wait_for(&self, flush: u64) {
        let mut tries = 0u32;
        while !self.done(flush) {
            tries += 1;
            if tries < 64 {
                std::hint::spin_loop();
            } else if tries < 128 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }
}

/// What a sender implements for the shards (module `egress`): its flush count, and its flush.
pub(crate) trait Sender {
    fn flushes(&self) -> &Arc<Flushes>;
    /// The worker whose thread this sender is (the shards count the load its calls leave in
    /// that worker's share, module `shards`).
    fn worker(&self) -> usize;
    /// A shard took the number of this sender's next flush ([`Unsent::queued`]): that flush
    /// must happen and be counted, even if nothing else is queued by then.
    fn owe_flush(&mut self);
    /// Sends everything queued and counts the flush (a sender owed nothing since its last
    /// flush may skip it, count included: nobody waits for that number).
    fn flush(&mut self);
}

/// Kept under a shard's lock: the last sender that left output of the shard not carried out,
/// and the flush of that sender after which it is.
#[derive(Default)]
pub(crate) struct Unsent(Option<(Arc<Flushes>, u64)>);

impl Unsent {
    /// Whether a call by `me` must wait, and for which flush of whom: another sender's output
    /// of this shard is pending. Forgets output that has been carried out.
    pub(crate) fn must_wait(&mut self, me: &Arc<Flushes>) -> Option<(Arc<Flushes>, u64)> {
        let (by, flush) = self.0.as_ref()?;
        if Arc::ptr_eq(by, me) {
            return None;
        }
        if by.done(*flush) {
            self.0 = None;
            return None;
        }
        Some((by.clone(), *flush))
    }

    /// `me` has output of this shard to carry out, done by its next flush.
    pub(crate) fn queued(&mut self, me: &Arc<Flushes>) {
        let flush = me.next();
        match &mut self.0 {
            Some((by, at)) if Arc::ptr_eq(by, me) => *at = flush,
            _ => self.0 = Some((me.clone(), flush)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_senders_unsent_output_is_waited_for_until_its_flush() {
        let (a, b) = (Arc::new(Flushes::default()), Arc::new(Flushes::default()));
        let mut unsent = Unsent::default();
        assert!(unsent.must_wait(&b).is_none(), "nothing unsent");
        unsent.queued(&a);
        assert!(unsent.must_wait(&a).is_none(), "a sender never waits for itself");
        let (by, flush) = unsent.must_wait(&b).expect("b must wait for a's flush");
        assert!(Arc::ptr_eq(&by, &a));
        assert_eq!(flush, 1);
        a.completed();
        assert!(unsent.must_wait(&b).is_none(), "a has flushed");
        // b queues, a flushes again (not b's output): a must wait for b's flush.
        unsent.queued(&b);
        a.completed();
        assert_eq!(unsent.must_wait(&a).map(|(_, f)| f), Some(1));
        b.completed();
        assert!(unsent.must_wait(&a).is_none());
        // The same sender queuing twice before one flush: that flush sends both.
        unsent.queued(&a);
        unsent.queued(&a);
        assert_eq!(unsent.must_wait(&b).map(|(_, f)| f), Some(3));
    }
}
