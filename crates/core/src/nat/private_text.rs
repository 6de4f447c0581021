//! The text filter in front of a Contact's parse: whether a Contact's text may name a private
//! address ([`super::is_private`]), read from the octets that decide it.
//!
//! Only the host of the URI decides (`contact_behind_nat` reads `uri.host` and nothing else),
//! and in a Contact of the usual shape, `<sip:` first, that host is found without reading the
//! rest: the URI ends at the first `>` (`NameAddr::parse`), and its host starts after its first
//! `@`, or right after `sip:` when it has none (`parse_sip`, RFC 3261 §25.1: no other part of
//! a sip URI may hold a raw `@`). Then the host's first four octets tell: an IPv6 reference, or
//! the first label of a private IPv4 address. Any other shape is read by the rule that looks at
//! every octet ([`may_name_private_address_anywhere`]).
//!
//! That rule read every '.' of the text (three in each `127.0.0.1`, more in any parameter):
//! ~208 instructions for SIPp's Contacts, four times a proxied call (callgrind, issue 21); the
//! host read is ~40.

/// Whether a Contact's text (the first Contact line's, or its first value split out of it) may
/// name a private address: `false` proves that the first Contact value of a line, and the value
/// itself, parse to no URI with a private host; `true` proves nothing.
///
/// Asked of the line first, then of the value only when the line may name one: a line that
/// starts `<sip:` has a first value that starts there too, and whose URI, when it parses, is
/// the line's up to its first `>`: the same host, the same answer. Any other line is read by
/// [`may_name_private_address_anywhere`], for which no part of a cleared text passes.
/// Inline, with the rule for other shapes out of line: as a call of its own its register saves
/// and restores cost ~9 instructions of the ~40.
#[inline(always)]
pub(super) fn may_name_private_address(text: &[u8]) -> bool {
    match bracketed_sip_host(text) {
        Some(host) => may_be_private_host(text.get(host..).unwrap_or_default()),
        None => may_name_private_address_anywhere(text),
    }
}

/// Where the host of the URI starts in a text that starts `<sip:` (`None` for any other text,
/// or one without a `@` or `>` after the scheme): after the first `@` when one comes before the
/// first `>`, else right after the scheme.
#[inline(always)]
pub(super) fn bracketed_sip_host(text: &[u8]) -> Option<usize> {
    const SCHEME: usize = "<sip:".len();
    if text.get(..SCHEME)? != b"<sip:" {
        return None;
    }
    let at = SCHEME + first_at_or_close(text.get(SCHEME..)?)?;
    Some(if text.get(at) == Some(&b'@') { at + 1 } else { SCHEME })
}

/// The top bit of each octet of the eight-octet word `w` that may be `a` or `b`: a zero-octet
/// test on the word XORed with each, the two masks joined, so a word with neither costs one
/// branch. The lowest marked octet is always a real one; one above a marked octet may be marked
/// by its borrow alone, so a caller that reads past the lowest checks each mark.
#[inline(always)]
fn octets_marked(w: u64, a: u8, b: u8) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero = |x: u64| x.wrapping_sub(ONES) & !x;
    (zero(w ^ (ONES * u64::from(a))) | zero(w ^ (ONES * u64::from(b)))) & HIGH
}

/// Eight octets as one little-endian word (its first octet lowest).
#[inline(always)]
fn word(w: &[u8]) -> u64 {
    u64::from_le_bytes(w.try_into().unwrap_or([0; 8]))
}

/// The place of the first `@` or `>` in `text`, eight octets at a time ([`octets_marked`]).
#[inline(always)]
fn first_at_or_close(text: &[u8]) -> Option<usize> {
    let marks = |w: u64| octets_marked(w, b'@', b'>');
    let words = text.chunks_exact(8);
    let rest = words.remainder().len();
    for (k, w) in words.enumerate() {
        let found = marks(word(w));
        if found != 0 {
            return Some(8 * k + found.trailing_zeros() as usize / 8);
        }
    }
    if rest == 0 {
        return None;
    }
    let Some(base) = text.len().checked_sub(8) else {
        return text.iter().position(|&b| b == b'@' || b == b'>');
    };
    // The word that ends the text, its first `8 - rest` octets (read above) masked off.
    let found = marks(word(&text[base..])) & (u64::MAX << (8 * (8 - rest)));
    (found != 0).then(|| base + found.trailing_zeros() as usize / 8)
}

