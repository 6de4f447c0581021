//! Batched UDP I/O: recvmmsg(2) and sendmmsg(2), one system call for up to [`BATCH`] datagrams
//! (seed 000: per-datagram syscalls and socket-lock contention dominate a UDP SIP server's cost).
//! A receiver thread blocks in recvmmsg itself (module `udp_receiver`): no readiness event loop,
//! so a wake-up costs one receive call instead of epoll_wait, recvmmsg and a final EAGAIN.

use bytes::Bytes;
use socket2::SockAddr;
use std::io;
use std::mem::{size_of, zeroed};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::RawFd;

/// Datagrams per system call.
pub(crate) const BATCH: usize = 32;
/// Control bytes per datagram: room for IP_PKTINFO or IPV6_PKTINFO (CMSG_SPACE 32 or 40),
/// SCM_TIMESTAMPNS (32) and SO_RXQ_OVFL (24). Too small a buffer would only set MSG_CTRUNC.
const CTRL: usize = 128;

/// One datagram as read.
#[derive(Debug)]
pub(crate) struct Received {
    pub src: SocketAddr,
    /// The destination address the datagram was sent to (IP_PKTINFO), for wildcard sockets.
    pub dst: Option<IpAddr>,
    pub bytes: Bytes,
    /// Longer than the receive slot: the rest was discarded by the kernel.
    pub truncated: bool,
    /// When the kernel received it, CLOCK_REALTIME ns (SO_TIMESTAMPNS, if enabled).
    pub kernel_ns: Option<u64>,
    /// The socket's drop count when it was queued (SO_RXQ_OVFL; sent only once non-zero).
    pub drops: Option<u32>,
}

