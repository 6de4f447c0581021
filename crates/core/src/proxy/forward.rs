//! Building the forwarded copy of a request (RFC 3261 §16.6) and fixing up the received Via
//! (RFC 3261 §18.2.1, RFC 3581 §4), with the editor so untouched bytes pass verbatim.

use super::own_values::OwnVia;
use bytes::Bytes;
use herald_sip::headers::ListValue;
use herald_sip::text::{push_dec, push_ip, push_uri_host};
use herald_sip::uri::Host;
use herald_sip::{Editor, HeaderName, Message};
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
    /// Step 4: Record-Route lines (`Record-Route: VALUE` CRLF,
    /// [`super::own_values::record_route_line`]) to insert on top, in order.
    pub record_route: &'a [std::borrow::Cow<'a, str>],
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
    // The sent-by and rport from the receipt check's memo: the whole Via is made only when it
    // is rewritten (about 110 instructions per forwarded request otherwise).
    let (host, _) = msg.top_via_sent_by()?;
    let rport_requested = msg.top_via_rport() == Some(None);
    let sent_by_is_source = match host {
        Host::Ipv4(ip) => std::net::IpAddr::V4(ip) == source.ip(),
        Host::Ipv6(ip) => std::net::IpAddr::V6(ip) == source.ip(),
        Host::Name(_) => false,
    };
    if sent_by_is_source && !rport_requested {
        return None;
    }
    let via = msg.top_via().ok()?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peer::Transport;
    use crate::proxy::identity::Identity;
    use crate::proxy::own_values::{plain_transport_param, record_route_value, via_value, OwnTexts};
    use herald_sip::Limits;
    use std::borrow::Cow;

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
        texts.note(Transport::Udp, local, &Identity::default());
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
    fn own_texts_are_the_values_written_each_time() {
        // Kept or not (a listener beyond the bound), the texts in the copy are the values.
        let m = msg(INV);
        let mut kept = OwnTexts::default();
        let none = OwnTexts::default();
        for local in ["192.0.2.10:5060", "[2001:db8::1]:5061"] {
            let l: SocketAddr = local.parse().unwrap();
            for t in [Transport::Udp, Transport::Tcp, Transport::Tls, Transport::Ws] {
                kept.note(t, l, &Identity::default());
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
        // Bounded: once 16 listeners are kept, another one's texts are built, not kept.
        let other = |port| SocketAddr::new([192, 0, 2, 1].into(), port);
        for port in 6000..6020 {
            kept.note(Transport::Udp, other(port), &Identity::default());
        }
        assert!(matches!(kept.record_route_line(Transport::Udp, other(6000)), Cow::Borrowed(_)));
        assert!(matches!(kept.record_route_line(Transport::Udp, other(6019)), Cow::Owned(_)));
    }
}
