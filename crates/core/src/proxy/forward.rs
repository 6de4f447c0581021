//! Building the forwarded copy of a request (RFC 3261 §16.6) and fixing up the received Via
//! (RFC 3261 §18.2.1, RFC 3581 §4), with the editor so untouched bytes pass verbatim.

use crate::peer::Transport;
use bytes::Bytes;
use herald_sip::headers::ListValue;
use herald_sip::text::{push_dec, push_host_port, push_ip, push_uri_host};
use herald_sip::uri::Host;
use herald_sip::{Editor, HeaderName, Message};
use std::borrow::Cow;
use std::net::SocketAddr;

/// The changes §16.6 makes to one copy of the request (one per target).
#[derive(Debug, Default)]
pub struct Forward<'a> {
    /// Step 2: the new Request-URI (the target), if it changes.
    pub request_uri: Option<&'a str>,
    /// Route values to remove (§16.4 preprocessing, step 6 strict routing).
    pub remove_routes: &'a [ListValue<'a>],
    /// Route values to put on top, in order (a registered Path, RFC 3327 §5.3).
    pub push_routes: &'a [String],
    /// Route values to put at the bottom (the Request-URI when the next hop is a strict
    /// router, step 6).
    pub append_routes: &'a [String],
    /// Step 4: Record-Route lines (`Record-Route: VALUE` CRLF, [`record_route_line`]) to insert
    /// on top, in order.
    pub record_route: &'a [Cow<'a, str>],
    /// A Path value to insert on top of a REGISTER's (RFC 3327 §4.2; herald as an Outbound edge
    /// proxy, RFC 5626 §5.1).
    pub path: Option<&'a str>,
    /// Step 8: the new Via value (with its branch); `None` only in tests of other edits.
    pub via: Option<OwnVia<'a>>,
    /// The received top Via rewritten with received/rport (see [`via_fixup`]).
    pub via_fixup: Option<(ListValue<'a>, String)>,
    /// Whole header lines to drop (indexes into `Message::headers`): the Proxy-Authorization
    /// values this proxy consumed (RFC 3261 §22.3, see `crate::auth`).
    pub remove_fields: &'a [usize],
    /// A header line whose value is replaced: (index into `Message::headers`, new value). The
    /// Contact of a phone behind NAT, rewritten to its source (`crate::nat::fixed_contact`).
    pub replace_field: Option<(usize, &'a str)>,
    /// An option tag to require of the next hop (`Require: path` with the Path herald adds for
    /// a UA that did not list it, RFC 3327 §5.1).
    pub require: Option<&'a str>,
}

/// Writes the forwarded request. Max-Forwards is decremented, or set to 70 if absent
/// (§16.6 step 3).
pub fn forward(msg: &Message, f: &Forward<'_>) -> Bytes {
    let via = f.via.as_ref().map(OwnVia::pieces);
    let mut e = Editor::new(msg);
    // The edits go in roughly in message order (start line, the new lines on top, the received
    // lines, the lines added at the bottom): the editor keeps its list sorted, and an edit made
    // out of order moves every one after it.
    if let Some(uri) = f.request_uri {
        e.set_request_uri(uri.as_bytes());
    }
    // New header lines go above all others, in this order: Via, Record-Route, Route. Each
    // group keeps its relative order, which is what matters (RFC 3261 §7.3.1).
    if let Some(via) = &via {
        e.prepend_lines_of_pieces(via);
    }
    if let Some((_, value)) = &f.via_fixup {
        e.prepend_header("Via", value.as_bytes());
    }
    for rr in f.record_route {
        e.prepend_lines(rr.as_bytes());
    }
    for r in f.push_routes {
        e.prepend_header("Route", r.as_bytes());
    }
    if let Some(p) = f.path {
        e.prepend_header("Path", p.as_bytes());
    }
    if let Some((top, _)) = &f.via_fixup {
        e.remove_list_value(*top);
    }
    for r in f.remove_routes {
        e.remove_list_value(*r);
    }
    let mf = msg.max_forwards().ok().flatten().map_or(70, |n| n.saturating_sub(1));
    e.set_max_forwards(mf);
    for field in f.remove_fields {
        e.remove_field(*field);
    }
    if let Some((field, value)) = f.replace_field {
        e.replace_value(field, value.as_bytes());
    }
    for r in f.append_routes {
        e.append_header("Route", r.as_bytes());
    }
    if let Some(tag) = f.require {
        e.append_header("Require", tag.as_bytes());
    }
    e.ensure_content_length();
    e.finish()
}

/// RFC 3261 §18.2.1 and RFC 3581 §4: the top Via of a received request gets `received` when
/// the sent-by host is not the source address (always, when `rport` is present), and an empty
/// `rport` is filled with the source port. Returns the Via value to write instead, or `None`
/// when nothing changes.
pub fn via_fixup<'m>(msg: &'m Message, source: SocketAddr) -> Option<(ListValue<'m>, String)> {
    let via = msg.top_via().ok()?;
    let rport_requested = via.rport() == Some(None);
    let sent_by_is_source = match via.host {
        Host::Ipv4(ip) => std::net::IpAddr::V4(ip) == source.ip(),
        Host::Ipv6(ip) => std::net::IpAddr::V6(ip) == source.ip(),
        Host::Name(_) => false,
    };
    if sent_by_is_source && !rport_requested {
        return None;
    }
    // The value's place in the message, looked for only when it is rewritten (nearly never:
    // splitting the Via line for it cost about 300 instructions per forwarded request).
    let top = msg.first_list_value(HeaderName::Via)?.ok()?;
    // Built with pushes, not `write!`: core::fmt cost about 7k instructions per Via here.
    let mut v = String::with_capacity(top.bytes.len() + 48);
    for part in [via.protocol_name, "/", via.protocol_version, "/", via.transport, " "] {
        v.push_str(part);
    }
    push_uri_host(&mut v, &via.host);
    if let Some(p) = via.port {
        v.push(':');
        push_dec(&mut v, u64::from(p));
    }
    for (name, value) in via.params.iter() {
        if name.eq_ignore_ascii_case("received") {
            continue;
        }
        v.push(';');
        if name.eq_ignore_ascii_case("rport") {
            v.push_str("rport=");
            push_dec(&mut v, u64::from(source.port()));
            continue;
        }
        v.push_str(name);
        if let Some(val) = value {
            v.push('=');
            v.push_str(val);
        }
    }
    // received carries the bare address, also for IPv6 (RFC 5118 §4.5 accepts both forms).
    v.push_str(";received=");
    push_ip(&mut v, source.ip());
    Some((top, v))
}

