//! Socket addresses as the kernel writes them (`struct sockaddr_in` / `sockaddr_in6`, network
//! byte order) turned into [`SocketAddr`].

use std::mem::size_of;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// The IPv4 or IPv6 address held in `storage` (as recvmmsg writes a datagram's source); `None`
/// for any other family, or for storage the kernel left zeroed.
pub(crate) fn from_storage(storage: &libc::sockaddr_storage) -> Option<SocketAddr> {
    // SAFETY: sockaddr_storage is, by its definition (socket.h), large and aligned enough for
    // every address family's sockaddr, and from_sockaddr reads only the struct its family names.
    unsafe { from_sockaddr((storage as *const libc::sockaddr_storage).cast()) }
}

/// The IPv4 or IPv6 address `sa` points at, by its family; `None` for other families.
///
/// # Safety
/// `sa` must point at a readable, aligned `sockaddr` whose memory holds the whole struct its
/// `sa_family` names (`sockaddr_in` for AF_INET, `sockaddr_in6` for AF_INET6), as the kernel
/// guarantees for the addresses it returns.
pub(crate) unsafe fn from_sockaddr(sa: *const libc::sockaddr) -> Option<SocketAddr> {
    // SAFETY: the caller promises a readable sockaddr.
    match unsafe { (*sa).sa_family } as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the caller promises that an AF_INET address is a whole sockaddr_in.
            let a = unsafe { &*sa.cast::<libc::sockaddr_in>() };
            let ip = Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
            Some(SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(a.sin_port))))
        }
        libc::AF_INET6 => {
            // SAFETY: the caller promises that an AF_INET6 address is a whole sockaddr_in6.
            let a = unsafe { &*sa.cast::<libc::sockaddr_in6>() };
            let ip = Ipv6Addr::from(a.sin6_addr.s6_addr);
            Some(SocketAddr::V6(SocketAddrV6::new(ip, u16::from_be(a.sin6_port), a.sin6_flowinfo, a.sin6_scope_id)))
        }
        _ => None,
    }
}

/// A destination address as sendmsg(2) reads it: a `sockaddr_in` or `sockaddr_in6` and its
/// length. 28 bytes, where socket2's `SockAddr` is a whole zeroed 128-byte `sockaddr_storage`:
/// zeroing and copying that for every datagram sent was ~35 instructions a datagram (callgrind,
/// issue 21).
#[derive(Clone, Copy)]
pub(crate) struct SockName {
    name: Name,
    len: libc::socklen_t,
}

#[derive(Clone, Copy)]
#[repr(C)]
union Name {
    v4: libc::sockaddr_in,
    v6: libc::sockaddr_in6,
}

impl SockName {
    pub(crate) fn new(addr: &SocketAddr) -> SockName {
        match addr {
            SocketAddr::V4(a) => {
                let v4 = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: a.port().to_be(),
                    sin_addr: libc::in_addr { s_addr: u32::from(*a.ip()).to_be() },
                    sin_zero: [0; 8],
                };
                SockName { name: Name { v4 }, len: size_of::<libc::sockaddr_in>() as libc::socklen_t }
            }
            SocketAddr::V6(a) => {
                let v6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: a.port().to_be(),
                    sin6_flowinfo: a.flowinfo(),
                    sin6_addr: libc::in6_addr { s6_addr: a.ip().octets() },
                    sin6_scope_id: a.scope_id(),
                };
                SockName { name: Name { v6 }, len: size_of::<libc::sockaddr_in6>() as libc::socklen_t }
            }
        }
    }

    /// For `msg_name`: the kernel only reads through it on send.
    pub(crate) fn as_ptr(&self) -> *const libc::c_void {
        (&self.name as *const Name).cast()
    }

    pub(crate) fn len(&self) -> libc::socklen_t {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use socket2::SockAddr;

    /// The 28-byte encoding holds what socket2's does, byte for byte over its length, and
    /// decodes to the same address.
    #[test]
    fn a_sock_name_is_what_socket2_encodes() {
        for text in ["127.0.0.1:5060", "192.0.2.7:1", "[::1]:5061", "[fe80::1%3]:5062", "[2001:db8::9]:65535"] {
            let addr: SocketAddr = text.parse().unwrap();
            let ours = SockName::new(&addr);
            let theirs = SockAddr::from(addr);
            assert_eq!(ours.len(), theirs.len(), "{text}");
            // SAFETY: both point at at least `len` readable bytes.
            let (a, b) = unsafe {
                (
                    std::slice::from_raw_parts(ours.as_ptr().cast::<u8>(), ours.len() as usize),
                    std::slice::from_raw_parts(theirs.as_ptr().cast::<u8>(), theirs.len() as usize),
                )
            };
            assert_eq!(a, b, "{text}");
            // SAFETY: a whole sockaddr_in or sockaddr_in6, by its family.
            assert_eq!(unsafe { from_sockaddr(ours.as_ptr().cast()) }, Some(addr), "{text}");
        }
    }

    /// What socket2 encodes (the layout the kernel uses) decodes to the same address.
    #[test]
    fn decodes_what_the_kernel_layout_holds() {
        for text in ["127.0.0.1:5060", "192.0.2.7:1", "[::1]:5061", "[fe80::1%3]:5062"] {
            let addr: SocketAddr = text.parse().unwrap();
            let encoded = SockAddr::from(addr);
            // SAFETY: SockAddr holds a sockaddr_storage, all-zero beyond the encoded address.
            let storage = unsafe { *encoded.as_ptr().cast::<libc::sockaddr_storage>() };
            assert_eq!(from_storage(&storage), Some(addr), "{text}");
        }
        // SAFETY: sockaddr_storage is plain old data; all-zero (AF_UNSPEC) is valid.
        let empty: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        assert_eq!(from_storage(&empty), None);
    }
}
