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
use smallvec::SmallVec;

/// What an edit writes in place of its span. Texts are borrowed from the caller (they outlive
/// the editor), numbers are kept in the edit: nothing is copied before the one pass of
/// [`Editor::finish`].
#[derive(Debug, Clone, Copy)]
enum Text<'a> {
    /// These bytes (empty: nothing, a removal when the span is not empty).
    Bytes(&'a [u8]),
    /// A header line: `name: value` CRLF.
    Line(&'a str, &'a [u8]),
    /// These bytes, given as pieces one after the other: text the caller assembles (herald's own
    /// Via: the part it keeps per listener, the branch, the tail) is written straight into the
    /// copy, with no buffer of its own in between.
    Pieces(&'a [&'a [u8]]),
    /// A number (a Max-Forwards or Content-Length value): the last `.1` digits of the array.
    Digits([u8; 10], u8),
    /// A header line whose value is a number: `name: digits` CRLF.
    NumberLine(&'a str, [u8; 10], u8),
}

impl Text<'_> {
    fn len(&self) -> usize {
        match self {
            Text::Bytes(b) => b.len(),
            Text::Line(name, value) => name.len() + 2 + value.len() + 2,
            Text::Pieces(pieces) => pieces.iter().map(|p| p.len()).sum(),
            Text::Digits(_, n) => *n as usize,
            Text::NumberLine(name, _, n) => name.len() + 2 + *n as usize + 2,
        }
    }
}

/// One recorded change: the bytes of `span` in the message become `text`.
#[derive(Debug, Clone, Copy)]
struct Edit<'a> {
    span: Span,
    text: Text<'a>,
}

impl Edit<'_> {
    fn key(&self) -> (u32, u32) {
        (self.span.start, self.span.end)
    }

    fn is_removal(&self) -> bool {
        matches!(self.text, Text::Bytes(b) if b.is_empty()) && !self.span.is_empty()
    }
}

/// Builds the forwarded copy of a message. Edits may be recorded in any order. Removals that
/// overlap or touch are merged (removing two adjacent list values shares their comma), and a
/// removal that takes a header's whole value takes its line. Any other two edits touching the
/// same bytes are a programming error: the later one is dropped (and a debug build asserts).
///
/// The texts an edit inserts are borrowed for the editor's lifetime `'a` (the message's, or
/// shorter), and the edits are kept in message order as they come, inline for the few a proxy
/// makes: `finish` writes the copy in one pass into one buffer of the exact size. A copy of
/// each text, an allocation per edit and a sort at the end cost about 1,800 instructions per
/// forwarded request (callgrind, issue 21).
#[derive(Debug)]
pub struct Editor<'a> {
    msg: &'a Message,
    /// Sorted by (start, end) of the span; edits at the same place keep the order they were
    /// made in (a Via prepended before a Record-Route stays above it).
    edits: SmallVec<[Edit<'a>; 8]>,
    /// The octets the edits' texts add and their spans take away, summed as the edits are made
    /// and merged: [`Editor::len`] (which sizes the buffer of `finish`) reads them instead of
    /// walking the edits again, a walk through every edit's kind at every forwarded message.
    added: usize,
    removed: usize,
}

impl<'a> Editor<'a> {
    pub fn new(msg: &'a Message) -> Self {
        Editor { msg, edits: SmallVec::new(), added: 0, removed: 0 }
    }

    fn first_header_offset(&self) -> usize {
        self.msg.headers().first().map_or(self.msg.head_end(), |h| h.line.start as usize)
    }

    // Inlined where edits are made, as `insert_sorted` is into it (callgrind: ~15 instructions
    // of call, moves and saved registers per edit).
    #[inline(always)]
    fn push(&mut self, span: Span, text: Text<'a>) -> &mut Self {
        let edit = Edit { span, text };
        if edit.is_removal() {
            return self.push_removal(span);
        }
        self.insert_sorted(edit);
        self
    }

    // Inlined into its two callers: a call per edit (about ten per forwarded request) moved
    // the edit once more and saved and restored registers around it.
    #[inline(always)]
    fn insert_sorted(&mut self, edit: Edit<'a>) {
        self.added += edit.text.len();
        self.removed += edit.span.len();
        // Nearly always at the end or close to it: edits come roughly in message order.
        let mut at = self.edits.len();
        while at > 0 && self.edits[at - 1].key() > edit.key() {
            at -= 1;
        }
        if at == self.edits.len() {
            self.edits.push(edit);
        } else {
            self.edits.insert(at, edit);
        }
    }

