//! What the engine needs to know from the configuration.

use crate::peer::Transport;
use crate::proxy::Identity;
use crate::seed::Seed;
use crate::transaction::Timers;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// Which local address this machine sends from towards a destination: the routing table's
/// answer, asked for listeners bound to a wildcard address so that Via and Record-Route name
/// the interface the request really leaves by (RFC 3261 §16.6 step 4: the Record-Route URI must
/// resolve to this proxy; §18.1.1: the Via sent-by is where responses come back). The runtime
/// implements it with the operating system's route lookup (Kamailio's `mhomed`); a question,
/// not I/O, so the core stays a pure function of its inputs.
pub trait SourceRoute: Send + Sync + std::fmt::Debug {
    /// The source address for `to`, or `None` when there is no route.
    fn source_for(&self, to: IpAddr) -> Option<IpAddr>;
}

/// When this proxy inserts itself into the route set (RFC 3261 §16.6 step 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecordRoute {
    /// Every dialog-creating request.
    #[default]
    Always,
    /// Only when the request leaves on another transport or address family than it came in,
    /// where the proxy must stay in the path to bridge them (RFC 5658).
    CrossTransport,
    Never,
}

/// How the contacts of an address-of-record are tried (RFC 3261 §16.6, §16.7 step 8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Forking {
    /// All contacts at once.
    #[default]
    Parallel,
    /// Highest q first; contacts of equal q together; the next group when all of a group
    /// failed.
    Sequential,
}

/// A local socket herald listens on, as advertised in Via and Record-Route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listener {
    pub transport: Transport,
    pub addr: SocketAddr,
}

#[derive(Debug, Clone)]
pub struct EngineConfig {
    pub identity: Identity,
    pub listeners: Vec<Listener>,
    pub timers: Timers,
    pub record_route: RecordRoute,
    pub forking: Forking,
    /// Forward without transaction state (RFC 3261 §16.11).
    pub stateless: bool,
    /// Timer C: how long an INVITE branch may stay without a final response (§16.6 step 11:
    /// more than 3 minutes); reset by each provisional response.
    pub timer_c: Duration,
    /// The routing table, for wildcard listeners. `None`: the first non-loopback address of
    /// the identity of the destination's family.
    pub routes: Option<Arc<dyn SourceRoute>>,
    /// Keys everything peers must not predict: branches and local tags (quinn's `rng_seed`).
    /// The runtime passes [`Seed::random`]; tests, the simulator and fuzz replays fix one, and
    /// the engine is then a pure function of its inputs.
    pub seed: Seed,
    /// Phones behind NAT: what counts as NAT and whether their Contact is fixed (`[nat]`,
    /// [`crate::nat`]).
    pub nat: crate::nat::NatConfig,
    /// The gateway sets routing rules send calls to (`[[gateway_set]]`, [`crate::gateways`]);
    /// shared with the runtime's prober, metrics and admin API. Default: none.
    pub gateways: Arc<crate::gateways::Gateways>,
    /// Herald's routing table (`[[route]]`, [`crate::routing`]; not the operating system's of
    /// `routes`): rules in order, first match wins. Empty (the default): a served domain goes to
    /// the location service, anything else by its Request-URI.
    pub routing: Arc<crate::routing::RoutingTable>,
}

impl EngineConfig {
    /// The listener to send from for `transport` towards `to` (same address family). A
    /// listener bound to a wildcard address is advertised (in Via and Record-Route) with the
    /// address the request leaves by: loopback towards a loopback peer, else the routing
    /// table's source address for `to` ([`SourceRoute`]), else the first non-loopback address
    /// of this machine of that family (from the identity). Never the wildcard itself: a
    /// `Record-Route: <sip:0.0.0.0>` sends the caller's ACK and BYE nowhere (issue 15).
    ///
    /// Inlined with its usual case (a listener bound to an address) where each branch is sent;
    /// the wildcard's choice is a call of its own (issue 21).
    #[inline]
    pub fn listener_for(&self, transport: Transport, to: SocketAddr) -> Option<Listener> {
        let l = *self.listeners.iter().find(|l| l.transport == transport && l.addr.is_ipv4() == to.is_ipv4())?;
        if !l.addr.ip().is_unspecified() {
            return Some(l);
        }
        self.wildcard_listener_for(l, to)
    }

