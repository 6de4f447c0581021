//! The health of one gateway destination: up or down with hysteresis, fed by probe results
//! (the runtime's OPTIONS prober) and call outcomes (the engine's failover), readable and
//! forcible without locks (metrics, the admin API).
//!
//! Rules ([`HealthRules`]): an up destination goes down after `probe_failures_down` failed
//! probes in a row, or after `call_failures_down` failed calls in a row (0: calls never take
//! it down); a down destination comes back after `probe_successes_up` good probes in a row. A
//! good probe resets the failed-probe run and a good call the failed-call run, so one lost
//! datagram never flaps it (with the defaults 3/5/2). What counts as good is the caller's:
//! a probe answered with a final status that is not a failover status of its set, a call
//! attempt answered with anything but a failover status (see `GatewaySet::counts_as_failure`).
//!
//! Engines of every shard and the prober update the same destination at once: every counter is
//! an atomic, and a state change is a compare-and-swap, so each change is counted once. A run
//! counter may be off by one under a race between two shards (two failures counted as one
//! run's length and the next), which moves a transition by at most one event.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Whether a destination takes calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HealthState {
    Up,
    Down,
}

impl HealthState {
    /// "up" or "down", for logs, metrics labels and the admin API.
    pub fn as_str(self) -> &'static str {
        match self {
            HealthState::Up => "up",
            HealthState::Down => "down",
        }
    }

    fn from_u8(v: u8) -> Option<HealthState> {
        match v {
            1 => Some(HealthState::Up),
            2 => Some(HealthState::Down),
            _ => None,
        }
    }

    fn to_u8(s: Option<HealthState>) -> u8 {
        match s {
            None => 0,
            Some(HealthState::Up) => 1,
            Some(HealthState::Down) => 2,
        }
    }
}

/// The hysteresis of one gateway set (N, M and K of issue 18).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthRules {
    /// N: failed probes in a row that take an up destination down (at least 1).
    pub probe_failures_down: u32,
    /// M: failed calls in a row that take an up destination down; 0 = calls never do. A
    /// destination taken down by calls comes back only through probes (or a forced state).
    pub call_failures_down: u32,
    /// K: good probes in a row that bring a down destination back up (at least 1).
    pub probe_successes_up: u32,
}

impl Default for HealthRules {
    /// N = 3, M = 5, K = 2: one lost probe or one failed call changes nothing.
    fn default() -> HealthRules {
        HealthRules { probe_failures_down: 3, call_failures_down: 5, probe_successes_up: 2 }
    }
}

/// One destination's health and counters. Shared (`Arc`) by the engines of every shard and the
/// runtime; carried over a configuration reload when the set name and destination URI stay.
#[derive(Debug)]
pub struct Health {
    /// What `since_ns` counts from (the instant the health was created).
    origin: Instant,
    /// HealthState::to_u8 of the state the rules reached (never 0).
    state: AtomicU8,
    /// HealthState::to_u8 of a forced state (0: not forced).
    forced: AtomicU8,
    /// Nanoseconds from `origin` to the last change of `state`.
    since_ns: AtomicU64,
    changes: AtomicU64,
    probe_fail_run: AtomicU32,
    probe_ok_run: AtomicU32,
    call_fail_run: AtomicU32,
    probes_ok: AtomicU64,
    probes_failed: AtomicU64,
    calls: AtomicU64,
    call_failures: AtomicU64,
    /// Active calls (see `GatewaySet`'s module docs for what is counted).
    active: AtomicU64,
}

/// A consistent-enough copy of a destination's health, for metrics and the admin API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthSnapshot {
    /// Whether calls go there now (the forced state if any, else the state the rules reached).
    pub effective: HealthState,
    /// The state the probe and call rules reached.
    pub state: HealthState,
    /// A state set by an operator, which overrides `state` until cleared.
    pub forced: Option<HealthState>,
    /// When `state` last changed (creation, if never).
    pub since: Instant,
    /// Changes of `state` so far.
    pub changes: u64,
    pub probes_ok: u64,
    pub probes_failed: u64,
    /// Call attempts sent there, and those that failed (failover status or no answer).
    pub calls: u64,
    pub call_failures: u64,
    pub active_calls: u64,
}

