//! Lexing inside header values, tuned for their length: names and values (transports,
//! branches, tags, parameter names) are mostly 2 to 40 octets long and whole values rarely
//! more than 100, where per-call set-up and one-octet tails cost as much as the octets.
//! Every proxied message has a dozen of them.
//!
//! * runs of one character class, four octets per step through a class table (a one-octet
//!   loop with a test per class costs two to three times as many instructions per octet);
//! * searches for a few octets 16 at a time, the last (partial) 16 read again overlapping
//!   what was already searched rather than one octet at a time;
//! * LWS skipped with one comparison when there is none, the common case.

use crate::scan;

/// `token` (RFC 3261 §25.1), the same set as [`crate::scan::is_token`].
pub(super) const TOKEN: u8 = 1;
/// An unquoted `gen-value` octet: a token character or one of the host's `:`, `[` and `]`
/// (see `params::value_end`).
pub(super) const VALUE: u8 = 1 << 1;
/// `word` (RFC 3261 §25.1, Call-ID), the same set as [`crate::scan::is_word`].
pub(super) const WORD: u8 = 1 << 2;

const fn classify(b: u8) -> u8 {
    let token =
        b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'!' | b'%' | b'*' | b'_' | b'+' | b'`' | b'\'' | b'~');
    let mut c = 0;
    if token {
        c |= TOKEN | VALUE;
    }
    if matches!(b, b':' | b'[' | b']') {
        c |= VALUE;
    }
    if token || matches!(b, b'(' | b')' | b'<' | b'>' | b':' | b'\\' | b'"' | b'/' | b'[' | b']' | b'?' | b'{' | b'}') {
        c |= WORD;
    }
    c
}

static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0usize;
    while b < 256 {
        t[b] = classify(b as u8);
        b += 1;
    }
    t
};

#[inline(always)]
fn class(b: u8) -> u8 {
    CLASS[usize::from(b)]
}

/// The index of the first octet of `s` at or after `i` outside the class `mask` (`s.len()` if
/// none, `i` if `i` is past the end).
#[inline(always)]
pub(super) fn run(s: &[u8], i: usize, mask: u8) -> usize {
    let mut rest = s.get(i..).unwrap_or_default();
    let mut k = i;
    while let [a, b, c, d, tail @ ..] = rest {
        if class(*a) & class(*b) & class(*c) & class(*d) & mask == 0 {
            break;
        }
        k += 4;
        rest = tail;
    }
    for &b in rest {
        if class(b) & mask == 0 {
            return k;
        }
        k += 1;
    }
    k
}

/// [`crate::scan::token_end`], four octets per step.
#[inline(always)]
pub(super) fn token_end(s: &[u8], i: usize) -> usize {
    run(s, i, TOKEN)
}

/// [`scan::skip_lws`]: no octet above SP starts LWS, so one comparison settles the common case.
#[inline(always)]
pub(super) fn skip_lws(s: &[u8], i: usize) -> usize {
    match s.get(i) {
        Some(&b) if b > b' ' => i,
        _ => scan::skip_lws(s, i),
    }
}

/// [`scan::find_any`]: the index of the first octet at or after `from` that is one of
/// `needles`. When fewer than 16 octets are left but the value is at least 16 long, the last
/// 16 are compared at once (the ones before `from` masked off) instead of one by one.
#[inline]
pub(super) fn find_any<const N: usize>(s: &[u8], from: usize, needles: [u8; N]) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        let mut i = from;
        while let Some(chunk) = s.get(i..i + 16) {
            let mask = matches(chunk, needles);
            if mask != 0 {
                return Some(i + mask.trailing_zeros() as usize);
            }
            i += 16;
        }
        if i >= s.len() {
            return None;
        }
        if let Some(start) = s.len().checked_sub(16) {
            // `start < i`: the octets of the chunk before `i` were searched already.
            let mask = matches(&s[start..], needles) >> (i - start);
            return (mask != 0).then(|| i + mask.trailing_zeros() as usize);
        }
    }
    scan::find_any(s, from, needles)
}