    fn push_removal(&mut self, mut span: Span) -> &mut Self {
        // Merge with every removal it overlaps or touches (which then no longer counts on its own:
        // a removal adds no octets).
        let removed = &mut self.removed;
        self.edits.retain(|e| {
            if e.is_removal() && e.span.start <= span.end && span.start <= e.span.end {
                span = Span { start: span.start.min(e.span.start), end: span.end.max(e.span.end) };
                *removed -= e.span.len();
                false
            } else {
                true
            }
        });
        // Removing a header's whole value removes its line: "Route: " alone is not a header.
        // The lines are in message order and do not overlap: the only one that can hold the
        // span is the first that ends after its start.
        let headers = self.msg.headers();
        if let Some(h) = headers.get(headers.partition_point(|h| h.line.end <= span.start)).filter(|h| {
            span.start >= h.line.start
                && span.end <= h.line.end
                && span.start <= h.value.start
                && span.end >= h.value.end
        }) {
            span = h.line;
        }
        self.insert_sorted(Edit { span, text: Text::Bytes(&[]) });
        self
    }

    /// Inserts the header line `name: value` at `at`.
    #[inline(always)]
    fn insert_line(&mut self, at: usize, text: Text<'a>) -> &mut Self {
        self.push(Span::new(at, at), text)
    }

    /// Inserts a header line before all others (a new Via or Record-Route goes on top).
    pub fn prepend_header(&mut self, name: &'a str, value: &'a [u8]) -> &mut Self {
        let at = self.first_header_offset();
        self.insert_line(at, Text::Line(name, value))
    }

    /// Inserts whole header lines (each with its CRLF) before all others, as written: a line the
    /// caller keeps ready costs one copy, where `prepend_header` writes name, colon, value and
    /// CRLF as four (each piece is a copy of its own, ~40 instructions).
    pub fn prepend_lines(&mut self, lines: &'a [u8]) -> &mut Self {
        let at = self.first_header_offset();
        self.insert_line(at, Text::Bytes(lines))
    }

