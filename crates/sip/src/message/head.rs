//! The scan of a message's start line and header lines (RFC 3261 §7.1-§7.3): one pass that
//! finds every line, recognises its name, notes the frequent ones in the index, splits the Via
//! lines, counts Via and Route values against their limits and reads the one Content-Length.

use super::index::HeaderIndex;
use super::line::{parse_header_line, plain_header_line_within, HeaderField};
#[cfg(target_arch = "x86_64")]
use super::line_end::Avx2;
use super::line_end::{LineEnd, Sse2};
use super::pool::{Parsed, PooledParsed, FIRST_LINES};
use super::via_split::ViaSplit;
use crate::error::{ErrorKind, ParseError};
use crate::header_name::HeaderName;
use crate::limits::{Limit, Limits};
use crate::scan;
use crate::start_line::{parse_start_line, StartLine};

/// How the message was delimited, which decides what Content-Length may or must do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// The buffer is one UDP datagram: Content-Length may be absent (body = rest) and octets past
    /// it are ignored (RFC 3261 §18.3, RFC 4475 §3.1.1.8).
    Datagram,
    /// The buffer is exactly one framed message from a stream (see [`crate::framing`]).
    Stream,
}

/// A message's start line and header section, indexed: what [`Message::parse_as`] reads before
/// the body, and what stream framing needs to find Content-Length (`crate::framing`).
pub(crate) struct Head {
    pub(super) start: StartLine,
    /// The header lines and their index (the memo is set later, by [`Message::check`]).
    pub(super) parsed: PooledParsed,
    /// Offset of the empty line that ends the header section.
    pub(super) head_end: usize,
    /// The Content-Length value and the offset of its value.
    pub(super) content_length: Option<(u32, usize)>,
}

impl Head {
    /// Offset of the empty line that ends the header section (stream framing cuts there).
    pub(crate) fn head_end(&self) -> usize {
        self.head_end
    }

    /// The value of the one Content-Length header, if there is one.
    pub(crate) fn content_length(&self) -> Option<u32> {
        self.content_length.map(|(n, _)| n)
    }

    /// Where the body of a message of `len` octets with this header section starts, how long it
    /// is and how many octets of a datagram follow it (RFC 3261 §18.3: a stream message must
    /// give its Content-Length; a datagram's body without one is the rest).
    pub(super) fn body(&self, len: usize, framing: Framing) -> Result<(usize, usize, usize), ParseError> {
        let body_start = self.head_end + 2;
        let available = len - body_start;
        match (self.content_length, framing) {
            (Some((n, at)), _) => {
                let n = n as usize;
                if n > available {
                    return Err(ParseError::in_header(ErrorKind::BodyTruncated, at, b"Content-Length"));
                }
                Ok((body_start, n, available - n))
            }
            (None, Framing::Datagram) => Ok((body_start, available, 0)),
            (None, Framing::Stream) => Err(ParseError::new(ErrorKind::MissingContentLength, self.head_end)),
        }
    }

    /// Scans the start line and the header lines of `s` (no leading CRLF), up to the empty line.
    /// Built twice: with AVX2's 32-octet line-end search where the CPU has it, else with SSE2's
    /// 16 (module `line_end`); the two give the same result (test `both_widths_scan_alike`).
    #[inline(always)]
    pub(crate) fn scan(s: &[u8], limits: &Limits) -> Result<Head, ParseError> {
        #[cfg(target_arch = "x86_64")]
        if let Some(avx2) = Avx2::detect() {
            // SAFETY: `avx2` exists only where the CPU has AVX2, the feature `scan_avx2` is
            // built with.
            return unsafe { Self::scan_avx2(avx2, s, limits) };
        }
        Self::scan_sse2(s, limits)
    }

    /// [`Head::scan`] with SSE2's line-end search.
    #[inline(never)]
    pub(super) fn scan_sse2(s: &[u8], limits: &Limits) -> Result<Head, ParseError> {
        Self::scan_with(Sse2, s, limits)
    }

    /// [`Head::scan`] with AVX2's line-end search, the whole loop built with AVX2 so that the
    /// search is inlined into it.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    #[inline(never)]
    pub(super) fn scan_avx2(avx2: Avx2, s: &[u8], limits: &Limits) -> Result<Head, ParseError> {
        Self::scan_with(avx2, s, limits)
    }

