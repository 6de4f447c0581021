//! Route information preprocessing (RFC 3261 §16.4) and next-hop selection (§16.6 steps 6-7).

use super::identity::Identity;
use super::own_values::OwnTexts;
use herald_sip::headers::{ListIter, ListValue, NameAddr};
use herald_sip::span::Span;
use herald_sip::uri::Uri;
use herald_sip::{HeaderName, Message, ParseError};
use smallvec::SmallVec;
use std::cell::OnceCell;

/// Route values, inline for the one or two a request carries (an allocation per Route-bearing
/// request less).
pub type RouteValues<'m> = SmallVec<[ListValue<'m>; 2]>;

/// One Route value of a request and its name-addr. A value that is herald's own plain
/// Record-Route text, as herald wrote it ([`OwnTexts::is_own_route`]), is known to point here
/// without being parsed: the ACK and BYE of every record-routed call carry one, and parsing it
/// cost about 650 instructions each (callgrind, issue 21). It is parsed only if something asks
/// for its name-addr (a flow token lookup, a Route of ours below a foreign one).
///
/// The name-addr is boxed: inline, an entry was ~250 bytes, too big to keep the one or two
/// entries of a request inline ([`Routes`]), and a list of them on the heap was an allocation
/// and a free for every request that carries a Route (the ACK and BYE of every record-routed
/// call, issue 21). Only a foreign value, which is parsed, has a box.
#[derive(Debug)]
pub struct RouteEntry<'m> {
    pub value: ListValue<'m>,
    /// herald's own plain Record-Route text, which points at this proxy.
    own: bool,
    addr: OnceCell<Option<Box<NameAddr<'m>>>>,
}

/// The Route values of a request, inline for the one or two most requests carry.
pub type Routes<'m> = SmallVec<[RouteEntry<'m>; 2]>;

impl<'m> RouteEntry<'m> {
    fn parsed(value: ListValue<'m>, addr: NameAddr<'m>) -> Self {
        RouteEntry { value, own: false, addr: OnceCell::from(Some(Box::new(addr))) }
    }

    fn own(value: ListValue<'m>) -> Self {
        RouteEntry { value, own: true, addr: OnceCell::new() }
    }

    /// The value's name-addr (`None` never happens: a value that does not parse fails
    /// [`preprocess`], and herald's own texts parse).
    pub fn addr(&self) -> Option<&NameAddr<'m>> {
        self.addr.get_or_init(|| NameAddr::parse(self.value.bytes).ok().map(Box::new)).as_deref()
    }

    /// Whether the value is herald's own plain Record-Route text ([`OwnTexts::is_own_route`]),
    /// which carries neither a signature nor a flow token: a flow token lookup skips it
    /// rather than parse it.
    pub fn is_own_plain(&self) -> bool {
        self.own
    }

    /// Whether the value points at this proxy ([`Identity::is_this_proxy`]).
    fn points_here(&self, identity: &Identity) -> bool {
        self.own || self.addr().is_some_and(|a| identity.is_this_proxy(&a.uri))
    }
}

/// What §16.4 changes before the request is routed, with what it parsed on the way (every
/// Route value, the received Request-URI) so that routing does not parse them again.
#[derive(Debug, Default)]
pub struct Preprocessed<'m> {
    /// The Request-URI to use instead of the received one (strict-routing fix-up).
    pub request_uri: Option<String>,
    /// Route values to remove (ours at the top; the last one after a strict-routing fix-up).
    pub remove: RouteValues<'m>,
    /// Every Route value of the request, in order.
    pub routes: Routes<'m>,
    /// The received Request-URI, parsed (None when it is not a URI herald parses).
    pub received_uri: Option<Uri<'m>>,
}

impl<'m> Preprocessed<'m> {
    /// The first Route value that stays: the next hop of a loose-routed request (§16.12).
    pub fn first_remaining(&self) -> Option<&RouteEntry<'m>> {
        self.routes.iter().find(|r| !self.remove.iter().any(|v| v.span == r.value.span))
    }

    /// The Route values to remove, in the order of [`Preprocessed::remove`].
    pub fn removed(&self) -> impl Iterator<Item = &RouteEntry<'m>> {
        self.remove.iter().filter_map(|v| self.routes.iter().find(|r| r.value.span == v.span))
    }
}

/// The Route values §16.4 removes ([`Preprocessed::remove`]) by position in the request's
/// buffer, owned: a request kept for its branches is not preprocessed again when each branch is
/// sent (the stored copy shares the buffer, so the positions stay valid). Inline for the one
/// or two values a request has removed (the Route of every record-routed in-dialog request): a
/// vector of them was an allocation per such request (issue 21).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RouteRemovals(SmallVec<[(usize, Span); 2]>);