impl Health {
    /// A destination that is up (it takes calls before its first probe), created at `now`.
    pub fn new(now: Instant) -> Health {
        Health {
            origin: now,
            state: AtomicU8::new(HealthState::to_u8(Some(HealthState::Up))),
            forced: AtomicU8::new(0),
            since_ns: AtomicU64::new(0),
            changes: AtomicU64::new(0),
            probe_fail_run: AtomicU32::new(0),
            probe_ok_run: AtomicU32::new(0),
            call_fail_run: AtomicU32::new(0),
            probes_ok: AtomicU64::new(0),
            probes_failed: AtomicU64::new(0),
            calls: AtomicU64::new(0),
            call_failures: AtomicU64::new(0),
            active: AtomicU64::new(0),
        }
    }

    /// The state the rules reached.
    pub fn state(&self) -> HealthState {
        HealthState::from_u8(self.state.load(Relaxed)).unwrap_or(HealthState::Up)
    }

    /// The forced state, if an operator set one.
    pub fn forced(&self) -> Option<HealthState> {
        HealthState::from_u8(self.forced.load(Relaxed))
    }

    /// Whether calls go to this destination now.
    pub fn is_up(&self) -> bool {
        self.forced().unwrap_or_else(|| self.state()) == HealthState::Up
    }

    /// Forces the destination up or down whatever probes and calls say (`None`: the rules
    /// decide again). Probes and calls go on being counted meanwhile, so clearing the force
    /// shows the state they reached. For the admin API.
    pub fn force(&self, state: Option<HealthState>) {
        self.forced.store(HealthState::to_u8(state), Relaxed);
    }

    /// A probe was answered as the set counts good, or it was not (timeout, transport error,
    /// a failover status). Returns the new state when this probe changed it.
    pub fn record_probe(&self, now: Instant, ok: bool, rules: &HealthRules) -> Option<HealthState> {
        if ok {
            self.probes_ok.fetch_add(1, Relaxed);
            self.probe_fail_run.store(0, Relaxed);
            let run = self.probe_ok_run.fetch_add(1, Relaxed) + 1;
            if run >= rules.probe_successes_up.max(1) && self.set_state(now, HealthState::Down, HealthState::Up) {
                self.call_fail_run.store(0, Relaxed);
                return Some(HealthState::Up);
            }
        } else {
            self.probes_failed.fetch_add(1, Relaxed);
            self.probe_ok_run.store(0, Relaxed);
            let run = self.probe_fail_run.fetch_add(1, Relaxed) + 1;
            if run >= rules.probe_failures_down.max(1) && self.set_state(now, HealthState::Up, HealthState::Down) {
                return Some(HealthState::Down);
            }
        }
        None
    }

    /// A call attempt was sent here (counted in `calls`).
    pub fn call_started(&self) {
        self.calls.fetch_add(1, Relaxed);
    }

    /// A call attempt's outcome: `ok` when it was answered with anything but a failover
    /// status. Returns the new state when this call took the destination down.
    pub fn record_call(&self, now: Instant, ok: bool, rules: &HealthRules) -> Option<HealthState> {
        if ok {
            self.call_fail_run.store(0, Relaxed);
            return None;
        }
        self.call_failures.fetch_add(1, Relaxed);
        let run = self.call_fail_run.fetch_add(1, Relaxed) + 1;
        if rules.call_failures_down > 0
            && run >= rules.call_failures_down
            && self.set_state(now, HealthState::Up, HealthState::Down)
        {
            return Some(HealthState::Down);
        }
        None
    }

    /// One more active call here.
    pub fn active_inc(&self) {
        self.active.fetch_add(1, Relaxed);
    }