    /// [`Head::scan`] with the line-end search `end`.
    #[inline(always)]
    fn scan_with<E: LineEnd>(end: E, s: &[u8], limits: &Limits) -> Result<Head, ParseError> {
        // A text no longer than the header line limit holds no line over it: nearly every
        // message (8 KiB by default) is scanned without testing each line's length (callgrind:
        // about 4 instructions a line, some 50 lines a proxied call). Lines of another shape
        // (`other_header_line`) are tested either way.
        // The start line and the box are set up here, once: in each of the two loops they were
        // two calls more.
        let (start, pos) = parse_start_line(s, limits)?;
        let parsed = PooledParsed::empty();
        match s.len() <= limits.max_header_line {
            true => Self::scan_lines::<false, E>(end, s, limits, start, pos, parsed),
            false => Self::scan_lines::<true, E>(end, s, limits, start, pos, parsed),
        }
    }

    /// [`Head::scan`] of the header lines from `pos` on, the plain lines' length tested against
    /// the limit when `LONG`.
    #[inline(always)]
    fn scan_lines<const LONG: bool, E: LineEnd>(
        end: E,
        s: &[u8],
        limits: &Limits,
        start: StartLine,
        pos: usize,
        mut parsed: PooledParsed,
    ) -> Result<Head, ParseError> {
        // The line list is written where it is, in the box: taking it out and putting it back
        // around the loop cost about 50 instructions a message (callgrind), most of them in the
        // loop's own code, which the moves made keep more of its values on the stack.
        let Parsed { lines, index, vias, .. } = &mut *parsed;
        let Scanned { head_end, count, content_length } =
            Self::lines_into::<LONG, E>(end, s, limits, pos, lines, index, vias)?;
        parsed.count = count;
        Ok(Head { start, parsed, head_end, content_length })
    }

    /// Writes the header lines from `pos` on into `lines` (from its start, over what it holds),
    /// noting them in `index` and the Via lines in `vias`; returns where the empty line is, how
    /// many lines there are and the Content-Length.
    #[inline(always)]
    fn lines_into<const LONG: bool, E: LineEnd>(
        end: E,
        s: &[u8],
        limits: &Limits,
        mut pos: usize,
        lines: &mut Vec<HeaderField>,
        index: &mut HeaderIndex,
        vias: &mut ViaSplit,
    ) -> Result<Scanned, ParseError> {
        let mut counts = Counts::default();
        // The lines written so far, and the room for them: the list's lines, at most the
        // header count limit. One test at each line says both whether the limit is reached
        // and whether the list must grow (`more_room`, out of line: a kept list has room).
        let mut count = 0usize;
        let mut slots: &mut [HeaderField] = {
            let room = lines.len().min(limits.max_headers);
            &mut lines[..room]
        };
        let head_end = loop {
            // The end of the text, or the empty line: one load of the line's first octet for
            // the usual line, where `s[pos..].starts_with(CRLF)` took the length of the rest first.
            match s.get(pos) {
                None => return Err(ParseError::new(ErrorKind::UnterminatedHeaders, pos)),
                Some(b'\r') if s.get(pos + 1) == Some(&b'\n') => break pos,
                Some(_) => {}
            }
            if count >= slots.len() {
                if count >= limits.max_headers {
                    return Err(ParseError::new(ErrorKind::Limit(Limit::HeaderCount), pos));
                }
                slots = more_room(lines, limits.max_headers);
                // The tests again, with room now: the only way to the line's place is through
                // `count < slots.len()`, which spares its bounds test.
                continue;
            }
            let field = match plain_header_line_within::<LONG, E>(end, s, pos, limits) {
                Some(field) => field,
                None => other_header_line(s, pos, limits)?,
            };
            // `count < slots.len()` (tested above): no bounds test. Written field by field: the
            // whole line's copy wrote its padding octets too, through the stack.
            let slot = &mut slots[count];
            slot.name = field.name;
            slot.name_end = field.name_end;
            slot.value = field.value;
            slot.line = field.line;
            pos = field.line.end as usize;
            // The names that need more than a note, tested as one set first: most lines have none.
            const COUNTED: u64 = HeaderName::Via.bit()
                | HeaderName::Route.bit()
                | HeaderName::RecordRoute.bit()
                | HeaderName::ContentLength.bit();
            if field.name.bit() & COUNTED != 0 {
                if field.name == HeaderName::ContentLength {
                    counts.length(slot, s)?;
                } else {
                    counts.add(slot, s, limits, vias)?;
                }
            }
            index.note(count, field.name);
            count += 1;
        };
        Ok(Scanned { head_end, count, content_length: counts.content_length })
    }
}

