//! Transaction timers (RFC 3261 §17 and Table 4 of §A; RFC 6026 §8.11 adds L and M).
//!
//! Each transaction keeps its own [`TimerTable`]: one optional deadline per [`TimerKind`],
//! indexed by the enum, so arming, cancelling and finding the next deadline are constant time.
//! The table's timer queue (see [`super::TransactionTable`]) only ever holds the earliest deadline of
//! each transaction.

use std::time::{Duration, Instant};

/// Timer configuration (RFC 3261 §17.1.1.1: T1 is an RTT estimate, T2 the cap for non-INVITE
/// retransmission intervals, T4 the time a message may stay in the network).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timers {
    /// RTT estimate; 500 ms by default (RFC 3261 §17.1.1.1).
    pub t1: Duration,
    /// Maximum retransmission interval for non-INVITE requests and INVITE responses; 4 s.
    pub t2: Duration,
    /// Maximum duration a message remains in the network; 5 s.
    pub t4: Duration,
    /// Timer D over unreliable transports: "at least 32 seconds" (RFC 3261 §17.1.1.2), so that
    /// every retransmission of a final response reaches the Completed state and is ACKed.
    pub d: Duration,
    /// Where the transaction table schedules the timers that only absorb retransmissions
    /// ([`TimerKind::absorbs`]); `None`: at their exact deadlines.
    pub absorb_grid: Option<AbsorbGrid>,
}

/// A grid shared by every transaction table of a process: a state-absorbing timer is scheduled
/// at the first grid point at or after its deadline (`epoch + n * step`). Such a timer only
/// keeps a finished transaction around (RFC 3261 Timers D, I, J, K; RFC 6026 L, M), so firing
/// it up to `step` late merely holds the transaction that much longer, while all of them, a
/// few per call, come due together a few times a second instead of one wake-up each (they were
/// a seventh of the proxy's instructions per call, issue 21). The grid's epoch is the runtime's
/// (one for all shards), so the shards' due timers line up too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbsorbGrid {
    pub epoch: Instant,
    pub step: Duration,
}

impl Default for Timers {
    fn default() -> Self {
        Timers {
            t1: Duration::from_millis(500),
            t2: Duration::from_secs(4),
            t4: Duration::from_secs(5),
            d: Duration::from_secs(32),
            absorb_grid: None,
        }
    }
}

impl Timers {
    /// 64*T1: Timers B, F, H, L, M, and J over unreliable transports.
    pub fn t1x64(&self) -> Duration {
        self.t1.saturating_mul(64)
    }

    /// Where the table schedules a timer of `kind` due at `at`: on the [`AbsorbGrid`] for a
    /// state-absorbing timer, else at `at`. Never earlier than `at`.
    pub fn scheduled_at(&self, at: Instant, kind: TimerKind) -> Instant {
        if !kind.absorbs() {
            return at;
        }
        self.grid_point(at).unwrap_or(at)
    }

    /// The first point of the [`AbsorbGrid`] at or after `at`; `None` without a grid (or with
    /// a zero step), before its epoch, or where the point is not representable (a timer is
    /// then scheduled on time).
    pub(crate) fn grid_point(&self, at: Instant) -> Option<Instant> {
        let grid = self.absorb_grid.filter(|g| !g.step.is_zero())?;
        let since = at.checked_duration_since(grid.epoch)?;
        // In u64 nanoseconds (584 years): u128 arithmetic called the 128-bit division routine
        // for every absorbing timer.
        let (Ok(since), Ok(step)) = (u64::try_from(since.as_nanos()), u64::try_from(grid.step.as_nanos())) else {
            return None;
        };
        let up = since.div_ceil(step).checked_mul(step)?;
        grid.epoch.checked_add(Duration::from_nanos(up))
    }

    /// The initial value of a timer (RFC 3261 Table 4, RFC 6026 §8.11). The retransmission timers
    /// A, E and G start at T1 and are only armed over unreliable transports; the wait timers D,
    /// I, J and K are zero over reliable transports, where nothing needs absorbing.
    pub fn initial(&self, kind: TimerKind, reliable: bool) -> Duration {
        let unreliable_only = |d: Duration| if reliable { Duration::ZERO } else { d };
        match kind {
            TimerKind::A | TimerKind::E | TimerKind::G => self.t1,
            TimerKind::B | TimerKind::F | TimerKind::H | TimerKind::L | TimerKind::M => self.t1x64(),
            TimerKind::D => unreliable_only(self.d),
            TimerKind::I | TimerKind::K => unreliable_only(self.t4),
            TimerKind::J => unreliable_only(self.t1x64()),
        }
    }
}

