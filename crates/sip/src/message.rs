//! The parsed message: one shared buffer, the start line and a one-pass header index.
//!
//! `Message::parse` finds every header line in a single pass (RFC 3261 §7.3) and records byte
//! ranges only; typed values (the types of [`crate::headers`]) are produced on demand by the
//! accessors of module `access`, and borrow from the buffer. The proxy hot path therefore pays for exactly the headers it reads.

mod access;
mod index;
mod line;
mod via_split;

use crate::checked::Checked;
use crate::error::{ErrorKind, ParseError};
use crate::header_name::HeaderName;
use crate::limits::{Limit, Limits};
use crate::method::Method;
use crate::scan;
use crate::span::Span;
use crate::start_line::{parse_start_line, StartLine};
use bytes::Bytes;
use index::HeaderIndex;
pub use line::HeaderField;
pub(crate) use line::{parse_header_line, plain_header_line};
use smallvec::SmallVec;
pub(crate) use via_split::ViaSplit;

/// How the message was delimited, which decides what Content-Length may or must do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// The buffer is one UDP datagram: Content-Length may be absent (body = rest) and octets past
    /// it are ignored (RFC 3261 §18.3, RFC 4475 §3.1.1.8).
    Datagram,
    /// The buffer is exactly one framed message from a stream (see [`crate::framing`]).
    Stream,
}

/// A parsed SIP message. Cloning is cheap (the buffer is reference-counted).
#[derive(Debug, Clone)]
pub struct Message {
    buf: Bytes,
    start: StartLine,
    /// The header lines, their index and the receipt checks' memo, in one allocation.
    parsed: Box<Parsed>,
    /// Offset of the empty line that ends the header section.
    head_end: u32,
    body: Span,
    content_length: Option<u32>,
    /// Octets of the datagram after Content-Length that were ignored.
    trailing: u32,
}

/// How many header lines a message holds without a second allocation: a proxied call's
/// messages carry 8 to 12 (RFC 3261 §8.1.1's six, Contact, Record-Route or Route, the
/// Content ones), a phone's up to about 15.
const INLINE_HEADERS: usize = 16;

/// What parsing and the receipt checks found, kept behind one pointer. Every message used to
/// allocate twice, its line list and (in [`Message::check`]) its memo; callgrind counted
/// about 100 instructions per allocation and free with mimalloc, six messages per proxied
/// call. Boxed, as the memo was: messages are moved around (inbound queue, engine,
/// transaction table) and this is most of their size.
#[derive(Debug, Clone)]
struct Parsed {
    headers: SmallVec<[HeaderField; INLINE_HEADERS]>,
    /// Where the first line of each frequent header is, and the first repeated single one.
    index: HeaderIndex,
    vias: ViaSplit,
    /// Set by [`Message::check`]: the headers it validated, as ranges of `buf`.
    checked: Option<Checked>,
}

impl Message {
    /// Parses one UDP datagram (or any buffer holding exactly one message).
    pub fn parse(buf: Bytes, limits: &Limits) -> Result<Message, ParseError> {
        Self::parse_as(buf, limits, Framing::Datagram)
    }

    pub fn parse_as(buf: Bytes, limits: &Limits, framing: Framing) -> Result<Message, ParseError> {
        if buf.len() > limits.max_message_size {
            return Err(ParseError::new(ErrorKind::Limit(Limit::MessageSize), limits.max_message_size));
        }
        // RFC 3261 §7.5: CRLFs before the start line are ignored.
        let skip = buf.iter().take_while(|b| matches!(b, b'\r' | b'\n')).count();
        if skip == buf.len() {
            return Err(ParseError::new(ErrorKind::Empty, 0));
        }
        let buf = if skip > 0 { buf.slice(skip..) } else { buf };
        Self::parse_trimmed(buf, limits, framing).map_err(|mut e| {
            e.offset += skip;
            e
        })
    }

    fn parse_trimmed(buf: Bytes, limits: &Limits, framing: Framing) -> Result<Message, ParseError> {
        let head = Head::scan(&buf, limits)?;
        Self::assemble(buf, head, framing)
    }

