//! Forwarding with cheap edits (RFC 3261 §16.6): the editor records replacements of byte ranges
//! and then writes the message once, copying every untouched byte verbatim. Unknown headers,
//! folding and header order therefore pass unchanged, as RFC 3261 §16.6 step 1 and
//! RFC 4475 §3.1.1.1 require of a proxy.

use crate::header_name::HeaderName;
use crate::headers::ListValue;
use crate::message::Message;
use crate::scan;
use crate::span::Span;
use bytes::{BufMut, Bytes, BytesMut};

#[derive(Debug)]
struct Edit {
    span: Span,
    text: Vec<u8>,
}

/// Builds the forwarded copy of a message. Edits may be recorded in any order. Removals that
/// overlap or touch are merged (removing two adjacent list values shares their comma), and a
/// removal that takes a header's whole value takes its line. Any other two edits touching the
/// same bytes are a programming error: the later one is dropped (and a debug build asserts).
#[derive(Debug)]
pub struct Editor<'m> {
    msg: &'m Message,
    edits: Vec<Edit>,
}

fn header_line(name: &str, value: &[u8]) -> Vec<u8> {
    let mut line = Vec::with_capacity(name.len() + value.len() + 4);
    line.extend_from_slice(name.as_bytes());
    line.extend_from_slice(b": ");
    line.extend_from_slice(value);
    line.extend_from_slice(b"\r\n");
    line
}

impl<'m> Editor<'m> {
    pub fn new(msg: &'m Message) -> Self {
        Editor { msg, edits: Vec::with_capacity(6) }
    }

    fn first_header_offset(&self) -> usize {
        self.msg.headers().first().map_or(self.msg.head_end(), |h| h.line.start as usize)
    }

    fn push(&mut self, span: Span, text: Vec<u8>) -> &mut Self {
        if text.is_empty() && !span.is_empty() {
            return self.push_removal(span);
        }
        self.edits.push(Edit { span, text });
        self
    }

    fn push_removal(&mut self, mut span: Span) -> &mut Self {
        // Merge with every removal it overlaps or touches.
        self.edits.retain(|e| {
            let removal = e.text.is_empty() && !e.span.is_empty();
            if removal && e.span.start <= span.end && span.start <= e.span.end {
                span = Span { start: span.start.min(e.span.start), end: span.end.max(e.span.end) };
                false
            } else {
                true
            }
        });
        // Removing a header's whole value removes its line: "Route: " alone is not a header.
        if let Some(h) = self.msg.headers().iter().find(|h| {
            span.start >= h.line.start
                && span.end <= h.line.end
                && span.start <= h.value.start
                && span.end >= h.value.end
        }) {
            span = h.line;
        }
        self.edits.push(Edit { span, text: Vec::new() });
        self
    }

    /// Inserts a header line before all others (a new Via or Record-Route goes on top).
    pub fn prepend_header(&mut self, name: &str, value: &[u8]) -> &mut Self {
        let at = self.first_header_offset();
        self.push(Span::new(at, at), header_line(name, value))
    }

    /// Inserts a header line after all others.
    pub fn append_header(&mut self, name: &str, value: &[u8]) -> &mut Self {
        let at = self.msg.head_end();
        self.push(Span::new(at, at), header_line(name, value))
    }

    /// Inserts a header line right before the line `field` (an index into `Message::headers`).
    pub fn insert_before(&mut self, field: usize, name: &str, value: &[u8]) -> &mut Self {
        let at = self.msg.headers()[field].line.start as usize;
        self.push(Span::new(at, at), header_line(name, value))
    }

    /// Removes the whole header line `field`.
    pub fn remove_field(&mut self, field: usize) -> &mut Self {
        let line = self.msg.headers()[field].line;
        self.push(line, Vec::new())
    }

    /// Removes every line of the header `name`.
    pub fn remove_all(&mut self, name: HeaderName) -> &mut Self {
        let lines: Vec<Span> = self.msg.fields(name).map(|h| h.line).collect();
        for line in lines {
            self.push(line, Vec::new());
        }
        self
    }

    /// Replaces the value of line `field`, keeping its name as written.
    pub fn replace_value(&mut self, field: usize, value: &[u8]) -> &mut Self {
        let span = self.msg.headers()[field].value;
        self.push(span, value.to_vec())
    }

    /// Removes one element of a comma-separated header (e.g. the top Route value, RFC 3261
    /// §16.4), together with its separating comma; the whole line goes if it was the only one.
    pub fn remove_list_value(&mut self, v: ListValue<'_>) -> &mut Self {
        let h = self.msg.headers()[v.field];
        let s = self.msg.as_bytes();
        let (vs, ve) = (v.span.start as usize, v.span.end as usize);
        let after = scan::skip_lws(s, ve);
        if after < h.value.end as usize && s[after] == b',' {
            // Not the last element: remove it, the comma and the LWS before the next one.
            let next = scan::skip_lws(s, after + 1);
            return self.push(Span::new(vs, next), Vec::new());
        }
        // The last element: remove from the preceding comma, or the whole line if none.
        let before = scan::trim_lws_end(s, vs);
        if before > h.value.start as usize && s[before - 1] == b',' {
            return self.push(Span::new(before - 1, ve), Vec::new());
        }
        self.push(h.line, Vec::new())
    }

