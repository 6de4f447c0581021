//! The loop's arithmetic, kept free of its state so that tests can hold it to account: how long
//! it waits ([`plan_wait`]), how much it reserves ([`live_at_once`]) and when a kernel receive
//! stamp says a message arrived ([`kernel_stamp_us`]).

use crate::agent::callee::MAX_DIALOGS;

/// Calls and dialogs [`Agent::reserve_calls`] makes room for at most: as many as the callee
/// holds at once ([`MAX_DIALOGS`]), so that no run within that bound grows a table on the way
/// (address space of ~400 MB; its pages are touched only as the tables fill). It was 2^18: at
/// 16,400 calls/s the callee's dialogs, kept 64·T1 after their BYE, passed it at 16 s and 2^19
/// at 32 s, and each doubling of the dialog slab copied it into fresh pages: the loop stopped
/// for 40-130 ms (perf, both CPUs), then sent what fell due meanwhile at once, and the proxy's
/// socket queue overflowed (1,610 datagrams dropped at 32 s in one 40-s run, 1,032 in another,
/// none at any other moment). The proxy's capacity then measured the generator's stall. With
/// room for them all, 10 of 11 runs of 30-40 s at that rate retransmitted nothing.
pub(super) const MAX_RESERVED: usize = MAX_DIALOGS;

/// How many of what starts `rate` times a second over `window_us` and lives `life_us` are alive
/// at once, at most [`MAX_RESERVED`] (0 for a rate that is not a positive number).
pub(super) fn live_at_once(rate: f64, window_us: u64, life_us: u64) -> usize {
    let n = rate * life_us.min(window_us) as f64 / 1e6;
    if n.is_finite() && n > 0.0 {
        (n.ceil() as usize).min(MAX_RESERVED)
    } else {
        0
    }
}

/// How the loop waits at `now` with the next timer (or deadline) at `due`, input last handled at
/// `last_input_us` and a quantum of `quantum_us`: (µs to wait, whether to watch the sockets).
/// Within the quantum it sleeps blind until the quantum ends or `due`, whichever is first;
/// after it, it polls the sockets until `due`. Waits are capped at 100 ms.
pub(super) fn plan_wait(now: u64, due: u64, last_input_us: u64, quantum_us: u64) -> (u64, bool) {
    let quantum_end = last_input_us.saturating_add(quantum_us);
    if now < quantum_end {
        (quantum_end.min(due).saturating_sub(now).min(100_000), false)
    } else {
        (due.saturating_sub(now).min(100_000), true)
    }
}

/// A kernel receive stamp (`kernel_ns`, CLOCK_REALTIME) on the agent's clock, given that the
/// agent read `now_us` when CLOCK_REALTIME said `realtime_ns`: the message is as much older than
/// `now_us` as its stamp is older than `realtime_ns`. A stamp from the future (the wall clock
/// was stepped back) counts as `now_us`; one older than the agent itself as its start.
pub(super) fn kernel_stamp_us(kernel_ns: u64, realtime_ns: u64, now_us: u64) -> u64 {
    now_us.saturating_sub(realtime_ns.saturating_sub(kernel_ns) / 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_reserved_for_what_lives_at_once_and_no_more() {
        // 200 calls/s of 1 s each: 200 alive; a dialog kept 33 s, but a window of 20 s starts
        // only 4,000.
        assert_eq!(live_at_once(200.0, 20_000_000, 1_000_000), 200);
        assert_eq!(live_at_once(200.0, 20_000_000, 33_000_000), 4_000);
        assert_eq!(live_at_once(0.5, 20_000_000, 1_000_000), 1);
        assert_eq!(live_at_once(1e9, u64::MAX, u64::MAX), MAX_RESERVED);
        for rate in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(live_at_once(rate, 20_000_000, 1_000_000), 0, "{rate}");
        }
    }

    #[test]
    fn a_one_core_capacity_run_reserves_all_its_dialogs_up_front() {
        // bench-per-core's 60 s step at 20,000 calls/s: each dialog rings and holds ~1 s and is
        // kept 64·T1 + 1 s after its BYE (reserve_calls). All 700,000 fit, so the slab and the
        // Call-ID map never double while the run is measured.
        assert_eq!(live_at_once(20_000.0, 60_000_000, 35_000_000), 700_000);
    }

    #[test]
    fn kernel_stamps_map_onto_the_agent_clock() {
        let real = 1_700_000_000_000_000_000;
        // Received 250.5 µs before the agent read 10 000 µs.
        assert_eq!(kernel_stamp_us(real - 250_500, real, 10_000), 9_750);
        assert_eq!(kernel_stamp_us(real, real, 10_000), 10_000);
        // Wall clock stepped: never in the future, never before the agent's start.
        assert_eq!(kernel_stamp_us(real + 5_000_000, real, 10_000), 10_000);
        assert_eq!(kernel_stamp_us(real - 20_000_000, real, 10_000), 0);
    }

    #[test]
    fn quantum_defers_polling_but_not_timers() {
        // No quantum: poll right away until the timer.
        assert_eq!(plan_wait(1_000, 1_300, 1_000, 0), (300, true));
        // 400 µs into a 1 ms quantum: sleep blind to its end...
        assert_eq!(plan_wait(1_400, 5_000, 1_000, 1_000), (600, false));
        // ...unless a timer falls due first: wake for it exactly.
        assert_eq!(plan_wait(1_400, 1_550, 1_000, 1_000), (150, false));
        assert_eq!(plan_wait(1_400, 1_000, 1_000, 1_000), (0, false));
        // Quantum over: poll until the timer, capped at 100 ms.
        assert_eq!(plan_wait(2_000, 2_700, 1_000, 1_000), (700, true));
        assert_eq!(plan_wait(2_000, u64::MAX, 1_000, 1_000), (100_000, true));
        assert_eq!(plan_wait(0, u64::MAX, 0, u64::MAX), (100_000, false));
    }
}
