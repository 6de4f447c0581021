//! Byte-level lexing shared by the start-line and header parsers (RFC 3261 §25.1).
//!
//! Header values are handed to typed parsers as raw slices of the receive buffer, line
//! folding included: every function here treats `CRLF 1*WSP` as linear white space (LWS,
//! RFC 3261 §7.3.1), so no value ever has to be copied to unfold it.

const TOKEN: u8 = 1;
const WORD: u8 = 2;

/// Character classes of RFC 3261 §25.1 as a 256-entry table: one load per byte on the hot path.
static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0usize;
    while b < 256 {
        let c = b as u8;
        let token = matches!(c,
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9'
            | b'-' | b'.' | b'!' | b'%' | b'*' | b'_' | b'+' | b'`' | b'\'' | b'~');
        let word_extra =
            matches!(c, b'(' | b')' | b'<' | b'>' | b':' | b'\\' | b'"' | b'/' | b'[' | b']' | b'?' | b'{' | b'}');
        t[b] = if token {
            TOKEN | WORD
        } else if word_extra {
            WORD
        } else {
            0
        };
        b += 1;
    }
    t
};

/// `token` characters of RFC 3261 §25.1: alphanum / "-" / "." / "!" / "%" / "*" / "_" / "+" / "`" / "'" / "~".
#[inline]
pub fn is_token(b: u8) -> bool {
    CLASS[b as usize] & TOKEN != 0
}

/// `word` characters (Call-ID, RFC 3261 §25.1): token characters plus separators that may appear.
#[inline]
pub fn is_word(b: u8) -> bool {
    CLASS[b as usize] & WORD != 0
}

pub const fn is_wsp(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// Skips LWS (`[*WSP CRLF] 1*WSP`) and plain WSP starting at `i`; returns the new index.
#[inline]
pub fn skip_lws(s: &[u8], mut i: usize) -> usize {
    loop {
        match s.get(i) {
            Some(b' ' | b'\t') => i += 1,
            Some(b'\r') if s.get(i + 1) == Some(&b'\n') && s.get(i + 2).is_some_and(|b| is_wsp(*b)) => i += 3,
            _ => return i,
        }
    }
}

/// Index one past the last byte of `s[..end]` that is not LWS.
#[inline]
pub fn trim_lws_end(s: &[u8], mut end: usize) -> usize {
    while end > 0 && matches!(s[end - 1], b' ' | b'\t' | b'\r' | b'\n') {
        end -= 1;
    }
    end
}

/// Returns the end of a token starting at `i` (== `i` if there is none).
#[inline]
pub fn token_end(s: &[u8], i: usize) -> usize {
    match s.get(i..) {
        Some(rest) => i + rest.iter().take_while(|&&b| is_token(b)).count(),
        None => i,
    }
}

/// Reads a quoted-string whose opening `"` is at `i` (RFC 3261 §25.1 quoted-string, with
/// quoted-pair). Returns the index one past the closing quote, or `None` if unterminated or if
/// it contains a character qdtext forbids (a bare CR/LF outside folding).
pub fn quoted_string_end(s: &[u8], i: usize) -> Option<usize> {
    debug_assert_eq!(s.get(i), Some(&b'"'));
    let mut j = i + 1;
    while j < s.len() {
        match s[j] {
            b'"' => return Some(j + 1),
            // quoted-pair = "\" (%x00-09 / %x0B-0C / %x0E-7F): any byte but CR and LF may be escaped
            b'\\' => match s.get(j + 1) {
                Some(b'\r' | b'\n') | None => return None,
                Some(_) => j += 2,
            },
            b'\r' => {
                // only folding is allowed inside a quoted string
                if s.get(j + 1) == Some(&b'\n') && s.get(j + 2).is_some_and(|b| is_wsp(*b)) {
                    j += 3;
                } else {
                    return None;
                }
            }
            b'\n' => return None,
            _ => j += 1,
        }
    }
    None
}

/// Index of the first LF at or after `from` (see [`find_any`]).
#[inline]
pub fn find_lf(s: &[u8], from: usize) -> Option<usize> {
    find_any(s, from, [b'\n'])
}

/// Index of the first byte at or after `from` that is one of `needles`. Header lines and values
/// are short (tens of bytes), where `memchr`'s run-time dispatch and vector set-up cost more
/// than the search itself: this compares 16 bytes per step with SSE2, which every x86-64 CPU
/// has. The last few bytes of a slice of 16 or more are compared in one more step over its last
/// 16 bytes (one by one they cost about 5 instructions each); a shorter slice is walked.
#[inline]
pub fn find_any<const N: usize>(s: &[u8], from: usize, needles: [u8; N]) -> Option<usize> {
    find_any_inline(s, from, needles)
}

/// [`find_any`], always inlined: for a caller whose one search the compiler would call out
/// of line (a call with its register saves costs about as much as a search of a short text).
#[inline(always)]
pub fn find_any_inline<const N: usize>(s: &[u8], from: usize, needles: [u8; N]) -> Option<usize> {
    let mut i = from;
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::_mm_setzero_si128;
        use std::arch::x86_64::{_mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8};
        let hits = |chunk: &[u8]| {
            debug_assert_eq!(chunk.len(), 16);
            // SAFETY: SSE2 is part of the x86-64 baseline, and `chunk` holds the 16 bytes that
            // the unaligned load reads.
            unsafe {
                let v = _mm_loadu_si128(chunk.as_ptr().cast());
                let mut hits = _mm_setzero_si128();
                for n in needles {
                    hits = _mm_or_si128(hits, _mm_cmpeq_epi8(v, _mm_set1_epi8(n as i8)));
                }
                _mm_movemask_epi8(hits) as u32
            }
        };
        while let Some(chunk) = s.get(i..i + 16) {
            let mask = hits(chunk);
            if mask != 0 {
                return Some(i + mask.trailing_zeros() as usize);
            }
            i += 16;
        }
        if let Some(last) = s.len().checked_sub(16) {
            if i >= s.len() {
                return None;
            }
            // `last < i < last + 16`: the bits of the bytes before `i` are shifted out.
            let mask = hits(&s[last..]) >> (i - last);
            return (mask != 0).then(|| i + mask.trailing_zeros() as usize);
        }
    }
    s.get(i..)?.iter().position(|b| needles.contains(b)).map(|k| i + k)
}