    /// Rewrites the Request-URI (RFC 3261 §16.5/§16.6 step 2). No effect on a response.
    pub fn set_request_uri(&mut self, uri: &[u8]) -> &mut Self {
        if let crate::StartLine::Request { uri: span, .. } = *self.msg.start_line() {
            self.push(span, uri.to_vec());
        }
        self
    }

    /// Sets Max-Forwards, replacing the existing line's value or adding the header
    /// (RFC 3261 §16.6 step 3).
    pub fn set_max_forwards(&mut self, n: u8) -> &mut Self {
        let mut buf = itoa_u32(u32::from(n));
        match self.msg.headers().iter().position(|h| h.name == HeaderName::MaxForwards) {
            Some(i) => self.replace_value(i, &buf),
            None => {
                let v = std::mem::take(&mut buf);
                self.append_header("Max-Forwards", &v)
            }
        }
    }

    /// Replaces the body and its Content-Length (and adds Content-Length if it was absent).
    pub fn set_body(&mut self, body: &[u8]) -> &mut Self {
        let len = itoa_u32(body.len() as u32);
        match self.msg.headers().iter().position(|h| h.name == HeaderName::ContentLength) {
            Some(i) => self.replace_value(i, &len),
            None => self.append_header("Content-Length", &len),
        };
        let b = self.msg.body_span();
        self.push(b, body.to_vec())
    }

    /// Adds `Content-Length` when the message has none. Content-Length is optional over UDP
    /// but mandatory over streams (RFC 3261 §18.3, §20.14): a message relayed from UDP to TCP
    /// or TLS without it could not be framed by the next hop, so a forwarded copy always
    /// carries it.
    pub fn ensure_content_length(&mut self) -> &mut Self {
        if self.msg.headers().iter().any(|h| h.name == HeaderName::ContentLength) {
            return self;
        }
        let len = itoa_u32(self.msg.body().len() as u32);
        self.append_header("Content-Length", &len)
    }

