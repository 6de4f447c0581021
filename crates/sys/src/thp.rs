//! Transparent huge pages for the whole process: prctl(2) PR_SET_THP_DISABLE.
//!
//! Why herald turns them off (the default; `[server] transparent_huge_pages = true` keeps them):
//! mimalloc asks for huge pages on its arenas (MADV_HUGEPAGE), so each first touch of a 2 MiB
//! region, and each touch after mimalloc has purged a free one, faults in a huge page and zeroes
//! all of it on the spot, inside the receiver's loop. perf on the one-core benchmark at 12,000
//! calls/s put 10.7% of the core in `clear_page_erms` under `do_huge_pmd_anonymous_page`, far
//! more than the heap grew. Measured at 16,000 calls/s (one worker pinned, 40 s windows, herald's
//! own CPU from /proc, five runs each, ABAB): system time 29.8-30.9 µs a call with huge pages,
//! 24.7-25.8 without (user time the same, 11.6-13.2); SRD p99 14-113 ms with two of the five
//! runs retransmitting, against 3.6-43 ms and none. The cost without them: ~0.8 minor faults a
//! call of 4 KiB each instead of ~0.02 of 2 MiB.
//! The flag covers every mapping of the process whatever the system's THP mode (`always`
//! included), and children inherit it; Redis turns THP off for itself the same way
//! (`disable-thp`, for the same latency spikes).

use crate::cvt::cvt;
use std::io;

/// Turns transparent huge pages off (`true`) or back on (`false`) for this process. Fails with
/// EINVAL on kernels before 3.15.
pub fn set_thp_disabled(disabled: bool) -> io::Result<()> {
    // SAFETY: PR_SET_THP_DISABLE takes one integer argument and the rest zero; it touches no
    // memory of ours.
    cvt(unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, disabled as libc::c_ulong, 0, 0, 0) })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether transparent huge pages are off for this process (herald itself never asks: the
    /// tests outside this crate read /proc/PID/status).
    fn thp_disabled() -> io::Result<bool> {
        // SAFETY: PR_GET_THP_DISABLE takes no argument and returns the flag.
        let r = cvt(unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) })?;
        Ok(r != 0)
    }

    #[test]
    fn the_flag_reads_back_as_it_was_set() {
        let before = thp_disabled().unwrap();
        set_thp_disabled(true).unwrap();
        assert!(thp_disabled().unwrap());
        set_thp_disabled(false).unwrap();
        assert!(!thp_disabled().unwrap());
        set_thp_disabled(before).unwrap();
    }
}
