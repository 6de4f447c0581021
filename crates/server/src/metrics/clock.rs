//! The clocks of one receive batch.
//!
//! The kernel stamps a datagram with CLOCK_REALTIME when it arrives (socket(7) SO_TIMESTAMPNS);
//! herald reads CLOCK_REALTIME once per batch, right after recvmmsg(2) returns, and the cheap
//! monotonic clock (`Instant`, a vDSO call) once per message. A message's service time runs from
//! the end of the previous message of the batch (or the batch read) to the end of its own
//! handling, so one clock read per message covers both ends. Its queue wait runs from the kernel
//! timestamp to the start of its service: the time in the socket queue plus the time spent on the
//! messages ahead of it in the same batch - what a queueing model calls the waiting time.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

pub(crate) struct BatchClock {
    read_real_ns: u64,
    read_at: Instant,
    last: Instant,
}

impl BatchClock {
    /// Call right after the batch was read.
    pub(crate) fn start() -> BatchClock {
        let read_real_ns = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        let now = Instant::now();
        BatchClock { read_real_ns, read_at: now, last: now }
    }

    /// The queue wait of the message about to be handled (the one [`BatchClock::lap`] will end):
    /// kernel timestamp to the start of its service, as `lap` computes it.
    pub(crate) fn wait(&self, kernel_ns: Option<u64>) -> Option<u64> {
        let in_batch = self.last.duration_since(self.read_at).as_nanos() as u64;
        kernel_ns.map(|k| self.read_real_ns.saturating_sub(k).saturating_add(in_batch))
    }

    /// Ends the current message: `(service ns, queue wait ns)`. The queue wait is `None` without
    /// a kernel timestamp (`kernel_ns`, CLOCK_REALTIME ns). A realtime clock stepped backwards
    /// between arrival and read yields a wait of 0 rather than a huge one.
    pub(crate) fn lap(&mut self, kernel_ns: Option<u64>) -> (u64, Option<u64>) {
        let start = self.last;
        let end = Instant::now();
        self.last = end;
        let service = end.duration_since(start).as_nanos() as u64;
        let wait = kernel_ns.map(|k| {
            let in_batch = start.duration_since(self.read_at).as_nanos() as u64;
            self.read_real_ns.saturating_sub(k).saturating_add(in_batch)
        });
        (service, wait)
    }
}