    /// [`Self::listener_for`] of `l`, a listener bound to a wildcard address.
    #[inline(never)]
    fn wildcard_listener_for(&self, l: Listener, to: SocketAddr) -> Option<Listener> {
        let transport = l.transport;
        let ip = if to.ip().is_loopback() || to.ip().is_unspecified() {
            if to.is_ipv4() {
                IpAddr::V4(Ipv4Addr::LOCALHOST)
            } else {
                IpAddr::V6(Ipv6Addr::LOCALHOST)
            }
        } else {
            let routed = self.routes.as_ref().and_then(|r| r.source_for(to.ip()));
            match routed.filter(|ip| ip.is_ipv4() == to.is_ipv4() && !ip.is_unspecified()) {
                Some(ip) => ip,
                None => self
                    .identity
                    .addrs
                    .iter()
                    .map(|a| a.ip())
                    .find(|ip| ip.is_ipv4() == to.is_ipv4() && !ip.is_loopback() && !ip.is_unspecified())?,
            }
        };
        Some(Listener { transport, addr: SocketAddr::new(ip, l.addr.port()) })
    }

    /// The listener a message arrived on, with the concrete address it was sent to: a
    /// wildcard-bound listener is reported with `local` (the datagram's IP_PKTINFO
    /// destination, the accepted connection's local address), so that a request that comes in
    /// and goes out through the same interface is not taken for one that crosses interfaces.
    pub fn listener_at(&self, transport: Transport, local: SocketAddr) -> Option<Listener> {
        self.listeners.iter().copied().find(|l| l.transport == transport && l.addr == local).or_else(|| {
            // A wildcard-bound socket: match by port and family.
            self.listeners
                .iter()
                .copied()
                .find(|l| {
                    l.transport == transport && l.addr.port() == local.port() && l.addr.is_ipv4() == local.is_ipv4()
                })
                .map(|l| if l.addr.ip().is_unspecified() { Listener { transport, addr: local } } else { l })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Table;
    impl SourceRoute for Table {
        fn source_for(&self, to: IpAddr) -> Option<IpAddr> {
            match to {
                IpAddr::V4(v4) if v4.octets()[0] == 10 => Some("10.98.0.1".parse().unwrap()),
                IpAddr::V4(_) => Some("192.0.2.10".parse().unwrap()),
                IpAddr::V6(_) => None,
            }
        }
    }

    fn wildcard(routes: Option<Arc<dyn SourceRoute>>) -> EngineConfig {
        let ids = ["10.98.0.1:5060", "127.0.0.1:5060", "192.0.2.10:5060"].map(|a| a.parse().unwrap()).to_vec();
        EngineConfig {
            identity: Identity::new(ids, []),
            listeners: vec![
                Listener { transport: Transport::Udp, addr: "0.0.0.0:5060".parse().unwrap() },
                Listener { transport: Transport::Tcp, addr: "0.0.0.0:5060".parse().unwrap() },
            ],
            timers: Timers::default(),
            record_route: RecordRoute::Always,
            forking: Forking::Parallel,
            stateless: false,
            timer_c: Duration::from_secs(180),
            routes,
            seed: Seed::fixed(0),
            nat: crate::nat::NatConfig::default(),
            gateways: Default::default(),
            routing: Default::default(),
        }
    }

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_wildcard_listener_is_advertised_with_the_interface_towards_the_peer() {
        let cfg = wildcard(Some(Arc::new(Table)));
        let out = |to: &str| cfg.listener_for(Transport::Udp, addr(to)).unwrap().addr;
        assert_eq!(out("10.98.0.2:5062"), addr("10.98.0.1:5060"));
        assert_eq!(out("198.51.100.7:5060"), addr("192.0.2.10:5060"));
        assert_eq!(out("127.0.0.1:5062"), addr("127.0.0.1:5060"));
        assert!(!out("10.98.0.2:5062").ip().is_unspecified());
        // Without a routing table: the first non-loopback address of the identity.
        let plain = wildcard(None);
        assert_eq!(plain.listener_for(Transport::Udp, addr("198.51.100.7:5060")).unwrap().addr, addr("10.98.0.1:5060"));
    }

    #[test]
    fn a_wildcard_listener_is_reported_with_the_address_the_message_arrived_at() {
        let cfg = wildcard(Some(Arc::new(Table)));
        let at = cfg.listener_at(Transport::Udp, addr("10.98.0.1:5060")).unwrap();
        assert_eq!(at, Listener { transport: Transport::Udp, addr: addr("10.98.0.1:5060") });
        // In and out through the same interface: the same listener, so no double Record-Route.
        assert_eq!(Some(at), cfg.listener_for(Transport::Udp, addr("10.98.0.2:5070")));
        assert_eq!(cfg.listener_at(Transport::Tcp, addr("10.98.0.1:5061")), None, "no listener on that port");
    }
}
