//! Per-task scheduling and per-process limits of *another* process, for `herald tune`: the EEVDF
//! slice a task asks for (sched_setattr(2) `sched_runtime` on SCHED_OTHER/SCHED_BATCH, Linux
//! 6.12+) and RLIMIT_NOFILE (prlimit(2)). Reading the slice needs no system call:
//! /proc/PID/task/TID/sched shows `se.slice`.

use crate::cvt::cvt;
use std::io;

/// `struct sched_attr` (include/uapi/linux/sched/types.h), SCHED_ATTR_SIZE_VER1: 56 bytes.
#[repr(C)]
#[derive(Default)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
    sched_util_min: u32,
    sched_util_max: u32,
}

fn get_attr(tid: i32) -> io::Result<SchedAttr> {
    let mut attr = SchedAttr::default();
    let size = std::mem::size_of::<SchedAttr>() as u32;
    // SAFETY: `attr` is a plain-old-data struct of `size` bytes that the kernel fills; it stays
    // borrowed for the call.
    let r = unsafe { libc::syscall(libc::SYS_sched_getattr, tid, &mut attr as *mut SchedAttr, size, 0u32) };
    cvt(r)?;
    Ok(attr)
}

/// Asks the scheduler for a slice of `slice_ns` for task `tid` (a thread id; 0 = the calling
/// thread), keeping its policy and nice value. 0 gives the task back the default slice
/// (`base_slice_ns`). The kernel clamps a custom slice to 0.1..=100 ms. Fails with EINVAL on
/// kernels before 6.12 or for tasks that are not SCHED_OTHER/SCHED_BATCH.
pub fn set_task_slice_ns(tid: i32, slice_ns: u64) -> io::Result<()> {
    let mut attr = get_attr(tid)?;
    if attr.sched_policy != libc::SCHED_OTHER as u32 && attr.sched_policy != libc::SCHED_BATCH as u32 {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    attr.size = std::mem::size_of::<SchedAttr>() as u32;
    attr.sched_flags = 0;
    attr.sched_runtime = slice_ns;
    // SAFETY: `attr` is an initialised sched_attr of the size it declares, borrowed for the call.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, tid, &attr as *const SchedAttr, 0u32) };
    cvt(r)?;
    Ok(())
}

/// RLIMIT_NOFILE of process `pid` (0 = this one): (soft, hard). `u64::MAX` is unlimited.
pub fn nofile_limit(pid: i32) -> io::Result<(u64, u64)> {
    let mut old = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: a null new limit only reads; `old` is a valid rlimit borrowed for the call.
    let r = unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, std::ptr::null(), &mut old) };
    cvt(r)?;
    Ok((old.rlim_cur, old.rlim_max))
}

/// Sets RLIMIT_NOFILE of process `pid` (0 = this one). Raising the hard limit needs
/// CAP_SYS_RESOURCE; another user's process needs CAP_SYS_RESOURCE too.
pub fn set_nofile_limit(pid: i32, soft: u64, hard: u64) -> io::Result<()> {
    let new = libc::rlimit { rlim_cur: soft, rlim_max: hard };
    // SAFETY: `new` is a valid rlimit borrowed for the call; a null old limit is allowed.
    let r = unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, &new, std::ptr::null_mut()) };
    cvt(r)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nofile_limit_reads_back_what_was_set() {
        let (soft, hard) = nofile_limit(0).unwrap();
        let lower = soft.min(hard).clamp(64, 1024);
        set_nofile_limit(0, lower, hard).unwrap();
        assert_eq!(nofile_limit(0).unwrap(), (lower, hard));
        set_nofile_limit(0, soft, hard).unwrap();
        assert_eq!(nofile_limit(0).unwrap(), (soft, hard));
    }

    #[test]
    fn a_thread_gets_the_slice_it_asks_for_where_the_kernel_supports_it() {
        let read = || -> u64 {
            let tid = std::fs::read_link("/proc/thread-self").unwrap();
            let tid = tid.file_name().unwrap().to_str().unwrap().to_string();
            let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/sched")).unwrap_or_default();
            text.lines()
                .find(|l| l.starts_with("se.slice"))
                .and_then(|l| l.split(':').nth(1))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0)
        };
        std::thread::spawn(move || {
            if read() == 0 {
                return; // /proc/PID/sched without se.slice: not an EEVDF kernel
            }
            match set_task_slice_ns(0, 300_000) {
                Ok(()) => assert_eq!(read(), 300_000),
                Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{e}"), // before 6.12
            }
        })
        .join()
        .unwrap();
    }
}