/// The first `:` at or after `from`, when no LF comes before it, and the first LF after that
/// colon: where a header line's name ends and where the line ends. One vector pass finds both
/// (the LF is usually in the 16 bytes that hold the colon or in the next few), where two
/// searches would load the bytes up to the colon twice.
#[inline(always)]
pub fn colon_then_lf(s: &[u8], from: usize) -> Option<(usize, usize)> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8};
        let mut i = from;
        while let Some(chunk) = s.get(i..i + 16) {
            // SAFETY: SSE2 is part of the x86-64 baseline, and `chunk` holds the 16 bytes that
            // the unaligned load reads.
            let (colons, lfs) = unsafe {
                let v = _mm_loadu_si128(chunk.as_ptr().cast());
                let colons = _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(b':' as i8))) as u32;
                (colons, _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(b'\n' as i8))) as u32)
            };
            let either = colons | lfs;
            if either != 0 {
                let k = either.trailing_zeros();
                if lfs & (1 << k) != 0 {
                    return None;
                }
                let colon = i + k as usize;
                // LFs of this chunk after the colon (k < 16: the shift cannot overflow).
                let after = lfs & !((2u32 << k) - 1);
                return match after {
                    0 => find_lf(s, i + 16).map(|lf| (colon, lf)),
                    _ => Some((colon, i + after.trailing_zeros() as usize)),
                };
            }
            i += 16;
        }
    }
    let colon = find_any(s, from, [b':', b'\n'])?;
    if s[colon] != b':' {
        return None;
    }
    find_lf(s, colon + 1).map(|lf| (colon, lf))
}