/// A Via value for this proxy (§16.6 step 8, §18.2.1): our address as sent-by, the transport,
/// the branch, and `rport` so the next hop answers to our source port (RFC 3581).
pub fn via_value(transport: &str, local: SocketAddr, branch: &str) -> String {
    let mut v = via_prefix("", transport, local);
    v.push_str(branch);
    v.push_str(";rport");
    v
}

/// [`via_value`] up to its branch, after `line_start`: `SIP/2.0/T HOST:PORT;branch=`.
fn via_prefix(line_start: &str, transport: &str, local: SocketAddr) -> String {
    let mut v = String::with_capacity(64);
    v.push_str(line_start);
    v.push_str("SIP/2.0/");
    v.push_str(transport);
    v.push(' ');
    push_host_port(&mut v, local);
    v.push_str(";branch=");
    v
}

/// Our Via line (`Via: ` [`via_value`] CRLF) as the editor writes it into a forwarded copy
/// (`Editor::prepend_lines_of_pieces`): the part up to the branch, which [`OwnTexts`] keeps per
/// listener, the branch, and the tail, with no `String` per branch.
#[derive(Debug, Clone)]
pub struct OwnVia<'a> {
    line_start: Cow<'a, str>,
    branch: &'a str,
}

impl<'a> OwnVia<'a> {
    fn pieces(&self) -> [&[u8]; 3] {
        [self.line_start.as_bytes(), self.branch.as_bytes(), b";rport\r\n"]
    }
}

/// herald's own header lines for one listener (its transport and address) that every branch
/// through it repeats: its Via up to the branch, and its Record-Route without a signature or flow
/// token.
#[derive(Debug)]
struct ListenerTexts {
    transport: Transport,
    addr: SocketAddr,
    via_line_start: Box<str>,
    record_route_line: Box<str>,
}

/// [`ListenerTexts`] of the listeners an engine has sent through, written once and borrowed by
/// every forwarded copy: building a Via and a Record-Route `String` per branch (pushes, our
/// address printed, an allocation and a free each) cost about 400 instructions each (callgrind,
/// issue 21). A few entries (one per transport and local address herald sends from), searched in
/// order; beyond [`OwnTexts::MAX`] a listener's texts are built each time.
#[derive(Debug, Default)]
pub struct OwnTexts {
    listeners: Vec<ListenerTexts>,
}

