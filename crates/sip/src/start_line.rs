//! Request-Line and Status-Line (RFC 3261 §7.1, §7.2, §25.1).

use crate::error::{ErrorKind, ParseError};
use crate::limits::{Limit, Limits};
use crate::method::Method;
use crate::scan;
use crate::span::Span;

/// The start line as byte ranges of the message buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartLine {
    Request { method: Span, uri: Span },
    Response { code: u16, reason: Span },
}

impl StartLine {
    /// The method token of a request's start line in `buf` (the message it was parsed from),
    /// or `None` for a response.
    #[inline]
    pub fn method_in(self, buf: &[u8]) -> Option<Method<'_>> {
        match self {
            // A known method is read by its name, without the ASCII test of the text that an
            // extension method is kept as.
            StartLine::Request { method, .. } => {
                let b = &buf[method.range()];
                Some(Method::known(b).unwrap_or_else(|| Method::Extension(scan::ascii_str(b))))
            }
            StartLine::Response { .. } => None,
        }
    }

    /// The Request-URI as written in `buf`, or `None` for a response.
    #[inline]
    pub fn request_uri_in(self, buf: &[u8]) -> Option<&[u8]> {
        match self {
            StartLine::Request { uri, .. } => Some(&buf[uri.range()]),
            StartLine::Response { .. } => None,
        }
    }

    /// The status code, or `None` for a request.
    #[inline]
    pub fn status(self) -> Option<u16> {
        match self {
            StartLine::Response { code, .. } => Some(code),
            StartLine::Request { .. } => None,
        }
    }
}

/// Parses the start line at the beginning of `s`; returns it and the offset of the first header.
pub(crate) fn parse_start_line(s: &[u8], limits: &Limits) -> Result<(StartLine, usize), ParseError> {
    let window = &s[..s.len().min(limits.max_start_line + 2)];
    let Some(lf) = scan::find_lf(window, 0) else {
        let kind = if s.len() > limits.max_start_line {
            ErrorKind::Limit(Limit::StartLine)
        } else {
            ErrorKind::UnterminatedHeaders
        };
        return Err(ParseError::new(kind, 0));
    };
    if lf == 0 || s[lf - 1] != b'\r' {
        return Err(ParseError::new(ErrorKind::StartLine("line does not end in CRLF"), lf));
    }
    let line = &s[..lf - 1];
    let start = if starts_as_status(line) { parse_status_line(line)? } else { parse_request_line(line)? };
    Ok((start, lf + 1))
}

/// Whether `line` starts with "SIP/" in any case (a Status-Line; a method cannot contain '/').
/// Compared as one word: `b | 0x20` is a lower-case letter exactly for that letter and its
/// upper case, and the '/' is compared as is (`eq_ignore_ascii_case` maps each octet on its
/// own: about 25 instructions per response).
#[inline]
fn starts_as_status(line: &[u8]) -> bool {
    line.first_chunk::<4>().is_some_and(|w| u32::from_le_bytes(*w) | 0x0020_2020 == u32::from_le_bytes(*b"sip/"))
}

/// `Status-Line = SIP-Version SP Status-Code SP Reason-Phrase` (RFC 3261 §7.2).
fn parse_status_line(line: &[u8]) -> Result<StartLine, ParseError> {
    // "SIP/2.0 " as nearly every response starts, without the search or the version's check
    // (the compare was that check: a call to the slice compare, ~16 instructions a message).
    let sp = match line.starts_with(b"SIP/2.0 ") {
        true => 7,
        false => {
            let sp = memchr::memchr(b' ', line)
                .ok_or(ParseError::new(ErrorKind::StartLine("no status code"), line.len()))?;
            check_version(&line[..sp], 0)?;
            sp
        }
    };
    let code_at = sp + 1;
    let code = line.get(code_at..code_at + 3).filter(|c| c.iter().all(u8::is_ascii_digit));
    let Some(code) = code else {
        return Err(ParseError::new(ErrorKind::StatusCode, code_at));
    };
    let code = code.iter().fold(0u16, |v, d| v * 10 + u16::from(d - b'0'));
    // RFC 4475 §3.1.2.19: codes above 699 are not SIP; the class digit must be 1-6.
    if !(100..=699).contains(&code) {
        return Err(ParseError::new(ErrorKind::StatusCode, code_at));
    }
    let after = code_at + 3;
    let reason = match line.get(after) {
        // Liberal: "SIP/2.0 200" with no SP and no reason is accepted as an empty reason.
        None => Span::new(after, after),
        Some(b' ') => Span::new(after + 1, line.len()),
        Some(_) => return Err(ParseError::new(ErrorKind::StatusCode, code_at)),
    };
    if line[reason.range()].iter().any(|b| matches!(b, b'\r' | b'\n' | 0)) {
        return Err(ParseError::new(ErrorKind::StartLine("control character in reason phrase"), after));
    }
    Ok(StartLine::Response { code, reason })
}

