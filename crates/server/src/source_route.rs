//! The operating system's answer to "which of my addresses do I send from towards X", for
//! listeners bound to a wildcard address (the engine's [`SourceRoute`]). A UDP socket that is
//! connected (no datagram is sent) gets the route's source address as its local address, as
//! Kamailio's `mhomed` does; answers are cached per destination so that the system calls are
//! paid once per peer, not per request.

use herald_core::engine::SourceRoute;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::RwLock;
use std::time::{Duration, Instant};

/// Destinations remembered at most; the cache is emptied when full (destinations come from
/// Request-URIs and contacts, so an attacker could otherwise grow it without bound).
const MAX_CACHED: usize = 4096;
/// How long an answer is trusted: interfaces and routes change (DHCP, VPNs).
const FRESH_FOR: Duration = Duration::from_secs(30);

/// The routing table, asked through connected UDP sockets, with a bounded cache.
#[derive(Debug, Default)]
pub struct KernelRoutes {
    cache: RwLock<HashMap<IpAddr, (Option<IpAddr>, Instant)>>,
}

impl KernelRoutes {
    pub fn new() -> KernelRoutes {
        KernelRoutes::default()
    }

    /// Asks the kernel: connect(2) on a UDP socket selects the route and binds the source
    /// address without sending anything; getsockname(2) then tells it.
    fn lookup(to: IpAddr) -> Option<IpAddr> {
        let any: SocketAddr = match to {
            IpAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
            IpAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
        };
        let socket = UdpSocket::bind(any).ok()?;
        // Any port will do: nothing is sent; 5060 keeps firewalls' logs meaningful if one looks.
        socket.connect(SocketAddr::new(to, 5060)).ok()?;
        let ip = socket.local_addr().ok()?.ip();
        (!ip.is_unspecified()).then_some(ip)
    }
}

impl SourceRoute for KernelRoutes {
    fn source_for(&self, to: IpAddr) -> Option<IpAddr> {
        let now = Instant::now();
        if let Some(&(ip, at)) = self.cache.read().unwrap_or_else(|e| e.into_inner()).get(&to) {
            if now.duration_since(at) < FRESH_FOR {
                return ip;
            }
        }
        let ip = KernelRoutes::lookup(to);
        let mut cache = self.cache.write().unwrap_or_else(|e| e.into_inner());
        if cache.len() >= MAX_CACHED {
            cache.clear();
        }
        cache.insert(to, (ip, now));
        ip
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_reached_from_loopback() {
        let routes = KernelRoutes::new();
        assert_eq!(routes.source_for("127.0.0.1".parse().unwrap()), Some("127.0.0.1".parse().unwrap()));
        assert_eq!(routes.source_for("127.0.0.1".parse().unwrap()), Some("127.0.0.1".parse().unwrap()), "cached");
        assert_eq!(routes.cache.read().unwrap().len(), 1);
    }

    #[test]
    fn an_own_interface_address_is_reached_from_itself() {
        // Every address of this machine routes to itself (through lo): the answer names a
        // concrete address of ours, never the wildcard.
        let routes = KernelRoutes::new();
        for ip in crate::config::interface_addresses().into_iter().filter(|ip| ip.is_ipv4()) {
            assert_eq!(routes.source_for(ip), Some(ip), "{ip}");
        }
    }

    #[test]
    fn the_cache_stays_bounded() {
        let routes = KernelRoutes::new();
        for i in 0..(MAX_CACHED as u32 + 10) {
            // 127/8 is all loopback: cheap lookups that all succeed.
            routes.source_for(IpAddr::V4(Ipv4Addr::from(0x7f00_0000 + 1 + i)));
        }
        assert!(routes.cache.read().unwrap().len() <= MAX_CACHED);
    }
}
