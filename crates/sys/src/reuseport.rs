//! Sockets that several workers bind to the same port (SO_REUSEPORT: the kernel spreads peers
//! over them by 4-tuple hash, so each worker reads its own socket and no socket lock is shared;
//! seed 000).

use crate::sockopt;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io;
use std::net::{SocketAddr, TcpListener, UdpSocket};

/// A socket for `addr` with SO_REUSEPORT, non-blocking and close-on-exec, not yet bound.
fn reuseport_socket(addr: SocketAddr, ty: Type, proto: Protocol) -> io::Result<Socket> {
    let s = Socket::new(Domain::for_address(addr), ty, Some(proto))?;
    if addr.is_ipv6() {
        // 0.0.0.0:5060 and [::]:5060 are separate listen entries: keep them separate sockets.
        s.set_only_v6(true)?;
    }
    s.set_reuse_port(true)?;
    s.set_nonblocking(true)?;
    s.set_cloexec(true)?;
    Ok(s)
}

/// A UDP socket bound to `addr` with SO_REUSEPORT (see [`reuseport_socket`]) and send and receive
/// buffers of `buffer_bytes` (large buffers absorb bursts; forced past net.core.rmem_max where
/// the process may). On a wildcard address every datagram carries the address it was sent to
/// (IP_PKTINFO, [`crate::Datagram::local`]), so that a handler can put the real local address in
/// Via and Record-Route (RFC 3261 §18.2.1).
pub fn reuseport_udp(addr: SocketAddr, buffer_bytes: usize) -> io::Result<UdpSocket> {
    let s = reuseport_socket(addr, Type::DGRAM, Protocol::UDP)?;
    sockopt::force_buffer_sizes(&s, buffer_bytes);
    if addr.ip().is_unspecified() {
        sockopt::enable_pktinfo(&s, addr.is_ipv6())?;
    }
    s.bind(&SockAddr::from(addr))?;
    Ok(s.into())
}

/// A TCP listener on `addr` with SO_REUSEPORT (see [`reuseport_socket`]) and SO_REUSEADDR (a
/// restarted server rebinds while old connections sit in TIME_WAIT), listening with `backlog`.
pub fn reuseport_tcp_listener(addr: SocketAddr, backlog: i32) -> io::Result<TcpListener> {
    let s = reuseport_socket(addr, Type::STREAM, Protocol::TCP)?;
    s.set_reuse_address(true)?;
    s.bind(&SockAddr::from(addr))?;
    s.listen(backlog)?;
    Ok(s.into())
}