/// `Request-Line = Method SP Request-URI SP SIP-Version` with exactly one SP each (RFC 3261 §7.1;
/// RFC 4475 §3.1.2.9 and §3.1.2.10 allow rejecting extra or trailing whitespace, which we do so
/// that it can never be forwarded).
fn parse_request_line(line: &[u8]) -> Result<StartLine, ParseError> {
    if let Some(plain) = plain_request_line(line) {
        return Ok(plain);
    }
    let method_end = scan::token_end(line, 0);
    if method_end == 0 {
        return Err(ParseError::new(ErrorKind::StartLine("method is not a token"), 0));
    }
    if line.get(method_end) != Some(&b' ') {
        return Err(ParseError::new(ErrorKind::StartLine("method is not a token"), method_end));
    }
    if line.last().is_some_and(|b| scan::is_wsp(*b)) {
        return Err(ParseError::new(ErrorKind::StartLine("whitespace at end of Request-Line"), line.len() - 1));
    }
    let uri_start = method_end + 1;
    // " SIP/2.0" as nearly every request ends, without the search or the version's check.
    let plain = line.ends_with(b" SIP/2.0");
    let last_sp = match plain {
        true => line.len() - 8,
        false => memchr::memrchr(b' ', line).unwrap_or(method_end),
    };
    if last_sp <= uri_start {
        return Err(ParseError::new(ErrorKind::StartLine("missing Request-URI or SIP-Version"), uri_start));
    }
    if !plain {
        check_version(&line[last_sp + 1..], last_sp + 1)?;
    }
    let uri = &line[uri_start..last_sp];
    if let Some(ws) = scan::find_any(uri, 0, [b' ', b'\t']) {
        return Err(ParseError::new(ErrorKind::RequestUri("whitespace inside"), uri_start + ws));
    }
    Ok(StartLine::Request { method: Span::new(0, method_end), uri: Span::new(uri_start, last_sp) })
}

/// The Request-Line of nearly every request, an upper-case method, one SP, a Request-URI
/// without white space and ` SIP/2.0`, read with one vector test for the method where
/// [`parse_request_line`] walks it octet by octet through the token table, and the search for
/// white space in the URI inlined (callgrind: about 100 instructions per request, the method
/// walk and the search's call about half of it). `None` for anything else, which
/// [`parse_request_line`] reads with the same result for these (test
/// `plain_request_lines_read_as_the_full_read`).
#[inline(always)]
fn plain_request_line(line: &[u8]) -> Option<StartLine> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::_mm_sub_epi8;
        use std::arch::x86_64::{_mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_set1_epi8};
        let first = line.first_chunk::<16>()?;
        if !line.ends_with(b" SIP/2.0") {
            return None;
        }
        // SAFETY: SSE2 is part of the x86-64 baseline, and `first` holds the 16 octets that
        // the unaligned load reads. `b - 'A' <= 25` (wrapping, unsigned) holds exactly for
        // 'A'..='Z'.
        let upper = unsafe {
            let v = _mm_loadu_si128(first.as_ptr().cast());
            let d = _mm_sub_epi8(v, _mm_set1_epi8(b'A' as i8));
            _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_min_epu8(d, _mm_set1_epi8(25)), d)) as u32
        };
        // Upper-case letters are token characters and SP is not: where the method's token
        // run stops, when that octet is the SP.
        let method_end = (!upper).trailing_zeros() as usize;
        if method_end == 0 || first.get(method_end) != Some(&b' ') {
            return None;
        }
        let (uri_start, last_sp) = (method_end + 1, line.len() - 8);
        if last_sp <= uri_start || scan::find_any_inline(&line[..last_sp], uri_start, [b' ', b'\t']).is_some() {
            return None;
        }
        Some(StartLine::Request { method: Span::new(0, method_end), uri: Span::new(uri_start, last_sp) })
    }
    #[cfg(not(target_arch = "x86_64"))]
    None
}

