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

    /// What a scan found, comparable: the start line, the lines, their index and Via split,
    /// the end of the header section and the Content-Length, or the error.
    #[cfg(target_arch = "x86_64")]
    type Found =
        Result<(String, Vec<crate::message::HeaderField>, String, usize, Option<u32>), crate::error::ParseError>;

    #[cfg(target_arch = "x86_64")]
    fn found(head: Result<crate::message::Head, crate::error::ParseError>) -> Found {
        head.map(|h| {
            let index = format!("{:?} {:?}", h.parsed.index, h.parsed.vias);
            (format!("{:?}", h.start), h.parsed.headers().to_vec(), index, h.head_end, h.content_length())
        })
    }

    /// The header scan built with AVX2 finds what the one built with SSE2 finds, line for line
    /// and error for error: over the benchmark messages and the RFC 4475/5118 torture corpus,
    /// each also with an octet that matters to the line grammar at every 3rd place, and cut
    /// short at every 7th (with a small header line limit too, for the loop that tests each
    /// line's length).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn both_widths_scan_alike() {
        use crate::limits::Limits;
        use crate::message::Head;
        let Some(avx2) = Avx2::detect() else { return };
        let (paths, _) = crate::test_corpus::message_files();
        let (mut scanned, mut refused) = (0usize, 0usize);
        for limits in [Limits::default(), Limits { max_header_line: 60, ..Limits::default() }] {
            for path in &paths {
                let original = std::fs::read(path).expect("message file");
                let mut variants = vec![original.clone()];
                for at in (0..original.len()).step_by(3) {
                    for b in [b'\n', b'\r', b' ', b'\t', b':', b'x'] {
                        let mut v = original.clone();
                        v[at] = b;
                        variants.push(v);
                    }
                }
                variants.extend((0..original.len()).step_by(7).map(|n| original[..n].to_vec()));
                for v in &variants {
                    let sse2 = found(Head::scan_sse2(v, &limits));
                    // SAFETY: `avx2` says this CPU has AVX2.
                    let wide = found(unsafe { Head::scan_avx2(avx2, v, &limits) });
                    assert_eq!(wide, sse2, "{} {:?}", path.display(), String::from_utf8_lossy(v));
                    match sse2 {
                        Ok(_) => scanned += 1,
                        Err(_) => refused += 1,
                    }
                }
            }
        }
        assert!(scanned > 1000 && refused > 1000, "{scanned} scanned, {refused} refused");
    }
}