    /// [`Editor::prepend_lines`] of the concatenation of `pieces`.
    pub fn prepend_lines_of_pieces(&mut self, pieces: &'a [&'a [u8]]) -> &mut Self {
        let at = self.first_header_offset();
        self.insert_line(at, Text::Pieces(pieces))
    }

    /// Inserts a header line after all others.
    pub fn append_header(&mut self, name: &'a str, value: &'a [u8]) -> &mut Self {
        let at = self.msg.head_end();
        self.insert_line(at, Text::Line(name, value))
    }

    /// Inserts a header line right before the line `field` (an index into `Message::headers`).
    pub fn insert_before(&mut self, field: usize, name: &'a str, value: &'a [u8]) -> &mut Self {
        let at = self.msg.headers()[field].line.start as usize;
        self.insert_line(at, Text::Line(name, value))
    }

    /// Removes the whole header line `field`.
    pub fn remove_field(&mut self, field: usize) -> &mut Self {
        let line = self.msg.headers()[field].line;
        self.push(line, Text::Bytes(&[]))
    }

    /// Removes every line of the header `name`.
    pub fn remove_all(&mut self, name: HeaderName) -> &mut Self {
        let msg = self.msg;
        for h in msg.fields(name) {
            self.push(h.line, Text::Bytes(&[]));
        }
        self
    }

    /// Replaces the value of line `field`, keeping its name as written.
    pub fn replace_value(&mut self, field: usize, value: &'a [u8]) -> &mut Self {
        let span = self.msg.headers()[field].value;
        self.push(span, Text::Bytes(value))
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
            return self.push(Span::new(vs, next), Text::Bytes(&[]));
        }
        // The last element: remove from the preceding comma, or the whole line if none.
        let before = scan::trim_lws_end(s, vs);
        if before > h.value.start as usize && s[before - 1] == b',' {
            return self.push(Span::new(before - 1, ve), Text::Bytes(&[]));
        }
        self.push(h.line, Text::Bytes(&[]))
    }

    /// Rewrites the Request-URI (RFC 3261 §16.5/§16.6 step 2). No effect on a response.
    pub fn set_request_uri(&mut self, uri: &'a [u8]) -> &mut Self {
        if let crate::StartLine::Request { uri: span, .. } = *self.msg.start_line() {
            self.push(span, Text::Bytes(uri));
        }
        self
    }

    /// Sets `name`'s value to the number `n`: the first line's value, or a new line at the end.
    /// Inlined into the Max-Forwards and Content-Length setters (one or two per forwarded
    /// request).
    #[inline(always)]
    fn set_number(&mut self, name: HeaderName, line_name: &'a str, n: u32) -> &mut Self {
        let mut digits = [0u8; 10];
        let len = decimal(n, &mut digits);
        match self.msg.field_index(name) {
            Some(i) => {
                let span = self.msg.headers()[i].value;
                self.push(span, Text::Digits(digits, len))
            }
            None => {
                let at = self.msg.head_end();
                self.insert_line(at, Text::NumberLine(line_name, digits, len))
            }
        }
    }

    /// Sets Max-Forwards, replacing the existing line's value or adding the header
    /// (RFC 3261 §16.6 step 3).
    pub fn set_max_forwards(&mut self, n: u8) -> &mut Self {
        self.set_number(HeaderName::MaxForwards, "Max-Forwards", u32::from(n))
    }

    /// Replaces the body and its Content-Length (and adds Content-Length if it was absent).
    pub fn set_body(&mut self, body: &'a [u8]) -> &mut Self {
        self.set_number(HeaderName::ContentLength, "Content-Length", body.len() as u32);
        let b = self.msg.body_span();
        self.push(b, Text::Bytes(body))
    }

    /// Adds `Content-Length` when the message has none. Content-Length is optional over UDP
    /// but mandatory over streams (RFC 3261 §18.3, §20.14): a message relayed from UDP to TCP
    /// or TLS without it could not be framed by the next hop, so a forwarded copy always
    /// carries it.
    pub fn ensure_content_length(&mut self) -> &mut Self {
        if self.msg.field_index(HeaderName::ContentLength).is_some() {
            return self;
        }
        self.set_number(HeaderName::ContentLength, "Content-Length", self.msg.body().len() as u32)
    }

    /// Length of the serialized result.
    pub fn len(&self) -> usize {
        self.msg.as_bytes().len() + self.added - self.removed
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The pieces of the edited message in order: untouched runs of the message and the
    /// edits' texts.
    fn pieces(&self, mut put: impl FnMut(&[u8])) {
        let src = self.msg.as_bytes();
        let mut cursor = 0usize;
        for e in &self.edits {
            let (start, end) = (e.span.start as usize, e.span.end as usize);
            if start < cursor {
                debug_assert!(false, "overlapping edits at {start}");
                continue;
            }
            if start > cursor {
                put(&src[cursor..start]);
            }
            match &e.text {
                Text::Bytes(b) => {
                    if !b.is_empty() {
                        put(b)
                    }
                }
                Text::Line(name, value) => {
                    put(name.as_bytes());
                    put(b": ");
                    put(value);
                    put(b"\r\n");
                }
                Text::Pieces(pieces) => {
                    for p in pieces.iter().filter(|p| !p.is_empty()) {
                        put(p);
                    }
                }
                Text::Digits(digits, n) => put(&digits[10 - *n as usize..]),
                Text::NumberLine(name, digits, n) => {
                    put(name.as_bytes());
                    put(b": ");
                    put(&digits[10 - *n as usize..]);
                    put(b"\r\n");
                }
            }
            cursor = end;
        }
        put(&src[cursor..]);
    }

    /// Writes the edited message into `out`.
    pub fn write_to(self, out: &mut BytesMut) {
        out.reserve(self.len());
        self.pieces(|p| out.put_slice(p));
    }

    /// The edited message. Borrows the editor: taken by value, its edits (several hundred
    /// bytes inline) were copied to the call's own argument first, a memcpy per forwarded
    /// message (issue 21); `e.finish()` reads the same either way.
    pub fn finish(&self) -> Bytes {
        let mut out = Vec::with_capacity(self.len());
        self.pieces(|p| out.extend_from_slice(p));
        // Exactly as long as it was sized: Bytes takes the vector without copying it.
        Bytes::from(out)
    }
}

/// `n` in decimal at the end of `buf`; returns how many digits.
fn decimal(mut n: u32, buf: &mut [u8; 10]) -> u8 {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return (buf.len() - i) as u8;
        }
    }
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
mod tests;
