//! The parsed message: one shared buffer, the start line and a one-pass header index.
//!
//! `Message::parse` finds every header line in a single pass (RFC 3261 §7.3) and records byte
//! ranges only; typed values (the types of [`crate::headers`]) are produced on demand by the
//! accessors of module `access`, and borrow from the buffer. The proxy hot path therefore pays for exactly the headers it reads.

mod access;
mod head;
mod index;
mod known_name;
mod line;
mod line_end;
pub(crate) mod memo;
mod pool;
#[cfg(all(test, target_arch = "x86_64"))]
mod tests_line_end;
#[cfg(test)]
mod tests_pool;
mod via_split;

use crate::checked::Checked;
use crate::error::{ErrorKind, ParseError};
use crate::header_name::HeaderName;
use crate::limits::{Limit, Limits};
use crate::method::Method;
use crate::scan;
use crate::span::Span;
use crate::start_line::StartLine;
use bytes::Bytes;
pub use head::Framing;
pub(crate) use head::Head;
pub use line::HeaderField;
pub(crate) use line::{parse_header_line, plain_header_line};
use memo::Memo;
use pool::Parsed;
pub(crate) use via_split::ViaSplit;

/// What [`Message::check`] reads of a message: its bytes, start line, header lines and their
/// index, borrowed apart from the memo it writes ([`Message::check_parts_and_memo`]).
pub(crate) struct CheckParts<'a> {
    pub buf: &'a [u8],
    pub start: StartLine,
    headers: &'a [HeaderField],
    index: &'a index::HeaderIndex,
    pub vias: &'a ViaSplit,
}

impl<'a> CheckParts<'a> {
    /// [`Message::field`].
    #[inline(always)]
    pub fn field(&self, name: HeaderName) -> Option<&'a HeaderField> {
        self.index.first(self.headers, name).and_then(|i| self.headers.get(i))
    }

    /// [`Message::get`]. Inlined where `well_formed` reads its six values (callgrind: each
    /// read as a call cost about 15 instructions, 36 reads a proxied call).
    #[inline(always)]
    pub fn value(&self, name: HeaderName) -> Option<&'a [u8]> {
        self.field(name).and_then(|h| self.buf.get(h.value.range()))
    }

    /// [`Message::repeats_single`].
    pub fn repeats_single(&self) -> bool {
        self.index.repeats_single()
    }

    /// The method of a request's start line ([`Message::method`] before the check).
    pub fn method(&self) -> Option<Method<'a>> {
        self.start.method_in(self.buf)
    }

    /// [`Message::request_uri_bytes`].
    pub fn request_uri_bytes(&self) -> Option<&'a [u8]> {
        self.start.request_uri_in(self.buf)
    }
}

/// A parsed SIP message. Cloning is cheap (the buffer is reference-counted).
#[derive(Debug, Clone)]
pub struct Message {
    buf: Bytes,
    start: StartLine,
    /// The header lines, their index and the receipt checks' memo, in one allocation (kept
    /// for the thread's next message when this one is dropped, module `pool`).
    parsed: pool::PooledParsed,
    /// Offset of the empty line that ends the header section.
    head_end: u32,
    body: Span,
    content_length: Option<u32>,
    /// Octets of the datagram after Content-Length that were ignored.
    trailing: u32,
}

impl Message {
    /// Parses one UDP datagram (or any buffer holding exactly one message).
    pub fn parse(buf: Bytes, limits: &Limits) -> Result<Message, ParseError> {
        Self::parse_as(buf, limits, Framing::Datagram)
    }

    pub fn parse_as(buf: Bytes, limits: &Limits, framing: Framing) -> Result<Message, ParseError> {
        Self::parse_or_return(buf, limits, framing).map_err(|(e, _)| e)
    }

    /// [`Message::parse_as`] that hands the buffer back with the error, for a caller that answers
    /// a malformed request from its bytes (`herald_core::inbound`): it then needs no second
    /// reference to them while parsing. A `Bytes` made from a `Vec` (every received datagram is
    /// one) allocates a shared counter on its first clone; callgrind counted that allocation,
    /// its atomic operations and its free at about 150 instructions per received message.
    ///
    /// A message of the usual kind (within the size limit, starting with its start line) is
    /// parsed in this function's frame, the others out of line: the message went back through
    /// two more returns before, each a copy of it (callgrind: with the CRLF count, about 35
    /// instructions per message).
    pub fn parse_or_return(buf: Bytes, limits: &Limits, framing: Framing) -> Result<Message, (ParseError, Bytes)> {
        if buf.len() > limits.max_message_size || matches!(buf.first(), None | Some(b'\r' | b'\n')) {
            return Self::parse_unusual(buf, limits, framing);
        }
        Self::parse_trimmed(buf, limits, framing)
    }

