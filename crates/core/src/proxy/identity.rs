//! Who herald is: the addresses it listens on and the domains it serves. Used to recognise
//! Route and Request-URI values that point at this proxy (RFC 3261 §16.4) and requests for
//! which it is the registrar/location service (RFC 3261 §16.5).

use herald_sip::uri::{Host, Scheme, SipUri, Uri};
use std::net::{IpAddr, SocketAddr};

#[derive(Debug, Clone, Default)]
pub struct Identity {
    /// Addresses herald is reachable at, one per listener (the advertised address when the
    /// socket is bound to a wildcard).
    pub addrs: Vec<SocketAddr>,
    /// Domain names herald is responsible for (lowercase): its registrar and location service
    /// answer for them.
    pub domains: Vec<String>,
    /// Further names that designate this proxy without being served domains (lowercase): the
    /// host name, `localhost`, configured aliases (Kamailio's `alias`). A Route or Via naming
    /// one of them is herald itself (RFC 3261 §16.4); a Request-URI naming one is not routed
    /// through the location service unless it is also a domain.
    pub names: Vec<String>,
}

impl Identity {
    pub fn new(addrs: Vec<SocketAddr>, domains: impl IntoIterator<Item = String>) -> Identity {
        Identity { addrs, domains: domains.into_iter().map(|d| d.to_ascii_lowercase()).collect(), names: Vec::new() }
    }

    /// Adds names that designate this proxy (see [`Identity::names`]).
    pub fn with_names(mut self, names: impl IntoIterator<Item = String>) -> Identity {
        for n in names {
            let n = n.trim_end_matches('.').to_ascii_lowercase();
            if !n.is_empty() && !self.names.contains(&n) && !self.domains.contains(&n) {
                self.names.push(n);
            }
        }
        self
    }

    fn is_own_ip(&self, ip: IpAddr) -> bool {
        self.addrs.iter().any(|a| a.ip() == ip) || ip.is_unspecified()
    }

    fn is_served_name(&self, name: &str) -> bool {
        self.domains.iter().any(|d| d.eq_ignore_ascii_case(name.trim_end_matches('.')))
    }

    fn is_own_name(&self, name: &str) -> bool {
        self.is_served_name(name) || self.names.iter().any(|d| d.eq_ignore_ascii_case(name.trim_end_matches('.')))
    }

    /// Whether a host designates this machine: one of its addresses, domains or names.
    fn host_is_ours(&self, host: &Host) -> bool {
        match host {
            Host::Name(n) => self.is_own_name(n),
            Host::Ipv4(ip) => self.is_own_ip(IpAddr::V4(*ip)),
            Host::Ipv6(ip) => self.is_own_ip(IpAddr::V6(*ip)),
        }
    }

    /// Whether a host is a domain herald serves: a domain name, or one of its addresses.
    fn host_is_served(&self, host: &Host) -> bool {
        match host {
            Host::Name(n) => self.is_served_name(n),
            ip => self.host_is_ours(ip),
        }
    }

    /// Whether a URI designates this proxy itself (a Route or Record-Route entry we inserted,
    /// or a strict-routing Request-URI): host is one of our addresses or names and the port is
    /// one we listen on (absent port = the scheme's default, RFC 3261 §19.1.2).
    pub fn is_this_proxy(&self, uri: &Uri) -> bool {
        let Uri::Sip(u) = uri else { return false };
        if u.user.is_some() {
            // Our own Route/Record-Route URIs never carry a user part.
            return false;
        }
        self.sip_uri_points_here(u)
    }

    fn sip_uri_points_here(&self, u: &SipUri) -> bool {
        if !self.host_is_ours(&u.host) {
            return false;
        }
        let port = u.port.unwrap_or(match u.scheme {
            Scheme::Sip => 5060,
            Scheme::Sips => 5061,
        });
        self.addrs.iter().any(|a| a.port() == port)
    }

    /// Whether a Via sent-by names this proxy (RFC 3261 §18.1.2, §16.3 step 4): a host of ours
    /// and a port we listen on (absent: 5060; herald always writes the port in its own Vias).
    pub fn is_own_sent_by(&self, host: &Host, port: Option<u16>) -> bool {
        let port = port.unwrap_or(5060);
        self.host_is_ours(host) && self.addrs.iter().any(|a| a.port() == port)
    }

