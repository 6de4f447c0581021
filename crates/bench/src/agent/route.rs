//! The caller's view of a dialog (RFC 3261 §12.1.2): remote target from the 2xx's Contact, route
//! set from its Record-Route in reverse, remote tag; and where in-dialog requests go (§12.2.1.1,
//! loose routing of §16.12 with the strict-routing fallback).

use herald_sip::uri::{Host, Uri};
use herald_sip::Message;
use std::net::{IpAddr, SocketAddr};

/// What in-dialog requests (ACK for 2xx, BYE) need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InDialog {
    pub request_uri: String,
    /// The To value of the 2xx (with the remote tag).
    pub to: String,
    /// Route header values in order.
    pub routes: Vec<String>,
    /// The next hop: the first route's host and port, else the remote target's.
    pub dest: SocketAddr,
}

/// Builds the dialog from a 2xx to an INVITE; None when it lacks a usable Contact or To tag.
/// Hosts that are names, not IP literals, resolve to `proxy` (this generator does no DNS; every
/// hop in a benchmark set-up is an address).
pub fn dialog_from_2xx(msg: &Message, proxy: SocketAddr) -> Option<InDialog> {
    let to = msg.get(herald_sip::HeaderName::To)?;
    // UTF-8 checked first: the lossy conversion walks its input in chunks, ~350 instructions
    // for a To value that is nearly always plain (callgrind); the rare other one is still
    // replaced, never copied raw.
    let to = match std::str::from_utf8(to) {
        Ok(text) => text.to_owned(),
        Err(_) => String::from_utf8_lossy(to).into_owned(),
    };
    msg.to_tag().ok()??;
    let contact = msg.contacts().next()?.ok()?;
    let target_uri = &contact.address()?.uri;
    let target = target_uri.as_str().to_string();
    // (route value, loose routing, the address it points at), from the URIs as parsed.
    let mut routes: Vec<(String, bool, SocketAddr)> = Vec::new();
    for rr in msg.record_routes() {
        let rr = rr.ok()?;
        let lr = rr.uri.as_sip().is_some_and(|u| u.lr());
        routes.push((["<", rr.uri.as_str(), ">"].concat(), lr, next_hop(&rr.uri, proxy)));
    }
    routes.reverse();
    match routes.first() {
        None => Some(InDialog { dest: next_hop(target_uri, proxy), request_uri: target, to, routes: Vec::new() }),
        Some(&(_, true, dest)) => {
            Some(InDialog { request_uri: target, to, routes: routes.into_iter().map(|r| r.0).collect(), dest })
        }
        Some((first, false, dest)) => {
            // §12.2.1.1 strict routing: the first route becomes the Request-URI and the remote
            // target goes to the end of the Route header.
            let dest = *dest;
            let request_uri = first.trim_start_matches('<').trim_end_matches('>').to_string();
            let mut rest: Vec<String> = routes.into_iter().skip(1).map(|r| r.0).collect();
            rest.push(["<", &target, ">"].concat());
            Some(InDialog { request_uri, to, routes: rest, dest })
        }
    }
}

/// The address a SIP URI points at when its host is an IP literal (port default 5060).
fn next_hop(uri: &Uri<'_>, proxy: SocketAddr) -> SocketAddr {
    let Some(sip) = uri.as_sip() else { return proxy };
    let ip: Option<IpAddr> = match &sip.host {
        Host::Ipv4(a) => Some(IpAddr::V4(*a)),
        Host::Ipv6(a) => Some(IpAddr::V6(*a)),
        Host::Name(_) => None,
    };
    match ip {
        Some(ip) => SocketAddr::new(ip, sip.port.unwrap_or(5060)),
        None => proxy,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use herald_sip::Limits;

    fn ok(extra: &str) -> Message {
        let text = format!(
            "SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP c;branch=z9hG4bKx\r\n{extra}From: <sip:a@d>;tag=1\r\n\
             To: <sip:b@d>;tag=2\r\nCall-ID: x\r\nCSeq: 1 INVITE\r\nContact: <sip:b@127.0.0.9:7000>\r\nContent-Length: 0\r\n\r\n"
        );
        Message::parse(Bytes::from(text), &Limits::default()).unwrap()
    }

    const PROXY: &str = "127.0.0.1:5060";

    #[test]
    fn loose_route_set_is_reversed_record_route() {
        let m = ok("Record-Route: <sip:127.0.0.2:5071;lr>\r\nRecord-Route: <sip:127.0.0.3;lr;ftag=1>\r\n");
        let d = dialog_from_2xx(&m, PROXY.parse().unwrap()).unwrap();
        assert_eq!(d.request_uri, "sip:b@127.0.0.9:7000");
        assert_eq!(d.routes, ["<sip:127.0.0.3;lr;ftag=1>", "<sip:127.0.0.2:5071;lr>"]);
        assert_eq!(d.dest, "127.0.0.3:5060".parse().unwrap());
        assert_eq!(d.to, "<sip:b@d>;tag=2");
    }

    #[test]
    fn no_record_route_goes_to_contact_and_strict_route_is_rewritten() {
        let d = dialog_from_2xx(&ok(""), PROXY.parse().unwrap()).unwrap();
        assert_eq!(d.dest, "127.0.0.9:7000".parse().unwrap());
        assert!(d.routes.is_empty());
        let d = dialog_from_2xx(&ok("Record-Route: <sip:127.0.0.4:9>\r\n"), PROXY.parse().unwrap()).unwrap();
        assert_eq!(d.request_uri, "sip:127.0.0.4:9");
        assert_eq!(d.routes, ["<sip:b@127.0.0.9:7000>"]);
        assert_eq!(d.dest, "127.0.0.4:9".parse().unwrap());
    }

    #[test]
    fn a_to_that_is_not_utf8_is_replaced_not_copied() {
        let text = b"SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP c;branch=z9hG4bKx\r\nFrom: <sip:a@d>;tag=1\r\n\
            To: \"B\xff\" <sip:b@d>;tag=2\r\nCall-ID: x\r\nCSeq: 1 INVITE\r\nContact: <sip:b@127.0.0.9:7000>\r\n\
            Content-Length: 0\r\n\r\n";
        let m = Message::parse(Bytes::from_static(text), &Limits::default()).unwrap();
        let d = dialog_from_2xx(&m, PROXY.parse().unwrap()).unwrap();
        assert_eq!(d.to, "\"B\u{fffd}\" <sip:b@d>;tag=2");
        assert_eq!(dialog_from_2xx(&ok(""), PROXY.parse().unwrap()).unwrap().to, "<sip:b@d>;tag=2");
    }

    #[test]
    fn host_names_fall_back_to_the_proxy() {
        let d = dialog_from_2xx(&ok("Record-Route: <sip:proxy.example;lr>\r\n"), PROXY.parse().unwrap()).unwrap();
        assert_eq!(d.dest, PROXY.parse().unwrap());
    }
}
