//! Turning a next-hop URI into where to send (RFC 3263 §4 for the parts that need no DNS).

use crate::io::ResolveRequest;
use crate::peer::{Peer, Transport};
use herald_sip::uri::{Host, Scheme, SipUri, Uri};
use std::net::{IpAddr, SocketAddr};

/// Either a destination known now, or a name to look up first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hop {
    Peer(Peer),
    Resolve(ResolveRequest),
}

/// RFC 3263 §4.1/§4.2 without DNS: an IP host (or `maddr`) gives the destination directly;
/// transport from `transport=` (default UDP, TLS for sips), port from the URI or the
/// transport's default. A host name needs a lookup. `None` for a URI we cannot route to.
pub fn hop_for(uri: &Uri<'_>) -> Option<Hop> {
    let Uri::Sip(u) = uri else { return None };
    let secure = u.scheme == Scheme::Sips;
    let (transport, maddr) = transport_and_maddr(u);
    let explicit = match (secure, transport.and_then(Transport::parse)) {
        // RFC 3261 §26.2.2: a SIPS URI is reached over TLS (over TCP: `transport=tcp` means
        // TLS over TCP) or secure WebSocket, never in the clear.
        (true, Some(Transport::Udp)) => return None,
        (true, Some(Transport::Tcp)) => Some(Transport::Tls),
        (true, Some(Transport::Ws)) => Some(Transport::Wss),
        (_, t) => t,
    };
    let transport = explicit.unwrap_or(if secure { Transport::Tls } else { Transport::Udp });
    let default_port = if transport.is_secure() { 5061 } else { 5060 };
    let ip = match maddr.and_then(|m| m.trim_matches(|c| c == '[' || c == ']').parse::<IpAddr>().ok()) {
        Some(ip) => Some(ip),
        None => match u.host {
            Host::Ipv4(ip) => Some(IpAddr::V4(ip)),
            Host::Ipv6(ip) => Some(IpAddr::V6(ip)),
            Host::Name(_) => None,
        },
    };
    match ip {
        Some(ip) => {
            Some(Hop::Peer(Peer { transport, addr: SocketAddr::new(ip, u.port.unwrap_or(default_port)), conn: None }))
        }
        None => {
            let Host::Name(name) = u.host else { return None };
            Some(Hop::Resolve(ResolveRequest { host: name.to_owned(), port: u.port, transport: explicit, secure }))
        }
    }
}

/// The `transport` and `maddr` parameters of `u` ([`SipUri::transport`], [`SipUri::maddr`]):
/// the first parameter of each name, its value if it has one. One pass over the parameters
/// when no name can hide behind an escape (no `%` in them, nearly always): each lookup used to
/// walk them all and compare every name through the escape decoder (about 500 instructions per
/// next hop).
pub(super) fn transport_and_maddr<'a>(u: &SipUri<'a>) -> (Option<&'a str>, Option<&'a str>) {
    let raw = u.params_raw();
    if raw.is_empty() {
        return (None, None);
    }
    // The usual shape, a lone `;transport=T` (a registered contact, a Request-URI that is one):
    // its value without a walk (the walk cost about 370 instructions, four times per proxied
    // call).
    const TRANSPORT: &str = ";transport=";
    // Written in lower case nearly always: an exact compare of the eleven octets first (two
    // word compares; the case-blind one alone cost ~80 instructions a URI, issue 21).
    let lead = |p: &str| {
        <[u8; TRANSPORT.len()]>::try_from(p.as_bytes()).is_ok_and(|p| p == *b";transport=")
            || p.eq_ignore_ascii_case(TRANSPORT)
    };
    if raw.get(..TRANSPORT.len()).is_some_and(lead) {
        let value = &raw[TRANSPORT.len()..];
        if !value.bytes().any(|b| b == b';' || b == b'%') {
            return (Some(value), None);
        }
    }
    if raw.as_bytes().contains(&b'%') {
        return (u.transport(), u.maddr());
    }
    let (mut transport, mut maddr) = (None, None);
    for (name, value) in u.params() {
        if transport.is_none() && name.eq_ignore_ascii_case("transport") {
            transport = Some(value);
        } else if maddr.is_none() && name.eq_ignore_ascii_case("maddr") {
            maddr = Some(value);
        }
    }
    (transport.flatten(), maddr.flatten())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hop(s: &str) -> Option<Hop> {
        hop_for(&Uri::parse(s.as_bytes()).unwrap())
    }

    #[test]
    fn literal_addresses() {
        assert_eq!(hop("sip:bob@192.0.2.4"), Some(Hop::Peer(Peer::udp("192.0.2.4:5060".parse().unwrap()))));
        let Some(Hop::Peer(p)) = hop("sip:bob@[2001:db8::4]:5070;transport=TCP") else { panic!() };
        assert_eq!((p.transport, p.addr), (Transport::Tcp, "[2001:db8::4]:5070".parse().unwrap()));
        let Some(Hop::Peer(p)) = hop("sips:bob@192.0.2.4") else { panic!() };
        assert_eq!((p.transport, p.addr.port()), (Transport::Tls, 5061));
        // SIPS stays on TLS whatever the transport parameter says, or is not routed at all.
        let Some(Hop::Peer(p)) = hop("sips:bob@192.0.2.4:5070;transport=tcp") else { panic!() };
        assert_eq!((p.transport, p.addr.port()), (Transport::Tls, 5070));
        assert_eq!(hop("sips:bob@192.0.2.4;transport=udp"), None);
        let Some(Hop::Peer(p)) = hop("sip:bob@example.com;maddr=192.0.2.9") else { panic!() };
        assert_eq!(p.addr, "192.0.2.9:5060".parse().unwrap());
    }

    #[test]
    fn parameters_read_in_one_pass_as_looked_up() {
        for uri in [
            "sip:h",
            "sip:h;lr",
            "sip:h;transport=tcp;maddr=192.0.2.1",
            "sip:h;MADDR=192.0.2.1;Transport=TLS;transport=udp",
            "sip:h;transport;transport=tcp;maddr",
            "sip:h;%74ransport=tcp;maddr=192.0.2.2",
            "sip:h;x=%41;transport=ws",
            "sip:h;transport=UDP",
            "sip:h;TRANSPORT=tcp",
            "sip:h;transport=udp;lr",
            "sip:h;transport=%75dp",
            "sip:h;transport",
            "sip:h;transports=udp",
        ] {
            let Uri::Sip(u) = Uri::parse(uri.as_bytes()).unwrap() else { panic!() };
            assert_eq!(transport_and_maddr(&u), (u.transport(), u.maddr()), "{uri}");
        }
    }

    #[test]
    fn names_need_lookups() {
        assert_eq!(
            hop("sip:bob@example.com;transport=tcp"),
            Some(Hop::Resolve(ResolveRequest {
                host: "example.com".into(),
                port: None,
                transport: Some(Transport::Tcp),
                secure: false
            }))
        );
        assert_eq!(hop("tel:+15551234"), None);
    }
}
