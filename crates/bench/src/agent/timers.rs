//! The generator's timers: one binary heap of deadlines for everything (ring, hold, the next
//! deadline of each client transaction, the callee's 2xx and 487 retransmissions of §13.3.1.4 and
//! §17.2.1, registration refreshes, user think times). Cancelling is lazy: an entry carries the
//! generation of the object it belongs to, and the owner ignores entries whose generation has
//! moved on.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// RFC 3261 §17.1.1.1 defaults, µs (the client transactions take theirs from
/// `herald_core::transaction::Timers::default()`, the same values).
pub const T1_US: u64 = 500_000;
pub const T2_US: u64 = 4_000_000;
/// Timer B / F / H: 64·T1.
pub const TIMEOUT_US: u64 = 64 * T1_US;

/// What a timer is for; the owner is identified by `slot` and `generation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TimerKind {
    /// Caller: the next deadline of a call's client transaction (Timer A, B, E or F, kept by
    /// `herald_core::transaction`); the generation is the transaction's id.
    CallerTransaction,
    /// Caller: the INVITE has rung too long (Timer B stops with the first provisional, §17.1.1.2,
    /// so this bounds the ringing instead); the generation is the INVITE transaction's id.
    CallerRingLimit,
    /// Caller: ringing long enough, send CANCEL.
    CallerCancel,
    /// Caller: holding long enough, send BYE.
    CallerHangUp,
    /// Callee: ringing long enough, send 200.
    CalleeAnswer,
    /// Callee: retransmit the final response (2xx §13.3.1.4, or 487 Timer G).
    CalleeRetransmit,
    /// Callee: give up waiting for the ACK (64·T1, §13.3.1.4 / Timer H).
    CalleeAckTimeout,
    /// Callee: forget a finished dialog (after absorbing retransmissions).
    CalleeForget,
    /// Registration: the next deadline of the REGISTER transaction (Timer E or F); the
    /// generation is the transaction's id.
    RegisterTransaction,
    /// Registration: time to refresh.
    RegisterRefresh,
    /// Registration: retry a REGISTER refused with 503 while setting up or tearing down.
    RegisterRetry,
    /// User workload: the user's think time is over, place a call.
    UserCall,
}

impl TimerKind {
    /// Timers whose exact moment nothing measures: RFC 3261 retransmissions and timeouts (a few
    /// ms late against T1 = 500 ms and 64·T1) and the forgetting of finished dialogs. Most of
    /// them are stale when they fall due (cancelling is lazy), and each distinct deadline woke
    /// the loop: about six wake-ups per call for nothing. Rounded up to [`LAX_GRID_US`], they
    /// share at most one wake-up per grid step. Arrivals, ring and hold times stay exact.
    fn is_lax(self) -> bool {
        use TimerKind::*;
        matches!(
            self,
            CallerTransaction
                | CallerRingLimit
                | CalleeRetransmit
                | CalleeAckTimeout
                | CalleeForget
                | RegisterTransaction
        )
    }
}

/// The grid lax timers are rounded up to, µs.
pub const LAX_GRID_US: u64 = 10_000;

/// How long a due lax timer may wait for the loop to wake anyway (for input, an arrival or an
/// exact timer) before it wakes the loop itself, µs. Under load the loop wakes every few
/// milliseconds for input and runs the lax timers then; only a quiet loop pays a wake-up of
/// their own. A retransmission is then at most LAX_GRID_US + LAX_SLACK_US late (30 ms against
/// T1 = 500 ms); it is never early.
pub const LAX_SLACK_US: u64 = 20_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Timer {
    pub kind: TimerKind,
    pub slot: u32,
    pub generation: u32,
}

/// Deadlines in microseconds since the run's epoch: exact timers in a heap and lax ones in grid
/// steps ([`LaxTimers`]), so that the loop can ask when it must wake ([`TimerQueue::next_wake`])
/// apart from what is due.
#[derive(Debug, Default)]
pub struct TimerQueue {
    exact: BinaryHeap<Reverse<(u64, Timer)>>,
    lax: LaxTimers,
}

