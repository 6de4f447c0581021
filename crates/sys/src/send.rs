//! Batched send: sendmmsg(2), up to [`BATCH`] datagrams a call.

use crate::batch::{Wait, BATCH};
use crate::cvt::cvt;
use crate::sockaddr::SockName;
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
        // Only the first chunk.len() entries are written and passed to the kernel: zeroing
        // whole arrays on every call cost ~5 KB of memset per flush, about 1,100 instructions
        // per proxied call (callgrind). `names` is written only for items with a destination.
        let mut names = [const { MaybeUninit::<SockName>::uninit() }; BATCH];
        let mut iov = [const { MaybeUninit::<libc::iovec>::uninit() }; BATCH];
        let mut hdrs = [const { MaybeUninit::<libc::mmsghdr>::uninit() }; BATCH];
        for (i, item) in chunk.iter().enumerate() {
            let payload = item.payload();
            // The kernel only reads through iov_base on send; the cast to *mut is the C API's.
            let v =
                iov[i].write(libc::iovec { iov_base: payload.as_ptr() as *mut libc::c_void, iov_len: payload.len() });
            // SAFETY: mmsghdr is plain old data; all-zero (null pointers, zero lengths, no
            // control buffer, no flags) is a valid value and what sendmmsg expects of the
            // fields not set below.
            let h = hdrs[i].write(unsafe { zeroed() });
            let h = &mut h.msg_hdr;
            h.msg_iov = v;
            h.msg_iovlen = 1;
            if let Some(to) = item.destination() {
                let name = names[i].write(SockName::new(&to));
                h.msg_name = name.as_ptr().cast_mut();
                h.msg_namelen = name.len();
            }
        }
        // SAFETY: the first chunk.len() headers, all written above, point at `iov`, `names` (the
        // written entries only) and the payloads of `chunk`, all alive and unmoved until the call returns; the
        // kernel only reads them (and writes msg_len into `hdrs`). The descriptor is borrowed.
        // The arguments are sendmmsg(2)'s, in its order (see "Raw system calls" in the crate docs).
        let n = unsafe {
            libc::syscall(
                libc::SYS_sendmmsg,
                libc::c_long::from(fd),
                hdrs.as_mut_ptr().cast::<libc::mmsghdr>(),
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
