//! The word-at-a-time port and the vector read of the parameters (module `plain_tail`)
//! against their octet-by-octet loops.
#![allow(clippy::indexing_slicing)]

use super::plain_tail::{params_at, params_by_runs, port_at, port_by_digits};
use proptest::prelude::*;

/// Every text of up to 5 octets over digits, their neighbours (`/`, `:`) and octets that are
/// a digit with the high bit set, read from every place (and one past the end), in texts of
/// every length around the 8-octet word: the word read finds the port the loop finds.
#[test]
fn ports_read_as_the_digit_loop_reads_them() {
    const ALPHABET: [u8; 7] = [b'0', b'5', b'9', b'/', b':', 0xB5, b';'];
    let mut checked = 0;
    for len in 0..=5u32 {
        for code in 0..7usize.pow(len) {
            let mut tail = Vec::new();
            let mut c = code;
            for _ in 0..len {
                tail.push(ALPHABET[c % 7]);
                c /= 7;
            }
            for pad in [0usize, 1, 2, 5, 9, 12] {
                let mut s = b"sip:1.2.3.4:"[..pad].to_vec();
                s.extend_from_slice(&tail);
                for from in 0..=s.len() + 1 {
                    assert_eq!(port_at(&s, from), port_by_digits(&s, from), "{:?} from {from}", s);
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 100_000);
}

/// Texts of the parts that decide the parameters' grammar, read from every place: the vector
/// read accepts exactly what the runs accept.
#[test]
fn params_read_as_the_runs_read_them() {
    const PARTS: [&[u8]; 16] = [
        b";",
        b"=",
        b"a",
        b"transport",
        b"UDP",
        b"_",
        b"%41",
        b"\xc3\xa9",
        b"[",
        b":",
        b"@",
        b" ",
        b"lr",
        b"-",
        b".",
        b"?",
    ];
    // Every sequence of up to three parts after a 16-octet start, and after none.
    let mut checked = 0;
    let mut seqs: Vec<Vec<u8>> = vec![Vec::new()];
    for _ in 0..3 {
        let next: Vec<Vec<u8>> =
            seqs.iter().flat_map(|s| PARTS.iter().map(move |p| [s.as_slice(), p].concat())).collect();
        seqs.extend(next);
        seqs.sort();
        seqs.dedup();
    }
    for seq in &seqs {
        for start in [&b""[..], b"sip:127.0.0.1:50"] {
            let s = [start, seq.as_slice()].concat();
            for at in 0..=s.len() {
                assert_eq!(params_at(&s, at), params_by_runs(&s, at), "{:?} at {at}", String::from_utf8_lossy(&s));
                checked += 1;
            }
        }
    }
    assert!(checked > 50_000, "{checked}");
}

proptest! {
    /// Longer texts of digits and separators, every place: the port as the loop reads it.
    #[test]
    fn long_ports_read_as_the_digit_loop_reads_them(s in proptest::collection::vec(prop_oneof![
        Just(b'0'), Just(b'1'), Just(b'6'), Just(b'9'), Just(b';'), Just(b':'), any::<u8>()], 0..24)) {
        for from in 0..=s.len() {
            prop_assert_eq!(port_at(&s, from), port_by_digits(&s, from));
        }
    }

    /// Parameters of up to 48 octets of the parts above in any order, every place.
    #[test]
    fn long_params_read_as_the_runs_read_them(parts in proptest::collection::vec(prop_oneof![
        Just(&b";"[..]), Just(&b"="[..]), Just(&b"transport"[..]), Just(&b"udp"[..]), Just(&b"~"[..]),
        Just(&b"$"[..]), Just(&b"%"[..]), Just(&b"\x80"[..]), Just(&b"\""[..]), Just(&b"x"[..])], 0..16)) {
        let s = [&b"sip:127.0.0.1"[..], &parts.concat()].concat();
        for at in 0..=s.len() {
            prop_assert_eq!(params_at(&s, at), params_by_runs(&s, at));
        }
    }
}
