//! The caller's view of a dialog (RFC 3261 §12.1.2): remote target from the 2xx's Contact, route
//! set from its Record-Route in reverse, remote tag; and where in-dialog requests go (§12.2.1.1,
//! loose routing of §16.12 with the strict-routing fallback).

use herald_core::seed::{Seed, TableState};
use herald_sip::uri::{Host, Uri};
use herald_sip::{HeaderName, Message};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

/// What in-dialog requests (ACK for 2xx, BYE) need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InDialog {
    /// The To value of the 2xx (with the remote tag).
    pub to: String,
    /// Where the requests go: the same for every dialog whose 2xx had the same Contact and
    /// Record-Route ([`RouteCache`]).
    pub route: Arc<RouteSet>,
}

/// The part of a dialog that the 2xx's Contact and Record-Route alone decide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteSet {
    pub request_uri: String,
    /// Route header values in order.
    pub routes: Vec<String>,
    /// The next hop: the first route's host and port, else the remote target's.
    pub dest: SocketAddr,
}

/// Route sets by the 2xx lines they were read from. A proxy writes the same Record-Route for
/// every call, and a callee the same Contact for every call to one user, so nearly every 2xx
/// repeats a pair already read: the lines are compared as bytes instead of parsed again (the
/// Contact and Record-Route parse was ~2.4k instructions per call, callgrind). The key holds
/// the whole first Contact line and every Record-Route line, which is all that
/// [`route_from_2xx`] reads. Bounded: a proxy that writes a new Record-Route per call only
/// refills the table, which is emptied when full.
pub struct RouteCache {
    sets: HashMap<Vec<u8>, Arc<RouteSet>, TableState>,
    /// The key being built (kept for its allocation).
    key: Vec<u8>,
    limit: usize,
}

/// Route sets the cache holds at most.
pub const MAX_ROUTE_SETS: usize = 1024;

impl Default for RouteCache {
    fn default() -> RouteCache {
        let state = Seed::random().derive("route sets", 0).table_state();
        RouteCache { sets: HashMap::with_hasher(state), key: Vec::new(), limit: MAX_ROUTE_SETS }
    }
}

impl RouteCache {
    /// [`dialog_from_2xx`], with the route set read from the cache when the 2xx's Contact and
    /// Record-Route lines are ones already read.
    pub fn dialog(&mut self, msg: &Message, proxy: SocketAddr) -> Option<InDialog> {
        let to = to_of(msg)?;
        let contact = msg.get(HeaderName::Contact)?; // no Contact: no remote target
        let record_routes = msg.fields(HeaderName::RecordRoute).map(|h| msg.value_of(h));
        if let Some(route) = self.cached(contact, record_routes) {
            return Some(InDialog { to, route });
        }
        let route = Arc::new(route_from_2xx(msg, proxy)?);
        if self.sets.len() >= self.limit {
            self.sets.clear();
        }
        self.sets.insert(self.key.clone(), route.clone());
        Some(InDialog { to, route })
    }

    /// The route set already read from a 2xx whose first Contact line's value is `contact` and
    /// whose Record-Route lines' values are `record_routes`, in order (None: not read yet, or
    /// forgotten; [`RouteCache::dialog`] reads it).
    pub fn cached<'v>(
        &mut self,
        contact: &'v [u8],
        record_routes: impl IntoIterator<Item = &'v [u8]>,
    ) -> Option<Arc<RouteSet>> {
        self.key.clear();
        // Each value with its length first: no two different line lists give the same key.
        for value in std::iter::once(contact).chain(record_routes) {
            self.key.extend_from_slice(&(value.len() as u32).to_le_bytes());
            self.key.extend_from_slice(value);
        }
        self.sets.get(self.key.as_slice()).cloned()
    }

    pub fn len(&self) -> usize {
        self.sets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sets.is_empty()
    }
}

/// Builds the dialog from a 2xx to an INVITE; None when it lacks a usable Contact or To tag.
/// Hosts that are names, not IP literals, resolve to `proxy` (this generator does no DNS; every
/// hop in a benchmark set-up is an address).
pub fn dialog_from_2xx(msg: &Message, proxy: SocketAddr) -> Option<InDialog> {
    let to = to_of(msg)?;
    Some(InDialog { to, route: Arc::new(route_from_2xx(msg, proxy)?) })
}

/// The To value of a 2xx, which must carry the remote tag.
fn to_of(msg: &Message) -> Option<String> {
    msg.to_tag().ok()??;
    to_text(msg.get(HeaderName::To)?)
}

/// A 2xx's To value `to` as text, when it carries the remote tag (the first To line's value,
/// which is what [`Message::to_tag`] reads).
pub fn to_with_tag(to: &[u8]) -> Option<String> {
    herald_sip::headers::tag_of(to).ok()??;
    to_text(to)
}

fn to_text(to: &[u8]) -> Option<String> {
    // UTF-8 checked first: the lossy conversion walks its input in chunks, ~350 instructions
    // for a To value that is nearly always plain (callgrind); the rare other one is still
    // replaced, never copied raw.
    Some(match std::str::from_utf8(to) {
        Ok(text) => text.to_owned(),
        Err(_) => String::from_utf8_lossy(to).into_owned(),
    })
}