/// `SIP-Version = "SIP" "/" 1*DIGIT "." 1*DIGIT`; anything well formed but not 2.0 is a 505
/// (RFC 3261 §8.2.2, RFC 4475 §3.1.2.16).
fn check_version(v: &[u8], at: usize) -> Result<(), ParseError> {
    if v == b"SIP/2.0" {
        return Ok(()); // as nearly every message spells it
    }
    if v.len() >= 4 && v[..4].eq_ignore_ascii_case(b"SIP/") {
        let rest = &v[4..];
        if rest == b"2.0" {
            return Ok(());
        }
        let mut parts = rest.splitn(2, |b| *b == b'.');
        let ok = |p: Option<&[u8]>| p.is_some_and(|p| !p.is_empty() && p.iter().all(u8::is_ascii_digit));
        if ok(parts.next()) && ok(parts.next()) {
            return Err(ParseError::new(ErrorKind::Version, at));
        }
    }
    Err(ParseError::new(ErrorKind::StartLine("bad SIP-Version"), at))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &[u8]) -> Result<StartLine, ErrorKind> {
        parse_start_line(s, &Limits::default()).map(|(l, _)| l).map_err(|e| e.kind)
    }

    #[test]
    fn request_line() {
        let l = parse(b"INVITE sip:a@b SIP/2.0\r\n").unwrap();
        assert_eq!(l, StartLine::Request { method: Span::new(0, 6), uri: Span::new(7, 14) });
        assert!(parse(b"INVITE sip:a@b sip/2.0\r\n").is_ok(), "SIP literal is case-insensitive");
    }

    #[test]
    fn versions() {
        assert_eq!(parse(b"INVITE sip:a@b SIP/7.0\r\n"), Err(ErrorKind::Version));
        assert!(matches!(parse(b"INVITE sip:a@b SIP/x\r\n"), Err(ErrorKind::StartLine(_))));
        assert_eq!(parse(b"SIP/3.0 200 OK\r\n"), Err(ErrorKind::Version));
    }

    /// Where the plain read takes a Request-Line, the full read gives the same start line:
    /// over lines built of methods, gaps, URIs and endings of the usual and other shapes.
    #[test]
    fn plain_request_lines_read_as_the_full_read() {
        use proptest::prelude::*;
        let one_of = |p: &'static [&'static str]| proptest::sample::select(p);
        let methods =
            one_of(&["INVITE", "ACK", "BYE", "X", "", "invite", "IN-VITE", "INVITEVERYLONGMETHOD", "IN VITE"]);
        let gaps = one_of(&[" ", "  ", "\t", ""]);
        let uris = one_of(&[
            "sip:a@b",
            "sip:bob@127.0.0.1:5060",
            "sip:127.0.0.1:19102;transport=UDP",
            "sip:a b",
            "sip:a\tb",
            "",
        ]);
        let ends = one_of(&[" SIP/2.0", "  SIP/2.0", " SIP/2.1", " sip/2.0", "SIP/2.0", " SIP/2.0 ", ""]);
        proptest::proptest!(|(m in methods, g in gaps, u in uris, e in ends)| {
            let line = format!("{m}{g}{u}{e}");
            if let Some(plain) = plain_request_line(line.as_bytes()) {
                prop_assert_eq!(Ok(plain), parse_request_line(line.as_bytes()), "{}", line);
            }
        });
        for usual in [
            "INVITE sip:bob@127.0.0.1:5060 SIP/2.0",
            "ACK sip:127.0.0.1:19102;transport=UDP SIP/2.0",
            "BYE sip:a@b SIP/2.0",
        ] {
            assert!(plain_request_line(usual.as_bytes()).is_some(), "{usual}");
        }
    }

    /// A method read by its name is the one `Method::from_token` reads from the text.
    #[test]
    fn methods_read_by_name_as_from_their_text() {
        let names = ["INVITE", "ACK", "BYE", "CANCEL", "REGISTER", "OPTIONS", "INFO", "PRACK", "SUBSCRIBE", "NOTIFY"];
        for name in names.iter().chain(&["UPDATE", "MESSAGE", "REFER", "PUBLISH", "invite", "INVITEX", "X", "A.b-c!"]) {
            let line = format!("{name} sip:a@b SIP/2.0\r\n");
            let (start, _) = parse_start_line(line.as_bytes(), &Limits::default()).expect("a request line");
            assert_eq!(start.method_in(line.as_bytes()), Some(Method::from_token(name)), "{name}");
        }
    }

    #[test]
    fn whitespace_is_strict() {
        assert!(parse(b"INVITE  sip:a@b SIP/2.0\r\n").is_err());
        assert!(parse(b"INVITE sip:a@b SIP/2.0 \r\n").is_err());
        assert!(matches!(parse(b"INVITE sip:a@b; lr SIP/2.0\r\n"), Err(ErrorKind::RequestUri(_))));
        assert!(parse(b"INVITE sip:a@b\r\n").is_err());
        assert!(parse(b"INVITE\r\n").is_err());
    }

    /// The word test is `eq_ignore_ascii_case(b"SIP/")` for every octet at every place.
    #[test]
    fn status_prefix_matches_a_case_insensitive_compare() {
        for at in 0..4 {
            for b in 0..=255u8 {
                let mut line = *b"SIP/2.0";
                line[at] = b;
                let want = line[..4].eq_ignore_ascii_case(b"SIP/");
                assert_eq!(starts_as_status(&line), want, "{b:#x} at {at}");
            }
        }
        assert!(starts_as_status(b"sIp/"));
        assert!(!starts_as_status(b"SIP"));
    }

    #[test]
    fn status_line() {
        assert_eq!(parse(b"SIP/2.0 100 \r\n"), Ok(StartLine::Response { code: 100, reason: Span::new(12, 12) }));
        assert_eq!(parse(b"SIP/2.0 200\r\n"), Ok(StartLine::Response { code: 200, reason: Span::new(11, 11) }));
        assert_eq!(parse(b"SIP/2.0 4294967301 big\r\n"), Err(ErrorKind::StatusCode));
        assert_eq!(parse(b"SIP/2.0 700 x\r\n"), Err(ErrorKind::StatusCode));
        assert_eq!(parse(b"SIP/2.0 099 x\r\n"), Err(ErrorKind::StatusCode));
    }
}
