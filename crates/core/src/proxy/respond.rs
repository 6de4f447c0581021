//! Where responses go (RFC 3261 §18.2.2, RFC 3581 §4) and requests a proxy builds itself
//! (CANCEL, RFC 3261 §9.1 and §16.10).

use crate::peer::{Peer, Transport};
use bytes::{BufMut, Bytes, BytesMut};
use herald_sip::uri::Host;
use herald_sip::{HeaderName, Message};
use std::net::{IpAddr, SocketAddr};

/// The destination of responses to `req`, received from `source`:
/// * reliable transport: the connection the request came on (§18.2.2 first bullet);
/// * `maddr` in the top Via: that address, port from sent-by or 5060 (§18.2.2);
/// * otherwise the source IP (the `received` address) and, with `rport`, the source port
///   (RFC 3581 §4), else the sent-by port or 5060.
pub fn response_destination(req: &Message, source: Peer) -> Peer {
    if source.transport.is_reliable() {
        return source;
    }
    // The top Via's parts from the receipt check's memo: the whole Via made for them cost about
    // 180 instructions per request (issue 21). `None` exactly when `top_via()` fails.
    let Some((_, via_port)) = req.top_via_sent_by() else { return source };
    let default_port = 5060;
    if let Some(maddr) = req.top_via_maddr().and_then(|m| m.parse::<IpAddr>().ok()) {
        return Peer::udp(SocketAddr::new(maddr, via_port.unwrap_or(default_port)));
    }
    let port = if req.top_via_rport().is_some() { source.addr.port() } else { via_port.unwrap_or(default_port) };
    Peer { transport: source.transport, addr: SocketAddr::new(source.addr.ip(), port), conn: source.conn }
}

/// Where to forward a response statelessly (§16.11, §18.2.2 applied to the *second* Via,
/// once ours is removed): its `received`/`rport` when present, else its sent-by. `None` if the
/// sent-by is a host name (the response is then dropped; a stateless proxy does not resolve).
pub fn via_destination(via: &herald_sip::headers::Via<'_>) -> Option<Peer> {
    let transport = Transport::parse(via.transport).unwrap_or(Transport::Udp);
    let ip = match via.received().map(|r| r.trim_matches(|c| c == '[' || c == ']')).and_then(|r| r.parse().ok()) {
        Some(ip) => ip,
        None => match via.host {
            Host::Ipv4(ip) => IpAddr::V4(ip),
            Host::Ipv6(ip) => IpAddr::V6(ip),
            Host::Name(_) => return None,
        },
    };
    let default_port = if transport == Transport::Tls { 5061 } else { 5060 };
    let port = via.rport().flatten().or(via.port).unwrap_or(default_port);
    Some(Peer { transport, addr: SocketAddr::new(ip, port), conn: None })
}

