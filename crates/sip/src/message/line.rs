//! One header line (RFC 3261 §7.3.1): the fast recognition of the usual shape and the full
//! parse of any other, both used by [`super::Head::scan`] and by stream framing.

use super::known_name::known_name;
use super::line_end::{LineEnd, Sse2};
use crate::error::{ErrorKind, ParseError};
use crate::header_name::HeaderName;
use crate::limits::{Limit, Limits};
use crate::scan;
use crate::span::Span;

/// One header line as found in the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderField {
    pub name: HeaderName,
    /// Where the name as written ends (it starts the line; see [`HeaderField::name_span`]):
    /// one offset rather than a second copy of the line's start, so that a line is 24 octets
    /// to write and copy for each line the scan finds, not 28.
    pub name_end: u32,
    /// The value without leading and trailing LWS. It may contain folded line breaks, which
    /// every typed parser treats as LWS.
    pub value: Span,
    /// The whole line including its terminating CRLF (and any folded continuation lines).
    pub line: Span,
}

impl HeaderField {
    /// A line that no message has (a place in a line list not yet written, module `pool`).
    pub(crate) const UNSET: HeaderField = HeaderField {
        name: HeaderName::Other,
        name_end: 0,
        value: Span { start: 0, end: 0 },
        line: Span { start: 0, end: 0 },
    };

    /// The name as written (it may be the compact form, any case).
    #[inline]
    pub fn name_span(&self) -> Span {
        Span { start: self.line.start, end: self.name_end }
    }
}

/// The shape of nearly every header line, `Name: value CRLF` with spaces after the colon,
/// no folding and no trailing white space, recognised without building an error on the way:
/// `None` for anything else, which [`parse_header_line`] then parses in full (with the same
/// result for the lines this accepts).
#[inline(always)]
pub(crate) fn plain_header_line(s: &[u8], pos: usize, limits: &Limits) -> Option<HeaderField> {
    plain_header_line_within::<true, Sse2>(Sse2, s, pos, limits)
}

/// [`plain_header_line`], the line's length tested against `limits.max_header_line` only when
/// `LONG`: a caller whose whole text is no longer than that limit (the header scan of nearly
/// every message, see `Head::scan`) holds no line over it, and skips the test at each line.
/// The LF is found by `end` (module `line_end`: the width the scan was built for).
#[inline(always)]
pub(crate) fn plain_header_line_within<const LONG: bool, E: LineEnd>(
    end: E,
    s: &[u8],
    pos: usize,
    limits: &Limits,
) -> Option<HeaderField> {
    debug_assert!(LONG || s.len() <= limits.max_header_line);
    // The usual names with their colon and SP from the line's first octets (module
    // `known_name`), then the LF after them; any other line by the colon search.
    let (name, colon, lf) = match known_name(s, pos) {
        // The first LF after the colon: the octet after it is the SP.
        Some((name, colon)) => (name, colon, end.find_lf(s, colon + 2)?),
        None => searched_name(s, pos)?,
    };
    debug_assert!(pos < colon && colon + 1 < lf && lf < s.len() && s[colon + 1] == b' ');
    // One SP after the colon (both paths tested it), or a few (SIPp pads its
    // `Content-Length: [len]` to a fixed width), then a byte that is not white space: where
    // `parse_header_line`'s LWS skip stops too. The octets up to the LF are read without
    // bounds checks (about 10 instructions a line): `pos < colon < lf < s.len()`, as the
    // searches found them in `s`.
    // colon + 2 <= lf (the octet at colon + 1 is a SP, not the LF), and the LF at `lf` ends
    // the walk: every place read is at most `lf`.
    let mut value_start = colon + 2;
    // SAFETY: value_start <= lf < s.len() (above).
    while unsafe { *s.get_unchecked(value_start) } == b' ' {
        value_start += 1;
    }
    // SAFETY: value_start <= lf < s.len() (above).
    if matches!(unsafe { *s.get_unchecked(value_start) }, b'\t' | b'\r' | b'\n') {
        return None;
    }
    // Now colon + 2 <= value_start < lf, so lf - 2 > colon: both octets before the LF are in `s`.
    let line_end = lf + 1;
    let next = *s.get(line_end)?;
    // SAFETY: colon < lf - 2 < lf - 1 < lf < s.len() (above).
    let (last, cr) = unsafe { (*s.get_unchecked(lf - 2), *s.get_unchecked(lf - 1)) };
    // CRLF, a last value byte that is not white space, no continuation line.
    if cr != b'\r' || matches!(last, b' ' | b'\t' | b'\r' | b'\n') || scan::is_wsp(next) {
        return None;
    }
    if LONG && line_end - pos > limits.max_header_line {
        return None;
    }
    Some(HeaderField {
        name,
        name_end: colon as u32,
        value: Span::new(value_start, lf - 1),
        line: Span::new(pos, line_end),
    })
}