    /// One active call fewer (never below zero).
    pub fn active_dec(&self) {
        let _ = self.active.fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1));
    }

    /// Active calls now.
    pub fn active(&self) -> u64 {
        self.active.load(Relaxed)
    }

    /// A copy of everything, for metrics and the admin API.
    pub fn snapshot(&self) -> HealthSnapshot {
        let state = self.state();
        let forced = self.forced();
        HealthSnapshot {
            effective: forced.unwrap_or(state),
            state,
            forced,
            since: self.origin + Duration::from_nanos(self.since_ns.load(Relaxed)),
            changes: self.changes.load(Relaxed),
            probes_ok: self.probes_ok.load(Relaxed),
            probes_failed: self.probes_failed.load(Relaxed),
            calls: self.calls.load(Relaxed),
            call_failures: self.call_failures.load(Relaxed),
            active_calls: self.active.load(Relaxed),
        }
    }

    /// Moves the state from `from` to `to`; false when it was not `from` (another thread
    /// changed it first, or it already was `to`). Both runs start again after a change.
    fn set_state(&self, now: Instant, from: HealthState, to: HealthState) -> bool {
        let (from, to_v) = (HealthState::to_u8(Some(from)), HealthState::to_u8(Some(to)));
        if self.state.compare_exchange(from, to_v, Relaxed, Relaxed).is_err() {
            return false;
        }
        let ns = now.saturating_duration_since(self.origin).as_nanos().min(u128::from(u64::MAX)) as u64;
        self.since_ns.store(ns, Relaxed);
        self.changes.fetch_add(1, Relaxed);
        self.probe_fail_run.store(0, Relaxed);
        self.probe_ok_run.store(0, Relaxed);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> HealthRules {
        HealthRules { probe_failures_down: 3, call_failures_down: 2, probe_successes_up: 2 }
    }

    #[test]
    fn one_lost_probe_never_flaps_it() {
        let t = Instant::now();
        let h = Health::new(t);
        for i in 0..50 {
            // Every third probe lost: never three in a row.
            assert_eq!(h.record_probe(t, i % 3 != 0, &rules()), None, "probe {i}");
        }
        assert!(h.is_up());
        assert_eq!(h.snapshot().changes, 0);
    }

    #[test]
    fn down_after_n_failed_probes_up_after_k_good_ones() {
        let t = Instant::now();
        let h = Health::new(t);
        let r = rules();
        assert_eq!(h.record_probe(t, false, &r), None);
        assert_eq!(h.record_probe(t, false, &r), None);
        let at = t + Duration::from_secs(7);
        assert_eq!(h.record_probe(at, false, &r), Some(HealthState::Down));
        assert!(!h.is_up());
        assert_eq!(h.record_probe(at, false, &r), None, "already down: no second change");
        // One good probe is not enough, and a failure in between starts the run again.
        assert_eq!(h.record_probe(at, true, &r), None);
        assert_eq!(h.record_probe(at, false, &r), None);
        assert_eq!(h.record_probe(at, true, &r), None);
        let back = t + Duration::from_secs(20);
        assert_eq!(h.record_probe(back, true, &r), Some(HealthState::Up));
        let s = h.snapshot();
        assert_eq!((s.state, s.changes, s.probes_ok, s.probes_failed), (HealthState::Up, 2, 3, 5));
        assert_eq!(s.since, back);
    }

    #[test]
    fn m_failed_calls_in_a_row_take_it_down_a_good_call_resets_the_run() {
        let t = Instant::now();
        let h = Health::new(t);
        let r = rules();
        h.call_started();
        assert_eq!(h.record_call(t, false, &r), None);
        assert_eq!(h.record_call(t, true, &r), None);
        assert_eq!(h.record_call(t, false, &r), None);
        assert_eq!(h.record_call(t, false, &r), Some(HealthState::Down));
        assert_eq!(h.snapshot().call_failures, 3);
        // Calls never bring it back; probes do.
        assert_eq!(h.record_call(t, true, &r), None);
        assert!(!h.is_up());
        h.record_probe(t, true, &r);
        assert_eq!(h.record_probe(t, true, &r), Some(HealthState::Up));
        // M = 0: calls never take it down.
        let never = HealthRules { call_failures_down: 0, ..r };
        for _ in 0..100 {
            assert_eq!(h.record_call(t, false, &never), None);
        }
        assert!(h.is_up());
    }

    #[test]
    fn a_forced_state_overrides_until_cleared() {
        let t = Instant::now();
        let h = Health::new(t);
        h.force(Some(HealthState::Down));
        assert!(!h.is_up());
        assert_eq!(h.snapshot().effective, HealthState::Down);
        assert_eq!(h.snapshot().state, HealthState::Up);
        h.force(None);
        assert!(h.is_up());
        for _ in 0..3 {
            h.record_probe(t, false, &rules());
        }
        h.force(Some(HealthState::Up));
        assert!(h.is_up(), "forced up although probes failed");
        h.force(None);
        assert!(!h.is_up());
    }

    #[test]
    fn active_calls_never_go_below_zero() {
        let h = Health::new(Instant::now());
        h.active_inc();
        h.active_dec();
        h.active_dec();
        assert_eq!(h.active(), 0);
    }
}
