//! The values herald writes about itself into the requests it forwards (RFC 3261 §16.6): its
//! Via (step 8), its Record-Route (step 4) and the Path of an edge proxy (RFC 3327, RFC 5626),
//! and [`OwnTexts`], the lines of them that depend only on the listener, written once.

use super::identity::Identity;
use crate::peer::Transport;
use herald_sip::headers::NameAddr;
use herald_sip::text::push_host_port;
use std::borrow::Cow;
use std::net::SocketAddr;

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
/// (`herald_sip::Editor::prepend_lines_of_pieces`): the part up to the branch, which [`OwnTexts`] keeps per
/// listener, the branch, and the tail, with no `String` per branch.
#[derive(Debug, Clone)]
pub struct OwnVia<'a> {
    line_start: Cow<'a, str>,
    branch: &'a str,
}

impl<'a> OwnVia<'a> {
    pub(super) fn pieces(&self) -> [&[u8]; 3] {
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
    /// Whether the Record-Route value, as a Route, points at this proxy (for the identity the
    /// texts were noted with): a Route value equal to it is herald's without a parse
    /// ([`OwnTexts::is_own_route`]).
    routes_here: bool,
}

impl ListenerTexts {
    /// The Record-Route value: the line without its name and CRLF.
    fn record_route_value(&self) -> &[u8] {
        let line = self.record_route_line.as_bytes();
        line.get(RECORD_ROUTE_LINE.len()..line.len().saturating_sub(2)).unwrap_or_default()
    }
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
    /// `identity`: who herald is, which decides once whether the Record-Route value points here
    /// (texts kept for one identity are dropped when it changes: `Engine::refresh_config`).
    ///
    /// Inlined where each branch is sent, with the writing of new texts a call of its own: as
    /// a call, the usual "kept already" cost more in saving registers than in the look
    /// (issue 21).
    #[inline]
    pub fn note(&mut self, transport: Transport, addr: SocketAddr, identity: &Identity) {
        if self.listeners.len() < Self::MAX && self.find(transport, addr).is_none() {
            self.keep(transport, addr, identity);
        }
    }

    /// Writes and keeps the texts of `(transport, addr)` ([`Self::note`]).
    #[inline(never)]
    fn keep(&mut self, transport: Transport, addr: SocketAddr, identity: &Identity) {
        let value = plain_record_route(transport, addr);
        // The parse and the test §16.4 makes of every Route value, made once for this text.
        let routes_here = NameAddr::parse(value.as_bytes()).is_ok_and(|a| identity.is_this_proxy(&a.uri));
        self.listeners.push(ListenerTexts {
            transport,
            addr,
            via_line_start: via_prefix(VIA_LINE, transport.as_via_str(), addr).into(),
            record_route_line: record_route_line(&value).into(),
            routes_here,
        });
    }

    /// Whether a Route value is, byte for byte, the plain Record-Route value of a kept listener
    /// that points at this proxy: what `route::preprocess` would find by parsing it and asking
    /// [`Identity::is_this_proxy`], without the parse.
    pub fn is_own_route(&self, value: &[u8]) -> bool {
        self.listeners.iter().any(|l| l.routes_here && l.record_route_value() == value)
    }

    /// Our Via for a branch `branch` leaving from `(transport, addr)`.
    #[inline]
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

/// The start of a Record-Route line.
const RECORD_ROUTE_LINE: &str = "Record-Route: ";

/// `Record-Route: VALUE` CRLF, as `Forward::record_route` takes it.
pub fn record_route_line(value: &str) -> String {
    let mut line = String::with_capacity(value.len() + 16);
    line.push_str(RECORD_ROUTE_LINE);
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
}