/// Finds the next top-level `sep` at or after `i`, ignoring separators inside quoted strings and
/// inside `<...>` (where a URI may contain commas and semicolons). Returns `s.len()` if none.
/// An unterminated quote or angle bracket yields `None`.
pub fn find_top_level(s: &[u8], mut i: usize, sep: u8) -> Option<usize> {
    while i < s.len() {
        // Jump straight to the next byte that matters: the separator, a quote or '<'.
        let Some(k) = find_any(s, i, [sep, b'"', b'<']) else { return Some(s.len()) };
        i = k;
        match s[i] {
            b if b == sep => return Some(i),
            b'"' => i = quoted_string_end(s, i)?,
            _ => i = find_any(s, i, [b'>'])? + 1,
        }
    }
    Some(s.len())
}

/// Parses an unsigned decimal number that must fit in a u32 (RFC 4475 §3.1.2.4: CSeq and friends
/// over 2**32-1 are errors, never silently wrapped).
pub fn parse_u32(s: &[u8]) -> Option<u32> {
    if s.is_empty() || s.len() > 10 {
        return None;
    }
    let mut v: u64 = 0;
    for &b in s {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v * 10 + u64::from(b - b'0');
    }
    u32::try_from(v).ok()
}

/// Whether every octet of `s` is ASCII: `[u8]::is_ascii` for the short texts of a message
/// (tokens, tags, branches, Call-IDs: 3 to 40 octets), where the library's call and alignment
/// handling cost more than the octets (callgrind: about 1,000 instructions per proxied call
/// in the receipt checks). Every octet is covered by 8-octet words, the last one overlapping
/// the others; under 8 octets by two overlapping 4-octet words.
#[inline]
pub fn is_ascii(s: &[u8]) -> bool {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let word = |w: &[u8; 8]| u64::from_le_bytes(*w);
    match s.last_chunk::<8>() {
        Some(last) => {
            let mut acc = word(last);
            for chunk in s.chunks_exact(8) {
                if let Ok(w) = <&[u8; 8]>::try_from(chunk) {
                    acc |= word(w);
                }
            }
            acc & HIGH == 0
        }
        None => match (s.first_chunk::<4>(), s.last_chunk::<4>()) {
            (Some(a), Some(b)) => (u32::from_le_bytes(*a) | u32::from_le_bytes(*b)) & 0x8080_8080 == 0,
            _ => s.iter().all(|b| *b < 0x80),
        },
    }
}

/// `std::str::from_utf8` with a fast path for ASCII, the common case in SIP: a few word
/// compares instead of a call and a byte-wise walk. The error is `valid_up_to`.
#[inline]
pub fn utf8(s: &[u8]) -> Result<&str, usize> {
    if is_ascii(s) {
        // SAFETY: ASCII is valid UTF-8.
        Ok(unsafe { std::str::from_utf8_unchecked(s) })
    } else {
        std::str::from_utf8(s).map_err(|e| e.valid_up_to())
    }
}