/// Bit k: `chunk[k]` is one of `needles` (`chunk` is 16 octets long).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn matches<const N: usize>(chunk: &[u8], needles: [u8; N]) -> u32 {
    use std::arch::x86_64::{_mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128};
    use std::arch::x86_64::{_mm_set1_epi8, _mm_setzero_si128};
    debug_assert_eq!(chunk.len(), 16);
    // SAFETY: SSE2 is part of the x86-64 baseline, and every caller passes 16 octets, the
    // length the unaligned load reads.
    unsafe {
        let v = _mm_loadu_si128(chunk.as_ptr().cast());
        let mut hits = _mm_setzero_si128();
        for n in needles {
            hits = _mm_or_si128(hits, _mm_cmpeq_epi8(v, _mm_set1_epi8(n as i8)));
        }
        _mm_movemask_epi8(hits) as u32
    }
}

/// [`scan::find_top_level`] on top of [`find_any`]: the next `sep` at or after `i` outside
/// quoted strings and `<...>`; `s.len()` if none, `None` for an unterminated quote or '<'.
pub(super) fn find_top_level(s: &[u8], mut i: usize, sep: u8) -> Option<usize> {
    while i < s.len() {
        let Some(k) = find_any(s, i, [sep, b'"', b'<']) else { return Some(s.len()) };
        i = match s[k] {
            b if b == sep => return Some(k),
            b'"' => scan::quoted_string_end(s, k)?,
            _ => find_any(s, k, [b'>'])? + 1,
        };
    }
    Some(s.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn searches_match_the_scan() {
        let texts: [&[u8]; 4] = [
            b"<sip:a,b@h>;x=\"1,2\" ,\r\n sip:c@d;lr;transport=tcp, <sip:e@f>\xff,",
            b"<sip:127.0.0.1:5060;lr>",
            b"a,b",
            b"\"q,\\\",x\" ,<sip:x@y> ,, \"open",
        ];
        for text in texts {
            for from in 0..=text.len() + 1 {
                assert_eq!(find_any(text, from, [b',', b'"', b'<']), scan::find_any(text, from, [b',', b'"', b'<']));
                assert_eq!(find_any(text, from, [b'>']), scan::find_any(text, from, [b'>']), "from {from}");
                assert_eq!(find_top_level(text, from, b','), scan::find_top_level(text, from, b','), "from {from}");
                assert_eq!(skip_lws(text, from), scan::skip_lws(text, from), "from {from}");
            }
        }
        // Every length and needle position around the 16-octet chunks.
        for len in 0..40 {
            for at in 0..len {
                let mut v = vec![b'a'; len];
                v[at] = b';';
                for from in 0..=len {
                    assert_eq!(find_any(&v, from, [b';', b'?']), scan::find_any(&v, from, [b';', b'?']));
                }
            }
        }
    }

    #[test]
    fn classes_match_their_definitions() {
        for b in 0..=255u8 {
            assert_eq!(class(b) & TOKEN != 0, scan::is_token(b), "token {b:#x}");
            assert_eq!(class(b) & VALUE != 0, scan::is_token(b) || matches!(b, b':' | b'[' | b']'), "value {b:#x}");
            assert_eq!(class(b) & WORD != 0, scan::is_word(b), "word {b:#x}");
        }
    }

    #[test]
    fn token_runs_match_the_scan() {
        let text = b"z9hG4bK-524287-1---a;b=c d\t%41!*_+`'~.x:y[z]\"q\" \xff\x00end";
        for i in 0..=text.len() + 2 {
            assert_eq!(token_end(text, i), scan::token_end(text, i), "from {i}");
        }
        for b in 0..=255u8 {
            for at in 0..9 {
                let mut v = vec![b'a'; 9];
                v[at] = b;
                assert_eq!(token_end(&v, 0), scan::token_end(&v, 0), "octet {b:#x} at {at}");
            }
        }
    }
}
