//! Deterministic property tests (no proptest dependency): random and mutated inputs
//! must never panic, and every successful parse must round-trip its text exactly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing, clippy::string_slice)]

use super::*;

/// xorshift64*: tiny, deterministic, good enough to spray bytes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Bytes that matter to the grammar, plus some that must be rejected.
const ALPHABET: &[u8] = b"sipSIPtel+-.:;@?&=%[]<>\"/ ,$_~!*'()#09aAfFgG\t\r\n\x00\x7f\xff\xc3\xa9";

const SEEDS: &[&str] = &[
    "sip:alice:secret@atlanta.com:5070;transport=tcp;lr?subject=hi&x=",
    "sips:bob@biloxi.com",
    "sip:[2001:db8::10]:5070;maddr=[::1]",
    "sip:[2001:db8:::192.0.2.1]",
    "sip:user;par=u%40example.net@example.com",
    "sip:sips%3Auser%40example.com@example.net",
    "sip:cal%6Cer@host5.example.net;%6C%72;n%61me=v%61lue%25%34%31",
    "sip:%00%00@example.com",
    "sip:user@example.com?Route=%3Csip:sip.example.com%3E",
    "sip:1_unusual.URI~(to-be!sure)&isn't+it$/crazy?,/;;*:&it+has=1,weird!*pas$wo~d_too.(doesn't-it)@example.com",
    "sip:192.0.2.1:5060;ttl=15;user=phone;method=INVITE",
    "tel:+1-201-555-0123;ext=12;phone-context=+1-201",
    "tel:7042;phone-context=example.com",
    "soap.beep://192.0.2.103:3002",
    "nobodyknowsthisscheme:totallyopaquecontent",
];

/// Every invariant we can state about one input.
fn check(input: &[u8]) {
    // Auxiliary entry points must not panic either.
    let _ = Host::parse(input);
    let _ = Host::parse_lenient(input);
    let _ = parse_host_port(input);
    let _ = percent_decode(input);

    let Ok(uri) = Uri::parse(input) else { return };
    assert_eq!(uri.as_str().as_bytes(), input);
    assert_eq!(uri.to_string().as_bytes(), input);
    assert!(input.len() <= MAX_URI_LEN);
    let scheme = uri.scheme();
    assert!(uri.as_str().starts_with(scheme));
    assert_eq!(input.get(scheme.len()), Some(&b':'));
    assert!(uri.equivalent(&uri), "not reflexive: {uri}");
    match &uri {
        Uri::Sip(u) => {
            for (n, _) in u.params() {
                assert!(u.param(n).is_some());
            }
            assert_eq!(u.headers().count() > 0, !u.headers_raw().is_empty());
            assert_eq!(u.params().count() > 0, !u.params_raw().is_empty());
            assert_eq!(u.user.is_some(), u.user_unescaped().is_some());
            assert_eq!(u.password.is_some(), u.password_unescaped().is_some());
            let _ = (u.ttl(), u.lr(), u.transport(), u.host.to_string());
            // Re-parsing the host text we produced must give the same host.
            let shown = u.host.to_string();
            let again = Host::parse(shown.as_bytes()).unwrap();
            assert!(again.eq_ignore_case(&u.host));
        }
        Uri::Tel(t) => {
            assert!(!t.number.is_empty());
            let _ = (t.phone_context(), t.params().count());
        }
        Uri::Other(o) => assert!(!o.rest.is_empty()),
    }
}

fn mutate(rng: &mut Rng, mut v: Vec<u8>) -> Vec<u8> {
    for _ in 0..=rng.below(4) {
        let pos = rng.below(v.len() + 1);
        match rng.below(6) {
            0 if pos < v.len() => {
                v.remove(pos);
            }
            1 => v.insert(pos, *rng.pick(ALPHABET)),
            2 if pos < v.len() => v[pos] = *rng.pick(ALPHABET),
            3 => v.truncate(pos),
            4 if pos < v.len() => {
                let end = (pos + rng.below(8)).min(v.len());
                let chunk = v[pos..end].to_vec();
                v.splice(pos..pos, chunk);
            }
            _ => v.insert(pos, rng.next() as u8),
        }
    }
    v
}

#[test]
fn random_bytes_never_panic_and_round_trip() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..4000 {
        // Give a good share of inputs a plausible scheme so the deep parsers run.
        const PREFIXES: [&[u8]; 4] = [b"sip:", b"tel:+", b"", b""];
        let prefix: &[u8] = PREFIXES[rng.below(PREFIXES.len())];
        let mut v = prefix.to_vec();
        let len = rng.below(48);
        v.extend((0..len).map(|_| *rng.pick(ALPHABET)));
        check(&v);
    }
}

#[test]
fn mutated_valid_uris_never_panic_and_round_trip() {
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    let mut parsed_ok = 0usize;
    let mut pool: Vec<Vec<u8>> = Vec::new();
    for _ in 0..20_000 {
        let seed = rng.pick(SEEDS).as_bytes().to_vec();
        let m = mutate(&mut rng, seed);
        check(&m);
        if Uri::parse(&m).is_ok() {
            parsed_ok += 1;
            if pool.len() < 300 {
                pool.push(m);
            }
        }
    }
    // The mutator must not be so destructive that nothing parses.
    assert!(parsed_ok > 1000, "only {parsed_ok} mutants parsed");
    // Equivalence is symmetric on any pair of valid URIs.
    for a in &pool {
        for b in pool.iter().take(60) {
            let (x, y) = (Uri::parse(a).unwrap(), Uri::parse(b).unwrap());
            assert_eq!(x.equivalent(&y), y.equivalent(&x), "{x} / {y}");
        }
    }
}

#[test]
fn seeds_parse() {
    for s in SEEDS {
        assert!(Uri::parse(s.as_bytes()).is_ok(), "{s}");
        check(s.as_bytes());
    }
}

#[test]
fn oversized_inputs() {
    let big = vec![b'a'; MAX_URI_LEN * 2];
    assert_eq!(Uri::parse(&big).unwrap_err().reason, "URI too long");
    check(&big);
    let mut host = b"sip:".to_vec();
    host.extend(std::iter::repeat_n(b'[', 5000));
    check(&host);
    let mut port = b"sip:h:".to_vec();
    port.extend(std::iter::repeat_n(b'9', 5000));
    check(&port);
    let mut v6 = b"sip:[".to_vec();
    v6.extend(std::iter::repeat_n(b':', 200));
    v6.push(b']');
    check(&v6);
}