    /// Length of the serialized result.
    pub fn len(&self) -> usize {
        let removed: usize = self.edits.iter().map(|e| e.span.len()).sum();
        let added: usize = self.edits.iter().map(|e| e.text.len()).sum();
        self.msg.as_bytes().len() + added - removed
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes the edited message into `out`.
    pub fn write_to(mut self, out: &mut BytesMut) {
        // Stable sort: insertions at the same offset keep the order they were made in.
        self.edits.sort_by_key(|e| (e.span.start, e.span.end));
        let src = self.msg.as_bytes();
        out.reserve(self.len());
        let mut cursor = 0usize;
        for e in &self.edits {
            let (start, end) = (e.span.start as usize, e.span.end as usize);
            if start < cursor {
                debug_assert!(false, "overlapping edits at {start}");
                continue;
            }
            out.put_slice(&src[cursor..start]);
            out.put_slice(&e.text);
            cursor = end;
        }
        out.put_slice(&src[cursor..]);
    }

    pub fn finish(self) -> Bytes {
        let mut out = BytesMut::new();
        self.write_to(&mut out);
        out.freeze()
    }
}

fn itoa_u32(n: u32) -> Vec<u8> {
    let mut s = String::with_capacity(10);
    crate::text::push_dec(&mut s, u64::from(n));
    s.into_bytes()
}

/// A canonical rendering: long header names, folding replaced by one space, one header per
/// line, body unchanged. Two messages with the same meaning render the same way, which is what
/// the round-trip property tests compare.
pub fn canonical(msg: &Message) -> Bytes {
    let s = msg.as_bytes();
    let mut out = BytesMut::with_capacity(s.len() + 64);
    let first = msg.headers().first().map_or(msg.head_end(), |h| h.line.start as usize);
    out.put_slice(&s[..first]);
    for h in msg.headers() {
        match h.name.canonical() {
            Some(name) => out.put_slice(name.as_bytes()),
            None => out.put_slice(msg.name_of(h)),
        }
        out.put_slice(b": ");
        let v = msg.value_of(h);
        let mut i = 0;
        while i < v.len() {
            if v[i] == b'\r' && v.get(i + 1) == Some(&b'\n') {
                // Folding: CRLF plus the following WSP collapse into one SP (RFC 3261 §7.3.1).
                while out.last().is_some_and(|b| scan::is_wsp(*b)) {
                    out.truncate(out.len() - 1);
                }
                out.put_u8(b' ');
                i = scan::skip_lws(v, i + 2).max(i + 2);
                continue;
            }
            out.put_u8(v[i]);
            i += 1;
        }
        out.put_slice(b"\r\n");
    }
    out.put_slice(b"\r\n");
    out.put_slice(msg.body());
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Limits;

    fn parse(s: &'static [u8]) -> Message {
        Message::parse(Bytes::from_static(s), &Limits::default()).unwrap()
    }

    const INV: &[u8] = b"INVITE sip:bob@example.com SIP/2.0\r\nVia: SIP/2.0/UDP a;branch=z9hG4bK1\r\nRoute: <sip:p1;lr>, <sip:p2;lr>\r\nX-Odd:   keep   \r\n  this\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n";

    #[test]
    fn proxy_edits_leave_the_rest_verbatim() {
        let m = parse(INV);
        let top_route = m.list_values(HeaderName::Route).next().unwrap().unwrap();
        let mut e = Editor::new(&m);
        e.prepend_header("Via", b"SIP/2.0/UDP proxy;branch=z9hG4bKp")
            .remove_list_value(top_route)
            .set_max_forwards(69)
            .set_request_uri(b"sip:bob@192.0.2.4");
        let expected_len = e.len();
        let out = e.finish();
        assert_eq!(out.len(), expected_len);
        assert_eq!(
            &out[..],
            &b"INVITE sip:bob@192.0.2.4 SIP/2.0\r\nVia: SIP/2.0/UDP proxy;branch=z9hG4bKp\r\nVia: SIP/2.0/UDP a;branch=z9hG4bK1\r\nRoute: <sip:p2;lr>\r\nX-Odd:   keep   \r\n  this\r\nMax-Forwards: 69\r\nContent-Length: 0\r\n\r\n"[..]
        );
    }

    #[test]
    fn removing_last_and_only_list_values() {
        let m = parse(INV);
        let last = m.list_values(HeaderName::Route).nth(1).unwrap().unwrap();
        let mut e = Editor::new(&m);
        e.remove_list_value(last);
        let out = e.finish();
        assert!(out.windows(21).any(|w| w == b"Route: <sip:p1;lr>\r\nX"));
        let m2 = Message::parse(out, &Limits::default()).unwrap();
        let only = m2.list_values(HeaderName::Route).next().unwrap().unwrap();
        let mut e = Editor::new(&m2);
        e.remove_list_value(only);
        let out = e.finish();
        assert!(!out.windows(6).any(|w| w == b"Route:"));
    }

    #[test]
    fn removing_several_values_of_one_line() {
        // Two values of one line (a double Record-Route come back as Route): both go, and with
        // them the line; removing the first two of three keeps the third intact.
        let m = parse(b"ACK sip:b@h SIP/2.0\r\nVia: SIP/2.0/UDP a;branch=z9hG4bK1\r\nRoute: <sip:p1;lr>, <sip:p1;transport=tcp;lr>\r\nRoute: <sip:p2;lr>, <sip:p3;lr>, <sip:p4;lr>\r\nContent-Length: 0\r\n\r\n");
        let values: Vec<_> = m.list_values(HeaderName::Route).map(Result::unwrap).collect();
        for order in [[0usize, 1], [1, 0]] {
            let mut e = Editor::new(&m);
            for i in order {
                e.remove_list_value(values[i]);
            }
            e.remove_list_value(values[2]).remove_list_value(values[3]);
            let out = Message::parse(e.finish(), &Limits::default()).unwrap();
            for h in out.headers() {
                out.typed(h).unwrap();
            }
            let left: Vec<_> = out.list_values(HeaderName::Route).map(|v| v.unwrap().bytes.to_vec()).collect();
            assert_eq!(left, vec![b"<sip:p4;lr>".to_vec()]);
            assert_eq!(out.fields(HeaderName::Route).count(), 1);
        }
    }

    #[test]
    fn body_and_missing_max_forwards() {
        let m = parse(b"MESSAGE sip:a@b SIP/2.0\r\nVia: SIP/2.0/UDP a;branch=z9hG4bK1\r\n\r\n");
        let mut e = Editor::new(&m);
        e.set_max_forwards(70).set_body(b"hello");
        let out = Message::parse(e.finish(), &Limits::default()).unwrap();
        assert_eq!(out.max_forwards().unwrap(), Some(70));
        assert_eq!(out.content_length(), Some(5));
        assert_eq!(out.body(), b"hello");
    }

    #[test]
    fn canonical_form() {
        let m = parse(b"OPTIONS sip:a@b SIP/2.0\r\nv: SIP/2.0/UDP a\r\n ;branch=z9hG4bK1\r\ni: x@y\r\nl: 0\r\n\r\n");
        assert_eq!(
            &canonical(&m)[..],
            &b"OPTIONS sip:a@b SIP/2.0\r\nVia: SIP/2.0/UDP a ;branch=z9hG4bK1\r\nCall-ID: x@y\r\nContent-Length: 0\r\n\r\n"[..]
        );
    }
}
