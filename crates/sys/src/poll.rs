//! Waiting for descriptors to become ready: ppoll(2).

use crate::cvt::cvt;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::time::Duration;

/// ppoll(2) over `fds` for up to `timeout` (nanosecond resolution, so sub-millisecond timeouts
/// are honoured; no signal mask). Returns how many entries have events in `revents`. A negative
/// fd is ignored, as poll(2) documents; a closed one reports POLLNVAL. With no entries it simply
/// sleeps.
pub fn poll(fds: &mut [libc::pollfd], timeout: Duration) -> io::Result<usize> {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(libc::time_t::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as _,
    };
    // SAFETY: `fds` is a valid, writable array of fds.len() pollfd structs and `ts` a live
    // timespec, both alive for the call; the kernel only reads the fd numbers (polling changes
    // nothing about the descriptors) and writes `revents`.
    let n = unsafe { libc::ppoll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, &ts, std::ptr::null()) };
    Ok(cvt(n)? as usize)
}

/// Waits up to `timeout` for room in `socket`'s send buffer (POLLOUT). False on timeout.
pub fn wait_writable(socket: &impl AsFd, timeout: Duration) -> bool {
    let mut p = [libc::pollfd { fd: socket.as_fd().as_raw_fd(), events: libc::POLLOUT, revents: 0 }];
    matches!(poll(&mut p, timeout), Ok(n) if n > 0) && p[0].revents & libc::POLLOUT != 0
}
