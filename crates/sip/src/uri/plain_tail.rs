//! The port and the parameters of a plain `sip:` URI (module `plain`), read a word or a
//! vector at a time: the Request-URI of every request a proxy receives has a port, and the
//! Contact-derived one of every ACK and BYE a `;transport=` parameter (RFC 3261 §19.1.1,
//! §12.1.1). Octet by octet, the port's digits cost about 12 instructions each and the
//! parameter runs about 100 a URI (callgrind: ~880 instructions of `PlainSip::read` per
//! proxied call, three Request-URIs). Each fast read gives what its loop gives (tests in
//! `tests_plain_tail`); the loops read what the fast ones do not take.

use super::escape::{self, PARAM};
#[cfg(target_arch = "x86_64")]
use crate::octet_masks::{equal, uncommon};

/// The port whose digits start at `from`: its value and where its digits end. `None` when
/// there is no digit at `from` or the value is over 65535 (leading zeros allowed, as
/// `host_port_prefix` reads a port).
#[inline(always)]
pub(super) fn port_at(s: &[u8], from: usize) -> Option<(u16, usize)> {
    match digits_in_word(s, from) {
        Some((value, n)) if n > 0 => Some((u16::try_from(value).ok()?, from + n)),
        Some(_) => None,
        None => port_by_digits(s, from),
    }
}

/// [`port_at`] a digit at a time: digits while the value fits in 16 bits.
#[inline(never)]
pub(super) fn port_by_digits(s: &[u8], from: usize) -> Option<(u16, usize)> {
    let mut port = 0u32;
    let mut at = from;
    while let Some(&d) = s.get(at).filter(|d| d.is_ascii_digit()) {
        port = port * 10 + u32::from(d - b'0');
        if port > u32::from(u16::MAX) {
            return None;
        }
        at += 1;
    }
    if at == from {
        return None;
    }
    Some((u16::try_from(port).ok()?, at))
}

/// The value and count of the decimal digits that start at `from`, when fewer than 8 of them
/// do, read from one 8-octet word: the word at `from`, or the text's last 8 octets when fewer
/// follow `from` (the octets past the end then read as non-digits). `None` when there are 8
/// or more (or the text is shorter than 8 octets): the loop reads those. A value of at most
/// seven digits is over 65535 exactly when the loop's running value would go over it (each
/// prefix of the digits is at most the whole).
#[inline(always)]
fn digits_in_word(s: &[u8], from: usize) -> Option<(u32, usize)> {
    let word = match s.get(from..).and_then(<[u8]>::first_chunk::<8>) {
        Some(w) => u64::from_le_bytes(*w),
        None => {
            let last = s.last_chunk::<8>()?;
            // Fewer than 8 octets from `from` on: `from` is past `s.len() - 8`.
            let skip = from.checked_sub(s.len() - 8)?;
            if skip >= 8 {
                // At or past the end: no digit.
                return Some((0, 0));
            }
            u64::from_le_bytes(*last) >> (8 * skip)
        }
    };
    const ONES: u64 = 0x0101_0101_0101_0101;
    // Octet by octet: `b ^ '0'` is below 10 exactly for the digits, and a value of 10 or more
    // (or with its high bit set) shows in the high bit of `(x & 0x7F) + 0x76 | x`, with no
    // carry into the next octet.
    let x = word ^ (ONES * u64::from(b'0'));
    let not_digit = (((x & (ONES * 0x7F)) + ONES * 0x76) | x) & (ONES * 0x80);
    if not_digit == 0 {
        return None;
    }
    let n = (not_digit.trailing_zeros() / 8) as usize;
    if n == 0 {
        return Some((0, 0));
    }
    // The n digits moved to the word's top, zeros below them, then summed in pairs, fours
    // and eights (the first digit is the lowest octet: the most significant).
    let v = x << (8 * (8 - n));
    let v = (v & (ONES * 0x0F)).wrapping_mul(2561) >> 8;
    let v = (v & 0x00FF_00FF_00FF_00FF).wrapping_mul(6_553_601) >> 16;
    let v = (v & 0x0000_FFFF_0000_FFFF).wrapping_mul(42_949_672_960_001) >> 32;
    Some((v as u32, n))
}

