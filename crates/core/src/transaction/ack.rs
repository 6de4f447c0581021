//! Messages the transaction layer writes itself: the ACK for a non-2xx final response
//! (RFC 3261 §17.1.1.3) and the 100 (Trying) an INVITE server transaction may send on its own
//! (§17.2.1, built per §8.2.6).
//!
//! Header values are copied as written (they were parsed and validated on the way in); only the
//! fields the RFC names are included.

use bytes::{BufMut, Bytes, BytesMut};
use herald_sip::{HeaderName, Message};

fn header(out: &mut BytesMut, name: &str, value: &[u8]) {
    out.put_slice(name.as_bytes());
    out.put_slice(b": ");
    out.put_slice(value);
    out.put_slice(b"\r\n");
}

/// The ACK for a 300-699 response to `invite` (RFC 3261 §17.1.1.3):
///
/// * Request-URI, Call-ID, From and the CSeq number of the INVITE, with method ACK;
/// * To from the response, so it carries the tag the UAS chose;
/// * a single Via, equal to the top Via of the INVITE (so the server transaction matches it);
/// * the INVITE's Route header fields, so the ACK follows the INVITE's path;
/// * Max-Forwards 70 (§8.1.1.6) and an empty body.
///
/// `None` if either message lacks what is needed (malformed input never panics).
pub fn build_ack(invite: &Message, response: &Message) -> Option<Bytes> {
    let uri = invite.request_uri_bytes()?;
    let top_via = invite.list_values(HeaderName::Via).next()?.ok()?;
    let call_id = invite.get(HeaderName::CallId)?;
    let from = invite.get(HeaderName::From)?;
    let to = response.get(HeaderName::To)?;
    let seq = invite.cseq().ok()?.seq;
    let mut routes = Vec::new();
    for r in invite.list_values(HeaderName::Route) {
        routes.push(r.ok()?.bytes);
    }
    Some(write_ack(AckFields { uri, top_via: top_via.bytes, routes: &routes, from, to, call_id, seq }))
}

/// The fields of an ACK for a non-2xx final (RFC 3261 §17.1.1.3), as written in the INVITE and
/// the response (To).
pub(crate) struct AckFields<'a> {
    pub uri: &'a [u8],
    pub top_via: &'a [u8],
    pub routes: &'a [&'a [u8]],
    pub from: &'a [u8],
    pub to: &'a [u8],
    pub call_id: &'a [u8],
    pub seq: u32,
}

/// Writes the ACK: one writer for an INVITE the engine parsed ([`build_ack`]) and one a user
/// agent wrote itself (`AckSource::ack`), so both send the same bytes.
pub(crate) fn write_ack(f: AckFields<'_>) -> Bytes {
    let mut out =
        BytesMut::with_capacity(256 + f.uri.len() + f.top_via.len() + f.call_id.len() + f.from.len() + f.to.len());
    out.put_slice(b"ACK ");
    out.put_slice(f.uri);
    out.put_slice(b" SIP/2.0\r\n");
    header(&mut out, "Via", f.top_via);
    for r in f.routes {
        header(&mut out, "Route", r);
    }
    header(&mut out, "Max-Forwards", b"70");
    header(&mut out, "From", f.from);
    header(&mut out, "To", f.to);
    header(&mut out, "Call-ID", f.call_id);
    header(&mut out, "CSeq", format!("{} ACK", f.seq).as_bytes());
    header(&mut out, "Content-Length", b"0");
    out.put_slice(b"\r\n");
    out.freeze()
}

/// A 100 (Trying) for `request`: Via (all values, in order), From, To, Call-ID, CSeq and
/// Timestamp copied (RFC 3261 §8.2.6.1, §8.2.6.2; a 100 needs no To tag). `None` if the request
/// lacks a mandatory header.
pub fn build_trying(request: &Message) -> Option<Bytes> {
    request.method()?;
    let from = request.get(HeaderName::From)?;
    let to = request.get(HeaderName::To)?;
    let call_id = request.get(HeaderName::CallId)?;
    let cseq = request.get(HeaderName::CSeq)?;
    request.field(HeaderName::Via)?;
    // A Vec, whose `extend_from_slice` inlines to a capacity test and a copy; `BytesMut::put_slice`
    // stayed an out-of-line call per piece here (issue 21: ~26 calls, ~670 instructions per
    // proxied INVITE). The request's head bounds the copy but for compact names written long.
    let mut out = Vec::with_capacity(request.head_end() + 32);
    out.extend_from_slice(b"SIP/2.0 100 Trying\r\n");
    for v in request.fields(HeaderName::Via) {
        vec_header(&mut out, b"Via", request.value_of(v));
    }
    vec_header(&mut out, b"From", from);
    vec_header(&mut out, b"To", to);
    vec_header(&mut out, b"Call-ID", call_id);
    vec_header(&mut out, b"CSeq", cseq);
    if let Some(ts) = request.get(HeaderName::Timestamp) {
        vec_header(&mut out, b"Timestamp", ts);
    }
    vec_header(&mut out, b"Content-Length", b"0");
    out.extend_from_slice(b"\r\n");
    Some(Bytes::from(out))
}

