//! Character classes and `%HH` escape handling.
//!
//! The classes mirror the ABNF of RFC 3261 §25.1. Escapes are `"%" HEXDIG HEXDIG`
//! (RFC 3261 §25.1 `escaped`, RFC 3986 §2.1); a `%` not followed by two hex digits
//! is a syntax error, never a literal percent sign.

use std::borrow::Cow;

use super::error::UriError;

// Character-class bits of [`CLASS`], one per grammar set used on the parse path
// (RFC 3261 §25.1 unless noted); the sets themselves are spelled out in `classify`.
/// `user` characters (unescaped).
pub(crate) const USER: u8 = 1;
/// `password` characters (unescaped).
pub(crate) const PASSWORD: u8 = 1 << 1;
/// `paramchar` (unescaped).
pub(crate) const PARAM: u8 = 1 << 2;
/// `hname` / `hvalue` characters (unescaped).
pub(crate) const HEADER: u8 = 1 << 3;
/// Hostname characters: `alphanum / "-" / "_" / "."` (see `host::check_hostname`).
pub(crate) const HOST: u8 = 1 << 4;
/// ".", alone.
pub(crate) const DOT: u8 = 1 << 5;
/// `DIGIT` or ".": the characters of an IPv4address.
pub(crate) const NUMERIC: u8 = 1 << 6;
/// Scheme characters after the first: `ALPHA / DIGIT / "+" / "-" / "."` (RFC 3986 §3.1).
pub(crate) const SCHEME: u8 = 1 << 7;

/// `unreserved = alphanum / mark`,
/// `mark = "-" / "_" / "." / "!" / "~" / "*" / "'" / "(" / ")"` (RFC 3261 §25.1).
const fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'!' | b'~' | b'*' | b'\'' | b'(' | b')')
}

/// The class bits of one octet. Every class is a subset of printable ASCII without
/// '<' and '>', which `Uri::parse` relies on (see `screen` in mod.rs).
const fn classify(b: u8) -> u8 {
    let unreserved = unreserved(b);
    let mut c = 0;
    // user = 1*( unreserved / escaped / user-unreserved ),
    // user-unreserved = "&" / "=" / "+" / "$" / "," / ";" / "?" / "/" (RFC 3261 §25.1).
    // Note that `;` and `?` are legal inside the user part (RFC 4475 §3.1.1.2 intmeth,
    // §3.1.1.9 semiuri).
    if unreserved || matches!(b, b'&' | b'=' | b'+' | b'$' | b',' | b';' | b'?' | b'/') {
        c |= USER;
    }
    // password = *( unreserved / escaped / "&" / "=" / "+" / "$" / "," ).
    if unreserved || matches!(b, b'&' | b'=' | b'+' | b'$' | b',') {
        c |= PASSWORD;
    }
    // paramchar = param-unreserved / unreserved / escaped,
    // param-unreserved = "[" / "]" / "/" / ":" / "&" / "+" / "$".
    if unreserved || matches!(b, b'[' | b']' | b'/' | b':' | b'&' | b'+' | b'$') {
        c |= PARAM;
    }
    // hname / hvalue: hnv-unreserved / unreserved / escaped,
    // hnv-unreserved = "[" / "]" / "/" / "?" / ":" / "+" / "$".
    if unreserved || matches!(b, b'[' | b']' | b'/' | b'?' | b':' | b'+' | b'$') {
        c |= HEADER;
    }
    if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.') {
        c |= HOST;
    }
    if b == b'.' {
        c |= DOT;
    }
    if b.is_ascii_digit() || b == b'.' {
        c |= NUMERIC;
    }
    if b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.') {
        c |= SCHEME;
    }
    c
}

const fn class_table() -> [u8; 256] {
    let mut table = [0u8; 256];
    let mut rest: &mut [u8] = &mut table;
    let mut b: u8 = 0;
    while let [slot, tail @ ..] = rest {
        *slot = classify(b);
        b = b.wrapping_add(1);
        rest = tail;
    }
    table
}

/// Class bits of every octet, so that each byte of the parse path costs one lookup.
static CLASS: [u8; 256] = class_table();

/// The class bits of `b` (0 for octets outside every class, e.g. non-ASCII).
#[inline(always)]
pub(crate) fn class(b: u8) -> u8 {
    // Never out of bounds: the table has an entry for every u8.
    CLASS.get(usize::from(b)).copied().unwrap_or(0)
}

/// `paramchar` without escapes, see [`PARAM`].
pub(crate) fn is_param_char(b: u8) -> bool {
    class(b) & PARAM != 0
}