    /// [`Message::parse_or_return`] of a message over the size limit, empty, or with CRLFs
    /// before its start line.
    #[cold]
    #[inline(never)]
    fn parse_unusual(buf: Bytes, limits: &Limits, framing: Framing) -> Result<Message, (ParseError, Bytes)> {
        if buf.len() > limits.max_message_size {
            return Err((ParseError::new(ErrorKind::Limit(Limit::MessageSize), limits.max_message_size), buf));
        }
        // RFC 3261 §7.5: CRLFs before the start line are ignored.
        let skip = buf.iter().take_while(|b| matches!(b, b'\r' | b'\n')).count();
        if skip == buf.len() {
            return Err((ParseError::new(ErrorKind::Empty, 0), buf));
        }
        if skip == 0 {
            return Self::parse_trimmed(buf, limits, framing);
        }
        Self::parse_trimmed(buf.slice(skip..), limits, framing).map_err(|(mut e, _)| {
            e.offset += skip;
            (e, buf)
        })
    }

    #[inline(always)]
    fn parse_trimmed(buf: Bytes, limits: &Limits, framing: Framing) -> Result<Message, (ParseError, Bytes)> {
        let head = match Head::scan(&buf, limits) {
            Ok(head) => head,
            Err(e) => return Err((e, buf)),
        };
        match head.body(buf.len(), framing) {
            Ok(body) => Ok(Self::from_head(buf, head, body)),
            Err(e) => Err((e, buf)),
        }
    }

    /// A message from `buf` and its header section, scanned by [`Head::scan`] from the start of
    /// `buf` (or of a prefix of it holding the whole header section).
    pub(crate) fn assemble(buf: Bytes, head: Head, framing: Framing) -> Result<Message, ParseError> {
        let body = head.body(buf.len(), framing)?;
        Ok(Self::from_head(buf, head, body))
    }

    /// The message of `buf`, `head` and where [`Head::body`] found its body.
    #[inline(always)]
    fn from_head(mut buf: Bytes, head: Head, (body_start, body_len, trailing): (usize, usize, usize)) -> Message {
        let Head { start, parsed, head_end, content_length } = head;
        let end = body_start + body_len;
        buf.truncate(end);
        Message {
            buf,
            start,
            parsed,
            head_end: head_end as u32,
            body: Span::new(body_start, end),
            content_length: content_length.map(|(n, _)| n),
            trailing: trailing as u32,
        }
    }

