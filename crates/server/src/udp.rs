//! Batched UDP I/O: recvmmsg(2) and sendmmsg(2) on a non-blocking socket, one system call for up
//! to [`BATCH`] datagrams (seed 000: per-datagram syscalls and socket-lock contention dominate a
//! UDP SIP server's cost). Called from inside tokio's readiness (`UdpSocket::try_io`).

use bytes::Bytes;
use socket2::SockAddr;
use std::io;
use std::mem::{size_of, zeroed};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::RawFd;

/// Datagrams per system call.
pub(crate) const BATCH: usize = 32;
/// Control bytes per datagram: room for one IP_PKTINFO or IPV6_PKTINFO message.
const CTRL: usize = 64;

/// One datagram as read.
#[derive(Debug)]
pub(crate) struct Received {
    pub src: SocketAddr,
    /// The destination address the datagram was sent to (IP_PKTINFO), for wildcard sockets.
    pub dst: Option<IpAddr>,
    pub bytes: Bytes,
    /// Longer than the receive slot: the rest was discarded by the kernel.
    pub truncated: bool,
}

/// The receive slots of one worker (reused for every batch, shared by its sockets).
pub(crate) struct RecvBuffers {
    data: Vec<u8>,
    slot: usize,
    names: Vec<libc::sockaddr_storage>,
    ctrl: Vec<[u64; CTRL / 8]>,
}

impl RecvBuffers {
    /// `slot`: the largest datagram accepted whole (the message size limit plus one byte, so that
    /// an over-limit datagram shows as truncated).
    pub(crate) fn new(slot: usize) -> RecvBuffers {
        RecvBuffers {
            data: vec![0; slot * BATCH],
            slot,
            // SAFETY: sockaddr_storage is plain old data; all-zero is a valid value.
            names: (0..BATCH).map(|_| unsafe { zeroed() }).collect(),
            ctrl: vec![[0; CTRL / 8]; BATCH],
        }
    }
}

