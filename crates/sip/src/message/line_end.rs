//! The search for a header line's end, in the width the CPU offers: the header scan's loop
//! (`Head::scan`) is built once over each [`LineEnd`], and the one to run is chosen once per
//! message at run time.
//!
//! SSE2 is part of the x86-64 baseline and compares 16 octets a step. A header line is ~47
//! octets on average (SIPp's From, Via and Contact lines 50-120), so the LF search took ~2.7
//! steps a line (callgrind: ~9 instructions a step, ~1.1k a proxied call of ~51 lines). AVX2
//! compares 32 a step; most servers' CPUs have it, and valgrind runs it, but the release build
//! cannot assume it: `Avx2::detect` asks the CPU (std caches the answer; a load and a bit test
//! a message), and the loop compiled with AVX2 runs only when it says yes.

use crate::scan;

/// A way to find the first LF at or after `from`: the same answer as [`scan::find_lf`]
/// whichever implements it.
pub(crate) trait LineEnd: Copy {
    fn find_lf(self, s: &[u8], from: usize) -> Option<usize>;
}

/// 16 octets a step ([`scan::find_lf`]): every x86-64 CPU, and every other target.
#[derive(Clone, Copy)]
pub(crate) struct Sse2;

impl LineEnd for Sse2 {
    #[inline(always)]
    fn find_lf(self, s: &[u8], from: usize) -> Option<usize> {
        scan::find_lf(s, from)
    }
}

/// 32 octets a step with AVX2. A value of this type exists only where the CPU has AVX2 (its
/// one field is private and [`Avx2::detect`] makes it only then): holding one is the proof
/// the unsafe calls below rely on.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(crate) struct Avx2(());

#[cfg(target_arch = "x86_64")]
impl Avx2 {
    /// An `Avx2` when this CPU has AVX2 (std's answer is detected once and cached).
    #[inline(always)]
    pub(crate) fn detect() -> Option<Avx2> {
        std::arch::is_x86_feature_detected!("avx2").then_some(Avx2(()))
    }
}

#[cfg(target_arch = "x86_64")]
impl LineEnd for Avx2 {
    #[inline(always)]
    fn find_lf(self, s: &[u8], from: usize) -> Option<usize> {
        // SAFETY: an `Avx2` exists only where the CPU has AVX2 (`Avx2::detect`). Inlined into
        // code compiled with AVX2 (`Head::scan`'s AVX2 loop), the search is inlined too.
        unsafe { find_lf_avx2(s, from) }
    }
}

/// [`scan::find_lf`] 32 octets a step; the last fewer than 32 by its 16-octet steps and tail.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn find_lf_avx2(s: &[u8], from: usize) -> Option<usize> {
    use std::arch::x86_64::{_mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_movemask_epi8, _mm256_set1_epi8};
    let lfs = _mm256_set1_epi8(b'\n' as i8);
    let mut i = from;
    while let Some(chunk) = s.get(i..i.wrapping_add(32)) {
        // SAFETY: `chunk` holds the 32 octets the unaligned load reads (AVX2: this function's
        // target feature).
        let v = unsafe { _mm256_loadu_si256(chunk.as_ptr().cast()) };
        let mask = _mm256_movemask_epi8(_mm256_cmpeq_epi8(v, lfs)) as u32;
        if mask != 0 {
            return Some(i + mask.trailing_zeros() as usize);
        }
        i += 32;
    }
    scan::find_lf(s, i)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every text of up to 80 octets with its LFs at one or two places (or none), searched
    /// from every place: each width answers what a plain search does.
    #[test]
    fn every_width_finds_what_a_plain_search_finds() {
        #[cfg(target_arch = "x86_64")]
        let avx2 = Avx2::detect();
        for len in 0..80usize {
            for first in (0..=len).chain([usize::MAX]) {
                for second in [first.saturating_add(1), first.saturating_add(17), first.saturating_add(33), len] {
                    let mut s = vec![b'a'; len];
                    for at in [first, second] {
                        if at < len {
                            s[at] = b'\n';
                        }
                    }
                    for from in 0..=len + 1 {
                        let want = s.get(from..).and_then(|t| t.iter().position(|&b| b == b'\n')).map(|k| from + k);
                        assert_eq!(Sse2.find_lf(&s, from), want, "len {len} from {from}");
                        #[cfg(target_arch = "x86_64")]
                        if let Some(avx2) = avx2 {
                            assert_eq!(avx2.find_lf(&s, from), want, "len {len} from {from}");
                        }
                    }
                }
            }
        }
    }
}
