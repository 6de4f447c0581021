//! Socket creation: per worker, one UDP socket and one TCP listener (serving TCP or TLS) per listen
//! address, all bound to the same port with SO_REUSEPORT so the kernel spreads peers over workers by 4-tuple hash.

use crate::config::{Config, ListenTransport};
use crate::ServerError;
use herald_core::Transport;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io;
use std::net::{SocketAddr, TcpListener, UdpSocket};

/// What one worker owns.
#[derive(Debug, Default)]
pub(crate) struct WorkerSockets {
    pub udp: Vec<UdpSocket>,
    /// Stream listeners: TCP or TLS (the handshake is the connection task's business).
    pub tcp: Vec<(TcpListener, Transport)>,
}

/// An address herald listens on, with the real port when the config asked for port 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BoundAddr {
    pub transport: Transport,
    pub addr: SocketAddr,
}

/// Binds every listen entry `workers` times. Port 0 is resolved once, to a port free for UDP and
/// TCP alike ([`free_port`]), which every socket of the entry then binds; a clash on that port
/// (someone took it in between) is retried with a new one.
pub(crate) fn bind_all(config: &Config, workers: usize) -> Result<(Vec<WorkerSockets>, Vec<BoundAddr>), ServerError> {
    let mut per_worker: Vec<WorkerSockets> = (0..workers).map(|_| WorkerSockets::default()).collect();
    let mut bound = Vec::new();
    let buf = config.server.udp_buffer_bytes;
    for l in &config.listen {
        let want_udp = l.transports.contains(&ListenTransport::Udp);
        // TCP and TLS never share an entry (config validation): one TCP listener serves either.
        let stream = l.transports.iter().copied().find(|t| t.is_stream()).map(ListenTransport::to_transport);
        let mut attempt = 0;
        let (udp, tcp, addr) = loop {
            attempt += 1;
            let addr = match l.address.port() {
                0 => free_port(l.address, want_udp, stream.is_some()).map_err(|source| ServerError::Bind {
                    addr: l.address,
                    transport: Transport::Udp,
                    source,
                })?,
                _ => l.address,
            };
            match bind_entry(addr, want_udp, stream, workers, buf) {
                Ok(r) => break r,
                Err((e, _)) if l.address.port() == 0 && e.kind() == io::ErrorKind::AddrInUse && attempt < 16 => {
                    continue
                }
                Err((source, transport)) => return Err(ServerError::Bind { addr: l.address, transport, source }),
            }
        };
        for (w, s) in udp.into_iter().enumerate() {
            per_worker[w].udp.push(s);
        }
        if let Some(transport) = stream {
            for (w, s) in tcp.into_iter().enumerate() {
                per_worker[w].tcp.push((s, transport));
            }
            bound.push(BoundAddr { transport, addr });
        }
        if want_udp {
            bound.insert(bound.len() - usize::from(stream.is_some()), BoundAddr { transport: Transport::Udp, addr });
        }
    }
    Ok((per_worker, bound))
}