/// `&str` view of bytes that the caller has normally checked to be ASCII (tokens, numbers).
/// Other UTF-8 is returned as is and anything else as "". The ASCII test is a few word
/// compares, where `from_utf8` costs a call and a byte-wise walk on every short token.
#[inline]
pub fn ascii_str(s: &[u8]) -> &str {
    utf8(s).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_any_matches_a_plain_search() {
        let text = b"<sip:a,b@h>;x=\"1,2\" ,\r\n sip:c@d;lr;transport=tcp, <sip:e@f>\xff,";
        for from in 0..=text.len() + 1 {
            let want = text.get(from..).and_then(|t| t.iter().position(|b| b",\"<".contains(b))).map(|k| from + k);
            assert_eq!(find_any(text, from, [b',', b'"', b'<']), want, "from {from}");
        }
    }

    #[test]
    fn find_any_at_every_length_and_position() {
        // Around the 16-byte chunks and the overlapping last chunk of slices of 16 or more.
        for len in 0..40 {
            for at in 0..len {
                let mut v = vec![b'a'; len];
                v[at] = b';';
                for from in 0..=len + 1 {
                    let want = v.get(from..).and_then(|t| t.iter().position(|b| b";?".contains(b))).map(|k| from + k);
                    assert_eq!(find_any(&v, from, [b';', b'?']), want, "len {len}, at {at}, from {from}");
                }
            }
        }
    }

    #[test]
    fn find_lf_matches_a_plain_search() {
        let text = b"Via: SIP/2.0/UDP h;branch=z9hG4bK1\r\nTo: <sip:b@h>\r\n\n\x8a\x0b\xff\n";
        for from in 0..=text.len() + 1 {
            let want = text.get(from..).and_then(|t| t.iter().position(|&b| b == b'\n')).map(|k| from + k);
            assert_eq!(find_lf(text, from), want, "from {from}");
        }
        // Every position within a word, and bytes one off LF on both sides.
        for at in 0..20 {
            let mut v = vec![0x0bu8; 20];
            v[..at].fill(0x09);
            v[at] = b'\n';
            assert_eq!(find_lf(&v, 0), Some(at));
        }
        assert_eq!(find_lf(&[0x0b; 17], 0), None);
    }

    #[test]
    fn colon_then_lf_matches_two_plain_searches() {
        let text =
            b"Via: SIP/2.0/UDP h;branch=z9hG4bK1\r\nX\nY: a:b\r\nProxy-Authorization-Long-Name: v\r\nZ:\nq: 1\r\n";
        for from in 0..=text.len() + 1 {
            let t = text.get(from..).unwrap_or_default();
            let want = t
                .iter()
                .position(|b| b":\n".contains(b))
                .map(|k| from + k)
                .filter(|&c| text[c] == b':')
                .and_then(|c| text[c + 1..].iter().position(|&b| b == b'\n').map(|k| (c, c + 1 + k)));
            assert_eq!(colon_then_lf(text, from), want, "from {from}");
        }
        // Every place of the colon and of the LF within and across the 16-byte steps.
        for colon in 0..40 {
            for lf in colon + 1..48 {
                let mut v = vec![b'a'; 48];
                v[colon] = b':';
                v[lf] = b'\n';
                assert_eq!(colon_then_lf(&v, 0), Some((colon, lf)), "{colon} {lf}");
                v[colon] = b'\n';
                v[lf] = b':';
                assert_eq!(colon_then_lf(&v, 0), None, "{colon} {lf}");
            }
        }
    }

    #[test]
    fn lws_includes_folding() {
        let s = b"a \r\n\t b";
        assert_eq!(skip_lws(s, 1), 6);
        assert_eq!(skip_lws(b"a\r\nb", 1), 1, "CRLF without WSP ends the header");
    }

    #[test]
    fn quoted_strings() {
        assert_eq!(quoted_string_end(br#""a\"b" x"#, 0), Some(6));
        assert_eq!(quoted_string_end(b"\"abc", 0), None);
        assert_eq!(quoted_string_end(b"\"a\\\0b\"", 0), Some(6), "escaped NUL (RFC 4475 intmeth)");
        assert_eq!(quoted_string_end(b"\"a\r\nb\"", 0), None);
        assert_eq!(quoted_string_end(b"\"a\r\n b\"", 0), Some(7));
    }

    #[test]
    fn top_level_separators() {
        let s = br#""a,b" <sip:x,y@h>;p, next"#;
        assert_eq!(find_top_level(s, 0, b','), Some(19));
        assert_eq!(find_top_level(b"<sip:x", 0, b','), None);
    }

    #[test]
    fn ascii_test_matches_the_library() {
        for len in 0..40 {
            for at in 0..=len {
                for high in [0x80u8, 0xff, 0x7f] {
                    let mut v = vec![b'a'; len];
                    if at < len {
                        v[at] = high;
                    }
                    assert_eq!(is_ascii(&v), v.is_ascii(), "len {len}, {high:#x} at {at}");
                }
            }
        }
    }

    #[test]
    fn u32_bounds() {
        assert_eq!(parse_u32(b"4294967295"), Some(u32::MAX));
        assert_eq!(parse_u32(b"4294967296"), None);
        assert_eq!(parse_u32(b"-1"), None);
        assert_eq!(parse_u32(b""), None);
        assert_eq!(parse_u32(b"0000000001"), Some(1));
    }
}
