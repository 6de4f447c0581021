//! A timerfd(2) on CLOCK_MONOTONIC: a descriptor that becomes readable at a set instant, so a
//! reactor that waits on descriptors alone (a tokio runtime built without its time driver) can
//! wake for timers. herald's worker runtimes run that way: tokio's time driver read the clock
//! twice and walked its wheel on every reactor turn, ~3k instructions per call proxied over TCP
//! (callgrind, issue 21), where a worker's timers change rarely (module
//! `herald_server::local_timers`).

use crate::cvt::cvt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A new non-blocking, close-on-exec timerfd on CLOCK_MONOTONIC (the clock of
/// `std::time::Instant` on Linux), disarmed.
pub fn timerfd() -> io::Result<OwnedFd> {
    // SAFETY: timerfd_create takes no pointers; the flags are valid.
    let fd = cvt(unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) })?;
    // SAFETY: a descriptor the kernel just returned, owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Sets `fd` (from [`timerfd`]) to expire once at `at`, or disarms it (`None`). An instant in the
/// past expires at once. It never expires before `at` (see [`monotonic_of`]).
pub fn set_timerfd(fd: impl AsFd, at: Option<Instant>) -> io::Result<()> {
    // SAFETY: itimerspec is plain old data; all-zero (disarm) is a valid value.
    let mut spec: libc::itimerspec = unsafe { std::mem::zeroed() };
    if let Some(at) = at {
        let ns = monotonic_of(at);
        spec.it_value.tv_sec = (ns / 1_000_000_000) as libc::time_t;
        spec.it_value.tv_nsec = (ns % 1_000_000_000) as libc::c_long;
    }
    // SAFETY: `spec` is a live local read by the call; the old value is not asked for (null).
    let r =
        unsafe { libc::timerfd_settime(fd.as_fd().as_raw_fd(), libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut()) };
    cvt(r).map(drop)
}

/// Reads `fd`'s expiry count, clearing its readiness; 0 when it has not expired (`WouldBlock`).
pub fn read_timerfd(fd: impl AsFd) -> io::Result<u64> {
    let mut count = [0u8; 8];
    // SAFETY: reads at most 8 bytes into a live 8-byte local.
    let r = unsafe { libc::read(fd.as_fd().as_raw_fd(), count.as_mut_ptr().cast(), 8) };
    match cvt(r as libc::c_int) {
        Ok(_) => Ok(u64::from_ne_bytes(count)),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
        Err(e) => Err(e),
    }
}

/// `at` as CLOCK_MONOTONIC nanoseconds, at least 1 (0 would disarm). `Instant` does not show
/// its timespec, so one reading of both clocks, taken once, anchors the mapping; the clock is
/// read after the `Instant`, so the anchor is late if anything, and a timer set through it
/// fires at or after its instant, never before.
fn monotonic_of(at: Instant) -> u64 {
    static ANCHOR: OnceLock<(Instant, u64)> = OnceLock::new();
    let &(base, base_ns) = ANCHOR.get_or_init(|| {
        let base = Instant::now();
        (base, crate::monotonic_ns())
    });
    let ahead = at.checked_duration_since(base).unwrap_or(Duration::ZERO);
    let ns = base_ns.saturating_add(u64::try_from(ahead.as_nanos()).unwrap_or(u64::MAX));
    ns.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_expires_at_its_instant_and_not_before() {
        let fd = timerfd().unwrap();
        assert_eq!(read_timerfd(&fd).unwrap(), 0, "disarmed");
        let at = Instant::now() + Duration::from_millis(30);
        set_timerfd(&fd, Some(at)).unwrap();
        assert_eq!(read_timerfd(&fd).unwrap(), 0, "not yet");
        // Bounded: a timer that never expires fails here instead of hanging the test run.
        let give_up = at + Duration::from_secs(5);
        while read_timerfd(&fd).unwrap() == 0 {
            assert!(Instant::now() < give_up, "never expired");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(Instant::now() >= at, "expired early");
    }

    #[test]
    fn a_past_instant_expires_at_once_and_none_disarms() {
        let fd = timerfd().unwrap();
        set_timerfd(&fd, Some(Instant::now() - Duration::from_millis(5))).unwrap();
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(read_timerfd(&fd).unwrap(), 1);
        set_timerfd(&fd, Some(Instant::now() + Duration::from_millis(5))).unwrap();
        set_timerfd(&fd, None).unwrap();
        std::thread::sleep(Duration::from_millis(10));
        assert_eq!(read_timerfd(&fd).unwrap(), 0);
    }
}