/// CANCEL for a forwarded INVITE (RFC 3261 §9.1): same Request-URI, Call-ID, To, From and
/// CSeq number, method CANCEL; only the top Via (same branch, so it matches the INVITE's
/// server transaction downstream); the same Route headers; Max-Forwards 70; no body.
pub fn build_cancel(invite: &Message) -> Bytes {
    let mut out = BytesMut::with_capacity(invite.head_end() + 64);
    out.put_slice(b"CANCEL ");
    out.put_slice(invite.request_uri_bytes().unwrap_or_default());
    out.put_slice(b" SIP/2.0\r\n");
    if let Some(Ok(top)) = invite.list_values(HeaderName::Via).next() {
        out.put_slice(b"Via: ");
        out.put_slice(top.bytes);
        out.put_slice(b"\r\n");
    }
    for h in invite.headers() {
        if matches!(h.name, HeaderName::From | HeaderName::To | HeaderName::CallId | HeaderName::Route) {
            out.put_slice(&invite.as_bytes()[h.line.range()]);
        }
    }
    if let Ok(cseq) = invite.cseq() {
        out.put_slice(format!("CSeq: {} CANCEL\r\n", cseq.seq).as_bytes());
    }
    out.put_slice(b"Max-Forwards: 70\r\nContent-Length: 0\r\n\r\n");
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_sip::{Limits, Method};

    fn msg(s: &str) -> Message {
        Message::parse(Bytes::from(s.replace('\n', "\r\n")), &Limits::default()).unwrap()
    }

    const INV: &str = "INVITE sip:bob@192.0.2.20 SIP/2.0\nVia: SIP/2.0/UDP 192.0.2.10:5060;branch=z9hG4bK-p1;rport\nVia: SIP/2.0/UDP 10.0.0.2:5062;branch=z9hG4bKa;rport=40000;received=203.0.113.5\nRoute: <sip:next.example.net;lr>\nMax-Forwards: 69\nFrom: <sip:alice@example.com>;tag=1\nTo: <sip:bob@example.com>\nCall-ID: c1\nCSeq: 7 INVITE\nContent-Length: 0\n\n";

    #[test]
    fn response_destinations() {
        let src = Peer::udp("203.0.113.5:40000".parse().unwrap());
        let m = msg(INV);
        // rport on the top Via: answer to the source port.
        assert_eq!(response_destination(&m, src).addr, "203.0.113.5:40000".parse().unwrap());
        let no_rport = msg(&INV.replace("branch=z9hG4bK-p1;rport", "branch=z9hG4bK-p1"));
        assert_eq!(response_destination(&no_rport, src).addr, "203.0.113.5:5060".parse().unwrap());
        let tcp = Peer { transport: Transport::Tcp, addr: src.addr, conn: Some(crate::ConnId(9)) };
        assert_eq!(response_destination(&m, tcp), tcp);
    }

    /// The destination read from the memo's parts is the one the whole top Via gives (the rule
    /// above written against `top_via()`), for checked and unchecked requests of every shape.
    #[test]
    fn destinations_from_the_memo_are_those_of_the_parsed_via() {
        let by_via = |req: &Message, source: Peer| -> Peer {
            let Ok(via) = req.top_via() else { return source };
            if let Some(maddr) = via.maddr().and_then(|m| m.parse::<IpAddr>().ok()) {
                return Peer::udp(SocketAddr::new(maddr, via.port.unwrap_or(5060)));
            }
            let port = if via.rport().is_some() { source.addr.port() } else { via.port.unwrap_or(5060) };
            Peer { transport: source.transport, addr: SocketAddr::new(source.addr.ip(), port), conn: source.conn }
        };
        let src = Peer::udp("203.0.113.5:40000".parse().unwrap());
        let top = "Via: SIP/2.0/UDP 192.0.2.10:5060;branch=z9hG4bK-p1;rport";
        for via in [
            top,
            "Via: SIP/2.0/UDP 192.0.2.10:5070;branch=z9hG4bK-p1",
            "Via: SIP/2.0/UDP 192.0.2.10;branch=z9hG4bK-p1",
            "Via: SIP/2.0/UDP 192.0.2.10:5070;maddr=239.1.2.3;branch=z9hG4bK-p1;rport",
            "Via: SIP/2.0/UDP h.example.com;branch=z9hG4bK-p1;MADDR=[2001:db8::9]",
            "Via: SIP/2.0/UDP 192.0.2.10;maddr=not-an-address;branch=z9hG4bK-p1",
            "Via: SIP/2.0/UDP 192.0.2.10;branch=z9hG4bK-p1;rport=7;received=192.0.2.99",
            "Via: SIP/2.0/UDP 192.0.2.10:;branch=z9hG4bK-p1",
        ] {
            let mut m = msg(&INV.replace(top, via));
            assert_eq!(response_destination(&m, src), by_via(&m, src), "unchecked: {via}");
            if m.check().is_ok() {
                assert_eq!(response_destination(&m, src), by_via(&m, src), "checked: {via}");
            }
        }
    }

    #[test]
    fn second_via_destination() {
        let m = msg(INV);
        let second = m.vias().nth(1).unwrap().unwrap();
        assert_eq!(via_destination(&second).unwrap().addr, "203.0.113.5:40000".parse().unwrap());
    }

    #[test]
    fn cancel_matches_the_invite() {
        let inv = msg(INV);
        let c = Message::parse(build_cancel(&inv), &Limits::default()).unwrap();
        c.validate_all().unwrap();
        assert_eq!(c.method(), Some(Method::Cancel));
        assert_eq!(c.request_uri_bytes(), inv.request_uri_bytes());
        assert_eq!(c.vias().count(), 1);
        assert_eq!(c.top_via().unwrap().branch(), Some("z9hG4bK-p1"));
        assert_eq!(c.cseq().unwrap().seq, 7);
        assert_eq!(c.routes().count(), 1);
        assert_eq!(c.call_id().unwrap(), "c1");
    }
}
