//! Server-side measurement for queueing models (seed 003 found that the waiting time in the socket
//! queue, the service time and the drop rate explain a SIP server's capacity; it patched the
//! kernel to see the queue). Herald reads the kernel's receive timestamp instead (socket(7)
//! SO_TIMESTAMPNS) and the socket's drop counter (socket(7) SO_RXQ_OVFL), and exports, per
//! message type, histograms plus exact sums and sums of squares (a model needs the exact second
//! moment, which histogram buckets only approximate).
//!
//! Cost on the hot path: each worker owns one [`WorkerMetrics`] block and is the only thread that
//! writes it (UDP datagrams, its TCP connections' inbox and its timers are all handled on the
//! worker's thread), so an update is a relaxed load and store, with no lock-prefixed instruction
//! and no cache line shared with another worker. The scrape sums the blocks with relaxed loads; a
//! scrape may see a message's count without its sum, which the next scrape corrects.
//! Measurement is off (no socket options, no clock reads) unless `[metrics] listen` is set.

mod clock;

pub(crate) use clock::BatchClock;

use herald_sip::{Message, Method};
use std::sync::atomic::{AtomicU64, Ordering};

/// Message types: requests by method, responses by status class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MsgType {
    Invite,
    Ack,
    Bye,
    Cancel,
    Register,
    Options,
    /// Any other method (INFO, SUBSCRIBE, extensions, ...).
    Other,
    /// Status class 1..=6.
    Class(u8),
}

/// How many [`MsgType`]s there are.
pub(crate) const TYPES: usize = 13;

impl MsgType {
    pub(crate) fn index(self) -> usize {
        match self {
            MsgType::Invite => 0,
            MsgType::Ack => 1,
            MsgType::Bye => 2,
            MsgType::Cancel => 3,
            MsgType::Register => 4,
            MsgType::Options => 5,
            MsgType::Other => 6,
            MsgType::Class(c) => 6 + usize::from(c.clamp(1, 6)),
        }
    }

    /// The `type` label of index `i` (the inverse of [`MsgType::index`]).
    pub(crate) fn label(i: usize) -> &'static str {
        const LABELS: [&str; TYPES] = [
            "INVITE", "ACK", "BYE", "CANCEL", "REGISTER", "OPTIONS", "other", "1xx", "2xx", "3xx", "4xx", "5xx", "6xx",
        ];
        LABELS[i]
    }

    pub(crate) fn of(msg: &Message) -> MsgType {
        match msg.method() {
            Some(m) => MsgType::of_method(m),
            None => MsgType::of_status(msg.status().unwrap_or(0)),
        }
    }

    fn of_method(m: Method) -> MsgType {
        match m {
            Method::Invite => MsgType::Invite,
            Method::Ack => MsgType::Ack,
            Method::Bye => MsgType::Bye,
            Method::Cancel => MsgType::Cancel,
            Method::Register => MsgType::Register,
            Method::Options => MsgType::Options,
            _ => MsgType::Other,
        }
    }

    /// A status outside 100..=699 (which the parser refuses) counts as 6xx or 1xx, never panics.
    fn of_status(code: u16) -> MsgType {
        MsgType::Class((code / 100).clamp(1, 6) as u8)
    }

    /// The type of a serialized message herald is about to send (the start line alone is read:
    /// the outputs are bytes, parsing them again would cost more than the rest of this module).
    pub(crate) fn of_bytes(b: &[u8]) -> MsgType {
        if let Some(rest) = b.strip_prefix(b"SIP/2.0 ") {
            return match rest.first() {
                Some(d @ b'1'..=b'6') => MsgType::Class(d - b'0'),
                _ => MsgType::Class(6),
            };
        }
        let end = b.iter().take(16).position(|c| *c == b' ').unwrap_or(0);
        match std::str::from_utf8(&b[..end]) {
            Ok(token) if !token.is_empty() => MsgType::of_method(Method::from_token(token)),
            _ => MsgType::Other,
        }
    }
}

/// The transport a message came or went on (the `transport` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wire {
    Udp = 0,
    Tcp = 1,
}

pub(crate) const WIRES: [&str; 2] = ["udp", "tcp"];

/// Histogram buckets: upper bounds 2^9 ns (0.5 µs) to 2^30 ns (1.07 s), a factor of 2 apart, and
/// one overflow slot. Powers of two make the bucket a leading-zero count, not a search.
pub(crate) const MIN_EXP: u32 = 9;
pub(crate) const MAX_EXP: u32 = 30;
pub(crate) const SLOTS: usize = (MAX_EXP - MIN_EXP + 2) as usize;

/// The slot of a duration: the first bucket whose bound is >= `ns`.
pub(crate) fn slot(ns: u64) -> usize {
    if ns <= 1 << MIN_EXP {
        return 0;
    }
    let exp = 64 - (ns - 1).leading_zeros(); // ceil(log2(ns))
    (exp - MIN_EXP).min(SLOTS as u32 - 1) as usize
}

/// Adds to a counter that only the owning worker's thread writes: a plain load and store, which
/// is exact for a single writer and cheaper than `fetch_add` (a locked read-modify-write).
#[inline]
fn add(counter: &AtomicU64, v: u64) {
    counter.store(counter.load(Ordering::Relaxed).wrapping_add(v), Ordering::Relaxed);
}

