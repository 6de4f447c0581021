//! The run of hostname octets at the start of a host (`alphanum / "-" / "_" / "."`), with
//! what [`super::host`] needs to judge it: whether every octet is a digit or '.', and whether a
//! label is empty ('.' first or right after another '.'). Every proxied message has several
//! hosts (Via, Route, Request-URI), so x86-64 classifies 16 octets per step with SSE2.

use super::escape;

/// What [`host_run`] found: `len` hostname octets, `numeric` if each is a digit or '.',
/// `empty_label` if a '.' comes first or right after another '.'.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct HostRun {
    pub len: usize,
    pub numeric: bool,
    pub empty_label: bool,
}

#[cfg(target_arch = "x86_64")]
pub(super) fn host_run(s: &[u8]) -> HostRun {
    let mut run = HostRun { len: 0, numeric: true, empty_label: false };
    // Bit 0: the octet before the current chunk was a '.' (true at the start, so that a
    // leading '.' makes an empty label).
    let mut prev_dot: u32 = 1;
    let mut rest = s;
    loop {
        // The last chunk is copied into zeros, and a zero octet ends the run.
        let mut padded = [0u8; 16];
        let chunk: &[u8; 16] = match rest.first_chunk::<16>() {
            Some(c) => c,
            None => {
                padded.get_mut(..rest.len()).unwrap_or_default().copy_from_slice(rest);
                &padded
            }
        };
        let Masks { host, numeric, dot } = classify(chunk);
        // Octets before the first non-host octet count.
        let stop = (!host).trailing_zeros().min(16);
        let valid = if stop == 16 { 0xFFFF } else { (1u32 << stop) - 1 };
        run.len += stop as usize;
        run.numeric &= numeric & valid == valid;
        run.empty_label |= dot & ((dot << 1) | prev_dot) & valid != 0;
        if stop < 16 || rest.len() <= 16 {
            run.len = run.len.min(s.len());
            return run;
        }
        prev_dot = (dot >> 15) & 1;
        rest = rest.get(16..).unwrap_or_default();
    }
}

struct Masks {
    host: u32,
    numeric: u32,
    dot: u32,
}

/// Bit i of each mask: octet i is a hostname character, a digit or '.', a '.'.
#[cfg(target_arch = "x86_64")]
#[inline]
fn classify(chunk: &[u8; 16]) -> Masks {
    use std::arch::x86_64::*;
    // SAFETY: SSE2 is part of the x86-64 baseline, and `chunk` is the 16 bytes the unaligned
    // load reads. The compares are signed: octets >= 0x80 are negative, so they fall below
    // every lower bound and are never classed as anything.
    unsafe {
        let v = _mm_loadu_si128(chunk.as_ptr().cast());
        let set = |b: u8| _mm_set1_epi8(b as i8);
        let lower = _mm_or_si128(v, set(0x20));
        let alpha = _mm_and_si128(_mm_cmpgt_epi8(lower, set(b'a' - 1)), _mm_cmplt_epi8(lower, set(b'z' + 1)));
        let digit = _mm_and_si128(_mm_cmpgt_epi8(v, set(b'0' - 1)), _mm_cmplt_epi8(v, set(b'9' + 1)));
        let dot = _mm_cmpeq_epi8(v, set(b'.'));
        let other = _mm_or_si128(_mm_cmpeq_epi8(v, set(b'-')), _mm_cmpeq_epi8(v, set(b'_')));
        let numeric = _mm_or_si128(digit, dot);
        let host = _mm_or_si128(_mm_or_si128(alpha, numeric), other);
        let bits = |m| _mm_movemask_epi8(m) as u32;
        Masks { host: bits(host), numeric: bits(numeric), dot: bits(dot) }
    }
}

/// The portable form: one octet at a time through the class table.
#[cfg(not(target_arch = "x86_64"))]
pub(super) fn host_run(s: &[u8]) -> HostRun {
    scalar(s)
}

#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn scalar(s: &[u8]) -> HostRun {
    let mut run = HostRun { len: 0, numeric: true, empty_label: false };
    let mut prev_dot = true;
    for &b in s {
        let c = escape::class(b);
        if c & escape::HOST == 0 {
            break;
        }
        let dot = b == b'.';
        run.empty_label |= dot && prev_dot;
        run.numeric &= c & escape::NUMERIC != 0;
        prev_dot = dot;
        run.len += 1;
    }
    run
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    /// The vector classification agrees with the class table on every octet, at every
    /// position of a chunk and across chunk boundaries.
    #[test]
    fn agrees_with_the_scalar_walk() {
        let samples: &[&[u8]] = &[
            b"",
            b".",
            b"a",
            b"edge.biloxi.example.com;lr",
            b"core.biloxi.example.com:5060;transport=udp",
            b"192.0.2.256",
            b"1.2.3.4.5.6.7.8.9.10.11.12.13.14",
            b"a..b",
            b"abcdefghijklmno.",
            b"abcdefghijklmnop.q",
            b"abcdefghijklmno..q",
            b"abcdefghijklmnop",
            b"_sip._udp.example.com",
            b"UPPER-case.Example.COM",
            b"host\xc3\xa9.example.com",
            b"host\x00.x",
            b"a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y.z.0123456789",
        ];
        for s in samples {
            assert_eq!(host_run(s), scalar(s), "{:?}", String::from_utf8_lossy(s));
        }
        for b in 0..=255u8 {
            for at in 0..20 {
                let mut v = vec![b'a'; 20];
                v[at] = b;
                assert_eq!(host_run(&v), scalar(&v), "octet {b:#x} at {at}");
                v[at.saturating_sub(1)] = b'.';
                assert_eq!(host_run(&v), scalar(&v), "octet {b:#x} at {at} after '.'");
            }
        }
    }
}