/// What [`Head::lines_into`] found: where the empty line is, how many lines there are, and
/// the Content-Length value and the offset of its value.
struct Scanned {
    head_end: usize,
    count: usize,
    content_length: Option<(u32, usize)>,
}

/// `lines` grown to twice its lines (at least [`FIRST_LINES`], at most `max`, more than it
/// had: the scan asks only when it had fewer than `max`), as the room the scan writes into.
#[cold]
#[inline(never)]
fn more_room(lines: &mut Vec<HeaderField>, max: usize) -> &mut [HeaderField] {
    let len = (lines.len() * 2).max(FIRST_LINES).min(max);
    lines.resize(len, HeaderField::UNSET);
    lines.as_mut_slice()
}

/// [`parse_header_line`] for a line of another shape than [`plain_header_line`]'s, out of the
/// scan's loop: inlined there, its registers made the loop keep its own values on the stack
/// (callgrind: the loop's cost per line moved by up to 20 instructions with changes elsewhere
/// in the crate that changed what was inlined).
#[cold]
#[inline(never)]
fn other_header_line(s: &[u8], pos: usize, limits: &Limits) -> Result<HeaderField, ParseError> {
    parse_header_line(s, pos, limits)
}

/// What the scan counts and reads of the Via, Route, Record-Route and Content-Length lines.
#[derive(Default)]
struct Counts {
    vias: usize,
    routes: usize,
    /// The Content-Length value and the offset of its value.
    content_length: Option<(u32, usize)>,
}

impl Counts {
    /// Counts `field`, a Via, Route or Record-Route line, against its limit (out of the scan's
    /// loop, as [`other_header_line`] is: about three lines of a message's ten come here), each
    /// name in a function of its own: the Route one is small enough to save no registers
    /// (callgrind: about 20 instructions of saves and restores per line when one function
    /// held both).
    #[inline(always)]
    fn add(&mut self, field: &HeaderField, s: &[u8], limits: &Limits, split: &mut ViaSplit) -> Result<(), ParseError> {
        match field.name {
            HeaderName::Via => self.via(field, s, limits, split),
            _ => self.route(field, s, limits),
        }
    }

    /// Splits and counts a Via line.
    #[inline(never)]
    fn via(&mut self, field: &HeaderField, s: &[u8], limits: &Limits, split: &mut ViaSplit) -> Result<(), ParseError> {
        let v = &s[field.value.range()];
        self.vias += split.add_line(v, field.value.start as usize, count_values);
        if self.vias > limits.max_via {
            return Err(limit_in(Limit::ViaCount, field, s));
        }
        Ok(())
    }

    /// Counts a Route or Record-Route line.
    #[inline(never)]
    fn route(&mut self, field: &HeaderField, s: &[u8], limits: &Limits) -> Result<(), ParseError> {
        self.routes += count_values(&s[field.value.range()]);
        if self.routes > limits.max_route {
            return Err(limit_in(Limit::RouteCount, field, s));
        }
        Ok(())
    }

    /// Reads the Content-Length line `field`: a function of its own, with fewer arguments and
    /// registers to save than [`Counts::add`] (every message has one).
    #[inline(never)]
    fn length(&mut self, field: &HeaderField, s: &[u8]) -> Result<(), ParseError> {
        let at = field.value.start as usize;
        if self.content_length.is_some() {
            // RFC 4475 §3.3.9: two lengths leave the framing undecidable.
            return Err(length_error(ErrorKind::DuplicateHeader, field, s));
        }
        let Some(n) = scan::parse_u32(&s[field.value.range()]) else {
            return Err(length_error(ErrorKind::HeaderValue("not a decimal length"), field, s));
        };
        self.content_length = Some((n, at));
        Ok(())
    }
}

/// The error of a Content-Length line, made out of line (its text copy kept registers busy in
/// [`Counts::length`]).
#[cold]
#[inline(never)]
fn length_error(kind: ErrorKind, field: &HeaderField, s: &[u8]) -> ParseError {
    ParseError::in_header(kind, field.value.start as usize, &s[field.name_span().range()])
}

