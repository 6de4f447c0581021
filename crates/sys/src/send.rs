//! Batched send: sendmmsg(2), up to [`BATCH`] datagrams a call, from headers prepared once.

use crate::batch::{Wait, BATCH};
use crate::cvt::cvt;
use crate::sockaddr::SockName;
use std::io;
use std::mem::zeroed;
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

/// The send headers of one sender, reused for every call: each header points at its iovec once,
/// at creation, and a call writes only what differs per datagram (the payload's address and
/// length, the destination and where it lies). Built on the stack for every flush instead, each
/// datagram's header was zeroed and pointed again and the ~3.5 KB frame probed: 45 instructions a
/// datagram sent, at one or two datagrams a flush (callgrind, issue 21).
pub struct SendBatch {
    /// Boxed: the headers point into it, so it must not move when the batch does.
    slots: Box<SendSlots>,
}

struct SendSlots {
    names: [SockName; BATCH],
    iov: [libc::iovec; BATCH],
    hdrs: [libc::mmsghdr; BATCH],
}

// SAFETY: the raw pointers inside `iov` and `hdrs` (which make the type !Send by default) point
// only into this SendBatch's own box, or at the payloads of the call that is running; Rust code
// never dereferences them, and between calls what they point at is not read by anyone.
unsafe impl Send for SendBatch {}

impl Default for SendBatch {
    fn default() -> SendBatch {
        SendBatch::new()
    }
}

impl SendBatch {
    pub fn new() -> SendBatch {
        // SAFETY: SockName, iovec and mmsghdr are plain old data: all-zero (null pointers, zero
        // lengths, no control buffer, no flags) is a valid value of each, and what sendmmsg
        // expects of the header fields never set below.
        let mut slots: Box<SendSlots> = Box::new(unsafe { zeroed() });
        let SendSlots { iov, hdrs, .. } = &mut *slots;
        let iov = iov.as_mut_ptr();
        for (i, h) in hdrs.iter_mut().enumerate() {
            h.msg_hdr.msg_iov = iov.wrapping_add(i);
            h.msg_hdr.msg_iovlen = 1;
        }
        SendBatch { slots }
    }

    /// Sends `items` in order with as few sendmmsg calls as possible (one per [`BATCH`]).
    /// Returns how many were sent and, when that is not all, the error of the first unsent one
    /// (`WouldBlock`: the send buffer is full). Nothing is allocated.
    pub fn send<T: Outbound>(&mut self, socket: &impl AsFd, items: &[T], wait: Wait) -> (usize, Option<io::Error>) {
        let fd = socket.as_fd().as_raw_fd();
        let flags = match wait {
            Wait::Never => libc::MSG_DONTWAIT,
            Wait::IfBlocking => 0,
        };
        let mut sent = 0;
        while sent < items.len() {
            let chunk = &items[sent..items.len().min(sent + BATCH)];
            let SendSlots { names, iov, hdrs } = &mut *self.slots;
            // The kernel writes back only each header's msg_len: the other fields set here are
            // all that differs from one datagram to the next.
            for (((item, v), h), name) in chunk.iter().zip(iov.iter_mut()).zip(hdrs.iter_mut()).zip(names.iter_mut()) {
                let payload = item.payload();
                // The kernel only reads through iov_base on send; the cast to *mut is the C API's.
                *v = libc::iovec { iov_base: payload.as_ptr() as *mut libc::c_void, iov_len: payload.len() };
                let h = &mut h.msg_hdr;
                match item.destination() {
                    Some(to) => {
                        *name = SockName::new(&to);
                        h.msg_name = name.as_ptr().cast_mut();
                        h.msg_namelen = name.len();
                    }
                    // A connected socket's: a name of length zero is no name, but a non-null
                    // one is an address too short (EINVAL).
                    None => {
                        h.msg_name = std::ptr::null_mut();
                        h.msg_namelen = 0;
                    }
                }
            }
            // SAFETY: the first chunk.len() headers point at their iovecs (`new`), which point at
            // the payloads of `chunk`, and at `names` entries written above (or at no name); all
            // are alive and unmoved until the call returns (`&mut self` and the borrow of
            // `items`); the kernel only reads them (and writes msg_len into `hdrs`). The
            // descriptor is borrowed. The arguments are sendmmsg(2)'s, in its order (see "Raw
            // system calls" in the crate docs).
            let n = unsafe {
                libc::syscall(
                    libc::SYS_sendmmsg,
                    libc::c_long::from(fd),
                    hdrs.as_mut_ptr(),
                    chunk.len() as libc::c_ulong,
                    libc::c_long::from(flags),
                )
            };
            let n = match cvt(n) {
                Ok(n) => n,
                Err(e) => return (sent, Some(e)),
            };
            if n == 0 {
                return (sent, Some(io::Error::from(io::ErrorKind::WouldBlock)));
            }
            sent += n as usize;
        }
        (sent, None)
    }
}

impl std::fmt::Debug for SendBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendBatch").finish_non_exhaustive()
    }
}

/// [`SendBatch::send`] from headers made for this call alone (one allocation): for a sender
/// that sends now and then. One that sends often keeps a [`SendBatch`].
pub fn send_batch<T: Outbound>(socket: &impl AsFd, items: &[T], wait: Wait) -> (usize, Option<io::Error>) {
    SendBatch::new().send(socket, items, wait)
}