impl RouteRemovals {
    pub fn of(pre: &Preprocessed<'_>) -> Self {
        // Pushed one by one: collecting into a `SmallVec` reserved from the iterator's size
        // hint first, a few tests more for the one value of a usual request.
        let mut kept = SmallVec::new();
        for v in &pre.remove {
            kept.push((v.field, v.span));
        }
        RouteRemovals(kept)
    }

    /// The values again, in `msg`: the message they were taken from (or a clone of it).
    pub fn values<'m>(&self, msg: &'m Message) -> RouteValues<'m> {
        self.0.iter().map(|&(field, span)| ListValue { field, span, bytes: msg.slice(span) }).collect()
    }
}

/// RFC 3261 §16.4: if the Request-URI is a value this proxy placed into a Record-Route
/// (the previous hop was a strict router), replace it with the last Route value and remove
/// that value; then remove every Route value at the top that points at this proxy (two of them
/// after double record-routing across transports, RFC 5658 §3). `own`: herald's own texts,
/// whose Record-Route values are recognised without a parse ([`RouteEntry`]).
pub fn preprocess<'m>(msg: &'m Message, identity: &Identity, own: &OwnTexts) -> Result<Preprocessed<'m>, ParseError> {
    let mut pre = Preprocessed::default();
    preprocess_into(msg, identity, own, &mut pre).map(|()| pre)
}