#[cold]
#[inline(never)]
fn limit_in(limit: Limit, field: &HeaderField, s: &[u8]) -> ParseError {
    ParseError::in_header(ErrorKind::Limit(limit), field.value.start as usize, &s[field.name_span().range()])
}

/// Counts comma-separated values at top level (commas in quotes or `<>` do not count). An
/// unbalanced quote counts as one value; the typed parser reports it later.
#[inline(always)]
fn count_values(v: &[u8]) -> usize {
    if scan::find_any(v, 0, [b',']).is_none() {
        return 1;
    }
    count_listed(v)
}

/// [`count_values`] of a value with a comma, out of line (one value per line is the rule).
#[cold]
#[inline(never)]
fn count_listed(v: &[u8]) -> usize {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_with(lines: &str, limits: &Limits) -> Result<Head, ParseError> {
        let text = format!("OPTIONS sip:a@h SIP/2.0\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\r\n{lines}\r\n");
        Head::scan(text.as_bytes(), limits)
    }

    fn error_of(lines: &str, limits: &Limits) -> Option<(ErrorKind, Option<String>)> {
        scan_with(lines, limits).err().map(|e| (e.kind, e.header))
    }

    /// A header line longer than `max_header_line` is refused, whether the text is longer
    /// than the limit (each plain line tested) or not (no line can be over it, none tested):
    /// every limit around the longest line's length and the text's.
    #[test]
    fn the_line_limit_holds_with_or_without_the_test_at_each_line() {
        let long = format!("Subject: {}\r\n", "s".repeat(60));
        let text =
            format!("OPTIONS sip:a@h SIP/2.0\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\r\n{long}To: <sip:b@h>\r\n\r\n");
        let longest = long.len();
        for limit in (longest - 3..=longest + 3).chain(text.len() - 3..=text.len() + 3) {
            let limits = Limits { max_header_line: limit, ..Limits::default() };
            let got = Head::scan(text.as_bytes(), &limits).err().map(|e| e.kind);
            let want = (longest > limit).then_some(ErrorKind::Limit(Limit::HeaderLine));
            assert_eq!(got, want, "limit {limit}");
        }
    }

    /// Via and Route/Record-Route values count against their limits over all their lines
    /// (commas in quotes or `<>` do not count), and a Content-Length is read once, as a number.
    #[test]
    fn counted_lines_keep_their_limits_and_errors() {
        let limits = Limits { max_route: 3, max_via: 3, ..Limits::default() };
        let routes = "Route: <sip:a;lr>, <sip:b,c;lr>\r\nRecord-Route: <sip:d;lr>\r\n";
        assert!(scan_with(routes, &limits).is_ok());
        let over = "Route: <sip:a;lr>, <sip:b;lr>\r\nRecord-Route: <sip:d;lr>, \"x,y\" <sip:e>\r\n";
        let route_limit = Some((ErrorKind::Limit(Limit::RouteCount), Some("Record-Route".to_string())));
        assert_eq!(error_of(over, &limits), route_limit);
        assert_eq!(
            error_of("Route: <sip:a>,<sip:b>,<sip:c>,<sip:d>\r\n", &limits).map(|e| e.0),
            route_limit.map(|e| e.0)
        );
        let vias = "Via: SIP/2.0/UDP a;branch=z9hG4bK2, SIP/2.0/UDP b;branch=z9hG4bK3\r\n";
        let head = scan_with(vias, &limits).expect("three Vias");
        assert_eq!((head.parsed.vias.clean, head.parsed.vias.count), (true, 3));
        let via_limit = Some((ErrorKind::Limit(Limit::ViaCount), Some("v".to_string())));
        assert_eq!(error_of("v: SIP/2.0/UDP a, SIP/2.0/UDP b,SIP/2.0/UDP c\r\n", &limits), via_limit);
        let length = scan_with("Content-Length:   129\r\n", &limits).expect("a length");
        assert_eq!(length.content_length(), Some(129));
        let twice = Some((ErrorKind::DuplicateHeader, Some("l".to_string())));
        assert_eq!(error_of("Content-Length: 0\r\nl: 0\r\n", &limits), twice);
        let not_number = Some((ErrorKind::HeaderValue("not a decimal length"), Some("Content-Length".to_string())));
        assert_eq!(error_of("Content-Length: 1x\r\n", &limits), not_number);
    }
}