    /// Whether requests to this URI's domain are served by herald's location service: the host
    /// is one of our domains, or one of our addresses (RFC 3261 §10.3 step 1, §16.5).
    ///
    ///
    /// A domain is a host (§10.3 step 1: "the domain identified in the Request-URI"), so a name
    /// of ours is ours whatever the port, and an address of ours without a port is too:
    /// `REGISTER sip:192.0.2.10` reaches the registrar of 192.0.2.10 even when herald listens on
    /// another port than 5060 (phones and load generators leave the port out of the registrar
    /// URI). An address with a port herald does not listen on is another device on this host
    /// (a phone's Contact, `sip:bob@192.0.2.10:5062`), not a domain of ours.
    pub fn serves_domain(&self, uri: &Uri) -> bool {
        match uri {
            Uri::Sip(u) => match &u.host {
                Host::Name(n) => self.is_served_name(n),
                host if u.port.is_none() => self.host_is_served(host),
                _ => self.sip_uri_points_here(u),
            },
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id() -> Identity {
        Identity::new(vec!["192.0.2.10:5060".parse().unwrap()], ["Example.COM".to_owned()])
    }

    fn uri(s: &str) -> Uri<'_> {
        Uri::parse(s.as_bytes()).unwrap()
    }

    #[test]
    fn recognises_itself() {
        let id = id();
        assert!(id.is_this_proxy(&uri("sip:192.0.2.10;lr")));
        assert!(id.is_this_proxy(&uri("sip:192.0.2.10:5060;lr")));
        assert!(!id.is_this_proxy(&uri("sip:192.0.2.10:5070;lr")));
        assert!(!id.is_this_proxy(&uri("sip:192.0.2.11;lr")));
        assert!(id.is_this_proxy(&uri("sip:example.com;lr")));
        assert!(!id.is_this_proxy(&uri("sip:bob@192.0.2.10")));
    }

    #[test]
    fn own_sent_by() {
        let id = id();
        let ip = Host::Ipv4("192.0.2.10".parse().unwrap());
        assert!(id.is_own_sent_by(&ip, Some(5060)));
        assert!(id.is_own_sent_by(&ip, None));
        assert!(!id.is_own_sent_by(&ip, Some(5070)));
        assert!(!id.is_own_sent_by(&Host::Ipv4("192.0.2.11".parse().unwrap()), Some(5060)));
        assert!(id.is_own_sent_by(&Host::Name("EXAMPLE.com"), Some(5060)));
    }

    #[test]
    fn names_designate_this_proxy_without_being_served() {
        // Issue 15: `Route: <sip:localhost;lr>` with domains = ["example.com"] forwarded to
        // itself (482 over UDP, 500 over TLS).
        let id = id().with_names(["localhost".to_owned(), "Herald-Host.".to_owned(), "example.com".to_owned()]);
        assert_eq!(id.names, ["localhost", "herald-host"], "lowercased, no trailing dot, domains not repeated");
        assert!(id.is_this_proxy(&uri("sip:localhost;lr")));
        assert!(id.is_this_proxy(&uri("sip:LOCALHOST:5060;lr")));
        assert!(!id.is_this_proxy(&uri("sip:localhost:5070;lr")), "not a port we listen on");
        assert!(id.is_this_proxy(&uri("sip:herald-host;lr")));
        assert!(id.is_own_sent_by(&Host::Name("localhost"), Some(5060)));
        assert!(!id.serves_domain(&uri("sip:bob@localhost")), "a name of ours is not a served domain");
        assert!(id.serves_domain(&uri("sip:bob@example.com")));
    }

    #[test]
    fn served_domains() {
        let id = id();
        assert!(id.serves_domain(&uri("sip:bob@example.com")));
        assert!(id.serves_domain(&uri("sip:bob@EXAMPLE.com:5080")));
        // An address of ours is a domain of ours whatever the port (REGISTER sip:192.0.2.10).
        assert!(id.serves_domain(&uri("sip:192.0.2.10")));
        assert!(!id.serves_domain(&uri("sip:bob@192.0.2.10:5070")), "a device on our host");
        assert!(!id.serves_domain(&uri("sip:bob@192.0.2.11")));
        assert!(id.serves_domain(&uri("sip:bob@192.0.2.10")));
        assert!(!id.serves_domain(&uri("sip:bob@example.org")));
        assert!(!id.serves_domain(&uri("tel:+15551234")));
    }
}