/// `s` as text when it is ASCII, else the length of its longest valid UTF-8 prefix (what
/// [`crate::scan::utf8`] returns). URIs and hosts are 10 to 60 octets long, where the standard
/// ASCII test spends more on its octet-by-octet tail than on the words before it: here every
/// octet is covered by 8-octet words, the last one overlapping the others.
#[inline]
pub(crate) fn ascii_text(s: &[u8]) -> Result<&str, usize> {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let word = |w: &[u8; 8]| u64::from_ne_bytes(*w);
    let high = match s.last_chunk::<8>() {
        Some(last) => {
            let mut acc = word(last);
            for chunk in s.chunks_exact(8) {
                if let Ok(w) = <&[u8; 8]>::try_from(chunk) {
                    acc |= word(w);
                }
            }
            acc & HIGH != 0
        }
        None => s.iter().fold(0, |acc, &b| acc | b) >= 0x80,
    };
    if high {
        return crate::scan::utf8(s);
    }
    // SAFETY: every octet was checked above to be ASCII, and ASCII is valid UTF-8.
    Ok(unsafe { std::str::from_utf8_unchecked(s) })
}

/// True if `bytes[i..]` starts with `"%" HEXDIG HEXDIG`.
#[inline]
fn escape_at(bytes: &[u8], i: usize) -> bool {
    let hex = |j: usize| bytes.get(j).is_some_and(u8::is_ascii_hexdigit);
    hex(i + 1) && hex(i + 2)
}

/// The index of the first octet of `bytes` at or after `from` that is outside the
/// class `mask` (`bytes.len()` if none). Four octets per step: runs are mostly short,
/// but a one-octet loop costs about twice as many instructions per octet.
#[inline(always)]
pub(crate) fn run(bytes: &[u8], from: usize, mask: u8) -> usize {
    let mut rest = bytes.get(from..).unwrap_or_default();
    let mut i = from;
    while let [a, b, c, d, tail @ ..] = rest {
        if class(*a) & class(*b) & class(*c) & class(*d) & mask == 0 {
            break;
        }
        i += 4;
        rest = tail;
    }
    for &b in rest {
        if class(b) & mask == 0 {
            return i;
        }
        i += 1;
    }
    i
}

/// Skips `*( <class> / escaped )` in `bytes` from `from`. Returns `Ok(i)` with `i` the
/// index of the first octet outside the class (or `bytes.len()`), or `Err(i)` if a
/// malformed escape starts at `i`.
#[inline]
pub(crate) fn scan(bytes: &[u8], from: usize, mask: u8) -> Result<usize, usize> {
    let mut i = from;
    loop {
        i = run(bytes, i, mask);
        if bytes.get(i) != Some(&b'%') {
            return Ok(i);
        }
        if !escape_at(bytes, i) {
            return Err(i);
        }
        i += 3;
    }
}

/// Checks that every byte of `s` is in the class `mask` or starts a well-formed `%HH`
/// escape. `base` is the offset of `s` inside the whole URI, for error reporting.
pub(crate) fn check_class(s: &str, base: usize, mask: u8, reason: &'static str) -> Result<(), UriError> {
    match scan(s.as_bytes(), 0, mask) {
        Ok(i) if i == s.len() => Ok(()),
        Ok(i) => Err(UriError::new(base + i, reason)),
        Err(i) => Err(UriError::new(base + i, "bad %-escape")),
    }
}

/// Value of one hex digit (either case, RFC 3986 §2.1).
pub(crate) fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Checks that every byte of `s` is `allowed` or starts a well-formed `%HH` escape.
/// `base` is the offset of `s` inside the whole URI, for error reporting.
pub(crate) fn check_chars(s: &str, base: usize, allowed: fn(u8) -> bool, reason: &'static str) -> Result<(), UriError> {
    let bytes = s.as_bytes();
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hi = bytes.get(i + 1).copied().and_then(hex_val);
            let lo = bytes.get(i + 2).copied().and_then(hex_val);
            if hi.is_none() || lo.is_none() {
                return Err(UriError::new(base + i, "bad %-escape"));
            }
            i += 3;
        } else if allowed(b) {
            i += 1;
        } else {
            return Err(UriError::new(base + i, reason));
        }
    }
    Ok(())
}

/// Like [`check_chars`] but escapes are not allowed (e.g. RFC 3966 `pname`).
pub(crate) fn check_plain(s: &str, base: usize, allowed: fn(u8) -> bool, reason: &'static str) -> Result<(), UriError> {
    match s.bytes().position(|b| !allowed(b)) {
        Some(i) => Err(UriError::new(base + i, reason)),
        None => Ok(()),
    }
}

