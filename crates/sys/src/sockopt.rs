//! Socket options that socket2 does not wrap.

use crate::cvt::cvt;
use std::io;
use std::mem::size_of;
use std::os::fd::{AsFd, AsRawFd};

/// Sets an integer socket option.
pub(crate) fn set_int(
    socket: &impl AsFd,
    level: libc::c_int,
    option: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: setsockopt reads size_of::<c_int>() bytes from a live local; the descriptor is
    // borrowed, so it is open for the call.
    let r = unsafe {
        libc::setsockopt(
            socket.as_fd().as_raw_fd(),
            level,
            option,
            (&value as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    cvt(r).map(drop)
}

/// Asks the kernel to attach to every datagram read from `socket` its receive time (socket(7)
/// SO_TIMESTAMPNS: a `struct timespec` of CLOCK_REALTIME in an SCM_TIMESTAMPNS message), read
/// back as [`crate::Datagram::kernel_ns`]. It makes the kernel read the clock for every incoming
/// packet, which is why herald serve does it only when metrics need it.
pub fn enable_rx_timestamps(socket: &impl AsFd) -> io::Result<()> {
    set_int(socket, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)
}

/// [`enable_rx_timestamps`] and the socket's cumulative drop count (socket(7) SO_RXQ_OVFL: a u32,
/// attached once non-zero), read back as [`crate::Datagram::drops`].
pub fn enable_rx_metadata(socket: &impl AsFd) -> io::Result<()> {
    enable_rx_timestamps(socket)?;
    set_int(socket, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1)
}

/// IP_PKTINFO (IPv4) or IPV6_RECVPKTINFO: every datagram carries the address it was sent to,
/// read back as [`crate::Datagram::local`].
pub(crate) fn enable_pktinfo(socket: &impl AsFd, v6: bool) -> io::Result<()> {
    match v6 {
        true => set_int(socket, libc::IPPROTO_IPV6, libc::IPV6_RECVPKTINFO, 1),
        false => set_int(socket, libc::IPPROTO_IP, libc::IP_PKTINFO, 1),
    }
}

/// Receive and send buffers of `bytes`. SO_RCVBUFFORCE / SO_SNDBUFFORCE lift the
/// net.core.rmem_max / wmem_max cap where the process may (CAP_NET_ADMIN); otherwise the plain
/// options, which the kernel clamps to that cap. Best effort: a smaller buffer still works.
pub(crate) fn force_buffer_sizes(socket: &socket2::Socket, bytes: usize) {
    let v = bytes.min(i32::MAX as usize) as libc::c_int;
    if set_int(socket, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, v).is_err() {
        let _ = socket.set_recv_buffer_size(bytes);
    }
    if set_int(socket, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, v).is_err() {
        let _ = socket.set_send_buffer_size(bytes);
    }
}