/// The route set of a 2xx: remote target from its (first) Contact, Record-Route reversed. Reads
/// the first Contact line and the Record-Route lines, nothing else ([`RouteCache`] keys on them).
fn route_from_2xx(msg: &Message, proxy: SocketAddr) -> Option<RouteSet> {
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
        None => Some(RouteSet { dest: next_hop(target_uri, proxy), request_uri: target, routes: Vec::new() }),
        Some(&(_, true, dest)) => {
            Some(RouteSet { request_uri: target, routes: routes.into_iter().map(|r| r.0).collect(), dest })
        }
        Some((first, false, dest)) => {
            // §12.2.1.1 strict routing: the first route becomes the Request-URI and the remote
            // target goes to the end of the Route header.
            let dest = *dest;
            let request_uri = first.trim_start_matches('<').trim_end_matches('>').to_string();
            let mut rest: Vec<String> = routes.into_iter().skip(1).map(|r| r.0).collect();
            rest.push(["<", &target, ">"].concat());
            Some(RouteSet { request_uri, routes: rest, dest })
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
        assert_eq!(d.route.request_uri, "sip:b@127.0.0.9:7000");
        assert_eq!(d.route.routes, ["<sip:127.0.0.3;lr;ftag=1>", "<sip:127.0.0.2:5071;lr>"]);
        assert_eq!(d.route.dest, "127.0.0.3:5060".parse().unwrap());
        assert_eq!(d.to, "<sip:b@d>;tag=2");
    }

    #[test]
    fn no_record_route_goes_to_contact_and_strict_route_is_rewritten() {
        let d = dialog_from_2xx(&ok(""), PROXY.parse().unwrap()).unwrap();
        assert_eq!(d.route.dest, "127.0.0.9:7000".parse().unwrap());
        assert!(d.route.routes.is_empty());
        let d = dialog_from_2xx(&ok("Record-Route: <sip:127.0.0.4:9>\r\n"), PROXY.parse().unwrap()).unwrap();
        assert_eq!(d.route.request_uri, "sip:127.0.0.4:9");
        assert_eq!(d.route.routes, ["<sip:b@127.0.0.9:7000>"]);
        assert_eq!(d.route.dest, "127.0.0.4:9".parse().unwrap());
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

    /// The cache answers as the parse does, reads a repeated Contact and Record-Route once, and
    /// tells apart every line that decides the route set.
    #[test]
    fn cached_route_sets_are_the_parsed_ones() {
        let proxy = PROXY.parse().unwrap();
        let mut cache = RouteCache::default();
        let extras = [
            "Record-Route: <sip:127.0.0.2:5071;lr>\r\nRecord-Route: <sip:127.0.0.3;lr;ftag=1>\r\n",
            "Record-Route: <sip:127.0.0.2:5071;lr>, <sip:127.0.0.3;lr;ftag=1>\r\n",
            "Record-Route: <sip:127.0.0.3;lr;ftag=1>\r\nRecord-Route: <sip:127.0.0.2:5071;lr>\r\n",
            "Record-Route: <sip:127.0.0.4:9>\r\n",
            "Record-Route: <sip:proxy.example;lr>\r\n",
            "Record-Route: <sip:127.0.0.4:9;lr>\r\n",
            "Record-Route: <sip:127.0.0.4:9>\r\nContact: <sip:c@127.0.0.8>\r\n",
            "Contact: <sip:c@127.0.0.8>\r\n",
            "Record-Route: garbage\r\n",
            "",
        ];
        for round in 0..2 {
            for extra in extras {
                let m = ok(extra);
                assert_eq!(cache.dialog(&m, proxy), dialog_from_2xx(&m, proxy), "{extra:?} round {round}");
            }
        }
        // Every parsed set was kept once and handed out again.
        assert_eq!(cache.len(), extras.len() - 1);
        let (a, b) = (cache.dialog(&ok(extras[0]), proxy).unwrap(), cache.dialog(&ok(extras[0]), proxy).unwrap());
        assert!(Arc::ptr_eq(&a.route, &b.route));
        // The To (and its tag) is each 2xx's own; a 2xx without a Contact has no dialog.
        let text = String::from_utf8(ok(extras[0]).as_bytes().to_vec()).unwrap();
        let other_tag = Message::parse(Bytes::from(text.replace("tag=2", "tag=9")), &Limits::default()).unwrap();
        let c = cache.dialog(&other_tag, proxy).unwrap();
        assert_eq!(c.to, "<sip:b@d>;tag=9");
        assert!(Arc::ptr_eq(&a.route, &c.route));
        let text = String::from_utf8(ok("").as_bytes().to_vec()).unwrap();
        let no_contact = text.replace("Contact: <sip:b@127.0.0.9:7000>\r\n", "");
        let no_contact = Message::parse(Bytes::from(no_contact), &Limits::default()).unwrap();
        assert_eq!(cache.dialog(&no_contact, proxy), None);
        let no_tag = Message::parse(Bytes::from(text.replace(";tag=2", "")), &Limits::default()).unwrap();
        assert_eq!(cache.dialog(&no_tag, proxy), None);
    }

    #[test]
    fn the_route_cache_is_bounded() {
        let proxy = PROXY.parse().unwrap();
        let mut cache = RouteCache { limit: 4, ..RouteCache::default() };
        for port in 1..20 {
            let m = ok(&format!("Record-Route: <sip:127.0.0.2:{port};lr>\r\n"));
            assert_eq!(cache.dialog(&m, proxy).unwrap().route.dest.port(), port);
            assert!(cache.len() <= 4);
        }
    }

    #[test]
    fn host_names_fall_back_to_the_proxy() {
        let d = dialog_from_2xx(&ok("Record-Route: <sip:proxy.example;lr>\r\n"), PROXY.parse().unwrap()).unwrap();
        assert_eq!(d.route.dest, PROXY.parse().unwrap());
    }
}