/// The name, colon and LF of a line that [`known_name`] does not know, by a search for the
/// colon and the LF (a LF first: not the plain shape), when a SP follows the colon. A name
/// herald knows is a token by construction, so only other names are checked octet by octet:
/// either way `colon` is where `parse_header_line`'s token scan would stop. Out of the scan's
/// loop: most lines are known.
#[inline(never)]
fn searched_name(s: &[u8], pos: usize) -> Option<(HeaderName, usize, usize)> {
    let (colon, lf) = scan::colon_then_lf(s, pos)?;
    if colon == pos {
        return None;
    }
    debug_assert!(pos < colon && colon < lf && lf < s.len());
    // SAFETY: pos < colon < s.len(), as the search found the colon at or after `pos` in `s`.
    let name = HeaderName::from_bytes(unsafe { s.get_unchecked(pos..colon) });
    if name == HeaderName::Other && scan::token_end(s, pos) != colon {
        return None;
    }
    // SAFETY: colon < lf < s.len().
    if unsafe { *s.get_unchecked(colon + 1) } != b' ' {
        return None;
    }
    Some((name, colon, lf))
}

/// Parses the header line starting at `pos` (RFC 3261 §7.3.1): `name *WSP ":" value CRLF`,
/// where the value may continue on lines that start with SP or HT.
pub(crate) fn parse_header_line(s: &[u8], pos: usize, limits: &Limits) -> Result<HeaderField, ParseError> {
    let name_end = scan::token_end(s, pos);
    if name_end == pos {
        return Err(ParseError::new(ErrorKind::HeaderLine, pos));
    }
    let colon = scan::skip_lws(s, name_end);
    if s.get(colon) != Some(&b':') {
        return Err(ParseError::in_header(ErrorKind::HeaderLine, colon, &s[pos..name_end]));
    }
    // Find the CRLF that ends the line, following folded continuation lines.
    let mut search = colon + 1;
    let line_end = loop {
        let Some(lf) = scan::find_lf(s, search) else {
            return Err(ParseError::new(ErrorKind::UnterminatedHeaders, s.len()));
        };
        if lf == 0 || s[lf - 1] != b'\r' {
            // RFC 3261 §7: lines end in CRLF; a bare LF is not a line end we accept.
            return Err(ParseError::in_header(ErrorKind::HeaderLine, lf, &s[pos..name_end]));
        }
        if lf - pos > limits.max_header_line {
            return Err(ParseError::in_header(ErrorKind::Limit(Limit::HeaderLine), pos, &s[pos..name_end]));
        }
        if s.get(lf + 1).is_some_and(|b| scan::is_wsp(*b)) {
            search = lf + 1;
            continue;
        }
        break lf + 1;
    };
    if line_end - pos > limits.max_header_line {
        return Err(ParseError::in_header(ErrorKind::Limit(Limit::HeaderLine), pos, &s[pos..name_end]));
    }
    let value_start = scan::skip_lws(s, colon + 1).min(line_end - 2);
    let value_end = scan::trim_lws_end(s, line_end - 2).max(value_start);
    Ok(HeaderField {
        name: HeaderName::from_bytes(&s[pos..name_end]),
        name_end: name_end as u32,
        value: Span::new(value_start, value_end),
        line: Span::new(pos, line_end),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// One of `pieces`.
    fn one_of(pieces: &'static [&'static [u8]]) -> impl Strategy<Value = &'static [u8]> {
        proptest::sample::select(pieces)
    }

    proptest! {
        /// Lines built of the parts that decide the fast path's shape (name, colon, spacing,
        /// value, trailing white space, line end, what follows), read from the start or a little
        /// after it: where the fast path accepts one, the full parse gives the same field (and
        /// its unchecked reads stay in the text: debug builds check `get_unchecked`'s bounds).
        #[test]
        fn any_plain_line_parses_as_the_full_parser_does(
            name in one_of(&[b"To", b"X-A", b"", b"V a", b"\xff", b"cOntent-LENGTH", b"Via", b"Call-ID", b"v"]),
            colon in one_of(&[b":", b" :", b"", b"::"]),
            spacing in one_of(&[b"", b" ", b"  ", b"\t", b" \t", b"\r\n "]),
            value in one_of(&[b"", b"a", b"v;b=1", b"a b", b"a:b", b"\xff", b"\r", b"<sip:b@example.com>;tag=1"]),
            trailing in one_of(&[b"", b" ", b"\t", b" \r"]),
            end in one_of(&[b"\r\n", b"\r", b"\n", b"\r\r\n", b"", b"\n\r\n"]),
            next in one_of(&[b"", b"V", b" ", b"\t", b"\r\n"]),
            pos in 0usize..3,
        ) {
            let s = [name, colon, spacing, value, trailing, end, next].concat();
            let pos = pos.min(s.len());
            let limits = Limits::default();
            if let Some(fast) = plain_header_line(&s, pos, &limits) {
                prop_assert_eq!(Ok(fast), parse_header_line(&s, pos, &limits));
            }
        }
    }

    /// Wherever the fast path accepts a line, the full parse gives the same field; it declines
    /// folding, odd spacing, stray CR/LF and over-long lines.
    #[test]
    fn plain_lines_parse_as_the_full_parser_does() {
        let limits = Limits::default();
        let lines: &[&[u8]] = &[
            b"Via: SIP/2.0/UDP h;branch=z9hG4bK1\r\n\r\n",
            b"v: SIP/2.0/UDP h\r\n\r\n",
            b"To: <sip:b@h>\r\r\n\r\n",
            b"To: <sip:b@h>\n\r\n\r\n",
            b"To: <sip:b@h> \r\n\r\n",
            b"To:  <sip:b@h>\r\n\r\n",
            b"Content-Length:   129\r\n\r\n",
            b"To:  \t<sip:b@h>\r\n\r\n",
            b"To:   \r\n\r\n",
            b"To:<sip:b@h>\r\n\r\n",
            b"To : <sip:b@h>\r\n\r\n",
            b"To: \r\n\r\n",
            b"To: x\r\n\r\n",
            b"Subject: a\r\n folded\r\n\r\n",
            b"Subject: a\r\n\tfolded\r\n\r\n",
            b"Subject: a\r\n",
            b"X-Long: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n",
            b"X@Y: v\r\n\r\n",
            b"Via\t: v\r\n\r\n",
            b"To\r\n: v\r\n\r\n",
            b": v\r\n\r\n",
            b"v: x\r\n\r\n",
            b"X-Custom-Header: v\r\n\r\n",
        ];
        let mut accepted = 0;
        for line in lines {
            if let Some(fast) = plain_header_line(line, 0, &limits) {
                accepted += 1;
                let full = parse_header_line(line, 0, &limits).expect("the full parse accepts it too");
                assert_eq!(fast, full, "{:?}", String::from_utf8_lossy(line));
            }
        }
        assert_eq!(accepted, 8);
        for declined in [&b"To: <sip:b@h>\r\r\n\r\n"[..], b"Subject: a\r\n folded\r\n\r\n", b"To: <sip:b@h> \r\n\r\n"] {
            assert_eq!(plain_header_line(declined, 0, &limits), None);
        }
        let short = Limits { max_header_line: 20, ..Limits::default() };
        assert_eq!(plain_header_line(lines[13], 0, &short), None);
    }
}