    /// A message from `buf` and its header section, scanned by [`Head::scan`] from the start of
    /// `buf` (or of a prefix of it holding the whole header section).
    pub(crate) fn assemble(mut buf: Bytes, head: Head, framing: Framing) -> Result<Message, ParseError> {
        let Head { start, parsed, head_end, content_length } = head;
        let s: &[u8] = &buf;
        let body_start = head_end + 2;
        let available = s.len() - body_start;
        let (body_len, trailing) = match (content_length, framing) {
            (Some((n, at)), _) => {
                let n = n as usize;
                if n > available {
                    let e = ParseError::in_header(ErrorKind::BodyTruncated, at, b"Content-Length");
                    return Err(e);
                }
                (n, available - n)
            }
            (None, Framing::Datagram) => (available, 0),
            (None, Framing::Stream) => {
                return Err(ParseError::new(ErrorKind::MissingContentLength, head_end));
            }
        };
        let end = body_start + body_len;
        buf.truncate(end);
        Ok(Message {
            buf,
            start,
            parsed,
            head_end: head_end as u32,
            body: Span::new(body_start, end),
            content_length: content_length.map(|(n, _)| n),
            trailing: trailing as u32,
        })
    }

    /// The message bytes (trailing datagram octets past Content-Length excluded).
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }

    /// The shared buffer; slicing it is free.
    pub fn buffer(&self) -> &Bytes {
        &self.buf
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
        if let Some(known) = self.memo().and_then(|c| c.method) {
            return Some(known);
        }
        match self.start {
            StartLine::Request { method, .. } => Some(Method::from_token(self.str_at(method))),
            StartLine::Response { .. } => None,
        }
    }

    /// The Request-URI exactly as written, or `None` for a response.
    pub fn request_uri_bytes(&self) -> Option<&[u8]> {
        match self.start {
            StartLine::Request { uri, .. } => Some(&self.buf[uri.range()]),
            StartLine::Response { .. } => None,
        }
    }

    /// The status code, or `None` for a request.
    pub fn status(&self) -> Option<u16> {
        match self.start {
            StartLine::Response { code, .. } => Some(code),
            StartLine::Request { .. } => None,
        }
    }

    /// The reason phrase as written (may be empty, may be UTF-8: RFC 4475 §3.1.1.12/13).
    pub fn reason(&self) -> Option<&[u8]> {
        match self.start {
            StartLine::Response { reason, .. } => Some(&self.buf[reason.range()]),
            StartLine::Request { .. } => None,
        }
    }

    pub fn headers(&self) -> &[HeaderField] {
        &self.parsed.headers
    }

    /// What [`Message::check`] found, once it has passed (module `checked`).
    #[inline]
    pub(crate) fn memo(&self) -> Option<&Checked> {
        self.parsed.checked.as_ref()
    }

    /// How the scan split the Via lines (module `via_split`).
    pub(crate) fn via_split(&self) -> ViaSplit {
        self.parsed.vias
    }

    /// The ranges of the top two Via values as the scan split the lines, when every Via line
    /// split cleanly and there are two or more values: what the first two items of
    /// `list_values(HeaderName::Via)` are, without splitting again (a proxy forwarding a
    /// response removes the first and sends to the second).
    pub fn top_two_via_spans(&self) -> Option<(Span, Span)> {
        let v = self.parsed.vias;
        (v.clean && v.count >= 2).then_some((v.top, v.second))
    }

    /// The top Via value as written, once [`Message::check`] parsed it (from the scan's split,
    /// when the lines split cleanly): a value equal to it is a well-formed Via without a parse.
    pub fn checked_top_via_value(&self) -> Option<&[u8]> {
        let v = self.parsed.vias;
        (self.memo().is_some() && v.clean && v.count > 0).then(|| self.slice(v.top))
    }

    /// Keeps what [`Message::check`] found.
    pub(crate) fn set_memo(&mut self, checked: Checked) {
        self.parsed.checked = Some(checked);
    }

    pub fn slice(&self, span: Span) -> &[u8] {
        &self.buf[span.range()]
    }

    /// A span's bytes as `&str`; empty if they are not UTF-8 (callers validated the grammar).
    pub(crate) fn str_at(&self, span: Span) -> &str {
        scan::ascii_str(&self.buf[span.range()])
    }

    pub fn name_of(&self, h: &HeaderField) -> &[u8] {
        &self.buf[h.name_span.range()]
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

/// A message's start line and header section, indexed: what [`Message::parse_as`] reads before
/// the body, and what stream framing needs to find Content-Length (`crate::framing`).
pub(crate) struct Head {
    start: StartLine,
    /// The header lines and their index (the memo is set later, by [`Message::check`]).
    parsed: Box<Parsed>,
    /// Offset of the empty line that ends the header section.
    head_end: usize,
    /// The Content-Length value and the offset of its value.
    content_length: Option<(u32, usize)>,
}

impl Head {
    /// The value of the one Content-Length header, if there is one.
    pub(crate) fn content_length(&self) -> Option<u32> {
        self.content_length.map(|(n, _)| n)
    }

    /// Scans the start line and the header lines of `s` (no leading CRLF), up to the empty line.
    pub(crate) fn scan(s: &[u8], limits: &Limits) -> Result<Head, ParseError> {
        let (start, mut pos) = parse_start_line(s, limits)?;
        let mut parsed = Box::new(Parsed {
            headers: SmallVec::new(),
            index: HeaderIndex::default(),
            vias: ViaSplit::default(),
            checked: None,
        });
        let headers = &mut parsed.headers;
        let mut content_length: Option<(u32, usize)> = None;
        let (mut vias, mut routes) = (0usize, 0usize);
        let head_end = loop {
            if pos >= s.len() {
                return Err(ParseError::new(ErrorKind::UnterminatedHeaders, pos));
            }
            if s[pos..].starts_with(b"\r\n") {
                break pos;
            }
            if headers.len() == limits.max_headers {
                return Err(ParseError::new(ErrorKind::Limit(Limit::HeaderCount), pos));
            }
            let field = match plain_header_line(s, pos, limits) {
                Some(field) => field,
                None => parse_header_line(s, pos, limits)?,
            };
            pos = field.line.end as usize;
            match field.name {
                HeaderName::Via => {
                    let v = &s[field.value.range()];
                    vias += parsed.vias.add_line(v, field.value.start as usize, count_values);
                    if vias > limits.max_via {
                        return Err(limit_in(Limit::ViaCount, &field, s));
                    }
                }
                HeaderName::Route | HeaderName::RecordRoute => {
                    routes += count_values(&s[field.value.range()]);
                    if routes > limits.max_route {
                        return Err(limit_in(Limit::RouteCount, &field, s));
                    }
                }
                HeaderName::ContentLength => {
                    let at = field.value.start as usize;
                    let name = &s[field.name_span.range()];
                    if content_length.is_some() {
                        // RFC 4475 §3.3.9: two lengths leave the framing undecidable.
                        return Err(ParseError::in_header(ErrorKind::DuplicateHeader, at, name));
                    }
                    let n = scan::parse_u32(&s[field.value.range()]).ok_or_else(|| {
                        ParseError::in_header(ErrorKind::HeaderValue("not a decimal length"), at, name)
                    })?;
                    content_length = Some((n, at));
                }
                _ => {}
            }
            headers.push(field);
        };
        parsed.index = HeaderIndex::of(&parsed.headers);
        Ok(Head { start, parsed, head_end, content_length })
    }
}

fn limit_in(limit: Limit, field: &HeaderField, s: &[u8]) -> ParseError {
    ParseError::in_header(ErrorKind::Limit(limit), field.value.start as usize, &s[field.name_span.range()])
}

/// Counts comma-separated values at top level (commas in quotes or `<>` do not count). An
/// unbalanced quote counts as one value; the typed parser reports it later.
fn count_values(v: &[u8]) -> usize {
    if scan::find_any(v, 0, [b',']).is_none() {
        return 1;
    }
    let mut n = 1;
    let mut i = 0;
    while let Some(j) = scan::find_top_level(v, i, b',') {
        if j >= v.len() {
            break;
        }
        n += 1;
        i = j + 1;
    }
    n
}
