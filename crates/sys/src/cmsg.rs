//! The control messages (cmsg(3)) the kernel attaches to a received datagram, as far as herald
//! asks for them: IP_PKTINFO / IPV6_PKTINFO (the destination address, for wildcard sockets),
//! SCM_TIMESTAMPNS (the receive time) and SO_RXQ_OVFL (the socket's drop count).

use std::mem::size_of;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Control bytes per datagram: room for IP_PKTINFO or IPV6_PKTINFO (CMSG_SPACE 32 or 40),
/// SCM_TIMESTAMPNS (32) and SO_RXQ_OVFL (24) together. Too small a buffer would only make the
/// kernel drop the last ones and set MSG_CTRUNC.
pub(crate) const CONTROL_BYTES: usize = 128;

/// What the control messages of one datagram say.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RxMeta {
    /// IP_PKTINFO / IPV6_PKTINFO: the address the datagram was sent to.
    pub local: Option<IpAddr>,
    /// SCM_TIMESTAMPNS as ns since the epoch (CLOCK_REALTIME).
    pub kernel_ns: Option<u64>,
    /// SO_RXQ_OVFL: datagrams the socket dropped before this one was queued.
    pub drops: Option<u32>,
}

/// Reads the control messages of one datagram.
///
/// # Safety
/// `h` must be a msghdr filled by recvmsg/recvmmsg (or laid out as the kernel does): when
/// `msg_controllen` is not zero, `msg_control` points at that many readable bytes, aligned for
/// `cmsghdr`.
pub(crate) unsafe fn parse(h: &libc::msghdr) -> RxMeta {
    let mut meta = RxMeta::default();
    if h.msg_controllen == 0 {
        return meta;
    }
    // SAFETY: CMSG_FIRSTHDR / CMSG_NXTHDR only return headers that lie whole within
    // msg_control..msg_control + msg_controllen (null otherwise), which the caller promises is
    // readable; each payload is read only when cmsg_len says the kernel wrote all of it, with
    // read_unaligned because CMSG_DATA promises no alignment beyond the header's.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(h);
        while !c.is_null() {
            let data = libc::CMSG_DATA(c);
            let holds = |bytes: usize| (*c).cmsg_len as usize >= libc::CMSG_LEN(bytes as u32) as usize;
            match ((*c).cmsg_level, (*c).cmsg_type) {
                (libc::IPPROTO_IP, libc::IP_PKTINFO) if holds(size_of::<libc::in_pktinfo>()) => {
                    let info = std::ptr::read_unaligned(data.cast::<libc::in_pktinfo>());
                    meta.local = Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(info.ipi_addr.s_addr))));
                }
                (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO) if holds(size_of::<libc::in6_pktinfo>()) => {
                    let info = std::ptr::read_unaligned(data.cast::<libc::in6_pktinfo>());
                    meta.local = Some(IpAddr::V6(Ipv6Addr::from(info.ipi6_addr.s6_addr)));
                }
                (libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS) if holds(size_of::<libc::timespec>()) => {
                    let ts = std::ptr::read_unaligned(data.cast::<libc::timespec>());
                    // A zero stamp means the kernel had none for this packet.
                    if ts.tv_sec > 0 {
                        meta.kernel_ns = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
                    }
                }
                (libc::SOL_SOCKET, libc::SO_RXQ_OVFL) if holds(size_of::<u32>()) => {
                    meta.drops = Some(std::ptr::read_unaligned(data.cast::<u32>()));
                }
                _ => {}
            }
            c = libc::CMSG_NXTHDR(h, c);
        }
    }
    meta
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Appends one control message the way the kernel lays it out (cmsg(3)).
    fn push_cmsg(buf: &mut [u64], used: &mut usize, level: i32, ty: i32, data: &[u8]) {
        // SAFETY: CMSG_* compute sizes only; the header and payload are written inside `buf`,
        // whose size the assertion checks first.
        unsafe {
            let space = libc::CMSG_SPACE(data.len() as u32) as usize;
            assert!(*used + space <= buf.len() * 8);
            let base = buf.as_mut_ptr().cast::<u8>().add(*used);
            let mut hdr: libc::cmsghdr = std::mem::zeroed();
            hdr.cmsg_len = libc::CMSG_LEN(data.len() as u32) as _;
            hdr.cmsg_level = level;
            hdr.cmsg_type = ty;
            std::ptr::write_unaligned(base.cast::<libc::cmsghdr>(), hdr);
            std::ptr::copy_nonoverlapping(data.as_ptr(), base.add(libc::CMSG_LEN(0) as usize), data.len());
            *used += space;
        }
    }

    fn parse_buf(buf: &mut [u64], used: usize) -> RxMeta {
        // SAFETY: msghdr is plain old data; it points at `buf`, alive and aligned for cmsghdr.
        unsafe {
            let mut h: libc::msghdr = std::mem::zeroed();
            h.msg_control = buf.as_mut_ptr().cast();
            h.msg_controllen = used as _;
            parse(&h)
        }
    }

    /// All three kinds fit in [`CONTROL_BYTES`] at once and each is decoded; a message cut short
    /// (a cmsg_len too small for its payload) is ignored rather than read past its end.
    #[test]
    fn parses_pktinfo_timestamp_and_drops_together_and_skips_short_ones() {
        let mut buf = [0u64; CONTROL_BYTES / 8];
        let mut used = 0;
        let mut pktinfo = [0u8; size_of::<libc::in_pktinfo>()];
        // in_pktinfo: ipi_ifindex (4 bytes), ipi_spec_dst (4), ipi_addr (4, network order).
        pktinfo[8..12].copy_from_slice(&[127, 0, 0, 7]);
        push_cmsg(&mut buf, &mut used, libc::IPPROTO_IP, libc::IP_PKTINFO, &pktinfo);
        let mut ts = [0u8; 16];
        ts[..8].copy_from_slice(&1_700_000_000i64.to_ne_bytes());
        ts[8..].copy_from_slice(&123_456_789i64.to_ne_bytes());
        push_cmsg(&mut buf, &mut used, libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS, &ts);
        push_cmsg(&mut buf, &mut used, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, &42u32.to_ne_bytes());
        assert!(used <= CONTROL_BYTES, "CONTROL_BYTES must hold all three ({used} bytes)");
        let meta = parse_buf(&mut buf, used);
        assert_eq!(meta.local, Some(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 7))));
        assert_eq!(meta.kernel_ns, Some(1_700_000_000_123_456_789));
        assert_eq!(meta.drops, Some(42));
        assert_eq!(parse_buf(&mut buf, 0), RxMeta::default());

        let (mut short, mut used) = ([0u64; CONTROL_BYTES / 8], 0);
        push_cmsg(&mut short, &mut used, libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS, &ts[..4]);
        assert_eq!(parse_buf(&mut short, used), RxMeta::default());
    }
}