/// Reads up to [`BATCH`] datagrams without blocking and appends them to `out`. Returns how many;
/// `WouldBlock` when there are none.
pub(crate) fn recv_batch(fd: RawFd, b: &mut RecvBuffers, out: &mut Vec<Received>) -> io::Result<usize> {
    // SAFETY: iovec and mmsghdr are plain old data; all-zero is valid and every pointer is set
    // below to memory owned by `b`, which outlives the call.
    let mut iov: [libc::iovec; BATCH] = unsafe { zeroed() };
    let mut hdrs: [libc::mmsghdr; BATCH] = unsafe { zeroed() };
    let slot = b.slot;
    for (i, chunk) in b.data.chunks_mut(slot).enumerate().take(BATCH) {
        iov[i] = libc::iovec { iov_base: chunk.as_mut_ptr().cast(), iov_len: slot };
        let h = &mut hdrs[i].msg_hdr;
        h.msg_name = (&mut b.names[i] as *mut libc::sockaddr_storage).cast();
        h.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        h.msg_iov = &mut iov[i];
        h.msg_iovlen = 1;
        h.msg_control = b.ctrl[i].as_mut_ptr().cast();
        h.msg_controllen = CTRL as _;
    }
    // SAFETY: hdrs describes BATCH valid buffers; MSG_DONTWAIT keeps the call non-blocking.
    let n = unsafe {
        libc::recvmmsg(fd, hdrs.as_mut_ptr(), BATCH as libc::c_uint, libc::MSG_DONTWAIT, std::ptr::null_mut())
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let n = n as usize;
    for (i, h) in hdrs.iter().enumerate().take(n) {
        // SAFETY: the kernel wrote a socket address of msg_namelen bytes into names[i].
        let Some(src) = (unsafe { to_socket_addr(&b.names[i]) }) else { continue };
        let len = (h.msg_len as usize).min(slot);
        let data = &b.data[i * slot..i * slot + len];
        out.push(Received {
            src,
            // SAFETY: msg_control/msg_controllen were set by the kernel for this message.
            dst: unsafe { pktinfo_dst(&h.msg_hdr) },
            bytes: Bytes::copy_from_slice(data),
            truncated: h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
        });
    }
    Ok(n)
}

/// One datagram waiting to be sent.
#[derive(Debug)]
pub(crate) struct Outgoing {
    pub to: SocketAddr,
    pub bytes: Bytes,
    /// Who asked for it (the engine shard, or `None` for the runtime itself): whom to tell when
    /// it cannot be sent. Not used here.
    pub origin: Option<usize>,
}

/// Sends `items` with as few sendmmsg calls as possible. Returns how many were sent; the first
/// unsent one failed with the returned error (`WouldBlock`: the send buffer is full).
pub(crate) fn send_batch(fd: RawFd, items: &[Outgoing]) -> (usize, Option<io::Error>) {
    let mut sent = 0;
    while sent < items.len() {
        let chunk = &items[sent..items.len().min(sent + BATCH)];
        let names: Vec<SockAddr> = chunk.iter().map(|o| SockAddr::from(o.to)).collect();
        // SAFETY: as in recv_batch; the pointers refer to `names` and `chunk`, alive for the call.
        let mut iov: [libc::iovec; BATCH] = unsafe { zeroed() };
        let mut hdrs: [libc::mmsghdr; BATCH] = unsafe { zeroed() };
        for (i, Outgoing { bytes, .. }) in chunk.iter().enumerate() {
            iov[i] = libc::iovec { iov_base: bytes.as_ptr() as *mut libc::c_void, iov_len: bytes.len() };
            let h = &mut hdrs[i].msg_hdr;
            h.msg_name = names[i].as_ptr() as *mut libc::c_void;
            h.msg_namelen = names[i].len();
            h.msg_iov = &mut iov[i];
            h.msg_iovlen = 1;
        }
        // SAFETY: hdrs describes chunk.len() valid messages.
        let n = unsafe { libc::sendmmsg(fd, hdrs.as_mut_ptr(), chunk.len() as libc::c_uint, libc::MSG_DONTWAIT) };
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

/// # Safety
/// `ss` must hold a socket address written by the kernel.
unsafe fn to_socket_addr(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match ss.ss_family as libc::c_int {
        libc::AF_INET => {
            let a = &*(ss as *const libc::sockaddr_storage as *const libc::sockaddr_in);
            let ip = Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
            Some(SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(a.sin_port))))
        }
        libc::AF_INET6 => {
            let a = &*(ss as *const libc::sockaddr_storage as *const libc::sockaddr_in6);
            let ip = Ipv6Addr::from(a.sin6_addr.s6_addr);
            Some(SocketAddr::V6(SocketAddrV6::new(ip, u16::from_be(a.sin6_port), a.sin6_flowinfo, a.sin6_scope_id)))
        }
        _ => None,
    }
}

/// The destination address from an IP_PKTINFO / IPV6_PKTINFO control message, if present.
///
/// # Safety
/// `h` must be a msghdr filled by recvmsg/recvmmsg whose control buffer is still alive.
unsafe fn pktinfo_dst(h: &libc::msghdr) -> Option<IpAddr> {
    if h.msg_controllen == 0 {
        return None;
    }
    let mut c = libc::CMSG_FIRSTHDR(h);
    while !c.is_null() {
        let data = libc::CMSG_DATA(c);
        match ((*c).cmsg_level, (*c).cmsg_type) {
            (libc::IPPROTO_IP, libc::IP_PKTINFO) => {
                let info = std::ptr::read_unaligned(data as *const libc::in_pktinfo);
                return Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(info.ipi_addr.s_addr))));
            }
            (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO) => {
                let info = std::ptr::read_unaligned(data as *const libc::in6_pktinfo);
                return Some(IpAddr::V6(Ipv6Addr::from(info.ipi6_addr.s6_addr)));
            }
            _ => {}
        }
        c = libc::CMSG_NXTHDR(h, c);
    }
    None
}