/// The timers of RFC 3261 §17 (C belongs to the proxy, §16.6 step 11) plus L and M of RFC 6026.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TimerKind {
    /// INVITE request retransmission (client, Calling, unreliable only).
    A,
    /// INVITE transaction timeout (client, Calling).
    B,
    /// Wait time for response retransmissions (client INVITE, Completed).
    D,
    /// Non-INVITE request retransmission (client, Trying/Proceeding, unreliable only).
    E,
    /// Non-INVITE transaction timeout (client).
    F,
    /// INVITE response retransmission (server, Completed, unreliable only).
    G,
    /// Wait time for ACK receipt (server INVITE, Completed).
    H,
    /// Wait time for ACK retransmissions (server INVITE, Confirmed).
    I,
    /// Wait time for non-INVITE request retransmissions (server, Completed).
    J,
    /// Wait time for response retransmissions (client non-INVITE, Completed).
    K,
    /// Wait time for accepted INVITE request retransmissions (server, Accepted; RFC 6026).
    L,
    /// Wait time for 2xx retransmissions (client INVITE, Accepted; RFC 6026).
    M,
}

impl TimerKind {
    pub const COUNT: usize = 12;
    pub const ALL: [TimerKind; TimerKind::COUNT] = [
        TimerKind::A,
        TimerKind::B,
        TimerKind::D,
        TimerKind::E,
        TimerKind::F,
        TimerKind::G,
        TimerKind::H,
        TimerKind::I,
        TimerKind::J,
        TimerKind::K,
        TimerKind::L,
        TimerKind::M,
    ];

    fn index(self) -> usize {
        self as usize
    }

    /// Whether this timer only keeps a finished transaction around to absorb retransmissions
    /// (D, I, J, K, L, M), so that firing it late holds state longer and changes nothing else.
    /// Each runs alone in its state (Completed, Confirmed or Accepted), never beside a timer
    /// that must fire on time, so a table may schedule it late ([`AbsorbGrid`]).
    pub fn absorbs(self) -> bool {
        matches!(self, TimerKind::D | TimerKind::I | TimerKind::J | TimerKind::K | TimerKind::L | TimerKind::M)
    }

    /// The timer queue's lane (of [`LANES`]) for a deadline of this kind: one per duration
    /// (RFC 3261 Table 4, RFC 6026 §8.11), the timers that are scheduled on the absorb grid
    /// apart from those that are not (a grid point is later than the exact deadline of the same
    /// duration), so that each lane's deadlines come in order.
    pub(super) fn lane(self) -> usize {
        use TimerKind::*;
        match self {
            // T1, doubling on each retransmission (those spill).
            A | E | G => 0,
            // 64*T1, exact.
            B | F | H => 1,
            // 64*T1 (J over unreliable transports), absorbing.
            J | L | M => 2,
            // T4, absorbing.
            I | K => 3,
            // Timer D, absorbing.
            D => 4,
        }
    }
}

/// Lanes of a transaction table's timer queue ([`TimerKind::lane`]).
pub(super) const LANES: usize = 5;

/// `now + d`, or `None` when that is not representable (a timer that can never fire is treated
/// as not armed rather than panicking on a misconfigured duration).
pub(crate) fn after(now: Instant, d: Duration) -> Option<Instant> {
    now.checked_add(d)
}

const MIN_RETRANSMIT: Duration = Duration::from_millis(1);

/// How many timers one transaction has armed at most: two (A and B in Calling, G and H in
/// Completed), with one slot to spare.
const SLOTS: usize = 3;

/// One transaction's timers: up to [`SLOTS`] armed `(deadline, kind)` pairs. Not a deadline
/// per kind: finished transactions linger 64*T1 by the hundred thousand, and twelve deadlines
/// each were 192 bytes of a transaction's memory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TimerTable {
    armed: [Option<(Instant, TimerKind)>; SLOTS],
}

impl TimerTable {
    /// Arms (or re-arms) `kind` to fire `d` after `now`.
    pub fn arm(&mut self, kind: TimerKind, now: Instant, d: Duration) {
        let Some(at) = after(now, d) else {
            self.clear(kind);
            return;
        };
        // One pass: the slot of `kind` if armed, else the first free one.
        let mut free = None;
        for (i, s) in self.armed.iter().enumerate() {
            match s {
                Some((_, k)) if *k == kind => {
                    self.armed[i] = Some((at, kind));
                    return;
                }
                None if free.is_none() => free = Some(i),
                _ => {}
            }
        }
        let slot = free.unwrap_or_else(|| {
            // No transaction arms more than two timers at once (see SLOTS); should a change
            // break that, the latest deadline gives way, so the timers that bound the
            // transaction's life soonest still fire.
            debug_assert!(false, "more than {SLOTS} timers armed");
            self.latest_slot()
        });
        self.armed[slot] = Some((at, kind));
    }