impl OwnTexts {
    const MAX: usize = 16;

    fn find(&self, transport: Transport, addr: SocketAddr) -> Option<&ListenerTexts> {
        self.listeners.iter().find(|l| l.transport == transport && l.addr == addr)
    }

    /// Keeps the texts of `(transport, addr)`, unless they are kept already or the list is full.
    pub fn note(&mut self, transport: Transport, addr: SocketAddr) {
        if self.listeners.len() < Self::MAX && self.find(transport, addr).is_none() {
            self.listeners.push(ListenerTexts {
                transport,
                addr,
                via_line_start: via_prefix(VIA_LINE, transport.as_via_str(), addr).into(),
                record_route_line: record_route_line(&plain_record_route(transport, addr)).into(),
            });
        }
    }

    /// Our Via for a branch `branch` leaving from `(transport, addr)`.
    pub fn via<'a>(&'a self, transport: Transport, addr: SocketAddr, branch: &'a str) -> OwnVia<'a> {
        let line_start = match self.find(transport, addr) {
            Some(l) => Cow::Borrowed(&*l.via_line_start),
            None => Cow::Owned(via_prefix(VIA_LINE, transport.as_via_str(), addr)),
        };
        OwnVia { line_start, branch }
    }

    /// The Record-Route line of `(transport, addr)` without signature or flow token
    /// ([`record_route_line`] of [`record_route_value`] for a sip: URI).
    pub fn record_route_line(&self, transport: Transport, addr: SocketAddr) -> Cow<'_, str> {
        match self.find(transport, addr) {
            Some(l) => Cow::Borrowed(&*l.record_route_line),
            None => Cow::Owned(record_route_line(&plain_record_route(transport, addr))),
        }
    }
}

/// The start of a Via line.
const VIA_LINE: &str = "Via: ";

/// The Record-Route value of a listener with neither signature nor flow token, for a sip: URI.
fn plain_record_route(transport: Transport, addr: SocketAddr) -> String {
    record_route_value(plain_transport_param(transport), addr, None, None)
}

/// `Record-Route: VALUE` CRLF, as [`Forward::record_route`] takes it.
pub fn record_route_line(value: &str) -> String {
    let mut line = String::with_capacity(value.len() + 16);
    line.push_str("Record-Route: ");
    line.push_str(value);
    line.push_str("\r\n");
    line
}

/// The `transport` parameter of our sip: URIs: none for UDP, the default (RFC 3261 §19.1.1).
pub fn plain_transport_param(transport: Transport) -> Option<&'static str> {
    (transport != Transport::Udp).then(|| transport.as_param())
}

/// A Record-Route value that points back at this proxy (§16.6 step 4, with `lr`: §16.12.1.2).
/// `signature`: herald's proof that it record-routed the dialog (`crate::auth::route_sig`),
/// carried as a URI parameter that the dialog's later requests copy into their Route (§12.1).
/// `flow`: a flow token (RFC 5626 §5.2, [`super::flow_token`]) when the hop this value faces
/// can only be reached over the flow it came on (a WebSocket phone's `.invalid` Contact).
pub fn record_route_value(
    transport_param: Option<&str>,
    local: SocketAddr,
    signature: Option<&str>,
    flow: Option<&str>,
) -> String {
    own_uri("sip", transport_param, local, signature, flow, "")
}

/// The Record-Route value of a TLS listener for a SIPS request: §16.6 step 4 requires a SIPS
/// URI when the Request-URI or the top Route is one, so that the dialog's later requests also
/// reach this proxy over TLS (RFC 5630 §4.3).
pub fn record_route_value_sips(local: SocketAddr, signature: Option<&str>, flow: Option<&str>) -> String {
    own_uri("sips", None, local, signature, flow, "")
}

/// The Path value herald inserts as an edge proxy into a REGISTER it forwards for an Outbound
/// UA (RFC 5626 §5.1): its own URI with the flow token of the UA's flow and `ob`, which tells
/// the registrar that this first hop supports Outbound (§6).
pub fn outbound_path_value(transport_param: Option<&str>, local: SocketAddr, flow: &str) -> String {
    own_uri("sip", transport_param, local, None, Some(flow), ";ob")
}