/// `addr` with a port that no socket holds for UDP (when `udp`) or TCP (when `tcp`), found with
/// probe sockets that do not set SO_REUSEPORT and are closed again. Binding port 0 directly would
/// not do: with SO_REUSEPORT set, the kernel may hand out a port that a reuseport socket of the
/// same user already holds (Linux treats them as compatible), and the two servers - two in one
/// test process, say - would then share each other's traffic. Another process may still take
/// the port before the real sockets bind it; [`bind_all`] then tries again.
fn free_port(addr: SocketAddr, udp: bool, tcp: bool) -> io::Result<SocketAddr> {
    let probe = |ty: Type, proto: Protocol, at: SocketAddr| -> io::Result<SocketAddr> {
        let s = Socket::new(Domain::for_address(at), ty, Some(proto))?;
        if at.is_ipv6() {
            s.set_only_v6(true)?;
        }
        s.bind(&SockAddr::from(at))?;
        s.local_addr()?.as_socket().ok_or_else(|| io::Error::other("not an IP socket"))
    };
    for _ in 0..16 {
        let first =
            if udp { probe(Type::DGRAM, Protocol::UDP, addr)? } else { probe(Type::STREAM, Protocol::TCP, addr)? };
        if !(udp && tcp) {
            return Ok(first);
        }
        match probe(Type::STREAM, Protocol::TCP, first) {
            Ok(both) => return Ok(both),
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(io::ErrorKind::AddrInUse, "no port free for both UDP and TCP in 16 tries"))
}

type Entry = (Vec<UdpSocket>, Vec<TcpListener>, SocketAddr);

fn bind_entry(
    mut addr: SocketAddr,
    want_udp: bool,
    stream: Option<Transport>,
    workers: usize,
    buf: usize,
) -> Result<Entry, (io::Error, Transport)> {
    let mut udp = Vec::new();
    let mut tcp = Vec::new();
    for _ in 0..workers {
        if want_udp {
            let s = udp_socket(addr, buf).map_err(|e| (e, Transport::Udp))?;
            addr = s.local_addr().map_err(|e| (e, Transport::Udp))?;
            udp.push(s);
        }
        if let Some(t) = stream {
            let s = tcp_listener(addr).map_err(|e| (e, t))?;
            addr = s.local_addr().map_err(|e| (e, t))?;
            tcp.push(s);
        }
    }
    Ok((udp, tcp, addr))
}

fn new_socket(addr: SocketAddr, ty: Type, proto: Protocol) -> io::Result<Socket> {
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

fn udp_socket(addr: SocketAddr, buf: usize) -> io::Result<UdpSocket> {
    let s = new_socket(addr, Type::DGRAM, Protocol::UDP)?;
    set_buffers(&s, buf);
    if addr.ip().is_unspecified() {
        // A wildcard socket learns each datagram's destination address from IP_PKTINFO, so the
        // handler sees the real local address (for Via, Record-Route, RFC 3261 §18.2.1).
        enable_pktinfo(&s, addr.is_ipv6())?;
    }
    s.bind(&SockAddr::from(addr))?;
    Ok(s.into())
}

/// Large buffers absorb bursts. SO_RCVBUFFORCE lifts the net.core.rmem_max cap where the
/// process may (CAP_NET_ADMIN); otherwise the kernel clamps SO_RCVBUF to rmem_max.
fn set_buffers(s: &Socket, bytes: usize) {
    let force = |opt: libc::c_int| {
        let v = bytes.min(i32::MAX as usize) as libc::c_int;
        // SAFETY: setsockopt with a valid fd and a pointer to a c_int of the given size.
        unsafe {
            libc::setsockopt(
                std::os::fd::AsRawFd::as_raw_fd(s),
                libc::SOL_SOCKET,
                opt,
                (&v as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            ) == 0
        }
    };
    if !force(libc::SO_RCVBUFFORCE) {
        let _ = s.set_recv_buffer_size(bytes);
    }
    if !force(libc::SO_SNDBUFFORCE) {
        let _ = s.set_send_buffer_size(bytes);
    }
}

fn enable_pktinfo(s: &Socket, v6: bool) -> io::Result<()> {
    let on: libc::c_int = 1;
    let (level, opt) =
        if v6 { (libc::IPPROTO_IPV6, libc::IPV6_RECVPKTINFO) } else { (libc::IPPROTO_IP, libc::IP_PKTINFO) };
    // SAFETY: setsockopt with a valid fd and a pointer to a c_int of the given size.
    let r = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(s),
            level,
            opt,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn tcp_listener(addr: SocketAddr) -> io::Result<TcpListener> {
    let s = new_socket(addr, Type::STREAM, Protocol::TCP)?;
    s.set_reuse_address(true)?;
    s.bind(&SockAddr::from(addr))?;
    s.listen(1024)?;
    Ok(s.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reuseport(ty: Type, proto: Protocol, at: SocketAddr) -> io::Result<Socket> {
        let s = Socket::new(Domain::IPV4, ty, Some(proto))?;
        s.set_reuse_port(true)?;
        s.bind(&SockAddr::from(at))?;
        Ok(s)
    }

    /// Why port 0 is resolved with probes: a port held by another server's reuseport sockets
    /// (same user) is open to any reuseport socket, so a reuseport bind cannot tell it is taken;
    /// a probe without SO_REUSEPORT can, for UDP and for TCP.
    #[test]
    fn a_port_held_by_reuseport_sockets_is_refused_to_a_probe_but_not_to_another_reuseport_socket() {
        let lo: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let other_udp = reuseport(Type::DGRAM, Protocol::UDP, lo).unwrap();
        let held = other_udp.local_addr().unwrap().as_socket().unwrap();
        let other_tcp = reuseport(Type::STREAM, Protocol::TCP, held).unwrap();
        other_tcp.listen(8).unwrap();
        // The hazard: a reuseport socket joins the other server's port without complaint.
        assert!(reuseport(Type::DGRAM, Protocol::UDP, held).is_ok());
        assert!(reuseport(Type::STREAM, Protocol::TCP, held).is_ok());
        // The probes see the port as taken.
        for (ty, proto) in [(Type::DGRAM, Protocol::UDP), (Type::STREAM, Protocol::TCP)] {
            let probe = Socket::new(Domain::IPV4, ty, Some(proto)).unwrap();
            let e = probe.bind(&SockAddr::from(held)).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::AddrInUse, "{proto:?}");
        }
        // And free_port picks a port free for both, which the real sockets can then bind.
        for _ in 0..50 {
            let free = free_port(lo, true, true).unwrap();
            assert_ne!(free.port(), held.port());
            assert_ne!(free.port(), 0);
        }
    }
}
