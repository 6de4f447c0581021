//! The parsers that were replaced by faster ones, kept as the reference: on random and
//! grammar-shaped input the new code must give exactly the old results.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing, clippy::string_slice)]

use std::net::Ipv4Addr;

use proptest::prelude::*;

use super::escape;
use super::host::ipv4_prefix;

/// `ipv4_prefix` before the one-pass rewrite: octet by octet, each re-reading its digits.
fn ipv4_prefix_reference(s: &[u8]) -> Option<(Ipv4Addr, usize)> {
    let digit = |i: usize| s.get(i).filter(|b| b.is_ascii_digit()).map(|b| u16::from(b - b'0'));
    let mut octets = [0u8; 4];
    let mut i = 0;
    for (n, slot) in octets.iter_mut().enumerate() {
        if n > 0 {
            if s.get(i) != Some(&b'.') {
                return None;
            }
            i += 1;
        }
        let mut value = digit(i)?;
        i += 1;
        for _ in 0..2 {
            match digit(i) {
                Some(d) => value = value * 10 + d,
                None => break,
            }
            i += 1;
        }
        *slot = u8::try_from(value).ok()?;
    }
    Some((Ipv4Addr::from(octets), i))
}

/// Digits and dots mostly, so that most inputs come close to an address.
fn hostish() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(prop_oneof![8 => b'0'..=b'9', 4 => Just(b'.'), 1 => any::<u8>(), 1 => Just(b'a')], 0..20)
}

proptest! {
    #[test]
    fn ipv4_prefix_matches_the_reference(s in hostish()) {
        prop_assert_eq!(ipv4_prefix(&s), ipv4_prefix_reference(&s));
    }
}

#[test]
fn ipv4_prefix_edges() {
    for s in [
        &b"1.2.3.4"[..],
        b"255.255.255.255",
        b"256.1.1.1",
        b"1.2.3.256",
        b"1.2.3.4567",
        b"1.2.3.4.",
        b"1.2.3.",
        b"1..2.3",
        b"1234.1.1.1",
        b"001.002.003.004:5060",
        b"0.0.0.0",
        b"1.2.3",
        b"",
        b".1.2.3.4",
        b"9.9.9.9a",
        // Sixteen octets or more: read through the window.
        b"255.255.255.255:5060;x",
        b"127.0.0.1:19101;branch=z",
        b"1.2.3.4567890123456",
        b"1.22.333.4;..........",
        b"1.2.3.256789012345",
        b"12.34.56.78.9.10.11",
    ] {
        assert_eq!(ipv4_prefix(s), ipv4_prefix_reference(s), "{:?}", String::from_utf8_lossy(s));
    }
}

/// Component text: mostly letters, with escapes (valid and not) and reserved octets.
fn component() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            6 => proptest::sample::select(b"aAbBlLrR".to_vec()),
            2 => Just(b'%'),
            2 => proptest::sample::select(b"0123456789abcdefABCDEF".to_vec()),
            1 => proptest::sample::select(b";/?:@&=+$,%-_.!~*'()".to_vec()),
        ],
        0..10,
    )
    .prop_map(|v| String::from_utf8(v).unwrap())
}

proptest! {
    #[test]
    fn eq_escaped_matches_the_unit_walk(a in component(), b in component(), ignore_case in any::<bool>()) {
        prop_assert_eq!(escape::eq_escaped(&a, &b, ignore_case), escape::eq_escaped_units(&a, &b, ignore_case));
        prop_assert_eq!(escape::eq_escaped(&a, &a, ignore_case), escape::eq_escaped_units(&a, &a, ignore_case));
    }
}

/// The uri-parameter split before the one-pass rewrite.
fn params_reference(raw: &str) -> Vec<(&str, Option<&str>)> {
    let mut out = Vec::new();
    let mut rest = raw.strip_prefix(';');
    while let Some(r) = rest {
        let seg = match r.split_once(';') {
            Some((seg, more)) => {
                rest = Some(more);
                seg
            }
            None => {
                rest = None;
                r
            }
        };
        out.push(match seg.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (seg, None),
        });
    }
    out
}

proptest! {
    #[test]
    fn uri_params_match_the_reference(
        raw in proptest::collection::vec(
            prop_oneof![
                4 => proptest::sample::select(b"ablrtU".to_vec()),
                3 => proptest::sample::select(b";=".to_vec()),
                1 => proptest::sample::select(b"%41-.[]:+".to_vec()),
            ],
            0..24,
        )
    ) {
        let raw = String::from_utf8(raw).unwrap();
        let got: Vec<_> = super::sip::Params::new(&raw).collect();
        prop_assert_eq!(got, params_reference(&raw));
    }
}

proptest! {
    #[test]
    fn ascii_text_matches_utf8(s in proptest::collection::vec(prop_oneof![8 => 0x20u8..0x7f, 1 => any::<u8>()], 0..70)) {
        prop_assert_eq!(escape::ascii_text(&s), crate::scan::utf8(&s));
    }
}

#[test]
fn ascii_text_every_length_and_position() {
    for len in 0..40 {
        assert!(escape::ascii_text(&vec![b'a'; len]).is_ok());
        for at in 0..len {
            for bad in [0x80u8, 0xc3, 0xff] {
                let mut v = vec![b'a'; len];
                v[at] = bad;
                assert_eq!(escape::ascii_text(&v), crate::scan::utf8(&v), "{bad:#x} at {at} of {len}");
            }
        }
    }
}
