//! Socket creation: per worker, one UDP socket and one TCP listener (serving TCP or TLS) per listen
//! address, all bound to the same port with SO_REUSEPORT so the kernel spreads peers over workers
//! by 4-tuple hash. The sockets themselves (options, IP_PKTINFO on wildcards, forced buffer sizes)
//! come from herald-sys; this module decides which to create and resolves port 0.

use crate::config::{Config, ListenTransport};
use crate::error::ServerError;
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

/// Connections a worker's listener queues before accepting them (a burst of clients reconnecting).
const LISTEN_BACKLOG: i32 = 1024;

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
            let s = herald_sys::reuseport_udp(addr, buf).map_err(|e| (e, Transport::Udp))?;
            addr = s.local_addr().map_err(|e| (e, Transport::Udp))?;
            udp.push(s);
        }
        if let Some(t) = stream {
            let s = herald_sys::reuseport_tcp_listener(addr, LISTEN_BACKLOG).map_err(|e| (e, t))?;
            addr = s.local_addr().map_err(|e| (e, t))?;
            tcp.push(s);
        }
    }
    Ok((udp, tcp, addr))
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
