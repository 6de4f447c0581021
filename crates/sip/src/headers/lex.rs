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

#[cfg(target_arch = "x86_64")]
use crate::octet_masks::uncommon;
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
///
/// On x86-64 a value of 16 octets or more is read 16 at a time: the octets every class holds
/// and nearly every tag, branch and Call-ID is made of (letters, digits, `-`, `.`) pass in one
/// vector test, and only another octet is looked up in the class table (a tag or branch of 15
/// to 25 octets took about 3 instructions an octet through the table four at a time;
/// callgrind counted the runs at about 1,800 instructions per proxied call).
#[inline(always)]
pub(super) fn run(s: &[u8], i: usize, mask: u8) -> usize {
    #[cfg(target_arch = "x86_64")]
    if let Some(last) = s.len().checked_sub(16) {
        return run_by_16(s, i, last, mask);
    }
    run_by_4(s, i, mask)
}

/// [`run`] of a value of `last + 16` octets, 16 at a time (see [`run`]). The last step reads
/// the value's last 16 octets, overlapping what was already read, with the bits of the octets
/// before `k` shifted out.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn run_by_16(s: &[u8], i: usize, last: usize, mask: u8) -> usize {
    let mut k = i;
    while k < s.len() {
        // Bit n: octet `k + n` is not one of the common ones (none past the end of `s`).
        let outside = match s.get(k..k + 16) {
            Some(chunk) => uncommon(chunk),
            None => uncommon(&s[last..]) >> (k - last),
        };
        if outside == 0 {
            k += 16;
            continue;
        }
        let j = k + outside.trailing_zeros() as usize;
        if class(s[j]) & mask == 0 {
            return j;
        }
        k = j + 1;
    }
    // `k` went past the end only from a step that covered it (or `i` was past it already).
    k.min(s.len()).max(i)
}

/// Bit n set when octet n of `s`, 16 to 32 octets long, is not a letter, a digit, `-` or `.`
/// (see [`uncommon`]): its first and last 16 octets, which cover it; `None` for another
/// length.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) fn uncommon_in_16_to_32(s: &[u8]) -> Option<u32> {
    let n = s.len();
    if !(16..=32).contains(&n) {
        return None;
    }
    // n - 16 <= 16: the last 16 octets' bits fit in 32 after the shift.
    Some(uncommon(&s[..16]) | uncommon(&s[n - 16..]) << (n - 16))
}

/// [`run`] four octets per step through the class table.
#[inline(always)]
fn run_by_4(s: &[u8], i: usize, mask: u8) -> usize {
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

/// `s` as text, when a run of one of this module's classes covered every octet of it (or
/// the octet is '@', between the two words of a Call-ID). The classes hold ASCII octets only
/// (`classify`), so the UTF-8 check of `scan::utf8` is not needed: about 20 instructions per
/// value, four values per message (callgrind).
///
/// # Safety
///
/// Every octet of `s` must be ASCII.
#[inline(always)]
pub(super) unsafe fn class_text(s: &[u8]) -> &str {
    debug_assert!(s.is_ascii());
    // SAFETY: the caller's promise: ASCII is UTF-8.
    unsafe { std::str::from_utf8_unchecked(s) }
}

/// [`crate::scan::token_end`], four octets per step.
#[inline(always)]
pub(super) fn token_end(s: &[u8], i: usize) -> usize {
    run(s, i, TOKEN)
}

/// [`scan::skip_lws`]: no octet above SP starts LWS, so one comparison settles the common case,
/// and the end of the value (where every parameter list ends) has none either.
#[inline(always)]
pub(super) fn skip_lws(s: &[u8], i: usize) -> usize {
    match s.get(i) {
        Some(&b) if b <= b' ' => scan::skip_lws(s, i),
        _ => i,
    }
}

// Searches for a few octets: scan's, which compare 16 at a time and read the last (partial) 16
// again overlapping what was already searched.
pub(super) use crate::scan::{find_any, find_top_level};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lws_skips_match_the_scan() {
        let texts: [&[u8]; 4] = [
            b"<sip:a,b@h>;x=\"1,2\" ,\r\n sip:c@d;lr;transport=tcp, <sip:e@f>\xff,",
            b"a \r\n\t b",
            b"a,b",
            b"\"q,\\\",x\" ,<sip:x@y> ,, \"open",
        ];
        for text in texts {
            for from in 0..=text.len() + 1 {
                assert_eq!(skip_lws(text, from), scan::skip_lws(text, from), "from {from}");
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

    /// The 16-at-a-time runs end where the table's four-at-a-time runs end: every octet at
    /// every place of values from 0 to 40 octets (around one, two and three steps and the
    /// overlapping last one), from every start, in every class, amid common octets and amid
    /// octets that are in a class but not common.
    #[test]
    fn vector_runs_match_the_table() {
        for len in 0..40usize {
            for filler in [b'a', b'_'] {
                for at in 0..len.max(1) {
                    for b in 0..=255u8 {
                        let mut v = vec![filler; len];
                        if at < len {
                            v[at] = b;
                        }
                        if len > 3 {
                            v[len / 2] = b'-';
                        }
                        for mask in [TOKEN, VALUE, WORD] {
                            for i in [0, 1, at, at + 1, len, len + 1] {
                                assert_eq!(run(&v, i, mask), run_by_4(&v, i, mask), "{v:?} from {i} in {mask}");
                            }
                        }
                    }
                }
            }
        }
    }

    /// Over every message of the benchmark set and the RFC 4475/5118 torture corpus, from every
    /// place, in every class, the vector runs end where the table's runs end.
    #[test]
    fn vector_runs_match_the_table_over_the_corpus() {
        let (paths, _) = crate::test_corpus::message_files();
        for path in paths {
            let text = std::fs::read(&path).expect("message file");
            // Each line on its own (values are runs within a line) and the whole text.
            let lines: Vec<&[u8]> = text.split(|&b| b == b'\n').chain([&text[..]]).collect();
            for s in lines {
                for i in 0..=s.len() {
                    for mask in [TOKEN, VALUE, WORD] {
                        assert_eq!(run(s, i, mask), run_by_4(s, i, mask), "{} from {i}", path.display());
                    }
                }
            }
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