/// Whether a URI host that starts `host` may be private: an IPv6 reference, or an IPv4 address
/// whose first octet is 10, 172, 192, 169 or 100, written as the parser reads an octet (one to
/// three digits, so `010` too) and followed by its dot. Exact for the first octet; the rest of
/// the address is left to the parse.
#[inline(always)]
fn may_be_private_host(host: &[u8]) -> bool {
    // The first four octets as one word (octet by octet, the five texts cost ~25 instructions).
    let word = |text: &[u8; 4]| u32::from_le_bytes(*text);
    match host.first_chunk::<4>() {
        Some(first) => {
            let w = word(first);
            first[0] == b'['
                || w & 0x00ff_ffff == word(b"10.\0")
                || w == word(b"010.")
                || w == word(b"172.")
                || w == word(b"192.")
                || w == word(b"169.")
                || w == word(b"100.")
        }
        None => matches!(host, [b'[', ..] | [b'1', b'0', b'.', ..]),
    }
}

/// The filter's rule for a text of any shape: an IPv6 reference (`[`), or a dot after the
/// digits that begin every private IPv4 address (`10`, `172`, `192`, `169`, `100`, with any
/// leading zeros a parser accepts), anywhere in the text. `false` proves that no URI parsed
/// from the text has a private host; `true` proves nothing.
///
/// A part of a text shows nothing the text does not (at the part's start the octets before are
/// taken as none, which are no digits): `false` for the first Contact line's whole text is
/// `false` for its first value, which `Message::first_list_value` splits out of that line, so
/// the line is asked first and the split made only when it may name one (`nat::tests`).
#[inline(never)]
pub(super) fn may_name_private_address_anywhere(value: &[u8]) -> bool {
    // Eight octets at a time for a '.' or a '[' ([`octets_marked`]), and at a dot the octets
    // before it read as one word: a test per octet cost as much as half the parse it saves, and
    // exact tests per word and three digit reads per dot ~250 instructions for a usual Contact
    // (`<sip:sipp@127.0.0.1:5061;transport=UDP>`). A mark that only a borrow made is checked
    // octet by octet like the others, so it costs only time. The last octets that do not fill
    // a word are read in the word that ends the text, less what the words before covered.
    let marks = |w: u64| octets_marked(w, b'.', b'[');
    // The rule at one octet: a '[' (an IPv6 reference), or a dot after private first digits.
    let hit = |at: usize| value[at] == b'[' || value[at] == b'.' && private_prefix_before(value, at);
    // Whether a word starting at `base` with these marks (the top bit of each marked octet)
    // shows a '[' or a dot after a private address's first digits.
    let marked = |base: usize, mut marks: u64| {
        while marks != 0 {
            if hit(base + marks.trailing_zeros() as usize / 8) {
                return true;
            }
            marks &= marks - 1;
        }
        false
    };
    let words = value.chunks_exact(8);
    let rest = words.remainder().len();
    for (k, w) in words.enumerate() {
        let found = marks(word(w));
        if found != 0 && marked(8 * k, found) {
            return true;
        }
    }
    if rest == 0 {
        return false;
    }
    let Some(base) = value.len().checked_sub(8) else {
        return (0..value.len()).any(hit);
    };
    // The word that ends the text, its first `8 - rest` octets (read above) masked off.
    marked(base, marks(word(&value[base..])) & (u64::MAX << (8 * (8 - rest))))
}

/// Whether the digits before the dot at `at` are those that begin a private IPv4 address (`10`,
/// `172`, `192`, `169`, `100`): the four octets that end at the dot compared as one word (three
/// digit reads cost a bounds test each).
#[inline(always)]
fn private_prefix_before(value: &[u8], at: usize) -> bool {
    let word = |text: &[u8; 4]| u32::from_le_bytes(*text);
    match at.checked_sub(3).and_then(|from| value.get(from..=at)) {
        Some(&[a, b, c, d]) => {
            let w = word(&[a, b, c, d]);
            w >> 8 == word(b"10.\0")
                || w == word(b"172.")
                || w == word(b"192.")
                || w == word(b"169.")
                || w == word(b"100.")
        }
        // Fewer than three octets before the dot: only `10` fits.
        _ => at == 2 && value.get(..3) == Some(&b"10."[..]),
    }
}
