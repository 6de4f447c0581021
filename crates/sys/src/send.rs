//! Batched send: sendmmsg(2), up to [`BATCH`] datagrams a call.

use crate::batch::{Wait, BATCH};
use socket2::SockAddr;
use std::io;
use std::mem::{zeroed, MaybeUninit};
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd};

/// A datagram to send: its bytes and where to.
pub trait Outbound {
    fn payload(&self) -> &[u8];
    /// `None`: to the socket's connected peer.
    fn destination(&self) -> Option<SocketAddr>;
}

/// Bytes for an address (the bench generator's send queue).
impl<B: AsRef<[u8]>> Outbound for (B, SocketAddr) {
    fn payload(&self) -> &[u8] {
        self.0.as_ref()
    }
    fn destination(&self) -> Option<SocketAddr> {
        Some(self.1)
    }
}

/// Bare bytes, for a connected socket.
impl Outbound for &[u8] {
    fn payload(&self) -> &[u8] {
        self
    }
    fn destination(&self) -> Option<SocketAddr> {
        None
    }
}

/// Sends `items` in order with as few sendmmsg calls as possible (one per [`BATCH`]). Returns
/// how many were sent and, when that is not all, the error of the first unsent one
/// (`WouldBlock`: the send buffer is full). Nothing is allocated: the addresses are encoded on
/// the stack.
pub fn send_batch<T: Outbound>(socket: &impl AsFd, items: &[T], wait: Wait) -> (usize, Option<io::Error>) {
    let fd = socket.as_fd().as_raw_fd();
    let flags = match wait {
        Wait::Never => libc::MSG_DONTWAIT,
        Wait::IfBlocking => 0,
    };
    let mut sent = 0;
    while sent < items.len() {
        let chunk = &items[sent..items.len().min(sent + BATCH)];
        // Written only for the items that have a destination, and read only through the headers
        // of those items.
        let mut names = [const { MaybeUninit::<SockAddr>::uninit() }; BATCH];
        // SAFETY: iovec and mmsghdr are plain old data; all-zero (null pointers, zero lengths,
        // no control buffer, no flags) is a valid value and what sendmmsg expects of the fields
        // not set below.
        let mut iov: [libc::iovec; BATCH] = unsafe { zeroed() };
        // SAFETY: as for `iov`.
        let mut hdrs: [libc::mmsghdr; BATCH] = unsafe { zeroed() };
        for (v, item) in iov.iter_mut().zip(chunk) {
            let payload = item.payload();
            // The kernel only reads through iov_base on send; the cast to *mut is the C API's.
            *v = libc::iovec { iov_base: payload.as_ptr() as *mut libc::c_void, iov_len: payload.len() };
        }
        let iov_ptr = iov.as_mut_ptr();
        for (i, ((h, item), name)) in hdrs.iter_mut().zip(chunk).zip(names.iter_mut()).enumerate() {
            let h = &mut h.msg_hdr;
            h.msg_iov = iov_ptr.wrapping_add(i);
            h.msg_iovlen = 1;
            if let Some(to) = item.destination() {
                let name = name.write(SockAddr::from(to));
                h.msg_name = name.as_ptr() as *mut libc::c_void;
                h.msg_namelen = name.len();
            }
        }
        // SAFETY: the first chunk.len() headers point at `iov`, `names` (the written entries
        // only) and the payloads of `chunk`, all alive and unmoved until the call returns; the
        // kernel only reads them (and writes msg_len into `hdrs`). The descriptor is borrowed.
        let n = unsafe { libc::sendmmsg(fd, hdrs.as_mut_ptr(), chunk.len() as libc::c_uint, flags) };
        if n < 0 {
            return (sent, Some(io::Error::last_os_error()));
        }
        if n == 0 {
            return (sent, Some(io::Error::from(io::ErrorKind::WouldBlock)));
        }
        sent += n as usize;
    }
    (sent, None)
}