/// The Path value herald inserts into a REGISTER it forwards to another registrar (RFC 3327
/// §4): its own URI, with the flow token of the UA's flow when the registrar's requests must
/// leave over it (a phone behind NAT), and `ob` for an Outbound UA ([`outbound_path_value`]).
pub fn edge_path_value(transport_param: Option<&str>, local: SocketAddr, flow: Option<&str>, ob: bool) -> String {
    own_uri("sip", transport_param, local, None, flow, if ob { ";ob" } else { "" })
}

/// `<SCHEME:HOST:PORT[;transport=T];lr[;hs=SIG][;ft=TOKEN]TAIL>`: herald's own loose-routing URI
/// as every Record-Route and Path value it writes has it.
fn own_uri(
    scheme: &str,
    transport_param: Option<&str>,
    local: SocketAddr,
    signature: Option<&str>,
    flow: Option<&str>,
    tail: &str,
) -> String {
    let mut v = String::with_capacity(96);
    v.push('<');
    v.push_str(scheme);
    v.push(':');
    push_host_port(&mut v, local);
    if let Some(t) = transport_param {
        v.push_str(";transport=");
        v.push_str(t);
    }
    v.push_str(";lr");
    if let Some(sig) = signature {
        push_param(&mut v, SIG_PARAM, sig);
    }
    if let Some(token) = flow {
        push_param(&mut v, super::flow_token::FLOW_PARAM, token);
    }
    v.push_str(tail);
    v.push('>');
    v
}

/// The Record-Route URI parameter that carries herald's signature. It is part of the URI this
/// module writes, so it lives here; the auth gate reads it back and `crate::auth::route_sig`
/// computes the value (the proxy itself does not depend on authentication).
pub const SIG_PARAM: &str = "hs";

