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
use crate::message::{parse_header_line, plain_header_line, HeaderField};
use crate::method::Method;
use crate::scan;
use crate::start_line::{parse_start_line, StartLine};
use std::sync::LazyLock;

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
        self.start.status()
    }

    /// The request method, or `None` for a response.
    pub fn method(&self) -> Option<Method<'a>> {
        self.start.method_in(self.s)
    }

    /// The Request-URI as written, or `None` for a response.
    pub fn request_uri_bytes(&self) -> Option<&'a [u8]> {
        self.start.request_uri_in(self.s)
    }

    /// The value of the first line of each name in `wanted` (names herald knows, each once)
    /// (`None`: the message has none), as [`Message::get`](crate::Message::get) gives it: the
    /// header lines are read in order until every wanted name has been seen or the header
    /// section ends. An error is the one [`Message::parse`](crate::Message::parse) reports for
    /// the same line (or an unterminated section, or more lines than [`Limits::max_headers`]
    /// before the last wanted one).
    pub fn first_of<const N: usize>(&self, wanted: [HeaderName; N]) -> Result<[Option<&'a [u8]>; N], ParseError> {
        let mut found = [None; N];
        // The wanted names not yet seen, as a set of bits (`HeaderName::bit`).
        let mut missing = wanted.iter().fold(0u64, |set, name| set | name.bit());
        self.lines(&wanted, None, |field| {
            let (name, value) = (field.name, &self.s[field.value.range()]);
            if missing & name.bit() != 0 {
                missing &= !name.bit();
                for (slot, w) in found.iter_mut().zip(wanted) {
                    if w == name {
                        *slot = Some(value);
                    }
                }
            }
            missing != 0
        })?;
        Ok(found)
    }

    /// Calls `each` with the name and value of every line of a name in `wanted` (names herald
    /// knows), in order, to the end of the header section; errors as [`Peek::first_of`].
    pub fn each_of(&self, wanted: &[HeaderName], mut each: impl FnMut(HeaderName, &'a [u8])) -> Result<(), ParseError> {
        self.lines(wanted, None, |field| {
            each(field.name, &self.s[field.value.range()]);
            true
        })
        .map(drop)
    }

    /// The message from its start line (leading CRLFs skipped): what the spans of
    /// [`Peek::each_field`] index.
    pub fn bytes(&self) -> &'a [u8] {
        self.s
    }

    /// Calls `each` with every line of a name in `wanted` (names herald knows) and every line
    /// named `other` (a name herald does not know, any case), in order, to the end of the header
    /// section, as the [`HeaderField`] [`Message::headers`](crate::Message::headers) holds for
    /// it (spans into [`Peek::bytes`]), for a reader that copies whole lines; errors as
    /// [`Peek::first_of`].
    pub fn each_field(
        &self,
        wanted: &[HeaderName],
        other: Option<&str>,
        mut each: impl FnMut(&HeaderField),
    ) -> Result<(), ParseError> {
        debug_assert!(other.is_none_or(|o| HeaderName::from_bytes(o.as_bytes()) == HeaderName::Other));
        self.lines(wanted, other.map(str::as_bytes), |field| {
            each(field);
            true
        })
        .map(drop)
    }

    /// Reads the header lines in order, handing those of a `wanted` name (or of the unknown name
    /// `other`) to `line` until it returns false or the header section ends; Ok is where reading
    /// stopped (the closing blank line, or the end of the last line handed over). A line whose
    /// first byte starts no wanted name (long or compact, any case) is only stepped over, to its
    /// LF and those of its continuation lines: where [`parse_header_line`] ends it in any
    /// message that parses (an LF before its colon can only be folded white space, followed by
    /// SP or HT too). Most lines of a message are not wanted, and recognising a line's name is
    /// most of what reading it costs.
    fn lines(
        &self,
        wanted: &[HeaderName],
        other: Option<&[u8]>,
        mut line: impl FnMut(&HeaderField) -> bool,
    ) -> Result<usize, ParseError> {
        let (s, limits) = (self.s, self.limits);
        let mut starts = first_bytes(wanted);
        if let Some(&b) = other.and_then(|o| o.first()) {
            for b in [b.to_ascii_lowercase(), b.to_ascii_uppercase()] {
                starts[usize::from(b >> 6)] |= 1 << (b & 63);
            }
        }
        let (mut pos, mut count) = (self.headers, 0usize);
        loop {
            let Some(&first) = s.get(pos) else {
                return Err(ParseError::new(ErrorKind::UnterminatedHeaders, pos));
            };
            if s[pos..].starts_with(b"\r\n") {
                return Ok(pos);
            }
            if count == limits.max_headers {
                return Err(ParseError::new(ErrorKind::Limit(Limit::HeaderCount), pos));
            }
            count += 1;
            if starts[usize::from(first >> 6)] & 1 << (first & 63) == 0 {
                let mut search = pos;
                pos = loop {
                    let Some(lf) = scan::find_lf(s, search) else {
                        return Err(ParseError::new(ErrorKind::UnterminatedHeaders, s.len()));
                    };
                    match s.get(lf + 1) {
                        Some(&b) if scan::is_wsp(b) => search = lf + 1,
                        _ => break lf + 1,
                    }
                };
                continue;
            }
            let field = match plain_header_line(s, pos, limits) {
                Some(field) => field,
                None => parse_header_line(s, pos, limits)?,
            };
            pos = field.line.end as usize;
            let named =
                |o: &[u8]| field.name == HeaderName::Other && s[field.name_span().range()].eq_ignore_ascii_case(o);
            if (wanted.contains(&field.name) || other.is_some_and(named)) && !line(&field) {
                return Ok(pos);
            }
        }
    }
}

/// The bytes that may start a line of one of `names` (long or compact form, either case), as a
/// set of 256 bits; every byte for a name herald does not know.
fn first_bytes(names: &[HeaderName]) -> [u64; 4] {
    let starts = &*STARTS;
    names.iter().fold([0; 4], |set, name| {
        let of = starts[*name as usize];
        [set[0] | of[0], set[1] | of[1], set[2] | of[2], set[3] | of[3]]
    })
}

/// [`first_bytes`] of each name alone, by position in [`HeaderName::ALL`], worked out once:
/// from the names' text at every peek it cost ~250 instructions (callgrind).
static STARTS: LazyLock<Vec<[u64; 4]>> = LazyLock::new(|| HeaderName::ALL.iter().map(|n| starts_of(*n)).collect());

fn starts_of(name: HeaderName) -> [u64; 4] {
    let forms = [name.canonical(), name.compact()];
    if forms[0].is_none() {
        return [u64::MAX; 4];
    }
    let mut set = [0u64; 4];
    for b in forms.into_iter().flatten().filter_map(|f| f.bytes().next()) {
        for b in [b.to_ascii_lowercase(), b.to_ascii_uppercase()] {
            set[usize::from(b >> 6)] |= 1 << (b & 63);
        }
    }
    set
}