/// Decodes every `%HH` escape in `s`. Strict: a `%` must be followed by two hex digits.
///
/// Returns bytes, not a string, because `%00` (and any non-UTF-8 octet) is a legal
/// escape (RFC 4475 §3.1.1.4 escnull); the output is never truncated at NUL.
/// Borrows when there is nothing to decode.
pub fn percent_decode(s: &[u8]) -> Result<Cow<'_, [u8]>, UriError> {
    if !s.contains(&b'%') {
        return Ok(Cow::Borrowed(s));
    }
    let mut out = Vec::with_capacity(s.len());
    let mut iter = s.iter().copied().enumerate();
    while let Some((i, b)) = iter.next() {
        if b != b'%' {
            out.push(b);
            continue;
        }
        let hi = iter.next().and_then(|(_, h)| hex_val(h));
        let lo = iter.next().and_then(|(_, l)| hex_val(l));
        match (hi, lo) {
            (Some(h), Some(l)) => out.push((h << 4) | l),
            _ => return Err(UriError::new(i, "bad %-escape")),
        }
    }
    Ok(Cow::Owned(out))
}

/// Octets whose escaped form is NOT equivalent to the literal octet when comparing.
///
/// RFC 3261 §19.1.4: "Characters other than those in the 'reserved' set (see RFC 2396)
/// are equivalent to their '%' HEX HEX encoding." The RFC 2396 §2.2 reserved set is
/// `; / ? : @ & = + $ ,`. `%` itself is added so that comparison stays injective:
/// otherwise `%253B` (a literal "%3B") would collide with `%3B` (an escaped `;`).
/// This is what makes RFC 4475 §3.1.1.3's `v%61lue%25%34%31` equal "value%41" and
/// not "valueA".
fn keeps_escape(b: u8) -> bool {
    matches!(b, b';' | b'/' | b'?' | b':' | b'@' | b'&' | b'=' | b'+' | b'$' | b',' | b'%')
}

/// One comparison unit: a literal octet, or an escaped octet that must stay escaped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unit {
    Lit(u8),
    Esc(u8),
}

/// Iterator over the comparison units of a raw (still escaped) component.
struct Units<'a> {
    bytes: std::slice::Iter<'a, u8>,
}

impl Iterator for Units<'_> {
    type Item = Unit;

    fn next(&mut self) -> Option<Unit> {
        let b = *self.bytes.next()?;
        if b != b'%' {
            return Some(Unit::Lit(b));
        }
        let mut look = self.bytes.clone();
        let hi = look.next().copied().and_then(hex_val);
        let lo = look.next().copied().and_then(hex_val);
        match (hi, lo) {
            (Some(h), Some(l)) => {
                self.bytes = look;
                let d = (h << 4) | l;
                Some(if keeps_escape(d) { Unit::Esc(d) } else { Unit::Lit(d) })
            }
            // Unreachable for validated input; treat a stray '%' as itself.
            _ => Some(Unit::Lit(b'%')),
        }
    }
}

/// Compares two raw components per RFC 3261 §19.1.4 escape rules (see [`keeps_escape`]),
/// optionally ASCII-case-insensitively. Allocation-free.
///
/// Plain comparison first, because it decides nearly every call (parameter lookups by name:
/// "transport", "lr", ...), where walking the units costs several times as much:
/// * equal octets (in the case sense asked for) are equal units: the escapes sit at the same
///   places and their hex digits differ at most in case, which decodes to the same octet;
/// * without a '%' on either side every unit is a literal octet, so unequal octets are
///   unequal units.
pub(crate) fn eq_escaped(a: &str, b: &str, ignore_case: bool) -> bool {
    let (x, y) = (a.as_bytes(), b.as_bytes());
    if if ignore_case { x.eq_ignore_ascii_case(y) } else { x == y } {
        return true;
    }
    // A plain loop: `contains` goes through `memchr`, whose set-up costs more than a parameter
    // name of a few octets (measured with callgrind).
    #[allow(clippy::manual_contains)]
    let has_escape = |s: &[u8]| s.iter().any(|&c| c == b'%');
    if !has_escape(x) && !has_escape(y) {
        return false;
    }
    eq_escaped_units(a, b, ignore_case)
}

/// [`eq_escaped`] unit by unit, for components with escapes.
pub(super) fn eq_escaped_units(a: &str, b: &str, ignore_case: bool) -> bool {
    let mut x = Units { bytes: a.as_bytes().iter() };
    let mut y = Units { bytes: b.as_bytes().iter() };
    loop {
        match (x.next(), y.next()) {
            (None, None) => return true,
            (Some(Unit::Lit(p)), Some(Unit::Lit(q))) => {
                let same = if ignore_case { p.eq_ignore_ascii_case(&q) } else { p == q };
                if !same {
                    return false;
                }
            }
            (Some(Unit::Esc(p)), Some(Unit::Esc(q))) if p == q => {}
            _ => return false,
        }
    }
}