fn push_param(v: &mut String, name: &str, value: &str) {
    v.push(';');
    v.push_str(name);
    v.push('=');
    v.push_str(value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_sip::Limits;

    fn msg(s: &str) -> Message {
        Message::parse(Bytes::from(s.replace('\n', "\r\n")), &Limits::default()).unwrap()
    }

    const INV: &str = "INVITE sip:bob@example.com SIP/2.0\nVia: SIP/2.0/UDP 10.0.0.2:5062;branch=z9hG4bKa;rport\nMax-Forwards: 70\nRoute: <sip:192.0.2.10;lr>\nFrom: <sip:alice@example.com>;tag=1\nTo: <sip:bob@example.com>\nCall-ID: c1\nCSeq: 1 INVITE\nX-Custom:  kept  as is\nContent-Length: 5\n\nv=0\n";

    #[test]
    fn forwards_with_all_edits() {
        let m = msg(INV);
        let routes: Vec<_> = m.list_values(HeaderName::Route).map(Result::unwrap).collect();
        let src: SocketAddr = "203.0.113.5:40000".parse().unwrap();
        let fix = via_fixup(&m, src);
        let local: SocketAddr = "192.0.2.10:5060".parse().unwrap();
        let mut texts = OwnTexts::default();
        texts.note(Transport::Udp, local);
        let rr = [texts.record_route_line(Transport::Udp, local)];
        let path = vec!["<sip:edge.example.net;lr>".to_owned()];
        let via = texts.via(Transport::Udp, local, "z9hG4bK-1-ab");
        let out = forward(
            &m,
            &Forward {
                request_uri: Some("sip:bob@198.51.100.7:5070"),
                remove_routes: &routes,
                push_routes: &path,
                record_route: &rr,
                via: Some(via),
                via_fixup: fix,
                ..Default::default()
            },
        );
        let f = Message::parse(out.clone(), &Limits::default()).unwrap();
        f.validate_all().unwrap();
        assert_eq!(f.request_uri_bytes(), Some(&b"sip:bob@198.51.100.7:5070"[..]));
        assert_eq!(f.max_forwards().unwrap(), Some(69));
        let vias: Vec<_> = f.vias().map(Result::unwrap).collect();
        assert_eq!(vias.len(), 2);
        assert_eq!(vias[0].branch(), Some("z9hG4bK-1-ab"));
        assert_eq!(vias[1].received(), Some("203.0.113.5"));
        assert_eq!(vias[1].rport(), Some(Some(40000)));
        let routes: Vec<_> = f.routes().map(|r| r.unwrap().uri.as_str().to_owned()).collect();
        assert_eq!(routes, ["sip:edge.example.net;lr"]);
        assert_eq!(f.record_routes().count(), 1);
        assert!(out.starts_with(
            b"INVITE sip:bob@198.51.100.7:5070 SIP/2.0\r\nVia: SIP/2.0/UDP 192.0.2.10:5060;branch=z9hG4bK-1-ab;rport\r\n\
              Via: SIP/2.0/UDP 10.0.0.2:5062;branch=z9hG4bKa;rport=40000;received=203.0.113.5\r\n\
              Record-Route: <sip:192.0.2.10:5060;lr>\r\nRoute: <sip:edge.example.net;lr>\r\n"
        ));
        assert!(out.windows(25).any(|w| w == b"X-Custom:  kept  as is\r\nC"));
        assert_eq!(f.body(), b"v=0\r\n");
    }

    #[test]
    fn no_fixup_when_sent_by_is_the_source() {
        let m = msg(&INV.replace(";rport", ""));
        assert!(via_fixup(&m, "10.0.0.2:5062".parse().unwrap()).is_none());
        assert!(via_fixup(&m, "10.0.0.3:5062".parse().unwrap()).is_some());
    }

    #[test]
    fn ipv6_values() {
        let l: SocketAddr = "[2001:db8::1]:5060".parse().unwrap();
        assert_eq!(via_value("TCP", l, "z9hG4bKx"), "SIP/2.0/TCP [2001:db8::1]:5060;branch=z9hG4bKx;rport");
        assert_eq!(record_route_value(Some("tcp"), l, None, None), "<sip:[2001:db8::1]:5060;transport=tcp;lr>");
        assert_eq!(record_route_value_sips(l, None, None), "<sips:[2001:db8::1]:5060;lr>");
        assert_eq!(record_route_value(None, l, Some("0a1b"), None), "<sip:[2001:db8::1]:5060;lr;hs=0a1b>");
        assert_eq!(record_route_value_sips(l, Some("0a1b"), None), "<sips:[2001:db8::1]:5060;lr;hs=0a1b>");
        assert_eq!(
            record_route_value(Some("ws"), l, Some("0a1b"), Some("77")),
            "<sip:[2001:db8::1]:5060;transport=ws;lr;hs=0a1b;ft=77>"
        );
        assert_eq!(outbound_path_value(Some("tcp"), l, "77"), "<sip:[2001:db8::1]:5060;transport=tcp;lr;ft=77;ob>");
        assert_eq!(edge_path_value(Some("tcp"), l, Some("77"), true), outbound_path_value(Some("tcp"), l, "77"));
        assert_eq!(edge_path_value(None, l, None, false), "<sip:[2001:db8::1]:5060;lr>");
    }

    #[test]
    fn own_texts_are_the_values_written_each_time() {
        // Kept or not (a listener beyond the bound), the texts in the copy are the values.
        let m = msg(INV);
        let mut kept = OwnTexts::default();
        let none = OwnTexts::default();
        for local in ["192.0.2.10:5060", "[2001:db8::1]:5061"] {
            let l: SocketAddr = local.parse().unwrap();
            for t in [Transport::Udp, Transport::Tcp, Transport::Tls, Transport::Ws] {
                kept.note(t, l);
                for texts in [&kept, &none] {
                    assert!(matches!(texts.record_route_line(t, l), Cow::Borrowed(_)) == std::ptr::eq(texts, &kept));
                    let rr = [texts.record_route_line(t, l)];
                    let via = texts.via(t, l, "z9hG4bKq");
                    let out = forward(&m, &Forward { record_route: &rr, via: Some(via), ..Default::default() });
                    let lines = format!(
                        "Via: {}\r\nRecord-Route: {}\r\n",
                        via_value(t.as_via_str(), l, "z9hG4bKq"),
                        record_route_value(plain_transport_param(t), l, None, None),
                    );
                    assert!(out.windows(lines.len()).any(|w| w == lines.as_bytes()), "{local} {t:?}");
                }
            }
        }
        // Bounded: the seventeenth listener's texts are built, not kept.
        for port in 0..20u16 {
            kept.note(Transport::Udp, SocketAddr::new([192, 0, 2, 1].into(), 6000 + port));
        }
        assert_eq!(kept.listeners.len(), OwnTexts::MAX);
    }
}