/// Asks the kernel to attach, to every datagram read from `fd`, its receive time (socket(7)
/// SO_TIMESTAMPNS: a `struct timespec` of CLOCK_REALTIME in an SCM_TIMESTAMPNS message) and the
/// socket's cumulative drop count (socket(7) SO_RXQ_OVFL: a u32, present once non-zero).
/// Enabling timestamps makes the kernel stamp every incoming packet (a clock read each), which is
/// why herald does it only when metrics are configured.
pub(crate) fn enable_rx_metadata(fd: RawFd) -> io::Result<()> {
    for opt in [libc::SO_TIMESTAMPNS, libc::SO_RXQ_OVFL] {
        let on: libc::c_int = 1;
        // SAFETY: setsockopt reads size_of::<c_int>() bytes from a live local.
        let r = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                (&on as *const libc::c_int).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
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

/// Reads up to [`BATCH`] datagrams and appends them to `out`. Returns how many. On a blocking
/// socket it waits for the first one, up to the socket's SO_RCVTIMEO, and then takes only what
/// is already queued (MSG_WAITFORONE); on a non-blocking one it returns at once. `WouldBlock`
/// when there were none.
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
    // SAFETY: hdrs describes BATCH valid buffers.
    let n = unsafe {
        libc::recvmmsg(fd, hdrs.as_mut_ptr(), BATCH as libc::c_uint, libc::MSG_WAITFORONE, std::ptr::null_mut())
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
        // SAFETY: msg_control/msg_controllen were set by the kernel for this message.
        let meta = unsafe { control_messages(&h.msg_hdr) };
        out.push(Received {
            src,
            dst: meta.dst,
            bytes: Bytes::copy_from_slice(data),
            truncated: h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
            kernel_ns: meta.kernel_ns,
            drops: meta.drops,
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

/// Waits up to `timeout` for room in `fd`'s send buffer (poll(2) POLLOUT). False on timeout.
pub(crate) fn wait_writable(fd: RawFd, timeout: std::time::Duration) -> bool {
    let mut p = libc::pollfd { fd, events: libc::POLLOUT, revents: 0 };
    let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
    // SAFETY: one valid pollfd for the duration of the call.
    let r = unsafe { libc::poll(&mut p, 1, ms) };
    r > 0 && p.revents & libc::POLLOUT != 0
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

/// What the control messages of one datagram say.
#[derive(Debug, Default, PartialEq, Eq)]
struct RxMeta {
    /// IP_PKTINFO / IPV6_PKTINFO destination address.
    dst: Option<IpAddr>,
    /// SCM_TIMESTAMPNS as ns since the epoch.
    kernel_ns: Option<u64>,
    /// SO_RXQ_OVFL.
    drops: Option<u32>,
}

/// Reads the control messages the kernel attached to one datagram.
///
/// # Safety
/// `h` must be a msghdr filled by recvmsg/recvmmsg whose control buffer is still alive.
unsafe fn control_messages(h: &libc::msghdr) -> RxMeta {
    let mut meta = RxMeta::default();
    if h.msg_controllen == 0 {
        return meta;
    }
    let mut c = libc::CMSG_FIRSTHDR(h);
    while !c.is_null() {
        let data = libc::CMSG_DATA(c);
        match ((*c).cmsg_level, (*c).cmsg_type) {
            (libc::IPPROTO_IP, libc::IP_PKTINFO) => {
                let info = std::ptr::read_unaligned(data as *const libc::in_pktinfo);
                meta.dst = Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(info.ipi_addr.s_addr))));
            }
            (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO) => {
                let info = std::ptr::read_unaligned(data as *const libc::in6_pktinfo);
                meta.dst = Some(IpAddr::V6(Ipv6Addr::from(info.ipi6_addr.s6_addr)));
            }
            (libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS) => {
                let ts = std::ptr::read_unaligned(data as *const libc::timespec);
                // A zero stamp means the kernel had none for this packet.
                if ts.tv_sec > 0 {
                    meta.kernel_ns = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
                }
            }
            (libc::SOL_SOCKET, libc::SO_RXQ_OVFL) => {
                meta.drops = Some(std::ptr::read_unaligned(data as *const u32));
            }
            _ => {}
        }
        c = libc::CMSG_NXTHDR(h, c);
    }
    meta
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Appends one control message the way the kernel lays it out (cmsg(3)).
    fn push_cmsg(buf: &mut [u64], used: &mut usize, level: i32, ty: i32, data: &[u8]) {
        // SAFETY: CMSG_* compute sizes only; the header and data are written inside `buf`,
        // whose size the assertion checks first.
        unsafe {
            let space = libc::CMSG_SPACE(data.len() as u32) as usize;
            assert!(*used + space <= buf.len() * 8);
            let base = (buf.as_mut_ptr() as *mut u8).add(*used);
            let hdr =
                libc::cmsghdr { cmsg_len: libc::CMSG_LEN(data.len() as u32) as _, cmsg_level: level, cmsg_type: ty };
            std::ptr::write_unaligned(base as *mut libc::cmsghdr, hdr);
            let payload = base.add(libc::CMSG_LEN(0) as usize);
            std::ptr::copy_nonoverlapping(data.as_ptr(), payload, data.len());
            *used += space;
        }
    }

    fn parse(buf: &mut [u64], used: usize) -> RxMeta {
        // SAFETY: msghdr is plain old data; it points at `buf`, alive for the call.
        unsafe {
            let mut h: libc::msghdr = zeroed();
            h.msg_control = buf.as_mut_ptr().cast();
            h.msg_controllen = used as _;
            control_messages(&h)
        }
    }

    #[test]
    fn parses_pktinfo_timestamp_and_drops_together() {
        let mut buf = [0u64; CTRL / 8];
        let mut used = 0;
        // SAFETY: in_pktinfo is plain old data.
        let mut info: libc::in_pktinfo = unsafe { zeroed() };
        info.ipi_addr.s_addr = u32::from(Ipv4Addr::new(127, 0, 0, 7)).to_be();
        // SAFETY: viewing a plain-old-data struct as bytes.
        let info_bytes = unsafe {
            std::slice::from_raw_parts((&info as *const libc::in_pktinfo).cast::<u8>(), size_of::<libc::in_pktinfo>())
        };
        push_cmsg(&mut buf, &mut used, libc::IPPROTO_IP, libc::IP_PKTINFO, info_bytes);
        let mut ts = [0u8; 16];
        ts[..8].copy_from_slice(&1_700_000_000i64.to_ne_bytes());
        ts[8..].copy_from_slice(&123_456_789i64.to_ne_bytes());
        push_cmsg(&mut buf, &mut used, libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS, &ts);
        push_cmsg(&mut buf, &mut used, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, &42u32.to_ne_bytes());
        assert!(used <= CTRL, "CTRL must hold all three ({used} bytes)");
        let meta = parse(&mut buf, used);
        assert_eq!(meta.dst, Some(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 7))));
        assert_eq!(meta.kernel_ns, Some(1_700_000_000_123_456_789));
        assert_eq!(meta.drops, Some(42));
        assert_eq!(parse(&mut buf, 0), RxMeta::default());
    }

    /// The kernel really attaches a receive timestamp once it is enabled (loopback).
    #[test]
    fn kernel_timestamps_arrive() {
        let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        use std::os::fd::AsRawFd;
        enable_rx_metadata(rx.as_raw_fd()).unwrap();
        rx.set_nonblocking(true).unwrap();
        let before = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
        tx.send_to(b"x", rx.local_addr().unwrap()).unwrap();
        let mut bufs = RecvBuffers::new(64);
        let mut out = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while out.is_empty() {
            match recv_batch(rx.as_raw_fd(), &mut bufs, &mut out) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(std::time::Duration::from_millis(1))
                }
                Err(e) => panic!("{e}"),
            }
            assert!(std::time::Instant::now() < deadline, "no datagram");
        }
        let after = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
        let ts = out[0].kernel_ns.expect("SCM_TIMESTAMPNS");
        assert!(before <= ts && ts <= after, "{before} <= {ts} <= {after}");
        assert_eq!(out[0].drops, None, "no drops yet, so no SO_RXQ_OVFL message");
    }
}
