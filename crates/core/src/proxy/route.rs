//! Route information preprocessing (RFC 3261 §16.4) and next-hop selection (§16.6 steps 6-7).

use super::identity::Identity;
use herald_sip::headers::{ListIter, ListValue, NameAddr};
use herald_sip::span::Span;
use herald_sip::uri::Uri;
use herald_sip::{HeaderName, Message, ParseError};
use smallvec::SmallVec;

/// Route values, inline for the one or two a request carries (an allocation per Route-bearing
/// request less).
pub type RouteValues<'m> = SmallVec<[ListValue<'m>; 2]>;

/// What §16.4 changes before the request is routed, with what it parsed on the way (every
/// Route value, the received Request-URI) so that routing does not parse them again.
#[derive(Debug, Default)]
pub struct Preprocessed<'m> {
    /// The Request-URI to use instead of the received one (strict-routing fix-up).
    pub request_uri: Option<String>,
    /// Route values to remove (ours at the top; the last one after a strict-routing fix-up).
    pub remove: RouteValues<'m>,
    /// Every Route value of the request, parsed, in order (on the heap: inline, these values
    /// of ~200 bytes cost more to move than their allocation).
    pub routes: Vec<(ListValue<'m>, NameAddr<'m>)>,
    /// The received Request-URI, parsed (None when it is not a URI herald parses).
    pub received_uri: Option<Uri<'m>>,
}

impl<'m> Preprocessed<'m> {
    /// The first Route value that stays: the next hop of a loose-routed request (§16.12).
    pub fn first_remaining(&self) -> Option<&(ListValue<'m>, NameAddr<'m>)> {
        self.routes.iter().find(|(v, _)| !self.remove.iter().any(|r| r.span == v.span))
    }

    /// The Route values to remove, parsed, in the order of [`Preprocessed::remove`].
    pub fn removed(&self) -> impl Iterator<Item = &(ListValue<'m>, NameAddr<'m>)> {
        self.remove.iter().filter_map(|r| self.routes.iter().find(|(v, _)| v.span == r.span))
    }
}

/// The Route values §16.4 removes ([`Preprocessed::remove`]) by position in the request's
/// buffer, owned: a request kept for its branches is not preprocessed again when each branch is
/// sent (the stored copy shares the buffer, so the positions stay valid).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RouteRemovals(Vec<(usize, Span)>);

impl RouteRemovals {
    pub fn of(pre: &Preprocessed<'_>) -> Self {
        RouteRemovals(pre.remove.iter().map(|v| (v.field, v.span)).collect())
    }

    /// The values again, in `msg`: the message they were taken from (or a clone of it).
    pub fn values<'m>(&self, msg: &'m Message) -> RouteValues<'m> {
        self.0.iter().map(|&(field, span)| ListValue { field, span, bytes: msg.slice(span) }).collect()
    }
}

/// RFC 3261 §16.4: if the Request-URI is a value this proxy placed into a Record-Route
/// (the previous hop was a strict router), replace it with the last Route value and remove
/// that value; then remove every Route value at the top that points at this proxy (two of them
/// after double record-routing across transports, RFC 5658 §3).
pub fn preprocess<'m>(msg: &'m Message, identity: &Identity) -> Result<Preprocessed<'m>, ParseError> {
    // Plain loops over the Route lines from the first (the header index knows it) and their
    // values, as `Message::list_values` yields them: collecting through `Result` moved each
    // parsed value (about 200 bytes) several times, about 900 instructions per Route value, and
    // the adapters of `list_values` cost about 450 per request that has one (callgrind).
    let mut routes: Vec<(ListValue<'m>, NameAddr<'m>)> = Vec::new();
    let first = msg.field_index(HeaderName::Route).unwrap_or(msg.headers().len());
    for (field, h) in msg.headers().iter().enumerate().skip(first) {
        if h.name != HeaderName::Route {
            continue;
        }
        for item in ListIter::new(msg.value_of(h)) {
            let (at, bytes) = item.map_err(|e| msg.value_error(h, e))?;
            let v = ListValue { field, span: h.value.sub(at, at + bytes.len()), bytes };
            match NameAddr::parse(bytes) {
                Ok(parsed) => routes.push((v, parsed)),
                Err(e) => return Err(msg.value_error(h, e)),
            }
        }
    }
    let mut out = Preprocessed { received_uri: msg.request_uri().ok(), ..Preprocessed::default() };
    let mut remaining = &routes[..];
    if out.received_uri.is_some_and(|ruri| identity.is_this_proxy(&ruri)) {
        if let Some(((last, addr), rest)) = routes.split_last() {
            out.request_uri = Some(addr.uri.as_str().to_owned());
            out.remove.push(*last);
            remaining = rest;
        }
    }
    for (v, addr) in remaining {
        if !identity.is_this_proxy(&addr.uri) {
            break;
        }
        out.remove.push(*v);
    }
    out.routes = routes;
    Ok(out)
}