/// Whether `s[at..]` is a plain URI's parameters: `*( ";" pname [ "=" pvalue ] )`, names and
/// values of one or more unescaped `paramchar`s (RFC 3261 §19.1.1, §25.1), nothing else.
#[inline(always)]
pub(super) fn params_at(s: &[u8], at: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    if let Some(fits) = params_in_32(s, at) {
        return fits;
    }
    params_by_runs(s, at)
}

/// [`params_at`] by runs of `paramchar`s.
#[inline(never)]
pub(super) fn params_by_runs(s: &[u8], mut at: usize) -> bool {
    while at < s.len() {
        if s.get(at) != Some(&b';') {
            return false;
        }
        let name_end = escape::run(s, at + 1, PARAM);
        if name_end == at + 1 {
            return false;
        }
        at = match s.get(name_end) {
            Some(b'=') => {
                let value_end = escape::run(s, name_end + 1, PARAM);
                if value_end == name_end + 1 {
                    return false;
                }
                value_end
            }
            _ => name_end,
        };
    }
    true
}

/// [`params_at`] of parameters of 1 to 32 octets in a text of at least 16, from two 16-octet
/// vector reads (the text's last 16 when fewer follow `at`); `None` for other lengths. The
/// octets other than letters, digits, '-' and '.' (all `paramchar`s) are few: each is a ';',
/// an '=' or another `paramchar`, and the ';'s and '='s are where the runs of
/// [`params_by_runs`] would stop: a ';' first, no separator right after another or at the
/// end (no empty name or value), and a ';' between any two '='s (one value a parameter).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn params_in_32(s: &[u8], at: usize) -> Option<bool> {
    let n = s.len().checked_sub(at)?;
    if n == 0 {
        return Some(true);
    }
    if n > 32 || s.len() < 16 {
        return None;
    }
    let masks = |from: usize| masks_at(s, from);
    // Bit k of each mask: octet `at + k`.
    let (uncommon, semis, eqs) = if n <= 16 {
        let (u, sc, e) = masks(s.len() - 16)?;
        let skip = 16 - n;
        (u >> skip, sc >> skip, e >> skip)
    } else {
        let ((u0, s0, e0), (u1, s1, e1)) = (masks(at)?, masks(s.len() - 16)?);
        let shift = n - 16;
        (u0 | u1 << shift, s0 | s1 << shift, e0 | e1 << shift)
    };
    let seps = semis | eqs;
    let mut others = uncommon & !seps;
    while others != 0 {
        let k = others.trailing_zeros() as usize;
        if s.get(at + k).map_or(0, |&b| escape::class(b)) & PARAM == 0 {
            return Some(false);
        }
        others &= others - 1;
    }
    if semis & 1 == 0 || seps & (seps >> 1) != 0 || seps >> (n - 1) != 0 {
        return Some(false);
    }
    let mut rest = eqs;
    while rest != 0 {
        let k = rest.trailing_zeros();
        // The separator before this '=' (there is one: bit 0 is a ';').
        let before = seps & ((1u64 << k) - 1);
        if eqs >> (63 - before.leading_zeros()) & 1 != 0 {
            return Some(false);
        }
        rest &= rest - 1;
    }
    Some(true)
}

/// Bits of the 16 octets of `s` from `from`: not a letter, a digit, '-' or '.'
/// (`octet_masks::uncommon`); a ';'; an '='. `None` when fewer than 16 follow `from`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn masks_at(s: &[u8], from: usize) -> Option<(u64, u64, u64)> {
    let chunk: &[u8] = s.get(from..)?.first_chunk::<16>()?;
    let (uncommon, semis, eqs) = (uncommon(chunk), equal(chunk, b';'), equal(chunk, b'='));
    Some((u64::from(uncommon), u64::from(semis), u64::from(eqs)))
}
