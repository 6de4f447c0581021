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

/// Binds every listen entry `workers` times. Port 0 is resolved once (by the first socket) and
/// reused by the others, UDP and TCP alike; a clash on that port is retried with a new one.
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
            match bind_entry(l.address, want_udp, stream, workers, buf) {
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