    fn latest_slot(&self) -> usize {
        (0..SLOTS).max_by_key(|&i| self.armed[i].map(|(at, _)| at)).unwrap_or(0)
    }

    /// Arms a retransmission timer (A, E, G). The interval is at least 1 ms, so a timer that
    /// fires always moves strictly into the future and a misconfigured T1 or T2 of zero cannot
    /// make the worker spin.
    pub fn arm_retransmit(&mut self, kind: TimerKind, now: Instant, d: Duration) {
        self.arm(kind, now, d.max(MIN_RETRANSMIT));
    }

    /// The timers of a client transaction that has just sent its request (RFC 3261 §17.1.1.2,
    /// §17.1.2.2): `retransmit` (A or E) over an unreliable transport only, and `timeout`
    /// (B or F) always.
    pub fn client_started(
        now: Instant,
        timers: &Timers,
        reliable: bool,
        retransmit: TimerKind,
        timeout: TimerKind,
    ) -> Self {
        // Written as arming an empty table would leave it (the retransmission timer in the
        // first slot, the timeout in the next free one), without its searches for a slot: two
        // arms were ~80 instructions per client transaction (issue 21).
        let retransmit = if reliable {
            None
        } else {
            after(now, timers.initial(retransmit, reliable).max(MIN_RETRANSMIT)).map(|at| (at, retransmit))
        };
        let timeout = after(now, timers.initial(timeout, reliable)).map(|at| (at, timeout));
        let armed = match retransmit {
            Some(_) => [retransmit, timeout, None],
            None => [timeout, None, None],
        };
        TimerTable { armed }
    }

    /// Stops timer `kind` (one pass: [`Self::clear_pair`] of a kind with itself, which the
    /// compiler folds into one comparison a slot).
    pub fn clear(&mut self, kind: TimerKind) {
        self.clear_pair(kind, kind);
    }

    /// Stops `a` and `b` in one pass over the slots (a transaction's retransmission and
    /// timeout timers stop together: RFC 3261 §17.1.1.2, §17.1.2.2, §17.2.1).
    pub fn clear_pair(&mut self, a: TimerKind, b: TimerKind) {
        for s in &mut self.armed {
            if matches!(s, Some((_, k)) if *k == a || *k == b) {
                *s = None;
            }
        }
    }

    pub fn clear_all(&mut self) {
        self.armed = [None; SLOTS];
    }

    pub fn get(&self, kind: TimerKind) -> Option<Instant> {
        self.armed.iter().flatten().find(|(_, k)| *k == kind).map(|(at, _)| *at)
    }

    /// Whether `kind` is armed and due at `now`; if so it is disarmed (a timer fires once; the
    /// handler re-arms it if the RFC says so). A stale or early call returns false, which is what
    /// makes the timer queue's lazy deletion safe.
    pub fn take_due(&mut self, kind: TimerKind, now: Instant) -> bool {
        for s in &mut self.armed {
            if matches!(s, Some((at, k)) if *k == kind && *at <= now) {
                *s = None;
                return true;
            }
        }
        false
    }

    /// The earliest armed deadline; ties go to the kind listed first.
    pub fn next(&self) -> Option<(Instant, TimerKind)> {
        // Two pairwise picks over the three slots: the flattened iterator's `min_by_key` stayed
        // an iterator, and the table asks after every change (issue 21: `settle_entry`).
        let [a, b, c] = self.armed;
        first_due(first_due(a, b), c)
    }
}

/// The earlier of two armed slots by deadline, then by kind (the order of
/// [`TimerTable::next`]); `x` on a tie, as `min_by_key` keeps the first.
#[inline(always)]
fn first_due(x: Option<(Instant, TimerKind)>, y: Option<(Instant, TimerKind)>) -> Option<(Instant, TimerKind)> {
    match (x, y) {
        (Some((at, kind)), Some((other_at, other_kind))) if (other_at, other_kind.index()) < (at, kind.index()) => y,
        (None, _) => y,
        _ => x,
    }
}

#[cfg(test)]
mod tests;