/// Where the request goes next (§16.6 step 7 and §16.12): the first remaining Route value if
/// there is one, else the Request-URI. Returns the URI text and whether that Route is a strict
/// router (no `lr`), which §16.6 step 6 handles by moving the Request-URI to the end of the
/// Route set.
pub fn next_hop(first_route: Option<&NameAddr<'_>>, request_uri: &str) -> (String, bool) {
    match first_route {
        Some(r) => {
            let strict = match &r.uri {
                Uri::Sip(u) => !u.lr(),
                _ => false,
            };
            (r.uri.as_str().to_owned(), strict)
        }
        None => (request_uri.to_owned(), false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use herald_sip::Limits;

    fn msg(s: &str) -> Message {
        Message::parse(Bytes::from(s.replace('\n', "\r\n")), &Limits::default()).unwrap()
    }

    fn id() -> Identity {
        Identity::new(vec!["192.0.2.10:5060".parse().unwrap()], ["example.com".to_owned()])
    }

    #[test]
    fn removes_our_routes_at_the_top() {
        let m = msg("BYE sip:alice@192.0.2.1 SIP/2.0\nRoute: <sip:192.0.2.10;lr>, <sip:192.0.2.10;lr;transport=tcp>\nRoute: <sip:p2.example.net;lr>\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\n\n");
        let p = preprocess(&m, &id()).unwrap();
        assert_eq!(p.request_uri, None);
        assert_eq!(p.remove.len(), 2);
        assert_eq!(p.remove[0].bytes, b"<sip:192.0.2.10;lr>");
        // Kept by position, they come back the same from a clone of the request.
        let kept = RouteRemovals::of(&p);
        let copy = m.clone();
        assert_eq!(kept.values(&copy)[..], p.remove[..]);
    }

    #[test]
    fn routes_are_the_values_list_values_yields() {
        // Several lines, several values on one, other headers between them, a folded line; and
        // the same error as `list_values` for a value that does not split or parse.
        let m = msg("BYE sip:alice@192.0.2.1 SIP/2.0\nRoute: <sip:192.0.2.10;lr>,\n <sip:p1.example.net;lr>\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\nRoute: <sip:p2.example.net;lr>\n\n");
        let p = preprocess(&m, &id()).unwrap();
        let listed: Vec<_> = m.list_values(HeaderName::Route).map(Result::unwrap).collect();
        assert_eq!(p.routes.iter().map(|(v, _)| *v).collect::<Vec<_>>(), listed);
        assert_eq!(p.routes.len(), 3);
        for bad in ["Route: <sip:a;lr>, ,<sip:b>", "Route: <sip:a;lr", "Route: nonsense"] {
            let m = msg(&format!("BYE sip:alice@192.0.2.1 SIP/2.0\n{bad}\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\n\n"));
            let listed = m.list_values(HeaderName::Route).find_map(Result::err);
            let parsed = m
                .list_values(HeaderName::Route)
                .filter_map(Result::ok)
                .find_map(|v| NameAddr::parse(v.bytes).err().map(|e| m.value_error(&m.headers()[v.field], e)));
            assert_eq!(preprocess(&m, &id()).err(), listed.or(parsed), "{bad}");
        }
    }

    #[test]
    fn strict_router_fixup() {
        let m = msg("BYE sip:192.0.2.10;lr SIP/2.0\nRoute: <sip:p2.example.net;lr>, <sip:alice@192.0.2.1>\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\n\n");
        let p = preprocess(&m, &id()).unwrap();
        assert_eq!(p.request_uri.as_deref(), Some("sip:alice@192.0.2.1"));
        assert_eq!(p.remove.len(), 1);
        assert_eq!(p.remove[0].bytes, b"<sip:alice@192.0.2.1>");
    }

    #[test]
    fn next_hops() {
        let lr = NameAddr::parse(b"<sip:p1.example.net;lr>").unwrap();
        assert_eq!(next_hop(Some(&lr), "sip:bob@h"), ("sip:p1.example.net;lr".to_owned(), false));
        let strict = NameAddr::parse(b"<sip:p1.example.net>").unwrap();
        assert!(next_hop(Some(&strict), "sip:bob@h").1);
        assert_eq!(next_hop(None, "sip:bob@h"), ("sip:bob@h".to_owned(), false));
    }
}