/// [`preprocess`] written into `pre` (an empty [`Preprocessed`]) where the caller keeps it:
/// returned, the value (~300 bytes with its inline Route values) was copied out of the
/// function and again out of its `Result`, two or three memcpy calls per request (issue 21).
/// After an error `pre` holds what was found before it and is not to be used.
pub fn preprocess_into<'m>(
    msg: &'m Message,
    identity: &Identity,
    own: &OwnTexts,
    pre: &mut Preprocessed<'m>,
) -> Result<(), ParseError> {
    // Plain loops over the Route lines from the first (the header index knows it) and their
    // values, as `Message::list_values` yields them: collecting through `Result` moved each
    // parsed value (about 200 bytes) several times, about 900 instructions per Route value, and
    // the adapters of `list_values` cost about 450 per request that has one (callgrind).
    let routes = &mut pre.routes;
    let first = msg.field_index(HeaderName::Route).unwrap_or(msg.headers().len());
    for (field, h) in msg.headers().iter().enumerate().skip(first) {
        if h.name != HeaderName::Route {
            continue;
        }
        // A line that is one of herald's own texts and nothing else (the Route of every ACK and
        // BYE of a record-routed call) is the one value the list split would find (the texts
        // hold no comma, quote or blank): not split, ~200 instructions a line.
        if own.is_own_route(msg.value_of(h)) {
            routes.push(RouteEntry::own(ListValue { field, span: h.value, bytes: msg.value_of(h) }));
            continue;
        }
        for item in ListIter::new(msg.value_of(h)) {
            let (at, bytes) = item.map_err(|e| msg.value_error(h, e))?;
            let v = ListValue { field, span: h.value.sub(at, at + bytes.len()), bytes };
            if own.is_own_route(bytes) {
                routes.push(RouteEntry::own(v));
                continue;
            }
            match NameAddr::parse(bytes) {
                Ok(parsed) => routes.push(RouteEntry::parsed(v, parsed)),
                Err(e) => return Err(msg.value_error(h, e)),
            }
        }
    }
    pre.received_uri = msg.request_uri().ok();
    let mut remaining = &pre.routes[..];
    if pre.received_uri.as_ref().is_some_and(|ruri| identity.is_this_proxy(ruri)) {
        if let Some((last, rest)) = pre.routes.split_last() {
            // §16.6 step 2: without what a Request-URI may not carry (§19.1.1 Table 1).
            pre.request_uri = last.addr().map(|a| a.uri.request_uri_form().into_owned());
            pre.remove.push(last.value);
            remaining = rest;
        }
    }
    for r in remaining {
        if !r.points_here(identity) {
            break;
        }
        pre.remove.push(r.value);
    }
    Ok(())
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
            // §16.6 step 6: a strict router's Route value becomes the Request-URI, so it loses
            // what a Request-URI may not carry (step 2, §19.1.1 Table 1).
            let next = if strict { r.uri.request_uri_form() } else { r.uri.as_str().into() };
            (next.into_owned(), strict)
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
        let p = preprocess(&m, &id(), &OwnTexts::default()).unwrap();
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
        let p = preprocess(&m, &id(), &OwnTexts::default()).unwrap();
        let listed: Vec<_> = m.list_values(HeaderName::Route).map(Result::unwrap).collect();
        assert_eq!(p.routes.iter().map(|r| r.value).collect::<Vec<_>>(), listed);
        assert_eq!(p.routes.len(), 3);
        for bad in ["Route: <sip:a;lr>, ,<sip:b>", "Route: <sip:a;lr", "Route: nonsense"] {
            let m = msg(&format!("BYE sip:alice@192.0.2.1 SIP/2.0\n{bad}\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\n\n"));
            let listed = m.list_values(HeaderName::Route).find_map(Result::err);
            let parsed = m
                .list_values(HeaderName::Route)
                .filter_map(Result::ok)
                .find_map(|v| NameAddr::parse(v.bytes).err().map(|e| m.value_error(&m.headers()[v.field], e)));
            assert_eq!(preprocess(&m, &id(), &OwnTexts::default()).err(), listed.or(parsed), "{bad}");
        }
    }

    #[test]
    fn strict_router_fixup() {
        let m = msg("BYE sip:192.0.2.10;lr SIP/2.0\nRoute: <sip:p2.example.net;lr>, <sip:alice@192.0.2.1>\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\n\n");
        let p = preprocess(&m, &id(), &OwnTexts::default()).unwrap();
        assert_eq!(p.request_uri.as_deref(), Some("sip:alice@192.0.2.1"));
        assert_eq!(p.remove.len(), 1);
        assert_eq!(p.remove[0].bytes, b"<sip:alice@192.0.2.1>");
    }

    /// The same result whether herald's own Record-Route texts are recognised as they are
    /// written or parsed: for our listeners and others, every transport, Route values that are
    /// our texts, near copies of them (case, parameters, spacing) and foreign ones, in every
    /// position, with a Request-URI of ours (the strict-routing fix-up) or not.
    #[test]
    fn own_route_texts_give_what_parsing_gives() {
        use crate::peer::Transport;
        use crate::proxy::own_values::{plain_transport_param, record_route_value, SIG_PARAM};
        use std::net::SocketAddr;
        let identity = Identity::new(
            vec!["192.0.2.10:5060".parse().unwrap(), "[2001:db8::1]:5061".parse().unwrap()],
            ["example.com".to_owned()],
        );
        let mut own = OwnTexts::default();
        let mut values = vec!["<sip:p2.example.net;lr>".to_owned(), "<sip:alice@192.0.2.10:5060;lr>".to_owned()];
        for local in ["192.0.2.10:5060", "[2001:db8::1]:5061", "198.51.100.1:5060", "192.0.2.10:5999"] {
            let l: SocketAddr = local.parse().unwrap();
            for t in [Transport::Udp, Transport::Tcp, Transport::Tls, Transport::Ws, Transport::Wss] {
                own.note(t, l, &identity);
                let v = record_route_value(plain_transport_param(t), l, None, None);
                assert!(own.is_own_route(v.as_bytes()) == identity.addrs.contains(&l), "{v}");
                // What `RouteEntry::is_own_plain` promises a flow token lookup: no token.
                let flow = format!(";{}=", crate::proxy::flow_token::FLOW_PARAM);
                assert!(!v.contains(&flow) && !v.contains(&format!(";{SIG_PARAM}=")), "{v}");
                values.push(v.to_uppercase());
                values.push(v.replace(";lr", ";lr;x=1"));
                values.push(v.replace(";lr", ""));
                values.push(format!("\"me\" {v}"));
                values.push(v);
            }
        }
        let none = OwnTexts::default();
        let same = |m: &Message| {
            let (a, b) = (preprocess(m, &identity, &own), preprocess(m, &identity, &none));
            let (Ok(a), Ok(b)) = (a, b) else { panic!("both parse") };
            assert_eq!(a.request_uri, b.request_uri);
            assert_eq!(a.remove, b.remove);
            assert_eq!(a.routes.len(), b.routes.len());
            for (x, y) in a.routes.iter().zip(&b.routes) {
                assert_eq!((x.value, x.addr()), (y.value, y.addr()));
            }
            assert_eq!(a.first_remaining().map(|r| r.value), b.first_remaining().map(|r| r.value));
            assert_eq!(
                a.removed().map(|r| r.value).collect::<Vec<_>>(),
                b.removed().map(|r| r.value).collect::<Vec<_>>()
            );
        };
        let mut recognised = 0;
        for (i, first) in values.iter().enumerate() {
            let second = &values[(i * 7 + 3) % values.len()];
            recognised += usize::from(own.is_own_route(first.as_bytes()));
            for ruri in ["sip:bob@example.com", "sip:192.0.2.10:5060;lr"] {
                for routes in [first.clone(), format!("{first}, {second}"), format!("{second}\nRoute: {first}")] {
                    same(&msg(&format!("BYE {ruri} SIP/2.0\nRoute: {routes}\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\n\n")));
                }
            }
        }
        assert_eq!(recognised, 10, "our two listeners' texts, five transports each, and nothing else");
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