    /// The message bytes (trailing datagram octets past Content-Length excluded).
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }

    /// The shared buffer; slicing it is free.
    pub fn buffer(&self) -> &Bytes {
        &self.buf
    }

    /// The buffer, the message given up: when nothing else holds it, it can be edited in place
    /// (`Bytes::try_into_mut`), as a proxy does to the response it forwards.
    pub fn into_buffer(self) -> Bytes {
        self.buf
    }

    pub fn start_line(&self) -> &StartLine {
        &self.start
    }

    pub fn is_request(&self) -> bool {
        matches!(self.start, StartLine::Request { .. })
    }

    /// The request method, or `None` for a response.
    #[inline]
    pub fn method(&self) -> Option<Method<'_>> {
        match self.start {
            StartLine::Response { .. } => None,
            StartLine::Request { method, .. } => match self.memo().and_then(|c| c.method) {
                Some(known) => Some(known),
                None => Some(self.method_of(method)),
            },
        }
    }

    /// The method token at `span` of the start line, out of line: [`Message::method`] stays
    /// small enough to be inlined where the engine asks (callgrind: a call per read when the
    /// token's match was inlined into it, about 400 instructions per proxied call).
    #[inline(never)]
    fn method_of(&self, span: Span) -> Method<'_> {
        Method::from_token(self.str_at(span))
    }

    /// The Request-URI exactly as written, or `None` for a response.
    pub fn request_uri_bytes(&self) -> Option<&[u8]> {
        self.start.request_uri_in(&self.buf)
    }

    /// The status code, or `None` for a request.
    pub fn status(&self) -> Option<u16> {
        self.start.status()
    }

    /// The reason phrase as written (may be empty, may be UTF-8: RFC 4475 §3.1.1.12/13).
    pub fn reason(&self) -> Option<&[u8]> {
        match self.start {
            StartLine::Response { reason, .. } => Some(&self.buf[reason.range()]),
            StartLine::Request { .. } => None,
        }
    }

    pub fn headers(&self) -> &[HeaderField] {
        self.parsed.headers()
    }

    /// What [`Message::check`] found, once it has passed (module `checked`).
    #[inline]
    pub(crate) fn memo(&self) -> Option<&Checked> {
        self.parsed.checked.get()
    }

    /// How the scan split the Via lines (module `via_split`).
    pub(crate) fn via_split(&self) -> &ViaSplit {
        &self.parsed.vias
    }

    /// The ranges of the top two Via values as the scan split the lines, when every Via line
    /// split cleanly and there are two or more values: what the first two items of
    /// `list_values(HeaderName::Via)` are, without splitting again (a proxy forwarding a
    /// response removes the first and sends to the second).
    pub fn top_two_via_spans(&self) -> Option<(Span, Span)> {
        let v = &self.parsed.vias;
        (v.clean && v.count >= 2).then_some((v.top, v.second))
    }

    /// The top Via value as written, once [`Message::check`] parsed it (from the scan's split,
    /// when the lines split cleanly): a value equal to it is a well-formed Via without a parse.
    pub fn checked_top_via_value(&self) -> Option<&[u8]> {
        let v = &self.parsed.vias;
        (self.memo().is_some() && v.clean && v.count > 0).then(|| self.slice(v.top))
    }

    /// Keeps what [`Message::check`] found.
    pub(crate) fn set_memo(&mut self, checked: Checked) {
        self.parsed.checked.set(checked);
    }

    /// What the receipt check reads of the message (module `validate`).
    pub(crate) fn check_parts(&self) -> CheckParts<'_> {
        let parsed: &Parsed = &self.parsed;
        let Parsed { index, vias, .. } = parsed;
        CheckParts { buf: &self.buf, start: self.start, headers: parsed.headers(), index, vias }
    }

    /// [`Message::check_parts`] and the memo's place, borrowed apart: the check writes the memo
    /// where it stays, field by field (module `memo`; callgrind: building it elsewhere and
    /// moving it in cost about 80 instructions per message, a `Checked` is 272 octets).
    pub(crate) fn check_parts_and_memo(&mut self) -> (CheckParts<'_>, &mut Memo) {
        let Parsed { lines, count, index, vias, checked } = &mut *self.parsed;
        let headers = lines.get(..*count).unwrap_or_default();
        (CheckParts { buf: &self.buf, start: self.start, headers, index, vias }, checked)
    }

    pub fn slice(&self, span: Span) -> &[u8] {
        &self.buf[span.range()]
    }

    /// A span's bytes as `&str`; empty if they are not UTF-8 (callers validated the grammar).
    pub(crate) fn str_at(&self, span: Span) -> &str {
        scan::ascii_str(&self.buf[span.range()])
    }

    pub fn name_of(&self, h: &HeaderField) -> &[u8] {
        &self.buf[h.name_span().range()]
    }

    pub fn value_of(&self, h: &HeaderField) -> &[u8] {
        &self.buf[h.value.range()]
    }

    /// All header lines with the given name, in order.
    pub fn fields(&self, name: HeaderName) -> impl Iterator<Item = &HeaderField> + '_ {
        let headers = self.headers();
        let from = self.parsed.index.search_from(headers, name);
        headers[from..].iter().filter(move |h| h.name == name)
    }

    /// The first header line with the given name.
    #[inline]
    pub fn field(&self, name: HeaderName) -> Option<&HeaderField> {
        self.field_index(name).map(|i| &self.headers()[i])
    }

    /// The position in [`Message::headers`] of the first line with the given name: for the
    /// frequent names (Via, From, To, Call-ID, CSeq, Max-Forwards, Content-Length, Contact,
    /// Route, ...) noted while scanning, without a search.
    #[inline]
    pub fn field_index(&self, name: HeaderName) -> Option<usize> {
        self.parsed.index.first(self.headers(), name)
    }

    /// Whether some single-valued header has more than one line (RFC 4475 §3.3.8).
    pub(crate) fn repeats_single(&self) -> bool {
        self.parsed.index.repeats_single()
    }

    /// Raw value of the first header with this name.
    #[inline]
    pub fn get(&self, name: HeaderName) -> Option<&[u8]> {
        self.field(name).map(|h| self.value_of(h))
    }

    /// Raw value of the first header with this name as written (for unknown headers).
    pub fn get_by_name(&self, name: &str) -> Option<&[u8]> {
        let known = HeaderName::from_bytes(name.as_bytes());
        self.headers()
            .iter()
            .find(|h| {
                if known != HeaderName::Other {
                    h.name == known
                } else {
                    self.name_of(h).eq_ignore_ascii_case(name.as_bytes())
                }
            })
            .map(|h| self.value_of(h))
    }

    pub fn content_length(&self) -> Option<u32> {
        self.content_length
    }

    pub fn body(&self) -> &[u8] {
        &self.buf[self.body.range()]
    }

    /// The body as a zero-copy slice of the buffer.
    pub fn body_bytes(&self) -> Bytes {
        self.buf.slice(self.body.range())
    }

    pub fn body_span(&self) -> Span {
        self.body
    }

    /// Offset of the CRLF that ends the header section.
    pub fn head_end(&self) -> usize {
        self.head_end as usize
    }

    /// Octets that followed Content-Length in the datagram and were ignored (RFC 4475 §3.1.1.8).
    pub fn trailing_octets(&self) -> usize {
        self.trailing as usize
    }
}
