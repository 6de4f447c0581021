//! Building a response to a request (RFC 3261 §8.2.6): the Via headers, From, Call-ID and CSeq
//! are copied byte for byte, To too, with a tag added when the request had none (§8.2.6.2) and
//! the response is not a 100 (§8.2.6.1: 100 Trying never carries a new To tag).

use crate::header_name::HeaderName;
use crate::message::Message;
use bytes::{BufMut, BytesMut};

/// Writes a response to `req` with extra headers and a body. Header values are written as given:
/// the caller is responsible for their syntax.
pub struct ResponseBuilder<'r> {
    req: &'r Message,
    status: u16,
    reason: &'r str,
    to_tag: Option<&'r str>,
    extra: Vec<(&'r str, &'r [u8])>,
    body: &'r [u8],
}

impl<'r> ResponseBuilder<'r> {
    pub fn new(req: &'r Message, status: u16, reason: &'r str) -> Self {
        ResponseBuilder { req, status, reason, to_tag: None, extra: Vec::new(), body: b"" }
    }

    /// The tag to add to To if the request's To has none (ignored for 100 Trying).
    pub fn to_tag(mut self, tag: &'r str) -> Self {
        self.to_tag = Some(tag);
        self
    }

    pub fn header(mut self, name: &'r str, value: &'r [u8]) -> Self {
        self.extra.push((name, value));
        self
    }

    /// The body; Content-Type must be given with [`Self::header`].
    pub fn body(mut self, body: &'r [u8]) -> Self {
        self.body = body;
        self
    }

    pub fn build(self) -> BytesMut {
        let req = self.req;
        let mut out = BytesMut::with_capacity(512 + self.body.len());
        out.put_slice(b"SIP/2.0 ");
        out.put_slice(self.status.to_string().as_bytes());
        out.put_u8(b' ');
        // A reason phrase must not contain CR or LF (RFC 3261 §25.1 Reason-Phrase).
        out.extend(self.reason.bytes().filter(|b| *b != b'\r' && *b != b'\n'));
        out.put_slice(b"\r\n");
        for h in req.headers() {
            let copy = matches!(h.name, HeaderName::Via | HeaderName::From | HeaderName::CallId | HeaderName::CSeq);
            if copy {
                out.put_slice(&req.as_bytes()[h.line.range()]);
            } else if h.name == HeaderName::To {
                let has_tag = req.to_header().ok().and_then(|t| t.tag().map(|_| ())).is_some();
                if let (Some(tag), false, true) = (self.to_tag, has_tag, self.status > 100) {
                    // The tag goes right after the value, not before the line's CRLF: whatever
                    // the value was trimmed of (white space, a stray CR the parser tolerated)
                    // would otherwise end up between the address and ";tag=".
                    out.put_slice(&req.as_bytes()[h.line.start as usize..h.value.end as usize]);
                    out.put_slice(b";tag=");
                    out.put_slice(tag.as_bytes());
                    out.put_slice(b"\r\n");
                } else {
                    out.put_slice(&req.as_bytes()[h.line.range()]);
                }
            }
        }
        for (name, value) in &self.extra {
            out.put_slice(name.as_bytes());
            out.put_slice(b": ");
            out.put_slice(value);
            out.put_slice(b"\r\n");
        }
        out.put_slice(b"Content-Length: ");
        out.put_slice(self.body.len().to_string().as_bytes());
        out.put_slice(b"\r\n\r\n");
        out.put_slice(self.body);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Limits;
    use bytes::Bytes;

    const REQ: &[u8] = b"INVITE sip:bob@example.com SIP/2.0\r\nVia: SIP/2.0/UDP a.example.com;branch=z9hG4bK1\r\nVia: SIP/2.0/UDP b.example.com;branch=z9hG4bK2\r\nMax-Forwards: 70\r\nTo: Bob <sip:bob@example.com>\r\nFrom: Alice <sip:alice@example.com>;tag=1928301774\r\nCall-ID: a84b4c76e66710\r\nCSeq: 314159 INVITE\r\nContact: <sip:alice@pc33.example.com>\r\nContent-Length: 0\r\n\r\n";

    #[test]
    fn copies_the_right_headers_and_tags_to() {
        let req = Message::parse(Bytes::from_static(REQ), &Limits::default()).unwrap();
        let resp = ResponseBuilder::new(&req, 486, "Busy Here").to_tag("xyz").header("Retry-After", b"60").build();
        let m = Message::parse(resp.freeze(), &Limits::default()).unwrap();
        m.validate_all().unwrap();
        assert_eq!(m.status(), Some(486));
        assert_eq!(m.vias().count(), 2);
        assert_eq!(m.to_header().unwrap().tag(), Some("xyz"));
        assert_eq!(m.from_header().unwrap().tag(), Some("1928301774"));
        assert_eq!(m.call_id().unwrap(), "a84b4c76e66710");
        assert_eq!(m.cseq().unwrap().seq, 314159);
        assert!(m.get(HeaderName::Contact).is_none() && m.get(HeaderName::MaxForwards).is_none());
        assert_eq!(m.retry_after().unwrap().unwrap().seconds, 60);
    }

    #[test]
    fn trying_gets_no_tag_and_reasons_stay_on_one_line() {
        let req = Message::parse(Bytes::from_static(REQ), &Limits::default()).unwrap();
        let resp = ResponseBuilder::new(&req, 100, "Trying\r\nX: y").to_tag("xyz").build();
        let m = Message::parse(resp.freeze(), &Limits::default()).unwrap();
        assert_eq!(m.to_header().unwrap().tag(), None);
        assert_eq!(m.reason(), Some(&b"TryingX: y"[..]));
    }

    /// Found by the engine_pipeline fuzz target: the parser trims a To value of trailing white
    /// space and stray CRs; the tag must follow the trimmed value, or the 407 herald sent had
    /// `<sip:dave@example.com>\r\r;tag=...`, a To header its own parser rejects.
    #[test]
    fn the_tag_follows_the_trimmed_to_value() {
        for to in [
            "To: <sip:bob@example.com>\r\r\r\n",
            "To: <sip:bob@example.com> \t \r\n",
            "To:\r\n <sip:bob@example.com>\r\n",
        ] {
            let req = String::from_utf8_lossy(REQ).replace("To: Bob <sip:bob@example.com>\r\n", to);
            let req = Message::parse(Bytes::from(req), &Limits::default()).unwrap();
            let resp = ResponseBuilder::new(&req, 407, "Proxy Authentication Required").to_tag("xyz").build();
            let m = Message::parse(resp.freeze(), &Limits::default()).unwrap();
            m.validate_all().unwrap_or_else(|e| panic!("{to:?}: {e}"));
            assert_eq!(m.to_header().unwrap().tag(), Some("xyz"), "{to:?}");
        }
    }
}
