//! Bit masks of 16 octets from one SSE2 compare each, shared by the lexers of header values
//! (`headers::lex`) and of URIs (`uri::plain_tail`): bit n of a mask tells about octet n.

use std::arch::x86_64::{
    _mm_andnot_si128, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    _mm_sub_epi8,
};

/// Bit n set when octet n of the 16 in `chunk` is not a letter, a digit, `-` or `.` (octets
/// that every class of the lexers holds: a token's, a header value's, a `paramchar`).
#[inline(always)]
pub(crate) fn uncommon(chunk: &[u8]) -> u32 {
    debug_assert_eq!(chunk.len(), 16);
    // SAFETY: SSE2 is part of the x86-64 baseline, and `chunk` holds the 16 bytes that the
    // unaligned load reads. `x - lo <= hi - lo` (wrapping, unsigned) holds exactly for the
    // octets `lo..=hi`; OR-ing 0x20 maps only the upper-case letters onto the lower-case
    // ones among the octets that can equal a lower-case letter.
    unsafe {
        let v = _mm_loadu_si128(chunk.as_ptr().cast());
        let set = |b: u8| _mm_set1_epi8(b as i8);
        let within = |x, lo: u8, hi: u8| {
            let d = _mm_sub_epi8(x, set(lo));
            _mm_cmpeq_epi8(_mm_min_epu8(d, set(hi - lo)), d)
        };
        let letter = within(_mm_or_si128(v, set(0x20)), b'a', b'z');
        // `-`, `.`, `/` and the digits are 0x2D..=0x39: all but the `/`.
        let digit_dash_dot = _mm_andnot_si128(_mm_cmpeq_epi8(v, set(b'/')), within(v, b'-', b'9'));
        !(_mm_movemask_epi8(_mm_or_si128(letter, digit_dash_dot)) as u32) & 0xFFFF
    }
}

/// Bit n set when octet n of the 16 in `chunk` is `b`.
#[inline(always)]
pub(crate) fn equal(chunk: &[u8], b: u8) -> u32 {
    debug_assert_eq!(chunk.len(), 16);
    // SAFETY: SSE2 is part of the x86-64 baseline, and `chunk` holds the 16 octets that the
    // unaligned load reads.
    unsafe {
        let v = _mm_loadu_si128(chunk.as_ptr().cast());
        _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(b as i8))) as u32
    }
}