/// [`header`] into a `Vec` ([`build_trying`]). Inlined at each use, so that the name's copy
/// is one of a constant length (a few moves): called, each line cost a call and a memcpy for
/// the name as well as the value's (~90 instructions a line, six lines per proxied INVITE).
#[inline(always)]
fn vec_header(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_sip::Limits;

    fn parse(s: &str) -> Message {
        Message::parse(Bytes::copy_from_slice(s.as_bytes()), &Limits::default()).expect("test message parses")
    }

    const INVITE: &str = "INVITE sip:bob@biloxi.example.com SIP/2.0\r\n\
        Via: SIP/2.0/UDP proxy.example.com;branch=z9hG4bKp1, SIP/2.0/UDP pc33.atlanta.example.com;branch=z9hG4bKa\r\n\
        Max-Forwards: 69\r\n\
        Route: <sip:p1.example.com;lr>\r\n\
        Route: <sip:p2.example.com;lr>, <sip:p3.example.com;lr>\r\n\
        To: Bob <sip:bob@biloxi.example.com>\r\n\
        From: Alice <sip:alice@atlanta.example.com>;tag=1928301774\r\n\
        Call-ID: a84b4c76e66710\r\n\
        CSeq: 314159 INVITE\r\n\
        Timestamp: 54\r\n\
        Content-Type: application/sdp\r\n\
        Content-Length: 4\r\n\r\nv=0\n";

    const BUSY: &str = "SIP/2.0 486 Busy Here\r\n\
        Via: SIP/2.0/UDP proxy.example.com;branch=z9hG4bKp1, SIP/2.0/UDP pc33.atlanta.example.com;branch=z9hG4bKa\r\n\
        To: Bob <sip:bob@biloxi.example.com>;tag=8321234356\r\n\
        From: Alice <sip:alice@atlanta.example.com>;tag=1928301774\r\n\
        Call-ID: a84b4c76e66710\r\n\
        CSeq: 314159 INVITE\r\n\
        Content-Length: 0\r\n\r\n";

    #[test]
    fn ack_for_non_2xx() {
        let ack = build_ack(&parse(INVITE), &parse(BUSY)).expect("ack");
        assert_eq!(
            std::str::from_utf8(&ack).unwrap(),
            "ACK sip:bob@biloxi.example.com SIP/2.0\r\n\
             Via: SIP/2.0/UDP proxy.example.com;branch=z9hG4bKp1\r\n\
             Route: <sip:p1.example.com;lr>\r\n\
             Route: <sip:p2.example.com;lr>\r\n\
             Route: <sip:p3.example.com;lr>\r\n\
             Max-Forwards: 70\r\n\
             From: Alice <sip:alice@atlanta.example.com>;tag=1928301774\r\n\
             To: Bob <sip:bob@biloxi.example.com>;tag=8321234356\r\n\
             Call-ID: a84b4c76e66710\r\n\
             CSeq: 314159 ACK\r\n\
             Content-Length: 0\r\n\r\n"
        );
        let m = parse(std::str::from_utf8(&ack).unwrap());
        assert_eq!(m.vias().count(), 1);
        assert_eq!(m.to_header().unwrap().tag(), Some("8321234356"));
        assert_eq!(m.cseq().unwrap().seq, 314159);
        assert!(m.validate_all().is_ok());
    }

    #[test]
    fn trying_copies_the_mandatory_headers() {
        let t = build_trying(&parse(INVITE)).expect("100");
        let m = parse(std::str::from_utf8(&t).unwrap());
        assert_eq!(m.status(), Some(100));
        assert_eq!(m.vias().count(), 2);
        assert_eq!(m.get(HeaderName::Timestamp), Some(&b"54"[..]));
        assert_eq!(m.call_id().unwrap(), "a84b4c76e66710");
        assert_eq!(m.content_length(), Some(0));
        assert!(m.validate_all().is_ok());
    }

    #[test]
    fn missing_pieces_give_none() {
        let no_cseq = parse("INVITE sip:b@h SIP/2.0\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\r\nFrom: <sip:a@h>;tag=1\r\nTo: <sip:b@h>\r\nCall-ID: c\r\n\r\n");
        assert!(build_ack(&no_cseq, &parse(BUSY)).is_none());
        assert!(build_trying(&no_cseq).is_none());
        assert!(build_ack(&parse(BUSY), &parse(BUSY)).is_none(), "a response is not an INVITE");
        assert!(build_trying(&parse(BUSY)).is_none());
    }
}
