//! Reads and writes on a connected stream socket (TCP): recv(2), send(2) and writev(2) through
//! syscall(2), for the same reason as the batch calls (crate docs, "Raw system calls"): libc's
//! wrappers are cancellation points, ~45 instructions of brackets a call, and a TCP message
//! costs herald about two of these calls each way.

use crate::cvt::cvt;
use std::io;
use std::io::IoSlice;
use std::os::fd::{AsFd, AsRawFd};

/// The most slices one writev(2) takes (IOV_MAX on Linux).
const IOV_MAX: usize = 1024;

/// Reads into `buf` what the socket holds, as recv(2) with no flags (and as `Read` on std's
/// `TcpStream`): 0 at the end of the stream, `WouldBlock` when a non-blocking socket is empty.
pub fn recv(socket: &impl AsFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes for the whole call, and the kernel
    // writes at most that many; the descriptor is borrowed, so it is open for the whole call. The
    // arguments are recv(2)'s: recvfrom(fd, buf, len, flags, NULL, NULL).
    let n = unsafe {
        libc::syscall(
            libc::SYS_recvfrom,
            libc::c_long::from(socket.as_fd().as_raw_fd()),
            buf.as_mut_ptr(),
            buf.len() as libc::c_ulong,
            0 as libc::c_long,
            std::ptr::null_mut::<libc::sockaddr>(),
            std::ptr::null_mut::<libc::socklen_t>(),
        )
    };
    Ok(cvt(n)? as usize)
}

/// Writes what the socket's buffer takes of `buf`, as send(2) with MSG_NOSIGNAL (as `Write` on
/// std's `TcpStream`: a peer that closed is an `EPIPE` error, not a signal).
pub fn send(socket: &impl AsFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for reads of `buf.len()` bytes for the whole call, and the kernel
    // only reads it; the descriptor is borrowed. The arguments are send(2)'s: sendto(fd, buf,
    // len, flags, NULL, 0).
    let n = unsafe {
        libc::syscall(
            libc::SYS_sendto,
            libc::c_long::from(socket.as_fd().as_raw_fd()),
            buf.as_ptr(),
            buf.len() as libc::c_ulong,
            libc::c_long::from(libc::MSG_NOSIGNAL),
            std::ptr::null::<libc::sockaddr>(),
            0 as libc::c_long,
        )
    };
    Ok(cvt(n)? as usize)
}

/// Writes what the socket's buffer takes of `bufs`, in order, as writev(2) (and as
/// `write_vectored` on std's `TcpStream`; at most [`IOV_MAX`] slices are offered).
pub fn writev(socket: &impl AsFd, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
    let bufs = &bufs[..bufs.len().min(IOV_MAX)];
    // SAFETY: `IoSlice` is ABI-compatible with `struct iovec` (std guarantees it on Unix), and
    // every slice is valid for reads for the whole call; the kernel only reads them. The
    // descriptor is borrowed. The arguments are writev(2)'s.
    let n = unsafe {
        libc::syscall(
            libc::SYS_writev,
            libc::c_long::from(socket.as_fd().as_raw_fd()),
            bufs.as_ptr().cast::<libc::iovec>(),
            bufs.len() as libc::c_long,
        )
    };
    Ok(cvt(n)? as usize)
}
