//! Byte searches over short runs (a Via value, a header line: tens of bytes). `memchr::memchr`'s
//! run-time dispatch goes through four calls before it compares a byte, which on such runs costs
//! more than the search (~270 instructions per header line under callgrind; a portable
//! word-at-a-time loop ~175); memchr's SSE2 finders, called directly (SSE2 is part of x86-64),
//! skip the dispatch. Elsewhere the portable memchr does the same job. (Byte by byte, the top
//! Via's `;` search cost the generator ~1,450 instructions per call, ~530 this way.)

/// The first `byte` in `s` at or after `from`.
pub fn find_byte(s: &[u8], from: usize, byte: u8) -> Option<usize> {
    let haystack = s.get(from..)?;
    #[cfg(target_arch = "x86_64")]
    let found = match memchr::arch::x86_64::sse2::memchr::One::new(byte) {
        Some(finder) => finder.find(haystack),
        None => memchr::memchr(byte, haystack),
    };
    #[cfg(not(target_arch = "x86_64"))]
    let found = memchr::memchr(byte, haystack);
    found.map(|at| from + at)
}

/// The first of `a` or `b` in `s` at or after `from`.
pub fn find_either(s: &[u8], from: usize, a: u8, b: u8) -> Option<usize> {
    let haystack = s.get(from..)?;
    #[cfg(target_arch = "x86_64")]
    let found = match memchr::arch::x86_64::sse2::memchr::Two::new(a, b) {
        Some(finder) => finder.find(haystack),
        None => memchr::memchr2(a, b, haystack),
    };
    #[cfg(not(target_arch = "x86_64"))]
    let found = memchr::memchr2(a, b, haystack);
    found.map(|at| from + at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_found_at_every_offset() {
        for len in 0..70 {
            for at in 0..len {
                let mut s = vec![b'a'; len];
                s[at] = b'\n';
                if at + 3 < len {
                    s[at + 3] = b':'; // a later one does not hide the first
                }
                for from in 0..=at {
                    assert_eq!(find_byte(&s, from, b'\n'), Some(at), "len {len} at {at} from {from}");
                    assert_eq!(find_either(&s, from, b':', b'\n'), Some(at));
                }
                assert_eq!(find_byte(&s, at + 1, b'\n'), None);
                assert_eq!(find_either(&s, at + 1, b':', b'\n'), (at + 3 < len).then_some(at + 3));
            }
            assert_eq!(find_byte(&vec![0x8a; len], 0, b'\n'), None, "high bytes are not LFs");
        }
        assert_eq!(find_byte(b"abc", 7, b'c'), None);
    }
}