/// One distribution: histogram slots (not cumulative), count, sum in ns and sum of squares in
/// ns² (f64 bits: a u64 of ns² overflows after 18 samples of one second).
#[derive(Debug)]
pub(crate) struct Timing {
    slots: [AtomicU64; SLOTS],
    count: AtomicU64,
    sum_ns: AtomicU64,
    sum_sq_ns2: AtomicU64,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            slots: std::array::from_fn(|_| AtomicU64::new(0)),
            count: AtomicU64::new(0),
            sum_ns: AtomicU64::new(0),
            sum_sq_ns2: AtomicU64::new(0f64.to_bits()),
        }
    }
}

impl Timing {
    #[inline]
    fn record(&self, ns: u64) {
        add(&self.slots[slot(ns)], 1);
        add(&self.count, 1);
        add(&self.sum_ns, ns);
        let sq = f64::from_bits(self.sum_sq_ns2.load(Ordering::Relaxed)) + (ns as f64) * (ns as f64);
        self.sum_sq_ns2.store(sq.to_bits(), Ordering::Relaxed);
    }

    fn add_to(&self, t: &mut TimingTotals) {
        for (total, s) in t.slots.iter_mut().zip(&self.slots) {
            *total += s.load(Ordering::Relaxed);
        }
        t.count += self.count.load(Ordering::Relaxed);
        t.sum_ns += self.sum_ns.load(Ordering::Relaxed);
        t.sum_sq_ns2 += f64::from_bits(self.sum_sq_ns2.load(Ordering::Relaxed));
    }
}

/// One worker's measurements. Written only by that worker's thread (see the module comment).
#[derive(Debug)]
#[repr(align(128))]
pub(crate) struct WorkerMetrics {
    received: [[AtomicU64; 2]; TYPES],
    sent: [[AtomicU64; 2]; TYPES],
    queue_wait: [Timing; TYPES],
    service: [Timing; TYPES],
    socket_drops: AtomicU64,
}

impl Default for WorkerMetrics {
    fn default() -> Self {
        WorkerMetrics {
            received: std::array::from_fn(|_| Default::default()),
            sent: std::array::from_fn(|_| Default::default()),
            queue_wait: std::array::from_fn(|_| Timing::default()),
            service: std::array::from_fn(|_| Timing::default()),
            socket_drops: AtomicU64::new(0),
        }
    }
}

impl WorkerMetrics {
    /// One message handled: its service time and, for a datagram with a kernel timestamp, how
    /// long it waited before herald started on it.
    #[inline]
    pub(crate) fn handled(&self, t: MsgType, wire: Wire, service_ns: u64, queue_wait_ns: Option<u64>) {
        let i = t.index();
        add(&self.received[i][wire as usize], 1);
        self.service[i].record(service_ns);
        if let Some(w) = queue_wait_ns {
            self.queue_wait[i].record(w);
        }
    }

    /// One message queued for sending (to a UDP socket's batch or a TCP write queue).
    #[inline]
    pub(crate) fn sent(&self, t: MsgType, wire: Wire) {
        add(&self.sent[t.index()][wire as usize], 1);
    }

    /// Datagrams the kernel dropped on one of this worker's sockets since the last report.
    pub(crate) fn dropped(&self, n: u64) {
        add(&self.socket_drops, n);
    }

    pub(crate) fn add_to(&self, t: &mut Totals) {
        for i in 0..TYPES {
            for w in 0..2 {
                t.received[i][w] += self.received[i][w].load(Ordering::Relaxed);
                t.sent[i][w] += self.sent[i][w].load(Ordering::Relaxed);
            }
            self.queue_wait[i].add_to(&mut t.queue_wait[i]);
            self.service[i].add_to(&mut t.service[i]);
        }
        t.socket_drops += self.socket_drops.load(Ordering::Relaxed);
    }
}

/// [`Timing`] summed over workers.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct TimingTotals {
    pub slots: [u64; SLOTS],
    pub count: u64,
    pub sum_ns: u64,
    pub sum_sq_ns2: f64,
}

/// Every worker's [`WorkerMetrics`] added up at scrape time.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Totals {
    pub received: [[u64; 2]; TYPES],
    pub sent: [[u64; 2]; TYPES],
    pub queue_wait: [TimingTotals; TYPES],
    pub service: [TimingTotals; TYPES],
    pub socket_drops: u64,
}

/// Tracks one socket's cumulative SO_RXQ_OVFL value. The kernel attaches it (a u32 that wraps)
/// to a datagram only once the socket has dropped something, as the count when that datagram
/// was queued; `advance` returns how many drops are new.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct DropTracker {
    seen: u32,
}

impl DropTracker {
    pub(crate) fn advance(&mut self, now: u32) -> u64 {
        let new = now.wrapping_sub(self.seen);
        // The values of one socket never go backwards; a "negative" step (impossible unless
        // datagrams were reordered between queueing and reading) must not add 4 billion drops.
        if new == 0 || new > u32::MAX / 2 {
            return 0;
        }
        self.seen = now;
        u64::from(new)
    }
}

#[cfg(test)]
mod tests;
