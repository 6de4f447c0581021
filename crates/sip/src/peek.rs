//! A partial read of a message, for a peer that needs only its start line and the first line of
//! a few headers (the load generator matching a response to its call by Call-ID, CSeq and top
//! Via, or an ACK to its dialog by Call-ID): [`Peek::new`] reads the start line, and
//! [`Peek::first_of`] the header lines in order up to the last of the wanted names, with the
//! line parser of [`Message::parse`](crate::Message::parse), so that what it finds is what
//! [`Message::get`](crate::Message::get) returns for any message that parses. It stops there:
//! nothing is indexed, split or counted, nothing allocated, and the lines after are not read
//! (in a load generator's callgrind profile the full parse of the messages it receives was
//! ~14k of ~51k instructions per call, for three headers of about ten per message).
//!
//! What is not read is not checked: a message that [`Message::parse`](crate::Message::parse)
//! rejects for a later line, a header count or a Content-Length still peeks. A reader that acts
//! on a peeked message must be one that would be content with those headers alone.

use crate::error::{ErrorKind, ParseError};
use crate::header_name::HeaderName;
use crate::limits::{Limit, Limits};
use crate::message::{parse_header_line, plain_header_line};
use crate::method::Method;
use crate::scan;
use crate::start_line::{parse_start_line, StartLine};

/// A message's start line, read; its header lines are read on demand by [`Peek::first_of`].
#[derive(Debug, Clone, Copy)]
pub struct Peek<'a> {
    /// The message from its start line (leading CRLFs skipped, RFC 3261 §7.5).
    s: &'a [u8],
    start: StartLine,
    /// Offset of the first header line in `s`.
    headers: usize,
    limits: &'a Limits,
}

impl<'a> Peek<'a> {
    /// Reads the start line of `buf` under the limits [`Message::parse`](crate::Message::parse)
    /// applies to it.
    pub fn new(buf: &'a [u8], limits: &'a Limits) -> Result<Peek<'a>, ParseError> {
        if buf.len() > limits.max_message_size {
            return Err(ParseError::new(ErrorKind::Limit(Limit::MessageSize), limits.max_message_size));
        }
        let skip = buf.iter().take_while(|b| matches!(b, b'\r' | b'\n')).count();
        if skip == buf.len() {
            return Err(ParseError::new(ErrorKind::Empty, 0));
        }
        let s = &buf[skip..];
        let (start, headers) = parse_start_line(s, limits)?;
        Ok(Peek { s, start, headers, limits })
    }

    pub fn start_line(&self) -> StartLine {
        self.start
    }

    /// The status code, or `None` for a request.
    pub fn status(&self) -> Option<u16> {
        match self.start {
            StartLine::Response { code, .. } => Some(code),
            StartLine::Request { .. } => None,
        }
    }

    /// The request method, or `None` for a response.
    pub fn method(&self) -> Option<Method<'a>> {
        match self.start {
            StartLine::Request { method, .. } => Some(Method::from_token(scan::ascii_str(&self.s[method.range()]))),
            StartLine::Response { .. } => None,
        }
    }

    /// The Request-URI as written, or `None` for a response.
    pub fn request_uri_bytes(&self) -> Option<&'a [u8]> {
        match self.start {
            StartLine::Request { uri, .. } => Some(&self.s[uri.range()]),
            StartLine::Response { .. } => None,
        }
    }

    /// The value of the first line of each name in `wanted` (names herald knows, each once) (`None`: the message has none), as
    /// [`Message::get`](crate::Message::get) gives it: the header lines are read in order until
    /// every wanted name has been seen or the header section ends. An error is the one
    /// [`Message::parse`](crate::Message::parse) reports for the same line (or an unterminated
    /// section, or more lines than [`Limits::max_headers`] before the last wanted one).
    pub fn first_of<const N: usize>(&self, wanted: [HeaderName; N]) -> Result<[Option<&'a [u8]>; N], ParseError> {
        let (s, limits) = (self.s, self.limits);
        let mut found = [None; N];
        // The wanted names not yet seen, as a set of bits (`HeaderName::bit`).
        let mut missing = wanted.iter().fold(0u64, |set, name| set | name.bit());
        let (mut pos, mut count) = (self.headers, 0usize);
        while missing != 0 {
            if pos >= s.len() {
                return Err(ParseError::new(ErrorKind::UnterminatedHeaders, pos));
            }
            if s[pos..].starts_with(b"\r\n") {
                break;
            }
            if count == limits.max_headers {
                return Err(ParseError::new(ErrorKind::Limit(Limit::HeaderCount), pos));
            }
            let field = match plain_header_line(s, pos, limits) {
                Some(field) => field,
                None => parse_header_line(s, pos, limits)?,
            };
            pos = field.line.end as usize;
            count += 1;
            if missing & field.name.bit() != 0 {
                missing &= !field.name.bit();
                for (slot, name) in found.iter_mut().zip(wanted) {
                    if name == field.name {
                        *slot = Some(&s[field.value.range()]);
                    }
                }
            }
        }
        Ok(found)
    }
}
