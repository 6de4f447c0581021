//! What the engine needs to know from the configuration.

use crate::peer::Transport;
use crate::proxy::Identity;
use crate::transaction::Timers;
use std::net::SocketAddr;
use std::time::Duration;

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
}

impl EngineConfig {
    /// The listener to send from for `transport` towards `to` (same address family). A
    /// listener bound to a wildcard address is advertised (in Via and Record-Route) with a
    /// concrete one: loopback towards a loopback peer, else the first non-loopback address of
    /// this machine of that family (from the identity).
    pub fn listener_for(&self, transport: Transport, to: SocketAddr) -> Option<Listener> {
        let l =
            self.listeners.iter().copied().find(|l| l.transport == transport && l.addr.is_ipv4() == to.is_ipv4())?;
        if !l.addr.ip().is_unspecified() {
            return Some(l);
        }
        let ip = if to.ip().is_loopback() {
            if to.is_ipv4() {
                std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)
            } else {
                std::net::IpAddr::V6(std::net::Ipv6Addr::LOCALHOST)
            }
        } else {
            self.identity
                .addrs
                .iter()
                .map(|a| a.ip())
                .find(|ip| ip.is_ipv4() == to.is_ipv4() && !ip.is_loopback() && !ip.is_unspecified())?
        };
        Some(Listener { transport, addr: SocketAddr::new(ip, l.addr.port()) })
    }

    /// The listener a message arrived on.
    pub fn listener_at(&self, transport: Transport, local: SocketAddr) -> Option<Listener> {
        self.listeners.iter().copied().find(|l| l.transport == transport && l.addr == local).or_else(|| {
            // A wildcard-bound socket reports 0.0.0.0: match by port and family.
            self.listeners.iter().copied().find(|l| {
                l.transport == transport && l.addr.port() == local.port() && l.addr.is_ipv4() == local.is_ipv4()
            })
        })
    }
}