impl TimerQueue {
    /// Arms `timer` for `at_us`, or for the next [`LAX_GRID_US`] step when it is a lax one.
    pub fn arm(&mut self, at_us: u64, timer: Timer) {
        if timer.kind.is_lax() {
            self.lax.arm(at_us.div_ceil(LAX_GRID_US), timer);
        } else {
            self.exact.push(Reverse((at_us, timer)));
        }
    }

    fn exact_head(&self) -> Option<u64> {
        self.exact.peek().map(|Reverse((at, _))| *at)
    }

    fn lax_head(&self) -> Option<u64> {
        self.lax.head().map(|step| step.saturating_mul(LAX_GRID_US))
    }

    /// The earliest deadline, if any.
    pub fn next_due(&self) -> Option<u64> {
        match (self.exact_head(), self.lax_head()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// When the loop must wake for its timers: the earliest exact deadline, or the earliest lax
    /// one plus [`LAX_SLACK_US`], whichever comes first. Lax timers due before that run at
    /// whatever wake-up comes first ([`TimerQueue::pop_due`] returns every due timer).
    pub fn next_wake(&self) -> Option<u64> {
        let lax = self.lax_head().map(|at| at.saturating_add(LAX_SLACK_US));
        match (self.exact_head(), lax) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Removes and returns one timer due at or before `now_us`, the earliest first (lax timers
    /// of one grid step in no particular order).
    pub fn pop_due(&mut self, now_us: u64) -> Option<Timer> {
        match (self.exact_head(), self.lax_head()) {
            (exact, Some(lax)) if lax <= now_us && exact.is_none_or(|a| lax < a) => self.lax.pop_head(),
            (Some(a), _) if a <= now_us => self.exact.pop().map(|Reverse((_, t))| t),
            _ => None,
        }
    }

    pub fn len(&self) -> usize {
        self.exact.len() + self.lax.len()
    }

    pub fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.lax.is_empty()
    }
}

/// Grid steps [`LaxTimers`] keeps in buckets: 40.96 s, past 64·T1 + T2 (the longest lax timer
/// of a call but its ring limit, which rings add to).
const LAX_WINDOW_STEPS: u64 = 4096;

/// The lax timers, by grid step: a bucket per step from the earliest one holding a timer, and
/// a heap for the rare ones more than [`LAX_WINDOW_STEPS`] from it. Lax timers were a binary heap
/// of up to ~30,000 entries at 200 calls/s (about eight a call, most of them 64·T1 long and stale
/// by then), each pop sifting through its 15 levels: ~1,400 instructions a call with the pushes
/// (callgrind). Arming into a bucket and taking from one costs a few. Memory: the window's
/// buckets at most besides the timers themselves.
#[derive(Debug, Default)]
struct LaxTimers {
    /// `buckets[i]`: the timers due at grid step `base + i`, in no particular order; the first
    /// bucket is never empty.
    buckets: VecDeque<Vec<Timer>>,
    base: u64,
    in_buckets: usize,
    /// Emptied buckets, kept for their allocation.
    spare: Vec<Vec<Timer>>,
    /// Timers that did not fit the window when armed, by step.
    far: BinaryHeap<Reverse<(u64, Timer)>>,
}

impl LaxTimers {
    /// Arms `timer` for grid step `step`.
    fn arm(&mut self, step: u64, timer: Timer) {
        if self.buckets.is_empty() {
            self.base = step;
        }
        if step < self.base {
            let before = self.base - step;
            if before + self.buckets.len() as u64 > LAX_WINDOW_STEPS {
                self.far.push(Reverse((step, timer)));
                return;
            }
            for _ in 0..before {
                let bucket = self.spare.pop().unwrap_or_default();
                self.buckets.push_front(bucket);
            }
            self.base = step;
        }
        let index = step - self.base;
        if index >= LAX_WINDOW_STEPS {
            self.far.push(Reverse((step, timer)));
            return;
        }
        while self.buckets.len() as u64 <= index {
            let bucket = self.spare.pop().unwrap_or_default();
            self.buckets.push_back(bucket);
        }
        self.buckets[index as usize].push(timer);
        self.in_buckets += 1;
    }

    /// The earliest step holding a timer.
    fn head(&self) -> Option<u64> {
        let near = (!self.buckets.is_empty()).then_some(self.base);
        let far = self.far.peek().map(|Reverse((step, _))| *step);
        match (near, far) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Removes one timer of the earliest step.
    fn pop_head(&mut self) -> Option<Timer> {
        let far_first = self.far.peek().is_some_and(|Reverse((step, _))| *step < self.base);
        if self.buckets.is_empty() || far_first {
            return self.far.pop().map(|Reverse((_, t))| t);
        }
        let timer = self.buckets[0].pop();
        self.in_buckets -= 1;
        while self.buckets.front().is_some_and(Vec::is_empty) {
            let bucket = self.buckets.pop_front().expect("not empty");
            self.spare.push(bucket);
            self.base += 1;
        }
        timer
    }

    fn len(&self) -> usize {
        self.in_buckets + self.far.len()
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// RFC 3261 §17.1.1.2 / §17.1.2.2 retransmission schedule: the interval after `interval_us`.
/// INVITE requests (Timer A) keep doubling; non-INVITE requests and responses (Timers E, G, and
/// 2xx retransmission) are capped at T2. The callee's response retransmissions use it; client
/// requests are retransmitted by `herald_core::transaction` on the same schedule.
pub fn next_interval(interval_us: u64, capped: bool, t2_us: u64) -> u64 {
    let doubled = interval_us.saturating_mul(2);
    if capped {
        doubled.min(t2_us)
    } else {
        doubled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(kind: TimerKind, slot: u32) -> Timer {
        Timer { kind, slot, generation: 0 }
    }

    #[test]
    fn pops_in_deadline_order_only_when_due() {
        let mut q = TimerQueue::default();
        q.arm(300, t(TimerKind::CallerHangUp, 1));
        q.arm(100, t(TimerKind::CalleeAnswer, 2));
        q.arm(200, t(TimerKind::CallerCancel, 3));
        assert_eq!(q.next_due(), Some(100));
        assert_eq!(q.pop_due(99), None);
        assert_eq!(q.pop_due(250).map(|t| t.slot), Some(2));
        assert_eq!(q.pop_due(250).map(|t| t.slot), Some(3));
        assert_eq!(q.pop_due(250), None);
        assert_eq!(q.len(), 1);
    }

    #[test]
    fn lax_timers_share_grid_steps_and_exact_ones_keep_their_moment() {
        let mut q = TimerQueue::default();
        // Three retransmission and timeout timers within one grid step: one wake-up, at its end.
        q.arm(500_001, t(TimerKind::CallerTransaction, 1));
        q.arm(503_000, t(TimerKind::CalleeRetransmit, 2));
        q.arm(509_999, t(TimerKind::CallerRingLimit, 3));
        q.arm(510_000, t(TimerKind::CalleeForget, 4));
        // A hold timer in the same step fires when it was set for.
        q.arm(504_321, t(TimerKind::CallerHangUp, 5));
        assert_eq!(q.next_due(), Some(504_321));
        assert_eq!(q.pop_due(504_321).map(|t| t.slot), Some(5));
        assert_eq!(q.next_due(), Some(510_000));
        assert_eq!(q.pop_due(509_999), None, "never early");
        let mut due: Vec<u32> = std::iter::from_fn(|| q.pop_due(510_000)).map(|t| t.slot).collect();
        due.sort();
        assert_eq!(due, [1, 2, 3, 4]);
        // On the grid already: unchanged.
        q.arm(520_000, t(TimerKind::RegisterTransaction, 6));
        assert_eq!(q.next_due(), Some(520_000));
    }

    #[test]
    fn lax_timers_wake_the_loop_only_after_their_slack() {
        let mut q = TimerQueue::default();
        q.arm(500_001, t(TimerKind::CallerTransaction, 1)); // due at 510 000
        assert_eq!(q.next_due(), Some(510_000));
        assert_eq!(q.next_wake(), Some(510_000 + LAX_SLACK_US));
        // An exact timer inside the slack sets the wake-up, and the lax one runs with it.
        q.arm(515_000, t(TimerKind::CallerHangUp, 2));
        assert_eq!(q.next_wake(), Some(515_000));
        assert_eq!(q.pop_due(509_999), None, "never early");
        let due: Vec<u32> = std::iter::from_fn(|| q.pop_due(515_000)).map(|t| t.slot).collect();
        assert_eq!(due, [1, 2]);
        assert_eq!(q.next_wake(), None);
        assert!(q.is_empty());
    }

    /// The lax buckets against the heap they replaced: random arms (lax and exact, some beyond
    /// the window, some for steps the clock has passed) and pops at a clock that moves on. The
    /// same timers fall due by each moment (none early, none late), and the next deadline agrees.
    #[test]
    fn lax_buckets_pop_what_a_heap_pops() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(21);
        let kinds = [TimerKind::CallerTransaction, TimerKind::CalleeForget, TimerKind::CallerHangUp];
        let mut q = TimerQueue::default();
        let mut reference: BinaryHeap<Reverse<(u64, Timer)>> = BinaryHeap::new();
        let mut now = 0u64;
        for round in 0..20_000u32 {
            for _ in 0..rng.random_range(0..4) {
                let kind = kinds[rng.random_range(0..kinds.len())];
                let at = match rng.random_range(0..20) {
                    0 => now.saturating_sub(rng.random_range(0..50_000)),
                    1 => now + rng.random_range(0..100_000_000),
                    2 => now,
                    _ => now + rng.random_range(0..33_000_000),
                };
                let timer = Timer { kind, slot: round, generation: rng.random() };
                q.arm(at, timer);
                let due = if kind.is_lax() { at.div_ceil(LAX_GRID_US) * LAX_GRID_US } else { at };
                reference.push(Reverse((due, timer)));
            }
            now += rng.random_range(0..30_000);
            let mut got: Vec<Timer> = std::iter::from_fn(|| q.pop_due(now)).collect();
            let mut want = Vec::new();
            while reference.peek().is_some_and(|Reverse((at, _))| *at <= now) {
                want.push(reference.pop().expect("peeked").0 .1);
            }
            got.sort();
            want.sort();
            assert_eq!(got, want, "round {round} at {now}");
            assert_eq!(q.len(), reference.len());
            assert_eq!(q.next_due(), reference.peek().map(|Reverse((at, _))| *at), "round {round}");
        }
    }

    /// Timer A over 32 s (64·T1 with T1 = 500 ms): sends at 0, 0.5, 1.5, 3.5, 7.5, 15.5, 31.5 s;
    /// Timer E caps at T2 = 4 s: 0, 0.5, 1.5, 3.5, 7.5, 11.5, ...
    #[test]
    fn retransmission_schedules_match_rfc3261() {
        let (t1, t2) = (500_000u64, 4_000_000u64);
        let schedule = |capped: bool| {
            let (mut at, mut iv, mut sends) = (0u64, t1, vec![0u64]);
            while at + iv < 64 * t1 {
                at += iv;
                sends.push(at / 1000);
                iv = next_interval(iv, capped, t2);
            }
            sends
        };
        assert_eq!(schedule(false), [0, 500, 1500, 3500, 7500, 15500, 31500]);
        let e = schedule(true);
        assert_eq!(&e[..7], [0, 500, 1500, 3500, 7500, 11500, 15500]);
        assert_eq!(e.len(), 11);
    }
}
