//! Clocks and CPU accounting that std does not offer.

use std::mem::zeroed;

fn clock_ns(clock: libc::clockid_t) -> u64 {
    // SAFETY: timespec is plain old data; all-zero is a valid value.
    let mut ts: libc::timespec = unsafe { zeroed() };
    // SAFETY: clock_gettime writes one timespec into a live local (and cannot fail for the
    // clocks used here, which Linux always has).
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID), ns: user and system time of this
/// thread alone, the accounting of a system call's cost.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CLOCK_MONOTONIC in ns (the clock of `std::time::Instant` on Linux), as one number: a load
/// generator that reads the time several times per wake-up and keeps microseconds since its
/// start spent about 60 instructions per read in `Instant::elapsed` (the `timespec`
/// subtraction with its checks) and its conversion (callgrind).
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CLOCK_REALTIME in ns since the epoch: the clock of the kernel's receive stamps
/// ([`crate::Datagram::kernel_ns`]), to tell how long ago a datagram arrived.
pub fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// getrusage(RUSAGE_SELF): this process's CPU time (microsecond precision), peak RSS (KiB on
/// Linux) and the rest of `struct rusage`.
pub fn rusage_self() -> libc::rusage {
    // SAFETY: rusage is plain old data, so all-zero is valid.
    let mut usage: libc::rusage = unsafe { zeroed() };
    // SAFETY: getrusage only writes one rusage into a live local; RUSAGE_SELF is always valid.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    usage
}

/// sysconf(_SC_CLK_TCK): the unit of proc(5)'s CPU fields (100 on every common Linux build);
/// `None` if the system does not say.
pub fn clock_ticks_per_second() -> Option<u64> {
    // SAFETY: sysconf has no preconditions; it returns -1 for an unknown name.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(ticks).ok().filter(|&t| t > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks_tell_real_time_and_this_threads_cpu() {
        let wall = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
        let real = realtime_ns();
        assert!(real.abs_diff(wall) < 1_000_000_000, "{real} vs {wall}");
        let start = thread_cpu_ns();
        let mut x = 0u64;
        while thread_cpu_ns() < start + 2_000_000 {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        // Sleeping costs this thread (almost) no CPU.
        let before = thread_cpu_ns();
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(thread_cpu_ns() - before < 25_000_000);
        let usage = rusage_self();
        let cpu_us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
        assert!(cpu_us(usage.ru_utime) + cpu_us(usage.ru_stime) >= 2_000, "the spin above took 2 ms of CPU");
        assert!(usage.ru_maxrss > 0);
        assert!(clock_ticks_per_second().is_some_and(|t| t >= 100));
    }
}
